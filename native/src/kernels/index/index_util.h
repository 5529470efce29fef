/*
 * index_util.h - helpers the indexing kernels (index.c, scatter.c) share
 * (private, header-only): index dtypes and loads, strided views, element
 * moves and accumulation, and the out-of-range index message.
 */
#ifndef PX_INDEX_UTIL_H
#define PX_INDEX_UTIL_H

#include <stdio.h>
#include <string.h>

#include "kernels/kernel.h"

/* ---- small helpers ------------------------------------------------------- */

static inline bool is_index_dtype(int dt) { return dt == PX_I64 || dt == PX_I32; }

static inline int64_t load_index(const void *base, int dt, int64_t k) {
  return dt == PX_I64 ? ((const int64_t *)base)[k] : (int64_t)((const int32_t *)base)[k];
}

/* A tensor header describing a view (only data, dtype, dim, sizes, strides
 * and numel are meaningful). */
static inline void view_init(px_tensor *v, void *data, int dtype, int dim, const int64_t *sizes,
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
static inline void move_run(size_t es, char *dp, int64_t dstr, const char *sp, int64_t sstr, int64_t n) {
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
static inline void acc_run(int dtype, char *dp, int64_t dstr, const char *sp, int64_t sstr, int64_t n) {
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
static inline void copy_same(px_tensor *dst, const px_tensor *src) {
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
static inline int clone_into(px_ctx *ctx, px_tensor *out, const px_tensor *self) {
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  if (out->data == self->data && out->dtype == self->dtype) return 0;
  return px_copy_strided(ctx, out, self);
}

/* Fails for index v on dimension `dim` of size `size`, naming the range the
 * kernel accepts: [-size, size - 1] when it wraps negative indices, else
 * [0, size - 1]. (The executor prefixes the kernel's name.) */
static inline int index_oob(px_ctx *ctx, int64_t v, int dim, int64_t size, bool wraps) {
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

#endif /* PX_INDEX_UTIL_H */
