/*
 * llm.h - what the llama custom-operator kernels (llm/: cache.c, sdpa.c,
 * hadamard.c) share (private): the [B, S, H, D] shape checks, the float32
 * rows the attention core reads, and the cache write that update_cache and
 * sdpa_with_kv_cache both do.
 *
 * ExecuTorch's LLM exports lay every tensor out as [batch, sequence, heads,
 * head dim], contiguous; the KV caches are [B, S_max, H_kv, D] mutable
 * buffers that keep their contents from one execute call to the next.
 */
#ifndef PX_LLM_H
#define PX_LLM_H

#include "kernels/common.h"

/* Fails unless t is a contiguous 4-D [B, S, H, D] tensor. */
static inline int llm_require_bshd(px_ctx *ctx, const px_tensor *t, const char *what) {
  if (t->dim != 4) return fail_shape(ctx, what, t, "expected 4 dims [batch, seq, heads, head_dim]");
  return px_require_contiguous(ctx, t, what);
}

/* Fails unless t's dtype is float32, float16 or bfloat16. */
static inline int llm_require_attn_dtype(px_ctx *ctx, const px_tensor *t, const char *what) {
  if (t->dtype != PX_F32 && t->dtype != PX_F16 && t->dtype != PX_BF16)
    return px_fail(ctx, "%s has dtype %s; expected float32, float16 or bfloat16", what,
                   px_dtype_name(t->dtype));
  return 0;
}

/* n elements of a float32, float16 or bfloat16 buffer (from element k) as
 * float32 into dst. */
static inline void llm_load_f32(float *dst, const void *src, int dtype, int64_t k, int64_t n) {
  if (dtype == PX_F32) {
    const float *s = (const float *)src + k;
    for (int64_t j = 0; j < n; j++) dst[j] = s[j];
  } else if (dtype == PX_F16) {
    const uint16_t *s = (const uint16_t *)src + k;
    for (int64_t j = 0; j < n; j++) dst[j] = px_half_to_float(s[j]);
  } else {
    const uint16_t *s = (const uint16_t *)src + k;
    for (int64_t j = 0; j < n; j++) dst[j] = px_bf16_to_float(s[j]);
  }
}

/* n float32 values into a float32, float16 or bfloat16 buffer from element k
 * (rounded to nearest even). */
static inline void llm_store_f32(void *dst, int dtype, int64_t k, const float *src, int64_t n) {
  if (dtype == PX_F32) {
    float *d = (float *)dst + k;
    for (int64_t j = 0; j < n; j++) d[j] = src[j];
  } else if (dtype == PX_F16) {
    uint16_t *d = (uint16_t *)dst + k;
    for (int64_t j = 0; j < n; j++) d[j] = px_float_to_half(src[j]);
  } else {
    uint16_t *d = (uint16_t *)dst + k;
    for (int64_t j = 0; j < n; j++) d[j] = px_float_to_bf16(src[j]);
  }
}

/* update_cache's work (cache.c): checks value [B, S, H, D] against cache
 * [B, S_max, H, D] (names `vname` / `cname` in messages) and start_pos, then
 * copies value's S rows of every batch to cache[b, start_pos : start_pos + S]. */
int px_llm_cache_write(px_ctx *ctx, const px_tensor *value, const char *vname, px_tensor *cache,
                    const char *cname, int64_t start_pos);

#endif /* PX_LLM_H */
