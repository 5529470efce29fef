/*
 * payload.c - the XnnpackBackend payload: the XH00 header (or the legacy
 * bare flatbuffer), the XNNGraph flatbuffer (schema.fbs, identifier XN00 or
 * XN01) and its constants, read with the bounds-checked flatbuffer reader
 * and checked into an xnn_graph (xnn_graph.h) before anything runs.
 */
#include "backends/xnnpack/payload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/nodes.h"
#include "core/error.h"
#include "core/limits.h"
#include "kernels/convert/convert16.h"
#include "loader/fb.h"
#include "loader/program.h"

#define BAD(...) px_invalid_program("XNNPACK payload: " __VA_ARGS__)

/* Slots (schema.fbs declaration order). */
enum { G_VERSION, G_XNODES, G_XVALUES, G_NUM_EXTERNS, G_INPUT_IDS, G_OUTPUT_IDS, G_CONSTANT_BUFFER,
       G_MEM_BUFFER_SIZES, G_CONSTANT_DATA };
enum { XNODE_TYPE, XNODE_UNION, XNODE_DEBUG_HANDLE, XNODE_MIN_MAX };
enum { XVALUE_TYPE, XVALUE_UNION };
enum { TV_DATATYPE, TV_NUM_DIMS, TV_DIMS, TV_CONSTANT_IDX, TV_EXTERNAL_ID, TV_FLAGS, TV_ID_OUT };
enum { QV_TENSOR, QV_PARAMS_TYPE, QV_PARAMS };
enum { CDO_OFFSET, CDO_SIZE, CDO_KEY };

/* A scalar field of n bytes (f32, i16, which fb.h does not read); absent
 * fields keep *out. False when the field lies outside the buffer. */
static bool fb_raw(const px_fb_table *t, int slot, size_t n, void *out) {
  size_t e = 4 + 2 * (size_t)slot;
  if (e + 2 > t->vtlen) return true;
  uint16_t off;
  memcpy(&off, t->buf + t->vt + e, 2);
  if (!off) return true;
  size_t p = t->pos + off;
  if (p > t->len || n > t->len - p) return false;
  memcpy(out, t->buf + p, n);
  return true;
}

static bool fb_f32(const px_fb_table *t, int slot, float def, float *out) {
  *out = def;
  return fb_raw(t, slot, 4, out);
}

/* A [uint] vector of at most XNN_MAX_DIMS entries into out[]; *n its length. */
static bool fb_u32s(const px_fb_table *t, int slot, uint32_t *out, uint32_t *n) {
  px_fb_vec v;
  if (!px_fb_vector(t, slot, 4, &v) || v.count > XNN_MAX_DIMS) return false;
  for (uint32_t k = 0; k < v.count; k++) out[k] = (uint32_t)px_fb_vec_i32(&v, k);
  *n = v.count;
  return true;
}

/* ---- the blob ----------------------------------------------------------- */

typedef struct blob {
  const uint8_t *fb; /* the XNNGraph flatbuffer */
  size_t fb_len;
  bool has_header;
  const uint8_t *cdata; /* constant region (header form) */
  uint64_t cdata_len;
} blob;

static pyexec_status read_header(const uint8_t *b, size_t size, blob *out) {
  memset(out, 0, sizeof *out);
  if (size < 8) return BAD("%zu bytes, too small for a payload", size);
  if (size < 30 || memcmp(b + 4, "XH00", 4) != 0) { /* legacy: a bare flatbuffer */
    out->fb = b;
    out->fb_len = size;
    return PYEXEC_OK;
  }
  uint32_t fb_off, fb_size, c_off;
  uint64_t c_size;
  memcpy(&fb_off, b + 10, 4);
  memcpy(&fb_size, b + 14, 4);
  memcpy(&c_off, b + 18, 4);
  memcpy(&c_size, b + 22, 8);
  if (fb_size < 8) return BAD("header flatbuffer_size %u is too small", fb_size);
  if ((uint64_t)fb_off + fb_size > size)
    return BAD("header flatbuffer_offset %u + flatbuffer_size %u lies outside the %zu-byte payload", fb_off,
               fb_size, size);
  if (c_off > size || c_size > size - c_off)
    return BAD("header constant_data_offset %u + constant_data_size %llu lies outside the %zu-byte payload",
               c_off, (unsigned long long)c_size, size);
  if ((uint64_t)c_off < (uint64_t)fb_off + fb_size)
    return BAD("header constant_data_offset %u overlaps the flatbuffer (ends at %llu)", c_off,
               (unsigned long long)fb_off + fb_size);
  out->has_header = true;
  out->fb = b + fb_off;
  out->fb_len = fb_size;
  out->cdata = b + c_off;
  out->cdata_len = c_size;
  return PYEXEC_OK;
}

/* ---- values ------------------------------------------------------------- */

/* Value ids as nodes spell them (id_out) -> index into g->values. */
typedef struct id_map {
  uint32_t id, index;
} id_map;

static int by_id(const void *a, const void *b) {
  uint32_t x = ((const id_map *)a)->id, y = ((const id_map *)b)->id;
  return x < y ? -1 : x > y;
}

typedef struct parse_state {
  const blob *bl;
  const px_named_data *named;
  xnn_graph *g;
  px_fb_vec cdata;   /* XNNGraph.constant_data */
  px_fb_vec cbuffer; /* XNNGraph.constant_buffer (legacy) */
  id_map *ids;
  /* Describing (xnn_describe) rather than loading: the node types seen, and
   * those pyexec does not run, by type code; NULL when loading. Describing
   * records what loading refuses as Unsupported instead of stopping there,
   * and reads no constant. */
  bool *used, *unsupported;
} parse_state;

/* Keeps a 16-byte aligned copy of constant bytes that are not so aligned. */
static pyexec_status aligned_constant(parse_state *s, const uint8_t *p, size_t n, const void **out) {
  if ((uintptr_t)p % 16 == 0) {
    *out = p;
    return PYEXEC_OK;
  }
  void *c = aligned_alloc(16, (n + 15) & ~(size_t)15);
  void **grown = realloc(s->g->owned, sizeof(void *) * (s->g->nowned + 1));
  if (!c || !grown) {
    free(c);
    if (grown) s->g->owned = grown;
    return px_no_memory("XNNPACK constant");
  }
  s->g->owned = grown;
  s->g->owned[s->g->nowned++] = c;
  memcpy(c, p, n);
  *out = c;
  return PYEXEC_OK;
}

/* The bytes of constant_data[idx] (or the legacy constant_buffer[idx]),
 * at least `need` of them, for value vi. */
static pyexec_status lookup_constant(parse_state *s, uint32_t vi, uint32_t idx, size_t need, const uint8_t **out) {
  const uint8_t *p = NULL;
  size_t have = 0;
  if (s->bl->has_header) {
    px_fb_table cd;
    if (idx >= s->cdata.count)
      return BAD("value %u: constant_buffer_idx %u is out of range (%u constant_data entries)", vi, idx,
                 s->cdata.count);
    uint64_t off, size;
    const char *key;
    uint32_t kn;
    if (!px_fb_vec_table(&s->cdata, idx, &cd) || !px_fb_u64(&cd, CDO_OFFSET, 0, &off) ||
        !px_fb_u64(&cd, CDO_SIZE, 0, &size) || !px_fb_string(&cd, CDO_KEY, &key, &kn))
      return BAD("constant_data[%u] is malformed", idx);
    if (kn > 0) {
      pyexec_status st = s->named->get(s->named->owner, key, kn, &p, &have);
      if (st) {
        size_t cap;
        char *buf = px_error_buffer(&cap);
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", buf);
        return px_error(st, "XNNPACK payload: value %u: constant_data[%u].named_key: %s", vi, idx, tmp);
      }
    } else {
      if (off > s->bl->cdata_len || size > s->bl->cdata_len - off)
        return BAD("constant_data[%u] (offset %llu, size %llu) lies outside the %llu-byte constant region", idx,
                   (unsigned long long)off, (unsigned long long)size, (unsigned long long)s->bl->cdata_len);
      p = s->bl->cdata + off;
      have = (size_t)size;
    }
  } else {
    px_fb_table buf;
    px_fb_vec storage;
    if (idx >= s->cbuffer.count)
      return BAD("value %u: constant_buffer_idx %u is out of range (%u constant_buffer entries)", vi, idx,
                 s->cbuffer.count);
    if (!px_fb_vec_table(&s->cbuffer, idx, &buf) || !px_fb_vector(&buf, 0, 1, &storage))
      return BAD("constant_buffer[%u] is malformed", idx);
    p = storage.buf + storage.pos;
    have = storage.count;
  }
  if (have < need)
    return BAD("value %u: constant %u holds %zu bytes, its dims need %zu", vi, idx, have, need);
  *out = p;
  return PYEXEC_OK;
}

static pyexec_status resolve_constant(parse_state *s, uint32_t vi, xnn_value *v, size_t need) {
  const uint8_t *p;
  pyexec_status st = lookup_constant(s, vi, v->constant_idx, need, &p);
  if (st) return st;
  v->constant_size = need;
  return aligned_constant(s, p, need, &v->constant);
}

/* ---- quantization parameters ----------------------------------------------------- */

/* Reads an XNNQuantizedTensorValue's quant_params (slots as in schema.fbs);
 * checked later by check_quant, once the datatype and dims are known. */
static pyexec_status parse_quant(uint32_t vi, const px_fb_table *qv, xnn_value *v) {
  uint8_t qt;
  px_fb_table q;
  bool present;
  if (!px_fb_u8(qv, QV_PARAMS_TYPE, 0, &qt) || !px_fb_subtable(qv, QV_PARAMS, &q, &present))
    return BAD("value %u: quant_params are malformed", vi);
  if (qt < XNN_Q_PER_CHANNEL || qt > XNN_Q_PER_CHANNEL_GROUP || !present)
    return BAD("value %u: quant_params type %u is unknown", vi, qt);
  xnn_quant *z = &v->quant;
  z->kind = qt;
  bool ok = true;
  px_fb_vec inline_scales = {0};
  if (qt == XNN_Q_PER_TENSOR) {
    ok = fb_f32(&q, 0, 0.0f, &z->scale) && px_fb_i32(&q, 1, 0, &z->zero_point);
  } else if (qt == XNN_Q_PER_TOKEN) {
    ok = px_fb_i32(&q, 0, 0, &z->num_nonbatch_dims);
  } else if (qt == XNN_Q_PER_CHANNEL) { /* scale, channel_dim, scale_buffer_idx, num_scales */
    ok = px_fb_vector(&q, 0, 4, &inline_scales) && px_fb_i32(&q, 1, 0, &z->channel_dim) &&
         px_fb_u32(&q, 2, 0, &z->scale_buffer_idx) && px_fb_u32(&q, 3, 0, &z->num_scales);
  } else { /* scale, channel_dim, group_size, scale_bf16 (deprecated), scale_buffer_idx, num_scales */
    ok = px_fb_vector(&q, 0, 4, &inline_scales) && px_fb_i32(&q, 1, 0, &z->channel_dim) &&
         px_fb_i32(&q, 2, 0, &z->group_size) && px_fb_u32(&q, 4, 0, &z->scale_buffer_idx) &&
         px_fb_u32(&q, 5, 0, &z->num_scales);
  }
  if (!ok) return BAD("value %u: quant_params are malformed", vi);
  if ((qt == XNN_Q_PER_CHANNEL || qt == XNN_Q_PER_CHANNEL_GROUP) && !z->scale_buffer_idx) {
    /* the inline f32 vector (the writer leaves it empty and uses constant data) */
    z->scales = inline_scales.count ? inline_scales.buf + inline_scales.pos : NULL;
    z->scale_kind = qt == XNN_Q_PER_CHANNEL ? XNN_SCALES_F32 : XNN_SCALES_F32_AS_BF16;
    if (qt == XNN_Q_PER_CHANNEL && !z->num_scales) z->num_scales = inline_scales.count;
    if (inline_scales.count != z->num_scales)
      return BAD("value %u: quant_params have %u inline scales, num_scales says %u", vi, inline_scales.count,
                 z->num_scales);
  }
  return PYEXEC_OK;
}

static const char *quant_kind_name(int kind) {
  switch (kind) {
    case XNN_Q_PER_TENSOR: return "PerTensorQuant";
    case XNN_Q_PER_CHANNEL: return "PerChannelQuant";
    case XNN_Q_PER_TOKEN: return "PerTokenDynamicQuant";
    case XNN_Q_PER_CHANNEL_GROUP: return "PerChannelGroupQuant";
    default: return "no quant_params";
  }
}

/* The quant_params kind a quantized datatype needs (XNN_Q_NONE for the
 * plain ones), -1 for datatypes pyexec does not run. */
static int kind_for(int dt) {
  switch (dt) {
    case XNN_DT_FP32: case XNN_DT_FP16: case XNN_DT_BF16: case XNN_DT_INT32: return XNN_Q_NONE;
    case XNN_DT_QINT8: case XNN_DT_QUINT8: case XNN_DT_QINT32: return XNN_Q_PER_TENSOR;
    case XNN_DT_QCINT8: case XNN_DT_QCINT32: case XNN_DT_QCINT4: return XNN_Q_PER_CHANNEL;
    case XNN_DT_QBINT4: return XNN_Q_PER_CHANNEL_GROUP;
    case XNN_DT_QDINT8: return XNN_Q_PER_TOKEN;
    default: return -1;
  }
}

static bool scale_ok(float x) { return isfinite(x) && x > 0.0f; }

/* Checks value vi's quantization against its datatype and dims and, when
 * loading, finds its per-channel scales and checks every one of them. */
static pyexec_status check_quant(parse_state *s, uint32_t vi, xnn_value *v) {
  xnn_quant *z = &v->quant;
  const char *dtn = xnn_datatype_name(v->datatype);
  int want = kind_for(v->datatype);
  if (want < 0) {
    if (s->used) return PYEXEC_OK; /* describing: the nodes using it are marked unsupported */
    return px_unsupported("XNNPACK payload: value %u has datatype %s, which pyexec does not run", vi, dtn);
  }
  if (z->kind != want) {
    if (want == XNN_Q_NONE)
      return BAD("value %u: datatype %s has quantization parameters (%s)", vi, dtn, quant_kind_name(z->kind));
    return BAD("value %u: datatype %s needs %s, the value has %s", vi, dtn, quant_kind_name(want),
               quant_kind_name(z->kind));
  }
  if (want == XNN_Q_NONE) return PYEXEC_OK;
  if (want == XNN_Q_PER_TENSOR) {
    if (!scale_ok(z->scale)) return BAD("value %u (%s): scale %g is not finite and > 0", vi, dtn, z->scale);
    if (v->datatype == XNN_DT_QINT8 && (z->zero_point < -128 || z->zero_point > 127))
      return BAD("value %u (qint8): zero_point %d is outside [-128, 127]", vi, z->zero_point);
    if (v->datatype == XNN_DT_QUINT8 && (z->zero_point < 0 || z->zero_point > 255))
      return BAD("value %u (quint8): zero_point %d is outside [0, 255]", vi, z->zero_point);
    if (v->datatype == XNN_DT_QINT32 && z->zero_point != 0)
      return BAD("value %u (qint32): zero_point %d is not 0", vi, z->zero_point);
    return PYEXEC_OK;
  }
  if (want == XNN_Q_PER_TOKEN) {
    if (z->num_nonbatch_dims < 1 || (uint32_t)z->num_nonbatch_dims > v->num_dims)
      return BAD("value %u (qdint8): num_nonbatch_dims %d is outside [1, %u]", vi, z->num_nonbatch_dims,
                 v->num_dims);
    if (v->constant_idx) return BAD("value %u (qdint8): a dynamically quantized value cannot be constant", vi);
    return PYEXEC_OK;
  }
  /* per channel, per channel group */
  if (z->channel_dim < 0 || (uint32_t)z->channel_dim >= v->num_dims)
    return BAD("value %u (%s): channel_dim %d is outside the value's %u dims", vi, dtn, z->channel_dim,
               v->num_dims);
  uint64_t expect = (uint64_t)v->max_dims[z->channel_dim];
  if (want == XNN_Q_PER_CHANNEL_GROUP) {
    if (v->num_dims != 2 || z->channel_dim != 0)
      return BAD("value %u (qbint4): blockwise weights must be 2-D [OC, IC] with channel_dim 0 (dims %u, "
                 "channel_dim %d)",
                 vi, v->num_dims, z->channel_dim);
    int64_t ic = v->max_dims[1];
    if (z->group_size <= 0 || ic % z->group_size)
      return BAD("value %u (qbint4): group_size %d does not divide the %lld input channels", vi, z->group_size,
                 (long long)ic);
    expect = (uint64_t)v->max_dims[0] * (uint64_t)(ic / z->group_size);
  }
  if (z->num_scales != expect)
    return BAD("value %u (%s): num_scales %u, but the value needs %llu (%s)", vi, dtn, z->num_scales,
               (unsigned long long)expect,
               want == XNN_Q_PER_CHANNEL ? "one per index of channel_dim" : "OC * IC / group_size");
  if (!v->constant_idx) return BAD("value %u (%s): per-channel quantized values must be constant", vi, dtn);
  if (s->used) return PYEXEC_OK; /* describing: constants are not read */
  if (z->scale_buffer_idx) {
    bool bf16 = want == XNN_Q_PER_CHANNEL_GROUP;
    const uint8_t *p;
    pyexec_status st = lookup_constant(s, vi, z->scale_buffer_idx, (size_t)expect * (bf16 ? 2 : 4), &p);
    if (st) return st;
    z->scales = p;
    z->scale_kind = bf16 ? XNN_SCALES_BF16 : XNN_SCALES_F32;
  }
  if (!z->scales && expect) return BAD("value %u (%s): quant_params have no scales", vi, dtn);
  for (uint32_t i = 0; i < z->num_scales; i++) {
    float x = xnn_quant_scale(z, i);
    if (!scale_ok(x)) return BAD("value %u (%s): scale %u is %g, not finite and > 0", vi, dtn, i, x);
  }
  return PYEXEC_OK;
}


static pyexec_status parse_value(parse_state *s, uint32_t vi, const px_fb_table *xv) {
  xnn_value *v = &s->g->values[vi];
  uint8_t ut;
  px_fb_table u, tv;
  bool present;
  if (!px_fb_u8(xv, XVALUE_TYPE, 0, &ut) || !px_fb_subtable(xv, XVALUE_UNION, &u, &present))
    return BAD("xvalues[%u] is malformed", vi);
  if ((ut != 1 && ut != 2) || !present) return BAD("xvalues[%u]: value type %u is unknown", vi, ut);
  if (ut == 2) {
    if (!px_fb_subtable(&u, QV_TENSOR, &tv, &present) || !present)
      return BAD("xvalues[%u]: quantized value has no tensor_value", vi);
    pyexec_status st = parse_quant(vi, &u, v);
    if (st) return st;
  } else {
    tv = u;
  }
  int16_t dt = 0;
  uint32_t nd, id_out, n;
  uint32_t dims[XNN_MAX_DIMS];
  if (!fb_raw(&tv, TV_DATATYPE, 2, &dt) || !px_fb_u32(&tv, TV_NUM_DIMS, 0, &nd) ||
      !px_fb_u32(&tv, TV_CONSTANT_IDX, 0, &v->constant_idx) || !px_fb_u32(&tv, TV_EXTERNAL_ID, 0, &v->external_id) ||
      !px_fb_u32(&tv, TV_FLAGS, 0, &v->flags) || !px_fb_u32(&tv, TV_ID_OUT, 0, &id_out))
    return BAD("xvalues[%u] is malformed", vi);
  if (!fb_u32s(&tv, TV_DIMS, dims, &n))
    return BAD("xvalues[%u].dims is malformed or has more than %d entries", vi, XNN_MAX_DIMS);
  if (nd != n) return BAD("xvalues[%u].num_dims is %u but dims has %u entries", vi, nd, n);
  if (nd == 0) return BAD("xvalues[%u].num_dims is 0", vi);
  v->datatype = dt;
  v->num_dims = nd;
  size_t es = xnn_datatype_size(dt);
  if (dt < XNN_DT_FP32 || dt > XNN_DT_BF16) return BAD("xvalues[%u].datatype %d is unknown", vi, dt);
  uint64_t numel = 1;
  for (uint32_t k = 0; k < nd; k++) {
    if (dims[k] && numel > (px_max_declared_bytes / 8) / dims[k])
      return BAD("xvalues[%u].dims: element count exceeds the limit", vi);
    numel *= dims[k];
    v->max_dims[k] = v->dims[k] = dims[k];
  }
  v->capacity = (size_t)numel * es;
  if (dt == XNN_DT_QCINT4 || dt == XNN_DT_QBINT4) /* rows of ceil(last / 2) bytes, low nibble first */
    v->capacity = dims[nd - 1] ? (size_t)(numel / dims[nd - 1]) * ((dims[nd - 1] + 1) / 2) : 0;
  if (v->flags & ~(XNN_VALUE_EXTERNAL_INPUT | XNN_VALUE_EXTERNAL_OUTPUT))
    return BAD("xvalues[%u].flags 0x%x has unknown bits", vi, v->flags);
  if (v->flags) {
    if (v->flags == (XNN_VALUE_EXTERNAL_INPUT | XNN_VALUE_EXTERNAL_OUTPUT))
      return BAD("xvalues[%u] is both an external input and an external output", vi);
    if (v->external_id >= s->g->num_externs)
      return BAD("xvalues[%u].external_id %u is out of range (num_externs %u)", vi, v->external_id,
                 s->g->num_externs);
    for (uint32_t j = 0; j < vi; j++)
      if (s->g->values[j].flags && s->g->values[j].external_id == v->external_id)
        return BAD("xvalues[%u].external_id %u is also the id of xvalues[%u]", vi, v->external_id, j);
    if (v->constant_idx) return BAD("xvalues[%u] is both external and constant", vi);
  } else {
    v->external_id = XNN_INVALID_ID;
  }
  if (id_out == XNN_INVALID_ID) return BAD("xvalues[%u].id_out is invalid", vi);
  s->ids[vi].id = id_out;
  s->ids[vi].index = vi;
  pyexec_status qst = check_quant(s, vi, v);
  if (qst) return qst;
  if (dt == XNN_DT_QDINT8) v->capacity = xnn_qd8_capacity(v); /* int8 data, then per-row parameters */
  if ((dt == XNN_DT_FP16 || dt == XNN_DT_BF16) && !v->constant_idx) {
    /* float32 storage holding values rounded to dt (xnn_graph.h) */
    v->half = dt;
    v->datatype = XNN_DT_FP32;
    v->capacity = (size_t)numel * sizeof(float);
  }
  if (v->constant_idx && !s->used) {
    pyexec_status st = resolve_constant(s, vi, v, v->capacity);
    if (st) return st;
    v->data = (void *)v->constant;
  }
  return PYEXEC_OK;
}

/* ---- nodes --------------------------------------------------------------- */

/* Where a node table keeps its ids, by layout. */
enum { L_1X1, L_2X1, L_FC, L_CONV, L_POOL, L_ARGMAX, L_TRANSPOSE, L_RESHAPE, L_SLICE, L_PAD, L_RESIZE,
       L_CAT, L_ELU, L_SDPA };

static int layout_of(int type) {
  switch (type) {
    case XNN_NODE_add: case XNN_NODE_div: case XNN_NODE_minimum: case XNN_NODE_multiply:
    case XNN_NODE_subtract: case XNN_NODE_maximum: case XNN_NODE_prelu: case XNN_NODE_batch_matrix_multiply:
      return L_2X1;
    case XNN_NODE_fully_connected: return L_FC;
    case XNN_NODE_conv2d: case XNN_NODE_depthwise_conv2d: case XNN_NODE_conv_transpose2d: return L_CONV;
    case XNN_NODE_avg_pooling2d: case XNN_NODE_max_pooling2d: return L_POOL;
    case XNN_NODE_argmax_pooling2d: return L_ARGMAX;
    case XNN_NODE_static_transpose: return L_TRANSPOSE;
    case XNN_NODE_static_reshape: return L_RESHAPE;
    case XNN_NODE_static_slice: return L_SLICE;
    case XNN_NODE_static_constant_pad: return L_PAD;
    case XNN_NODE_resize_bilinear2d: return L_RESIZE;
    case XNN_NODE_concatenate2: case XNN_NODE_concatenate3: case XNN_NODE_concatenate4:
    case XNN_NODE_concatenate5:
      return L_CAT;
    case XNN_NODE_elu: case XNN_NODE_leaky_relu: return L_ELU;
    case XNN_NODE_scaled_dot_product_attention: return L_SDPA;
    default: return L_1X1;
  }
}

/* Reads the u32 at each slot in slots[0..n) into out[]. */
static bool read_u32s(const px_fb_table *t, const int *slots, int n, uint32_t *const *out) {
  for (int k = 0; k < n; k++)
    if (!px_fb_u32(t, slots[k], 0, out[k])) return false;
  return true;
}

static pyexec_status read_node_fields(uint32_t ni, const px_fb_table *t, xnn_node *nd) {
  bool ok = true;
  uint32_t n = 0, n2 = 0;
  switch (layout_of(nd->type)) {
    case L_1X1:
      nd->nin = nd->nout = 1;
      ok = px_fb_u32(t, 0, 0, &nd->in[0]) && px_fb_u32(t, 1, 0, &nd->out[0]) && px_fb_u32(t, 2, 0, &nd->flags);
      break;
    case L_2X1:
      nd->nin = 2, nd->nout = 1;
      ok = px_fb_u32(t, 0, 0, &nd->in[0]) && px_fb_u32(t, 1, 0, &nd->in[1]) && px_fb_u32(t, 2, 0, &nd->out[0]) &&
           px_fb_u32(t, 3, 0, &nd->flags);
      break;
    case L_FC:
      nd->nin = 3, nd->nout = 1;
      ok = px_fb_u32(t, 0, 0, &nd->in[0]) && px_fb_u32(t, 1, 0, &nd->in[1]) && px_fb_u32(t, 2, 0, &nd->in[2]) &&
           px_fb_u32(t, 3, 0, &nd->out[0]) && px_fb_u32(t, 4, 0, &nd->flags);
      break;
    case L_CONV: {
      nd->nin = 3, nd->nout = 1;
      uint32_t *f[] = {&nd->p.conv.padding_top, &nd->p.conv.padding_right, &nd->p.conv.padding_bottom,
                       &nd->p.conv.padding_left, &nd->p.conv.kernel_height, &nd->p.conv.kernel_width,
                       &nd->p.conv.subsampling_height, &nd->p.conv.subsampling_width,
                       &nd->p.conv.dilation_height, &nd->p.conv.dilation_width,
                       &nd->p.conv.group_input_channels, &nd->p.conv.group_output_channels, &nd->p.conv.groups,
                       &nd->p.conv.adjustment_height, &nd->p.conv.adjustment_width, &nd->in[0], &nd->in[1],
                       &nd->in[2], &nd->out[0], &nd->flags};
      int slots[20];
      for (int k = 0; k < 20; k++) slots[k] = k;
      ok = read_u32s(t, slots, 20, f);
      break;
    }
    case L_POOL: {
      nd->nin = nd->nout = 1;
      uint32_t *f[] = {&nd->p.pool.padding_top, &nd->p.pool.padding_right, &nd->p.pool.padding_bottom,
                       &nd->p.pool.padding_left, &nd->p.pool.pooling_height, &nd->p.pool.pooling_width,
                       &nd->p.pool.stride_height, &nd->p.pool.stride_width, &nd->p.pool.dilation_height,
                       &nd->p.pool.dilation_width, &nd->in[0], &nd->out[0], &nd->flags};
      int slots[13];
      for (int k = 0; k < 13; k++) slots[k] = k;
      ok = read_u32s(t, slots, 13, f);
      break;
    }
    case L_ARGMAX: {
      nd->nin = 1, nd->nout = 2;
      uint32_t *f[] = {&nd->p.argmax.padding_top, &nd->p.argmax.padding_right, &nd->p.argmax.padding_bottom,
                       &nd->p.argmax.padding_left, &nd->p.argmax.pooling_height, &nd->p.argmax.pooling_width,
                       &nd->in[0], &nd->out[0], &nd->out[1], &nd->flags};
      int slots[10];
      for (int k = 0; k < 10; k++) slots[k] = k;
      ok = read_u32s(t, slots, 10, f);
      break;
    }
    case L_TRANSPOSE:
    case L_RESHAPE: {
      nd->nin = nd->nout = 1;
      bool tr = nd->type == XNN_NODE_static_transpose;
      uint32_t *num = tr ? &nd->p.transpose.num_dims : &nd->p.reshape.num_dims;
      ok = px_fb_u32(t, 0, 0, num) && fb_u32s(t, 1, tr ? nd->p.transpose.perm : nd->p.reshape.new_shape, &n) &&
           px_fb_u32(t, 2, 0, &nd->in[0]) && px_fb_u32(t, 3, 0, &nd->out[0]) && px_fb_u32(t, 4, 0, &nd->flags);
      if (ok && *num != n)
        return BAD("node %u (%s): num_dims %u but %s has %u entries", ni, xnn_node_type_name(nd->type), *num,
                   tr ? "perm" : "new_shape", n);
      break;
    }
    case L_SLICE:
      nd->nin = nd->nout = 1;
      ok = px_fb_u32(t, 0, 0, &nd->p.slice.num_dims) && fb_u32s(t, 1, nd->p.slice.offsets, &n) &&
           fb_u32s(t, 2, nd->p.slice.sizes, &n2) && px_fb_u32(t, 3, 0, &nd->in[0]) &&
           px_fb_u32(t, 4, 0, &nd->out[0]) && px_fb_u32(t, 5, 0, &nd->flags);
      if (ok && (n != nd->p.slice.num_dims || n2 != n))
        return BAD("node %u (StaticSlice): num_dims %u, offsets %u and sizes %u entries differ", ni,
                   nd->p.slice.num_dims, n, n2);
      break;
    case L_PAD:
      nd->nin = nd->nout = 1;
      ok = fb_u32s(t, 0, nd->p.pad.pre, &n) && fb_u32s(t, 1, nd->p.pad.post, &n2) &&
           fb_f32(t, 2, 0.0f, &nd->p.pad.value) && px_fb_u32(t, 3, 0, &nd->in[0]) &&
           px_fb_u32(t, 4, 0, &nd->out[0]) && px_fb_u32(t, 5, 0, &nd->flags);
      if (ok && n != n2)
        return BAD("node %u (StaticConstantPad): pre_paddings has %u entries, post_paddings %u", ni, n, n2);
      nd->p.pad.num_dims = n;
      break;
    case L_RESIZE:
      nd->nin = nd->nout = 1;
      ok = px_fb_u32(t, 0, 0, &nd->p.resize.new_height) && px_fb_u32(t, 1, 0, &nd->p.resize.new_width) &&
           px_fb_u32(t, 2, 0, &nd->in[0]) && px_fb_u32(t, 3, 0, &nd->out[0]) && px_fb_u32(t, 4, 0, &nd->flags);
      break;
    case L_CAT: {
      nd->nin = (uint32_t)(nd->type == XNN_NODE_concatenate5 ? 5 : nd->type - XNN_NODE_concatenate2 + 2);
      nd->nout = 1;
      uint32_t *f[] = {&nd->p.cat.axis, &nd->in[0], &nd->in[1], &nd->in[2], &nd->in[3], &nd->out[0], &nd->flags,
                       &nd->in[4]};
      int slots[8] = {0, 1, 2, 3, 4, 5, 6, 7};
      ok = read_u32s(t, slots, 8, f);
      break;
    }
    case L_ELU:
      nd->nin = nd->nout = 1;
      ok = (nd->type == XNN_NODE_elu ? fb_f32(t, 0, 0.0f, &nd->p.elu.alpha)
                                     : fb_f32(t, 0, 0.0f, &nd->p.leaky_relu.negative_slope)) &&
           px_fb_u32(t, 1, 0, &nd->in[0]) && px_fb_u32(t, 2, 0, &nd->out[0]) && px_fb_u32(t, 3, 0, &nd->flags);
      break;
    default: /* L_SDPA: refused before reaching here */
      break;
  }
  if (!ok) return BAD("node %u (%s) is malformed", ni, xnn_node_type_name(nd->type));
  return PYEXEC_OK;
}

/* Resolves a node's id through id_out; XNN_INVALID_ID stays when allowed. */
static pyexec_status resolve_id(parse_state *s, uint32_t ni, const xnn_node *nd, uint32_t *id, const char *what,
                                bool optional) {
  if (*id == XNN_INVALID_ID && optional) return PYEXEC_OK;
  id_map key = {*id, 0};
  const id_map *hit = bsearch(&key, s->ids, s->g->nvalues, sizeof *s->ids, by_id);
  if (!hit)
    return BAD("node %u (%s): %s id %u is not a value", ni, xnn_node_type_name(nd->type), what, *id);
  *id = hit->index;
  return PYEXEC_OK;
}

/* Whether input k of nd reads an fp16 / bf16 constant in its own type: the
 * filter of FullyConnected and the convolutions, BatchMatrixMultiply's B. */
static bool keeps_half_constant(const xnn_node *nd, uint32_t k) {
  if (k != 1) return false;
  switch (nd->type) {
    case XNN_NODE_fully_connected: case XNN_NODE_batch_matrix_multiply: case XNN_NODE_conv2d:
    case XNN_NODE_depthwise_conv2d: case XNN_NODE_conv_transpose2d:
      return true;
    default: return false;
  }
}

static bool half_constant(const xnn_value *v) {
  return v->constant_idx && (v->datatype == XNN_DT_FP16 || v->datatype == XNN_DT_BF16) &&
         v->quant.kind == XNN_Q_NONE;
}

/* An fp16 / bf16 constant a node reads as float32: widened once into an
 * owned, aligned float32 copy (describing reads no constant: only its
 * datatype changes). */
static pyexec_status widen_constant(parse_state *s, uint32_t id) {
  xnn_value *v = &s->g->values[id];
  size_t n = v->capacity / 2;
  if (!s->used) {
    float *c = aligned_alloc(16, (n * sizeof(float) + 15) / 16 * 16 + 16);
    void **grown = realloc(s->g->owned, sizeof(void *) * (s->g->nowned + 1));
    if (!c || !grown) {
      free(c);
      if (grown) s->g->owned = grown;
      return px_error(PYEXEC_ERR_OUT_OF_MEMORY, "out of memory: XNNPACK constant %u widened to float32", id);
    }
    s->g->owned = grown;
    s->g->owned[s->g->nowned++] = c;
    if (v->datatype == XNN_DT_FP16)
      px_f16_to_f32(c, v->constant, (int64_t)n);
    else
      px_bf16_to_f32(c, v->constant, (int64_t)n);
    v->constant = c;
    v->data = c;
    v->constant_size = n * sizeof(float);
  }
  v->half = v->datatype;
  v->datatype = XNN_DT_FP32;
  v->capacity = n * sizeof(float);
  return PYEXEC_OK;
}

static pyexec_status check_node(parse_state *s, uint32_t ni, xnn_node *nd) {
  const char *name = xnn_node_type_name(nd->type);
  xnn_value *vals = s->g->values;
  pyexec_status st;
  for (uint32_t k = 0; k < nd->nin; k++) {
    bool optional = k == 2 && (layout_of(nd->type) == L_FC || layout_of(nd->type) == L_CONV);
    if ((st = resolve_id(s, ni, nd, &nd->in[k], optional ? "bias" : "input", optional))) return st;
  }
  for (uint32_t k = 0; k < nd->nout; k++) {
    if ((st = resolve_id(s, ni, nd, &nd->out[k], "output", false))) return st;
    const xnn_value *o = &vals[nd->out[k]];
    if (o->constant_idx) return BAD("node %u (%s): output value %u is a constant", ni, name, nd->out[k]);
    if (o->flags & XNN_VALUE_EXTERNAL_INPUT)
      return BAD("node %u (%s): output value %u is an external input", ni, name, nd->out[k]);
  }
  /* fp16 / bf16 constants read as float32 are widened (xnn_graph.h). */
  for (uint32_t k = 0; k < nd->nin; k++)
    if (nd->in[k] != XNN_INVALID_ID && half_constant(&vals[nd->in[k]]) && !keeps_half_constant(nd, k) &&
        (st = widen_constant(s, nd->in[k])))
      return st;
  /* Datatypes: a node with a quantized value runs when nodes_quant.c says
   * so; otherwise float32 throughout (fp16 / bf16 values read as float32),
   * but for ArgMaxPooling2d's indices (int32) and the fp16 / bf16 constants
   * kept in their type. */
  bool quantized = false;
  for (uint32_t k = 0; k < nd->nin + nd->nout; k++) {
    uint32_t id = k < nd->nin ? nd->in[k] : nd->out[k - nd->nin];
    if (id != XNN_INVALID_ID && xnn_value_quantized(&vals[id])) quantized = true;
  }
  if (quantized) {
    char why[256];
    xnn_quant_rewrite(nd, vals);
    int qst = xnn_quant_check(nd, vals, why, sizeof why);
    if (qst == PYEXEC_ERR_INVALID_PROGRAM) return BAD("node %u (%s): %s", ni, name, why);
    if (qst && s->unsupported) s->unsupported[nd->type] = true;
    else if (qst) return px_unsupported("XNNPACK payload: node %u (%s): pyexec does not run %s", ni, name, why);
  }
  for (uint32_t k = 0; k < nd->nin + nd->nout && !quantized; k++) {
    uint32_t id = k < nd->nin ? nd->in[k] : nd->out[k - nd->nin];
    if (id == XNN_INVALID_ID) continue;
    int want = XNN_DT_FP32;
    if (nd->type == XNN_NODE_argmax_pooling2d && k == 2) want = XNN_DT_INT32;
    int dt = vals[id].datatype;
    bool ok = dt == want || (k < nd->nin && keeps_half_constant(nd, k) && half_constant(&vals[id]));
    ok = ok && vals[id].quant.kind == XNN_Q_NONE;
    dt = xnn_file_datatype(&vals[id]);
    if (!ok && s->unsupported) {
      s->unsupported[nd->type] = true;
    } else if (!ok) {
      return px_unsupported("XNNPACK payload: node %u (%s) %s value %u has datatype %s, which pyexec does not "
                            "run for this node",
                            ni, name, k < nd->nin ? "input" : "output", id, xnn_datatype_name(dt));
    }
  }
  const xnn_value *in0 = &vals[nd->in[0]];
  const xnn_value *out0 = &vals[nd->out[0]];
  switch (layout_of(nd->type)) {
    case L_TRANSPOSE: {
      uint32_t nd_ = nd->p.transpose.num_dims, seen = 0;
      if (nd_ != in0->num_dims || nd_ != out0->num_dims)
        return BAD("node %u (StaticTranspose): num_dims %u, input rank %u, output rank %u differ", ni, nd_,
                   in0->num_dims, out0->num_dims);
      for (uint32_t k = 0; k < nd_; k++) {
        uint32_t p = nd->p.transpose.perm[k];
        if (p >= nd_ || (seen & (1u << p))) return BAD("node %u (StaticTranspose): perm is not a permutation", ni);
        seen |= 1u << p;
      }
      break;
    }
    case L_RESHAPE: {
      uint32_t zeros = 0;
      if (nd->p.reshape.num_dims != out0->num_dims)
        return BAD("node %u (StaticReshape): num_dims %u but the output has rank %u", ni, nd->p.reshape.num_dims,
                   out0->num_dims);
      for (uint32_t k = 0; k < nd->p.reshape.num_dims; k++) zeros += nd->p.reshape.new_shape[k] == 0;
      if (zeros > 1) return BAD("node %u (StaticReshape): new_shape has %u inferred (0) dims", ni, zeros);
      break;
    }
    case L_SLICE:
      if (nd->p.slice.num_dims != in0->num_dims || nd->p.slice.num_dims != out0->num_dims)
        return BAD("node %u (StaticSlice): num_dims %u, input rank %u, output rank %u differ", ni,
                   nd->p.slice.num_dims, in0->num_dims, out0->num_dims);
      break;
    case L_PAD:
      if (nd->p.pad.num_dims != in0->num_dims || in0->num_dims != out0->num_dims)
        return BAD("node %u (StaticConstantPad): %u paddings, input rank %u, output rank %u differ", ni,
                   nd->p.pad.num_dims, in0->num_dims, out0->num_dims);
      break;
    case L_CAT:
      if (nd->p.cat.axis >= out0->num_dims)
        return BAD("node %u (%s): axis %u is out of range for rank %u", ni, name, nd->p.cat.axis, out0->num_dims);
      for (uint32_t k = 0; k < nd->nin; k++)
        if (vals[nd->in[k]].num_dims != out0->num_dims)
          return BAD("node %u (%s): input %u has rank %u, the output %u", ni, name, k, vals[nd->in[k]].num_dims,
                     out0->num_dims);
      break;
    case L_FC: {
      const xnn_value *w = &vals[nd->in[1]];
      if (w->num_dims != 2) return BAD("node %u (FullyConnected): filter is not 2-D", ni);
      /* XNNPACK reads the bias as one entry per output whatever its rank:
       * [OC], or [1, OC] (addmm's bias). */
      if (nd->in[2] != XNN_INVALID_ID) {
        const xnn_value *b = &vals[nd->in[2]];
        int64_t oc = w->max_dims[nd->flags & XNN_FLAG_TRANSPOSE_WEIGHTS ? 1 : 0], entries = 1;
        for (uint32_t k = 0; k < b->num_dims; k++) entries *= b->max_dims[k];
        if (entries != oc) {
          char bd[128], wd[64];
          return BAD("node %u (FullyConnected): bias value %u has dims %s (%lld entries), but the filter, "
                     "value %u of dims %s, has %lld outputs: the bias must hold one entry per output",
                     ni, nd->in[2], xnn_format_dims(bd, sizeof bd, b->num_dims, b->max_dims),
                     (long long)entries, nd->in[1], xnn_format_dims(wd, sizeof wd, w->num_dims, w->max_dims),
                     (long long)oc);
        }
      }
      if (in0->num_dims != out0->num_dims)
        return BAD("node %u (FullyConnected): input rank %u, output rank %u", ni, in0->num_dims, out0->num_dims);
      break;
    }
    case L_CONV:
    case L_POOL:
    case L_ARGMAX:
    case L_RESIZE:
      if (in0->num_dims != 4 || out0->num_dims != 4 || (nd->nout == 2 && vals[nd->out[1]].num_dims != 4))
        return BAD("node %u (%s): input and output must be 4-D (NHWC)", ni, name);
      break;
    case L_2X1:
      if (nd->type == XNN_NODE_batch_matrix_multiply &&
          (in0->num_dims < 2 || vals[nd->in[1]].num_dims != in0->num_dims || out0->num_dims != in0->num_dims))
        return BAD("node %u (BatchMatrixMultiply): operands and output must have one rank >= 2", ni);
      break;
    default: break;
  }
  return PYEXEC_OK;
}

static pyexec_status parse_node(parse_state *s, uint32_t ni, const px_fb_table *xn) {
  xnn_node *nd = &s->g->nodes[ni];
  uint8_t type;
  px_fb_table u, mm;
  bool present, has_mm;
  if (!px_fb_u8(xn, XNODE_TYPE, 0, &type) || !px_fb_subtable(xn, XNODE_UNION, &u, &present) ||
      !px_fb_u32(xn, XNODE_DEBUG_HANDLE, 0, &nd->debug_handle) || !px_fb_subtable(xn, XNODE_MIN_MAX, &mm, &has_mm))
    return BAD("xnodes[%u] is malformed", ni);
  if (type < 1 || type > XNN_NODE_MAX || !present) return BAD("xnodes[%u]: node type %u is unknown", ni, type);
  nd->type = type;
  if (s->used) s->used[type] = true;
  if (!xnn_node_ops_for(type) && s->unsupported) {
    s->unsupported[type] = true; /* its fields are not read: no node function would trust them */
    return PYEXEC_OK;
  }
  if (!xnn_node_ops_for(type))
    return px_unsupported("XNNPACK payload: node %u is %s (type %u), which pyexec does not run", ni,
                          xnn_node_type_name(type), type);
  nd->output_min = -INFINITY;
  nd->output_max = INFINITY;
  if (has_mm && (!fb_f32(&mm, 0, 0.0f, &nd->output_min) || !fb_f32(&mm, 1, 0.0f, &nd->output_max)))
    return BAD("xnodes[%u].output_min_max is malformed", ni);
  if (nd->output_min > nd->output_max || isnan(nd->output_min) || isnan(nd->output_max))
    return BAD("xnodes[%u]: output_min %g > output_max %g", ni, nd->output_min, nd->output_max);
  nd->in[0] = nd->in[1] = nd->in[2] = nd->in[3] = nd->in[4] = XNN_INVALID_ID;
  nd->out[0] = nd->out[1] = XNN_INVALID_ID;
  pyexec_status st = read_node_fields(ni, &u, nd);
  if (st) return st;
  return check_node(s, ni, nd);
}

/* ---- the graph ------------------------------------------------------------ */

static pyexec_status parse_graph(const uint8_t *data, size_t size, const px_named_data *named, xnn_graph *g,
                                 bool *used, bool *unsupported) {
  memset(g, 0, sizeof *g);
  blob bl;
  pyexec_status st = read_header(data, size, &bl);
  if (st) return st;
  if (memcmp(bl.fb + 4, "XN00", 4) != 0 && memcmp(bl.fb + 4, "XN01", 4) != 0)
    return BAD("flatbuffer identifier is not XN00 or XN01");
  px_fb_table root;
  px_fb_vec xvalues, xnodes;
  parse_state s = {&bl, named, g, {0}, {0}, NULL, used, unsupported};
  if (!px_fb_root(bl.fb, bl.fb_len, &root)) return BAD("XNNGraph root table is out of bounds");
  if (!px_fb_has(&root, G_XVALUES) || !px_fb_has(&root, G_XNODES))
    return BAD("XNNGraph has no xvalues or no xnodes");
  if (!px_fb_vector(&root, G_XVALUES, 4, &xvalues)) return BAD("XNNGraph.xvalues is malformed");
  if (!px_fb_vector(&root, G_XNODES, 4, &xnodes)) return BAD("XNNGraph.xnodes is malformed");
  if (!px_fb_u32(&root, G_NUM_EXTERNS, 0, &g->num_externs)) return BAD("XNNGraph.num_externs is malformed");
  if (g->num_externs > XNN_MAX_EXTERNS)
    return BAD("XNNGraph.num_externs %u exceeds %d", g->num_externs, XNN_MAX_EXTERNS);
  if (!px_fb_vector(&root, G_CONSTANT_DATA, 4, &s.cdata)) return BAD("XNNGraph.constant_data is malformed");
  if (!px_fb_vector(&root, G_CONSTANT_BUFFER, 4, &s.cbuffer)) return BAD("XNNGraph.constant_buffer is malformed");

  g->values = calloc(xvalues.count + 1, sizeof *g->values);
  g->nodes = calloc(xnodes.count + 1, sizeof *g->nodes);
  s.ids = calloc(xvalues.count + 1, sizeof *s.ids);
  if (!g->values || !g->nodes || !s.ids) {
    free(s.ids);
    return px_no_memory("XNNPACK graph");
  }
  g->nvalues = xvalues.count;
  g->nnodes = xnodes.count;
  for (uint32_t i = 0; i < xvalues.count && !st; i++) {
    px_fb_table xv;
    st = px_fb_vec_table(&xvalues, i, &xv) ? parse_value(&s, i, &xv) : BAD("xvalues[%u] is malformed", i);
  }
  if (!st) {
    qsort(s.ids, g->nvalues, sizeof *s.ids, by_id);
    for (uint32_t i = 1; i < g->nvalues && !st; i++)
      if (s.ids[i].id == s.ids[i - 1].id)
        st = BAD("xvalues[%u] and xvalues[%u] have the same id_out %u", s.ids[i - 1].index, s.ids[i].index,
                 s.ids[i].id);
  }
  for (uint32_t i = 0; i < xnodes.count && !st; i++) {
    px_fb_table xn;
    st = px_fb_vec_table(&xnodes, i, &xn) ? parse_node(&s, i, &xn) : BAD("xnodes[%u] is malformed", i);
  }
  /* A rewrite a later node made (xnn_quant_rewrite) may change a value an
   * earlier node reads: the quantized convolutions are checked again. */
  for (uint32_t i = 0; i < xnodes.count && !st; i++) {
    const xnn_node *nd = &g->nodes[i];
    if ((nd->type != XNN_NODE_conv2d && nd->type != XNN_NODE_conv_transpose2d) || nd->nin < 1 ||
        nd->in[0] >= g->nvalues || g->values[nd->in[0]].datatype != XNN_DT_QDINT8 ||
        (unsupported && unsupported[nd->type]))
      continue;
    char why[256];
    int qst = xnn_quant_check(nd, g->values, why, sizeof why);
    if (qst == PYEXEC_ERR_INVALID_PROGRAM) st = BAD("node %u (%s): %s", i, xnn_node_type_name(nd->type), why);
    else if (qst && unsupported) unsupported[nd->type] = true;
    else if (qst)
      st = px_unsupported("XNNPACK payload: node %u (%s): pyexec does not run %s", i, xnn_node_type_name(nd->type),
                          why);
  }
  free(s.ids);
  return st;
}

pyexec_status xnn_parse(const uint8_t *data, size_t size, const px_named_data *named, xnn_graph *g) {
  return parse_graph(data, size, named, g, NULL, NULL);
}

pyexec_status xnn_describe(const uint8_t *payload, size_t size, char *buf, size_t cap, size_t *needed,
                           size_t *unsupported) {
  bool used[XNN_NODE_MAX + 1] = {false}, unsup[XNN_NODE_MAX + 1] = {false};
  xnn_graph g;
  pyexec_status st = parse_graph(payload, size, NULL, &g, used, unsup);
  xnn_graph_free(&g);
  if (st) return st;
  /* Sorted by name: repeatedly take the smallest name not yet written. */
  size_t pos = 0, miss = 0;
  const char *last = "";
  if (buf && cap) buf[0] = 0;
  for (;;) {
    int next = 0;
    for (int t = 1; t <= XNN_NODE_MAX; t++)
      if (used[t] && strcmp(xnn_node_type_name(t), last) > 0 &&
          (!next || strcmp(xnn_node_type_name(t), xnn_node_type_name(next)) < 0))
        next = t;
    if (!next) break;
    miss += unsup[next];
    int w = snprintf(buf && pos < cap ? buf + pos : NULL, buf && pos < cap ? cap - pos : 0, "%s%s\n",
                     unsup[next] ? "!" : "", xnn_node_type_name(next));
    pos += (size_t)w;
    last = xnn_node_type_name(next);
  }
  *needed = pos + 1;
  *unsupported = miss;
  return PYEXEC_OK;
}

void xnn_graph_free(xnn_graph *g) {
  if (!g) return;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    if (g->nodes[i].release)
      g->nodes[i].release(g->nodes[i].packed);
    else
      free(g->nodes[i].packed);
  }
  for (uint32_t i = 0; i < g->nowned; i++) free(g->owned[i]);
  free(g->owned);
  free(g->values);
  free(g->nodes);
  memset(g, 0, sizeof *g);
}
