/*
 * transpose.c - the 2-D transpose under permute_copy and the XNNPACK
 * backend's StaticTranspose (transpose.h).
 *
 * Both sides are walked in BLK x BLK blocks (16 KiB each for 4-byte
 * elements) so that the rows written stay in L1 while a block's columns are
 * read. Inside a block, 4-byte elements go through 8x8 register tiles on
 * AVX2 (eight row loads, three rounds of unpack / shuffle / lane permute,
 * eight column stores) or 4x4 NEON tiles on AArch64, and bytes (the int8
 * NCHW <-> NHWC transposes of quantized graphs) through 16x16 SSE2 tiles or
 * 8x8 NEON ones; other sizes, and the edges that are not a multiple of the
 * tile, through plain C. Shuffles move bits, so NaN payloads and
 * signed zeros come out as they went in.
 */
#include "kernels/shape/transpose.h"

#include <string.h>

#include "core/cpu.h"
#include "kernels/shape/transpose_isa.h"

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

#if defined(HAVE_AVX2_TILES) || defined(HAVE_NEON_TILES)
/* The ragged right columns [c0, cols) and bottom rows [r0, rows) of a
 * transpose of es-byte elements whose [0, r0) x [0, c0) part the tiles did. */
static void edges(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld, int64_t rows,
                  int64_t cols, int64_t r0, int64_t c0) {
  char *d = dst;
  const char *s = src;
  const int64_t e = (int64_t)es;
  if (c0 < cols) transpose_plain(es, d + c0 * dst_ld * e, dst_ld, s + c0 * e, src_ld, r0, cols - c0);
  if (r0 < rows) transpose_plain(es, d + r0 * e, dst_ld, s + r0 * src_ld * e, src_ld, rows - r0, cols);
}
#endif

/* ---- entry ----------------------------------------------------------------------- */

void px_transpose2d(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld, int64_t rows,
                    int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
#ifdef HAVE_AVX2_TILES
  if (es == 4 && rows >= 8 && cols >= 8 && px_cpu()->avx2) {
    px_transpose4_avx2(dst, dst_ld, src, src_ld, rows, cols);
    edges(4, dst, dst_ld, src, src_ld, rows, cols, rows & ~(int64_t)7, cols & ~(int64_t)7);
    return;
  }
  if ((es == 1 || es == 4) && rows == 2 && dst_ld == 2) { /* pairs, as a pixel shuffle by 2 makes */
    px_interleave2_sse2(es, dst, src, (const char *)src + src_ld * (int64_t)es, cols);
    return;
  }
  if ((es == 1 || es == 4) && rows == 3 && dst_ld == 3 && px_cpu()->avx2) { /* an RGB image to NHWC */
    const char *s = src;
    px_interleave3_avx2(es, dst, s, s + src_ld * (int64_t)es, s + 2 * src_ld * (int64_t)es, cols);
    return;
  }
  if (es == 1 && rows >= 16 && cols >= 16) {
    px_transpose1_sse2(dst, dst_ld, src, src_ld, rows, cols);
    edges(1, dst, dst_ld, src, src_ld, rows, cols, rows & ~(int64_t)15, cols & ~(int64_t)15);
    return;
  }
#endif
#ifdef HAVE_NEON_TILES
  if (es == 4 && rows >= 4 && cols >= 4) {
    px_transpose4_neon(dst, dst_ld, src, src_ld, rows, cols);
    edges(4, dst, dst_ld, src, src_ld, rows, cols, rows & ~(int64_t)3, cols & ~(int64_t)3);
    return;
  }
  if (es == 1 && rows >= 8 && cols >= 8) {
    px_transpose1_neon(dst, dst_ld, src, src_ld, rows, cols);
    edges(1, dst, dst_ld, src, src_ld, rows, cols, rows & ~(int64_t)7, cols & ~(int64_t)7);
    return;
  }
#endif
  transpose_plain(es, dst, dst_ld, src, src_ld, rows, cols);
}
