/*
 * transpose_isa.h - what transpose.c shares with its per-ISA files (private):
 * the block size and the tile paths of transpose_x86.c (AVX2 8x8 for 4-byte elements, SSE2
 * 16x16 for bytes) and transpose_neon.c (NEON 4x4 for 4-byte elements, 8x8
 * for bytes).
 */
#ifndef PX_SHAPE_TRANSPOSE_ISA_H
#define PX_SHAPE_TRANSPOSE_ISA_H

#include <stddef.h>
#include <stdint.h>

#define BLK 64

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Each transposes the part of a rows x cols matrix whose sides are
 * multiples of its tile; px_transpose2d does the edges. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#define HAVE_AVX2_TILES 1
void px_transpose4_avx2(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows, int64_t cols);
/* bytes, 16x16 tiles (SSE2) */
void px_transpose1_sse2(uint8_t *dst, int64_t dst_ld, const uint8_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols);
/* dst[2i] = a[i], dst[2i + 1] = b[i] for i < n */
void px_interleave2_sse2(uint8_t *dst, const uint8_t *a, const uint8_t *b, int64_t n);
#endif
#if defined(__aarch64__) && !defined(PX_NO_CPU_DISPATCH)
#define HAVE_NEON_TILES 1
void px_transpose4_neon(uint32_t *dst, int64_t dst_ld, const uint32_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols);
void px_transpose1_neon(uint8_t *dst, int64_t dst_ld, const uint8_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols);
#endif

#endif /* PX_SHAPE_TRANSPOSE_ISA_H */
