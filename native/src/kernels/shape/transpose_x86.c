/*
 * transpose_x86.c - transpose.c's x86 tiles (transpose_isa.h): AVX2 8x8 for
 * 4-byte elements, SSE2 16x16 for bytes, and the interleaves of two and
 * three rows. Elsewhere than on x86-64 this file compiles to nothing.
 */
#include "kernels/shape/transpose_isa.h"

#include <string.h>

/* ---- AVX2 8x8 tiles --------------------------------------------------------- */

#ifdef HAVE_AVX2_TILES
#include "kernels/shape/transpose_x86.h"


/* The rows x cols part whose sides are multiples of 8, through tiles. */
__attribute__((target("avx2"))) void px_transpose4_avx2(float *dst, int64_t dst_ld, const float *src,
                                                            int64_t src_ld, int64_t rows, int64_t cols) {
  PX_TILE_WALK(rows, cols, 8, px_tile8x8_f32(dst + c * dst_ld + r, dst_ld, src + r * src_ld + c, src_ld));
}

/* ---- SSE2 16x16 byte tiles ------------------------------------------------------ */

/* One 16x16 tile of bytes: four rounds of unpacks, each doubling the run of
 * rows that sits together (bytes paired, then 2-, 4- and 8-byte runs), turn
 * the 16 row loads into the 16 columns. SSE2 is part of x86-64: no run-time
 * check. The comments name what register k holds after each round. */
static inline void tile16x16_u8(uint8_t *d, int64_t dst_ld, const uint8_t *s, int64_t src_ld) {
  __m128i a[16], p[16], q[16], r[16];
  for (int i = 0; i < 16; i++) a[i] = _mm_loadu_si128((const __m128i *)(s + i * src_ld));
  /* p[8h + i]: rows 2i, 2i + 1 of columns 8h..8h+7, as 16-bit pairs */
  for (int i = 0; i < 8; i++) {
    p[i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
    p[8 + i] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
  }
  /* q[8h + 4g + m]: rows 4m..4m+3 of columns 8h+4g..+3, as 32-bit quads */
  for (int h = 0; h < 16; h += 8)
    for (int m = 0; m < 4; m++) {
      q[h + m] = _mm_unpacklo_epi16(p[h + 2 * m], p[h + 2 * m + 1]);
      q[h + 4 + m] = _mm_unpackhi_epi16(p[h + 2 * m], p[h + 2 * m + 1]);
    }
  /* r[4t + 2e + n]: rows 8n..8n+7 of columns 4t+2e, 4t+2e+1, as 64-bit octets */
  for (int t = 0; t < 16; t += 4)
    for (int n = 0; n < 2; n++) {
      r[t + n] = _mm_unpacklo_epi32(q[t + 2 * n], q[t + 2 * n + 1]);
      r[t + 2 + n] = _mm_unpackhi_epi32(q[t + 2 * n], q[t + 2 * n + 1]);
    }
  /* column c = 2k (+1): the low (high) octets of r[2k] and r[2k + 1] */
  for (int k = 0; k < 8; k++) {
    _mm_storeu_si128((__m128i *)(d + (2 * k) * dst_ld), _mm_unpacklo_epi64(r[2 * k], r[2 * k + 1]));
    _mm_storeu_si128((__m128i *)(d + (2 * k + 1) * dst_ld), _mm_unpackhi_epi64(r[2 * k], r[2 * k + 1]));
  }
}

/* As px_transpose4_avx2, for bytes in 16x16 tiles. */
void px_transpose1_sse2(uint8_t *dst, int64_t dst_ld, const uint8_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols) {
  PX_TILE_WALK(rows, cols, 16, tile16x16_u8(dst + c * dst_ld + r, dst_ld, src + r * src_ld + c, src_ld));
}

/* Two rows of n elements of es bytes (1 or 4) interleaved: a 2 x n transpose
 * into contiguous pairs (the inner step of a pixel shuffle by 2, in int8 or
 * float), 16 bytes of each row a step. */
void px_interleave2_sse2(size_t es, void *dst, const void *a, const void *b, int64_t n) {
  uint8_t *d = dst;
  const uint8_t *x = a, *y = b;
  const int64_t bytes = n * (int64_t)es;
  int64_t i = 0;
  for (; i + 16 <= bytes; i += 16) {
    const __m128i u = _mm_loadu_si128((const __m128i *)(x + i)), v = _mm_loadu_si128((const __m128i *)(y + i));
    _mm_storeu_si128((__m128i *)(d + 2 * i), es == 1 ? _mm_unpacklo_epi8(u, v) : _mm_unpacklo_epi32(u, v));
    _mm_storeu_si128((__m128i *)(d + 2 * i + 16), es == 1 ? _mm_unpackhi_epi8(u, v) : _mm_unpackhi_epi32(u, v));
  }
  for (; i < bytes; i += (int64_t)es) {
    memcpy(d + 2 * i, x + i, es);
    memcpy(d + 2 * i + (int64_t)es, y + i, es);
  }
}

/* Three rows of n elements of es bytes (1 or 4) interleaved: a 3 x n
 * transpose into contiguous triples (an RGB image's NCHW -> NHWC, in int8
 * or float), 16 bytes of each row a step; each of the three output vectors
 * takes its bytes from the rows' vectors by PSHUFB (masks made per call). */
__attribute__((target("avx2"))) void px_interleave3_avx2(size_t es, void *dst, const void *a, const void *b,
                                                         const void *c, int64_t n) {
  uint8_t m[3][3][16];
  for (int j = 0; j < 3; j++)
    for (int q = 0; q < 16; q++) {
      const int p = 16 * j + q, e = p / (int)es, col = e / 3;
      for (int r = 0; r < 3; r++) m[j][r][q] = e % 3 == r ? (uint8_t)(col * (int)es + p % (int)es) : 0x80;
    }
  __m128i mk[3][3];
  for (int j = 0; j < 3; j++)
    for (int r = 0; r < 3; r++) mk[j][r] = _mm_loadu_si128((const __m128i *)m[j][r]);
  uint8_t *d = dst;
  const uint8_t *x = a, *y = b, *z = c;
  const int64_t bytes = n * (int64_t)es;
  int64_t i = 0;
  for (; i + 16 <= bytes; i += 16) {
    const __m128i u = _mm_loadu_si128((const __m128i *)(x + i)), v = _mm_loadu_si128((const __m128i *)(y + i)),
                  w = _mm_loadu_si128((const __m128i *)(z + i));
    for (int j = 0; j < 3; j++)
      _mm_storeu_si128((__m128i *)(d + 3 * i + 16 * j),
                       _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(u, mk[j][0]), _mm_shuffle_epi8(v, mk[j][1])),
                                    _mm_shuffle_epi8(w, mk[j][2])));
  }
  for (; i < bytes; i += (int64_t)es) {
    memcpy(d + 3 * i, x + i, es);
    memcpy(d + 3 * i + (int64_t)es, y + i, es);
    memcpy(d + 3 * i + 2 * (int64_t)es, z + i, es);
  }
}
#endif

typedef int px_transpose_x86_unused; /* ISO C: no empty translation unit */
