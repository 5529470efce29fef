/*
 * gemm.h - the float32 matrix multiply shared by the kernel families
 * (private; implemented in gemm.c).
 */
#ifndef PX_GEMM_H
#define PX_GEMM_H

#include "kernels/kernel.h"

/* The widest column panel (NR) any micro-kernel uses, and the tallest row
 * panel (MR): bounds for arrays a packing callback keeps per row or column. */
#define PX_GEMM_NR_MAX 32
#define PX_GEMM_MR_MAX 8
/* The deepest depth block the engine multiplies at once (KC). */
#define PX_GEMM_KC_MAX 256

/* Bytes of packing workspace px_gemm_f32 needs for an M x N x K product:
 * one set of buffers per thread px_parallel_threads() allows (products are
 * split over the thread pool; take it just before the call). */
size_t px_gemm_f32_work_size(int64_t M, int64_t N, int64_t K);
/* One thread's share of it: enough for a product called from inside a
 * px_parallel_for chunk, which runs on that chunk's thread alone. */
size_t px_gemm_f32_thread_work_size(int64_t M, int64_t N, int64_t K);

/* C = alpha * A @ B + beta * C for float32 matrices.
 *
 * A is M x K with element (i, k) at A[i * rsa + k * csa]; B is K x N with
 * element (k, j) at B[k * rsb + j * csb] (any strides, so transposed operands
 * cost nothing); C is M x N, row-major with row stride ldc.
 * beta == 0 writes C without reading it (NaN or Inf already in C do not
 * propagate), as torch's addmm does.
 *
 * work: NULL, or at least px_gemm_f32_work_size(M, N, K) bytes, 64-byte
 * aligned (callers that multiply in a loop take it once from px_scratch and
 * pass it to every call); NULL takes it from px_scratch on each call.
 * Returns 0, or px_fail's status when scratch memory runs out. */
int px_gemm_f32(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t rsa, int64_t csa, const float *B, int64_t rsb,
                int64_t csb, float beta, float *C, int64_t ldc);

/* The same product with B supplied by a packing callback instead of a
 * matrix (convolution packs its implicit im2col matrix this way, without
 * materialising it). pack_b(bsrc, pc, kc, jc, nc, nr, pb) must write depth
 * [pc, pc + kc) x columns [jc, jc + nc) of B into pb as ceil(nc / nr) panels
 * of kc x nr floats (panel q holds columns jc + q*nr ..., element (p, j) at
 * pb[q*kc*nr + p*nr + j]), zero-filling the columns past nc in the last panel.
 * nr is px_gemm_f32_panel_width(). */
typedef void (*px_gemm_pack_fn)(const void *bsrc, int64_t pc, int64_t kc, int64_t jc,
                                int64_t nc, int nr, float *pb);
int px_gemm_f32_panel_width(void);
int px_gemm_f32_packed(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t rsa, int64_t csa, px_gemm_pack_fn pack_b,
                       const void *bsrc, float beta, float *C, int64_t ldc);

/* B packed once (convolution weights, packed when a delegate is loaded) and
 * A supplied by a packing callback or as a strided matrix: C = A @ B +
 * beta * C. px_gemm_f32_prepack_b writes the K x N matrix B (element (k, j)
 * at B[k * rsb + j * csb]) into px_gemm_f32_prepack_size(N, K) bytes, in
 * the engine's own block and panel order for this machine's micro-kernel;
 * px_gemm_f32_prepacked then multiplies without packing B again.
 * pack_a(asrc, ic, mc, pc, kc, mr, pa) must write rows [ic, ic + mc) x depth
 * [pc, pc + kc) of A into pa as ceil(mc / mr) panels of kc x mr floats
 * (element (i, p) of panel q at pa[q*kc*mr + p*mr + i]), zero-filling the
 * rows past mc in the last panel; pack_a NULL reads A[i * rsa + k * csa].
 * work: as px_gemm_f32's. */
typedef void (*px_gemm_pack_a_fn)(const void *asrc, int64_t ic, int64_t mc, int64_t pc,
                                  int64_t kc, int mr, float *pa);
size_t px_gemm_f32_prepack_size(int64_t N, int64_t K);
void px_gemm_f32_prepack_b(int64_t N, int64_t K, const float *B, int64_t rsb, int64_t csb,
                           float *pb);
int px_gemm_f32_prepacked(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t rsa, int64_t csa, px_gemm_pack_a_fn pack_a,
                          const void *asrc, const float *pb, float beta, float *C, int64_t ldc);

/* An epilogue run on each output tile of px_gemm_f32_prepacked_ep and
 * px_gemm_f32_packed_ep right after its last depth block, while the tile is
 * still in cache: C[i, j] += bias[j] (bias NULL: nothing added; j counts the
 * product's columns), or bias[i] when bias_rows (i counts its rows: NCHW
 * convolution, one output channel per row), then C[i, j] clamped to
 * [lo, hi] (no clamp when lo = -inf and hi = +inf). A NaN stays NaN, as
 * XNNPACK's max(lo, x) / min(hi, x) kernels leave it. Then post (NULL:
 * none), an elementwise function run in place on each row's columns of a
 * block of rows once their last depth block is done, while the block is in
 * cache (a fused activation: the same bits however the product is cut). */
typedef struct px_gemm_epilogue {
  const float *bias;
  float lo, hi;
  bool bias_rows;
  void (*post)(int64_t n, float *y);
} px_gemm_epilogue;

/* px_gemm_f32_packed followed by the epilogue ep (NULL: none). */
int px_gemm_f32_packed_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t rsa, int64_t csa, px_gemm_pack_fn pack_b,
                          const void *bsrc, float beta, float *C, int64_t ldc,
                          const px_gemm_epilogue *ep);

/* px_gemm_f32_prepacked followed by the epilogue ep (NULL: none, the same
 * results as px_gemm_f32_prepacked). */
int px_gemm_f32_prepacked_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t rsa, int64_t csa, px_gemm_pack_a_fn pack_a,
                             const void *asrc, const float *pb, float beta, float *C, int64_t ldc,
                             const px_gemm_epilogue *ep);

/* Convolution by indirect GEMM, NHWC: C (M x N, M = images * OH * OW output
 * pixels, N output channels) = A @ B + epilogue, where A's row r is output
 * pixel r and its depth k = (ki * KW + kj) * Cg + c reads channel c of the
 * input pixel under tap (ki, kj) in place (0 in the padding): no im2col
 * matrix is built or packed. B is prepacked (px_gemm_f32_prepack_b of the
 * K x N filter, K = KH * KW * Cg). Available where the engine has an
 * indirect micro-kernel (px_gemm_f32_conv_available: AVX-512 machines);
 * elsewhere callers pack im2col rows through px_gemm_f32_prepacked_ep. */
typedef struct px_gemm_conv {
  const float *x;           /* image 0's pixel (0, 0), channel 0 of the group */
  int64_t img_stride;       /* floats between images */
  int64_t H, W, cs;         /* input height and width; floats between pixels */
  int64_t Cg;               /* channels per group: depth per tap */
  int64_t KH, KW, sh, sw, dh, dw, pt, pl;
  int64_t OH, OW;
  int64_t row0;             /* output pixel of the product's row 0 (row tiles) */
} px_gemm_conv;
bool px_gemm_f32_conv_available(void);
int px_gemm_f32_conv(px_ctx *ctx, void *work, const px_gemm_conv *cv, int64_t M, int64_t N,
                     const float *pb, float *C, int64_t ldc, const px_gemm_epilogue *ep);

/* B in float16 or bfloat16, kept 16-bit (gemm_h16.c): a K x N matrix (element
 * (k, j) at B[k * rsb + j * csb]) is packed once by px_gemm_h16_prepack_b into
 * px_gemm_h16_prepack_size(N, K) bytes, panels of px_gemm_f32_panel_width()
 * columns over the whole depth (columns past N zero); px_gemm_h16_prepacked_ep
 * multiplies C = A @ B + beta * C (then ep, as px_gemm_f32_packed_ep),
 * widening each block of B to float32 in the engine's packing buffer as the
 * product reaches it, so that B is never resident as float32. bf16 selects
 * bfloat16 bits, else float16. work: as px_gemm_f32's. */
size_t px_gemm_h16_prepack_size(int64_t N, int64_t K);
void px_gemm_h16_prepack_b(int64_t N, int64_t K, const uint16_t *B, int64_t rsb, int64_t csb,
                           uint16_t *pb);
int px_gemm_h16_prepacked_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t rsa, int64_t csa, const uint16_t *pb, bool bf16,
                             float beta, float *C, int64_t ldc, const px_gemm_epilogue *ep);

/* The same product with B's 16-bit panels (px_gemm_h16_prepack_b's, which
 * match this engine's panel width) read in place and widened in registers
 * by the AVX-512 (or AVX2 with F16C) micro-kernel (gemm.c), for products of
 * few rows: each vector of B is widened once per row tile instead of once
 * per call into a buffer the product then reads back. The same results as
 * px_gemm_h16_prepacked_ep. Only where px_gemm_h16_panels_available(). */
bool px_gemm_h16_panels_available(void);
/* The most rows for which px_gemm_h16_prepacked_ep takes this path (0 where
 * it is not available). */
int64_t px_gemm_h16_panel_rows(void);
int px_gemm_h16_panels_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa,
                          int64_t csa, const uint16_t *pb, bool bf16, float beta, float *C, int64_t ldc,
                          const px_gemm_epilogue *ep);

#endif /* PX_GEMM_H */
