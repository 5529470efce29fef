/*
 * argminmax.c - reductions that keep where the extreme value is: max.dim /
 * min.dim (values and indices), argmax / argmin. Ties keep the first index;
 * NaN counts as the extreme, as in torch.
 */
#include "kernels/reduction/plan.h"

/* First index of the max (min) of p[0..n); NaN counts as the largest and the
 * smallest, so the first NaN wins. */
#define DEF_ARG(NAME, T, BETTER)                                           \
  static int64_t NAME(const T *restrict p, int64_t n) {                    \
    int64_t bi = 0;                                                        \
    T b = p[0];                                                            \
    for (int64_t i = 1; i < n; i++) {                                      \
      T v = p[i];                                                          \
      if (BETTER) {                                                        \
        b = v;                                                             \
        bi = i;                                                            \
      }                                                                    \
    }                                                                      \
    return bi;                                                             \
  }

/* Row form: best[i] / bidx[i] updated with row r. */
#define DEF_ARGROW(NAME, T, R, BETTER)                                                 \
  static void NAME(R *restrict best, int64_t *restrict bidx, const T *restrict p,     \
                   int64_t n, int64_t r) {                                             \
    for (int64_t i = 0; i < n; i++) {                                                  \
      R v = (R)p[i], b = best[i];                                                      \
      if (BETTER) {                                                                    \
        best[i] = v;                                                                   \
        bidx[i] = r;                                                                   \
      }                                                                                \
    }                                                                                  \
  }

#define B_FMAX (v > b || (v != v && b == b))
#define B_FMIN (v < b || (v != v && b == b))
#define B_IMAX (v > b)
#define B_IMIN (v < b)

/* float32: the extreme value first (fast loops), then its first position. */
static int64_t am_f32(const float *restrict p, int64_t n, bool mx) {
  float m = mx ? px_red_max_f32(p, n) : px_red_min_f32(p, n);
  int64_t i = 0;
  if (m != m) {
    while (i < n && p[i] == p[i]) i++;
  } else {
    while (i < n && p[i] != m) i++;
  }
  return i < n ? i : 0;
}
DEF_ARG(am_max_f64, double, B_FMAX)
DEF_ARG(am_min_f64, double, B_FMIN)
DEF_ARG(am_max_i64, int64_t, B_IMAX)
DEF_ARG(am_min_i64, int64_t, B_IMIN)
DEF_ARGROW(ar_max_f32, float, double, B_FMAX)
DEF_ARGROW(ar_min_f32, float, double, B_FMIN)
DEF_ARGROW(ar_max_f64, double, double, B_FMAX)
DEF_ARGROW(ar_min_f64, double, double, B_FMIN)
DEF_ARGROW(ar_max_i64, int64_t, int64_t, B_IMAX)
DEF_ARGROW(ar_min_i64, int64_t, int64_t, B_IMIN)

static int64_t arg_chunk(int ct, bool mx, const void *p, int64_t n) {
  switch (ct) {
    case CT_F32: return am_f32(p, n, mx);
    case CT_F64: return mx ? am_max_f64(p, n) : am_min_f64(p, n);
    default: return mx ? am_max_i64(p, n) : am_min_i64(p, n);
  }
}

static void arg_row(int ct, bool mx, void *best, int64_t *bidx, const void *p, int64_t n, int64_t r) {
  switch (ct) {
    case CT_F32:
      if (mx)
        ar_max_f32(best, bidx, p, n, r);
      else
        ar_min_f32(best, bidx, p, n, r);
      return;
    case CT_F64:
      if (mx)
        ar_max_f64(best, bidx, p, n, r);
      else
        ar_min_f64(best, bidx, p, n, r);
      return;
    default:
      if (mx)
        ar_max_i64(best, bidx, p, n, r);
      else
        ar_min_i64(best, bidx, p, n, r);
      return;
  }
}

/* Element k of a converted chunk (compute type ct) as double / int64. */
static double ct_load_d(int ct, const void *p, int64_t k) {
  return ct == CT_F32 ? ((const float *)p)[k] : ((const double *)p)[k];
}

/* Index of the first max / min over the reduced dims of mask (one dim, or
 * all of them) into `idx` (int64) and the value into `vals`; either may be
 * NULL. Outputs are already resized. */
static int arg_run(px_ctx *ctx, const px_tensor *in, const bool *mask, bool mx, px_tensor *vals,
                   px_tensor *idx) {
  px_tensor *first = idx ? idx : vals;
  if (first->numel == 0) return 0;
  if (in->numel == 0)
    return px_fail(ctx, "cannot reduce over a zero-size dimension (the operation has no identity)");
  int ct = in->dtype == PX_F32 ? CT_F32 : px_is_floating(in->dtype) ? CT_F64 : CT_I64;
  bool fl = ct != CT_I64;
  rplan P;
  plan_build(&P, in, mask);
  if ((P.inner && P.nr != 0) || (!P.inner && P.nr > 1))
    return px_fail(ctx, "internal error: arg-reduction over several separate dims");
  void *buf;
  int64_t pl;
  if (chunk_buf(ctx, in, ct, P.len, &buf, &pl)) return ERR;
  odo ko;
  odo_init(&ko, P.nk, P.ksz, P.kst);
  int64_t o = 0;
  if (P.inner) {
    for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko), o++) {
      int64_t bj = 0, bi = 0;
      double bd = 0;
      FOR_PIECES(s, m, P.len, pl) {
        const void *p = chunk_at(in, ct, ko.off + s, m, buf);
        int64_t j = arg_chunk(ct, mx, p, m);
        if (fl) {
          double v = ct_load_d(ct, p, j), b = bd;
          if (s == 0 || (mx ? B_FMAX : B_FMIN)) {
            bd = v;
            bj = s + j;
          }
        } else {
          int64_t v = ((const int64_t *)p)[j], b = bi;
          if (s == 0 || (mx ? B_IMAX : B_IMIN)) {
            bi = v;
            bj = s + j;
          }
        }
      }
      if (idx) ((int64_t *)idx->data)[o] = bj;
      if (vals) {
        if (fl)
          store_d(vals, o, bd);
        else
          px_store_i(vals->data, vals->dtype, o, bi);
      }
    }
    return 0;
  }
  int64_t nr = P.nr ? P.rsz[0] : 1, rs = P.nr ? P.rst[0] : 0;
  void *best = px_scratch(ctx, (size_t)P.len * 8);
  int64_t *bidx = px_scratch(ctx, (size_t)P.len * 8);
  if (!best || !bidx) return ERR;
  for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko), o += P.len) {
    FOR_PIECES(s, m, P.len, pl) {
      const void *p = chunk_at(in, ct, ko.off + s, m, buf);
      for (int64_t i = 0; i < m; i++) {
        bidx[s + i] = 0;
        if (fl)
          ((double *)best)[s + i] = ct_load_d(ct, p, i);
        else
          ((int64_t *)best)[s + i] = ((const int64_t *)p)[i];
      }
    }
    for (int64_t r = 1; r < nr; r++)
      FOR_PIECES(s, m, P.len, pl)
      arg_row(ct, mx, (char *)best + s * 8, bidx + s, chunk_at(in, ct, ko.off + r * rs + s, m, buf), m, r);
    if (idx) memcpy((int64_t *)idx->data + o, bidx, (size_t)P.len * sizeof(int64_t));
    if (vals) {
      for (int64_t i = 0; i < P.len; i++) {
        if (fl)
          store_d(vals, o + i, ((double *)best)[i]);
        else
          px_store_i(vals->data, vals->dtype, o + i, ((int64_t *)best)[i]);
      }
    }
  }
  return 0;
}

/* max.dim_max / min.dim_min(self, dim, keepdim, values, indices) -> (values, indices) */
static int minmax_dim(px_ctx *ctx, px_value *const *a, bool mx) {
  px_tensor *in = a[0]->u.t, *vals = a[3]->u.t, *idx = a[4]->u.t;
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, vals)) || (st = px_require_contiguous(ctx, idx, "indices"))) return st;
  if (vals->dtype != in->dtype)
    return px_fail(ctx, "values has dtype %s, self has %s (they must match)", px_dtype_name(vals->dtype),
                   px_dtype_name(in->dtype));
  if ((st = px_require_dtype(ctx, idx, PX_I64, "indices"))) return st;
  if ((st = dim_mask1(ctx, a[1]->u.i, in->dim, mask))) return st;
  if ((st = resize_reduced(ctx, in, mask, a[2]->u.b, vals, "values")) ||
      (st = resize_reduced(ctx, in, mask, a[2]->u.b, idx, "indices")))
    return st;
  return arg_run(ctx, in, mask, mx, vals, idx);
}
static int k_max_dim(px_ctx *ctx, px_value *const *a) { return minmax_dim(ctx, a, true); }
static int k_min_dim(px_ctx *ctx, px_value *const *a) { return minmax_dim(ctx, a, false); }

/* argmax.out / argmin.out(self, dim?, keepdim, out) */
static int argmaxmin(px_ctx *ctx, px_value *const *a, bool mx) {
  px_tensor *in = a[0]->u.t, *out = a[3]->u.t;
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, out)) || (st = px_require_dtype(ctx, out, PX_I64, "out"))) return st;
  if (a[1]->tag == PX_V_NONE) {
    if (in->numel == 0)
      return px_fail(ctx, "cannot take the %s of an empty tensor without a dim", mx ? "argmax" : "argmin");
    for (int k = 0; k < PX_MAX_DIM; k++) mask[k] = k < in->dim;
  } else if ((st = dim_mask1(ctx, a[1]->u.i, in->dim, mask))) {
    return st;
  }
  if ((st = resize_reduced(ctx, in, mask, a[2]->u.b, out, "out"))) return st;
  return arg_run(ctx, in, mask, mx, NULL, out);
}
static int k_argmax(px_ctx *ctx, px_value *const *a) { return argmaxmin(ctx, a, true); }
static int k_argmin(px_ctx *ctx, px_value *const *a) { return argmaxmin(ctx, a, false); }

const px_kernel_def px_kernels_argminmax[] = {
    {"aten::max.dim_max", "TIBTT|X", k_max_dim},
    {"aten::min.dim_min", "TIBTT|X", k_min_dim},
    {"aten::argmax.out", "TiBT|T", k_argmax},
    {"aten::argmin.out", "TiBT|T", k_argmin},
    {NULL, NULL, NULL},
};
