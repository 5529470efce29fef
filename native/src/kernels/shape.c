/*
 * shape.c - view-like copies, concatenation and splitting, dtype / layout
 * copies, tensor factories, padding, flipping, rolling, repeating and the
 * triangular masks.
 *
 * Almost every kernel here describes its source as a strided view of an input
 * (sizes, strides in elements, a base pointer) and copies that view into a
 * view of the output with one routine, sv_copy(), which merges dims that are
 * contiguous for both sides, moves contiguous runs with memmove, transposes
 * 2-D blocks for permutations, and converts dtypes when the two sides differ.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../kernel.h"

/* ---- strided views ------------------------------------------------------ */

/* repeat.out describes its output with two dims per input dim. */
#define SV_MAX (2 * PX_MAX_DIM)

typedef struct sv {
  char *data; /* address of element [0, 0, ...] (strides may be negative) */
  int dtype;
  int dim;
  int64_t sizes[SV_MAX];
  int64_t strides[SV_MAX];
} sv;

static void sv_from(sv *v, const px_tensor *t) {
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
static void sv_contig(sv *v, void *data, int dtype, int dim, const int64_t *sizes) {
  v->data = (char *)data;
  v->dtype = dtype;
  v->dim = dim;
  for (int k = 0; k < dim; k++) v->sizes[k] = sizes[k];
  contig_strides(dim, sizes, v->strides);
}

static char *sv_at(const sv *v, int64_t off) {
  return v->data + off * (int64_t)px_elsize(v->dtype);
}

#define TRANSPOSE_BLOCK 32

#define TRANSPOSE_LOOP(T)                                                      \
  do {                                                                         \
    T *d_ = (T *)dp;                                                           \
    const T *s_ = (const T *)sp;                                               \
    for (int64_t ib = 0; ib < rows; ib += TRANSPOSE_BLOCK) {                   \
      int64_t ie = ib + TRANSPOSE_BLOCK < rows ? ib + TRANSPOSE_BLOCK : rows;  \
      for (int64_t jb = 0; jb < cols; jb += TRANSPOSE_BLOCK) {                 \
        int64_t je = jb + TRANSPOSE_BLOCK < cols ? jb + TRANSPOSE_BLOCK : cols;\
        for (int64_t i = ib; i < ie; i++)                                      \
          for (int64_t j = jb; j < je; j++) d_[i * drow + j] = s_[i + j * scol];\
      }                                                                        \
    }                                                                          \
  } while (0)

/* dst[i * drow + j] = src[i + j * scol]: a blocked 2-D transpose. */
static void transpose2d(size_t es, char *dp, int64_t drow, const char *sp, int64_t scol,
                        int64_t rows, int64_t cols) {
  switch (es) {
    case 1: TRANSPOSE_LOOP(uint8_t); break;
    case 2: TRANSPOSE_LOOP(uint16_t); break;
    case 4: TRANSPOSE_LOOP(uint32_t); break;
    default: TRANSPOSE_LOOP(uint64_t); break;
  }
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

/* Copies view src into view dst (equal sizes), converting dtype if needed.
 * The views must not overlap, except for being the very same memory. */
static int sv_copy(px_ctx *ctx, const sv *dst, const sv *src) {
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
  bool transpose = same && nd >= 2 && ds[nd - 1] == 1 && ss[nd - 2] == 1 &&
                   ss[nd - 1] != 1 && sz[nd - 1] >= 8 && sz[nd - 2] >= 8;
  int od = transpose ? nd - 2 : nd - 1; /* dims walked by the outer loop */
  bool via_int = px_is_integral(dst->dtype, true) && px_is_integral(src->dtype, true);
  int64_t inner = sz[nd - 1], dsi = ds[nd - 1], ssi = ss[nd - 1];
  int64_t idx[SV_MAX];
  for (int k = 0; k < od; k++) idx[k] = 0;
  int64_t doff = 0, soff = 0;
  for (;;) {
    char *dp = dst->data + doff * (int64_t)esd;
    const char *sp = src->data + soff * (int64_t)ess;
    if (transpose) {
      transpose2d(esd, dp, ds[nd - 2], sp, ssi, sz[nd - 2], inner);
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
static int copy_same_shape(px_ctx *ctx, px_tensor *out, const px_tensor *self) {
  sv d, s;
  sv_from(&d, out);
  sv_from(&s, self);
  return sv_copy(ctx, &d, &s);
}

/* Copies self into out in row-major logical order (a reshape); the element
 * counts must agree. */
static int copy_reshape(px_ctx *ctx, px_tensor *out, const px_tensor *self) {
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
  sv d, s;
  if (self->contiguous) {
    sv_from(&d, out);
    sv_contig(&s, self->data, self->dtype, out->dim, out->sizes);
    return sv_copy(ctx, &d, &s);
  }
  if (out->contiguous) {
    sv_from(&s, self);
    sv_contig(&d, out->data, out->dtype, self->dim, self->sizes);
    return sv_copy(ctx, &d, &s);
  }
  void *tmp = px_scratch(ctx, (size_t)n * px_elsize(self->dtype));
  if (!tmp) return PYEXEC_ERR_EXECUTION;
  sv_from(&s, self);
  sv_contig(&d, tmp, self->dtype, self->dim, self->sizes);
  int rc = sv_copy(ctx, &d, &s);
  if (rc) return rc;
  sv_from(&d, out);
  sv_contig(&s, tmp, self->dtype, out->dim, out->sizes);
  return sv_copy(ctx, &d, &s);
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
static void fill_scalar(px_tensor *t, const px_value *v) {
  uint64_t elem = 0;
  scalar_to_elem(&elem, t->dtype, v);
  fill_bytes(t->data, px_elsize(t->dtype), t->numel, &elem);
}

static void fill_int(px_tensor *t, int64_t v) {
  uint64_t elem = 0;
  px_store_i(&elem, t->dtype, 0, v);
  fill_bytes(t->data, px_elsize(t->dtype), t->numel, &elem);
}

static void fmt_sizes(char *buf, size_t cap, int dim, const int64_t *sizes) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int k = 0; k < dim && n < cap; k++)
    n += (size_t)snprintf(buf + n, cap - n, k ? ", %lld" : "%lld", (long long)sizes[k]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Checks that an int-list argument is not longer than PX_MAX_DIM. */
static int check_list_len(px_ctx *ctx, const px_value *v, const char *what) {
  if (v->u.il.n > PX_MAX_DIM)
    return px_fail(ctx, "%s has %u entries; at most %d dims are supported", what,
                   (unsigned)v->u.il.n, PX_MAX_DIM);
  return 0;
}

/* ---- reshapes ------------------------------------------------------------ */

/* view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) */
static int k_view_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if (check_list_len(ctx, args[1], "size")) return PYEXEC_ERR_EXECUTION;
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
      known *= req[k];
    }
  }
  if (infer >= 0) {
    if (known == 0 || self->numel % known != 0) {
      char b[200];
      fmt_sizes(b, sizeof b, n, req);
      return px_fail(ctx, "shape %s is invalid for input of size %lld", b,
                     (long long)self->numel);
    }
    sizes[infer] = self->numel / known;
    known *= sizes[infer];
  }
  if (known != self->numel) {
    char b[200];
    fmt_sizes(b, sizeof b, n, req);
    return px_fail(ctx, "shape %s is invalid for input of size %lld", b, (long long)self->numel);
  }
  int rc = px_resize(ctx, out, n, sizes);
  if (rc) return rc;
  return copy_reshape(ctx, out, self);
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
  return copy_reshape(ctx, out, self);
}

static int squeeze_into(px_ctx *ctx, px_tensor *self, px_tensor *out, const bool *drop) {
  int64_t sizes[PX_MAX_DIM];
  int n = 0;
  for (int k = 0; k < self->dim; k++)
    if (!(drop[k] && self->sizes[k] == 1)) sizes[n++] = self->sizes[k];
  int rc = px_resize(ctx, out, n, sizes);
  if (rc) return rc;
  return copy_reshape(ctx, out, self);
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

/* Copies view `s` (dims s->dim) into out after resizing out to s's sizes. */
static int copy_view_out(px_ctx *ctx, px_tensor *out, const sv *s) {
  int rc = px_resize(ctx, out, s->dim, s->sizes);
  if (rc) return rc;
  sv d;
  sv_from(&d, out);
  return sv_copy(ctx, &d, s);
}

/* permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out) */
static int k_permute_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if ((int)args[1]->u.il.n != self->dim)
    return px_fail(ctx, "dims has %u entries but self has %d dims", (unsigned)args[1]->u.il.n,
                   self->dim);
  const int64_t *dims = px_intlist(args[1]);
  bool seen[PX_MAX_DIM] = {false};
  sv s;
  sv_from(&s, self);
  for (int k = 0; k < self->dim; k++) {
    int d = px_wrap_dim(ctx, dims[k], self->dim);
    if (d < 0) return PYEXEC_ERR_EXECUTION;
    if (seen[d]) return px_fail(ctx, "dims repeats dimension %d", d);
    seen[d] = true;
    s.sizes[k] = self->sizes[d];
    s.strides[k] = self->strides[d];
  }
  return copy_view_out(ctx, out, &s);
}

static int transpose_into(px_ctx *ctx, px_tensor *self, px_tensor *out, int64_t d0, int64_t d1) {
  int a = px_wrap_dim(ctx, d0, self->dim);
  if (a < 0) return PYEXEC_ERR_EXECUTION;
  int b = px_wrap_dim(ctx, d1, self->dim);
  if (b < 0) return PYEXEC_ERR_EXECUTION;
  sv s;
  sv_from(&s, self);
  if (self->dim > 0) {
    s.sizes[a] = self->sizes[b];
    s.strides[a] = self->strides[b];
    s.sizes[b] = self->sizes[a];
    s.strides[b] = self->strides[a];
  }
  return copy_view_out(ctx, out, &s);
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

/* Broadcast view of t with sizes (dim, sizes): t's dims align to the right. */
static int expand_view(px_ctx *ctx, sv *s, const px_tensor *t, int dim, const int64_t *sizes,
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

/* expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out) */
static int k_expand_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  if (check_list_len(ctx, args[1], "size")) return PYEXEC_ERR_EXECUTION;
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
  sv s;
  int rc = expand_view(ctx, &s, self, n, sizes, "self");
  if (rc) return rc;
  return copy_view_out(ctx, out, &s);
}

/* ---- plain copies ------------------------------------------------------------ */

static int clone_into(px_ctx *ctx, px_tensor *self, px_tensor *out) {
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  return copy_same_shape(ctx, out, self);
}

/* clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out) */
static int k_clone(px_ctx *ctx, px_value *const *args) {
  return clone_into(ctx, args[0]->u.t, args[2]->u.t);
}

/* alias_copy / detach_copy / lift_fresh_copy .out(Tensor self, *, Tensor(a!) out) */
static int k_copy1(px_ctx *ctx, px_value *const *args) {
  return clone_into(ctx, args[0]->u.t, args[1]->u.t);
}

/* _to_copy.out(Tensor self, *, bool non_blocking=False, MemoryFormat? memory_format=None,
 * Tensor(a!) out): the out tensor's dtype and dim_order decide. */
static int k_to_copy(px_ctx *ctx, px_value *const *args) {
  return clone_into(ctx, args[0]->u.t, args[3]->u.t);
}

static int check_dim_order_arg(px_ctx *ctx, px_value *v, const px_tensor *out) {
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

/* _to_dim_order_copy.out / _clone_dim_order.out(Tensor self, *, bool non_blocking=False,
 * int[]? dim_order=None, Tensor(a!) out) */
static int k_to_dim_order_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  if (out->dim != self->dim)
    return px_fail(ctx, "out has %d dims but self has %d", out->dim, self->dim);
  int rc = check_dim_order_arg(ctx, args[2], out);
  if (rc) return rc;
  return clone_into(ctx, self, out);
}

/* copy.out(Tensor self, Tensor src, bool non_blocking=False, *, Tensor(a!) out) */
static int k_copy_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *out = args[3]->u.t;
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  sv s, d;
  rc = expand_view(ctx, &s, src, self->dim, self->sizes, "src");
  if (rc) return rc;
  sv_from(&d, out);
  return sv_copy(ctx, &d, &s);
}

/* copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!) */
static int k_copy_(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *ret = args[3]->u.t;
  sv s, d;
  int rc = expand_view(ctx, &s, src, self->dim, self->sizes, "src");
  if (rc) return rc;
  if (src->data == self->data && src->numel > 1 && src != self) {
    /* the same storage seen through another tensor: go through scratch */
    size_t bytes = (size_t)src->numel * px_elsize(src->dtype);
    void *tmp = px_scratch(ctx, bytes);
    if (!tmp) return PYEXEC_ERR_EXECUTION;
    memcpy(tmp, src->data, bytes);
    s.data = tmp;
  }
  sv_from(&d, self);
  rc = sv_copy(ctx, &d, &s);
  if (rc) return rc;
  if (ret != self && ret->data != self->data) {
    rc = px_resize_like(ctx, ret, self);
    if (rc) return rc;
    return copy_same_shape(ctx, ret, self);
  }
  return 0;
}

/* ---- factories --------------------------------------------------------------- */

static int resize_to_list(px_ctx *ctx, px_tensor *out, px_value *v) {
  if (check_list_len(ctx, v, "size")) return PYEXEC_ERR_EXECUTION;
  const int64_t *sizes = px_intlist(v);
  for (uint32_t k = 0; k < v->u.il.n; k++)
    if (sizes[k] < 0) return px_fail(ctx, "negative size %lld at dim %u", (long long)sizes[k], k);
  return px_resize(ctx, out, (int)v->u.il.n, sizes);
}

/* full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out) */
static int k_full(px_ctx *ctx, px_value *const *args) {
  px_tensor *out = args[2]->u.t;
  int rc = resize_to_list(ctx, out, args[0]);
  if (rc) return rc;
  fill_scalar(out, args[1]);
  return 0;
}

/* full_like.out(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None,
 * Tensor(a!) out) */
static int k_full_like(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  fill_scalar(out, args[1]);
  return 0;
}

/* zeros.out / ones.out(SymInt[] size, *, Tensor(a!) out) */
static int k_zeros(px_ctx *ctx, px_value *const *args) {
  px_tensor *out = args[1]->u.t;
  int rc = resize_to_list(ctx, out, args[0]);
  if (rc) return rc;
  if (out->numel) memset(out->data, 0, (size_t)out->numel * px_elsize(out->dtype));
  return 0;
}

static int k_ones(px_ctx *ctx, px_value *const *args) {
  px_tensor *out = args[1]->u.t;
  int rc = resize_to_list(ctx, out, args[0]);
  if (rc) return rc;
  fill_int(out, 1);
  return 0;
}

/* empty.out(SymInt[] size, *, MemoryFormat? memory_format=None, Tensor(a!) out) */
static int k_empty(px_ctx *ctx, px_value *const *args) {
  return resize_to_list(ctx, args[2]->u.t, args[0]);
}

/* _empty_dim_order.out(int[] size, *, int[]? dim_order=None, Tensor(a!) out) */
static int k_empty_dim_order(px_ctx *ctx, px_value *const *args) {
  px_tensor *out = args[2]->u.t;
  int rc = resize_to_list(ctx, out, args[0]);
  if (rc) return rc;
  return check_dim_order_arg(ctx, args[1], out);
}

static int arange_fill(px_ctx *ctx, const px_value *vstart, const px_value *vend,
                       const px_value *vstep, px_tensor *out) {
  if (out->dim != 1) return px_fail(ctx, "out has %d dims, expected 1", out->dim);
  bool ints = vstart->tag != PX_V_DOUBLE && vend->tag != PX_V_DOUBLE &&
              vstep->tag != PX_V_DOUBLE;
  double start = px_scalar_d(vstart), end = px_scalar_d(vend), step = px_scalar_d(vstep);
  if (!isfinite(start) || !isfinite(end))
    return px_fail(ctx, "unsupported range %g to %g", start, end);
  if (step == 0 || isnan(step)) return px_fail(ctx, "step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return px_fail(ctx, "upper bound %g and lower bound %g inconsistent with step sign %g", end,
                   start, step);
  int64_t n;
  if (ints) {
    int64_t s = px_scalar_i(vstart), e = px_scalar_i(vend), st = px_scalar_i(vstep);
    int64_t span = e - s;
    n = st > 0 ? (span + st - 1) / st : (span + st + 1) / st;
  } else {
    double nd = ceil((end - start) / step);
    if (!(nd >= 0) || nd > 9.0e18) return px_fail(ctx, "invalid number of elements %g", nd);
    n = (int64_t)nd;
  }
  int64_t sizes[1] = {n};
  int rc = px_resize(ctx, out, 1, sizes);
  if (rc) return rc;
  if (ints && px_is_integral(out->dtype, false)) {
    int64_t s = px_scalar_i(vstart), st = px_scalar_i(vstep);
    if (out->dtype == PX_I64) {
      int64_t *o = out->data;
      for (int64_t k = 0; k < n; k++) o[k] = s + k * st;
    } else {
      for (int64_t k = 0; k < n; k++) px_store_i(out->data, out->dtype, k, s + k * st);
    }
  } else if (out->dtype == PX_F32) {
    float *o = out->data;
    for (int64_t k = 0; k < n; k++) o[k] = (float)(start + (double)k * step);
  } else {
    for (int64_t k = 0; k < n; k++) px_store_d(out->data, out->dtype, k, start + (double)k * step);
  }
  return 0;
}

/* arange.out(Scalar end, *, Tensor(a!) out) */
static int k_arange(px_ctx *ctx, px_value *const *args) {
  px_value zero = {.tag = PX_V_INT, .u.i = 0}, one = {.tag = PX_V_INT, .u.i = 1};
  return arange_fill(ctx, &zero, args[0], &one, args[1]->u.t);
}

/* arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out) */
static int k_arange_start(px_ctx *ctx, px_value *const *args) {
  return arange_fill(ctx, args[0], args[1], args[2], args[3]->u.t);
}

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
    sv s, dv;
    sv_from(&s, t);
    sv_from(&dv, out);
    dv.sizes[d] = t->sizes[d];
    dv.data = sv_at(&dv, pos * out->strides[d]);
    rc = sv_copy(ctx, &dv, &s);
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
    sv s, dv;
    sv_from(&s, ts[k]);
    dv.data = (char *)out->data + (int64_t)k * out->strides[d] * (int64_t)px_elsize(out->dtype);
    dv.dtype = out->dtype;
    dv.dim = ref->dim;
    for (int j = 0, i = 0; j <= ref->dim; j++) {
      if (j == d) continue;
      dv.sizes[i] = out->sizes[j];
      dv.strides[i] = out->strides[j];
      i++;
    }
    rc = sv_copy(ctx, &dv, &s);
    if (rc) return rc;
  }
  return 0;
}

/* Copies self's slice [start, start + len) along dim d into out (resized). */
static int narrow_into(px_ctx *ctx, const px_tensor *self, int d, int64_t start, int64_t len,
                       px_tensor *out) {
  sv s;
  sv_from(&s, self);
  s.sizes[d] = len;
  if (len > 0) s.data = sv_at(&s, start * self->strides[d]);
  return copy_view_out(ctx, out, &s);
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
    rc = narrow_into(ctx, self, d, start, len, outs[k]);
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
    rc = narrow_into(ctx, self, d, start, ss[k], outs[k]);
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
    sv s;
    sv_from(&s, self);
    s.data = sv_at(&s, k * self->strides[d]);
    for (int j = d; j + 1 < self->dim; j++) {
      s.sizes[j] = self->sizes[j + 1];
      s.strides[j] = self->strides[j + 1];
    }
    s.dim = self->dim - 1;
    rc = copy_view_out(ctx, outs[k], &s);
    if (rc) return rc;
  }
  return 0;
}

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
  sv s;
  sv_from(&s, self);
  s.sizes[d] = len;
  s.strides[d] = self->strides[d] * step;
  if (len > 0) s.data = sv_at(&s, start * self->strides[d]);
  return copy_view_out(ctx, out, &s);
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
  sv s;
  sv_from(&s, self);
  s.data = sv_at(&s, i * self->strides[d]);
  for (int j = d; j + 1 < self->dim; j++) {
    s.sizes[j] = self->sizes[j + 1];
    s.strides[j] = self->strides[j + 1];
  }
  s.dim = self->dim - 1;
  return copy_view_out(ctx, out, &s);
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
  return narrow_into(ctx, self, d, start, len, out);
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
  sv s;
  sv_from(&s, self);
  if (self->dim == 0) {
    if (size > 1)
      return px_fail(ctx, "size %lld exceeds the size 1 of a zero-dimensional tensor",
                     (long long)size);
    s.dim = 1;
    s.sizes[0] = size;
    s.strides[0] = 1;
    return copy_view_out(ctx, out, &s);
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
  return copy_view_out(ctx, out, &s);
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
  sv s;
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
  s.data = sv_at(&s, start);
  return copy_view_out(ctx, out, &s);
}

/* as_strided_copy.out(Tensor self, SymInt[] size, SymInt[] stride,
 * SymInt? storage_offset=None, *, Tensor(a!) out); self's buffer is the storage. */
static int k_as_strided_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[4]->u.t;
  if (check_list_len(ctx, args[1], "size")) return PYEXEC_ERR_EXECUTION;
  uint32_t n = args[1]->u.il.n;
  if (args[2]->u.il.n != n)
    return px_fail(ctx, "size has %u entries but stride has %u", (unsigned)n,
                   (unsigned)args[2]->u.il.n);
  const int64_t *sizes = px_intlist(args[1]), *strides = px_intlist(args[2]);
  int64_t off = args[3]->tag == PX_V_NONE ? 0 : args[3]->u.i;
  if (off < 0) return px_fail(ctx, "negative storage_offset %lld", (long long)off);
  sv s;
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
  if (numel > 0) s.data = sv_at(&s, off);
  return copy_view_out(ctx, out, &s);
}

/* ---- padding, flipping, rolling, repeating --------------------------------------- */

/* constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out) */
static int k_constant_pad_nd(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  uint32_t np = args[1]->u.il.n;
  const int64_t *pad = px_intlist(args[1]);
  if (np % 2 != 0) return px_fail(ctx, "pad has odd length %u", (unsigned)np);
  if ((int)(np / 2) > self->dim)
    return px_fail(ctx, "pad has %u entries, too many for %d dims", (unsigned)np, self->dim);
  int64_t sizes[PX_MAX_DIM];
  sv s, dv;
  sv_from(&s, self);
  for (int k = 0; k < self->dim; k++) sizes[k] = self->sizes[k];
  int64_t soff = 0, doff = 0;
  int64_t dstarts[PX_MAX_DIM] = {0};
  for (uint32_t i = 0; i < np / 2; i++) {
    int d = self->dim - 1 - (int)i;
    int64_t l = pad[2 * i], r = pad[2 * i + 1];
    int64_t ns = self->sizes[d] + l + r;
    if (ns < 0)
      return px_fail(ctx, "padding (%lld, %lld) makes dim %d of size %lld negative", (long long)l,
                     (long long)r, d, (long long)self->sizes[d]);
    sizes[d] = ns;
    int64_t keep = self->sizes[d] + (l < 0 ? l : 0) + (r < 0 ? r : 0);
    if (keep < 0) keep = 0;
    s.sizes[d] = keep;
    if (l < 0) soff += -l * self->strides[d];
    dstarts[d] = l > 0 ? l : 0;
  }
  int rc = px_resize(ctx, out, self->dim, sizes);
  if (rc) return rc;
  if (out->numel == 0) return 0;
  fill_scalar(out, args[2]);
  int64_t keepn = 1;
  for (int k = 0; k < self->dim; k++) keepn *= s.sizes[k];
  if (keepn == 0) return 0;
  sv_from(&dv, out);
  for (int k = 0; k < self->dim; k++) {
    dv.sizes[k] = s.sizes[k];
    doff += dstarts[k] * out->strides[k];
  }
  s.data = sv_at(&s, soff);
  dv.data = sv_at(&dv, doff);
  return sv_copy(ctx, &dv, &s);
}

/* flip.out(Tensor self, int[] dims, *, Tensor(a!) out) */
static int k_flip(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  const int64_t *dims = px_intlist(args[1]);
  bool seen[PX_MAX_DIM] = {false};
  sv s;
  sv_from(&s, self);
  int64_t off = 0;
  for (uint32_t k = 0; k < args[1]->u.il.n; k++) {
    int d = px_wrap_dim(ctx, dims[k], self->dim);
    if (d < 0) return PYEXEC_ERR_EXECUTION;
    if (self->dim == 0) continue;
    if (seen[d]) return px_fail(ctx, "dims repeats dimension %d", d);
    seen[d] = true;
    if (self->sizes[d] > 0) off += (self->sizes[d] - 1) * self->strides[d];
    s.strides[d] = -self->strides[d];
  }
  if (self->numel > 0) s.data = sv_at(&s, off);
  return copy_view_out(ctx, out, &s);
}

static int64_t pymod(int64_t a, int64_t n) {
  int64_t r = a % n;
  return r < 0 ? r + n : r;
}

/* roll.out(Tensor self, SymInt[1] shifts, int[1] dims=[], *, Tensor(a!) out) */
static int k_roll(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  uint32_t ns = args[1]->u.il.n, nd = args[2]->u.il.n;
  const int64_t *shifts = px_intlist(args[1]);
  const int64_t *dims = px_intlist(args[2]);
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  if (nd == 0) {
    if (ns != 1) return px_fail(ctx, "shifts has %u entries; without dims it needs 1", (unsigned)ns);
    int64_t n = self->numel;
    if (n == 0) return 0;
    if (px_require_contiguous(ctx, self, "self") || px_require_contiguous(ctx, out, "out"))
      return PYEXEC_ERR_EXECUTION;
    int64_t sh = pymod(shifts[0], n);
    sv d, s;
    int64_t len = n - sh;
    sv_contig(&s, self->data, self->dtype, 1, &len);
    sv_contig(&d, (char *)out->data + sh * (int64_t)px_elsize(out->dtype), out->dtype, 1, &len);
    rc = sv_copy(ctx, &d, &s);
    if (rc || sh == 0) return rc;
    sv_contig(&s, (char *)self->data + len * (int64_t)px_elsize(self->dtype), self->dtype, 1, &sh);
    sv_contig(&d, out->data, out->dtype, 1, &sh);
    return sv_copy(ctx, &d, &s);
  }
  if (ns != nd)
    return px_fail(ctx, "shifts has %u entries but dims has %u", (unsigned)ns, (unsigned)nd);
  int64_t total[PX_MAX_DIM] = {0};
  for (uint32_t k = 0; k < nd; k++) {
    int d = px_wrap_dim(ctx, dims[k], self->dim);
    if (d < 0) return PYEXEC_ERR_EXECUTION;
    if (self->dim == 0) continue;
    total[d] += shifts[k];
  }
  if (self->numel == 0) return 0;
  int rolled[PX_MAX_DIM], nr = 0;
  int64_t sh[PX_MAX_DIM];
  for (int d = 0; d < self->dim; d++) {
    sh[d] = pymod(total[d], self->sizes[d]);
    if (sh[d]) rolled[nr++] = d;
  }
  /* each rolled dim splits into two blocks: [0, n-s) -> [s, n) and [n-s, n) -> [0, s) */
  for (uint32_t m = 0; m < (1u << nr); m++) {
    sv s, dv;
    sv_from(&s, self);
    sv_from(&dv, out);
    int64_t soff = 0, doff = 0;
    for (int j = 0; j < nr; j++) {
      int d = rolled[j];
      int64_t n = self->sizes[d], t = sh[d];
      if (m & (1u << j)) {
        s.sizes[d] = dv.sizes[d] = t;
        soff += (n - t) * self->strides[d];
      } else {
        s.sizes[d] = dv.sizes[d] = n - t;
        doff += t * out->strides[d];
      }
    }
    s.data = sv_at(&s, soff);
    dv.data = sv_at(&dv, doff);
    rc = sv_copy(ctx, &dv, &s);
    if (rc) return rc;
  }
  return 0;
}

/* repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out) */
static int k_repeat(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if (check_list_len(ctx, args[1], "repeats")) return PYEXEC_ERR_EXECUTION;
  int n = (int)args[1]->u.il.n;
  const int64_t *rep = px_intlist(args[1]);
  if (n < self->dim)
    return px_fail(ctx, "repeats has %d entries, fewer than self's %d dims", n, self->dim);
  int lead = n - self->dim;
  int64_t sizes[PX_MAX_DIM], psize[PX_MAX_DIM], pstride[PX_MAX_DIM];
  for (int k = 0; k < n; k++) {
    if (rep[k] < 0) return px_fail(ctx, "repeats[%d] = %lld is negative", k, (long long)rep[k]);
    psize[k] = k < lead ? 1 : self->sizes[k - lead];
    pstride[k] = k < lead ? 0 : self->strides[k - lead];
    sizes[k] = psize[k] * rep[k];
  }
  int rc = px_resize(ctx, out, n, sizes);
  if (rc) return rc;
  if (out->numel == 0) return 0;
  sv s, dv;
  s.data = (char *)self->data;
  s.dtype = self->dtype;
  dv.data = (char *)out->data;
  dv.dtype = out->dtype;
  s.dim = dv.dim = 2 * n;
  for (int k = 0; k < n; k++) {
    s.sizes[2 * k] = dv.sizes[2 * k] = rep[k];
    s.sizes[2 * k + 1] = dv.sizes[2 * k + 1] = psize[k];
    s.strides[2 * k] = 0;
    s.strides[2 * k + 1] = pstride[k];
    dv.strides[2 * k] = psize[k] * out->strides[k];
    dv.strides[2 * k + 1] = out->strides[k];
  }
  return sv_copy(ctx, &dv, &s);
}

/* tril.out / triu.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out) */
static int tri(px_ctx *ctx, px_value *const *args, bool upper) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if (self->dim < 2) return px_fail(ctx, "self has %d dims; expected at least 2", self->dim);
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  if (px_require_contiguous(ctx, out, "out")) return PYEXEC_ERR_EXECUTION;
  rc = copy_same_shape(ctx, out, self);
  if (rc || out->numel == 0) return rc;
  int64_t rows = self->sizes[self->dim - 2], cols = self->sizes[self->dim - 1];
  int64_t batch = out->numel / (rows * cols), diag = args[1]->u.i;
  size_t es = px_elsize(out->dtype);
  char *p = out->data;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < rows; i++, p += (size_t)cols * es) {
      /* keep j - i >= diag (upper) or j - i <= diag (lower) */
      int64_t lo, hi; /* zeroed columns [lo, hi) */
      if (upper) {
        lo = 0;
        hi = i + diag;
      } else {
        lo = i + diag + 1;
        hi = cols;
      }
      if (lo < 0) lo = 0;
      if (hi > cols) hi = cols;
      if (hi > lo) memset(p + (size_t)lo * es, 0, (size_t)(hi - lo) * es);
    }
  }
  return 0;
}

static int k_tril(px_ctx *ctx, px_value *const *args) { return tri(ctx, args, false); }
static int k_triu(px_ctx *ctx, px_value *const *args) { return tri(ctx, args, true); }

/* ---- table --------------------------------------------------------------------- */

const px_kernel_def px_kernels_shape[] = {
    {"aten::view_copy.out", "TLT|T", k_view_copy},
    {"aten::permute_copy.out", "TLT|T", k_permute_copy},
    {"aten::transpose_copy.int_out", "TIIT|T", k_transpose_copy},
    {"aten::t_copy.out", "TT|T", k_t_copy},
    {"aten::expand_copy.out", "TLBT|T", k_expand_copy},
    {"aten::unsqueeze_copy.out", "TIT|T", k_unsqueeze_copy},
    {"aten::squeeze_copy.dim_out", "TIT|T", k_squeeze_copy_dim},
    {"aten::squeeze_copy.dims_out", "TLT|T", k_squeeze_copy_dims},
    {"aten::squeeze_copy.out", "TT|T", k_squeeze_copy_all},
    {"aten::clone.out", "TiT|T", k_clone},
    {"aten::cat.out", "XIT|T", k_cat},
    {"aten::stack.out", "XIT|T", k_stack},
    {"aten::slice_copy.Tensor_out", "TIiiIT|T", k_slice_copy},
    {"aten::select_copy.int_out", "TIIT|T", k_select_copy},
    {"aten::split_copy.Tensor_out", "TIIX|X", k_split_copy},
    {"aten::split_with_sizes_copy.out", "TLIX|X", k_split_with_sizes_copy},
    {"aten::unbind_copy.int_out", "TIX|X", k_unbind_copy},
    {"aten::alias_copy.out", "TT|T", k_copy1},
    {"aten::detach_copy.out", "TT|T", k_copy1},
    {"aten::lift_fresh_copy.out", "TT|T", k_copy1},
    {"aten::_to_copy.out", "TBiT|T", k_to_copy},
    {"dim_order_ops::_to_dim_order_copy.out", "TBlT|T", k_to_dim_order_copy},
    {"dim_order_ops::_clone_dim_order.out", "TBlT|T", k_to_dim_order_copy},
    {"dim_order_ops::_empty_dim_order.out", "LlT|T", k_empty_dim_order},
    {"aten::copy_", "TTB|T", k_copy_},
    {"aten::copy.out", "TTBT|T", k_copy_out},
    {"aten::full.out", "LST|T", k_full},
    {"aten::full_like.out", "TSiT|T", k_full_like},
    {"aten::zeros.out", "LT|T", k_zeros},
    {"aten::ones.out", "LT|T", k_ones},
    {"aten::empty.out", "LiT|T", k_empty},
    {"aten::arange.out", "ST|T", k_arange},
    {"aten::arange.start_out", "SSST|T", k_arange_start},
    {"aten::narrow_copy.out", "TIIIT|T", k_narrow_copy},
    {"aten::unfold_copy.out", "TIIIT|T", k_unfold_copy},
    {"aten::diagonal_copy.out", "TIIIT|T", k_diagonal_copy},
    {"aten::as_strided_copy.out", "TLLiT|T", k_as_strided_copy},
    {"aten::constant_pad_nd.out", "TLST|T", k_constant_pad_nd},
    {"aten::flip.out", "TLT|T", k_flip},
    {"aten::roll.out", "TLLT|T", k_roll},
    {"aten::repeat.out", "TLT|T", k_repeat},
    {"aten::tril.out", "TIT|T", k_tril},
    {"aten::triu.out", "TIT|T", k_triu},
    {NULL, NULL, NULL},
};
