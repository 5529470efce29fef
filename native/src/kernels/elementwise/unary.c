/*
 * unary.c - elementwise kernels of one operand: neg, abs, sign, rounding,
 * isnan / isinf, exp / log / trigonometric and hyperbolic functions, erf,
 * reciprocal and rsqrt; pow with a scalar exponent (with torch's special
 * exponents); fill and scalar_tensor. Activations are activation.c. The
 * machinery is ew.h.
 */
#include "kernels/elementwise/ew.h"
#include "kernels/elementwise/flat.h"
#include "kernels/elementwise/math_neon.h" /* AArch64: contiguous float32 rows in NEON */

/* ---- loops ---------------------------------------------------------------- */

UN_F(copy, , x)
UN_I(copy, , x)
UN_B(copy, , x)
OPS_FIB(copy)
UN_F(neg, , -x)
UN_I(neg, , (T)(0 - (U)x))
OPS_FI(neg)
UN_F(abs, , M1(fabs, x))
UN_I(abs, , x < 0 ? (T)(0 - (U)x) : x)
OPS_FI(abs)
UN_F(sign, , (T)((x > 0) - (x < 0)))
UN_I(sign, , (T)((x > 0) - (x < 0)))
OPS_FI(sign)
UN_F(floor, , M1(floor, x))
UN_F(ceil, , M1(ceil, x))
UN_F(round, , M1(nearbyint, x))
UN_F(trunc, , M1(trunc, x))
OPS(t_floor, floor_f32, floor_f64, copy_i32, copy_i64, copy_b)
OPS(t_ceil, ceil_f32, ceil_f64, copy_i32, copy_i64, copy_b)
OPS(t_round, round_f32, round_f64, copy_i32, copy_i64, copy_b)
OPS(t_trunc, trunc_f32, trunc_f64, copy_i32, copy_i64, copy_b)
UN_F_OB(isnan, __builtin_isnan(x))
UN_I_OB(isnan, 0 * x)
OPS_FI(isnan)
UN_F_OB(isinf, __builtin_isinf(x) != 0)
UN_I_OB(isinf, 0 * x)
OPS_FI(isinf)

/* Floating-only functions (integer inputs are promoted to float). */
#define UN_MATH(OP, FN) \
  UN_F(OP, , M1(FN, x)) \
  OPS_F(OP)
UN_F(exp, PX_NEON_UN_ROW(px_neon_exp_f32), EXPV(x))
OPS_F(exp)
UN_MATH(log, log)
UN_MATH(sqrt, sqrt)
UN_F(tanh, PX_NEON_UN_ROW(px_neon_tanh_f32), TANHV(x))
OPS_F(tanh)
UN_MATH(sin, sin)
UN_MATH(cos, cos)
UN_MATH(tan, tan)
UN_MATH(asin, asin)
UN_MATH(acos, acos)
UN_MATH(atan, atan)
UN_MATH(sinh, sinh)
UN_MATH(cosh, cosh)
UN_MATH(asinh, asinh)
UN_MATH(acosh, acosh)
UN_MATH(atanh, atanh)
UN_F(erf, , ERFV(x))
OPS_F(erf)
UN_MATH(expm1, expm1)
UN_MATH(log1p, log1p)
UN_MATH(log2, log2)
UN_MATH(log10, log10)
UN_F(rsqrt, , (T)1 / M1(sqrt, x))
OPS_F(rsqrt)
UN_F(reciprocal, , (T)1 / x)
OPS_F(reciprocal)

/* pow(tensor, scalar exponent): the exponents torch special-cases. */
UN_F(pow_sq, , x * x)
UN_F(pow_cube, , x * x * x)
UN_F(pow_rsq, , (T)1 / (x * x))
UN_F(pow_s, const T e = PARAM(0), M2(pow, x, e))
UN_I(pow_sq, , (T)((U)x * (U)x))
UN_I(pow_cube, , (T)((U)x * (U)x * (U)x))
UN_I(pow_s, const T e = PARAM(0), (T)i_pow(x, e))
OPS(t_pow_sq, pow_sq_f32, pow_sq_f64, pow_sq_i32, pow_sq_i64, NULL)
OPS(t_pow_cube, pow_cube_f32, pow_cube_f64, pow_cube_i32, pow_cube_i64, NULL)
OPS(t_pow_sqrt, sqrt_f32, sqrt_f64, NULL, NULL, NULL)
OPS(t_pow_rsqrt, rsqrt_f32, rsqrt_f64, NULL, NULL, NULL)
OPS(t_pow_recip, reciprocal_f32, reciprocal_f64, NULL, NULL, NULL)
OPS(t_pow_rsq, pow_rsq_f32, pow_rsq_f64, NULL, NULL, NULL)
OPS(t_pow_si, pow_s_f32, pow_s_f64, pow_s_i32, pow_s_i64, NULL)

/* ---- pow with a scalar exponent ------------------------------------------------ */

static int k_pow_ts_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *a = ARGT(0), *out = ARGT(2);
  const px_value *e = args[1];
  eparam p = {0};
  rt_state st;
  rt_init(&st);
  rt_tensor(&st, a);
  rt_scalar(&st, e);
  int common = rt_result(&st);
  if (common == PX_BOOL) common = PX_I64; /* bool ** bool is integral in torch */
  if (px_resize_like(ctx, out, a)) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[1] = {a};
  const ew_ops *ops = &t_pow_si;
  if (px_is_floating(common)) {
    double d = px_scalar_d(e);
    /* torch uses sqrt / rsqrt / reciprocal for these exponents except for
     * float16, where it calls pow (they differ at -inf and -0) */
    bool special = common != PX_F16;
    if (d == 2.0)
      ops = &t_pow_sq;
    else if (d == 3.0)
      ops = &t_pow_cube;
    else if (special && d == 0.5)
      ops = &t_pow_sqrt;
    else if (special && d == -0.5)
      ops = &t_pow_rsqrt;
    else if (special && d == -1.0)
      ops = &t_pow_recip;
    else if (d == -2.0)
      ops = &t_pow_rsq;
    p.d[0] = d;
  } else {
    int64_t i = px_scalar_i(e);
    if (i < 0) return px_fail(ctx, "Integers to negative integer powers are not allowed.");
    if (i == 2)
      ops = &t_pow_sq;
    else if (i == 3)
      ops = &t_pow_cube;
    p.i[0] = i;
  }
  return px_ew_apply(ctx, ops, 0, common, 1, ins, out, &p);
}

/* ---- fill ------------------------------------------------------------------------- */

static int k_fill_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *out = ARGT(2);
  if (px_resize_like(ctx, out, ARGT(0))) return PYEXEC_ERR_EXECUTION;
  scalar_box box;
  const px_tensor *ins[1] = {box_scalar(&box, args[1], out->dtype)};
  return px_ew_apply(ctx, &t_copy, 0, out->dtype, 1, ins, out, &p);
}

static int k_fill_tensor_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *value = ARGT(1), *out = ARGT(2);
  if (value->dim != 0)
    return px_fail(ctx, "fill only supports a 0-dimension value tensor, got %d dimensions",
                   value->dim);
  if (px_resize_like(ctx, out, ARGT(0))) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[1] = {value};
  /* the value is cast to the output's dtype (no promotion check, as torch) */
  int k = kind_of(out->dtype);
  int want[1] = {kind_dtype[k]};
  return px_ew_run(ctx, t_copy.f[k], 1, ins, want, out, kind_dtype[k], &p);
}

static int k_scalar_tensor_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *out = ARGT(1);
  if (px_resize(ctx, out, 0, NULL)) return PYEXEC_ERR_EXECUTION;
  scalar_box box;
  const px_tensor *ins[1] = {box_scalar(&box, args[0], out->dtype)};
  int k = kind_of(out->dtype);
  int want[1] = {kind_dtype[k]};
  return px_ew_run(ctx, t_copy.f[k], 1, ins, want, out, kind_dtype[k], &p);
}

/* ---- unary kernels ---------------------------------------------------------------- */

K_UN(k_neg_out, t_neg, FL_NOBOOL)
K_UN(k_abs_out, t_abs, 0)
K_UN(k_sign_out, t_sign, 0)
K_UN(k_floor_out, t_floor, 0)
K_UN(k_ceil_out, t_ceil, 0)
K_UN(k_round_out, t_round, 0)
K_UN(k_trunc_out, t_trunc, 0)
K_UN(k_isnan_out, t_isnan, FL_OUTBOOL)
K_UN(k_isinf_out, t_isinf, FL_OUTBOOL)
K_UN(k_exp_out, t_exp, FL_FLOAT)
K_UN(k_log_out, t_log, FL_FLOAT)
K_UN(k_sqrt_out, t_sqrt, FL_FLOAT)
K_UN(k_rsqrt_out, t_rsqrt, FL_FLOAT)
K_UN(k_tanh_out, t_tanh, FL_FLOAT)
K_UN(k_sin_out, t_sin, FL_FLOAT)
K_UN(k_cos_out, t_cos, FL_FLOAT)
K_UN(k_tan_out, t_tan, FL_FLOAT)
K_UN(k_asin_out, t_asin, FL_FLOAT)
K_UN(k_acos_out, t_acos, FL_FLOAT)
K_UN(k_atan_out, t_atan, FL_FLOAT)
K_UN(k_sinh_out, t_sinh, FL_FLOAT)
K_UN(k_cosh_out, t_cosh, FL_FLOAT)
K_UN(k_asinh_out, t_asinh, FL_FLOAT)
K_UN(k_acosh_out, t_acosh, FL_FLOAT)
K_UN(k_atanh_out, t_atanh, FL_FLOAT)
K_UN(k_erf_out, t_erf, FL_FLOAT)
K_UN(k_expm1_out, t_expm1, FL_FLOAT)
K_UN(k_log1p_out, t_log1p, FL_FLOAT)
K_UN(k_log2_out, t_log2, FL_FLOAT)
K_UN(k_log10_out, t_log10, FL_FLOAT)
K_UN(k_reciprocal_out, t_reciprocal, FL_FLOAT)

const px_kernel_def px_kernels_unary[] = {
    {"aten::pow.Tensor_Scalar_out", "TST|T", k_pow_ts_out},
    {"aten::fill.Scalar_out", "TST|T", k_fill_scalar_out},
    {"aten::fill.Tensor_out", "TTT|T", k_fill_tensor_out},
    {"aten::scalar_tensor.out", "ST|T", k_scalar_tensor_out},
    {"aten::neg.out", "TT|T", k_neg_out},
    {"aten::abs.out", "TT|T", k_abs_out},
    {"aten::sign.out", "TT|T", k_sign_out},
    {"aten::floor.out", "TT|T", k_floor_out},
    {"aten::ceil.out", "TT|T", k_ceil_out},
    {"aten::round.out", "TT|T", k_round_out},
    {"aten::trunc.out", "TT|T", k_trunc_out},
    {"aten::isnan.out", "TT|T", k_isnan_out},
    {"aten::isinf.out", "TT|T", k_isinf_out},
    {"aten::exp.out", "TT|T", k_exp_out},
    {"aten::log.out", "TT|T", k_log_out},
    {"aten::sqrt.out", "TT|T", k_sqrt_out},
    {"aten::rsqrt.out", "TT|T", k_rsqrt_out},
    {"aten::tanh.out", "TT|T", k_tanh_out},
    {"aten::sin.out", "TT|T", k_sin_out},
    {"aten::cos.out", "TT|T", k_cos_out},
    {"aten::tan.out", "TT|T", k_tan_out},
    {"aten::asin.out", "TT|T", k_asin_out},
    {"aten::acos.out", "TT|T", k_acos_out},
    {"aten::atan.out", "TT|T", k_atan_out},
    {"aten::sinh.out", "TT|T", k_sinh_out},
    {"aten::cosh.out", "TT|T", k_cosh_out},
    {"aten::asinh.out", "TT|T", k_asinh_out},
    {"aten::acosh.out", "TT|T", k_acosh_out},
    {"aten::atanh.out", "TT|T", k_atanh_out},
    {"aten::erf.out", "TT|T", k_erf_out},
    {"aten::expm1.out", "TT|T", k_expm1_out},
    {"aten::log1p.out", "TT|T", k_log1p_out},
    {"aten::log2.out", "TT|T", k_log2_out},
    {"aten::log10.out", "TT|T", k_log10_out},
    {"aten::reciprocal.out", "TT|T", k_reciprocal_out},
    {NULL, NULL, NULL},
};

/* flat.h's entry points over these loops. */
void px_f32_tanh(int64_t n, const float *x, float *y) { ew_run_un_f32(tanh_f32, n, x, y); }
void px_f32_exp(int64_t n, const float *x, float *y) { ew_run_un_f32(exp_f32, n, x, y); }
