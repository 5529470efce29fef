/*
 * flat.c - float32 binary loops over plain arrays (flat.h): binary.c's
 * expressions stamped out again, with a call that takes pointers instead of
 * tensors.
 */
#include "kernels/elementwise/flat.h"

#include "kernels/elementwise/ew.h"

/* The unary entry points (px_f32_sigmoid, _tanh, _exp, _gelu) live beside
 * the tensor kernels' own loops: activation.c and unary.c. */

/* ---- binary --------------------------------------------------------------------- */

/* An output clamp as XNNPACK's kernels apply it: max with the lower bound,
 * then min with the upper, each written so that a NaN operand comes out as
 * is (x86 max / min return their second operand when either is NaN, the
 * shape GCC turns into one instruction each, not a NaN test and blends). */
static inline float clamp_out(float v, float lo, float hi) {
  const float t = lo > v ? lo : v;
  return hi < t ? hi : t;
}

/* Each operation twice: as is, and clamped to [d[0], d[1]]. */
#define BIN_CL(OP, E)                                  \
  BIN(OP##_f32, float, uint32_t, float, , E)           \
  BIN(OP##_cl_f32, float, uint32_t, float, const T lo = PARAM(0); const T hi = PARAM(1), clamp_out(E, lo, hi))
BIN_CL(add, x + y)
BIN_CL(sub, x - y)
BIN_CL(mul, x * y)
BIN_CL(div, x / y)
BIN_CL(min, MINP(x, y))
BIN_CL(max, MAXP(x, y))

static const ew_fn bin_loops[6][2] = {
    [PX_F32_ADD] = {add_f32, add_cl_f32}, [PX_F32_SUB] = {sub_f32, sub_cl_f32},
    [PX_F32_MUL] = {mul_f32, mul_cl_f32}, [PX_F32_DIV] = {div_f32, div_cl_f32},
    [PX_F32_MIN] = {min_f32, min_cl_f32}, [PX_F32_MAX] = {max_f32, max_cl_f32},
};

void px_f32_binary(int op, int64_t n, const float *a, int64_t sa, const float *b, int64_t sb, float *o,
                   bool clamp, float lo, float hi) {
  if (n <= 0 || op < 0 || op > PX_F32_MAX) return;
  const char *in[2] = {(const char *)a, (const char *)b};
  const int64_t is[2] = {sa, sb};
  eparam p = {{lo, hi, 0, 0}, {0}, 0};
  bin_loops[op][clamp](n, in, is, (char *)o, 1, &p);
}
