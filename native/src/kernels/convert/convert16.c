/*
 * convert16.c - float16 / bfloat16 <-> float32 over contiguous runs
 * (convert16.h): the vector runs of convert16_x86.c (F16C, AVX2) and
 * convert16_neon.c where px_cpu() reports them, then portable loops, all
 * giving the same bits.
 */
#include "kernels/convert/convert16.h"

#include <string.h>

#include "core/cpu.h"
#include "kernels/convert/convert16_isa.h"

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


/* ---- the entry points ------------------------------------------------------------ */

void px_f16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->f16c)
    k = px_cpu()->avx512f ? px_cv16_f16_to_f32_avx512(dst, src, n) : px_cv16_f16_to_f32_f16c(dst, src, n);
#elif CV16_NEON
  k = px_cv16_f16_to_f32_neon(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = px_f16_bits_to_f32(src[k]);
}

void px_f32_to_f16(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->f16c)
    k = px_cpu()->avx512f ? px_cv16_f32_to_f16_avx512(dst, src, n) : px_cv16_f32_to_f16_f16c(dst, src, n);
#elif CV16_NEON
  k = px_cv16_f32_to_f16_neon(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = px_f32_to_f16_bits(src[k]);
}

void px_round_f16(float *x, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->f16c)
    k = px_cpu()->avx512f ? px_cv16_round_f16_avx512(x, n) : px_cv16_round_f16_f16c(x, n);
#elif CV16_NEON
  k = px_cv16_round_f16_neon(x, n);
#endif
  for (; k < n; k++) x[k] = px_f16_bits_to_f32(px_f32_to_f16_bits(x[k]));
}

/* bfloat16 is integer work; the loops below vectorise where no explicit
 * path is taken (AArch64, the SSE2 baseline). */
void px_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->avx2) k = px_cv16_bf16_to_f32_avx2(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = bits_f32((uint32_t)src[k] << 16);
}

void px_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->avx2) k = px_cv16_f32_to_bf16_avx2(dst, src, n);
#endif
  for (; k < n; k++) dst[k] = px_f32_to_bf16_bits(src[k]);
}

void px_round_bf16(float *x, int64_t n) {
  int64_t k = 0;
#if CV16_X86
  if (px_cpu()->avx2) k = px_cv16_round_bf16_avx2(x, n);
#endif
  for (; k < n; k++) x[k] = bits_f32((uint32_t)px_f32_to_bf16_bits(x[k]) << 16);
}
