/*
 * kernel.c - helpers shared by every kernel family: failure reporting, scratch
 * memory, resizing, broadcasting, type promotion, element access and the
 * broadcast iterator.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "kernels/convert/convert16.h"
#include "kernels/kernel.h"

/* ---- failure and scratch ---------------------------------------------- */

int px_fail(px_ctx *ctx, const char *fmt, ...) {
  if (ctx->msg && ctx->msg_cap) {
    int n = snprintf(ctx->msg, ctx->msg_cap, "%s: ", ctx->op ? ctx->op : "kernel");
    if (n < 0) n = 0;
    if ((size_t)n < ctx->msg_cap) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(ctx->msg + n, ctx->msg_cap - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return PYEXEC_ERR_EXECUTION;
}

struct px_scratch_block {
  struct px_scratch_block *next;
  size_t cap;
  unsigned char *mem;
};

void *px_scratch(px_ctx *ctx, size_t bytes) {
  bytes = (bytes + 63) & ~(size_t)63;
  if (bytes == 0) bytes = 64;
  for (;;) {
    struct px_scratch_block *b = ctx->scratch_cur;
    if (b && b->cap - ctx->scratch_used >= bytes) {
      void *p = b->mem + ctx->scratch_used;
      ctx->scratch_used += bytes;
      return p;
    }
    if (b && b->next) { /* move on to the next kept block */
      ctx->scratch_cur = b->next;
      ctx->scratch_used = 0;
      continue;
    }
    size_t cap = bytes < ((size_t)1 << 16) ? ((size_t)1 << 16) : bytes;
    if (b && cap < 2 * b->cap) cap = 2 * b->cap;
    struct px_scratch_block *nb = calloc(1, sizeof *nb);
    if (!nb || !(nb->mem = aligned_alloc(64, (cap + 63) & ~(size_t)63))) {
      free(nb);
      px_fail(ctx, "out of memory allocating %zu bytes of scratch", bytes);
      return NULL;
    }
    nb->cap = cap;
    if (b)
      b->next = nb;
    else
      ctx->scratch = nb;
    ctx->scratch_cur = nb;
    ctx->scratch_used = 0;
  }
}

void px_scratch_release(px_ctx *ctx) {
  for (struct px_scratch_block *b = ctx->scratch; b;) {
    struct px_scratch_block *n = b->next;
    free(b->mem);
    free(b);
    b = n;
  }
  ctx->scratch = ctx->scratch_cur = NULL;
  ctx->scratch_used = 0;
}

/* ---- shapes ------------------------------------------------------------ */

static void format_sizes(char *buf, size_t cap, int dim, const int64_t *sizes) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int k = 0; k < dim && n < cap; k++)
    n += (size_t)snprintf(buf + n, cap - n, k ? ", %lld" : "%lld", (long long)sizes[k]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

int px_resize(px_ctx *ctx, px_tensor *t, int dim, const int64_t *sizes) {
  if (dim != t->dim)
    return px_fail(ctx, "cannot resize a rank-%d output to rank %d", t->dim, dim);
  bool same = true;
  int64_t n = 1;
  for (int k = 0; k < dim; k++) {
    if (sizes[k] < 0) return px_fail(ctx, "negative size %lld", (long long)sizes[k]);
    if (sizes[k] != t->sizes[k]) same = false;
    if (sizes[k] && n > INT64_MAX / sizes[k]) return px_fail(ctx, "size %lld at dim %d overflows", (long long)sizes[k], k);
    n *= sizes[k];
  }
  if (same) return 0;
  if (!t->dynamic) {
    char a[160], b[160];
    format_sizes(a, sizeof a, t->dim, t->sizes);
    format_sizes(b, sizeof b, dim, sizes);
    return px_fail(ctx, "output has static shape %s, kernel needs %s", a, b);
  }
  if (n > t->cap_numel) {
    char b[160];
    format_sizes(b, sizeof b, dim, sizes);
    return px_fail(ctx, "shape %s exceeds the output's bound of %lld elements", b,
                   (long long)t->cap_numel);
  }
  memcpy(t->sizes, sizes, sizeof(int64_t) * (size_t)dim);
  px_tensor_update_layout(t);
  return 0;
}

int px_broadcast_sizes(px_ctx *ctx, int adim, const int64_t *asizes, int bdim,
                       const int64_t *bsizes, int *odim, int64_t *osizes) {
  int n = adim > bdim ? adim : bdim;
  for (int k = 0; k < n; k++) {
    int ia = adim - n + k, ib = bdim - n + k;
    int64_t sa = ia >= 0 ? asizes[ia] : 1;
    int64_t sb = ib >= 0 ? bsizes[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      return px_fail(ctx, "shapes cannot be broadcast: size %lld vs %lld at dim %d",
                     (long long)sa, (long long)sb, k);
    osizes[k] = sa == 1 ? sb : sa;
  }
  *odim = n;
  return 0;
}

int px_require_contiguous(px_ctx *ctx, const px_tensor *t, const char *what) {
  if (!t->contiguous)
    return px_fail(ctx, "%s must have the default (contiguous) dim_order", what);
  return 0;
}

int px_require_dtype(px_ctx *ctx, const px_tensor *t, int dtype, const char *what) {
  if (t->dtype != dtype)
    return px_fail(ctx, "%s has dtype %s, expected %s", what, px_dtype_name(t->dtype),
                   px_dtype_name(dtype));
  return 0;
}

int px_require_same_dtype(px_ctx *ctx, const px_tensor *a, const char *an, const px_tensor *b,
                          const char *bn) {
  if (a->dtype != b->dtype)
    return px_fail(ctx, "%s has dtype %s but %s has dtype %s", an, px_dtype_name(a->dtype), bn,
                   px_dtype_name(b->dtype));
  return 0;
}

int px_wrap_dim(px_ctx *ctx, int64_t d, int dim) {
  int64_t n = dim > 0 ? dim : 1;
  if (d < -n || d >= n) {
    px_fail(ctx, "dimension %lld out of range for a rank-%d tensor", (long long)d, dim);
    return -1;
  }
  return (int)(d < 0 ? d + n : d);
}

/* ---- dtypes and scalars ------------------------------------------------ */

static int category(int t) {
  if (t == PX_BOOL) return 0;
  if (px_is_floating(t)) return 2;
  return 1;
}

int px_promote(int a, int b) {
  if (a == b) return a;
  if (a == PX_BOOL) return b;
  if (b == PX_BOOL) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if ((a == PX_F16 && b == PX_BF16) || (a == PX_BF16 && b == PX_F16)) return PX_F32;
    return px_elsize(a) >= px_elsize(b) ? a : b;
  }
  /* both integral */
  if (a == PX_U8 || b == PX_U8) {
    int o = a == PX_U8 ? b : a;
    return o == PX_I8 ? PX_I16 : o;
  }
  return px_elsize(a) >= px_elsize(b) ? a : b;
}

int px_promote_scalar(int t, int s) {
  int ct = category(t), cs = category(s);
  if (cs <= ct) return t;
  return cs == 2 ? PX_F32 : PX_I64;
}

int px_scalar_kind(const px_value *v) {
  switch (v->tag) {
    case PX_V_BOOL: return PX_BOOL;
    case PX_V_DOUBLE: return PX_F64;
    default: return PX_I64;
  }
}

double px_scalar_d(const px_value *v) {
  switch (v->tag) {
    case PX_V_BOOL: return v->u.b ? 1.0 : 0.0;
    case PX_V_DOUBLE: return v->u.d;
    case PX_V_INT: return (double)v->u.i;
    default: return 0.0;
  }
}

static int64_t d2i(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

int64_t px_scalar_i(const px_value *v) {
  switch (v->tag) {
    case PX_V_BOOL: return v->u.b ? 1 : 0;
    case PX_V_DOUBLE: return d2i(v->u.d);
    case PX_V_INT: return v->u.i;
    default: return 0;
  }
}

/* ---- element access ---------------------------------------------------- */

double px_load_d(const void *base, int dtype, int64_t k) {
  switch (dtype) {
    case PX_F32: return ((const float *)base)[k];
    case PX_F64: return ((const double *)base)[k];
    case PX_I64: return (double)((const int64_t *)base)[k];
    case PX_I32: return ((const int32_t *)base)[k];
    case PX_I16: return ((const int16_t *)base)[k];
    case PX_I8: return ((const int8_t *)base)[k];
    case PX_U8: return ((const uint8_t *)base)[k];
    case PX_BOOL: return ((const uint8_t *)base)[k] ? 1.0 : 0.0;
    case PX_F16: return px_half_to_float(((const uint16_t *)base)[k]);
    case PX_BF16: return px_bf16_to_float(((const uint16_t *)base)[k]);
    default: return 0.0;
  }
}

int64_t px_load_i(const void *base, int dtype, int64_t k) {
  switch (dtype) {
    case PX_I64: return ((const int64_t *)base)[k];
    case PX_I32: return ((const int32_t *)base)[k];
    case PX_I16: return ((const int16_t *)base)[k];
    case PX_I8: return ((const int8_t *)base)[k];
    case PX_U8: return ((const uint8_t *)base)[k];
    case PX_BOOL: return ((const uint8_t *)base)[k] ? 1 : 0;
    default: return d2i(px_load_d(base, dtype, k));
  }
}

void px_store_d(void *base, int dtype, int64_t k, double v) {
  switch (dtype) {
    case PX_F32: ((float *)base)[k] = (float)v; break;
    case PX_F64: ((double *)base)[k] = v; break;
    case PX_F16: ((uint16_t *)base)[k] = px_float_to_half((float)v); break;
    case PX_BF16: ((uint16_t *)base)[k] = px_float_to_bf16((float)v); break;
    case PX_BOOL: ((uint8_t *)base)[k] = v != 0.0; break;
    default: px_store_i(base, dtype, k, d2i(v)); break;
  }
}

void px_store_i(void *base, int dtype, int64_t k, int64_t v) {
  switch (dtype) {
    case PX_I64: ((int64_t *)base)[k] = v; break;
    case PX_I32: ((int32_t *)base)[k] = (int32_t)v; break;
    case PX_I16: ((int16_t *)base)[k] = (int16_t)v; break;
    case PX_I8: ((int8_t *)base)[k] = (int8_t)v; break;
    case PX_U8: ((uint8_t *)base)[k] = (uint8_t)v; break;
    case PX_BOOL: ((uint8_t *)base)[k] = v != 0; break;
    default: px_store_d(base, dtype, k, (double)v); break;
  }
}

#define CONVERT_LOOP(DT, ST)                                            \
  do {                                                                  \
    DT *d_ = (DT *)dst;                                                 \
    const ST *s_ = (const ST *)src;                                     \
    for (int64_t k_ = 0; k_ < n; k_++) d_[k_] = (DT)s_[k_];             \
  } while (0)

void px_convert(void *dst, int dst_dtype, const void *src, int src_dtype, int64_t n) {
  if (n <= 0) return;
  if (dst_dtype == src_dtype) {
    memcpy(dst, src, (size_t)n * px_elsize(dst_dtype));
    return;
  }
  /* The common float32 <-> integer casts get tight loops. */
  if (dst_dtype == PX_F32 && src_dtype == PX_I64) { CONVERT_LOOP(float, int64_t); return; }
  if (dst_dtype == PX_F32 && src_dtype == PX_I32) { CONVERT_LOOP(float, int32_t); return; }
  if (dst_dtype == PX_F64 && src_dtype == PX_F32) { CONVERT_LOOP(double, float); return; }
  if (dst_dtype == PX_F32 && src_dtype == PX_F64) { CONVERT_LOOP(float, double); return; }
  if (dst_dtype == PX_I64 && src_dtype == PX_I32) { CONVERT_LOOP(int64_t, int32_t); return; }
  if (dst_dtype == PX_I32 && src_dtype == PX_I64) { CONVERT_LOOP(int32_t, int64_t); return; }
  if (dst_dtype == PX_F32 && src_dtype == PX_BOOL) { CONVERT_LOOP(float, uint8_t); return; }
  /* float16 / bfloat16 <-> float32: what the GEMM-based kernels convert their
   * operands and results with (convert16.h: F16C / NEON where there is one) */
  if (dst_dtype == PX_F32 && src_dtype == PX_F16) { px_f16_to_f32(dst, src, n); return; }
  if (dst_dtype == PX_F32 && src_dtype == PX_BF16) { px_bf16_to_f32(dst, src, n); return; }
  if (dst_dtype == PX_F16 && src_dtype == PX_F32) { px_f32_to_f16(dst, src, n); return; }
  if (dst_dtype == PX_BF16 && src_dtype == PX_F32) { px_f32_to_bf16(dst, src, n); return; }
  /* float16 / bfloat16 -> float64 (a reduction's accumulator type) through
   * float32, both steps exact */
  if (dst_dtype == PX_F64 && (src_dtype == PX_F16 || src_dtype == PX_BF16)) {
    float tmp[256];
    for (int64_t b = 0; b < n; b += 256) {
      const int64_t m = n - b < 256 ? n - b : 256;
      if (src_dtype == PX_F16)
        px_f16_to_f32(tmp, (const uint16_t *)src + b, m);
      else
        px_bf16_to_f32(tmp, (const uint16_t *)src + b, m);
      for (int64_t k = 0; k < m; k++) ((double *)dst)[b + k] = tmp[k];
    }
    return;
  }
  bool via_int = px_is_integral(dst_dtype, true) && px_is_integral(src_dtype, true);
  for (int64_t k = 0; k < n; k++) {
    if (via_int)
      px_store_i(dst, dst_dtype, k, px_load_i(src, src_dtype, k));
    else
      px_store_d(dst, dst_dtype, k, px_load_d(src, src_dtype, k));
  }
}

/* Elements per piece when a same-layout copy is split over threads. */
#define CONVERT_PIECE 16384

typedef struct convert_job {
  px_tensor *dst;
  const px_tensor *src;
} convert_job;

static void convert_pieces(void *arg, int64_t b, int64_t e, int tid) {
  (void)tid;
  const convert_job *J = arg;
  px_convert((char *)J->dst->data + (size_t)b * px_elsize(J->dst->dtype), J->dst->dtype,
             (const char *)J->src->data + (size_t)b * px_elsize(J->src->dtype), J->src->dtype, e - b);
}

int px_copy_strided(px_ctx *ctx, px_tensor *dst, const px_tensor *src) {
  if (dst->dim != src->dim)
    return px_fail(ctx, "copy between ranks %d and %d", src->dim, dst->dim);
  for (int k = 0; k < dst->dim; k++)
    if (dst->sizes[k] != src->sizes[k])
      return px_fail(ctx, "copy between different sizes at dim %d (%lld vs %lld)", k,
                     (long long)src->sizes[k], (long long)dst->sizes[k]);
  if (dst->numel == 0) return 0;
  bool same_layout = true;
  for (int k = 0; k < dst->dim; k++)
    if (dst->sizes[k] != 1 && dst->strides[k] != src->strides[k]) same_layout = false;
  if (same_layout) {
    /* pieces over the thread pool: a conversion is elementwise, so any split
     * gives the same bytes */
    convert_job J = {dst, src};
    size_t bytes = (px_elsize(dst->dtype) + px_elsize(src->dtype)) * (size_t)dst->numel;
    px_parallel_for(dst->numel, CONVERT_PIECE, (int64_t)bytes, convert_pieces, &J);
    return 0;
  }
  px_iter it;
  px_iter_init(&it, dst->dim, dst->sizes);
  px_iter_add(&it, dst);
  px_iter_add(&it, src);
  px_iter_coalesce(&it);
  size_t es = px_elsize(dst->dtype);
  bool same = dst->dtype == src->dtype;
  bool via_int = px_is_integral(dst->dtype, true) && px_is_integral(src->dtype, true);
  do {
    for (int64_t k = 0; k < it.inner; k++) {
      int64_t od = it.off[0] + k * it.inner_stride[0];
      int64_t os = it.off[1] + k * it.inner_stride[1];
      if (same)
        memcpy((char *)dst->data + (size_t)od * es, (const char *)src->data + (size_t)os * es, es);
      else if (via_int)
        px_store_i(dst->data, dst->dtype, od, px_load_i(src->data, src->dtype, os));
      else
        px_store_d(dst->data, dst->dtype, od, px_load_d(src->data, src->dtype, os));
    }
  } while (px_iter_next(&it));
  return 0;
}

/* ---- broadcast iterator ------------------------------------------------ */

void px_iter_init(px_iter *it, int dim, const int64_t *sizes) {
  it->dim = dim;
  it->n = 0;
  it->numel = 1;
  for (int k = 0; k < dim; k++) {
    it->sizes[k] = sizes[k];
    it->idx[k] = 0;
    it->numel *= sizes[k];
  }
}

void px_iter_add(px_iter *it, const px_tensor *t) {
  int i = it->n++;
  int lead = it->dim - t->dim;
  for (int k = 0; k < it->dim; k++) {
    int tk = k - lead;
    int64_t s = 0;
    if (tk >= 0 && t->sizes[tk] != 1) s = t->strides[tk];
    it->strides[i][k] = s;
  }
  it->off[i] = 0;
}

void px_iter_coalesce(px_iter *it) {
  /* Drop size-1 dims, then merge dims that are contiguous for every operand. */
  int nd = 0;
  for (int k = 0; k < it->dim; k++) {
    if (it->sizes[k] == 1) continue;
    it->sizes[nd] = it->sizes[k];
    for (int i = 0; i < it->n; i++) it->strides[i][nd] = it->strides[i][k];
    nd++;
  }
  int md = 0;
  for (int k = 0; k < nd; k++) {
    if (md > 0) {
      bool merge = true;
      for (int i = 0; i < it->n; i++)
        if (it->strides[i][md - 1] != it->strides[i][k] * it->sizes[k]) merge = false;
      if (merge) {
        it->sizes[md - 1] *= it->sizes[k];
        for (int i = 0; i < it->n; i++) it->strides[i][md - 1] = it->strides[i][k];
        continue;
      }
    }
    it->sizes[md] = it->sizes[k];
    for (int i = 0; i < it->n; i++) it->strides[i][md] = it->strides[i][k];
    md++;
  }
  it->dim = md;
  for (int k = 0; k < md; k++) it->idx[k] = 0;
  for (int i = 0; i < it->n; i++) it->off[i] = 0;
  if (it->numel == 0) {
    it->inner = 0;
    for (int i = 0; i < it->n; i++) it->inner_stride[i] = 0;
    it->dim = 0;
    return;
  }
  if (md == 0) {
    it->inner = 1;
    for (int i = 0; i < it->n; i++) it->inner_stride[i] = 0;
    return;
  }
  it->inner = it->sizes[md - 1];
  for (int i = 0; i < it->n; i++) it->inner_stride[i] = it->strides[i][md - 1];
  it->dim = md - 1; /* the outer dims walked by px_iter_next */
}

void px_iter_seek(px_iter *it, int64_t row) {
  for (int k = it->dim - 1; k >= 0; k--) {
    it->idx[k] = row % it->sizes[k];
    row /= it->sizes[k];
  }
  for (int i = 0; i < it->n; i++) {
    it->off[i] = 0;
    for (int k = 0; k < it->dim; k++) it->off[i] += it->idx[k] * it->strides[i][k];
  }
}

bool px_iter_next(px_iter *it) {
  for (int k = it->dim - 1; k >= 0; k--) {
    if (++it->idx[k] < it->sizes[k]) {
      for (int i = 0; i < it->n; i++) it->off[i] += it->strides[i][k];
      return true;
    }
    it->idx[k] = 0;
    for (int i = 0; i < it->n; i++) it->off[i] -= it->strides[i][k] * (it->sizes[k] - 1);
  }
  return false;
}

int px_slice_bounds(px_ctx *ctx, const px_value *start_v, const px_value *end_v, const px_value *step_v,
                    int64_t size, int64_t *start, int64_t *len, int64_t *step) {
  int64_t st = step_v->u.i;
  if (st <= 0) return px_fail(ctx, "step %lld must be positive", (long long)st);
  int64_t b = start_v->tag == PX_V_NONE ? 0 : start_v->u.i;
  int64_t e = end_v->tag == PX_V_NONE ? size : end_v->u.i;
  if (b < 0) b = b < -size ? 0 : b + size; /* no overflow for INT64_MIN */
  if (e < 0) e = e < -size ? 0 : e + size;
  if (b > size) b = size;
  if (e > size) e = size;
  if (e < b) e = b;
  int64_t n = e == b ? 0 : 1 + (e - b - 1) / st;
  *start = b;
  *len = n;
  *step = n > 1 ? st : 1;
  return 0;
}
