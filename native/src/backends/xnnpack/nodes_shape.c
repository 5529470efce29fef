/*
 * nodes_shape.c - the XNNPACK graph's data movement on float32:
 * StaticTranspose, StaticReshape (one 0 = inferred), StaticSlice (offsets
 * and sizes clamped to the current input, as XNNPACK's runtime does),
 * StaticConstantPad and Concatenate2..5. Transpose, slice and pad describe
 * their source as a strided view and copy it with the shape kernels'
 * px_sv_copy (kernels/shape/strided.h): dims contiguous on both sides are
 * merged, so NCHW <-> NHWC (the transposes the partitioner puts around
 * every NHWC region) becomes a batch of 2-D transposes done in blocked tiles
 * (kernels/shape/transpose.c), and slices and pads move whole runs.
 */
#include <string.h>

#include "backends/xnnpack/nodes.h"
#include "kernels/shape/strided.h"

/* A contiguous float32 view of `v`'s data with its current dims. */
static void view_of(const xnn_value *v, px_sv *s) {
  int64_t d[XNN_MAX_DIMS];
  for (uint32_t k = 0; k < v->num_dims; k++) d[k] = v->dims[k];
  px_sv_contig(s, v->data, PX_F32, (int)v->num_dims, d);
}

/* ---- transpose ------------------------------------------------------------- */

int xnn_shape_static_transpose(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  int64_t d[XNN_MAX_DIMS];
  for (uint32_t k = 0; k < x->num_dims; k++) d[k] = x->dims[node->p.transpose.perm[k]];
  return xnn_set_dims(ctx, node, &values[node->out[0]], x->num_dims, d);
}

int xnn_exec_static_transpose(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  px_sv in, dst, src;
  view_of(&values[node->in[0]], &in);
  view_of(&values[node->out[0]], &dst);
  src = dst;
  src.data = in.data;
  for (int k = 0; k < dst.dim; k++) src.strides[k] = in.strides[node->p.transpose.perm[k]];
  return px_sv_copy(ctx, &dst, &src);
}

/* ---- reshape -------------------------------------------------------------------- */

int xnn_shape_static_reshape(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  uint32_t nd = node->p.reshape.num_dims;
  int64_t d[XNN_MAX_DIMS], known = 1;
  int inferred = -1;
  for (uint32_t k = 0; k < nd; k++) {
    d[k] = node->p.reshape.new_shape[k];
    if (d[k] == 0)
      inferred = (int)k;
    else
      known *= d[k];
  }
  int64_t n = xnn_numel(x);
  if (inferred >= 0) {
    if (n % known) return px_fail(ctx, "cannot infer a dim: %lld elements into blocks of %lld", (long long)n, (long long)known);
    d[inferred] = n / known;
  } else if (known != n) {
    return px_fail(ctx, "new shape holds %lld elements, the input %lld", (long long)known, (long long)n);
  }
  return xnn_set_dims(ctx, node, &values[node->out[0]], nd, d);
}

int xnn_exec_static_reshape(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *x = &values[node->in[0]];
  xnn_value *o = &values[node->out[0]];
  size_t n = (size_t)xnn_numel(x) * sizeof(float);
  if (n && o->data != x->data) memmove(o->data, x->data, n);
  return 0;
}

/* ---- slice ---------------------------------------------------------------------- */

/* First index and length of dim k: end = offset + size, 0 meaning the end of
 * the dim; both clamped to the current size. */
static void slice_range(const xnn_node *node, const xnn_value *x, uint32_t k, int64_t *start, int64_t *len) {
  int64_t dim = x->dims[k];
  int64_t o = node->p.slice.offsets[k];
  int64_t e = o + (int64_t)node->p.slice.sizes[k];
  if (e == 0) e = dim;
  if (o > dim) o = dim;
  if (e > dim) e = dim;
  *start = o;
  *len = e > o ? e - o : 0;
}

int xnn_shape_static_slice(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  int64_t d[XNN_MAX_DIMS], start;
  for (uint32_t k = 0; k < x->num_dims; k++) slice_range(node, x, k, &start, &d[k]);
  return xnn_set_dims(ctx, node, &values[node->out[0]], x->num_dims, d);
}

int xnn_exec_static_slice(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  px_sv in, dst, src;
  view_of(x, &in);
  view_of(&values[node->out[0]], &dst);
  src = dst;
  int64_t off = 0;
  for (uint32_t k = 0; k < x->num_dims; k++) {
    int64_t start, len;
    slice_range(node, x, k, &start, &len);
    off += start * in.strides[k];
    src.strides[k] = in.strides[k];
  }
  if (!xnn_numel(&values[node->out[0]])) return 0;
  src.data = px_sv_at(&in, off);
  return px_sv_copy(ctx, &dst, &src);
}

/* ---- constant pad ------------------------------------------------------------------ */

int xnn_shape_static_constant_pad(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  int64_t d[XNN_MAX_DIMS];
  for (uint32_t k = 0; k < x->num_dims; k++)
    d[k] = (int64_t)node->p.pad.pre[k] + x->dims[k] + (int64_t)node->p.pad.post[k];
  return xnn_set_dims(ctx, node, &values[node->out[0]], x->num_dims, d);
}

int xnn_exec_static_constant_pad(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  xnn_value *ov = &values[node->out[0]];
  px_sv out, src, dst;
  view_of(ov, &out);
  view_of(x, &src);
  float *o = ov->data;
  int64_t n = xnn_numel(ov);
  for (int64_t k = 0; k < n; k++) o[k] = node->p.pad.value;
  if (!xnn_numel(x)) return 0;
  dst = src;
  int64_t off = 0;
  for (uint32_t k = 0; k < x->num_dims; k++) {
    off += (int64_t)node->p.pad.pre[k] * out.strides[k];
    dst.strides[k] = out.strides[k];
  }
  dst.data = px_sv_at(&out, off);
  return px_sv_copy(ctx, &dst, &src);
}

/* ---- concatenate ------------------------------------------------------------------------ */

int xnn_shape_concatenate(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *first = &values[node->in[0]];
  uint32_t axis = node->p.cat.axis;
  int64_t d[XNN_MAX_DIMS];
  memcpy(d, first->dims, sizeof(int64_t) * first->num_dims);
  for (uint32_t i = 1; i < node->nin; i++) {
    const xnn_value *x = &values[node->in[i]];
    for (uint32_t k = 0; k < x->num_dims; k++)
      if (k != axis && x->dims[k] != d[k])
        return px_fail(ctx, "input %u has size %lld at dim %u, input 0 has %lld", i, (long long)x->dims[k], k,
                       (long long)d[k]);
    d[axis] += x->dims[axis];
  }
  return xnn_set_dims(ctx, node, &values[node->out[0]], first->num_dims, d);
}

int xnn_concat_bytes(const xnn_node *node, xnn_value *values, size_t esize) {
  const xnn_value *o = &values[node->out[0]];
  uint32_t axis = node->p.cat.axis;
  int64_t outer = 1, inner = (int64_t)esize;
  for (uint32_t k = 0; k < axis; k++) outer *= o->dims[k];
  for (uint32_t k = axis + 1; k < o->num_dims; k++) inner *= o->dims[k];
  int64_t row = o->dims[axis] * inner, col = 0;
  char *po = o->data;
  for (uint32_t i = 0; i < node->nin; i++) {
    const xnn_value *x = &values[node->in[i]];
    int64_t chunk = x->dims[axis] * inner;
    const char *px = x->data;
    if (chunk)
      for (int64_t r = 0; r < outer; r++) memcpy(po + r * row + col, px + r * chunk, (size_t)chunk);
    col += chunk;
  }
  return 0;
}

int xnn_exec_concatenate(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  return xnn_concat_bytes(node, values, sizeof(float));
}
