/*
 * var.c - variance and standard deviation over dims (var, std, var_mean,
 * std_mean, with a correction): a mean pass, then the sum of squared
 * deviations over the same plan (plan.h).
 */
#include "kernels/reduction/plan.h"

/* Sum of squared deviations from m. */
#define SSD_(L, K)                  \
  {                                 \
    double d_ = (double)p[i + K] - m; \
    L += d_ * d_;                   \
  }
#define DEF_SSD(NAME, T)                                                        \
  static double NAME(const T *restrict p, int64_t n, double m) {                \
    double l0 = 0, l1 = 0, l2 = 0, l3 = 0, l4 = 0, l5 = 0, l6 = 0, l7 = 0;      \
    int64_t i = 0;                                                              \
    for (; i + 8 <= n; i += 8) {                                                \
      SSD_(l0, 0) SSD_(l1, 1) SSD_(l2, 2) SSD_(l3, 3)                           \
      SSD_(l4, 4) SSD_(l5, 5) SSD_(l6, 6) SSD_(l7, 7)                           \
    }                                                                           \
    double s = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));              \
    for (; i < n; i++) {                                                        \
      double d = (double)p[i] - m;                                              \
      s += d * d;                                                               \
    }                                                                           \
    return s;                                                                   \
  }
#define DEF_SSDROW(NAME, T)                                                             \
  static void NAME(double *restrict acc, const T *restrict p, const double *restrict m, \
                   int64_t n) {                                                         \
    for (int64_t i = 0; i < n; i++) {                                                   \
      double d = (double)p[i] - m[i];                                                   \
      acc[i] += d * d;                                                                  \
    }                                                                                   \
  }
DEF_SSD(ssd_f32, float)
DEF_SSD(ssd_f64, double)
DEF_SSDROW(ssdrow_f32, float)
DEF_SSDROW(ssdrow_f64, double)

/* var (or std when take_sqrt) over mask into vout, the mean into mout (may be
 * NULL); both already resized. Two passes in double. */
static int var_run(px_ctx *ctx, const px_tensor *in, const bool *mask, double correction,
                   bool take_sqrt, px_tensor *vout, px_tensor *mout) {
  if (vout->numel == 0) return 0;
  if (in->numel == 0) {
    for (int64_t k = 0; k < vout->numel; k++) {
      store_d(vout, k, NAN);
      if (mout) store_d(mout, k, NAN);
    }
    return 0;
  }
  int ct = in->dtype == PX_F32 ? CT_F32 : CT_F64;
  rplan P;
  plan_build(&P, in, mask);
  double nred = (double)P.nred;
  double div = nred - correction > 0 ? nred - correction : 0.0;
  void *buf;
  int64_t pl;
  if (chunk_buf(ctx, in, ct, P.len, &buf, &pl)) return ERR;
  odo ko, ro;
  odo_init(&ko, P.nk, P.ksz, P.kst);
  odo_init(&ro, P.nr, P.rsz, P.rst);
  int64_t o = 0;
  if (P.inner) {
    for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko), o++) {
      double sum = 0, q = 0;
      for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, P.len, pl) {
          const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
          sum += ct == CT_F32 ? px_red_sum_f32(p, m) : px_red_sum_f64(p, m);
        }
      double mu = sum / nred;
      for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, P.len, pl) {
          const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
          q += ct == CT_F32 ? ssd_f32(p, m, mu) : ssd_f64(p, m, mu);
        }
      double v = q / div;
      store_d(vout, o, take_sqrt ? sqrt(v) : v);
      if (mout) store_d(mout, o, mu);
    }
    return 0;
  }
  double *mean = px_scratch(ctx, (size_t)P.len * sizeof(double));
  double *acc = px_scratch(ctx, (size_t)P.len * sizeof(double));
  if (!mean || !acc) return ERR;
  for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko), o += P.len) {
    for (int64_t i = 0; i < P.len; i++) mean[i] = acc[i] = 0;
    for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
      FOR_PIECES(s, m, P.len, pl) {
        const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
        if (ct == CT_F32)
          px_red_row_sum_f32(mean + s, p, m);
        else
          px_red_row_sum_f64(mean + s, p, m);
      }
    for (int64_t i = 0; i < P.len; i++) mean[i] /= nred;
    for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
      FOR_PIECES(s, m, P.len, pl) {
        const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
        if (ct == CT_F32)
          ssdrow_f32(acc + s, p, mean + s, m);
        else
          ssdrow_f64(acc + s, p, mean + s, m);
      }
    for (int64_t i = 0; i < P.len; i++) {
      double v = acc[i] / div;
      store_d(vout, o + i, take_sqrt ? sqrt(v) : v);
      if (mout) store_d(mout, o + i, mean[i]);
    }
  }
  return 0;
}

static int var_common(px_ctx *ctx, px_tensor *in, px_value *dims, double correction, bool keepdim,
                      bool take_sqrt, px_tensor *vout, px_tensor *mout) {
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, vout))) return st;
  if (mout && (st = px_require_contiguous(ctx, mout, "mean out"))) return st;
  if (!px_is_floating(in->dtype))
    return px_fail(ctx, "var/std need a floating input, self has %s", px_dtype_name(in->dtype));
  if (vout->dtype != in->dtype)
    return px_fail(ctx, "out has dtype %s, self has %s (they must match)", px_dtype_name(vout->dtype),
                   px_dtype_name(in->dtype));
  if (mout && mout->dtype != in->dtype)
    return px_fail(ctx, "mean out has dtype %s, self has %s (they must match)",
                   px_dtype_name(mout->dtype), px_dtype_name(in->dtype));
  if ((st = dims_mask(ctx, dims, in->dim, true, mask))) return st;
  if ((st = resize_reduced(ctx, in, mask, keepdim, vout, "out"))) return st;
  if (mout && (st = resize_reduced(ctx, in, mask, keepdim, mout, "mean out"))) return st;
  return var_run(ctx, in, mask, correction, take_sqrt, vout, mout);
}

static double correction_arg(const px_value *v) {
  return v->tag == PX_V_NONE ? 1.0 : px_scalar_d(v);
}

/* var.correction_out(self, dim?, correction?, keepdim, out) */
static int k_var_corr(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, false, a[4]->u.t, NULL);
}
/* var.out(self, dim?, unbiased, keepdim, out) */
static int k_var(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], a[2]->u.b ? 1.0 : 0.0, a[3]->u.b, false, a[4]->u.t, NULL);
}
static int k_std_corr(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, true, a[4]->u.t, NULL);
}
static int k_std(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], a[2]->u.b ? 1.0 : 0.0, a[3]->u.b, true, a[4]->u.t, NULL);
}
/* var_mean.correction_out(self, dim?, correction?, keepdim, out0, out1) -> (out0, out1) */
static int k_var_mean(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, false, a[4]->u.t,
                    a[5]->u.t);
}
static int k_std_mean(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, true, a[4]->u.t,
                    a[5]->u.t);
}

const px_kernel_def px_kernels_var[] = {
    {"aten::var.correction_out", "TlsBT|T", k_var_corr},
    {"aten::var.out", "TlBBT|T", k_var},
    {"aten::std.correction_out", "TlsBT|T", k_std_corr},
    {"aten::std.out", "TlBBT|T", k_std},
    {"aten::var_mean.correction_out", "TlsBTT|X", k_var_mean},
    {"aten::std_mean.correction_out", "TlsBTT|X", k_std_mean},
    {NULL, NULL, NULL},
};
