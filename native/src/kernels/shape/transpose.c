/*
 * transpose.c - the 2-D transpose under permute_copy and the XNNPACK
 * backend's StaticTranspose (transpose.h).
 *
 * Both sides are walked in BLK x BLK blocks (16 KiB each for 4-byte
 * elements) so that the rows written stay in L1 while a block's columns are
 * read. Inside a block, 4-byte elements go through 8x8 register tiles on
 * AVX2 (eight row loads, three rounds of unpack / shuffle / lane permute,
 * eight column stores); everything else, and the edges that are not a
 * multiple of 8, through plain C. Shuffles move bits, so NaN payloads and
 * signed zeros come out as they went in.
 */
#include "kernels/shape/transpose.h"

#include <string.h>

#define BLK 64

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- plain C ---------------------------------------------------------------- */

#define PLAIN_LOOP(T)                                                              \
  do {                                                                             \
    T *d_ = (T *)dst;                                                              \
    const T *s_ = (const T *)src;                                                  \
    for (int64_t rb = 0; rb < rows; rb += BLK) {                                   \
      int64_t re = min64(rb + BLK, rows);                                          \
      for (int64_t cb = 0; cb < cols; cb += BLK) {                                 \
        int64_t ce = min64(cb + BLK, cols);                                        \
        for (int64_t r = rb; r < re; r++)                                          \
          for (int64_t c = cb; c < ce; c++) d_[c * dst_ld + r] = s_[r * src_ld + c]; \
      }                                                                            \
    }                                                                              \
  } while (0)

static void transpose_plain(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld,
                            int64_t rows, int64_t cols) {
  switch (es) {
    case 1: PLAIN_LOOP(uint8_t); break;
    case 2: PLAIN_LOOP(uint16_t); break;
    case 4: PLAIN_LOOP(uint32_t); break;
    case 8: PLAIN_LOOP(uint64_t); break;
    default: /* wider elements (none today): one memcpy each */
      for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
          memcpy((char *)dst + (size_t)(c * dst_ld + r) * es, (const char *)src + (size_t)(r * src_ld + c) * es,
                 es);
      break;
  }
}

/* ---- AVX2 8x8 tiles --------------------------------------------------------- */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#include <immintrin.h>
#define HAVE_AVX2_TILES 1

/* One 8x8 tile of 4-byte elements: rows a..h of src become the columns of
 * dst. */
__attribute__((target("avx2"), always_inline)) static inline void tile8x8(float *d, int64_t dst_ld, const float *s,
                                                                           int64_t src_ld) {
  __m256 a = _mm256_loadu_ps(s), b = _mm256_loadu_ps(s + src_ld);
  __m256 c = _mm256_loadu_ps(s + 2 * src_ld), e = _mm256_loadu_ps(s + 3 * src_ld);
  __m256 f = _mm256_loadu_ps(s + 4 * src_ld), g = _mm256_loadu_ps(s + 5 * src_ld);
  __m256 h = _mm256_loadu_ps(s + 6 * src_ld), k = _mm256_loadu_ps(s + 7 * src_ld);
  /* pairs: a0 b0 a1 b1 | a4 b4 a5 b5 and a2 b2 a3 b3 | a6 b6 a7 b7, ... */
  __m256 ab0 = _mm256_unpacklo_ps(a, b), ab1 = _mm256_unpackhi_ps(a, b);
  __m256 ce0 = _mm256_unpacklo_ps(c, e), ce1 = _mm256_unpackhi_ps(c, e);
  __m256 fg0 = _mm256_unpacklo_ps(f, g), fg1 = _mm256_unpackhi_ps(f, g);
  __m256 hk0 = _mm256_unpacklo_ps(h, k), hk1 = _mm256_unpackhi_ps(h, k);
  /* quads: column j of rows a..e in the low lane, column j + 4 in the high */
  __m256 q0 = _mm256_shuffle_ps(ab0, ce0, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 q1 = _mm256_shuffle_ps(ab0, ce0, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 q2 = _mm256_shuffle_ps(ab1, ce1, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 q3 = _mm256_shuffle_ps(ab1, ce1, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 q4 = _mm256_shuffle_ps(fg0, hk0, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 q5 = _mm256_shuffle_ps(fg0, hk0, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 q6 = _mm256_shuffle_ps(fg1, hk1, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 q7 = _mm256_shuffle_ps(fg1, hk1, _MM_SHUFFLE(3, 2, 3, 2));
  /* whole columns: the low lanes of a..e and f..k, then the high lanes */
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(q0, q4, 0x20));
  _mm256_storeu_ps(d + dst_ld, _mm256_permute2f128_ps(q1, q5, 0x20));
  _mm256_storeu_ps(d + 2 * dst_ld, _mm256_permute2f128_ps(q2, q6, 0x20));
  _mm256_storeu_ps(d + 3 * dst_ld, _mm256_permute2f128_ps(q3, q7, 0x20));
  _mm256_storeu_ps(d + 4 * dst_ld, _mm256_permute2f128_ps(q0, q4, 0x31));
  _mm256_storeu_ps(d + 5 * dst_ld, _mm256_permute2f128_ps(q1, q5, 0x31));
  _mm256_storeu_ps(d + 6 * dst_ld, _mm256_permute2f128_ps(q2, q6, 0x31));
  _mm256_storeu_ps(d + 7 * dst_ld, _mm256_permute2f128_ps(q3, q7, 0x31));
}

/* The whole 8-multiple part through tiles, block by block; the ragged
 * bottom rows and right columns through plain C. */
__attribute__((target("avx2"))) static void transpose4_avx2(float *dst, int64_t dst_ld, const float *src,
                                                            int64_t src_ld, int64_t rows, int64_t cols) {
  int64_t r8 = rows & ~(int64_t)7, c8 = cols & ~(int64_t)7;
  for (int64_t rb = 0; rb < r8; rb += BLK) {
    int64_t re = min64(rb + BLK, r8);
    for (int64_t cb = 0; cb < c8; cb += BLK) {
      int64_t ce = min64(cb + BLK, c8);
      for (int64_t r = rb; r < re; r += 8)
        for (int64_t c = cb; c < ce; c += 8) tile8x8(dst + c * dst_ld + r, dst_ld, src + r * src_ld + c, src_ld);
    }
  }
  if (c8 < cols) transpose_plain(4, dst + c8 * dst_ld, dst_ld, src + c8, src_ld, r8, cols - c8);
  if (r8 < rows) transpose_plain(4, dst + r8, dst_ld, src + r8 * src_ld, src_ld, rows - r8, cols);
}
#endif

/* ---- entry ----------------------------------------------------------------------- */

void px_transpose2d(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld, int64_t rows,
                    int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
#ifdef HAVE_AVX2_TILES
  if (es == 4 && rows >= 8 && cols >= 8 && __builtin_cpu_supports("avx2")) {
    transpose4_avx2(dst, dst_ld, src, src_ld, rows, cols);
    return;
  }
#endif
  transpose_plain(es, dst, dst_ld, src, src_ld, rows, cols);
}
