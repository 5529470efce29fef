/*
 * backend.c - XnnpackBackend on pyexec's own kernels: init parses and
 * checks the payload (payload.c), gives the intermediate values storage at
 * their upper-bound sizes once, sharing bytes between values whose lives do
 * not meet (storage.c), and runs the nodes' prepare hooks; check_call,
 * per DelegateCall at load, checks the arguments the external values take;
 * execute binds the external values to the call's arguments by external_id
 * (the other arguments, ints, SymInts and the like, are ignored), propagates
 * shapes through every node, resizes the outputs, runs the nodes in order
 * and widens int32 indices into int64 outputs. A StaticReshape at the
 * graph's edge (xnn_edge) moves nothing: its stored side lives in the
 * external tensor's memory for the call. fp16 / bf16 values are
 * float32 storage (xnn_graph.h): their inputs are widened into it at bind,
 * a node's such outputs rounded in place after it runs where XNNPACK rounds
 * them (plan_rounding), and the outputs narrowed into their tensors at the
 * end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/xnnpack/nodes.h"
#include "backends/xnnpack/payload.h"
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/events.h"
#include "core/limits.h"
#include "kernels/convert/convert16.h"
#include "kernels/gemm/f16n.h"

/* A StaticReshape at the graph's edge, from a stored value to an external
 * output or from an external input to a stored value, moves bytes that could
 * stay where they are: each call, its stored value is placed in the external
 * tensor's memory (the node then moves nothing), unless that memory overlaps
 * an external tensor of the other direction (redirect_edges). */
typedef struct xnn_edge {
  uint32_t stored, external; /* values */
  void *home;                /* the stored value's own bytes in the arena */
} xnn_edge;

typedef struct xnn_delegate {
  xnn_graph g;
  const xnn_node_ops **ops; /* per node */
  bool *rounds;             /* per node: it writes an fp16 / bf16 value that needs rounding */
  void *arena;              /* intermediates */
  size_t arena_len;
  bool arena_mapped;
  xnn_edge *edges;
  uint32_t nedges;
} xnn_delegate;

static void xnn_destroy(void *handle) {
  xnn_delegate *d = handle;
  if (!d) return;
  xnn_graph_free(&d->g);
  free(d->ops);
  free(d->rounds);
  free(d->edges);
  if (d->arena) px_big_free(d->arena, d->arena_len, d->arena_mapped);
  free(d);
}

/* Stored values share one zeroed allocation as storage.c plans it, with 64
 * bytes to spare at its end. */
static pyexec_status give_storage(xnn_delegate *d) {
  xnn_graph *g = &d->g;
  uint64_t *off = malloc(sizeof *off * ((size_t)g->nvalues + 1)), total = 0;
  if (!off) return px_no_memory("XNNPACK intermediate values");
  pyexec_status st = xnn_plan_storage(g, off, &total);
  if (!st && total > px_max_declared_bytes)
    st = px_invalid_program("XNNPACK payload: intermediate values need more than %llu bytes",
                            (unsigned long long)px_max_declared_bytes);
  if (!st) {
    d->arena_len = (size_t)total + 64;
    d->arena = px_big_alloc(d->arena_len, &d->arena_mapped);
    if (!d->arena) st = px_no_memory("XNNPACK intermediate values");
  }
  for (uint32_t i = 0; i < g->nvalues && !st; i++)
    if (off[i] != UINT64_MAX) g->values[i].data = (uint8_t *)d->arena + off[i];
  free(off);
  return st;
}

/* Appends to the Unsupported message xnn_parse left (which names the first
 * thing it refused) every node type pyexec does not run, as
 * pyexec_program_delegate_describe lists them. */
static void name_unsupported(const uint8_t *payload, size_t size) {
  size_t cap, needed, nunsup;
  char first[512], types[2048], list[1024];
  snprintf(first, sizeof first, "%s", px_error_buffer(&cap));
  if (xnn_describe(payload, size, types, sizeof types, &needed, &nunsup) || nunsup == 0) {
    px_unsupported("%s", first); /* describing failed: the first message stays */
    return;
  }
  /* "Add\n!Convert\n!FullyConnected\n" -> "Convert, FullyConnected" */
  size_t n = 0;
  list[0] = 0;
  for (const char *line = types; *line && n < sizeof list;) {
    const char *end = strchr(line, '\n');
    if (!end) break; /* a line cut short by the buffer */
    if (line[0] == '!')
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%.*s", n ? ", " : "", (int)(end - line - 1), line + 1);
    line = end + 1;
  }
  px_unsupported("%s; node types pyexec does not run in this payload: %s", first, list);
}

/* Whether a node's fp16 / bf16 outputs need rounding after it runs: not
 * when it only moves or selects elements of inputs of the output's type. */
static bool moves_or_rounds(const xnn_node *nd, const xnn_value *values) {
  int half = 0;
  for (uint32_t k = 0; k < nd->nout; k++)
    if (values[nd->out[k]].half) half = values[nd->out[k]].half;
  if (!half) return false;
  switch (nd->type) {
    case XNN_NODE_static_transpose: case XNN_NODE_static_reshape: case XNN_NODE_static_slice:
    case XNN_NODE_concatenate2: case XNN_NODE_concatenate3: case XNN_NODE_concatenate4:
    case XNN_NODE_concatenate5: case XNN_NODE_copy: case XNN_NODE_abs: case XNN_NODE_negate:
      break;
    default: return true;
  }
  for (uint32_t k = 0; k < nd->nin; k++)
    if (values[nd->in[k]].half != half) return true;
  return false;
}

/* Which nodes round their fp16 / bf16 outputs (d->rounds), as XNNPACK does
 * on x86, which has no fp16 or bf16 arithmetic and runs the nodes it has no
 * kernels of that type for in float32, their outputs kept float32 inside the
 * graph:
 *   - fp16: every node rounds its output, but for a node with a quantized
 *     input (a qdint8 FullyConnected, a dequantizing Convert) and every node
 *     that reads such a float32 value, transitively;
 *   - bf16: FullyConnected and BatchMatrixMultiply (the bf16 GEMM) round
 *     their output; every other node keeps float32 (a qdint8
 *     FullyConnected too, as for fp16);
 *   - Convert to fp16 / bf16 rounds.
 * An external output is rounded whatever its node (narrow_outputs), while
 * the nodes reading it inside the graph see its float32 value. */
static pyexec_status plan_rounding(xnn_delegate *d) {
  const xnn_graph *g = &d->g;
  bool *wide = calloc(g->nvalues + 1, sizeof *wide); /* kept float32, unrounded */
  if (!wide) return px_no_memory("XNNPACK delegate");
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *nd = &g->nodes[i];
    int half = 0;
    for (uint32_t k = 0; k < nd->nout; k++)
      if (g->values[nd->out[k]].half) half = g->values[nd->out[k]].half;
    bool wide_in = false, quantized_in = false;
    for (uint32_t k = 0; k < nd->nin; k++) {
      if (nd->in[k] == XNN_INVALID_ID) continue;
      const xnn_value *v = &g->values[nd->in[k]];
      wide_in = wide_in || wide[nd->in[k]];
      quantized_in = quantized_in || (xnn_value_quantized(v) && !v->constant);
    }
    bool keeps_wide;
    if (!half || nd->type == XNN_NODE_convert)
      keeps_wide = false;
    else if (quantized_in)
      keeps_wide = true;
    else if (half == XNN_DT_BF16)
      keeps_wide = nd->type != XNN_NODE_fully_connected && nd->type != XNN_NODE_batch_matrix_multiply;
    else
      keeps_wide = wide_in;
    for (uint32_t k = 0; k < nd->nout; k++) wide[nd->out[k]] = keeps_wide && g->values[nd->out[k]].half;
    d->rounds[i] = half && !keeps_wide && moves_or_rounds(nd, g->values);
    /* On a CPU with AVX512-FP16, XNNPACK's float16 products and convolutions
     * sum in float16: such a node runs so too (nodes_f16n.c), if its prepare
     * hook keeps the mark */
    d->g.nodes[i].f16n = half == XNN_DT_FP16 && !keeps_wide && px_f16n_available() &&
                         (nd->type == XNN_NODE_fully_connected || nd->type == XNN_NODE_batch_matrix_multiply ||
                          nd->type == XNN_NODE_conv2d || nd->type == XNN_NODE_depthwise_conv2d);
  }
  free(wide);
  return PYEXEC_OK;
}

/* The edge reshapes (xnn_edge): a float32 StaticReshape whose input is a
 * stored value written by one node and read by this one alone, and whose
 * output is a plain external output; or whose input is a plain external
 * input and whose output is a stored value no other node writes. */
static pyexec_status plan_edges(xnn_delegate *d) {
  const xnn_graph *g = &d->g;
  const uint32_t nv = g->nvalues;
  uint32_t *writes = calloc((size_t)nv + 1, sizeof *writes), *reads = calloc((size_t)nv + 1, sizeof *reads);
  if (!writes || !reads || !(d->edges = calloc(g->nnodes + 1, sizeof *d->edges))) {
    free(writes), free(reads);
    return px_no_memory("XNNPACK delegate");
  }
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *nd = &g->nodes[i];
    for (uint32_t k = 0; k < nd->nin; k++)
      if (nd->in[k] < nv) reads[nd->in[k]]++;
    for (uint32_t k = 0; k < nd->nout; k++)
      if (nd->out[k] < nv) writes[nd->out[k]]++;
  }
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *nd = &g->nodes[i];
    if (d->ops[i]->exec != xnn_exec_static_reshape || nd->nin != 1 || nd->nout != 1 || nd->in[0] >= nv ||
        nd->out[0] >= nv)
      continue;
    const uint32_t x = nd->in[0], y = nd->out[0];
    const xnn_value *vx = &g->values[x], *vy = &g->values[y];
    if (vx->datatype != XNN_DT_FP32 || vy->datatype != XNN_DT_FP32 || vx->half || vy->half) continue;
    if (!vx->flags && !vx->constant && writes[x] == 1 && reads[x] == 1 && writes[y] == 1 &&
        vy->flags == XNN_VALUE_EXTERNAL_OUTPUT)
      d->edges[d->nedges++] = (xnn_edge){x, y, vx->data};
    else if (vx->flags == XNN_VALUE_EXTERNAL_INPUT && !vy->flags && !vy->constant && writes[y] == 1)
      d->edges[d->nedges++] = (xnn_edge){y, x, vy->data};
  }
  free(writes), free(reads);
  return PYEXEC_OK;
}

/* Each call, after the outputs are sized: an edge reshape's stored value
 * lives in its external tensor's memory, unless that memory overlaps an
 * external tensor of the other direction (an input the graph still reads
 * while the value is written, or an output written while it is read). */
static void redirect_edges(xnn_delegate *d) {
  const xnn_graph *g = &d->g;
  for (uint32_t e = 0; e < d->nedges; e++) {
    const xnn_edge *ed = &d->edges[e];
    xnn_value *s = &g->values[ed->stored];
    const xnn_value *x = &g->values[ed->external];
    const size_t n = (size_t)xnn_numel(x) * sizeof(float);
    const uint32_t other = x->flags & XNN_VALUE_EXTERNAL_OUTPUT ? XNN_VALUE_EXTERNAL_INPUT : XNN_VALUE_EXTERNAL_OUTPUT;
    bool clear = x->data != NULL;
    for (uint32_t i = 0; i < g->nvalues && clear; i++) {
      const xnn_value *v = &g->values[i];
      if (v->flags & other)
        clear = !px_bytes_overlap(x->data, n, v->data, (size_t)xnn_numel(v) * xnn_datatype_size(v->datatype));
    }
    s->data = clear ? x->data : ed->home;
  }
}

static pyexec_status xnn_init(px_ctx *ctx, const uint8_t *payload, size_t size, const px_compile_spec *specs,
                              size_t nspecs, const px_named_data *named, void **handle) {
  (void)specs; /* ExecuTorch's XNNPACK runtime reads no compile spec either */
  (void)nspecs;
  *handle = NULL;
  xnn_delegate *d = calloc(1, sizeof *d);
  if (!d) return px_no_memory("XNNPACK delegate");
  pyexec_status st = xnn_parse(payload, size, named, &d->g);
  if (st == PYEXEC_ERR_UNSUPPORTED) name_unsupported(payload, size);
  if (!st && xnn_fuse_clamps(&d->g)) st = px_no_memory("XNNPACK delegate");
  if (!st && xnn_fuse_lookups(ctx, &d->g)) st = px_no_memory("XNNPACK delegate");
  if (!st && xnn_fuse_silu(&d->g)) st = px_no_memory("XNNPACK delegate");
  if (!st && xnn_fuse_post(&d->g)) st = px_no_memory("XNNPACK delegate");
  if (!st && xnn_fuse_blocks(&d->g)) st = px_no_memory("XNNPACK delegate");
  if (!st && xnn_fuse_quantize_rows(&d->g)) st = px_no_memory("XNNPACK delegate");
  if (!st) st = give_storage(d);
  if (!st && (!(d->ops = calloc(d->g.nnodes + 1, sizeof *d->ops)) ||
              !(d->rounds = calloc(d->g.nnodes + 1, sizeof *d->rounds))))
    st = px_no_memory("XNNPACK delegate");
  if (!st) st = plan_rounding(d);
  for (uint32_t i = 0; i < d->g.nnodes && !st; i++) {
    xnn_node *nd = &d->g.nodes[i];
    d->ops[i] = xnn_node_ops_for_node(nd, d->g.values);
    if (!d->ops[i]) {
      st = px_unsupported("XNNPACK payload: node %u (%s) has no function", i, xnn_node_type_name(nd->type));
      break;
    }
    if (!d->ops[i]->prepare) continue;
    ctx->op = xnn_node_type_name(nd->type);
    ctx->msg[0] = 0;
    ctx->scratch_cur = ctx->scratch;
    ctx->scratch_used = 0;
    if (d->ops[i]->prepare(ctx, nd, d->g.values))
      st = px_invalid_program("XNNPACK payload: node %u: %s", i, ctx->msg[0] ? ctx->msg : "prepare failed");
    if (nd->f16n) d->rounds[i] = false; /* its float16 sums are its output's values */
  }
  if (!st) st = plan_edges(d);
  if (st) {
    xnn_destroy(d);
    return st;
  }
  *handle = d;
  return PYEXEC_OK;
}

static bool dtype_matches(int datatype, int dtype, bool output) {
  switch (datatype) {
    case XNN_DT_FP32: return dtype == PX_F32;
    case XNN_DT_FP16: return dtype == PX_F16;
    case XNN_DT_BF16: return dtype == PX_BF16;
    case XNN_DT_INT32: return dtype == PX_I32 || (output && dtype == PX_I64);
    /* A quantized external is the plain integer tensor ExecuTorch passes;
     * the scale and zero point are the graph's. */
    case XNN_DT_QINT8: return dtype == PX_I8;
    case XNN_DT_QUINT8: return dtype == PX_U8;
    case XNN_DT_QINT32: return dtype == PX_I32;
    default: return false;
  }
}

/* The dims external value `v` takes from tensor `t` of sizes `sizes` (its
 * current sizes, or its upper bound at load): the tensor's dims in memory
 * order, sizes[dim_order[k]] at k, its memory read and written as it lies.
 * ExecuTorch's XNNExecutor reshapes its externals so: a channels-last
 * [N, C, H, W] tensor is the NHWC value [N, H, W, C] the exporter wrote. A
 * 0-d tensor is [1]. */
static void memory_dims(const px_tensor *t, const int64_t *sizes, int64_t *dims) {
  if (t->dim == 0) dims[0] = 1;
  for (int k = 0; k < t->dim; k++) dims[k] = sizes[t->dim_order[k]];
}

/* Why argument `a` cannot be external value `i` (v), the tensor's dims
 * being `sizes` (NULL: its upper bound), into msg; false when it can. */
static bool arg_refused(const xnn_value *v, uint32_t i, const px_value *a, const int64_t *sizes, char *msg,
                        size_t cap) {
  bool out = v->flags & XNN_VALUE_EXTERNAL_OUTPUT;
  const char *role = out ? "output" : "input";
  if (a->tag != PX_V_TENSOR) {
    snprintf(msg, cap, "argument %u is %s, not a tensor; the graph's value %u is the external %s tensor %u",
             v->external_id, px_value_type_name(a->tag), i, role, v->external_id);
    return true;
  }
  const px_tensor *t = a->u.t;
  if (!sizes) sizes = t->max_sizes;
  if (!dtype_matches(xnn_file_datatype(v), t->dtype, out)) {
    snprintf(msg, cap, "argument %u has dtype %s, the graph's value %u is %s", v->external_id,
             px_dtype_name(t->dtype), i, xnn_datatype_name(xnn_file_datatype(v)));
    return true;
  }
  if ((uint32_t)t->dim != v->num_dims && !(t->dim == 0 && v->num_dims == 1 && v->max_dims[0] == 1)) {
    snprintf(msg, cap, "argument %u has rank %d, the graph's value %u has rank %u", v->external_id, t->dim, i,
             v->num_dims);
    return true;
  }
  if (t->contiguous) return false;
  /* Another dim_order: its dims in memory order must fit the value's. */
  int64_t dims[XNN_MAX_DIMS];
  memory_dims(t, sizes, dims);
  for (uint32_t k = 0; k < v->num_dims; k++) {
    if (dims[k] <= v->max_dims[k]) continue;
    char a_sizes[128], a_mem[128], a_order[64], v_dims[128];
    int64_t order[XNN_MAX_DIMS];
    uint32_t n = v->num_dims;
    for (uint32_t d = 0; d < n; d++) order[d] = t->dim_order[d];
    snprintf(msg, cap,
             "argument %u (sizes %s, dim_order %s) lies in memory as %s, which the graph's value %u, %s, "
             "cannot hold: the delegate reads a tensor's memory as it lies",
             v->external_id, xnn_format_dims(a_sizes, sizeof a_sizes, n, sizes),
             xnn_format_dims(a_order, sizeof a_order, n, order), xnn_format_dims(a_mem, sizeof a_mem, n, dims), i,
             xnn_format_dims(v_dims, sizeof v_dims, n, v->max_dims));
    return true;
  }
  return false;
}

/* Once per DelegateCall, at load: every external value's argument exists and
 * is a tensor it can take. The arguments with no external id (ints,
 * SymInts, lists, None, tensors the graph does not read) are ignored, as
 * ExecuTorch's XNNExecutor ignores them. */
static pyexec_status xnn_check_call(const void *handle, px_value *const *args, size_t nargs) {
  const xnn_delegate *d = handle;
  char msg[768];
  for (uint32_t i = 0; i < d->g.nvalues; i++) {
    const xnn_value *v = &d->g.values[i];
    if (!v->flags) continue;
    if (v->external_id >= nargs)
      return px_invalid_program("the graph's value %u is external %u, but the call passes %zu arguments", i,
                                v->external_id, nargs);
    if (arg_refused(v, i, args[v->external_id], NULL, msg, sizeof msg)) return px_invalid_program("%s", msg);
  }
  return PYEXEC_OK;
}

/* Points every external value at its argument; inputs take their current
 * dims from the tensor in memory order (at most the value's upper bound).
 * What xnn_check_call checked of the tensors is checked again: a MoveCall
 * may have put another tensor behind an argument. */
static int bind(px_ctx *ctx, xnn_delegate *d, px_value *const *args, size_t nargs) {
  char msg[768];
  for (uint32_t i = 0; i < d->g.nvalues; i++) {
    xnn_value *v = &d->g.values[i];
    if (!v->flags) continue;
    bool out = v->flags & XNN_VALUE_EXTERNAL_OUTPUT;
    if (v->external_id >= nargs)
      return px_fail(ctx, "value %u is external %u, but the call passes %zu arguments", i, v->external_id, nargs);
    const px_value *a = args[v->external_id];
    if (arg_refused(v, i, a, a->tag == PX_V_TENSOR ? a->u.t->sizes : NULL, msg, sizeof msg))
      return px_fail(ctx, "%s", msg);
    px_tensor *t = a->u.t;
    if (!v->half) v->data = t->data; /* fp16 / bf16: the value keeps its float32 storage */
    if (out) {
      if (!v->half) v->capacity = t->capacity;
      continue;
    }
    memory_dims(t, t->sizes, v->dims);
    size_t need = (size_t)xnn_numel(v) * xnn_datatype_size(v->datatype);
    uint64_t bound = 1;
    for (uint32_t k = 0; k < v->num_dims; k++) bound *= (uint64_t)v->max_dims[k];
    if ((uint64_t)xnn_numel(v) > bound)
      return px_fail(ctx, "argument %u has %lld elements, more than the graph's bound of %llu", v->external_id,
                     (long long)xnn_numel(v), (unsigned long long)bound);
    if (v->half == XNN_DT_FP16)
      px_f16_to_f32(v->data, t->data, xnn_numel(v));
    else if (v->half == XNN_DT_BF16)
      px_bf16_to_f32(v->data, t->data, xnn_numel(v));
    else
      v->capacity = need;
  }
  return 0;
}

/* Gives each output tensor the shape the graph computed for it. */
static int resize_outputs(px_ctx *ctx, xnn_delegate *d, px_value *const *args) {
  for (uint32_t i = 0; i < d->g.nvalues; i++) {
    xnn_value *v = &d->g.values[i];
    if (!(v->flags & XNN_VALUE_EXTERNAL_OUTPUT)) continue;
    px_tensor *t = args[v->external_id]->u.t;
    if (t->dim == 0) {
      if (xnn_numel(v) != 1) return px_fail(ctx, "a 0-d output receives %lld elements", (long long)xnn_numel(v));
      continue;
    }
    /* The value's dims are the tensor's in memory order (memory_dims). */
    int64_t sizes[XNN_MAX_DIMS];
    for (int k = 0; k < t->dim; k++) sizes[t->dim_order[k]] = v->dims[k];
    if (px_resize(ctx, t, t->dim, sizes)) return PYEXEC_ERR_EXECUTION;
    if (!v->half) v->data = t->data;
  }
  return 0;
}

/* Rounds the float32 storage of fp16 / bf16 outputs into their tensors
 * (exact where the node already rounded it). */
static void narrow_outputs(xnn_delegate *d, px_value *const *args) {
  for (uint32_t i = 0; i < d->g.nvalues; i++) {
    xnn_value *v = &d->g.values[i];
    if (!(v->flags & XNN_VALUE_EXTERNAL_OUTPUT) || !v->half) continue;
    px_tensor *t = args[v->external_id]->u.t;
    if (v->half == XNN_DT_FP16)
      px_f32_to_f16(t->data, v->data, xnn_numel(v));
    else
      px_f32_to_bf16(t->data, v->data, xnn_numel(v));
  }
}

/* Runs node i, then rounds its fp16 / bf16 outputs to their type. */
static int run_node(px_ctx *ctx, xnn_delegate *d, uint32_t i) {
  ctx->scratch_cur = ctx->scratch;
  ctx->scratch_used = 0;
  const xnn_node *nd = &d->g.nodes[i];
  int rc = d->ops[i]->exec(ctx, nd, d->g.values);
  if (rc || !d->rounds[i]) return rc;
  for (uint32_t k = 0; k < nd->nout; k++) {
    xnn_value *v = &d->g.values[nd->out[k]];
    if (v->half == XNN_DT_FP16) px_round_f16(v->data, xnn_numel(v));
    if (v->half == XNN_DT_BF16) px_round_bf16(v->data, xnn_numel(v));
  }
  return 0;
}

/* ArgMaxPooling2d writes int32 indices; an int64 output receives them
 * widened in place, back to front. */
static void widen_outputs(xnn_delegate *d, px_value *const *args) {
  for (uint32_t i = 0; i < d->g.nvalues; i++) {
    xnn_value *v = &d->g.values[i];
    if (!(v->flags & XNN_VALUE_EXTERNAL_OUTPUT) || v->datatype != XNN_DT_INT32) continue;
    px_tensor *t = args[v->external_id]->u.t;
    if (t->dtype != PX_I64) continue;
    const int32_t *src = t->data;
    int64_t *dst = t->data;
    for (int64_t k = xnn_numel(v) - 1; k >= 0; k--) {
      int32_t x;
      memcpy(&x, src + k, sizeof x);
      dst[k] = x;
    }
  }
}

/* The profile name of a DepthwiseConv2d or FullyConnected running a fused activation. */
static const char *post_name(const xnn_node *nd) {
  static const char *const dw[] = {"DepthwiseConv2d", "DepthwiseConv2d [SiLU]", "DepthwiseConv2d [Hardswish]"};
  static const char *const fc[] = {"FullyConnected", "FullyConnected [SiLU]", "FullyConnected [Hardswish]"};
  const int k = nd->post <= XNN_POST_HARDSWISH ? nd->post : 0;
  return nd->type == XNN_NODE_depthwise_conv2d ? dw[k] : fc[k];
}

/* The node loop of a profiled method: one event per node (its type and
 * input shapes), nested in the DelegateCall's (runtime/profile.h). */
static int exec_profiled(px_ctx *ctx, xnn_delegate *d) {
  int rc = 0;
  for (uint32_t i = 0; i < d->g.nnodes && !rc; i++) {
    const xnn_node *nd = &d->g.nodes[i];
    ctx->op = xnn_node_type_name(nd->type);
    /* a float32 convolution's event names the path it takes, a Lookup8 the nodes it stands for */
    const char *name = d->ops[i]->exec == xnn_exec_conv2d ? xnn_conv2d_profile_name(nd)
                       : nd->type == XNN_NODE_lookup8 ? ((const xnn_lookup8 *)nd->packed)->name
                       : nd->type == XNN_NODE_block   ? ((const xnn_block *)nd->packed)->name
                       : nd->type == XNN_NODE_quantize_rows ? ((const xnn_quantize_rows *)nd->packed)->name
                       : nd->post != XNN_POST_NONE    ? post_name(nd)
                                                      : ctx->op;
    long ev = px_profile_begin(ctx->prof, "", name, 1, (int)i);
    for (uint32_t k = 0; k < nd->nin; k++) {
      if (nd->in[k] == XNN_INVALID_ID) continue; /* an absent optional input (a FullyConnected's bias) */
      const xnn_value *v = &d->g.values[nd->in[k]];
      px_profile_shape(ctx->prof, ev, (int)v->num_dims, v->dims);
    }
    px_profile_start(ctx->prof, ev);
    rc = run_node(ctx, d, i);
    px_profile_end(ctx->prof, ev);
  }
  return rc;
}

static int xnn_execute(px_ctx *ctx, void *handle, px_value *const *args, size_t nargs) {
  xnn_delegate *d = handle;
  const char *op = ctx->op;
  int rc = bind(ctx, d, args, nargs);
  for (uint32_t i = 0; i < d->g.nnodes && !rc; i++) {
    ctx->op = xnn_node_type_name(d->g.nodes[i].type);
    rc = d->ops[i]->shape(ctx, &d->g.nodes[i], d->g.values);
  }
  ctx->op = op;
  if (!rc) rc = resize_outputs(ctx, d, args);
  if (!rc) redirect_edges(d);
  /* The nodes run with denormals off, as XNNPACK runs its operators (on the
   * pool too: its jobs take this thread's mode), so results below the
   * smallest normal float are ExecuTorch's: zero. */
  if (!rc) {
    const uint64_t fp = px_fp_flush_denormals();
    if (ctx->prof) {
      rc = exec_profiled(ctx, d);
    } else {
      for (uint32_t i = 0; i < d->g.nnodes && !rc; i++) {
        ctx->op = xnn_node_type_name(d->g.nodes[i].type);
        rc = run_node(ctx, d, i);
      }
    }
    px_fp_set_mode(fp);
  }
  ctx->op = op;
  if (!rc) widen_outputs(d, args);
  if (!rc) narrow_outputs(d, args);
  return rc;
}

static bool xnn_writes_arg(const void *handle, size_t arg) {
  const xnn_delegate *d = handle;
  for (uint32_t i = 0; i < d->g.nvalues; i++)
    if ((d->g.values[i].flags & XNN_VALUE_EXTERNAL_OUTPUT) && d->g.values[i].external_id == arg) return true;
  return false;
}

const px_backend px_backend_xnnpack = {
    .id = "XnnpackBackend",
    .init = xnn_init,
    .check_call = xnn_check_call,
    .execute = xnn_execute,
    .destroy = xnn_destroy,
    .writes_arg = xnn_writes_arg,
    .describe = xnn_describe,
};
