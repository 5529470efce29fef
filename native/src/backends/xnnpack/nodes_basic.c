/*
 * nodes_basic.c - the XNNPACK graph's elementwise nodes on float32: the six
 * broadcasting binary nodes with their output clamp, every one-input
 * pointwise node (Copy and Convert included) and Softmax over the last dim.
 *
 * Binary rows and Sigmoid / Tanh / Exp / Gelu run the portable kernels'
 * vectorised float32 loops (kernels/elementwise/flat.h): this file is built
 * without the kernels' vectoriser flags, and those loops are the ones
 * aten's sigmoid.out and friends run, so the delegate is never slower than
 * the same model left to the portable kernels.
 */
#include <math.h>
#include <string.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backends/xnnpack/nodes.h"
#include "core/cpu.h"
#include "core/parallel.h"
#include "kernels/elementwise/flat.h"
#include "kernels/norm/softmax.h"

/* A row-major px_tensor describing v's current dims (data shared). */
static void view_of(const xnn_value *v, int dtype, px_tensor *t) {
  memset(t, 0, sizeof *t);
  t->data = v->data;
  t->dtype = (int8_t)dtype;
  t->dim = (int32_t)v->num_dims;
  for (uint32_t k = 0; k < v->num_dims; k++) {
    t->sizes[k] = v->dims[k];
    t->dim_order[k] = (uint8_t)k;
  }
  t->contiguous = 1;
  px_tensor_update_layout(t);
}

/* ---- binary ---------------------------------------------------------------- */

int xnn_shape_binary(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *a = &values[node->in[0]], *b = &values[node->in[1]];
  int od;
  int64_t os[PX_MAX_DIM];
  int rc = px_broadcast_sizes(ctx, (int)a->num_dims, a->dims, (int)b->num_dims, b->dims, &od, os);
  if (rc) return rc;
  return xnn_set_dims(ctx, node, &values[node->out[0]], (uint32_t)od, os);
}

static int flat_op(int type) {
  switch (type) {
    case XNN_NODE_add: return PX_F32_ADD;
    case XNN_NODE_subtract: return PX_F32_SUB;
    case XNN_NODE_multiply: return PX_F32_MUL;
    case XNN_NODE_div: return PX_F32_DIV;
    case XNN_NODE_minimum: return PX_F32_MIN;
    default: return PX_F32_MAX;
  }
}

static inline float clampf(float v, float lo, float hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* Elements per piece when a contiguous run is split over threads (a
 * multiple of every vector width). */
#define XNN_PIECE 4096

typedef struct binary_job {
  const px_iter *it;
  const float *pa, *pb;
  float *po;
  int op;
  bool clamp;
  float lo, hi;
  int64_t blk, npiece;
} binary_job;

/* Items [u0, u1): item u is piece u % npiece of iterator row u / npiece. */
static void binary_items(void *arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const binary_job *J = arg;
  px_iter it = *J->it;
  int64_t row = u0 / J->npiece;
  px_iter_seek(&it, row);
  for (int64_t u = u0; u < u1;) {
    int64_t pe = (row + 1) * J->npiece < u1 ? (row + 1) * J->npiece : u1;
    int64_t s0 = (u - row * J->npiece) * J->blk, s1 = (pe - row * J->npiece) * J->blk;
    if (s1 > it.inner) s1 = it.inner;
    const float *x = J->pa + it.off[0] + s0 * it.inner_stride[0], *y = J->pb + it.off[1] + s0 * it.inner_stride[1];
    float *z = J->po + it.off[2] + s0;
    /* the output is row-major and written in order: its inner stride is 1 */
    px_f32_binary(J->op, s1 - s0, x, it.inner_stride[0], y, it.inner_stride[1], z, J->clamp, J->lo, J->hi);
    u = pe;
    row++;
    if (u < u1) px_iter_next(&it);
  }
}

/* [rows, C] op [C] (or [C] op [rows, C]) with C short, as a squeeze-excite
 * block's per-channel scale of an NHWC map: the C-vector repeated R times
 * (R rows' worth, about 1024 floats) is one operand of a run over R rows at
 * a time, instead of one call per row of C (a 56x56x16 map: 3136 calls of
 * 16 floats, 30 us; 4 us this way). Elementwise: the same bits. */
#define BCAST_SPAN 1024

typedef struct bcast_job {
  const float *rep, *full;
  float *po;
  bool rep_first;
  int op;
  bool clamp;
  float lo, hi;
  int64_t rows, inner, R;
} bcast_job;

static void bcast_chunks(void *arg, int64_t c0, int64_t c1, int tid) {
  (void)tid;
  const bcast_job *J = arg;
  for (int64_t c = c0; c < c1; c++) {
    const int64_t r0 = c * J->R, nr = J->rows - r0 < J->R ? J->rows - r0 : J->R, off = r0 * J->inner;
    const float *x = J->rep_first ? J->rep : J->full + off, *y = J->rep_first ? J->full + off : J->rep;
    px_f32_binary(J->op, nr * J->inner, x, 1, y, 1, J->po + off, J->clamp, J->lo, J->hi);
  }
}

/* Runs the broadcast of one row over contiguous rows, if that is what the
 * iterator holds (operands a, b, then the output); false otherwise. */
static bool binary_row_broadcast(const px_iter *it, const float *pa, const float *pb, float *po, int op, bool clamp,
                                 float lo, float hi) {
  if (it->dim != 1 || it->inner >= BCAST_SPAN / 4) return false; /* one outer dim beside the inner run */
  const int64_t C = it->inner, rows = it->sizes[0];
  for (int i = 0; i < 3; i++)
    if (it->inner_stride[i] != 1) return false;
  if (it->strides[2][0] != C) return false;
  int rep;
  if (it->strides[0][0] == 0 && it->strides[1][0] == C) rep = 0;
  else if (it->strides[1][0] == 0 && it->strides[0][0] == C) rep = 1;
  else return false;
  _Alignas(64) float buf[BCAST_SPAN + BCAST_SPAN / 4];
  const int64_t R = (BCAST_SPAN + C - 1) / C;
  const float *v = rep == 0 ? pa : pb;
  for (int64_t r = 0; r < R; r++) memcpy(buf + r * C, v, sizeof(float) * (size_t)C);
  bcast_job J = {buf, rep == 0 ? pb : pa, po, rep == 0, op, clamp, lo, hi, rows, C, R};
  px_parallel_for((rows + R - 1) / R, 1, rows * C * 12, bcast_chunks, &J);
  return true;
}

int xnn_exec_binary(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  px_tensor a, b, o;
  view_of(&values[node->in[0]], PX_F32, &a);
  view_of(&values[node->in[1]], PX_F32, &b);
  view_of(&values[node->out[0]], PX_F32, &o);
  if (o.numel == 0) return 0;
  const float *pa = a.data, *pb = b.data;
  float *po = o.data;
  const float lo = node->output_min, hi = node->output_max;
  const bool clamp = !xnn_unbounded(lo, hi);
  const int op = flat_op(node->type);
  /* The iterator merges the dims that allow it; its inner run is the last
   * (contiguous) dim, so [N,H,W,C] x [N,1,1,C] is a unit-stride pair per
   * pixel and a same-shape pair one run over everything. */
  px_iter it;
  px_iter_init(&it, o.dim, o.sizes);
  px_iter_add(&it, &a);
  px_iter_add(&it, &b);
  px_iter_add(&it, &o);
  px_iter_coalesce(&it);
  if (binary_row_broadcast(&it, pa, pb, po, op, clamp, lo, hi)) return 0;
  /* Rows of the iterator (pieces of them when there are few) are shared out
   * over the thread pool; the split changes no bit. */
  int64_t rows = o.numel / it.inner;
  binary_job J = {.it = &it, .pa = pa, .pb = pb, .po = po, .op = op, .clamp = clamp, .lo = lo, .hi = hi};
  J.blk = rows >= 64 ? it.inner : XNN_PIECE;
  J.npiece = (it.inner + J.blk - 1) / J.blk;
  px_parallel_for(rows * J.npiece, 1, o.numel * 12, binary_items, &J);
  return 0;
}

/* ---- unary -------------------------------------------------------------------- */

int xnn_shape_unary(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  return xnn_set_dims(ctx, node, &values[node->out[0]], x->num_dims, x->dims);
}

static inline float unary_op(const xnn_node *node, float x) {
  switch (node->type) {
    case XNN_NODE_sigmoid: return 1.0f / (1.0f + expf(-x));
    case XNN_NODE_tanh: return tanhf(x);
    case XNN_NODE_exp: return expf(x);
    case XNN_NODE_log: return logf(x);
    case XNN_NODE_abs: return fabsf(x);
    case XNN_NODE_negate: return -x;
    case XNN_NODE_square: return x * x;
    case XNN_NODE_square_root: return sqrtf(x);
    case XNN_NODE_reciprocal_square_root: return 1.0f / sqrtf(x);
    case XNN_NODE_floor: return floorf(x);
    case XNN_NODE_ceiling: return ceilf(x);
    case XNN_NODE_sin: return sinf(x);
    case XNN_NODE_cos: return cosf(x);
    case XNN_NODE_gelu: return (float)(0.5 * (double)x * (1.0 + erf((double)x * 0.70710678118654752440)));
    case XNN_NODE_hardswish: return clampf(fmaf(x, 1.0f / 6.0f, 0.5f), 0.0f, 1.0f) * x;
    case XNN_NODE_elu: return x < 0.0f ? node->p.elu.alpha * expm1f(x) : x;
    case XNN_NODE_leaky_relu: return x < 0.0f ? x * node->p.leaky_relu.negative_slope : x;
    case XNN_NODE_clamp: return isnan(x) ? x : clampf(x, node->output_min, node->output_max);
    default: return x; /* copy */
  }
}

/* Hardswish as XNNPACK computes it, x times clamp(x / 6 + 1/2, 0, 1), the
 * x / 6 + 1/2 one fused multiply-add where the CPU has FMA (XNNPACK's FMA3,
 * AVX-512 and NEON kernels), a multiply then an add elsewhere (its SSE
 * kernels); so x >= 3 gives x itself. In 256-bit vectors where the CPU has
 * them (the baseline build's 128-bit loop ran at about half the speed on a
 * 56x56x128 map). */
#define HARDSWISH_LOOP(SCALED)                                    \
  for (int64_t k = 0; k < n; k++) {                               \
    const float v = x[k], t = (SCALED);                           \
    y[k] = (t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t) * v;           \
  }
#if defined(__GNUC__) && defined(__x86_64__)
/* max(t, 0) gives 0 for a NaN t (x NaN), where the loop's t < 0 test keeps
 * t: either way the product is x's NaN, so the bits are the loop's. Four
 * operations a vector, where the compiler's blends of the loop took eleven
 * (a 56x56x128 map: 41 -> 33 us). */
__attribute__((target("avx2,fma"))) static void hardswish_fma(int64_t n, const float *x, float *y) {
  const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
  const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    const __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v, sixth, half), zero), one);
    _mm256_storeu_ps(y + k, _mm256_mul_ps(t, v));
  }
  for (; k < n; k++) {
    const float v = x[k], t = fmaf(v, 1.0f / 6.0f, 0.5f);
    y[k] = (t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t) * v;
  }
}
#endif
static void hardswish_f32(int64_t n, const float *x, float *y) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (px_cpu()->avx2 && px_cpu()->fma) {
    hardswish_fma(n, x, y);
    return;
  }
  HARDSWISH_LOOP(v * (1.0f / 6.0f) + 0.5f)
#else
  HARDSWISH_LOOP(fmaf(v, 1.0f / 6.0f, 0.5f)) /* aarch64: FMA in every NEON unit */
#endif
}
#undef HARDSWISH_LOOP

typedef struct unary_job {
  const xnn_node *node;
  const float *x;
  float *y;
  int64_t n;
  bool half; /* the output is an fp16 / bf16 value: the portable sigmoid's bits, which round as ExecuTorch's */
} unary_job;

static void unary_pieces(void *arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const unary_job *J = arg;
  int64_t b = p0 * XNN_PIECE, e = p1 * XNN_PIECE < J->n ? p1 * XNN_PIECE : J->n, n = e - b;
  const float *x = J->x + b;
  float *y = J->y + b;
  switch (J->node->type) {
    case XNN_NODE_sigmoid:
      if (J->half)
        px_f32_sigmoid(n, x, y);
      else
        px_f32_sigmoid_fast(n, x, y);
      return;
    case XNN_NODE_tanh: px_f32_tanh(n, x, y); return;
    case XNN_NODE_exp: px_f32_exp(n, x, y); return;
    case XNN_NODE_gelu: px_f32_gelu(n, x, y); return;
    case XNN_NODE_hardswish: hardswish_f32(n, x, y); return;
    default: break;
  }
  /* The cheap operations as loops of their own (the switch hoisted out, so
   * they vectorise), each computing unary_op's expression. */
#define MAP(EXPR)                    \
  for (int64_t k = 0; k < n; k++) {  \
    const float v = x[k];            \
    y[k] = (EXPR);                   \
  }                                  \
  return
  const xnn_node *node = J->node;
  switch (node->type) {
    case XNN_NODE_abs: MAP(fabsf(v));
    case XNN_NODE_negate: MAP(-v);
    case XNN_NODE_square: MAP(v * v);
    case XNN_NODE_square_root: MAP(sqrtf(v));
    case XNN_NODE_reciprocal_square_root: MAP(1.0f / sqrtf(v));
    case XNN_NODE_leaky_relu: {
      const float s = node->p.leaky_relu.negative_slope;
      MAP(v < 0.0f ? v * s : v);
    }
    case XNN_NODE_clamp: {
      const float lo = node->output_min, hi = node->output_max;
      MAP(isnan(v) ? v : clampf(v, lo, hi));
    }
    default: break;
  }
#undef MAP
  for (int64_t k = 0; k < n; k++) y[k] = unary_op(node, x[k]);
}

int xnn_exec_unary(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *xv = &values[node->in[0]];
  xnn_value *ov = &values[node->out[0]];
  int64_t n = xnn_numel(ov);
  /* Convert between float types is a copy here: fp16 / bf16 values are
   * float32 storage, and the backend rounds the output to its type. */
  if (node->type == XNN_NODE_copy || node->type == XNN_NODE_convert) {
    if (n && ov->data != xv->data) memmove(ov->data, xv->data, (size_t)n * sizeof(float));
    return 0;
  }
  /* pieces of XNN_PIECE elements shared out over the thread pool */
  unary_job J = {node, xv->data, ov->data, n, ov->half != 0};
  px_parallel_for((n + XNN_PIECE - 1) / XNN_PIECE, 1, n * 16, unary_pieces, &J);
  return 0;
}

/* fuse.c's silu node: per piece, the Sigmoid node's loop into a buffer the
 * cache holds, then the Multiply node's loop of x by it with the
 * Multiply's bounds, so the bits are the two nodes' (a product of two
 * floats does not depend on their order). */
typedef struct silu_job {
  const float *x;
  float *y;
  int64_t n;
  bool clamp;
  float lo, hi;
} silu_job;

static void silu_pieces(void *arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const silu_job *J = arg;
  _Alignas(64) float s[XNN_PIECE];
  for (int64_t p = p0; p < p1; p++) {
    const int64_t b = p * XNN_PIECE, n = J->n - b < XNN_PIECE ? J->n - b : XNN_PIECE;
    px_f32_sigmoid_fast(n, J->x + b, s);
    px_f32_binary(PX_F32_MUL, n, J->x + b, 1, s, 1, J->y + b, J->clamp, J->lo, J->hi);
  }
}

static void silu_run(silu_job *J) {
  if (J->n > 0) px_parallel_for((J->n + XNN_PIECE - 1) / XNN_PIECE, 1, J->n * 20, silu_pieces, J);
}

/* A Hardswish node's loop in place (elementwise: the same bits on a row
 * as on the node's pieces). */
static void hardswish_inplace(int64_t n, float *y) { hardswish_f32(n, y, y); }

xnn_post_row_fn xnn_post_fn(const xnn_node *node) {
  switch (node->post) {
    case XNN_POST_SILU: return px_f32_mul_sigmoid_fast_inplace;
    case XNN_POST_HARDSWISH: return hardswish_inplace;
    default: return NULL;
  }
}

const char *xnn_post_name(int post) {
  return post == XNN_POST_SILU ? "SiLU" : post == XNN_POST_HARDSWISH ? "Hardswish" : "";
}

typedef struct post_job {
  xnn_post_row_fn fn;
  float *y;
  int64_t n;
} post_job;

static void post_pieces(void *arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const post_job *J = arg;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t b = p * XNN_PIECE;
    J->fn(J->n - b < XNN_PIECE ? J->n - b : XNN_PIECE, J->y + b);
  }
}

/* The post's row function over pieces, on the pool: the bits of the node
 * it stands for (the SiLU's row function computes the silu node's sigmoid,
 * then its product). */
void xnn_post_all(const xnn_node *node, float *y, int64_t n) {
  post_job J = {xnn_post_fn(node), y, n};
  if (J.fn && n > 0) px_parallel_for((n + XNN_PIECE - 1) / XNN_PIECE, 1, n * 16, post_pieces, &J);
}

int xnn_exec_silu(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *xv = &values[node->in[0]];
  xnn_value *ov = &values[node->out[0]];
  const float lo = node->output_min, hi = node->output_max;
  silu_job J = {.x = xv->data, .y = ov->data, .n = xnn_numel(ov), .lo = lo, .hi = hi,
                .clamp = !xnn_unbounded(lo, hi)};
  silu_run(&J);
  return 0;
}

/* ---- softmax --------------------------------------------------------------------- */

typedef struct softmax_job {
  const float *x;
  float *y;
  int64_t cols;
} softmax_job;

/* Rows [r0, r1), each whole on one thread: the portable softmax's
 * vectorised row (kernels/norm/softmax.h). */
static void softmax_rows(void *arg, int64_t r0, int64_t r1, int tid) {
  (void)tid;
  const softmax_job *J = arg;
  for (int64_t r = r0; r < r1; r++) px_f32_softmax_row(J->cols, J->x + r * J->cols, J->y + r * J->cols);
}

int xnn_exec_softmax(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *xv = &values[node->in[0]];
  xnn_value *ov = &values[node->out[0]];
  int64_t cols = xv->dims[xv->num_dims - 1];
  int64_t n = xnn_numel(xv);
  if (!n || !cols) return 0;
  softmax_job J = {xv->data, ov->data, cols};
  px_parallel_for(n / cols, 1, n * 16, softmax_rows, &J);
  return 0;
}

/* ---- a range of an elementwise node's output ------------------------------------------- */

/* How an elementwise node of this type runs: 2 binary (xnn_exec_binary), 1
 * one-input pointwise (xnn_exec_unary, not Copy or Convert), 3 the silu
 * node; 0 none of those. By type: on float32 values (checked below) these
 * are the float functions plan.c gives the type. */
static int elementwise_kind(int type) {
  switch (type) {
    case XNN_NODE_add: case XNN_NODE_subtract: case XNN_NODE_multiply: case XNN_NODE_div:
    case XNN_NODE_minimum: case XNN_NODE_maximum: return 2;
    case XNN_NODE_sigmoid: case XNN_NODE_tanh: case XNN_NODE_exp: case XNN_NODE_log: case XNN_NODE_abs:
    case XNN_NODE_negate: case XNN_NODE_square: case XNN_NODE_square_root: case XNN_NODE_reciprocal_square_root:
    case XNN_NODE_floor: case XNN_NODE_ceiling: case XNN_NODE_sin: case XNN_NODE_cos: case XNN_NODE_gelu:
    case XNN_NODE_hardswish: case XNN_NODE_elu: case XNN_NODE_leaky_relu: case XNN_NODE_clamp: return 1;
    case XNN_NODE_silu: return 3;
    default: return 0;
  }
}

bool xnn_elementwise_range_ok(const xnn_node *node, const xnn_value *values) {
  const int kind = elementwise_kind(node->type);
  if (!kind || node->nout != 1 || node->nin != (kind == 2 ? 2u : 1u)) return false;
  for (uint32_t k = 0; k < node->nin + node->nout; k++) {
    const uint32_t id = k < node->nin ? node->in[k] : node->out[k - node->nin];
    if (id == XNN_INVALID_ID || values[id].datatype != XNN_DT_FP32 || values[id].half ||
        values[id].quant.kind != XNN_Q_NONE)
      return false;
  }
  return true;
}

int xnn_shape_elementwise(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return elementwise_kind(node->type) == 2 ? xnn_shape_binary(ctx, node, values) : xnn_shape_unary(ctx, node, values);
}

void xnn_elementwise_range(const xnn_node *node, const xnn_value *values, int64_t a, int64_t b, float *out) {
  if (a >= b) return;
  const int kind = elementwise_kind(node->type);
  if (kind == 1) {
    unary_job J = {node, (const float *)values[node->in[0]].data + a, out, b - a, values[node->out[0]].half != 0};
    unary_pieces(&J, 0, (b - a + XNN_PIECE - 1) / XNN_PIECE, 0);
    return;
  }
  if (kind == 3) {
    const float lo = node->output_min, hi = node->output_max;
    silu_job J = {.x = (const float *)values[node->in[0]].data + a, .y = out, .n = b - a, .lo = lo, .hi = hi,
                  .clamp = !xnn_unbounded(lo, hi)};
    silu_pieces(&J, 0, (b - a + XNN_PIECE - 1) / XNN_PIECE, 0);
    return;
  }
  /* binary: the node's iterator (its operands' broadcast, merged dims), its
   * runs clipped to [a, b) */
  px_tensor ta, tb, to;
  view_of(&values[node->in[0]], PX_F32, &ta);
  view_of(&values[node->in[1]], PX_F32, &tb);
  view_of(&values[node->out[0]], PX_F32, &to);
  px_iter it;
  px_iter_init(&it, to.dim, to.sizes);
  px_iter_add(&it, &ta);
  px_iter_add(&it, &tb);
  px_iter_add(&it, &to);
  px_iter_coalesce(&it);
  const float lo = node->output_min, hi = node->output_max;
  const bool clamp = !xnn_unbounded(lo, hi);
  const int op = flat_op(node->type);
  const float *pa = ta.data, *pb = tb.data;
  int64_t row = a / it.inner, s = a - row * it.inner;
  px_iter_seek(&it, row);
  while (a < b) {
    const int64_t e = b - a < it.inner - s ? b - a : it.inner - s;
    px_f32_binary(op, e, pa + it.off[0] + s * it.inner_stride[0], it.inner_stride[0],
                  pb + it.off[1] + s * it.inner_stride[1], it.inner_stride[1], out, clamp, lo, hi);
    out += e;
    a += e;
    s = 0;
    if (a < b) px_iter_next(&it);
  }
}
