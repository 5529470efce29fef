/*
 * slice.c - copies of a part of a tensor: slice_copy, select_copy,
 * narrow_copy, unfold_copy, diagonal_copy and as_strided_copy, through the
 * strided views of strided.c.
 */

#include "kernels/shape/strided.h"

/* ---- slicing ---------------------------------------------------------------- */

/* slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None,
 * SymInt step=1, *, Tensor(a!) out) */
static int k_slice_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[5]->u.t;
  if (self->dim == 0) return px_fail(ctx, "cannot slice a zero-dimensional tensor");
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t start, len, step;
  if (px_slice_bounds(ctx, args[2], args[3], args[4], self->sizes[d], &start, &len, &step))
    return PYEXEC_ERR_EXECUTION;
  px_sv s;
  px_sv_from(&s, self);
  s.sizes[d] = len;
  s.strides[d] = self->strides[d] * step;
  if (len > 0) s.data = px_sv_at(&s, start * self->strides[d]);
  return px_copy_view_out(ctx, out, &s);
}

/* select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out) */
static int k_select_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  if (self->dim == 0) return px_fail(ctx, "cannot select on a zero-dimensional tensor");
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t size = self->sizes[d], i = args[2]->u.i;
  if (i < -size || i >= size)
    return px_fail(ctx, "index %lld out of range for dim %d of size %lld", (long long)i, d,
                   (long long)size);
  if (i < 0) i += size;
  px_sv s;
  px_sv_from(&s, self);
  s.data = px_sv_at(&s, i * self->strides[d]);
  for (int j = d; j + 1 < self->dim; j++) {
    s.sizes[j] = self->sizes[j + 1];
    s.strides[j] = self->strides[j + 1];
  }
  s.dim = self->dim - 1;
  return px_copy_view_out(ctx, out, &s);
}

/* narrow_copy.out(Tensor self, int dim, SymInt start, SymInt length, *, Tensor(a!) out) */
static int k_narrow_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[4]->u.t;
  if (self->dim == 0) return px_fail(ctx, "cannot narrow a zero-dimensional tensor");
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t size = self->sizes[d], start = args[2]->u.i, len = args[3]->u.i;
  if (start < -size || start > size)
    return px_fail(ctx, "start %lld out of range for dim %d of size %lld", (long long)start, d,
                   (long long)size);
  if (start < 0) start += size;
  if (len < 0 || start + len > size)
    return px_fail(ctx, "start %lld + length %lld exceeds dim %d of size %lld",
                   (long long)start, (long long)len, d, (long long)size);
  return px_narrow_into(ctx, self, d, start, len, out);
}

/* unfold_copy.out(Tensor self, int dimension, int size, int step, *, Tensor(a!) out) */
static int k_unfold_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[4]->u.t;
  int64_t size = args[2]->u.i, step = args[3]->u.i;
  if (step <= 0) return px_fail(ctx, "step %lld must be positive", (long long)step);
  if (size < 0) return px_fail(ctx, "size %lld is negative", (long long)size);
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (self->dim >= PX_MAX_DIM) return px_fail(ctx, "self has %d dims already", self->dim);
  px_sv s;
  px_sv_from(&s, self);
  if (self->dim == 0) {
    if (size > 1)
      return px_fail(ctx, "size %lld exceeds the size 1 of a zero-dimensional tensor",
                     (long long)size);
    s.dim = 1;
    s.sizes[0] = size;
    s.strides[0] = 1;
    return px_copy_view_out(ctx, out, &s);
  }
  int64_t dsize = self->sizes[d];
  if (size > dsize)
    return px_fail(ctx, "size %lld exceeds dim %d of size %lld", (long long)size, d,
                   (long long)dsize);
  s.sizes[d] = (dsize - size) / step + 1;
  s.strides[d] = self->strides[d] * step;
  s.sizes[self->dim] = size;
  s.strides[self->dim] = self->strides[d];
  s.dim = self->dim + 1;
  return px_copy_view_out(ctx, out, &s);
}

/* diagonal_copy.out(Tensor self, int offset=0, int dim1=0, int dim2=1, *, Tensor(a!) out) */
static int k_diagonal_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[4]->u.t;
  if (self->dim < 2) return px_fail(ctx, "self has %d dims; diagonal needs at least 2", self->dim);
  int64_t off = args[1]->u.i;
  int a = px_wrap_dim(ctx, args[2]->u.i, self->dim);
  if (a < 0) return PYEXEC_ERR_EXECUTION;
  int b = px_wrap_dim(ctx, args[3]->u.i, self->dim);
  if (b < 0) return PYEXEC_ERR_EXECUTION;
  if (a == b) return px_fail(ctx, "dim1 and dim2 are both %d", a);
  int64_t len, start = 0;
  if (off >= 0) {
    len = self->sizes[b] - off < self->sizes[a] ? self->sizes[b] - off : self->sizes[a];
    start = off * self->strides[b];
  } else {
    len = self->sizes[a] + off < self->sizes[b] ? self->sizes[a] + off : self->sizes[b];
    start = -off * self->strides[a];
  }
  if (len <= 0) {
    len = 0;
    start = 0;
  }
  px_sv s;
  s.data = (char *)self->data;
  s.dtype = self->dtype;
  s.dim = 0;
  for (int k = 0; k < self->dim; k++) {
    if (k == a || k == b) continue;
    s.sizes[s.dim] = self->sizes[k];
    s.strides[s.dim] = self->strides[k];
    s.dim++;
  }
  s.sizes[s.dim] = len;
  s.strides[s.dim] = self->strides[a] + self->strides[b];
  s.dim++;
  s.data = px_sv_at(&s, start);
  return px_copy_view_out(ctx, out, &s);
}

/* as_strided_copy.out(Tensor self, SymInt[] size, SymInt[] stride,
 * SymInt? storage_offset=None, *, Tensor(a!) out); self's buffer is the storage. */
static int k_as_strided_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[4]->u.t;
  if (px_check_list_len(ctx, args[1], "size")) return PYEXEC_ERR_EXECUTION;
  uint32_t n = args[1]->u.il.n;
  if (args[2]->u.il.n != n)
    return px_fail(ctx, "size has %u entries but stride has %u", (unsigned)n,
                   (unsigned)args[2]->u.il.n);
  const int64_t *sizes = px_intlist(args[1]), *strides = px_intlist(args[2]);
  int64_t off = args[3]->tag == PX_V_NONE ? 0 : args[3]->u.i;
  if (off < 0) return px_fail(ctx, "negative storage_offset %lld", (long long)off);
  px_sv s;
  s.data = (char *)self->data;
  s.dtype = self->dtype;
  s.dim = (int)n;
  int64_t last = off, numel = 1;
  for (uint32_t k = 0; k < n; k++) {
    if (sizes[k] < 0) return px_fail(ctx, "negative size %lld at dim %u", (long long)sizes[k], k);
    if (strides[k] < 0)
      return px_fail(ctx, "negative stride %lld at dim %u", (long long)strides[k], k);
    s.sizes[k] = sizes[k];
    s.strides[k] = strides[k];
    numel *= sizes[k];
    if (sizes[k] > 0) last += (sizes[k] - 1) * strides[k];
  }
  if (numel > 0 && last >= self->numel)
    return px_fail(ctx, "view reaches element %lld of self's storage of %lld elements",
                   (long long)last, (long long)self->numel);
  if (numel > 0) s.data = px_sv_at(&s, off);
  return px_copy_view_out(ctx, out, &s);
}

const px_kernel_def px_kernels_slice[] = {
    {"aten::slice_copy.Tensor_out", "TIiiIT|T", k_slice_copy},
    {"aten::select_copy.int_out", "TIIT|T", k_select_copy},
    {"aten::narrow_copy.out", "TIIIT|T", k_narrow_copy},
    {"aten::unfold_copy.out", "TIIIT|T", k_unfold_copy},
    {"aten::diagonal_copy.out", "TIIIT|T", k_diagonal_copy},
    {"aten::as_strided_copy.out", "TLLiT|T", k_as_strided_copy},
    {NULL, NULL, NULL},
};
