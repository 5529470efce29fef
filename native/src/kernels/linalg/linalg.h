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
 * None), mat1 [M, K], mat2 [K, N] (the weight as the program holds it),
 * room for mat2 packed by px_gemm_f32_prepack_b (1-D float32,
 * px_gemm_f32_prepack_size bytes or more, allocated at load but not yet
 * written: untouched pages cost no memory), an Int that records whether it
 * is packed yet, then the output (twice, as an out= kernel takes it): out =
 * mat1 @ mat2 + bias.
 *
 * The weight is packed by the first call with PX_LINEAR_PACK_MIN_ROWS rows
 * or more; from then on every call reads the packed copy, the bias added to
 * each tile while it is in cache. Until then (a decode loop of one row
 * products) calls read mat2 where it is mapped, as the general kernel does,
 * and nothing is copied. */
#define PX_LINEAR_PACKED_SIG "@tTTTIT|T"
#define PX_LINEAR_PACK_MIN_ROWS 8
int px_linear_packed(px_ctx *ctx, px_value *const *args);

#endif /* PX_LINALG_H */
