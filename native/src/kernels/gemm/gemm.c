/*
 * gemm.c - the cache-blocked float32 GEMM engine (gemm.h) that matrix
 * products (linalg.c), linear (linear.c) and convolution (conv.c) call.
 *
 * The GEMM follows the usual Goto/BLIS structure: B is packed in KC x NC
 * blocks into NR-wide column panels, A in MC x KC blocks into MR-high row
 * panels (or read in place when its rows are contiguous), and a
 * register-tiled micro-kernel multiplies one MR x NR tile. The micro-kernel,
 * and with it MR and NR, is chosen once at run time (gemm_select, the one
 * selection point): a 512-bit 8 x 32 one on AVX-512 machines (gemm_x86.c,
 * with the indirect convolution block that feeds it from tap pointers), a
 * 6 x 16 AVX2/FMA one on AVX2 machines, a 6 x 16 NEON one on AArch64
 * (gemm_neon.c, with its packing, epilogue and small-M paths), a portable 4 x 8
 * one written with GCC vector extensions elsewhere.
 */
#include "kernels/gemm/gemm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/parallel.h"

/* AArch64: the NEON 6 x 16 kernel and its helpers (gemm_neon.c) */
#include "kernels/gemm/gemm_neon.h"

/* x86-64: the AVX-512 8 x 32 kernels and the indirect convolution block
 * (gemm_x86.c) */
#include "kernels/gemm/gemm_x86.h"
#include "kernels/gemm/tile.h"

/* AVX2/FMA variants, chosen at run time; define PX_PORTABLE_KERNELS to build
 * only the portable code (to test it on an AVX2 machine). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(PX_PORTABLE_KERNELS)
#define PX_X86_KERNELS 1
#else
#define PX_X86_KERNELS 0
#endif

#define GEMM_MC 120  /* rows of A per packed block (multiple of 6 and 4) */
#define GEMM_KC PX_GEMM_KC_MAX /* most depth per packed block */
#define GEMM_NC 512 /* columns of B per packed block (multiple of every NR): kc x NC in L2 */
#define GEMM_MR_MAX PX_GEMM_MR_MAX
#define GEMM_DOTS_MAX_M 32 /* most rows of A multiplied by a transposed B without packing */
#define GEMM_NR_MAX PX_GEMM_NR_MAX

typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
/* Unaligned, aliasing views for loads and stores through float pointers. */
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
#define v4_load(p) (*(const v4f_u *)(p))
#define v4_store(p, v) (*(v4f_u *)(p) = (v))
#define v8_load(p) (*(const v8f_u *)(p))
#define v8_store(p, v) (*(v8f_u *)(p) = (v))

/* A micro-kernel: C tile (mr x nr of an MR x NR tile, mr <= MR, nr <= NR)
 * = alpha * A B + beta * C, over depth kc. Element (i, p) of A is at
 * a[i * rsa + p * csa]: a packed row panel passes rsa = 1, csa = MR (rows past
 * mr zero-filled); A read in place passes its row stride and csa = 1, and the
 * kernel must not read rows past mr (it reads row 0 again in their place).
 * b is one packed kc x NR column panel (columns past nr zero-filled). */
typedef void (*ukr_fn)(int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
                       float *c, int64_t ldc, float alpha, float beta, int mr, int nr);


/* Portable 4 x 8 micro-kernel: a is packed 4 per k, b 8 per k. */
static void ukr_4x8(int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
                    float *c, int64_t ldc, float alpha, float beta, int mr, int nr) {
  v4f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  const float *a0 = a, *a1 = a + (mr > 1 ? rsa : 0), *a2 = a + (mr > 2 ? 2 * rsa : 0);
  const float *a3 = a + (mr > 3 ? 3 * rsa : 0);
  for (int64_t p = 0, o = 0; p < kc; p++, o += csa) {
    v4f b0 = v4_load(b), b1 = v4_load(b + 4);
    c00 += a0[o] * b0;
    c01 += a0[o] * b1;
    c10 += a1[o] * b0;
    c11 += a1[o] * b1;
    c20 += a2[o] * b0;
    c21 += a2[o] * b1;
    c30 += a3[o] * b0;
    c31 += a3[o] * b1;
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
  px_gemm_tile_store(t, 8, c, ldc, alpha, beta, mr, nr);
}


/* The selected micro-kernel and what the rest of the engine needs to know
 * about it. How an ISA kernel registers: write a ukr_fn (see its contract
 * above) for an MR x NR tile with MR <= GEMM_MR_MAX and NR <= GEMM_NR_MAX, NR
 * a multiple of 8 (B panels are packed NR wide by pack_b_strided, A panels MR
 * high by pack_a, both generic over mr / nr), and add one branch to
 * gemm_select below filling {mr, nr, ukr} when the CPU has the
 * instructions (checked at run time on x86; on AArch64 NEON is always
 * there). The isa field only picks the vector helpers beside the kernel
 * (packing, epilogue, small-M paths); a new ISA leaves it GEMM_ISA_PORTABLE
 * to use their portable versions. */
enum { GEMM_ISA_PORTABLE, GEMM_ISA_AVX2, GEMM_ISA_AVX512, GEMM_ISA_NEON };

typedef struct gemm_arch {
  int mr, nr;
  ukr_fn ukr;
  bool avx2; /* AVX2/FMA helpers usable (true for the AVX2 and AVX-512 kernels) */
  int isa;
} gemm_arch;

static gemm_arch gemm_detect(void) {
  gemm_arch g = {4, 8, ukr_4x8, false, GEMM_ISA_PORTABLE};
#if PX_X86_KERNELS
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f")) {
    g = (gemm_arch){8, 32, px_ukr_f32_8x32_avx512, true, GEMM_ISA_AVX512};
  } else if (avx2) {
    g = (gemm_arch){6, 16, px_ukr_f32_6x16_avx2, true, GEMM_ISA_AVX2};
  }
#endif
#if defined(__aarch64__) && PX_NEON_KERNELS /* NEON: part of every AArch64 CPU */
  g = (gemm_arch){PX_NEON_GEMM_MR, PX_NEON_GEMM_NR, px_ukr_f32_6x16_neon, false, GEMM_ISA_NEON};
#endif
  return g;
}

/* The one selection point: detected once, the same for every call after
 * (weights prepacked at load must match the kernel that multiplies them).
 * PYEXEC_GEMM_ISA=avx2 / portable chooses a lesser kernel (for tests and
 * benchmarks of the fallbacks on an AVX-512 machine). */
static gemm_arch gemm_cached;
static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;

static void gemm_init(void) {
  gemm_arch g = gemm_detect();
  const char *env = getenv("PYEXEC_GEMM_ISA");
#if PX_X86_KERNELS
  if (env && g.isa == GEMM_ISA_AVX512 && strcmp(env, "avx2") == 0)
    g = (gemm_arch){6, 16, px_ukr_f32_6x16_avx2, true, GEMM_ISA_AVX2};
#endif
  if (env && strcmp(env, "portable") == 0) g = (gemm_arch){4, 8, ukr_4x8, false, GEMM_ISA_PORTABLE};
  gemm_cached = g;
}

static gemm_arch gemm_select(void) {
  pthread_once(&gemm_once, gemm_init);
  return gemm_cached;
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


/* Packs depth [pc, pc + kc) x columns [jc, jc + nc) of a strided B into
 * nr-wide panels, k-major, zero-padding the last panel (a px_gemm_pack_fn). */
static void pack_b_strided(const void *src, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                           int nr, float *pb) {
  const strided_b *sb = src;
  const int64_t rsb = sb->rsb, csb = sb->csb;
  const float *B = sb->B + pc * rsb + jc * csb;
  const int64_t pstride = (int64_t)nr * kc; /* floats between panels */
#if PX_X86_KERNELS
  if (rsb == 1 && csb != 1 && nr % 8 == 0 && gemm_select().avx2) {
    int64_t done = px_pack_b_trans_avx2(B, csb, kc, nc, nr, pb);
    B += done * csb;
    pb += done / nr * pstride;
    nc -= done;
  }
#endif
#if defined(__aarch64__) && PX_NEON_KERNELS
  if (rsb == 1 && csb != 1 && nr == PX_NEON_GEMM_NR && gemm_select().isa == GEMM_ISA_NEON) {
    int64_t done = px_pack_b_trans16_neon(B, csb, kc, nc, pb);
    B += done * csb;
    pb += done / nr * pstride;
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
      if (nr == 32)
        for (; j0 < full; j0 += 32, dst += pstride) {
          v8_store(dst, v8_load(sp + j0));
          v8_store(dst + 8, v8_load(sp + j0 + 8));
          v8_store(dst + 16, v8_load(sp + j0 + 16));
          v8_store(dst + 24, v8_load(sp + j0 + 24));
        }
      else if (nr == 16)
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


/* The epilogue with one bias per row (rbias[i], NCHW convolution's output
 * channels), then the clamp. */
static void tile_epilogue_rows(float *c, int64_t ldc, int m, int n, const float *rbias, bool clamp,
                               float lo, float hi) {
  for (int i = 0; i < m; i++, c += ldc) {
    const float b = rbias ? rbias[i] : 0.0f;
    for (int j = 0; j < n; j++) {
      float v = c[j] + b;
      if (clamp) {
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
      }
      c[j] = v;
    }
  }
}


/* Depth blocks of equal size (K = 576 gives 3 x 192, not 256 + 256 + 64). */
static int64_t depth_step(int64_t K) {
  int64_t kblocks = (K + GEMM_KC - 1) / GEMM_KC;
  return (K + kblocks - 1) / kblocks;
}

/* Each thread's packing buffers: an A block (MC + MR) x KC, then a B block
 * KC x (NC + NR) (used when B is packed per call), in floats, each a
 * multiple of 16 floats (64 bytes). */
static void thread_floats(int64_t M, int64_t N, int64_t K, int64_t *pa, int64_t *pb) {
  int64_t kc = K < GEMM_KC ? K : GEMM_KC;
  int64_t mc = M < GEMM_MC ? M : GEMM_MC;
  int64_t nc = N < GEMM_NC ? N : GEMM_NC;
  *pa = ((mc + GEMM_MR_MAX) * kc + 15) / 16 * 16;
  *pb = (kc * (nc + GEMM_NR_MAX) + 15) / 16 * 16;
}

size_t px_gemm_f32_work_size(int64_t M, int64_t N, int64_t K) {
  return (px_gemm_f32_thread_work_size(M, N, K) - 128) * (size_t)px_parallel_threads() + 128;
}

size_t px_gemm_f32_thread_work_size(int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0 || K <= 0) return 192;
  int64_t pa, pb;
  thread_floats(M, N, K, &pa, &pb);
  return (size_t)(pa + pb) * sizeof(float) + 128;
}

int px_gemm_f32_panel_width(void) { return gemm_select().nr; }

/* One product, split into tasks for px_parallel_for. The tile grid (rows at
 * multiples of MR, columns at multiples of NR, depth blocks of depth_step)
 * is the same however the tasks fall, and every output tile is computed by
 * one task in the same order, so results do not depend on the thread
 * count. */
typedef struct gemm_job {
  gemm_arch g;
  int64_t M, N, K, kstep;
  float alpha, beta;
  const float *A;
  int64_t rsa, csa;
  px_gemm_pack_a_fn pack_rows; /* or NULL: A strided (read in place when csa == 1) */
  const void *asrc;
  px_gemm_pack_fn pack_b; /* B packed per call (pb NULL) */
  const void *bsrc;
  const float *pb; /* B prepacked by px_gemm_f32_prepack_b */
  float *C;
  int64_t ldc;
  const float *bias;
  bool bias_rows; /* bias[i] per row instead of bias[j] per column */
  bool clamp, epi;
  float lo, hi;
  void (*post)(int64_t n, float *y); /* px_gemm_epilogue's post, or NULL */
  float *work;
  int64_t pa_floats, pb_floats; /* per thread */
  const uint16_t *pb16;         /* B in 16-bit panels read in place (px_gemm_h16_prepack_b), or NULL */
  bool bf16;                    /* pb16 holds bfloat16 (else float16) */
  const px_gemm_conv *cv;       /* A: a convolution's input read through tap pointers */
  const float *zeros;           /* cv->Cg * cv->KW zeros, the padding's source */
  int64_t rows, cols;           /* rows and columns per task (multiples of MR and NR) */
  int64_t ncols;                /* column chunks */
} gemm_job;

/* Rows [ic, ic + mc) x columns [j0, j1) (j0 a multiple of NR) of depth block
 * [pc, pc + kc), B's panels for those columns at bp (panel after panel, each
 * kc x NR); A packed into pa first unless it is read in place. With bp16
 * (not NULL), B is 16-bit panels read in place and widened in registers
 * instead (j->pb16, bp16 the first column's panel at depth pc): panels run
 * the whole depth, so the next one is K * NR values on, and every tile goes
 * through the 8 x 32 (or AVX2 6 x 16) kernel, one-row tiles too (the same
 * bits as the AVX-512 row loop). */
static void gemm_block(const gemm_job *j, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                       int64_t j0, int64_t j1, const float *bp, const uint16_t *bp16, float *pa) {
  const int mr = j->g.mr, nr = j->g.nr;
  const float *a;
  int64_t rs, cs;
  if (j->pack_rows) {
    j->pack_rows(j->asrc, ic, mc, pc, kc, mr, pa);
    a = pa, rs = 1, cs = mr;
  } else if (j->csa == 1 && (j->rsa % 1024 != 0 || mc == 1)) {
    /* in place; rows 4 KiB apart (or a multiple) would all fall in the same
     * L1 set and evict each other, so those are packed (one row has no
     * other to evict) */
    a = j->A + ic * j->rsa + pc, rs = j->rsa, cs = 1;
  } else {
    pack_a(mc, kc, j->A + ic * j->rsa + pc * j->csa, j->rsa, j->csa, mr, pa);
    a = pa, rs = 1, cs = mr;
  }
  const float beta_blk = pc == 0 ? j->beta : 1.0f;
  const bool last = pc + kc == j->K && j->epi;
  (void)bp16; /* NULL where there is no x86 kernel to read it */
#if PX_AVX512_KERNELS
  if (!bp16 && mc == 1 && cs == 1 && j->g.isa == GEMM_ISA_AVX512) { /* one row (a decode step): stream the panels */
    px_tile_ep ep = {j->bias ? j->bias + (j->bias_rows ? ic : j0) : NULL, j->bias_rows, j->clamp, j->lo, j->hi};
    px_gemv_f32_avx512(kc, a, bp, j1 - j0, j->C + ic * j->ldc + j0, j->alpha, beta_blk, last ? &ep : NULL);
    return;
  }
#endif
  for (int64_t jr = j0; jr < j1; jr += nr) {
    int n = (int)(j1 - jr < nr ? j1 - jr : nr);
    const float *bq = bp + (jr - j0) * kc; /* this column's panel */
    for (int64_t ir = 0; ir < mc; ir += mr) {
      int m = (int)(mc - ir < mr ? mc - ir : mr);
      float *ct = j->C + (ic + ir) * j->ldc + jr;
      const float *at = cs == 1 ? a + ir * rs : a + ir * kc;
#if PX_AVX512_KERNELS
      const uint16_t *bq16 = bp16 ? bp16 + (jr - j0) * j->K : NULL;
      if (j->g.isa == GEMM_ISA_AVX512 && (last || bq16)) { /* the epilogue in registers */
        px_tile_ep ep = {j->bias ? j->bias + (j->bias_rows ? ic + ir : jr) : NULL, j->bias_rows,
                         j->clamp, j->lo, j->hi};
        if (bq16)
          px_ukr_h16_8x32_avx512_ep(kc, at, rs, cs, bq16, j->bf16, ct, j->ldc, j->alpha, beta_blk, m, n,
                                    last ? &ep : NULL);
        else
          px_ukr_f32_8x32_avx512_ep(kc, at, rs, cs, bq, ct, j->ldc, j->alpha, beta_blk, m, n, &ep);
        continue;
      }
      if (bq16) /* AVX2 */
        px_ukr_h16_6x16_avx2(kc, at, rs, cs, bq16, j->bf16, ct, j->ldc, j->alpha, beta_blk, m, n);
      else
#endif
        j->g.ukr(kc, at, rs, cs, bq, ct, j->ldc, j->alpha, beta_blk, m, n);
      if (last && j->bias_rows) {
        tile_epilogue_rows(ct, j->ldc, m, n, j->bias ? j->bias + ic + ir : NULL, j->clamp, j->lo, j->hi);
      } else if (last) {
        const float *bias = j->bias ? j->bias + jr : NULL;
#if PX_X86_KERNELS
        if (j->g.avx2) {
          px_gemm_tile_epilogue_avx2(ct, j->ldc, m, n, bias, j->clamp, j->lo, j->hi);
          continue;
        }
#endif
#if defined(__aarch64__) && PX_NEON_KERNELS
        if (j->g.isa == GEMM_ISA_NEON) {
          px_tile_epilogue_neon(ct, j->ldc, m, n, bias, j->clamp, j->lo, j->hi);
          continue;
        }
#endif
        px_gemm_tile_epilogue(ct, j->ldc, m, n, bias, j->clamp, j->lo, j->hi);
      }
    }
  }
}

/* The epilogue's post over rows [i0, i0 + m) x columns [c0, c1): one call
 * when they are whole rows, which lie end to end (post is elementwise, so
 * the bits are the same; a 16-channel stem's Hardswish was one call per
 * 16 floats, a quarter of the layer's time). */
static void post_rows(void (*post)(int64_t, float *), float *C, int64_t ldc, int64_t i0, int64_t m,
                      int64_t c0, int64_t c1) {
  if (c0 == 0 && c1 == ldc) {
    post(m * ldc, C + i0 * ldc);
    return;
  }
  for (int64_t i = i0; i < i0 + m; i++) post(c1 - c0, C + i * ldc + c0);
}

/* Task t of a prepacked product: row block t / ncols, column chunk t % ncols. */
static void gemm_prepacked_task(void *arg, int64_t begin, int64_t end, int tid) {
  const gemm_job *j = arg;
  float *pa = j->work + (int64_t)tid * (j->pa_floats + j->pb_floats);
  for (int64_t t = begin; t < end; t++) {
    int64_t r0 = t / j->ncols * j->rows, r1 = r0 + j->rows < j->M ? r0 + j->rows : j->M;
    int64_t n0 = t % j->ncols * j->cols, n1 = n0 + j->cols < j->N ? n0 + j->cols : j->N;
    for (int64_t jc = n0 / GEMM_NC * GEMM_NC; jc < n1; jc += GEMM_NC) {
      int64_t nc = j->N - jc < GEMM_NC ? j->N - jc : GEMM_NC;
      int64_t ncr = (nc + j->g.nr - 1) / j->g.nr * j->g.nr;
      int64_t c0 = n0 > jc ? n0 : jc, c1 = n1 < jc + nc ? n1 : jc + nc;
      for (int64_t pc = 0; pc < j->K; pc += j->kstep) {
        int64_t kc = j->K - pc < j->kstep ? j->K - pc : j->kstep;
        /* block (jc, pc): after the full column blocks before jc (K x NC
         * each) and the depth blocks before pc (kc x ncr each) */
        const float *bp = j->pb + jc * j->K + pc * ncr + (c0 - jc) * kc;
        for (int64_t ic = r0; ic < r1; ic += GEMM_MC) {
          int64_t mc = r1 - ic < GEMM_MC ? r1 - ic : GEMM_MC;
#if PX_AVX512_KERNELS
          if (j->cv) {
            const bool last = pc + kc == j->K && j->epi;
            px_tile_ep ep = {j->bias, j->bias_rows, j->clamp, j->lo, j->hi};
            px_gemm_conv_block_avx512(j->cv, j->zeros, ic, mc, pc, kc, c0, c1, bp, j->C, j->ldc,
                                      pc == 0 ? j->beta : 1.0f, last ? &ep : NULL);
          } else
#endif
          {
            gemm_block(j, ic, mc, pc, kc, c0, c1, bp, NULL, pa);
          }
          if (j->post && pc + kc == j->K) post_rows(j->post, j->C, j->ldc, ic, mc, c0, c1);
        }
      }
    }
  }
}

/* Task t of a product whose B is packed per call: column chunk t, every
 * row; the task packs its own columns of B. */
static void gemm_packed_task(void *arg, int64_t begin, int64_t end, int tid) {
  const gemm_job *j = arg;
  float *pa = j->work + (int64_t)tid * (j->pa_floats + j->pb_floats), *pb = pa + j->pa_floats;
  for (int64_t t = begin; t < end; t++) {
    int64_t n0 = t * j->cols, n1 = n0 + j->cols < j->N ? n0 + j->cols : j->N;
    for (int64_t jc = n0; jc < n1; jc += GEMM_NC) {
      int64_t nc = n1 - jc < GEMM_NC ? n1 - jc : GEMM_NC;
      for (int64_t pc = 0; pc < j->K; pc += j->kstep) {
        int64_t kc = j->K - pc < j->kstep ? j->K - pc : j->kstep;
        if (!j->pb16) j->pack_b(j->bsrc, pc, kc, jc, nc, j->g.nr, pb);
        for (int64_t ic = 0; ic < j->M; ic += GEMM_MC) {
          int64_t mc = j->M - ic < GEMM_MC ? j->M - ic : GEMM_MC;
          const uint16_t *bp16 = j->pb16 ? j->pb16 + jc * j->K + pc * j->g.nr : NULL;
          gemm_block(j, ic, mc, pc, kc, jc, jc + nc, pb, bp16, pa);
          if (j->post && pc + kc == j->K) post_rows(j->post, j->C, j->ldc, ic, mc, jc, jc + nc);
        }
      }
    }
  }
}

/* Fills the parts of a job every product shares and takes the work buffer. */
static int job_init(gemm_job *j, px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K) {
  j->g = gemm_select();
  j->M = M, j->N = N, j->K = K;
  j->kstep = depth_step(K);
  thread_floats(M, N, K, &j->pa_floats, &j->pb_floats);
  if (!work) {
    work = px_scratch(ctx, px_gemm_f32_work_size(M, N, K));
    if (!work) return PYEXEC_ERR_EXECUTION;
  }
  j->work = work;
  return 0;
}

/* The epilogue alone, over a whole M x N matrix (products whose depth or
 * alpha is zero). */
static void epilogue_all(int64_t M, int64_t N, float *C, int64_t ldc, const px_gemm_epilogue *ep,
                         bool clamp) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j += 16) {
      const int n = (int)(N - j < 16 ? N - j : 16);
      if (ep->bias_rows)
        tile_epilogue_rows(C + i * ldc + j, ldc, 1, n, ep->bias ? ep->bias + i : NULL, clamp, ep->lo,
                           ep->hi);
      else
        px_gemm_tile_epilogue(C + i * ldc + j, ldc, 1, n, ep->bias ? ep->bias + j : NULL, clamp, ep->lo,
                      ep->hi);
    }
  if (ep->post) post_rows(ep->post, C, ldc, 0, M, 0, N);
}

int px_gemm_f32_packed(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t rsa, int64_t csa, px_gemm_pack_fn pack_b,
                       const void *bsrc, float beta, float *C, int64_t ldc) {
  return px_gemm_f32_packed_ep(ctx, work, M, N, K, alpha, A, rsa, csa, pack_b, bsrc, beta, C, ldc,
                               NULL);
}

/* px_gemm_f32_packed_ep, or with pb16 (not NULL) B's 16-bit panels read in
 * place by the AVX-512 kernel instead of packed by pack_b. */
static int packed_product(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                          int64_t rsa, int64_t csa, px_gemm_pack_fn pack_b, const void *bsrc,
                          const uint16_t *pb16, bool bf16, float beta, float *C, int64_t ldc,
                          const px_gemm_epilogue *ep) {
  if (M <= 0 || N <= 0) return 0;
  const bool clamp = ep && !(ep->lo == -INFINITY && ep->hi == INFINITY);
  const bool epi = ep && (ep->bias || clamp);
  if (K <= 0 || alpha == 0.0f) { /* BLAS semantics: A and B are not read */
    scale_rows(M, N, beta, C, ldc);
    if (ep) epilogue_all(M, N, C, ldc, ep, clamp);
    return 0;
  }
  gemm_job j = {0};
  int rc = job_init(&j, ctx, work, M, N, K);
  if (rc) return rc;
  j.alpha = alpha, j.beta = beta;
  j.A = A, j.rsa = rsa, j.csa = csa;
  j.pack_b = pack_b, j.bsrc = bsrc;
  j.pb16 = pb16, j.bf16 = bf16;
  j.C = C, j.ldc = ldc;
  if (epi) {
    j.bias = ep->bias, j.bias_rows = ep->bias_rows, j.clamp = clamp, j.epi = true;
    j.lo = ep->lo, j.hi = ep->hi;
  }
  j.post = ep ? ep->post : NULL;
  /* column chunks: one per thread (each packs its own columns of B) */
  const int T = px_parallel_threads();
  const int64_t nr = j.g.nr, panels = (N + nr - 1) / nr;
  int64_t chunks = T > 1 ? (T < panels ? T : panels) : 1;
  j.cols = (panels + chunks - 1) / chunks * nr;
  if (T == 1) j.cols = N;
  chunks = (N + j.cols - 1) / j.cols;
  px_parallel_for(chunks, 1, M * N * K, gemm_packed_task, &j);
  return 0;
}

int px_gemm_f32_packed_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t rsa, int64_t csa, px_gemm_pack_fn pack_b,
                          const void *bsrc, float beta, float *C, int64_t ldc,
                          const px_gemm_epilogue *ep) {
  return packed_product(ctx, work, M, N, K, alpha, A, rsa, csa, pack_b, bsrc, NULL, false, beta, C, ldc, ep);
}

bool px_gemm_h16_panels_available(void) {
#if PX_AVX512_KERNELS
  const int isa = gemm_select().isa;
  return isa == GEMM_ISA_AVX512 || (isa == GEMM_ISA_AVX2 && px_cpu()->f16c);
#else
  return false;
#endif
}

/* Products of up to this many rows read the 16-bit panels in place and
 * widen them in registers (each vector once per row tile); taller ones
 * widen each block once into the packing buffer and share it among all
 * their tiles. A 1024 x 1024 float16 Linear at one thread (Sapphire
 * Rapids), widened per call -> in registers:
 *   AVX-512: 1 row 229 -> 93 us, 8 rows 259 -> 223, 32 rows 784 -> 521,
 *            64 and 128 rows even, 256 rows 4.7 -> 4.3 ms;
 *   AVX2 (two conversions per 12 multiply-adds, not 16): 1 row 280 -> 177,
 *            8 rows 428 -> 334, 32 rows 1036 -> 989, 64 rows 1.78 -> 1.91 ms.
 * (The widened copy of B streams through memory once per call; for few
 * rows the conversions in registers cost less than that.) */
int64_t px_gemm_h16_panel_rows(void) {
  if (!px_gemm_h16_panels_available()) return 0;
  return gemm_select().isa == GEMM_ISA_AVX512 ? 256 : 32;
}

int px_gemm_h16_panels_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa,
                          int64_t csa, const uint16_t *pb, bool bf16, float beta, float *C, int64_t ldc,
                          const px_gemm_epilogue *ep) {
  if (!px_gemm_h16_panels_available()) return px_fail(ctx, "16-bit panels read in place need the AVX-512 or AVX2 kernel");
  return packed_product(ctx, work, M, N, K, 1.0f, A, rsa, csa, NULL, NULL, pb, bf16, beta, C, ldc, ep);
}


/* A few-row product without packing, its columns in chunks of `cols` (a
 * multiple of 48). */
typedef struct small_job {
  gemm_arch g;
  int64_t M, N, K;
  float alpha;
  const float *A;
  int64_t rsa, csa;
  const float *B;
  int64_t rsb, csb;
  float *C;
  int64_t ldc, cols;
} small_job;

/* Columns [j0, j0 + n) of a few-row product, C already scaled by beta. */
static void small_cols(const small_job *j, int64_t j0, int64_t n) {
  const gemm_arch g = j->g;
  const int64_t M = j->M, K = j->K, rsa = j->rsa, csa = j->csa, ldc = j->ldc;
  const float alpha = j->alpha, *A = j->A;
  float *C = j->C + j0;
  if (j->csb == 1) {
    const float *B = j->B + j0;
#if PX_X86_KERNELS
    if (g.avx2) {
      gemm_rows_avx2(M, n, K, alpha, A, rsa, csa, B, j->rsb, C, ldc);
      return;
    }
#endif
#if defined(__aarch64__) && PX_NEON_KERNELS
    if (g.isa == GEMM_ISA_NEON) {
      px_gemm_rows_neon(M, n, K, alpha, A, rsa, csa, B, j->rsb, C, ldc);
      return;
    }
#endif
    gemm_rows(M, n, K, alpha, A, rsa, csa, B, j->rsb, C, ldc);
    return;
  }
  const float *B = j->B + j0 * j->csb;
#if PX_AVX512_KERNELS
  if (M == 1 && csa == 1 && g.isa == GEMM_ISA_AVX512) { /* a decode step's linear layer */
    px_gemv_dots_avx512(n, K, alpha, A, B, j->csb, C);
    return;
  }
#endif
#if PX_X86_KERNELS
  if (g.avx2) {
    gemm_dots_avx2(M, n, K, alpha, A, rsa, csa, B, j->csb, C, ldc);
    return;
  }
#endif
#if defined(__aarch64__) && PX_NEON_KERNELS
  if (g.isa == GEMM_ISA_NEON) {
    px_gemm_dots_neon(M, n, K, alpha, A, rsa, csa, B, j->csb, C, ldc);
    return;
  }
#endif
  gemm_dots(M, n, K, alpha, A, rsa, csa, B, j->csb, C, ldc);
}

static void small_task(void *arg, int64_t t0, int64_t t1, int tid) {
  (void)tid;
  const small_job *j = arg;
  for (int64_t t = t0; t < t1; t++) {
    int64_t j0 = t * j->cols, n = j->N - j0 < j->cols ? j->N - j0 : j->cols;
    small_cols(j, j0, n);
  }
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
   * packing it is a transpose, as costly as the product at small M), the
   * columns shared out over the threads. */
  if ((M < g.mr && (csb == 1 || rsb == 1)) || (rsb == 1 && csa == 1 && M <= GEMM_DOTS_MAX_M)) {
    scale_rows(M, N, beta, C, ldc);
    small_job sj = {g, M, N, K, alpha, A, rsa, csa, B, rsb, csb, C, ldc, 0};
    /* chunks of whole column groups of every kernel (the dot kernels' 3
     * and 4 columns, the row kernels' 8-wide vectors), so that a column is
     * computed the same way in any chunk: results independent of the
     * thread count */
    sj.cols = (N + 4 * px_parallel_threads() - 1) / (4 * px_parallel_threads());
    sj.cols = (sj.cols + 47) / 48 * 48;
    px_parallel_for((N + sj.cols - 1) / sj.cols, 1, M * N * K, small_task, &sj);
    return 0;
  }
  strided_b sb = {B, rsb, csb};
  return px_gemm_f32_packed(ctx, work, M, N, K, alpha, A, rsa, csa, pack_b_strided, &sb, beta, C,
                            ldc);
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


static int run_prepacked(gemm_job *jp, int64_t M, int64_t N, int64_t K);

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
    if (ep) epilogue_all(M, N, C, ldc, ep, clamp);
    return 0;
  }
  gemm_job j = {0};
  int rc = job_init(&j, ctx, work, M, N, K);
  if (rc) return rc;
  j.alpha = 1.0f, j.beta = beta;
  j.A = A, j.rsa = rsa, j.csa = csa;
  j.pack_rows = pack_rows, j.asrc = asrc;
  j.pb = pb;
  j.C = C, j.ldc = ldc;
  j.bias = bias, j.bias_rows = ep && ep->bias_rows, j.clamp = clamp, j.epi = epi;
  j.lo = ep ? ep->lo : 0.0f, j.hi = ep ? ep->hi : 0.0f;
  j.post = ep ? ep->post : NULL;
  return run_prepacked(&j, M, N, K);
}

/* Runs a prepacked product's job: tasks of row blocks of MC rows, and,
 * when they are fewer than twice the threads, column chunks too (whole NR
 * panels). */
static int run_prepacked(gemm_job *jp, int64_t M, int64_t N, int64_t K) {
  gemm_job j = *jp;
  (void)K;
  const int T = px_parallel_threads();
  const int64_t nr = j.g.nr, panels = (N + nr - 1) / nr;
  if (T == 1) {
    j.rows = M, j.cols = N, j.ncols = 1;
    gemm_prepacked_task(&j, 0, 1, 0);
    return 0;
  }
  j.rows = M < GEMM_MC ? (M + j.g.mr - 1) / j.g.mr * j.g.mr : GEMM_MC;
  int64_t rblocks = (M + j.rows - 1) / j.rows, chunks = 1;
  if (rblocks < 2 * T) {
    chunks = (2 * T + rblocks - 1) / rblocks;
    if (chunks > panels) chunks = panels;
  }
  j.cols = (panels + chunks - 1) / chunks * nr;
  j.ncols = (N + j.cols - 1) / j.cols;
  px_parallel_for(rblocks * j.ncols, 1, M * N * K, gemm_prepacked_task, &j);
  return 0;
}

bool px_gemm_f32_conv_available(void) {
#if PX_AVX512_KERNELS
  return gemm_select().isa == GEMM_ISA_AVX512;
#else
  return false;
#endif
}

int px_gemm_f32_conv(px_ctx *ctx, void *work, const px_gemm_conv *cv, int64_t M, int64_t N,
                     const float *pb, float *C, int64_t ldc, const px_gemm_epilogue *ep) {
  const int64_t K = cv->KH * cv->KW * cv->Cg;
  if (!px_gemm_f32_conv_available())
    return px_fail(ctx, "no indirect convolution kernel on this machine");
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  gemm_job j = {0};
  int rc = job_init(&j, ctx, work, M, N, K);
  if (rc) return rc;
  /* the padding's source: a tap's channels, or a kernel row's run of taps
   * for a row of a tile that reads none of it inside the input */
  const size_t nz = (size_t)(cv->Cg * cv->KW);
  float *zeros = px_scratch(ctx, sizeof(float) * nz);
  if (!zeros) return PYEXEC_ERR_EXECUTION;
  memset(zeros, 0, sizeof(float) * nz);
  const bool clamp = ep && !(ep->lo == -INFINITY && ep->hi == INFINITY);
  j.alpha = 1.0f, j.beta = 0.0f;
  j.cv = cv, j.zeros = zeros;
  j.pb = pb;
  j.C = C, j.ldc = ldc;
  j.bias = ep ? ep->bias : NULL, j.bias_rows = ep && ep->bias_rows;
  j.clamp = clamp, j.epi = j.bias || clamp;
  j.lo = ep ? ep->lo : 0.0f, j.hi = ep ? ep->hi : 0.0f;
  j.post = ep ? ep->post : NULL;
  return run_prepacked(&j, M, N, K);
}
