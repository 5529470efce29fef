/*
 * tile.h - the portable tile helpers of the float32 GEMM kernels (private;
 * tile.c).
 */
#ifndef PX_GEMM_TILE_H
#define PX_GEMM_TILE_H

#include <stdbool.h>
#include <stdint.h>

/* Stores alpha * acc (+ beta * C unless beta is 0) for the top-left mr x nr
 * part of a tile held row-major in acc with row length ld. */
void px_gemm_tile_store(const float *acc, int ld, float *c, int64_t ldc, float alpha, float beta, int mr, int nr);
/* Adds bias[j] (NULL: none) to each column of an m x n tile at c, then
 * clamps it to [lo, hi] when clamp is set. */
void px_gemm_tile_epilogue(float *c, int64_t ldc, int m, int n, const float *bias, bool clamp, float lo, float hi);

#endif /* PX_GEMM_TILE_H */
