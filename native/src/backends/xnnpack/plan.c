/*
 * plan.c - what the XNNPACK graph's parts share: type and datatype names,
 * dims as text, element sizes, the checked setting of a value's current dims, and the
 * table of node functions by type code.
 */
#include <stdio.h>

#include "backends/xnnpack/nodes.h"

static const char *const node_names[XNN_NODE_MAX + 1] = {
    NULL, "Add", "FullyConnected", "Softmax", "Sigmoid", "StaticTranspose", "Clamp", "Conv2d", "Div",
    "StaticResizeBilinear2D", "StaticConstantPad", "AvgPooling2d", "Minimum", "DepthwiseConv2d",
    "MaxPooling2d", "Multiply", "Subtract", "Floor", "Convert", "GlobalAvgPooling2d", "StaticReshape",
    "ArgMaxPooling2d", "SquareRoot", "Ceiling", "Hardswish", "LeakyReLU", "Maximum", "Negate", "Square",
    "ELU", "Abs", "PReLU", "Concatenate2", "Concatenate3", "Concatenate4", "StaticSlice",
    "ScaledDotProductAttention", "BatchMatrixMultiply", "Concatenate5", "ConvTranspose2d",
    "ReciprocalSquareRoot", "Log", "Gelu", "Tanh", "Exp", "Sin", "Copy", "Cos"};

const char *xnn_node_type_name(int type) {
  return type >= 1 && type <= XNN_NODE_MAX ? node_names[type] : "?";
}

static const char *const dt_names[] = {"invalid", "fp32",   "fp16",   "qint8", "quint8", "qint32",
                                       "qcint8",  "qcint32", "qcint4", "qdint8", "qbint4", "qpint8",
                                       "int32",   "pfp32",  "bf16"};

const char *xnn_datatype_name(int datatype) {
  return datatype >= 0 && datatype <= XNN_DT_BF16 ? dt_names[datatype] : "?";
}

const char *xnn_format_dims(char *buf, size_t cap, uint32_t n, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (uint32_t i = 0; i < n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

size_t xnn_datatype_size(int datatype) {
  switch (datatype) {
    case XNN_DT_FP32: case XNN_DT_INT32: case XNN_DT_QINT32: case XNN_DT_QCINT32: return 4;
    case XNN_DT_FP16: case XNN_DT_BF16: return 2;
    case XNN_DT_QINT8: case XNN_DT_QUINT8: case XNN_DT_QCINT8: case XNN_DT_QDINT8: return 1;
    default: return 0;
  }
}

int xnn_set_dims(px_ctx *ctx, const xnn_node *node, xnn_value *v, uint32_t nd, const int64_t *dims) {
  const char *name = node ? xnn_node_type_name(node->type) : "input";
  if (nd != v->num_dims) return px_fail(ctx, "%s: output has rank %u, the node computes rank %u", name, v->num_dims, nd);
  uint64_t numel = 1;
  for (uint32_t k = 0; k < nd; k++) {
    if (dims[k] < 0) return px_fail(ctx, "%s: negative size %lld", name, (long long)dims[k]);
    if (dims[k] && numel > UINT64_MAX / 16 / (uint64_t)dims[k])
      return px_fail(ctx, "%s: output size overflows", name);
    numel *= (uint64_t)dims[k];
  }
  if (numel * xnn_datatype_size(v->datatype) > v->capacity) {
    char s[160];
    int n = 0;
    for (uint32_t k = 0; k < nd && n < (int)sizeof s - 24; k++)
      n += snprintf(s + n, sizeof s - (size_t)n, "%s%lld", k ? ", " : "", (long long)dims[k]);
    return px_fail(ctx, "%s: output shape [%s] exceeds its upper bound of %zu bytes", name, s, v->capacity);
  }
  for (uint32_t k = 0; k < nd; k++) v->dims[k] = dims[k];
  return 0;
}

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

const xnn_node_ops *xnn_node_ops_for(int type) {
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
