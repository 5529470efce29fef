/*
 * scatter.c - gather and the kernels that write by index: scatter (src and
 * value), scatter_add, index_copy, slice_scatter, select_scatter and
 * masked_scatter. See index.c for how negative indices are treated.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/index/index_util.h"

/* ---- gather / scatter ------------------------------------------------------------ */

static int ndim1(const px_tensor *t) { return t->dim ? t->dim : 1; }
static int64_t size1(const px_tensor *t, int k) { return t->dim ? t->sizes[k] : 1; }

/* A header with `like`'s sizes and the strides of `t` (the one along `zero_dim`
 * set to 0 when zero_dim >= 0). Handles 0-d tensors as 1-element 1-d ones. */
static void strided_like(px_tensor *v, const px_tensor *t, const px_tensor *like, int zero_dim) {
  int64_t strides[PX_MAX_DIM];
  for (int k = 0; k < like->dim; k++) {
    strides[k] = t->dim ? t->strides[k] : 0;
    if (k == zero_dim) strides[k] = 0;
  }
  view_init(v, t->data, t->dtype, like->dim, like->sizes, strides);
}

/* gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out) */
static int k_gather(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *index = args[2]->u.t, *out = args[4]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  if (!is_index_dtype(index->dtype))
    return px_fail(ctx, "index has dtype %s; expected int64", px_dtype_name(index->dtype));
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (ndim1(index) != ndim1(self))
    return px_fail(ctx, "index has %d dims but self has %d", index->dim, self->dim);
  if (index->dim == self->dim)
    for (int k = 0; k < self->dim; k++)
      if (k != d && index->sizes[k] > self->sizes[k])
        return px_fail(ctx, "index has size %lld at dim %d, larger than self's %lld",
                       (long long)index->sizes[k], k, (long long)self->sizes[k]);
  rc = px_resize_like(ctx, out, index);
  if (rc) return rc;
  if (index->numel == 0) return 0;
  int64_t dsize = size1(self, d), dstride = self->dim ? self->strides[d] : 0;
  px_tensor sv;
  strided_like(&sv, self, index, d);
  px_iter it;
  px_iter_init(&it, index->dim, index->sizes);
  px_iter_add(&it, index);
  px_iter_add(&it, out);
  px_iter_add(&it, &sv);
  px_iter_coalesce(&it);
  size_t es = px_elsize(self->dtype);
  const char *src = self->data;
  char *dst = out->data;
  do {
    for (int64_t k = 0; k < it.inner; k++) {
      int64_t v = load_index(index->data, index->dtype, it.off[0] + k * it.inner_stride[0]);
      if (v < 0 || v >= dsize) return index_oob(ctx, v, d, dsize, false);
      int64_t so = it.off[2] + k * it.inner_stride[2] + v * dstride;
      int64_t oo = it.off[1] + k * it.inner_stride[1];
      switch (es) {
        case 1: ((uint8_t *)dst)[oo] = ((const uint8_t *)src)[so]; break;
        case 2: ((uint16_t *)dst)[oo] = ((const uint16_t *)src)[so]; break;
        case 4: ((uint32_t *)dst)[oo] = ((const uint32_t *)src)[so]; break;
        default: ((uint64_t *)dst)[oo] = ((const uint64_t *)src)[so]; break;
      }
    }
  } while (px_iter_next(&it));
  return 0;
}

enum { SC_SRC, SC_VALUE, SC_ADD };

static int scatter_common(px_ctx *ctx, px_tensor *self, int64_t dim, px_tensor *index,
                          px_tensor *src, const px_value *value, px_tensor *out, int mode) {
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  if (src && (rc = px_require_same_dtype(ctx, src, "src", self, "self"))) return rc;
  if (!is_index_dtype(index->dtype))
    return px_fail(ctx, "index has dtype %s; expected int64", px_dtype_name(index->dtype));
  int d = px_wrap_dim(ctx, dim, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (index->numel > 0) {
    if (ndim1(index) != ndim1(self))
      return px_fail(ctx, "index has %d dims but self has %d", index->dim, self->dim);
    if (src && ndim1(src) != ndim1(index))
      return px_fail(ctx, "index has %d dims but src has %d", index->dim, src->dim);
    for (int k = 0; k < index->dim; k++) {
      if (k != d && index->sizes[k] > size1(self, k))
        return px_fail(ctx, "index has size %lld at dim %d, larger than self's %lld",
                       (long long)index->sizes[k], k, (long long)size1(self, k));
      if (src && index->sizes[k] > size1(src, k))
        return px_fail(ctx, "index has size %lld at dim %d, larger than src's %lld",
                       (long long)index->sizes[k], k, (long long)size1(src, k));
    }
  }
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  if (index->numel == 0) return 0;
  int64_t dsize = size1(out, d), dstride = out->dim ? out->strides[d] : 0;
  px_tensor ov, sv;
  strided_like(&ov, out, index, d);
  px_iter it;
  px_iter_init(&it, index->dim, index->sizes);
  px_iter_add(&it, index);
  px_iter_add(&it, &ov);
  if (src) {
    strided_like(&sv, src, index, -1);
    px_iter_add(&it, &sv);
  }
  px_iter_coalesce(&it);
  size_t es = px_elsize(out->dtype);
  uint64_t elem = 0;
  if (mode == SC_VALUE) {
    if (value->tag == PX_V_DOUBLE)
      px_store_d(&elem, out->dtype, 0, value->u.d);
    else
      px_store_i(&elem, out->dtype, 0, px_scalar_i(value));
  }
  char *dst = out->data;
  do {
    for (int64_t k = 0; k < it.inner; k++) {
      int64_t v = load_index(index->data, index->dtype, it.off[0] + k * it.inner_stride[0]);
      if (v < 0 || v >= dsize) return index_oob(ctx, v, d, dsize, false);
      char *dp = dst + (it.off[1] + k * it.inner_stride[1] + v * dstride) * (int64_t)es;
      if (mode == SC_VALUE) {
        memcpy(dp, &elem, es);
        continue;
      }
      const char *sp = (const char *)src->data + (it.off[2] + k * it.inner_stride[2]) * (int64_t)es;
      if (mode == SC_SRC)
        memcpy(dp, sp, es);
      else
        acc_run(out->dtype, dp, 0, sp, 0, 1);
    }
  } while (px_iter_next(&it));
  return 0;
}

/* scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) */
static int k_scatter_src(px_ctx *ctx, px_value *const *args) {
  return scatter_common(ctx, args[0]->u.t, args[1]->u.i, args[2]->u.t, args[3]->u.t, NULL,
                        args[4]->u.t, SC_SRC);
}

/* scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out) */
static int k_scatter_value(px_ctx *ctx, px_value *const *args) {
  return scatter_common(ctx, args[0]->u.t, args[1]->u.i, args[2]->u.t, NULL, args[3],
                        args[4]->u.t, SC_VALUE);
}

/* scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) */
static int k_scatter_add(px_ctx *ctx, px_value *const *args) {
  return scatter_common(ctx, args[0]->u.t, args[1]->u.i, args[2]->u.t, args[3]->u.t, NULL,
                        args[4]->u.t, SC_ADD);
}

/* index_copy.out(Tensor self, int dim, Tensor index, Tensor source, *, Tensor(a!) out) */
static int k_index_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *index = args[2]->u.t, *source = args[3]->u.t;
  px_tensor *out = args[4]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc || (rc = px_require_same_dtype(ctx, source, "source", self, "self"))) return rc;
  if (!is_index_dtype(index->dtype))
    return px_fail(ctx, "index has dtype %s; expected int64", px_dtype_name(index->dtype));
  if (index->dim > 1) return px_fail(ctx, "index has %d dims; expected at most 1", index->dim);
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (ndim1(source) != ndim1(self))
    return px_fail(ctx, "source has %d dims but self has %d", source->dim, self->dim);
  int64_t ni = index->numel, dsize = size1(self, d);
  if (size1(source, d) != ni)
    return px_fail(ctx, "source has size %lld at dim %d but index has %lld elements",
                   (long long)size1(source, d), d, (long long)ni);
  for (int k = 0; k < self->dim; k++)
    if (k != d && source->sizes[k] != self->sizes[k])
      return px_fail(ctx, "source has size %lld at dim %d, self has %lld",
                     (long long)source->sizes[k], k, (long long)self->sizes[k]);
  if (px_require_contiguous(ctx, source, "source") || px_require_contiguous(ctx, index, "index"))
    return PYEXEC_ERR_EXECUTION;
  for (int64_t i = 0; i < ni; i++) {
    int64_t v = load_index(index->data, index->dtype, i);
    if (v < 0 || v >= dsize) return index_oob(ctx, v, d, dsize, false);
  }
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  if (px_require_contiguous(ctx, out, "out")) return PYEXEC_ERR_EXECUTION;
  if (source->numel == 0) return 0;
  int64_t outer = self->dim ? px_prod(self->sizes, 0, d) : 1;
  int64_t inner = self->dim ? px_prod(self->sizes, d + 1, self->dim) : 1;
  size_t row = (size_t)inner * px_elsize(self->dtype);
  const char *src = source->data;
  char *dst = out->data;
  for (int64_t o = 0; o < outer; o++) {
    char *base = dst + (size_t)(o * dsize) * row;
    for (int64_t i = 0; i < ni; i++) {
      int64_t v = load_index(index->data, index->dtype, i);
      memcpy(base + (size_t)v * row, src, row);
      src += row;
    }
  }
  return 0;
}

/* ---- slice / select scatter ---------------------------------------------------------- */

/* Writes src into a view of out (view sizes must equal src's). */
static int put_view(px_ctx *ctx, px_tensor *out, char *base, int dim, const int64_t *sizes,
                    const int64_t *strides, const px_tensor *src) {
  if (src->dim != dim) goto bad;
  for (int k = 0; k < dim; k++)
    if (src->sizes[k] != sizes[k]) goto bad;
  px_tensor v;
  view_init(&v, base, out->dtype, dim, sizes, strides);
  copy_same(&v, src);
  return 0;
bad:;
  char a[160], b[160];
  size_t n = 0;
  a[0] = b[0] = 0;
  for (int k = 0; k < src->dim && n < sizeof a; k++)
    n += (size_t)snprintf(a + n, sizeof a - n, k ? ", %lld" : "%lld", (long long)src->sizes[k]);
  n = 0;
  for (int k = 0; k < dim && n < sizeof b; k++)
    n += (size_t)snprintf(b + n, sizeof b - n, k ? ", %lld" : "%lld", (long long)sizes[k]);
  return px_fail(ctx, "src has shape [%s] but the embedded slice has shape [%s]", a, b);
}

/* slice_scatter.out(Tensor self, Tensor src, int dim=0, SymInt? start=None,
 * SymInt? end=None, SymInt step=1, *, Tensor(a!) out) */
static int k_slice_scatter(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *out = args[6]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc || (rc = px_require_same_dtype(ctx, src, "src", self, "self"))) return rc;
  if (self->dim == 0) return px_fail(ctx, "cannot slice a zero-dimensional tensor");
  int d = px_wrap_dim(ctx, args[2]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t start, len, step;
  if (px_slice_bounds(ctx, args[3], args[4], args[5], self->sizes[d], &start, &len, &step))
    return PYEXEC_ERR_EXECUTION;
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  int64_t sizes[PX_MAX_DIM], strides[PX_MAX_DIM];
  for (int k = 0; k < out->dim; k++) {
    sizes[k] = out->sizes[k];
    strides[k] = out->strides[k];
  }
  sizes[d] = len;
  strides[d] *= step;
  char *base = (char *)out->data;
  if (len > 0) base += start * out->strides[d] * (int64_t)px_elsize(out->dtype);
  return put_view(ctx, out, base, out->dim, sizes, strides, src);
}

/* select_scatter.out(Tensor self, Tensor src, int dim, SymInt index, *, Tensor(a!) out) */
static int k_select_scatter(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *out = args[4]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc || (rc = px_require_same_dtype(ctx, src, "src", self, "self"))) return rc;
  if (self->dim == 0) return px_fail(ctx, "cannot select on a zero-dimensional tensor");
  int d = px_wrap_dim(ctx, args[2]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t size = self->sizes[d], i = args[3]->u.i;
  if (i < -size || i >= size) return index_oob(ctx, i, d, size, true);
  if (i < 0) i += size;
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  int64_t sizes[PX_MAX_DIM], strides[PX_MAX_DIM];
  int n = 0;
  for (int k = 0; k < out->dim; k++) {
    if (k == d) continue;
    sizes[n] = out->sizes[k];
    strides[n] = out->strides[k];
    n++;
  }
  char *base = (char *)out->data + i * out->strides[d] * (int64_t)px_elsize(out->dtype);
  return put_view(ctx, out, base, n, sizes, strides, src);
}

/* aten::masked_scatter.out(Tensor self, Tensor mask, Tensor source, *,
 *   Tensor(a!) out): out = broadcast(self, mask); positions where the mask is
 *   true take the next element of source (row-major order). */
static int k_masked_scatter(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *mask = args[1]->u.t, *src = args[2]->u.t, *out = args[3]->u.t;
  int rc;
  if (mask->dtype != PX_BOOL)
    return px_fail(ctx, "mask must be bool, got %s", px_dtype_name(mask->dtype));
  if ((rc = px_require_same_dtype(ctx, src, "source", self, "self")) ||
      (rc = px_require_same_dtype(ctx, out, "out", self, "self")))
    return rc;
  if ((rc = px_require_contiguous(ctx, src, "source")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int od;
  int64_t osz[PX_MAX_DIM];
  if ((rc = px_broadcast_sizes(ctx, self->dim, self->sizes, mask->dim, mask->sizes, &od, osz)))
    return rc;
  if ((rc = px_resize(ctx, out, od, osz))) return rc;
  if (out->numel == 0) return 0;
  px_iter it;
  px_iter_init(&it, out->dim, out->sizes);
  px_iter_add(&it, out);
  px_iter_add(&it, self);
  px_iter_add(&it, mask);
  px_iter_coalesce(&it);
  const uint8_t *mp = mask->data;
  int64_t used = 0, avail = src->numel;
  BY_ELSIZE(px_elsize(self->dtype), {
    E *op = out->data;
    const E *sp = self->data, *cp = src->data;
    do {
      E *o = op + it.off[0];
      const E *s = sp + it.off[1];
      const uint8_t *m = mp + it.off[2];
      int64_t so = it.inner_stride[0], ss = it.inner_stride[1], sm = it.inner_stride[2];
      for (int64_t k = 0; k < it.inner; k++) {
        if (m[k * sm]) {
          if (used >= avail)
            return px_fail(ctx, "source has %lld elements, fewer than the mask's true entries",
                           (long long)avail);
          o[k * so] = cp[used++];
        } else {
          o[k * so] = s[k * ss];
        }
      }
    } while (px_iter_next(&it));
  })
  return 0;
}

const px_kernel_def px_kernels_scatter[] = {
    {"aten::gather.out", "TITBT|T", k_gather},
    {"aten::scatter.src_out", "TITTT|T", k_scatter_src},
    {"aten::scatter.value_out", "TITST|T", k_scatter_value},
    {"aten::scatter_add.out", "TITTT|T", k_scatter_add},
    {"aten::index_copy.out", "TITTT|T", k_index_copy},
    {"aten::slice_scatter.out", "TTIiiIT|T", k_slice_scatter},
    {"aten::select_scatter.out", "TTIIT|T", k_select_scatter},
    {"aten::masked_scatter.out", "TTTT|T", k_masked_scatter},
    {NULL, NULL, NULL},
};
