/*
 * math_neon.h - AArch64 NEON float32 exp / tanh / erf on 4 lanes, and the
 * contiguous-row loops built on them (act_neon.c) that softmax.c and the
 * elementwise activations (activation.c, unary.c) call on AArch64 (private).
 *
 * The functions are the same algorithms as ew.h's branch-free vexpf /
 * vtanhf / verff (Cody-Waite reduction and Cephes' polynomial for exp, an
 * odd polynomial or 1 - 2 / (exp(2|x|) + 1) for tanh, Abramowitz-Stegun
 * 7.1.26 with a Taylor series near 0 for erf), with the same special cases
 * (overflow to inf, underflow to 0, NaN kept), written with fused
 * multiply-adds and round-to-nearest instructions: results differ from the
 * portable ones by rounding only (exp within 2 ulp of the exact value,
 * tanh a few ulp, erf 2e-7 absolute). Outside AArch64 nothing is declared.
 */
#ifndef PX_NEON_MATH_H
#define PX_NEON_MATH_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__aarch64__) && !defined(PX_PORTABLE_KERNELS)
#define PX_NEON_MATH 1
#include <arm_neon.h>
#include <math.h>

/* exp(x): 2^n * p(r) with n = round(x / ln 2), r = x - n ln 2 in two parts. */
static inline __attribute__((always_inline)) float32x4_t px_neon_exp(float32x4_t x) {
  /* clamp (NaN lanes go through as NaN and are put back at the end) */
  const float32x4_t xc = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-103.0f)), vdupq_n_f32(88.8f));
  const float32x4_t nf = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(xc, nf, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, nf, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), vdupq_n_f32(1.9875691500e-4f), r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
  /* 2^n as two factors so that n in [-149, 128] stays representable */
  const int32x4_t n = vcvtq_s32_f32(nf); /* NaN lanes convert to 0 */
  const int32x4_t n1 = vshrq_n_s32(n, 1), n2 = vsubq_s32(n, n1);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
  float32x4_t res = vmulq_f32(vmulq_f32(p, s1), s2);
  res = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(88.72283935546875f)), vdupq_n_f32(INFINITY), res);
  res = vbslq_f32(vcltq_f32(x, vdupq_n_f32(-103.97208404541015625f)), vdupq_n_f32(0.0f), res);
  return vbslq_f32(vceqq_f32(x, x), res, x);
}

/* |x| with x's sign put on v (v >= 0). */
static inline __attribute__((always_inline)) float32x4_t px_neon_copysign(float32x4_t v,
                                                                          float32x4_t x) {
  const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
  return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(v), sign));
}

static inline __attribute__((always_inline)) float32x4_t px_neon_tanh(float32x4_t x) {
  const float32x4_t ax = vabsq_f32(x), z = vmulq_f32(x, x);
  float32x4_t p = vfmaq_f32(vdupq_n_f32(2.06390887954e-2f), vdupq_n_f32(-5.70498872745e-3f), z);
  p = vfmaq_f32(vdupq_n_f32(-5.37397155531e-2f), p, z);
  p = vfmaq_f32(vdupq_n_f32(1.33314422036e-1f), p, z);
  p = vfmaq_f32(vdupq_n_f32(-3.33332819422e-1f), p, z);
  const float32x4_t small = vfmaq_f32(x, vmulq_f32(x, z), p);
  const float32x4_t e = px_neon_exp(vaddq_f32(ax, ax));
  float32x4_t big = vsubq_f32(vdupq_n_f32(1.0f),
                              vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, vdupq_n_f32(1.0f))));
  big = px_neon_copysign(big, x);
  /* NaN: |x| < 0.625 is false, big is NaN */
  return vbslq_f32(vcltq_f32(ax, vdupq_n_f32(0.625f)), small, big);
}

static inline __attribute__((always_inline)) float32x4_t px_neon_erf(float32x4_t x) {
  const float32x4_t ax = vabsq_f32(x);
  const float32x4_t t = vdivq_f32(vdupq_n_f32(1.0f), vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0.3275911f), ax));
  float32x4_t r = vfmaq_f32(vdupq_n_f32(-1.453152027f), vdupq_n_f32(1.061405429f), t);
  r = vfmaq_f32(vdupq_n_f32(1.421413741f), r, t);
  r = vfmaq_f32(vdupq_n_f32(-0.284496736f), r, t);
  r = vfmaq_f32(vdupq_n_f32(0.254829592f), r, t);
  const float32x4_t e = px_neon_exp(vnegq_f32(vmulq_f32(ax, ax)));
  float32x4_t big = vfmsq_f32(vdupq_n_f32(1.0f), vmulq_f32(r, t), e);
  big = px_neon_copysign(big, x);
  const float32x4_t z = vmulq_f32(x, x);
  float32x4_t q = vfmaq_f32(vdupq_n_f32(-1.0f / 42.0f), vdupq_n_f32(1.0f / 216.0f), z);
  q = vfmaq_f32(vdupq_n_f32(0.1f), q, z);
  q = vfmaq_f32(vdupq_n_f32(-1.0f / 3.0f), q, z);
  q = vfmaq_f32(vdupq_n_f32(1.0f), q, z);
  const float32x4_t small = vmulq_f32(vmulq_f32(vdupq_n_f32(1.12837916709551257f), x), q);
  big = vbslq_f32(vceqq_f32(x, x), big, x);
  return vbslq_f32(vcltq_f32(ax, vdupq_n_f32(0.25f)), small, big);
}

/* Contiguous float32 rows (act_neon.c): y[k] = f(x[k]) for k < n; y may be
 * x. The activations compute what activation.c / unary.c define: sigmoid
 * 1 / (1 + exp(-x)), silu x / (1 + exp(-x)), gelu 0.5 x (1 + erf(x / sqrt 2)),
 * gelu_tanh 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
void px_neon_exp_f32(int64_t n, const float *x, float *y);
void px_neon_tanh_f32(int64_t n, const float *x, float *y);
void px_neon_sigmoid_f32(int64_t n, const float *x, float *y);
void px_neon_silu_f32(int64_t n, const float *x, float *y);
void px_neon_gelu_f32(int64_t n, const float *x, float *y);
void px_neon_gelu_tanh_f32(int64_t n, const float *x, float *y);

/* One contiguous float32 row of softmax (log false) or log_softmax (y may
 * be x), as softmax.c's row kernel: any NaN makes the row NaN; exp(x - max)
 * summed in 4 lanes; y = e / sum or x - (max + log(sum)). */
void px_neon_softmax_row_f32(int64_t n, const float *x, float *y, bool log);
#else
#define PX_NEON_MATH 0
#endif

/* For the PRE argument of ew.h's UN loops: on AArch64 a float32 loop whose
 * input and output are contiguous hands the row to the NEON loop FN and
 * returns; the float64 instantiation of the same loop, strided rows and
 * other machines run the generic loop. Expands to nothing outside AArch64. */
#if PX_NEON_MATH
#define PX_NEON_UN_ROW(FN)                                    \
  if (sizeof(T) == sizeof(float) && sa == 1 && so == 1) {     \
    FN(n, (const float *)(const void *)A, (float *)(void *)O); \
    return;                                                   \
  }
#else
#define PX_NEON_UN_ROW(FN)
#endif

#endif /* PX_NEON_MATH_H */
