/*
 * xnn_graph.h - the XNNPACK delegate's parsed graph (private): its values,
 * its nodes, and the three functions each node type provides.
 *
 * payload.c turns the processed payload (the XNNGraph flatbuffer) into an
 * xnn_graph whose every id, count, dim, permutation and constant has been
 * checked; plan.c / backend.c give the values storage and run the nodes in
 * file order (the writer emits them topologically sorted). A node function
 * may therefore trust:
 *   - every id in node->in[] / node->out[] is < the graph's value count,
 *     except optional ones (bias) that may be XNN_INVALID_ID;
 *   - every value has 1..XNN_MAX_DIMS dims (a 0-d tensor is written [1]);
 *   - inputs' current dims are set (shape pass) and their data points to at
 *     least numel elements of their datatype, outputs' data to their upper
 *     bound (XNN_VALUE_CAPACITY bytes);
 *   - the datatype of every value a node reads or writes is fp32, except
 *     ArgMaxPooling2d's index output (int32), the fp16 / bf16 constants
 *     below, or, for a node with a quantized value, a combination
 *     nodes_quant.c accepts (xnn_quant_check) and runs
 *     (xnn_node_ops_for_node).
 *
 * fp16 and bf16 values (XNNPACK's numerics on x86: float32 arithmetic,
 * outputs rounded to the value's type, to nearest even, where XNNPACK rounds
 * them; on CPUs with AVX512-FP16, fp16 products and convolutions sum in
 * float16 instead, as XNNPACK's kernels for them do: nodes_f16n.c):
 *   - every one that is not a constant lives in float32 storage (4 bytes an
 *     element): payload.c sets its datatype to fp32 and records the file's
 *     in `half`. Node functions see float32 and run unchanged, the quantized
 *     ones included (fp16 -> qdint8 Convert, qdint8 FullyConnected -> fp16).
 *     After a node the backend rounds its half outputs in place where
 *     XNNPACK on x86 does (backend.c, plan_rounding): after every fp16 node
 *     but those downstream of a quantized input (XNNPACK runs them in
 *     float32), after the bf16 FullyConnected and BatchMatrixMultiply only
 *     (its other bf16 nodes run in float32), never after a node that only
 *     moves elements of inputs already rounded. At bind an fp16 / bf16
 *     input tensor is widened into its storage; at the end the storage is
 *     rounded into the output tensor;
 *   - a constant stays in its type where its node reads it so: the filter
 *     (in[1]) of FullyConnected and of the three convolutions, and
 *     BatchMatrixMultiply's B (in[1]). FullyConnected and
 *     BatchMatrixMultiply pack it 16-bit and widen a block at a time while
 *     multiplying; the convolutions widen it at prepare into their float32
 *     panels (twice the file's bytes for the filter, the file's pages handed
 *     back). Every other fp16 / bf16 constant (biases, slopes, elementwise
 *     operands) is widened once at load into an owned float32 copy
 *     (datatype fp32, `half` set).
 *
 * Layout conventions (reference Part A, A8):
 *   - spatial values (conv, pooling, resize, prelu) are NHWC; the exporter
 *     inserts StaticTranspose nodes around them where a delegate input or
 *     output is NCHW (contiguous). An external value holds its tensor's dims
 *     in memory order (sizes[dim_order[k]] at k) and reads or writes the
 *     tensor's memory as it lies, as ExecuTorch's XNNExecutor does: a
 *     channels-last argument is an NHWC value with no transpose;
 *   - constants are row-major bytes as written by the exporter:
 *       FullyConnected filter  [OC, IC] (flags bit 0: [IC, OC])
 *       Conv2d filter          [OC, KH, KW, IC/groups]          (OHWI)
 *       DepthwiseConv2d filter [1, KH, KW, C*M]
 *       ConvTranspose2d filter [OC, KH, KW, IC/groups]
 *       bias                   [OC] (FullyConnected: any dims of OC entries, [1, OC])
 *     A constant's bytes live in the program (named data, the payload's
 *     constant region or the legacy constant_buffer) for the delegate's
 *     lifetime; value->data points at them, read-only, possibly unaligned
 *     to more than 4 bytes (named-data segments are 16-aligned in practice).
 *
 * Pre-packing: a node type may have a prepare hook, run once at init after
 * every value has its storage and constants are resolved. It may allocate
 * node->packed (malloc'd; the backend frees it with free() at destroy) and
 * read constants through values[]. Shape and exec functions run per execute
 * and must not malloc: temporary memory comes from px_scratch(ctx, bytes).
 *
 * Errors: every function returns 0 on success, otherwise the result of
 * px_fail(ctx, ...) (kernels/kernel.h); ctx->op names the node while it runs.
 */
#ifndef PX_XNN_GRAPH_H
#define PX_XNN_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"

#define XNN_MAX_DIMS 6
#define XNN_INVALID_ID 0xFFFFFFFFu

/* XNNDatatype as written in the file (schema.fbs), not XNNPACK's C enum. */
enum {
  XNN_DT_INVALID = 0,
  XNN_DT_FP32 = 1,
  XNN_DT_FP16 = 2,
  XNN_DT_QINT8 = 3,
  XNN_DT_QUINT8 = 4,
  XNN_DT_QINT32 = 5,
  XNN_DT_QCINT8 = 6,
  XNN_DT_QCINT32 = 7,
  XNN_DT_QCINT4 = 8,
  XNN_DT_QDINT8 = 9,
  XNN_DT_QBINT4 = 10,
  XNN_DT_QPINT8 = 11,
  XNN_DT_INT32 = 12,
  XNN_DT_PFP32 = 13,
  XNN_DT_BF16 = 14
};

/* XValue flags. */
#define XNN_VALUE_EXTERNAL_INPUT 0x1u
#define XNN_VALUE_EXTERNAL_OUTPUT 0x2u

/* Node flags. */
#define XNN_FLAG_TRANSPOSE_WEIGHTS 0x1u /* FullyConnected: filter is [IC, OC] */
#define XNN_FLAG_ALIGN_CORNERS 0x8u     /* StaticResizeBilinear2D */
#define XNN_FLAG_KEEP_DIMS 0x40u        /* pooling, GlobalAvgPooling2d */

/* XNodeUnion type codes, in the schema's declaration order. */
#define XNN_NODE_TYPES(X)                                                            \
  X(1, add) X(2, fully_connected) X(3, softmax) X(4, sigmoid) X(5, static_transpose) \
  X(6, clamp) X(7, conv2d) X(8, div) X(9, resize_bilinear2d) X(10, static_constant_pad) \
  X(11, avg_pooling2d) X(12, minimum) X(13, depthwise_conv2d) X(14, max_pooling2d)   \
  X(15, multiply) X(16, subtract) X(17, floor) X(18, convert)                        \
  X(19, global_avg_pooling2d) X(20, static_reshape) X(21, argmax_pooling2d)          \
  X(22, square_root) X(23, ceiling) X(24, hardswish) X(25, leaky_relu) X(26, maximum) \
  X(27, negate) X(28, square) X(29, elu) X(30, abs) X(31, prelu) X(32, concatenate2) \
  X(33, concatenate3) X(34, concatenate4) X(35, static_slice)                        \
  X(36, scaled_dot_product_attention) X(37, batch_matrix_multiply) X(38, concatenate5) \
  X(39, conv_transpose2d) X(40, reciprocal_square_root) X(41, log) X(42, gelu)       \
  X(43, tanh) X(44, exp) X(45, sin) X(46, copy) X(47, cos)
#define XNN_NODE_ENUM_(code, name) XNN_NODE_##name = code,
enum { XNN_NODE_TYPES(XNN_NODE_ENUM_) XNN_NODE_MAX = 47 };
#undef XNN_NODE_ENUM_

/* Node types no file holds: made at load by fuse.c, past the schema's codes.
 *   lookup8: in[0] (qint8 / quint8) -> out[0] (qint8 / quint8) through the
 *            256-byte table in packed (an xnn_lookup8), the fused form of a
 *            Convert to fp32 -> fp32 pointwise nodes -> Convert to 8 bits;
 *   silu:    in[0] (fp32) -> out[0] (fp32), x * sigmoid(x) clamped to the
 *            node's output bounds: the fused form of a Sigmoid and the
 *            Multiply of its input by its result (the exporter's SiLU);
 *   block:   in[0] (fp32) -> out[0] (fp32), with in[1] the residual operand
 *            or XNN_INVALID_ID: an inverted-residual chain (an xnn_block in
 *            packed) run a band of rows at a time (nodes_block.c);
 *   quantize_rows: the inputs of a float32 elementwise node -> out[0]
 *            (qdint8): that node and the Convert quantizing its output per
 *            row (an xnn_quantize_rows in packed), run row by row
 *            (nodes_quant.c). */
enum {
  XNN_NODE_lookup8 = XNN_NODE_MAX + 1,
  XNN_NODE_silu = XNN_NODE_MAX + 2,
  XNN_NODE_block = XNN_NODE_MAX + 3,
  XNN_NODE_quantize_rows = XNN_NODE_MAX + 4
};

typedef struct xnn_lookup8 {
  uint8_t table[256]; /* the output byte for each input byte */
  char name[64];      /* "Lookup8 [Hardswish]": the node's profile name, the float nodes it stands for */
} xnn_lookup8;

/* The schema's name for a type code ("Conv2d", "StaticSlice"); "?" if none. */
const char *xnn_node_type_name(int type);
/* The schema's name for a datatype ("fp32", "qint8"); "?" if none. */
const char *xnn_datatype_name(int datatype);
/* dims[0..n) as "[1, 3, 4, 4]" into buf (snprintf rules, cap > 0); returns buf. */
const char *xnn_format_dims(char *buf, size_t cap, uint32_t n, const int64_t *dims);

/* Quantization parameters of an XNNQuantizedTensorValue, checked at load
 * (payload.c): every scale finite and > 0, zero points in the datatype's
 * range, channel_dim inside the dims, num_scales matching the dims, group
 * sizes dividing the depth. Per-channel scales are read with
 * xnn_quant_scale (they may be unaligned f32 or bf16). Datatype and kind go
 * together: qint8 / qint32 per tensor; qcint8 / qcint32 / qcint4 per
 * channel; qbint4 per channel group ([OC, IC], channel_dim 0); qdint8 per
 * token (its scale and zero point are computed per row when it is written,
 * and kept behind its int8 data: xnn_qd8_params). */
enum { XNN_Q_NONE = 0, XNN_Q_PER_CHANNEL = 1, XNN_Q_PER_TENSOR = 2, XNN_Q_PER_TOKEN = 3,
       XNN_Q_PER_CHANNEL_GROUP = 4 };
enum { XNN_SCALES_NONE = 0, XNN_SCALES_F32 = 1, XNN_SCALES_BF16 = 2, XNN_SCALES_F32_AS_BF16 = 3 };
typedef struct xnn_quant {
  uint8_t kind; /* XNN_Q_* */
  float scale;  /* per tensor */
  int32_t zero_point;
  int32_t channel_dim;       /* per channel / group */
  int32_t group_size;        /* per channel group */
  uint32_t num_scales;
  const void *scales;        /* scale_kind values (possibly unaligned), or NULL */
  uint8_t scale_kind;        /* XNN_SCALES_*: F32_AS_BF16 = a legacy inline f32 vector
                                of a qbint4 value, rounded to bf16 as XNNPACK does */
  uint32_t scale_buffer_idx; /* constant_data index of the scales, 0 = inline */
  int32_t num_nonbatch_dims; /* per token */
} xnn_quant;

/* Scale i of a per-channel or per-group value (as a float). */
float xnn_quant_scale(const xnn_quant *q, uint32_t i);

typedef struct xnn_value {
  int16_t datatype;          /* XNN_DT_* */
  uint32_t num_dims;         /* 1..XNN_MAX_DIMS */
  int64_t max_dims[XNN_MAX_DIMS]; /* as written: upper bounds for dynamic shapes */
  int64_t dims[XNN_MAX_DIMS];     /* current dims, set by the shape pass */
  void *data;                /* current storage (constant, bound external, intermediate) */
  size_t capacity;           /* bytes data may hold (upper bound) */
  uint32_t flags;            /* XNN_VALUE_EXTERNAL_* */
  uint32_t external_id;      /* position in the DelegateCall args, or XNN_INVALID_ID */
  uint32_t constant_idx;     /* index into constant_data, 0 = not constant */
  const void *constant;      /* the constant's bytes, or NULL */
  size_t constant_size;
  xnn_quant quant;
  int16_t half;              /* XNN_DT_FP16 / XNN_DT_BF16: the file's datatype of a value kept
                                in float32 storage, rounded to it (datatype reads fp32); 0 else */
} xnn_value;

/* The datatype the file gives v (for messages, binding and describe). */
static inline int xnn_file_datatype(const xnn_value *v) { return v->half ? v->half : v->datatype; }

/* One node. Ids (indices into the value table):
 *   1x1 nodes (unary, Softmax, Copy, Convert, GlobalAvgPooling2d, Clamp,
 *   transpose, reshape, slice, pad, resize, ELU, LeakyReLU, pooling):
 *       in[0] = input, out[0] = output
 *   2x1 nodes (Add ... Maximum, PReLU, BatchMatrixMultiply):
 *       in[0] = input1, in[1] = input2 (PReLU: slope), out[0]
 *   FullyConnected and the three convolutions:
 *       in[0] = input, in[1] = filter, in[2] = bias or XNN_INVALID_ID, out[0]
 *   ArgMaxPooling2d: in[0], out[0] = values (fp32), out[1] = indices (int32)
 *   Concatenate2..5: in[0..nin), out[0]
 */
/* An activation fuse.c folded into the node that makes its input: the
 * node's kernel runs it on its output in place, after the output bounds,
 * while each row is in cache. */
enum {
  XNN_POST_NONE = 0,
  XNN_POST_SILU = 1,     /* x * sigmoid(x): a silu node's bits */
  XNN_POST_HARDSWISH = 2 /* x * clamp(x / 6 + 1/2, 0, 1): a Hardswish node's bits */
};

typedef struct xnn_node {
  uint8_t type;        /* XNN_NODE_* */
  uint8_t post;        /* XNN_POST_*: set on float32 Conv2d, DepthwiseConv2d and FullyConnected only */
  uint32_t debug_handle;
  uint32_t flags;
  float output_min;    /* -INFINITY when the file has no OutputMinMax */
  float output_max;    /* +INFINITY likewise */
  uint32_t in[5];
  uint32_t nin;
  uint32_t out[2];
  uint32_t nout;
  union {
    struct { /* Conv2d, DepthwiseConv2d, ConvTranspose2d */
      uint32_t padding_top, padding_right, padding_bottom, padding_left;
      uint32_t kernel_height, kernel_width;
      uint32_t subsampling_height, subsampling_width; /* strides */
      uint32_t dilation_height, dilation_width;
      uint32_t group_input_channels, group_output_channels, groups;
      uint32_t adjustment_height, adjustment_width; /* ConvTranspose2d output_padding */
    } conv;
    struct { /* AvgPooling2d, MaxPooling2d */
      uint32_t padding_top, padding_right, padding_bottom, padding_left;
      uint32_t pooling_height, pooling_width;
      uint32_t stride_height, stride_width;
      uint32_t dilation_height, dilation_width;
    } pool;
    struct { /* ArgMaxPooling2d (stride = pooling size) */
      uint32_t padding_top, padding_right, padding_bottom, padding_left;
      uint32_t pooling_height, pooling_width;
    } argmax;
    struct { /* StaticResizeBilinear2D */
      uint32_t new_height, new_width;
    } resize;
    struct { /* StaticConstantPad: one entry per input dim */
      uint32_t pre[XNN_MAX_DIMS], post[XNN_MAX_DIMS];
      uint32_t num_dims;
      float value;
    } pad;
    struct { /* StaticSlice */
      uint32_t num_dims;
      uint32_t offsets[XNN_MAX_DIMS], sizes[XNN_MAX_DIMS];
    } slice;
    struct { /* StaticTranspose: a permutation of 0..num_dims-1 */
      uint32_t num_dims;
      uint32_t perm[XNN_MAX_DIMS];
    } transpose;
    struct { /* StaticReshape: at most one 0 (inferred) */
      uint32_t num_dims;
      uint32_t new_shape[XNN_MAX_DIMS];
    } reshape;
    struct { /* Concatenate2..5 */
      uint32_t axis;
    } cat;
    struct { float alpha; } elu;
    struct { float negative_slope; } leaky_relu;
  } p;
  void *packed;        /* owned by the node (prepare hook); free()d at destroy */
  size_t packed_size;
  void (*release)(void *packed); /* when set, frees packed instead of free() */
  bool f16n;           /* runs in float16 arithmetic (nodes_f16n.c): set by the backend, kept or
                          cleared by the node's prepare hook */
} xnn_node;

/* What a block node (fuse.c's xnn_fuse_blocks) stands for: the nodes of
 *   [Conv2d 1x1 (expand)] -> DepthwiseConv2d -> Conv2d 1x1 (project) [-> Add]
 * (float32, the bracketed ones optional), each a copy of the node as fused
 * (its output bounds and post) that owns its packed weights. The values
 * between them (e, d, p; e is XNN_INVALID_ID without an expansion) are
 * never stored: the chain runs a band of output rows at a time, its
 * intermediate rows in per-thread buffers the cache holds. add_first: the
 * projection's output is the Add's first operand. */
typedef struct xnn_block {
  xnn_node expand, dw, project, add; /* expand and add: type 0 when absent */
  uint32_t e, d, p;                  /* the intermediate values */
  bool add_first;
  char name[112]; /* "InvertedResidual [Conv2d, DepthwiseConv2d, ...]": the profile's row */
} xnn_block;

/* What a quantize_rows node stands for: its first node (a copy, the
 * producer of the float value mid) and the Convert to qdint8 of mid. */
typedef struct xnn_quantize_rows {
  xnn_node first;
  uint32_t mid;
  char name[64]; /* "QuantizeRows [Add, Convert]": the profile's row */
} xnn_quantize_rows;

typedef struct xnn_graph {
  xnn_value *values;
  uint32_t nvalues;
  xnn_node *nodes;
  uint32_t nnodes;
  uint32_t num_externs;
  void **owned;        /* aligned copies of constants (payload.c), freed with the graph */
  uint32_t nowned;
} xnn_graph;

/* Per node type. shape: set every output's current dims from the inputs'
 * current dims (xnn_set_dims checks the upper bound). exec: compute. prepare
 * (optional): pack constants once at init. */
typedef int (*xnn_shape_fn)(px_ctx *ctx, const xnn_node *node, xnn_value *values);
typedef int (*xnn_exec_fn)(px_ctx *ctx, const xnn_node *node, xnn_value *values);
typedef int (*xnn_prepare_fn)(px_ctx *ctx, xnn_node *node, xnn_value *values);

/* Helpers for node functions (plan.c). */

/* Elements at the current dims. */
static inline int64_t xnn_numel(const xnn_value *v) {
  int64_t n = 1;
  for (uint32_t k = 0; k < v->num_dims; k++) n *= v->dims[k];
  return n;
}

/* Bytes per element of a datatype (4 for fp32/int32, 2 for fp16/bf16, 1 for
 * the 8-bit ones); 0 for the packed / invalid ones. */
size_t xnn_datatype_size(int datatype);

/* Sets v's current dims to dims[0..nd): nd must equal v->num_dims and the
 * bytes must fit v->capacity; otherwise px_fail naming the node and value. */
int xnn_set_dims(px_ctx *ctx, const xnn_node *node, xnn_value *v, uint32_t nd,
                 const int64_t *dims);

/* Values the backend stores: intermediates (neither constant nor external)
 * and the float32 storage of fp16 / bf16 external values. */
static inline bool xnn_stored_here(const xnn_value *v) { return !v->constant && (!v->flags || v->half); }

/* Where each stored value lives in one arena (storage.c): offsets[v] (a
 * multiple of 64; UINT64_MAX for the values stored elsewhere) and the
 * arena's bytes in *total. Values whose lives (writer to last reader) do
 * not meet share bytes, and a StaticReshape's output is its input's
 * storage. PYEXEC_OK, or px_no_memory's status. */
pyexec_status xnn_plan_storage(const xnn_graph *g, uint64_t *offsets, uint64_t *total);

/* Load-time rewrites of a parsed graph, before it gets storage (fuse.c): a
 * qint8 Clamp folded into the node that makes its input, where that is
 * exact. Returns 0, or -1 when memory runs out (the graph unchanged). */
int xnn_fuse_clamps(xnn_graph *g);

/* The second rewrite (fuse.c), once the clamps are folded: every chain
 *   Convert (qint8 / quint8 -> fp32) -> fp32 pointwise nodes (Hardswish,
 *   Sigmoid, Tanh, ELU, LeakyReLU, Clamp, ...; none or several) ->
 *   Convert (fp32 -> qint8 / quint8)
 * whose float values nothing else reads (not external, not fp16 / bf16)
 * becomes one lookup8 node. Its table is made by running the chain's own
 * node functions on the 256 possible input bytes, so it gives exactly the
 * bytes the chain would (a chain whose functions fail on the table stays as
 * it is). PYEXEC_FUSE=0 in the environment turns it off. Returns 0, or -1 when memory runs out (the graph then unchanged
 * from that chain on). */
int xnn_fuse_lookups(px_ctx *ctx, xnn_graph *g);

/* The third rewrite (fuse.c): a float32 Sigmoid whose result only a
 * Multiply by the Sigmoid's own input reads (not external, not fp16 /
 * bf16) becomes, with that Multiply, one silu node in the Multiply's place
 * (its output bounds kept). It runs the same two float loops a piece at a
 * time, the sigmoid's piece in cache, so it gives the same bits.
 * PYEXEC_FUSE=0 turns it off. Returns 0, or -1 when memory runs out (the
 * graph then unchanged). */
int xnn_fuse_silu(xnn_graph *g);

/* The fourth (fuse.c): an unbounded silu node, or an unbounded float32
 * Hardswish, whose input a float32 Conv2d, DepthwiseConv2d or
 * FullyConnected makes and nothing else reads becomes that node's post
 * (XNN_POST_SILU, XNN_POST_HARDSWISH), the node writing the activation's
 * output: the activation runs on each output row while it is in cache, with
 * the activation node's bits. PYEXEC_FUSE=0 turns it off. Returns 0, or -1
 * when memory runs out (the graph then unchanged). */
int xnn_fuse_post(xnn_graph *g);

/* The fifth (fuse.c), after the activations are in their producers: a
 * float32 chain
 *   [Conv2d 1x1] -> DepthwiseConv2d -> Conv2d 1x1 [-> Add]
 * (the 1x1 layers stride 1, unpadded, one group; each value between two of
 * them read by the next alone and not external; the Add's other operand of
 * the projection's dims) whose largest intermediate value is big enough
 * not to stay in cache becomes one block node
 * (xnn_block) in the last node's place, the others' places dropped; its
 * nodes are prepared by the block's prepare hook. The block gives the bits
 * of its nodes (nodes_block.c). PYEXEC_FUSE=0 turns it off. Returns 0, or -1
 * when memory runs out (the graph then unchanged from that chain on). */
int xnn_fuse_blocks(xnn_graph *g);

/* The sixth (fuse.c): a Convert of a float32 value to qdint8 (XNNPACK's
 * per-row dynamic quantization, the input of a dynamically quantized
 * linear layer) whose input an elementwise node makes for it alone
 * (xnn_elementwise_range_ok: an Add, a Gelu, a silu node ...; not
 * external) becomes, with that node, one quantize_rows node in the
 * Convert's place: each row is made in cache and quantized at once, with
 * the bits of the two nodes. PYEXEC_FUSE=0 turns it off. Returns 0, or -1
 * when memory runs out (the graph then unchanged). */
int xnn_fuse_quantize_rows(xnn_graph *g);

#endif /* PX_XNN_GRAPH_H */
