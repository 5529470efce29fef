/*
 * fuse.c - load-time rewrites of a parsed XNNPACK graph (xnn_graph.h), made
 * before it gets storage. First, as XNNPACK's own subgraph fusion makes it:
 *
 *   a qint8 Clamp whose input only it reads, made by a static qint8
 *   Conv2d, DepthwiseConv2d, FullyConnected, Add, Subtract or Multiply,
 *   with the same scale and zero point in and out
 *
 * becomes that node's output bounds (the intersection of both). Exact: the
 * producer clamps before it rounds, to bounds that are whole quantized
 * steps, so clamping again after the rounding changes nothing else. The
 * dropped value keeps its slot in the value table, unused.
 *
 * Then, where XNNPACK runs the float nodes one by one (a static int8
 * MobileNetV3 has one such chain per hardswish):
 *
 *   Convert (8-bit -> fp32) -> fp32 pointwise nodes -> Convert (fp32 -> 8-bit)
 *
 * becomes a lookup8 node: a 256-byte table (kernels/quantized/x8_lut.h),
 * made by running the chain's own node functions on every input byte. An
 * 8-bit value has 256 possible bytes and the chain treats each element
 * alone, so the table gives the bytes the chain gives, with one read and
 * one write of a byte an element in place of three float passes.
 * Last, in float32 graphs:
 *
 *   Sigmoid (x -> s), then Multiply (x, s) or (s, x), s read by nothing else
 *
 * becomes one silu node in the Multiply's place (the exporter's SiLU,
 * EfficientNet's activation): the two nodes' loops run a piece at a time,
 * so s stays in cache, and the bits are the two nodes' (nodes_basic.c).
 * And a silu node or an unbounded Hardswish whose input a float32 Conv2d,
 * DepthwiseConv2d or FullyConnected makes for it alone goes into that node
 * (xnn_node.post): the node runs the same loops on each block of its output
 * as it finishes it, so the input is never written out and read back.
 * Last, an inverted-residual chain of those (a 1x1 expansion, a depthwise
 * convolution, a 1x1 projection and the residual Add) becomes one block
 * node that runs a band of rows through the whole chain at a time, so its
 * wide intermediate values never leave the cache (xnn_fuse_blocks).
 * PYEXEC_FUSE=0 in the environment leaves the chains and pairs as they are.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/nodes.h"

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

/* ---- pointwise chains into byte tables ----------------------------------------------------------- */

static bool is_x8_tensor(const xnn_value *v) {
  return (v->datatype == XNN_DT_QINT8 || v->datatype == XNN_DT_QUINT8) && v->quant.kind == XNN_Q_PER_TENSOR &&
         !v->half;
}

/* A float value inside a chain: made by one node, read by one, nothing outside the graph sees it. */
static bool inner_f32(const xnn_value *v, uint32_t uses) {
  return v->datatype == XNN_DT_FP32 && !v->half && !v->flags && !v->constant && uses == 1;
}

static bool one_in_one_out(const xnn_node *nd) { return nd->nin == 1 && nd->nout == 1; }

/* The chain's bytes: its nodes run on a [256] tensor holding every input
 * byte, through two float buffers, each value's own state put back after. */
static int tabulate(px_ctx *ctx, xnn_graph *g, const uint32_t *chain, uint32_t len, uint8_t table[256]) {
  enum { MAXV = 64 };
  _Alignas(64) float buf[2][256];
  _Alignas(64) uint8_t bytes[256];
  xnn_value saved[MAXV + 1];
  uint32_t ids[MAXV + 1];
  for (int b = 0; b < 256; b++) bytes[b] = (uint8_t)b;
  ids[0] = g->nodes[chain[0]].in[0];
  for (uint32_t k = 0; k < len; k++) ids[k + 1] = g->nodes[chain[k]].out[0];
  for (uint32_t k = 0; k <= len; k++) {
    xnn_value *v = &g->values[ids[k]];
    saved[k] = *v;
    v->num_dims = 1;
    v->dims[0] = 256;
    v->data = k == 0 ? (void *)bytes : k == len ? (void *)table : (void *)buf[k & 1];
    v->capacity = sizeof buf[0];
  }
  int rc = 0;
  for (uint32_t k = 0; k < len && !rc; k++) {
    const xnn_node *nd = &g->nodes[chain[k]];
    const xnn_node_ops *ops = xnn_node_ops_for_node(nd, g->values);
    ctx->op = xnn_node_type_name(nd->type);
    ctx->scratch_cur = ctx->scratch;
    ctx->scratch_used = 0;
    rc = ops ? ops->exec(ctx, nd, g->values) : -1;
  }
  for (uint32_t k = 0; k <= len; k++) g->values[ids[k]] = saved[k];
  return rc;
}

/* What the chain rewrites below read off the graph: each value's readers
 * (how many nodes read it, and the last of them) and its writer (the first
 * node listing it as an output), and which nodes a rewrite took away. */
typedef struct fuse_scan {
  uint32_t *uses, *reader, *producer;
  bool *gone;
} fuse_scan;

static void scan_free(fuse_scan *f) {
  free(f->uses);
  free(f->reader);
  free(f->producer);
  free(f->gone);
}

static int scan_readers(const xnn_graph *g, fuse_scan *f) {
  f->uses = calloc(g->nvalues + 1, sizeof *f->uses);
  f->reader = malloc(sizeof *f->reader * (g->nvalues + 1));
  f->producer = malloc(sizeof *f->producer * (g->nvalues + 1));
  f->gone = calloc(g->nnodes + 1, sizeof *f->gone);
  if (!f->uses || !f->reader || !f->producer || !f->gone) {
    scan_free(f);
    return -1;
  }
  for (uint32_t v = 0; v < g->nvalues; v++) f->reader[v] = f->producer[v] = XNN_INVALID_ID;
  for (uint32_t i = 0; i < g->nnodes; i++)
    for (uint32_t k = 0; k < g->nodes[i].nout; k++)
      if (g->nodes[i].out[k] < g->nvalues && f->producer[g->nodes[i].out[k]] == XNN_INVALID_ID)
        f->producer[g->nodes[i].out[k]] = i;
  for (uint32_t i = 0; i < g->nnodes; i++)
    for (uint32_t k = 0; k < g->nodes[i].nin; k++)
      if (g->nodes[i].in[k] < g->nvalues) {
        f->uses[g->nodes[i].in[k]]++;
        f->reader[g->nodes[i].in[k]] = i;
      }
  return 0;
}

/* The nodes left, in order; the scan freed. */
static void drop_gone(xnn_graph *g, fuse_scan *f) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < g->nnodes; i++)
    if (!f->gone[i]) g->nodes[kept++] = g->nodes[i];
  g->nnodes = kept;
  scan_free(f);
}

/* PYEXEC_FUSE=0: the rewrites below are off, as the portable fusions are (A/B runs). */
static bool fusion_off(void) {
  const char *env = getenv("PYEXEC_FUSE");
  return env && !strcmp(env, "0");
}

int xnn_fuse_lookups(px_ctx *ctx, xnn_graph *g) {
  enum { MAXLEN = 64 };
  if (fusion_off()) return 0;
  fuse_scan f;
  if (scan_readers(g, &f)) return -1;
  const uint32_t *uses = f.uses, *reader = f.reader;
  bool *gone = f.gone;
  int rc = 0;
  for (uint32_t i = 0; i < g->nnodes && !rc; i++) {
    const xnn_node *head = &g->nodes[i];
    if (gone[i] || head->type != XNN_NODE_convert || !one_in_one_out(head) ||
        !is_x8_tensor(&g->values[head->in[0]]))
      continue;
    /* follow single-use float values through pointwise nodes to a Convert back to 8 bits */
    uint32_t chain[MAXLEN], len = 1;
    chain[0] = i;
    bool whole = false;
    while (len < MAXLEN) {
      uint32_t v = g->nodes[chain[len - 1]].out[0];
      if (!inner_f32(&g->values[v], uses[v]) || reader[v] == XNN_INVALID_ID) break;
      uint32_t next = reader[v];
      const xnn_node *nd = &g->nodes[next];
      if (!one_in_one_out(nd) || nd->in[0] != v) break;
      chain[len++] = next;
      if (nd->type == XNN_NODE_convert) {
        whole = is_x8_tensor(&g->values[nd->out[0]]);
        break;
      }
      const xnn_node_ops *ops = xnn_node_ops_for_node(nd, g->values);
      if (!ops || ops->exec != xnn_exec_unary || nd->type == XNN_NODE_copy ||
          g->values[nd->out[0]].datatype != XNN_DT_FP32)
        break;
    }
    if (!whole) continue;
    xnn_lookup8 *lk = calloc(1, sizeof *lk);
    if (!lk) {
      rc = -1;
      break;
    }
    if (tabulate(ctx, g, chain, len, lk->table)) { /* the chain then runs node by node, and fails there */
      free(lk);
      continue;
    }
    size_t at = (size_t)snprintf(lk->name, sizeof lk->name, "Lookup8 [%s", len == 2 ? "Convert" : "");
    for (uint32_t k = 1; k + 1 < len && at < sizeof lk->name; k++)
      at += (size_t)snprintf(lk->name + at, sizeof lk->name - at, "%s%s", k > 1 ? ", " : "",
                             xnn_node_type_name(g->nodes[chain[k]].type));
    if (at < sizeof lk->name) snprintf(lk->name + at, sizeof lk->name - at, "]");
    /* the fused node takes the last Convert's place: its input is made before the chain's head */
    xnn_node *tail = &g->nodes[chain[len - 1]];
    uint32_t x = head->in[0];
    tail->type = XNN_NODE_lookup8;
    tail->in[0] = x;
    tail->flags = 0;
    tail->output_min = -INFINITY;
    tail->output_max = INFINITY;
    tail->packed = lk;
    tail->packed_size = sizeof *lk;
    for (uint32_t k = 0; k + 1 < len; k++) gone[chain[k]] = true;
  }
  drop_gone(g, &f);
  return rc;
}

/* ---- SiLU: a Sigmoid times its own input ---------------------------------------------------------- */

static bool plain_f32(const xnn_value *v) { return v->datatype == XNN_DT_FP32 && !v->half; }

int xnn_fuse_silu(xnn_graph *g) {
  if (fusion_off()) return 0;
  fuse_scan f;
  if (scan_readers(g, &f)) return -1;
  const uint32_t *uses = f.uses, *reader = f.reader;
  bool *gone = f.gone;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *sg = &g->nodes[i];
    if (sg->type != XNN_NODE_sigmoid || !one_in_one_out(sg) || sg->in[0] >= g->nvalues || sg->out[0] >= g->nvalues)
      continue;
    const uint32_t x = sg->in[0], s = sg->out[0];
    if (!plain_f32(&g->values[x]) || !inner_f32(&g->values[s], uses[s]) || reader[s] == XNN_INVALID_ID ||
        reader[s] <= i)
      continue;
    xnn_node *mul = &g->nodes[reader[s]];
    if (mul->type != XNN_NODE_multiply || mul->nin != 2 || mul->nout != 1 || mul->out[0] >= g->nvalues ||
        !plain_f32(&g->values[mul->out[0]]) || isnan(mul->output_min) || isnan(mul->output_max) ||
        !((mul->in[0] == x && mul->in[1] == s) || (mul->in[0] == s && mul->in[1] == x)))
      continue;
    mul->type = XNN_NODE_silu;
    mul->nin = 1;
    mul->in[0] = x;
    mul->in[1] = XNN_INVALID_ID;
    mul->flags = 0;
    gone[i] = true;
  }
  drop_gone(g, &f);
  return 0;
}

/* ---- an activation into its producer -------------------------------------------------------------- */

/* Whether nd reads v: a malformed graph's cycle, where a rewrite would make
 * a node write what it reads. */
static bool reads_value(const xnn_node *nd, uint32_t v) {
  for (uint32_t k = 0; k < nd->nin; k++)
    if (nd->in[k] == v) return true;
  return false;
}

/* Whether nd runs the float32 kernels that honour xnn_node.post. */
static bool takes_post(const xnn_node *nd, const xnn_value *values) {
  if (nd->nout != 1 || nd->post != XNN_POST_NONE || nd->nin < 1 || nd->in[0] == XNN_INVALID_ID ||
      !plain_f32(&values[nd->in[0]]))
    return false;
  const xnn_node_ops *ops = xnn_node_ops_for_node(nd, values);
  return ops && (ops->exec == xnn_exec_conv2d || ops->exec == xnn_exec_depthwise_conv2d ||
                 ops->exec == xnn_exec_fully_connected);
}

int xnn_fuse_post(xnn_graph *g) {
  if (fusion_off()) return 0;
  fuse_scan f;
  if (scan_readers(g, &f)) return -1;
  const uint32_t *producer = f.producer;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *s = &g->nodes[i];
    int post = s->type == XNN_NODE_silu ? XNN_POST_SILU : s->type == XNN_NODE_hardswish ? XNN_POST_HARDSWISH : 0;
    if (!post || !one_in_one_out(s) || s->in[0] >= g->nvalues || s->out[0] >= g->nvalues ||
        !xnn_unbounded(s->output_min, s->output_max) || !plain_f32(&g->values[s->in[0]]))
      continue;
    const uint32_t x = s->in[0], y = s->out[0], pi = producer[x];
    if (pi == XNN_INVALID_ID || pi >= i || !inner_f32(&g->values[x], f.uses[x]) || !plain_f32(&g->values[y]))
      continue;
    xnn_node *p = &g->nodes[pi];
    if (p->out[0] != x || producer[y] != i || reads_value(p, y) || !takes_post(p, g->values)) continue;
    p->post = (uint8_t)post;
    p->out[0] = y;
    f.gone[i] = true;
  }
  drop_gone(g, &f);
  return 0;
}

/* ---- inverted-residual chains into block nodes ---------------------------------------------------- */

/* Below this many bytes the chain's widest intermediate value stays in the
 * cache between nodes anyway (a 7 x 7 map of 960 channels is 188 KB), and
 * the chain's bands would only cut its products into shorter ones; a
 * 14 x 14 map of 384 channels (301 KB) is fused: alone on one core it
 * gains nothing, but on several each thread keeps its rows (nodes_block.c). */
#define BLOCK_MIN_BYTES ((size_t)1 << 18)

/* A float32 Conv2d with a 1x1 kernel, stride 1, no padding and one group,
 * reading a float32 value: a product over each pixel's channels. */
static bool pointwise_conv(const xnn_node *nd, const xnn_value *values) {
  if (nd->type != XNN_NODE_conv2d || nd->nin < 2 || nd->nout != 1 || nd->in[0] == XNN_INVALID_ID ||
      !plain_f32(&values[nd->in[0]]) || !plain_f32(&values[nd->out[0]]))
    return false;
  const xnn_node_ops *ops = xnn_node_ops_for_node(nd, values);
  return ops && ops->exec == xnn_exec_conv2d && nd->p.conv.kernel_height == 1 && nd->p.conv.kernel_width == 1 &&
         nd->p.conv.subsampling_height == 1 && nd->p.conv.subsampling_width == 1 && nd->p.conv.groups == 1 &&
         !nd->p.conv.padding_top && !nd->p.conv.padding_right && !nd->p.conv.padding_bottom &&
         !nd->p.conv.padding_left && !isnan(nd->output_min) && !isnan(nd->output_max);
}

static bool same_dims(const xnn_value *a, const xnn_value *b) {
  if (a->num_dims != b->num_dims) return false;
  for (uint32_t k = 0; k < a->num_dims; k++)
    if (a->max_dims[k] != b->max_dims[k]) return false;
  return true;
}

/* "InvertedResidual [Conv2d, DepthwiseConv2d, Hardswish, Conv2d, Add]": the
 * nodes the block stands for, a fused activation named after its node. */
static void block_name(xnn_block *b) {
  size_t at = (size_t)snprintf(b->name, sizeof b->name, "InvertedResidual [");
  const xnn_node *parts[] = {&b->expand, &b->dw, &b->project, &b->add};
  bool first = true;
  for (size_t k = 0; k < sizeof parts / sizeof parts[0] && at < sizeof b->name; k++) {
    if (!parts[k]->type) continue;
    at += (size_t)snprintf(b->name + at, sizeof b->name - at, "%s%s", first ? "" : ", ",
                           xnn_node_type_name(parts[k]->type));
    if (parts[k]->post && at < sizeof b->name)
      at += (size_t)snprintf(b->name + at, sizeof b->name - at, ", %s", xnn_post_name(parts[k]->post));
    first = false;
  }
  if (at < sizeof b->name) snprintf(b->name + at, sizeof b->name - at, "]");
}

int xnn_fuse_blocks(xnn_graph *g) {
  if (fusion_off()) return 0;
  fuse_scan f;
  if (scan_readers(g, &f)) return -1;
  const uint32_t *producer = f.producer;
  const xnn_value *values = g->values;
  int rc = 0;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *dw = &g->nodes[i];
    if (f.gone[i] || dw->type != XNN_NODE_depthwise_conv2d || dw->p.conv.groups < 2 || dw->nin < 2 ||
        dw->nout != 1 ||
        dw->in[0] >= g->nvalues || dw->out[0] >= g->nvalues || !plain_f32(&values[dw->in[0]]) ||
        !plain_f32(&values[dw->out[0]]) || values[dw->in[0]].num_dims != 4 || isnan(dw->output_min) ||
        isnan(dw->output_max))
      continue;
    const xnn_node_ops *ops = xnn_node_ops_for_node(dw, values);
    if (!ops || ops->exec != xnn_exec_depthwise_conv2d) continue;
    /* the expansion: the depthwise input's maker, whose output nothing else reads */
    uint32_t e = dw->in[0], ei = producer[e], d = dw->out[0];
    if (ei == XNN_INVALID_ID || ei >= i || f.gone[ei] || !inner_f32(&values[e], f.uses[e]) ||
        !pointwise_conv(&g->nodes[ei], values) || g->nodes[ei].out[0] != e)
      ei = XNN_INVALID_ID;
    /* the projection: the depthwise output's one reader */
    uint32_t pi = f.reader[d], p = XNN_INVALID_ID;
    if (pi == XNN_INVALID_ID || pi <= i || !inner_f32(&values[d], f.uses[d]) ||
        !pointwise_conv(&g->nodes[pi], values) || g->nodes[pi].in[0] != d)
      pi = XNN_INVALID_ID;
    else
      p = g->nodes[pi].out[0];
    /* the residual Add: the projection's one reader, its other operand of the same dims */
    uint32_t ai = pi == XNN_INVALID_ID ? XNN_INVALID_ID : f.reader[p], r = XNN_INVALID_ID;
    if (ai != XNN_INVALID_ID) {
      const xnn_node *a = &g->nodes[ai];
      if (ai <= pi || !inner_f32(&values[p], f.uses[p]) || a->type != XNN_NODE_add || a->nin != 2 ||
          a->nout != 1 || a->out[0] >= g->nvalues || isnan(a->output_min) || isnan(a->output_max) ||
          (a->in[0] == p) == (a->in[1] == p))
        ai = XNN_INVALID_ID;
      else
        r = a->in[0] == p ? a->in[1] : a->in[0];
      if (ai != XNN_INVALID_ID &&
          (r >= g->nvalues || !plain_f32(&values[r]) || !plain_f32(&values[a->out[0]]) ||
           !same_dims(&values[r], &values[p]) || !same_dims(&values[a->out[0]], &values[p]) ||
           !(ops = xnn_node_ops_for_node(a, values)) || ops->exec != xnn_exec_binary))
        ai = XNN_INVALID_ID;
    }
    /* Without a projection the depthwise output is written whole anyway
     * (EfficientNet's squeeze-excitation reads it twice): banding the
     * expansion alone saved under 2% there, and cost at two threads. */
    if (pi == XNN_INVALID_ID) continue;
    /* worth it only where an intermediate value would leave the cache */
    size_t widest = values[d].capacity;
    if (ei != XNN_INVALID_ID && values[e].capacity > widest) widest = values[e].capacity;
    if (widest < BLOCK_MIN_BYTES) continue;
    const uint32_t x = ei != XNN_INVALID_ID ? g->nodes[ei].in[0] : dw->in[0];
    const uint32_t y = ai != XNN_INVALID_ID ? g->nodes[ai].out[0] : p;
    if (y == x || y == r) continue; /* a malformed graph's cycle: the chain would write what it reads */
    xnn_block *b = calloc(1, sizeof *b);
    if (!b) {
      rc = -1;
      break;
    }
    b->dw = *dw;
    b->e = b->p = XNN_INVALID_ID;
    b->d = d;
    if (ei != XNN_INVALID_ID) b->expand = g->nodes[ei], b->e = e, f.gone[ei] = true;
    b->project = g->nodes[pi];
    b->p = p;
    f.gone[i] = true;
    uint32_t last = pi;
    if (ai != XNN_INVALID_ID) {
      b->add = g->nodes[ai];
      b->add_first = g->nodes[ai].in[0] == p;
      f.gone[last] = true;
      last = ai;
    }
    block_name(b);
    xnn_node *nd = &g->nodes[last];
    memset(nd, 0, sizeof *nd);
    nd->type = XNN_NODE_block;
    nd->in[0] = x;
    nd->in[1] = r;
    nd->nin = r == XNN_INVALID_ID ? 1 : 2;
    nd->out[0] = y;
    nd->nout = 1;
    nd->output_min = -INFINITY;
    nd->output_max = INFINITY;
    nd->packed = b;
    nd->packed_size = sizeof *b;
    nd->release = xnn_release_block;
  }
  drop_gone(g, &f);
  return rc;
}

/* ---- an elementwise node into the per-row quantization after it ------------------------------ */

int xnn_fuse_quantize_rows(xnn_graph *g) {
  if (fusion_off()) return 0;
  fuse_scan f;
  if (scan_readers(g, &f)) return -1;
  const uint32_t *producer = f.producer;
  int rc = 0;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    xnn_node *c = &g->nodes[i];
    if (c->type != XNN_NODE_convert || !one_in_one_out(c) || c->in[0] >= g->nvalues || c->out[0] >= g->nvalues ||
        g->values[c->out[0]].datatype != XNN_DT_QDINT8)
      continue;
    const uint32_t x = c->in[0], y = c->out[0], pi = producer[x];
    if (pi == XNN_INVALID_ID || pi >= i || f.gone[pi] || !inner_f32(&g->values[x], f.uses[x]) ||
        !xnn_elementwise_range_ok(&g->nodes[pi], g->values))
      continue;
    const xnn_node *p = &g->nodes[pi];
    if (reads_value(p, y)) continue;
    xnn_quantize_rows *q = calloc(1, sizeof *q);
    if (!q) {
      rc = -1;
      break;
    }
    q->first = *p;
    q->mid = x;
    snprintf(q->name, sizeof q->name, "QuantizeRows [%s, Convert]", xnn_node_type_name(p->type));
    c->type = XNN_NODE_quantize_rows;
    c->nin = p->nin;
    for (uint32_t k = 0; k < p->nin; k++) c->in[k] = p->in[k];
    c->flags = 0;
    c->output_min = -INFINITY;
    c->output_max = INFINITY;
    c->packed = q;
    c->packed_size = sizeof *q;
    f.gone[pi] = true;
  }
  drop_gone(g, &f);
  return rc;
}
