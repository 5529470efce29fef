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

#endif /* PX_DWCONV_H */
