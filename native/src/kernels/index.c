/*
 * index.c - advanced indexing (index / index_put), gather and scatter,
 * index_select, slice / select scatters, masked_select, nonzero and
 * repeat_interleave.
 *
 * Negative index values follow torch eager, kernel by kernel: index.Tensor,
 * index_put and index_put_ wrap them like Python (-1 is the last entry), as
 * do the scalar indices of select_scatter and slice_scatter; index_select,
 * gather, scatter, scatter_add and index_copy reject them, as eager does.
 * Every index is checked against its dimension before memory is touched.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"

/* ---- small helpers ------------------------------------------------------- */

static bool is_index_dtype(int dt) { return dt == PX_I64 || dt == PX_I32; }

static inline int64_t load_index(const void *base, int dt, int64_t k) {
  return dt == PX_I64 ? ((const int64_t *)base)[k] : (int64_t)((const int32_t *)base)[k];
}

/* A tensor header describing a view (only data, dtype, dim, sizes, strides
 * and numel are meaningful). */
static void view_init(px_tensor *v, void *data, int dtype, int dim, const int64_t *sizes,
                      const int64_t *strides) {
  memset(v, 0, sizeof *v);
  v->data = data;
  v->dtype = (int8_t)dtype;
  v->dim = dim;
  int64_t n = 1;
  for (int k = 0; k < dim; k++) {
    v->sizes[k] = sizes[k];
    v->strides[k] = strides[k];
    n *= sizes[k];
  }
  v->numel = n;
  v->nbytes = (size_t)n * px_elsize(dtype);
}

#define MOVE_LOOP(T)                                                        \
  do {                                                                      \
    T *d_ = (T *)dp;                                                        \
    const T *s_ = (const T *)sp;                                            \
    for (int64_t k_ = 0; k_ < n; k_++) d_[k_ * dstr] = s_[k_ * sstr];       \
  } while (0)

/* n elements of size es, strided on both sides. */
static void move_run(size_t es, char *dp, int64_t dstr, const char *sp, int64_t sstr, int64_t n) {
  if (dstr == 1 && sstr == 1) {
    memmove(dp, sp, (size_t)n * es);
    return;
  }
  switch (es) {
    case 1: MOVE_LOOP(uint8_t); break;
    case 2: MOVE_LOOP(uint16_t); break;
    case 4: MOVE_LOOP(uint32_t); break;
    default: MOVE_LOOP(uint64_t); break;
  }
}

#define ACC_LOOP(T)                                                          \
  do {                                                                       \
    T *d_ = (T *)dp;                                                         \
    const T *s_ = (const T *)sp;                                             \
    for (int64_t k_ = 0; k_ < n; k_++) d_[k_ * dstr] += s_[k_ * sstr];       \
  } while (0)

/* dst += src over n strided elements of `dtype` (bool: logical or). */
static void acc_run(int dtype, char *dp, int64_t dstr, const char *sp, int64_t sstr, int64_t n) {
  switch (dtype) {
    case PX_F32: ACC_LOOP(float); break;
    case PX_F64: ACC_LOOP(double); break;
    case PX_I64: ACC_LOOP(int64_t); break;
    case PX_I32: ACC_LOOP(int32_t); break;
    case PX_I16: ACC_LOOP(int16_t); break;
    case PX_I8: ACC_LOOP(int8_t); break;
    case PX_U8: ACC_LOOP(uint8_t); break;
    case PX_BOOL: {
      uint8_t *d_ = (uint8_t *)dp;
      const uint8_t *s_ = (const uint8_t *)sp;
      for (int64_t k = 0; k < n; k++) d_[k * dstr] = (uint8_t)((d_[k * dstr] | s_[k * sstr]) != 0);
      break;
    }
    default: /* float16 / bfloat16: add in float, round once */
      for (int64_t k = 0; k < n; k++)
        px_store_d(dp, dtype, k * dstr,
                   (double)(float)(px_load_d(dp, dtype, k * dstr) + px_load_d(sp, dtype, k * sstr)));
      break;
  }
}

/* Copies src into dst (same sizes and dtype, any strides). */
static void copy_same(px_tensor *dst, const px_tensor *src) {
  if (dst->numel == 0) return;
  px_iter it;
  px_iter_init(&it, dst->dim, dst->sizes);
  px_iter_add(&it, dst);
  px_iter_add(&it, src);
  px_iter_coalesce(&it);
  size_t es = px_elsize(dst->dtype);
  do {
    move_run(es, (char *)dst->data + it.off[0] * (int64_t)es, it.inner_stride[0],
             (const char *)src->data + it.off[1] * (int64_t)es, it.inner_stride[1], it.inner);
  } while (px_iter_next(&it));
}

/* out <- self (out resized to self's sizes). */
static int clone_into(px_ctx *ctx, px_tensor *out, const px_tensor *self) {
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  if (out->data == self->data && out->dtype == self->dtype) return 0;
  return px_copy_strided(ctx, out, self);
}

/* Fails for index v on dimension `dim` of size `size`, naming the range the
 * kernel accepts: [-size, size - 1] when it wraps negative indices, else
 * [0, size - 1]. (The executor prefixes the kernel's name.) */
static int index_oob(px_ctx *ctx, int64_t v, int dim, int64_t size, bool wraps) {
  if (size == 0)
    return px_fail(ctx, "index %lld is out of bounds for dimension %d with size 0 (no valid index)",
                   (long long)v, dim);
  if (wraps)
    return px_fail(ctx, "index %lld is out of bounds for dimension %d with size %lld (valid range "
                   "[%lld, %lld])", (long long)v, dim, (long long)size, (long long)-size,
                   (long long)(size - 1));
  return px_fail(ctx, "index %lld is out of bounds for dimension %d with size %lld (valid range "
                 "[0, %lld]; this kernel does not wrap negative indices)", (long long)v, dim,
                 (long long)size, (long long)(size - 1));
}

/* ---- advanced indexing plan ------------------------------------------------- */

typedef struct iplan {
  int ni;                           /* index tensors (masks expanded) */
  int tdim[PX_MAX_DIM];             /* target dim of each */
  const void *idata[PX_MAX_DIM];
  int idtype[PX_MAX_DIM];
  int64_t bstride[PX_MAX_DIM][PX_MAX_DIM]; /* stride of index j along B dim m */
  int nb;                           /* rank of the broadcast index shape B */
  int64_t bsizes[PX_MAX_DIM];
  int bpos;                         /* first result dim of B */
  int rdim;                         /* result rank and sizes */
  int64_t rsizes[PX_MAX_DIM];
  int rplain[PX_MAX_DIM];           /* result dim -> target dim (-1 inside B) */
} iplan;

/* Builds the plan for target[indices] where target has self's sizes. */
static int plan_build(px_ctx *ctx, iplan *P, const px_tensor *self, px_value *lst) {
  px_tensor *const *ents = px_tensorlist(lst);
  uint32_t n = lst->u.tl.n;
  /* index tensors as (dim, sizes, strides) */
  int idim[PX_MAX_DIM];
  int64_t isz[PX_MAX_DIM][PX_MAX_DIM], istr[PX_MAX_DIM][PX_MAX_DIM];
  P->ni = 0;
  int pos = 0;
  for (uint32_t e = 0; e < n; e++) {
    const px_tensor *t = ents[e];
    if (!t) {
      pos++;
      if (pos > self->dim) goto too_many;
      continue;
    }
    if (t->dtype == PX_BOOL || t->dtype == PX_U8) {
      int k = t->dim;
      if (k == 0) return px_fail(ctx, "indices[%u]: zero-dimensional boolean indices are not supported", e);
      if (pos + k > self->dim) goto too_many;
      for (int j = 0; j < k; j++)
        if (t->sizes[j] != self->sizes[pos + j])
          return px_fail(ctx,
                         "indices[%u]: the shape of the mask (size %lld at its dim %d) does not "
                         "match self (size %lld at dim %d)",
                         e, (long long)t->sizes[j], j, (long long)self->sizes[pos + j], pos + j);
      /* count true entries, then write their coordinates */
      int64_t cnt = 0, idx[PX_MAX_DIM] = {0};
      px_iter it;
      px_iter_init(&it, t->dim, t->sizes);
      px_iter_add(&it, t);
      px_iter_coalesce(&it);
      const uint8_t *m = t->data;
      if (t->numel > 0) do {
          for (int64_t q = 0; q < it.inner; q++) cnt += m[it.off[0] + q * it.inner_stride[0]] != 0;
        } while (px_iter_next(&it));
      int64_t *coords[PX_MAX_DIM];
      for (int j = 0; j < k; j++) {
        coords[j] = px_scratch(ctx, (size_t)(cnt ? cnt : 1) * sizeof(int64_t));
        if (!coords[j]) return PYEXEC_ERR_EXECUTION;
      }
      int64_t w = 0, off = 0;
      for (int64_t q = 0; q < t->numel; q++) {
        if (m[off]) {
          for (int j = 0; j < k; j++) coords[j][w] = idx[j];
          w++;
        }
        for (int j = k - 1; j >= 0; j--) {
          if (++idx[j] < t->sizes[j]) {
            off += t->strides[j];
            break;
          }
          idx[j] = 0;
          off -= t->strides[j] * (t->sizes[j] - 1);
        }
      }
      for (int j = 0; j < k; j++) {
        int i = P->ni++;
        P->tdim[i] = pos + j;
        P->idata[i] = coords[j];
        P->idtype[i] = PX_I64;
        idim[i] = 1;
        isz[i][0] = cnt;
        istr[i][0] = 1;
      }
      pos += k;
      continue;
    }
    if (!is_index_dtype(t->dtype))
      return px_fail(ctx, "indices[%u] has dtype %s; index tensors must be int64, int32, bool or uint8",
                     e, px_dtype_name(t->dtype));
    if (pos + 1 > self->dim) goto too_many;
    int i = P->ni++;
    P->tdim[i] = pos++;
    P->idata[i] = t->data;
    P->idtype[i] = t->dtype;
    idim[i] = t->dim;
    for (int j = 0; j < t->dim; j++) {
      isz[i][j] = t->sizes[j];
      istr[i][j] = t->strides[j];
    }
  }
  /* broadcast shape B */
  P->nb = 0;
  for (int i = 0; i < P->ni; i++) {
    int64_t tmp[PX_MAX_DIM];
    int nd;
    for (int j = 0; j < P->nb; j++) tmp[j] = P->bsizes[j];
    if (px_broadcast_sizes(ctx, P->nb, tmp, idim[i], isz[i], &nd, P->bsizes))
      return px_fail(ctx, "shape mismatch: index tensors cannot be broadcast together");
    P->nb = nd;
  }
  for (int i = 0; i < P->ni; i++) {
    int lead = P->nb - idim[i];
    for (int m = 0; m < P->nb; m++) {
      int j = m - lead;
      P->bstride[i][m] = (j >= 0 && isz[i][j] != 1) ? istr[i][j] : 0;
    }
  }
  /* result layout */
  bool adjacent = true;
  for (int i = 1; i < P->ni; i++)
    if (P->tdim[i] != P->tdim[i - 1] + 1) adjacent = false;
  int rdim = P->nb + self->dim - P->ni;
  if (rdim > PX_MAX_DIM) return px_fail(ctx, "indexing result would have %d dims", rdim);
  P->rdim = rdim;
  P->bpos = (adjacent && P->ni > 0) ? P->tdim[0] : 0;
  bool indexed[PX_MAX_DIM] = {false};
  for (int i = 0; i < P->ni; i++) indexed[P->tdim[i]] = true;
  int r = 0, d = 0;
  for (; r < P->bpos; r++, d++) { /* plain dims before B (adjacent case) */
    P->rsizes[r] = self->sizes[d];
    P->rplain[r] = d;
  }
  for (int m = 0; m < P->nb; m++, r++) {
    P->rsizes[r] = P->bsizes[m];
    P->rplain[r] = -1;
  }
  for (; d < self->dim; d++) {
    if (indexed[d]) continue;
    P->rsizes[r] = self->sizes[d];
    P->rplain[r] = d;
    r++;
  }
  return 0;
too_many:
  return px_fail(ctx, "too many indices for a tensor of dimension %d", self->dim);
}

enum { OP_GATHER, OP_PUT, OP_ACCUM };

/*
 * Walks the result shape of plan P. `tgt` has the indexed tensor's sizes
 * (self for index, out for index_put); `res` is the result-shaped side (out
 * for index; values broadcast to the result shape for index_put). OP_GATHER
 * copies tgt -> res, OP_PUT res -> tgt, OP_ACCUM adds res into tgt.
 */
static int plan_run(px_ctx *ctx, const iplan *P, px_tensor *tgt, const px_tensor *res, int op) {
  int outer = P->bpos + P->nb;
  for (int k = 0; k < outer; k++)
    if (P->rsizes[k] == 0) return 0;
  /* tail: result dims after B, all plain; merge contiguous runs */
  int td = 0;
  int64_t tsz[PX_MAX_DIM], tts[PX_MAX_DIM], trs[PX_MAX_DIM];
  for (int k = outer; k < P->rdim; k++) {
    int64_t s = P->rsizes[k];
    if (s == 0) return 0;
    if (s == 1) continue;
    int64_t a = tgt->strides[P->rplain[k]], b = res->strides[k];
    if (td > 0 && tts[td - 1] == a * s && trs[td - 1] == b * s) {
      tsz[td - 1] *= s;
      tts[td - 1] = a;
      trs[td - 1] = b;
      continue;
    }
    tsz[td] = s;
    tts[td] = a;
    trs[td] = b;
    td++;
  }
  int64_t inner = td ? tsz[td - 1] : 1, its = td ? tts[td - 1] : 0, irs = td ? trs[td - 1] : 0;
  size_t es = px_elsize(tgt->dtype);
  int64_t idx[PX_MAX_DIM] = {0}, ioff[PX_MAX_DIM] = {0};
  int64_t toff = 0, roff = 0;
  for (;;) {
    /* target offset of this outer position */
    int64_t t0 = toff;
    for (int i = 0; i < P->ni; i++) {
      int d = P->tdim[i];
      int64_t v = load_index(P->idata[i], P->idtype[i], ioff[i]), size = tgt->sizes[d];
      if (v < -size || v >= size) return index_oob(ctx, v, d, size, true);
      if (v < 0) v += size;
      t0 += v * tgt->strides[d];
    }
    /* the tail */
    int64_t tidx[PX_MAX_DIM] = {0}, ta = t0, ra = roff;
    for (;;) {
      char *tp = (char *)tgt->data + ta * (int64_t)es;
      char *rp = (char *)res->data + ra * (int64_t)es;
      if (op == OP_GATHER)
        move_run(es, rp, irs, tp, its, inner);
      else if (op == OP_PUT)
        move_run(es, tp, its, rp, irs, inner);
      else
        acc_run(tgt->dtype, tp, its, rp, irs, inner);
      int k = td - 2;
      for (; k >= 0; k--) {
        if (++tidx[k] < tsz[k]) {
          ta += tts[k];
          ra += trs[k];
          break;
        }
        tidx[k] = 0;
        ta -= tts[k] * (tsz[k] - 1);
        ra -= trs[k] * (tsz[k] - 1);
      }
      if (k < 0) break;
    }
    /* next outer position */
    int k = outer - 1;
    for (; k >= 0; k--) {
      int64_t s = P->rsizes[k];
      bool inb = k >= P->bpos;
      int64_t tst = inb ? 0 : tgt->strides[P->rplain[k]];
      if (++idx[k] < s) {
        toff += tst;
        roff += res->strides[k];
        if (inb)
          for (int i = 0; i < P->ni; i++) ioff[i] += P->bstride[i][k - P->bpos];
        break;
      }
      idx[k] = 0;
      toff -= tst * (s - 1);
      roff -= res->strides[k] * (s - 1);
      if (inb)
        for (int i = 0; i < P->ni; i++) ioff[i] -= P->bstride[i][k - P->bpos] * (s - 1);
    }
    if (k < 0) break;
  }
  return 0;
}

/* index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out) */
static int k_index(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[2]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  iplan P;
  rc = plan_build(ctx, &P, self, args[1]);
  if (rc) return rc;
  rc = px_resize(ctx, out, P.rdim, P.rsizes);
  if (rc) return rc;
  return plan_run(ctx, &P, self, out, OP_GATHER);
}

/* values broadcast to the plan's result shape (leading size-1 dims of values
 * beyond the result's rank are dropped, as torch does) */
static int values_view(px_ctx *ctx, const iplan *P, const px_tensor *values, px_tensor *v) {
  int vd = values->dim, skip = 0;
  while (vd - skip > P->rdim && values->sizes[skip] == 1) skip++;
  vd -= skip;
  if (vd > P->rdim) goto bad;
  int64_t strides[PX_MAX_DIM];
  int lead = P->rdim - vd;
  for (int k = 0; k < P->rdim; k++) {
    int j = k - lead + skip;
    if (k < lead) {
      strides[k] = 0;
    } else if (values->sizes[j] == P->rsizes[k]) {
      strides[k] = values->strides[j];
    } else if (values->sizes[j] == 1) {
      strides[k] = 0;
    } else {
      goto bad;
    }
  }
  view_init(v, values->data, values->dtype, P->rdim, P->rsizes, strides);
  return 0;
bad:;
  char a[160], b[160];
  size_t n = 0;
  for (int k = 0; k < values->dim && n < sizeof a; k++)
    n += (size_t)snprintf(a + n, sizeof a - n, k ? ", %lld" : "%lld", (long long)values->sizes[k]);
  if (!values->dim) a[0] = 0;
  n = 0;
  for (int k = 0; k < P->rdim && n < sizeof b; k++)
    n += (size_t)snprintf(b + n, sizeof b - n, k ? ", %lld" : "%lld", (long long)P->rsizes[k]);
  if (!P->rdim) b[0] = 0;
  return px_fail(ctx, "shape mismatch: values of shape [%s] cannot be broadcast to the indexing "
                 "result of shape [%s]", a, b);
}

static int index_put_into(px_ctx *ctx, px_tensor *tgt, px_value *indices, px_tensor *values,
                          bool accumulate) {
  int rc = px_require_same_dtype(ctx, values, "values", tgt, "self");
  if (rc) return rc;
  iplan P;
  rc = plan_build(ctx, &P, tgt, indices);
  if (rc) return rc;
  px_tensor v;
  rc = values_view(ctx, &P, values, &v);
  if (rc) return rc;
  if (values->data == tgt->data && values->numel > 0) {
    /* values share the target's memory: read them from a copy */
    size_t bytes = (size_t)values->numel * px_elsize(values->dtype);
    void *tmp = px_scratch(ctx, bytes);
    if (!tmp) return PYEXEC_ERR_EXECUTION;
    memcpy(tmp, values->data, bytes);
    v.data = tmp;
  }
  return plan_run(ctx, &P, tgt, &v, accumulate ? OP_ACCUM : OP_PUT);
}

/* index_put.out(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False, *,
 * Tensor(a!) out) */
static int k_index_put(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[4]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  return index_put_into(ctx, out, args[1], args[2]->u.t, args[3]->u.b);
}

/* index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) */
static int k_index_put_(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *ret = args[4]->u.t;
  int rc = index_put_into(ctx, self, args[1], args[2]->u.t, args[3]->u.b);
  if (rc) return rc;
  if (ret != self && ret->data != self->data) return clone_into(ctx, ret, self);
  return 0;
}

/* ---- index_select ------------------------------------------------------------- */

/* index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) */
static int k_index_select(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *index = args[2]->u.t, *out = args[3]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  if (!is_index_dtype(index->dtype))
    return px_fail(ctx, "index has dtype %s; expected int64 or int32", px_dtype_name(index->dtype));
  if (index->dim > 1) return px_fail(ctx, "index has %d dims; expected at most 1", index->dim);
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (px_require_contiguous(ctx, self, "self") || px_require_contiguous(ctx, index, "index"))
    return PYEXEC_ERR_EXECUTION;
  int64_t ni = index->numel;
  int64_t sizes[PX_MAX_DIM];
  int64_t dsize = self->dim ? self->sizes[d] : 1;
  if (self->dim == 0) {
    if (ni != 1)
      return px_fail(ctx, "index has %lld elements; a zero-dimensional self needs exactly 1",
                     (long long)ni);
  } else {
    for (int k = 0; k < self->dim; k++) sizes[k] = k == d ? ni : self->sizes[k];
  }
  rc = px_resize(ctx, out, self->dim, sizes);
  if (rc) return rc;
  if (px_require_contiguous(ctx, out, "out")) return PYEXEC_ERR_EXECUTION;
  for (int64_t i = 0; i < ni; i++) {
    int64_t v = load_index(index->data, index->dtype, i);
    if (v < 0 || v >= dsize) return index_oob(ctx, v, d, dsize, false);
  }
  if (out->numel == 0) return 0;
  int64_t outer = self->dim ? px_prod(self->sizes, 0, d) : 1;
  int64_t inner = self->dim ? px_prod(self->sizes, d + 1, self->dim) : 1;
  size_t es = px_elsize(self->dtype), row = (size_t)inner * es;
  const char *src = self->data;
  char *dst = out->data;
  for (int64_t o = 0; o < outer; o++) {
    const char *base = src + (size_t)(o * dsize) * row;
    if (inner == 1) {
      for (int64_t i = 0; i < ni; i++) {
        int64_t v = load_index(index->data, index->dtype, i);
        memcpy(dst, base + (size_t)v * es, es);
        dst += es;
      }
    } else {
      for (int64_t i = 0; i < ni; i++) {
        int64_t v = load_index(index->data, index->dtype, i);
        memcpy(dst, base + (size_t)v * row, row);
        dst += row;
      }
    }
  }
  return 0;
}

/* ---- gather / scatter ------------------------------------------------------------ */

static int ndim1(const px_tensor *t) { return t->dim ? t->dim : 1; }
static int64_t size1(const px_tensor *t, int k) { return t->dim ? t->sizes[k] : 1; }

/* A header with `like`'s sizes and the strides of `t` (the one along `zero_dim`
 * set to 0 when zero_dim >= 0). Handles 0-d tensors as 1-element 1-d ones. */
static void strided_like(px_tensor *v, const px_tensor *t, const px_tensor *like, int zero_dim) {
  int64_t strides[PX_MAX_DIM];
  for (int k = 0; k < like->dim; k++) {
    strides[k] = t->dim ? t->strides[k] : 0;
    if (k == zero_dim) strides[k] = 0;
  }
  view_init(v, t->data, t->dtype, like->dim, like->sizes, strides);
}

/* gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out) */
static int k_gather(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *index = args[2]->u.t, *out = args[4]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  if (!is_index_dtype(index->dtype))
    return px_fail(ctx, "index has dtype %s; expected int64", px_dtype_name(index->dtype));
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (ndim1(index) != ndim1(self))
    return px_fail(ctx, "index has %d dims but self has %d", index->dim, self->dim);
  if (index->dim == self->dim)
    for (int k = 0; k < self->dim; k++)
      if (k != d && index->sizes[k] > self->sizes[k])
        return px_fail(ctx, "index has size %lld at dim %d, larger than self's %lld",
                       (long long)index->sizes[k], k, (long long)self->sizes[k]);
  rc = px_resize_like(ctx, out, index);
  if (rc) return rc;
  if (index->numel == 0) return 0;
  int64_t dsize = size1(self, d), dstride = self->dim ? self->strides[d] : 0;
  px_tensor sv;
  strided_like(&sv, self, index, d);
  px_iter it;
  px_iter_init(&it, index->dim, index->sizes);
  px_iter_add(&it, index);
  px_iter_add(&it, out);
  px_iter_add(&it, &sv);
  px_iter_coalesce(&it);
  size_t es = px_elsize(self->dtype);
  const char *src = self->data;
  char *dst = out->data;
  do {
    for (int64_t k = 0; k < it.inner; k++) {
      int64_t v = load_index(index->data, index->dtype, it.off[0] + k * it.inner_stride[0]);
      if (v < 0 || v >= dsize) return index_oob(ctx, v, d, dsize, false);
      int64_t so = it.off[2] + k * it.inner_stride[2] + v * dstride;
      int64_t oo = it.off[1] + k * it.inner_stride[1];
      switch (es) {
        case 1: ((uint8_t *)dst)[oo] = ((const uint8_t *)src)[so]; break;
        case 2: ((uint16_t *)dst)[oo] = ((const uint16_t *)src)[so]; break;
        case 4: ((uint32_t *)dst)[oo] = ((const uint32_t *)src)[so]; break;
        default: ((uint64_t *)dst)[oo] = ((const uint64_t *)src)[so]; break;
      }
    }
  } while (px_iter_next(&it));
  return 0;
}

enum { SC_SRC, SC_VALUE, SC_ADD };

static int scatter_common(px_ctx *ctx, px_tensor *self, int64_t dim, px_tensor *index,
                          px_tensor *src, const px_value *value, px_tensor *out, int mode) {
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  if (src && (rc = px_require_same_dtype(ctx, src, "src", self, "self"))) return rc;
  if (!is_index_dtype(index->dtype))
    return px_fail(ctx, "index has dtype %s; expected int64", px_dtype_name(index->dtype));
  int d = px_wrap_dim(ctx, dim, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (index->numel > 0) {
    if (ndim1(index) != ndim1(self))
      return px_fail(ctx, "index has %d dims but self has %d", index->dim, self->dim);
    if (src && ndim1(src) != ndim1(index))
      return px_fail(ctx, "index has %d dims but src has %d", index->dim, src->dim);
    for (int k = 0; k < index->dim; k++) {
      if (k != d && index->sizes[k] > size1(self, k))
        return px_fail(ctx, "index has size %lld at dim %d, larger than self's %lld",
                       (long long)index->sizes[k], k, (long long)size1(self, k));
      if (src && index->sizes[k] > size1(src, k))
        return px_fail(ctx, "index has size %lld at dim %d, larger than src's %lld",
                       (long long)index->sizes[k], k, (long long)size1(src, k));
    }
  }
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  if (index->numel == 0) return 0;
  int64_t dsize = size1(out, d), dstride = out->dim ? out->strides[d] : 0;
  px_tensor ov, sv;
  strided_like(&ov, out, index, d);
  px_iter it;
  px_iter_init(&it, index->dim, index->sizes);
  px_iter_add(&it, index);
  px_iter_add(&it, &ov);
  if (src) {
    strided_like(&sv, src, index, -1);
    px_iter_add(&it, &sv);
  }
  px_iter_coalesce(&it);
  size_t es = px_elsize(out->dtype);
  uint64_t elem = 0;
  if (mode == SC_VALUE) {
    if (value->tag == PX_V_DOUBLE)
      px_store_d(&elem, out->dtype, 0, value->u.d);
    else
      px_store_i(&elem, out->dtype, 0, px_scalar_i(value));
  }
  char *dst = out->data;
  do {
    for (int64_t k = 0; k < it.inner; k++) {
      int64_t v = load_index(index->data, index->dtype, it.off[0] + k * it.inner_stride[0]);
      if (v < 0 || v >= dsize) return index_oob(ctx, v, d, dsize, false);
      char *dp = dst + (it.off[1] + k * it.inner_stride[1] + v * dstride) * (int64_t)es;
      if (mode == SC_VALUE) {
        memcpy(dp, &elem, es);
        continue;
      }
      const char *sp = (const char *)src->data + (it.off[2] + k * it.inner_stride[2]) * (int64_t)es;
      if (mode == SC_SRC)
        memcpy(dp, sp, es);
      else
        acc_run(out->dtype, dp, 0, sp, 0, 1);
    }
  } while (px_iter_next(&it));
  return 0;
}

/* scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) */
static int k_scatter_src(px_ctx *ctx, px_value *const *args) {
  return scatter_common(ctx, args[0]->u.t, args[1]->u.i, args[2]->u.t, args[3]->u.t, NULL,
                        args[4]->u.t, SC_SRC);
}

/* scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out) */
static int k_scatter_value(px_ctx *ctx, px_value *const *args) {
  return scatter_common(ctx, args[0]->u.t, args[1]->u.i, args[2]->u.t, NULL, args[3],
                        args[4]->u.t, SC_VALUE);
}

/* scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) */
static int k_scatter_add(px_ctx *ctx, px_value *const *args) {
  return scatter_common(ctx, args[0]->u.t, args[1]->u.i, args[2]->u.t, args[3]->u.t, NULL,
                        args[4]->u.t, SC_ADD);
}

/* index_copy.out(Tensor self, int dim, Tensor index, Tensor source, *, Tensor(a!) out) */
static int k_index_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *index = args[2]->u.t, *source = args[3]->u.t;
  px_tensor *out = args[4]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc || (rc = px_require_same_dtype(ctx, source, "source", self, "self"))) return rc;
  if (!is_index_dtype(index->dtype))
    return px_fail(ctx, "index has dtype %s; expected int64", px_dtype_name(index->dtype));
  if (index->dim > 1) return px_fail(ctx, "index has %d dims; expected at most 1", index->dim);
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (ndim1(source) != ndim1(self))
    return px_fail(ctx, "source has %d dims but self has %d", source->dim, self->dim);
  int64_t ni = index->numel, dsize = size1(self, d);
  if (size1(source, d) != ni)
    return px_fail(ctx, "source has size %lld at dim %d but index has %lld elements",
                   (long long)size1(source, d), d, (long long)ni);
  for (int k = 0; k < self->dim; k++)
    if (k != d && source->sizes[k] != self->sizes[k])
      return px_fail(ctx, "source has size %lld at dim %d, self has %lld",
                     (long long)source->sizes[k], k, (long long)self->sizes[k]);
  if (px_require_contiguous(ctx, source, "source") || px_require_contiguous(ctx, index, "index"))
    return PYEXEC_ERR_EXECUTION;
  for (int64_t i = 0; i < ni; i++) {
    int64_t v = load_index(index->data, index->dtype, i);
    if (v < 0 || v >= dsize) return index_oob(ctx, v, d, dsize, false);
  }
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  if (px_require_contiguous(ctx, out, "out")) return PYEXEC_ERR_EXECUTION;
  if (source->numel == 0) return 0;
  int64_t outer = self->dim ? px_prod(self->sizes, 0, d) : 1;
  int64_t inner = self->dim ? px_prod(self->sizes, d + 1, self->dim) : 1;
  size_t row = (size_t)inner * px_elsize(self->dtype);
  const char *src = source->data;
  char *dst = out->data;
  for (int64_t o = 0; o < outer; o++) {
    char *base = dst + (size_t)(o * dsize) * row;
    for (int64_t i = 0; i < ni; i++) {
      int64_t v = load_index(index->data, index->dtype, i);
      memcpy(base + (size_t)v * row, src, row);
      src += row;
    }
  }
  return 0;
}

/* ---- slice / select scatter ---------------------------------------------------------- */

/* Writes src into a view of out (view sizes must equal src's). */
static int put_view(px_ctx *ctx, px_tensor *out, char *base, int dim, const int64_t *sizes,
                    const int64_t *strides, const px_tensor *src) {
  if (src->dim != dim) goto bad;
  for (int k = 0; k < dim; k++)
    if (src->sizes[k] != sizes[k]) goto bad;
  px_tensor v;
  view_init(&v, base, out->dtype, dim, sizes, strides);
  copy_same(&v, src);
  return 0;
bad:;
  char a[160], b[160];
  size_t n = 0;
  a[0] = b[0] = 0;
  for (int k = 0; k < src->dim && n < sizeof a; k++)
    n += (size_t)snprintf(a + n, sizeof a - n, k ? ", %lld" : "%lld", (long long)src->sizes[k]);
  n = 0;
  for (int k = 0; k < dim && n < sizeof b; k++)
    n += (size_t)snprintf(b + n, sizeof b - n, k ? ", %lld" : "%lld", (long long)sizes[k]);
  return px_fail(ctx, "src has shape [%s] but the embedded slice has shape [%s]", a, b);
}

/* slice_scatter.out(Tensor self, Tensor src, int dim=0, SymInt? start=None,
 * SymInt? end=None, SymInt step=1, *, Tensor(a!) out) */
static int k_slice_scatter(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *out = args[6]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc || (rc = px_require_same_dtype(ctx, src, "src", self, "self"))) return rc;
  if (self->dim == 0) return px_fail(ctx, "cannot slice a zero-dimensional tensor");
  int d = px_wrap_dim(ctx, args[2]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t start, len, step;
  if (px_slice_bounds(ctx, args[3], args[4], args[5], self->sizes[d], &start, &len, &step))
    return PYEXEC_ERR_EXECUTION;
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  int64_t sizes[PX_MAX_DIM], strides[PX_MAX_DIM];
  for (int k = 0; k < out->dim; k++) {
    sizes[k] = out->sizes[k];
    strides[k] = out->strides[k];
  }
  sizes[d] = len;
  strides[d] *= step;
  char *base = (char *)out->data;
  if (len > 0) base += start * out->strides[d] * (int64_t)px_elsize(out->dtype);
  return put_view(ctx, out, base, out->dim, sizes, strides, src);
}

/* select_scatter.out(Tensor self, Tensor src, int dim, SymInt index, *, Tensor(a!) out) */
static int k_select_scatter(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *out = args[4]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc || (rc = px_require_same_dtype(ctx, src, "src", self, "self"))) return rc;
  if (self->dim == 0) return px_fail(ctx, "cannot select on a zero-dimensional tensor");
  int d = px_wrap_dim(ctx, args[2]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  int64_t size = self->sizes[d], i = args[3]->u.i;
  if (i < -size || i >= size) return index_oob(ctx, i, d, size, true);
  if (i < 0) i += size;
  rc = clone_into(ctx, out, self);
  if (rc) return rc;
  int64_t sizes[PX_MAX_DIM], strides[PX_MAX_DIM];
  int n = 0;
  for (int k = 0; k < out->dim; k++) {
    if (k == d) continue;
    sizes[n] = out->sizes[k];
    strides[n] = out->strides[k];
    n++;
  }
  char *base = (char *)out->data + i * out->strides[d] * (int64_t)px_elsize(out->dtype);
  return put_view(ctx, out, base, n, sizes, strides, src);
}

/* ---- masked_select / nonzero ---------------------------------------------------------- */

/* masked_select.out(Tensor self, Tensor mask, *, Tensor(a!) out) */
static int k_masked_select(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *mask = args[1]->u.t, *out = args[2]->u.t;
  int rc = px_require_same_dtype(ctx, out, "out", self, "self");
  if (rc) return rc;
  if (mask->dtype != PX_BOOL && mask->dtype != PX_U8)
    return px_fail(ctx, "mask has dtype %s; expected bool", px_dtype_name(mask->dtype));
  if (out->dim != 1) return px_fail(ctx, "out has %d dims, expected 1", out->dim);
  int bd;
  int64_t bs[PX_MAX_DIM];
  rc = px_broadcast_sizes(ctx, self->dim, self->sizes, mask->dim, mask->sizes, &bd, bs);
  if (rc) return rc;
  int64_t total = px_prod(bs, 0, bd), cnt = 0;
  px_iter it;
  if (total > 0) {
    px_iter_init(&it, bd, bs);
    px_iter_add(&it, mask);
    px_iter_coalesce(&it);
    const uint8_t *m = mask->data;
    do {
      for (int64_t k = 0; k < it.inner; k++) cnt += m[it.off[0] + k * it.inner_stride[0]] != 0;
    } while (px_iter_next(&it));
  }
  int64_t osz[1] = {cnt};
  rc = px_resize(ctx, out, 1, osz);
  if (rc || cnt == 0) return rc;
  px_iter_init(&it, bd, bs);
  px_iter_add(&it, mask);
  px_iter_add(&it, self);
  px_iter_coalesce(&it);
  size_t es = px_elsize(self->dtype);
  const uint8_t *m = mask->data;
  const char *src = self->data;
  char *dst = out->data;
  int64_t ostr = out->strides[0], w = 0;
  do {
    for (int64_t k = 0; k < it.inner; k++) {
      if (!m[it.off[0] + k * it.inner_stride[0]]) continue;
      memcpy(dst + w * ostr * (int64_t)es, src + (it.off[1] + k * it.inner_stride[1]) * (int64_t)es, es);
      w++;
    }
  } while (px_iter_next(&it));
  return 0;
}

#define NZ_CONTIG(T, TEST)                                   \
  do {                                                       \
    const T *p_ = (const T *)self->data;                     \
    for (int64_t k_ = 0; k_ < n; k_++) flags[k_] = (TEST);   \
  } while (0)

/* nonzero.out(Tensor self, *, Tensor(a!) out) */
static int k_nonzero(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[1]->u.t;
  if (px_require_dtype(ctx, out, PX_I64, "out")) return PYEXEC_ERR_EXECUTION;
  if (out->dim != 2) return px_fail(ctx, "out has %d dims, expected 2", out->dim);
  int64_t n = self->numel;
  uint8_t *flags = px_scratch(ctx, (size_t)(n ? n : 1));
  if (!flags) return PYEXEC_ERR_EXECUTION;
  /* flags in row-major logical order */
  if (self->contiguous) {
    switch (self->dtype) {
      case PX_F32: NZ_CONTIG(float, p_[k_] != 0.0f); break;
      case PX_F64: NZ_CONTIG(double, p_[k_] != 0.0); break;
      case PX_I64: NZ_CONTIG(int64_t, p_[k_] != 0); break;
      case PX_I32: NZ_CONTIG(int32_t, p_[k_] != 0); break;
      case PX_I16: NZ_CONTIG(int16_t, p_[k_] != 0); break;
      case PX_F16:
      case PX_BF16: NZ_CONTIG(uint16_t, (p_[k_] & 0x7fffu) != 0); break;
      default: NZ_CONTIG(uint8_t, p_[k_] != 0); break; /* u8, i8, bool */
    }
  } else {
    int64_t idx[PX_MAX_DIM] = {0}, off = 0;
    bool fl = px_is_floating(self->dtype);
    for (int64_t k = 0; k < n; k++) {
      flags[k] = fl ? px_load_d(self->data, self->dtype, off) != 0.0
                    : px_load_i(self->data, self->dtype, off) != 0;
      for (int j = self->dim - 1; j >= 0; j--) {
        if (++idx[j] < self->sizes[j]) {
          off += self->strides[j];
          break;
        }
        idx[j] = 0;
        off -= self->strides[j] * (self->sizes[j] - 1);
      }
    }
  }
  int64_t cnt = 0;
  for (int64_t k = 0; k < n; k++) cnt += flags[k];
  int64_t osz[2] = {cnt, self->dim};
  int rc = px_resize(ctx, out, 2, osz);
  if (rc || cnt == 0 || self->dim == 0) return rc;
  int64_t *o = out->data, s0 = out->strides[0], s1 = out->strides[1];
  int64_t idx[PX_MAX_DIM] = {0}, r = 0;
  for (int64_t k = 0; k < n; k++) {
    if (flags[k]) {
      for (int j = 0; j < self->dim; j++) o[r * s0 + j * s1] = idx[j];
      r++;
    }
    for (int j = self->dim - 1; j >= 0; j--) {
      if (++idx[j] < self->sizes[j]) break;
      idx[j] = 0;
    }
  }
  return 0;
}

/* ---- repeat_interleave ----------------------------------------------------------------- */

/* repeat_interleave.Tensor_out(Tensor repeats, *, SymInt? output_size=None, Tensor(a!) out) */
static int k_repeat_interleave(px_ctx *ctx, px_value *const *args) {
  px_tensor *rep = args[0]->u.t, *out = args[2]->u.t;
  if (!is_index_dtype(rep->dtype))
    return px_fail(ctx, "repeats has dtype %s; expected int64 or int32", px_dtype_name(rep->dtype));
  if (rep->dim > 1) return px_fail(ctx, "repeats has %d dims; expected 1", rep->dim);
  if (px_require_contiguous(ctx, rep, "repeats")) return PYEXEC_ERR_EXECUTION;
  if (!is_index_dtype(out->dtype))
    return px_fail(ctx, "out has dtype %s; expected int64 or int32", px_dtype_name(out->dtype));
  if (out->dim != 1) return px_fail(ctx, "out has %d dims, expected 1", out->dim);
  int64_t total = 0;
  for (int64_t i = 0; i < rep->numel; i++) {
    int64_t r = load_index(rep->data, rep->dtype, i);
    if (r < 0) return px_fail(ctx, "repeats[%lld] = %lld is negative", (long long)i, (long long)r);
    total += r;
  }
  if (args[1]->tag != PX_V_NONE && args[1]->u.i != total)
    return px_fail(ctx, "output_size %lld does not match the sum of repeats %lld",
                   (long long)args[1]->u.i, (long long)total);
  int64_t osz[1] = {total};
  int rc = px_resize(ctx, out, 1, osz);
  if (rc) return rc;
  int64_t w = 0, st = out->strides[0];
  for (int64_t i = 0; i < rep->numel; i++) {
    int64_t r = load_index(rep->data, rep->dtype, i);
    for (int64_t j = 0; j < r; j++, w++) px_store_i(out->data, out->dtype, w * st, i);
  }
  return 0;
}

/* ---- table ------------------------------------------------------------------------------ */

const px_kernel_def px_kernels_index[] = {
    {"aten::index.Tensor_out", "TYT|T", k_index},
    {"aten::index_put.out", "TYTBT|T", k_index_put},
    {"aten::index_put_", "TYTB|T", k_index_put_},
    {"aten::index_select.out", "TITT|T", k_index_select},
    {"aten::gather.out", "TITBT|T", k_gather},
    {"aten::scatter.src_out", "TITTT|T", k_scatter_src},
    {"aten::scatter.value_out", "TITST|T", k_scatter_value},
    {"aten::scatter_add.out", "TITTT|T", k_scatter_add},
    {"aten::index_copy.out", "TITTT|T", k_index_copy},
    {"aten::slice_scatter.out", "TTIiiIT|T", k_slice_scatter},
    {"aten::select_scatter.out", "TTIIT|T", k_select_scatter},
    {"aten::masked_select.out", "TTT|T", k_masked_select},
    {"aten::nonzero.out", "TT|T", k_nonzero},
    {"aten::repeat_interleave.Tensor_out", "TiT|T", k_repeat_interleave},
    {NULL, NULL, NULL},
};
