/*
 * index.c - advanced indexing (index, index_put, index_put_), index_select,
 * embedding, masked_select, nonzero and repeat_interleave. gather and the
 * scatters (scatter, scatter_add, index_copy, slice / select / masked
 * scatter) are scatter.c; the helpers both use are index_util.h.
 *
 * Negative index values follow torch eager, kernel by kernel: index.Tensor,
 * index_put and index_put_ wrap them like Python (-1 is the last entry), as
 * do the scalar indices of select_scatter and slice_scatter; index_select,
 * gather, scatter, scatter_add and index_copy reject them, as eager does.
 * Every index is checked against its dimension before memory is touched.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/index/index_util.h"

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

#define GATHER_ROWS(T)                                                                  \
  do {                                                                                  \
    for (int64_t r = 0; r < rows; r++) {                                                \
      const T *src = (const T *)self->data + r * S;                                     \
      T *dst = (T *)out->data + r * n;                                                  \
      for (int64_t j = 0; j < n; j++) dst[j] = src[pos[j]];                             \
    }                                                                                   \
  } while (0)

/* self[..., idx] for one 1-D index on the last dim of a contiguous self into
 * a contiguous out (a reflection or replication pad, a gather of columns):
 * the indices checked and wrapped once into positions, then each row copied
 * through them. Same elements as plan_run's walk. */
static int gather_last_dim(px_ctx *ctx, const iplan *P, const px_tensor *self, px_tensor *out) {
  const int64_t n = P->bsizes[0], S = self->sizes[self->dim - 1], stride = P->bstride[0][0];
  int64_t rows = 1;
  for (int d = 0; d < self->dim - 1; d++) rows *= self->sizes[d];
  if (n == 0 || rows == 0) return 0;
  int64_t *pos = px_scratch(ctx, sizeof(int64_t) * (size_t)n);
  if (!pos) return PYEXEC_ERR_EXECUTION;
  for (int64_t j = 0; j < n; j++) {
    int64_t v = load_index(P->idata[0], P->idtype[0], j * stride);
    if (v < -S || v >= S) return index_oob(ctx, v, self->dim - 1, S, true);
    pos[j] = v < 0 ? v + S : v;
  }
  switch (px_elsize(self->dtype)) {
    case 1: GATHER_ROWS(uint8_t); break;
    case 2: GATHER_ROWS(uint16_t); break;
    case 4: GATHER_ROWS(uint32_t); break;
    default: GATHER_ROWS(uint64_t); break;
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
  if (P.ni == 1 && P.nb == 1 && P.tdim[0] == self->dim - 1 && P.bpos == self->dim - 1 && self->contiguous &&
      out->contiguous)
    return gather_last_dim(ctx, &P, self, out);
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

/* aten::embedding.out(Tensor weight, Tensor indices, SymInt padding_idx=-1,
 *                     bool scale_grad_by_freq=False, bool sparse=False, *,
 *                     Tensor(a!) out) */
static int k_embedding(px_ctx *ctx, px_value *const *args) {
  px_tensor *w = args[0]->u.t, *idx = args[1]->u.t, *out = args[5]->u.t;
  int rc;
  if (w->dim != 2) return px_fail(ctx, "weight must be 2-D, got %d dims", w->dim);
  if (idx->dtype != PX_I64 && idx->dtype != PX_I32)
    return px_fail(ctx, "indices must be int64 or int32, got %s", px_dtype_name(idx->dtype));
  if ((rc = px_require_same_dtype(ctx, out, "out", w, "weight"))) return rc;
  if (idx->dim + 1 > PX_MAX_DIM)
    return px_fail(ctx, "indices have too many dims (%d)", idx->dim);
  if ((rc = px_require_contiguous(ctx, w, "weight")) ||
      (rc = px_require_contiguous(ctx, idx, "indices")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t os[PX_MAX_DIM];
  memcpy(os, idx->sizes, sizeof(int64_t) * (size_t)idx->dim);
  int64_t V = w->sizes[0], D = w->sizes[1];
  os[idx->dim] = D;
  if ((rc = px_resize(ctx, out, idx->dim + 1, os))) return rc;
  size_t row = (size_t)D * px_elsize(w->dtype);
  for (int64_t k = 0; k < idx->numel; k++) {
    int64_t r = idx->dtype == PX_I64 ? ((const int64_t *)idx->data)[k]
                                     : ((const int32_t *)idx->data)[k];
    if (r < 0 || r >= V) { /* as in torch eager, negative indices do not wrap */
      if (V == 0)
        return px_fail(ctx, "index %lld is out of range for a weight with 0 rows (no valid index)",
                       (long long)r);
      return px_fail(ctx, "index %lld is out of range for a weight with %lld rows (valid range "
                     "[0, %lld]; embedding does not wrap negative indices)", (long long)r,
                     (long long)V, (long long)(V - 1));
    }
    if (row) memcpy((char *)out->data + (size_t)k * row, (const char *)w->data + (size_t)r * row, row);
  }
  return 0;
}

const px_kernel_def px_kernels_index[] = {
    {"aten::index.Tensor_out", "TYT|T", k_index},
    {"aten::index_put.out", "TYTBT|T", k_index_put},
    {"aten::index_put_", "TYTB|T", k_index_put_},
    {"aten::index_select.out", "TITT|T", k_index_select},
    {"aten::masked_select.out", "TTT|T", k_masked_select},
    {"aten::nonzero.out", "TT|T", k_nonzero},
    {"aten::repeat_interleave.Tensor_out", "TiT|T", k_repeat_interleave},
    {"aten::embedding.out", "TTIBBT|T", k_embedding},
    {NULL, NULL, NULL},
};
