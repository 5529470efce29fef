/*
 * ukr_neon.c - AArch64 NEON pieces of the float32 GEMM engine (ukr_neon.h):
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
#include "kernels/gemm/ukr_neon.h"

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
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int px_ukr_neon_unused;
#endif
