/*
 * tile.c - the portable tile helpers every float32 GEMM kernel finishes
 * with (tile.h): storing a tile held in a buffer, and the
 * bias / clamp epilogue on a stored tile. gemm.c's portable kernel and
 * gemm_x86.c's AVX2 ones call them, so they lie below both.
 */
#include <stdbool.h>
#include <stdint.h>

#include "kernels/gemm/tile.h"

/* Writes alpha * acc (+ beta * C) for the top-left mr x nr part of a tile
 * held row-major in acc with row length ld. */
void px_gemm_tile_store(const float *acc, int ld, float *c, int64_t ldc, float alpha, float beta,
                       int mr, int nr) {
  for (int i = 0; i < mr; i++) {
    float *cr = c + i * ldc;
    const float *ar = acc + i * ld;
    if (beta == 0.0f)
      for (int j = 0; j < nr; j++) cr[j] = alpha * ar[j];
    else
      for (int j = 0; j < nr; j++) cr[j] = alpha * ar[j] + beta * cr[j];
  }
}

/* The epilogue on an m x n tile at c: bias add, then the clamp
 * (clamp false: none). max(lo, v) keeps a NaN v, as XNNPACK's kernels do. */
void px_gemm_tile_epilogue(float *c, int64_t ldc, int m, int n, const float *bias, bool clamp,
                          float lo, float hi) {
  for (int i = 0; i < m; i++, c += ldc) {
    if (bias)
      for (int j = 0; j < n; j++) c[j] += bias[j];
    if (clamp)
      for (int j = 0; j < n; j++) {
        float v = c[j] < lo ? lo : c[j];
        c[j] = v > hi ? hi : v;
      }
  }
}
