/*
 * transpose_x86.h - one 8x8 tile of 4-byte elements transposed in AVX2 registers
 * (private). Shared by the 2-D transpose (transpose.c) and the GEMM engine's
 * packing of transposed weights (gemm/gemm_x86.c). Include it only where
 * <immintrin.h> is available (x86-64 with GCC or clang); callers choose AVX2
 * at run time, and the function compiles for AVX2 whatever the file's flags.
 */
#ifndef PX_SHAPE_TILE8X8_H
#define PX_SHAPE_TILE8X8_H

#include <immintrin.h>
#include <stdint.h>

/* One 8x8 tile of 4-byte elements: rows a..h of src become the columns of
 * dst. */
__attribute__((target("avx2"), always_inline)) static inline void px_tile8x8_f32(float *d, int64_t dst_ld,
                                                                                 const float *s, int64_t src_ld) {
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

#endif /* PX_SHAPE_TILE8X8_H */
