/*
 * dequantize.c - quantized_decomposed::dequantize_per_tensor (.out and
 * .Tensor_out), dequantize_per_channel.out and dequantize_per_token.out:
 * uint8, int8, int16 or int32 to float32, float64, float16 (or bfloat16), as
 * ExecuTorch's op_dequantize.cpp computes it:
 *
 *   out = (OUT)((float)(q - (int32)zero_point) * (float)scale)
 *
 * a float product rounded once to the out dtype. The one exception is
 * per-channel on a 1-d input, where ExecuTorch converts q - zero_point to
 * the out dtype first and multiplies there (a float64 out then keeps the
 * exact product; float16 rounds the difference to half first).
 * Per-channel scales may be float32 or float64 and zero points are
 * optional; per token is per channel with axis 0 over the
 * [prod(sizes[:-1]), sizes[-1]] view, and needs out_dtype.
 */
#include "kernels/quantized/qcommon.h"

/* Integer element k of a quantized tensor. */
static inline int64_t q_load_q(const void *base, int dtype, int64_t k) {
  switch (dtype) {
    case PX_U8: return ((const uint8_t *)base)[k];
    case PX_I8: return ((const int8_t *)base)[k];
    case PX_I16: return ((const int16_t *)base)[k];
    default: return ((const int32_t *)base)[k];
  }
}

/* Dequantizes `in` into `out` (same numel, contiguous): channel c of C
 * covers runs of `inner` elements with scale sc[c] and zero point zp[c].
 * `one_d`: the 1-d per-channel arithmetic described above. */
static void dequantize_run(const px_tensor *in, px_tensor *out, int64_t C, int64_t inner, const float *sc,
                           const int32_t *zp, bool one_d) {
  int64_t n = in->numel, runs = inner ? n / inner : 0;
  for (int64_t r = 0; r < runs; r++) {
    int64_t c = C > 1 ? r % C : 0;
    float s = sc[c];
    int32_t z = zp[c];
    int64_t base = r * inner;
    if (out->dtype == PX_F32 && in->dtype == PX_I8) { /* the common case, vectorisable */
      const int8_t *q = (const int8_t *)in->data + base;
      float *o = (float *)out->data + base;
      for (int64_t k = 0; k < inner; k++) o[k] = (float)((int32_t)q[k] - z) * s;
      continue;
    }
    for (int64_t k = 0; k < inner; k++) {
      int64_t d = q_load_q(in->data, in->dtype, base + k) - z;
      if (one_d && out->dtype == PX_F64) {
        ((double *)out->data)[base + k] = (double)d * (double)s;
      } else if (one_d && out->dtype == PX_F16) {
        q_store_f(out->data, PX_F16, base + k, px_half_to_float(px_float_to_half((float)d)) * s);
      } else {
        q_store_f(out->data, out->dtype, base + k, (float)d * s);
      }
    }
  }
}

/* The checks every dequantize overload shares, then out resized. */
static int dequantize_prologue(px_ctx *ctx, const px_tensor *in, px_tensor *out, int64_t dtype, int64_t qmin,
                               int64_t qmax, const px_value *out_dtype, const char *out_dtype_name) {
  int rc;
  if ((rc = q_check_qtensor(ctx, in, "input", dtype, qmin, qmax))) return rc;
  if ((rc = require_floating(ctx, out, "out"))) return rc;
  if ((rc = q_check_out_dtype(ctx, out_dtype, out, out_dtype_name))) return rc;
  return px_resize_like(ctx, out, in);
}

static int dequantize_tensor(px_ctx *ctx, const px_tensor *in, double scale, int64_t zp, int64_t qmin,
                             int64_t qmax, int64_t dtype, const px_value *out_dtype, px_tensor *out) {
  int rc;
  if ((rc = dequantize_prologue(ctx, in, out, dtype, qmin, qmax, out_dtype, "out_dtype"))) return rc;
  if ((rc = q_check_scale(ctx, scale, "scale", -1))) return rc;
  if ((rc = q_check_zero_point(ctx, zp, qmin, qmax, "zero_point", -1))) return rc;
  float s = (float)scale;
  int32_t z = (int32_t)zp;
  dequantize_run(in, out, 1, in->numel, &s, &z, false);
  return 0;
}

/* dequantize_per_tensor.out(input, float scale, int zero_point, quant_min, quant_max, dtype, *,
 *                           out_dtype?, out) */
static int k_dequantize_per_tensor(px_ctx *ctx, px_value *const *a) {
  return dequantize_tensor(ctx, a[0]->u.t, arg_d(a[1]), a[2]->u.i, a[3]->u.i, a[4]->u.i, a[5]->u.i, a[6],
                           a[7]->u.t);
}

/* dequantize_per_tensor.Tensor_out(input, Tensor scale, Tensor zero_point, quant_min, quant_max, dtype, *,
 *                                  out_dtype?, out) */
static int k_dequantize_per_tensor_t(px_ctx *ctx, px_value *const *a) {
  double scale;
  int64_t zp;
  int rc = q_read_scalar_qparams(ctx, a[1]->u.t, a[2]->u.t, &scale, &zp);
  if (rc) return rc;
  return dequantize_tensor(ctx, a[0]->u.t, scale, zp, a[3]->u.i, a[4]->u.i, a[5]->u.i, a[6], a[7]->u.t);
}

/* dequantize_per_channel.out(input, scales, zero_points?, axis, quant_min, quant_max, dtype, *,
 *                            out_dtype?, out) */
static int k_dequantize_per_channel(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *out = a[8]->u.t;
  px_tensor *z = a[2]->tag == PX_V_TENSOR ? a[2]->u.t : NULL;
  int64_t qmin = a[4]->u.i, qmax = a[5]->u.i;
  int rc = dequantize_prologue(ctx, in, out, a[6]->u.i, qmin, qmax, a[7], "out_dtype");
  if (rc) return rc;
  if (in->dim == 0) return px_fail(ctx, "input is 0-d; per-channel dequantization needs an axis");
  int axis = px_wrap_dim(ctx, a[3]->u.i, in->dim);
  if (axis < 0) return PYEXEC_ERR_EXECUTION;
  float *sc;
  int32_t *zp;
  int64_t C = in->sizes[axis];
  if ((rc = q_read_channel_qparams(ctx, a[1]->u.t, z, C, qmin, qmax, "input.size(axis)", &sc, &zp))) return rc;
  dequantize_run(in, out, C, px_prod(in->sizes, axis + 1, in->dim), sc, zp, in->dim == 1);
  return 0;
}

/* dequantize_per_token.out(input, scales, zero_points, quant_min, quant_max, dtype, output_dtype, *, out) */
static int k_dequantize_per_token(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *out = a[7]->u.t;
  int64_t qmin = a[3]->u.i, qmax = a[4]->u.i;
  int rc = dequantize_prologue(ctx, in, out, a[5]->u.i, qmin, qmax, a[6], "output_dtype");
  if (rc) return rc;
  if (in->dim == 0) return px_fail(ctx, "input is 0-d; per-token dequantization needs a last dimension");
  int64_t tokens = px_prod(in->sizes, 0, in->dim - 1), last = in->sizes[in->dim - 1];
  float *sc;
  int32_t *zp;
  if ((rc = q_read_channel_qparams(ctx, a[1]->u.t, a[2]->u.t, tokens, qmin, qmax, "the number of tokens", &sc,
                                   &zp)))
    return rc;
  dequantize_run(in, out, tokens, last, sc, zp, false);
  return 0;
}

const px_kernel_def px_kernels_dequantize[] = {
    {"quantized_decomposed::dequantize_per_tensor.out", "TDIIIIiT|T", k_dequantize_per_tensor},
    {"quantized_decomposed::dequantize_per_tensor.Tensor_out", "TTTIIIiT|T", k_dequantize_per_tensor_t},
    {"quantized_decomposed::dequantize_per_channel.out", "TTtIIIIiT|T", k_dequantize_per_channel},
    {"quantized_decomposed::dequantize_per_token.out", "TTTIIIIT|T", k_dequantize_per_token},
    {NULL, NULL, NULL},
};
