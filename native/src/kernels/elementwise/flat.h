/*
 * flat.h - float32 elementwise loops over plain arrays (private; flat.c),
 * for callers that have no px_tensor to hand: the XNNPACK backend's
 * pointwise and binary nodes.
 *
 * They are the portable kernels' loops (ew.h's UN / BIN generators, the
 * same vectorising exp / tanh / erf, AVX2 clones picked at run time), so a
 * delegated node computes what aten's sigmoid.out, tanh.out, exp.out or
 * gelu.out compute on the same values, as fast. Input and output may be the
 * same array; otherwise they must not overlap.
 */
#ifndef PX_EW_FLAT_H
#define PX_EW_FLAT_H

#include <stdbool.h>
#include <stdint.h>

/* y[k] = f(x[k]) for k < n. gelu is the exact (erf) form. */
void px_f32_sigmoid(int64_t n, const float *x, float *y);
void px_f32_tanh(int64_t n, const float *x, float *y);
void px_f32_exp(int64_t n, const float *x, float *y);
void px_f32_gelu(int64_t n, const float *x, float *y);

/* y[k] = y[k] * sigmoid(y[k]) for k < n, in place: px_f32_sigmoid's value
 * times its input, each rounded, so the bits are those of a Sigmoid and the
 * Multiply of its input by it (the exporter's SiLU), run as one pass. A
 * product's epilogue (gemm.h's post) while its tile is in cache. */
void px_f32_mul_sigmoid_inplace(int64_t n, float *y);

/* The same two for XNNPACK float32 graphs (sigmoid_fast.c): fused
 * multiply-adds and a reciprocal estimate with a Newton step in place of
 * the division, as XNNPACK computes it, within 3 ulp of the exact value
 * (a rounding of their own: float16 / bfloat16 graphs and aten's sigmoid
 * keep the two above); the SiLU's product is the sigmoid's value times its
 * input, each rounded, as a node of each would give. Machines without
 * AVX-512 run the two above. */
void px_f32_sigmoid_fast(int64_t n, const float *x, float *y);
void px_f32_mul_sigmoid_fast_inplace(int64_t n, float *y);

/* The binary operations. minimum / maximum propagate NaN. */
enum { PX_F32_ADD, PX_F32_SUB, PX_F32_MUL, PX_F32_DIV, PX_F32_MIN, PX_F32_MAX };

/* o[k] = a[k * sa] op b[k * sb] for k < n (sa, sb in elements; 0 repeats
 * one value, and 1 / 0 pairs take the vectorised loops), then clamped to
 * [lo, hi] when `clamp` (NaN stays NaN). */
void px_f32_binary(int op, int64_t n, const float *a, int64_t sa, const float *b, int64_t sb, float *o,
                   bool clamp, float lo, float hi);

#endif /* PX_EW_FLAT_H */
