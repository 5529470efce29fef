/*
 * add.c - quantized_decomposed::add.out: two quantized tensors of one shape
 * and integer dtype added through float, as ExecuTorch's op_add.cpp does it
 * (dequantize, add, quantize; no broadcasting):
 *
 *   fa  = (float)((double)(a - (int32)a_zp) * (double)(float)a_scale)   (fb alike)
 *   out = clamp((float)out_zp + nearbyint((1.0f / (float)out_scale) * (fa + fb)),
 *               out_quant_min, out_quant_max)
 *
 * Every quant_min / quant_max pair must lie in [0, 255] (ExecuTorch's
 * bounds, whatever the dtype); the result is stored in the tensors' dtype
 * (uint8, int8, int16, int32 or int64).
 */
#include "kernels/quantized/qcommon.h"

typedef struct q_side {
  float scale;
  int32_t zp;
} q_side;

/* A scale / zero point / quant_min / quant_max group of arguments starting
 * at a[at], checked; `who` is a, b or out. */
static int q_read_side(px_ctx *ctx, px_value *const *a, int at, const char *who, q_side *side, int64_t *qmin,
                       int64_t *qmax) {
  char what[32];
  double s = arg_d(a[at]);
  int64_t zp = a[at + 1]->u.i;
  *qmin = a[at + 2]->u.i;
  *qmax = a[at + 3]->u.i;
  if (*qmin < 0 || *qmax > 255 || *qmin > *qmax)
    return px_fail(ctx, "%s_quant_min %lld / %s_quant_max %lld must satisfy 0 <= min <= max <= 255", who,
                   (long long)*qmin, who, (long long)*qmax);
  int rc;
  snprintf(what, sizeof what, "%s_scale", who);
  if ((rc = q_check_scale(ctx, s, what, -1))) return rc;
  snprintf(what, sizeof what, "%s_zero_point", who);
  if ((rc = q_check_zero_point(ctx, zp, *qmin, *qmax, what, -1))) return rc;
  side->scale = (float)s;
  side->zp = (int32_t)zp;
  return 0;
}

static inline float q_dq(int64_t v, const q_side *s) {
  return (float)((double)(v - (int64_t)s->zp) * (double)s->scale);
}

/* add.out(a, a_scale, a_zero_point, a_quant_min, a_quant_max, b, b_scale, b_zero_point, b_quant_min,
 *         b_quant_max, out_scale, out_zero_point, out_quant_min, out_quant_max, *, out) */
static int k_quantized_add(px_ctx *ctx, px_value *const *a) {
  px_tensor *x = a[0]->u.t, *y = a[5]->u.t, *out = a[14]->u.t;
  int rc;
  if (!px_is_integral(x->dtype, false))
    return px_fail(ctx, "a has dtype %s; expected an integer dtype", px_dtype_name(x->dtype));
  if ((rc = px_require_same_dtype(ctx, y, "b", x, "a"))) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", x, "a"))) return rc;
  if (x->dim != y->dim) return fail_shape(ctx, "b", y, "expected a's shape (no broadcasting)");
  for (int k = 0; k < x->dim; k++)
    if (x->sizes[k] != y->sizes[k]) return fail_shape(ctx, "b", y, "expected a's shape (no broadcasting)");
  q_side sa, sb, so;
  int64_t lo, hi, olo, ohi;
  if ((rc = q_read_side(ctx, a, 1, "a", &sa, &lo, &hi))) return rc;
  if ((rc = q_read_side(ctx, a, 6, "b", &sb, &lo, &hi))) return rc;
  if ((rc = q_read_side(ctx, a, 10, "out", &so, &olo, &ohi))) return rc;
  if ((rc = px_resize_like(ctx, out, x))) return rc;
  float inv = 1.0f / so.scale;
  for (int64_t k = 0; k < x->numel; k++) {
    float sum = q_dq(px_load_i(x->data, x->dtype, k), &sa) + q_dq(px_load_i(y->data, y->dtype, k), &sb);
    px_store_i(out->data, out->dtype, k, q_round_clamp(inv * sum, so.zp, olo, ohi));
  }
  return 0;
}

const px_kernel_def px_kernels_quantized_add[] = {
    {"quantized_decomposed::add.out", "TDIIITDIIIDIIIT|T", k_quantized_add},
    {NULL, NULL, NULL},
};
