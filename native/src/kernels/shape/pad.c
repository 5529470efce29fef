/*
 * pad.c - padding: constant_pad_nd (any number of dims, negative pads crop),
 * and reflection / replication padding of the last 1, 2 or 3 dims (each
 * output row a memcpy of its unpadded middle and a gather at the edges,
 * written once per element size).
 */
#include <string.h>

#include "kernels/common.h"
#include "kernels/shape/strided.h"

/* constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out) */
static int k_constant_pad_nd(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  uint32_t np = args[1]->u.il.n;
  const int64_t *pad = px_intlist(args[1]);
  if (np % 2 != 0) return px_fail(ctx, "pad has odd length %u", (unsigned)np);
  if ((int)(np / 2) > self->dim)
    return px_fail(ctx, "pad has %u entries, too many for %d dims", (unsigned)np, self->dim);
  int64_t sizes[PX_MAX_DIM];
  px_sv s, dv;
  px_sv_from(&s, self);
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
  px_fill_scalar(out, args[2]);
  int64_t keepn = 1;
  for (int k = 0; k < self->dim; k++) keepn *= s.sizes[k];
  if (keepn == 0) return 0;
  px_sv_from(&dv, out);
  for (int k = 0; k < self->dim; k++) {
    dv.sizes[k] = s.sizes[k];
    doff += dstarts[k] * out->strides[k];
  }
  s.data = px_sv_at(&s, soff);
  dv.data = px_sv_at(&dv, doff);
  return px_sv_copy(ctx, &dv, &s);
}

/* ---- reflection and replication ------------------------------------------------- */

/* Source index along one dimension of every output position. */
static void pad_index_map(int64_t *map, int64_t osz, int64_t isz, int64_t lo, bool reflect) {
  for (int64_t o = 0; o < osz; o++) {
    int64_t x = o - lo;
    if (reflect) {
      if (x < 0)
        x = -x;
      else if (x >= isz)
        x = 2 * (isz - 1) - x;
    } else {
      if (x < 0)
        x = 0;
      else if (x >= isz)
        x = isz - 1;
    }
    map[o] = x;
  }
}

/* One output row: the unpadded middle is a memcpy, the edges a gather. */
static void pad_row(char *dst, const char *src, const int64_t *map, int64_t ow, int64_t lo,
                    int64_t iw, size_t es) {
  int64_t a = lo > 0 ? lo : 0;
  int64_t b = iw + lo < ow ? iw + lo : ow;
  if (a > ow) a = ow;
  if (b < a) b = a;
  BY_ELSIZE(es, {
    E *d = (E *)dst;
    const E *s = (const E *)src;
    for (int64_t o = 0; o < a; o++) d[o] = s[map[o]];
    if (b > a) memcpy(d + a, s + (a - lo), (size_t)(b - a) * sizeof(E));
    for (int64_t o = b; o < ow; o++) d[o] = s[map[o]];
  })
}

/* aten::{reflection,replication}_pad{nsp}d.out(Tensor self, SymInt[2*nsp]
 *   padding, *, Tensor(a!) out) */
static int pad_nd(px_ctx *ctx, px_value *const *args, int nsp, bool reflect) {
  px_tensor *in = args[0]->u.t, *out = args[2]->u.t;
  const int64_t *pad = px_intlist(args[1]);
  uint32_t np = args[1]->u.il.n;
  int rc;
  if (np != (uint32_t)(2 * nsp))
    return px_fail(ctx, "padding must have %d values, got %u", 2 * nsp, np);
  if (in->dim != nsp + 1 && in->dim != nsp + 2)
    return px_fail(ctx, "expected a %dD or %dD (batch mode) input, got %dD", nsp + 1, nsp + 2,
                   in->dim);
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  for (int k = in->dim == nsp + 2 ? 1 : 0; k < in->dim; k++)
    if (in->sizes[k] == 0)
      return fail_shape(ctx, "self", in,
                        "only the batch dimension may be empty (other dimensions must be non-zero)");
  int64_t osz[PX_MAX_DIM];
  memcpy(osz, in->sizes, sizeof(int64_t) * (size_t)in->dim);
  int64_t isp[3] = {1, 1, 1}, osp[3] = {1, 1, 1}, lo[3] = {0, 0, 0}; /* D, H, W */
  for (int k = 0; k < nsp; k++) {
    int d = in->dim - 1 - k;
    int64_t l = pad[2 * k], r = pad[2 * k + 1], s = in->sizes[d], o;
    if (reflect && (l >= s || r >= s))
      return px_fail(ctx, "padding (%lld, %lld) at dim %d must be less than the input size %lld",
                     (long long)l, (long long)r, d, (long long)s);
    if (__builtin_add_overflow(s, l, &o) || __builtin_add_overflow(o, r, &o) || o < 1)
      return px_fail(ctx, "input size %lld at dim %d is too small for padding (%lld, %lld)",
                     (long long)s, d, (long long)l, (long long)r);
    osz[d] = o;
    isp[2 - k] = s;
    osp[2 - k] = o;
    lo[2 - k] = l;
  }
  if ((rc = px_resize(ctx, out, in->dim, osz))) return rc;
  if (out->numel == 0) return 0;
  int64_t *map = px_scratch(ctx, sizeof(int64_t) * (size_t)(osp[0] + osp[1] + osp[2]));
  if (!map) return PYEXEC_ERR_EXECUTION;
  int64_t *md = map, *mh = map + osp[0], *mw = mh + osp[1];
  pad_index_map(md, osp[0], isp[0], lo[0], reflect);
  pad_index_map(mh, osp[1], isp[1], lo[1], reflect);
  pad_index_map(mw, osp[2], isp[2], lo[2], reflect);
  int64_t planes = px_prod(in->sizes, 0, in->dim - nsp);
  size_t es = px_elsize(in->dtype);
  const char *ip = in->data;
  char *op = out->data;
  for (int64_t p = 0; p < planes; p++)
    for (int64_t od = 0; od < osp[0]; od++)
      for (int64_t oh = 0; oh < osp[1]; oh++) {
        const char *src = ip + (size_t)(((p * isp[0] + md[od]) * isp[1] + mh[oh]) * isp[2]) * es;
        char *dst = op + (size_t)(((p * osp[0] + od) * osp[1] + oh) * osp[2]) * es;
        pad_row(dst, src, mw, osp[2], lo[2], isp[2], es);
      }
  return 0;
}

static int k_reflection_pad1d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 1, true); }
static int k_reflection_pad2d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 2, true); }
static int k_reflection_pad3d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 3, true); }
static int k_replication_pad1d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 1, false); }
static int k_replication_pad2d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 2, false); }
static int k_replication_pad3d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 3, false); }

const px_kernel_def px_kernels_pad[] = {
    {"aten::constant_pad_nd.out", "TLST|T", k_constant_pad_nd},
    {"aten::reflection_pad1d.out", "TLT|T", k_reflection_pad1d},
    {"aten::reflection_pad2d.out", "TLT|T", k_reflection_pad2d},
    {"aten::reflection_pad3d.out", "TLT|T", k_reflection_pad3d},
    {"aten::replication_pad1d.out", "TLT|T", k_replication_pad1d},
    {"aten::replication_pad2d.out", "TLT|T", k_replication_pad2d},
    {"aten::replication_pad3d.out", "TLT|T", k_replication_pad3d},
    {NULL, NULL, NULL},
};
