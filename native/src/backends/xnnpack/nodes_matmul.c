/*
 * nodes_matmul.c - the XNNPACK graph's products on the GEMM engine:
 * FullyConnected (leading dims kept, optional bias of OC entries: [OC] or
 * [1, OC], filter [OC, IC] or, with
 * XNN_FLAG_TRANSPOSE_WEIGHTS, [IC, OC]; then the output clamp) and
 * BatchMatrixMultiply ([..., M, K] @ [..., K, N], equal batch dims).
 *
 * A constant filter (FullyConnected) or constant B operand (BatchMatrixMultiply)
 * is packed once at init by the prepare hook into the GEMM engine's panel
 * order (node->packed); a run then multiplies without repacking it, with the
 * bias add and the output clamp applied to each output tile as it is stored
 * (the engine's epilogue). The packed copy costs about the constant's own
 * size again: K x ceil(N / 16) * 16 floats per matrix (AVX2; 8-wide panels
 * elsewhere), the program's bytes being kept as they are.
 *
 * An fp16 / bf16 constant filter or B operand (kept in its type,
 * xnn_graph.h) is packed 16-bit instead (px_gemm_h16_prepack_b: the same
 * bytes as in the file, whose pages are then handed back) and widened to
 * float32 one block at a time while the product runs: it is never resident
 * as float32.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/nodes.h"
#include "backends/xnnpack/qnodes.h"
#include "kernels/gemm/gemm.h"

static void clamp_all(float *y, int64_t n, float lo, float hi) {
  if (xnn_unbounded(lo, hi)) return;
  for (int64_t k = 0; k < n; k++) y[k] = y[k] < lo ? lo : y[k] > hi ? hi : y[k];
}

/* Filter dims as (OC, IC). */
static void fc_dims(const xnn_node *node, const xnn_value *w, int64_t *oc, int64_t *ic) {
  bool tr = node->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
  *oc = tr ? w->dims[1] : w->dims[0];
  *ic = tr ? w->dims[0] : w->dims[1];
}

int xnn_shape_fully_connected(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]];
  int64_t oc, ic;
  fc_dims(node, w, &oc, &ic);
  if (x->dims[x->num_dims - 1] != ic)
    return px_fail(ctx, "input has %lld features, the filter takes %lld", (long long)x->dims[x->num_dims - 1],
                   (long long)ic);
  /* The bias is one entry per output whatever its rank ([OC], [1, OC]). */
  if (node->in[2] != XNN_INVALID_ID && xnn_numel(&values[node->in[2]]) != oc) {
    char bd[128];
    const xnn_value *b = &values[node->in[2]];
    return px_fail(ctx, "bias value %u of dims %s has %lld entries for %lld outputs", node->in[2],
                   xnn_format_dims(bd, sizeof bd, b->num_dims, b->dims), (long long)xnn_numel(b), (long long)oc);
  }
  int64_t d[XNN_MAX_DIMS];
  memcpy(d, x->dims, sizeof(int64_t) * x->num_dims);
  d[x->num_dims - 1] = oc;
  return xnn_set_dims(ctx, node, &values[node->out[0]], x->num_dims, d);
}

/* ---- the packed-weight cache (core/pcache.h) ---- */

#define CACHE_F32 0x32334650u /* "PF32": px_gemm_f32_prepack_b's panels */
#define CACHE_H16 0x36314850u /* "PH16": px_gemm_h16_prepack_b's panels */

/* The packed panels from the cache, when it has an entry of exactly the
 * size the shapes give; otherwise they are packed and put there. */
static bool from_cache(xnn_node *node, uint32_t tag, size_t bytes) {
  const void *e = xnn_cache_take(tag, bytes);
  if (!e) return false;
  xnn_set_packed(node, (void *)(uintptr_t)e, bytes, true);
  return true;
}

/* Packs matrices [0, count) of K x N, each at B + i * stride with element
 * (k, j) at [k * rsb + j * csb], into node->packed, one after the other. */
static int pack_constant(px_ctx *ctx, xnn_node *node, int64_t count, int64_t N, int64_t K,
                         const float *B, int64_t stride, int64_t rsb, int64_t csb) {
  size_t one = px_gemm_f32_prepack_size(N, K);
  if (count <= 0 || N <= 0 || K <= 0) return 0;
  if ((size_t)count > SIZE_MAX / one) return px_fail(ctx, "packed weights are too large");
  if (from_cache(node, CACHE_F32, one * (size_t)count)) return 0;
  float *pb = malloc(one * (size_t)count);
  if (!pb) return px_fail(ctx, "out of memory packing %zu bytes of weights", one * (size_t)count);
  for (int64_t i = 0; i < count; i++)
    px_gemm_f32_prepack_b(N, K, B + i * stride, rsb, csb, pb + (size_t)i * (one / sizeof(float)));
  xnn_set_packed(node, pb, one * (size_t)count, false);
  xnn_cache_put(CACHE_F32, pb, one * (size_t)count);
  return 0;
}

static bool half_type(int datatype) { return datatype == XNN_DT_FP16 || datatype == XNN_DT_BF16; }

/* pack_constant for an fp16 / bf16 B: 16-bit panels. */
static int pack_constant_h16(px_ctx *ctx, xnn_node *node, int64_t count, int64_t N, int64_t K,
                             const uint16_t *B, int64_t stride, int64_t rsb, int64_t csb) {
  size_t one = px_gemm_h16_prepack_size(N, K);
  if (count <= 0 || N <= 0 || K <= 0) return 0;
  if ((size_t)count > SIZE_MAX / one) return px_fail(ctx, "packed weights are too large");
  if (from_cache(node, CACHE_H16, one * (size_t)count)) return 0;
  uint16_t *pb = malloc(one * (size_t)count);
  if (!pb) return px_fail(ctx, "out of memory packing %zu bytes of weights", one * (size_t)count);
  for (int64_t i = 0; i < count; i++)
    px_gemm_h16_prepack_b(N, K, B + i * stride, rsb, csb, pb + (size_t)i * (one / sizeof(uint16_t)));
  xnn_set_packed(node, pb, one * (size_t)count, false);
  xnn_cache_put(CACHE_H16, pb, one * (size_t)count);
  return 0;
}

int xnn_prepare_fully_connected(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  if (node->f16n) {
    int rc = xnn_f16n_prepare_fc(ctx, node, values);
    if (rc || node->f16n) return rc;
  }
  const xnn_value *w = &values[node->in[1]];
  if (!w->constant || w->num_dims != 2) return 0; /* a run-time filter: packed per call */
  int64_t oc, ic;
  fc_dims(node, w, &oc, &ic);
  bool tr = node->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
  int rc = half_type(w->datatype) ? pack_constant_h16(ctx, node, 1, oc, ic, w->data, 0, tr ? oc : 1, tr ? 1 : ic)
                                  : pack_constant(ctx, node, 1, oc, ic, w->data, 0, tr ? oc : 1, tr ? 1 : ic);
  /* The run reads only the packed copy: hand the file's pages of the filter
   * back, so a program (or its .ptd) is not resident twice. */
  if (!rc) px_drop_file_pages(w->data, w->constant_size);
  return rc;
}

int xnn_exec_fully_connected(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  if (node->f16n) return xnn_f16n_exec_fc(ctx, node, values);
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]];
  xnn_value *o = &values[node->out[0]];
  int64_t oc, ic;
  fc_dims(node, w, &oc, &ic);
  int64_t m = ic ? xnn_numel(x) / ic : xnn_numel(o) / (oc ? oc : 1);
  float *y = o->data;
  if (!m || !oc) return 0;
  if (node->packed) {
    px_gemm_epilogue ep = {node->in[2] != XNN_INVALID_ID ? values[node->in[2]].data : NULL,
                           node->output_min, node->output_max, false, xnn_post_fn(node)};
    if (half_type(w->datatype))
      return px_gemm_h16_prepacked_ep(ctx, NULL, m, oc, ic, x->data, ic, 1, node->packed,
                                      w->datatype == XNN_DT_BF16, 0.0f, y, oc, &ep);
    return px_gemm_f32_prepacked_ep(ctx, NULL, m, oc, ic, x->data, ic, 1, NULL, NULL, node->packed, 0.0f, y,
                                    oc, &ep);
  }
  float beta = 0.0f;
  if (node->in[2] != XNN_INVALID_ID) {
    const float *b = values[node->in[2]].data;
    for (int64_t r = 0; r < m; r++) memcpy(y + r * oc, b, sizeof(float) * (size_t)oc);
    beta = 1.0f;
  }
  bool tr = node->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
  int rc = px_gemm_f32(ctx, NULL, m, oc, ic, 1.0f, x->data, ic, 1, w->data, tr ? oc : 1, tr ? 1 : ic, beta, y,
                       oc);
  if (rc) return rc;
  clamp_all(y, m * oc, node->output_min, node->output_max);
  xnn_post_all(node, y, m * oc);
  return 0;
}

int xnn_shape_batch_matrix_multiply(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *a = &values[node->in[0]], *b = &values[node->in[1]];
  uint32_t r = a->num_dims;
  for (uint32_t k = 0; k + 2 < r; k++)
    if (a->dims[k] != b->dims[k])
      return px_fail(ctx, "batch dim %u differs: %lld vs %lld", k, (long long)a->dims[k], (long long)b->dims[k]);
  if (a->dims[r - 1] != b->dims[r - 2])
    return px_fail(ctx, "inner dims differ: %lld vs %lld", (long long)a->dims[r - 1], (long long)b->dims[r - 2]);
  int64_t d[XNN_MAX_DIMS];
  memcpy(d, a->dims, sizeof(int64_t) * r);
  d[r - 1] = b->dims[r - 1];
  return xnn_set_dims(ctx, node, &values[node->out[0]], r, d);
}

int xnn_prepare_batch_matrix_multiply(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  if (node->f16n) {
    int rc = xnn_f16n_prepare_bmm(ctx, node, values);
    if (rc || node->f16n) return rc;
  }
  const xnn_value *b = &values[node->in[1]];
  uint32_t r = b->num_dims;
  if (!b->constant || r < 2) return 0;
  int64_t K = b->dims[r - 2], N = b->dims[r - 1], batch = 1;
  for (uint32_t k = 0; k + 2 < r; k++) batch *= b->dims[k];
  if (half_type(b->datatype)) {
    int rc = pack_constant_h16(ctx, node, batch, N, K, b->data, K * N, N, 1);
    if (!rc) px_drop_file_pages(b->data, b->constant_size);
    return rc;
  }
  return pack_constant(ctx, node, batch, N, K, b->data, K * N, N, 1);
}

int xnn_exec_batch_matrix_multiply(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  if (node->f16n) return xnn_f16n_exec_bmm(ctx, node, values);
  const xnn_value *a = &values[node->in[0]], *b = &values[node->in[1]];
  xnn_value *o = &values[node->out[0]];
  uint32_t r = a->num_dims;
  int64_t M = a->dims[r - 2], K = a->dims[r - 1], N = b->dims[r - 1];
  int64_t batch = 1;
  for (uint32_t k = 0; k + 2 < r; k++) batch *= a->dims[k];
  if (!batch || !M || !N) return 0;
  void *work = px_scratch(ctx, px_gemm_f32_work_size(M, N, K));
  if (!work) return PYEXEC_ERR_EXECUTION;
  const float *pa = a->data, *pb = b->data;
  float *po = o->data;
  if (node->packed && half_type(b->datatype)) {
    const uint16_t *packed = node->packed;
    const int64_t one = (int64_t)(px_gemm_h16_prepack_size(N, K) / sizeof(uint16_t));
    for (int64_t i = 0; i < batch; i++) {
      int rc = px_gemm_h16_prepacked_ep(ctx, work, M, N, K, pa + i * M * K, K, 1, packed + i * one,
                                        b->datatype == XNN_DT_BF16, 0.0f, po + i * M * N, N, NULL);
      if (rc) return rc;
    }
    return 0;
  }
  if (node->packed) {
    const float *packed = node->packed;
    const int64_t one = (int64_t)(px_gemm_f32_prepack_size(N, K) / sizeof(float));
    for (int64_t i = 0; i < batch; i++) {
      int rc = px_gemm_f32_prepacked(ctx, work, M, N, K, pa + i * M * K, K, 1, NULL, NULL, packed + i * one, 0.0f,
                                     po + i * M * N, N);
      if (rc) return rc;
    }
    return 0;
  }
  for (int64_t i = 0; i < batch; i++) {
    int rc = px_gemm_f32(ctx, work, M, N, K, 1.0f, pa + i * M * K, K, 1, pb + i * K * N, N, 1, 0.0f, po + i * M * N, N);
    if (rc) return rc;
  }
  return 0;
}
