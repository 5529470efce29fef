/*
 * qs8_binary.h - XNNPACK's qint8 add, subtract and multiply over a run of
 * elements (its qs8 vadd / vmul kernels; private, qs8_binary.c), for the
 * XNNPACK backend's binary nodes:
 *   add / subtract: v = (bias + a * ma + b * mb) >> shift     (int32, arithmetic shift;
 *                   the backend folds the zero points and the rounding into bias)
 *   multiply:       v = round(clamp((float)((a - azp) * (b - bzp)) * scale, lo, hi))
 *                   (clamp as max with lo then min with hi, rounding half to even)
 *   out = clamp(v, lo, hi) + ozp
 * The same integers and floats on every path: AVX-512 or AVX2 where the
 * CPU has it (the loops compiled for it), else the generic build's.
 */
#ifndef PX_QS8_BINARY_H
#define PX_QS8_BINARY_H

#include <stdint.h>

typedef struct {
  int32_t bias, ma, mb, shift; /* add / subtract */
  int32_t azp, bzp;            /* multiply */
  float scale;
  int32_t lo, hi, ozp; /* bounds less the output zero point, output zero point */
} px_qs8_binop;

void px_qs8_addsub_row(const px_qs8_binop *p, const int8_t *a, const int8_t *b, int8_t *o, int64_t n);
void px_qs8_mul_row(const px_qs8_binop *p, const int8_t *a, const int8_t *b, int8_t *o, int64_t n);

#endif /* PX_QS8_BINARY_H */
