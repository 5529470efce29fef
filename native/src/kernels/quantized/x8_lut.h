/*
 * x8_lut.h - a byte table applied to a run of bytes: y[i] = table[x[i]]
 * (private; x8_lut.c). The XNNPACK backend maps an 8-bit quantized value
 * through an elementwise float chain with it, once the chain's 256 results
 * are tabulated.
 *
 * Paths, each giving the same bytes: AVX-512 VBMI (two VPERMI2B lookups of
 * 128 entries per 64 bytes), AVX2 (sixteen VPSHUFB lookups of 16 entries
 * per 32 bytes), NEON (four TBL lookups of 64 entries per 16 bytes), C.
 */
#ifndef PX_X8_LUT_H
#define PX_X8_LUT_H

#include <stdint.h>

enum { PX_LUT_AUTO = -1, PX_LUT_C = 0, PX_LUT_AVX2 = 1, PX_LUT_VBMI = 2, PX_LUT_NEON = 3, PX_LUT_NPATHS = 4 };

/* y[i] = table[x[i]] for i < n, on the best path this CPU has. x and y may
 * be the same run. */
void px_x8_lut(const uint8_t *x, int64_t n, const uint8_t table[256], uint8_t *y);

/* The same on `path`, which must be one px_x8_lut_has reports. */
void px_x8_lut_on(int path, const uint8_t *x, int64_t n, const uint8_t table[256], uint8_t *y);

/* Whether this build and CPU have `path`. */
int px_x8_lut_has(int path);

#endif /* PX_X8_LUT_H */
