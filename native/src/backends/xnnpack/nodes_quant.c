/*
 * nodes_quant.c - XNNPACK's quantized graphs (issue 14), all but the
 * convolutions (nodes_qconv.c): which node runs with which quantized
 * values (xnn_quant_check, at load), and
 *   Convert         fp32 -> qint8 / quint8 (static), qint8 / quint8 -> fp32,
 *                   fp32 -> qdint8 (XNNPACK's dynamic per-row "qd8"
 *                   quantization), qint8 -> qint8 and quint8 -> quint8
 *                   (requantization, XNNPACK's fixed-point qs8 / qu8 vcvt)
 *   FullyConnected  qdint8 x qcint8 / qcint4 / qbint4 -> fp32, and static
 *                   qint8 x qint8 / qcint8 (+ int32 bias) -> qint8
 *   Add, Subtract   qint8, XNNPACK's integer fixed-point arithmetic
 *   Multiply        qint8, XNNPACK's fp32 requantization
 *   MaxPooling2d    qint8 or quint8 (a max of bytes)
 *   GlobalAvgPooling2d  qint8, XNNPACK's qs8 mean
 *   Clamp           qint8 or quint8 (the float bounds quantized; a clamp of bytes)
 *   Lookup8         qint8 / quint8 through a byte table (fuse.c's pointwise chains)
 *   StaticTranspose, StaticReshape, StaticSlice, StaticConstantPad,
 *   Concatenate2..5, Copy on qint8 or quint8 with one scale and zero point:
 *                   byte moves
 * (ExecuTorch 1.5.1's writer never emits quint8: it serialises uint8
 * quantization as qint8. A payload written otherwise may hold quint8
 * values; these nodes run them, the others refuse them.)
 * The integer products are kernels/gemm/qgemm.h's; 4-bit weights are packed
 * 4-bit at load and the payload's pages are then handed back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/qnodes.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/quantized/qs8_binary.h"
#include "kernels/quantized/qs8_convert.h"
#include "kernels/quantized/x8_lut.h"
#include "kernels/shape/strided.h"

/* ---- what runs -------------------------------------------------------------------- */

static bool is_x8(int dt) { return dt == XNN_DT_QINT8 || dt == XNN_DT_QUINT8; }

static bool same_q8(const xnn_value *a, const xnn_value *b) {
  return is_x8(a->datatype) && a->datatype == b->datatype && a->quant.scale == b->quant.scale &&
         a->quant.zero_point == b->quant.zero_point;
}

#define NO(...) (snprintf(why, cap, __VA_ARGS__), PYEXEC_ERR_UNSUPPORTED)
#define BADQ(...) (snprintf(why, cap, __VA_ARGS__), PYEXEC_ERR_INVALID_PROGRAM)

static int check_fc(const xnn_node *node, const xnn_value *values, char *why, size_t cap) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]], *y = &values[node->out[0]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  int wd = w->datatype;
  if (!w->constant_idx) return NO("a quantized filter that is not a constant");
  if (b && !b->constant_idx) return NO("a bias that is not a constant");
  if (x->datatype == XNN_DT_QDINT8) {
    if (wd != XNN_DT_QCINT8 && wd != XNN_DT_QCINT4 && wd != XNN_DT_QBINT4)
      return NO("a qdint8 input with a %s filter (qcint8, qcint4 or qbint4 run)", xnn_datatype_name(wd));
    if (y->datatype != XNN_DT_FP32 || (b && b->datatype != XNN_DT_FP32))
      return NO("a qdint8 input without an fp32 output and bias");
    if (node->flags & XNN_FLAG_TRANSPOSE_WEIGHTS) return NO("transposed quantized weights");
    if (wd != XNN_DT_QBINT4 && w->quant.channel_dim != 0)
      return BADQ("filter channel_dim is %d, not 0 (the output channels)", w->quant.channel_dim);
  } else if (x->datatype == XNN_DT_QINT8) {
    if (wd != XNN_DT_QINT8 && wd != XNN_DT_QCINT8)
      return NO("a qint8 input with a %s filter (qint8 or qcint8 run)", xnn_datatype_name(wd));
    if (y->datatype != XNN_DT_QINT8) return NO("a qint8 input with a %s output", xnn_datatype_name(y->datatype));
    if (b && b->datatype != XNN_DT_QINT32 && b->datatype != XNN_DT_QCINT32)
      return NO("a static quantized product with a %s bias", xnn_datatype_name(b->datatype));
    if (wd == XNN_DT_QINT8 && w->quant.zero_point != 0)
      return BADQ("filter zero_point is %d, XNNPACK requires 0", w->quant.zero_point);
    int want_dim = node->flags & XNN_FLAG_TRANSPOSE_WEIGHTS ? 1 : 0;
    if (wd == XNN_DT_QCINT8 && w->quant.channel_dim != want_dim)
      return BADQ("filter channel_dim is %d, not %d (the output channels)", w->quant.channel_dim, want_dim);
  } else {
    return NO("a %s input", xnn_datatype_name(x->datatype));
  }
  return 0;
}

static int check_conv(const xnn_node *node, const xnn_value *values, char *why, size_t cap) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]], *y = &values[node->out[0]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  bool depthwise = node->type == XNN_NODE_depthwise_conv2d;
  if (!w->constant_idx || (b && !b->constant_idx)) return NO("a filter or bias that is not a constant");
  if (w->num_dims != 4) return BADQ("the filter has %u dims, not 4", w->num_dims);
  if (x->datatype == XNN_DT_QDINT8) { /* XNNPACK's qd8-f32-qc8w convolutions */
    if (depthwise) return NO("a depthwise convolution of a qdint8 input");
    if (w->datatype != XNN_DT_QCINT8)
      return NO("a qdint8 input with a %s filter (qcint8 runs)", xnn_datatype_name(w->datatype));
    if (y->datatype != XNN_DT_FP32 || (b && b->datatype != XNN_DT_FP32))
      return NO("a qdint8 input with a %s output and %s bias (fp32 ones run)", xnn_datatype_name(y->datatype),
                b ? xnn_datatype_name(b->datatype) : "no");
    if (w->quant.channel_dim != 0)
      return BADQ("filter channel_dim is %d, not 0 (the output channels)", w->quant.channel_dim);
    int want = xnn_qconv_is_fc(node, values) ? 1 : 3; /* xnn_quant_rewrite */
    if (x->num_dims != 4 || x->quant.num_nonbatch_dims != want)
      return NO("a qdint8 input quantized over its last %d of %u dims (this convolution takes one zero point and "
                "scale per %s: %d of 4)",
                x->quant.num_nonbatch_dims, x->num_dims, want == 1 ? "pixel" : "image", want);
    return 0;
  }
  if (x->datatype != XNN_DT_QINT8 || y->datatype != XNN_DT_QINT8)
    return NO("a %s input and %s output (qint8 ones, or qdint8 in and fp32 out, run)", xnn_datatype_name(x->datatype),
              xnn_datatype_name(y->datatype));
  if (w->datatype != XNN_DT_QINT8 && w->datatype != XNN_DT_QCINT8)
    return NO("a %s filter (qint8 or qcint8 run)", xnn_datatype_name(w->datatype));
  if (b && b->datatype != XNN_DT_QINT32 && b->datatype != XNN_DT_QCINT32)
    return NO("a %s bias (qint32 or qcint32 run)", xnn_datatype_name(b->datatype));
  if (w->datatype == XNN_DT_QINT8 && w->quant.zero_point != 0)
    return BADQ("filter zero_point is %d, XNNPACK requires 0", w->quant.zero_point);
  int want_dim = depthwise ? 3 : 0;
  if (w->datatype == XNN_DT_QCINT8 && w->quant.channel_dim != want_dim)
    return BADQ("filter channel_dim is %d, not %d (the output channels)", w->quant.channel_dim, want_dim);
  return 0;
}

bool xnn_qconv_is_fc(const xnn_node *node, const xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  return node->type == XNN_NODE_conv2d && x->datatype == XNN_DT_QDINT8 && node->p.conv.groups == 1 &&
         node->p.conv.kernel_height == 1 && node->p.conv.kernel_width == 1 && node->p.conv.subsampling_height == 1 &&
         node->p.conv.subsampling_width == 1 && !node->p.conv.padding_top && !node->p.conv.padding_right &&
         !node->p.conv.padding_bottom && !node->p.conv.padding_left &&
         (uint64_t)node->p.conv.group_input_channels + node->p.conv.group_output_channels > 2;
}

void xnn_quant_rewrite(const xnn_node *node, xnn_value *values) {
  if (!xnn_qconv_is_fc(node, values)) return;
  xnn_value *x = &values[node->in[0]];
  x->quant.num_nonbatch_dims = 1;
  x->capacity = xnn_qd8_capacity(x); /* more rows: a larger parameter area (storage is given after parsing) */
}

int xnn_quant_check(const xnn_node *node, const xnn_value *values, char *why, size_t cap) {
  const xnn_value *x = &values[node->in[0]], *y = &values[node->out[0]];
  int xd = x->datatype, yd = y->datatype;
  switch (node->type) {
    case XNN_NODE_convert:
      if ((xd == XNN_DT_FP32 && (is_x8(yd) || yd == XNN_DT_QDINT8)) || (is_x8(xd) && yd == XNN_DT_FP32))
        return 0;
      if (is_x8(xd) && xd == yd) { /* requantization: XNNPACK's multiplier lrintf(256 x ratio) needs */
        float r = x->quant.scale / y->quant.scale;
        if (!(r >= 0x1.0p-8f && r <= 0x1.0p+7f))
          return BADQ("input / output scale ratio %g lies outside [2^-8, 2^7]", r);
        return 0;
      }
      return NO("a conversion from %s to %s", xnn_datatype_name(xd), xnn_datatype_name(yd));
    case XNN_NODE_fully_connected: return check_fc(node, values, why, cap);
    case XNN_NODE_conv2d:
    case XNN_NODE_depthwise_conv2d:
    case XNN_NODE_conv_transpose2d: return check_conv(node, values, why, cap);
    case XNN_NODE_add:
    case XNN_NODE_subtract:
    case XNN_NODE_multiply: {
      const xnn_value *b = &values[node->in[1]];
      if (xd != XNN_DT_QINT8 || b->datatype != XNN_DT_QINT8 || yd != XNN_DT_QINT8)
        return NO("%s and %s inputs with a %s output (all qint8 run)", xnn_datatype_name(xd),
                  xnn_datatype_name(b->datatype), xnn_datatype_name(yd));
      if (node->type != XNN_NODE_multiply) {
        /* any finite positive ratios run (XNNPACK refuses none): fixed point
         * where its multipliers fit, float beyond (init_binop) */
        float ra = x->quant.scale / y->quant.scale, rb = b->quant.scale / y->quant.scale;
        if (!(ra > 0.0f && rb > 0.0f && isfinite(ra) && isfinite(rb)))
          return BADQ("input / output scale ratios %g and %g are not finite and > 0", ra, rb);
      } else {
        float r = x->quant.scale * b->quant.scale / y->quant.scale;
        if (!(r > 0.0f && isfinite(r)))
          return BADQ("the product / output scale ratio %g is not finite and > 0", r);
      }
      return 0;
    }
    case XNN_NODE_global_avg_pooling2d:
      if (xd != XNN_DT_QINT8 || yd != XNN_DT_QINT8)
        return NO("a %s input and %s output (qint8 ones run)", xnn_datatype_name(xd), xnn_datatype_name(yd));
      if (x->num_dims != 4 || (y->num_dims != 4 && y->num_dims != 2))
        return BADQ("input rank %u, output rank %u: NHWC input and [N, 1, 1, C] or [N, C] output", x->num_dims,
                    y->num_dims);
      return 0;
    case XNN_NODE_clamp:
    case XNN_NODE_max_pooling2d:
    case XNN_NODE_static_transpose:
    case XNN_NODE_static_reshape:
    case XNN_NODE_static_slice:
    case XNN_NODE_static_constant_pad:
    case XNN_NODE_copy:
    case XNN_NODE_concatenate2:
    case XNN_NODE_concatenate3:
    case XNN_NODE_concatenate4:
    case XNN_NODE_concatenate5:
      for (uint32_t k = 0; k < node->nin; k++)
        if (!same_q8(&values[node->in[k]], y))
          return NO("input %u (%s) with another datatype, scale or zero point than its output (a byte move)", k,
                    xnn_datatype_name(values[node->in[k]].datatype));
      return 0;
    default: return NO("this node with quantized values (%s input, %s output)", xnn_datatype_name(xd), xnn_datatype_name(yd));
  }
}

/* ---- Convert ----------------------------------------------------------------------------- */

static int exec_convert(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  int64_t n = xnn_numel(x);
  if (y->datatype == XNN_DT_QDINT8) {
    int64_t rows = xnn_qd8_rows(y);
    if ((uint64_t)n > xnn_qd8_numel_max(y) || (uint64_t)rows > xnn_qd8_rows_max(y) ||
        xnn_qd8_capacity(y) > y->capacity)
      return px_fail(ctx, "a qdint8 value of %lld elements in %lld rows exceeds its upper bound of %zu in %zu",
                     (long long)n, (long long)rows, xnn_qd8_numel_max(y), xnn_qd8_rows_max(y));
    int64_t per = rows ? n / rows : 0;
    int32_t *zp;
    float *scale;
    xnn_qd8_params(y, &zp, &scale);
    if (rows && per) px_quantize_qd8(x->data, rows, per, per, y->data, zp, scale);
    return 0;
  }
  if (x->datatype == XNN_DT_FP32 && y->datatype == XNN_DT_QINT8) {
    /* q = lrintf(clamp(x / scale, -128 - zp, 127 - zp)) + zp */
    px_qs8_from_f32(x->data, n, 1.0f / y->quant.scale, y->quant.zero_point, y->data);
    return 0;
  }
  if (x->datatype == XNN_DT_FP32) { /* quint8: the same in [0, 255] */
    const float *in = x->data;
    uint8_t *out = y->data;
    float inv = 1.0f / y->quant.scale;
    int32_t zp = y->quant.zero_point;
    float lo = (float)(0 - zp), hi = (float)(255 - zp);
    for (int64_t i = 0; i < n; i++) out[i] = (uint8_t)(xnn_q8_round(xnn_clampf(in[i] * inv, lo, hi)) + zp);
    return 0;
  }
  bool u = x->datatype == XNN_DT_QUINT8;
  int32_t izp = x->quant.zero_point;
  if (y->datatype == XNN_DT_FP32) { /* (q - zp) * scale */
    float *out = y->data;
    float s = x->quant.scale;
    if (u) {
      const uint8_t *in = x->data;
      for (int64_t i = 0; i < n; i++) out[i] = (float)((int32_t)in[i] - izp) * s;
    } else {
      px_f32_from_qs8(x->data, n, izp, s, out);
    }
    return 0;
  }
  /* Requantization, XNNPACK's qs8 / qu8 vcvt: with m = lrintf(256 x in_scale
   * / out_scale), q' = clamp(out_zp + floor(((q - in_zp) * m + 128) / 256)),
   * as (bias + q * m) >> 8 with bias = (out_zp << 8) - m * in_zp + 128. */
  int32_t m = (int32_t)lrintf(256.0f * (x->quant.scale / y->quant.scale));
  int32_t bias = y->quant.zero_point * 256 - m * izp + 128;
  int32_t lo = u ? 0 : -128, hi = u ? 255 : 127;
  if (u) {
    const uint8_t *restrict in = x->data;
    uint8_t *restrict out = y->data;
    for (int64_t i = 0; i < n; i++) {
      int32_t v = (bias + (int32_t)in[i] * m) >> 8; /* arithmetic shift, as the other fixed-point nodes */
      out[i] = (uint8_t)(v < lo ? lo : v > hi ? hi : v);
    }
  } else {
    const int8_t *restrict in = x->data;
    int8_t *restrict out = y->data;
    for (int64_t i = 0; i < n; i++) {
      int32_t v = (bias + (int32_t)in[i] * m) >> 8;
      out[i] = (int8_t)(v < lo ? lo : v > hi ? hi : v);
    }
  }
  return 0;
}

/* ---- FullyConnected ----------------------------------------------------------------------- */

static int prepare_fc(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  const xnn_value *w = &values[node->in[1]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  bool tr = node->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
  int64_t N = tr ? w->max_dims[1] : w->max_dims[0], K = tr ? w->max_dims[0] : w->max_dims[1];
  if (b && b->max_dims[0] != N)
    return px_fail(ctx, "bias has %lld entries for %lld outputs", (long long)b->max_dims[0], (long long)N);
  xnn_qplan *plan = calloc(1, sizeof *plan);
  if (!plan) return px_fail(ctx, "out of memory packing the weights");
  node->packed = plan;
  node->release = xnn_qplan_release;
  plan->N = N;
  plan->K = K;
  if (values[node->in[0]].datatype == XNN_DT_QINT8) {
    int8_t *t = NULL;
    const int8_t *rows = w->data;
    if (tr) { /* [IC, OC] -> rows of K */
      if (!(t = malloc((size_t)(N * K) + 1))) return px_fail(ctx, "out of memory packing the weights");
      for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) t[n * K + k] = rows[k * N + n];
      rows = t;
    }
    int rc = xnn_qplan_static(ctx, plan, node, values, rows);
    free(t);
    if (!rc) px_drop_file_pages(w->data, w->constant_size);
    return rc;
  }
  /* dynamic: qd8 input, qc8w / qc4w / qb4w filter, float bias */
  bool four = w->datatype != XNN_DT_QCINT8;
  int64_t block = w->datatype == XNN_DT_QBINT4 ? w->quant.group_size : 0;
  size_t ns = w->quant.num_scales;
  float *scales = malloc(sizeof(float) * (ns ? ns : 1));
  if (!scales) return px_fail(ctx, "out of memory packing the weights");
  for (size_t i = 0; i < ns; i++) scales[i] = xnn_quant_scale(&w->quant, (uint32_t)i);
  px_qweights_desc d = {.bits = four ? 4 : 8,
                        .N = N,
                        .K = K,
                        .data = w->data,
                        .row_bytes = four ? (K + 1) / 2 : K,
                        .nibble_high_first = 0,
                        .zero_point = four ? 8 : 0,
                        .block = block == K ? 0 : block, /* one block per row: per channel */
                        .scales = scales,
                        .bias = b ? b->data : NULL};
  plan->w = px_qweights_pack(&d);
  free(scales);
  if (!plan->w) return px_fail(ctx, "%s", px_error_buffer(&(size_t){0}));
  px_drop_file_pages(w->data, w->constant_size);
  return 0;
}

static int exec_fc(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_qplan *plan = node->packed;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  int64_t K = plan->K, N = plan->N;
  int64_t M = K ? xnn_numel(x) / K : 0;
  if (!M || !N) return 0;
  if (x->datatype == XNN_DT_QINT8)
    return px_qgemm_qs8(ctx, plan->w, M, x->data, K, plan->in_zp, plan->bias, plan->requant, plan->out_zp,
                        plan->qmin, plan->qmax, y->data, N);
  int32_t *zp;
  float *sc;
  xnn_qd8_params(x, &zp, &sc);
  int64_t rows = xnn_qd8_rows(x), per = xnn_numel(x) / rows;
  if (per != K) { /* a quantization row spans several product rows: give each its row's parameters */
    if (per % K) return px_fail(ctx, "qdint8 input rows of %lld elements are not whole rows of %lld", (long long)per,
                                (long long)K);
    int64_t rep = per / K;
    int32_t *z2 = px_scratch(ctx, sizeof(int32_t) * (size_t)M);
    float *s2 = px_scratch(ctx, sizeof(float) * (size_t)M);
    if (!z2 || !s2) return PYEXEC_ERR_EXECUTION;
    for (int64_t m = 0; m < M; m++) z2[m] = zp[m / rep], s2[m] = sc[m / rep];
    zp = z2, sc = s2;
  }
  return px_qgemm_qd8_f32(ctx, plan->w, M, x->data, K, zp, sc, y->data, N, node->output_min, node->output_max);
}

/* ---- Add, Subtract, Multiply ------------------------------------------------------------------ */

/* XNNPACK's qs8 add: multipliers round(ratio * 2^shift) with shift =
 * 20 - exponent(larger |ratio|), a bias holding the rounding term and the
 * zero points, an arithmetic shift right, then clamp and the output zero
 * point. Subtract is an add with the second ratio negated. The smaller ratio
 * may round to a small multiplier, even 0, as in XNNPACK. Where the larger
 * ratio puts the shift outside [1, 30] (it is >= 2^20 or < 2^-10, past what
 * XNNPACK's kernels assume), the sum is taken in float: the dequantized
 * inputs times their ratios, rounded as Convert rounds. */
typedef struct q8_binop {
  int type;
  bool in_float;               /* add / subtract with a shift outside [1, 30] */
  int32_t ma, mb, bias, shift; /* add / subtract */
  int32_t azp, bzp;            /* multiply, and add / subtract in float */
  float scale;                 /* multiply */
  float ra, rb;                /* add / subtract in float */
  int32_t lo, hi, ozp;         /* bounds less the zero point, output zero point */
} q8_binop;

static void init_binop(q8_binop *p, const xnn_node *node, const xnn_value *a, const xnn_value *b,
                       const xnn_value *y) {
  p->type = node->type;
  p->ozp = y->quant.zero_point;
  p->lo = xnn_q8_bound(node->output_min, y->quant.scale, p->ozp) - p->ozp;
  p->hi = xnn_q8_bound(node->output_max, y->quant.scale, p->ozp) - p->ozp;
  p->azp = a->quant.zero_point;
  p->bzp = b->quant.zero_point;
  if (node->type == XNN_NODE_multiply) {
    p->scale = a->quant.scale * b->quant.scale / y->quant.scale;
    return;
  }
  float ra = a->quant.scale / y->quant.scale, rb = b->quant.scale / y->quant.scale;
  if (node->type == XNN_NODE_subtract) rb = -rb;
  p->ra = ra, p->rb = rb;
  float amax = fmaxf(fabsf(ra), fabsf(rb));
  uint32_t bits;
  memcpy(&bits, &amax, 4);
  int32_t exponent = (int32_t)(bits >> 23) - 127;
  if (exponent < -10 || exponent > 19) {
    p->in_float = true;
    return;
  }
  p->shift = 20 - exponent;
  p->ma = (int32_t)lrintf(ldexpf(fabsf(ra), p->shift));
  p->mb = (int32_t)lrintf(ldexpf(fabsf(rb), p->shift));
  if (signbit(ra)) p->ma = -p->ma;
  if (signbit(rb)) p->mb = -p->mb;
  p->bias = (int32_t)(1u << (p->shift - 1)) - p->ma * a->quant.zero_point - p->mb * b->quant.zero_point;
}

static inline int8_t binop1(const q8_binop *p, int32_t a, int32_t b) {
  int32_t v;
  if (p->type == XNN_NODE_multiply) {
    v = xnn_q8_round(xnn_clampf((float)((a - p->azp) * (b - p->bzp)) * p->scale, (float)p->lo, (float)p->hi));
  } else if (p->in_float) {
    float sum = (float)(a - p->azp) * p->ra + (float)(b - p->bzp) * p->rb;
    v = xnn_q8_round(xnn_clampf(sum, (float)p->lo, (float)p->hi));
  } else {
    int32_t acc = p->bias + a * p->ma + b * p->mb;
    v = acc >> p->shift; /* arithmetic: gcc and clang shift signed values arithmetically */
    v = v < p->lo ? p->lo : v > p->hi ? p->hi : v;
  }
  return (int8_t)(v + p->ozp);
}

/* binop1 over n elements of contiguous rows (kernels/quantized/qs8_binary.h). */
static void binop_row(const q8_binop *p, const int8_t *a, const int8_t *b, int8_t *o, int64_t n) {
  if (p->in_float) {
    for (int64_t i = 0; i < n; i++) o[i] = binop1(p, a[i], b[i]);
    return;
  }
  const px_qs8_binop k = {.bias = p->bias, .ma = p->ma, .mb = p->mb, .shift = p->shift, .azp = p->azp,
                          .bzp = p->bzp, .scale = p->scale, .lo = p->lo, .hi = p->hi, .ozp = p->ozp};
  if (p->type == XNN_NODE_multiply)
    px_qs8_mul_row(&k, a, b, o, n);
  else
    px_qs8_addsub_row(&k, a, b, o, n);
}

/* The broadcast walk: the output's dims with each input's element strides
 * (0 where it is broadcast), the trailing dims that both inputs read
 * contiguously merged into one run. */
typedef struct binary_job {
  const q8_binop *p;
  const int8_t *a, *b;
  int8_t *y;
  int nd;                           /* dims after merging; dims[nd - 1] is the run */
  int64_t dims[XNN_MAX_DIMS], sa[XNN_MAX_DIMS], sb[XNN_MAX_DIMS];
  int64_t piece;                    /* elements of a run per work item */
} binary_job;

enum { BINARY_PIECE = 16384 };

/* Work items [i0, i1): item i is piece i % per of run i / per. */
static void binary_items(void *arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const binary_job *J = arg;
  const int nd = J->nd;
  const int64_t inner = J->dims[nd - 1], per = (inner + J->piece - 1) / J->piece;
  const int64_t ia = J->sa[nd - 1], ib = J->sb[nd - 1];
  for (int64_t i = i0; i < i1; i++) {
    int64_t run = i / per, c0 = (i % per) * J->piece, c1 = c0 + J->piece < inner ? c0 + J->piece : inner;
    int64_t oa = 0, ob = 0, r = run;
    for (int k = nd - 2; k >= 0; k--) {
      int64_t idx = r % J->dims[k];
      r /= J->dims[k];
      oa += idx * J->sa[k], ob += idx * J->sb[k];
    }
    const int8_t *pa = J->a + oa + c0 * ia, *pb = J->b + ob + c0 * ib;
    int8_t *out = J->y + run * inner + c0;
    if (ia == 1 && ib == 1)
      binop_row(J->p, pa, pb, out, c1 - c0);
    else
      for (int64_t c = 0; c < c1 - c0; c++) out[c] = binop1(J->p, pa[c * ia], pb[c * ib]);
  }
}

static int exec_binary(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *a = &values[node->in[0]], *b = &values[node->in[1]];
  xnn_value *y = &values[node->out[0]];
  q8_binop p = {0};
  init_binop(&p, node, a, b, y);
  int64_t n = xnn_numel(y);
  if (!n) return 0;
  binary_job J = {.p = &p, .a = a->data, .b = b->data, .y = y->data, .piece = BINARY_PIECE};
  /* element strides of a and b at the output's dims (0 where broadcast), from the last dim */
  int nd = (int)y->num_dims, m = 0;
  int64_t st = 1, stb = 1, dims[XNN_MAX_DIMS], sa[XNN_MAX_DIMS], sb[XNN_MAX_DIMS];
  for (int k = nd - 1; k >= 0; k--) {
    int ka = k - (nd - (int)a->num_dims), kb = k - (nd - (int)b->num_dims);
    int64_t da = ka >= 0 ? a->dims[ka] : 1, db = kb >= 0 ? b->dims[kb] : 1;
    dims[k] = y->dims[k];
    sa[k] = da == 1 ? 0 : st;
    sb[k] = db == 1 ? 0 : stb;
    st *= da;
    stb *= db;
  }
  /* merge dim k into the run after it where both inputs continue it (a size-1 dim merges freely) */
  int64_t rd = dims[nd - 1], rsa = sa[nd - 1], rsb = sb[nd - 1];
  int64_t md[XNN_MAX_DIMS], msa[XNN_MAX_DIMS], msb[XNN_MAX_DIMS];
  for (int k = nd - 2; k >= -1; k--) {
    if (k >= 0 && (dims[k] == 1 || (sa[k] == rsa * rd && sb[k] == rsb * rd))) {
      rd *= dims[k];
      continue;
    }
    md[m] = rd, msa[m] = rsa, msb[m] = rsb, m++;
    if (k >= 0) rd = dims[k], rsa = sa[k], rsb = sb[k];
  }
  J.nd = m;
  for (int k = 0; k < m; k++) J.dims[k] = md[m - 1 - k], J.sa[k] = msa[m - 1 - k], J.sb[k] = msb[m - 1 - k];
  const int64_t inner = J.dims[m - 1], per = (inner + J.piece - 1) / J.piece;
  px_parallel_for(n / inner * per, 1, n * 2, binary_items, &J);
  return 0;
}

/* ---- MaxPooling2d --------------------------------------------------------------------------------- */

static int shape_max_pool(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  int64_t ph = node->p.pool.pooling_height, pw = node->p.pool.pooling_width;
  int64_t sh = node->p.pool.stride_height, sw = node->p.pool.stride_width;
  int64_t dh = node->p.pool.dilation_height ? node->p.pool.dilation_height : 1;
  int64_t dw = node->p.pool.dilation_width ? node->p.pool.dilation_width : 1;
  if (!ph || !pw || !sh || !sw || ph > 65536 || pw > 65536 || sh > 65536 || sw > 65536 || dh > 65536 || dw > 65536)
    return px_fail(ctx, "pooling size %lldx%lld and stride %lldx%lld must be in [1, 65536]", (long long)ph,
                   (long long)pw, (long long)sh, (long long)sw);
  int64_t H = x->dims[1] + node->p.pool.padding_top + node->p.pool.padding_bottom;
  int64_t W = x->dims[2] + node->p.pool.padding_left + node->p.pool.padding_right;
  int64_t spanh = dh * (ph - 1) + 1, spanw = dw * (pw - 1) + 1;
  if (H < spanh || W < spanw)
    return px_fail(ctx, "a %lldx%lld window does not fit the %lldx%lld padded input", (long long)spanh,
                   (long long)spanw, (long long)H, (long long)W);
  int64_t d[4] = {x->dims[0], (H - spanh) / sh + 1, (W - spanw) / sw + 1, x->dims[3]};
  return xnn_set_dims(ctx, node, &values[node->out[0]], 4, d);
}

/* MaxPooling2d on quint8: exec_max_pool's loop on unsigned bytes. */
static void max_pool_u8(const uint8_t *in, uint8_t *out, int64_t N, int64_t H, int64_t W, int64_t C, int64_t OH,
                        int64_t OW, int64_t ph, int64_t pw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                        int64_t pt, int64_t pl, int32_t lo, int32_t hi) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        uint8_t *o = out + ((n * OH + oh) * OW + ow) * C;
        for (int64_t c = 0; c < C; c++) o[c] = (uint8_t)lo; /* padding is ignored */
        bool any = false;
        for (int64_t i = 0; i < ph; i++) {
          int64_t ih = oh * sh + i * dh - pt;
          if (ih < 0 || ih >= H) continue;
          for (int64_t j = 0; j < pw; j++) {
            int64_t iw = ow * sw + j * dw - pl;
            if (iw < 0 || iw >= W) continue;
            const uint8_t *p = in + ((n * H + ih) * W + iw) * C;
            for (int64_t c = 0; c < C; c++) o[c] = !any || p[c] > o[c] ? p[c] : o[c];
            any = true;
          }
        }
        for (int64_t c = 0; c < C; c++) o[c] = (uint8_t)(o[c] < lo ? lo : o[c] > hi ? hi : o[c]);
      }
}

/* MaxPooling2d on qint8, output rows [r0, r1) of N * OH (each thread its
 * own rows): per output pixel the max over its window's taps inside the
 * input (padding is ignored), then the clamp. The channel loops are
 * compiled for AVX2 too (VPMAXSB; SSE2 has no signed byte max). */
typedef struct max_pool_job {
  const int8_t *in;
  int8_t *out;
  int64_t H, W, C, OH, OW, ph, pw, sh, sw, dh, dw, pt, pl;
  int32_t lo, hi;
} max_pool_job;

static inline __attribute__((always_inline)) void max_pool_body(const max_pool_job *J, int64_t r0, int64_t r1) {
  const int64_t H = J->H, W = J->W, C = J->C, OH = J->OH, OW = J->OW;
  const int8_t lo = (int8_t)J->lo, hi = (int8_t)J->hi;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t n = r / OH, oh = r % OH;
    for (int64_t ow = 0; ow < OW; ow++) {
      int8_t *restrict o = J->out + ((n * OH + oh) * OW + ow) * C;
      for (int64_t c = 0; c < C; c++) o[c] = lo;
      bool any = false;
      for (int64_t i = 0; i < J->ph; i++) {
        const int64_t ih = oh * J->sh + i * J->dh - J->pt;
        if (ih < 0 || ih >= H) continue;
        for (int64_t j = 0; j < J->pw; j++) {
          const int64_t iw = ow * J->sw + j * J->dw - J->pl;
          if (iw < 0 || iw >= W) continue;
          const int8_t *restrict p = J->in + ((n * H + ih) * W + iw) * C;
          if (!any) {
            for (int64_t c = 0; c < C; c++) o[c] = p[c];
            any = true;
          } else {
            for (int64_t c = 0; c < C; c++) o[c] = p[c] > o[c] ? p[c] : o[c];
          }
        }
      }
      for (int64_t c = 0; c < C; c++) o[c] = o[c] < lo ? lo : o[c] > hi ? hi : o[c];
    }
  }
}

static void max_pool_generic(const max_pool_job *J, int64_t r0, int64_t r1) { max_pool_body(J, r0, r1); }
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2"))) static void max_pool_avx2(const max_pool_job *J, int64_t r0, int64_t r1) {
  max_pool_body(J, r0, r1);
}
#endif

static void max_pool_rows(void *arg, int64_t r0, int64_t r1, int tid) {
  (void)tid;
#if defined(__GNUC__) && defined(__x86_64__)
  if (px_cpu()->avx2) {
    max_pool_avx2(arg, r0, r1);
    return;
  }
#endif
  max_pool_generic(arg, r0, r1);
}

static int exec_max_pool(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  int64_t N = x->dims[0], H = x->dims[1], W = x->dims[2], C = x->dims[3];
  int64_t OH = y->dims[1], OW = y->dims[2];
  int64_t ph = node->p.pool.pooling_height, pw = node->p.pool.pooling_width;
  int64_t sh = node->p.pool.stride_height, sw = node->p.pool.stride_width;
  int64_t dh = node->p.pool.dilation_height ? node->p.pool.dilation_height : 1;
  int64_t dw = node->p.pool.dilation_width ? node->p.pool.dilation_width : 1;
  int64_t pt = node->p.pool.padding_top, pl = node->p.pool.padding_left;
  int32_t lo = xnn_x8_bound(node->output_min, y), hi = xnn_x8_bound(node->output_max, y);
  if (y->datatype == XNN_DT_QUINT8) {
    max_pool_u8(x->data, y->data, N, H, W, C, OH, OW, ph, pw, sh, sw, dh, dw, pt, pl, lo, hi);
    return 0;
  }
  max_pool_job J = {x->data, y->data, H, W, C, OH, OW, ph, pw, sh, sw, dh, dw, pt, pl, lo, hi};
  px_parallel_for(N * OH, 1, N * OH * OW * C * ph * pw, max_pool_rows, &J);
  return 0;
}

/* ---- GlobalAvgPooling2d ------------------------------------------------------------------------------ */

/* XNNPACK's qs8 mean (its global average pooling, a sum reduction and an
 * int32 -> qs8 conversion): the int32 sum of the window's raw bytes times
 * s = (x_scale / y_scale) x (1 / count), plus the zero point term
 * y_zp - (count x x_zp) x s, both in float, rounded to nearest even and
 * clamped to the node's output bounds (within int8). The term is folded in
 * float, as XNNPACK folds it, so ties round as there. */
static int shape_global_avg_pool(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  if (y->num_dims == 4) {
    int64_t d[4] = {x->dims[0], 1, 1, x->dims[3]};
    return xnn_set_dims(ctx, node, y, 4, d);
  }
  int64_t d[2] = {x->dims[0], x->dims[3]};
  return xnn_set_dims(ctx, node, y, 2, d);
}

static int exec_global_avg_pool(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  int64_t N = x->dims[0], HW = x->dims[1] * x->dims[2], C = x->dims[3];
  if (!N || !C) return 0;
  int32_t *acc = px_scratch(ctx, sizeof(int32_t) * (size_t)C);
  if (!acc) return PYEXEC_ERR_EXECUTION;
  float scale = (x->quant.scale / y->quant.scale) * (HW ? 1.0f / (float)HW : 0.0f);
  int32_t izp = x->quant.zero_point, ozp = y->quant.zero_point;
  float zterm = (float)ozp - (float)((int32_t)HW * izp) * scale;
  int32_t lo = xnn_q8_bound(node->output_min, y->quant.scale, ozp);
  int32_t hi = xnn_q8_bound(node->output_max, y->quant.scale, ozp);
  const int8_t *in = x->data;
  int8_t *out = y->data;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t c = 0; c < C; c++) acc[c] = 0;
    for (int64_t p = 0; p < HW; p++) {
      const int8_t *row = in + (n * HW + p) * C;
      for (int64_t c = 0; c < C; c++) acc[c] += row[c];
    }
    for (int64_t c = 0; c < C; c++) {
      float v = (float)acc[c] * scale;
      v = v + zterm; /* two roundings, no fused multiply-add */
      out[n * C + c] = (int8_t)xnn_q8_round(xnn_clampf(v, (float)lo, (float)hi)); /* bounds within int8 */
    }
  }
  return 0;
}

/* ---- byte moves ---------------------------------------------------------------------------------- */

static void view8(const xnn_value *v, px_sv *s) {
  int64_t d[XNN_MAX_DIMS];
  for (uint32_t k = 0; k < v->num_dims; k++) d[k] = v->dims[k];
  px_sv_contig(s, v->data, PX_I8, (int)v->num_dims, d);
}

static int exec_transpose(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  px_sv in, dst, src;
  view8(&values[node->in[0]], &in);
  view8(&values[node->out[0]], &dst);
  src = dst;
  src.data = in.data;
  for (int k = 0; k < dst.dim; k++) src.strides[k] = in.strides[node->p.transpose.perm[k]];
  return px_sv_copy(ctx, &dst, &src);
}

static int exec_reshape(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *o = &values[node->out[0]];
  size_t n = (size_t)xnn_numel(x);
  if (n && o->data != x->data) memmove(o->data, x->data, n);
  return 0;
}

static int exec_slice(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  px_sv in, dst, src;
  view8(x, &in);
  view8(&values[node->out[0]], &dst);
  if (!xnn_numel(&values[node->out[0]])) return 0;
  src = dst;
  int64_t off = 0;
  for (uint32_t k = 0; k < x->num_dims; k++) { /* the start as nodes_shape.c's slice_range clamps it */
    int64_t o = node->p.slice.offsets[k];
    if (o > x->dims[k]) o = x->dims[k];
    off += o * in.strides[k];
    src.strides[k] = in.strides[k];
  }
  src.data = px_sv_at(&in, off);
  return px_sv_copy(ctx, &dst, &src);
}

static int exec_pad(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  xnn_value *ov = &values[node->out[0]];
  px_sv out, src, dst;
  view8(ov, &out);
  view8(x, &src);
  /* the float padding value quantized as Convert does */
  bool u = ov->datatype == XNN_DT_QUINT8;
  float lo = (float)((u ? 0 : -128) - ov->quant.zero_point), hi = (float)((u ? 255 : 127) - ov->quant.zero_point);
  float v = xnn_clampf(node->p.pad.value / ov->quant.scale, lo, hi);
  memset(ov->data, (int)(uint8_t)(xnn_q8_round(v) + ov->quant.zero_point), (size_t)xnn_numel(ov));
  if (!xnn_numel(x)) return 0;
  dst = src;
  int64_t off = 0;
  for (uint32_t k = 0; k < x->num_dims; k++) {
    off += (int64_t)node->p.pad.pre[k] * out.strides[k];
    dst.strides[k] = out.strides[k];
  }
  dst.data = px_sv_at(&out, off);
  return px_sv_copy(ctx, &dst, &src);
}

static int exec_concat(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  return xnn_concat_bytes(node, values, 1);
}

/* Clamp on qint8 or quint8 (one scale and zero point in and out): the
 * node's float bounds quantized, then a clamp of the bytes. */
static int exec_clamp(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  int32_t lo = xnn_x8_bound(node->output_min, y), hi = xnn_x8_bound(node->output_max, y);
  int64_t n = xnn_numel(x);
  if (y->datatype == XNN_DT_QUINT8) {
    const uint8_t *restrict in = x->data;
    uint8_t *restrict out = y->data;
    for (int64_t i = 0; i < n; i++) {
      int32_t v = in[i];
      v = v < lo ? lo : v;
      out[i] = (uint8_t)(v > hi ? hi : v);
    }
    return 0;
  }
  const int8_t *restrict in = x->data;
  int8_t *restrict out = y->data;
  for (int64_t i = 0; i < n; i++) {
    int32_t v = in[i];
    v = v < lo ? lo : v;
    out[i] = (int8_t)(v > hi ? hi : v);
  }
  return 0;
}

static int exec_copy(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return exec_reshape(ctx, node, values);
}

/* ---- Lookup8 (fuse.c's fused pointwise chains) -------------------------------------------------------- */

typedef struct lookup_job {
  const uint8_t *x, *table;
  uint8_t *y;
  int64_t n;
} lookup_job;

enum { LOOKUP_PIECE = 16384 };

static void lookup_pieces(void *arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const lookup_job *J = arg;
  int64_t b = p0 * LOOKUP_PIECE, e = p1 * LOOKUP_PIECE < J->n ? p1 * LOOKUP_PIECE : J->n;
  px_x8_lut(J->x + b, e - b, J->table, J->y + b);
}

static int exec_lookup8(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_lookup8 *lk = node->packed;
  lookup_job J = {values[node->in[0]].data, lk->table, values[node->out[0]].data, xnn_numel(&values[node->in[0]])};
  px_parallel_for((J.n + LOOKUP_PIECE - 1) / LOOKUP_PIECE, 1, J.n * 2, lookup_pieces, &J); /* bytes touched */
  return 0;
}

/* ---- the table ------------------------------------------------------------------------------------- */


static const xnn_node_ops q_convert = {xnn_shape_unary, exec_convert, NULL};
static const xnn_node_ops q_fc = {xnn_shape_fully_connected, exec_fc, prepare_fc};
static const xnn_node_ops q_conv = {xnn_shape_qconv, xnn_exec_qconv, xnn_prepare_qconv};
static const xnn_node_ops q_binary = {xnn_shape_binary, exec_binary, NULL};
static const xnn_node_ops q_max_pool = {shape_max_pool, exec_max_pool, NULL};
static const xnn_node_ops q_global_avg_pool = {shape_global_avg_pool, exec_global_avg_pool, NULL};
static const xnn_node_ops q_transpose = {xnn_shape_static_transpose, exec_transpose, NULL};
/* ---- fuse.c's quantize_rows node: a float32 elementwise node and the
 * Convert that quantizes its output per row (qd8) ------------------------------------------ */

static int shape_quantize_rows(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_quantize_rows *q = node->packed;
  int rc = xnn_shape_elementwise(ctx, &q->first, values);
  if (rc) return rc;
  const xnn_value *mid = &values[q->mid];
  return xnn_set_dims(ctx, node, &values[node->out[0]], mid->num_dims, mid->dims);
}

typedef struct rowq_job {
  const xnn_quantize_rows *q;
  const xnn_value *values;
  int8_t *y;
  int32_t *zp;
  float *scale;
  int64_t per;     /* elements a row */
  float *buf;      /* per thread: one row */
} rowq_job;

static void rowq_rows(void *arg, int64_t r0, int64_t r1, int tid) {
  const rowq_job *J = arg;
  float *buf = J->buf + (int64_t)tid * J->per;
  for (int64_t r = r0; r < r1; r++) {
    xnn_elementwise_range(&J->q->first, J->values, r * J->per, (r + 1) * J->per, buf);
    px_quantize_qd8(buf, 1, J->per, J->per, J->y + r * J->per, J->zp + r, J->scale + r);
  }
}

/* Row by row, the first node's elements of the row into a buffer the cache
 * holds, then the Convert's quantization of it: the same two functions on
 * the same values as the two nodes, without the float value going out to
 * memory and back; rows over the pool. */
static int exec_quantize_rows(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_quantize_rows *q = node->packed;
  xnn_value *y = &values[node->out[0]];
  const int64_t n = xnn_numel(y), rows = xnn_qd8_rows(y);
  if ((uint64_t)n > xnn_qd8_numel_max(y) || (uint64_t)rows > xnn_qd8_rows_max(y) ||
      xnn_qd8_capacity(y) > y->capacity)
    return px_fail(ctx, "a qdint8 value of %lld elements in %lld rows exceeds its upper bound of %zu in %zu",
                   (long long)n, (long long)rows, xnn_qd8_numel_max(y), xnn_qd8_rows_max(y));
  if (!rows || !n) return 0;
  rowq_job J = {q, values, y->data, NULL, NULL, n / rows, NULL};
  xnn_qd8_params(y, &J.zp, &J.scale);
  J.buf = px_scratch(ctx, sizeof(float) * (size_t)(J.per * px_parallel_threads()));
  if (!J.buf) return PYEXEC_ERR_EXECUTION;
  px_parallel_for(rows, 1, n * 8, rowq_rows, &J);
  return 0;
}

static const xnn_node_ops q_reshape = {xnn_shape_static_reshape, exec_reshape, NULL};
static const xnn_node_ops q_slice = {xnn_shape_static_slice, exec_slice, NULL};
static const xnn_node_ops q_pad = {xnn_shape_static_constant_pad, exec_pad, NULL};
static const xnn_node_ops q_concat = {xnn_shape_concatenate, exec_concat, NULL};
static const xnn_node_ops q_copy = {xnn_shape_unary, exec_copy, NULL};
static const xnn_node_ops q_clamp = {xnn_shape_unary, exec_clamp, NULL};
static const xnn_node_ops q_lookup8 = {xnn_shape_unary, exec_lookup8, NULL};
static const xnn_node_ops q_quantize_rows = {shape_quantize_rows, exec_quantize_rows, NULL};

const xnn_node_ops *xnn_quant_ops_for(const xnn_node *node, const xnn_value *values) {
  (void)values;
  switch (node->type) {
    case XNN_NODE_convert: return &q_convert;
    case XNN_NODE_fully_connected: return &q_fc;
    case XNN_NODE_conv2d:
    case XNN_NODE_depthwise_conv2d:
    case XNN_NODE_conv_transpose2d: return &q_conv;
    case XNN_NODE_add:
    case XNN_NODE_subtract:
    case XNN_NODE_multiply: return &q_binary;
    case XNN_NODE_max_pooling2d: return &q_max_pool;
    case XNN_NODE_global_avg_pooling2d: return &q_global_avg_pool;
    case XNN_NODE_static_transpose: return &q_transpose;
    case XNN_NODE_static_reshape: return &q_reshape;
    case XNN_NODE_static_slice: return &q_slice;
    case XNN_NODE_static_constant_pad: return &q_pad;
    case XNN_NODE_concatenate2:
    case XNN_NODE_concatenate3:
    case XNN_NODE_concatenate4:
    case XNN_NODE_concatenate5: return &q_concat;
    case XNN_NODE_copy: return &q_copy;
    case XNN_NODE_clamp: return &q_clamp;
    case XNN_NODE_lookup8: return &q_lookup8;
    case XNN_NODE_quantize_rows: return &q_quantize_rows;
    default: return NULL;
  }
}
