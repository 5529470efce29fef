/*
 * qnodes.h - what the XNNPACK backend's quantized node files share
 * (private; nodes_quant.c, nodes_qconv.c): XNNPACK's qs8 rounding and
 * output bounds, the per-row parameters of qdint8 values, and the packed
 * plan of a quantized FullyConnected / Conv2d.
 *
 * Numerics follow the reference's part A10 (XNNPACK's microparams-init.c
 * and its scalar kernels): float products rounded with lrintf (half to
 * even), output bounds quantized from the node's float clamp.
 */
#ifndef PX_XNN_QNODES_H
#define PX_XNN_QNODES_H

#include <math.h>
#include <string.h>

#include "backends/xnnpack/nodes.h"
#include "core/alloc.h"
#include "kernels/common.h"
#include "kernels/conv/qconv.h"
#include "kernels/conv/qdwconv.h"
#include "kernels/gemm/qgemm.h"

/* A float clamp bound in the output's int8 domain: XNNPACK's
 * lrintf(clamp(v / scale + zp, -128, 127)) (infinities give -128 / 127). */
static inline int32_t xnn_q8_bound(float v, float scale, int32_t zp) {
  float q = v / scale + (float)zp;
  if (!(q >= -128.0f)) q = -128.0f; /* also -inf */
  if (q > 127.0f) q = 127.0f;
  return (int32_t)lrintf(q);
}

/* The same for a quint8 output: lrintf(clamp(v / scale + zp, 0, 255)). */
static inline int32_t xnn_qu8_bound(float v, float scale, int32_t zp) {
  float q = v / scale + (float)zp;
  if (!(q >= 0.0f)) q = 0.0f; /* also -inf */
  if (q > 255.0f) q = 255.0f;
  return (int32_t)lrintf(q);
}

/* The bound for an 8-bit value y of either kind (qint8 or quint8). */
static inline int32_t xnn_x8_bound(float v, const xnn_value *y) {
  return y->datatype == XNN_DT_QUINT8 ? xnn_qu8_bound(v, y->quant.scale, y->quant.zero_point)
                                      : xnn_q8_bound(v, y->quant.scale, y->quant.zero_point);
}

/* lrintf(v) for |v| <= 2^22 (values already clamped near the int8 range):
 * kernels/common.h's magic-bias rounding. */
static inline int32_t xnn_q8_round(float v) { return px_round_magic(v); }

/* v clamped to [lo, hi], NaN to lo (deterministic; XNNPACK leaves NaN unspecified). */
static inline float xnn_clampf(float v, float lo, float hi) {
  v = v > lo ? v : lo;
  return v < hi ? v : hi;
}

/* A qdint8 value's per-row zero points and scales (behind its int8 data;
 * rows = the product of its leading num_dims - num_nonbatch_dims dims). */
void xnn_qd8_params(const xnn_value *v, int32_t **zp, float **scale);
/* Rows of v at its current dims. */
int64_t xnn_qd8_rows(const xnn_value *v);
/* The most elements and the most rows a qdint8 value may hold (its upper bound). */
size_t xnn_qd8_numel_max(const xnn_value *v);
size_t xnn_qd8_rows_max(const xnn_value *v);

/* The packed weights of a quantized FullyConnected or convolution (node->
 * packed, released by xnn_qplan_release). Static nodes also keep the int32
 * bias and the per-channel requantization scales in_scale * w_scale / out_scale. */
typedef struct xnn_qplan {
  px_qweights *w;
  int64_t N, K;          /* output channels, depth (KH * KW * Cin for convolutions) */
  const int32_t *bias;   /* static: N int32 or NULL (the payload's constant) */
  float *requant;        /* static: N floats */
  int32_t in_zp, out_zp; /* static */
  int32_t qmin, qmax;    /* static: the output clamp in int8 */
  /* convolutions */
  int64_t kh, kw, cin, cout, groups;
  int64_t sh, sw, dh, dw, pt, pl, pb, pr;
  px_qdwconv *depthwise; /* DepthwiseConv2d (static) */
  px_qconv *conv;        /* Conv2d, ConvTranspose2d (static or dynamic) */
} xnn_qplan;

void xnn_qplan_release(void *plan);

/* Packs the static qs8 weights of a FullyConnected / Conv2d whose filter
 * (qint8 or qcint8) is rows n of K bytes at `rows` (row stride K), with the
 * requantization of input / filter / output, into plan (w, bias, requant,
 * zero points and bounds). Returns 0 or px_fail's status. */
int xnn_qplan_static(px_ctx *ctx, xnn_qplan *plan, const xnn_node *node, const xnn_value *values,
                     const int8_t *rows);

/* Conv2d, ConvTranspose2d (qint8, or qdint8 in and fp32 out) and
 * DepthwiseConv2d (qint8) (nodes_qconv.c). */
int xnn_shape_qconv(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_qconv(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_prepare_qconv(px_ctx *ctx, xnn_node *node, xnn_value *values);

/* Makes p (size bytes) node->packed, releasing what was there; `borrowed`
 * packed data (an entry of the packed-weight cache's mapping) is never
 * freed, the rest is free()d with the node. */
void xnn_set_packed(xnn_node *node, void *p, size_t size, bool borrowed);

/* The packed-weight cache's (core/pcache.h) next entry when its tag is
 * `tag` and it holds exactly `bytes` (the size the node's shapes give);
 * otherwise NULL, and an entry of another size rejects the cache file. */
const void *xnn_cache_take(uint32_t tag, size_t bytes);

/* Puts `bytes` from p into the packed-weight cache as one entry. */
void xnn_cache_put(uint32_t tag, const void *p, size_t bytes);

#endif /* PX_XNN_QNODES_H */
