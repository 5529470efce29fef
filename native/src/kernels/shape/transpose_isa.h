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

/* The rows x cols part whose sides are multiples of the tile T, walked in
 * BLK x BLK blocks: TILE runs for each T x T tile, with r and c its first
 * row and column (px_transpose2d does the ragged edges). */
#define PX_TILE_WALK(rows, cols, T, TILE)                                                     \
  do {                                                                                        \
    const int64_t rt_ = (rows) & ~(int64_t)((T) - 1), ct_ = (cols) & ~(int64_t)((T) - 1);     \
    for (int64_t rb_ = 0; rb_ < rt_; rb_ += BLK) {                                            \
      const int64_t re_ = min64(rb_ + BLK, rt_);                                              \
      for (int64_t cb_ = 0; cb_ < ct_; cb_ += BLK) {                                          \
        const int64_t ce_ = min64(cb_ + BLK, ct_);                                            \
        for (int64_t r = rb_; r < re_; r += (T))                                              \
          for (int64_t c = cb_; c < ce_; c += (T)) TILE;                                      \
      }                                                                                       \
    }                                                                                         \
  } while (0)

/* Each transposes the part of a rows x cols matrix whose sides are
 * multiples of its tile; px_transpose2d does the edges. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#define HAVE_AVX2_TILES 1
void px_transpose4_avx2(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows, int64_t cols);
/* bytes, 16x16 tiles (SSE2) */
void px_transpose1_sse2(uint8_t *dst, int64_t dst_ld, const uint8_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols);
/* dst[2i] = a[i], dst[2i + 1] = b[i] for i < n, on elements of es bytes (1 or 4) */
void px_interleave2_sse2(size_t es, void *dst, const void *a, const void *b, int64_t n);
/* dst[3i] = a[i], dst[3i + 1] = b[i], dst[3i + 2] = c[i]; AVX2 machines (PSHUFB) */
void px_interleave3_avx2(size_t es, void *dst, const void *a, const void *b, const void *c, int64_t n);
#endif
#if defined(__aarch64__) && !defined(PX_NO_CPU_DISPATCH)
#define HAVE_NEON_TILES 1
void px_transpose4_neon(uint32_t *dst, int64_t dst_ld, const uint32_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols);
void px_transpose1_neon(uint8_t *dst, int64_t dst_ld, const uint8_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols);
#endif

#endif /* PX_SHAPE_TRANSPOSE_ISA_H */
