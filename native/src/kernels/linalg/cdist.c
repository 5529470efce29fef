/*
 * cdist.c - _cdist_forward: the p-norm distance between every row of one
 * matrix and every row of another (batched); float16 / bfloat16 in double,
 * rounded once. Distances within one matrix (pdist) are pdist.c.
 */
#include <math.h>

#include "kernels/kernel.h"

/* aten::_cdist_forward.out(Tensor x1, Tensor x2, float p, int? compute_mode, *,
 *                          Tensor(a!) out) */
static int k_cdist(px_ctx *ctx, px_value *const *args) {
  px_tensor *x1 = args[0]->u.t, *x2 = args[1]->u.t, *out = args[4]->u.t;
  double p = args[2]->tag == PX_V_INT ? (double)args[2]->u.i : args[2]->u.d;
  int rc;
  if (x1->dim < 2 || x2->dim < 2)
    return px_fail(ctx, "x1 and x2 need at least 2 dims, got %d and %d", x1->dim, x2->dim);
  if ((rc = px_require_same_dtype(ctx, x1, "x1", x2, "x2"))) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", x1, "x1"))) return rc;
  if (!px_is_floating(x1->dtype))
    return px_fail(ctx, "cdist supports floating dtypes only, got %s", px_dtype_name(x1->dtype));
  if (!(p >= 0)) return px_fail(ctx, "p must be non-negative, got %g", p);
  int64_t D = x1->sizes[x1->dim - 1];
  if (x2->sizes[x2->dim - 1] != D)
    return px_fail(ctx, "x1 has %lld columns but x2 has %lld", (long long)D,
                   (long long)x2->sizes[x2->dim - 1]);
  int64_t P = x1->sizes[x1->dim - 2], R = x2->sizes[x2->dim - 2];
  int odim;
  int64_t os[PX_MAX_DIM];
  if ((rc = px_broadcast_sizes(ctx, x1->dim - 2, x1->sizes, x2->dim - 2, x2->sizes, &odim, os)))
    return rc;
  if (odim + 2 != out->dim)
    return px_fail(ctx, "out has %d dims, expected %d", out->dim, odim + 2);
  os[odim] = P;
  os[odim + 1] = R;
  if ((rc = px_require_contiguous(ctx, x1, "x1")) || (rc = px_require_contiguous(ctx, x2, "x2")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  if ((rc = px_resize(ctx, out, odim + 2, os))) return rc;
  if (out->numel == 0) return 0;
  /* float16 / bfloat16: in double on widened copies, rounded once */
  const double *d1 = x1->data, *d2 = x2->data;
  if (x1->dtype != PX_F32 && x1->dtype != PX_F64) {
    double *w1 = px_scratch(ctx, sizeof(double) * (size_t)(x1->numel + 1));
    double *w2 = px_scratch(ctx, sizeof(double) * (size_t)(x2->numel + 1));
    if (!w1 || !w2) return PYEXEC_ERR_EXECUTION;
    px_convert(w1, PX_F64, x1->data, x1->dtype, x1->numel);
    px_convert(w2, PX_F64, x2->data, x2->dtype, x2->numel);
    d1 = w1, d2 = w2;
  }
  int64_t nb = px_prod(os, 0, odim);
  int mode = p == 0 ? 0 : p == 1 ? 1 : p == 2 ? 2 : isinf(p) ? 3 : 4;
  int64_t bidx[PX_MAX_DIM] = {0};
  for (int64_t bi = 0; bi < nb; bi++) {
    /* offsets of this batch in x1 / x2 (broadcast leading dims) */
    int64_t o1 = 0, o2 = 0, rem = bi;
    for (int d = odim - 1; d >= 0; d--) {
      bidx[d] = rem % os[d];
      rem /= os[d];
    }
    for (int d = 0; d < odim; d++) {
      int d1 = d - (odim - (x1->dim - 2)), d2 = d - (odim - (x2->dim - 2));
      if (d1 >= 0 && x1->sizes[d1] != 1) o1 += bidx[d] * x1->strides[d1];
      if (d2 >= 0 && x2->sizes[d2] != 1) o2 += bidx[d] * x2->strides[d2];
    }
    for (int64_t i = 0; i < P; i++)
      for (int64_t j = 0; j < R; j++) {
        double acc = 0.0;
        int64_t k1 = o1 + i * D, k2 = o2 + j * D, ko = bi * P * R + i * R + j;
        if (x1->dtype == PX_F32) {
          const float *u = (const float *)x1->data + k1, *v = (const float *)x2->data + k2;
          float s = 0.0f;
          switch (mode) {
            case 0: for (int64_t k = 0; k < D; k++) s += (u[k] - v[k]) != 0.0f; break;
            case 1: for (int64_t k = 0; k < D; k++) s += fabsf(u[k] - v[k]); break;
            case 2: for (int64_t k = 0; k < D; k++) s += (u[k] - v[k]) * (u[k] - v[k]); break;
            case 3:
              for (int64_t k = 0; k < D; k++) {
                float d = fabsf(u[k] - v[k]);
                if (d > s || isnan(d)) s = d;
              }
              break;
            default: for (int64_t k = 0; k < D; k++) s += powf(fabsf(u[k] - v[k]), (float)p); break;
          }
          if (mode == 2) s = sqrtf(s);
          else if (mode == 4) s = powf(s, (float)(1.0 / p));
          ((float *)out->data)[ko] = s;
        } else {
          const double *u = d1 + k1, *v = d2 + k2;
          switch (mode) {
            case 0: for (int64_t k = 0; k < D; k++) acc += (u[k] - v[k]) != 0.0; break;
            case 1: for (int64_t k = 0; k < D; k++) acc += fabs(u[k] - v[k]); break;
            case 2: for (int64_t k = 0; k < D; k++) acc += (u[k] - v[k]) * (u[k] - v[k]); break;
            case 3:
              for (int64_t k = 0; k < D; k++) {
                double d = fabs(u[k] - v[k]);
                if (d > acc || isnan(d)) acc = d;
              }
              break;
            default: for (int64_t k = 0; k < D; k++) acc += pow(fabs(u[k] - v[k]), p); break;
          }
          if (mode == 2) acc = sqrt(acc);
          else if (mode == 4) acc = pow(acc, 1.0 / p);
          if (x1->dtype == PX_F64)
            ((double *)out->data)[ko] = acc;
          else
            px_store_d(out->data, out->dtype, ko, acc);
        }
      }
  }
  return 0;
}

const px_kernel_def px_kernels_cdist[] = {
    {"aten::_cdist_forward.out", "TTDiT|T", k_cdist},
    {NULL, NULL, NULL},
};
