/*
 * conv.h - the fused convolution that load-time fusion (runtime/fuse.c)
 * installs in place of convolution -> batch norm -> ReLU / hardtanh
 * (private; implemented in conv.c). It is no registered operator: a
 * program cannot name it.
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

#endif /* PX_CONV_H */
