/*
 * nodes.h - the functions each XNNPACK node type provides (private), and
 * the table backend.c looks them up in.
 *
 * Spatial nodes (NHWC) live in nodes_conv.c (the three convolutions),
 * nodes_block.c (fuse.c's inverted-residual chains of them) and
 * nodes_pool.c (pooling, bilinear resize, PReLU); the others in
 * nodes_basic.c (elementwise), nodes_matmul.c (FullyConnected,
 * BatchMatrixMultiply) and nodes_shape.c (transpose, reshape, slice, pad,
 * concatenate, copy, convert). Nodes with quantized values run the
 * functions of nodes_quant.c and nodes_qconv.c (qnodes.h), picked per node by
 * xnn_node_ops_for_node. xnn_graph.h documents the contract.
 */
#ifndef PX_XNN_NODES_H
#define PX_XNN_NODES_H

#include <math.h>

#include "backends/xnnpack/xnn_graph.h"

/* ---- spatial (nodes_conv.c, nodes_pool.c) ------------------------------------ */

/* Conv2d (7), DepthwiseConv2d (13), ConvTranspose2d (39). */
int xnn_shape_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_depthwise_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_depthwise_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_conv_transpose2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_conv_transpose2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
/* The name a float32 Conv2d node's profile event takes: "Conv2d
 * [winograd F(2x2,3x3)]" when it runs through kernels/conv/winograd.h, else
 * "Conv2d [direct]"; with ", SiLU" or ", Hardswish" inside the brackets
 * when it runs a fused activation (xnn_fuse_post). */
const char *xnn_conv2d_profile_name(const xnn_node *node);
/* Weight packing at init (the prepare hooks). */
int xnn_prepare_conv2d(px_ctx *ctx, xnn_node *node, xnn_value *values);
int xnn_prepare_depthwise_conv2d(px_ctx *ctx, xnn_node *node, xnn_value *values);
int xnn_prepare_conv_transpose2d(px_ctx *ctx, xnn_node *node, xnn_value *values);

/* fuse.c's block node (nodes_block.c): its prepare hook packs the weights
 * of its convolutions (their own prepare hooks), its shape function runs
 * theirs, xnn_release_block frees it with their packed weights. */
int xnn_prepare_block(px_ctx *ctx, xnn_node *node, xnn_value *values);
int xnn_shape_block(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_block(px_ctx *ctx, const xnn_node *node, xnn_value *values);
void xnn_release_block(void *packed);

/* AvgPooling2d (11), MaxPooling2d (14), GlobalAvgPooling2d (19),
 * ArgMaxPooling2d (21). */
int xnn_shape_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_max_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_max_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_global_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_global_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_argmax_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_argmax_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);

/* StaticResizeBilinear2D (9), PReLU (31). */
int xnn_shape_resize_bilinear2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_resize_bilinear2d(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_prelu(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_prelu(px_ctx *ctx, const xnn_node *node, xnn_value *values);

/* ---- elementwise (nodes_basic.c) ---------------------------------------- */

/* Add, Subtract, Multiply, Div, Minimum, Maximum: broadcasting from the
 * right, then the node's output_min/output_max clamp. */
int xnn_shape_binary(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_binary(px_ctx *ctx, const xnn_node *node, xnn_value *values);
/* Whether a node's float output bounds [lo, hi] are (-inf, +inf): nothing to clamp. */
static inline bool xnn_unbounded(float lo, float hi) { return isinf(lo) && lo < 0 && isinf(hi) && hi > 0; }
/* Every one-input pointwise node (Sigmoid ... Cos, Clamp, ELU, LeakyReLU,
 * Hardswish, Gelu), Copy and Convert: output dims = input dims. */
int xnn_shape_unary(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_unary(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_silu(px_ctx *ctx, const xnn_node *node, xnn_value *values); /* fuse.c's silu node */
/* A node's post (XNN_POST_*) as the row function its kernel runs (gemm.h's
 * and dwconv.h's post), or NULL for none; xnn_post_all runs it over y[0..n)
 * on the thread pool (kernels without a per-row hook). */
typedef void (*xnn_post_row_fn)(int64_t n, float *y);
xnn_post_row_fn xnn_post_fn(const xnn_node *node);
/* The activation a post stands for, as profile names show it ("SiLU",
 * "Hardswish"); "" for none. */
const char *xnn_post_name(int post);
void xnn_post_all(const xnn_node *node, float *y, int64_t n);
/* Elements [a, b) of an elementwise node's output (in its row-major
 * order) into out, by the node's own loops, so with the bits its exec
 * gives them: for Add ... Maximum (broadcasting), the one-input pointwise
 * nodes but Copy and Convert, and the silu node, on float32 values
 * (xnn_elementwise_range_ok says whether a node is one). The node's values
 * must have their current dims (its shape function has run). */
bool xnn_elementwise_range_ok(const xnn_node *node, const xnn_value *values);
/* Such a node's shape function (xnn_shape_binary or xnn_shape_unary). */
int xnn_shape_elementwise(px_ctx *ctx, const xnn_node *node, xnn_value *values);
void xnn_elementwise_range(const xnn_node *node, const xnn_value *values, int64_t a, int64_t b, float *out);
/* Softmax over the last dim. */
int xnn_exec_softmax(px_ctx *ctx, const xnn_node *node, xnn_value *values);

/* ---- products (nodes_matmul.c) ------------------------------------------ */

int xnn_shape_fully_connected(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_fully_connected(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_batch_matrix_multiply(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_batch_matrix_multiply(px_ctx *ctx, const xnn_node *node, xnn_value *values);
/* Packing of a constant filter / B operand at init (the prepare hooks). */
int xnn_prepare_fully_connected(px_ctx *ctx, xnn_node *node, xnn_value *values);
int xnn_prepare_batch_matrix_multiply(px_ctx *ctx, xnn_node *node, xnn_value *values);

/* ---- float16 arithmetic (nodes_f16n.c) ------------------------------------
 * For a node marked f16n: the prepare hooks pack its filter in float16 or
 * clear the mark (the node then runs in float32); the exec functions run a
 * node whose mark stayed. */
struct conv_plan;
int xnn_f16n_prepare_fc(px_ctx *ctx, xnn_node *node, xnn_value *values);
int xnn_f16n_exec_fc(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_f16n_prepare_bmm(px_ctx *ctx, xnn_node *node, xnn_value *values);
int xnn_f16n_exec_bmm(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_f16n_prepare_conv(px_ctx *ctx, xnn_node *node, const xnn_value *values, const struct conv_plan *p);
int xnn_f16n_exec_conv(px_ctx *ctx, const xnn_node *node, xnn_value *values);

/* ---- data movement (nodes_shape.c) ---------------------------------------- */

int xnn_shape_static_transpose(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_static_transpose(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_static_reshape(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_static_reshape(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_static_slice(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_static_slice(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_static_constant_pad(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_static_constant_pad(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_shape_concatenate(px_ctx *ctx, const xnn_node *node, xnn_value *values);
int xnn_exec_concatenate(px_ctx *ctx, const xnn_node *node, xnn_value *values);
/* Concatenation as byte moves, elements of esize bytes (float and qint8). */
int xnn_concat_bytes(const xnn_node *node, xnn_value *values, size_t esize);

/* ---- quantized graphs (nodes_quant.c, nodes_qconv.c) ----------------------- */

/* A value with a quantized datatype (or quantization parameters). */
static inline bool xnn_value_quantized(const xnn_value *v) {
  return v->quant.kind != XNN_Q_NONE || (v->datatype != XNN_DT_FP32 && v->datatype != XNN_DT_FP16 &&
                                          v->datatype != XNN_DT_BF16 && v->datatype != XNN_DT_INT32);
}
/* Bytes a qdint8 value needs at its upper bound: its int8 data, then each
 * row's int32 zero point and float scale (xnn_qd8_params). */
size_t xnn_qd8_capacity(const xnn_value *v);
/* XNNPACK's define-time rewrite, applied as each node is read, before
 * xnn_quant_check: a Conv2d of a qdint8 input with one group, a 1x1 kernel,
 * stride 1, no padding and more than 2 channels in and out together becomes
 * a FullyConnected, and its input is quantized per pixel
 * (num_nonbatch_dims 1) instead of per image (3), whoever else reads it;
 * its capacity (xnn_qd8_capacity) grows to match.
 * xnn_qconv_is_fc says whether a node is such a convolution. */
void xnn_quant_rewrite(const xnn_node *node, xnn_value *values);
bool xnn_qconv_is_fc(const xnn_node *node, const xnn_value *values);
/* For a node with a quantized value: 0 when nodes_quant.c runs this
 * combination of datatypes and parameters, else PYEXEC_ERR_UNSUPPORTED or
 * PYEXEC_ERR_INVALID_PROGRAM with the reason in why[0..cap). */
int xnn_quant_check(const xnn_node *node, const xnn_value *values, char *why, size_t cap);

/* ---- the table ------------------------------------------------------------ */

typedef struct xnn_node_ops {
  xnn_shape_fn shape;
  xnn_exec_fn exec;
  xnn_prepare_fn prepare; /* NULL: nothing to pack */
} xnn_node_ops;

/* The quantized functions for a node xnn_quant_check accepted. */
const xnn_node_ops *xnn_quant_ops_for(const xnn_node *node, const xnn_value *values);
/* The functions for a type code, or NULL when pyexec does not run it. */
const xnn_node_ops *xnn_node_ops_for(int type);
/* The functions for this node: the quantized ones when one of its values is
 * quantized, else xnn_node_ops_for(type). */
const xnn_node_ops *xnn_node_ops_for_node(const xnn_node *node, const xnn_value *values);

#endif /* PX_XNN_NODES_H */
