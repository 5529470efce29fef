/*
 * quantize.c - quantized_decomposed::quantize_per_tensor (.out and
 * .Tensor_out), quantize_per_channel.out and quantize_per_token.out: a
 * floating tensor (float32, float64, float16, bfloat16) to uint8, int8,
 * int16 or int32, as ExecuTorch's op_quantize.cpp computes it:
 *
 *   inv = 1.0f / (float)scale
 *   q   = clamp((float)(int32)zero_point + nearbyint((float)(inv * x)),
 *               quant_min, quant_max)
 *
 * where inv * x is a float product, or a double one for a float64 input
 * narrowed to float before rounding (half to even). Per channel, element i
 * belongs to channel (i / prod(sizes[axis+1:])) % size(axis); per token is
 * per channel with axis 0 over the [prod(sizes[:-1]), sizes[-1]] view.
 */
#include "kernels/quantized/qcommon.h"

/* inv * x narrowed to float, for element k of a floating tensor. */
static inline float q_scaled(const void *base, int dtype, int64_t k, float inv) {
  if (dtype == PX_F64) return (float)((double)inv * ((const double *)base)[k]);
  return inv * q_load_f(base, dtype, k);
}

/* Quantizes `in` into `out` (same numel, both contiguous): channel c of C
 * covers runs of `inner` elements, with inverse scale inv[c] and zero point
 * zp[c]. */
static void quantize_run(const px_tensor *in, px_tensor *out, int64_t C, int64_t inner, const float *inv,
                         const int32_t *zp, int64_t qmin, int64_t qmax) {
  int64_t n = in->numel, runs = inner ? n / inner : 0;
  for (int64_t r = 0; r < runs; r++) {
    int64_t c = C > 1 ? r % C : 0;
    float is = inv[c];
    int32_t z = zp[c];
    int64_t base = r * inner;
#define Q_LOOP(TYPE)                                                                      \
  do {                                                                                    \
    TYPE *o = (TYPE *)out->data + base;                                                   \
    if (in->dtype == PX_F32) {                                                            \
      const float *x = (const float *)in->data + base;                                    \
      for (int64_t k = 0; k < inner; k++) o[k] = (TYPE)q_round_clamp(is * x[k], z, qmin, qmax); \
    } else {                                                                              \
      for (int64_t k = 0; k < inner; k++)                                                 \
        o[k] = (TYPE)q_round_clamp(q_scaled(in->data, in->dtype, base + k, is), z, qmin, qmax); \
    }                                                                                     \
  } while (0)
    switch (out->dtype) {
      case PX_U8: Q_LOOP(uint8_t); break;
      case PX_I8: Q_LOOP(int8_t); break;
      case PX_I16: Q_LOOP(int16_t); break;
      default: Q_LOOP(int32_t); break;
    }
#undef Q_LOOP
  }
}

/* The checks every quantize overload shares (input floating, out of dtype
 * `dtype` within whose range quant_min <= quant_max lie), then out resized
 * to the input's shape. */
static int quantize_prologue(px_ctx *ctx, const px_tensor *in, px_tensor *out, int64_t dtype, int64_t qmin,
                             int64_t qmax) {
  int rc;
  if ((rc = require_floating(ctx, in, "input"))) return rc;
  if ((rc = q_check_qtensor(ctx, out, "out", dtype, qmin, qmax))) return rc;
  return px_resize_like(ctx, out, in);
}

/* One scale / zero point for the whole tensor. */
static int quantize_tensor(px_ctx *ctx, const px_tensor *in, double scale, int64_t zp, int64_t qmin,
                           int64_t qmax, int64_t dtype, px_tensor *out) {
  int rc;
  if ((rc = quantize_prologue(ctx, in, out, dtype, qmin, qmax))) return rc;
  if ((rc = q_check_scale(ctx, scale, "scale", -1))) return rc;
  if ((rc = q_check_zero_point(ctx, zp, qmin, qmax, "zero_point", -1))) return rc;
  float inv = 1.0f / (float)scale;
  int32_t z = (int32_t)zp;
  quantize_run(in, out, 1, in->numel, &inv, &z, qmin, qmax);
  return 0;
}

/* quantize_per_tensor.out(input, float scale, int zero_point, quant_min, quant_max, dtype, *, out) */
static int k_quantize_per_tensor(px_ctx *ctx, px_value *const *a) {
  return quantize_tensor(ctx, a[0]->u.t, arg_d(a[1]), a[2]->u.i, a[3]->u.i, a[4]->u.i, a[5]->u.i, a[6]->u.t);
}

/* Reads the single element of a .Tensor_out scale (float64, or float32)
 * and zero point (int64, or int32) tensor. */
int q_read_scalar_qparams(px_ctx *ctx, const px_tensor *s, const px_tensor *z, double *scale, int64_t *zp) {
  if (s->dtype != PX_F64 && s->dtype != PX_F32)
    return px_fail(ctx, "scale has dtype %s; expected float64", px_dtype_name(s->dtype));
  if (z->dtype != PX_I64 && z->dtype != PX_I32)
    return px_fail(ctx, "zero_point has dtype %s; expected int64", px_dtype_name(z->dtype));
  if (s->numel != 1) return px_fail(ctx, "scale has %lld elements; expected 1", (long long)s->numel);
  if (z->numel != 1) return px_fail(ctx, "zero_point has %lld elements; expected 1", (long long)z->numel);
  *scale = px_load_d(s->data, s->dtype, 0);
  *zp = px_load_i(z->data, z->dtype, 0);
  return 0;
}

/* quantize_per_tensor.Tensor_out(input, Tensor scale, Tensor zero_point, quant_min, quant_max, dtype, *, out) */
static int k_quantize_per_tensor_t(px_ctx *ctx, px_value *const *a) {
  double scale;
  int64_t zp;
  int rc = q_read_scalar_qparams(ctx, a[1]->u.t, a[2]->u.t, &scale, &zp);
  if (rc) return rc;
  return quantize_tensor(ctx, a[0]->u.t, scale, zp, a[3]->u.i, a[4]->u.i, a[5]->u.i, a[6]->u.t);
}

/* Per-channel parameters: `C` scales (float64 or float32) and zero points
 * (int64 or int32), each checked, into inv[] and zp[] (scratch). */
int q_read_channel_qparams(px_ctx *ctx, const px_tensor *s, const px_tensor *z, int64_t C, int64_t qmin,
                           int64_t qmax, const char *chan, float **inv, int32_t **zp) {
  if (s->dtype != PX_F64 && s->dtype != PX_F32)
    return px_fail(ctx, "scales has dtype %s; expected float64", px_dtype_name(s->dtype));
  if (z && z->dtype != PX_I64 && z->dtype != PX_I32)
    return px_fail(ctx, "zero_points has dtype %s; expected int64", px_dtype_name(z->dtype));
  if (s->numel != C)
    return px_fail(ctx, "scales has %lld elements but %s is %lld", (long long)s->numel, chan, (long long)C);
  if (z && z->numel != C)
    return px_fail(ctx, "zero_points has %lld elements but %s is %lld", (long long)z->numel, chan,
                   (long long)C);
  *inv = px_scratch(ctx, (size_t)(C ? C : 1) * (sizeof **inv + sizeof **zp));
  if (!*inv) return PYEXEC_ERR_EXECUTION;
  *zp = (int32_t *)(*inv + (C ? C : 1));
  for (int64_t c = 0; c < C; c++) {
    double sc = px_load_d(s->data, s->dtype, c);
    int64_t zc = z ? px_load_i(z->data, z->dtype, c) : 0;
    int rc;
    if ((rc = q_check_scale(ctx, sc, "scales", c))) return rc;
    if ((rc = q_check_zero_point(ctx, zc, qmin, qmax, "zero_points", c))) return rc;
    (*inv)[c] = (float)sc; /* the caller inverts it or uses it as is */
    (*zp)[c] = (int32_t)zc;
  }
  return 0;
}

/* Quantizes over C channels of `inner` elements each (rows of a view). */
static int quantize_channels(px_ctx *ctx, const px_tensor *in, const px_tensor *s, const px_tensor *z, int64_t C,
                             int64_t inner, int64_t qmin, int64_t qmax, const char *chan, px_tensor *out) {
  float *inv;
  int32_t *zp;
  int rc = q_read_channel_qparams(ctx, s, z, C, qmin, qmax, chan, &inv, &zp);
  if (rc) return rc;
  for (int64_t c = 0; c < C; c++) inv[c] = 1.0f / inv[c];
  quantize_run(in, out, C, inner, inv, zp, qmin, qmax);
  return 0;
}

/* quantize_per_channel.out(input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out) */
static int k_quantize_per_channel(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *out = a[7]->u.t;
  int64_t qmin = a[4]->u.i, qmax = a[5]->u.i;
  int rc = quantize_prologue(ctx, in, out, a[6]->u.i, qmin, qmax);
  if (rc) return rc;
  if (in->dim == 0) return px_fail(ctx, "input is 0-d; per-channel quantization needs an axis");
  int axis = px_wrap_dim(ctx, a[3]->u.i, in->dim);
  if (axis < 0) return PYEXEC_ERR_EXECUTION;
  return quantize_channels(ctx, in, a[1]->u.t, a[2]->u.t, in->sizes[axis], px_prod(in->sizes, axis + 1, in->dim),
                           qmin, qmax, "input.size(axis)", out);
}

/* quantize_per_token.out(input, scales, zero_points, quant_min, quant_max, dtype, *, out) */
static int k_quantize_per_token(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *out = a[6]->u.t;
  int64_t qmin = a[3]->u.i, qmax = a[4]->u.i;
  int rc = quantize_prologue(ctx, in, out, a[5]->u.i, qmin, qmax);
  if (rc) return rc;
  if (in->dim == 0) return px_fail(ctx, "input is 0-d; per-token quantization needs a last dimension");
  int64_t last = in->sizes[in->dim - 1];
  return quantize_channels(ctx, in, a[1]->u.t, a[2]->u.t, px_prod(in->sizes, 0, in->dim - 1), last, qmin, qmax,
                           "the number of tokens", out);
}

const px_kernel_def px_kernels_quantize[] = {
    {"quantized_decomposed::quantize_per_tensor.out", "TDIIIIT|T", k_quantize_per_tensor},
    {"quantized_decomposed::quantize_per_tensor.Tensor_out", "TTTIIIT|T", k_quantize_per_tensor_t},
    {"quantized_decomposed::quantize_per_channel.out", "TTTIIIIT|T", k_quantize_per_channel},
    {"quantized_decomposed::quantize_per_token.out", "TTTIIIT|T", k_quantize_per_token},
    {NULL, NULL, NULL},
};
