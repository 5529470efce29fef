/*
 * nodes_qconv.c - XNNPACK's quantized convolutions on NHWC values:
 *   Conv2d, ConvTranspose2d  static qs8: qint8 input and output, qint8 (zero
 *                            point 0) or per-channel qcint8 filter, qint32 /
 *                            qcint32 bias; any number of groups
 *                            dynamic qd8: qdint8 input (one zero point and
 *                            scale per image), qcint8 filter, fp32 bias and
 *                            output
 *   DepthwiseConv2d          static qs8
 * with XNNPACK's arithmetic (the reference's A10):
 *   acc = sum (x - x_zp) * w + bias                                   (int32)
 *   qs8: y = round(clamp(acc * requant[c], qmin - y_zp, qmax - y_zp)) + y_zp   (ties to even)
 *        requant[c] = x_scale * w_scale[c] / y_scale
 *   qd8: y = clamp(((float)acc * x_scale[n]) * w_scale[c] + bias[c], min, max)
 * Conv2d and ConvTranspose2d are kernels/gemm/qconv.h's (rows of kernel
 * taps times the packed filter, a transposed convolution phase by phase);
 * DepthwiseConv2d is kernels/conv/qdwconv.h's. Every parameter is checked
 * here, at load.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/qnodes.h"
#include "core/error.h"

#define CONV_PARAM_MAX 65536u

static const char *const conv_param_names[15] = {
    "padding_top",      "padding_right",     "padding_bottom",       "padding_left",
    "kernel_height",    "kernel_width",      "subsampling_height",   "subsampling_width",
    "dilation_height",  "dilation_width",    "group_input_channels", "group_output_channels",
    "groups",           "adjustment_height", "adjustment_width"};

/* The node's fields and the values' dims, checked; the filter's layout
 * [groups * goc, KH, KW, gic] ([1, KH, KW, C * M] depthwise). */
static int check_geometry(px_ctx *ctx, const xnn_node *node, const xnn_value *values) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]], *y = &values[node->out[0]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  bool depthwise = node->type == XNN_NODE_depthwise_conv2d, transposed = node->type == XNN_NODE_conv_transpose2d;
  const uint32_t *pr = &node->p.conv.padding_top; /* the 15 u32 fields, in schema order */
  for (int k = 0; k < 15; k++)
    if (pr[k] > CONV_PARAM_MAX) return px_fail(ctx, "%s is %u, above %u", conv_param_names[k], pr[k], CONV_PARAM_MAX);
  uint32_t kh = node->p.conv.kernel_height, kw = node->p.conv.kernel_width;
  uint32_t sh = node->p.conv.subsampling_height, sw = node->p.conv.subsampling_width;
  uint32_t dh = node->p.conv.dilation_height, dw = node->p.conv.dilation_width;
  uint32_t groups = node->p.conv.groups, gic = node->p.conv.group_input_channels;
  uint32_t goc = node->p.conv.group_output_channels;
  uint32_t ah = node->p.conv.adjustment_height, aw = node->p.conv.adjustment_width;
  if (!kh || !kw || !sh || !sw || !dh || !dw || !groups || !gic || !goc)
    return px_fail(ctx, "kernel %ux%u, stride %ux%u, dilation %ux%u, %u groups of %u -> %u channels must be positive",
                   kh, kw, sh, sw, dh, dw, groups, gic, goc);
  if (!transposed && (ah || aw))
    return px_fail(ctx, "adjustment %ux%u: only a transposed convolution has one", ah, aw);
  if (transposed && (ah >= sh || aw >= sw))
    return px_fail(ctx, "adjustment %ux%u must be smaller than the stride %ux%u", ah, aw, sh, sw);
  int64_t cin = (int64_t)groups * gic, cout = (int64_t)groups * goc;
  if (cin > CONV_PARAM_MAX || cout > CONV_PARAM_MAX || (int64_t)kh * kw > CONV_PARAM_MAX)
    return px_fail(ctx, "%u groups of %u -> %u channels with a %ux%u kernel are too large", groups, gic, goc, kh, kw);
  if (w->num_dims != 4) return px_fail(ctx, "the filter has %u dims, not 4", w->num_dims);
  if (depthwise) {
    if (gic != 1) return px_fail(ctx, "a depthwise convolution has %u input channels per group, not 1", gic);
    if (w->max_dims[0] != 1 || w->max_dims[1] != kh || w->max_dims[2] != kw || w->max_dims[3] != cout)
      return px_fail(ctx, "filter dims [%lld, %lld, %lld, %lld], expected [1, %u, %u, %lld]", (long long)w->max_dims[0],
                     (long long)w->max_dims[1], (long long)w->max_dims[2], (long long)w->max_dims[3], kh, kw,
                     (long long)cout);
  } else if (w->max_dims[0] != cout || w->max_dims[1] != kh || w->max_dims[2] != kw || w->max_dims[3] != gic) {
    return px_fail(ctx, "filter dims [%lld, %lld, %lld, %lld], expected [%lld, %u, %u, %u] for %u groups of %u -> %u "
                        "channels",
                   (long long)w->max_dims[0], (long long)w->max_dims[1], (long long)w->max_dims[2],
                   (long long)w->max_dims[3], (long long)cout, kh, kw, gic, groups, gic, goc);
  }
  if (b) {
    int64_t bn = 1;
    for (uint32_t k = 0; k < b->num_dims; k++) bn *= b->max_dims[k];
    if (bn != cout) return px_fail(ctx, "bias has %lld entries for %lld output channels", (long long)bn, (long long)cout);
  }
  /* A qdint8 value's dims are written in the float input's layout (NCHW):
   * its channels are checked against the node when it runs. */
  if (x->datatype != XNN_DT_QDINT8 && x->max_dims[3] != cin)
    return px_fail(ctx, "input has %lld channels, the convolution takes %lld (%u groups of %u)",
                   (long long)x->max_dims[3], (long long)cin, groups, gic);
  if (y->max_dims[3] != cout)
    return px_fail(ctx, "output has %lld channels, the convolution computes %lld (%u groups of %u)",
                   (long long)y->max_dims[3], (long long)cout, groups, goc);
  return 0;
}

static int prepare_depthwise(px_ctx *ctx, xnn_node *node, xnn_value *values, xnn_qplan *plan) {
  const xnn_value *w = &values[node->in[1]];
  plan->N = plan->cout;
  plan->K = plan->kh * plan->kw;
  int rc = xnn_qplan_static(ctx, plan, node, values, NULL);
  if (rc) return rc;
  /* [1, KH, KW, C*M] packed (and copied), so the payload's pages can go */
  px_qdwconv_desc d = {.C = plan->cin,
                       .mult = plan->cout / plan->cin,
                       .kh = plan->kh,
                       .kw = plan->kw,
                       .sh = plan->sh,
                       .sw = plan->sw,
                       .dh = plan->dh,
                       .dw = plan->dw,
                       .pt = plan->pt,
                       .pl = plan->pl,
                       .weights = w->data,
                       .bias = plan->bias,
                       .requant = plan->requant,
                       .in_zp = plan->in_zp,
                       .out_zp = plan->out_zp,
                       .qmin = plan->qmin,
                       .qmax = plan->qmax};
  if (!(plan->depthwise = px_qdwconv_pack(&d))) return px_fail(ctx, "%s", px_error_buffer(&(size_t){0}));
  plan->bias = NULL; /* folded into the packed convolution */
  return 0;
}

static int prepare_conv(px_ctx *ctx, xnn_node *node, xnn_value *values, xnn_qplan *plan) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  bool dynamic = x->datatype == XNN_DT_QDINT8;
  px_qconv_desc d = {.transposed = node->type == XNN_NODE_conv_transpose2d,
                     .dynamic = dynamic,
                     .groups = plan->groups,
                     .gic = node->p.conv.group_input_channels,
                     .goc = node->p.conv.group_output_channels,
                     .kh = plan->kh,
                     .kw = plan->kw,
                     .sh = plan->sh,
                     .sw = plan->sw,
                     .dh = plan->dh,
                     .dw = plan->dw,
                     .pt = plan->pt,
                     .pl = plan->pl,
                     .pb = plan->pb,
                     .pr = plan->pr,
                     .ah = node->p.conv.adjustment_height,
                     .aw = node->p.conv.adjustment_width,
                     .weights = w->data};
  float *scales = NULL;
  if (dynamic) {
    if (!(scales = malloc(sizeof(float) * (size_t)plan->cout))) return px_fail(ctx, "out of memory packing the weights");
    for (int64_t n = 0; n < plan->cout; n++) scales[n] = xnn_quant_scale(&w->quant, (uint32_t)n);
    d.wscale = scales;
    d.fbias = b ? b->data : NULL;
    d.lo = node->output_min;
    d.hi = node->output_max;
    if (!(d.lo <= d.hi)) {
      free(scales);
      return px_fail(ctx, "the output clamp [%g, %g] is empty", (double)d.lo, (double)d.hi);
    }
  } else {
    plan->N = plan->cout;
    plan->K = plan->kh * plan->kw * d.gic;
    int rc = xnn_qplan_static(ctx, plan, node, values, NULL);
    if (rc) return rc;
    d.bias = plan->bias;
    d.requant = plan->requant;
    d.in_zp = plan->in_zp, d.out_zp = plan->out_zp, d.qmin = plan->qmin, d.qmax = plan->qmax;
  }
  plan->conv = px_qconv_pack(&d);
  free(scales);
  if (!plan->conv) return px_fail(ctx, "%s", px_error_buffer(&(size_t){0}));
  plan->bias = NULL; /* copied into the packed convolution */
  /* The output size at the input's upper bounds. A qdint8 input's dims may
   * be written NCHW or NHWC: either layout whose channels match will do. */
  const xnn_value *y = &values[node->out[0]];
  int64_t oh = -1, ow = -1;
  bool nhwc = x->max_dims[3] == plan->cin, nchw = dynamic && x->max_dims[1] == plan->cin;
  if (!nhwc && !nchw)
    return px_fail(ctx, "the qdint8 input's dims [%lld, %lld, %lld, %lld] have no dimension of %lld channels",
                   (long long)x->max_dims[0], (long long)x->max_dims[1], (long long)x->max_dims[2],
                   (long long)x->max_dims[3], (long long)plan->cin);
  if (nhwc) px_qconv_out_size(plan->conv, x->max_dims[1], x->max_dims[2], &oh, &ow);
  bool fits = oh >= 1 && ow >= 1 && oh <= y->max_dims[1] && ow <= y->max_dims[2];
  if (!fits && nchw) {
    nhwc = false;
    px_qconv_out_size(plan->conv, x->max_dims[2], x->max_dims[3], &oh, &ow);
  }
  if (oh >= 1 && ow >= 1 && (oh > y->max_dims[1] || ow > y->max_dims[2]))
    return px_fail(ctx, "a %lldx%lld input gives a %lldx%lld output, larger than the output value's %lldx%lld",
                   (long long)x->max_dims[nhwc ? 1 : 2], (long long)x->max_dims[nhwc ? 2 : 3], (long long)oh,
                   (long long)ow, (long long)y->max_dims[1], (long long)y->max_dims[2]);
  if (oh < 0 || ow < 0)
    return px_fail(ctx, "a %ux%u kernel (stride %lldx%lld, dilation %lldx%lld, padding %lld/%lld/%lld/%lld) gives no "
                        "output for a %lldx%lld input",
                   node->p.conv.kernel_height, node->p.conv.kernel_width, (long long)plan->sh, (long long)plan->sw,
                   (long long)plan->dh, (long long)plan->dw, (long long)plan->pt, (long long)plan->pr,
                   (long long)plan->pb, (long long)plan->pl, (long long)x->max_dims[nhwc ? 1 : 2],
                   (long long)x->max_dims[nhwc ? 2 : 3]);
  return 0;
}

int xnn_prepare_qconv(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  int rc = check_geometry(ctx, node, values);
  if (rc) return rc;
  const xnn_value *w = &values[node->in[1]];
  xnn_qplan *plan = calloc(1, sizeof *plan);
  if (!plan) return px_fail(ctx, "out of memory packing the weights");
  node->packed = plan;
  node->release = xnn_qplan_release;
  plan->groups = node->p.conv.groups;
  plan->cin = (int64_t)plan->groups * node->p.conv.group_input_channels;
  plan->cout = (int64_t)plan->groups * node->p.conv.group_output_channels;
  plan->kh = node->p.conv.kernel_height, plan->kw = node->p.conv.kernel_width;
  plan->sh = node->p.conv.subsampling_height, plan->sw = node->p.conv.subsampling_width;
  plan->dh = node->p.conv.dilation_height, plan->dw = node->p.conv.dilation_width;
  plan->pt = node->p.conv.padding_top, plan->pl = node->p.conv.padding_left;
  plan->pb = node->p.conv.padding_bottom, plan->pr = node->p.conv.padding_right;
  rc = node->type == XNN_NODE_depthwise_conv2d ? prepare_depthwise(ctx, node, values, plan)
                                               : prepare_conv(ctx, node, values, plan);
  if (rc) return rc;
  px_drop_file_pages(w->data, w->constant_size);
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
  int64_t d[4] = {x->dims[0], 0, 0, p->cout};
  if (p->conv) {
    px_qconv_out_size(p->conv, x->dims[1], x->dims[2], &d[1], &d[2]);
  } else {
    d[1] = out_size(x->dims[1], p->pt, p->pb, p->kh, p->dh, p->sh);
    d[2] = out_size(x->dims[2], p->pl, p->pr, p->kw, p->dw, p->sw);
  }
  if (d[1] < 0 || d[2] < 0)
    return px_fail(ctx, "the convolution gives no output for a %lldx%lld input", (long long)x->dims[1],
                   (long long)x->dims[2]);
  return xnn_set_dims(ctx, node, &values[node->out[0]], 4, d);
}

int xnn_exec_qconv(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_qplan *p = node->packed;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  if (p->depthwise)
    return px_qdwconv_qs8(ctx, p->depthwise, x->dims[0], x->dims[1], x->dims[2], x->data, y->dims[1], y->dims[2],
                          y->data);
  int64_t N = x->dims[0], H = x->dims[1], W = x->dims[2];
  if (x->datatype != XNN_DT_QDINT8)
    return px_qconv_qs8(ctx, p->conv, N, H, W, x->data, y->dims[1], y->dims[2], y->data);
  int32_t *zp;
  float *scale;
  xnn_qd8_params(x, &zp, &scale);
  int64_t rows = xnn_qd8_rows(x);
  int per_pixel = x->quant.num_nonbatch_dims == 1; /* xnn_quant_rewrite's 1x1 convolutions */
  if (rows != (per_pixel ? N * H * W : N))
    return px_fail(ctx, "the qdint8 input has %lld quantization rows for %lld images of %lldx%lld", (long long)rows,
                   (long long)N, (long long)H, (long long)W);
  return px_qconv_qd8_f32(ctx, p->conv, N, H, W, x->data, zp, scale, per_pixel, y->dims[1], y->dims[2], y->data);
}
