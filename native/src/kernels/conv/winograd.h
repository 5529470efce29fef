/*
 * winograd.h - float32 3x3 stride-1 convolution by Winograd's F(2x2, 3x3)
 * (private; winograd.c), on NHWC tensors.
 *
 * The filter is transformed once, at load (U = G g G^T for every output /
 * input channel pair, in float64, then rounded: 16 matrices of Cin x Cout,
 * each prepacked for the GEMM engine). A run cuts the output into 2x2 tiles;
 * each tile's 4x4 input patch is transformed (V = B^T d B, additions only),
 * the 16 products V[pos] @ U[pos] go through the GEMM engine, and the output
 * transform (A^T m A, additions only) adds the bias and applies the clamp.
 * 16 products per 2x2 tile instead of 36: 2.25x fewer multiplications.
 * F(4x4, 3x3) (36 products per 4x4 tile instead of 144) was measured too: its
 * error against float64 was 7 to 11 times the direct path's on 16- and
 * 32-channel layers, outside the rule below, so F(2x2, 3x3) is used.
 */
#ifndef PX_WINOGRAD_H
#define PX_WINOGRAD_H

#include "kernels/kernel.h"

/* Whether a convolution takes this path: Winograd enabled
 * (PYEXEC_CONV_WINOGRAD, read once: "0" turns it off), one group, a 3x3
 * kernel, stride 1, dilation 1, and at least 16 input and 16 output
 * channels. With fewer input channels each output sums few products and the
 * transforms' rounding is a larger share of the error than in the direct
 * sum (measured against float64 in tests/delegates/test_conv_winograd.py on
 * XNNPACK and portable programs: at 16 channels and more the error
 * stays within twice the direct path's). */
bool px_wino_enabled(void);
bool px_wino_applicable(int64_t G, int64_t Cin, int64_t Cout, int64_t KH, int64_t KW, int64_t sh,
                        int64_t sw, int64_t dh, int64_t dw);

/* Bytes of the transformed, packed filter (a multiple of 64). */
size_t px_wino_packed_size(int64_t Cin, int64_t Cout);

/* Transforms and packs the 3x3 filter whose tap (ki, kj) of output channel
 * oc and input channel ic is w[oc * so + ic * si + (ki * 3 + kj) * st] into
 * dst (px_wino_packed_size bytes, 64-byte aligned). Returns false when the
 * temporary it needs cannot be allocated. */
bool px_wino_pack(int64_t Cin, int64_t Cout, const float *w, int64_t so, int64_t si, int64_t st,
                  float *dst);

/* The convolution's geometry: NHWC input [N, H, W, Cin] (pixel stride Cin),
 * output [N, OH, OW, Cout] (pixel stride Cout), top / left padding. */
typedef struct px_wino_geom {
  int64_t N, H, W, Cin, Cout, OH, OW, pt, pl;
} px_wino_geom;

/* y = x convolved with the packed filter, plus bias (NULL: none), clamped
 * to [lo, hi] (-inf / +inf: no clamp; a NaN stays NaN). The same bits at
 * every thread count. Returns 0, or px_fail's status. */
int px_wino_conv_nhwc(px_ctx *ctx, const px_wino_geom *g, const float *x, const float *packed,
                      const float *bias, float lo, float hi, float *y);

#endif /* PX_WINOGRAD_H */
