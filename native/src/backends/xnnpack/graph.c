/*
 * graph.c - the helpers every part of the XNNPACK backend uses on the parsed
 * graph (xnn_graph.h, qnodes.h): node type and datatype names, element
 * sizes, dims as text, the checked setting of a value's current dims, a
 * quantized value's scales, the layout of a qdint8 value's per-row
 * parameters, and handing back a packed constant's pages. It calls nothing
 * of the backend's other files, so every node file, the payload parser and
 * the plan can use it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/qnodes.h"
#include "core/alloc.h"
#include "core/pcache.h"

static const char *const node_names[XNN_NODE_MAX + 1] = {
    NULL, "Add", "FullyConnected", "Softmax", "Sigmoid", "StaticTranspose", "Clamp", "Conv2d", "Div",
    "StaticResizeBilinear2D", "StaticConstantPad", "AvgPooling2d", "Minimum", "DepthwiseConv2d",
    "MaxPooling2d", "Multiply", "Subtract", "Floor", "Convert", "GlobalAvgPooling2d", "StaticReshape",
    "ArgMaxPooling2d", "SquareRoot", "Ceiling", "Hardswish", "LeakyReLU", "Maximum", "Negate", "Square",
    "ELU", "Abs", "PReLU", "Concatenate2", "Concatenate3", "Concatenate4", "StaticSlice",
    "ScaledDotProductAttention", "BatchMatrixMultiply", "Concatenate5", "ConvTranspose2d",
    "ReciprocalSquareRoot", "Log", "Gelu", "Tanh", "Exp", "Sin", "Copy", "Cos"};

const char *xnn_node_type_name(int type) {
  if (type == XNN_NODE_lookup8) return "Lookup8";
  if (type == XNN_NODE_silu) return "SiLU [Sigmoid, Multiply]";
  if (type == XNN_NODE_block) return "InvertedResidual";
  if (type == XNN_NODE_quantize_rows) return "QuantizeRows";
  return type >= 1 && type <= XNN_NODE_MAX ? node_names[type] : "?";
}

static const char *const dt_names[] = {"invalid", "fp32",   "fp16",   "qint8", "quint8", "qint32",
                                       "qcint8",  "qcint32", "qcint4", "qdint8", "qbint4", "qpint8",
                                       "int32",   "pfp32",  "bf16"};

const char *xnn_datatype_name(int datatype) {
  return datatype >= 0 && datatype <= XNN_DT_BF16 ? dt_names[datatype] : "?";
}

const char *xnn_format_dims(char *buf, size_t cap, uint32_t n, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (uint32_t i = 0; i < n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

size_t xnn_datatype_size(int datatype) {
  switch (datatype) {
    case XNN_DT_FP32: case XNN_DT_INT32: case XNN_DT_QINT32: case XNN_DT_QCINT32: return 4;
    case XNN_DT_FP16: case XNN_DT_BF16: return 2;
    case XNN_DT_QINT8: case XNN_DT_QUINT8: case XNN_DT_QCINT8: case XNN_DT_QDINT8: return 1;
    default: return 0;
  }
}

int xnn_set_dims(px_ctx *ctx, const xnn_node *node, xnn_value *v, uint32_t nd, const int64_t *dims) {
  const char *name = node ? xnn_node_type_name(node->type) : "input";
  if (nd != v->num_dims) return px_fail(ctx, "%s: output has rank %u, the node computes rank %u", name, v->num_dims, nd);
  uint64_t numel = 1;
  for (uint32_t k = 0; k < nd; k++) {
    if (dims[k] < 0) return px_fail(ctx, "%s: negative size %lld", name, (long long)dims[k]);
    if (dims[k] && numel > UINT64_MAX / 16 / (uint64_t)dims[k])
      return px_fail(ctx, "%s: output size overflows", name);
    numel *= (uint64_t)dims[k];
  }
  if (numel * xnn_datatype_size(v->datatype) > v->capacity) {
    char s[160];
    int n = 0;
    for (uint32_t k = 0; k < nd && n < (int)sizeof s - 24; k++)
      n += snprintf(s + n, sizeof s - (size_t)n, "%s%lld", k ? ", " : "", (long long)dims[k]);
    return px_fail(ctx, "%s: output shape [%s] exceeds its upper bound of %zu bytes", name, s, v->capacity);
  }
  for (uint32_t k = 0; k < nd; k++) v->dims[k] = dims[k];
  return 0;
}

float xnn_quant_scale(const xnn_quant *q, uint32_t i) {
  float f;
  uint32_t bits;
  uint16_t h;
  switch (q->scale_kind) {
    case XNN_SCALES_F32:
      memcpy(&f, (const uint8_t *)q->scales + 4 * (size_t)i, 4);
      return f;
    case XNN_SCALES_BF16:
      memcpy(&h, (const uint8_t *)q->scales + 2 * (size_t)i, 2);
      bits = (uint32_t)h << 16;
      memcpy(&f, &bits, 4);
      return f;
    case XNN_SCALES_F32_AS_BF16: /* XNNPACK's legacy conversion: scale up, keep the top half */
      memcpy(&f, (const uint8_t *)q->scales + 4 * (size_t)i, 4);
      f *= 1.00389105f;
      memcpy(&bits, &f, 4);
      bits &= 0xFFFF0000u;
      memcpy(&f, &bits, 4);
      return f;
    default: return q->scale;
  }
}

/* ---- qdint8 values ------------------------------------------------------------ */

static int64_t lead_rows(const xnn_value *v, const int64_t *dims) {
  int64_t r = 1;
  for (uint32_t k = 0; k + (uint32_t)v->quant.num_nonbatch_dims < v->num_dims; k++) r *= dims[k];
  return r;
}

static size_t qd8_numel_max(const xnn_value *v) {
  size_t n = 1;
  for (uint32_t k = 0; k < v->num_dims; k++) n *= (size_t)v->max_dims[k];
  return n;
}

static size_t qd8_params_offset(const xnn_value *v) { return (qd8_numel_max(v) + 63) & ~(size_t)63; }

/* The most rows the value may hold: its dims as written need not be in the
 * layout it has when it runs (a convolution's qdint8 input is written in
 * the float input's NCHW order and runs NHWC), so the bound assumes its
 * trailing num_nonbatch_dims dims may be any of the written ones: the
 * elements over the product of the smallest of them. */
static size_t qd8_rows_max(const xnn_value *v) {
  int64_t d[XNN_MAX_DIMS];
  uint32_t nd = v->num_dims, nnb = (uint32_t)v->quant.num_nonbatch_dims;
  for (uint32_t k = 0; k < nd; k++) d[k] = v->max_dims[k];
  int64_t inner = 1;
  for (uint32_t t = 0; t < nnb && t < nd; t++) { /* the nnb smallest, by selection */
    uint32_t lo = t;
    for (uint32_t k = t + 1; k < nd; k++)
      if (d[k] < d[lo]) lo = k;
    int64_t tmp = d[t];
    d[t] = d[lo];
    d[lo] = tmp;
    inner *= d[t];
  }
  size_t n = qd8_numel_max(v);
  return inner > 0 ? n / (size_t)inner : 1;
}

size_t xnn_qd8_numel_max(const xnn_value *v) { return qd8_numel_max(v); }

size_t xnn_qd8_rows_max(const xnn_value *v) { return qd8_rows_max(v); }

size_t xnn_qd8_capacity(const xnn_value *v) { return qd8_params_offset(v) + qd8_rows_max(v) * 8; }

int64_t xnn_qd8_rows(const xnn_value *v) { return lead_rows(v, v->dims); }

void xnn_qd8_params(const xnn_value *v, int32_t **zp, float **scale) {
  uint8_t *base = (uint8_t *)v->data + qd8_params_offset(v);
  *zp = (int32_t *)base;
  *scale = (float *)(base + 4 * qd8_rows_max(v));
}

/* ---- packed weights and the packed-weight cache ---------------------------------------- */

/* Packed weights taken from the cache file belong to its mapping. */
static void borrowed_release(void *packed) { (void)packed; }

void xnn_set_packed(xnn_node *node, void *p, size_t size, bool borrowed) {
  if (node->release) node->release(node->packed);
  else free(node->packed);
  node->packed = p;
  node->packed_size = size;
  node->release = borrowed ? borrowed_release : NULL;
}

const void *xnn_cache_take(uint32_t tag, size_t bytes) {
  px_pcache *c = px_pcache_current();
  size_t n;
  const void *e = px_pcache_take(c, tag, &n);
  if (e && n != bytes) {
    px_pcache_reject(c);
    return NULL;
  }
  return e;
}

void xnn_cache_put(uint32_t tag, const void *p, size_t bytes) {
  px_pcache_put(px_pcache_current(), tag, 1, &p, &bytes);
}
