/*
 * convert16_x86.c - the x86-64 runs of convert16.c: F16C for float16, AVX2
 * for bfloat16 (convert16_isa.h). Elsewhere this file compiles to nothing.
 */
#include "kernels/convert/convert16_isa.h"

/* ---- x86-64: F16C for float16, AVX2 integer lanes for bfloat16 ------------- */

#if CV16_X86
__attribute__((target("avx,f16c"))) int64_t px_cv16_f16_to_f32_f16c(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + k))));
  return k;
}

__attribute__((target("avx,f16c"))) int64_t px_cv16_f32_to_f16_f16c(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm_storeu_si128((__m128i *)(dst + k), _mm256_cvtps_ph(_mm256_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT));
  return k;
}

__attribute__((target("avx,f16c"))) int64_t px_cv16_round_f16_f16c(float *x, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(x + k, _mm256_cvtph_ps(h));
  }
  return k;
}

/* The same three float16 runs 16 lanes wide (AVX-512F), then one 8-lane
 * step: the same conversions per element. */
__attribute__((target("avx512f,f16c"))) int64_t px_cv16_f16_to_f32_avx512(float *dst, const uint16_t *src,
                                                                         int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    _mm512_storeu_ps(dst + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k))));
  return k + px_cv16_f16_to_f32_f16c(dst + k, src + k, n - k);
}

__attribute__((target("avx512f,f16c"))) int64_t px_cv16_f32_to_f16_avx512(uint16_t *dst, const float *src,
                                                                         int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    _mm256_storeu_si256((__m256i *)(dst + k), _mm512_cvtps_ph(_mm512_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT));
  return k + px_cv16_f32_to_f16_f16c(dst + k, src + k, n - k);
}

__attribute__((target("avx512f,f16c"))) int64_t px_cv16_round_f16_avx512(float *x, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    _mm512_storeu_ps(x + k, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT)));
  return k + px_cv16_round_f16_f16c(x + k, n - k);
}

/* The bfloat16 rounding of 8 float32 bit patterns, still in the top halves:
 * x + 0x7fff + (bit 16 of x), or for NaN x with the quiet bit set. */
__attribute__((target("avx2"))) static inline __m256i bf16_round8(__m256i x) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i q = _mm256_or_si256(x, _mm256_set1_epi32(0x400000));
  return _mm256_blendv_epi8(r, q, nan);
}

__attribute__((target("avx2"))) int64_t px_cv16_bf16_to_f32_avx2(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + k)));
    _mm256_storeu_si256((__m256i *)(dst + k), _mm256_slli_epi32(w, 16));
  }
  return k;
}

__attribute__((target("avx2"))) int64_t px_cv16_f32_to_bf16_avx2(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256i r = _mm256_srli_epi32(bf16_round8(_mm256_loadu_si256((const __m256i *)(src + k))), 16);
    const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128((__m128i *)(dst + k), _mm_packus_epi32(lo, hi));
  }
  return k;
}

__attribute__((target("avx2"))) int64_t px_cv16_round_bf16_avx2(float *x, int64_t n) {
  int64_t k = 0;
  const __m256i top = _mm256_set1_epi32((int)0xffff0000u);
  for (; k + 8 <= n; k += 8) {
    const __m256i r = bf16_round8(_mm256_loadu_si256((const __m256i *)(x + k)));
    _mm256_storeu_si256((__m256i *)(x + k), _mm256_and_si256(r, top));
  }
  return k;
}
#endif
typedef int px_convert16_x86_unused; /* ISO C: no empty translation unit */
