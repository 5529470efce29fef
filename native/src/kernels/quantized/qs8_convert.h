/*
 * qs8_convert.h - XNNPACK's conversions between float32 and qint8 over a
 * run of elements (its qs8 vcvt kernels; private, qs8_convert.c), for the
 * XNNPACK backend's Convert nodes:
 *   px_qs8_from_f32: q = round(clamp(x * inv_scale, lo, hi)) + zp
 *       (clamp as max with lo, then min with hi: NaN becomes lo; rounding
 *       half to even; lo and hi are -128 - zp and 127 - zp)
 *   px_f32_from_qs8: y = (float)(q - zp) * scale
 * The same floats on every path: AVX2 where the CPU has it, else C.
 */
#ifndef PX_QS8_CONVERT_H
#define PX_QS8_CONVERT_H

#include <stdint.h>

void px_qs8_from_f32(const float *x, int64_t n, float inv_scale, int32_t zp, int8_t *q);
void px_f32_from_qs8(const int8_t *q, int64_t n, int32_t zp, float scale, float *y);

#endif /* PX_QS8_CONVERT_H */
