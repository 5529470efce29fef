/*
 * prim.c - ExecuTorch's primitive operators: Python arithmetic on the Int /
 * Double / Bool values that carry symbolic sizes (executorch_prim::*), tensor
 * size queries (aten::sym_size, aten::sym_numel), tensor -> scalar
 * (aten::_local_scalar_dense) and the emitter's own et_view / et_copy_index.
 *
 * The scalar operators follow Python: int op int stays int (wrapping on
 * overflow instead of growing), anything with a float is a float, bool counts
 * as int, `//` and `%` round toward negative infinity, and division by zero
 * is an error. The result value's tag is overwritten: the emitter gives every
 * result a placeholder Int, whatever kind it will hold.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernel.h"

#define ERR PYEXEC_ERR_EXECUTION

/* ---- scalar values -------------------------------------------------------- */

typedef struct num {
  bool is_f; /* a double; else an int (bools read as 0 / 1) */
  bool is_b; /* it was a bool */
  int64_t i;
  double d;
} num;

static const char *kind_name(int tag) {
  switch (tag) {
    case PX_V_NONE: return "None";
    case PX_V_TENSOR: return "a tensor";
    case PX_V_STRING: return "a string";
    default: return "a list";
  }
}

static int get_num(px_ctx *ctx, const px_value *v, const char *what, num *n) {
  n->is_f = n->is_b = false;
  n->i = 0;
  n->d = 0;
  switch (v->tag) {
    case PX_V_INT: n->i = v->u.i; return 0;
    case PX_V_BOOL:
      n->is_b = true;
      n->i = v->u.b ? 1 : 0;
      return 0;
    case PX_V_DOUBLE:
      n->is_f = true;
      n->d = v->u.d;
      return 0;
    default: return px_fail(ctx, "%s is %s, expected an int, float or bool", what, kind_name(v->tag));
  }
}

static double as_d(const num *n) { return n->is_f ? n->d : (double)n->i; }

static int put_int(px_value *v, int64_t i) {
  v->tag = PX_V_INT;
  v->u.i = i;
  return 0;
}
static int put_double(px_value *v, double d) {
  v->tag = PX_V_DOUBLE;
  v->u.d = d;
  return 0;
}
static int put_bool(px_value *v, bool b) {
  v->tag = PX_V_BOOL;
  v->u.b = b;
  return 0;
}
static int put_num(px_value *v, const num *n) {
  if (n->is_f) return put_double(v, n->d);
  if (n->is_b) return put_bool(v, n->i != 0);
  return put_int(v, n->i);
}

/* Reads the two operands of a binary operator. */
static int get2(px_ctx *ctx, px_value *const *a, num *x, num *y) {
  int st;
  if ((st = get_num(ctx, a[0], "a", x)) || (st = get_num(ctx, a[1], "b", y))) return st;
  return 0;
}

/* Python int(x) of a float: truncation, refused when it does not fit. */
static int float_to_int(px_ctx *ctx, double d, int64_t *out) {
  if (!isfinite(d)) return px_fail(ctx, "cannot convert float %g to an integer", d);
  if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
    return px_fail(ctx, "float %g does not fit a 64-bit integer", d);
  *out = (int64_t)d;
  return 0;
}

/* ---- arithmetic ------------------------------------------------------------ */

enum { OP_ADD, OP_SUB, OP_MUL };

static int arith(px_ctx *ctx, px_value *const *a, int op) {
  num x, y;
  int st = get2(ctx, a, &x, &y);
  if (st) return st;
  if (!x.is_f && !y.is_f) {
    uint64_t p = (uint64_t)x.i, q = (uint64_t)y.i;
    uint64_t r = op == OP_ADD ? p + q : op == OP_SUB ? p - q : p * q;
    return put_int(a[2], (int64_t)r);
  }
  double p = as_d(&x), q = as_d(&y);
  return put_double(a[2], op == OP_ADD ? p + q : op == OP_SUB ? p - q : p * q);
}
static int k_add(px_ctx *ctx, px_value *const *a) { return arith(ctx, a, OP_ADD); }
static int k_sub(px_ctx *ctx, px_value *const *a) { return arith(ctx, a, OP_SUB); }
static int k_mul(px_ctx *ctx, px_value *const *a) { return arith(ctx, a, OP_MUL); }

static int k_truediv(px_ctx *ctx, px_value *const *a) {
  num x, y;
  int st = get2(ctx, a, &x, &y);
  if (st) return st;
  double q = as_d(&y);
  if (q == 0) return px_fail(ctx, "division by zero");
  return put_double(a[2], as_d(&x) / q);
}

/* Python's int // and %: rounding toward negative infinity. */
static int64_t ifloordiv(int64_t x, int64_t y) {
  if (y == -1) return (int64_t)(0 - (uint64_t)x); /* INT64_MIN // -1 wraps */
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
  return q;
}
static int64_t imod(int64_t x, int64_t y) {
  if (y == -1) return 0;
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

/* Python's float % and //. */
static double fmod_py(double x, double y) {
  double r = fmod(x, y);
  if (r != 0) {
    if ((r < 0) != (y < 0)) r += y;
  } else {
    r = copysign(0.0, y);
  }
  return r;
}
static double ffloordiv_py(double x, double y) {
  double m = fmod(x, y);
  double div = (x - m) / y;
  if (m != 0 && ((y < 0) != (m < 0))) div -= 1.0;
  if (div == 0) return copysign(0.0, x / y);
  double f = floor(div);
  if (div - f > 0.5) f += 1.0;
  return f;
}

static int k_floordiv(px_ctx *ctx, px_value *const *a) {
  num x, y;
  int st = get2(ctx, a, &x, &y);
  if (st) return st;
  if (!x.is_f && !y.is_f) {
    if (y.i == 0) return px_fail(ctx, "integer division by zero");
    return put_int(a[2], ifloordiv(x.i, y.i));
  }
  if (as_d(&y) == 0) return px_fail(ctx, "float floor division by zero");
  return put_double(a[2], ffloordiv_py(as_d(&x), as_d(&y)));
}

static int k_mod(px_ctx *ctx, px_value *const *a) {
  num x, y;
  int st = get2(ctx, a, &x, &y);
  if (st) return st;
  if (!x.is_f && !y.is_f) {
    if (y.i == 0) return px_fail(ctx, "integer modulo by zero");
    return put_int(a[2], imod(x.i, y.i));
  }
  if (as_d(&y) == 0) return px_fail(ctx, "float modulo by zero");
  return put_double(a[2], fmod_py(as_d(&x), as_d(&y)));
}

/* ---- comparisons ------------------------------------------------------------ */

enum { CMP_EQ, CMP_GT, CMP_LT, CMP_GE, CMP_LE };

static int compare(px_ctx *ctx, px_value *const *a, int op) {
  num x, y;
  int st = get2(ctx, a, &x, &y);
  if (st) return st;
  bool r;
  if (!x.is_f && !y.is_f) {
    int64_t p = x.i, q = y.i;
    r = op == CMP_EQ ? p == q : op == CMP_GT ? p > q : op == CMP_LT ? p < q : op == CMP_GE ? p >= q : p <= q;
  } else {
    double p = as_d(&x), q = as_d(&y);
    r = op == CMP_EQ ? p == q : op == CMP_GT ? p > q : op == CMP_LT ? p < q : op == CMP_GE ? p >= q : p <= q;
  }
  return put_bool(a[2], r);
}
static int k_eq(px_ctx *ctx, px_value *const *a) { return compare(ctx, a, CMP_EQ); }
static int k_gt(px_ctx *ctx, px_value *const *a) { return compare(ctx, a, CMP_GT); }
static int k_lt(px_ctx *ctx, px_value *const *a) { return compare(ctx, a, CMP_LT); }
static int k_ge(px_ctx *ctx, px_value *const *a) { return compare(ctx, a, CMP_GE); }
static int k_le(px_ctx *ctx, px_value *const *a) { return compare(ctx, a, CMP_LE); }

/* sym_max / sym_min: Python's max(a, b) / min(a, b), which return one of the
 * operands (b only when it compares strictly better). */
static int minmax(px_ctx *ctx, px_value *const *a, bool mx) {
  num x, y;
  int st = get2(ctx, a, &x, &y);
  if (st) return st;
  bool take_b;
  if (!x.is_f && !y.is_f)
    take_b = mx ? y.i > x.i : y.i < x.i;
  else
    take_b = mx ? as_d(&y) > as_d(&x) : as_d(&y) < as_d(&x);
  return put_num(a[2], take_b ? &y : &x);
}
static int k_sym_max(px_ctx *ctx, px_value *const *a) { return minmax(ctx, a, true); }
static int k_sym_min(px_ctx *ctx, px_value *const *a) { return minmax(ctx, a, false); }

/* ---- unary ------------------------------------------------------------------ */

static int k_neg(px_ctx *ctx, px_value *const *a) {
  num x;
  int st = get_num(ctx, a[0], "a", &x);
  if (st) return st;
  if (x.is_f) return put_double(a[1], -x.d);
  return put_int(a[1], (int64_t)(0 - (uint64_t)x.i));
}

static int k_sym_float(px_ctx *ctx, px_value *const *a) {
  num x;
  int st = get_num(ctx, a[0], "a", &x);
  if (st) return st;
  return put_double(a[1], as_d(&x));
}

static int k_sym_int(px_ctx *ctx, px_value *const *a) {
  num x;
  int64_t i = 0;
  int st = get_num(ctx, a[0], "a", &x);
  if (st) return st;
  if (!x.is_f) return put_int(a[1], x.i);
  if ((st = float_to_int(ctx, x.d, &i))) return st;
  return put_int(a[1], i);
}

static int k_sym_not(px_ctx *ctx, px_value *const *a) {
  num x;
  int st = get_num(ctx, a[0], "a", &x);
  if (st) return st;
  return put_bool(a[1], x.is_f ? x.d == 0 : x.i == 0);
}

/* Python round(): to nearest, ties to even. */
static double round_half_even(double d) {
  double f = floor(d), diff = d - f;
  if (diff > 0.5) return f + 1.0;
  if (diff < 0.5) return f;
  return fmod(f, 2.0) == 0 ? f : f + 1.0;
}

enum { RND_CEIL, RND_ROUND, RND_TRUNC };

/* math.ceil / round / math.trunc: an int for any int, float or bool. */
static int rounding(px_ctx *ctx, px_value *const *a, int mode) {
  num x;
  int64_t i = 0;
  int st = get_num(ctx, a[0], "a", &x);
  if (st) return st;
  if (!x.is_f) return put_int(a[1], x.i);
  double r = mode == RND_CEIL ? ceil(x.d) : mode == RND_TRUNC ? trunc(x.d) : round_half_even(x.d);
  if ((st = float_to_int(ctx, r, &i))) return st;
  return put_int(a[1], i);
}
static int k_ceil(px_ctx *ctx, px_value *const *a) { return rounding(ctx, a, RND_CEIL); }
static int k_round(px_ctx *ctx, px_value *const *a) { return rounding(ctx, a, RND_ROUND); }
static int k_trunc(px_ctx *ctx, px_value *const *a) { return rounding(ctx, a, RND_TRUNC); }

/* sym_ite(b, t, f): t if b else f. */
static int k_sym_ite(px_ctx *ctx, px_value *const *a) {
  num c, t, f;
  int st;
  if ((st = get_num(ctx, a[0], "b", &c)) || (st = get_num(ctx, a[1], "t", &t)) ||
      (st = get_num(ctx, a[2], "f", &f)))
    return st;
  bool cond = c.is_f ? c.d != 0 : c.i != 0;
  return put_num(a[3], cond ? &t : &f);
}

/* ---- tensor queries ----------------------------------------------------------- */

/* sym_size.int(self, dim) -> int */
static int k_sym_size(px_ctx *ctx, px_value *const *a) {
  const px_tensor *t = a[0]->u.t;
  if (t->dim == 0)
    return px_fail(ctx, "dimension %lld requested of a 0-d tensor", (long long)a[1]->u.i);
  int d = px_wrap_dim(ctx, a[1]->u.i, t->dim);
  if (d < 0) return ERR;
  return put_int(a[2], t->sizes[d]);
}

/* sym_numel(self) -> int */
static int k_sym_numel(px_ctx *ctx, px_value *const *a) {
  (void)ctx;
  return put_int(a[1], a[0]->u.t->numel);
}

/* _local_scalar_dense(self) -> Scalar: the single element as int, float or
 * bool. */
static int k_local_scalar_dense(px_ctx *ctx, px_value *const *a) {
  const px_tensor *t = a[0]->u.t;
  if (t->numel != 1)
    return px_fail(ctx, "a tensor with %lld elements cannot be converted to a scalar", (long long)t->numel);
  if (t->dtype == PX_BOOL) return put_bool(a[1], ((const uint8_t *)t->data)[0] != 0);
  if (px_is_floating(t->dtype)) return put_double(a[1], px_load_d(t->data, t->dtype, 0));
  if (!px_is_integral(t->dtype, false))
    return px_fail(ctx, "unsupported dtype %s", px_dtype_name(t->dtype));
  return put_int(a[1], px_load_i(t->data, t->dtype, 0));
}

/* ---- emitter operators --------------------------------------------------------- */

/* et_view.default(self, size, out): out becomes a view of self with `size`
 * (one -1 inferred): resized, and pointed at self's storage (no copy). */
static int k_et_view(px_ctx *ctx, px_value *const *a) {
  px_tensor *self = a[0]->u.t, *out = a[2]->u.t;
  int st;
  if ((st = px_require_contiguous(ctx, self, "self")) || (st = px_require_contiguous(ctx, out, "out")))
    return st;
  if (self->dtype != out->dtype)
    return px_fail(ctx, "out has dtype %s, self has %s (they must match)", px_dtype_name(out->dtype),
                   px_dtype_name(self->dtype));
  uint32_t n = a[1]->u.il.n;
  if (n != (uint32_t)out->dim)
    return px_fail(ctx, "size has %u entries, out has rank %d", n, (int)out->dim);
  const int64_t *size = px_intlist(a[1]);
  int64_t sz[PX_MAX_DIM], known = 1;
  int infer = -1;
  for (uint32_t k = 0; k < n; k++) {
    if (size[k] == -1) {
      if (infer >= 0) return px_fail(ctx, "only one dimension of size may be -1");
      infer = (int)k;
      continue;
    }
    if (size[k] < 0) return px_fail(ctx, "invalid size %lld at dim %u", (long long)size[k], k);
    sz[k] = size[k];
    if (size[k] && known > INT64_MAX / size[k]) return px_fail(ctx, "size overflows at dim %u", k);
    known *= size[k];
  }
  if (infer >= 0) {
    if (known == 0)
      return px_fail(ctx, "cannot infer the -1 dimension when another dimension is 0");
    if (self->numel % known)
      return px_fail(ctx, "cannot view %lld elements with %lld elements per inferred row",
                     (long long)self->numel, (long long)known);
    sz[infer] = self->numel / known;
    known *= sz[infer];
  }
  if (known != self->numel)
    return px_fail(ctx, "size holds %lld elements, self has %lld", (long long)known, (long long)self->numel);
  /* out's bound is its declared one for the resize, then no more than self's
   * buffer holds now: out shares that buffer, so a later kernel resizing out
   * must not write past it (re-established on every run). */
  int64_t declared = px_prod(out->max_sizes, 0, out->dim);
  out->cap_numel = declared;
  out->capacity = (size_t)declared * px_elsize(out->dtype);
  if ((st = px_resize(ctx, out, out->dim, sz))) return st;
  out->data = self->data;
  if (self->numel < declared) {
    out->cap_numel = self->numel;
    out->capacity = (size_t)self->numel * px_elsize(out->dtype);
  }
  return 0;
}

/* et_copy_index.tensor(copy_to, copy_from, index): copy_to grows to
 * index + 1 rows and copy_from is written as row `index` (map / scan
 * outputs). Note: copy_to is written although it is an argument. */
static int k_et_copy_index(px_ctx *ctx, px_value *const *a) {
  px_tensor *to = a[0]->u.t, *from = a[1]->u.t;
  int64_t index = a[2]->u.i;
  int st;
  if ((st = px_require_contiguous(ctx, to, "copy_to")) || (st = px_require_contiguous(ctx, from, "copy_from")))
    return st;
  if (to->dtype != from->dtype)
    return px_fail(ctx, "copy_to has dtype %s, copy_from has %s", px_dtype_name(to->dtype),
                   px_dtype_name(from->dtype));
  if (index < 0) return px_fail(ctx, "index %lld is negative", (long long)index);
  if (to->dim != from->dim + 1)
    return px_fail(ctx, "copy_to has rank %d, copy_from rank %d (expected one more)", (int)to->dim,
                   (int)from->dim);
  int64_t sz[PX_MAX_DIM];
  sz[0] = index + 1;
  for (int k = 0; k < from->dim; k++) {
    if (to->sizes[k + 1] != from->sizes[k])
      return px_fail(ctx, "copy_to has size %lld at dim %d, copy_from has %lld at dim %d",
                     (long long)to->sizes[k + 1], k + 1, (long long)from->sizes[k], k);
    sz[k + 1] = from->sizes[k];
  }
  if ((st = px_resize(ctx, to, to->dim, sz))) return st;
  size_t row = (size_t)from->numel * px_elsize(from->dtype);
  if (row) memcpy((char *)to->data + (size_t)index * row, from->data, row);
  return 0;
}

const px_kernel_def px_kernels_prim[] = {
    {"aten::sym_size.int", "TI|*", k_sym_size},
    {"aten::sym_numel", "T|*", k_sym_numel},
    {"aten::_local_scalar_dense", "T|*", k_local_scalar_dense},
    {"executorch_prim::add.Scalar", "SS|*", k_add},
    {"executorch_prim::sub.Scalar", "SS|*", k_sub},
    {"executorch_prim::mul.Scalar", "SS|*", k_mul},
    {"executorch_prim::floordiv.Scalar", "SS|*", k_floordiv},
    {"executorch_prim::floordiv.int", "SS|*", k_floordiv},
    {"executorch_prim::truediv.Scalar", "SS|*", k_truediv},
    {"executorch_prim::mod.Scalar", "SS|*", k_mod},
    {"executorch_prim::mod.int", "SS|*", k_mod},
    {"executorch_prim::eq.Scalar", "SS|*", k_eq},
    {"executorch_prim::gt.Scalar", "SS|*", k_gt},
    {"executorch_prim::lt.Scalar", "SS|*", k_lt},
    {"executorch_prim::ge.Scalar", "SS|*", k_ge},
    {"executorch_prim::le.Scalar", "SS|*", k_le},
    {"executorch_prim::neg.Scalar", "S|*", k_neg},
    {"executorch_prim::sym_max.Scalar", "SS|*", k_sym_max},
    {"executorch_prim::sym_min.Scalar", "SS|*", k_sym_min},
    {"executorch_prim::sym_float.Scalar", "S|*", k_sym_float},
    {"executorch_prim::sym_int.Scalar", "S|*", k_sym_int},
    {"executorch_prim::sym_not.Scalar", "S|*", k_sym_not},
    {"executorch_prim::sym_ite.Scalar", "SSS|*", k_sym_ite},
    {"executorch_prim::ceil.Scalar", "S|*", k_ceil},
    {"executorch_prim::round.Scalar", "S|*", k_round},
    {"executorch_prim::trunc.Scalar", "S|*", k_trunc},
    {"executorch_prim::et_copy_index.tensor", "TTI", k_et_copy_index},
    {"executorch_prim::et_view.default", "TL|T", k_et_view},
    {NULL, NULL, NULL},
};
