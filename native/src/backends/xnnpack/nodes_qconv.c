/*
 * nodes_qconv.c - XNNPACK's static qs8 convolutions (issue 14): Conv2d
 * (one group) and DepthwiseConv2d on NHWC qint8 values, qint8 (zero point
 * 0) or per-channel qcint8 filters and qint32 / qcint32 biases:
 *   acc = sum (x - x_zp) * w + bias                                (int32)
 *   y   = round(clamp(acc * requant[c], qmin - y_zp, qmax - y_zp)) + y_zp   (ties to even)
 * with requant[c] = x_scale * w_scale[c] / y_scale (the reference's A10).
 * Conv2d gathers the input into rows of KH * KW * Cin bytes (padding taps
 * hold the input's zero point, so they add nothing) and multiplies them by
 * the packed filter with px_qgemm_qs8; a 1x1 convolution of stride 1 and no
 * padding reads the input in place. DepthwiseConv2d is a direct loop over
 * the taps, with int32 accumulators per channel.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/qnodes.h"


#define CONV_PARAM_MAX 65536u

int xnn_prepare_qconv(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]];
  bool depthwise = node->type == XNN_NODE_depthwise_conv2d;
  const uint32_t *pr = &node->p.conv.padding_top; /* the 15 u32 fields, in schema order */
  for (int k = 0; k < 15; k++)
    if (pr[k] > CONV_PARAM_MAX) return px_fail(ctx, "parameter %d is %u, above %u", k, pr[k], CONV_PARAM_MAX);
  uint32_t kh = node->p.conv.kernel_height, kw = node->p.conv.kernel_width;
  uint32_t sh = node->p.conv.subsampling_height, sw = node->p.conv.subsampling_width;
  uint32_t dh = node->p.conv.dilation_height, dw = node->p.conv.dilation_width;
  uint32_t groups = node->p.conv.groups, gic = node->p.conv.group_input_channels;
  uint32_t goc = node->p.conv.group_output_channels;
  if (!kh || !kw || !sh || !sw || !dh || !dw || !groups || !gic || !goc)
    return px_fail(ctx, "kernel %ux%u, stride %ux%u, dilation %ux%u, %u groups of %u -> %u channels must be positive",
                   kh, kw, sh, sw, dh, dw, groups, gic, goc);
  int64_t cin = (int64_t)groups * gic, cout = (int64_t)groups * goc;
  if (depthwise) {
    if (gic != 1) return px_fail(ctx, "a depthwise convolution has %u input channels per group, not 1", gic);
    if (w->max_dims[0] != 1 || w->max_dims[1] != kh || w->max_dims[2] != kw || w->max_dims[3] != cout)
      return px_fail(ctx, "filter dims [%lld, %lld, %lld, %lld], expected [1, %u, %u, %lld]", (long long)w->max_dims[0],
                     (long long)w->max_dims[1], (long long)w->max_dims[2], (long long)w->max_dims[3], kh, kw,
                     (long long)cout);
  } else if (w->max_dims[0] != cout || w->max_dims[1] != kh || w->max_dims[2] != kw || w->max_dims[3] != gic) {
    return px_fail(ctx, "filter dims [%lld, %lld, %lld, %lld], expected [%lld, %u, %u, %u]", (long long)w->max_dims[0],
                   (long long)w->max_dims[1], (long long)w->max_dims[2], (long long)w->max_dims[3], (long long)cout,
                   kh, kw, gic);
  }
  if (x->max_dims[3] != cin)
    return px_fail(ctx, "input has %lld channels, the convolution takes %lld", (long long)x->max_dims[3],
                   (long long)cin);
  xnn_qplan *plan = calloc(1, sizeof *plan);
  if (!plan) return px_fail(ctx, "out of memory packing the weights");
  node->packed = plan;
  node->release = xnn_qplan_release;
  plan->kh = kh, plan->kw = kw, plan->cin = cin, plan->cout = cout, plan->groups = groups;
  plan->sh = sh, plan->sw = sw, plan->dh = dh, plan->dw = dw;
  plan->pt = node->p.conv.padding_top, plan->pl = node->p.conv.padding_left;
  plan->pb = node->p.conv.padding_bottom, plan->pr = node->p.conv.padding_right;
  plan->N = cout;
  plan->K = depthwise ? (int64_t)kh * kw : (int64_t)kh * kw * cin;
  int rc = xnn_qplan_static(ctx, plan, node, values, depthwise ? NULL : w->data);
  if (rc) return rc;
  if (depthwise) { /* [1, KH, KW, C*M] kept as it is, copied so the payload's pages can go */
    size_t n = (size_t)(kh * kw) * (size_t)cout;
    if (!(plan->dw_weights = malloc(n ? n : 1))) return px_fail(ctx, "out of memory packing the weights");
    memcpy(plan->dw_weights, w->data, n);
  }
  xnn_drop_constant_pages(w->data, w->constant_size);
  return 0;
}

static int64_t out_size(int64_t in, int64_t pa, int64_t pb, int64_t k, int64_t d, int64_t s) {
  int64_t span = d * (k - 1) + 1, padded = in + pa + pb;
  return padded < span ? -1 : (padded - span) / s + 1;
}

int xnn_shape_qconv(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_qplan *p = node->packed;
  const xnn_value *x = &values[node->in[0]];
  if (x->dims[3] != p->cin)
    return px_fail(ctx, "input has %lld channels, expected %lld", (long long)x->dims[3], (long long)p->cin);
  int64_t d[4] = {x->dims[0], out_size(x->dims[1], p->pt, p->pb, p->kh, p->dh, p->sh),
                  out_size(x->dims[2], p->pl, p->pr, p->kw, p->dw, p->sw), p->cout};
  if (d[1] < 0 || d[2] < 0)
    return px_fail(ctx, "the kernel does not fit a %lldx%lld input", (long long)x->dims[1], (long long)x->dims[2]);
  return xnn_set_dims(ctx, node, &values[node->out[0]], 4, d);
}

/* Conv2d: rows [m0, m0 + rows) of the gathered input (one per output pixel). */
static void gather(const xnn_qplan *p, const int8_t *in, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t m0,
                   int64_t rows, int8_t *a) {
  int64_t C = p->cin;
  for (int64_t r = 0; r < rows; r++) {
    int64_t m = m0 + r, ow = m % OW, oh = (m / OW) % OH, n = m / (OW * OH);
    int8_t *row = a + r * p->K;
    for (int64_t i = 0; i < p->kh; i++) {
      int64_t ih = oh * p->sh + i * p->dh - p->pt;
      for (int64_t j = 0; j < p->kw; j++, row += C) {
        int64_t iw = ow * p->sw + j * p->dw - p->pl;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
          memset(row, (int)(int8_t)p->in_zp, (size_t)C);
        else
          memcpy(row, in + ((n * H + ih) * W + iw) * C, (size_t)C);
      }
    }
  }
}

static int exec_conv(px_ctx *ctx, const xnn_qplan *p, const xnn_value *x, xnn_value *y) {
  int64_t H = x->dims[1], W = x->dims[2], OH = y->dims[1], OW = y->dims[2];
  int64_t M = x->dims[0] * OH * OW;
  if (!M) return 0;
  if (p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && !p->pt && !p->pl && !p->pb && !p->pr)
    return px_qgemm_qs8(ctx, p->w, M, x->data, p->K, p->in_zp, p->bias, p->requant, p->out_zp, p->qmin, p->qmax,
                        y->data, p->cout);
  int64_t tile = (int64_t)(1 << 18) / (p->K ? p->K : 1); /* about 256 KiB of gathered rows at a time */
  if (tile < 16) tile = 16;
  if (tile > M) tile = M;
  int8_t *a = px_scratch(ctx, (size_t)(tile * p->K));
  if (!a) return PYEXEC_ERR_EXECUTION;
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    int64_t rows = M - m0 < tile ? M - m0 : tile;
    gather(p, x->data, H, W, OH, OW, m0, rows, a);
    int rc = px_qgemm_qs8(ctx, p->w, rows, a, p->K, p->in_zp, p->bias, p->requant, p->out_zp, p->qmin, p->qmax,
                          (int8_t *)y->data + m0 * p->cout, p->cout);
    if (rc) return rc;
  }
  return 0;
}

/* One tap of a depthwise window over C channels (depth multiplier 1). */
static void dw_tap(int32_t *restrict acc, const int8_t *restrict x, const int8_t *restrict w, int64_t C,
                   int32_t zp) {
  for (int64_t c = 0; c < C; c++) acc[c] += ((int32_t)x[c] - zp) * (int32_t)w[c];
}

/* acc requantized into C int8 outputs. */
static void dw_store(int8_t *restrict o, const int32_t *restrict acc, const float *restrict rq, int64_t C, float lo,
                     float hi, int32_t zp) {
  for (int64_t c = 0; c < C; c++) o[c] = (int8_t)(xnn_q8_round(xnn_clampf((float)acc[c] * rq[c], lo, hi)) + zp);
}

static int exec_depthwise(px_ctx *ctx, const xnn_qplan *p, const xnn_value *x, xnn_value *y) {
  int64_t N = x->dims[0], H = x->dims[1], W = x->dims[2], OH = y->dims[1], OW = y->dims[2];
  int64_t C = p->cin, CO = p->cout, mult = CO / C;
  int32_t *acc = px_scratch(ctx, sizeof(int32_t) * (size_t)(CO ? CO : 1));
  if (!acc) return PYEXEC_ERR_EXECUTION;
  const int8_t *in = x->data;
  int8_t *out = y->data;
  float lo = (float)(p->qmin - p->out_zp), hi = (float)(p->qmax - p->out_zp);
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        if (p->bias)
          memcpy(acc, p->bias, sizeof(int32_t) * (size_t)CO);
        else
          memset(acc, 0, sizeof(int32_t) * (size_t)CO);
        for (int64_t i = 0; i < p->kh; i++) {
          int64_t ih = oh * p->sh + i * p->dh - p->pt;
          if (ih < 0 || ih >= H) continue;
          for (int64_t j = 0; j < p->kw; j++) {
            int64_t iw = ow * p->sw + j * p->dw - p->pl;
            if (iw < 0 || iw >= W) continue;
            const int8_t *px = in + ((n * H + ih) * W + iw) * C;
            const int8_t *pw = p->dw_weights + (i * p->kw + j) * CO;
            if (mult == 1) {
              dw_tap(acc, px, pw, C, p->in_zp);
            } else {
              for (int64_t c = 0; c < CO; c++) acc[c] += ((int32_t)px[c / mult] - p->in_zp) * (int32_t)pw[c];
            }
          }
        }
        dw_store(out + ((n * OH + oh) * OW + ow) * CO, acc, p->requant, CO, lo, hi, p->out_zp);
      }
  return 0;
}

int xnn_exec_qconv(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_qplan *p = node->packed;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  return node->type == XNN_NODE_depthwise_conv2d ? exec_depthwise(ctx, p, x, y) : exec_conv(ctx, p, x, y);
}
