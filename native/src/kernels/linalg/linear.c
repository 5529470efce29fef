/*
 * linear.c - aten::linear (x @ W^T + b): float32 through the GEMM engine
 * (gemm/), other dtypes with plain loops.
 */
#include <string.h>

#include "kernels/common.h"
#include "kernels/gemm/gemm.h"
#include "kernels/linalg/linalg.h"

/* The broadcast of bias to out's shape, as a view (strides 0 where it
 * repeats). */
static px_tensor bias_view(const px_tensor *b, const px_tensor *out) {
  px_tensor view = *b;
  view.dim = out->dim;
  int lead = out->dim - b->dim;
  for (int k = 0; k < out->dim; k++) {
    int bk = k - lead;
    view.sizes[k] = out->sizes[k];
    view.strides[k] = (bk >= 0 && b->sizes[bk] != 1) ? b->strides[bk] : 0;
  }
  view.numel = out->numel;
  return view;
}

/* float16 / bfloat16: the product summed in float32, added to the bias in
 * float32, rounded once. A bias of one row (the usual [out_features]):
 * linalg.h's px_matmul16, the weight widened as the GEMM engine packs it;
 * others: float32 copies of input and weight through the GEMM engine. */
static int linear16(px_ctx *ctx, const px_tensor *in, const px_tensor *w, const px_tensor *b, px_tensor *out,
                    int64_t M, int64_t NO, int64_t K) {
  if (!b || b->dim == 1)
    return px_matmul16(ctx, in->dtype, M, NO, K, in->data, w->data, 1, K, b ? b->data : NULL, 0,
                       b && b->sizes[0] != 1 ? b->strides[0] : 0, 1.0f, 1.0f, out->data);
  float *fx = px_scratch(ctx, sizeof(float) * (size_t)(M * K + 1));
  float *fw = px_scratch(ctx, sizeof(float) * (size_t)(NO * K + 1));
  float *fo = px_scratch(ctx, sizeof(float) * (size_t)(M * NO));
  if (!fx || !fw || !fo) return PYEXEC_ERR_EXECUTION;
  px_convert(fx, PX_F32, in->data, in->dtype, M * K);
  px_convert(fw, PX_F32, w->data, w->dtype, NO * K);
  int rc;
  if (b) {
    px_tensor fot = *out, view = bias_view(b, out);
    fot.data = fo;
    fot.dtype = PX_F32;
    if ((rc = px_copy_strided(ctx, &fot, &view))) return rc;
  }
  rc = px_gemm_f32(ctx, NULL, M, NO, K, 1.0f, fx, K, 1, fw, 1, K, b ? 1.0f : 0.0f, fo, NO);
  if (!rc) px_convert(out->data, out->dtype, fo, PX_F32, M * NO);
  return rc;
}

/* aten::linear.out(Tensor input, Tensor weight, Tensor? bias=None, *,
 *   Tensor(a!) out): out = input @ weight.T + bias. */
static int k_linear(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *w = args[1]->u.t, *out = args[3]->u.t;
  px_tensor *b = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  int rc;
  if (in->dim < 1) return px_fail(ctx, "input must be at least 1-D, got a 0-D tensor");
  if (w->dim != 2) return fail_shape(ctx, "weight", w, "expected a 2-D (out_features, in_features) tensor");
  if ((rc = px_require_same_dtype(ctx, w, "weight", in, "input")) ||
      (b && (rc = px_require_same_dtype(ctx, b, "bias", in, "input"))) ||
      (rc = px_require_same_dtype(ctx, out, "out", in, "input")))
    return rc;
  if (in->dtype == PX_BOOL) return px_fail(ctx, "linear does not support bool tensors");
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, w, "weight")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t K = in->sizes[in->dim - 1], NO = w->sizes[0];
  if (w->sizes[1] != K)
    return px_fail(ctx, "input's last dimension (%lld) does not match weight's in_features (%lld)",
                   (long long)K, (long long)w->sizes[1]);
  int64_t osz[PX_MAX_DIM];
  memcpy(osz, in->sizes, sizeof(int64_t) * (size_t)in->dim);
  osz[in->dim - 1] = NO;
  if ((rc = px_resize(ctx, out, in->dim, osz))) return rc;
  int64_t M = px_prod(in->sizes, 0, in->dim - 1);
  if (b) { /* bias must broadcast to the output's shape without changing it */
    int bd;
    int64_t bs[PX_MAX_DIM];
    if ((rc = px_broadcast_sizes(ctx, out->dim, out->sizes, b->dim, b->sizes, &bd, bs))) return rc;
    bool ok = bd == out->dim;
    for (int k = 0; ok && k < bd; k++) ok = bs[k] == out->sizes[k];
    if (!ok) return fail_shape(ctx, "bias", b, "it does not broadcast to the output's shape");
  }
  if (out->numel == 0) return 0;
  if (in->dtype == PX_F16 || in->dtype == PX_BF16) return linear16(ctx, in, w, b, out, M, NO, K);
  if (b) { /* out = broadcast bias, then accumulate the product into it */
    px_tensor view = bias_view(b, out);
    if ((rc = px_copy_strided(ctx, out, &view))) return rc;
  }
  if (in->dtype == PX_F32)
    return px_gemm_f32(ctx, NULL, M, NO, K, 1.0f, in->data, K, 1, w->data, 1, K, b ? 1.0f : 0.0f,
                       out->data, NO);
  if (in->dtype == PX_F64) {
    const double *x = in->data, *wt = w->data;
    double *o = out->data;
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = 0; j < NO; j++) {
        const double *xr = x + m * K, *wr = wt + j * K;
        double acc = 0.0;
        for (int64_t k = 0; k < K; k++) acc += xr[k] * wr[k];
        o[m * NO + j] = b ? o[m * NO + j] + acc : acc;
      }
    return 0;
  }
  bool fl = px_is_floating(in->dtype);
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < NO; j++) {
      int64_t oi = m * NO + j;
      if (fl) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; k++)
          acc += px_load_d(in->data, in->dtype, m * K + k) * px_load_d(w->data, w->dtype, j * K + k);
        if (b) acc += px_load_d(out->data, out->dtype, oi);
        px_store_d(out->data, out->dtype, oi, acc);
      } else { /* integers wrap, as torch's */
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += (uint64_t)px_load_i(in->data, in->dtype, m * K + k) *
                 (uint64_t)px_load_i(w->data, w->dtype, j * K + k);
        if (b) acc += (uint64_t)px_load_i(out->data, out->dtype, oi);
        px_store_i(out->data, out->dtype, oi, (int64_t)acc);
      }
    }
  return 0;
}

const px_kernel_def px_kernels_linear[] = {
    {"aten::linear.out", "TTtT|T", k_linear},
    {NULL, NULL, NULL},
};
