/*
 * transpose.h - a 2-D transpose of any element size (private; transpose.c).
 *
 * Every permutation that keeps dims grouped (NCHW <-> NHWC, a matrix's .T,
 * swapping the last two dims of a batch) is a batch of 2-D transposes once
 * adjacent dims are merged; px_sv_copy() (strided.h) and the XNNPACK
 * backend's StaticTranspose find that case and call this for each matrix of
 * the batch. It only moves bytes: the result is bit-identical to an
 * element-by-element copy.
 */
#ifndef PX_SHAPE_TRANSPOSE_H
#define PX_SHAPE_TRANSPOSE_H

#include <stddef.h>
#include <stdint.h>

/* dst[c * dst_ld + r] = src[r * src_ld + c] for r < rows, c < cols, on
 * elements of es bytes (1, 2, 4 or 8; anything else is copied as 8): src is
 * a rows x cols matrix whose rows start src_ld elements apart, dst its
 * cols x rows transpose with rows dst_ld apart. The two must not overlap.
 * 4-byte elements go through 8x8 AVX2 tiles where the CPU has AVX2; the
 * rest through cache-sized blocks of plain C. */
void px_transpose2d(size_t es, void *dst, int64_t dst_ld, const void *src, int64_t src_ld, int64_t rows,
                    int64_t cols);

#endif /* PX_SHAPE_TRANSPOSE_H */
