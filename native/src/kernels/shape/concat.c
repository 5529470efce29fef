/*
 * concat.c - joining and splitting: cat, stack, split_copy,
 * split_with_sizes_copy and unbind_copy, through the strided views of
 * strided.c.
 */

#include "kernels/shape/strided.h"

/* ---- concatenation and splitting ------------------------------------------------ */

/* cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) */
static int k_cat(px_ctx *ctx, px_value *const *args) {
  px_tensor *const *ts = px_tensorlist(args[0]);
  uint32_t n = args[0]->u.tl.n;
  px_tensor *out = args[2]->u.t;
  const px_tensor *ref = NULL;
  for (uint32_t k = 0; k < n; k++) {
    if (!ts[k]) return px_fail(ctx, "tensors[%u] is None", k);
    if (ts[k]->dim == 0) return px_fail(ctx, "tensors[%u] is zero-dimensional", k);
    /* torch skips legacy empty 1-D tensors */
    if (!(ts[k]->dim == 1 && ts[k]->sizes[0] == 0) && !ref) ref = ts[k];
  }
  if (!ref) {
    int64_t z[1] = {0};
    return px_resize(ctx, out, 1, z);
  }
  int d = px_wrap_dim(ctx, args[1]->u.i, ref->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t sizes[PX_MAX_DIM];
  for (int j = 0; j < ref->dim; j++) sizes[j] = ref->sizes[j];
  sizes[d] = 0;
  for (uint32_t k = 0; k < n; k++) {
    const px_tensor *t = ts[k];
    if (t->dim == 1 && t->sizes[0] == 0) continue;
    if (t->dim != ref->dim)
      return px_fail(ctx, "tensors[%u] has %d dims, expected %d", k, t->dim, ref->dim);
    for (int j = 0; j < ref->dim; j++)
      if (j != d && t->sizes[j] != ref->sizes[j])
        return px_fail(ctx, "tensors[%u] has size %lld at dim %d, expected %lld", k,
                       (long long)t->sizes[j], j, (long long)ref->sizes[j]);
    sizes[d] += t->sizes[d];
  }
  int rc = px_resize(ctx, out, ref->dim, sizes);
  if (rc) return rc;
  int64_t pos = 0;
  for (uint32_t k = 0; k < n; k++) {
    const px_tensor *t = ts[k];
    if (t->dim == 1 && t->sizes[0] == 0) continue;
    px_sv s, dv;
    px_sv_from(&s, t);
    px_sv_from(&dv, out);
    dv.sizes[d] = t->sizes[d];
    dv.data = px_sv_at(&dv, pos * out->strides[d]);
    rc = px_sv_copy(ctx, &dv, &s);
    if (rc) return rc;
    pos += t->sizes[d];
  }
  return 0;
}

/* stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) */
static int k_stack(px_ctx *ctx, px_value *const *args) {
  px_tensor *const *ts = px_tensorlist(args[0]);
  uint32_t n = args[0]->u.tl.n;
  px_tensor *out = args[2]->u.t;
  if (n == 0) return px_fail(ctx, "expects a non-empty list of tensors");
  for (uint32_t k = 0; k < n; k++)
    if (!ts[k]) return px_fail(ctx, "tensors[%u] is None", k);
  const px_tensor *ref = ts[0];
  if (ref->dim >= PX_MAX_DIM) return px_fail(ctx, "tensors have %d dims already", ref->dim);
  int d = px_wrap_dim(ctx, args[1]->u.i, ref->dim + 1);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  for (uint32_t k = 1; k < n; k++) {
    if (ts[k]->dim != ref->dim)
      return px_fail(ctx, "tensors[%u] has %d dims, tensors[0] has %d", k, ts[k]->dim, ref->dim);
    for (int j = 0; j < ref->dim; j++)
      if (ts[k]->sizes[j] != ref->sizes[j])
        return px_fail(ctx, "tensors[%u] has size %lld at dim %d, tensors[0] has %lld", k,
                       (long long)ts[k]->sizes[j], j, (long long)ref->sizes[j]);
  }
  int64_t sizes[PX_MAX_DIM];
  for (int j = 0, i = 0; j <= ref->dim; j++) sizes[j] = j == d ? (int64_t)n : ref->sizes[i++];
  int rc = px_resize(ctx, out, ref->dim + 1, sizes);
  if (rc) return rc;
  for (uint32_t k = 0; k < n; k++) {
    px_sv s, dv;
    px_sv_from(&s, ts[k]);
    dv.data = (char *)out->data + (int64_t)k * out->strides[d] * (int64_t)px_elsize(out->dtype);
    dv.dtype = out->dtype;
    dv.dim = ref->dim;
    for (int j = 0, i = 0; j <= ref->dim; j++) {
      if (j == d) continue;
      dv.sizes[i] = out->sizes[j];
      dv.strides[i] = out->strides[j];
      i++;
    }
    rc = px_sv_copy(ctx, &dv, &s);
    if (rc) return rc;
  }
  return 0;
}

static int check_out_list(px_ctx *ctx, px_value *v, uint32_t want, px_tensor *const **ts) {
  *ts = px_tensorlist(v);
  if (v->u.tl.n != want)
    return px_fail(ctx, "out has %u tensors, the split makes %u", (unsigned)v->u.tl.n,
                   (unsigned)want);
  for (uint32_t k = 0; k < want; k++)
    if (!(*ts)[k]) return px_fail(ctx, "out[%u] is None", k);
  return 0;
}

/* split_copy.Tensor_out(Tensor self, SymInt split_size, int dim=0, *, Tensor(a!)[] out) */
static int k_split_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t;
  if (self->dim == 0) return px_fail(ctx, "self is zero-dimensional");
  int d = px_wrap_dim(ctx, args[2]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t split = args[1]->u.i, size = self->sizes[d];
  if (split < 0) return px_fail(ctx, "split_size %lld is negative", (long long)split);
  if (split == 0 && size != 0)
    return px_fail(ctx, "split_size 0 cannot split a dim of size %lld", (long long)size);
  int64_t chunks = split == 0 ? 1 : (size + split - 1) / split;
  if (chunks < 1) chunks = 1;
  px_tensor *const *outs;
  int rc = check_out_list(ctx, args[3], (uint32_t)chunks, &outs);
  if (rc) return rc;
  for (int64_t k = 0; k < chunks; k++) {
    int64_t start = k * split, len = size - start < split ? size - start : split;
    rc = px_narrow_into(ctx, self, d, start, len, outs[k]);
    if (rc) return rc;
  }
  return 0;
}

/* split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *,
 * Tensor(a!)[] out) */
static int k_split_with_sizes_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t;
  if (self->dim == 0) return px_fail(ctx, "self is zero-dimensional");
  int d = px_wrap_dim(ctx, args[2]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  uint32_t n = args[1]->u.il.n;
  const int64_t *ss = px_intlist(args[1]);
  int64_t total = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (ss[k] < 0) return px_fail(ctx, "split_sizes[%u] = %lld is negative", k, (long long)ss[k]);
    total += ss[k];
  }
  if (total != self->sizes[d])
    return px_fail(ctx, "split_sizes sum to %lld but dim %d has size %lld", (long long)total, d,
                   (long long)self->sizes[d]);
  px_tensor *const *outs;
  int rc = check_out_list(ctx, args[3], n, &outs);
  if (rc) return rc;
  int64_t start = 0;
  for (uint32_t k = 0; k < n; k++) {
    rc = px_narrow_into(ctx, self, d, start, ss[k], outs[k]);
    if (rc) return rc;
    start += ss[k];
  }
  return 0;
}

/* unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out) */
static int k_unbind_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t;
  if (self->dim == 0) return px_fail(ctx, "self is zero-dimensional");
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t n = self->sizes[d];
  px_tensor *const *outs;
  int rc = check_out_list(ctx, args[2], (uint32_t)n, &outs);
  if (rc) return rc;
  for (int64_t k = 0; k < n; k++) {
    px_sv s;
    px_sv_from(&s, self);
    s.data = px_sv_at(&s, k * self->strides[d]);
    for (int j = d; j + 1 < self->dim; j++) {
      s.sizes[j] = self->sizes[j + 1];
      s.strides[j] = self->strides[j + 1];
    }
    s.dim = self->dim - 1;
    rc = px_copy_view_out(ctx, outs[k], &s);
    if (rc) return rc;
  }
  return 0;
}

const px_kernel_def px_kernels_concat[] = {
    {"aten::cat.out", "XIT|T", k_cat},
    {"aten::stack.out", "XIT|T", k_stack},
    {"aten::split_copy.Tensor_out", "TIIX|X", k_split_copy},
    {"aten::split_with_sizes_copy.out", "TLIX|X", k_split_with_sizes_copy},
    {"aten::unbind_copy.int_out", "TIX|X", k_unbind_copy},
    {NULL, NULL, NULL},
};
