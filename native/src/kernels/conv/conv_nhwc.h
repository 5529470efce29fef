/*
 * conv_nhwc.h - a portable (NCHW) float32 2-D convolution run through the
 * GEMM engine's indirect NHWC convolution (private; conv_nhwc.c).
 *
 * Where the engine has an indirect micro-kernel (px_gemm_f32_conv_available:
 * AVX-512 machines), a convolution whose weights were packed once, at load
 * (px_conv_nhwc_pack, into px_conv_nhwc_packed_size bytes), runs as: the
 * input transposed to NHWC, every output pixel's taps read in place by the
 * indirect GEMM with bias and clamp applied in registers, the NHWC result
 * transposed back. The two transposes are passes over the input and output;
 * the im2col matrix the NCHW path packs on every call (K floats per output
 * pixel) is never built. Results are the same sums as the NCHW path's in a
 * different order of additions (within float rounding of it).
 */
#ifndef PX_CONV_NHWC_H
#define PX_CONV_NHWC_H

#include "kernels/kernel.h"

typedef struct px_conv_nhwc_geom {
  int64_t N, Cin, H, W;     /* input, NCHW */
  int64_t Cout, KH, KW;     /* output channels, kernel */
  int64_t OH, OW;           /* output spatial size */
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t G;                /* groups */
} px_conv_nhwc_geom;

/* Bytes of packed weights for the geometry's filter (every group). */
size_t px_conv_nhwc_packed_size(const px_conv_nhwc_geom *g);

/* Packs the filter w ([Cout, Cin / G, KH, KW], contiguous) into dst
 * (px_conv_nhwc_packed_size bytes, 64-byte aligned). Returns false when the
 * temporary it needs cannot be allocated. */
bool px_conv_nhwc_pack(const px_conv_nhwc_geom *g, const float *w, float *dst);

/* y (NCHW, [N, Cout, OH, OW]) = the convolution of x (NCHW) with the packed
 * filter, plus bias (NULL: none), clamped to [lo, hi] (-inf / +inf: no
 * clamp; a NaN stays NaN). Returns 0, or px_fail's status. */
int px_conv_nhwc(px_ctx *ctx, const px_conv_nhwc_geom *g, const float *x, const float *packed,
                 const float *bias, float lo, float hi, float *y);

/* The depthwise case (groups = Cin, Cout = Cin * multiplier; conv.c sends
 * 3x3, 5x5 and 7x7 filters of multiplier 1 on planes up to 64x64), through the
 * NHWC depthwise engine (dwconv.c) that the XNNPACK backend runs: w is the
 * NCHW filter [Cout, 1, KH, KW] (reordered tap-major on each call: KH*KW*Cout
 * floats), the rest as px_conv_nhwc. Any machine: the engine has portable,
 * AVX2 and AVX-512 paths. NCHW per-plane loops ran small planes (7x7 with
 * 960 channels) at a fraction of this speed. */
int px_conv_nhwc_depthwise(px_ctx *ctx, const px_conv_nhwc_geom *g, const float *x, const float *w,
                           const float *bias, float lo, float hi, float *y);

#endif /* PX_CONV_NHWC_H */
