/*
 * plan.h - what the reductions over dims share (private, header-only): the
 * dim mask and reduced output shape, the reduction plan, the compute types
 * and the float32 chunk loops. reduce.c (sum, mean, prod, amax / amin, any /
 * all), argminmax.c (max / min with indices, argmax / argmin) and var.c (var
 * / std) run on it; scan.c and sort.c use the small helpers at the end.
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
 */
#ifndef PX_REDUCTION_PLAN_H
#define PX_REDUCTION_PLAN_H

#include <math.h>
#include <string.h>

#include "kernels/common.h"

#define ERR PYEXEC_ERR_EXECUTION

/* ---- dims and shapes ---------------------------------------------------- */

/* mask[k] = whether dim k is reduced, from an optional dim list. None means
 * every dim; an empty list means every dim when `empty_all`, else none. */
static inline int dims_mask(px_ctx *ctx, px_value *v, int dim, bool empty_all, bool *mask) {
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
static inline int dim_mask1(px_ctx *ctx, int64_t d, int dim, bool *mask) {
  for (int k = 0; k < PX_MAX_DIM; k++) mask[k] = false;
  int w = px_wrap_dim(ctx, d, dim);
  if (w < 0) return ERR;
  if (dim > 0) mask[w] = true;
  return 0;
}

/* Resizes `out` to the reduction of `in` over `mask`. */
static inline int resize_reduced(px_ctx *ctx, const px_tensor *in, const bool *mask, bool keepdim,
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

static inline int check_dtype_arg(px_ctx *ctx, const px_value *dt, const px_tensor *out) {
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
static inline void plan_build(rplan *p, const px_tensor *in, const bool *mask) {
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

static inline void odo_init(odo *o, int n, const int64_t *sz, const int64_t *st) {
  o->n = n;
  o->sz = sz;
  o->st = st;
  for (int k = 0; k < n; k++) o->idx[k] = 0;
  o->off = 0;
}

/* Moves the odometer to its i-th position (0 <= i < product of sizes). */
static inline void odo_seek(odo *o, int64_t i) {
  o->off = 0;
  for (int k = o->n - 1; k >= 0; k--) {
    o->idx[k] = i % o->sz[k];
    i /= o->sz[k];
    o->off += o->idx[k] * o->st[k];
  }
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

/* ---- one output's elements in order ------------------------------------- */

/* The elements output o reduces, one by one in row-major order of the
 * reduced dims: the order of ExecuTorch's sequential reductions, which the
 * float16 / bfloat16 kernels that accumulate in the 16-bit type follow.
 *   seqwalk w;  seq_begin(&w, &P, o);
 *   for (int64_t off; seq_next(&w, &off);) ... element `off` of the input */
typedef struct seqwalk {
  const rplan *P;
  odo ro;
  int64_t base, j, rit;
} seqwalk;

static inline void seq_begin(seqwalk *w, const rplan *P, int64_t o) {
  odo ko;
  w->P = P;
  odo_init(&w->ro, P->nr, P->rsz, P->rst);
  odo_init(&ko, P->nk, P->ksz, P->kst);
  odo_seek(&ko, P->inner ? o : o / P->len);
  w->base = P->inner ? ko.off : ko.off + o % P->len;
  w->j = 0;
  w->rit = 0;
}

static inline bool seq_next(seqwalk *w, int64_t *off) {
  const rplan *P = w->P;
  if (w->rit >= P->riters) return false;
  if (P->inner) {
    *off = w->base + w->ro.off + w->j;
    if (++w->j < P->len) return true;
    w->j = 0;
  } else {
    *off = w->base + w->ro.off;
  }
  w->rit++;
  odo_next(&w->ro);
  return true;
}

/* ---- compute types ------------------------------------------------------ */

enum { CT_F32, CT_F64, CT_I64, CT_U8 };

static inline int ct_dtype(int ct) {
  switch (ct) {
    case CT_F32: return PX_F32;
    case CT_F64: return PX_F64;
    case CT_I64: return PX_I64;
    default: return PX_U8;
  }
}

static inline size_t ct_size(int ct) { return ct == CT_U8 ? 1 : ct == CT_F32 ? 4 : 8; }

/* Scratch for converting pieces of at most PIECE elements when in's dtype
 * differs from the compute type (CT_U8 reads bool / uint8 bytes in place).
 * *buf = NULL when no conversion is needed; *piece = how many elements to
 * take at a time (all `n` without conversion). */
#define PIECE 2048
static inline int chunk_buf(px_ctx *ctx, const px_tensor *in, int ct, int64_t n, void **buf,
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

static inline void store_d(px_tensor *out, int64_t k, double v) {
  if (out->dtype == PX_F32)
    ((float *)out->data)[k] = (float)v;
  else
    px_store_d(out->data, out->dtype, k, v);
}

static inline int check_io(px_ctx *ctx, const px_tensor *in, const px_tensor *out) {
  int st;
  if ((st = px_require_contiguous(ctx, in, "self")) || (st = px_require_contiguous(ctx, out, "out")))
    return st;
  return 0;
}

/* Sizes of `t` around dim d: outer * n * inner. */
static inline void split_dim(const px_tensor *t, int d, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = t->dim ? px_prod(t->sizes, 0, d) : 1;
  *n = t->dim ? t->sizes[d] : 1;
  *inner = t->dim ? px_prod(t->sizes, d + 1, t->dim) : 1;
}

/* float32 chunk loops (reduce.c): the sum of n contiguous floats (blocks
 * of 512 in float lanes, block sums in double), and the max / min with NaN
 * propagating (blocks known to be finite skip the NaN test). */
double px_red_sum_f32(const float *restrict p, int64_t n);
float px_red_max_f32(const float *restrict p, int64_t n);
float px_red_min_f32(const float *restrict p, int64_t n);
/* The sum of n contiguous doubles (8 lanes); acc[i] += p[i] over a row of n
 * floats or doubles, accumulated in double. */
double px_red_sum_f64(const double *restrict p, int64_t n);
void px_red_row_sum_f32(double *restrict acc, const float *restrict p, int64_t n);
void px_red_row_sum_f64(double *restrict acc, const double *restrict p, int64_t n);

/* The sum in double of n contiguous float16 (bf16 = 0) or bfloat16 values,
 * the bits of converting them to double and px_red_sum_f64 (reduce_x86.c;
 * for a CPU with AVX-512F, or AVX2 and F16C). */
#if defined(__GNUC__) && defined(__x86_64__)
#define PX_RED_X86 1
double px_red_sum16_avx512(int bf16, const uint16_t *p, int64_t n);
double px_red_sum16_avx2(int bf16, const uint16_t *p, int64_t n);
/* s[q] = px_red_sum16_avx512(bf16, p[q], n) for q < 4, the four together. */
void px_red_sum16x4_avx512(int bf16, const uint16_t *const p[4], int64_t n, double s[4]);
#else
#define PX_RED_X86 0
#endif

#endif /* PX_REDUCTION_PLAN_H */
