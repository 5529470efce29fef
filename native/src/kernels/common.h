/*
 * common.h - small helpers several kernel families share (private,
 * header-only): the floating-dtype check, reading a 'D' argument, the shape
 * message, per-element-size data movement, float16 / bfloat16 element access,
 * per-spatial-dim parameter lists and XNNPACK's int8 requantization step. The general helpers every kernel uses
 * are in kernel.h.
 */
#ifndef PX_KERNELS_COMMON_H
#define PX_KERNELS_COMMON_H

#include <stdio.h>
#include <string.h>

#include "kernels/kernel.h"

static inline int require_floating(px_ctx *ctx, const px_tensor *t, const char *what) {
  if (!px_is_floating(t->dtype))
    return px_fail(ctx, "%s has dtype %s; only floating dtypes are supported", what,
                   px_dtype_name(t->dtype));
  return 0;
}

/* A 'D' argument: a double, or an int the emitter wrote for a whole number. */
static inline double arg_d(const px_value *v) { return v->tag == PX_V_INT ? (double)v->u.i : v->u.d; }

static inline int fail_shape(px_ctx *ctx, const char *what, const px_tensor *t, const char *why) {
  char buf[160];
  size_t n = (size_t)snprintf(buf, sizeof buf, "[");
  for (int k = 0; k < t->dim && n < sizeof buf; k++)
    n += (size_t)snprintf(buf + n, sizeof buf - n, k ? ", %lld" : "%lld", (long long)t->sizes[k]);
  if (n < sizeof buf) snprintf(buf + n, sizeof buf - n, "]");
  return px_fail(ctx, "%s has shape %s; %s", what, buf, why);
}

/* Runs BODY with `E` defined as an unsigned integer type of the element size
 * `es` (1, 2, 4 or 8 bytes): data movement that is the same for every dtype. */
#define BY_ELSIZE(es, ...)                 \
  switch (es) {                            \
    case 1: {                              \
      typedef uint8_t E;                   \
      __VA_ARGS__;                         \
    } break;                               \
    case 2: {                              \
      typedef uint16_t E;                  \
      __VA_ARGS__;                         \
    } break;                               \
    case 4: {                              \
      typedef uint32_t E;                  \
      __VA_ARGS__;                         \
    } break;                               \
    default: {                             \
      typedef uint64_t E;                  \
      __VA_ARGS__;                         \
    } break;                               \
  }

/* Element access for the floating kernels: storage type -> compute type. */
#define LD_NATIVE(p, k) ((p)[k])
#define SV_NATIVE(p, k, v) ((p)[k] = (v))
#define LD_HALF(p, k) px_half_to_float((p)[k])
#define SV_HALF(p, k, v) ((p)[k] = px_float_to_half((float)(v)))
#define LD_BF16(p, k) px_bf16_to_float((p)[k])
#define SV_BF16(p, k, v) ((p)[k] = px_float_to_bf16((float)(v)))

/* ---- float16 / bfloat16 as ExecuTorch computes them --------------------
 * Where an ExecuTorch portable kernel computes in the tensor's own 16-bit
 * type (c10::Half / c10::BFloat16 arithmetic), each operation is done in
 * float and rounded to the 16-bit type. The kernels that follow those
 * kernels bit for bit do the same with these helpers: px_is16(dt) says
 * whether dt is one of the two types, px_r16(dt, v) is v rounded to dt (v
 * itself for any other dtype), and px_ld16 / px_st16 read and write element
 * k of a 16-bit buffer as float. */
static inline bool px_is16(int dt) { return dt == PX_F16 || dt == PX_BF16; }
static inline float px_r16(int dt, float v) {
  if (dt == PX_F16) return px_half_to_float(px_float_to_half(v));
  if (dt == PX_BF16) return px_bf16_to_float(px_float_to_bf16(v));
  return v;
}
static inline float px_ld16(const void *p, int dt, int64_t k) {
  uint16_t b = ((const uint16_t *)p)[k];
  return dt == PX_F16 ? px_half_to_float(b) : px_bf16_to_float(b);
}
static inline void px_st16(void *p, int dt, int64_t k, float v) {
  ((uint16_t *)p)[k] = dt == PX_F16 ? px_float_to_half(v) : px_float_to_bf16(v);
}

/* Reads a per-spatial-dim parameter list (length 1 is broadcast; length 0
 * takes `dflt`, used for pooling strides) into v[0..nsp). */
static inline int spatial_param(px_ctx *ctx, px_value *list, int nsp, const char *what,
                         const int64_t *dflt, int64_t *v) {
  const int64_t *p = px_intlist(list);
  uint32_t n = list->u.il.n;
  if (n == 0 && dflt) {
    for (int k = 0; k < nsp; k++) v[k] = dflt[k];
    return 0;
  }
  if (n != 1 && n != (uint32_t)nsp)
    return px_fail(ctx, "%s must have 1 or %d values, got %u", what, nsp, n);
  for (int k = 0; k < nsp; k++) v[k] = p[n == 1 ? 0 : k];
  return 0;
}

/* lrintf(v) for |v| <= 2^22: adding 1.5 x 2^23 rounds to the nearest
 * integer, ties to even, as XNNPACK's "magic bias" kernels do; inline, where
 * lrintf is a libm call. */
static inline int32_t px_round_magic(float v) {
  float t = v + 12582912.0f;
  uint32_t bits;
  memcpy(&bits, &t, 4);
  return (int32_t)bits - 0x4B400000;
}

/* XNNPACK's step from a scaled sum to an int8 output: v clamped (max with
 * lo, so NaN gives lo, then min with hi; lo and hi within [-128 - zp,
 * 127 - zp]), rounded half to even, plus zp. */
static inline int8_t px_q8_step(float v, float lo, float hi, int32_t zp) {
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return (int8_t)(px_round_magic(v) + zp);
}

#endif /* PX_KERNELS_COMMON_H */
