/*
 * gemm_neon.h - the AArch64 NEON pieces of the float32 GEMM engine (private):
 * a 6 x 16 micro-kernel, the packing of a transposed B into 16-wide panels
 * and the bias / clamp tile epilogue. gemm.c selects them on AArch64 (NEON is
 * part of every AArch64 CPU); elsewhere nothing here is declared and
 * gemm_neon.c compiles to nothing.
 */
#ifndef PX_UKR_NEON_H
#define PX_UKR_NEON_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__aarch64__) && !defined(PX_PORTABLE_KERNELS)
#define PX_NEON_KERNELS 1

/* Tile shape of px_ukr_f32_6x16_neon: the packed A panel holds 6 rows per
 * depth step, the packed B panel 16 columns. */
#define PX_NEON_GEMM_MR 6
#define PX_NEON_GEMM_NR 16

/* The top-left mr x nr part (mr <= 6, nr <= 16) of alpha * A @ B + beta * C
 * over depth kc, written to C (row stride ldc); beta == 0 writes C without
 * reading it. gemm.c's micro-kernel contract: element (i, p) of A at
 * a[i * rsa + p * csa] - a packed row panel (rsa 1, csa 6, rows past mr
 * zero-filled) or A read in place (csa 1; rows past mr are not read); b is
 * one packed kc x 16 column panel (element (p, j) at b[p * 16 + j], columns
 * past nr zero-filled). */
void px_ukr_f32_6x16_neon(int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
                          float *c, int64_t ldc, float alpha, float beta, int mr, int nr);

/* Packs the full 16-wide panels of a column-major B (element (k, j) at
 * B[j * csb + k], a transposed weight) over depth [0, kc) and columns
 * [0, nc): panel q at pb + q * 16 * kc, element (p, j) at [p * 16 + j].
 * 4 x 4 blocks are transposed in registers. Returns the columns packed
 * (nc rounded down to a multiple of 16); the caller packs the rest. */
int64_t px_pack_b_trans16_neon(const float *B, int64_t csb, int64_t kc, int64_t nc, float *pb);

/* The GEMM tile epilogue on an m x n tile at c (row stride ldc): c += bias[j]
 * (bias NULL: none), then, if clamp, c = min(max(c, lo), hi) written as
 * selects so that a NaN stays NaN and -0 stays -0, bit for bit what gemm.c's
 * scalar epilogue computes. */
void px_tile_epilogue_neon(float *c, int64_t ldc, int m, int n, const float *bias, bool clamp,
                           float lo, float hi);
/* Few rows of A, B not packed (gemm.c's small-M paths), C += alpha * A @ B:
 * px_gemm_dots_neon for a column-major B (element (k, j) at B[j * csb + k],
 * a transposed weight: dot products, 4 x 4 tiles of 4-lane accumulators);
 * px_gemm_rows_neon for a row-major B (element (k, j) at B[k * rsb + j]:
 * each row of C a sum of scaled rows of B, four at a time). A's element
 * (i, k) at A[i * rsa + k * csa]. */
void px_gemm_dots_neon(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t rsa,
                       int64_t csa, const float *B, int64_t csb, float *C, int64_t ldc);
void px_gemm_rows_neon(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t rsa,
                       int64_t csa, const float *B, int64_t rsb, float *C, int64_t ldc);
#else
#define PX_NEON_KERNELS 0
#endif

#endif /* PX_UKR_NEON_H */
