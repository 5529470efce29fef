/*
 * rearrange.c - copies that move or mask elements: flip, roll, repeat and
 * the triangular masks tril / triu, through the strided views of strided.c.
 */
#include <string.h>

#include "kernels/shape/strided.h"

/* flip.out(Tensor self, int[] dims, *, Tensor(a!) out) */
static int k_flip(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  const int64_t *dims = px_intlist(args[1]);
  bool seen[PX_MAX_DIM] = {false};
  px_sv s;
  px_sv_from(&s, self);
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
  if (self->numel > 0) s.data = px_sv_at(&s, off);
  return px_copy_view_out(ctx, out, &s);
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
    px_sv d, s;
    int64_t len = n - sh;
    px_sv_contig(&s, self->data, self->dtype, 1, &len);
    px_sv_contig(&d, (char *)out->data + sh * (int64_t)px_elsize(out->dtype), out->dtype, 1, &len);
    rc = px_sv_copy(ctx, &d, &s);
    if (rc || sh == 0) return rc;
    px_sv_contig(&s, (char *)self->data + len * (int64_t)px_elsize(self->dtype), self->dtype, 1, &sh);
    px_sv_contig(&d, out->data, out->dtype, 1, &sh);
    return px_sv_copy(ctx, &d, &s);
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
    px_sv s, dv;
    px_sv_from(&s, self);
    px_sv_from(&dv, out);
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
    s.data = px_sv_at(&s, soff);
    dv.data = px_sv_at(&dv, doff);
    rc = px_sv_copy(ctx, &dv, &s);
    if (rc) return rc;
  }
  return 0;
}

/* repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out) */
static int k_repeat(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if (px_check_list_len(ctx, args[1], "repeats")) return PYEXEC_ERR_EXECUTION;
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
  px_sv s, dv;
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
  return px_sv_copy(ctx, &dv, &s);
}

/* tril.out / triu.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out) */
static int tri(px_ctx *ctx, px_value *const *args, bool upper) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  if (self->dim < 2) return px_fail(ctx, "self has %d dims; expected at least 2", self->dim);
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  if (px_require_contiguous(ctx, out, "out")) return PYEXEC_ERR_EXECUTION;
  rc = px_copy_same_shape(ctx, out, self);
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

const px_kernel_def px_kernels_rearrange[] = {
    {"aten::flip.out", "TLT|T", k_flip},
    {"aten::roll.out", "TLLT|T", k_roll},
    {"aten::repeat.out", "TLT|T", k_repeat},
    {"aten::tril.out", "TIT|T", k_tril},
    {"aten::triu.out", "TIT|T", k_triu},
    {NULL, NULL, NULL},
};
