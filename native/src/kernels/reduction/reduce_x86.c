/*
 * reduce_x86.c - float16 / bfloat16 sums in double for reduce.c, widened
 * in registers (AVX-512: one vector of 8 doubles; AVX2 with F16C: two of
 * 4). The order is ch_sum_f64's over the values converted to double: lane j
 * adds elements i + j for every block of 8, the lanes are merged one after
 * another from lane 0, then the tail is added in order. Widening is exact,
 * so the bits are those of converting first and summing after. Elsewhere
 * than on x86-64 this file compiles to nothing.
 */
#include "kernels/reduction/plan.h"

#if PX_RED_X86
#include <immintrin.h>
#include <string.h>

#include "kernels/convert/convert16.h"

/* The tail: elements [i, n) added to a in order. */
static double sum16_tail(double a, int bf16, const uint16_t *p, int64_t i, int64_t n) {
  for (; i < n; i++) {
    float v;
    if (bf16) {
      const uint32_t u = (uint32_t)p[i] << 16;
      memcpy(&v, &u, sizeof v);
    } else {
      v = px_f16_bits_to_f32(p[i]);
    }
    a += (double)v;
  }
  return a;
}

static double merge_lanes(const double lanes[8]) {
  double a = lanes[0];
  for (int j = 1; j < 8; j++) a += lanes[j];
  return a;
}

/* 8 values at p widened to float32 (exact), and to double. */
__attribute__((target("avx2,f16c"), always_inline)) static inline __m256 widen8f(int bf16, const uint16_t *p) {
  const __m128i h = _mm_loadu_si128((const __m128i *)p);
  return bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}
__attribute__((target("avx512f,f16c"), always_inline)) static inline __m512d widen8(int bf16, const uint16_t *p) {
  return _mm512_cvtps_pd(widen8f(bf16, p));
}

__attribute__((target("avx512f,f16c"))) double px_red_sum16_avx512(int bf16, const uint16_t *p, int64_t n) {
  __m512d acc = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm512_add_pd(acc, widen8(bf16, p + i));
  double lanes[8];
  _mm512_storeu_pd(lanes, acc);
  return sum16_tail(merge_lanes(lanes), bf16, p, i, n);
}

__attribute__((target("avx512f,f16c"))) void px_red_sum16x4_avx512(int bf16, const uint16_t *const p[4], int64_t n,
                                                                  double s[4]) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 = _mm512_add_pd(a0, widen8(bf16, p[0] + i));
    a1 = _mm512_add_pd(a1, widen8(bf16, p[1] + i));
    a2 = _mm512_add_pd(a2, widen8(bf16, p[2] + i));
    a3 = _mm512_add_pd(a3, widen8(bf16, p[3] + i));
  }
  double lanes[4][8];
  _mm512_storeu_pd(lanes[0], a0);
  _mm512_storeu_pd(lanes[1], a1);
  _mm512_storeu_pd(lanes[2], a2);
  _mm512_storeu_pd(lanes[3], a3);
  for (int q = 0; q < 4; q++) s[q] = sum16_tail(merge_lanes(lanes[q]), bf16, p[q], i, n);
}

__attribute__((target("avx2,f16c"))) double px_red_sum16_avx2(int bf16, const uint16_t *p, int64_t n) {
  __m256d lo = _mm256_setzero_pd(), hi = lo;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 f = widen8f(bf16, p + i);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  }
  double lanes[8];
  _mm256_storeu_pd(lanes, lo);
  _mm256_storeu_pd(lanes + 4, hi);
  return sum16_tail(merge_lanes(lanes), bf16, p, i, n);
}

#endif /* PX_RED_X86 */
