/*
 * view.c - copies that reshape or reorder dims: view_copy, unsqueeze_copy /
 * squeeze_copy, permute_copy, transpose_copy, t_copy and expand_copy,
 * through the strided views of strided.c.
 */

#include "kernels/shape/strided.h"

/* ---- reshapes ------------------------------------------------------------ */

/* view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) */
static int k_view_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if (px_check_list_len(ctx, args[1], "size")) return PYEXEC_ERR_EXECUTION;
  int n = (int)args[1]->u.il.n;
  const int64_t *req = px_intlist(args[1]);
  int64_t sizes[PX_MAX_DIM];
  int infer = -1;
  int64_t known = 1;
  for (int k = 0; k < n; k++) {
    if (req[k] == -1) {
      if (infer >= 0) return px_fail(ctx, "size has more than one -1");
      infer = k;
      sizes[k] = 1;
    } else if (req[k] < 0) {
      return px_fail(ctx, "invalid size %lld at dim %d", (long long)req[k], k);
    } else {
      sizes[k] = req[k];
      if (__builtin_mul_overflow(known, req[k], &known)) {
        char b[200];
        px_fmt_sizes(b, sizeof b, n, req);
        return px_fail(ctx, "shape %s has more elements than an int64 holds", b);
      }
    }
  }
  if (infer >= 0) {
    if (known == 0 || self->numel % known != 0) {
      char b[200];
      px_fmt_sizes(b, sizeof b, n, req);
      return px_fail(ctx, "shape %s is invalid for input of size %lld", b,
                     (long long)self->numel);
    }
    sizes[infer] = self->numel / known;
    known *= sizes[infer];
  }
  if (known != self->numel) {
    char b[200];
    px_fmt_sizes(b, sizeof b, n, req);
    return px_fail(ctx, "shape %s is invalid for input of size %lld", b, (long long)self->numel);
  }
  int rc = px_resize(ctx, out, n, sizes);
  if (rc) return rc;
  return px_copy_reshape(ctx, out, self);
}

/* unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out) */
static int k_unsqueeze_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if (self->dim >= PX_MAX_DIM) return px_fail(ctx, "self already has %d dims", self->dim);
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim + 1);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t sizes[PX_MAX_DIM];
  for (int k = 0, j = 0; k <= self->dim; k++) sizes[k] = k == d ? 1 : self->sizes[j++];
  int rc = px_resize(ctx, out, self->dim + 1, sizes);
  if (rc) return rc;
  return px_copy_reshape(ctx, out, self);
}

static int squeeze_into(px_ctx *ctx, px_tensor *self, px_tensor *out, const bool *drop) {
  int64_t sizes[PX_MAX_DIM];
  int n = 0;
  for (int k = 0; k < self->dim; k++)
    if (!(drop[k] && self->sizes[k] == 1)) sizes[n++] = self->sizes[k];
  int rc = px_resize(ctx, out, n, sizes);
  if (rc) return rc;
  return px_copy_reshape(ctx, out, self);
}

/* squeeze_copy.dim_out(Tensor self, int dim, *, Tensor(a!) out) */
static int k_squeeze_copy_dim(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  bool drop[PX_MAX_DIM] = {false};
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (self->dim > 0) drop[d] = true;
  return squeeze_into(ctx, self, out, drop);
}

/* squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out) */
static int k_squeeze_copy_dims(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  bool drop[PX_MAX_DIM] = {false};
  const int64_t *dims = px_intlist(args[1]);
  for (uint32_t k = 0; k < args[1]->u.il.n; k++) {
    int d = px_wrap_dim(ctx, dims[k], self->dim);
    if (d < 0) return PYEXEC_ERR_EXECUTION;
    if (self->dim > 0) drop[d] = true;
  }
  return squeeze_into(ctx, self, out, drop);
}

/* squeeze_copy.out(Tensor self, *, Tensor(a!) out): every size-1 dim */
static int k_squeeze_copy_all(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[1]->u.t;
  bool drop[PX_MAX_DIM];
  for (int k = 0; k < PX_MAX_DIM; k++) drop[k] = true;
  return squeeze_into(ctx, self, out, drop);
}

/* ---- permutations and expansion -------------------------------------------- */

/* permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out) */
static int k_permute_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if ((int)args[1]->u.il.n != self->dim)
    return px_fail(ctx, "dims has %u entries but self has %d dims", (unsigned)args[1]->u.il.n,
                   self->dim);
  const int64_t *dims = px_intlist(args[1]);
  bool seen[PX_MAX_DIM] = {false};
  px_sv s;
  px_sv_from(&s, self);
  for (int k = 0; k < self->dim; k++) {
    int d = px_wrap_dim(ctx, dims[k], self->dim);
    if (d < 0) return PYEXEC_ERR_EXECUTION;
    if (seen[d]) return px_fail(ctx, "dims repeats dimension %d", d);
    seen[d] = true;
    s.sizes[k] = self->sizes[d];
    s.strides[k] = self->strides[d];
  }
  return px_copy_view_out(ctx, out, &s);
}

static int transpose_into(px_ctx *ctx, px_tensor *self, px_tensor *out, int64_t d0, int64_t d1) {
  int a = px_wrap_dim(ctx, d0, self->dim);
  if (a < 0) return PYEXEC_ERR_EXECUTION;
  int b = px_wrap_dim(ctx, d1, self->dim);
  if (b < 0) return PYEXEC_ERR_EXECUTION;
  px_sv s;
  px_sv_from(&s, self);
  if (self->dim > 0) {
    s.sizes[a] = self->sizes[b];
    s.strides[a] = self->strides[b];
    s.sizes[b] = self->sizes[a];
    s.strides[b] = self->strides[a];
  }
  return px_copy_view_out(ctx, out, &s);
}

/* transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out) */
static int k_transpose_copy(px_ctx *ctx, px_value *const *args) {
  return transpose_into(ctx, args[0]->u.t, args[3]->u.t, args[1]->u.i, args[2]->u.i);
}

/* t_copy.out(Tensor self, *, Tensor(a!) out) */
static int k_t_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t;
  if (self->dim > 2) return px_fail(ctx, "self has %d dims; t() expects at most 2", self->dim);
  return transpose_into(ctx, self, args[1]->u.t, 0, self->dim == 2 ? 1 : 0);
}

/* expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out) */
static int k_expand_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  if (px_check_list_len(ctx, args[1], "size")) return PYEXEC_ERR_EXECUTION;
  int n = (int)args[1]->u.il.n;
  const int64_t *req = px_intlist(args[1]);
  if (n < self->dim)
    return px_fail(ctx, "size has %d entries, fewer than self's %d dims", n, self->dim);
  int64_t sizes[PX_MAX_DIM];
  int lead = n - self->dim;
  for (int k = 0; k < n; k++) {
    if (req[k] == -1) {
      if (k < lead) return px_fail(ctx, "-1 is not allowed for the new leading dim %d", k);
      sizes[k] = self->sizes[k - lead];
    } else if (req[k] < 0) {
      return px_fail(ctx, "invalid size %lld at dim %d", (long long)req[k], k);
    } else {
      sizes[k] = req[k];
    }
  }
  px_sv s;
  int rc = px_expand_view(ctx, &s, self, n, sizes, "self");
  if (rc) return rc;
  return px_copy_view_out(ctx, out, &s);
}

const px_kernel_def px_kernels_view[] = {
    {"aten::view_copy.out", "TLT|T", k_view_copy},
    {"aten::permute_copy.out", "TLT|T", k_permute_copy},
    {"aten::transpose_copy.int_out", "TIIT|T", k_transpose_copy},
    {"aten::t_copy.out", "TT|T", k_t_copy},
    {"aten::expand_copy.out", "TLBT|T", k_expand_copy},
    {"aten::unsqueeze_copy.out", "TIT|T", k_unsqueeze_copy},
    {"aten::squeeze_copy.dim_out", "TIT|T", k_squeeze_copy_dim},
    {"aten::squeeze_copy.dims_out", "TLT|T", k_squeeze_copy_dims},
    {"aten::squeeze_copy.out", "TT|T", k_squeeze_copy_all},
    {NULL, NULL, NULL},
};
