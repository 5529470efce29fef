/*
 * softmax.c - _softmax and _log_softmax along one dim: contiguous float32
 * rows with a vectorised exp (16-byte vectors, and AVX2 chosen at run time),
 * float16 / bfloat16 log_softmax along the last dim as ExecuTorch rounds
 * it, everything else in double through px_load_d / px_store_d.
 */
#include <math.h>

#include "core/parallel.h"
#include "kernels/common.h"
#include "kernels/norm/softmax.h"
#if defined(__aarch64__)
#include "kernels/elementwise/math_neon.h" /* NEON rows with FMA (elementwise/activation_neon.c) */
#endif

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

/* One float32 row (contiguous, length n; y may be x): softmax or
 * log-softmax with a vectorised exp (Cody-Waite range reduction and a degree-6
 * polynomial, within ~1 ulp of expf; arguments below -87.3 give 0, NaN stays
 * NaN). Stamped out for 16-byte vectors and, with 32-byte ones, for AVX2. */
#define DEFINE_SOFTMAX_ROW(SFX, ATTR, VF, VI, VL, VLOAD, VSTORE)                             \
  ATTR static inline __attribute__((always_inline)) VF vexp_##SFX(VF x) {                  \
    const VF zero = {0};                                                                    \
    const VF hi = zero + 88.3762626647949f, lo = zero - 88.0f;                              \
    VI over = (VI)(x > hi);                                                                 \
    VF xc = (VF)(((VI)x & ~over) | ((VI)hi & over));                                        \
    /* below -88 (and NaN, -inf) the result is masked below; clamped, the */                \
    /* integer steps cannot overflow (-inf made INT_MIN - 1 before) */                      \
    VI above = (VI)(xc > lo);                                                               \
    xc = (VF)(((VI)xc & above) | ((VI)lo & ~above));                                        \
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
#if defined(__aarch64__) && PX_NEON_MATH
  px_neon_softmax_row_f32(n, x, y, log);
  return;
#endif
  softmax_row_v4(n, x, y, log);
}

void px_f32_softmax_row(int64_t n, const float *x, float *y) { softmax_row_f32(n, x, y, false); }

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

/* log_softmax of a contiguous float16 / bfloat16 row into its own dtype, as
 * ExecuTorch's kernel (ATen's vectorised one) computes it: the sum of
 * exp(x - max) in float rounded to the 16-bit type, its log rounded too,
 * then (x - max) - log(sum) in float, rounded once. */
static void log_softmax16_row(const px_tensor *in, px_tensor *out, int64_t n, int64_t base) {
  const int dt = in->dtype;
  float m = px_ld16(in->data, dt, base);
  for (int64_t k = 1; k < n; k++) {
    float v = px_ld16(in->data, dt, base + k);
    if (v > m || v != v) m = v;
  }
  float s = 0.0f;
  for (int64_t k = 0; k < n; k++) s += expf(px_ld16(in->data, dt, base + k) - m);
  float l = px_r16(dt, logf(px_r16(dt, s)));
  for (int64_t k = 0; k < n; k++) px_st16(out->data, dt, base + k, (px_ld16(in->data, dt, base + k) - m) - l);
}

typedef struct softmax_job {
  const px_tensor *in;
  px_tensor *out;
  int64_t n, inner;
  bool log, f32;
  bool h16;       /* softmax of float16 / bfloat16 into its own dtype or float32 */
  float *scratch; /* n floats per thread: strided float32 rows, 16-bit rows widened */
} softmax_job;

/* Rows [r0, r1) of outer x inner (row r = o * inner + i). */
static void softmax_rows(void *arg, int64_t r0, int64_t r1, int tid) {
  const softmax_job *J = arg;
  const int64_t n = J->n, inner = J->inner;
  for (int64_t r = r0; r < r1; r++) {
    int64_t o = r / inner, i = r % inner, base = o * n * inner + i;
    if (J->f32 && inner == 1) {
      softmax_row_f32(n, (const float *)J->in->data + base, (float *)J->out->data + base, J->log);
    } else if (J->f32) {
      /* gather the strided row, run the row kernel, scatter */
      float *row = J->scratch + (size_t)tid * (size_t)n;
      const float *x = J->in->data;
      float *y = J->out->data;
      for (int64_t k = 0; k < n; k++) row[k] = x[base + k * inner];
      softmax_row_f32(n, row, row, J->log);
      for (int64_t k = 0; k < n; k++) y[base + k * inner] = row[k];
    } else if (J->h16) {
      /* widened to float32, the float32 row kernel, rounded once (as
       * ExecuTorch and torch compute it: in float32) */
      float *row = J->scratch + (size_t)tid * (size_t)n;
      const int dt = J->in->dtype, odt = J->out->dtype;
      if (inner == 1)
        px_convert(row, PX_F32, (const uint16_t *)J->in->data + base, dt, n);
      else
        for (int64_t k = 0; k < n; k++) row[k] = px_ld16(J->in->data, dt, base + k * inner);
      softmax_row_f32(n, row, row, false);
      if (inner == 1)
        px_convert((char *)J->out->data + (size_t)base * px_elsize(odt), odt, row, PX_F32, n);
      else if (odt == PX_F32)
        for (int64_t k = 0; k < n; k++) ((float *)J->out->data)[base + k * inner] = row[k];
      else
        for (int64_t k = 0; k < n; k++) px_st16(J->out->data, odt, base + k * inner, row[k]);
    } else if (J->log && inner == 1 && px_is16(J->in->dtype) && J->out->dtype == J->in->dtype) {
      log_softmax16_row(J->in, J->out, n, base);
    } else {
      softmax_strided(J->in, J->out, n, inner, base, J->log);
    }
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
  /* Rows (outer x inner of them) are shared out over the thread pool; each
   * row is computed whole by one thread, so the split changes no bit. */
  const bool h16 = !log && px_is16(in->dtype) && (out->dtype == in->dtype || out->dtype == PX_F32);
  softmax_job J = {.in = in, .out = out, .n = n, .inner = inner, .log = log, .f32 = f32, .h16 = h16};
  if ((f32 && inner != 1) || h16) {
    /* strided float32 rows are gathered into per-thread scratch */
    J.scratch = px_scratch(ctx, sizeof(float) * (size_t)n * (size_t)px_parallel_threads());
    if (!J.scratch) return PYEXEC_ERR_EXECUTION;
  }
  px_parallel_for(outer * inner, 1, in->numel * (f32 || h16 ? 16 : 64), softmax_rows, &J);
  return 0;
}

/* aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) */
static int k_softmax(px_ctx *ctx, px_value *const *args) { return softmax_common(ctx, args, false); }

/* aten::_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) */
static int k_log_softmax(px_ctx *ctx, px_value *const *args) {
  return softmax_common(ctx, args, true);
}

const px_kernel_def px_kernels_softmax[] = {
    {"aten::_softmax.out", "TIBT|T", k_softmax},
    {"aten::_log_softmax.out", "TIBT|T", k_log_softmax},
    {NULL, NULL, NULL},
};
