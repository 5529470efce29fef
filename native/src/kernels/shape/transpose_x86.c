/*
 * transpose_x86.c - transpose.c's 4-byte transpose through AVX2 8x8 tiles
 * (transpose_isa.h). Elsewhere than on x86-64 this file compiles to nothing.
 */
#include "kernels/shape/transpose_isa.h"

/* ---- AVX2 8x8 tiles --------------------------------------------------------- */

#ifdef HAVE_AVX2_TILES
#include "kernels/shape/transpose_x86.h"


/* The rows x cols part whose sides are multiples of 8, through tiles,
 * block by block (px_transpose2d does the ragged edges). */
__attribute__((target("avx2"))) void px_transpose4_avx2(float *dst, int64_t dst_ld, const float *src,
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
}
#endif

typedef int px_transpose_x86_unused; /* ISO C: no empty translation unit */
