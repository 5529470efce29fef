/*
 * binary.c - elementwise kernels of two operands: add / sub / rsub / mul /
 * div (with rounding modes) / floor_divide / remainder / fmod / pow / atan2,
 * comparisons, logical and bitwise operators (with logical_not and
 * bitwise_not). The machinery is ew.h.
 */
#include "kernels/elementwise/ew.h"

/* ---- loops ---------------------------------------------------------------- */

/* add / sub / rsub: x + alpha * y (sub and rsub negate alpha). */
BIN_F(add, const T al = PARAM(0), x + al * y)
BIN_I(add, const T al = PARAM(0), (T)((U)x + (U)al * (U)y))
OPS_FI(add)

/* alpha == 1, the common case. */
BIN_F(add1, , x + y)
BIN_I(add1, , (T)((U)x + (U)y))
OPS_FI(add1)
BIN_F(mul, , x * y)
BIN_I(mul, , (T)((U)x * (U)y))
BIN_B(mul, , x & y)
OPS_FIB(mul)
BIN_F(div, , x / y)
OPS_F(div)
BIN_F(div_trunc, , M1(trunc, x / y))
BIN_I(div_trunc, , (T)i_div_trunc(x, y, &err_))
OPS_FI(div_trunc)
BIN_F(div_floor, , DIVFLOOR(x, y))
BIN_I(div_floor, , (T)i_div_floor(x, y, &err_))
OPS_FI(div_floor)
BIN_F(remainder, , REMF(x, y))
BIN_I(remainder, , (T)i_rem(x, y, &err_))
OPS_FI(remainder)
BIN_F(fmod, , M2(fmod, x, y))
BIN_I(fmod, , (T)i_fmod(x, y, &err_))
OPS_FI(fmod)
BIN_F(atan2, , M2(atan2, x, y))
OPS_F(atan2)
BIN_F(pow, , M2(pow, x, y))
BIN_I(pow, , (T)i_pow(x, y))
OPS_FI(pow)
BIN_I(bit_and, , x & y)
BIN_B(bit_and, , x & y)
OPS_IB(bit_and)
BIN_I(bit_or, , x | y)
BIN_B(bit_or, , x | y)
OPS_IB(bit_or)
BIN_I(bit_xor, , x ^ y)
BIN_B(bit_xor, , x ^ y)
OPS_IB(bit_xor)
BIN_I(shl, , (T)i_shl(x, y, (int)(8 * sizeof(T))))
OPS_I(shl)
BIN_I(shr, , (T)i_shr(x, y, (int)(8 * sizeof(T))))
OPS_I(shr)

/* Logical ops see their operands converted to bool (0/1). */
BIN_B(logical_and, , x & y)
OPS_B(logical_and)
BIN_B(logical_or, , x | y)
OPS_B(logical_or)
BIN_B(logical_xor, , x ^ y)
OPS_B(logical_xor)
BIN_ALL_OB(eq, x == y)
OPS_FIB(eq)
BIN_ALL_OB(ne, x != y)
OPS_FIB(ne)
BIN_ALL_OB(lt, x < y)
OPS_FIB(lt)
BIN_ALL_OB(le, x <= y)
OPS_FIB(le)
BIN_ALL_OB(gt, x > y)
OPS_FIB(gt)
BIN_ALL_OB(ge, x >= y)
OPS_FIB(ge)
UN_I(bit_not, , ~x)
UN_B(bit_not, , x == 0)
OPS_IB(bit_not)
UN_B(logical_not, , x == 0)
OPS_B(logical_not)

/* ---- arithmetic ------------------------------------------------------------------ */

static void set_alpha(eparam *p, const px_value *alpha, bool negate) {
  memset(p, 0, sizeof *p);
  double d = px_scalar_d(alpha);
  int64_t i = px_scalar_i(alpha);
  p->d[0] = negate ? -d : d;
  p->i[0] = negate ? i_neg(i) : i;
}

static bool alpha_is_one(const px_value *alpha) { return px_scalar_d(alpha) == 1.0; }

static int k_add_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], false);
  return px_ew_tt(ctx, alpha_is_one(args[2]) ? &t_add1 : &t_add, 0, ARGT(0), ARGT(1), ARGT(3),
               &p);
}
static int k_add_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], false);
  return px_ew_ts(ctx, alpha_is_one(args[2]) ? &t_add1 : &t_add, 0, ARGT(0), args[1], false,
               ARGT(3), &p);
}
static int k_sub_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], true);
  return px_ew_tt(ctx, &t_add, FL_NOBOOL, ARGT(0), ARGT(1), ARGT(3), &p);
}
static int k_sub_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], true);
  return px_ew_ts(ctx, &t_add, FL_NOBOOL, ARGT(0), args[1], false, ARGT(3), &p);
}
static int k_rsub_scalar_out(px_ctx *ctx, px_value *const *args) {
  /* other - alpha * self == other + (-alpha) * self */
  eparam p;
  set_alpha(&p, args[2], true);
  return px_ew_ts(ctx, &t_add, FL_NOBOOL, ARGT(0), args[1], true, ARGT(3), &p);
}
static int k_mul_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return px_ew_tt(ctx, &t_mul, 0, ARGT(0), ARGT(1), ARGT(2), &p);
}
static int k_mul_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return px_ew_ts(ctx, &t_mul, 0, ARGT(0), args[1], false, ARGT(2), &p);
}

/* rounding_mode: NULL/None -> true division, "trunc", "floor". */
static int div_mode(px_ctx *ctx, const px_value *mode, const ew_ops **ops, int *flags) {
  if (!mode || mode->tag == PX_V_NONE) {
    *ops = &t_div;
    *flags = FL_FLOAT;
  } else if (str_is(mode, "trunc")) {
    *ops = &t_div_trunc;
    *flags = FL_NOBOOL;
  } else if (str_is(mode, "floor")) {
    *ops = &t_div_floor;
    *flags = FL_NOBOOL;
  } else {
    return px_fail(ctx, "rounding_mode must be None, 'trunc' or 'floor', got '%.*s'",
                   (int)mode->u.str.n, mode->u.str.p);
  }
  return 0;
}
static int k_div_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return px_ew_tt(ctx, &t_div, FL_FLOAT, ARGT(0), ARGT(1), ARGT(2), &p);
}
static int k_div_out_mode(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  const ew_ops *ops = NULL;
  int flags = 0;
  if (div_mode(ctx, args[2], &ops, &flags)) return PYEXEC_ERR_EXECUTION;
  return px_ew_tt(ctx, ops, flags, ARGT(0), ARGT(1), ARGT(3), &p);
}
static int k_div_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return px_ew_ts(ctx, &t_div, FL_FLOAT, ARGT(0), args[1], false, ARGT(2), &p);
}
static int k_div_scalar_mode_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  const ew_ops *ops = NULL;
  int flags = 0;
  if (div_mode(ctx, args[2], &ops, &flags)) return PYEXEC_ERR_EXECUTION;
  return px_ew_ts(ctx, ops, flags, ARGT(0), args[1], false, ARGT(3), &p);
}
static int k_floor_divide_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return px_ew_tt(ctx, &t_div_floor, FL_NOBOOL, ARGT(0), ARGT(1), ARGT(2), &p);
}

K_TT(k_remainder_tensor_out, t_remainder, FL_NOBOOL)
K_TS(k_remainder_scalar_out, t_remainder, FL_NOBOOL)
K_TT(k_fmod_tensor_out, t_fmod, FL_NOBOOL)
K_TS(k_fmod_scalar_out, t_fmod, FL_NOBOOL)
K_TT(k_atan2_out, t_atan2, FL_FLOAT)
K_TT(k_pow_tt_out, t_pow, FL_NOBOOL)

K_TT(k_eq_tensor_out, t_eq, FL_OUTBOOL)
K_TS(k_eq_scalar_out, t_eq, FL_OUTBOOL)
K_TT(k_ne_tensor_out, t_ne, FL_OUTBOOL)
K_TS(k_ne_scalar_out, t_ne, FL_OUTBOOL)
K_TT(k_lt_tensor_out, t_lt, FL_OUTBOOL)
K_TS(k_lt_scalar_out, t_lt, FL_OUTBOOL)
K_TT(k_le_tensor_out, t_le, FL_OUTBOOL)
K_TS(k_le_scalar_out, t_le, FL_OUTBOOL)
K_TT(k_gt_tensor_out, t_gt, FL_OUTBOOL)
K_TS(k_gt_scalar_out, t_gt, FL_OUTBOOL)
K_TT(k_ge_tensor_out, t_ge, FL_OUTBOOL)
K_TS(k_ge_scalar_out, t_ge, FL_OUTBOOL)

K_TT(k_logical_and_out, t_logical_and, FL_LOGICAL)
K_TT(k_logical_or_out, t_logical_or, FL_LOGICAL)
K_TT(k_logical_xor_out, t_logical_xor, FL_LOGICAL)

/* Bitwise ops exist for integral and bool tensors only. */
static int need_integral(px_ctx *ctx, const px_tensor *a, const px_tensor *b) {
  if (px_is_floating(a->dtype) || (b && px_is_floating(b->dtype)))
    return px_fail(ctx, "not implemented for floating tensors (%s%s%s)",
                   px_dtype_name(a->dtype), b ? ", " : "", b ? px_dtype_name(b->dtype) : "");
  return 0;
}
static int need_integral_scalar(px_ctx *ctx, const px_tensor *a, const px_value *s) {
  if (need_integral(ctx, a, NULL)) return PYEXEC_ERR_EXECUTION;
  if (s->tag == PX_V_DOUBLE) return px_fail(ctx, "not implemented for a float scalar");
  return 0;
}
#define K_BIT_TT(NAME, OPS, FLAGS)                                              \
  static int NAME(px_ctx *ctx, px_value *const *args) {                         \
    eparam p = {0};                                                             \
    if (need_integral(ctx, ARGT(0), ARGT(1))) return PYEXEC_ERR_EXECUTION;      \
    return px_ew_tt(ctx, &OPS, FLAGS, ARGT(0), ARGT(1), ARGT(2), &p);              \
  }
#define K_BIT_TS(NAME, OPS, FLAGS)                                                   \
  static int NAME(px_ctx *ctx, px_value *const *args) {                              \
    eparam p = {0};                                                                  \
    if (need_integral_scalar(ctx, ARGT(0), args[1])) return PYEXEC_ERR_EXECUTION;    \
    return px_ew_ts(ctx, &OPS, FLAGS, ARGT(0), args[1], false, ARGT(2), &p);            \
  }
K_BIT_TT(k_bitwise_and_tensor_out, t_bit_and, 0)
K_BIT_TS(k_bitwise_and_scalar_out, t_bit_and, 0)
K_BIT_TT(k_bitwise_or_tensor_out, t_bit_or, 0)
K_BIT_TS(k_bitwise_or_scalar_out, t_bit_or, 0)
K_BIT_TT(k_bitwise_xor_tensor_out, t_bit_xor, 0)
K_BIT_TS(k_bitwise_xor_scalar_out, t_bit_xor, 0)
K_BIT_TT(k_lshift_tensor_out, t_shl, 0)
K_BIT_TS(k_lshift_scalar_out, t_shl, 0)
K_BIT_TT(k_rshift_tensor_out, t_shr, 0)
K_BIT_TS(k_rshift_scalar_out, t_shr, 0)

static int k_bitwise_not_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  if (need_integral(ctx, ARGT(0), NULL)) return PYEXEC_ERR_EXECUTION;
  return px_ew_un(ctx, &t_bit_not, 0, ARGT(0), ARGT(1), &p);
}
static int k_logical_not_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return px_ew_un(ctx, &t_logical_not, FL_LOGICAL, ARGT(0), ARGT(1), &p);
}

/* ---- pow with a scalar base ------------------------------------------------ */

static int k_pow_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  rt_state st;
  rt_init(&st);
  rt_tensor(&st, ARGT(1));
  rt_scalar(&st, args[0]);
  int common = rt_result(&st);
  if (common == PX_BOOL) common = PX_I64;
  scalar_box box;
  const px_tensor *ins[2] = {box_scalar(&box, args[0], common), ARGT(1)};
  if (px_resize_like(ctx, ARGT(2), ARGT(1))) return PYEXEC_ERR_EXECUTION;
  return px_ew_apply(ctx, &t_pow, 0, common, 2, ins, ARGT(2), &p);
}

const px_kernel_def px_kernels_binary[] = {
    {"aten::add.out", "TTST|T", k_add_out},
    {"aten::add.Scalar_out", "TSST|T", k_add_scalar_out},
    {"aten::sub.out", "TTST|T", k_sub_out},
    {"aten::sub.Scalar_out", "TSST|T", k_sub_scalar_out},
    {"aten::rsub.Scalar_out", "TSST|T", k_rsub_scalar_out},
    {"aten::mul.out", "TTT|T", k_mul_out},
    {"aten::mul.Scalar_out", "TST|T", k_mul_scalar_out},
    {"aten::div.out", "TTT|T", k_div_out},
    {"aten::div.out_mode", "TTrT|T", k_div_out_mode},
    {"aten::div.Scalar_out", "TST|T", k_div_scalar_out},
    {"aten::div.Scalar_mode_out", "TSrT|T", k_div_scalar_mode_out},
    {"aten::floor_divide.out", "TTT|T", k_floor_divide_out},
    {"aten::remainder.Tensor_out", "TTT|T", k_remainder_tensor_out},
    {"aten::remainder.Scalar_out", "TST|T", k_remainder_scalar_out},
    {"aten::fmod.Tensor_out", "TTT|T", k_fmod_tensor_out},
    {"aten::fmod.Scalar_out", "TST|T", k_fmod_scalar_out},
    {"aten::pow.Tensor_Tensor_out", "TTT|T", k_pow_tt_out},
    {"aten::pow.Scalar_out", "STT|T", k_pow_scalar_out},
    {"aten::atan2.out", "TTT|T", k_atan2_out},
    {"aten::eq.Scalar_out", "TST|T", k_eq_scalar_out},
    {"aten::eq.Tensor_out", "TTT|T", k_eq_tensor_out},
    {"aten::ne.Scalar_out", "TST|T", k_ne_scalar_out},
    {"aten::ne.Tensor_out", "TTT|T", k_ne_tensor_out},
    {"aten::lt.Scalar_out", "TST|T", k_lt_scalar_out},
    {"aten::lt.Tensor_out", "TTT|T", k_lt_tensor_out},
    {"aten::le.Scalar_out", "TST|T", k_le_scalar_out},
    {"aten::le.Tensor_out", "TTT|T", k_le_tensor_out},
    {"aten::gt.Scalar_out", "TST|T", k_gt_scalar_out},
    {"aten::gt.Tensor_out", "TTT|T", k_gt_tensor_out},
    {"aten::ge.Scalar_out", "TST|T", k_ge_scalar_out},
    {"aten::ge.Tensor_out", "TTT|T", k_ge_tensor_out},
    {"aten::logical_not.out", "TT|T", k_logical_not_out},
    {"aten::logical_and.out", "TTT|T", k_logical_and_out},
    {"aten::logical_or.out", "TTT|T", k_logical_or_out},
    {"aten::logical_xor.out", "TTT|T", k_logical_xor_out},
    {"aten::bitwise_and.Tensor_out", "TTT|T", k_bitwise_and_tensor_out},
    {"aten::bitwise_and.Scalar_out", "TST|T", k_bitwise_and_scalar_out},
    {"aten::bitwise_or.Tensor_out", "TTT|T", k_bitwise_or_tensor_out},
    {"aten::bitwise_or.Scalar_out", "TST|T", k_bitwise_or_scalar_out},
    {"aten::bitwise_xor.Tensor_out", "TTT|T", k_bitwise_xor_tensor_out},
    {"aten::bitwise_xor.Scalar_out", "TST|T", k_bitwise_xor_scalar_out},
    {"aten::bitwise_not.out", "TT|T", k_bitwise_not_out},
    {"aten::bitwise_left_shift.Tensor_out", "TTT|T", k_lshift_tensor_out},
    {"aten::bitwise_left_shift.Tensor_Scalar_out", "TST|T", k_lshift_scalar_out},
    {"aten::bitwise_right_shift.Tensor_out", "TTT|T", k_rshift_tensor_out},
    {"aten::bitwise_right_shift.Tensor_Scalar_out", "TST|T", k_rshift_scalar_out},
    {NULL, NULL, NULL},
};
