/*
 * activation_neon.c - AArch64 NEON loops over contiguous float32 rows for the
 * activations and softmax (math_neon.h). On other architectures this file
 * compiles to nothing.
 */
#include "kernels/elementwise/math_neon.h"

#if PX_NEON_MATH
#include <math.h>

/* The loop every activation shares: 8 elements per iteration (two
 * independent vectors), then 4, then the last 1..3 through a small buffer
 * so that every element goes through the same vector code. */
#define DEFINE_ROW_LOOP(NAME, F)                                              \
  void NAME(int64_t n, const float *x, float *y) {                            \
    int64_t k = 0;                                                            \
    for (; k + 8 <= n; k += 8) {                                              \
      const float32x4_t a = vld1q_f32(x + k), b = vld1q_f32(x + k + 4);       \
      vst1q_f32(y + k, F(a));                                                 \
      vst1q_f32(y + k + 4, F(b));                                             \
    }                                                                         \
    for (; k + 4 <= n; k += 4) vst1q_f32(y + k, F(vld1q_f32(x + k)));        \
    if (k < n) {                                                              \
      float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                  \
      for (int64_t i = k; i < n; i++) t[i - k] = x[i];                        \
      vst1q_f32(t, F(vld1q_f32(t)));                                          \
      for (int64_t i = k; i < n; i++) y[i] = t[i - k];                        \
    }                                                                         \
  }

static inline __attribute__((always_inline)) float32x4_t sigmoid4(float32x4_t x) {
  return vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(vdupq_n_f32(1.0f), px_neon_exp(vnegq_f32(x))));
}
static inline __attribute__((always_inline)) float32x4_t silu4(float32x4_t x) {
  return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), px_neon_exp(vnegq_f32(x))));
}
static inline __attribute__((always_inline)) float32x4_t gelu4(float32x4_t x) {
  const float32x4_t e = px_neon_erf(vmulq_f32(x, vdupq_n_f32((float)0.70710678118654752440)));
  return vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), x), vaddq_f32(vdupq_n_f32(1.0f), e));
}
static inline __attribute__((always_inline)) float32x4_t gelu_tanh4(float32x4_t x) {
  const float32x4_t x3 = vmulq_f32(vmulq_f32(x, x), x);
  const float32x4_t inner =
      vmulq_f32(vdupq_n_f32((float)0.79788456080286535588), vfmaq_f32(x, vdupq_n_f32(0.044715f), x3));
  return vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), x), vaddq_f32(vdupq_n_f32(1.0f), px_neon_tanh(inner)));
}

DEFINE_ROW_LOOP(px_neon_exp_f32, px_neon_exp)
DEFINE_ROW_LOOP(px_neon_tanh_f32, px_neon_tanh)
DEFINE_ROW_LOOP(px_neon_sigmoid_f32, sigmoid4)
DEFINE_ROW_LOOP(px_neon_silu_f32, silu4)
DEFINE_ROW_LOOP(px_neon_gelu_f32, gelu4)
DEFINE_ROW_LOOP(px_neon_gelu_tanh_f32, gelu_tanh4)

void px_neon_softmax_row_f32(int64_t n, const float *x, float *y, bool log) {
  if (n <= 0) return;
  /* row maximum; NaN anywhere makes the whole row NaN (vmaxq_f32 carries a
   * NaN through, so a NaN maximum means a NaN input) */
  float32x4_t mv = vdupq_n_f32(-INFINITY);
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) mv = vmaxq_f32(mv, vld1q_f32(x + k));
  float m = vmaxvq_f32(mv);
  for (; k < n; k++) m = (x[k] != x[k] || m != m) ? NAN : (x[k] > m ? x[k] : m);
  if (m != m) {
    for (k = 0; k < n; k++) y[k] = NAN;
    return;
  }
  /* sum of exp(x - m) in 4 lanes (unused tail lanes are -inf - m: exp 0);
   * softmax keeps the exps in y */
  const float32x4_t vm = vdupq_n_f32(m);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (k = 0; k + 4 <= n; k += 4) {
    const float32x4_t e = px_neon_exp(vsubq_f32(vld1q_f32(x + k), vm));
    if (!log) vst1q_f32(y + k, e);
    acc = vaddq_f32(acc, e);
  }
  if (k < n) {
    float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = k; i < n; i++) t[i - k] = x[i];
    const float32x4_t e = px_neon_exp(vsubq_f32(vld1q_f32(t), vm));
    if (!log) {
      vst1q_f32(t, e);
      for (int64_t i = k; i < n; i++) y[i] = t[i - k];
    }
    acc = vaddq_f32(acc, e);
  }
  const float s = vaddvq_f32(acc);
  if (log) {
    const float32x4_t c = vdupq_n_f32(m + logf(s));
    for (k = 0; k + 4 <= n; k += 4) vst1q_f32(y + k, vsubq_f32(vld1q_f32(x + k), c));
    for (; k < n; k++) y[k] = x[k] - (m + logf(s));
  } else {
    const float inv = 1.0f / s;
    const float32x4_t vi = vdupq_n_f32(inv);
    for (k = 0; k + 4 <= n; k += 4) vst1q_f32(y + k, vmulq_f32(vld1q_f32(y + k), vi));
    for (; k < n; k++) y[k] *= inv;
  }
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int px_act_neon_unused;
#endif
