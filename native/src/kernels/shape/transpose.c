/*
 * transpose.c - the 2-D transpose under permute_copy and the XNNPACK
 * backend's StaticTranspose (transpose.h).
 *
 * Both sides are walked in BLK x BLK blocks (16 KiB each for 4-byte
 * elements) so that the rows written stay in L1 while a block's columns are
 * read. Inside a block, 4-byte elements go through 8x8 register tiles on
 * AVX2 (eight row loads, three rounds of unpack / shuffle / lane permute,
 * eight column stores) or 4x4 NEON tiles on AArch64; everything else, and the edges that are not a
 * multiple of 8, through plain C. Shuffles move bits, so NaN payloads and
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

void px_transpose_plain(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld,
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

/* ---- entry ----------------------------------------------------------------------- */

void px_transpose2d(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld, int64_t rows,
                    int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
#ifdef HAVE_AVX2_TILES
  if (es == 4 && rows >= 8 && cols >= 8 && px_cpu()->avx2) {
    px_transpose4_avx2(dst, dst_ld, src, src_ld, rows, cols);
    return;
  }
#endif
#ifdef HAVE_NEON_TILES
  if (es == 4 && rows >= 4 && cols >= 4) {
    px_transpose4_neon(dst, dst_ld, src, src_ld, rows, cols);
    return;
  }
#endif
  px_transpose_plain(es, dst, dst_ld, src, src_ld, rows, cols);
}
