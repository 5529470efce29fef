/*
 * conv.h - the fused convolution that load-time fusion (runtime/fuse.c)
 * installs in place of convolution -> batch norm -> ReLU / hardtanh (no
 * registered operator: a program cannot name it), and what conv.c shares
 * with conv3d.c (private; implemented in conv.c).
 */
#ifndef PX_CONV_H
#define PX_CONV_H

#include "kernels/kernel.h"

/* Its arguments: aten::convolution.out's schema arguments (input, weight,
 * bias or None, stride, padding, dilation, transposed, output_padding,
 * groups), then the clamp's lower and upper bounds as doubles (-inf / +inf:
 * none), then the filter packed for the NHWC indirect GEMM (conv_nhwc.h) or
 * None, then the output (twice, as an out= kernel takes it). The output is
 * the float32 2-D convolution (weight and bias already holding a folded
 * batch norm; with a packed filter only the weight's sizes are read),
 * clamped to [lo, hi] with a NaN left NaN. */
#define PX_CONV_FUSED_SIG "TTtLLLBLIDDtT|T"
int px_conv_fused(px_ctx *ctx, px_value *const *args);

/* ---- shared by conv.c and conv3d.c ---- */

/* A convolution's channels, from its input and weight. */
typedef struct px_conv_channels {
  int64_t Cin, Cin_g, Cout, Cout_g;
} px_conv_channels;

/* Fills ch from input [N, Cin, ...] and weight ([Cout, Cin / groups, ...],
 * transposed: [Cin, Cout / groups, ...]) and checks them against groups and
 * the bias (None or [Cout]). Returns 0 or px_fail's status. */
int px_conv_check_channels(px_ctx *ctx, const px_tensor *in, const px_tensor *w,
                           const px_tensor *bias, bool transposed, int64_t groups,
                           px_conv_channels *ch);

/* One spatial dim's output size; fails (naming why) when the dilated kernel
 * does not fit the padded input or a transposed size is not positive. */
int px_conv_out_size(px_ctx *ctx, int64_t in, int64_t k, int64_t st, int64_t pd, int64_t dl,
                     int64_t op, bool transposed, int64_t *out);

/* A convolution's operands in a working type (for the types the float32
 * loops do not take): input, weight and bias (NULL without one) converted,
 * and room for the output. */
typedef struct px_conv_widened {
  void *in, *w, *bias, *out;
} px_conv_widened;

/* Fills `o` with scratch copies of in, w and bias converted to `wide`
 * (PX_F32, PX_F64 or PX_I64) and an output buffer of out's size; returns 0,
 * or PYEXEC_ERR_EXECUTION when scratch memory runs out. */
int px_conv_widen(px_ctx *ctx, const px_tensor *in, const px_tensor *w, const px_tensor *bias,
                  const px_tensor *out, int wide, px_conv_widened *o);

/* C (M x N, row-major, M output channels) = A @ B + bias[row], clamped to
 * [lo, hi] (-inf / +inf: no clamp): B a row-major K x N matrix (an im2col
 * matrix, or a 1x1 convolution's input itself). */
int px_conv_gemm_rows(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, const float *A,
                      const float *B, const float *bias, float lo, float hi, float *C);

/* aten::convolution.out on a 5-D input (conv3d.c), its stride, padding,
 * dilation and output padding already checked (3 each). */
int px_convolution3d(px_ctx *ctx, px_tensor *in, px_tensor *w, px_tensor *bias, px_tensor *out,
                     bool transposed, int64_t groups, const int64_t *st, const int64_t *pd,
                     const int64_t *dl, const int64_t *op);

#endif /* PX_CONV_H */
