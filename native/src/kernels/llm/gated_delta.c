/*
 * gated_delta.c - llama::gated_delta_rule (and its older name
 * llama::channelwise_gated_delta_rule): the gated delta rule of Qwen 3.5's
 * linear-attention layers, a recurrence over a per-head [K, V] state.
 *
 * Shapes (float32, contiguous; heads before tokens, unlike the KV caches):
 *   query  [B, Hq, T, K]      key   [B, Hs, T, K]     value [B, Hs, T, V]
 *   decay  [B, Hs, T, K] (one gate per key channel) or [B, Hs, T] (one per token)
 *   beta   [B, Hs, T]         initial_state [B, Hs, K, V]
 *   out    [B, Hq, T, V]      final_state_out [B, Hs, K, V]
 * Query head h reads state head h / (Hq / Hs). For each token t of state head s:
 *
 *   S       = diag(decay_t) S                 (row k scaled by decay_t[k])
 *   delta   = beta_t (v_t - S^T k_t)
 *   S       = S + k_t delta^T
 *   out_t,h = S^T q_t,h                        for each query head h of s
 *
 * final_state_out is the state after the last token. The exported models
 * feed the layer's recurrent-state buffer as initial_state and copy
 * final_state_out back into it; the state is copied into final_state_out
 * first and updated there, so the two may be the same memory (a buffer the
 * memory planner shares) without harm.
 *
 * The work is one (batch, state head) problem per item over the thread pool;
 * each token takes two sweeps over the [K, V] state, a row of V floats at a
 * time in the CPU's vectors: decay and S^T k in the first, the rank-one
 * update and the query heads' S^T q in the second. ExecuTorch walks a prompt in
 * chunks of 32 tokens with matrix products; the recurrence here is the
 * definition itself, token by token, so results agree with it to float32
 * rounding, not bit for bit.
 */
#include <stdio.h>
#include <string.h>

#include "core/cpu.h"
#include "core/parallel.h"
#include "kernels/llm/llm.h"

typedef struct gdr {
  const float *q, *k, *v, *decay, *beta;
  float *state, *out;
  int64_t B, Hq, Hs, T, K, V;
  bool channelwise; /* decay [B, Hs, T, K]; else [B, Hs, T] */
  float *work;      /* 2 * V floats per thread */
} gdr;

/* One (batch, state head) problem, all its tokens, stamped out for the
 * baseline and, on x86-64, AVX2 and AVX-512 (picked at run time). The row
 * loops are plain loops over restrict pointers that GCC vectorises to the
 * target's width; without contraction each element is the same multiply
 * then add whatever the width, so every build gives the same bits. */
#define DEFINE_GDR_HEAD(SFX, ATTR)                                                                   \
  ATTR static inline void decay_pred_##SFX(float *restrict row, float *restrict pred, float d, float k, \
                                           int64_t n) {                                              \
    for (int64_t j = 0; j < n; j++) {                                                                \
      row[j] *= d;                                                                                   \
      pred[j] += row[j] * k;                                                                         \
    }                                                                                                \
  }                                                                                                  \
  ATTR static inline void axpy_##SFX(float *restrict y, const float *restrict x, float a, int64_t n) { \
    for (int64_t j = 0; j < n; j++) y[j] += x[j] * a;                                                \
  }                                                                                                  \
  ATTR static void gdr_head_##SFX(const gdr *g, int64_t b, int64_t s, float *pred) {                 \
    const int64_t K = g->K, V = g->V, T = g->T, r = g->Hq / g->Hs;                                   \
    float *S = g->state + (b * g->Hs + s) * K * V;                                                   \
    const int64_t bs = b * g->Hs + s; /* (batch, state head) row of key / value / decay / beta */   \
    for (int64_t t = 0; t < T; t++) {                                                                \
      const float *kt = g->k + (bs * T + t) * K, *vt = g->v + (bs * T + t) * V;                     \
      const float beta = g->beta[bs * T + t];                                                        \
      const float *dch = g->channelwise ? g->decay + (bs * T + t) * K : NULL;                        \
      const float dsc = g->channelwise ? 0.0f : g->decay[bs * T + t];                                \
      /* sweep 1: S = diag(decay) S; pred = S^T k */                                                 \
      memset(pred, 0, sizeof(float) * (size_t)V);                                                    \
      for (int64_t kk = 0; kk < K; kk++) decay_pred_##SFX(S + kk * V, pred, dch ? dch[kk] : dsc, kt[kk], V); \
      /* delta = beta (v - pred), kept in pred */                                                    \
      for (int64_t j = 0; j < V; j++) pred[j] = (vt[j] - pred[j]) * beta;                            \
      /* sweep 2: S += k delta^T; out_h = S^T q_h for the query heads of s (64 at a time) */        \
      float *outs[64];                                                                               \
      const float *qs[64];                                                                           \
      for (int64_t i0 = 0; i0 < r; i0 += 64) {                                                       \
        int64_t ni = r - i0 < 64 ? r - i0 : 64;                                                      \
        for (int64_t i = 0; i < ni; i++) {                                                           \
          int64_t h = s * r + i0 + i;                                                                \
          qs[i] = g->q + ((b * g->Hq + h) * T + t) * K;                                              \
          outs[i] = g->out + ((b * g->Hq + h) * T + t) * V;                                          \
          memset(outs[i], 0, sizeof(float) * (size_t)V);                                             \
        }                                                                                            \
        for (int64_t kk = 0; kk < K; kk++) {                                                         \
          float *row = S + kk * V;                                                                   \
          if (i0 == 0) axpy_##SFX(row, pred, kt[kk], V);                                             \
          for (int64_t i = 0; i < ni; i++) axpy_##SFX(outs[i], row, qs[i][kk], V);                   \
        }                                                                                            \
      }                                                                                              \
    }                                                                                                \
  }
DEFINE_GDR_HEAD(base, )
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_PORTABLE_KERNELS)
#define GDR_X86 1
DEFINE_GDR_HEAD(avx2, __attribute__((target("avx2"))))
DEFINE_GDR_HEAD(avx512, __attribute__((target("avx512f"))))
#else
#define GDR_X86 0
#endif

static void gdr_head(const gdr *g, int64_t b, int64_t s, float *pred) {
#if GDR_X86
  if (px_cpu()->avx512f) {
    gdr_head_avx512(g, b, s, pred);
    return;
  }
  if (px_cpu()->avx2) {
    gdr_head_avx2(g, b, s, pred);
    return;
  }
#endif
  gdr_head_base(g, b, s, pred);
}

typedef struct gdr_job {
  const gdr *g;
} gdr_job;

static void gdr_range(void *arg, int64_t u0, int64_t u1, int tid) {
  const gdr *g = ((gdr_job *)arg)->g;
  float *pred = g->work + (size_t)tid * (size_t)g->V;
  for (int64_t u = u0; u < u1; u++) gdr_head(g, u / g->Hs, u % g->Hs, pred);
}

/* Fails unless t has `dim` dims, is float32 and contiguous. */
static int require_f32(px_ctx *ctx, const px_tensor *t, const char *what, int dim) {
  int rc;
  if (dim && t->dim != dim) {
    char why[64];
    snprintf(why, sizeof why, "expected %d dimensions", dim);
    return fail_shape(ctx, what, t, why);
  }
  if ((rc = px_require_dtype(ctx, t, PX_F32, what)) || (rc = px_require_contiguous(ctx, t, what))) return rc;
  return 0;
}

/* gated_delta_rule.out(Tensor query, Tensor key, Tensor value, Tensor decay, Tensor beta,
 *     Tensor initial_state, *, Tensor(a!) out, Tensor(b!) final_state_out) */
static int k_gated_delta_rule(px_ctx *ctx, px_value *const *args) {
  px_tensor *q = args[0]->u.t, *k = args[1]->u.t, *v = args[2]->u.t, *decay = args[3]->u.t;
  px_tensor *beta = args[4]->u.t, *st = args[5]->u.t, *out = args[6]->u.t, *fin = args[7]->u.t;
  int rc;
  if ((rc = require_f32(ctx, q, "query", 4)) || (rc = require_f32(ctx, k, "key", 4)) ||
      (rc = require_f32(ctx, v, "value", 4)))
    return rc;
  if (decay->dim != 3 && decay->dim != 4)
    return fail_shape(ctx, "decay", decay, "expected 4 dimensions (a gate per key channel) or 3 (one per token)");
  if ((rc = require_f32(ctx, decay, "decay", 0)) || (rc = require_f32(ctx, beta, "beta", 3)) ||
      (rc = require_f32(ctx, st, "initial_state", 4)) || (rc = require_f32(ctx, out, "out", 0)) ||
      (rc = require_f32(ctx, fin, "final_state_out", 0)))
    return rc;
  int64_t B = k->sizes[0], Hs = k->sizes[1], T = k->sizes[2], K = k->sizes[3];
  int64_t Hq = q->sizes[1], V = v->sizes[3];
  if (q->sizes[0] != B || q->sizes[2] != T || q->sizes[3] != K)
    return fail_shape(ctx, "query", q, "expected key's batch, sequence length and head dim ([B, Hq, T, K])");
  if (v->sizes[0] != B || v->sizes[1] != Hs || v->sizes[2] != T)
    return fail_shape(ctx, "value", v, "expected key's batch, heads and sequence length ([B, H, T, V])");
  if (decay->sizes[0] != B || decay->sizes[1] != Hs || decay->sizes[2] != T ||
      (decay->dim == 4 && decay->sizes[3] != K))
    return fail_shape(ctx, "decay", decay, "expected key's shape [B, H, T, K] or [B, H, T]");
  if (beta->sizes[0] != B || beta->sizes[1] != Hs || beta->sizes[2] != T)
    return fail_shape(ctx, "beta", beta, "expected [B, H, T] of key");
  if (Hs < 1 || Hq % Hs)
    return px_fail(ctx, "query has %lld heads and key %lld; the key's heads must divide the query's",
                   (long long)Hq, (long long)Hs);
  if (st->sizes[0] != B || st->sizes[1] != Hs || st->sizes[2] != K || st->sizes[3] != V) {
    return px_fail(ctx, "initial_state has shape [%lld, %lld, %lld, %lld]; expected [%lld, %lld, %lld, %lld] "
                   "(batch, key heads, key head dim, value head dim)",
                   (long long)st->sizes[0], (long long)st->sizes[1], (long long)st->sizes[2],
                   (long long)st->sizes[3], (long long)B, (long long)Hs, (long long)K, (long long)V);
  }
  int64_t osz[4] = {B, Hq, T, V};
  if ((rc = px_resize(ctx, out, 4, osz)) || (rc = px_resize_like(ctx, fin, st))) return rc;
  if (fin->numel && fin->data != st->data) memmove(fin->data, st->data, (size_t)fin->nbytes);
  if (out->numel == 0) return 0;
  int nt = px_parallel_threads();
  float *work = px_scratch(ctx, sizeof(float) * (size_t)V * (size_t)nt);
  if (!work) return PYEXEC_ERR_EXECUTION;
  gdr g = {q->data, k->data, v->data, decay->data, beta->data, fin->data, out->data,
           B, Hq, Hs, T, K, V, decay->dim == 4, work};
  gdr_job J = {&g};
  /* cost: about 2 K V multiply-adds per token and head, plus the query heads' */
  px_parallel_for(B * Hs, 1, B * T * K * V * (2 + 2 * (Hq / Hs)), gdr_range, &J);
  return 0;
}

const px_kernel_def px_kernels_llm_gated_delta[] = {
    {"llama::gated_delta_rule.out", "@TTTTTTTT|X", k_gated_delta_rule},
    {"llama::channelwise_gated_delta_rule.out", "@TTTTTTTT|X", k_gated_delta_rule},
    {NULL, NULL, NULL},
};
