/*
 * plan.c - the table of node functions by type code, and the choice of a
 * node's functions (the quantized ones when a value is quantized). It sits
 * above every nodes_*.c file; the helpers they share are graph.c's.
 */
#include "backends/xnnpack/nodes.h"

#define U {xnn_shape_unary, xnn_exec_unary, NULL}
#define B {xnn_shape_binary, xnn_exec_binary, NULL}
#define CAT {xnn_shape_concatenate, xnn_exec_concatenate, NULL}
static const xnn_node_ops ops[XNN_NODE_MAX + 1] = {
    [XNN_NODE_add] = B, [XNN_NODE_subtract] = B, [XNN_NODE_multiply] = B, [XNN_NODE_div] = B,
    [XNN_NODE_minimum] = B, [XNN_NODE_maximum] = B,
    [XNN_NODE_sigmoid] = U, [XNN_NODE_tanh] = U, [XNN_NODE_exp] = U, [XNN_NODE_log] = U, [XNN_NODE_abs] = U,
    [XNN_NODE_negate] = U, [XNN_NODE_square] = U, [XNN_NODE_square_root] = U,
    [XNN_NODE_reciprocal_square_root] = U, [XNN_NODE_floor] = U, [XNN_NODE_ceiling] = U, [XNN_NODE_sin] = U,
    [XNN_NODE_cos] = U, [XNN_NODE_gelu] = U, [XNN_NODE_hardswish] = U, [XNN_NODE_elu] = U,
    [XNN_NODE_leaky_relu] = U, [XNN_NODE_clamp] = U, [XNN_NODE_copy] = U, [XNN_NODE_convert] = U,
    [XNN_NODE_softmax] = {xnn_shape_unary, xnn_exec_softmax, NULL},
    [XNN_NODE_fully_connected] = {xnn_shape_fully_connected, xnn_exec_fully_connected,
                                  xnn_prepare_fully_connected},
    [XNN_NODE_batch_matrix_multiply] = {xnn_shape_batch_matrix_multiply, xnn_exec_batch_matrix_multiply,
                                        xnn_prepare_batch_matrix_multiply},
    [XNN_NODE_static_transpose] = {xnn_shape_static_transpose, xnn_exec_static_transpose, NULL},
    [XNN_NODE_static_reshape] = {xnn_shape_static_reshape, xnn_exec_static_reshape, NULL},
    [XNN_NODE_static_slice] = {xnn_shape_static_slice, xnn_exec_static_slice, NULL},
    [XNN_NODE_static_constant_pad] = {xnn_shape_static_constant_pad, xnn_exec_static_constant_pad, NULL},
    [XNN_NODE_concatenate2] = CAT, [XNN_NODE_concatenate3] = CAT, [XNN_NODE_concatenate4] = CAT,
    [XNN_NODE_concatenate5] = CAT,
    /* spatial: nodes_conv.c, nodes_pool.c */
    [XNN_NODE_conv2d] = {xnn_shape_conv2d, xnn_exec_conv2d, xnn_prepare_conv2d},
    [XNN_NODE_depthwise_conv2d] = {xnn_shape_depthwise_conv2d, xnn_exec_depthwise_conv2d,
                                   xnn_prepare_depthwise_conv2d},
    [XNN_NODE_conv_transpose2d] = {xnn_shape_conv_transpose2d, xnn_exec_conv_transpose2d,
                                   xnn_prepare_conv_transpose2d},
    [XNN_NODE_avg_pooling2d] = {xnn_shape_avg_pooling2d, xnn_exec_avg_pooling2d, NULL},
    [XNN_NODE_max_pooling2d] = {xnn_shape_max_pooling2d, xnn_exec_max_pooling2d, NULL},
    [XNN_NODE_global_avg_pooling2d] = {xnn_shape_global_avg_pooling2d, xnn_exec_global_avg_pooling2d, NULL},
    [XNN_NODE_argmax_pooling2d] = {xnn_shape_argmax_pooling2d, xnn_exec_argmax_pooling2d, NULL},
    [XNN_NODE_resize_bilinear2d] = {xnn_shape_resize_bilinear2d, xnn_exec_resize_bilinear2d, NULL},
    [XNN_NODE_prelu] = {xnn_shape_prelu, xnn_exec_prelu, NULL},
    /* ScaledDotProductAttention (36): ExecuTorch's runtime has no handler
     * either, and the 1.5.1 partitioner never emits it. */
};
#undef U
#undef B
#undef CAT

static const xnn_node_ops silu_ops = {xnn_shape_unary, xnn_exec_silu, NULL};
static const xnn_node_ops block_ops = {xnn_shape_block, xnn_exec_block, xnn_prepare_block};

const xnn_node_ops *xnn_node_ops_for(int type) {
  if (type == XNN_NODE_silu) return &silu_ops;
  if (type == XNN_NODE_block) return &block_ops;
  if (type < 1 || type > XNN_NODE_MAX || !ops[type].shape || !ops[type].exec) return NULL;
  return &ops[type];
}

const xnn_node_ops *xnn_node_ops_for_node(const xnn_node *node, const xnn_value *values) {
  for (uint32_t k = 0; k < node->nin + node->nout; k++) {
    uint32_t id = k < node->nin ? node->in[k] : node->out[k - node->nin];
    if (id != XNN_INVALID_ID && xnn_value_quantized(&values[id])) return xnn_quant_ops_for(node, values);
  }
  return xnn_node_ops_for(node->type);
}
