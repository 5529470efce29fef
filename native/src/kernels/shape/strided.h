/*
 * strided.h - the strided views the shape kernels copy through, and the
 * helpers they share (private; strided.c).
 *
 * Almost every shape kernel describes its source as a strided view of an
 * input (sizes, strides in elements, a base pointer) and copies that view
 * into a view of the output with one routine, px_sv_copy(), which merges dims
 * that are contiguous for both sides, moves contiguous runs with memmove,
 * transposes 2-D blocks for permutations, and converts dtypes when the two
 * sides differ.
 */
#ifndef PX_SHAPE_STRIDED_H
#define PX_SHAPE_STRIDED_H

#include "kernels/kernel.h"

/* repeat.out describes its output with two dims per input dim. */
#define SV_MAX (2 * PX_MAX_DIM)

typedef struct px_sv {
  char *data; /* address of element [0, 0, ...] (strides may be negative) */
  int dtype;
  int dim;
  int64_t sizes[SV_MAX];
  int64_t strides[SV_MAX];
} px_sv;

/* The view of all of t. */
void px_sv_from(px_sv *v, const px_tensor *t);
/* A contiguous view of `data` with the given sizes. */
void px_sv_contig(px_sv *v, void *data, int dtype, int dim, const int64_t *sizes);
/* The address of element offset `off` (in elements) of v. */
char *px_sv_at(const px_sv *v, int64_t off);
/* Copies view src into view dst (equal sizes), converting dtype if needed.
 * The views must not overlap, except for being the very same memory. */
int px_sv_copy(px_ctx *ctx, const px_sv *dst, const px_sv *src);
/* Copies view `s` (dims s->dim) into out after resizing out to s's sizes. */
int px_copy_view_out(px_ctx *ctx, px_tensor *out, const px_sv *s);
/* Broadcast view of t with sizes (dim, sizes): t's dims align to the right. */
int px_expand_view(px_ctx *ctx, px_sv *s, const px_tensor *t, int dim, const int64_t *sizes,
                   const char *what);
/* Copies a tensor into an output of the same sizes (layouts and dtypes may
 * differ). */
int px_copy_same_shape(px_ctx *ctx, px_tensor *out, const px_tensor *self);
/* Copies self into out in row-major logical order (a reshape); the element
 * counts must agree. */
int px_copy_reshape(px_ctx *ctx, px_tensor *out, const px_tensor *self);
/* Copies self's slice [start, start + len) along dim d into out (resized). */
int px_narrow_into(px_ctx *ctx, const px_tensor *self, int d, int64_t start, int64_t len, px_tensor *out);

/* dst = src [N, H, W] pixels of pixel_bytes each, with pt / pb rows and pl /
 * pr pixels of the byte `fill` around each image (a convolution's padding
 * made real: 0 for floats, the zero point for int8). dst holds
 * N * (H + pt + pb) * (W + pl + pr) pixels; the two must not overlap. */
void px_pad_nhwc(void *dst, const void *src, int64_t N, int64_t H, int64_t W, size_t pixel_bytes, int64_t pt,
                 int64_t pl, int64_t pb, int64_t pr, int fill);

/* Fills all of t's elements with a scalar / an integer. */
void px_fill_scalar(px_tensor *t, const px_value *v);
void px_fill_int(px_tensor *t, int64_t v);
/* "[2, 3]" into buf. */
void px_fmt_sizes(char *buf, size_t cap, int dim, const int64_t *sizes);
/* Checks that an int-list argument is not longer than PX_MAX_DIM. */
int px_check_list_len(px_ctx *ctx, const px_value *v, const char *what);
/* Checks a dim_order argument: None, or a permutation of out's dims. */
int px_check_dim_order_arg(px_ctx *ctx, px_value *v, const px_tensor *out);

#endif /* PX_SHAPE_STRIDED_H */
