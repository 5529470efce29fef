/*
 * qgemm.h - integer matrix products for quantized programs (private):
 * int8 activations times int8 or 4-bit weights with an int32 accumulator.
 * Used by the XNNPACK backend's quantized FullyConnected / convolution nodes
 * and by the portable quantized kernels. Weights are packed once, at load,
 * into px_qweights (4-bit weights stay 4-bit); the product picks the best
 * kernel this CPU has (AVX-512 VNNI, AVX2, NEON dot product, portable C) at
 * run time, and every path computes the same int32 sums, so results do not
 * depend on the CPU beyond the final float rounding noted below.
 */
#ifndef PX_QGEMM_H
#define PX_QGEMM_H

#include "kernels/kernel.h"

typedef struct px_qweights px_qweights;

/* How the weight bytes are laid out, as XNNPACK's payload has them. */
typedef struct px_qweights_desc {
  int bits;              /* 8 or 4 */
  int64_t N, K;          /* output channels, depth */
  const void *data;      /* N rows; row n starts at data + n * row_bytes */
  int64_t row_bytes;     /* K for 8-bit; (K + 1) / 2 for 4-bit */
  int nibble_high_first; /* 4-bit: 1 when element 2j is the high nibble of byte j */
  int32_t zero_point;    /* subtracted from every stored weight (8 for XNNPACK's
                            unsigned qc4w/qb4w nibbles, 0 for int8) */
  int64_t block;         /* 0: one scale per output channel; else K-block size
                            (block divides K): scales[n * (K / block) + g] */
  const float *scales;   /* weight scales, N or N * (K / block) floats */
  const float *bias;     /* N floats or NULL (float path) */
} px_qweights_desc;

/* Packs the weights (copying what the kernels need; desc's pointers need not
 * outlive the call). Returns NULL with px_error's message (core/error.h) on a bad
 * description (bits, block not dividing K, a non-finite or non-positive
 * scale) or out of memory. */
px_qweights *px_qweights_pack(const px_qweights_desc *desc);
void px_qweights_free(px_qweights *w);
size_t px_qweights_bytes(const px_qweights *w); /* memory held, for reports */

/* XNNPACK's dynamic per-row quantization ("qd8", the reference's part A10):
 * row m of the M x K float matrix x (row stride ldx floats) becomes int8
 * q[m * K + k] with zero point zp[m] and scale scale[m]. NaN is left out of
 * a row's range and quantizes to -128. */
void px_quantize_qd8(const float *x, int64_t M, int64_t K, int64_t ldx, int8_t *q, int32_t *zp,
                     float *scale);

/* Dynamic-quantized product, float out:
 *   out[m, n] = clamp(a_scale[m] * wscale(n, .) * sum_k (a[m, k] - a_zp[m]) * (w[n, k] - wzp)
 *                     + bias[n], lo, hi)
 * with the per-block form for block > 0 (the reference's A10 formulas, in
 * the same order). In float32, with S the exact int32 sum (of a block):
 *   per channel: y = ((float)S * a_scale[m]) * wscale[n]
 *   blockwise:   y = (sum over blocks g, in order, of (float)S_g * wscale[n, g]) * a_scale[m]
 * then y + bias[n], then y < lo -> lo, y > hi -> hi (NaN kept); separate
 * multiplies and adds, the same on every path. a is M x K int8 with row
 * stride lda; out has row stride ldc floats. Returns 0 or px_fail's status. */
int px_qgemm_qd8_f32(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda,
                     const int32_t *a_zp, const float *a_scale, float *out, int64_t ldc, float lo,
                     float hi);

/* Static int8 product with requantization (XNNPACK's qs8 convolution and
 * fully-connected operators, 8-bit per-channel or per-tensor weights):
 *   acc = sum_k (a[m, k] - a_zp) * w[n, k] + bias[n]               (int32)
 *   out[m, n] = lrintf(clamp(acc * requant[n], qmin - out_zp, qmax - out_zp)) + out_zp
 * (acc converted to float, then multiplied; lrintf rounds half to even).
 * bias: N int32 or NULL; requant: N floats. Blockwise weights are refused.
 * Returns 0 or px_fail's status. */
int px_qgemm_qs8(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda,
                 int32_t a_zp, const int32_t *bias, const float *requant, int32_t out_zp,
                 int32_t qmin, int32_t qmax, int8_t *out, int64_t ldc);

/* Rows already laid out as the micro-kernels read them: K rounded up to
 * the packing's depth unit. A caller that builds its rows anyway (a
 * convolution's gather) writes each row's bytes [K, px_qgemm_padded_depth(w))
 * as zeros and calls the _padded forms (lda at least that), so that the
 * product reads them in place instead of copying every row to pad it. For
 * weights without blockwise scales. */
int64_t px_qgemm_padded_depth(const px_qweights *w);
int px_qgemm_qd8_f32_padded(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda,
                            const int32_t *a_zp, const float *a_scale, float *out, int64_t ldc, float lo,
                            float hi);
int px_qgemm_qs8_padded(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda,
                        int32_t a_zp, const int32_t *bias, const float *requant, int32_t out_zp,
                        int32_t qmin, int32_t qmax, int8_t *out, int64_t ldc);

/* The static int8 product of px_qgemm_qs8 over indirect rows, for an
 * implicit convolution that gathers nothing: row m's K values are `taps`
 * runs of K / taps bytes, run t at ind[m * taps + t] (an input pixel's
 * channels, or a run of a_zp bytes for a tap outside the input), and
 * row_sums[m] is the sum of row m's K int8 values (int32). With list
 * (not NULL), each row has only nlist runs, run t for the weights' tap
 * list[t] (the other taps left out of the product: for a tap every row
 * reads as a_zp bytes, the caller adds a_zp times that tap's weights to the
 * bias, and row_sums leave it out). Only where px_qgemm_qs8_indirect_ok says
 * so (the AVX-512 VNNI path, 8-bit weights without blockwise scales or
 * depth padding, runs of a multiple of 8 bytes); the results are
 * px_qgemm_qs8's. Returns 0 or px_fail's status. */
bool px_qgemm_qs8_indirect_ok(const px_qweights *w, int64_t taps);
int px_qgemm_qs8_indirect(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *const *ind, int64_t taps,
                          int64_t nlist, const int32_t *list, const int32_t *row_sums, int32_t a_zp,
                          const int32_t *bias, const float *requant, int32_t out_zp, int32_t qmin, int32_t qmax,
                          int8_t *out, int64_t ldc);
/* out[i] = the sum of the n int8 values at p + i * stride, i < count
 * (int32), vectorised where the CPU allows. */
void px_qgemm_sums_s8(const int8_t *p, int64_t count, int64_t n, int64_t stride, int32_t *out);

/* The micro-kernels in use: the best this CPU has unless a test or benchmark
 * picks another (every path gives the same results). px_qgemm_use_path
 * returns 0 and switches when this build and CPU have `path` (AUTO: the best
 * again), -1 otherwise. Not for use while products run on other threads. */
enum {
  PX_QGEMM_AUTO = 0,
  PX_QGEMM_PORTABLE,
  PX_QGEMM_AVX2,        /* x86-64 AVX2 */
  PX_QGEMM_AVX512_VNNI, /* x86-64 AVX-512 BW, VL + VNNI (vpdpbusd) */
  PX_QGEMM_NEON,        /* aarch64 NEON (widening multiply, pairwise add) */
  PX_QGEMM_NEON_DOT     /* aarch64 NEON dot product (sdot) */
};
int px_qgemm_use_path(int path);
int px_qgemm_path(void);
const char *px_qgemm_path_name(int path);

#endif /* PX_QGEMM_H */
