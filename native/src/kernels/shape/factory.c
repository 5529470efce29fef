/*
 * factory.c - tensors made from arguments: full, full_like, zeros, ones,
 * empty (and _empty_dim_order) and arange.
 */
#include <math.h>
#include <string.h>

#include "kernels/shape/strided.h"

/* ---- factories --------------------------------------------------------------- */

static int resize_to_list(px_ctx *ctx, px_tensor *out, px_value *v) {
  if (px_check_list_len(ctx, v, "size")) return PYEXEC_ERR_EXECUTION;
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
  px_fill_scalar(out, args[1]);
  return 0;
}

/* full_like.out(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None,
 * Tensor(a!) out) */
static int k_full_like(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  px_fill_scalar(out, args[1]);
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
  px_fill_int(out, 1);
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
  return px_check_dim_order_arg(ctx, args[1], out);
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

const px_kernel_def px_kernels_factory[] = {
    {"dim_order_ops::_empty_dim_order.out", "LlT|T", k_empty_dim_order},
    {"aten::full.out", "LST|T", k_full},
    {"aten::full_like.out", "TSiT|T", k_full_like},
    {"aten::zeros.out", "LT|T", k_zeros},
    {"aten::ones.out", "LT|T", k_ones},
    {"aten::empty.out", "LiT|T", k_empty},
    {"aten::arange.out", "ST|T", k_arange},
    {"aten::arange.start_out", "SSST|T", k_arange_start},
    {NULL, NULL, NULL},
};
