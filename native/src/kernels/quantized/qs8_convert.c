/*
 * qs8_convert.c - float32 <-> qint8 runs (qs8_convert.h).
 */
#include "kernels/quantized/qs8_convert.h"

#include "core/cpu.h"
#include "kernels/common.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define QC_X86 1
#include <immintrin.h>
#else
#define QC_X86 0
#endif

#if QC_X86
__attribute__((target("avx2"))) static int64_t qs8_from_f32_avx2(const float *x, int64_t n, float inv, float lo,
                                                                  float hi, int32_t zp, int8_t *q) {
  const __m256 vinv = _mm256_set1_ps(inv), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256i vzp = _mm256_set1_epi32(zp);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    /* max(v, lo) gives lo for NaN, min(v, hi) is v < hi ? v : hi: the scalar clamp */
    __m256 a = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), vlo), vhi);
    __m256 b = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vinv), vlo), vhi);
    __m256i ia = _mm256_add_epi32(_mm256_cvtps_epi32(a), vzp), ib = _mm256_add_epi32(_mm256_cvtps_epi32(b), vzp);
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(ia, ib), 0xD8); /* 16 int16 in order */
    _mm_storeu_si128((__m128i *)(q + i), _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
  }
  return i;
}

__attribute__((target("avx2"))) static int64_t f32_from_qs8_avx2(const int8_t *q, int64_t n, int32_t zp, float s,
                                                                  float *y) {
  const __m256i vzp = _mm256_set1_epi32(zp);
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i))), vzp);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), vs));
  }
  return i;
}
#endif

void px_qs8_from_f32(const float *x, int64_t n, float inv, int32_t zp, int8_t *q) {
  const float lo = (float)(-128 - zp), hi = (float)(127 - zp);
  int64_t i = 0;
#if QC_X86
  if (px_cpu()->avx2) i = qs8_from_f32_avx2(x, n, inv, lo, hi, zp, q);
#endif
  for (; i < n; i++) q[i] = px_q8_step(x[i] * inv, lo, hi, zp);
}

void px_f32_from_qs8(const int8_t *q, int64_t n, int32_t zp, float s, float *y) {
  int64_t i = 0;
#if QC_X86
  if (px_cpu()->avx2) i = f32_from_qs8_avx2(q, n, zp, s, y);
#endif
  for (; i < n; i++) y[i] = (float)((int32_t)q[i] - zp) * s;
}
