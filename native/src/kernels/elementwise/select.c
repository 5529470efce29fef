/*
 * select.c - choosing between values elementwise: where, masked_fill,
 * maximum / minimum, clamp (scalar or tensor bounds) and hardtanh (a clamp).
 * The machinery is ew.h.
 */
#include "kernels/elementwise/ew.h"

/* ---- loops ---------------------------------------------------------------- */

BIN_F(maximum, , MAXP(x, y))
BIN_I(maximum, , x > y ? x : y)
BIN_B(maximum, , x | y)
OPS_FIB(maximum)
BIN_F(minimum, , MINP(x, y))
BIN_I(minimum, , x < y ? x : y)
BIN_B(minimum, , x & y)
OPS_FIB(minimum)

#define TER_ALL(OP, CTY, EF, EI, EB)                            \
  TER(OP##_f32, CTY, float, uint32_t, float, EF)                \
  TER1(OP##_f64, CTY, double, uint64_t, double, EF)            \
  TER1(OP##_i32, CTY, int32_t, uint32_t, int32_t, EI)          \
  TER1(OP##_i64, CTY, int64_t, uint64_t, int64_t, EI)          \
  TER1(OP##_b, CTY, uint8_t, uint8_t, uint8_t, EB)

/* where(cond, self, other): the condition is read as bool. */
TER_ALL(where, uint8_t, x ? y : z, x ? y : z, x ? y : z)
OPS_FIB(where)

/* clamp(self, min, max) with both bounds. */
TER_ALL(clamp, T, CLAMPP(x, y, z), (x < y ? y : x) > z ? z : (x < y ? y : x),
        (x < y ? y : x) > z ? z : (x < y ? y : x))
OPS_FIB(clamp)

/* clamp with scalar bounds (hardtanh, relu6, clamp(min=, max=)): one
 * contiguous input, so the loop vectorises instead of broadcasting two 0-d
 * tensors through the ternary one. */
UN_F(clamp_s, const T lo = PARAM(0); const T hi = PARAM(1), CLAMPP(x, lo, hi))
OPS_F(clamp_s)

K_TT(k_maximum_out, t_maximum, 0)
K_TT(k_minimum_out, t_minimum, 0)

/* ---- where, masked_fill, clamp --------------------------------------------------- */

static int check_cond(px_ctx *ctx, const px_tensor *c, const char *what) {
  if (c->dtype != PX_BOOL && c->dtype != PX_U8)
    return px_fail(ctx, "%s must be bool, got %s", what, px_dtype_name(c->dtype));
  return 0;
}

static int k_where_self_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  if (check_cond(ctx, ARGT(0), "condition")) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[3] = {ARGT(0), ARGT(1), ARGT(2)};
  return px_ew_n(ctx, &t_where, FL_COND0, -1, 3, ins, ARGT(3), &p);
}

static int k_masked_fill_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *self = ARGT(0), *mask = ARGT(1), *out = ARGT(3);
  if (check_cond(ctx, mask, "mask")) return PYEXEC_ERR_EXECUTION;
  /* the output has the broadcast shape of self and mask (as torch's
   * out-of-place masked_fill) */
  const px_tensor *shape_of[2] = {self, mask};
  if (px_ew_resize(ctx, 2, shape_of, out)) return PYEXEC_ERR_EXECUTION;
  scalar_box box;
  const px_tensor *ins[3] = {mask, box_scalar(&box, args[2], self->dtype), self};
  return px_ew_apply(ctx, &t_where, FL_COND0, self->dtype, 3, ins, out, &p);
}

/* clamp with optional bounds: both -> ternary clamp, one -> maximum / minimum,
 * none -> an error (as torch). */
static int clamp_run(px_ctx *ctx, int common, px_tensor *self, const px_tensor *lo,
                     const px_tensor *hi, px_tensor *out) {
  eparam p = {0};
  if (common == PX_BOOL) return px_fail(ctx, "not implemented for bool tensors");
  if (lo && hi) {
    const px_tensor *ins[3] = {self, lo, hi};
    return px_ew_apply(ctx, &t_clamp, 0, common, 3, ins, out, &p);
  }
  const px_tensor *ins[2] = {self, lo ? lo : hi};
  return px_ew_apply(ctx, lo ? &t_maximum : &t_minimum, 0, common, 2, ins, out, &p);
}

/* Float self and out of one dtype, scalar bounds: the unary clamp. */
static bool clamp_scalar_fast(const px_tensor *self, const px_tensor *out, int common) {
  return (self->dtype == PX_F32 || self->dtype == PX_F64) && common == self->dtype && out->dtype == self->dtype;
}

static int clamp_scalar_run(px_ctx *ctx, px_tensor *self, const px_value *lo, const px_value *hi,
                            px_tensor *out) {
  eparam p = {0};
  p.d[0] = lo ? px_scalar_d(lo) : -INFINITY;
  p.d[1] = hi ? px_scalar_d(hi) : INFINITY;
  return px_ew_un(ctx, &t_clamp_s, FL_FLOAT, self, out, &p);
}

static int k_clamp_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = ARGT(0), *out = ARGT(3);
  bool has_lo = args[1]->tag != PX_V_NONE, has_hi = args[2]->tag != PX_V_NONE;
  if (!has_lo && !has_hi) return px_fail(ctx, "at least one of 'min' or 'max' must not be None");
  rt_state st;
  rt_init(&st);
  rt_tensor(&st, self);
  if (has_lo) rt_scalar(&st, args[1]);
  if (has_hi) rt_scalar(&st, args[2]);
  int common = rt_result(&st);
  if (px_resize_like(ctx, out, self)) return PYEXEC_ERR_EXECUTION;
  if (clamp_scalar_fast(self, out, common))
    return clamp_scalar_run(ctx, self, has_lo ? args[1] : NULL, has_hi ? args[2] : NULL, out);
  scalar_box blo, bhi;
  const px_tensor *lo = has_lo ? box_scalar(&blo, args[1], common) : NULL;
  const px_tensor *hi = has_hi ? box_scalar(&bhi, args[2], common) : NULL;
  return clamp_run(ctx, common, self, lo, hi, out);
}

static int k_clamp_tensor_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = ARGT(0), *out = ARGT(3);
  const px_tensor *lo = args[1]->tag == PX_V_NONE ? NULL : ARGT(1);
  const px_tensor *hi = args[2]->tag == PX_V_NONE ? NULL : ARGT(2);
  if (!lo && !hi) return px_fail(ctx, "at least one of 'min' or 'max' must not be None");
  const px_tensor *ins[3];
  int nin = 0;
  ins[nin++] = self;
  if (lo) ins[nin++] = lo;
  if (hi) ins[nin++] = hi;
  if (px_ew_resize(ctx, nin, ins, out)) return PYEXEC_ERR_EXECUTION;
  rt_state st;
  rt_init(&st);
  for (int i = 0; i < nin; i++) rt_tensor(&st, ins[i]);
  return clamp_run(ctx, rt_result(&st), self, lo, hi, out);
}

static int k_hardtanh_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = ARGT(0), *out = ARGT(3);
  if (px_resize_like(ctx, out, self)) return PYEXEC_ERR_EXECUTION;
  if (clamp_scalar_fast(self, out, self->dtype)) return clamp_scalar_run(ctx, self, args[1], args[2], out);
  scalar_box blo, bhi;
  const px_tensor *lo = box_scalar(&blo, args[1], self->dtype);
  const px_tensor *hi = box_scalar(&bhi, args[2], self->dtype);
  return clamp_run(ctx, self->dtype, self, lo, hi, out);
}

const px_kernel_def px_kernels_select[] = {
    {"aten::maximum.out", "TTT|T", k_maximum_out},
    {"aten::minimum.out", "TTT|T", k_minimum_out},
    {"aten::where.self_out", "TTTT|T", k_where_self_out},
    {"aten::masked_fill.Scalar_out", "TTST|T", k_masked_fill_scalar_out},
    {"aten::clamp.out", "TssT|T", k_clamp_out},
    {"aten::clamp.Tensor_out", "TttT|T", k_clamp_tensor_out},
    {"aten::hardtanh.out", "TSST|T", k_hardtanh_out},
    {NULL, NULL, NULL},
};
