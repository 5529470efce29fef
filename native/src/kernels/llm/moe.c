/*
 * moe.c - llama::quantized_moe_ffn: a mixture-of-experts feed-forward block
 * whose experts' weights are 4- or 8-bit, packed as torchao's
 * linear_8bit_act_xbit_weight blobs (one row of packed_w13 / packed_w2 per
 * expert), as ExecuTorch's replace_moe_with_quantized_op exports it.
 *
 * For each token x (a row of x [T, D]):
 *   scores = gate_weight x                        (gate_weight [E, D])
 *   sigmoid: s = sigmoid(scores); the top k of s + expert_bias choose the
 *            experts, weighted by their s renormalised to sum route_scale;
 *   softmax: the top k of the raw scores, weighted by a softmax over those k.
 *   out = sum over the chosen experts e of weight_e * W2_e (silu(h1) * h3),
 *         [h1; h3] = W13_e x                      (W13_e [2F, D], W2_e [D, F])
 * Ties in the top k go to the lower expert index; the experts' contributions
 * are added in increasing expert order, as ExecuTorch's kernel adds them.
 *
 * The blob: a 64-byte header, then the [N, K] weight in blocks of 8 rows
 * (nr), each block group by group (group_size values of K, a multiple of
 * 16): for every 16 values of K (kr) the block's 8 x 16 values, reordered
 * into two halves of 8 values per row (sr = 2: value (row r, k0 + h*8 + j)
 * at h*64 + r*8 + j) and bit-packed (8 bits: the int8 values as they are;
 * 4 bits: value + 8, 32 values in 16 bytes, byte i holding value i in its
 * low nibble and value i + 16 in its high one); after the group's values,
 * the 8 rows' float32 scales, then 8 int32 sums (not used here). A weight is
 * its integer value times its group's scale, symmetric (no zero point).
 *
 * The experts a call uses are unpacked into float32 scratch once each, then
 * their rows go through vectorised dot products.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/llm/llm.h"

enum { HEADER = 64, NR = 8, KR = 16 };

typedef float v4f __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
#define v4_load(p) (*(const v4f_u *)(p))

static inline float dot(const float *a, const float *b, int64_t n) {
  v4f s0 = {0}, s1 = {0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    s0 += v4_load(a + k) * v4_load(b + k);
    s1 += v4_load(a + k + 4) * v4_load(b + k + 4);
  }
  for (; k + 4 <= n; k += 4) s0 += v4_load(a + k) * v4_load(b + k);
  v4f s = s0 + s1;
  float r = (s[0] + s[1]) + (s[2] + s[3]);
  for (; k < n; k++) r += a[k] * b[k];
  return r;
}

/* Bytes a blob of an [n, k] weight needs (header included). */
static int64_t blob_bytes(int64_t n, int64_t k, int64_t gs, int nbit) {
  int64_t per_row = k / 8 * nbit + (k / gs) * 8; /* values, then a scale and a sum per group */
  return HEADER + (n + NR - 1) / NR * NR * per_row;
}

/* The [n, k] weight of a blob as float32 into w. */
static void unpack_blob(const uint8_t *blob, int64_t n, int64_t k, int64_t gs, int nbit, float *w) {
  const uint8_t *p = blob + HEADER;
  const int64_t groups = k / gs, chunk = nbit * NR * KR / 8;
  int8_t vals[NR * KR];
  for (int64_t n0 = 0; n0 < n; n0 += NR) {
    for (int64_t g = 0; g < groups; g++) {
      for (int64_t k0 = g * gs; k0 < (g + 1) * gs; k0 += KR) {
        if (nbit == 4) {
          for (int c = 0; c < 4; c++)
            for (int i = 0; i < 16; i++) {
              uint8_t b = p[16 * c + i];
              vals[32 * c + i] = (int8_t)((b & 15) - 8);
              vals[32 * c + i + 16] = (int8_t)((b >> 4) - 8);
            }
        } else {
          memcpy(vals, p, NR * KR);
        }
        p += chunk;
        for (int q = 0; q < NR * KR; q++) {
          int64_t r = n0 + (q % 64) / 8, kk = k0 + (q / 64) * 8 + q % 8;
          if (r < n) w[r * k + kk] = (float)vals[q];
        }
      }
      for (int r = 0; r < NR; r++) {
        float s;
        memcpy(&s, p + 4 * r, sizeof s);
        if (n0 + r < n)
          for (int64_t kk = g * gs; kk < (g + 1) * gs; kk++) w[(n0 + r) * k + kk] *= s;
      }
      p += 8 * NR; /* the scales, then the sums */
    }
  }
}

/* The top kk of scores[0 .. e) into idx (ties: the lower index; NaNs
 * skipped, then the lowest unchosen indices fill what is left). */
static void top_k(const float *scores, int64_t e, int64_t kk, int32_t *idx) {
  for (int64_t i = 0; i < kk; i++) {
    int32_t best = -1;
    float bs = -INFINITY;
    for (int64_t j = 0; j < e; j++) {
      bool taken = false;
      for (int64_t m = 0; m < i && !taken; m++) taken = idx[m] == (int32_t)j;
      if (taken) continue;
      if (scores[j] > bs || (scores[j] == bs && best < 0)) {
        bs = scores[j];
        best = (int32_t)j;
      }
    }
    for (int64_t j = 0; best < 0 && j < e; j++) {
      bool taken = false;
      for (int64_t m = 0; m < i && !taken; m++) taken = idx[m] == (int32_t)j;
      if (!taken) best = (int32_t)j;
    }
    idx[i] = best;
  }
}

static inline bool str_is(const px_value *v, const char *s) {
  size_t n = strlen(s);
  return v->u.str.n == n && memcmp(v->u.str.p, s, n) == 0;
}

static int require(px_ctx *ctx, const px_tensor *t, int dtype, const char *what, int dim) {
  int rc;
  if ((rc = px_require_dtype(ctx, t, dtype, what)) || (rc = px_require_contiguous(ctx, t, what))) return rc;
  if (t->dim != dim) {
    return px_fail(ctx, "%s has %d dimensions; expected %d", what, t->dim, dim);
  }
  return 0;
}

/* quantized_moe_ffn.out(Tensor x, Tensor gate_weight, Tensor expert_bias, Tensor packed_w13,
 *     Tensor packed_w2, int num_activated_experts, int num_experts, int hidden_dim, int dim,
 *     int group_size, int weight_nbit, str score_func, float route_scale, *, Tensor(a!) out) */
static int k_quantized_moe_ffn(px_ctx *ctx, px_value *const *args) {
  px_tensor *x = args[0]->u.t, *gw = args[1]->u.t, *bias = args[2]->u.t, *w13 = args[3]->u.t, *w2 = args[4]->u.t;
  px_tensor *out = args[13]->u.t;
  int64_t K = args[5]->u.i, E = args[6]->u.i, F = args[7]->u.i, D = args[8]->u.i, gs = args[9]->u.i;
  int64_t nbit = args[10]->u.i;
  const px_value *score_func = args[11];
  double route_scale = arg_d(args[12]);
  int rc;
  if ((rc = require(ctx, x, PX_F32, "x", 2))) return rc;
  if (x->sizes[1] != D)
    return px_fail(ctx, "x has %lld features but dim is %lld", (long long)x->sizes[1], (long long)D);
  if ((rc = require(ctx, gw, PX_F32, "gate_weight", 2))) return rc;
  if (gw->sizes[0] != E || gw->sizes[1] != D)
    return fail_shape(ctx, "gate_weight", gw, "expected [num_experts, dim]");
  bool use_bias = bias->numel > 0;
  if (use_bias) {
    if ((rc = require(ctx, bias, PX_F32, "expert_bias", 1))) return rc;
    if (bias->sizes[0] != E) return fail_shape(ctx, "expert_bias", bias, "expected [num_experts] or empty");
  }
  if ((rc = require(ctx, w13, PX_U8, "packed_w13", 2)) || (rc = require(ctx, w2, PX_U8, "packed_w2", 2))) return rc;
  if (w13->sizes[0] != E) return fail_shape(ctx, "packed_w13", w13, "expected one row per expert");
  if (w2->sizes[0] != E) return fail_shape(ctx, "packed_w2", w2, "expected one row per expert");
  if (K < 1 || K > E)
    return px_fail(ctx, "num_activated_experts is %lld; expected 1 to num_experts (%lld)", (long long)K, (long long)E);
  bool sigmoid = str_is(score_func, "sigmoid");
  if (!sigmoid && !str_is(score_func, "softmax"))
    return px_fail(ctx, "score_func is \"%.*s\"; expected \"sigmoid\" or \"softmax\"", (int)score_func->u.str.n,
                   score_func->u.str.p);
  if (use_bias && !sigmoid) return px_fail(ctx, "expert_bias is only supported with score_func \"sigmoid\"");
  if (nbit != 4 && nbit != 8) return px_fail(ctx, "weight_nbit is %lld; expected 4 or 8", (long long)nbit);
  if (gs <= 0 || D <= 0 || F <= 0 || gs % KR)
    return px_fail(ctx, "group_size %lld, dim %lld and hidden_dim %lld must be positive, group_size a multiple of %d",
                   (long long)gs, (long long)D, (long long)F, KR);
  if (D > INT32_MAX || F > INT32_MAX) /* (torchao's packing indexes with int) */
    return px_fail(ctx, "dim %lld and hidden_dim %lld must be below 2^31", (long long)D, (long long)F);
  if (D % gs || F % gs)
    return px_fail(ctx, "group_size %lld must divide dim %lld and hidden_dim %lld", (long long)gs, (long long)D,
                   (long long)F);
  int64_t need13 = blob_bytes(2 * F, D, gs, (int)nbit), need2 = blob_bytes(D, F, gs, (int)nbit);
  if (w13->sizes[1] < need13)
    return px_fail(ctx, "packed_w13 has %lld bytes per expert; [2 * hidden_dim, dim] at %lld bits needs %lld",
                   (long long)w13->sizes[1], (long long)nbit, (long long)need13);
  if (w2->sizes[1] < need2)
    return px_fail(ctx, "packed_w2 has %lld bytes per expert; [dim, hidden_dim] at %lld bits needs %lld",
                   (long long)w2->sizes[1], (long long)nbit, (long long)need2);
  if ((rc = px_require_dtype(ctx, out, PX_F32, "out"))) return rc;
  int64_t T = x->sizes[0], osz[2] = {T, D};
  if ((rc = px_resize(ctx, out, 2, osz))) return rc;
  float *o = out->data;
  memset(o, 0, sizeof(float) * (size_t)(T * D));
  if (T == 0) return 0;
  const float *xs = x->data, *gwd = gw->data, *bd = use_bias ? bias->data : NULL;
  /* routing */
  float *scores = px_scratch(ctx, sizeof(float) * (size_t)(E * 2));
  int32_t *idx = px_scratch(ctx, sizeof(int32_t) * (size_t)(T * K));
  float *wt = px_scratch(ctx, sizeof(float) * (size_t)(T * K));
  float *w13f = px_scratch(ctx, sizeof(float) * (size_t)(2 * F * D));
  float *w2f = px_scratch(ctx, sizeof(float) * (size_t)(D * F));
  float *h = px_scratch(ctx, sizeof(float) * (size_t)(2 * F));
  if (!scores || !idx || !wt || !w13f || !w2f || !h) return PYEXEC_ERR_EXECUTION;
  for (int64_t t = 0; t < T; t++) {
    float *sel = scores + E;
    for (int64_t e = 0; e < E; e++) {
      scores[e] = dot(gwd + e * D, xs + t * D, D);
      if (sigmoid) scores[e] = 1.0f / (1.0f + expf(-scores[e]));
      sel[e] = bd ? scores[e] + bd[e] : scores[e];
    }
    int32_t *ir = idx + t * K;
    float *wr = wt + t * K;
    top_k(sel, E, K, ir);
    if (sigmoid) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; k++) sum += wr[k] = scores[ir[k]];
      float s = (float)route_scale / (sum + 1e-20f);
      for (int64_t k = 0; k < K; k++) wr[k] *= s;
    } else {
      float m = scores[ir[0]], sum = 0.0f;
      for (int64_t k = 1; k < K; k++) m = scores[ir[k]] > m ? scores[ir[k]] : m;
      for (int64_t k = 0; k < K; k++) sum += wr[k] = expf(scores[ir[k]] - m);
      float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      for (int64_t k = 0; k < K; k++) wr[k] *= inv;
    }
  }
  /* experts in increasing order, each unpacked once */
  for (int64_t e = 0; e < E; e++) {
    bool used = false;
    for (int64_t i = 0; i < T * K && !used; i++) used = idx[i] == (int32_t)e;
    if (!used) continue;
    unpack_blob((const uint8_t *)w13->data + e * w13->sizes[1], 2 * F, D, gs, (int)nbit, w13f);
    unpack_blob((const uint8_t *)w2->data + e * w2->sizes[1], D, F, gs, (int)nbit, w2f);
    for (int64_t t = 0; t < T; t++)
      for (int64_t k = 0; k < K; k++) {
        if (idx[t * K + k] != (int32_t)e) continue;
        const float *xr = xs + t * D;
        for (int64_t j = 0; j < 2 * F; j++) h[j] = dot(w13f + j * D, xr, D);
        for (int64_t j = 0; j < F; j++) h[j] = h[j] / (1.0f + expf(-h[j])) * h[F + j];
        float g = wt[t * K + k], *orow = o + t * D;
        for (int64_t d = 0; d < D; d++) orow[d] += g * dot(w2f + d * F, h, F);
      }
  }
  return 0;
}

const px_kernel_def px_kernels_llm_moe[] = {
    {"llama::quantized_moe_ffn.out", "@TTTTTIIIIIIRDT|T", k_quantized_moe_ffn},
    {NULL, NULL, NULL},
};
