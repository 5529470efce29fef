/*
 * gemm_x86.c - the float32 GEMM engine's AVX-512 kernels (gemm_x86.h):
 * the 8 x 32 micro-kernel, A broadcast from memory against two 512-bit
 * columns of B, with the bias / clamp epilogue in registers, 1-row and
 * 4-row loops for the last rows of a product and the tile's output lines
 * prefetched; and the indirect convolution block, whose A rows are read
 * from the input under each tap through pointers.
 */
#include "kernels/gemm/gemm_x86.h"

#if PX_AVX512_KERNELS
#include <immintrin.h>

#include "kernels/shape/transpose_x86.h"

/* Asks for the tile's output lines before its depth loop, so that fetching
 * them for the stores (outputs larger than L2 miss there) overlaps the
 * multiply-adds: mobilenet_v2's 112x112 16 -> 96 pointwise convolution
 * 663 -> 578 us at one thread. */
__attribute__((target("avx512f"), always_inline)) static inline void prefetch_tile(const float *c,
                                                                                  int64_t ldc,
                                                                                  int mr) {
  for (int i = 0; i < mr; i++) {
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
  }
}

/* Stores one row of an AVX-512 tile: alpha * (v0, v1) (+ beta * C), plus
 * (b0, b1), clamped to [vlo, vhi] when clamp, into the columns of masks k0
 * (0..15) and k1 (16..31). */
__attribute__((target("avx512f"), always_inline)) static inline void
row_store_avx512(float *c, __m512 v0, __m512 v1, __mmask16 k0, __mmask16 k1, __m512 va,
                 float beta, bool add, __m512 b0, __m512 b1, bool clamp, __m512 vlo, __m512 vhi) {
  v0 = _mm512_mul_ps(va, v0);
  v1 = _mm512_mul_ps(va, v1);
  if (beta != 0.0f) {
    __m512 vb = _mm512_set1_ps(beta);
    __m512 o0 = _mm512_maskz_loadu_ps(k0, c), o1 = _mm512_maskz_loadu_ps(k1, c + 16);
    v0 = beta == 1.0f ? _mm512_add_ps(v0, o0) : _mm512_fmadd_ps(vb, o0, v0);
    v1 = beta == 1.0f ? _mm512_add_ps(v1, o1) : _mm512_fmadd_ps(vb, o1, v1);
  }
  if (add) {
    v0 = _mm512_add_ps(v0, b0);
    v1 = _mm512_add_ps(v1, b1);
  }
  if (clamp) { /* max_ps / min_ps return the second operand when either is NaN */
    v0 = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v0));
    v1 = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v1));
  }
  _mm512_mask_storeu_ps(c, k0, v0);
  _mm512_mask_storeu_ps(c + 16, k1, v1);
}

/* Stores an 8 x 32 tile's accumulators (mr x nr of them) with the
 * epilogue ep (NULL: none). */
__attribute__((target("avx512f"), always_inline)) static inline void
tile_store_8x32(float *c, int64_t ldc, float alpha, float beta, int mr, int nr, const px_tile_ep *ep,
                __m512 c00, __m512 c01, __m512 c10, __m512 c11, __m512 c20, __m512 c21,
                __m512 c30, __m512 c31, __m512 c40, __m512 c41, __m512 c50, __m512 c51,
                __m512 c60, __m512 c61, __m512 c70, __m512 c71) {
  const __mmask16 k0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
  const __mmask16 k1 = nr >= 32 ? (__mmask16)0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
  const __m512 va = _mm512_set1_ps(alpha);
  const bool clamp = ep && ep->clamp, add = ep && ep->bias;
  const __m512 vlo = _mm512_set1_ps(ep ? ep->lo : 0.0f), vhi = _mm512_set1_ps(ep ? ep->hi : 0.0f);
  __m512 b[8][2];
  if (add && ep->rows) {
    for (int i = 0; i < 8; i++) b[i][0] = b[i][1] = _mm512_set1_ps(i < mr ? ep->bias[i] : 0.0f);
  } else {
    __m512 b0 = add ? _mm512_maskz_loadu_ps(k0, ep->bias) : _mm512_setzero_ps();
    __m512 b1 = add ? _mm512_maskz_loadu_ps(k1, ep->bias + 16) : _mm512_setzero_ps();
    for (int i = 0; i < 8; i++) b[i][0] = b0, b[i][1] = b1;
  }
  row_store_avx512(c, c00, c01, k0, k1, va, beta, add, b[0][0], b[0][1], clamp, vlo, vhi);
  if (mr > 1) row_store_avx512(c + ldc, c10, c11, k0, k1, va, beta, add, b[1][0], b[1][1], clamp, vlo, vhi);
  if (mr > 2) row_store_avx512(c + 2 * ldc, c20, c21, k0, k1, va, beta, add, b[2][0], b[2][1], clamp, vlo, vhi);
  if (mr > 3) row_store_avx512(c + 3 * ldc, c30, c31, k0, k1, va, beta, add, b[3][0], b[3][1], clamp, vlo, vhi);
  if (mr > 4) row_store_avx512(c + 4 * ldc, c40, c41, k0, k1, va, beta, add, b[4][0], b[4][1], clamp, vlo, vhi);
  if (mr > 5) row_store_avx512(c + 5 * ldc, c50, c51, k0, k1, va, beta, add, b[5][0], b[5][1], clamp, vlo, vhi);
  if (mr > 6) row_store_avx512(c + 6 * ldc, c60, c61, k0, k1, va, beta, add, b[6][0], b[6][1], clamp, vlo, vhi);
  if (mr > 7) row_store_avx512(c + 7 * ldc, c70, c71, k0, k1, va, beta, add, b[7][0], b[7][1], clamp, vlo, vhi);
}

/* One depth step of the 8 x 32 tile: element o of each row pointer a0..a7
 * broadcast against B's two 16-column vectors at b (then b += 32). ROW2 /
 * ROW1 are one row's multiply-adds into both column vectors / the first. */
#define AVX512_ROW2(i, o)                                                          \
  av = _mm512_set1_ps(a##i[o]);                                                    \
  c##i##0 = _mm512_fmadd_ps(av, b0, c##i##0), c##i##1 = _mm512_fmadd_ps(av, b1, c##i##1)
#define AVX512_ROW1(i, o) c##i##0 = _mm512_fmadd_ps(_mm512_set1_ps(a##i[o]), b0, c##i##0)
/* B's vectors come through AVX512_LOADB (a float32 panel: a plain load;
 * redefined below for the 16-bit panels, widened in registers). */
#define AVX512_LOADB(p) _mm512_loadu_ps(p)
#define AVX512_LOAD2 __m512 av, b0 = AVX512_LOADB(b), b1 = AVX512_LOADB(b + 16)
#define AVX512_LOAD1 __m512 b0 = AVX512_LOADB(b)
#define AVX512_STEP_2(o)                                                                      \
  do {                                                                                        \
    AVX512_LOAD2;                                                                             \
    AVX512_ROW2(0, o); AVX512_ROW2(1, o); AVX512_ROW2(2, o); AVX512_ROW2(3, o);               \
    AVX512_ROW2(4, o); AVX512_ROW2(5, o); AVX512_ROW2(6, o); AVX512_ROW2(7, o);               \
    b += 32;                                                                                  \
  } while (0)
/* The same for a panel of 16 columns or fewer (an edge tile). */
#define AVX512_STEP_1(o)                                                                      \
  do {                                                                                        \
    AVX512_LOAD1;                                                                             \
    AVX512_ROW1(0, o); AVX512_ROW1(1, o); AVX512_ROW1(2, o); AVX512_ROW1(3, o);               \
    AVX512_ROW1(4, o); AVX512_ROW1(5, o); AVX512_ROW1(6, o); AVX512_ROW1(7, o);               \
    b += 32;                                                                                  \
  } while (0)
/* The same steps for tiles of at most 4 rows and of 1 row (the row edge of
 * a product: M = 49 or 196 leaves a tile of 1 or 4 rows, which the 8-row
 * steps would multiply at the cost of a full tile). */
#define AVX512_STEP_2_R4(o)                                                                   \
  do {                                                                                        \
    AVX512_LOAD2;                                                                             \
    AVX512_ROW2(0, o); AVX512_ROW2(1, o); AVX512_ROW2(2, o); AVX512_ROW2(3, o);               \
    b += 32;                                                                                  \
  } while (0)
#define AVX512_STEP_1_R4(o)                                                                   \
  do {                                                                                        \
    AVX512_LOAD1;                                                                             \
    AVX512_ROW1(0, o); AVX512_ROW1(1, o); AVX512_ROW1(2, o); AVX512_ROW1(3, o);               \
    b += 32;                                                                                  \
  } while (0)
#define AVX512_STEP_2_R1(o)                                                                   \
  do {                                                                                        \
    AVX512_LOAD2;                                                                             \
    AVX512_ROW2(0, o);                                                                        \
    b += 32;                                                                                  \
  } while (0)
#define AVX512_STEP_1_R1(o)                                                                   \
  do {                                                                                        \
    AVX512_LOAD1;                                                                             \
    AVX512_ROW1(0, o);                                                                        \
    b += 32;                                                                                  \
  } while (0)
/* The depth loop over `count` steps of element index (IDX) for an mr-row,
 * nr-column tile: the narrowest step variant that covers it. */
#define AVX512_LOOP(count, IDX, INC)                                               \
  do {                                                                             \
    if (mr > 4) {                                                                  \
      if (nr > 16)                                                                 \
        for (int64_t p_ = 0, IDX = 0; p_ < (count); p_++, IDX += (INC)) AVX512_STEP_2(IDX); \
      else                                                                         \
        for (int64_t p_ = 0, IDX = 0; p_ < (count); p_++, IDX += (INC)) AVX512_STEP_1(IDX); \
    } else if (mr > 1) {                                                           \
      if (nr > 16)                                                                 \
        for (int64_t p_ = 0, IDX = 0; p_ < (count); p_++, IDX += (INC)) AVX512_STEP_2_R4(IDX); \
      else                                                                         \
        for (int64_t p_ = 0, IDX = 0; p_ < (count); p_++, IDX += (INC)) AVX512_STEP_1_R4(IDX); \
    } else {                                                                       \
      if (nr > 16)                                                                 \
        for (int64_t p_ = 0, IDX = 0; p_ < (count); p_++, IDX += (INC)) AVX512_STEP_2_R1(IDX); \
      else                                                                         \
        for (int64_t p_ = 0, IDX = 0; p_ < (count); p_++, IDX += (INC)) AVX512_STEP_1_R1(IDX); \
    }                                                                              \
  } while (0)
#define AVX512_ACC_ZERO                                                            \
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00;    \
  __m512 c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00;         \
  __m512 c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00
#define AVX512_ACC_LIST c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71

/* The 8 x 32 kernel's body, over (kc, a, rsa, csa, b, c, ldc, alpha, beta,
 * mr, nr, ep), B's vectors read through AVX512_LOADB as defined where it
 * is expanded. */
#define AVX512_UKR_BODY                                                                   \
  const float *a0 = a, *a1 = a + (mr > 1 ? rsa : 0), *a2 = a + (mr > 2 ? 2 * rsa : 0);    \
  const float *a3 = a + (mr > 3 ? 3 * rsa : 0), *a4 = a + (mr > 4 ? 4 * rsa : 0);         \
  const float *a5 = a + (mr > 5 ? 5 * rsa : 0), *a6 = a + (mr > 6 ? 6 * rsa : 0);         \
  const float *a7 = a + (mr > 7 ? 7 * rsa : 0);                                           \
  prefetch_tile(c, ldc, mr);                                                              \
  AVX512_ACC_ZERO;                                                                        \
  AVX512_LOOP(kc, o, csa);                                                                \
  tile_store_8x32(c, ldc, alpha, beta, mr, nr, ep, AVX512_ACC_LIST)

/* 8 x 32 AVX-512 micro-kernel: two 512-bit columns of B per k, each A
 * element broadcast from memory into both. Panels of 16 columns or fewer (an
 * edge tile) skip the second column's multiply-adds; edges store through
 * masks. ep: the epilogue, applied in registers (NULL: none). */
__attribute__((target("avx512f"))) void px_ukr_f32_8x32_avx512_ep(int64_t kc, const float *a,
                                                                  int64_t rsa, int64_t csa,
                                                                  const float *b, float *c,
                                                                  int64_t ldc, float alpha,
                                                                  float beta, int mr, int nr,
                                                                  const px_tile_ep *ep) {
  AVX512_UKR_BODY;
}

__attribute__((target("avx512f"))) void px_ukr_f32_8x32_avx512(int64_t kc, const float *a,
                                                               int64_t rsa, int64_t csa,
                                                               const float *b, float *c,
                                                               int64_t ldc, float alpha,
                                                               float beta, int mr, int nr) {
  px_ukr_f32_8x32_avx512_ep(kc, a, rsa, csa, b, c, ldc, alpha, beta, mr, nr, NULL);
}

/* The same micro-kernel reading a 16-bit panel of B (kc x 32 float16 or,
 * with bf16, bfloat16 values, row stride 32) and widening each vector in
 * registers: the multiply-adds and epilogue of px_ukr_f32_8x32_avx512_ep on
 * the widened panel, so the same bits, without the panel ever being
 * written out as float32 (a few-row product would stream a widened copy of
 * all of B through memory once per call). */
#undef AVX512_LOADB
#define AVX512_LOADB(p)                                                                        \
  (bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(                                               \
              _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16)) \
        : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p))))

__attribute__((target("avx512f"), always_inline)) static inline void
ukr_h16_8x32(int64_t kc, const float *a, int64_t rsa, int64_t csa, const uint16_t *b, const bool bf16, float *c,
             int64_t ldc, float alpha, float beta, int mr, int nr, const px_tile_ep *ep) {
  AVX512_UKR_BODY;
}
#undef AVX512_LOADB
#define AVX512_LOADB(p) _mm512_loadu_ps(p)

__attribute__((target("avx512f"))) void px_ukr_h16_8x32_avx512_ep(int64_t kc, const float *a, int64_t rsa,
                                                                  int64_t csa, const uint16_t *b, bool bf16,
                                                                  float *c, int64_t ldc, float alpha, float beta,
                                                                  int mr, int nr, const px_tile_ep *ep) {
  if (bf16)
    ukr_h16_8x32(kc, a, rsa, csa, b, true, c, ldc, alpha, beta, mr, nr, ep);
  else
    ukr_h16_8x32(kc, a, rsa, csa, b, false, c, ldc, alpha, beta, mr, nr, ep);
}

/* Panels per pass: two (four chains of multiply-adds) read a product in
 * the last-level cache at 72 GB/s and from L2 at 125 GB/s on a Zen 5 core;
 * four streams 32 KiB apart ran slower (48 and 93), one panel 61 and 110.
 * From memory it reads as fast as a plain streaming read (34-36 GB/s);
 * software prefetching only slowed it. */
#define GV_P 2

/* P panels of one row's product: each column's multiply-adds in the order
 * of the 8 x 32 kernel's one-row loop (so the same bits), the P panels'
 * chains interleaved so that the row streams its panels at the load ports'
 * pace instead of waiting on one chain's latency. nlast: the last panel's
 * columns (1..32). */
__attribute__((target("avx512f"), always_inline)) static inline void
gemv_panels(const int P, int64_t kc, const float *a, const float *b, float *c, int nlast, float alpha,
            float beta, const px_tile_ep *ep) {
  __m512 acc[2 * GV_P];
  for (int q = 0; q < 2 * P; q++) acc[q] = _mm512_setzero_ps();
  const int64_t ps = kc * 32; /* floats between panels */
  for (int64_t p = 0; p < kc; p++, b += 32) {
    const __m512 av = _mm512_set1_ps(a[p]);
    for (int q = 0; q < P; q++) {
      acc[2 * q] = _mm512_fmadd_ps(av, _mm512_loadu_ps(b + q * ps), acc[2 * q]);
      acc[2 * q + 1] = _mm512_fmadd_ps(av, _mm512_loadu_ps(b + q * ps + 16), acc[2 * q + 1]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const bool clamp = ep && ep->clamp, add = ep && ep->bias;
  const __m512 vlo = _mm512_set1_ps(ep ? ep->lo : 0.0f), vhi = _mm512_set1_ps(ep ? ep->hi : 0.0f);
  for (int q = 0; q < P; q++) {
    const int nr = q == P - 1 ? nlast : 32;
    const __mmask16 k0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    const __mmask16 k1 = nr >= 32 ? (__mmask16)0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
    __m512 b0 = _mm512_setzero_ps(), b1 = b0;
    if (add && ep->rows) {
      b0 = b1 = _mm512_set1_ps(ep->bias[0]);
    } else if (add) {
      b0 = _mm512_maskz_loadu_ps(k0, ep->bias + q * 32);
      b1 = _mm512_maskz_loadu_ps(k1, ep->bias + q * 32 + 16);
    }
    row_store_avx512(c + q * 32, acc[2 * q], acc[2 * q + 1], k0, k1, va, beta, add, b0, b1, clamp, vlo, vhi);
  }
}

__attribute__((target("avx512f"))) void px_gemv_f32_avx512(int64_t kc, const float *a, const float *bp, int64_t n,
                                                           float *c, float alpha, float beta, const px_tile_ep *ep) {
  px_tile_ep e = ep ? *ep : (px_tile_ep){0};
  for (int64_t j = 0; j < n; j += GV_P * 32) {
    const int64_t left = n - j, panels = left > 32 * (GV_P - 1) ? GV_P : (left + 31) / 32;
    const int nlast = (int)(left - (panels - 1) * 32 < 32 ? left - (panels - 1) * 32 : 32);
    const float *b = bp + j * kc;
    if (panels == 2)
      gemv_panels(2, kc, a, b, c + j, nlast, alpha, beta, ep ? &e : NULL);
    else
      gemv_panels(1, kc, a, b, c + j, nlast, alpha, beta, ep ? &e : NULL);
    if (ep && e.bias && !e.rows) e.bias += GV_P * 32;
  }
}

/* A run of depth for the indirect (convolution) kernel: len channels of one
 * kernel tap from depth k of the block on, row i of the tile reading them
 * from p[i] (an input pixel, or zeros in the padding). */
typedef struct conv_seg {
  const float *p[PX_GEMM_MR_MAX];
  int64_t k, len;
} conv_seg;

/* The 8 x 32 kernel over an indirect A: depth segment after segment, each
 * reading B's panel (kc x 32) from its own depth on (taps in the padding for
 * every row of the tile have no segment: they add only zeros). */
__attribute__((target("avx512f"))) static void ukr_8x32_avx512_conv(int nseg, const conv_seg *seg,
                                                                    const float *bpanel, float *c,
                                                                    int64_t ldc, float beta, int mr,
                                                                    int nr, const px_tile_ep *ep) {
  prefetch_tile(c, ldc, mr);
  AVX512_ACC_ZERO;
  for (int q = 0; q < nseg; q++) {
    const float *a0 = seg[q].p[0], *a1 = seg[q].p[1], *a2 = seg[q].p[2], *a3 = seg[q].p[3];
    const float *a4 = seg[q].p[4], *a5 = seg[q].p[5], *a6 = seg[q].p[6], *a7 = seg[q].p[7];
    const float *b = bpanel + seg[q].k * 32;
    AVX512_LOOP(seg[q].len, o, 1);
  }
  tile_store_8x32(c, ldc, 1.0f, beta, mr, nr, ep, AVX512_ACC_LIST);
}

/* One run of a depth block's indirect A, the same for every tile of the
 * block: from channel c of kernel row dh (in input rows) on, at the block's
 * depth k, len deep, over the window's columns cfirst..clast (in pixels; one
 * column unless contig: a kernel row's adjacent taps read as one run); off:
 * its first float's offset from the window's corner pixel. */
typedef struct conv_run {
  int64_t dh, cfirst, clast, c, off, k, len;
  bool contig;
} conv_run;

/* The runs of depth pc .. pc + kc (at most kc of them): the tap arithmetic,
 * with its divisions, once per block instead of once per tile. A kernel
 * row's taps are one contiguous run of the input when the group is the
 * whole pixel and taps are adjacent (no column dilation): a 7x7 filter over
 * 3 channels reads runs of 21, not 3. */
static int conv_runs(const px_gemm_conv *cv, int64_t pc, int64_t kc, conv_run *run) {
  const int64_t Cg = cv->Cg;
  const bool rows_contig = cv->cs == Cg && cv->dw == 1;
  int n = 0;
  for (int64_t t = pc / Cg, c = pc % Cg, q = 0; q < kc; n++) {
    const int64_t kj = t % cv->KW;
    conv_run *r = &run[n];
    r->dh = t / cv->KW * cv->dh, r->c = c, r->k = q;
    r->contig = rows_contig && cv->KW - kj > 1;
    const int64_t span = r->contig ? (cv->KW - kj) * Cg - c : Cg - c;
    r->len = span < kc - q ? span : kc - q;
    r->cfirst = r->contig ? kj : kj * cv->dw;
    r->clast = r->contig ? kj + (c + r->len - 1) / Cg : r->cfirst;
    r->off = (r->dh * cv->W + r->cfirst) * cv->cs + c;
    q += r->len;
    t += (c + r->len) / Cg;
    c = (c + r->len) % Cg;
  }
  return n;
}

/* n floats from s, or zeros where s is NULL, to d. */
__attribute__((target("avx512f"))) static void copy_or_zero(float *d, const float *s, int64_t n) {
  for (int64_t k = 0; k < n; k += 16) {
    const __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(d + k, m, s ? _mm512_maskz_loadu_ps(m, s + k) : _mm512_setzero_ps());
  }
}

/* Row r of A is output pixel r, its depth k = tap * Cg + channel read
 * straight from the input pixel under that tap (zeros in the padding) by
 * the indirect kernel: nothing is packed. Per tile of 8 rows, each run's 8
 * pointers and its inside / border tests are one vector operation each. */
__attribute__((target("avx512f"))) void px_gemm_conv_block_avx512(const px_gemm_conv *cv, const float *zeros,
                                                                  int64_t ic, int64_t mc, int64_t pc,
                                                                  int64_t kc, int64_t j0, int64_t j1,
                                                                  const float *bp, float *C, int64_t ldc,
                                                                  float beta, const px_tile_ep *ep) {
  const int nr = 32;
  const int64_t Cg = cv->Cg, OHW = cv->OH * cv->OW;
  conv_seg seg[PX_GEMM_KC_MAX + 2]; /* kc is at most the engine's deepest block */
  conv_run run[PX_GEMM_KC_MAX + 2];
  float edge[8][PX_GEMM_KC_MAX]; /* border rows' kernel-row runs, at their depth in the block */
  const int nrun = conv_runs(cv, pc, kc, run);
  const __m512i vzero = _mm512_setzero_si512(), vH = _mm512_set1_epi64(cv->H), vW = _mm512_set1_epi64(cv->W);
  const __m512i vx = _mm512_set1_epi64((long long)(uintptr_t)cv->x);
  const __m512i vz = _mm512_set1_epi64((long long)(uintptr_t)zeros);
  /* the output pixel (image n, row oh, column ow) of the block's first row,
   * then stepped row by row: no division per row (a tile's setup cost as
   * much as its product when the depth is short, as in a 3-channel stem) */
  const int64_t r0 = cv->row0 + ic;
  int64_t n = r0 / OHW, oh = r0 % OHW / cv->OW, ow = r0 % cv->OW;
  /* a row's next seven pixels: their window columns and corners, from its own */
  const int64_t sw = cv->sw, sc = cv->sw * cv->cs;
  const __m512i step_w = _mm512_set_epi64(7 * sw, 6 * sw, 5 * sw, 4 * sw, 3 * sw, 2 * sw, sw, 0);
  const __m512i step_c = _mm512_set_epi64(7 * sc, 6 * sc, 5 * sc, 4 * sc, 3 * sc, 2 * sc, sc, 0);
  for (int64_t ir = 0; ir < mc; ir += 8) {
    const int m = (int)(mc - ir < 8 ? mc - ir : 8);
    int64_t ih0[8], iw0[8], img[8], corner[8]; /* corner: the window's (ih0, iw0) pixel, in floats from x */
    __m512i vih, viw, vcorner;
    if (m == 8 && ow + 8 <= cv->OW) {
      /* eight pixels of one output row: one vector step each (no scalar
       * stores read back as a vector, which stall store forwarding) */
      const int64_t ih = oh * cv->sh - cv->pt, iw = ow * cv->sw - cv->pl;
      vih = _mm512_set1_epi64(ih);
      viw = _mm512_add_epi64(_mm512_set1_epi64(iw), step_w);
      vcorner = _mm512_add_epi64(_mm512_set1_epi64(n * cv->img_stride + (ih * cv->W + iw) * cv->cs), step_c);
      _mm512_storeu_si512((void *)ih0, vih);
      _mm512_storeu_si512((void *)iw0, viw);
      for (int i = 0; i < 8; i++) img[i] = n * cv->img_stride;
      if ((ow += 8) == cv->OW) {
        ow = 0;
        if (++oh == cv->OH) oh = 0, n++;
      }
    } else {
      for (int i = 0; i < 8; i++) {
        if (i >= m) { /* rows past m repeat the first (computed, not stored) */
          img[i] = img[0], ih0[i] = ih0[0], iw0[i] = iw0[0], corner[i] = corner[0];
          continue;
        }
        img[i] = n * cv->img_stride;
        ih0[i] = oh * cv->sh - cv->pt;
        iw0[i] = ow * cv->sw - cv->pl;
        corner[i] = img[i] + (ih0[i] * cv->W + iw0[i]) * cv->cs;
        if (++ow == cv->OW) {
          ow = 0;
          if (++oh == cv->OH) oh = 0, n++;
        }
      }
      vih = _mm512_loadu_si512((const void *)ih0), viw = _mm512_loadu_si512((const void *)iw0);
      vcorner = _mm512_loadu_si512((const void *)corner);
    }
    int nseg = 0;
    for (int u = 0; u < nrun; u++) {
      const conv_run *r = &run[u];
      const __m512i ih = _mm512_add_epi64(vih, _mm512_set1_epi64(r->dh));
      const __m512i first = _mm512_add_epi64(viw, _mm512_set1_epi64(r->cfirst));
      const __m512i last = _mm512_add_epi64(viw, _mm512_set1_epi64(r->clast));
      const __mmask8 row_in = _mm512_cmpge_epi64_mask(ih, vzero) & _mm512_cmplt_epi64_mask(ih, vH);
      const __mmask8 inside = row_in & _mm512_cmpge_epi64_mask(first, vzero) & _mm512_cmplt_epi64_mask(last, vW);
      /* the rows that read some of the run inside the input; a run in the
       * padding for every row adds nothing and has no segment */
      const __mmask8 touch = row_in & _mm512_cmpge_epi64_mask(last, vzero) & _mm512_cmplt_epi64_mask(first, vW);
      if (!touch) continue;
      /* x + corner + off for the rows inside (integer arithmetic: a row
       * outside would point outside the input), zeros for the others */
      const __m512i at = _mm512_slli_epi64(_mm512_add_epi64(vcorner, _mm512_set1_epi64(r->off)), 2);
      _mm512_storeu_si512((void *)seg[nseg].p, _mm512_mask_add_epi64(vz, inside, vx, at));
      /* a row whose span crosses the border reads a copy with zeros for
       * the taps in the padding (they add nothing, as the zero source
       * does), so the kernel row stays one segment */
      for (unsigned cross = r->contig ? (unsigned)(touch & ~inside) : 0u; cross; cross &= cross - 1) {
        const int i = __builtin_ctz(cross);
        float *cp = edge[i] + r->k;
        const int64_t ih_i = ih0[i] + r->dh;
        for (int64_t e = 0, ch = r->c, iw = iw0[i] + r->cfirst; e < r->len; ch = 0, iw++) { /* tap by tap */
          const int64_t take = Cg - ch < r->len - e ? Cg - ch : r->len - e;
          const bool in = iw >= 0 && iw < cv->W;
          copy_or_zero(cp + e, in ? cv->x + img[i] + (ih_i * cv->W + iw) * cv->cs + ch : NULL, take);
          e += take;
        }
        seg[nseg].p[i] = cp;
      }
      seg[nseg].k = r->k;
      seg[nseg++].len = r->len;
    }
    const float *b = bp;
    for (int64_t jr = j0; jr < j1; jr += nr, b += (int64_t)nr * kc) {
      const int nc = (int)(j1 - jr < nr ? j1 - jr : nr);
      px_tile_ep te = {0};
      if (ep) {
        te = *ep;
        if (te.bias) te.bias += te.rows ? ic + ir : jr;
      }
      ukr_8x32_avx512_conv(nseg, seg, b, C + (ic + ir) * ldc + jr, ldc, beta, m, nc, ep ? &te : NULL);
    }
  }
}

/* ---- AVX2 / FMA: the 6 x 16 kernel, transposed-B packing, the tile epilogue ---- */

/* 6 x 16 AVX2/FMA micro-kernel: a is packed 6 per k, b 16 per k. */
/* The 6 x 16 kernel's body over B's panel b in float32 (kind 0) or in
 * 16-bit values widened in registers (kind 1 float16, 2 bfloat16), the
 * same multiply-adds either way. avx2_loadb: the 8 values at b. */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline __m256 avx2_loadb(const void *b,
                                                                                     const int kind) {
  if (kind == 0) return _mm256_loadu_ps((const float *)b);
  const __m128i h = _mm_loadu_si128((const __m128i *)b);
  if (kind == 1) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void
ukr_6x16_avx2(int64_t kc, const float *a, int64_t rsa, int64_t csa, const void *b, const int kind, float *c,
              int64_t ldc, float alpha, float beta, int mr, int nr) {
  const char *bp = b;
  const int64_t es = kind == 0 ? 4 : 2; /* bytes a value */
  const float *a0 = a, *a1 = a + (mr > 1 ? rsa : 0), *a2 = a + (mr > 2 ? 2 * rsa : 0);
  const float *a3 = a + (mr > 3 ? 3 * rsa : 0), *a4 = a + (mr > 4 ? 4 * rsa : 0);
  const float *a5 = a + (mr > 5 ? 5 * rsa : 0);
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0, o = 0; p < kc; p++, o += csa) {
    __m256 b0 = avx2_loadb(bp, kind), b1 = avx2_loadb(bp + 8 * es, kind);
    __m256 av = _mm256_broadcast_ss(a0 + o);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a1 + o);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a2 + o);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a3 + o);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a4 + o);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a5 + o);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    bp += 16 * es;
  }
  if (mr == 6 && nr == 16) {
    __m256 va = _mm256_set1_ps(alpha);
    __m256 acc[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    if (beta == 0.0f) {
      for (int i = 0; i < 6; i++) {
        _mm256_storeu_ps(c + i * ldc, _mm256_mul_ps(va, acc[2 * i]));
        _mm256_storeu_ps(c + i * ldc + 8, _mm256_mul_ps(va, acc[2 * i + 1]));
      }
    } else if (beta == 1.0f) {
      for (int i = 0; i < 6; i++) {
        float *cr = c + i * ldc;
        _mm256_storeu_ps(cr, _mm256_fmadd_ps(va, acc[2 * i], _mm256_loadu_ps(cr)));
        _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(va, acc[2 * i + 1], _mm256_loadu_ps(cr + 8)));
      }
    } else {
      __m256 vb = _mm256_set1_ps(beta);
      for (int i = 0; i < 6; i++) {
        float *cr = c + i * ldc;
        _mm256_storeu_ps(cr, _mm256_fmadd_ps(va, acc[2 * i],
                                             _mm256_mul_ps(vb, _mm256_loadu_ps(cr))));
        _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(va, acc[2 * i + 1],
                                                 _mm256_mul_ps(vb, _mm256_loadu_ps(cr + 8))));
      }
    }
    return;
  }
  float t[6 * 16] __attribute__((aligned(32)));
  _mm256_store_ps(t + 0, c00);
  _mm256_store_ps(t + 8, c01);
  _mm256_store_ps(t + 16, c10);
  _mm256_store_ps(t + 24, c11);
  _mm256_store_ps(t + 32, c20);
  _mm256_store_ps(t + 40, c21);
  _mm256_store_ps(t + 48, c30);
  _mm256_store_ps(t + 56, c31);
  _mm256_store_ps(t + 64, c40);
  _mm256_store_ps(t + 72, c41);
  _mm256_store_ps(t + 80, c50);
  _mm256_store_ps(t + 88, c51);
  px_gemm_tile_store(t, 16, c, ldc, alpha, beta, mr, nr);
}

/* (f16c for the shared body's inlining; the float32 kind uses none of it) */
__attribute__((target("avx2,fma,f16c"))) void px_ukr_f32_6x16_avx2(int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                                              const float *b, float *c, int64_t ldc, float alpha,
                                                              float beta, int mr, int nr) {
  ukr_6x16_avx2(kc, a, rsa, csa, b, 0, c, ldc, alpha, beta, mr, nr);
}

__attribute__((target("avx2,fma,f16c"))) void px_ukr_h16_6x16_avx2(int64_t kc, const float *a, int64_t rsa,
                                                                   int64_t csa, const uint16_t *b, bool bf16,
                                                                   float *c, int64_t ldc, float alpha, float beta,
                                                                   int mr, int nr) {
  if (bf16)
    ukr_6x16_avx2(kc, a, rsa, csa, b, 2, c, ldc, alpha, beta, mr, nr);
  else
    ukr_6x16_avx2(kc, a, rsa, csa, b, 1, c, ldc, alpha, beta, mr, nr);
}


/* Full nr-wide panels (nr a multiple of 8) of a column-major B (rsb == 1: a
 * transposed weight, column j contiguous in k), 8 x 8 blocks transposed in
 * registers: element by element this pack cost a fifth of a product's time.
 * Returns the columns it packed (a multiple of nr). */
__attribute__((target("avx2,fma"))) int64_t px_pack_b_trans_avx2(const float *B, int64_t csb, int64_t kc,
                                                                      int64_t nc, int nr, float *pb) {
  int64_t full = nc / nr * nr, k8 = kc / 8 * 8;
  for (int64_t j0 = 0; j0 < full; j0 += nr, pb += (int64_t)nr * kc) {
    for (int part = 0; part < nr / 8; part++) {
      const float *col = B + (j0 + part * 8) * csb;
      float *dst = pb + part * 8;
      for (int64_t p = 0; p < k8; p += 8) /* depth p..p+7 of the 8 columns */
        px_tile8x8_f32(dst + p * nr, nr, col + p, csb);
      for (int64_t p = k8; p < kc; p++)
        for (int j = 0; j < 8; j++) dst[p * nr + j] = col[j * csb + p];
    }
  }
  return full;
}

__attribute__((target("avx2,fma"))) void px_gemm_tile_epilogue_avx2(float *c, int64_t ldc, int m, int n,
                                                                   const float *bias, bool clamp,
                                                                   float lo, float hi) {
  if (n != 16) {
    px_gemm_tile_epilogue(c, ldc, m, n, bias, clamp, lo, hi);
    return;
  }
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
  for (int i = 0; i < m; i++, c += ldc) {
    __m256 v0 = _mm256_loadu_ps(c), v1 = _mm256_loadu_ps(c + 8);
    if (bias) {
      v0 = _mm256_add_ps(v0, b0);
      v1 = _mm256_add_ps(v1, b1);
    }
    if (clamp) { /* max_ps / min_ps return the second operand when either is NaN */
      v0 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v0));
      v1 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v1));
    }
    _mm256_storeu_ps(c, v0);
    _mm256_storeu_ps(c + 8, v1);
  }
}

/* One row of A times a column-major B (rsb == 1: a linear layer's weight
 * W[n, k], read in place): c[j] += alpha * sum_k a[k] * B[k, j], each
 * column one chain of 512-bit fused multiply-adds over its weight row (the
 * depth's tail masked), then a tree sum of the lanes; four columns at a
 * time, so four weight rows stream at once. Each column is computed the
 * same way whichever group it is in. */
__attribute__((target("avx512f"))) void px_gemv_dots_avx512(int64_t N, int64_t K, float alpha, const float *a,
                                                                const float *B, int64_t csb, float *c) {
  const int64_t K16 = K / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);
  int64_t j = 0;
  for (; j + 4 <= N; j += 4) {
    const float *b0 = B + j * csb, *b1 = b0 + csb, *b2 = b1 + csb, *b3 = b2 + csb;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t k = 0; k < K16; k += 16) {
      const __m512 x = _mm512_loadu_ps(a + k);
      s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b0 + k), s0);
      s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b1 + k), s1);
      s2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b2 + k), s2);
      s3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b3 + k), s3);
    }
    if (tail) {
      const __m512 x = _mm512_maskz_loadu_ps(tail, a + K16);
      s0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b0 + K16), s0);
      s1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b1 + K16), s1);
      s2 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b2 + K16), s2);
      s3 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b3 + K16), s3);
    }
    c[j] += alpha * _mm512_reduce_add_ps(s0);
    c[j + 1] += alpha * _mm512_reduce_add_ps(s1);
    c[j + 2] += alpha * _mm512_reduce_add_ps(s2);
    c[j + 3] += alpha * _mm512_reduce_add_ps(s3);
  }
  for (; j < N; j++) {
    const float *b0 = B + j * csb;
    __m512 s0 = _mm512_setzero_ps();
    for (int64_t k = 0; k < K16; k += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b0 + k), s0);
    if (tail) s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, a + K16), _mm512_maskz_loadu_ps(tail, b0 + K16), s0);
    c[j] += alpha * _mm512_reduce_add_ps(s0);
  }
}

#endif /* PX_AVX512_KERNELS */
