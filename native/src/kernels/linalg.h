/*
 * linalg.h - the float32 product with a filter packed at load that
 * load-time packing (runtime/fuse.c) installs in place of aten::addmm.out /
 * aten::mm.out when mat2 is a constant (private; implemented in linalg.c).
 * It is no registered operator: a program cannot name it.
 */
#ifndef PX_LINALG_H
#define PX_LINALG_H

#include "kernels/kernel.h"

/* Its arguments: the bias (a float32 [N] row added to every output row, or
 * None), mat1 [M, K], mat2 [K, N] (only its sizes are read), mat2 packed by
 * px_gemm_f32_prepack_b (1-D float32, px_gemm_f32_prepack_size bytes or
 * more), then the output (twice, as an out= kernel takes it): out = mat1 @
 * mat2 + bias, the bias added to each tile of the product while it is in
 * cache. */
#define PX_LINEAR_PACKED_SIG "@tTTTT|T"
int px_linear_packed(px_ctx *ctx, px_value *const *args);

#endif /* PX_LINALG_H */
