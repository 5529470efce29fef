/*
 * choose_qparams.c - quantized_decomposed::choose_qparams.Tensor_out (one
 * scale and zero point for a whole float32 tensor) and
 * choose_qparams_per_token_asymmetric.out (one per last-dim row, with the
 * fixed range [-128, 127]), as ExecuTorch's op_choose_qparams.cpp picks
 * them: the data's [min, max] widened to include 0, scale = (max - min) /
 * (qmax - qmin) in double (0.1 when it is 0 or its float inverse overflows,
 * raised to 6.1e-5f with the range stretched to match when smaller), and
 * the zero point from whichever end loses less, clamped into [qmin, qmax]
 * or rounded half to even. eps is not used (nor by ExecuTorch).
 */
#include "kernels/quantized/qcommon.h"

#define Q_SMALL_SCALE 6.1e-5f

/* The minimum and maximum of n floats as std::min_element / max_element
 * find them (a leading NaN wins; later NaNs are skipped). */
static void q_minmax(const float *x, int64_t n, float *mn, float *mx) {
  float lo = x[0], hi = x[0];
  for (int64_t k = 1; k < n; k++) {
    if (x[k] < lo) lo = x[k];
    if (hi < x[k]) hi = x[k];
  }
  *mn = lo;
  *mx = hi;
}

/* Scale and zero point for the range [mn, mx] (ExecuTorch's
 * calculate_scale_and_zero_point, operation for operation). */
static int q_choose(px_ctx *ctx, float mn, float mx, int32_t qmin, int32_t qmax, double *scale, int32_t *zp) {
  if (!isfinite(mn) || !isfinite(mx))
    return px_fail(ctx, "input has a NaN or infinite value (min %g, max %g); no scale fits it", mn, mx);
  mn = (0.0f < mn) ? 0.0f : mn;
  mx = (mx < 0.0f) ? 0.0f : mx;
  double s = ((double)mx - (double)mn) / (double)(qmax - qmin);
  if ((float)s == 0.0f || isinf(1.0f / (float)s)) s = 0.1;
  if (s < (double)Q_SMALL_SCALE) {
    float org = (float)s;
    s = (double)Q_SMALL_SCALE;
    if (mn == 0.0f) {
      mx = Q_SMALL_SCALE * (float)(qmax - qmin);
    } else if (mx == 0.0f) {
      mn = -Q_SMALL_SCALE * (float)(qmax - qmin);
    } else {
      float amp = Q_SMALL_SCALE / org;
      mn *= amp;
      mx *= amp;
    }
  }
  double zmin = (double)qmin - (double)mn / s, zmax = (double)qmax - (double)mx / s;
  double emin = fabs((double)qmin) - fabs((double)mn / s), emax = fabs((double)qmax) - fabs((double)mx / s);
  double z = emin < emax ? zmin : zmax;
  if (z < qmin)
    *zp = qmin;
  else if (z > qmax)
    *zp = qmax;
  else
    *zp = (int32_t)nearbyintf((float)z);
  *scale = s;
  return 0;
}

/* Input float32, scale_out float64, zero_point_out int64. */
static int q_check_choose_tensors(px_ctx *ctx, const px_tensor *in, const px_tensor *s, const px_tensor *z) {
  int rc;
  if ((rc = px_require_dtype(ctx, in, PX_F32, "input"))) return rc;
  if ((rc = px_require_dtype(ctx, s, PX_F64, "scale_out"))) return rc;
  return px_require_dtype(ctx, z, PX_I64, "zero_point_out");
}

/* choose_qparams.Tensor_out(input, quant_min, quant_max, float eps, dtype, *, scale_out, zero_point_out) */
static int k_choose_qparams(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *so = a[5]->u.t, *zo = a[6]->u.t;
  int64_t qmin = a[1]->u.i, qmax = a[2]->u.i, dtype = a[4]->u.i, lo, hi;
  int rc = q_check_choose_tensors(ctx, in, so, zo);
  if (rc) return rc;
  if (!q_dtype_range((int)(dtype >= 0 && dtype < 64 ? dtype : -1), &lo, &hi))
    return px_fail(ctx, "dtype is %s; expected uint8, int8, int16 or int32", q_dtype_arg_name(dtype));
  if (qmin < lo || qmax > hi)
    return px_fail(ctx, "quant_min %lld / quant_max %lld lie outside %s's range [%lld, %lld]", (long long)qmin,
                   (long long)qmax, q_dtype_arg_name(dtype), (long long)lo, (long long)hi);
  if (qmin >= qmax)
    return px_fail(ctx, "quant_min %lld must be less than quant_max %lld", (long long)qmin, (long long)qmax);
  if (so->numel != 1) return px_fail(ctx, "scale_out has %lld elements; expected 1", (long long)so->numel);
  if (zo->numel != 1) return px_fail(ctx, "zero_point_out has %lld elements; expected 1", (long long)zo->numel);
  if (in->numel == 0) return px_fail(ctx, "input is empty; it has no range to choose parameters from");
  float mn, mx;
  q_minmax(in->data, in->numel, &mn, &mx);
  double scale;
  int32_t zp;
  if ((rc = q_choose(ctx, mn, mx, (int32_t)qmin, (int32_t)qmax, &scale, &zp))) return rc;
  ((double *)so->data)[0] = scale;
  ((int64_t *)zo->data)[0] = zp;
  return 0;
}

/* choose_qparams_per_token_asymmetric.out(input, dtype, *, scale_out, zero_point_out) */
static int k_choose_qparams_per_token(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *so = a[2]->u.t, *zo = a[3]->u.t;
  int rc = q_check_choose_tensors(ctx, in, so, zo);
  if (rc) return rc;
  if (in->dim == 0) return px_fail(ctx, "input is 0-d; per-token parameters need a last dimension");
  int64_t sizes[PX_MAX_DIM];
  for (int k = 0; k < in->dim - 1; k++) sizes[k] = in->sizes[k];
  sizes[in->dim - 1] = 1;
  if ((rc = px_resize(ctx, so, in->dim, sizes))) return rc;
  if ((rc = px_resize(ctx, zo, in->dim, sizes))) return rc;
  int64_t tokens = px_prod(in->sizes, 0, in->dim - 1), last = in->sizes[in->dim - 1];
  if (tokens > 0 && last == 0) return px_fail(ctx, "input's last dimension is empty; a token has no range");
  const float *x = in->data;
  double *sp = so->data;
  int64_t *zp = zo->data;
  for (int64_t t = 0; t < tokens; t++) {
    float mn, mx;
    q_minmax(x + t * last, last, &mn, &mx);
    double scale;
    int32_t z;
    if ((rc = q_choose(ctx, mn, mx, -128, 127, &scale, &z))) return rc;
    sp[t] = scale;
    zp[t] = z;
  }
  return 0;
}

const px_kernel_def px_kernels_choose_qparams[] = {
    {"quantized_decomposed::choose_qparams.Tensor_out", "TIIDITT|X", k_choose_qparams},
    {"quantized_decomposed::choose_qparams_per_token_asymmetric.out", "TITT|X", k_choose_qparams_per_token},
    {NULL, NULL, NULL},
};
