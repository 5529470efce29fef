/*
 * norm.c - normalisation kernels: layer norm, batch norm (inference, and
 * training statistics without running stats), group norm, softmax and
 * log-softmax.
 *
 * float32 has its own loops (vector extensions, a vectorised exp); the other
 * floating dtypes are computed in double through px_load_d / px_store_d.
 */
#include <math.h>
#include <string.h>

#include "../kernel.h"

/* 16-byte vectors: native on every x86-64 and AArch64 target (32-byte GCC
 * vectors would round-trip through the stack without AVX). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
#define v4_load(p) (*(const v4f_u *)(p))
#define v4_store(p, v) (*(v4f_u *)(p) = (v))
/* 32-byte vectors, used only inside functions compiled for AVX2 */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
#define v8_load(p) (*(const v8f_u *)(p))
#define v8_store(p, v) (*(v8f_u *)(p) = (v))

/* AVX2/FMA variants, chosen at run time; define PX_PORTABLE_KERNELS to build
 * only the portable code (to test it on an AVX2 machine). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(PX_PORTABLE_KERNELS)
#define PX_X86_KERNELS 1
#else
#define PX_X86_KERNELS 0
#endif

static int require_floating(px_ctx *ctx, const px_tensor *t, const char *what) {
  if (!px_is_floating(t->dtype))
    return px_fail(ctx, "%s has dtype %s; only floating dtypes are supported", what,
                   px_dtype_name(t->dtype));
  return 0;
}

static double scalar_arg_d(const px_value *v) {
  return v->tag == PX_V_INT ? (double)v->u.i : v->u.d;
}

/* ---- float32 vector helpers ------------------------------------------- */

static float sum_f32(int64_t n, const float *x) {
  v4f a0 = {0}, a1 = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 += v4_load(x + i);
    a1 += v4_load(x + i + 4);
  }
  a0 += a1;
  float s = (a0[0] + a0[1]) + (a0[2] + a0[3]);
  for (; i < n; i++) s += x[i];
  return s;
}

/* sum of (x - m)^2 */
static float sqdev_f32(int64_t n, const float *x, float m) {
  v4f a0 = {0}, a1 = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v4f d0 = v4_load(x + i) - m, d1 = v4_load(x + i + 4) - m;
    a0 += d0 * d0;
    a1 += d1 * d1;
  }
  a0 += a1;
  float s = (a0[0] + a0[1]) + (a0[2] + a0[3]);
  for (; i < n; i++) s += (x[i] - m) * (x[i] - m);
  return s;
}

/* y = x * a + b (y may be x) */
static void affine_f32(int64_t n, const float *x, float a, float b, float *y) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) v4_store(y + i, v4_load(x + i) * a + b);
  for (; i < n; i++) y[i] = x[i] * a + b;
}

/* y = (x * a + c) * w + b, with w and b optional (NULL) */
static void norm_row_f32(int64_t n, const float *x, float a, float c, const float *w,
                         const float *b, float *y) {
  int64_t i = 0;
  if (w && b) {
    for (; i + 4 <= n; i += 4)
      v4_store(y + i, (v4_load(x + i) * a + c) * v4_load(w + i) + v4_load(b + i));
    for (; i < n; i++) y[i] = (x[i] * a + c) * w[i] + b[i];
  } else if (w) {
    for (; i + 4 <= n; i += 4) v4_store(y + i, (v4_load(x + i) * a + c) * v4_load(w + i));
    for (; i < n; i++) y[i] = (x[i] * a + c) * w[i];
  } else if (b) {
    for (; i + 4 <= n; i += 4) v4_store(y + i, (v4_load(x + i) * a + c) + v4_load(b + i));
    for (; i < n; i++) y[i] = (x[i] * a + c) + b[i];
  } else {
    affine_f32(n, x, a, c, y);
  }
}

/* ======================================================================== */
/* layer norm                                                                */
/* ======================================================================== */

/* aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape,
 *   Tensor? weight, Tensor? bias, float eps, *, Tensor(a!) out0,
 *   Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!)) */
static int k_native_layer_norm(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t;
  px_tensor *w = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  px_tensor *b = args[3]->tag == PX_V_NONE ? NULL : args[3]->u.t;
  double eps = scalar_arg_d(args[4]);
  px_tensor *out = args[5]->u.t, *mean_t = args[6]->u.t, *rstd_t = args[7]->u.t;
  int rc;
  uint32_t nk = args[1]->u.il.n;
  const int64_t *ns = px_intlist(args[1]);
  if (nk < 1 || (int)nk > in->dim)
    return px_fail(ctx, "normalized_shape has %u dims but input has %d", nk, in->dim);
  int axis = in->dim - (int)nk;
  for (uint32_t k = 0; k < nk; k++)
    if (ns[k] != in->sizes[axis + (int)k])
      return px_fail(ctx, "normalized_shape[%u] = %lld does not match input size %lld at dim %d",
                     k, (long long)ns[k], (long long)in->sizes[axis + (int)k], axis + (int)k);
  if ((rc = require_floating(ctx, in, "input"))) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out0", in, "input"))) return rc;
  if ((rc = require_floating(ctx, mean_t, "out1")) || (rc = require_floating(ctx, rstd_t, "out2")))
    return rc;
  int64_t N = px_prod(in->sizes, axis, in->dim), M = px_prod(in->sizes, 0, axis);
  px_tensor *wb[2] = {w, b};
  for (int k = 0; k < 2; k++) {
    if (!wb[k]) continue;
    const char *nm = k ? "bias" : "weight";
    if ((rc = px_require_same_dtype(ctx, wb[k], nm, in, "input"))) return rc;
    if (wb[k]->numel != N)
      return px_fail(ctx, "%s has %lld elements, normalized_shape has %lld", nm,
                     (long long)wb[k]->numel, (long long)N);
    if ((rc = px_require_contiguous(ctx, wb[k], nm))) return rc;
  }
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out0")) ||
      (rc = px_require_contiguous(ctx, mean_t, "out1")) ||
      (rc = px_require_contiguous(ctx, rstd_t, "out2")))
    return rc;
  if (mean_t->dim != in->dim || rstd_t->dim != in->dim)
    return px_fail(ctx, "mean/rstd outputs must have rank %d, got %d and %d", in->dim,
                   mean_t->dim, rstd_t->dim);
  int64_t ms[PX_MAX_DIM];
  for (int k = 0; k < in->dim; k++) ms[k] = k < axis ? in->sizes[k] : 1;
  if ((rc = px_resize_like(ctx, out, in)) || (rc = px_resize(ctx, mean_t, in->dim, ms)) ||
      (rc = px_resize(ctx, rstd_t, in->dim, ms)))
    return rc;
  for (int64_t r = 0; r < M; r++) {
    double mean, rstd;
    if (in->dtype == PX_F32) {
      const float *x = (const float *)in->data + r * N;
      float *y = (float *)out->data + r * N;
      float m = N ? sum_f32(N, x) / (float)N : NAN;
      float var = N ? sqdev_f32(N, x, m) / (float)N : NAN;
      float rs = 1.0f / sqrtf(var + (float)eps);
      norm_row_f32(N, x, rs, -m * rs, w ? (const float *)w->data : NULL,
                   b ? (const float *)b->data : NULL, y);
      mean = m;
      rstd = rs;
    } else {
      double s = 0.0, q = 0.0;
      for (int64_t k = 0; k < N; k++) s += px_load_d(in->data, in->dtype, r * N + k);
      mean = N ? s / (double)N : NAN;
      for (int64_t k = 0; k < N; k++) {
        double d = px_load_d(in->data, in->dtype, r * N + k) - mean;
        q += d * d;
      }
      double var = N ? q / (double)N : NAN;
      rstd = 1.0 / sqrt(var + eps);
      for (int64_t k = 0; k < N; k++) {
        double v = (px_load_d(in->data, in->dtype, r * N + k) - mean) * rstd;
        if (w) v *= px_load_d(w->data, w->dtype, k);
        if (b) v += px_load_d(b->data, b->dtype, k);
        px_store_d(out->data, out->dtype, r * N + k, v);
      }
    }
    px_store_d(mean_t->data, mean_t->dtype, r, mean);
    px_store_d(rstd_t->data, rstd_t->dtype, r, rstd);
  }
  return 0;
}

/* ======================================================================== */
/* batch norm                                                                */
/* ======================================================================== */

/* Checks a per-channel optional tensor (weight, bias, running stats). */
static int check_channel_vec(px_ctx *ctx, const px_tensor *t, int64_t C, const char *what) {
  if (!t) return 0;
  int rc;
  if ((rc = require_floating(ctx, t, what))) return rc;
  if (t->dim != 1 || t->sizes[0] != C)
    return px_fail(ctx, "%s must have shape [%lld], got %d dims with %lld elements", what,
                   (long long)C, t->dim, (long long)t->numel);
  return 0;
}

/* out[n, c, :] = x[n, c, :] * scale[c] + shift[c] (input [N, C, inner]). */
static void apply_channel_affine(const px_tensor *in, px_tensor *out, int64_t N, int64_t C,
                                 int64_t inner, const double *scale, const double *shift) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      int64_t o = (n * C + c) * inner;
      if (in->dtype == PX_F32 && out->dtype == PX_F32)
        affine_f32(inner, (const float *)in->data + o, (float)scale[c], (float)shift[c],
                   (float *)out->data + o);
      else
        for (int64_t k = 0; k < inner; k++)
          px_store_d(out->data, out->dtype, o + k,
                     px_load_d(in->data, in->dtype, o + k) * scale[c] + shift[c]);
    }
}

static int batch_norm_common_checks(px_ctx *ctx, const px_tensor *in, const px_tensor *w,
                                    const px_tensor *b, px_tensor *out, int64_t *C) {
  int rc;
  if (in->dim < 2) return px_fail(ctx, "input must have at least 2 dims, got %d", in->dim);
  if ((rc = require_floating(ctx, in, "input"))) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "input"))) return rc;
  *C = in->sizes[1];
  if ((rc = check_channel_vec(ctx, w, *C, "weight")) || (rc = check_channel_vec(ctx, b, *C, "bias")))
    return rc;
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  return px_resize_like(ctx, out, in);
}

/* Leaves an unused statistics output empty when it is 1-D (torch returns
 * empty tensors for them in inference mode). */
static int empty_stat(px_ctx *ctx, px_tensor *t) {
  if (t->dim == 1 && t->sizes[0] != 0) {
    int64_t z = 0;
    return px_resize(ctx, t, 1, &z);
  }
  return 0;
}

/* aten::_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight,
 *   Tensor? bias, Tensor running_mean, Tensor running_var, float momentum,
 *   float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) */
static int k_batch_norm_no_training(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t;
  px_tensor *w = args[1]->tag == PX_V_NONE ? NULL : args[1]->u.t;
  px_tensor *b = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  px_tensor *rm = args[3]->u.t, *rv = args[4]->u.t;
  double eps = scalar_arg_d(args[6]);
  px_tensor *out = args[7]->u.t;
  int64_t C;
  int rc;
  if ((rc = batch_norm_common_checks(ctx, in, w, b, out, &C))) return rc;
  if ((rc = check_channel_vec(ctx, rm, C, "running_mean")) ||
      (rc = check_channel_vec(ctx, rv, C, "running_var")))
    return rc;
  if ((rc = empty_stat(ctx, args[8]->u.t)) || (rc = empty_stat(ctx, args[9]->u.t))) return rc;
  double *scale = px_scratch(ctx, sizeof(double) * (size_t)(2 * C + 1));
  if (!scale) return PYEXEC_ERR_EXECUTION;
  double *shift = scale + C;
  for (int64_t c = 0; c < C; c++) {
    double inv = 1.0 / sqrt(px_load_d(rv->data, rv->dtype, c) + eps);
    double a = inv * (w ? px_load_d(w->data, w->dtype, c) : 1.0);
    scale[c] = a;
    shift[c] = (b ? px_load_d(b->data, b->dtype, c) : 0.0) - px_load_d(rm->data, rm->dtype, c) * a;
  }
  int64_t N = in->sizes[0], inner = px_prod(in->sizes, 2, in->dim);
  apply_channel_affine(in, out, N, C, inner, scale, shift);
  return 0;
}

/* aten::_native_batch_norm_legit.no_stats_out(Tensor input, Tensor? weight,
 *   Tensor? bias, bool training, float momentum, float eps, *, Tensor(a!) out,
 *   Tensor(b!) save_mean, Tensor(c!) save_invstd) */
static int k_batch_norm_no_stats(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t;
  px_tensor *w = args[1]->tag == PX_V_NONE ? NULL : args[1]->u.t;
  px_tensor *b = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  bool training = args[3]->u.b;
  double eps = scalar_arg_d(args[5]);
  px_tensor *out = args[6]->u.t, *sm = args[7]->u.t, *si = args[8]->u.t;
  int64_t C;
  int rc;
  if (!training)
    return px_fail(ctx, "training=False needs running statistics, and this overload has none");
  if ((rc = batch_norm_common_checks(ctx, in, w, b, out, &C))) return rc;
  if ((rc = require_floating(ctx, sm, "save_mean")) ||
      (rc = require_floating(ctx, si, "save_invstd")))
    return rc;
  if (sm->dim != 1 || si->dim != 1)
    return px_fail(ctx, "save_mean and save_invstd must be 1-D, got %d and %d dims", sm->dim,
                   si->dim);
  if ((rc = px_resize(ctx, sm, 1, &C)) || (rc = px_resize(ctx, si, 1, &C))) return rc;
  int64_t N = in->sizes[0], inner = px_prod(in->sizes, 2, in->dim), cnt = N * inner;
  double *scale = px_scratch(ctx, sizeof(double) * (size_t)(2 * C + 1));
  if (!scale) return PYEXEC_ERR_EXECUTION;
  double *shift = scale + C;
  for (int64_t c = 0; c < C; c++) {
    double s = 0.0, q = 0.0;
    for (int64_t n = 0; n < N; n++) {
      int64_t o = (n * C + c) * inner;
      if (in->dtype == PX_F32)
        s += sum_f32(inner, (const float *)in->data + o);
      else
        for (int64_t k = 0; k < inner; k++) s += px_load_d(in->data, in->dtype, o + k);
    }
    double mean = cnt ? s / (double)cnt : NAN;
    for (int64_t n = 0; n < N; n++) {
      int64_t o = (n * C + c) * inner;
      if (in->dtype == PX_F32)
        q += sqdev_f32(inner, (const float *)in->data + o, (float)mean);
      else
        for (int64_t k = 0; k < inner; k++) {
          double d = px_load_d(in->data, in->dtype, o + k) - mean;
          q += d * d;
        }
    }
    double var = cnt ? q / (double)cnt : NAN;
    double inv = 1.0 / sqrt(var + eps);
    px_store_d(sm->data, sm->dtype, c, mean);
    px_store_d(si->data, si->dtype, c, inv);
    double a = inv * (w ? px_load_d(w->data, w->dtype, c) : 1.0);
    scale[c] = a;
    shift[c] = (b ? px_load_d(b->data, b->dtype, c) : 0.0) - mean * a;
  }
  apply_channel_affine(in, out, N, C, inner, scale, shift);
  return 0;
}

/* ======================================================================== */
/* group norm                                                                */
/* ======================================================================== */

/* aten::native_group_norm.out(Tensor input, Tensor? weight, Tensor? bias,
 *   SymInt N, SymInt C, SymInt HxW, int group, float eps, *, Tensor(a!) out0,
 *   Tensor(b!) out1, Tensor(c!) out2) */
static int k_native_group_norm(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t;
  px_tensor *w = args[1]->tag == PX_V_NONE ? NULL : args[1]->u.t;
  px_tensor *b = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  int64_t N = args[3]->u.i, C = args[4]->u.i, HxW = args[5]->u.i, G = args[6]->u.i;
  double eps = scalar_arg_d(args[7]);
  px_tensor *out = args[8]->u.t, *mean_t = args[9]->u.t, *rstd_t = args[10]->u.t;
  int rc;
  if ((rc = require_floating(ctx, in, "input"))) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out0", in, "input"))) return rc;
  if ((rc = require_floating(ctx, mean_t, "out1")) || (rc = require_floating(ctx, rstd_t, "out2")))
    return rc;
  if (N < 0 || C < 0 || HxW < 0 || N * C * HxW != in->numel)
    return px_fail(ctx, "N*C*HxW = %lld*%lld*%lld does not match the input's %lld elements",
                   (long long)N, (long long)C, (long long)HxW, (long long)in->numel);
  if (in->dim < 2 || in->sizes[0] != N || in->sizes[1] != C)
    return px_fail(ctx, "input must be [N=%lld, C=%lld, ...]", (long long)N, (long long)C);
  if (G <= 0 || C % G)
    return px_fail(ctx, "channels (%lld) must be divisible by a positive group count (%lld)",
                   (long long)C, (long long)G);
  if ((rc = check_channel_vec(ctx, w, C, "weight")) || (rc = check_channel_vec(ctx, b, C, "bias")))
    return rc;
  if (mean_t->dim != 2 || rstd_t->dim != 2)
    return px_fail(ctx, "mean/rstd outputs must be 2-D, got %d and %d dims", mean_t->dim,
                   rstd_t->dim);
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out0")))
    return rc;
  int64_t ms[2] = {N, G};
  if ((rc = px_resize_like(ctx, out, in)) || (rc = px_resize(ctx, mean_t, 2, ms)) ||
      (rc = px_resize(ctx, rstd_t, 2, ms)))
    return rc;
  int64_t Cg = C / G, cnt = Cg * HxW;
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < G; g++) {
      int64_t base = (n * C + g * Cg) * HxW;
      double mean, rstd;
      if (in->dtype == PX_F32) {
        const float *x = (const float *)in->data + base;
        float m = cnt ? sum_f32(cnt, x) / (float)cnt : NAN;
        float var = cnt ? sqdev_f32(cnt, x, m) / (float)cnt : NAN;
        float rs = 1.0f / sqrtf(var + (float)eps);
        for (int64_t c = 0; c < Cg; c++) {
          int64_t ch = g * Cg + c;
          float wv = w ? (float)px_load_d(w->data, w->dtype, ch) : 1.0f;
          float bv = b ? (float)px_load_d(b->data, b->dtype, ch) : 0.0f;
          float a = rs * wv;
          affine_f32(HxW, x + c * HxW, a, bv - m * a, (float *)out->data + base + c * HxW);
        }
        mean = m;
        rstd = rs;
      } else {
        double s = 0.0, q = 0.0;
        for (int64_t k = 0; k < cnt; k++) s += px_load_d(in->data, in->dtype, base + k);
        mean = cnt ? s / (double)cnt : NAN;
        for (int64_t k = 0; k < cnt; k++) {
          double d = px_load_d(in->data, in->dtype, base + k) - mean;
          q += d * d;
        }
        double var = cnt ? q / (double)cnt : NAN;
        rstd = 1.0 / sqrt(var + eps);
        for (int64_t c = 0; c < Cg; c++) {
          int64_t ch = g * Cg + c;
          double a = rstd * (w ? px_load_d(w->data, w->dtype, ch) : 1.0);
          double sh = (b ? px_load_d(b->data, b->dtype, ch) : 0.0) - mean * a;
          for (int64_t k = 0; k < HxW; k++) {
            int64_t o = base + c * HxW + k;
            px_store_d(out->data, out->dtype, o, px_load_d(in->data, in->dtype, o) * a + sh);
          }
        }
      }
      px_store_d(mean_t->data, mean_t->dtype, n * G + g, mean);
      px_store_d(rstd_t->data, rstd_t->dtype, n * G + g, rstd);
    }
  return 0;
}

/* ======================================================================== */
/* softmax / log_softmax                                                     */
/* ======================================================================== */

/* One float32 row (contiguous, length n; y may be x): softmax or
 * log-softmax with a vectorised exp (Cody-Waite range reduction and a degree-6
 * polynomial, within ~1 ulp of expf; arguments below -87.3 give 0, NaN stays
 * NaN). Stamped out for 16-byte vectors and, with 32-byte ones, for AVX2. */
#define DEFINE_SOFTMAX_ROW(SFX, ATTR, VF, VI, VL, VLOAD, VSTORE)                             \
  ATTR static inline __attribute__((always_inline)) VF vexp_##SFX(VF x) {                  \
    const VF hi = x * 0.0f + 88.3762626647949f;                                             \
    VI over = (VI)(x > hi);                                                                 \
    VF xc = (VF)(((VI)x & ~over) | ((VI)hi & over));                                        \
    VF t = xc * 1.44269504088896341f + 0.5f;                                                \
    VI n = __builtin_convertvector(t, VI);                                                  \
    VF nf = __builtin_convertvector(n, VF);                                                 \
    n += (VI)(nf > t); /* floor: truncation rounded negatives up */                         \
    nf = __builtin_convertvector(n, VF);                                                    \
    VF r = xc - nf * 0.693359375f;                                                          \
    r = r - nf * -2.12194440e-4f;                                                           \
    VF p = r * 1.9875691500e-4f + 1.3981999507e-3f;                                         \
    p = p * r + 8.3334519073e-3f;                                                           \
    p = p * r + 4.1665795894e-2f;                                                           \
    p = p * r + 1.6666665459e-1f;                                                           \
    p = p * r + 5.0000001201e-1f;                                                           \
    p = p * r * r + r + 1.0f;                                                               \
    VI under = (VI)(x < -87.3365447504f);                                                   \
    n = (n + 127) & ~under;                                                                 \
    VF y = p * (VF)(n << 23);                                                               \
    y = (VF)((VI)y & ~under);                                                               \
    VI nan_ = (VI)(x != x);                                                                 \
    return (VF)(((VI)y & ~nan_) | ((VI)x & nan_));                                          \
  }                                                                                         \
  ATTR static void softmax_row_##SFX(int64_t n, const float *x, float *y, bool log) {       \
    /* row maximum, noting any NaN */                                                       \
    float m = x[0];                                                                         \
    bool nan = false;                                                                       \
    int64_t k = 0;                                                                          \
    if (n >= VL) {                                                                          \
      VF mv = VLOAD(x);                                                                     \
      VI nanv = (VI)(mv != mv);                                                             \
      for (k = VL; k + VL <= n; k += VL) {                                                  \
        VF v = VLOAD(x + k);                                                                \
        VI gt = (VI)(v > mv);                                                               \
        nanv |= (VI)(v != v);                                                               \
        mv = (VF)(((VI)v & gt) | ((VI)mv & ~gt));                                           \
      }                                                                                     \
      m = mv[0];                                                                            \
      for (int l = 0; l < VL; l++) {                                                        \
        if (nanv[l]) nan = true;                                                            \
        if (mv[l] > m) m = mv[l];                                                           \
      }                                                                                     \
    }                                                                                       \
    for (; k < n; k++) {                                                                    \
      if (x[k] != x[k]) nan = true;                                                         \
      if (x[k] > m) m = x[k];                                                               \
    }                                                                                       \
    if (nan || m != m) { /* NaN anywhere: everything is NaN */                              \
      for (k = 0; k < n; k++) y[k] = NAN;                                                   \
      return;                                                                               \
    }                                                                                       \
    /* sum of exp(x - m); softmax keeps the exps in y */                                    \
    VF acc = {0};                                                                           \
    for (k = 0; k + VL <= n; k += VL) {                                                     \
      VF e = vexp_##SFX(VLOAD(x + k) - m);                                                  \
      if (!log) VSTORE(y + k, e);                                                           \
      acc += e;                                                                             \
    }                                                                                       \
    float s = 0.0f;                                                                         \
    for (int l = 0; l < VL; l++) s += acc[l];                                               \
    for (; k < n; k++) {                                                                    \
      float e = expf(x[k] - m);                                                             \
      if (!log) y[k] = e;                                                                   \
      s += e;                                                                               \
    }                                                                                       \
    if (log) {                                                                              \
      float c = m + logf(s);                                                                \
      for (k = 0; k + VL <= n; k += VL) VSTORE(y + k, VLOAD(x + k) - c);                    \
      for (; k < n; k++) y[k] = x[k] - c;                                                   \
    } else {                                                                                \
      float inv = 1.0f / s;                                                                 \
      for (k = 0; k + VL <= n; k += VL) VSTORE(y + k, VLOAD(y + k) * inv);                  \
      for (; k < n; k++) y[k] *= inv;                                                       \
    }                                                                                       \
  }

DEFINE_SOFTMAX_ROW(v4, , v4f, v4i, 4, v4_load, v4_store)
#if PX_X86_KERNELS
DEFINE_SOFTMAX_ROW(avx2, __attribute__((target("avx2,fma"))), v8f, v8i, 8, v8_load, v8_store)
#endif

static void softmax_row_f32(int64_t n, const float *x, float *y, bool log) {
#if PX_X86_KERNELS
  if ((__builtin_cpu_init(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    softmax_row_avx2(n, x, y, log);
    return;
  }
#endif
  softmax_row_v4(n, x, y, log);
}

/* Strided rows in double (other dtypes, or float32 along a non-last dim). */
static void softmax_strided(const px_tensor *in, px_tensor *out, int64_t n, int64_t stride,
                            int64_t base, bool take_log) {
  double m = px_load_d(in->data, in->dtype, base);
  for (int64_t k = 1; k < n; k++) {
    double v = px_load_d(in->data, in->dtype, base + k * stride);
    if (v > m || v != v) m = v;
  }
  double s = 0.0;
  for (int64_t k = 0; k < n; k++) s += exp(px_load_d(in->data, in->dtype, base + k * stride) - m);
  double c = m + log(s);
  for (int64_t k = 0; k < n; k++) {
    double v = px_load_d(in->data, in->dtype, base + k * stride);
    px_store_d(out->data, out->dtype, base + k * stride, take_log ? v - c : exp(v - m) / s);
  }
}

static int softmax_common(px_ctx *ctx, px_value *const *args, bool log) {
  px_tensor *in = args[0]->u.t, *out = args[3]->u.t;
  bool half_to_float = args[2]->u.b;
  int rc;
  if ((rc = require_floating(ctx, in, "self"))) return rc;
  if (half_to_float) {
    if (in->dtype != PX_F16 && in->dtype != PX_BF16)
      return px_fail(ctx, "half_to_float needs a float16 or bfloat16 input, got %s",
                     px_dtype_name(in->dtype));
    if ((rc = px_require_dtype(ctx, out, PX_F32, "out"))) return rc;
  } else if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) {
    return rc;
  }
  int dim = px_wrap_dim(ctx, args[1]->u.i, in->dim);
  if (dim < 0) return PYEXEC_ERR_EXECUTION;
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  if ((rc = px_resize_like(ctx, out, in))) return rc;
  if (in->numel == 0) return 0;
  int64_t n = in->dim ? in->sizes[dim] : 1;
  int64_t outer = in->dim ? px_prod(in->sizes, 0, dim) : 1;
  int64_t inner = in->dim ? px_prod(in->sizes, dim + 1, in->dim) : 1;
  bool f32 = in->dtype == PX_F32 && out->dtype == PX_F32;
  if (f32 && inner == 1) {
    for (int64_t r = 0; r < outer; r++)
      softmax_row_f32(n, (const float *)in->data + r * n, (float *)out->data + r * n, log);
    return 0;
  }
  if (f32) {
    /* gather each strided row into scratch, run the row kernel, scatter */
    float *row = px_scratch(ctx, sizeof(float) * (size_t)n);
    if (!row) return PYEXEC_ERR_EXECUTION;
    const float *x = in->data;
    float *y = out->data;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t base = o * n * inner + i;
        for (int64_t k = 0; k < n; k++) row[k] = x[base + k * inner];
        softmax_row_f32(n, row, row, log);
        for (int64_t k = 0; k < n; k++) y[base + k * inner] = row[k];
      }
    return 0;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) softmax_strided(in, out, n, inner, o * n * inner + i, log);
  return 0;
}

/* aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) */
static int k_softmax(px_ctx *ctx, px_value *const *args) { return softmax_common(ctx, args, false); }

/* aten::_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) */
static int k_log_softmax(px_ctx *ctx, px_value *const *args) {
  return softmax_common(ctx, args, true);
}

const px_kernel_def px_kernels_norm[] = {
    {"aten::native_layer_norm.out", "TLttD|TTTX", k_native_layer_norm},
    {"aten::_native_batch_norm_legit_no_training.out", "TttTTDD|TTTX", k_batch_norm_no_training},
    {"aten::_native_batch_norm_legit.no_stats_out", "TttBDD|TTTX", k_batch_norm_no_stats},
    {"aten::native_group_norm.out", "TttIIIID|TTTX", k_native_group_norm},
    {"aten::_softmax.out", "TIBT|T", k_softmax},
    {"aten::_log_softmax.out", "TIBT|T", k_log_softmax},
    {NULL, NULL, NULL},
};
