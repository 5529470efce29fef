/*
 * sdpa.c - llama::custom_sdpa and llama::sdpa_with_kv_cache: scaled dot-
 * product attention of q [B, S, Hq, D] over the first keys of k / v
 * [B, S_kv, Hkv, D] (normally whole KV caches), causal from start_pos.
 *
 * Query row s sits at absolute position start_pos + s. With no mask the
 * keys considered are the filled part of the cache, [0, start_pos + S), and
 * with is_causal row s stops at key start_pos + s; with a 2-D [S, S_kv] mask
 * (added after scaling) every S_kv key counts. Query head h reads kv head
 * h / (Hq / Hkv) (grouped-query attention): the cache is never expanded.
 *
 * The work runs per (batch, kv head) over tiles of the query rows that share
 * that kv head (all S x Hq/Hkv of them, so a decode step's grouped heads form
 * one tile), walking the keys in blocks with an online softmax: a running
 * maximum m, a running sum l and an unnormalised accumulator per row, each
 * block rescaled by exp(m_old - m_new). Nothing is [S, S_kv]: the scratch is
 * a tile's queries, scores and accumulators and, for float16 / bfloat16, one
 * block of keys and values converted to float32 (their probabilities rounded
 * to the 16-bit type before P V, as ExecuTorch). QK^T and PV go through the
 * GEMM engine when a tile has enough rows to fill its micro-kernel, through
 * vectorised dot products and row updates otherwise (decode).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/cpu.h"
#include "core/parallel.h"
#include "kernels/elementwise/ew.h" /* vexpf: an exp that vectorises */
#include "kernels/gemm/gemm.h"
#include "kernels/llm/llm.h"

enum {
  TILE_ROWS = 64,  /* query rows per tile */
  KEY_BLOCK = 256, /* keys per block */
  GEMM_ROWS = 8    /* tiles with fewer rows use the dot-product path */
};

typedef float v4f __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
#define v4_load(p) (*(const v4f_u *)(p))
#define v4_store(p, v) (*(v4f_u *)(p) = (v))

/* Sum of a[k] * b[k], k < n, with four partial sums of 4 lanes each. */
static inline float dot_f32(const float *a, const float *b, int64_t n) {
  v4f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    s0 += v4_load(a + k) * v4_load(b + k);
    s1 += v4_load(a + k + 4) * v4_load(b + k + 4);
    s2 += v4_load(a + k + 8) * v4_load(b + k + 8);
    s3 += v4_load(a + k + 12) * v4_load(b + k + 12);
  }
  for (; k + 4 <= n; k += 4) s0 += v4_load(a + k) * v4_load(b + k);
  v4f s = (s0 + s1) + (s2 + s3);
  float r = (s[0] + s[1]) + (s[2] + s[3]);
  for (; k < n; k++) r += a[k] * b[k];
  return r;
}

/* y[k] += p * x[k], k < n. */
static inline void axpy_f32(float *y, float p, const float *x, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) v4_store(y + k, v4_load(y + k) + p * v4_load(x + k));
  for (; k < n; k++) y[k] += p * x[k];
}

/* A row of scores' two reductions and its exponentials: row_max is the
 * largest of x[0 .. len) (-inf for none; a NaN is skipped, as the scalar
 * comparison skipped it), exp_sum writes x[n] = exp(x[n] - m) with ew.h's
 * branch-free exp and returns their sum. Both keep 16 partial results, lane
 * l taking x[l], x[l + 16], ..., then combine them in a fixed order, so the
 * loops vectorise (a long prompt's attention spent most of its time in one
 * chain of compares and of adds per row, and in libm's expf) and give the
 * same bits however wide the vectors. Stamped out for the baseline and, on
 * x86-64, AVX2 and AVX-512, picked at run time. */
#define SOFTMAX_LANES 16
#define DEFINE_SOFTMAX_ROW(SFX, ATTR)                                             \
  ATTR static float row_max_##SFX(const float *x, int64_t len) {                  \
    float part[SOFTMAX_LANES];                                                    \
    for (int l = 0; l < SOFTMAX_LANES; l++) part[l] = -INFINITY;                  \
    int64_t n = 0;                                                                \
    for (; n + SOFTMAX_LANES <= len; n += SOFTMAX_LANES)                          \
      for (int l = 0; l < SOFTMAX_LANES; l++) part[l] = x[n + l] > part[l] ? x[n + l] : part[l]; \
    for (int l = 0; n + l < len; l++) part[l] = x[n + l] > part[l] ? x[n + l] : part[l]; \
    for (int w = SOFTMAX_LANES / 2; w > 0; w /= 2)                                \
      for (int l = 0; l < w; l++) part[l] = part[l + w] > part[l] ? part[l + w] : part[l]; \
    return part[0];                                                               \
  }                                                                               \
  ATTR static float exp_sum_##SFX(float *x, int64_t len, float m) {               \
    float part[SOFTMAX_LANES] = {0};                                              \
    int64_t n = 0;                                                                \
    for (; n + SOFTMAX_LANES <= len; n += SOFTMAX_LANES)                          \
      for (int l = 0; l < SOFTMAX_LANES; l++) {                                   \
        x[n + l] = vexpf(x[n + l] - m);                                           \
        part[l] += x[n + l];                                                      \
      }                                                                           \
    for (int l = 0; n + l < len; l++) {                                           \
      x[n + l] = vexpf(x[n + l] - m);                                             \
      part[l] += x[n + l];                                                        \
    }                                                                             \
    for (int w = SOFTMAX_LANES / 2; w > 0; w /= 2)                                \
      for (int l = 0; l < w; l++) part[l] += part[l + w];                         \
    return part[0];                                                               \
  }
DEFINE_SOFTMAX_ROW(base, )
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_PORTABLE_KERNELS)
#define SDPA_X86 1
DEFINE_SOFTMAX_ROW(avx2, __attribute__((target("avx2"))))
DEFINE_SOFTMAX_ROW(avx512, __attribute__((target("avx512f"))))
#else
#define SDPA_X86 0
#endif

static float row_max(const float *x, int64_t len) {
#if SDPA_X86
  if (px_cpu()->avx512f) return row_max_avx512(x, len);
  if (px_cpu()->avx2) return row_max_avx2(x, len);
#endif
  return row_max_base(x, len);
}

static float exp_sum(float *x, int64_t len, float m) {
#if SDPA_X86
  if (px_cpu()->avx512f) return exp_sum_avx512(x, len, m);
  if (px_cpu()->avx2) return exp_sum_avx2(x, len, m);
#endif
  return exp_sum_base(x, len, m);
}

/* A decode tile's two products over one block of float32 keys / values,
 * the head dim a multiple of the vector width: sc[i][n] = scale * q_i . k_n
 * and acc_i += p_i[n] * v_n for the keys n below row i's limit (lim[i] - n0
 * of the block's nb). One key row is loaded once for all the tile's rows
 * (the query heads that share its kv head); each score is one chain of
 * fused multiply-adds over the head dim, then a tree sum of the lanes. */
#if SDPA_X86
#include <immintrin.h>

__attribute__((target("avx512f"))) static void dec_block_avx512(const float *qt, int64_t mt, int64_t D,
                                                                const float *kb, int64_t ks, const float *vb,
                                                                int64_t vs, int64_t nb, const int64_t *lim,
                                                                int64_t n0, float scale, float *sc, float *acc,
                                                                int pass) {
  for (int64_t n = 0; n < nb; n++) {
    if (pass == 0) {
      const float *kr = kb + n * ks;
      for (int64_t i = 0; i < mt; i++) {
        if (n0 + n >= lim[i]) continue;
        const float *qr = qt + i * D;
        __m512 s = _mm512_mul_ps(_mm512_loadu_ps(qr), _mm512_loadu_ps(kr));
        for (int64_t d = 16; d < D; d += 16) s = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), _mm512_loadu_ps(kr + d), s);
        sc[i * KEY_BLOCK + n] = _mm512_reduce_add_ps(s) * scale;
      }
    } else {
      const float *vr = vb + n * vs;
      for (int64_t i = 0; i < mt; i++) {
        if (n0 + n >= lim[i]) continue;
        const __m512 p = _mm512_set1_ps(sc[i * KEY_BLOCK + n]);
        float *ar = acc + i * D;
        for (int64_t d = 0; d < D; d += 16)
          _mm512_storeu_ps(ar + d, _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + d), _mm512_loadu_ps(ar + d)));
      }
    }
  }
}

__attribute__((target("avx2,fma"))) static void dec_block_avx2(const float *qt, int64_t mt, int64_t D,
                                                              const float *kb, int64_t ks, const float *vb,
                                                              int64_t vs, int64_t nb, const int64_t *lim,
                                                              int64_t n0, float scale, float *sc, float *acc,
                                                              int pass) {
  for (int64_t n = 0; n < nb; n++) {
    if (pass == 0) {
      const float *kr = kb + n * ks;
      for (int64_t i = 0; i < mt; i++) {
        if (n0 + n >= lim[i]) continue;
        const float *qr = qt + i * D;
        __m256 s = _mm256_mul_ps(_mm256_loadu_ps(qr), _mm256_loadu_ps(kr));
        for (int64_t d = 8; d < D; d += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), _mm256_loadu_ps(kr + d), s);
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        sc[i * KEY_BLOCK + n] = _mm_cvtss_f32(h) * scale;
      }
    } else {
      const float *vr = vb + n * vs;
      for (int64_t i = 0; i < mt; i++) {
        if (n0 + n >= lim[i]) continue;
        const __m256 p = _mm256_set1_ps(sc[i * KEY_BLOCK + n]);
        float *ar = acc + i * D;
        for (int64_t d = 0; d < D; d += 8)
          _mm256_storeu_ps(ar + d, _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + d), _mm256_loadu_ps(ar + d)));
      }
    }
  }
}
#endif

typedef void (*dec_block_fn)(const float *qt, int64_t mt, int64_t D, const float *kb, int64_t ks, const float *vb,
                             int64_t vs, int64_t nb, const int64_t *lim, int64_t n0, float scale, float *sc,
                             float *acc, int pass);

/* The vector decode block for head dim D on this CPU, or NULL. */
static dec_block_fn dec_block(int64_t D) {
#if SDPA_X86
  if (px_cpu()->avx512f && D % 16 == 0) return dec_block_avx512;
  if (px_cpu()->avx2 && px_cpu()->fma && D % 8 == 0) return dec_block_avx2;
#endif
  (void)D;
  return NULL;
}

/* One attention problem, its arguments checked. */
typedef struct attn {
  const px_tensor *q, *k, *v, *mask;
  px_tensor *out;
  int64_t B, S, Hq, Hkv, D, Skv;
  int64_t start_pos;
  bool causal;
  float scale;
  int r16; /* float16 / bfloat16 q, k, v: the dtype P is rounded to before P V; else 0 */
  /* custom_quantized_sdpa: int8 q, k, v with a float32 scale and an int8
   * zero point per row (per (batch, position, head)); NULL for float ones */
  const px_tensor *q_sc, *q_zp, *k_sc, *k_zp, *v_sc, *v_zp;
  bool sd2; /* q, k, v and out laid out [B, H, S, D] (is_seq_at_dim_2) */
} attn;

/* Element offset of row (b, s, h) of a [B, S, H, D] tensor (or [B, H, S, D]
 * with sd2) whose sequence length is S and heads H. */
static inline int64_t row_at(const attn *a, int64_t b, int64_t s, int64_t h, int64_t S, int64_t H) {
  return (a->sd2 ? (b * H + h) * S + s : (b * S + s) * H + h) * a->D;
}

/* n int8 values (from element k) minus the zero point, as float32 */
static inline void load_i8_centered(float *dst, const int8_t *src, int64_t k, int64_t n, int32_t zp) {
  for (int64_t j = 0; j < n; j++) dst[j] = (float)((int32_t)src[k + j] - zp);
}

/* Scratch for one call: the tile's queries, scores, accumulators, running
 * max / sum and key limits, the converted key / value block, GEMM packing. */
typedef struct attn_work {
  float *qt, *sc, *acc, *m, *l, *kf, *vf, *qs;
  int64_t *lim;
  void *gemm;
} attn_work;

/* Keys [n0, n0 + nb) of kv head g in batch b as float32 rows: straight from
 * a float32 tensor (row stride Hkv * D), else converted into buf (stride D). */
static const float *key_rows(const attn *a, const px_tensor *t, float *buf, int64_t b, int64_t g, int64_t n0,
                             int64_t nb, int64_t *stride) {
  int64_t base = row_at(a, b, n0, g, a->Skv, a->Hkv), step = a->sd2 ? a->D : a->Hkv * a->D;
  if (t->dtype == PX_F32) {
    *stride = step;
    return (const float *)t->data + base;
  }
  if (t->dtype == PX_I8) {
    /* keys: k - zero point, exact integers (their scales multiply the
     * scores); values: (v - zero point) * scale, as ExecuTorch dequantizes */
    bool is_key = t == a->k;
    const px_tensor *sc = is_key ? a->k_sc : a->v_sc, *zp = is_key ? a->k_zp : a->v_zp;
    for (int64_t n = 0; n < nb; n++) {
      int64_t r = (base + n * step) / a->D;
      float *dst = buf + n * a->D;
      load_i8_centered(dst, t->data, base + n * step, a->D, ((const int8_t *)zp->data)[r]);
      if (!is_key) {
        float s = ((const float *)sc->data)[r];
        for (int64_t d = 0; d < a->D; d++) dst[d] *= s;
      }
    }
  } else {
    for (int64_t n = 0; n < nb; n++) llm_load_f32(buf + n * a->D, t->data, t->dtype, base + n * step, a->D);
  }
  *stride = a->D;
  return buf;
}

/* A quantized problem's scores of one block: the integer products times
 * q's and k's row scales, then the softmax scale. */
static void scale_scores(const attn *a, float *sc, const float *qscale, int64_t mt, int64_t b, int64_t g,
                         int64_t n0, int64_t nb, const int64_t *lim) {
  const float *ks = a->k_sc->data;
  int64_t r0 = row_at(a, b, n0, g, a->Skv, a->Hkv) / a->D, rstep = a->sd2 ? 1 : a->Hkv;
  for (int64_t i = 0; i < mt; i++) {
    int64_t valid = lim[i] - n0 < nb ? lim[i] - n0 : nb;
    float *row = sc + i * KEY_BLOCK;
    for (int64_t n = 0; n < valid; n++) row[n] = row[n] * qscale[i] * ks[r0 + n * rstep] * a->scale;
  }
}

/* Scores of one block (already in w->sc, scaled) to probabilities: masks,
 * applies the causal limit, updates each row's running max and sum, and
 * rescales its accumulator. Entries past a row's limit become 0. */
static void block_softmax(const attn *a, attn_work *w, int64_t mt, int64_t i0, int64_t n0, int64_t nb) {
  int64_t r = a->Hq / a->Hkv, D = a->D;
  for (int64_t i = 0; i < mt; i++) {
    float *row = w->sc + i * KEY_BLOCK;
    int64_t valid = w->lim[i] - n0;
    if (valid > nb) valid = nb;
    if (valid < 0) valid = 0;
    if (a->mask) {
      int64_t s = (i0 + i) / r;
      int64_t mbase = s * a->Skv + n0;
      if (a->mask->dtype == PX_F32) {
        const float *mk = (const float *)a->mask->data + mbase;
        for (int64_t n = 0; n < valid; n++) row[n] += mk[n];
      } else {
        for (int64_t n = 0; n < valid; n++) row[n] += (float)px_load_d(a->mask->data, a->mask->dtype, mbase + n);
      }
    }
    float bm = row_max(row, valid);
    float mnew = bm > w->m[i] ? bm : w->m[i];
    if (mnew == -INFINITY) { /* nothing but -inf so far: no weight */
      memset(row, 0, sizeof(float) * (size_t)nb);
      continue;
    }
    float sum = exp_sum(row, valid, mnew);
    /* ExecuTorch casts a float16 / bfloat16 problem's probabilities to
     * that type for P V (the sum keeps them unrounded) */
    if (a->r16)
      for (int64_t n = 0; n < valid; n++) row[n] = px_r16(a->r16, row[n]);
    for (int64_t n = valid; n < nb; n++) row[n] = 0.0f;
    float alpha = vexpf(w->m[i] - mnew); /* 0 for the first weighted block */
    w->l[i] = w->l[i] * alpha + sum;
    if (alpha != 1.0f) {
      float *acc = w->acc + i * D;
      for (int64_t d = 0; d < D; d++) acc[d] *= alpha;
    }
    w->m[i] = mnew;
  }
}

/* Rows [i0, i0 + mt) of the (batch b, kv head g) problem: query row i is
 * sequence position i / r of query head g * r + i % r. */
static int attend_tile(px_ctx *ctx, const attn *a, attn_work *w, int64_t b, int64_t g, int64_t i0, int64_t mt) {
  int64_t r = a->Hq / a->Hkv, D = a->D;
  int64_t kend = 0;
  for (int64_t i = 0; i < mt; i++) {
    int64_t s = (i0 + i) / r, h = g * r + (i0 + i) % r;
    int64_t qoff = row_at(a, b, s, h, a->S, a->Hq);
    if (a->q_sc) {
      load_i8_centered(w->qt + i * D, a->q->data, qoff, D, ((const int8_t *)a->q_zp->data)[qoff / D]);
      w->qs[i] = ((const float *)a->q_sc->data)[qoff / D];
    } else {
      llm_load_f32(w->qt + i * D, a->q->data, a->q->dtype, qoff, D);
    }
    w->lim[i] = a->mask ? a->Skv : a->causal ? a->start_pos + s + 1 : a->start_pos + a->S;
    if (w->lim[i] > kend) kend = w->lim[i];
    w->m[i] = -INFINITY;
    w->l[i] = 0.0f;
  }
  memset(w->acc, 0, sizeof(float) * (size_t)(mt * D));
  bool gemm = mt >= GEMM_ROWS;
  /* decode tiles of float32 caches: the vector products */
  dec_block_fn vec = !gemm && (a->k->dtype == PX_F32 || a->k->dtype == PX_I8) ? dec_block(D) : NULL;
  float alpha = a->q_sc ? 1.0f : a->scale; /* a quantized problem's scales come after */
  for (int64_t n0 = 0; n0 < kend; n0 += KEY_BLOCK) {
    int64_t nb = kend - n0 < KEY_BLOCK ? kend - n0 : KEY_BLOCK;
    int64_t ks, vs;
    const float *kb = key_rows(a, a->k, w->kf, b, g, n0, nb, &ks);
    /* scores = scale * Q K^T */
    if (gemm) {
      int rc = px_gemm_f32(ctx, w->gemm, mt, nb, D, alpha, w->qt, D, 1, kb, 1, ks, 0.0f, w->sc, KEY_BLOCK);
      if (rc) return rc;
    } else if (vec) {
      vec(w->qt, mt, D, kb, ks, NULL, 0, nb, w->lim, n0, alpha, w->sc, w->acc, 0);
    } else {
      for (int64_t i = 0; i < mt; i++) {
        int64_t valid = w->lim[i] - n0 < nb ? w->lim[i] - n0 : nb;
        for (int64_t n = 0; n < valid; n++)
          w->sc[i * KEY_BLOCK + n] = dot_f32(w->qt + i * D, kb + n * ks, D) * alpha;
      }
    }
    if (a->q_sc) scale_scores(a, w->sc, w->qs, mt, b, g, n0, nb, w->lim);
    block_softmax(a, w, mt, i0, n0, nb);
    /* acc += P V */
    const float *vb = key_rows(a, a->v, w->vf, b, g, n0, nb, &vs);
    if (gemm) {
      int rc = px_gemm_f32(ctx, w->gemm, mt, D, nb, 1.0f, w->sc, KEY_BLOCK, 1, vb, vs, 1, 1.0f, w->acc, D);
      if (rc) return rc;
    } else if (vec) {
      vec(w->qt, mt, D, NULL, 0, vb, vs, nb, w->lim, n0, a->scale, w->sc, w->acc, 1);
    } else {
      for (int64_t i = 0; i < mt; i++) {
        int64_t valid = w->lim[i] - n0 < nb ? w->lim[i] - n0 : nb;
        const float *p = w->sc + i * KEY_BLOCK;
        for (int64_t n = 0; n < valid; n++) axpy_f32(w->acc + i * D, p[n], vb + n * vs, D);
      }
    }
  }
  /* out = acc / l (a row that weighed nothing is 0 * 1/0 = NaN, as ExecuTorch's) */
  for (int64_t i = 0; i < mt; i++) {
    int64_t s = (i0 + i) / r, h = g * r + (i0 + i) % r;
    float inv = 1.0f / w->l[i], *acc = w->acc + i * D;
    for (int64_t d = 0; d < D; d++) acc[d] *= inv;
    llm_store_f32(a->out->data, a->out->dtype, row_at(a, b, s, h, a->S, a->Hq), acc, D);
  }
  return 0;
}

/* Tiles of the attention shared out over the thread pool: item u is query
 * tile u % ntiles of (batch, kv head) u / ntiles; each tile is computed whole
 * by one thread with its own scratch, so the split changes no bit. */
typedef struct attn_job {
  px_ctx *ctx;
  const attn *a;
  attn_work *w; /* one per thread */
  int64_t M, mt, ntiles;
  atomic_int rc;
  atomic_flag msg_taken; /* the first failing tile writes ctx's message */
} attn_job;

static void attend_tiles(void *arg, int64_t u0, int64_t u1, int tid) {
  attn_job *J = arg;
  const attn *a = J->a;
  char msg[256];
  /* a private context, so that tiles failing at once do not write one message */
  px_ctx local = *J->ctx;
  local.msg = msg;
  local.msg_cap = sizeof msg;
  msg[0] = 0;
  for (int64_t u = u0; u < u1 && !atomic_load_explicit(&J->rc, memory_order_relaxed); u++) {
    int64_t bg = u / J->ntiles, i0 = (u % J->ntiles) * J->mt;
    int rc = attend_tile(&local, a, &J->w[tid], bg / a->Hkv, bg % a->Hkv, i0, J->M - i0 < J->mt ? J->M - i0 : J->mt);
    if (rc) {
      if (!atomic_flag_test_and_set(&J->msg_taken)) {
        snprintf(J->ctx->msg, J->ctx->msg_cap, "%s", msg);
        atomic_store(&J->rc, rc);
      }
      return;
    }
  }
}

static int attend(px_ctx *ctx, const attn *a) {
  int64_t r = a->Hq / a->Hkv, M = a->S * r, D = a->D;
  int64_t mt = M < TILE_ROWS ? M : TILE_ROWS;
  int64_t kmax = a->mask ? a->Skv : a->start_pos + a->S;
  int64_t nb = kmax < KEY_BLOCK ? (kmax > 0 ? kmax : 1) : KEY_BLOCK;
  int64_t ntiles = (M + mt - 1) / mt, items = a->B * a->Hkv * ntiles;
  /* One tile alone runs inline, where the GEMM inside may split instead. */
  int nt = items > 1 ? px_parallel_threads() : 1;
  attn_work *ws = px_scratch(ctx, sizeof(attn_work) * (size_t)nt);
  if (!ws) return PYEXEC_ERR_EXECUTION;
  size_t fl = sizeof(float);
  for (int t = 0; t < nt; t++) {
    attn_work w = {0};
    w.qt = px_scratch(ctx, fl * (size_t)(mt * D));
    w.sc = px_scratch(ctx, fl * (size_t)(mt * KEY_BLOCK));
    w.acc = px_scratch(ctx, fl * (size_t)(mt * D));
    w.m = px_scratch(ctx, fl * (size_t)mt);
    w.l = px_scratch(ctx, fl * (size_t)mt);
    w.lim = px_scratch(ctx, sizeof(int64_t) * (size_t)mt);
    w.qs = px_scratch(ctx, fl * (size_t)mt);
    if (!w.qt || !w.sc || !w.acc || !w.m || !w.l || !w.lim || !w.qs) return PYEXEC_ERR_EXECUTION;
    if (a->k->dtype != PX_F32) {
      w.kf = px_scratch(ctx, fl * (size_t)(nb * D));
      w.vf = px_scratch(ctx, fl * (size_t)(nb * D));
      if (!w.kf || !w.vf) return PYEXEC_ERR_EXECUTION;
    }
    if (mt >= GEMM_ROWS) {
      size_t g1 = px_gemm_f32_work_size(mt, nb, D), g2 = px_gemm_f32_work_size(mt, D, nb);
      w.gemm = px_scratch(ctx, g1 > g2 ? g1 : g2);
      if (!w.gemm) return PYEXEC_ERR_EXECUTION;
    }
    ws[t] = w;
  }
  attn_job J = {.ctx = ctx, .a = a, .w = ws, .M = M, .mt = mt, .ntiles = ntiles};
  atomic_init(&J.rc, 0);
  atomic_flag_clear(&J.msg_taken);
  /* cost: the multiply-adds of Q K^T and P V */
  px_parallel_for(items, 1, 2 * a->B * a->Hq * a->S * kmax * D, attend_tiles, &J);
  return atomic_load(&J.rc);
}

/* Checks custom_sdpa's arguments (custom_quantized_sdpa's with quant) and
 * fills *a; resizes out to q's shape. args: q, k, v, start_pos, attn_mask,
 * dropout_p, is_causal, scale, then for quant the six quantization
 * parameters and is_seq_at_dim_2. */
static int attn_setup(px_ctx *ctx, px_value *const *args, px_tensor *out, attn *a, bool quant) {
  px_tensor *q = args[0]->u.t, *k = args[1]->u.t, *v = args[2]->u.t;
  px_tensor *mask = args[4]->tag == PX_V_TENSOR ? args[4]->u.t : NULL;
  int64_t start_pos = args[3]->u.i;
  bool causal = args[6]->u.b, sd2 = quant && args[14]->u.b;
  int rc;
  if ((rc = llm_require_bshd(ctx, q, "query")) || (rc = llm_require_bshd(ctx, k, "key")) ||
      (rc = llm_require_bshd(ctx, v, "value")))
    return rc;
  if (quant) {
    static const char *const names[3] = {"query", "key", "value"};
    const px_tensor *qkv[3] = {q, k, v};
    for (int t = 0; t < 3; t++)
      if ((rc = px_require_dtype(ctx, qkv[t], PX_I8, names[t]))) return rc;
    if ((rc = px_require_dtype(ctx, out, PX_F32, "out")) || (rc = px_require_contiguous(ctx, out, "out")))
      return rc;
  } else if ((rc = llm_require_attn_dtype(ctx, q, "query")) ||
             (rc = px_require_same_dtype(ctx, k, "key", q, "query")) ||
             (rc = px_require_same_dtype(ctx, v, "value", q, "query")) ||
             (rc = px_require_same_dtype(ctx, out, "out", q, "query")) ||
             (rc = px_require_contiguous(ctx, out, "out"))) {
    return rc;
  }
  for (int d = 0; d < 4; d++)
    if (k->sizes[d] != v->sizes[d]) return fail_shape(ctx, "value", v, "expected the key's shape");
  if (k->sizes[0] != q->sizes[0]) return fail_shape(ctx, "key", k, "expected the query's batch size");
  if (k->sizes[3] != q->sizes[3]) return fail_shape(ctx, "key", k, "expected the query's head_dim");
  int sdim = sd2 ? 2 : 1, hdim = sd2 ? 1 : 2;
  int64_t Hq = q->sizes[hdim], Hkv = k->sizes[hdim], S = q->sizes[sdim], Skv = k->sizes[sdim];
  if (Hkv < 1 || Hkv > Hq || Hq % Hkv)
    return px_fail(ctx, "query has %lld heads and key %lld; the key's heads must divide the query's",
                   (long long)Hq, (long long)Hkv);
  if (mask) {
    if (causal) return px_fail(ctx, "attn_mask and is_causal cannot both be given");
    if ((rc = llm_require_attn_dtype(ctx, mask, "attn_mask")) ||
        (rc = px_require_contiguous(ctx, mask, "attn_mask")))
      return rc;
    if (mask->dim != 2 || mask->sizes[0] != S || mask->sizes[1] != Skv)
      return fail_shape(ctx, "attn_mask", mask, "expected [query seq, key seq]");
  }
  if (start_pos < 0) return px_fail(ctx, "start_pos is %lld; it must be >= 0", (long long)start_pos);
  if (!mask && start_pos > Skv - S)
    return px_fail(ctx, "start_pos %lld + query's %lld positions = %lld exceeds the key's %lld positions",
                   (long long)start_pos, (long long)S, (long long)(start_pos + S), (long long)Skv);
  const px_tensor *qp[6] = {NULL};
  if (quant) {
    /* q_zero_points, q_scales, k_zero_points, k_scales, v_zero_points, v_scales:
     * one per row of their tensor, [B, S, H, 1] (or [B, H, S, 1]) */
    static const char *const names[6] = {"q_zero_points", "q_scales", "k_zero_points",
                                         "k_scales",      "v_zero_points", "v_scales"};
    for (int t = 0; t < 6; t++) {
      const px_tensor *of = t < 2 ? q : t < 4 ? k : v;
      if (args[8 + t]->tag != PX_V_TENSOR) return px_fail(ctx, "%s must be given", names[t]);
      const px_tensor *p = qp[t] = args[8 + t]->u.t;
      if ((rc = px_require_dtype(ctx, p, t % 2 ? PX_F32 : PX_I8, names[t])) ||
          (rc = px_require_contiguous(ctx, p, names[t])))
        return rc;
      bool ok = p->dim == 4 && p->sizes[3] == 1;
      for (int d = 0; ok && d < 3; d++) ok = p->sizes[d] == of->sizes[d];
      if (!ok) {
        char why[96];
        snprintf(why, sizeof why, "expected [%lld, %lld, %lld, 1]: one per row of %s", (long long)of->sizes[0],
                 (long long)of->sizes[1], (long long)of->sizes[2], t < 2 ? "query" : t < 4 ? "key" : "value");
        return fail_shape(ctx, names[t], p, why);
      }
    }
  }
  if ((rc = px_resize_like(ctx, out, q))) return rc;
  double scale = args[7]->tag == PX_V_NONE ? 1.0 / sqrt((double)q->sizes[3]) : arg_d(args[7]);
  *a = (attn){q, k, v, mask, out, q->sizes[0], S, Hq, Hkv, q->sizes[3], Skv, start_pos, causal, (float)scale,
              px_is16(q->dtype) ? q->dtype : 0, qp[1], qp[0], qp[3], qp[2], qp[5], qp[4], sd2};
  return 0;
}

/* llama::custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos,
 *     Tensor? attn_mask=None, float drpout_p=0.0, bool is_causal=False, float? scale=None,
 *     *, Tensor(a!) out) */
static int k_custom_sdpa(px_ctx *ctx, px_value *const *args) {
  attn a;
  int rc = attn_setup(ctx, args, args[8]->u.t, &a, false);
  if (rc || a.q->numel == 0) return rc;
  return attend(ctx, &a);
}

/* llama::sdpa_with_kv_cache.out(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache,
 *     Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None,
 *     float drpout_p=0.0, bool is_causal=False, float? scale=None, *, Tensor(c!) out)
 * Writes key / value into the caches at start_pos, then attends over them. */
static int k_sdpa_with_kv_cache(px_ctx *ctx, px_value *const *args) {
  px_tensor *key_cache = args[3]->u.t, *value_cache = args[4]->u.t;
  int64_t start_pos = args[5]->u.i, seq_len = args[6]->u.i;
  int rc;
  if ((rc = llm_require_bshd(ctx, key_cache, "key_cache"))) return rc;
  if (seq_len < 0 || start_pos < 0 || start_pos >= key_cache->sizes[1] ||
      seq_len > key_cache->sizes[1] - start_pos)
    return px_fail(ctx, "start_pos %lld and seq_len %lld do not fit key_cache's %lld positions",
                   (long long)start_pos, (long long)seq_len, (long long)key_cache->sizes[1]);
  if ((rc = px_llm_cache_write(ctx, args[1]->u.t, "key", key_cache, "key_cache", start_pos)) ||
      (rc = px_llm_cache_write(ctx, args[2]->u.t, "value", value_cache, "value_cache", start_pos)))
    return rc;
  px_value *sdpa_args[8] = {args[0], args[3], args[4], args[5], args[7], args[8], args[9], args[10]};
  attn a;
  if ((rc = attn_setup(ctx, sdpa_args, args[11]->u.t, &a, false)) || a.q->numel == 0) return rc;
  return attend(ctx, &a);
}

/* llama::custom_quantized_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos,
 *     Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None,
 *     Tensor? q_zero_points=None, Tensor? q_scales=None, Tensor? k_zero_points=None,
 *     Tensor? k_scales=None, Tensor? v_zero_points=None, Tensor? v_scales=None,
 *     bool is_seq_at_dim_2=False, *, Tensor(a!) out)
 * custom_sdpa over int8 q, k and v (a KV cache quantized per token and head),
 * float32 out. As ExecuTorch: the scores are the exact integer products
 * (q - zq) . (k - zk) times q's and k's row scales, V is dequantized,
 * (v - zv) * scale, before P V. */
static int k_custom_quantized_sdpa(px_ctx *ctx, px_value *const *args) {
  attn a;
  int rc = attn_setup(ctx, args, args[15]->u.t, &a, true);
  if (rc || a.q->numel == 0) return rc;
  return attend(ctx, &a);
}

const px_kernel_def px_kernels_llm_sdpa[] = {
    {"llama::custom_quantized_sdpa.out", "@TTTItDBdttttttBT|T", k_custom_quantized_sdpa},
    {"llama::custom_sdpa.out", "@TTTItDBdT|T", k_custom_sdpa},
    {"llama::sdpa_with_kv_cache.out", "@TTTTTIItDBdT|T", k_sdpa_with_kv_cache},
    {NULL, NULL, NULL},
};
