/*
 * convert16.c - float16 / bfloat16 <-> float32 over contiguous runs
 * (convert16.h): F16C and AVX2 on x86-64 when px_cpu() reports them, NEON
 * on AArch64, portable loops elsewhere, all giving the same bits.
 */
#include "kernels/convert/convert16.h"

#include <string.h>

#include "core/cpu.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(PX_PORTABLE_KERNELS)
#define CV16_X86 1
#include <immintrin.h>
#else
#define CV16_X86 0
#endif
#if defined(__aarch64__) && defined(__GNUC__) && !defined(PX_PORTABLE_KERNELS)
#define CV16_NEON 1
#include <arm_neon.h>
#else
#define CV16_NEON 0
#endif

/* ---- one element ----------------------------------------------------------- */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float px_f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) /* infinity, or NaN made quiet (payload kept) */
    return bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
  if (exp) return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
  /* zero or subnormal: man x 2^-24 is exact in float32 */
  const float v = (float)man * 0x1.0p-24f;
  return bits_f32(sign | f32_bits(v));
}

uint16_t px_f32_to_f16_bits(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN, quiet */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (or inf): infinity */
  if (a < 0x38800000u) { /* below 2^-14: a subnormal (or zero) half */
    if (a < 0x33000000u) return sign; /* at most 2^-25: rounds to zero */
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e; /* 14..24 */
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    r += rem > half || (rem == half && (r & 1u));
    return (uint16_t)(sign | r);
  }
  const uint32_t t = a - 0x38000000u; /* exponent rebiased by 112 */
  uint32_t r = t >> 13;
  const uint32_t rem = t & 0x1fffu;
  r += rem > 0x1000u || (rem == 0x1000u && (r & 1u)); /* a carry into the exponent is right */
  return (uint16_t)(sign | r);
}

uint16_t px_f32_to_bf16_bits(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN, quiet */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- x86-64: F16C for float16, AVX2 integer lanes for bfloat16 ------------- */

#if CV16_X86
__attribute__((target("avx,f16c"))) static int64_t f16_to_f32_f16c(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + k))));
  return k;
}

__attribute__((target("avx,f16c"))) static int64_t f32_to_f16_f16c(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm_storeu_si128((__m128i *)(dst + k), _mm256_cvtps_ph(_mm256_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT));
  return k;
}

__attribute__((target("avx,f16c"))) static int64_t round_f16_f16c(float *x, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(x + k, _mm256_cvtph_ps(h));
  }
  return k;
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

__attribute__((target("avx2"))) static int64_t bf16_to_f32_avx2(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + k)));
    _mm256_storeu_si256((__m256i *)(dst + k), _mm256_slli_epi32(w, 16));
  }
  return k;
}

__attribute__((target("avx2"))) static int64_t f32_to_bf16_avx2(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256i r = _mm256_srli_epi32(bf16_round8(_mm256_loadu_si256((const __m256i *)(src + k))), 16);
    const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128((__m128i *)(dst + k), _mm_packus_epi32(lo, hi));
  }
  return k;
}

__attribute__((target("avx2"))) static int64_t round_bf16_avx2(float *x, int64_t n) {
  int64_t k = 0;
  const __m256i top = _mm256_set1_epi32((int)0xffff0000u);
  for (; k + 8 <= n; k += 8) {
    const __m256i r = bf16_round8(_mm256_loadu_si256((const __m256i *)(x + k)));
    _mm256_storeu_si256((__m256i *)(x + k), _mm256_and_si256(r, top));
  }
  return k;
}
#endif

/* ---- AArch64: FCVTL / FCVTN (round to nearest even under the default FPCR) - */

#if CV16_NEON
static int64_t f16_to_f32_neon(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) vst1q_f32(dst + k, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + k))));
  return k;
}

static int64_t f32_to_f16_neon(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) vst1_u16(dst + k, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + k))));
  return k;
}

static int64_t round_f16_neon(float *x, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) vst1q_f32(x + k, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(x + k))));
  return k;
}
#endif

/* ---- the entry points ------------------------------------------------------------ */

void px_f16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->f16c) k = f16_to_f32_f16c(dst, src, n);
#elif CV16_NEON
  k = f16_to_f32_neon(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = px_f16_bits_to_f32(src[k]);
}

void px_f32_to_f16(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->f16c) k = f32_to_f16_f16c(dst, src, n);
#elif CV16_NEON
  k = f32_to_f16_neon(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = px_f32_to_f16_bits(src[k]);
}

void px_round_f16(float *x, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->f16c) k = round_f16_f16c(x, n);
#elif CV16_NEON
  k = round_f16_neon(x, n);
#endif
  for (; k < n; k++) x[k] = px_f16_bits_to_f32(px_f32_to_f16_bits(x[k]));
}

/* bfloat16 is integer work; the loops below vectorise where no explicit
 * path is taken (AArch64, the SSE2 baseline). */
void px_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->avx2) k = bf16_to_f32_avx2(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = bits_f32((uint32_t)src[k] << 16);
}

void px_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->avx2) k = f32_to_bf16_avx2(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = px_f32_to_bf16_bits(src[k]);
}

void px_round_bf16(float *x, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->avx2) k = round_bf16_avx2(x, n);
#endif
  for (; k < n; k++) x[k] = bits_f32((uint32_t)px_f32_to_bf16_bits(x[k]) << 16);
}
