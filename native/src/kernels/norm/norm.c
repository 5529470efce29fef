/*
 * norm.c - normalisation kernels: layer norm, batch norm (inference,
 * training statistics without running stats, and training with running
 * statistics) and group norm. softmax is softmax.c.
 *
 * float32 has its own loops (vector extensions); the other floating dtypes
 * are computed in double through px_load_d / px_store_d, except float16 /
 * bfloat16 batch norm in inference, which rounds each step to the 16-bit
 * type as ExecuTorch's kernel does (bn16_*).
 */
#include <math.h>

#include "core/parallel.h"
#include "kernels/common.h"

/* 16-byte vectors: native on every x86-64 and AArch64 target (32-byte GCC
 * vectors would round-trip through the stack without AVX). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
#define v4_load(p) (*(const v4f_u *)(p))
#define v4_store(p, v) (*(v4f_u *)(p) = (v))

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
typedef struct layer_norm_job {
  const px_tensor *in, *w, *b;
  px_tensor *out, *mean_t, *rstd_t;
  double eps;
  int64_t N;
  float *wf, *bf; /* float16 / bfloat16: weight and bias widened, or NULL */
  float *tmp;     /* float16 / bfloat16: N floats per thread */
} layer_norm_job;

/* Rows [r0, r1) of layer_norm: each row whole on one thread. */
static void layer_norm_rows(void *arg, int64_t r0, int64_t r1, int tid) {
  const layer_norm_job *J = arg;
  const px_tensor *in = J->in, *w = J->w, *b = J->b;
  px_tensor *out = J->out, *mean_t = J->mean_t, *rstd_t = J->rstd_t;
  const double eps = J->eps;
  const int64_t N = J->N;
  for (int64_t r = r0; r < r1; r++) {
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
    } else if (J->tmp) {
      /* float16 / bfloat16: the row widened, the float32 path (statistics
       * in float32, as ExecuTorch and torch compute them), rounded once */
      float *x = J->tmp + (int64_t)tid * N;
      const size_t es = px_elsize(in->dtype);
      px_convert(x, PX_F32, (const char *)in->data + (size_t)(r * N) * es, in->dtype, N);
      float m = sum_f32(N, x) / (float)N;
      float var = sqdev_f32(N, x, m) / (float)N;
      float rs = 1.0f / sqrtf(var + (float)eps);
      norm_row_f32(N, x, rs, -m * rs, J->wf, J->bf, x);
      px_convert((char *)out->data + (size_t)(r * N) * es, out->dtype, x, PX_F32, N);
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
}

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
  layer_norm_job J = {in, w, b, out, mean_t, rstd_t, eps, N, NULL, NULL, NULL};
  if ((in->dtype == PX_F16 || in->dtype == PX_BF16) && N > 0) {
    J.tmp = px_scratch(ctx, sizeof(float) * (size_t)N * (size_t)px_parallel_threads());
    J.wf = w ? px_scratch(ctx, sizeof(float) * (size_t)N) : NULL;
    J.bf = b ? px_scratch(ctx, sizeof(float) * (size_t)N) : NULL;
    if (!J.tmp || (w && !J.wf) || (b && !J.bf)) return PYEXEC_ERR_EXECUTION;
    if (w) px_convert(J.wf, PX_F32, w->data, w->dtype, N);
    if (b) px_convert(J.bf, PX_F32, b->data, b->dtype, N);
  }
  px_parallel_for(M, 1, in->numel * 8, layer_norm_rows, &J);
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
typedef struct affine_job {
  const px_tensor *in;
  px_tensor *out;
  int64_t C, inner;
  const double *scale, *shift;
} affine_job;

/* Planes [u0, u1) of N x C (u = n * C + c). */
static void channel_affine_planes(void *arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const affine_job *J = arg;
  const px_tensor *in = J->in;
  px_tensor *out = J->out;
  const int64_t C = J->C, inner = J->inner;
  const double *scale = J->scale, *shift = J->shift;
  for (int64_t u = u0; u < u1; u++) {
    {
      int64_t c = u % C, o = u * inner;
      if (in->dtype == PX_F32 && out->dtype == PX_F32)
        affine_f32(inner, (const float *)in->data + o, (float)scale[c], (float)shift[c],
                   (float *)out->data + o);
      else
        for (int64_t k = 0; k < inner; k++)
          px_store_d(out->data, out->dtype, o + k,
                     px_load_d(in->data, in->dtype, o + k) * scale[c] + shift[c]);
    }
  }
}

static void apply_channel_affine(const px_tensor *in, px_tensor *out, int64_t N, int64_t C,
                                 int64_t inner, const double *scale, const double *shift) {
  affine_job J = {in, out, C, inner, scale, shift};
  px_parallel_for(N * C, 1, N * C * inner * 8, channel_affine_planes, &J);
}

/* float16 / bfloat16, when the weight, bias and statistics have the input's
 * dtype: ExecuTorch's batch norm computes out = (x - mean) * invstd * weight
 * + bias in the 16-bit type, each operation rounded (common.h's px_r16),
 * with invstd = 1 / sqrt(var + eps) in double, then rounded. */
static bool bn16_applies(const px_tensor *in, const px_tensor *const *vecs, int n) {
  if (!px_is16(in->dtype)) return false;
  for (int k = 0; k < n; k++)
    if (vecs[k] && vecs[k]->dtype != in->dtype) return false;
  return true;
}

typedef struct bn16_job {
  const px_tensor *in, *w, *b;
  px_tensor *out;
  int64_t C, inner;
  const float *mean, *invstd;
} bn16_job;

/* Planes [u0, u1) of N x C (u = n * C + c). */
static void bn16_planes(void *arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const bn16_job *J = arg;
  const int dt = J->in->dtype;
  for (int64_t u = u0; u < u1; u++) {
    int64_t c = u % J->C, o = u * J->inner;
    float m = J->mean[c], is = J->invstd[c];
    float wv = J->w ? px_ld16(J->w->data, dt, c) : 1.0f;
    float bv = J->b ? px_ld16(J->b->data, dt, c) : 0.0f;
    for (int64_t k = 0; k < J->inner; k++) {
      float v = px_r16(dt, px_ld16(J->in->data, dt, o + k) - m);
      v = px_r16(dt, v * is);
      v = px_r16(dt, v * wv);
      px_st16(J->out->data, dt, o + k, v + bv);
    }
  }
}

static void bn16_apply(const px_tensor *in, px_tensor *out, const px_tensor *w, const px_tensor *b,
                       int64_t N, int64_t C, int64_t inner, const float *mean, const float *invstd) {
  bn16_job J = {in, w, b, out, C, inner, mean, invstd};
  px_parallel_for(N * C, 1, N * C * inner * 4, bn16_planes, &J);
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
  int64_t N = in->sizes[0], inner = px_prod(in->sizes, 2, in->dim);
  const px_tensor *vecs[4] = {w, b, rm, rv};
  if (bn16_applies(in, vecs, 4)) {
    float *mean = px_scratch(ctx, sizeof(float) * (size_t)(2 * C + 1));
    if (!mean) return PYEXEC_ERR_EXECUTION;
    float *invstd = mean + C;
    for (int64_t c = 0; c < C; c++) {
      mean[c] = px_ld16(rm->data, rm->dtype, c);
      invstd[c] = px_r16(in->dtype, (float)(1.0 / sqrt((double)px_ld16(rv->data, rv->dtype, c) + eps)));
    }
    bn16_apply(in, out, w, b, N, C, inner, mean, invstd);
    return 0;
  }
  double *scale = px_scratch(ctx, sizeof(double) * (size_t)(2 * C + 1));
  if (!scale) return PYEXEC_ERR_EXECUTION;
  double *shift = scale + C;
  for (int64_t c = 0; c < C; c++) {
    double inv = 1.0 / sqrt(px_load_d(rv->data, rv->dtype, c) + eps);
    double a = inv * (w ? px_load_d(w->data, w->dtype, c) : 1.0);
    scale[c] = a;
    shift[c] = (b ? px_load_d(b->data, b->dtype, c) : 0.0) - px_load_d(rm->data, rm->dtype, c) * a;
  }
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
typedef struct group_norm_job {
  const px_tensor *in, *w, *b;
  px_tensor *out, *mean_t, *rstd_t;
  double eps;
  int64_t C, HxW, G;
} group_norm_job;

/* Groups [u0, u1) of N x G (u = n * G + g), each whole on one thread. */
static void group_norm_groups(void *arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const group_norm_job *J = arg;
  const px_tensor *in = J->in, *w = J->w, *b = J->b;
  px_tensor *out = J->out, *mean_t = J->mean_t, *rstd_t = J->rstd_t;
  const double eps = J->eps;
  const int64_t C = J->C, HxW = J->HxW, G = J->G, Cg = C / G, cnt = Cg * HxW;
  for (int64_t u = u0; u < u1; u++) {
    int64_t n = u / G, g = u % G;
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
}

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
  group_norm_job J = {in, w, b, out, mean_t, rstd_t, eps, C, HxW, G};
  px_parallel_for(N * G, 1, in->numel * 8, group_norm_groups, &J);
  return 0;
}

/* ======================================================================== */
/* softmax / log_softmax                                                     */

/* ---- batch norm with running statistics (_native_batch_norm_legit.out) ---- */

static int channel_vec(px_ctx *ctx, const px_tensor *t, int64_t C, const char *what) {
  if (t->dim != 1 || t->sizes[0] != C)
    return fail_shape(ctx, what, t, "expected a 1-D tensor with one value per channel");
  return require_floating(ctx, t, what);
}

/* aten::_native_batch_norm_legit.out(Tensor input, Tensor? weight,
 *   Tensor? bias, Tensor(a!) running_mean, Tensor(b!) running_var,
 *   bool training, float momentum, float eps, *, Tensor(d!) out,
 *   Tensor(e!) save_mean, Tensor(f!) save_invstd)
 * training: normalises with the batch statistics (biased variance), writes
 * them to save_mean / save_invstd and updates running_mean / running_var in
 * place (the unbiased variance goes into running_var). Otherwise normalises
 * with the running statistics and save_mean / save_invstd become empty. */
static int k_batch_norm_legit(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t;
  px_tensor *w = args[1]->tag == PX_V_NONE ? NULL : args[1]->u.t;
  px_tensor *b = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  px_tensor *rm = args[3]->u.t, *rv = args[4]->u.t;
  bool training = args[5]->u.b;
  double momentum = arg_d(args[6]), eps = arg_d(args[7]);
  px_tensor *out = args[8]->u.t, *sm = args[9]->u.t, *si = args[10]->u.t;
  int rc;
  if (in->dim < 2) return fail_shape(ctx, "input", in, "expected at least 2 dims (N, C, ...)");
  if ((rc = require_floating(ctx, in, "input")) || (rc = px_require_same_dtype(ctx, out, "out", in, "input")))
    return rc;
  int64_t C = in->sizes[1];
  if ((w && (rc = channel_vec(ctx, w, C, "weight"))) || (b && (rc = channel_vec(ctx, b, C, "bias"))) ||
      (rc = channel_vec(ctx, rm, C, "running_mean")) || (rc = channel_vec(ctx, rv, C, "running_var")) ||
      (rc = require_floating(ctx, sm, "save_mean")) || (rc = require_floating(ctx, si, "save_invstd")))
    return rc;
  if (sm->dim != 1 || si->dim != 1)
    return px_fail(ctx, "save_mean and save_invstd must be 1-D, got %d and %d dims", sm->dim, si->dim);
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t zero = 0;
  if ((rc = px_resize_like(ctx, out, in)) || (rc = px_resize(ctx, sm, 1, training ? &C : &zero)) ||
      (rc = px_resize(ctx, si, 1, training ? &C : &zero)))
    return rc;
  int64_t N = in->sizes[0], inner = px_prod(in->sizes, 2, in->dim), cnt = N * inner;
  double *alpha = px_scratch(ctx, sizeof(double) * (size_t)(2 * C + 1));
  if (!alpha) return PYEXEC_ERR_EXECUTION;
  double *beta = alpha + C;
  for (int64_t c = 0; c < C; c++) {
    double mean, invstd;
    if (training) {
      double s = 0.0, q = 0.0;
      for (int64_t n = 0; n < N; n++) {
        int64_t o = (n * C + c) * inner;
        if (in->dtype == PX_F32) {
          const float *x = (const float *)in->data + o;
          for (int64_t k = 0; k < inner; k++) s += x[k];
        } else {
          for (int64_t k = 0; k < inner; k++) s += px_load_d(in->data, in->dtype, o + k);
        }
      }
      mean = cnt ? s / (double)cnt : NAN;
      for (int64_t n = 0; n < N; n++) {
        int64_t o = (n * C + c) * inner;
        if (in->dtype == PX_F32) {
          const float *x = (const float *)in->data + o;
          for (int64_t k = 0; k < inner; k++) {
            double d = x[k] - mean;
            q += d * d;
          }
        } else {
          for (int64_t k = 0; k < inner; k++) {
            double d = px_load_d(in->data, in->dtype, o + k) - mean;
            q += d * d;
          }
        }
      }
      double var = cnt ? q / (double)cnt : NAN;
      invstd = 1.0 / sqrt(var + eps);
      px_store_d(sm->data, sm->dtype, c, mean);
      px_store_d(si->data, si->dtype, c, invstd);
      double unbiased = q / (double)(cnt - 1);
      px_store_d(rm->data, rm->dtype, c,
                 momentum * mean + (1.0 - momentum) * px_load_d(rm->data, rm->dtype, c));
      px_store_d(rv->data, rv->dtype, c,
                 momentum * unbiased + (1.0 - momentum) * px_load_d(rv->data, rv->dtype, c));
    } else {
      mean = px_load_d(rm->data, rm->dtype, c);
      invstd = 1.0 / sqrt(px_load_d(rv->data, rv->dtype, c) + eps);
    }
    double a = invstd * (w ? px_load_d(w->data, w->dtype, c) : 1.0);
    alpha[c] = a;
    beta[c] = (b ? px_load_d(b->data, b->dtype, c) : 0.0) - mean * a;
  }
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      int64_t o = (n * C + c) * inner;
      if (in->dtype == PX_F32) {
        const float *x = (const float *)in->data + o;
        float *y = (float *)out->data + o, a = (float)alpha[c], bb = (float)beta[c];
        for (int64_t k = 0; k < inner; k++) y[k] = x[k] * a + bb;
      } else {
        for (int64_t k = 0; k < inner; k++)
          px_store_d(out->data, out->dtype, o + k,
                     px_load_d(in->data, in->dtype, o + k) * alpha[c] + beta[c]);
      }
    }
  return 0;
}

/* ======================================================================== */

/* running_mean / running_var of _native_batch_norm_legit.out are written in
 * place but sit among the schema arguments, before '|': the signature
 * grammar has no way to mark them; being 1-D they are always row-major, so
 * the executor never substitutes copies for them. */

const px_kernel_def px_kernels_norm[] = {
    {"aten::native_layer_norm.out", "TLttD|TTTX", k_native_layer_norm},
    {"aten::_native_batch_norm_legit_no_training.out", "TttTTDD|TTTX", k_batch_norm_no_training},
    {"aten::_native_batch_norm_legit.no_stats_out", "TttBDD|TTTX", k_batch_norm_no_stats},
    {"aten::_native_batch_norm_legit.out", "TttTTBDD|TTTX", k_batch_norm_legit},
    {"aten::native_group_norm.out", "TttIIIID|TTTX", k_native_group_norm},
    {NULL, NULL, NULL},
};
