/*
 * reduction.c - reductions over dims (sum, mean, prod, amax / amin, max / min
 * with indices, argmax / argmin, any / all, var / std), scans (cumsum,
 * cumprod) and sorting (sort, topk).
 *
 * Dim reductions share one plan (rplan). The (contiguous) input is described
 * by its dims with size-1 dims dropped and neighbouring dims of the same kind
 * (reduced / kept) merged; the innermost merged dim decides the loop form:
 *   INNER  it is reduced: each output reduces contiguous chunks of `len`
 *          elements (one chunk per position of the outer reduced dims);
 *   ROW    it is kept: each block of `len` contiguous outputs accumulates
 *          contiguous rows of `len` elements, one row per reduced position.
 * Both forms run tight loops over contiguous memory, written as independent
 * lanes so that -O2 vectorises them. The loops exist for a few compute types
 * (float32, float64, int64, and bytes for bool); an input of another dtype is
 * converted into scratch memory PIECE elements at a time. float32 sums add
 * blocks of 512 in float lanes and the block sums in double; max / min skip
 * the NaN test for blocks known to be finite.
 *
 * Sorting (sort, topk) maps values to order-preserving 64-bit keys and runs
 * one stable merge sort (or, for small k, an insertion selection).
 */
#include <math.h>
#include <string.h>

#include "../kernel.h"

#define ERR PYEXEC_ERR_EXECUTION

/* ---- dims and shapes ---------------------------------------------------- */

/* mask[k] = whether dim k is reduced, from an optional dim list. None means
 * every dim; an empty list means every dim when `empty_all`, else none. */
static int dims_mask(px_ctx *ctx, px_value *v, int dim, bool empty_all, bool *mask) {
  for (int k = 0; k < PX_MAX_DIM; k++) mask[k] = false;
  if (v->tag == PX_V_NONE || (v->u.il.n == 0 && empty_all)) {
    for (int k = 0; k < dim; k++) mask[k] = true;
    return 0;
  }
  const int64_t *d = px_intlist(v);
  for (uint32_t i = 0; i < v->u.il.n; i++) {
    int w = px_wrap_dim(ctx, d[i], dim);
    if (w < 0) return ERR;
    if (dim == 0) continue; /* a 0-d tensor accepts dim 0 / -1 */
    if (mask[w]) return px_fail(ctx, "dim %d appears more than once in the list of dims", w);
    mask[w] = true;
  }
  return 0;
}

/* Mask for one dim (a 0-d tensor accepts 0 / -1 and reduces nothing). */
static int dim_mask1(px_ctx *ctx, int64_t d, int dim, bool *mask) {
  for (int k = 0; k < PX_MAX_DIM; k++) mask[k] = false;
  int w = px_wrap_dim(ctx, d, dim);
  if (w < 0) return ERR;
  if (dim > 0) mask[w] = true;
  return 0;
}

/* Resizes `out` to the reduction of `in` over `mask`. */
static int resize_reduced(px_ctx *ctx, const px_tensor *in, const bool *mask, bool keepdim,
                          px_tensor *out, const char *what) {
  int64_t sz[PX_MAX_DIM];
  int n = 0;
  for (int k = 0; k < in->dim; k++) {
    if (!mask[k])
      sz[n++] = in->sizes[k];
    else if (keepdim)
      sz[n++] = 1;
  }
  if (out->dim != n)
    return px_fail(ctx, "%s has rank %d, the reduction of a rank-%d input gives rank %d", what,
                   (int)out->dim, (int)in->dim, n);
  return px_resize(ctx, out, n, sz);
}

static int check_dtype_arg(px_ctx *ctx, const px_value *dt, const px_tensor *out) {
  if (dt->tag != PX_V_NONE && dt->u.i != out->dtype)
    return px_fail(ctx, "dtype argument is %s but out has dtype %s", px_dtype_name((int)dt->u.i),
                   px_dtype_name(out->dtype));
  return 0;
}

/* ---- reduction plan ----------------------------------------------------- */

typedef struct rplan {
  int64_t nout, nred; /* outputs; elements reduced into each */
  bool inner;         /* innermost merged dim is reduced (INNER form) */
  int64_t len;        /* its length */
  int nk, nr;         /* the other kept / reduced merged dims, outer to inner */
  int64_t ksz[PX_MAX_DIM], kst[PX_MAX_DIM];
  int64_t rsz[PX_MAX_DIM], rst[PX_MAX_DIM];
  int64_t kiters, riters; /* products of ksz / rsz */
} rplan;

/* `in` must be contiguous and non-empty. */
static void plan_build(rplan *p, const px_tensor *in, const bool *mask) {
  int64_t gsz[PX_MAX_DIM], gst[PX_MAX_DIM];
  bool gred[PX_MAX_DIM];
  int ng = 0;
  p->nout = 1;
  p->nred = 1;
  for (int k = 0; k < in->dim; k++) {
    int64_t s = in->sizes[k];
    if (mask[k])
      p->nred *= s;
    else
      p->nout *= s;
    if (s == 1) continue;
    if (ng > 0 && gred[ng - 1] == mask[k]) {
      gsz[ng - 1] *= s;
      gst[ng - 1] = in->strides[k];
    } else {
      gsz[ng] = s;
      gst[ng] = in->strides[k];
      gred[ng] = mask[k];
      ng++;
    }
  }
  if (ng == 0) {
    p->inner = true;
    p->len = 1;
  } else {
    ng--;
    p->inner = gred[ng];
    p->len = gsz[ng];
  }
  p->nk = p->nr = 0;
  p->kiters = p->riters = 1;
  for (int g = 0; g < ng; g++) {
    if (gred[g]) {
      p->rsz[p->nr] = gsz[g];
      p->rst[p->nr++] = gst[g];
      p->riters *= gsz[g];
    } else {
      p->ksz[p->nk] = gsz[g];
      p->kst[p->nk++] = gst[g];
      p->kiters *= gsz[g];
    }
  }
}

/* Odometer over a few dims; `off` is the element offset of the current index
 * and wraps back to 0 after the last one. */
typedef struct odo {
  int n;
  const int64_t *sz, *st;
  int64_t idx[PX_MAX_DIM];
  int64_t off;
} odo;

static void odo_init(odo *o, int n, const int64_t *sz, const int64_t *st) {
  o->n = n;
  o->sz = sz;
  o->st = st;
  for (int k = 0; k < n; k++) o->idx[k] = 0;
  o->off = 0;
}

static inline void odo_next(odo *o) {
  for (int k = o->n - 1; k >= 0; k--) {
    if (++o->idx[k] < o->sz[k]) {
      o->off += o->st[k];
      return;
    }
    o->off -= o->st[k] * (o->sz[k] - 1);
    o->idx[k] = 0;
  }
}

/* ---- compute types ------------------------------------------------------ */

enum { CT_F32, CT_F64, CT_I64, CT_U8 };

static int ct_dtype(int ct) {
  switch (ct) {
    case CT_F32: return PX_F32;
    case CT_F64: return PX_F64;
    case CT_I64: return PX_I64;
    default: return PX_U8;
  }
}

static size_t ct_size(int ct) { return ct == CT_U8 ? 1 : ct == CT_F32 ? 4 : 8; }

/* Scratch for converting pieces of at most PIECE elements when in's dtype
 * differs from the compute type (CT_U8 reads bool / uint8 bytes in place).
 * *buf = NULL when no conversion is needed; *piece = how many elements to
 * take at a time (all `n` without conversion). */
#define PIECE 2048
static int chunk_buf(px_ctx *ctx, const px_tensor *in, int ct, int64_t n, void **buf,
                     int64_t *piece) {
  *buf = NULL;
  *piece = n;
  if (ct == CT_U8 || in->dtype == ct_dtype(ct)) return 0;
  if (*piece > PIECE) *piece = PIECE;
  *buf = px_scratch(ctx, (size_t)*piece * ct_size(ct));
  return *buf ? 0 : ERR;
}

/* Loops s over [0, len) in steps of pl, with m = the length of each step. */
#define FOR_PIECES(s, m, len, pl) \
  for (int64_t s = 0, m = (len) < (pl) ? (len) : (pl); s < (len); \
       s += (pl), m = (len) - s < (pl) ? (len) - s : (pl))

static inline const void *chunk_at(const px_tensor *in, int ct, int64_t off, int64_t n, void *buf) {
  const char *p = (const char *)in->data + (size_t)off * px_elsize(in->dtype);
  if (!buf) return p;
  px_convert(buf, ct_dtype(ct), p, in->dtype, n);
  return buf;
}

/* ---- chunk and row loops ------------------------------------------------ */

enum { RK_SUM, RK_PROD, RK_MAX, RK_MIN, RK_ANY, RK_ALL };

#define LANES 8

/* R NAME(p, n): folds n contiguous T into an R with STEP (a = accumulator,
 * v = element as R), in 8 independent lanes (kept in registers) merged with
 * COMBINE (a, v = two lanes). */
#define LSTEP_(L, K, R, STEP)  \
  {                            \
    R a = L, v = (R)p[i + K];  \
    L = (STEP);                \
  }
#define LCOMB_(L, R, COMBINE) \
  {                           \
    R v = L;                  \
    a = (COMBINE);            \
  }
#define DEF_CHUNK_C(NAME, T, R, INIT, STEP, COMBINE)                                       \
  static R NAME(const T *restrict p, int64_t n) {                                          \
    R l0 = (INIT), l1 = l0, l2 = l0, l3 = l0, l4 = l0, l5 = l0, l6 = l0, l7 = l0;          \
    int64_t i = 0;                                                                         \
    for (; i + 8 <= n; i += 8) {                                                           \
      LSTEP_(l0, 0, R, STEP) LSTEP_(l1, 1, R, STEP) LSTEP_(l2, 2, R, STEP)                 \
      LSTEP_(l3, 3, R, STEP) LSTEP_(l4, 4, R, STEP) LSTEP_(l5, 5, R, STEP)                 \
      LSTEP_(l6, 6, R, STEP) LSTEP_(l7, 7, R, STEP)                                        \
    }                                                                                      \
    R a = l0;                                                                              \
    LCOMB_(l1, R, COMBINE) LCOMB_(l2, R, COMBINE) LCOMB_(l3, R, COMBINE)                   \
    LCOMB_(l4, R, COMBINE) LCOMB_(l5, R, COMBINE) LCOMB_(l6, R, COMBINE)                   \
    LCOMB_(l7, R, COMBINE)                                                                 \
    for (; i < n; i++) {                                                                   \
      R v = (R)p[i];                                                                       \
      a = (STEP);                                                                          \
    }                                                                                      \
    return a;                                                                              \
  }

#define DEF_CHUNK(NAME, T, R, INIT, STEP) DEF_CHUNK_C(NAME, T, R, INIT, STEP, STEP)

/* NAME(acc, p, n): acc[i] = STEP(acc[i], p[i]). */
#define DEF_ROW(NAME, T, R, STEP)                                            \
  static void NAME(R *restrict acc, const T *restrict p, int64_t n) {       \
    int64_t i = 0;                                                          \
    for (; i + LANES <= n; i += LANES)                                      \
      for (int j = 0; j < LANES; j++) {                                     \
        R a = acc[i + j], v = (R)p[i + j];                                  \
        acc[i + j] = (STEP);                                                \
      }                                                                     \
    for (; i < n; i++) {                                                    \
      R a = acc[i], v = (R)p[i];                                            \
      acc[i] = (STEP);                                                      \
    }                                                                       \
  }

#define S_ADD (a + v)
#define S_MUL (a * v)
#define S_IADD ((int64_t)((uint64_t)a + (uint64_t)v))
#define S_IMUL ((int64_t)((uint64_t)a * (uint64_t)v))
#define S_CNT (a + (v != 0))
/* NaN propagates: once a is NaN nothing replaces it. */
#define S_FMAX ((v > a || v != v) ? v : a)
#define S_FMIN ((v < a || v != v) ? v : a)
#define S_IMAX (v > a ? v : a)
#define S_IMIN (v < a ? v : a)
#define S_ANY (a | (int64_t)(v != 0))
#define S_ALL (a & (int64_t)(v != 0))

DEF_CHUNK(ch_sum_f64, double, double, 0.0, S_ADD)
DEF_CHUNK(ch_prod_f64, double, double, 1.0, S_MUL)
DEF_CHUNK(ch_max_f32_nan, float, float, -INFINITY, S_FMAX)
DEF_CHUNK(ch_min_f32_nan, float, float, INFINITY, S_FMIN)
/* Without the NaN test the step compiles to maxss / minss (8 chains). */
DEF_CHUNK(ch_max_f32_fin, float, float, -INFINITY, (v > a ? v : a))
DEF_CHUNK(ch_min_f32_fin, float, float, INFINITY, (v < a ? v : a))
DEF_CHUNK(ch_max_f64, double, double, -INFINITY, S_FMAX)
DEF_CHUNK(ch_min_f64, double, double, INFINITY, S_FMIN)
DEF_CHUNK(ch_sum_i64, int64_t, int64_t, 0, S_IADD)
DEF_CHUNK(ch_prod_i64, int64_t, int64_t, 1, S_IMUL)
DEF_CHUNK(ch_max_i64, int64_t, int64_t, INT64_MIN, S_IMAX)
DEF_CHUNK(ch_min_i64, int64_t, int64_t, INT64_MAX, S_IMIN)
DEF_CHUNK(ch_any_i64, int64_t, int64_t, 0, S_ANY)
DEF_CHUNK(ch_all_i64, int64_t, int64_t, 1, S_ALL)
DEF_CHUNK(ch_any_f64, double, double, 0.0, ((a != 0 || v != 0) ? 1.0 : 0.0))
DEF_CHUNK(ch_all_f64, double, double, 1.0, ((a != 0 && v != 0) ? 1.0 : 0.0))
DEF_CHUNK_C(ch_cnt_u8, uint8_t, int64_t, 0, S_CNT, S_IADD)
DEF_CHUNK(ch_any_u8, uint8_t, int64_t, 0, S_ANY)
DEF_CHUNK(ch_all_u8, uint8_t, int64_t, 1, S_ALL)

DEF_ROW(rw_sum_f32, float, double, S_ADD)
DEF_ROW(rw_sum_f64, double, double, S_ADD)
DEF_ROW(rw_prod_f64, double, double, S_MUL)
DEF_ROW(rw_max_f32_nan, float, double, S_FMAX)
DEF_ROW(rw_min_f32_nan, float, double, S_FMIN)
DEF_ROW(rw_max_f32_fin, float, double, (v > a ? v : a))
DEF_ROW(rw_min_f32_fin, float, double, (v < a ? v : a))
DEF_ROW(rw_max_f64, double, double, S_FMAX)
DEF_ROW(rw_min_f64, double, double, S_FMIN)
DEF_ROW(rw_sum_i64, int64_t, int64_t, S_IADD)
DEF_ROW(rw_prod_i64, int64_t, int64_t, S_IMUL)
DEF_ROW(rw_max_i64, int64_t, int64_t, S_IMAX)
DEF_ROW(rw_min_i64, int64_t, int64_t, S_IMIN)
DEF_ROW(rw_any_i64, int64_t, int64_t, S_ANY)
DEF_ROW(rw_all_i64, int64_t, int64_t, S_ALL)
DEF_ROW(rw_cnt_u8, uint8_t, int64_t, S_CNT)
DEF_ROW(rw_any_u8, uint8_t, int64_t, S_ANY)
DEF_ROW(rw_all_u8, uint8_t, int64_t, S_ALL)

/* float32 sum: blocks of 512 elements summed in 16 float lanes (SIMD-friendly,
 * each lane adds at most 32 values), block sums accumulated in double. */
#define F4_(A, B, C, D, K) \
  A += p[i + K];           \
  B += p[i + K + 1];       \
  C += p[i + K + 2];       \
  D += p[i + K + 3];
static double ch_sum_f32(const float *restrict p, int64_t n) {
  double total = 0;
  int64_t i = 0;
  while (i + 16 <= n) {
    int64_t end = i + 512 < n ? i + 512 : n;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    float c0 = 0, c1 = 0, c2 = 0, c3 = 0, d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (; i + 16 <= end; i += 16) {
      F4_(a0, a1, a2, a3, 0)
      F4_(b0, b1, b2, b3, 4)
      F4_(c0, c1, c2, c3, 8)
      F4_(d0, d1, d2, d3, 12)
    }
    total += (double)((a0 + b0) + (c0 + d0)) + (double)((a1 + b1) + (c1 + d1)) +
             (double)((a2 + b2) + (c2 + d2)) + (double)((a3 + b3) + (c3 + d3));
  }
  for (; i < n; i++) total += p[i];
  return total;
}

/* Whether p[0..n) is free of NaN and infinities: the sum of v * 0 (16 float
 * lanes, vectorised) is NaN exactly when one is present. */
#define Z4_(A, B, C, D, K)    \
  A += p[i + K] * 0.0f;       \
  B += p[i + K + 1] * 0.0f;   \
  C += p[i + K + 2] * 0.0f;   \
  D += p[i + K + 3] * 0.0f;
static bool f32_all_finite(const float *restrict p, int64_t n) {
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0, d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Z4_(a0, a1, a2, a3, 0)
    Z4_(b0, b1, b2, b3, 4)
    Z4_(c0, c1, c2, c3, 8)
    Z4_(d0, d1, d2, d3, 12)
  }
  float t = ((a0 + a1) + (a2 + a3)) + ((b0 + b1) + (b2 + b3)) + ((c0 + c1) + (c2 + c3)) +
            ((d0 + d1) + (d2 + d3));
  for (; i < n; i++) t += p[i] * 0.0f;
  return t == t;
}

/* float32 max / min with NaN propagation: blocks free of NaN / inf (checked
 * first, while the block is in cache) take the fast loop. */
#define F32_BLOCK 1024
static float ch_max_f32(const float *restrict p, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i += F32_BLOCK) {
    int64_t b = n - i < F32_BLOCK ? n - i : F32_BLOCK;
    float v = f32_all_finite(p + i, b) ? ch_max_f32_fin(p + i, b) : ch_max_f32_nan(p + i, b);
    if (v != v) return v;
    if (v > m) m = v;
  }
  return m;
}
static float ch_min_f32(const float *restrict p, int64_t n) {
  float m = INFINITY;
  for (int64_t i = 0; i < n; i += F32_BLOCK) {
    int64_t b = n - i < F32_BLOCK ? n - i : F32_BLOCK;
    float v = f32_all_finite(p + i, b) ? ch_min_f32_fin(p + i, b) : ch_min_f32_nan(p + i, b);
    if (v != v) return v;
    if (v < m) m = v;
  }
  return m;
}

/* Reductions carried in double: sum / prod / max / min of floating types. */
static double chunk_d(int rk, int ct, const void *p, int64_t n) {
  if (ct == CT_F32) {
    switch (rk) {
      case RK_SUM: return ch_sum_f32(p, n);
      case RK_MAX: return ch_max_f32(p, n);
      case RK_MIN: return ch_min_f32(p, n);
      default: return 0.0;
    }
  }
  switch (rk) {
    case RK_SUM: return ch_sum_f64(p, n);
    case RK_PROD: return ch_prod_f64(p, n);
    case RK_MAX: return ch_max_f64(p, n);
    case RK_MIN: return ch_min_f64(p, n);
    case RK_ANY: return ch_any_f64(p, n);
    default: return ch_all_f64(p, n);
  }
}

static void row_d(int rk, int ct, double *acc, const void *p, int64_t n) {
  if (ct == CT_F32) {
    switch (rk) {
      case RK_SUM: rw_sum_f32(acc, p, n); return;
      /* a NaN already in acc stays: v > NaN is false */
      case RK_MAX:
        if (f32_all_finite(p, n))
          rw_max_f32_fin(acc, p, n);
        else
          rw_max_f32_nan(acc, p, n);
        return;
      case RK_MIN:
        if (f32_all_finite(p, n))
          rw_min_f32_fin(acc, p, n);
        else
          rw_min_f32_nan(acc, p, n);
        return;
      default: return;
    }
  }
  switch (rk) {
    case RK_SUM: rw_sum_f64(acc, p, n); return;
    case RK_PROD: rw_prod_f64(acc, p, n); return;
    case RK_MAX: rw_max_f64(acc, p, n); return;
    case RK_MIN: rw_min_f64(acc, p, n); return;
    default: return;
  }
}

/* Reductions carried in int64: integer sum / prod / max / min, any / all. */
static int64_t chunk_i(int rk, int ct, const void *p, int64_t n) {
  if (ct == CT_U8) {
    switch (rk) {
      case RK_SUM: return ch_cnt_u8(p, n);
      case RK_ANY: return ch_any_u8(p, n);
      default: return ch_all_u8(p, n);
    }
  }
  if (ct == CT_F64) return chunk_d(rk, ct, p, n) != 0.0; /* any / all of floats */
  switch (rk) {
    case RK_SUM: return ch_sum_i64(p, n);
    case RK_PROD: return ch_prod_i64(p, n);
    case RK_MAX: return ch_max_i64(p, n);
    case RK_MIN: return ch_min_i64(p, n);
    case RK_ANY: return ch_any_i64(p, n);
    default: return ch_all_i64(p, n);
  }
}

static void row_i(int rk, int ct, int64_t *acc, const void *p, int64_t n) {
  if (ct == CT_U8) {
    switch (rk) {
      case RK_SUM: rw_cnt_u8(acc, p, n); return;
      case RK_ANY: rw_any_u8(acc, p, n); return;
      default: rw_all_u8(acc, p, n); return;
    }
  }
  if (ct == CT_F64) { /* any / all of floats */
    const double *q = p;
    for (int64_t i = 0; i < n; i++) {
      if (rk == RK_ANY)
        acc[i] |= q[i] != 0;
      else
        acc[i] &= q[i] != 0;
    }
    return;
  }
  switch (rk) {
    case RK_SUM: rw_sum_i64(acc, p, n); return;
    case RK_PROD: rw_prod_i64(acc, p, n); return;
    case RK_MAX: rw_max_i64(acc, p, n); return;
    case RK_MIN: rw_min_i64(acc, p, n); return;
    case RK_ANY: rw_any_i64(acc, p, n); return;
    default: rw_all_i64(acc, p, n); return;
  }
}

static double ident_d(int rk) {
  switch (rk) {
    case RK_PROD: return 1.0;
    case RK_MAX: return -INFINITY;
    case RK_MIN: return INFINITY;
    default: return 0.0;
  }
}

static int64_t ident_i(int rk) {
  switch (rk) {
    case RK_PROD:
    case RK_ALL: return 1;
    case RK_MAX: return INT64_MIN;
    case RK_MIN: return INT64_MAX;
    default: return 0;
  }
}

static double combine_d(int rk, double a, double v) {
  switch (rk) {
    case RK_SUM: return a + v;
    case RK_PROD: return a * v;
    case RK_MAX: return S_FMAX;
    default: return S_FMIN;
  }
}

static int64_t combine_i(int rk, int64_t a, int64_t v) {
  switch (rk) {
    case RK_SUM: return S_IADD;
    case RK_PROD: return S_IMUL;
    case RK_MAX: return S_IMAX;
    case RK_MIN: return S_IMIN;
    case RK_ANY: return a | v;
    default: return a & v;
  }
}

/* The compute type of a reduction of `in_dtype` into `out_dtype`. Sums and
 * products follow torch: the input is taken as the output's dtype. */
static int pick_ct(int rk, int in_dtype, int out_dtype) {
  switch (rk) {
    case RK_SUM:
    case RK_PROD:
      if (px_is_floating(out_dtype)) return (rk == RK_SUM && in_dtype == PX_F32) ? CT_F32 : CT_F64;
      if (rk == RK_SUM && in_dtype == PX_BOOL) return CT_U8;
      return CT_I64;
    case RK_MAX:
    case RK_MIN:
      if (in_dtype == PX_F32) return CT_F32;
      return px_is_floating(in_dtype) ? CT_F64 : CT_I64;
    default:
      if (in_dtype == PX_BOOL || in_dtype == PX_U8) return CT_U8;
      return px_is_floating(in_dtype) ? CT_F64 : CT_I64;
  }
}

static inline void store_d(px_tensor *out, int64_t k, double v) {
  if (out->dtype == PX_F32)
    ((float *)out->data)[k] = (float)v;
  else
    px_store_d(out->data, out->dtype, k, v);
}

/* out = reduction of in over mask (out already resized). mean: divide by the
 * number of reduced elements. */
static int reduce_run(px_ctx *ctx, const px_tensor *in, px_tensor *out, const bool *mask, int rk,
                      bool mean) {
  if (out->numel == 0) return 0;
  int ct = pick_ct(rk, in->dtype, out->dtype);
  bool dcar = (ct == CT_F32 || ct == CT_F64) && rk != RK_ANY && rk != RK_ALL;
  if (in->numel == 0) { /* every output reduces zero elements */
    if (rk == RK_MAX || rk == RK_MIN)
      return px_fail(ctx, "cannot reduce over a zero-size dimension (the operation has no identity)");
    for (int64_t k = 0; k < out->numel; k++) {
      if (mean)
        store_d(out, k, NAN);
      else if (dcar)
        store_d(out, k, ident_d(rk));
      else
        px_store_i(out->data, out->dtype, k, ident_i(rk));
    }
    return 0;
  }
  rplan P;
  plan_build(&P, in, mask);
  void *buf;
  int64_t pl;
  if (chunk_buf(ctx, in, ct, P.len, &buf, &pl)) return ERR;
  odo ko, ro;
  odo_init(&ko, P.nk, P.ksz, P.kst);
  odo_init(&ro, P.nr, P.rsz, P.rst);
  double nred = (double)P.nred;
  int64_t o = 0;
  if (P.inner) {
    for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko)) {
      if (dcar) {
        double a = ident_d(rk);
        for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
          FOR_PIECES(s, m, P.len, pl)
          a = combine_d(rk, a, chunk_d(rk, ct, chunk_at(in, ct, ko.off + ro.off + s, m, buf), m));
        store_d(out, o++, mean ? a / nred : a);
      } else {
        int64_t a = ident_i(rk);
        for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
          FOR_PIECES(s, m, P.len, pl)
          a = combine_i(rk, a, chunk_i(rk, ct, chunk_at(in, ct, ko.off + ro.off + s, m, buf), m));
        px_store_i(out->data, out->dtype, o++, a);
      }
    }
    return 0;
  }
  /* ROW form */
  void *accp = px_scratch(ctx, (size_t)P.len * 8);
  if (!accp) return ERR;
  for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko)) {
    if (dcar) {
      double *acc = accp, id = ident_d(rk);
      for (int64_t i = 0; i < P.len; i++) acc[i] = id;
      for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, P.len, pl)
        row_d(rk, ct, acc + s, chunk_at(in, ct, ko.off + ro.off + s, m, buf), m);
      if (mean)
        for (int64_t i = 0; i < P.len; i++) acc[i] /= nred;
      if (out->dtype == PX_F32) {
        float *q = (float *)out->data + o;
        for (int64_t i = 0; i < P.len; i++) q[i] = (float)acc[i];
      } else {
        for (int64_t i = 0; i < P.len; i++) px_store_d(out->data, out->dtype, o + i, acc[i]);
      }
    } else {
      int64_t *acc = accp, id = ident_i(rk);
      for (int64_t i = 0; i < P.len; i++) acc[i] = id;
      for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, P.len, pl)
        row_i(rk, ct, acc + s, chunk_at(in, ct, ko.off + ro.off + s, m, buf), m);
      if (out->dtype == PX_I64)
        memcpy((int64_t *)out->data + o, acc, (size_t)P.len * sizeof(int64_t));
      else
        for (int64_t i = 0; i < P.len; i++) px_store_i(out->data, out->dtype, o + i, acc[i]);
    }
    o += P.len;
  }
  return 0;
}

static int check_io(px_ctx *ctx, const px_tensor *in, const px_tensor *out) {
  int st;
  if ((st = px_require_contiguous(ctx, in, "self")) || (st = px_require_contiguous(ctx, out, "out")))
    return st;
  return 0;
}

static int check_out_dtype(px_ctx *ctx, int rk, bool mean, const px_tensor *in, const px_tensor *out) {
  if (mean && !px_is_floating(out->dtype))
    return px_fail(ctx, "mean needs a floating output dtype, out has %s (pass dtype=)",
                   px_dtype_name(out->dtype));
  if ((rk == RK_MAX || rk == RK_MIN) && out->dtype != in->dtype)
    return px_fail(ctx, "out has dtype %s, self has %s (they must match)", px_dtype_name(out->dtype),
                   px_dtype_name(in->dtype));
  if ((rk == RK_ANY || rk == RK_ALL) && out->dtype != PX_BOOL && out->dtype != PX_U8)
    return px_fail(ctx, "out has dtype %s, expected bool or uint8", px_dtype_name(out->dtype));
  return 0;
}

/* Shared body: checks, output shape, compute. dims = NULL: every dim. */
static int reduce_op(px_ctx *ctx, px_tensor *in, px_value *dims, bool empty_all, bool keepdim,
                     px_tensor *out, int rk, bool mean) {
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, out)) || (st = check_out_dtype(ctx, rk, mean, in, out))) return st;
  if (dims) {
    if ((st = dims_mask(ctx, dims, in->dim, empty_all, mask))) return st;
  } else {
    for (int k = 0; k < PX_MAX_DIM; k++) mask[k] = k < in->dim;
  }
  if ((st = resize_reduced(ctx, in, mask, keepdim, out, "out"))) return st;
  return reduce_run(ctx, in, out, mask, rk, mean);
}

static int reduce_op1(px_ctx *ctx, px_tensor *in, int64_t d, bool keepdim, px_tensor *out, int rk) {
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, out)) || (st = check_out_dtype(ctx, rk, false, in, out))) return st;
  if ((st = dim_mask1(ctx, d, in->dim, mask))) return st;
  if ((st = resize_reduced(ctx, in, mask, keepdim, out, "out"))) return st;
  return reduce_run(ctx, in, out, mask, rk, false);
}

/* sum.IntList_out(self, dim?, keepdim, dtype?, out) */
static int k_sum(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[3], a[4]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[4]->u.t, RK_SUM, false);
}

/* sum.out(self, dtype?, out) */
static int k_sum_all(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[1], a[2]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[2]->u.t, RK_SUM, false);
}

/* mean.out(self, dim?, keepdim, dtype?, out) */
static int k_mean(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[3], a[4]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[4]->u.t, RK_SUM, true);
}

/* mean.dtype_out(self, dtype?, out) */
static int k_mean_all(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[1], a[2]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[2]->u.t, RK_SUM, true);
}

/* prod.out(self, dtype?, out) */
static int k_prod_all(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[1], a[2]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[2]->u.t, RK_PROD, false);
}

/* prod.int_out(self, dim, keepdim, dtype?, out) */
static int k_prod(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[3], a[4]->u.t);
  if (st) return st;
  return reduce_op1(ctx, a[0]->u.t, a[1]->u.i, a[2]->u.b, a[4]->u.t, RK_PROD);
}

/* amax.out / amin.out(self, dim[], keepdim, out) */
static int k_amax(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[3]->u.t, RK_MAX, false);
}
static int k_amin(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[3]->u.t, RK_MIN, false);
}

/* max.unary_out / min.unary_out(self, out) */
static int k_max_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_MAX, false);
}
static int k_min_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_MIN, false);
}

/* any.out / all.out(self, dim, keepdim, out) */
static int k_any(px_ctx *ctx, px_value *const *a) {
  return reduce_op1(ctx, a[0]->u.t, a[1]->u.i, a[2]->u.b, a[3]->u.t, RK_ANY);
}
static int k_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op1(ctx, a[0]->u.t, a[1]->u.i, a[2]->u.b, a[3]->u.t, RK_ALL);
}
/* any.all_out / all.all_out(self, out) */
static int k_any_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_ANY, false);
}
static int k_all_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_ALL, false);
}
/* any.dims_out / all.dims_out(self, dim[]?, keepdim, out): an empty list
 * reduces nothing (torch). */
static int k_any_dims(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], false, a[2]->u.b, a[3]->u.t, RK_ANY, false);
}
static int k_all_dims(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], false, a[2]->u.b, a[3]->u.t, RK_ALL, false);
}

/* ---- arg-reductions: max / min with indices, argmax / argmin ------------- */

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
  float m = mx ? ch_max_f32(p, n) : ch_min_f32(p, n);
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

/* ---- variance ------------------------------------------------------------ */

/* Sum of squared deviations from m. */
#define SSD_(L, K)                  \
  {                                 \
    double d_ = (double)p[i + K] - m; \
    L += d_ * d_;                   \
  }
#define DEF_SSD(NAME, T)                                                        \
  static double NAME(const T *restrict p, int64_t n, double m) {                \
    double l0 = 0, l1 = 0, l2 = 0, l3 = 0, l4 = 0, l5 = 0, l6 = 0, l7 = 0;      \
    int64_t i = 0;                                                              \
    for (; i + 8 <= n; i += 8) {                                                \
      SSD_(l0, 0) SSD_(l1, 1) SSD_(l2, 2) SSD_(l3, 3)                           \
      SSD_(l4, 4) SSD_(l5, 5) SSD_(l6, 6) SSD_(l7, 7)                           \
    }                                                                           \
    double s = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));              \
    for (; i < n; i++) {                                                        \
      double d = (double)p[i] - m;                                              \
      s += d * d;                                                               \
    }                                                                           \
    return s;                                                                   \
  }
#define DEF_SSDROW(NAME, T)                                                             \
  static void NAME(double *restrict acc, const T *restrict p, const double *restrict m, \
                   int64_t n) {                                                         \
    for (int64_t i = 0; i < n; i++) {                                                   \
      double d = (double)p[i] - m[i];                                                   \
      acc[i] += d * d;                                                                  \
    }                                                                                   \
  }
DEF_SSD(ssd_f32, float)
DEF_SSD(ssd_f64, double)
DEF_SSDROW(ssdrow_f32, float)
DEF_SSDROW(ssdrow_f64, double)

/* var (or std when take_sqrt) over mask into vout, the mean into mout (may be
 * NULL); both already resized. Two passes in double. */
static int var_run(px_ctx *ctx, const px_tensor *in, const bool *mask, double correction,
                   bool take_sqrt, px_tensor *vout, px_tensor *mout) {
  if (vout->numel == 0) return 0;
  if (in->numel == 0) {
    for (int64_t k = 0; k < vout->numel; k++) {
      store_d(vout, k, NAN);
      if (mout) store_d(mout, k, NAN);
    }
    return 0;
  }
  int ct = in->dtype == PX_F32 ? CT_F32 : CT_F64;
  rplan P;
  plan_build(&P, in, mask);
  double nred = (double)P.nred;
  double div = nred - correction > 0 ? nred - correction : 0.0;
  void *buf;
  int64_t pl;
  if (chunk_buf(ctx, in, ct, P.len, &buf, &pl)) return ERR;
  odo ko, ro;
  odo_init(&ko, P.nk, P.ksz, P.kst);
  odo_init(&ro, P.nr, P.rsz, P.rst);
  int64_t o = 0;
  if (P.inner) {
    for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko), o++) {
      double sum = 0, q = 0;
      for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, P.len, pl) {
          const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
          sum += ct == CT_F32 ? ch_sum_f32(p, m) : ch_sum_f64(p, m);
        }
      double mu = sum / nred;
      for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, P.len, pl) {
          const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
          q += ct == CT_F32 ? ssd_f32(p, m, mu) : ssd_f64(p, m, mu);
        }
      double v = q / div;
      store_d(vout, o, take_sqrt ? sqrt(v) : v);
      if (mout) store_d(mout, o, mu);
    }
    return 0;
  }
  double *mean = px_scratch(ctx, (size_t)P.len * sizeof(double));
  double *acc = px_scratch(ctx, (size_t)P.len * sizeof(double));
  if (!mean || !acc) return ERR;
  for (int64_t kit = 0; kit < P.kiters; kit++, odo_next(&ko), o += P.len) {
    for (int64_t i = 0; i < P.len; i++) mean[i] = acc[i] = 0;
    for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
      FOR_PIECES(s, m, P.len, pl) {
        const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
        if (ct == CT_F32)
          rw_sum_f32(mean + s, p, m);
        else
          rw_sum_f64(mean + s, p, m);
      }
    for (int64_t i = 0; i < P.len; i++) mean[i] /= nred;
    for (int64_t rit = 0; rit < P.riters; rit++, odo_next(&ro))
      FOR_PIECES(s, m, P.len, pl) {
        const void *p = chunk_at(in, ct, ko.off + ro.off + s, m, buf);
        if (ct == CT_F32)
          ssdrow_f32(acc + s, p, mean + s, m);
        else
          ssdrow_f64(acc + s, p, mean + s, m);
      }
    for (int64_t i = 0; i < P.len; i++) {
      double v = acc[i] / div;
      store_d(vout, o + i, take_sqrt ? sqrt(v) : v);
      if (mout) store_d(mout, o + i, mean[i]);
    }
  }
  return 0;
}

static int var_common(px_ctx *ctx, px_tensor *in, px_value *dims, double correction, bool keepdim,
                      bool take_sqrt, px_tensor *vout, px_tensor *mout) {
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, vout))) return st;
  if (mout && (st = px_require_contiguous(ctx, mout, "mean out"))) return st;
  if (!px_is_floating(in->dtype))
    return px_fail(ctx, "var/std need a floating input, self has %s", px_dtype_name(in->dtype));
  if (vout->dtype != in->dtype)
    return px_fail(ctx, "out has dtype %s, self has %s (they must match)", px_dtype_name(vout->dtype),
                   px_dtype_name(in->dtype));
  if (mout && mout->dtype != in->dtype)
    return px_fail(ctx, "mean out has dtype %s, self has %s (they must match)",
                   px_dtype_name(mout->dtype), px_dtype_name(in->dtype));
  if ((st = dims_mask(ctx, dims, in->dim, true, mask))) return st;
  if ((st = resize_reduced(ctx, in, mask, keepdim, vout, "out"))) return st;
  if (mout && (st = resize_reduced(ctx, in, mask, keepdim, mout, "mean out"))) return st;
  return var_run(ctx, in, mask, correction, take_sqrt, vout, mout);
}

static double correction_arg(const px_value *v) {
  return v->tag == PX_V_NONE ? 1.0 : px_scalar_d(v);
}

/* var.correction_out(self, dim?, correction?, keepdim, out) */
static int k_var_corr(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, false, a[4]->u.t, NULL);
}
/* var.out(self, dim?, unbiased, keepdim, out) */
static int k_var(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], a[2]->u.b ? 1.0 : 0.0, a[3]->u.b, false, a[4]->u.t, NULL);
}
static int k_std_corr(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, true, a[4]->u.t, NULL);
}
static int k_std(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], a[2]->u.b ? 1.0 : 0.0, a[3]->u.b, true, a[4]->u.t, NULL);
}
/* var_mean.correction_out(self, dim?, correction?, keepdim, out0, out1) -> (out0, out1) */
static int k_var_mean(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, false, a[4]->u.t,
                    a[5]->u.t);
}
static int k_std_mean(px_ctx *ctx, px_value *const *a) {
  return var_common(ctx, a[0]->u.t, a[1], correction_arg(a[2]), a[3]->u.b, true, a[4]->u.t,
                    a[5]->u.t);
}

/* ---- scans ---------------------------------------------------------------- */

/* Sizes of `t` around dim d: outer * n * inner. */
static void split_dim(const px_tensor *t, int d, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = t->dim ? px_prod(t->sizes, 0, d) : 1;
  *n = t->dim ? t->sizes[d] : 1;
  *inner = t->dim ? px_prod(t->sizes, d + 1, t->dim) : 1;
}

/* cumsum / cumprod along one dim; accumulates in double (floating out) or
 * int64 (integral out), the input taken as out's dtype. */
static int scan_op(px_ctx *ctx, px_value *const *a, bool prod) {
  px_tensor *in = a[0]->u.t, *out = a[3]->u.t;
  int st;
  if ((st = check_io(ctx, in, out)) || (st = check_dtype_arg(ctx, a[2], out))) return st;
  int d = px_wrap_dim(ctx, a[1]->u.i, in->dim);
  if (d < 0) return ERR;
  if ((st = px_resize_like(ctx, out, in))) return st;
  if (in->numel == 0) return 0;
  int64_t outer, n, inner;
  split_dim(in, d, &outer, &n, &inner);
  if (in->dtype == PX_F32 && out->dtype == PX_F32) {
    const float *p = in->data;
    float *q = out->data;
    if (inner == 1) {
      for (int64_t o = 0; o < outer; o++, p += n, q += n) {
        double acc = prod ? 1.0 : 0.0;
        for (int64_t j = 0; j < n; j++) {
          acc = prod ? acc * p[j] : acc + p[j];
          q[j] = (float)acc;
        }
      }
      return 0;
    }
    double *acc = px_scratch(ctx, (size_t)inner * sizeof(double));
    if (!acc) return ERR;
    for (int64_t o = 0; o < outer; o++) {
      for (int64_t i = 0; i < inner; i++) acc[i] = prod ? 1.0 : 0.0;
      for (int64_t j = 0; j < n; j++, p += inner, q += inner) {
        if (prod)
          for (int64_t i = 0; i < inner; i++) acc[i] *= p[i];
        else
          for (int64_t i = 0; i < inner; i++) acc[i] += p[i];
        for (int64_t i = 0; i < inner; i++) q[i] = (float)acc[i];
      }
    }
    return 0;
  }
  bool fl = px_is_floating(out->dtype);
  bool same64 = in->dtype == PX_I64 && out->dtype == PX_I64;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t k = o * n * inner + i;
      if (fl) {
        double acc = prod ? 1.0 : 0.0;
        for (int64_t j = 0; j < n; j++, k += inner) {
          double v = px_load_d(in->data, in->dtype, k);
          acc = prod ? acc * v : acc + v;
          px_store_d(out->data, out->dtype, k, acc);
        }
      } else if (same64) {
        const int64_t *p = in->data;
        int64_t *q = out->data;
        uint64_t acc = prod ? 1 : 0;
        for (int64_t j = 0; j < n; j++, k += inner) {
          acc = prod ? acc * (uint64_t)p[k] : acc + (uint64_t)p[k];
          q[k] = (int64_t)acc;
        }
      } else {
        uint64_t acc = prod ? 1 : 0;
        for (int64_t j = 0; j < n; j++, k += inner) {
          uint64_t v = (uint64_t)px_load_i(in->data, in->dtype, k);
          acc = prod ? acc * v : acc + v;
          px_store_i(out->data, out->dtype, k, (int64_t)acc);
        }
      }
    }
  }
  return 0;
}

/* cumsum.out / cumprod.out(self, dim, dtype?, out) */
static int k_cumsum(px_ctx *ctx, px_value *const *a) { return scan_op(ctx, a, false); }
static int k_cumprod(px_ctx *ctx, px_value *const *a) { return scan_op(ctx, a, true); }

/* ---- sort and topk --------------------------------------------------------- */

/* Sorting works on (key, index) pairs whose unsigned 64-bit keys order like
 * the values: floats map to their order-preserving bit pattern with every NaN
 * above +inf (torch's order) and -0.0 equal to 0.0; ints flip their sign bit.
 * Descending sorts complement the key, so one stable ascending sort serves. */
typedef struct kv {
  uint64_t k;
  int64_t i;
} kv;

static inline uint64_t key_of_double(double d) {
  if (d != d) return UINT64_MAX;
  if (d == 0) d = 0.0;
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return (b >> 63) ? ~b : (b | ((uint64_t)1 << 63));
}

static inline uint64_t key_of_int(int64_t v) { return (uint64_t)v ^ ((uint64_t)1 << 63); }

/* Stable sort of a[0..n) by k: insertion-sorted runs of 16, then bottom-up
 * merges through tmp (room for n). */
static void kv_sort(kv *a, kv *tmp, int64_t n) {
  for (int64_t lo = 0; lo < n; lo += 16) {
    int64_t hi = lo + 16 < n ? lo + 16 : n;
    for (int64_t i = lo + 1; i < hi; i++) {
      kv x = a[i];
      int64_t j = i;
      while (j > lo && x.k < a[j - 1].k) {
        a[j] = a[j - 1];
        j--;
      }
      a[j] = x;
    }
  }
  kv *src = a, *dst = tmp;
  for (int64_t w = 16; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) {
        bool right = src[j].k < src[i].k;
        dst[o++] = right ? src[j++] : src[i++];
      }
      while (i < mid) dst[o++] = src[i++];
      while (j < hi) dst[o++] = src[j++];
    }
    kv *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof(kv));
}

/* The k smallest keys of a[0..n), in order (ties by position), into
 * a[0..k), by insertion into a sorted prefix; for small k. */
static void kv_select(kv *a, int64_t n, int64_t k) {
  int64_t m = 0;
  for (int64_t e = 0; e < n; e++) {
    kv x = a[e];
    if (m == k) {
      if (!(x.k < a[k - 1].k)) continue;
      m--;
    }
    int64_t j = m;
    while (j > 0 && x.k < a[j - 1].k) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = x;
    m++;
  }
}

#define SELECT_MAX_K 32

/* values / indices = the first k elements of each slice along dim d of `in`
 * sorted ascending or descending (stable). */
static int sort_run(px_ctx *ctx, const px_tensor *in, int d, int64_t k, bool desc, px_tensor *vals,
                    px_tensor *idx) {
  int st;
  if ((st = check_io(ctx, in, vals)) || (st = px_require_contiguous(ctx, idx, "indices"))) return st;
  if (vals->dtype != in->dtype)
    return px_fail(ctx, "values has dtype %s, self has %s (they must match)", px_dtype_name(vals->dtype),
                   px_dtype_name(in->dtype));
  if ((st = px_require_dtype(ctx, idx, PX_I64, "indices"))) return st;
  int64_t sz[PX_MAX_DIM];
  for (int j = 0; j < in->dim; j++) sz[j] = j == d ? k : in->sizes[j];
  if (vals->dim != in->dim || idx->dim != in->dim)
    return px_fail(ctx, "values / indices have rank %d / %d, self has rank %d", (int)vals->dim,
                   (int)idx->dim, (int)in->dim);
  if ((st = px_resize(ctx, vals, in->dim, sz)) || (st = px_resize(ctx, idx, in->dim, sz))) return st;
  if (vals->numel == 0) return 0;
  int64_t outer, n, inner;
  split_dim(in, d, &outer, &n, &inner);
  bool fl = px_is_floating(in->dtype);
  bool sel = k <= SELECT_MAX_K && k < n;
  kv *a = px_scratch(ctx, (size_t)n * sizeof(kv));
  kv *tmp = sel ? NULL : px_scratch(ctx, (size_t)n * sizeof(kv));
  if (!a || (!sel && !tmp)) return ERR;
  uint64_t flip = desc ? UINT64_MAX : 0;
  size_t es = px_elsize(in->dtype);
  const char *src = in->data;
  char *dst = vals->data;
  int64_t *di = idx->data;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i, obase = o * k * inner + i;
      if (in->dtype == PX_F32) {
        const float *p = (const float *)src + base;
        for (int64_t j = 0; j < n; j++) a[j] = (kv){key_of_double(p[j * inner]) ^ flip, j};
      } else if (fl) {
        for (int64_t j = 0; j < n; j++)
          a[j] = (kv){key_of_double(px_load_d(src, in->dtype, base + j * inner)) ^ flip, j};
      } else {
        for (int64_t j = 0; j < n; j++)
          a[j] = (kv){key_of_int(px_load_i(src, in->dtype, base + j * inner)) ^ flip, j};
      }
      if (sel)
        kv_select(a, n, k);
      else
        kv_sort(a, tmp, n);
      for (int64_t j = 0; j < k; j++) {
        int64_t so = base + a[j].i * inner, oo = obase + j * inner;
        memcpy(dst + (size_t)oo * es, src + (size_t)so * es, es);
        di[oo] = a[j].i;
      }
    }
  }
  return 0;
}

/* sort.values(self, dim, descending, values, indices) -> (values, indices) */
static int k_sort(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t;
  int d = px_wrap_dim(ctx, a[1]->u.i, in->dim);
  if (d < 0) return ERR;
  return sort_run(ctx, in, d, in->dim ? in->sizes[d] : 1, a[2]->u.b, a[3]->u.t, a[4]->u.t);
}

/* sort.values_stable(self, stable?, dim, descending, values, indices) */
static int k_sort_stable(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t;
  int d = px_wrap_dim(ctx, a[2]->u.i, in->dim);
  if (d < 0) return ERR;
  return sort_run(ctx, in, d, in->dim ? in->sizes[d] : 1, a[3]->u.b, a[4]->u.t, a[5]->u.t);
}

/* topk.values(self, k, dim, largest, sorted, values, indices) -> (values, indices);
 * the result is always sorted. */
static int k_topk(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t;
  int d = px_wrap_dim(ctx, a[2]->u.i, in->dim);
  if (d < 0) return ERR;
  int64_t n = in->dim ? in->sizes[d] : 1, k = a[1]->u.i;
  if (k < 0 || k > n)
    return px_fail(ctx, "k = %lld is out of range for a dimension of size %lld", (long long)k,
                   (long long)n);
  return sort_run(ctx, in, d, k, a[3]->u.b, a[5]->u.t, a[6]->u.t);
}

const px_kernel_def px_kernels_reduction[] = {
    {"aten::sum.IntList_out", "TlBiT|T", k_sum},
    {"aten::sum.out", "TiT|T", k_sum_all},
    {"aten::mean.out", "TlBiT|T", k_mean},
    {"aten::mean.dtype_out", "TiT|T", k_mean_all},
    {"aten::prod.out", "TiT|T", k_prod_all},
    {"aten::prod.int_out", "TIBiT|T", k_prod},
    {"aten::amax.out", "TlBT|T", k_amax},
    {"aten::amin.out", "TlBT|T", k_amin},
    {"aten::max.unary_out", "TT|T", k_max_all},
    {"aten::min.unary_out", "TT|T", k_min_all},
    {"aten::max.dim_max", "TIBTT|X", k_max_dim},
    {"aten::min.dim_min", "TIBTT|X", k_min_dim},
    {"aten::argmax.out", "TiBT|T", k_argmax},
    {"aten::argmin.out", "TiBT|T", k_argmin},
    {"aten::any.out", "TIBT|T", k_any},
    {"aten::any.all_out", "TT|T", k_any_all},
    {"aten::any.dims_out", "TlBT|T", k_any_dims},
    {"aten::all.out", "TIBT|T", k_all},
    {"aten::all.all_out", "TT|T", k_all_all},
    {"aten::all.dims_out", "TlBT|T", k_all_dims},
    {"aten::var.correction_out", "TlsBT|T", k_var_corr},
    {"aten::var.out", "TlBBT|T", k_var},
    {"aten::std.correction_out", "TlsBT|T", k_std_corr},
    {"aten::std.out", "TlBBT|T", k_std},
    {"aten::var_mean.correction_out", "TlsBTT|X", k_var_mean},
    {"aten::std_mean.correction_out", "TlsBTT|X", k_std_mean},
    {"aten::cumsum.out", "TIiT|T", k_cumsum},
    {"aten::cumprod.out", "TIiT|T", k_cumprod},
    {"aten::sort.values", "TIBTT|X", k_sort},
    {"aten::sort.values_stable", "TbIBTT|X", k_sort_stable},
    {"aten::topk.values", "TIIBBTT|X", k_topk},
    {NULL, NULL, NULL},
};
