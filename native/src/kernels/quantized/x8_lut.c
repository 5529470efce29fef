/*
 * x8_lut.c - a byte table over a run of bytes (x8_lut.h).
 *
 * The AVX2 path looks up 16-entry pieces of the table with VPSHUFB, which
 * gives 0 where the index byte has its top bit set. Lookup k (k = 0..15)
 * reads the index x - 16k: wrapping for k <= 8, so lookup k sees blocks
 * k..k+7 of the table (block j: entries 16j..16j+15); saturating (signed)
 * for k >= 9, so it sees blocks k..15 only. The results are XORed, and
 * piece k holds the XOR of table block k with the pieces the same block's
 * other lookups read (solved block by block, lowest first), so the XOR of
 * a byte's lookups is its table entry.
 */
#include "kernels/quantized/x8_lut.h"

#include <stdbool.h>

#include "core/cpu.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define XL_X86 1
#include <immintrin.h>
#else
#define XL_X86 0
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

static void lut_c(const uint8_t *x, int64_t n, const uint8_t *table, uint8_t *y) {
  for (int64_t i = 0; i < n; i++) y[i] = table[x[i]];
}

#if XL_X86
/* Whether lookup k reads block j (see the top of the file). */
static bool reads(int k, int j) { return k <= 8 ? j >= k && j <= k + 7 : j >= k; }

__attribute__((target("avx2"))) static void lut_avx2(const uint8_t *x, int64_t n, const uint8_t *table,
                                                     uint8_t *y) {
  uint8_t piece[16][16];
  for (int j = 0; j < 16; j++)
    for (int e = 0; e < 16; e++) {
      uint8_t v = table[16 * j + e];
      for (int k = 0; k < j; k++)
        if (reads(k, j)) v ^= piece[k][e];
      piece[j][e] = v;
    }
  __m256i t[16];
  for (int k = 0; k < 16; k++) t[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)piece[k]));
  const __m256i step = _mm256_set1_epi8(16);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
    __m256i r = _mm256_shuffle_epi8(t[0], v);
    for (int k = 1; k <= 8; k++) {
      v = _mm256_sub_epi8(v, step);
      r = _mm256_xor_si256(r, _mm256_shuffle_epi8(t[k], v));
    }
    for (int k = 9; k < 16; k++) {
      v = _mm256_subs_epi8(v, step);
      r = _mm256_xor_si256(r, _mm256_shuffle_epi8(t[k], v));
    }
    _mm256_storeu_si256((__m256i *)(y + i), r);
  }
  lut_c(x + i, n - i, table, y + i);
}

/* Two 128-entry VPERMI2B lookups, the index's top bit choosing between them;
 * the last partial block is a masked load and store. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void lut_vbmi(const uint8_t *x, int64_t n,
                                                                           const uint8_t *table, uint8_t *y) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  int64_t i = 0;
  for (; i < n; i += 64) {
    __mmask64 live = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
    __m512i v = _mm512_maskz_loadu_epi8(live, x + i);
    __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
    __m512i r = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
    _mm512_mask_storeu_epi8(y + i, live, r);
  }
}
#endif

#if defined(__aarch64__)
/* Four 64-entry TBL lookups: an index out of a lookup's range gives 0 there. */
static void lut_neon(const uint8_t *x, int64_t n, const uint8_t *table, uint8_t *y) {
  uint8x16x4_t t[4];
  for (int q = 0; q < 4; q++) t[q] = vld1q_u8_x4(table + 64 * q);
  const uint8x16_t step = vdupq_n_u8(64);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint8x16_t v = vld1q_u8(x + i), r = vqtbl4q_u8(t[0], v);
    for (int q = 1; q < 4; q++) {
      v = vsubq_u8(v, step);
      r = vorrq_u8(r, vqtbl4q_u8(t[q], v));
    }
    vst1q_u8(y + i, r);
  }
  lut_c(x + i, n - i, table, y + i);
}
#endif

int px_x8_lut_has(int path) {
  switch (path) {
    case PX_LUT_C: return 1;
#if XL_X86
    case PX_LUT_AVX2: return px_cpu()->avx2;
    case PX_LUT_VBMI: return px_cpu()->avx512bw && px_cpu()->avx512vbmi;
#endif
#if defined(__aarch64__)
    case PX_LUT_NEON: return 1;
#endif
    default: return 0;
  }
}

void px_x8_lut_on(int path, const uint8_t *x, int64_t n, const uint8_t table[256], uint8_t *y) {
  switch (path) {
#if XL_X86
    case PX_LUT_AVX2: lut_avx2(x, n, table, y); return;
    case PX_LUT_VBMI: lut_vbmi(x, n, table, y); return;
#endif
#if defined(__aarch64__)
    case PX_LUT_NEON: lut_neon(x, n, table, y); return;
#endif
    default: lut_c(x, n, table, y); return;
  }
}

void px_x8_lut(const uint8_t *x, int64_t n, const uint8_t table[256], uint8_t *y) {
  int path = PX_LUT_C;
  for (int p = PX_LUT_NPATHS - 1; p > PX_LUT_C; p--)
    if (px_x8_lut_has(p)) {
      path = p;
      break;
    }
  px_x8_lut_on(path, x, n, table, y);
}
