/*
 * dwconv.h - depthwise convolution on NHWC float32 (private; dwconv.c).
 */
#ifndef PX_DWCONV_H
#define PX_DWCONV_H

#include "kernels/kernel.h"

/* One depthwise convolution: input [N, H, W, C] (NHWC), each input channel
 * c producing output channels c*Mul .. c*Mul + Mul - 1 of [N, OH, OW, C*Mul]
 * from the filter w [KH*KW][C*Mul] (tap-major, channel fastest) and bias
 * [C*Mul] (not NULL), the sum clamped to [lo, hi] (a NaN stays NaN; -inf /
 * +inf: no clamp). Padding is zeros: pt rows above, pl columns left (the
 * bottom and right padding follow from OH and OW). post (NULL: none) runs
 * in place on each output row once it is clamped, while it is in cache (a
 * fused elementwise activation, gemm.h's post). */
typedef struct px_dwconv {
  int64_t N, H, W, C, Mul;
  int64_t KH, KW, sh, sw, dh, dw, pt, pl;
  int64_t OH, OW;
  const float *w, *bias;
  float lo, hi;
  void (*post)(int64_t n, float *y);
} px_dwconv;

/* Returns 0, or px_fail's status when scratch memory runs out. */
int px_dwconv_nhwc(px_ctx *ctx, const px_dwconv *d, const float *x, float *y);

/* The same engine one output row at a time, for a caller that makes the
 * input rows itself (a fused chain of nodes that computes them into a small
 * buffer just before they are needed). A workspace of px_dwconv_row_bytes(d)
 * bytes (64-byte aligned, one per thread) is set up once per call by
 * px_dwconv_row_init; px_dwconv_row then writes output row oh of an image
 * into orow (OW * C * Mul floats), clamped, post run on it, from rows[ki]
 * (ki < KH): input row oh * sh - pt + ki * dh of that image (its W * C
 * floats, channel 0 of its first pixel), or NULL where that row is in the
 * padding. px_dwconv_nhwc is this loop over every row, so both give the same
 * bits. N and H are not read. */
size_t px_dwconv_row_bytes(const px_dwconv *d);
void px_dwconv_row_init(const px_dwconv *d, void *ws);
void px_dwconv_row(const px_dwconv *d, void *ws, const float *const *rows, float *orow);

#endif /* PX_DWCONV_H */
