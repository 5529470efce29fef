/*
 * common.h - small helpers several kernel families share (private,
 * header-only): the floating-dtype check, reading a 'D' argument, the shape
 * message, per-element-size data movement, float16 / bfloat16 element access
 * and per-spatial-dim parameter lists. The general helpers every kernel uses
 * are in kernel.h.
 */
#ifndef PX_KERNELS_COMMON_H
#define PX_KERNELS_COMMON_H

#include <math.h>
#include <stdio.h>

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

/* The p-norm distance of two float16 / bfloat16 rows of m elements (cdist,
 * pdist), as ExecuTorch computes it: |a - b|, its power and the running sum
 * in the 16-bit type (each operation rounded, p itself taken as that type),
 * then the root (sqrt for p = 2, pow(sum, 1 / p) in double otherwise). kind:
 * 0 (p = 0, the count of differences), 1, 2, 3 (p = inf), 4 (any other p).
 * A NaN difference makes the distance NaN, as torch's. */
static inline float px_dist16(const void *x, int64_t a, const void *y, int64_t b, int64_t m, int dt,
                              int kind, double p) {
  float p16 = px_r16(dt, (float)p), acc = 0.0f;
  for (int64_t k = 0; k < m; k++) {
    float d = px_r16(dt, px_ld16(x, dt, a + k) - px_ld16(y, dt, b + k));
    d = d < 0 ? -d : d;
    if (d != d) return d;
    switch (kind) {
      case 0: acc = px_r16(dt, acc + (d != 0.0f)); break;
      case 1: acc = px_r16(dt, acc + d); break;
      case 2: acc = px_r16(dt, acc + px_r16(dt, d * d)); break;
      case 3: acc = d > acc ? d : acc; break;
      default: acc = px_r16(dt, acc + px_r16(dt, powf(d, p16))); break;
    }
  }
  if (kind == 2) return px_r16(dt, sqrtf(acc));
  if (kind == 4) return px_r16(dt, (float)pow((double)acc, 1.0 / (double)p16));
  return acc;
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

#endif /* PX_KERNELS_COMMON_H */
