/*
 * cache.c - llama::update_cache and llama::update_cache_with_indices: a
 * step's keys or values written into a [B, S_max, H, D] KV cache in place.
 *
 * Both take an `out` that ExecuTorch's exporter plans as a [1] placeholder;
 * the kernels never write it (ExecuTorch's do not either). The cache itself
 * is the value they change.
 */
#include <string.h>

#include "kernels/llm/llm.h"

/* value and cache: both [B, *, H, D], contiguous, one dtype. */
static int check_pair(px_ctx *ctx, const px_tensor *value, const char *vname, const px_tensor *cache,
                      const char *cname) {
  int rc;
  if ((rc = llm_require_bshd(ctx, value, vname)) || (rc = llm_require_bshd(ctx, cache, cname)) ||
      (rc = px_require_same_dtype(ctx, value, vname, cache, cname)))
    return rc;
  static const char *const dims[4] = {"batch", "seq", "heads", "head_dim"};
  for (int k = 0; k < 4; k++)
    if (k != 1 && value->sizes[k] != cache->sizes[k])
      return px_fail(ctx, "%s has %s size %lld but %s has %lld", vname, dims[k], (long long)value->sizes[k],
                     cname, (long long)cache->sizes[k]);
  return 0;
}

int px_llm_cache_write(px_ctx *ctx, const px_tensor *value, const char *vname, px_tensor *cache,
                       const char *cname, int64_t start_pos) {
  int rc = check_pair(ctx, value, vname, cache, cname);
  if (rc) return rc;
  int64_t S = value->sizes[1], max_seq = cache->sizes[1];
  if (start_pos < 0 || start_pos >= max_seq)
    return px_fail(ctx, "start_pos %lld is outside %s's %lld positions [0, %lld)", (long long)start_pos, cname,
                   (long long)max_seq, (long long)max_seq);
  if (S > max_seq - start_pos)
    return px_fail(ctx, "start_pos %lld + %s's %lld positions = %lld overruns %s's %lld positions",
                   (long long)start_pos, vname, (long long)S, (long long)(start_pos + S), cname,
                   (long long)max_seq);
  if (value->numel == 0) return 0;
  size_t es = px_elsize(value->dtype);
  size_t row = (size_t)px_prod(value->sizes, 2, 4) * es; /* one position: H * D elements */
  for (int64_t b = 0; b < value->sizes[0]; b++)
    memmove((char *)cache->data + ((size_t)(b * max_seq + start_pos)) * row,
            (const char *)value->data + (size_t)(b * S) * row, (size_t)S * row);
  return 0;
}

/* llama::update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, Tensor(b!) out) */
static int k_update_cache(px_ctx *ctx, px_value *const *args) {
  return px_llm_cache_write(ctx, args[0]->u.t, "value", args[1]->u.t, "cache", args[2]->u.i);
}

/* llama::update_cache_with_indices.out(Tensor value, Tensor(a!) cache, SymInt start_pos,
 *                                      Tensor indices, *, Tensor(b!) out)
 * value[b, s] goes to cache[b, indices[b, s]]; start_pos is not used. */
static int k_update_cache_with_indices(px_ctx *ctx, px_value *const *args) {
  px_tensor *value = args[0]->u.t, *cache = args[1]->u.t, *indices = args[3]->u.t;
  int rc = check_pair(ctx, value, "value", cache, "cache");
  if (rc) return rc;
  if ((rc = px_require_dtype(ctx, indices, PX_I64, "indices")) ||
      (rc = px_require_contiguous(ctx, indices, "indices")))
    return rc;
  if (indices->dim != 2 || indices->sizes[0] != value->sizes[0] || indices->sizes[1] != value->sizes[1])
    return fail_shape(ctx, "indices", indices, "expected [batch, seq] of value");
  int64_t B = value->sizes[0], S = value->sizes[1], max_seq = cache->sizes[1];
  size_t row = (size_t)px_prod(value->sizes, 2, 4) * px_elsize(value->dtype);
  const int64_t *idx = indices->data;
  /* every index checked before anything is written */
  for (int64_t k = 0; k < B * S; k++)
    if (idx[k] < 0 || idx[k] >= max_seq)
      return px_fail(ctx, "indices[%lld, %lld] is %lld, outside cache's %lld positions [0, %lld)",
                     (long long)(k / S), (long long)(k % S), (long long)idx[k], (long long)max_seq,
                     (long long)max_seq);
  if (row == 0) return 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++)
      memmove((char *)cache->data + (size_t)(b * max_seq + idx[b * S + s]) * row,
              (const char *)value->data + (size_t)(b * S + s) * row, row);
  return 0;
}

const px_kernel_def px_kernels_llm_cache[] = {
    {"llama::update_cache.out", "@TTIT|T", k_update_cache},
    {"llama::update_cache_with_indices.out", "@TTITT|T", k_update_cache_with_indices},
    {NULL, NULL, NULL},
};
