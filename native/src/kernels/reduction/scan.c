/*
 * scan.c - cumulative sums and products along one dim (cumsum, cumprod).
 */
#include "kernels/reduction/plan.h"

/* cumsum / cumprod along one dim; accumulates in double (floating out) or
 * int64 (integral out), the input taken as out's dtype. */
static int scan_op(px_ctx *ctx, px_value *const *a, bool prod) {
  px_tensor *in = a[0]->u.t, *out = a[3]->u.t;
  int st;
  if ((st = check_io(ctx, in, out)) || (st = check_dtype_arg(ctx, a[2], out))) return st;
  int d = px_wrap_dim(ctx, a[1]->u.i, in->dim);
  if (d < 0) return ERR;
  if ((st = px_resize_like(ctx, out, in))) return st;
  if (in->numel == 0) return 0;
  int64_t outer, n, inner;
  split_dim(in, d, &outer, &n, &inner);
  if (in->dtype == PX_F32 && out->dtype == PX_F32) {
    const float *p = in->data;
    float *q = out->data;
    if (inner == 1) {
      for (int64_t o = 0; o < outer; o++, p += n, q += n) {
        double acc = prod ? 1.0 : 0.0;
        for (int64_t j = 0; j < n; j++) {
          acc = prod ? acc * p[j] : acc + p[j];
          q[j] = (float)acc;
        }
      }
      return 0;
    }
    double *acc = px_scratch(ctx, (size_t)inner * sizeof(double));
    if (!acc) return ERR;
    for (int64_t o = 0; o < outer; o++) {
      for (int64_t i = 0; i < inner; i++) acc[i] = prod ? 1.0 : 0.0;
      for (int64_t j = 0; j < n; j++, p += inner, q += inner) {
        if (prod)
          for (int64_t i = 0; i < inner; i++) acc[i] *= p[i];
        else
          for (int64_t i = 0; i < inner; i++) acc[i] += p[i];
        for (int64_t i = 0; i < inner; i++) q[i] = (float)acc[i];
      }
    }
    return 0;
  }
  bool fl = px_is_floating(out->dtype);
  bool same64 = in->dtype == PX_I64 && out->dtype == PX_I64;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t k = o * n * inner + i;
      if (fl) {
        double acc = prod ? 1.0 : 0.0;
        for (int64_t j = 0; j < n; j++, k += inner) {
          double v = px_load_d(in->data, in->dtype, k);
          acc = prod ? acc * v : acc + v;
          px_store_d(out->data, out->dtype, k, acc);
        }
      } else if (same64) {
        const int64_t *p = in->data;
        int64_t *q = out->data;
        uint64_t acc = prod ? 1 : 0;
        for (int64_t j = 0; j < n; j++, k += inner) {
          acc = prod ? acc * (uint64_t)p[k] : acc + (uint64_t)p[k];
          q[k] = (int64_t)acc;
        }
      } else {
        uint64_t acc = prod ? 1 : 0;
        for (int64_t j = 0; j < n; j++, k += inner) {
          uint64_t v = (uint64_t)px_load_i(in->data, in->dtype, k);
          acc = prod ? acc * v : acc + v;
          px_store_i(out->data, out->dtype, k, (int64_t)acc);
        }
      }
    }
  }
  return 0;
}

/* cumsum.out / cumprod.out(self, dim, dtype?, out) */
static int k_cumsum(px_ctx *ctx, px_value *const *a) { return scan_op(ctx, a, false); }
static int k_cumprod(px_ctx *ctx, px_value *const *a) { return scan_op(ctx, a, true); }

const px_kernel_def px_kernels_scan[] = {
    {"aten::cumsum.out", "TIiT|T", k_cumsum},
    {"aten::cumprod.out", "TIiT|T", k_cumprod},
    {NULL, NULL, NULL},
};
