/*
 * strided.c - the strided views every shape kernel copies through
 * (strided.h): describing a tensor as a view, and one copy routine between
 * two views; and the small helpers the shape kernels share.
 */
#include "kernels/shape/strided.h"

#include "core/parallel.h"
#include "kernels/shape/transpose.h"

#include <stdio.h>
#include <string.h>

/* ---- strided views ------------------------------------------------------ */

void px_sv_from(px_sv *v, const px_tensor *t) {
  v->data = (char *)t->data;
  v->dtype = t->dtype;
  v->dim = t->dim;
  for (int k = 0; k < t->dim; k++) {
    v->sizes[k] = t->sizes[k];
    v->strides[k] = t->strides[k];
  }
}

static void contig_strides(int dim, const int64_t *sizes, int64_t *strides) {
  int64_t s = 1;
  for (int k = dim - 1; k >= 0; k--) {
    strides[k] = s;
    if (sizes[k] != 0) s *= sizes[k];
  }
}

/* A contiguous view of `data` with the given sizes. */
void px_sv_contig(px_sv *v, void *data, int dtype, int dim, const int64_t *sizes) {
  v->data = (char *)data;
  v->dtype = dtype;
  v->dim = dim;
  for (int k = 0; k < dim; k++) v->sizes[k] = sizes[k];
  contig_strides(dim, sizes, v->strides);
}

char *px_sv_at(const px_sv *v, int64_t off) {
  return v->data + off * (int64_t)px_elsize(v->dtype);
}

#define STRIDED_LOOP(T)                                                 \
  do {                                                                  \
    T *d_ = (T *)dp;                                                    \
    const T *s_ = (const T *)sp;                                        \
    for (int64_t k_ = 0; k_ < n; k_++) d_[k_ * dstr] = s_[k_ * sstr];   \
  } while (0)

/* n elements of size es from sp (stride sstr) to dp (stride dstr). */
static void strided_run(size_t es, char *dp, int64_t dstr, const char *sp, int64_t sstr,
                        int64_t n) {
  switch (es) {
    case 1: STRIDED_LOOP(uint8_t); break;
    case 2: STRIDED_LOOP(uint16_t); break;
    case 4: STRIDED_LOOP(uint32_t); break;
    default: STRIDED_LOOP(uint64_t); break;
  }
}

/* One matrix transpose (a layout change of one image: NCHW <-> NHWC)
 * split over the thread pool by blocks of destination rows: each task
 * writes whole rows of its own; the bytes are the same however it is cut. */
typedef struct transpose_job {
  size_t es;
  char *dst;
  const char *src;
  int64_t dst_ld, src_ld, rows, cols;
} transpose_job;

#define TRANSPOSE_BLOCK 16 /* destination rows per work item */

static void transpose_cols(void *arg, int64_t b, int64_t e, int tid) {
  (void)tid;
  const transpose_job *j = arg;
  const int64_t c0 = b * TRANSPOSE_BLOCK, c1 = e * TRANSPOSE_BLOCK < j->cols ? e * TRANSPOSE_BLOCK : j->cols;
  px_transpose2d(j->es, j->dst + (size_t)(c0 * j->dst_ld) * j->es, j->dst_ld, j->src + (size_t)c0 * j->es,
                 j->src_ld, j->rows, c1 - c0);
}

static void transpose_split(size_t es, char *dst, int64_t dst_ld, const char *src, int64_t src_ld, int64_t rows,
                            int64_t cols) {
  transpose_job j = {es, dst, src, dst_ld, src_ld, rows, cols};
  px_parallel_for((cols + TRANSPOSE_BLOCK - 1) / TRANSPOSE_BLOCK, 1, rows * cols * (int64_t)es, transpose_cols, &j);
}

/* Copies view src into view dst (equal sizes), converting dtype if needed.
 * The views must not overlap, except for being the very same memory. */
int px_sv_copy(px_ctx *ctx, const px_sv *dst, const px_sv *src) {
  if (dst->dim != src->dim)
    return px_fail(ctx, "internal: copy between ranks %d and %d", src->dim, dst->dim);
  int64_t n = 1;
  for (int k = 0; k < dst->dim; k++) {
    if (dst->sizes[k] != src->sizes[k])
      return px_fail(ctx, "internal: copy between sizes %lld and %lld at dim %d",
                     (long long)src->sizes[k], (long long)dst->sizes[k], k);
    n *= dst->sizes[k];
  }
  if (n == 0) return 0;
  /* drop size-1 dims and merge dims contiguous for both sides */
  int nd = 0;
  int64_t sz[SV_MAX], ds[SV_MAX], ss[SV_MAX];
  for (int k = 0; k < dst->dim; k++) {
    int64_t s = dst->sizes[k];
    if (s == 1) continue;
    if (nd > 0 && ds[nd - 1] == dst->strides[k] * s && ss[nd - 1] == src->strides[k] * s) {
      sz[nd - 1] *= s;
      ds[nd - 1] = dst->strides[k];
      ss[nd - 1] = src->strides[k];
      continue;
    }
    sz[nd] = s;
    ds[nd] = dst->strides[k];
    ss[nd] = src->strides[k];
    nd++;
  }
  size_t esd = px_elsize(dst->dtype), ess = px_elsize(src->dtype);
  bool same = dst->dtype == src->dtype;
  if (nd == 0) {
    if (same)
      memmove(dst->data, src->data, esd);
    else
      px_convert(dst->data, dst->dtype, src->data, src->dtype, 1);
    return 0;
  }
  /* a batch of 2-D transposes (NCHW <-> NHWC, .T): contiguous writes along
   * the last dim, contiguous reads along the one before */
  bool transpose = same && nd >= 2 && ds[nd - 1] == 1 && ss[nd - 2] == 1 && ss[nd - 1] != 1;
  int od = transpose ? nd - 2 : nd - 1; /* dims walked by the outer loop */
  bool via_int = px_is_integral(dst->dtype, true) && px_is_integral(src->dtype, true);
  int64_t inner = sz[nd - 1], dsi = ds[nd - 1], ssi = ss[nd - 1];
  int64_t idx[SV_MAX];
  for (int k = 0; k < od; k++) idx[k] = 0;
  int64_t doff = 0, soff = 0;
  for (;;) {
    char *dp = dst->data + doff * (int64_t)esd;
    const char *sp = src->data + soff * (int64_t)ess;
    if (transpose && od == 0) {
      transpose_split(esd, dp, ds[nd - 2], sp, ssi, inner, sz[nd - 2]);
    } else if (transpose) {
      px_transpose2d(esd, dp, ds[nd - 2], sp, ssi, inner, sz[nd - 2]);
    } else if (dsi == 1 && ssi == 1) {
      if (same)
        memmove(dp, sp, (size_t)inner * esd);
      else
        px_convert(dp, dst->dtype, sp, src->dtype, inner);
    } else if (same) {
      strided_run(esd, dp, dsi, sp, ssi, inner);
    } else {
      for (int64_t k = 0; k < inner; k++) {
        char *d1 = dp + k * dsi * (int64_t)esd;
        const char *s1 = sp + k * ssi * (int64_t)ess;
        if (via_int)
          px_store_i(d1, dst->dtype, 0, px_load_i(s1, src->dtype, 0));
        else
          px_store_d(d1, dst->dtype, 0, px_load_d(s1, src->dtype, 0));
      }
    }
    int k = od - 1;
    for (; k >= 0; k--) {
      if (++idx[k] < sz[k]) {
        doff += ds[k];
        soff += ss[k];
        break;
      }
      idx[k] = 0;
      doff -= ds[k] * (sz[k] - 1);
      soff -= ss[k] * (sz[k] - 1);
    }
    if (k < 0) break;
  }
  return 0;
}

/* Copies a tensor into an output of the same sizes (layouts and dtypes may
 * differ). */
int px_copy_same_shape(px_ctx *ctx, px_tensor *out, const px_tensor *self) {
  px_sv d, s;
  px_sv_from(&d, out);
  px_sv_from(&s, self);
  return px_sv_copy(ctx, &d, &s);
}

/* Copies self into out in row-major logical order (a reshape); the element
 * counts must agree. */
int px_copy_reshape(px_ctx *ctx, px_tensor *out, const px_tensor *self) {
  if (out->numel != self->numel)
    return px_fail(ctx, "internal: reshape copy of %lld elements into %lld",
                   (long long)self->numel, (long long)out->numel);
  int64_t n = self->numel;
  if (n == 0) return 0;
  if (self->contiguous && out->contiguous) {
    if (out->dtype == self->dtype)
      memmove(out->data, self->data, (size_t)n * px_elsize(out->dtype));
    else
      px_convert(out->data, out->dtype, self->data, self->dtype, n);
    return 0;
  }
  px_sv d, s;
  if (self->contiguous) {
    px_sv_from(&d, out);
    px_sv_contig(&s, self->data, self->dtype, out->dim, out->sizes);
    return px_sv_copy(ctx, &d, &s);
  }
  if (out->contiguous) {
    px_sv_from(&s, self);
    px_sv_contig(&d, out->data, out->dtype, self->dim, self->sizes);
    return px_sv_copy(ctx, &d, &s);
  }
  void *tmp = px_scratch(ctx, (size_t)n * px_elsize(self->dtype));
  if (!tmp) return PYEXEC_ERR_EXECUTION;
  px_sv_from(&s, self);
  px_sv_contig(&d, tmp, self->dtype, self->dim, self->sizes);
  int rc = px_sv_copy(ctx, &d, &s);
  if (rc) return rc;
  px_sv_from(&d, out);
  px_sv_contig(&s, tmp, self->dtype, out->dim, out->sizes);
  return px_sv_copy(ctx, &d, &s);
}

/* ---- small helpers ------------------------------------------------------ */

static void fill_bytes(void *data, size_t es, int64_t n, const void *elem) {
  switch (es) {
    case 1: memset(data, *(const uint8_t *)elem, (size_t)n); break;
    case 2: {
      uint16_t v, *p = data;
      memcpy(&v, elem, 2);
      for (int64_t k = 0; k < n; k++) p[k] = v;
      break;
    }
    case 4: {
      uint32_t v, *p = data;
      memcpy(&v, elem, 4);
      for (int64_t k = 0; k < n; k++) p[k] = v;
      break;
    }
    default: {
      uint64_t v, *p = data;
      memcpy(&v, elem, 8);
      for (int64_t k = 0; k < n; k++) p[k] = v;
      break;
    }
  }
}

/* Writes a scalar value, converted to `dtype`, into one element. */
static void scalar_to_elem(void *elem, int dtype, const px_value *v) {
  if (v->tag == PX_V_DOUBLE)
    px_store_d(elem, dtype, 0, v->u.d);
  else
    px_store_i(elem, dtype, 0, px_scalar_i(v));
}

/* Fills all of t's elements with a scalar. */
void px_fill_scalar(px_tensor *t, const px_value *v) {
  uint64_t elem = 0;
  scalar_to_elem(&elem, t->dtype, v);
  fill_bytes(t->data, px_elsize(t->dtype), t->numel, &elem);
}

void px_fill_int(px_tensor *t, int64_t v) {
  uint64_t elem = 0;
  px_store_i(&elem, t->dtype, 0, v);
  fill_bytes(t->data, px_elsize(t->dtype), t->numel, &elem);
}

void px_fmt_sizes(char *buf, size_t cap, int dim, const int64_t *sizes) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int k = 0; k < dim && n < cap; k++)
    n += (size_t)snprintf(buf + n, cap - n, k ? ", %lld" : "%lld", (long long)sizes[k]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Checks that an int-list argument is not longer than PX_MAX_DIM. */
int px_check_list_len(px_ctx *ctx, const px_value *v, const char *what) {
  if (v->u.il.n > PX_MAX_DIM)
    return px_fail(ctx, "%s has %u entries; at most %d dims are supported", what,
                   (unsigned)v->u.il.n, PX_MAX_DIM);
  return 0;
}

/* Copies view `s` (dims s->dim) into out after resizing out to s's sizes. */
int px_copy_view_out(px_ctx *ctx, px_tensor *out, const px_sv *s) {
  int rc = px_resize(ctx, out, s->dim, s->sizes);
  if (rc) return rc;
  px_sv d;
  px_sv_from(&d, out);
  return px_sv_copy(ctx, &d, s);
}

/* Broadcast view of t with sizes (dim, sizes): t's dims align to the right. */
int px_expand_view(px_ctx *ctx, px_sv *s, const px_tensor *t, int dim, const int64_t *sizes,
                       const char *what) {
  if (t->dim > dim)
    return px_fail(ctx, "%s has %d dims, more than the %d of the target shape", what, t->dim,
                   dim);
  int lead = dim - t->dim;
  s->data = (char *)t->data;
  s->dtype = t->dtype;
  s->dim = dim;
  for (int k = 0; k < dim; k++) {
    s->sizes[k] = sizes[k];
    if (k < lead) {
      s->strides[k] = 0;
      continue;
    }
    int64_t ts = t->sizes[k - lead];
    if (ts == sizes[k]) {
      s->strides[k] = t->strides[k - lead];
    } else if (ts == 1) {
      s->strides[k] = 0;
    } else {
      return px_fail(ctx, "%s of size %lld cannot be expanded to size %lld at dim %d", what,
                     (long long)ts, (long long)sizes[k], k);
    }
  }
  return 0;
}

int px_check_dim_order_arg(px_ctx *ctx, px_value *v, const px_tensor *out) {
  if (v->tag == PX_V_NONE) return 0;
  if ((int)v->u.il.n != out->dim)
    return px_fail(ctx, "dim_order has %u entries but out has %d dims", (unsigned)v->u.il.n,
                   out->dim);
  const int64_t *o = px_intlist(v);
  bool seen[PX_MAX_DIM] = {false};
  for (int k = 0; k < out->dim; k++) {
    if (o[k] < 0 || o[k] >= out->dim || seen[o[k]])
      return px_fail(ctx, "dim_order entry %lld is not a permutation of 0..%d", (long long)o[k],
                     out->dim - 1);
    seen[o[k]] = true;
  }
  return 0;
}
/* Copies self's slice [start, start + len) along dim d into out (resized). */
int px_narrow_into(px_ctx *ctx, const px_tensor *self, int d, int64_t start, int64_t len,
                       px_tensor *out) {
  px_sv s;
  px_sv_from(&s, self);
  s.sizes[d] = len;
  if (len > 0) s.data = px_sv_at(&s, start * self->strides[d]);
  return px_copy_view_out(ctx, out, &s);
}

void px_pad_nhwc(void *dst, const void *src, int64_t N, int64_t H, int64_t W, size_t pixel_bytes, int64_t pt,
                 int64_t pl, int64_t pb, int64_t pr, int fill) {
  const size_t row = (size_t)(W + pl + pr) * pixel_bytes, in_row = (size_t)W * pixel_bytes;
  char *d = dst;
  const char *x = src;
  for (int64_t n = 0; n < N; n++) {
    memset(d, fill, (size_t)pt * row);
    d += (size_t)pt * row;
    for (int64_t h = 0; h < H; h++, d += row, x += in_row) {
      memset(d, fill, (size_t)pl * pixel_bytes);
      memcpy(d + (size_t)pl * pixel_bytes, x, in_row);
      memset(d + (size_t)pl * pixel_bytes + in_row, fill, (size_t)pr * pixel_bytes);
    }
    memset(d, fill, (size_t)pb * row);
    d += (size_t)pb * row;
  }
}
