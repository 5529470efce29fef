/*
 * pdist.c - _pdist_forward: the p-norm distance between every pair of rows
 * of one matrix (float16 / bfloat16 in double, rounded once). The distance
 * between the rows of two matrices (cdist) is cdist.c.
 */
#include <math.h>

#include "kernels/common.h"

#define PDIST_DEFINE(NAME, CT)                                                             \
  static void NAME(const CT *x, CT *o, int64_t N, int64_t M, double p) {                   \
    int kind = p == 0.0 ? 0 : p == 1.0 ? 1 : p == 2.0 ? 2 : isinf(p) ? 3 : 4;             \
    for (int64_t i = 0; i < N; i++)                                                        \
      for (int64_t j = i + 1; j < N; j++) {                                                \
        const CT *a = x + i * M, *b = x + j * M;                                           \
        double acc = 0.0;                                                                  \
        switch (kind) {                                                                    \
          case 0:                                                                          \
            for (int64_t k = 0; k < M; k++) {                                              \
              CT d = a[k] - b[k];                                                          \
              acc += d != d ? (double)d : (d != 0);                                        \
            }                                                                              \
            break;                                                                         \
          case 1:                                                                          \
            for (int64_t k = 0; k < M; k++) acc += fabs((double)(a[k] - b[k]));            \
            break;                                                                         \
          case 2:                                                                          \
            for (int64_t k = 0; k < M; k++) {                                              \
              double d = (double)(a[k] - b[k]);                                            \
              acc += d * d;                                                                \
            }                                                                              \
            acc = sqrt(acc);                                                               \
            break;                                                                         \
          case 3:                                                                          \
            for (int64_t k = 0; k < M; k++) {                                              \
              double d = fabs((double)(a[k] - b[k]));                                      \
              if (d != d || d > acc) acc = d;                                              \
              if (acc != acc) break;                                                       \
            }                                                                              \
            break;                                                                         \
          default:                                                                         \
            for (int64_t k = 0; k < M; k++) acc += pow(fabs((double)(a[k] - b[k])), p);    \
            acc = pow(acc, 1.0 / p);                                                       \
            break;                                                                         \
        }                                                                                  \
        *o++ = (CT)acc;                                                                    \
      }                                                                                    \
  }

PDIST_DEFINE(pdist_f32, float)
PDIST_DEFINE(pdist_f64, double)

/* aten::_pdist_forward.out(Tensor self, float p=2., *, Tensor(a!) out) */
static int k_pdist_forward(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[2]->u.t;
  double p = arg_d(args[1]);
  int rc;
  if (in->dim != 2) return fail_shape(ctx, "self", in, "pdist expects a 2-D tensor");
  if (!px_is_floating(in->dtype))
    return px_fail(ctx, "self has dtype %s; pdist supports floating dtypes only",
                   px_dtype_name(in->dtype));
  if (p != p) return px_fail(ctx, "p must not be NaN");
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "self"))) return rc;
  if (out->dim != 1) return px_fail(ctx, "out must be 1-D, got %d dims", out->dim);
  int64_t N = in->sizes[0], M = in->sizes[1];
  int64_t n = N > 1 ? N * (N - 1) / 2 : 0;
  if ((rc = px_resize(ctx, out, 1, &n))) return rc;
  if (n == 0) return 0;
  if (in->dtype == PX_F32) {
    pdist_f32(in->data, out->data, N, M, p);
  } else if (in->dtype == PX_F64) {
    pdist_f64(in->data, out->data, N, M, p);
  } else { /* float16 / bfloat16: in double on a widened copy, rounded once */
    double *x = px_scratch(ctx, sizeof(double) * (size_t)(N * M + 1));
    double *o = px_scratch(ctx, sizeof(double) * (size_t)n);
    if (!x || !o) return PYEXEC_ERR_EXECUTION;
    px_convert(x, PX_F64, in->data, in->dtype, N * M);
    pdist_f64(x, o, N, M, p);
    px_convert(out->data, out->dtype, o, PX_F64, n);
  }
  return 0;
}

const px_kernel_def px_kernels_pdist[] = {
    {"aten::_pdist_forward.out", "TDT|T", k_pdist_forward},
    {NULL, NULL, NULL},
};
