/*
 * gemm_neon.c - AArch64 NEON pieces of the float32 GEMM engine (gemm_neon.h):
 * the 6 x 16 micro-kernel, transposed-B packing and the tile epilogue. On
 * other architectures this file compiles to nothing.
 *
 * The micro-kernel keeps the 6 x 16 tile of C in 24 of the 32 vector
 * registers (6 rows x 4 vectors of 4 floats); each depth step loads 16
 * floats of B (4 registers) and the 6 floats of A (one q and one d register)
 * and issues 24 fused multiply-adds by lane (FMLA v.4s, v.4s, v.s[i]), so A
 * is never broadcast through memory. Same tile shape as the x86 AVX2 kernel,
 * so packing and prepacked weights have one layout on both.
 */
#include "kernels/gemm/gemm_neon.h"

#if PX_NEON_KERNELS
#include <arm_neon.h>

/* One depth step: C rows 0..3 take their A value from lane i of a03, rows
 * 4..5 from lane i of a45. */
#define UKR_STEP(a_, b_)                                                 \
  do {                                                                   \
    const float32x4_t b0 = vld1q_f32(b_), b1 = vld1q_f32((b_) + 4);      \
    const float32x4_t b2 = vld1q_f32((b_) + 8), b3 = vld1q_f32((b_) + 12); \
    const float32x4_t a03 = vld1q_f32(a_);                               \
    const float32x2_t a45 = vld1_f32((a_) + 4);                          \
    c00 = vfmaq_laneq_f32(c00, b0, a03, 0);                              \
    c01 = vfmaq_laneq_f32(c01, b1, a03, 0);                              \
    c02 = vfmaq_laneq_f32(c02, b2, a03, 0);                              \
    c03 = vfmaq_laneq_f32(c03, b3, a03, 0);                              \
    c10 = vfmaq_laneq_f32(c10, b0, a03, 1);                              \
    c11 = vfmaq_laneq_f32(c11, b1, a03, 1);                              \
    c12 = vfmaq_laneq_f32(c12, b2, a03, 1);                              \
    c13 = vfmaq_laneq_f32(c13, b3, a03, 1);                              \
    c20 = vfmaq_laneq_f32(c20, b0, a03, 2);                              \
    c21 = vfmaq_laneq_f32(c21, b1, a03, 2);                              \
    c22 = vfmaq_laneq_f32(c22, b2, a03, 2);                              \
    c23 = vfmaq_laneq_f32(c23, b3, a03, 2);                              \
    c30 = vfmaq_laneq_f32(c30, b0, a03, 3);                              \
    c31 = vfmaq_laneq_f32(c31, b1, a03, 3);                              \
    c32 = vfmaq_laneq_f32(c32, b2, a03, 3);                              \
    c33 = vfmaq_laneq_f32(c33, b3, a03, 3);                              \
    c40 = vfmaq_lane_f32(c40, b0, a45, 0);                               \
    c41 = vfmaq_lane_f32(c41, b1, a45, 0);                               \
    c42 = vfmaq_lane_f32(c42, b2, a45, 0);                               \
    c43 = vfmaq_lane_f32(c43, b3, a45, 0);                               \
    c50 = vfmaq_lane_f32(c50, b0, a45, 1);                               \
    c51 = vfmaq_lane_f32(c51, b1, a45, 1);                               \
    c52 = vfmaq_lane_f32(c52, b2, a45, 1);                               \
    c53 = vfmaq_lane_f32(c53, b3, a45, 1);                               \
  } while (0)

/* alpha * acc (+ beta * C) into 4 floats of a row. */
static inline void store4(float *cr, float32x4_t r, float32x4_t va, float beta) {
  if (beta == 0.0f)
    vst1q_f32(cr, vmulq_f32(va, r));
  else if (beta == 1.0f)
    vst1q_f32(cr, vfmaq_f32(vld1q_f32(cr), va, r));
  else
    vst1q_f32(cr, vfmaq_f32(vmulq_f32(vdupq_n_f32(beta), vld1q_f32(cr)), va, r));
}
static inline void store_row16(float *cr, float32x4_t r0, float32x4_t r1, float32x4_t r2,
                               float32x4_t r3, float alpha, float beta) {
  const float32x4_t va = vdupq_n_f32(alpha);
  store4(cr, r0, va, beta);
  store4(cr + 4, r1, va, beta);
  store4(cr + 8, r2, va, beta);
  store4(cr + 12, r3, va, beta);
}

/* The mr x nr part of a tile held as 6 rows of w vectors (acc[i * w + q]),
 * through a buffer. */
static void store_edge(const float32x4_t *acc, int w, float *c, int64_t ldc, float alpha,
                       float beta, int mr, int nr) {
  float t[6 * 16];
  for (int q = 0; q < 6 * w; q++) vst1q_f32(t + 4 * q, acc[q]);
  for (int i = 0; i < mr; i++) {
    float *cr = c + i * ldc;
    const float *tr = t + i * 4 * w;
    if (beta == 0.0f)
      for (int j = 0; j < nr; j++) cr[j] = alpha * tr[j];
    else /* one rounding, as the full-tile path's fused multiply-add */
      for (int j = 0; j < nr; j++) cr[j] = __builtin_fmaf(alpha, tr[j], beta * cr[j]);
  }
}

/* The 24 accumulators, zeroed. */
#define UKR_ACC_DECL                                              \
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c02 = c00, c03 = c00; \
  float32x4_t c10 = c00, c11 = c00, c12 = c00, c13 = c00;         \
  float32x4_t c20 = c00, c21 = c00, c22 = c00, c23 = c00;         \
  float32x4_t c30 = c00, c31 = c00, c32 = c00, c33 = c00;         \
  float32x4_t c40 = c00, c41 = c00, c42 = c00, c43 = c00;         \
  float32x4_t c50 = c00, c51 = c00, c52 = c00, c53 = c00

/* alpha * acc (+ beta * C) for the mr x nr part: full tiles straight from
 * the registers, edge tiles through a buffer. */
#define UKR_STORE                                                                       \
  do {                                                                                  \
    if (mr == 6 && nr == 16) {                                                          \
      store_row16(c, c00, c01, c02, c03, alpha, beta);                                  \
      store_row16(c + ldc, c10, c11, c12, c13, alpha, beta);                            \
      store_row16(c + 2 * ldc, c20, c21, c22, c23, alpha, beta);                        \
      store_row16(c + 3 * ldc, c30, c31, c32, c33, alpha, beta);                        \
      store_row16(c + 4 * ldc, c40, c41, c42, c43, alpha, beta);                        \
      store_row16(c + 5 * ldc, c50, c51, c52, c53, alpha, beta);                        \
    } else {                                                                            \
      const float32x4_t acc_[24] = {c00, c01, c02, c03, c10, c11, c12, c13,             \
                                    c20, c21, c22, c23, c30, c31, c32, c33,             \
                                    c40, c41, c42, c43, c50, c51, c52, c53};            \
      store_edge(acc_, 4, c, ldc, alpha, beta, mr, nr);                                    \
    }                                                                                   \
  } while (0)

/* A packed panel (rsa 1, csa 6; rows past mr zero-filled by the packer). */
static void ukr_packed(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       float alpha, float beta, int mr, int nr) {
  UKR_ACC_DECL;
  for (int64_t p = 0; p < kc; p++, a += 6, b += 16) UKR_STEP(a, b);
  UKR_STORE;
}

/* A read in place or strided: the tile in two 6 x 8 halves, each a pass
 * over the depth with 12 accumulators. (All 24 at once leave too few
 * registers for A's six rows, and GCC spills accumulators in the loop.) In
 * place (csa 1), four depths of each row come in one load and feed the FMAs
 * by lane; otherwise A is read one element at a time. */
#define HALF_DEPTH(D)                                               \
  do {                                                              \
    const float32x4_t b0 = vld1q_f32(b + 16 * D), b1 = vld1q_f32(b + 16 * D + 4); \
    c00 = vfmaq_laneq_f32(c00, b0, r0, D);                          \
    c01 = vfmaq_laneq_f32(c01, b1, r0, D);                          \
    c10 = vfmaq_laneq_f32(c10, b0, r1, D);                          \
    c11 = vfmaq_laneq_f32(c11, b1, r1, D);                          \
    c20 = vfmaq_laneq_f32(c20, b0, r2, D);                          \
    c21 = vfmaq_laneq_f32(c21, b1, r2, D);                          \
    c30 = vfmaq_laneq_f32(c30, b0, r3, D);                          \
    c31 = vfmaq_laneq_f32(c31, b1, r3, D);                          \
    c40 = vfmaq_laneq_f32(c40, b0, r4, D);                          \
    c41 = vfmaq_laneq_f32(c41, b1, r4, D);                          \
    c50 = vfmaq_laneq_f32(c50, b0, r5, D);                          \
    c51 = vfmaq_laneq_f32(c51, b1, r5, D);                          \
  } while (0)

/* Columns [0, n) (n <= 8) of the tile from a half panel b (row stride 16);
 * A row i at a + o[i] (rows past mr point at row 0, never read past it). */
static void ukr_half(int64_t kc, const float *a, const int64_t o[6], int64_t csa, const float *b,
                     float *c, int64_t ldc, float alpha, float beta, int mr, int n) {
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  float32x4_t c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *a0 = a + o[0], *a1 = a + o[1], *a2 = a + o[2];
  const float *a3 = a + o[3], *a4 = a + o[4], *a5 = a + o[5];
  int64_t p = 0;
  if (csa == 1)
    for (; p + 4 <= kc; p += 4, b += 64) {
      const float32x4_t r0 = vld1q_f32(a0 + p), r1 = vld1q_f32(a1 + p), r2 = vld1q_f32(a2 + p);
      const float32x4_t r3 = vld1q_f32(a3 + p), r4 = vld1q_f32(a4 + p), r5 = vld1q_f32(a5 + p);
      HALF_DEPTH(0);
      HALF_DEPTH(1);
      HALF_DEPTH(2);
      HALF_DEPTH(3);
    }
  for (; p < kc; p++, b += 16) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    const int64_t q = p * csa;
    c00 = vfmaq_n_f32(c00, b0, a0[q]);
    c01 = vfmaq_n_f32(c01, b1, a0[q]);
    c10 = vfmaq_n_f32(c10, b0, a1[q]);
    c11 = vfmaq_n_f32(c11, b1, a1[q]);
    c20 = vfmaq_n_f32(c20, b0, a2[q]);
    c21 = vfmaq_n_f32(c21, b1, a2[q]);
    c30 = vfmaq_n_f32(c30, b0, a3[q]);
    c31 = vfmaq_n_f32(c31, b1, a3[q]);
    c40 = vfmaq_n_f32(c40, b0, a4[q]);
    c41 = vfmaq_n_f32(c41, b1, a4[q]);
    c50 = vfmaq_n_f32(c50, b0, a5[q]);
    c51 = vfmaq_n_f32(c51, b1, a5[q]);
  }
  if (mr == 6 && n == 8) {
    const float32x4_t va = vdupq_n_f32(alpha);
    store4(c, c00, va, beta);
    store4(c + 4, c01, va, beta);
    store4(c + ldc, c10, va, beta);
    store4(c + ldc + 4, c11, va, beta);
    store4(c + 2 * ldc, c20, va, beta);
    store4(c + 2 * ldc + 4, c21, va, beta);
    store4(c + 3 * ldc, c30, va, beta);
    store4(c + 3 * ldc + 4, c31, va, beta);
    store4(c + 4 * ldc, c40, va, beta);
    store4(c + 4 * ldc + 4, c41, va, beta);
    store4(c + 5 * ldc, c50, va, beta);
    store4(c + 5 * ldc + 4, c51, va, beta);
  } else {
    const float32x4_t acc[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    store_edge(acc, 2, c, ldc, alpha, beta, mr, n);
  }
}

static void ukr_halves(int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
                       float *c, int64_t ldc, float alpha, float beta, int mr, int nr) {
  int64_t o[6];
  for (int i = 0; i < 6; i++) o[i] = i < mr ? i * rsa : 0;
  ukr_half(kc, a, o, csa, b, c, ldc, alpha, beta, mr, nr < 8 ? nr : 8);
  if (nr > 8) ukr_half(kc, a, o, csa, b + 8, c + 8, ldc, alpha, beta, mr, nr - 8);
}

void px_ukr_f32_6x16_neon(int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
                          float *c, int64_t ldc, float alpha, float beta, int mr, int nr) {
  if (rsa == 1 && csa == PX_NEON_GEMM_MR)
    ukr_packed(kc, a, b, c, ldc, alpha, beta, mr, nr);
  else
    ukr_halves(kc, a, rsa, csa, b, c, ldc, alpha, beta, mr, nr);
}

/* Rows p..p+3 of four columns (each 4 consecutive depths, one per register)
 * transposed: out[d] holds depth p + d of the four columns. */
static inline void transpose4(float32x4_t r0, float32x4_t r1, float32x4_t r2, float32x4_t r3,
                              float32x4_t out[4]) {
  const float32x4_t t0 = vtrn1q_f32(r0, r1), t1 = vtrn2q_f32(r0, r1);
  const float32x4_t t2 = vtrn1q_f32(r2, r3), t3 = vtrn2q_f32(r2, r3);
  out[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  out[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
  out[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  out[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

int64_t px_pack_b_trans16_neon(const float *B, int64_t csb, int64_t kc, int64_t nc, float *pb) {
  const int64_t full = nc / 16 * 16, k4 = kc / 4 * 4;
  for (int64_t j0 = 0; j0 < full; j0 += 16, pb += 16 * kc) {
    for (int g = 0; g < 4; g++) { /* columns j0 + 4g .. j0 + 4g + 3 */
      const float *c0 = B + (j0 + 4 * g) * csb, *c1 = c0 + csb, *c2 = c1 + csb, *c3 = c2 + csb;
      float *dst = pb + 4 * g;
      for (int64_t p = 0; p < k4; p += 4) {
        float32x4_t o[4];
        transpose4(vld1q_f32(c0 + p), vld1q_f32(c1 + p), vld1q_f32(c2 + p), vld1q_f32(c3 + p), o);
        vst1q_f32(dst + p * 16, o[0]);
        vst1q_f32(dst + (p + 1) * 16, o[1]);
        vst1q_f32(dst + (p + 2) * 16, o[2]);
        vst1q_f32(dst + (p + 3) * 16, o[3]);
      }
      for (int64_t p = k4; p < kc; p++) {
        dst[p * 16 + 0] = c0[p];
        dst[p * 16 + 1] = c1[p];
        dst[p * 16 + 2] = c2[p];
        dst[p * 16 + 3] = c3[p];
      }
    }
  }
  return full;
}

/* min(max(v, lo), hi) as the scalar epilogue computes it: v < lo ? lo : v,
 * then > hi ? hi : v (compares are false for NaN, so NaN passes through). */
static inline float32x4_t clamp4(float32x4_t v, float32x4_t vlo, float32x4_t vhi) {
  v = vbslq_f32(vcltq_f32(v, vlo), vlo, v);
  return vbslq_f32(vcgtq_f32(v, vhi), vhi, v);
}

void px_tile_epilogue_neon(float *c, int64_t ldc, int m, int n, const float *bias, bool clamp,
                           float lo, float hi) {
  const float32x4_t vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  const int n4 = n / 4 * 4;
  for (int i = 0; i < m; i++, c += ldc) {
    int j = 0;
    for (; j < n4; j += 4) {
      float32x4_t v = vld1q_f32(c + j);
      if (bias) v = vaddq_f32(v, vld1q_f32(bias + j));
      if (clamp) v = clamp4(v, vlo, vhi);
      vst1q_f32(c + j, v);
    }
    for (; j < n; j++) {
      float v = c[j];
      if (bias) v += bias[j];
      if (clamp) {
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
      }
      c[j] = v;
    }
  }
}

/* ---- small-M products without packing ---------------------------------- */

/* The depth tail and the store of one dot product: C += alpha * (sum of
 * the lanes of v + the products past K4). */
static inline void dot_store(float32x4_t v, const float *a, const float *b, int64_t K4, int64_t K,
                             float alpha, float *c) {
  float t = vaddvq_f32(v);
  for (int64_t k = K4; k < K; k++) t = __builtin_fmaf(a[k], b[k], t);
  *c += alpha * t;
}

/* C[i, j] += alpha * dot(row i of A, column j of B) for 4 rows x 4 columns
 * (the first cols stored; b[q] for missing columns repeats column 0): 16
 * accumulators over depth in steps of 4. */
__attribute__((noinline)) static void dots_4x4(int64_t K, float alpha, const float *a0, int64_t rsa, const float *const b[4],
                     float *C, int64_t ldc, int cols) {
  const float *a1 = a0 + rsa, *a2 = a1 + rsa, *a3 = a2 + rsa;
  const float *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
  float32x4_t s00 = vdupq_n_f32(0.0f), s01 = s00, s02 = s00, s03 = s00;
  float32x4_t s10 = s00, s11 = s00, s12 = s00, s13 = s00;
  float32x4_t s20 = s00, s21 = s00, s22 = s00, s23 = s00;
  float32x4_t s30 = s00, s31 = s00, s32 = s00, s33 = s00;
  const int64_t K4 = K / 4 * 4;
  for (int64_t k = 0; k < K4; k += 4) {
    const float32x4_t w0 = vld1q_f32(b0 + k), w1 = vld1q_f32(b1 + k);
    const float32x4_t w2 = vld1q_f32(b2 + k), w3 = vld1q_f32(b3 + k);
    float32x4_t x = vld1q_f32(a0 + k);
    s00 = vfmaq_f32(s00, x, w0), s01 = vfmaq_f32(s01, x, w1);
    s02 = vfmaq_f32(s02, x, w2), s03 = vfmaq_f32(s03, x, w3);
    x = vld1q_f32(a1 + k);
    s10 = vfmaq_f32(s10, x, w0), s11 = vfmaq_f32(s11, x, w1);
    s12 = vfmaq_f32(s12, x, w2), s13 = vfmaq_f32(s13, x, w3);
    x = vld1q_f32(a2 + k);
    s20 = vfmaq_f32(s20, x, w0), s21 = vfmaq_f32(s21, x, w1);
    s22 = vfmaq_f32(s22, x, w2), s23 = vfmaq_f32(s23, x, w3);
    x = vld1q_f32(a3 + k);
    s30 = vfmaq_f32(s30, x, w0), s31 = vfmaq_f32(s31, x, w1);
    s32 = vfmaq_f32(s32, x, w2), s33 = vfmaq_f32(s33, x, w3);
  }
  const float32x4_t acc[4][4] = {{s00, s01, s02, s03}, {s10, s11, s12, s13},
                                 {s20, s21, s22, s23}, {s30, s31, s32, s33}};
  const float *ar[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; i++)
    for (int q = 0; q < cols; q++) dot_store(acc[i][q], ar[i], b[q], K4, K, alpha, C + i * ldc + q);
}

/* One row x 4 columns, two accumulators per column (depth steps of 8). */
__attribute__((noinline)) static void dots_1x4(int64_t K, float alpha, const float *a0, const float *const b[4], float *C,
                     int cols) {
  const float *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0, t0 = s0, t1 = s0, t2 = s0, t3 = s0;
  const int64_t K8 = K / 8 * 8, K4 = K / 4 * 4;
  int64_t k = 0;
  for (; k < K8; k += 8) {
    const float32x4_t x = vld1q_f32(a0 + k), y = vld1q_f32(a0 + k + 4);
    s0 = vfmaq_f32(s0, x, vld1q_f32(b0 + k)), t0 = vfmaq_f32(t0, y, vld1q_f32(b0 + k + 4));
    s1 = vfmaq_f32(s1, x, vld1q_f32(b1 + k)), t1 = vfmaq_f32(t1, y, vld1q_f32(b1 + k + 4));
    s2 = vfmaq_f32(s2, x, vld1q_f32(b2 + k)), t2 = vfmaq_f32(t2, y, vld1q_f32(b2 + k + 4));
    s3 = vfmaq_f32(s3, x, vld1q_f32(b3 + k)), t3 = vfmaq_f32(t3, y, vld1q_f32(b3 + k + 4));
  }
  if (k < K4) {
    const float32x4_t x = vld1q_f32(a0 + k);
    s0 = vfmaq_f32(s0, x, vld1q_f32(b0 + k)), s1 = vfmaq_f32(s1, x, vld1q_f32(b1 + k));
    s2 = vfmaq_f32(s2, x, vld1q_f32(b2 + k)), s3 = vfmaq_f32(s3, x, vld1q_f32(b3 + k));
  }
  const float32x4_t acc[4] = {vaddq_f32(s0, t0), vaddq_f32(s1, t1), vaddq_f32(s2, t2), vaddq_f32(s3, t3)};
  for (int q = 0; q < cols; q++) dot_store(acc[q], a0, b[q], K4, K, alpha, C + q);
}

void px_gemm_dots_neon(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t rsa,
                       int64_t csa, const float *B, int64_t csb, float *C, int64_t ldc) {
  if (csa != 1) { /* A's rows not contiguous (not produced by gemm.c's callers today) */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        float t = 0.0f;
        for (int64_t k = 0; k < K; k++) t = __builtin_fmaf(A[i * rsa + k * csa], B[j * csb + k], t);
        C[i * ldc + j] += alpha * t;
      }
    return;
  }
  for (int64_t j = 0; j < N; j += 4) {
    const int cols = N - j < 4 ? (int)(N - j) : 4;
    /* missing columns read column j again and are not stored */
    const float *b[4];
    for (int q = 0; q < 4; q++) b[q] = B + (j + (q < cols ? q : 0)) * csb;
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) dots_4x4(K, alpha, A + i * rsa, rsa, b, C + i * ldc + j, ldc, cols);
    for (; i < M; i++) dots_1x4(K, alpha, A + i * rsa, b, C + i * ldc + j, cols);
  }
}

void px_gemm_rows_neon(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t rsa,
                       int64_t csa, const float *B, int64_t rsb, float *C, int64_t ldc) {
  const int64_t N8 = N / 8 * 8;
  for (int64_t i = 0; i < M; i++) {
    float *cr = C + i * ldc;
    const float *ar = A + i * rsa;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) { /* four rows of B per pass over the row of C */
      const float s0 = alpha * ar[k * csa], s1 = alpha * ar[(k + 1) * csa];
      const float s2 = alpha * ar[(k + 2) * csa], s3 = alpha * ar[(k + 3) * csa];
      const float *b0 = B + k * rsb, *b1 = b0 + rsb, *b2 = b1 + rsb, *b3 = b2 + rsb;
      int64_t j = 0;
      for (; j < N8; j += 8) {
        float32x4_t c0 = vld1q_f32(cr + j), c1 = vld1q_f32(cr + j + 4);
        c0 = vfmaq_n_f32(c0, vld1q_f32(b0 + j), s0);
        c1 = vfmaq_n_f32(c1, vld1q_f32(b0 + j + 4), s0);
        c0 = vfmaq_n_f32(c0, vld1q_f32(b1 + j), s1);
        c1 = vfmaq_n_f32(c1, vld1q_f32(b1 + j + 4), s1);
        c0 = vfmaq_n_f32(c0, vld1q_f32(b2 + j), s2);
        c1 = vfmaq_n_f32(c1, vld1q_f32(b2 + j + 4), s2);
        c0 = vfmaq_n_f32(c0, vld1q_f32(b3 + j), s3);
        c1 = vfmaq_n_f32(c1, vld1q_f32(b3 + j + 4), s3);
        vst1q_f32(cr + j, c0);
        vst1q_f32(cr + j + 4, c1);
      }
      for (; j < N; j++)
        cr[j] = __builtin_fmaf(s3, b3[j], __builtin_fmaf(s2, b2[j], __builtin_fmaf(s1, b1[j], __builtin_fmaf(s0, b0[j], cr[j]))));
    }
    for (; k < K; k++) {
      const float s0 = alpha * ar[k * csa];
      const float *b0 = B + k * rsb;
      int64_t j = 0;
      for (; j < N8; j += 8) {
        vst1q_f32(cr + j, vfmaq_n_f32(vld1q_f32(cr + j), vld1q_f32(b0 + j), s0));
        vst1q_f32(cr + j + 4, vfmaq_n_f32(vld1q_f32(cr + j + 4), vld1q_f32(b0 + j + 4), s0));
      }
      for (; j < N; j++) cr[j] = __builtin_fmaf(s0, b0[j], cr[j]);
    }
  }
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int px_ukr_neon_unused;
#endif
