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
#include "kernels/shape/tile8x8.h"
#define HAVE_AVX2_TILES 1

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
        for (int64_t c = cb; c < ce; c += 8) px_tile8x8_f32(dst + c * dst_ld + r, dst_ld, src + r * src_ld + c, src_ld);
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
