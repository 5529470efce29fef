/*
 * gemm.c - the cache-blocked float32 GEMM engine (gemm.h) that matrix
 * products (linalg.c), linear (linear.c) and convolution (conv.c) call.
 *
 * The GEMM follows the usual Goto/BLIS structure: B is packed in KC x NC
 * blocks into NR-wide column panels, A in MC x KC blocks into MR-high row
 * panels, and a register-tiled micro-kernel multiplies one MR x NR tile. On
 * x86-64 machines with AVX2 and FMA (checked at run time) a 6 x 16 micro-kernel
 * written with intrinsics is used; elsewhere a portable 4 x 8 one written with
 * GCC vector extensions.
 */
#include "kernels/gemm/gemm.h"

#include <math.h>
#include <string.h>

/* AVX2/FMA variants, chosen at run time; define PX_PORTABLE_KERNELS to build
 * only the portable code (to test it on an AVX2 machine). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(PX_PORTABLE_KERNELS)
#include <immintrin.h>

#include "kernels/shape/tile8x8.h"
#define PX_X86_KERNELS 1
#else
#define PX_X86_KERNELS 0
#endif

#define GEMM_MC 120  /* rows of A per packed block (multiple of 6 and 4) */
#define GEMM_KC 256  /* most depth per packed block */
#define GEMM_NC 4096 /* columns of B per packed block (multiple of 16 and 8) */
#define GEMM_MR_MAX 6
#define GEMM_DOTS_MAX_M 32 /* most rows of A multiplied by a transposed B without packing */
#define GEMM_NR_MAX 16

typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
/* Unaligned, aliasing views for loads and stores through float pointers. */
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
#define v4_load(p) (*(const v4f_u *)(p))
#define v4_store(p, v) (*(v4f_u *)(p) = (v))
#define v8_load(p) (*(const v8f_u *)(p))
#define v8_store(p, v) (*(v8f_u *)(p) = (v))

typedef void (*ukr_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       float alpha, float beta, int mr, int nr);

/* Writes alpha * acc (+ beta * C) for the top-left mr x nr part of a tile
 * held row-major in acc with row length ld. */
static void tile_store(const float *acc, int ld, float *c, int64_t ldc, float alpha, float beta,
                       int mr, int nr) {
  for (int i = 0; i < mr; i++) {
    float *cr = c + i * ldc;
    const float *ar = acc + i * ld;
    if (beta == 0.0f)
      for (int j = 0; j < nr; j++) cr[j] = alpha * ar[j];
    else
      for (int j = 0; j < nr; j++) cr[j] = alpha * ar[j] + beta * cr[j];
  }
}

/* Portable 4 x 8 micro-kernel: a is packed 4 per k, b 8 per k. */
static void ukr_4x8(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                    float alpha, float beta, int mr, int nr) {
  v4f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  for (int64_t p = 0; p < kc; p++) {
    v4f b0 = v4_load(b), b1 = v4_load(b + 4);
    c00 += a[0] * b0;
    c01 += a[0] * b1;
    c10 += a[1] * b0;
    c11 += a[1] * b1;
    c20 += a[2] * b0;
    c21 += a[2] * b1;
    c30 += a[3] * b0;
    c31 += a[3] * b1;
    a += 4;
    b += 8;
  }
  float t[4 * 8] __attribute__((aligned(32)));
  v4_store(t + 0, c00);
  v4_store(t + 4, c01);
  v4_store(t + 8, c10);
  v4_store(t + 12, c11);
  v4_store(t + 16, c20);
  v4_store(t + 20, c21);
  v4_store(t + 24, c30);
  v4_store(t + 28, c31);
  tile_store(t, 8, c, ldc, alpha, beta, mr, nr);
}

#if PX_X86_KERNELS
/* 6 x 16 AVX2/FMA micro-kernel: a is packed 6 per k, b 16 per k. */
__attribute__((target("avx2,fma"))) static void ukr_6x16_avx2(int64_t kc, const float *a,
                                                              const float *b, float *c,
                                                              int64_t ldc, float alpha,
                                                              float beta, int mr, int nr) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += 6;
    b += 16;
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
  tile_store(t, 16, c, ldc, alpha, beta, mr, nr);
}
#endif

typedef struct gemm_arch {
  int mr, nr;
  ukr_fn ukr;
  bool avx2;
} gemm_arch;

static gemm_arch gemm_select(void) {
  gemm_arch g = {4, 8, ukr_4x8, false};
#if PX_X86_KERNELS
  if ((__builtin_cpu_init(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    g.mr = 6;
    g.nr = 16;
    g.ukr = ukr_6x16_avx2;
    g.avx2 = true;
  }
#endif
  return g;
}

/* Packs rows [0, mc) x depth [0, kc) of A into mr-high panels, k-major,
 * zero-padding the last panel. */
static void pack_a(int64_t mc, int64_t kc, const float *A, int64_t rsa, int64_t csa, int mr,
                   float *pa) {
  for (int64_t i0 = 0; i0 < mc; i0 += mr) {
    int m = (int)(mc - i0 < mr ? mc - i0 : mr);
    if (csa == 1) {
      for (int i = 0; i < m; i++) {
        const float *src = A + (i0 + i) * rsa;
        for (int64_t p = 0; p < kc; p++) pa[p * mr + i] = src[p];
      }
    } else {
      for (int64_t p = 0; p < kc; p++) {
        const float *src = A + i0 * rsa + p * csa;
        for (int i = 0; i < m; i++) pa[p * mr + i] = src[i * rsa];
      }
    }
    for (int i = m; i < mr; i++)
      for (int64_t p = 0; p < kc; p++) pa[p * mr + i] = 0.0f;
    pa += (int64_t)mr * kc;
  }
}

/* A strided B operand: element (k, j) at B[k * rsb + j * csb]. */
typedef struct strided_b {
  const float *B;
  int64_t rsb, csb;
} strided_b;

#if PX_X86_KERNELS
/* Full 16-wide panels of a column-major B (rsb == 1: a transposed weight,
 * column j contiguous in k), 8 x 8 blocks transposed in registers: element
 * by element this pack cost a fifth of a product's time. Returns the
 * columns it packed (a multiple of 16). */
__attribute__((target("avx2,fma"))) static int64_t pack_b_trans16_avx2(const float *B, int64_t csb, int64_t kc,
                                                                        int64_t nc, float *pb) {
  int64_t full = nc / 16 * 16, k8 = kc / 8 * 8;
  for (int64_t j0 = 0; j0 < full; j0 += 16, pb += 16 * kc) {
    for (int half = 0; half < 2; half++) {
      const float *col = B + (j0 + half * 8) * csb;
      float *dst = pb + half * 8;
      for (int64_t p = 0; p < k8; p += 8) /* depth p..p+7 of the 8 columns */
        px_tile8x8_f32(dst + p * 16, 16, col + p, csb);
      for (int64_t p = k8; p < kc; p++)
        for (int j = 0; j < 8; j++) dst[p * 16 + j] = col[j * csb + p];
    }
  }
  return full;
}
#endif

/* Packs depth [pc, pc + kc) x columns [jc, jc + nc) of a strided B into
 * nr-wide panels, k-major, zero-padding the last panel (a px_gemm_pack_fn). */
static void pack_b_strided(const void *src, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                           int nr, float *pb) {
  const strided_b *sb = src;
  const int64_t rsb = sb->rsb, csb = sb->csb;
  const float *B = sb->B + pc * rsb + jc * csb;
  const int64_t pstride = (int64_t)nr * kc; /* floats between panels */
#if PX_X86_KERNELS
  if (rsb == 1 && csb != 1 && nr == 16) { /* 16-wide panels: the AVX2 kernel was selected */
    int64_t done = pack_b_trans16_avx2(B, csb, kc, nc, pb);
    B += done * csb;
    pb += done / 16 * pstride;
    nc -= done;
  }
#endif
  if (csb == 1) {
    /* row by row: contiguous reads (much faster than panel by panel when the
     * rows of B are long) */
    int64_t full = nc / nr * nr;
    for (int64_t p = 0; p < kc; p++) {
      const float *sp = B + p * rsb;
      float *dst = pb + p * nr;
      int64_t j0 = 0;
      if (nr == 16)
        for (; j0 < full; j0 += 16, dst += pstride) {
          v8_store(dst, v8_load(sp + j0));
          v8_store(dst + 8, v8_load(sp + j0 + 8));
        }
      else if (nr == 8)
        for (; j0 < full; j0 += 8, dst += pstride) v8_store(dst, v8_load(sp + j0));
      for (; j0 < nc; j0 += nr, dst += pstride) {
        int n = (int)(nc - j0 < nr ? nc - j0 : nr);
        for (int j = 0; j < n; j++) dst[j] = sp[j0 + j];
        for (int j = n; j < nr; j++) dst[j] = 0.0f;
      }
    }
    return;
  }
  for (int64_t j0 = 0; j0 < nc; j0 += nr) {
    int n = (int)(nc - j0 < nr ? nc - j0 : nr);
    for (int j = 0; j < n; j++) {
      const float *sp = B + (j0 + j) * csb;
      for (int64_t p = 0; p < kc; p++) pb[p * nr + j] = sp[p * rsb];
    }
    for (int64_t p = 0; p < kc; p++)
      for (int j = n; j < nr; j++) pb[p * nr + j] = 0.0f;
    pb += pstride;
  }
}

/* C = beta * C (beta == 0: zeros, without reading C). */
static void scale_rows(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float *cr = C + i * ldc;
    if (beta == 0.0f)
      memset(cr, 0, sizeof(float) * (size_t)N);
    else if (beta != 1.0f)
      for (int64_t j = 0; j < N; j++) cr[j] *= beta;
  }
}

/* Small-M products with a row-major B (csb == 1): each row of C is built as a
 * sum of scaled rows of B, streaming B once per row of A without packing.
 * Stamped out twice: portable, and compiled for AVX2 (same source). */
#define DEFINE_ROWS_KERNEL(NAME, ATTR)                                                       \
  ATTR static void NAME(int64_t M, int64_t N, int64_t K, float alpha, const float *A,      \
                        int64_t rsa, int64_t csa, const float *B, int64_t rsb, float *C,   \
                        int64_t ldc) {                                                     \
    for (int64_t i = 0; i < M; i++) {                                                      \
      float *cr = C + i * ldc;                                                             \
      const float *ar = A + i * rsa;                                                       \
      int64_t k = 0;                                                                       \
      for (; k + 1 < K; k += 2) {                                                          \
        float s0 = alpha * ar[k * csa], s1 = alpha * ar[(k + 1) * csa];                    \
        const float *b0 = B + k * rsb, *b1 = b0 + rsb;                                     \
        int64_t j = 0;                                                                     \
        for (; j + 8 <= N; j += 8)                                                         \
          v8_store(cr + j, v8_load(cr + j) + s0 * v8_load(b0 + j) + s1 * v8_load(b1 + j)); \
        for (; j < N; j++) cr[j] = cr[j] + s0 * b0[j] + s1 * b1[j];                        \
      }                                                                                    \
      for (; k < K; k++) {                                                                 \
        float s0 = alpha * ar[k * csa];                                                    \
        const float *b0 = B + k * rsb;                                                     \
        int64_t j = 0;                                                                     \
        for (; j + 8 <= N; j += 8) v8_store(cr + j, v8_load(cr + j) + s0 * v8_load(b0 + j)); \
        for (; j < N; j++) cr[j] = cr[j] + s0 * b0[j];                                     \
      }                                                                                    \
    }                                                                                      \
  }

DEFINE_ROWS_KERNEL(gemm_rows, )
#if PX_X86_KERNELS
DEFINE_ROWS_KERNEL(gemm_rows_avx2, __attribute__((target("avx2,fma"))))
#endif

/* Products with a column-major B (rsb == 1: a transposed weight, W[n, k])
 * and few rows: dot products, without packing B (which would cost as much
 * as the product itself). Tiles of 4 rows x 3 columns keep 12 accumulators
 * in registers, so each vector load feeds three or four multiply-adds; one
 * column block (3 rows of W) is reused for every row of A while it sits in
 * L1. C += alpha * A @ B. Stamped out twice, like the rows kernel. */
#define DEFINE_DOTS_KERNEL(NAME, ATTR)                                                        \
  ATTR static float NAME##_hsum(const v8f *v) {                                             \
    float s = 0.0f;                                                                         \
    for (int l = 0; l < 8; l++) s += (*v)[l];                                               \
    return s;                                                                               \
  }                                                                                         \
  ATTR static void NAME(int64_t M, int64_t N, int64_t K, float alpha, const float *A,       \
                        int64_t rsa, int64_t csa, const float *B, int64_t csb, float *C,    \
                        int64_t ldc) {                                                      \
    int64_t j = 0;                                                                          \
    const int64_t K8 = csa == 1 ? K / 8 * 8 : 0;                                            \
    for (; j + 3 <= N; j += 3) {                                                            \
      const float *b0 = B + j * csb, *b1 = b0 + csb, *b2 = b1 + csb;                        \
      int64_t i = 0;                                                                        \
      for (; i + 4 <= M && K8; i += 4) {                                                    \
        const float *a0 = A + i * rsa, *a1 = a0 + rsa, *a2 = a1 + rsa, *a3 = a2 + rsa;      \
        v8f s00 = {0}, s01 = {0}, s02 = {0}, s10 = {0}, s11 = {0}, s12 = {0};               \
        v8f s20 = {0}, s21 = {0}, s22 = {0}, s30 = {0}, s31 = {0}, s32 = {0};               \
        for (int64_t k = 0; k < K8; k += 8) {                                               \
          v8f w0 = v8_load(b0 + k), w1 = v8_load(b1 + k), w2 = v8_load(b2 + k);             \
          v8f x = v8_load(a0 + k);                                                          \
          s00 += x * w0; s01 += x * w1; s02 += x * w2;                                      \
          x = v8_load(a1 + k);                                                              \
          s10 += x * w0; s11 += x * w1; s12 += x * w2;                                      \
          x = v8_load(a2 + k);                                                              \
          s20 += x * w0; s21 += x * w1; s22 += x * w2;                                      \
          x = v8_load(a3 + k);                                                              \
          s30 += x * w0; s31 += x * w1; s32 += x * w2;                                      \
        }                                                                                   \
        float t[4][3] = {{NAME##_hsum(&s00), NAME##_hsum(&s01), NAME##_hsum(&s02)},            \
                         {NAME##_hsum(&s10), NAME##_hsum(&s11), NAME##_hsum(&s12)},            \
                         {NAME##_hsum(&s20), NAME##_hsum(&s21), NAME##_hsum(&s22)},            \
                         {NAME##_hsum(&s30), NAME##_hsum(&s31), NAME##_hsum(&s32)}};           \
        for (int r = 0; r < 4; r++) {                                                       \
          const float *ar = A + (i + r) * rsa;                                              \
          for (int64_t k = K8; k < K; k++) {                                                \
            t[r][0] += ar[k] * b0[k];                                                       \
            t[r][1] += ar[k] * b1[k];                                                       \
            t[r][2] += ar[k] * b2[k];                                                       \
          }                                                                                 \
          float *cr = C + (i + r) * ldc + j;                                                \
          cr[0] += alpha * t[r][0];                                                         \
          cr[1] += alpha * t[r][1];                                                         \
          cr[2] += alpha * t[r][2];                                                         \
        }                                                                                   \
      }                                                                                     \
      for (; i < M; i++) {                                                                  \
        const float *ar = A + i * rsa;                                                      \
        v8f s0 = {0}, s1 = {0}, s2 = {0};                                                   \
        for (int64_t k = 0; k < K8; k += 8) {                                               \
          v8f x = v8_load(ar + k);                                                          \
          s0 += x * v8_load(b0 + k);                                                        \
          s1 += x * v8_load(b1 + k);                                                        \
          s2 += x * v8_load(b2 + k);                                                        \
        }                                                                                   \
        float t0 = NAME##_hsum(&s0), t1 = NAME##_hsum(&s1), t2 = NAME##_hsum(&s2);             \
        for (int64_t k = K8; k < K; k++) {                                                  \
          t0 += ar[k * csa] * b0[k];                                                        \
          t1 += ar[k * csa] * b1[k];                                                        \
          t2 += ar[k * csa] * b2[k];                                                        \
        }                                                                                   \
        float *cr = C + i * ldc + j;                                                        \
        cr[0] += alpha * t0;                                                                \
        cr[1] += alpha * t1;                                                                \
        cr[2] += alpha * t2;                                                                \
      }                                                                                     \
    }                                                                                       \
    for (; j < N; j++) {                                                                    \
      const float *bc = B + j * csb;                                                        \
      for (int64_t i = 0; i < M; i++) {                                                     \
        const float *ar = A + i * rsa;                                                      \
        float t = 0.0f;                                                                     \
        for (int64_t k = 0; k < K; k++) t += ar[k * csa] * bc[k];                           \
        C[i * ldc + j] += alpha * t;                                                        \
      }                                                                                     \
    }                                                                                       \
  }

DEFINE_DOTS_KERNEL(gemm_dots, )
#if PX_X86_KERNELS
DEFINE_DOTS_KERNEL(gemm_dots_avx2, __attribute__((target("avx2,fma"))))
#endif

size_t px_gemm_f32_work_size(int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0 || K <= 0) return 64;
  int64_t kc = K < GEMM_KC ? K : GEMM_KC;
  int64_t mc = M < GEMM_MC ? M : GEMM_MC;
  int64_t nc = N < GEMM_NC ? N : GEMM_NC;
  int64_t floats = (mc + GEMM_MR_MAX) * kc + kc * (nc + GEMM_NR_MAX);
  return (size_t)floats * sizeof(float) + 128;
}

int px_gemm_f32_panel_width(void) { return gemm_select().nr; }

int px_gemm_f32_packed(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t rsa, int64_t csa, px_gemm_pack_fn pack_b,
                       const void *bsrc, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0 || alpha == 0.0f) { /* BLAS semantics: A and B are not read */
    scale_rows(M, N, beta, C, ldc);
    return 0;
  }
  gemm_arch g = gemm_select();
  if (!work) {
    work = px_scratch(ctx, px_gemm_f32_work_size(M, N, K));
    if (!work) return PYEXEC_ERR_EXECUTION;
  }
  int64_t kc_max = K < GEMM_KC ? K : GEMM_KC;
  int64_t mc_max = M < GEMM_MC ? M : GEMM_MC;
  float *pa = (float *)work;
  float *pb = pa + ((mc_max + GEMM_MR_MAX) * kc_max + 15) / 16 * 16;
  const int mr = g.mr, nr = g.nr;

  /* Depth blocks of equal size (K = 576 gives 3 x 192, not 256 + 256 + 64). */
  int64_t kblocks = (K + GEMM_KC - 1) / GEMM_KC;
  int64_t kstep = (K + kblocks - 1) / kblocks;
  for (int64_t jc = 0; jc < N; jc += GEMM_NC) {
    int64_t nc = N - jc < GEMM_NC ? N - jc : GEMM_NC;
    for (int64_t pc = 0; pc < K; pc += kstep) {
      int64_t kc = K - pc < kstep ? K - pc : kstep;
      float beta_blk = pc == 0 ? beta : 1.0f;
      pack_b(bsrc, pc, kc, jc, nc, nr, pb);
      for (int64_t ic = 0; ic < M; ic += GEMM_MC) {
        int64_t mc = M - ic < GEMM_MC ? M - ic : GEMM_MC;
        pack_a(mc, kc, A + ic * rsa + pc * csa, rsa, csa, mr, pa);
        for (int64_t jr = 0; jr < nc; jr += nr) {
          int n = (int)(nc - jr < nr ? nc - jr : nr);
          const float *bp = pb + (jr / nr) * nr * kc;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            int m = (int)(mc - ir < mr ? mc - ir : mr);
            g.ukr(kc, pa + (ir / mr) * mr * kc, bp, C + (ic + ir) * ldc + jc + jr, ldc, alpha,
                  beta_blk, m, n);
          }
        }
      }
    }
  }
  return 0;
}

int px_gemm_f32(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t rsa, int64_t csa, const float *B, int64_t rsb,
                int64_t csb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0 || alpha == 0.0f) {
    scale_rows(M, N, beta, C, ldc);
    return 0;
  }
  gemm_arch g = gemm_select();
  /* Few rows: stream B directly, no packing (a transposed B up to more rows:
   * packing it is a transpose, as costly as the product at small M). */
  if ((M < g.mr && (csb == 1 || rsb == 1)) || (rsb == 1 && csa == 1 && M <= GEMM_DOTS_MAX_M)) {
    scale_rows(M, N, beta, C, ldc);
    if (csb == 1) {
#if PX_X86_KERNELS
      if (g.avx2) {
        gemm_rows_avx2(M, N, K, alpha, A, rsa, csa, B, rsb, C, ldc);
        return 0;
      }
#endif
      gemm_rows(M, N, K, alpha, A, rsa, csa, B, rsb, C, ldc);
    } else {
#if PX_X86_KERNELS
      if (g.avx2) {
        gemm_dots_avx2(M, N, K, alpha, A, rsa, csa, B, csb, C, ldc);
        return 0;
      }
#endif
      gemm_dots(M, N, K, alpha, A, rsa, csa, B, csb, C, ldc);
    }
    return 0;
  }
  strided_b sb = {B, rsb, csb};
  return px_gemm_f32_packed(ctx, work, M, N, K, alpha, A, rsa, csa, pack_b_strided, &sb, beta, C,
                            ldc);
}

/* Depth blocks of equal size (K = 576 gives 3 x 192, not 256 + 256 + 64). */
static int64_t depth_step(int64_t K) {
  int64_t kblocks = (K + GEMM_KC - 1) / GEMM_KC;
  return (K + kblocks - 1) / kblocks;
}

size_t px_gemm_f32_prepack_size(int64_t N, int64_t K) {
  if (N <= 0 || K <= 0) return 64;
  int64_t nr = gemm_select().nr, floats = 0;
  for (int64_t jc = 0; jc < N; jc += GEMM_NC) {
    int64_t nc = N - jc < GEMM_NC ? N - jc : GEMM_NC;
    floats += K * ((nc + nr - 1) / nr * nr);
  }
  return (size_t)floats * sizeof(float);
}

/* Block (jc, pc) follows every block of the column blocks before jc and the
 * depth blocks before pc in jc's column block, each kc x ceil(nc/nr)*nr. */
void px_gemm_f32_prepack_b(int64_t N, int64_t K, const float *B, int64_t rsb, int64_t csb,
                           float *pb) {
  if (N <= 0 || K <= 0) return;
  const int nr = gemm_select().nr;
  const int64_t kstep = depth_step(K);
  strided_b sb = {B, rsb, csb};
  for (int64_t jc = 0; jc < N; jc += GEMM_NC) {
    int64_t nc = N - jc < GEMM_NC ? N - jc : GEMM_NC;
    int64_t ncr = (nc + nr - 1) / nr * nr;
    for (int64_t pc = 0; pc < K; pc += kstep) {
      int64_t kc = K - pc < kstep ? K - pc : kstep;
      pack_b_strided(&sb, pc, kc, jc, nc, nr, pb);
      pb += kc * ncr;
    }
  }
}

/* The epilogue on an m x n tile at c: bias add, then the clamp
 * (clamp false: none). max(lo, v) keeps a NaN v, as XNNPACK's kernels do. */
static void tile_epilogue(float *c, int64_t ldc, int m, int n, const float *bias, bool clamp,
                          float lo, float hi) {
  for (int i = 0; i < m; i++, c += ldc) {
    if (bias)
      for (int j = 0; j < n; j++) c[j] += bias[j];
    if (clamp)
      for (int j = 0; j < n; j++) {
        float v = c[j] < lo ? lo : c[j];
        c[j] = v > hi ? hi : v;
      }
  }
}

#if PX_X86_KERNELS
__attribute__((target("avx2,fma"))) static void tile_epilogue_avx2(float *c, int64_t ldc, int m, int n,
                                                                   const float *bias, bool clamp,
                                                                   float lo, float hi) {
  if (n != 16) {
    tile_epilogue(c, ldc, m, n, bias, clamp, lo, hi);
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
#endif

int px_gemm_f32_prepacked(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t rsa, int64_t csa, px_gemm_pack_a_fn pack_rows,
                          const void *asrc, const float *pb, float beta, float *C, int64_t ldc) {
  return px_gemm_f32_prepacked_ep(ctx, work, M, N, K, A, rsa, csa, pack_rows, asrc, pb, beta, C, ldc,
                                  NULL);
}

int px_gemm_f32_prepacked_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t rsa, int64_t csa, px_gemm_pack_a_fn pack_rows,
                             const void *asrc, const float *pb, float beta, float *C, int64_t ldc,
                             const px_gemm_epilogue *ep) {
  if (M <= 0 || N <= 0) return 0;
  const bool clamp = ep && !(ep->lo == -INFINITY && ep->hi == INFINITY);
  const float *bias = ep ? ep->bias : NULL;
  const bool epi = bias || clamp;
  if (K <= 0) {
    scale_rows(M, N, beta, C, ldc);
    if (epi)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j += 16)
          tile_epilogue(C + i * ldc + j, ldc, 1, (int)(N - j < 16 ? N - j : 16), bias ? bias + j : NULL,
                        clamp, ep->lo, ep->hi);
    return 0;
  }
  gemm_arch g = gemm_select();
  if (!work) {
    work = px_scratch(ctx, px_gemm_f32_work_size(M, N, K));
    if (!work) return PYEXEC_ERR_EXECUTION;
  }
  float *pa = (float *)work;
  const int mr = g.mr, nr = g.nr;
  const int64_t kstep = depth_step(K);
  for (int64_t jc = 0; jc < N; jc += GEMM_NC) {
    int64_t nc = N - jc < GEMM_NC ? N - jc : GEMM_NC;
    int64_t ncr = (nc + nr - 1) / nr * nr;
    for (int64_t pc = 0; pc < K; pc += kstep) {
      int64_t kc = K - pc < kstep ? K - pc : kstep;
      float beta_blk = pc == 0 ? beta : 1.0f;
      const bool last = pc + kc == K;
      for (int64_t ic = 0; ic < M; ic += GEMM_MC) {
        int64_t mc = M - ic < GEMM_MC ? M - ic : GEMM_MC;
        if (pack_rows)
          pack_rows(asrc, ic, mc, pc, kc, mr, pa);
        else
          pack_a(mc, kc, A + ic * rsa + pc * csa, rsa, csa, mr, pa);
        for (int64_t jr = 0; jr < nc; jr += nr) {
          int n = (int)(nc - jr < nr ? nc - jr : nr);
          const float *bp = pb + (jr / nr) * nr * kc;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            int m = (int)(mc - ir < mr ? mc - ir : mr);
            float *ct = C + (ic + ir) * ldc + jc + jr;
            g.ukr(kc, pa + (ir / mr) * mr * kc, bp, ct, ldc, 1.0f, beta_blk, m, n);
            if (epi && last) {
#if PX_X86_KERNELS
              if (g.avx2) {
                tile_epilogue_avx2(ct, ldc, m, n, bias ? bias + jc + jr : NULL, clamp, ep->lo, ep->hi);
                continue;
              }
#endif
              tile_epilogue(ct, ldc, m, n, bias ? bias + jc + jr : NULL, clamp, ep->lo, ep->hi);
            }
          }
        }
      }
      pb += kc * ncr;
    }
  }
  return 0;
}
