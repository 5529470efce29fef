/*
 * qplan.c - the packed weights of a quantized FullyConnected or convolution
 * (xnn_qplan, qnodes.h): their release, and the static qs8 packing with its
 * per-channel requantization, which nodes_quant.c's products and
 * nodes_qconv.c's convolutions both use.
 */
#include <stdlib.h>

#include "backends/xnnpack/qnodes.h"
#include "core/error.h"

void xnn_qplan_release(void *p) {
  xnn_qplan *plan = p;
  if (!plan) return;
  px_qweights_free(plan->w);
  px_qconv_free(plan->conv);
  free(plan->requant);
  px_qdwconv_free(plan->depthwise);
  free(plan);
}

int xnn_qplan_static(px_ctx *ctx, xnn_qplan *plan, const xnn_node *node, const xnn_value *values,
                     const int8_t *rows) {
  const xnn_value *x = &values[node->in[0]], *w = &values[node->in[1]], *y = &values[node->out[0]];
  int64_t N = plan->N;
  if (w->datatype == XNN_DT_QCINT8 && (int64_t)w->quant.num_scales != N)
    return px_fail(ctx, "the filter has %u scales for %lld output channels", w->quant.num_scales, (long long)N);
  if (node->in[2] != XNN_INVALID_ID && values[node->in[2]].max_dims[0] != N)
    return px_fail(ctx, "bias has %lld entries for %lld output channels", (long long)values[node->in[2]].max_dims[0],
                   (long long)N);
  plan->requant = malloc(sizeof(float) * (size_t)(N ? N : 1));
  float *ones = malloc(sizeof(float) * (size_t)(N ? N : 1));
  if (!plan->requant || !ones) {
    free(ones);
    return px_fail(ctx, "out of memory packing the weights");
  }
  for (int64_t n = 0; n < N; n++) {
    float ws = w->datatype == XNN_DT_QCINT8 ? xnn_quant_scale(&w->quant, (uint32_t)n) : w->quant.scale;
    float r = x->quant.scale * ws / y->quant.scale;
    if (!(r > 0.0f && r < 256.0f)) {
      free(ones);
      return px_fail(ctx, "requantization scale %g of channel %lld (input scale x filter scale / output scale) "
                          "is outside (0, 256)",
                     r, (long long)n);
    }
    plan->requant[n] = r;
    ones[n] = 1.0f;
  }
  if (rows) { /* DepthwiseConv2d keeps its own layout (rows NULL) */
    px_qweights_desc d = {.bits = 8, .N = N, .K = plan->K, .data = rows, .row_bytes = plan->K, .scales = ones};
    plan->w = px_qweights_pack(&d);
    if (!plan->w) {
      free(ones);
      return px_fail(ctx, "%s", px_error_buffer(&(size_t){0}));
    }
  }
  free(ones);
  if (node->in[2] != XNN_INVALID_ID) plan->bias = values[node->in[2]].data;
  plan->in_zp = x->quant.zero_point;
  plan->out_zp = y->quant.zero_point;
  plan->qmin = xnn_q8_bound(node->output_min, y->quant.scale, y->quant.zero_point);
  plan->qmax = xnn_q8_bound(node->output_max, y->quant.scale, y->quant.zero_point);
  if (plan->qmin > plan->qmax) return px_fail(ctx, "the output clamp is empty in int8");
  return 0;
}
