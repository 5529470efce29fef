/*
 * activation.c - activation functions: relu, sigmoid, silu, gelu (exact and
 * tanh), hardswish, hardsigmoid, leaky_relu, elu, logit and glu. hardtanh is a
 * clamp (select.c). The machinery is ew.h.
 */
#include "core/cpu.h"
#include "kernels/elementwise/ew.h"
#include "kernels/elementwise/flat.h"
#include "kernels/elementwise/math_neon.h" /* AArch64: contiguous float32 rows in NEON */

static const double k_sqrt1_2 = 0.70710678118654752440;
static const double k_sqrt_2_pi = 0.79788456080286535588; /* sqrt(2 / pi) */

static FORCE_INLINE float gelu_f(float x) {
  return 0.5f * x * (1.0f + verff(x * (float)k_sqrt1_2));
}
static inline double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x * k_sqrt1_2)); }
static FORCE_INLINE float gelu_tanh_f(float x) {
  float inner = (float)k_sqrt_2_pi * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + vtanhf(inner));
}
static inline double gelu_tanh_d(double x) {
  double inner = k_sqrt_2_pi * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + tanh(inner));
}
#define GELU(x) _Generic((x), float: gelu_f, default: gelu_d)(x)
#define GELU_TANH(x) _Generic((x), float: gelu_tanh_f, default: gelu_tanh_d)(x)

/* ---- loops ---------------------------------------------------------------- */

/* sigmoid, silu and gelu on contiguous float32 rows in 512-bit vectors where
 * the CPU has them (EfficientNet's SiLU, exported as sigmoid and mul, and
 * MaxViT's / ConvNeXt's GELU spent most of their elementwise time in the
 * 256-bit loops). The same expressions element by element, so the bits are
 * the 256-bit loops' bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#define ROW512(NAME, EXPR)                                                                    \
  __attribute__((target("avx512f"))) static void NAME(int64_t n, const float *xs, float *ys) { \
    for (int64_t k = 0; k < n; k++) {                                                         \
      const float x = xs[k];                                                                  \
      ys[k] = (EXPR);                                                                         \
    }                                                                                         \
  }
/* sigmoid, or x * sigmoid(x) (px_f32_mul_sigmoid_inplace, a convolution's
 * fused SiLU) when times_x: one loop for both (the wheel's library is
 * size-bound), the factor 1 leaving the sigmoid's bits. */
__attribute__((target("avx512f"), noinline)) static void sigmoid_times_row512(int64_t n, const float *xs,
                                                                              float *ys, bool times_x) {
  const uint32_t keep = times_x ? 0xffffffffu : 0u, one = f_bits(1.0f) & ~keep;
  for (int64_t k = 0; k < n; k++) {
    const float x = xs[k];
    ys[k] = f_from_bits((f_bits(x) & keep) | one) * vsigmoidf(x);
  }
}
static void sigmoid_row512(int64_t n, const float *xs, float *ys) { sigmoid_times_row512(n, xs, ys, false); }
ROW512(silu_row512, x / (1.0f + vexpf(-x)))
ROW512(gelu_row512, gelu_f(x))
#define X86_512_ROW(FN)                                                              \
  if (sizeof(T) == sizeof(float) && sa == 1 && so == 1 && px_cpu()->avx512f) {     \
    FN(n, (const float *)(const void *)A, (float *)(void *)O);                      \
    return;                                                                          \
  }
#else
#define X86_512_ROW(FN)
#endif

UN_F(relu, , x < 0 ? (T)0 : x)
UN_I(relu, , x < 0 ? (T)0 : x)
OPS_FI(relu)
UN_F(sigmoid, PX_NEON_UN_ROW(px_neon_sigmoid_f32) X86_512_ROW(sigmoid_row512), SIGMOIDV(x))
OPS_F(sigmoid)
UN_F(silu, PX_NEON_UN_ROW(px_neon_silu_f32) X86_512_ROW(silu_row512), x / ((T)1 + EXPV(-x)))
OPS_F(silu)
UN_F(gelu, PX_NEON_UN_ROW(px_neon_gelu_f32) X86_512_ROW(gelu_row512), GELU(x))
OPS_F(gelu)
UN_F(gelu_tanh, PX_NEON_UN_ROW(px_neon_gelu_tanh_f32), GELU_TANH(x))
OPS_F(gelu_tanh)
/* float16 / bfloat16: the same functions written so that nothing cancels
 * for x < 0, where gelu(x) is tiny and 1 + erf(x / sqrt 2) (or 1 + tanh)
 * loses the bits the 16-bit result keeps: x / 2 * erfc(-x / sqrt 2) with
 * libm's erfcf, and x / (1 + exp(-2 inner)). */
static inline float gelu16_f(float x) { return 0.5f * x * erfcf(-x * (float)k_sqrt1_2); }
static inline float gelu_tanh16_f(float x) {
  float inner = (float)k_sqrt_2_pi * (x + 0.044715f * x * x * x);
  return x / (1.0f + expf(-2.0f * inner));
}
/* one call of libm's erfcf / expf an element: an AVX2 clone would gain nothing */
UN1(gelu16_f32, float, uint32_t, float, , gelu16_f(x))
UN1(gelu_tanh16_f32, float, uint32_t, float, , gelu_tanh16_f(x))
OPS(t_gelu16, gelu16_f32, gelu_f64, NULL, NULL, NULL)
OPS(t_gelu_tanh16, gelu_tanh16_f32, gelu_tanh_f64, NULL, NULL, NULL)
UN_F(hardswish, , x * CLAMPP(x + (T)3, (T)0, (T)6) / (T)6)
OPS_F(hardswish)
UN_F(hardsigmoid, , CLAMPP(x + (T)3, (T)0, (T)6) / (T)6)
OPS_F(hardsigmoid)
UN_F(leaky_relu, const T slope = PARAM(0), x > 0 ? x : x * slope)
OPS_F(leaky_relu)

/* elu: d[0] = alpha * scale, d[1] = scale, d[2] = input_scale. */
UN_F(elu, const T negc = PARAM(0); const T posc = PARAM(1); const T insc = PARAM(2),
     x <= 0 ? M1(expm1, x * insc) * negc : x * posc)
OPS_F(elu)
UN_F(logit, , M1(log, x / ((T)1 - x)))
OPS_F(logit)

/* logit with eps: d[0] = eps, d[1] = 1 - eps. */
UN_F(logit_eps, const T lo = PARAM(0); const T hi = PARAM(1),
     M1(log, (x < lo ? lo : (x > hi ? hi : x)) / ((T)1 - (x < lo ? lo : (x > hi ? hi : x)))))
OPS_F(logit_eps)

/* ---- kernels ---------------------------------------------------------------- */

K_UN(k_relu_out, t_relu, 0)
K_UN(k_sigmoid_out, t_sigmoid, FL_FLOAT)
K_UN(k_silu_out, t_silu, FL_FLOAT)
K_UN(k_hardswish_out, t_hardswish, FL_FLOAT)
K_UN(k_hardsigmoid_out, t_hardsigmoid, FL_FLOAT)

/* The 16-bit gelus' results, a table per function and dtype (each libm
 * call costs ~7 ns; a 16-bit input has only 65536 values). */
static uint16_t *_Atomic gelu16_tables[2][2]; /* [tanh][bfloat16] */

static int k_gelu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  const ew_ops *ops;
  bool is16 = ARGT(0)->dtype == PX_F16 || ARGT(0)->dtype == PX_BF16, tanh_form;
  if (str_is(args[1], "none"))
    ops = is16 ? &t_gelu16 : &t_gelu, tanh_form = false;
  else if (str_is(args[1], "tanh"))
    ops = is16 ? &t_gelu_tanh16 : &t_gelu_tanh, tanh_form = true;
  else
    return px_fail(ctx, "approximate must be 'none' or 'tanh', got '%.*s'",
                   (int)args[1]->u.str.n, args[1]->u.str.p);
  if (is16)
    return px_ew_un_table16(ctx, ops, FL_FLOAT, &gelu16_tables[tanh_form][ARGT(0)->dtype == PX_BF16], ARGT(0),
                            ARGT(2), &p);
  return px_ew_un(ctx, ops, FL_FLOAT, ARGT(0), ARGT(2), &p);
}

static int k_leaky_relu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  p.d[0] = px_scalar_d(args[1]);
  /* ExecuTorch casts the slope to a float16 / bfloat16 input's own type */
  int dt = ARGT(0)->dtype;
  if (dt == PX_F16 || dt == PX_BF16) p.d[0] = r16((float)p.d[0], dt);
  return px_ew_un(ctx, &t_leaky_relu, FL_FLOAT, ARGT(0), ARGT(2), &p);
}

static int k_elu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  double alpha = px_scalar_d(args[1]), scale = px_scalar_d(args[2]);
  p.d[0] = alpha * scale;
  p.d[1] = scale;
  p.d[2] = px_scalar_d(args[3]);
  return px_ew_un(ctx, &t_elu, FL_FLOAT, ARGT(0), ARGT(4), &p);
}

static int k_logit_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  if (args[1]->tag == PX_V_NONE || px_scalar_d(args[1]) < 0)
    return px_ew_un(ctx, &t_logit, FL_FLOAT, ARGT(0), ARGT(2), &p);
  p.d[0] = px_scalar_d(args[1]);
  p.d[1] = 1.0 - p.d[0];
  return px_ew_un(ctx, &t_logit_eps, FL_FLOAT, ARGT(0), ARGT(2), &p);
}

/* glu: the first half along dim times the sigmoid of the second half. */
BIN_F(glu, , x / ((T)1 + EXPV(-y)))
OPS_F(glu)
/* float16 / bfloat16 (P->i[0] = the dtype) as ExecuTorch computes them:
 * a * (1 / (1 + exp(-b))) with every operation rounded to the 16-bit type
 * and libm's expf (what c10's std::exp of a Half calls). */
BIN(glu16_f32, float, uint32_t, float, const int64_t dt16 = P->i[0],
    r16(x * r16(1.0f / r16(1.0f + r16(expf(-y), dt16), dt16), dt16), dt16))
OPS(t_glu16, glu16_f32, glu_f64, NULL, NULL, NULL)

static int k_glu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *self = ARGT(0), *out = ARGT(2);
  if (self->dim == 0) return px_fail(ctx, "glu does not support 0-dimensional tensors");
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (self->sizes[d] % 2 != 0)
    return px_fail(ctx, "halving dimension must be even, but dimension %d is size %lld", d,
                   (long long)self->sizes[d]);
  px_tensor va = *self, vb;
  va.sizes[d] = self->sizes[d] / 2;
  va.numel = self->numel / 2;
  va.contiguous = 0; /* a view: strides are self's */
  vb = va;
  vb.data = (char *)self->data + (size_t)(va.sizes[d] * self->strides[d]) * px_elsize(self->dtype);
  if (px_resize(ctx, out, va.dim, va.sizes)) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[2] = {&va, &vb};
  bool is16 = self->dtype == PX_F16 || self->dtype == PX_BF16;
  p.i[0] = self->dtype;
  return px_ew_apply(ctx, is16 ? &t_glu16 : &t_glu, FL_FLOAT, self->dtype, 2, ins, out, &p);
}

const px_kernel_def px_kernels_activation[] = {
    {"aten::relu.out", "TT|T", k_relu_out},
    {"aten::sigmoid.out", "TT|T", k_sigmoid_out},
    {"aten::gelu.out", "TRT|T", k_gelu_out},
    {"aten::silu.out", "TT|T", k_silu_out},
    {"aten::hardswish.out", "TT|T", k_hardswish_out},
    {"aten::hardsigmoid.out", "TT|T", k_hardsigmoid_out},
    {"aten::leaky_relu.out", "TST|T", k_leaky_relu_out},
    {"aten::elu.out", "TSSST|T", k_elu_out},
    {"aten::logit.out", "TdT|T", k_logit_out},
    {"aten::glu.out", "TIT|T", k_glu_out},
    {NULL, NULL, NULL},
};

/* flat.h's entry points over these loops. */
void px_f32_sigmoid(int64_t n, const float *x, float *y) { ew_run_un_f32(sigmoid_f32, n, x, y); }
void px_f32_gelu(int64_t n, const float *x, float *y) { ew_run_un_f32(gelu_f32, n, x, y); }
static void mul_rows(int64_t n, float *restrict y, const float *restrict s) {
  for (int64_t k = 0; k < n; k++) y[k] *= s[k];
}
void px_f32_mul_sigmoid_inplace(int64_t n, float *y) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
  if (px_cpu()->avx512f) {
    sigmoid_times_row512(n, y, y, true);
    return;
  }
#endif
  _Alignas(64) float s[512];
  for (int64_t b = 0; b < n; b += 512) {
    const int64_t m = n - b < 512 ? n - b : 512;
    ew_run_un_f32(sigmoid_f32, m, y + b, s);
    mul_rows(m, y + b, s);
  }
}
