/*
 * gemm_x86.h - the x86-64 pieces of the float32 GEMM engine (private): the
 * AVX-512 8 x 32 micro-kernel (with the bias / clamp epilogue in registers)
 * and the indirect-convolution block that feeds the same kernel from tap
 * pointers; the AVX2 / FMA 6 x 16 micro-kernel, transposed-B packing and
 * tile epilogue. gemm.c selects them at run time from the CPU's features; on
 * other targets nothing here is declared and gemm_x86.c compiles to nothing.
 */
#ifndef PX_GEMM_X86_H
#define PX_GEMM_X86_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/tile.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(PX_PORTABLE_KERNELS)
#define PX_AVX512_KERNELS 1

/* The epilogue a micro-kernel applies to its tile in registers, on the last
 * depth block: bias (per column, or per row when rows), then the clamp. The
 * same arithmetic, in the same order, as gemm.c's tile epilogue after a
 * store, so results are bit-identical whichever does it. bias points at the
 * tile's first column's (rows: first row's) bias, or is NULL. */
typedef struct px_tile_ep {
  const float *bias;
  bool rows, clamp;
  float lo, hi;
} px_tile_ep;

/* gemm.c's micro-kernel contract (see its ukr_fn): the top-left mr x nr
 * part (mr <= 8, nr <= 32) of alpha * A @ B + beta * C over depth kc, with
 * element (i, p) of A at a[i * rsa + p * csa] and b one packed kc x 32
 * panel; _ep then applies ep (NULL: none) before the store. */
/* One row a of A times a column-major B (a linear layer's weight W[n, k],
 * column j at B + j * csb, read in place): c[j] += alpha * a . B[:, j] for
 * j < N, four weight rows streamed at once (see gemm_x86.c). */
void px_gemv_dots_avx512(int64_t N, int64_t K, float alpha, const float *a, const float *B,
                         int64_t csb, float *c);

void px_ukr_f32_8x32_avx512(int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
                            float *c, int64_t ldc, float alpha, float beta, int mr, int nr);
void px_ukr_f32_8x32_avx512_ep(int64_t kc, const float *a, int64_t rsa, int64_t csa,
                               const float *b, float *c, int64_t ldc, float alpha, float beta,
                               int mr, int nr, const px_tile_ep *ep);

/* The 8 x 32 micro-kernel (with its epilogue) on a 16-bit panel of B: b
 * holds kc x 32 float16 values (bf16: bfloat16), row stride 32, widened to
 * float32 in registers; the same results as px_ukr_f32_8x32_avx512_ep on
 * the widened panel. */
void px_ukr_h16_8x32_avx512_ep(int64_t kc, const float *a, int64_t rsa, int64_t csa, const uint16_t *b,
                               bool bf16, float *c, int64_t ldc, float alpha, float beta, int mr, int nr,
                               const px_tile_ep *ep);

/* One row of A times columns [0, n) of one depth block of prepacked B
 * (panels of kc x 32 at bp, the last one zero-padded): c[j] = alpha * sum
 * (+ c[j] when beta is 1), then ep (its bias at column 0, or the row's
 * bias when rows). Every column computed as the micro-kernel computes a
 * one-row tile, several panels at a time. */
void px_gemv_f32_avx512(int64_t kc, const float *a, const float *bp, int64_t n, float *c, float alpha, float beta,
                        const px_tile_ep *ep);

/* One block of an indirect convolution (px_gemm_f32_conv): output pixels
 * (product rows) [ic, ic + mc) x columns [j0, j1) (j0 a multiple of 32) of
 * depth block [pc, pc + kc), B's panels for those columns at bp; zeros holds
 * cv->Cg zeros for taps in the padding; C has row stride ldc; beta 0 writes
 * C, 1 adds to it. ep (NULL: none) is applied on each tile, its bias the
 * product's column 0 (rows: row 0) bias. */
void px_gemm_conv_block_avx512(const px_gemm_conv *cv, const float *zeros, int64_t ic, int64_t mc,
                               int64_t pc, int64_t kc, int64_t j0, int64_t j1, const float *bp,
                               float *C, int64_t ldc, float beta, const px_tile_ep *ep);

/* AVX2 / FMA (gemm.c's ukr_fn contract for a 6 x 16 tile; full nr-wide
 * panels of a column-major B, returning the columns packed; the tile
 * epilogue of a 16-wide tile, others through px_gemm_tile_epilogue). */
void px_ukr_f32_6x16_avx2(int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b, float *c,
                          int64_t ldc, float alpha, float beta, int mr, int nr);
/* The 6 x 16 kernel on a 16-bit panel of B (kc x 16 float16 values, bf16:
 * bfloat16, row stride 16) widened in registers: the same results as
 * px_ukr_f32_6x16_avx2 on the widened panel (F16C). */
void px_ukr_h16_6x16_avx2(int64_t kc, const float *a, int64_t rsa, int64_t csa, const uint16_t *b, bool bf16,
                          float *c, int64_t ldc, float alpha, float beta, int mr, int nr);
int64_t px_pack_b_trans_avx2(const float *B, int64_t csb, int64_t kc, int64_t nc, int nr, float *pb);
void px_gemm_tile_epilogue_avx2(float *c, int64_t ldc, int m, int n, const float *bias, bool clamp, float lo,
                                float hi);

#else
#define PX_AVX512_KERNELS 0
#endif

#endif /* PX_GEMM_X86_H */
