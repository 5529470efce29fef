/*
 * nodes_f16n.c - the float16 graph's products and convolutions in float16
 * arithmetic, where the CPU has it (kernels/gemm/f16n.h): FullyConnected,
 * BatchMatrixMultiply, Conv2d and DepthwiseConv2d (channel multiplier 1)
 * whose operands and output are float16, as XNNPACK runs them on the same
 * CPU (each sum a float16 register, rounded at every multiply-add), so the
 * two runtimes give the same bits.
 *
 * backend.c marks the candidates (node->f16n: a float16 output not
 * downstream of a quantized value, on a CPU with AVX512-FP16); the prepare
 * hooks here pack their filters into float16 panels (the file's bytes as
 * they are, behind the float16 bias padded to whole panels) or clear the
 * mark, and the node then runs as before (float32 arithmetic, rounded).
 * A marked node's inputs (float32 storage holding float16 values) are
 * narrowed into float16 scratch once per call; its output is stored as
 * float32 holding float16 values, which need no rounding after it.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/conv_plan.h"
#include "backends/xnnpack/nodes.h"
#include "backends/xnnpack/qnodes.h"
#include "core/parallel.h"
#include "kernels/convert/convert16.h"
#include "kernels/gemm/f16n.h"

/* Rows of output pixels gathered per convolution chunk. */
#define CONV_ROWS 32

static int64_t panels(int64_t n) { return (n + PX_F16N_NR - 1) / PX_F16N_NR; }

/* A packed float16 product: the bias (panels * 32 entries, zero past N;
 * absent: NULL), then `count` matrices of panels. */
typedef struct f16n_mat {
  int64_t N, K, count;
  uint16_t *bias;
  uint16_t *w;
  size_t one; /* halves per matrix */
} f16n_mat;

static f16n_mat *mat_new(px_ctx *ctx, int64_t N, int64_t K, int64_t count, bool bias) {
  const size_t one = px_f16n_pack_size(N, K) / sizeof(uint16_t);
  const size_t nb = bias ? (size_t)panels(N) * PX_F16N_NR : 0;
  if (count <= 0 || one > (SIZE_MAX / 4 - nb) / (size_t)count) {
    px_fail(ctx, "packed weights are too large");
    return NULL;
  }
  f16n_mat *m = malloc(sizeof *m + sizeof(uint16_t) * (nb + one * (size_t)count));
  if (!m) {
    px_fail(ctx, "out of memory packing float16 weights");
    return NULL;
  }
  m->N = N, m->K = K, m->count = count, m->one = one;
  m->bias = bias ? (uint16_t *)(m + 1) : NULL;
  m->w = (uint16_t *)(m + 1) + nb;
  if (bias) memset(m->bias, 0, sizeof(uint16_t) * nb);
  return m;
}

/* The packed-weight cache (core/pcache.h): a node's float16 weights (bias
 * and panels, one entry) are taken from the cache file when it holds an
 * entry of exactly the size the shapes give; otherwise packed and put. */
#define CACHE_F16N_MAT 0x4d363146u  /* "F16M": an f16n_mat's bias and panels */
#define CACHE_F16N_CONV 0x43363146u /* "F16C": a float16 conv plan's bias and filter */

/* m's bias and panels (body bytes from m->bias on, as mat_new lays them
 * out) from the cache: m then keeps only its header, pointing into the
 * cache's mapping, and becomes node->packed. */
static bool mat_from_cache(xnn_node *node, f16n_mat *m, size_t body) {
  const void *e = xnn_cache_take(CACHE_F16N_MAT, body);
  if (!e) return false;
  const bool bias = m->bias != NULL;
  const size_t nb = bias ? (size_t)(m->w - m->bias) : 0;
  f16n_mat *h = realloc(m, sizeof *m);
  if (!h) h = m;
  h->bias = bias ? (uint16_t *)(uintptr_t)e : NULL;
  h->w = (uint16_t *)(uintptr_t)e + nb;
  xnn_set_packed(node, h, sizeof *h, false);
  return true;
}

/* A float16 value stored as float32 (not a constant), or absent. */
static bool f16_value(const xnn_value *v) { return v->half == XNN_DT_FP16 && v->datatype == XNN_DT_FP32; }

/* A constant filter of a float16 node: float16, or float32 (ExecuTorch's
 * exporter may keep a float16 graph's convolution weights and biases in
 * float32; XNNPACK narrows such static weights to float16 when it packs
 * them, and so does the prepare hook). */
static bool filter_ok(const xnn_value *f) {
  return f->constant && (f->datatype == XNN_DT_FP16 || (f->datatype == XNN_DT_FP32 && !f->half));
}

/* The filter's n values as float16: its own bytes, or a malloc'd narrowed
 * copy (NULL when out of memory). */
static const uint16_t *narrow_filter(const xnn_value *f, int64_t n) {
  if (f->datatype == XNN_DT_FP16) return f->constant;
  uint16_t *c = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
  if (c) px_f32_to_f16(c, f->constant, n);
  return c;
}

/* ---- FullyConnected ------------------------------------------------------------ */

int xnn_f16n_prepare_fc(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  if (!filter_ok(w) || w->num_dims != 2 || !f16_value(x) || (b && !b->constant) || node->post) {
    node->f16n = false;
    return 0;
  }
  const bool tr = node->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
  const int64_t oc = tr ? w->dims[1] : w->dims[0], ic = tr ? w->dims[0] : w->dims[1];
  if (b && xnn_numel(b) != oc) return px_fail(ctx, "bias has %lld entries for %lld outputs", (long long)xnn_numel(b),
                                              (long long)oc);
  f16n_mat *m = mat_new(ctx, oc, ic, 1, true);
  if (!m) return PYEXEC_ERR_EXECUTION;
  const size_t body = sizeof(uint16_t) * ((size_t)panels(oc) * PX_F16N_NR + m->one);
  if (!mat_from_cache(node, m, body)) {
    const uint16_t *fw = narrow_filter(w, oc * ic);
    if (!fw) {
      free(m);
      return px_fail(ctx, "out of memory narrowing a float32 filter to float16");
    }
    px_f16n_pack_b(oc, ic, fw, tr ? oc : 1, tr ? 1 : ic, m->w);
    if (fw != w->data) free((void *)(uintptr_t)fw);
    if (b) px_f32_to_f16(m->bias, b->data, oc);
    xnn_cache_put(CACHE_F16N_MAT, m->bias, body);
    xnn_set_packed(node, m, sizeof *m + body, false);
  }
  px_drop_file_pages(w->data, w->constant_size);
  return 0;
}

typedef struct gemm_job {
  const f16n_mat *m;
  const uint16_t *A, *B; /* B: the packed matrices (m->w, or packed per call) */
  int64_t M, N, K, batch, qpairs, mblocks;
  float lo, hi;
  float *C;
} gemm_job;

/* Item = (matrix, panel pair, block of 8 rows), panel pairs outer. */
static void gemm_chunk(void *arg, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const gemm_job *j = arg;
  const int64_t per = j->qpairs * j->mblocks;
  for (int64_t it = begin; it < end;) {
    const int64_t bi = it / per, r = it % per, qp = r / j->mblocks, mb0 = r % j->mblocks;
    int64_t mb1 = mb0 + (end - it);
    if (mb1 > j->mblocks) mb1 = j->mblocks;
    const int64_t i0 = mb0 * 8, i1 = mb1 * 8 < j->M ? mb1 * 8 : j->M;
    const size_t one = px_f16n_pack_size(j->N, j->K) / sizeof(uint16_t);
    px_f16n_gemm(i1 - i0, j->N, j->K, j->A + (bi * j->M + i0) * j->K, j->K, j->B + (size_t)bi * one, qp * 2,
                 qp * 2 + 2, j->m ? j->m->bias : NULL, j->lo, j->hi, j->C + (bi * j->M + i0) * j->N, j->N);
    it += mb1 - mb0;
  }
}

static void run_gemm(gemm_job *j) {
  j->qpairs = (panels(j->N) + 1) / 2;
  j->mblocks = (j->M + 7) / 8;
  const int64_t items = j->batch * j->qpairs * j->mblocks;
  px_parallel_for(items, 1, j->batch * j->M * j->N * j->K, gemm_chunk, j);
}

/* x's float32 storage narrowed to float16 scratch. */
static uint16_t *narrow(px_ctx *ctx, const float *x, int64_t n) {
  uint16_t *a = px_scratch(ctx, sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
  if (a) px_f32_to_f16(a, x, n);
  return a;
}

int xnn_f16n_exec_fc(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const f16n_mat *m = node->packed;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *o = &values[node->out[0]];
  const int64_t M = m->K ? xnn_numel(x) / m->K : 0;
  if (!M || !m->N) return 0;
  const uint16_t *a = narrow(ctx, x->data, M * m->K);
  if (!a) return PYEXEC_ERR_EXECUTION;
  gemm_job j = {m, a, m->w, M, m->N, m->K, 1, 0, 0, node->output_min, node->output_max, o->data};
  run_gemm(&j);
  return 0;
}

/* ---- BatchMatrixMultiply ------------------------------------------------------- */

int xnn_f16n_prepare_bmm(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  const xnn_value *a = &values[node->in[0]], *b = &values[node->in[1]];
  const uint32_t r = b->num_dims;
  if (!f16_value(a) || r < 2 || node->flags || !(b->constant ? b->datatype == XNN_DT_FP16 : f16_value(b))) {
    node->f16n = false;
    return 0;
  }
  if (!b->constant) return 0; /* packed per call */
  int64_t K = b->dims[r - 2], N = b->dims[r - 1], batch = 1;
  for (uint32_t k = 0; k + 2 < r; k++) batch *= b->dims[k];
  f16n_mat *m = mat_new(ctx, N, K, batch, false);
  if (!m) return PYEXEC_ERR_EXECUTION;
  const size_t body = sizeof(uint16_t) * m->one * (size_t)batch;
  if (!mat_from_cache(node, m, body)) {
    for (int64_t i = 0; i < batch; i++)
      px_f16n_pack_b(N, K, (const uint16_t *)b->data + i * K * N, N, 1, m->w + (size_t)i * m->one);
    xnn_cache_put(CACHE_F16N_MAT, m->w, body);
    xnn_set_packed(node, m, sizeof *m + body, false);
  }
  px_drop_file_pages(b->data, b->constant_size);
  return 0;
}

int xnn_f16n_exec_bmm(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *a = &values[node->in[0]], *b = &values[node->in[1]];
  xnn_value *o = &values[node->out[0]];
  const uint32_t r = a->num_dims;
  const int64_t M = a->dims[r - 2], K = a->dims[r - 1], N = b->dims[r - 1];
  int64_t batch = 1;
  for (uint32_t k = 0; k + 2 < r; k++) batch *= a->dims[k];
  if (!batch || !M || !N) return 0;
  if (!K) {
    memset(o->data, 0, sizeof(float) * (size_t)(batch * M * N));
    return 0;
  }
  const uint16_t *pa = narrow(ctx, a->data, batch * M * K);
  if (!pa) return PYEXEC_ERR_EXECUTION;
  const uint16_t *pb;
  if (node->packed) {
    pb = ((const f16n_mat *)node->packed)->w;
  } else {
    const size_t one = px_f16n_pack_size(N, K) / sizeof(uint16_t);
    uint16_t *p = px_scratch(ctx, sizeof(uint16_t) * one * (size_t)batch);
    if (!p) return PYEXEC_ERR_EXECUTION;
    for (int64_t i = 0; i < batch; i++)
      px_f16n_pack_b_f32(N, K, (const float *)b->data + i * K * N, N, 1, p + (size_t)i * one);
    pb = p;
  }
  gemm_job j = {NULL, pa, pb, M, N, K, batch, 0, 0, node->output_min, node->output_max, o->data};
  run_gemm(&j);
  return 0;
}

/* ---- Conv2d and DepthwiseConv2d ---------------------------------------------------- */

/* After the checks of conv_prepare (nodes_conv.c): p is the checked plan.
 * Returns 0 with node->packed the float16 plan, or 0 with node->f16n
 * cleared when the node is not one this file runs, or a failure. */
int xnn_f16n_prepare_conv(px_ctx *ctx, xnn_node *node, const xnn_value *values, const conv_plan *p) {
  const xnn_value *x = &values[node->in[0]], *f = &values[node->in[1]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  const bool dw = p->kind == CONV_DEPTHWISE;
  if (!filter_ok(f) || !f16_value(x) || node->post ||
      (p->kind != CONV_PLAIN && !(dw && p->Cout_g == 1))) {
    node->f16n = false;
    return 0;
  }
  const int64_t taps = p->KH * p->KW;
  const int64_t K = dw ? taps : taps * p->Cin_g;
  /* bias: per group, whole panels (depthwise: one group of Cout) */
  const int64_t bstride = dw ? p->Cout : panels(p->Cout_g) * PX_F16N_NR;
  const int64_t nbias = dw ? p->Cout : bstride * p->G;
  const size_t wg = dw ? (size_t)(taps * p->Cout) : px_f16n_pack_size(p->Cout_g, K) / sizeof(uint16_t);
  const size_t nw = dw ? wg : wg * (size_t)p->G;
  const size_t head = (sizeof(conv_plan) + 63) / 64 * 64;
  const size_t body = sizeof(uint16_t) * ((size_t)nbias + nw);
  conv_plan plan0 = *p;
  plan0.K = K;
  plan0.direct = !dw && p->KH == 1 && p->KW == 1 && p->sh == 1 && p->sw == 1 && !p->pt && !p->pl && !p->pb && !p->pr;
  plan0.bias = NULL, plan0.w = NULL, plan0.wino = NULL;
  plan0.f16n = true;
  plan0.wg = wg;
  /* the bias and filter from the packed-weight cache: the plan's head alone
   * is allocated, pointing into the cache's mapping */
  const void *entry = xnn_cache_take(CACHE_F16N_CONV, body);
  if (entry) {
    conv_plan *plan = malloc(sizeof *plan);
    if (!plan) return px_fail(ctx, "out of memory for a convolution's plan");
    *plan = plan0;
    plan->bias16 = (uint16_t *)(uintptr_t)entry;
    plan->w16 = plan->bias16 + nbias;
    px_drop_file_pages(f->constant, f->constant_size);
    xnn_set_packed(node, plan, sizeof *plan, false);
    return 0;
  }
  const size_t total = head + body + 64;
  char *mem = aligned_alloc(64, (total + 63) / 64 * 64);
  if (!mem) return px_fail(ctx, "out of memory packing %zu bytes of float16 weights", total);
  conv_plan *plan = (conv_plan *)mem;
  *plan = plan0;
  plan->bias16 = (uint16_t *)(mem + head);
  plan->w16 = plan->bias16 + nbias;
  memset(plan->bias16, 0, sizeof(uint16_t) * (size_t)nbias);
  for (int64_t g = 0; g < (dw ? 1 : p->G); g++) {
    const int64_t n = dw ? p->Cout : p->Cout_g;
    if (b) px_f32_to_f16(plan->bias16 + g * bstride, (const float *)b->constant + g * n, n);
  }
  const uint16_t *fw = narrow_filter(f, dw ? (int64_t)wg : p->Cout * K);
  if (!fw) {
    free(mem);
    return px_fail(ctx, "out of memory narrowing a float32 filter to float16");
  }
  if (dw) {
    memcpy(plan->w16, fw, sizeof(uint16_t) * wg);
  } else {
    /* B(k, j) = filter[g*Cout_g + j][k], k = (ky*KW + kx)*Cin_g + c */
    for (int64_t g = 0; g < p->G; g++)
      px_f16n_pack_b(p->Cout_g, K, fw + g * p->Cout_g * K, 1, K, plan->w16 + (size_t)g * wg);
  }
  if (fw != f->constant) free((void *)(uintptr_t)fw);
  xnn_cache_put(CACHE_F16N_CONV, plan->bias16, body);
  px_drop_file_pages(f->constant, f->constant_size);
  xnn_set_packed(node, plan, total, false);
  return 0;
}

typedef struct conv_job {
  const conv_plan *p;
  const uint16_t *x; /* the input, float16 NHWC, zero-padded to Hp x Wp (plain) */
  const int64_t *off; /* segments (segments()) */
  int64_t nseg, len;
  int64_t Hp, Wp, OH, OW, M;
  float lo, hi;
  float *y;
} conv_job;

/* The segments of a window as the product reads them (px_f16n_conv_gemm):
 * a kernel row of KW * Cin values where the group is the whole pixel and
 * taps are adjacent, else one tap's Cin_g channels; offsets from the
 * window's first value in the padded input. Returns the segment count. */
static int64_t segments(const conv_job *j, int64_t *off, int64_t *len) {
  const conv_plan *p = j->p;
  const int64_t Cin = p->Cin;
  if (p->Cin_g == Cin && p->dw == 1) {
    for (int64_t ky = 0; ky < p->KH; ky++) off[ky] = ky * p->dh * j->Wp * Cin;
    *len = p->KW * Cin;
    return p->KH;
  }
  for (int64_t ky = 0; ky < p->KH; ky++)
    for (int64_t kx = 0; kx < p->KW; kx++) off[ky * p->KW + kx] = (ky * p->dh * j->Wp + kx * p->dw) * Cin;
  *len = p->Cin_g;
  return p->KH * p->KW;
}

static void conv_chunk(void *arg, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_job *j = arg;
  const conv_plan *p = j->p;
  const int64_t q = panels(p->Cout_g), bstride = q * PX_F16N_NR, OHW = j->OH * j->OW;
  const uint16_t *rows[CONV_ROWS];
  for (int64_t blk = begin; blk < end; blk++) {
    const int64_t r0 = blk * CONV_ROWS, n = j->M - r0 < CONV_ROWS ? j->M - r0 : CONV_ROWS;
    for (int64_t g = 0; g < p->G; g++) {
      /* each output pixel's window in the padded input (pixel r0 found by
       * division once, the next ones by counting) */
      int64_t img = r0 / OHW, oh = r0 % OHW / j->OW, ow = r0 % j->OW;
      for (int64_t i = 0; i < n; i++) {
        rows[i] = j->x + (img * j->Hp * j->Wp + oh * p->sh * j->Wp + ow * p->sw) * p->Cin + g * p->Cin_g;
        if (++ow == j->OW) {
          ow = 0;
          if (++oh == j->OH) oh = 0, img++;
        }
      }
      px_f16n_conv_gemm(n, p->Cout_g, j->nseg, j->len, j->off, rows, p->w16 + (size_t)g * p->wg, 0, q,
                        p->bias16 + g * bstride, j->lo, j->hi, j->y + r0 * p->Cout + g * p->Cout_g, p->Cout);
    }
  }
}

typedef struct dw_job {
  px_f16n_dw d;
  const uint16_t *x;
  int64_t N;
  float *y;
} dw_job;

/* Item = (image, output row). */
static void dw_chunk(void *arg, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const dw_job *j = arg;
  const px_f16n_dw *d = &j->d;
  for (int64_t it = begin; it < end;) {
    const int64_t img = it / d->OH, oh0 = it % d->OH;
    const int64_t oh1 = oh0 + (end - it) < d->OH ? oh0 + (end - it) : d->OH;
    px_f16n_dwconv_rows(d, j->x + img * d->Hp * d->Wp * d->C, oh0, oh1, j->y + img * d->OH * d->OW * d->C);
    it += oh1 - oh0;
  }
}

/* The NHWC input narrowed to float16 into scratch, inside a zero border of
 * the plan's padding. */
static const uint16_t *narrow_padded(px_ctx *ctx, const float *src, const conv_plan *p, int64_t N, int64_t H,
                                     int64_t W) {
  const int64_t Hp = H + p->pt + p->pb, Wp = W + p->pl + p->pr, Cin = p->Cin;
  uint16_t *x = px_scratch(ctx, sizeof(uint16_t) * (size_t)(N * Hp * Wp * Cin + 1));
  if (!x) return NULL;
  if (Hp == H && Wp == W) {
    px_f32_to_f16(x, src, N * H * W * Cin);
    return x;
  }
  for (int64_t img = 0; img < N; img++) {
    uint16_t *xi = x + img * Hp * Wp * Cin;
    memset(xi, 0, sizeof(uint16_t) * (size_t)(p->pt * Wp * Cin));
    memset(xi + (p->pt + H) * Wp * Cin, 0, sizeof(uint16_t) * (size_t)(p->pb * Wp * Cin));
    for (int64_t h = 0; h < H; h++) {
      uint16_t *row = xi + (p->pt + h) * Wp * Cin;
      memset(row, 0, sizeof(uint16_t) * (size_t)(p->pl * Cin));
      px_f32_to_f16(row + p->pl * Cin, src + (img * H + h) * W * Cin, W * Cin);
      memset(row + (p->pl + W) * Cin, 0, sizeof(uint16_t) * (size_t)(p->pr * Cin));
    }
  }
  return x;
}

int xnn_f16n_exec_conv(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const conv_plan *p = node->packed;
  const xnn_value *xv = &values[node->in[0]], *yv = &values[node->out[0]];
  const int64_t N = xv->dims[0], H = xv->dims[1], W = xv->dims[2], OH = yv->dims[1], OW = yv->dims[2];
  const int64_t M = N * OH * OW;
  if (M == 0) return 0;
  /* the input narrowed once, into a zero border of the padding's width:
   * every window then lies inside it */
  const int64_t Hp = H + p->pt + p->pb, Wp = W + p->pl + p->pr;
  const uint16_t *x = narrow_padded(ctx, xv->data, p, N, H, W);
  if (!x) return PYEXEC_ERR_EXECUTION;
  if (p->kind == CONV_DEPTHWISE) {
    int64_t *toff = px_scratch(ctx, sizeof(int64_t) * 2 * (size_t)(p->KH * p->KW));
    if (!toff) return PYEXEC_ERR_EXECUTION;
    dw_job j = {{Hp, Wp, p->Cout, p->KH, p->KW, p->sh, p->sw, p->dh, p->dw, OH, OW, p->w16, p->bias16, toff,
                 toff + p->KH * p->KW, node->output_min, node->output_max},
                x, N, yv->data};
    px_f16n_dw_taps(&j.d, toff, toff + p->KH * p->KW);
    px_parallel_for(N * OH, 1, M * p->Cout * p->KH * p->KW, dw_chunk, &j);
    return 0;
  }
  int64_t *off = px_scratch(ctx, sizeof(int64_t) * (size_t)(p->KH * p->KW));
  if (!off) return PYEXEC_ERR_EXECUTION;
  conv_job j = {p, x, off, 0, 0, Hp, Wp, OH, OW, M, node->output_min, node->output_max, yv->data};
  j.nseg = segments(&j, off, &j.len);
  px_parallel_for((M + CONV_ROWS - 1) / CONV_ROWS, 1, M * p->Cout * p->K, conv_chunk, &j);
  return 0;
}
