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
#include "kernels/shape/transpose_x86.h"
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

/* ---- AArch64 NEON 4x4 tiles ------------------------------------------------------ */

#if defined(__aarch64__) && !defined(PX_NO_CPU_DISPATCH)
#include <arm_neon.h>
#define HAVE_NEON_TILES 1

/* As transpose4_avx2 with 4x4 tiles: four row loads, two rounds of TRN1 /
 * TRN2 (32-bit, then 64-bit), four column stores; whole 32-bit words move,
 * so bits come out as they went in. */
static void transpose4_neon(uint32_t *dst, int64_t dst_ld, const uint32_t *src, int64_t src_ld, int64_t rows,
                            int64_t cols) {
  int64_t r4 = rows & ~(int64_t)3, c4 = cols & ~(int64_t)3;
  for (int64_t rb = 0; rb < r4; rb += BLK) {
    int64_t re = min64(rb + BLK, r4);
    for (int64_t cb = 0; cb < c4; cb += BLK) {
      int64_t ce = min64(cb + BLK, c4);
      for (int64_t r = rb; r < re; r += 4)
        for (int64_t c = cb; c < ce; c += 4) {
          const uint32_t *s = src + r * src_ld + c;
          const uint32x4_t x0 = vld1q_u32(s), x1 = vld1q_u32(s + src_ld);
          const uint32x4_t x2 = vld1q_u32(s + 2 * src_ld), x3 = vld1q_u32(s + 3 * src_ld);
          const uint64x2_t t0 = vreinterpretq_u64_u32(vtrn1q_u32(x0, x1));
          const uint64x2_t t1 = vreinterpretq_u64_u32(vtrn2q_u32(x0, x1));
          const uint64x2_t t2 = vreinterpretq_u64_u32(vtrn1q_u32(x2, x3));
          const uint64x2_t t3 = vreinterpretq_u64_u32(vtrn2q_u32(x2, x3));
          uint32_t *d = dst + c * dst_ld + r;
          vst1q_u32(d, vreinterpretq_u32_u64(vtrn1q_u64(t0, t2)));
          vst1q_u32(d + dst_ld, vreinterpretq_u32_u64(vtrn1q_u64(t1, t3)));
          vst1q_u32(d + 2 * dst_ld, vreinterpretq_u32_u64(vtrn2q_u64(t0, t2)));
          vst1q_u32(d + 3 * dst_ld, vreinterpretq_u32_u64(vtrn2q_u64(t1, t3)));
        }
    }
  }
  if (c4 < cols) transpose_plain(4, dst + c4 * dst_ld, dst_ld, src + c4, src_ld, r4, cols - c4);
  if (r4 < rows) transpose_plain(4, dst + r4, dst_ld, src + r4 * src_ld, src_ld, rows - r4, cols);
}
#endif

/* ---- entry ----------------------------------------------------------------------- */

void px_transpose2d(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld, int64_t rows,
                    int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
#ifdef HAVE_AVX2_TILES
  if (es == 4 && rows >= 8 && cols >= 8 && px_cpu()->avx2) {
    transpose4_avx2(dst, dst_ld, src, src_ld, rows, cols);
    return;
  }
#endif
#ifdef HAVE_NEON_TILES
  if (es == 4 && rows >= 4 && cols >= 4) {
    transpose4_neon(dst, dst_ld, src, src_ld, rows, cols);
    return;
  }
#endif
  transpose_plain(es, dst, dst_ld, src, src_ld, rows, cols);
}
