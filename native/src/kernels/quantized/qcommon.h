/*
 * qcommon.h - what the quantized_decomposed kernels share (private,
 * header-only): the ranges of the quantized dtypes, the checks on scales,
 * zero points and quant_min / quant_max, floating element access by dtype,
 * and the one quantize step every kernel rounds with.
 *
 * Arithmetic follows ExecuTorch's kernels/quantized/cpu kernels exactly (see
 * each file); the checks ExecuTorch makes with ET_CHECK (an abort) are
 * failures here, named after the argument, and a few it does not make are
 * added where its result would be undefined (a zero or negative scale, a zero
 * point outside [quant_min, quant_max], an index out of range).
 */
#ifndef PX_KERNELS_QCOMMON_H
#define PX_KERNELS_QCOMMON_H

#include <math.h>

#include "kernels/common.h"

/* The value range of a quantized integer dtype (uint8, int8, int16, int32);
 * false for any other dtype. */
static inline bool q_dtype_range(int dtype, int64_t *lo, int64_t *hi) {
  switch (dtype) {
    case PX_U8: *lo = 0, *hi = UINT8_MAX; return true;
    case PX_I8: *lo = INT8_MIN, *hi = INT8_MAX; return true;
    case PX_I16: *lo = INT16_MIN, *hi = INT16_MAX; return true;
    case PX_I32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    default: return false;
  }
}

/* A ScalarType argument's name for messages (its code when pyexec has no
 * such dtype). */
static inline const char *q_dtype_arg_name(int64_t code) {
  const char *n = (code >= 0 && code < 64) ? px_dtype_name((int)code) : NULL;
  return n ? n : "an unsupported dtype";
}

/* The quantized tensor `t` (called `what`) against the `dtype` argument and
 * quant_min / quant_max: t's dtype must be a quantized one and equal dtype,
 * and quant_min <= quant_max must lie inside its range. */
static inline int q_check_qtensor(px_ctx *ctx, const px_tensor *t, const char *what, int64_t dtype,
                                  int64_t qmin, int64_t qmax) {
  int64_t lo, hi;
  if (!q_dtype_range(t->dtype, &lo, &hi))
    return px_fail(ctx, "%s has dtype %s; expected uint8, int8, int16 or int32", what,
                   px_dtype_name(t->dtype));
  if (dtype != t->dtype)
    return px_fail(ctx, "%s has dtype %s but the dtype argument is %s", what, px_dtype_name(t->dtype),
                   q_dtype_arg_name(dtype));
  if (qmin < lo || qmax > hi)
    return px_fail(ctx, "quant_min %lld / quant_max %lld lie outside %s's range [%lld, %lld]",
                   (long long)qmin, (long long)qmax, px_dtype_name(t->dtype), (long long)lo,
                   (long long)hi);
  if (qmin > qmax)
    return px_fail(ctx, "quant_min %lld is greater than quant_max %lld", (long long)qmin, (long long)qmax);
  return 0;
}

/* A scale must be positive and finite, also once narrowed to float32 (the
 * kernels compute 1 / (float)scale). */
static inline int q_check_scale(px_ctx *ctx, double s, const char *what, int64_t at) {
  float f = (float)s;
  if (!(s > 0) || !isfinite(f) || f == 0.0f) {
    if (at >= 0)
      return px_fail(ctx, "%s[%lld] is %g; scales must be positive and finite", what, (long long)at, s);
    return px_fail(ctx, "%s is %g; a scale must be positive and finite", what, s);
  }
  return 0;
}

/* A zero point must lie inside [quant_min, quant_max]. */
static inline int q_check_zero_point(px_ctx *ctx, int64_t zp, int64_t qmin, int64_t qmax, const char *what,
                                     int64_t at) {
  if (zp < qmin || zp > qmax) {
    if (at >= 0)
      return px_fail(ctx, "%s[%lld] is %lld, outside [quant_min, quant_max] = [%lld, %lld]", what,
                     (long long)at, (long long)zp, (long long)qmin, (long long)qmax);
    return px_fail(ctx, "%s %lld lies outside [quant_min, quant_max] = [%lld, %lld]", what, (long long)zp,
                   (long long)qmin, (long long)qmax);
  }
  return 0;
}

/* The one quantize step: `p` is inv_scale * x already narrowed to float.
 * q = clamp((float)(int32)zp + nearbyint(p), qmin, qmax), as ExecuTorch's
 * quantize_val (round half to even in the default rounding mode; the float
 * sum is what it converts to int64). Its conversion of a NaN or of a value
 * beyond int64 is undefined in C++; here NaN gives quant_min (what x86-64
 * produces) and infinities saturate. */
static inline int64_t q_round_clamp(float p, int32_t zp, int64_t qmin, int64_t qmax) {
  float s = (float)zp + nearbyintf(p);
  if (!(s >= (float)qmin)) return qmin; /* also NaN */
  if (s >= (float)qmax) return qmax;
  int64_t q = (int64_t)s;
  return q < qmin ? qmin : q > qmax ? qmax : q;
}

/* Element k of a floating tensor as float (float16 / bfloat16 widened;
 * float64 narrowed: callers that need the double read it themselves). */
static inline float q_load_f(const void *base, int dtype, int64_t k) {
  switch (dtype) {
    case PX_F32: return ((const float *)base)[k];
    case PX_F64: return (float)((const double *)base)[k];
    case PX_F16: return px_half_to_float(((const uint16_t *)base)[k]);
    default: return px_bf16_to_float(((const uint16_t *)base)[k]);
  }
}

/* Writes a float into element k of a floating tensor. */
static inline void q_store_f(void *base, int dtype, int64_t k, float v) {
  switch (dtype) {
    case PX_F32: ((float *)base)[k] = v; break;
    case PX_F64: ((double *)base)[k] = v; break;
    case PX_F16: ((uint16_t *)base)[k] = px_float_to_half(v); break;
    default: ((uint16_t *)base)[k] = px_float_to_bf16(v); break;
  }
}

/* An optional ScalarType argument ('i'): -1 when None. */
static inline int64_t q_opt_dtype(const px_value *v) { return v->tag == PX_V_NONE ? -1 : v->u.i; }

/* Fails unless an optional out_dtype argument (if given) names out's dtype. */
static inline int q_check_out_dtype(px_ctx *ctx, const px_value *v, const px_tensor *out, const char *what) {
  int64_t d = q_opt_dtype(v);
  if (d >= 0 && d != out->dtype)
    return px_fail(ctx, "%s is %s but out has dtype %s", what, q_dtype_arg_name(d), px_dtype_name(out->dtype));
  return 0;
}

/* quantize.c: the single scale (float64 or float32) and zero point (int64
 * or int32) of a .Tensor_out overload's 1-element tensors. */
int q_read_scalar_qparams(px_ctx *ctx, const px_tensor *s, const px_tensor *z, double *scale, int64_t *zp);

/* quantize.c: per-channel parameters, `C` scales (float64 or float32) and
 * zero points (int64 or int32; z NULL: all 0), each checked (`chan` names
 * what C counts, for messages), into scale[] (narrowed to float) and zp[],
 * both in scratch. */
int q_read_channel_qparams(px_ctx *ctx, const px_tensor *s, const px_tensor *z, int64_t C, int64_t qmin,
                           int64_t qmax, const char *chan, float **scale, int32_t **zp);

#endif /* PX_KERNELS_QCOMMON_H */
