/*
 * transpose_neon.c - transpose.c's 4-byte transpose through NEON 4x4 tiles
 * (transpose_isa.h). Elsewhere than on AArch64 this file compiles to nothing.
 */
#include "kernels/shape/transpose_isa.h"

/* ---- AArch64 NEON 4x4 tiles ------------------------------------------------------ */

#ifdef HAVE_NEON_TILES
#include <arm_neon.h>

/* As px_transpose4_avx2 with 4x4 tiles: four row loads, two rounds of TRN1 /
 * TRN2 (32-bit, then 64-bit), four column stores; whole 32-bit words move,
 * so bits come out as they went in. */
void px_transpose4_neon(uint32_t *dst, int64_t dst_ld, const uint32_t *src, int64_t src_ld, int64_t rows,
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
}
#endif

typedef int px_transpose_neon_unused; /* ISO C: no empty translation unit */
