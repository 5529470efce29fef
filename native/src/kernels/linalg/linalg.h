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
/* float16 / bfloat16 (mat1, mat2, bias and out all of the one type): the
 * room is px_linear_packed16_size(N, K, has a bias) bytes (mat2 as
 * px_gemm_h16_prepack_b's 16-bit panels, then the bias widened to float32),
 * written by the first call whatever its row count. */
size_t px_linear_packed16_size(int64_t N, int64_t K, bool bias);
#define PX_LINEAR_PACKED_SIG "@tTTTIT|T"
#define PX_LINEAR_PACK_MIN_ROWS 8
int px_linear_packed(px_ctx *ctx, px_value *const *args);

/* out (M x N, row-major) = alpha * A @ B + beta * bias for float16 or
 * bfloat16 (dtype): A row-major M x K, B K x N with element (k, j) at
 * B[k * rsb + j * csb], bias (NULL: none) with element (i, j) at
 * bias[i * bias_rs + j * bias_cs], all of dtype. A is widened to float32,
 * B widened as the GEMM engine packs it, the products summed in float32,
 * beta * bias added in float32, and each element rounded once. */
int px_matmul16(px_ctx *ctx, int dtype, int64_t M, int64_t N, int64_t K, const void *A, const void *B,
                int64_t rsb, int64_t csb, const void *bias, int64_t bias_rs, int64_t bias_cs, float alpha,
                float beta, void *out);

#endif /* PX_LINALG_H */
