/*
 * fuse.c - load-time rewrites of a parsed XNNPACK graph (xnn_graph.h), made
 * before it gets storage, as XNNPACK's own subgraph fusion makes them:
 *
 *   a qint8 Clamp whose input only it reads, made by a static qint8
 *   Conv2d, DepthwiseConv2d, FullyConnected, Add, Subtract or Multiply,
 *   with the same scale and zero point in and out
 *
 * becomes that node's output bounds (the intersection of both). Exact: the
 * producer clamps before it rounds, to bounds that are whole quantized
 * steps, so clamping again after the rounding changes nothing else. The
 * dropped value keeps its slot in the value table, unused.
 */
#include <math.h>
#include <stdlib.h>

#include "backends/xnnpack/xnn_graph.h"

static bool takes_clamp(const xnn_node *p, const xnn_value *values) {
  uint32_t activations; /* the inputs that must be static qint8: not a filter or bias */
  switch (p->type) {
    case XNN_NODE_conv2d: case XNN_NODE_depthwise_conv2d: case XNN_NODE_fully_connected: activations = 1; break;
    case XNN_NODE_add: case XNN_NODE_subtract: case XNN_NODE_multiply: activations = 2; break;
    default: return false;
  }
  if (p->nout != 1 || p->nin < activations || values[p->out[0]].datatype != XNN_DT_QINT8) return false;
  for (uint32_t k = 0; k < activations; k++)
    if (p->in[k] == XNN_INVALID_ID || values[p->in[k]].datatype != XNN_DT_QINT8) return false;
  return true;
}

static bool same_qint8(const xnn_value *a, const xnn_value *b) {
  return a->datatype == XNN_DT_QINT8 && b->datatype == XNN_DT_QINT8 && a->quant.scale == b->quant.scale &&
         a->quant.zero_point == b->quant.zero_point;
}

int xnn_fuse_clamps(xnn_graph *g) {
  uint32_t *uses = calloc(g->nvalues + 1, sizeof *uses);
  uint32_t *producer = malloc(sizeof *producer * (g->nvalues + 1));
  uint32_t *moved = malloc(sizeof *moved * (g->nnodes + 1)); /* node i's index once the fused clamps are gone */
  if (!uses || !producer || !moved) {
    free(uses);
    free(producer);
    free(moved);
    return -1;
  }
  for (uint32_t v = 0; v < g->nvalues; v++) producer[v] = XNN_INVALID_ID;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *nd = &g->nodes[i];
    for (uint32_t k = 0; k < nd->nin; k++)
      if (nd->in[k] < g->nvalues) uses[nd->in[k]]++;
    for (uint32_t k = 0; k < nd->nout; k++)
      if (nd->out[k] < g->nvalues && producer[nd->out[k]] == XNN_INVALID_ID) producer[nd->out[k]] = i;
  }
  uint32_t kept = 0;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    xnn_node *c = &g->nodes[i];
    bool fused = false;
    if (c->type == XNN_NODE_clamp && c->nin == 1 && c->nout == 1 && c->in[0] < g->nvalues &&
        c->out[0] < g->nvalues && !isnan(c->output_min) && !isnan(c->output_max) &&
        c->output_min <= c->output_max) {
      uint32_t x = c->in[0], y = c->out[0], pi = producer[x];
      const xnn_value *xv = &g->values[x];
      if (pi != XNN_INVALID_ID && pi < i && uses[x] == 1 && !xv->flags && !xv->constant &&
          producer[y] == i && same_qint8(xv, &g->values[y]) && takes_clamp(&g->nodes[pi], g->values)) {
        xnn_node *p = &g->nodes[moved[pi]]; /* pi < i: already at its final place */
        if (p->out[0] == x && !isnan(p->output_min) && !isnan(p->output_max)) {
          p->out[0] = y;
          p->output_min = fmaxf(p->output_min, c->output_min);
          p->output_max = fminf(p->output_max, c->output_max);
          fused = true;
        }
      }
    }
    moved[i] = kept;
    if (!fused) g->nodes[kept++] = *c;
  }
  g->nnodes = kept;
  free(uses);
  free(producer);
  free(moved);
  return 0;
}
