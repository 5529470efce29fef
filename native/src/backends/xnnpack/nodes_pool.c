/*
 * nodes_pool.c - the XNNPACK delegate's other spatial nodes on NHWC
 * float32: AvgPooling2d (11), MaxPooling2d (14), GlobalAvgPooling2d (19),
 * ArgMaxPooling2d (21), StaticResizeBilinear2D (9) and PReLU (31).
 * Convolutions are nodes_conv.c.
 *
 * These nodes have no prepare hook: their parameters (from the payload,
 * untrusted) are checked by the shape function on every run, which costs a
 * few comparisons. Every loop keeps a pixel's channels innermost (contiguous
 * in NHWC).
 */
#include <math.h>
#include <string.h>

#include "backends/xnnpack/nodes.h"
#include "core/cpu.h"
#include "core/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#define POOL_X86 1
#else
#define POOL_X86 0
#endif

/* Largest pooling size, stride, dilation or padding accepted. */
#define POOL_PARAM_MAX (1u << 24)

static int require_nhwc(px_ctx *ctx, const xnn_value *x, const xnn_value *y) {
  if (x->num_dims != 4 || y->num_dims != 4)
    return px_fail(ctx, "input and output must be 4-D (NHWC), got %u and %u dims",
                   x->num_dims, y->num_dims);
  if (x->datatype != XNN_DT_FP32 || y->datatype != XNN_DT_FP32)
    return px_fail(ctx, "only fp32 values are supported");
  return 0;
}

/* Sets y's dims to d after checking each against its bound. */
static int set_out(px_ctx *ctx, const xnn_node *node, xnn_value *y,
                   const int64_t *d) {
  for (uint32_t k = 0; k < y->num_dims; k++)
    if (d[k] > y->max_dims[k])
      return px_fail(ctx, "output dim %u would be %lld, above its bound %lld", k,
                     (long long)d[k], (long long)y->max_dims[k]);
  return xnn_set_dims(ctx, node, y, y->num_dims, d);
}

typedef float v4f __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef int32_t v4i __attribute__((vector_size(16)));
#define V4(p) (*(v4f_u *)(p))
/* a where m is false, b where m is true (m a comparison's all-ones mask) */
static inline v4f vsel(v4i m, v4f a, v4f b) { return (v4f)(((v4i)a & ~m) | ((v4i)b & m)); }


static float clampf(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

/* ---- windowed pooling ------------------------------------------------------ */

typedef struct pool_geom {
  int64_t N, H, W, C, OH, OW;
  int64_t ph, pw, sh, sw, dh, dw, pt, pl;
} pool_geom;

/* Reads the node's window (Avg/MaxPooling2d, or ArgMaxPooling2d with stride =
 * size and dilation 1), checks it and the input, and computes the output
 * size. */
static int pool_geometry(px_ctx *ctx, const xnn_node *node,
                         const xnn_value *values, pool_geom *g) {
  const xnn_value *x = &values[node->in[0]], *y = &values[node->out[0]];
  int rc = require_nhwc(ctx, x, y);
  if (rc) return rc;
  uint32_t pr[10];
  if (node->type == XNN_NODE_argmax_pooling2d) {
    pr[0] = node->p.argmax.padding_top, pr[1] = node->p.argmax.padding_right;
    pr[2] = node->p.argmax.padding_bottom, pr[3] = node->p.argmax.padding_left;
    pr[4] = node->p.argmax.pooling_height, pr[5] = node->p.argmax.pooling_width;
    pr[6] = pr[4], pr[7] = pr[5], pr[8] = 1, pr[9] = 1;
  } else {
    pr[0] = node->p.pool.padding_top, pr[1] = node->p.pool.padding_right;
    pr[2] = node->p.pool.padding_bottom, pr[3] = node->p.pool.padding_left;
    pr[4] = node->p.pool.pooling_height, pr[5] = node->p.pool.pooling_width;
    pr[6] = node->p.pool.stride_height, pr[7] = node->p.pool.stride_width;
    pr[8] = node->p.pool.dilation_height, pr[9] = node->p.pool.dilation_width;
    /* the writer leaves AvgPooling2d's dilation 0 ("unused") */
    if (node->type == XNN_NODE_avg_pooling2d) pr[8] = pr[9] = 1;
  }
  for (int k = 0; k < 10; k++)
    if (pr[k] > POOL_PARAM_MAX)
      return px_fail(ctx, "parameter %u exceeds %u", pr[k], POOL_PARAM_MAX);
  if (!pr[4] || !pr[5] || !pr[6] || !pr[7] || !pr[8] || !pr[9])
    return px_fail(ctx, "pooling size %ux%u, stride %ux%u and dilation %ux%u must be positive",
                   pr[4], pr[5], pr[6], pr[7], pr[8], pr[9]);
  g->N = x->dims[0], g->H = x->dims[1], g->W = x->dims[2], g->C = x->dims[3];
  g->pt = pr[0], g->pl = pr[3], g->ph = pr[4], g->pw = pr[5];
  g->sh = pr[6], g->sw = pr[7], g->dh = pr[8], g->dw = pr[9];
  int64_t effh = g->dh * (g->ph - 1) + 1, effw = g->dw * (g->pw - 1) + 1;
  int64_t padh = g->H + pr[0] + pr[2], padw = g->W + pr[1] + pr[3];
  if (padh < effh || padw < effw)
    return px_fail(ctx, "a %lldx%lld window does not fit the %lldx%lld padded input",
                   (long long)effh, (long long)effw, (long long)padh, (long long)padw);
  g->OH = (padh - effh) / g->sh + 1;
  g->OW = (padw - effw) / g->sw + 1;
  return 0;
}

static int pool_shape(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  pool_geom g;
  int rc = pool_geometry(ctx, node, values, &g);
  if (rc) return rc;
  int64_t d[4] = {g.N, g.OH, g.OW, g.C};
  if ((rc = set_out(ctx, node, &values[node->out[0]], d))) return rc;
  if (node->type == XNN_NODE_argmax_pooling2d) {
    xnn_value *idx = &values[node->out[1]];
    if (idx->num_dims != 4 || idx->datatype != XNN_DT_INT32)
      return px_fail(ctx, "the index output must be a 4-D int32 value");
    return set_out(ctx, node, idx, d);
  }
  return 0;
}

int xnn_shape_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return pool_shape(ctx, node, values);
}
int xnn_shape_max_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return pool_shape(ctx, node, values);
}
int xnn_shape_argmax_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return pool_shape(ctx, node, values);
}

/* The taps of output pixel (oh, ow) inside the input: rows [ki0, ki1) and
 * columns [kj0, kj1) of the window. */
static void window(const pool_geom *g, int64_t oh, int64_t ow, int64_t *ki0, int64_t *ki1,
                   int64_t *kj0, int64_t *kj1) {
  int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
  int64_t a = 0, b = g->ph, c = 0, d = g->pw;
  while (a < b && ih0 + a * g->dh < 0) a++;
  while (b > a && ih0 + (b - 1) * g->dh >= g->H) b--;
  while (c < d && iw0 + c * g->dw < 0) c++;
  while (d > c && iw0 + (d - 1) * g->dw >= g->W) d--;
  *ki0 = a, *ki1 = b, *kj0 = c, *kj1 = d;
}

/* One output pixel of a max pool: o[c] = the max over the taps xs[0..nt)
 * (in window order) of channel c, from -inf (the padding), a tap replacing
 * it when greater or NaN (a NaN propagates, as in torch's max pooling; the
 * last NaN met wins), then clamped to [lo, hi] (a NaN stays); channels VL
 * at a time in registers. */
#define DEFINE_MAX_PIXEL(NAME, ATTR, VT, VI, VTU, VL)                                              \
  ATTR static void NAME(int64_t C, int nt, const float *const *xs, float lo, float hi, float *o) {  \
    const VT vlo = (VT){0} + lo, vhi = (VT){0} + hi;                                               \
    int64_t c = 0;                                                                                 \
    for (; c + VL <= C; c += VL) {                                                                 \
      VT a = (VT){0} - INFINITY;                                                                   \
      for (int t = 0; t < nt; t++) {                                                               \
        const VT b = *(const VTU *)(xs[t] + c);                                                    \
        const VI m = (b > a) | (b != b);                                                           \
        a = (VT)(((VI)a & ~m) | ((VI)b & m));                                                      \
      }                                                                                            \
      const VI under = a < vlo, over = a > vhi;                                                    \
      a = (VT)(((VI)a & ~under) | ((VI)vlo & under));                                              \
      *(VTU *)(o + c) = (VT)(((VI)a & ~over) | ((VI)vhi & over));                                  \
    }                                                                                              \
    for (; c < C; c++) {                                                                           \
      float a = -INFINITY;                                                                         \
      for (int t = 0; t < nt; t++) a = (xs[t][c] > a || xs[t][c] != xs[t][c]) ? xs[t][c] : a;      \
      o[c] = clampf(a, lo, hi);                                                                    \
    }                                                                                              \
  }
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32)));
DEFINE_MAX_PIXEL(max_pixel, , v4f, v4i, v4f_u, 4)
#if POOL_X86
typedef float v16f __attribute__((vector_size(64)));
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t v16i __attribute__((vector_size(64)));
DEFINE_MAX_PIXEL(max_pixel_avx2, __attribute__((target("avx2"))), v8f, v8i, v8f_u, 8)
DEFINE_MAX_PIXEL(max_pixel_avx512, __attribute__((target("avx512f"))), v16f, v16i, v16f_u, 16)
#endif

typedef struct max_job {
  const pool_geom *g;
  const float *x;
  float *y;
  const float **taps; /* per thread: ph * pw tap pointers */
  float lo, hi;
  int isa; /* 0 baseline, 1 AVX2, 2 AVX-512 */
} max_job;

/* Output rows [r0, r1) (row = n * OH + oh); each pixel computed the same
 * way whichever thread holds it. */
static void max_rows(void *arg, int64_t r0, int64_t r1, int tid) {
  const max_job *j = arg;
  const pool_geom *g = j->g;
  const float **xs = j->taps + (int64_t)tid * g->ph * g->pw;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t n = r / g->OH, oh = r % g->OH;
    for (int64_t ow = 0; ow < g->OW; ow++) {
      int64_t ki0, ki1, kj0, kj1;
      window(g, oh, ow, &ki0, &ki1, &kj0, &kj1);
      int nt = 0;
      for (int64_t ki = ki0; ki < ki1; ki++)
        for (int64_t kj = kj0; kj < kj1; kj++)
          xs[nt++] = j->x + ((n * g->H + oh * g->sh - g->pt + ki * g->dh) * g->W + ow * g->sw - g->pl +
                             kj * g->dw) * g->C;
      float *o = j->y + (r * g->OW + ow) * g->C;
#if POOL_X86
      if (j->isa == 2) {
        max_pixel_avx512(g->C, nt, xs, j->lo, j->hi, o);
        continue;
      }
      if (j->isa == 1) {
        max_pixel_avx2(g->C, nt, xs, j->lo, j->hi, o);
        continue;
      }
#endif
      max_pixel(g->C, nt, xs, j->lo, j->hi, o);
    }
  }
}

int xnn_exec_max_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  pool_geom g;
  int rc = pool_geometry(ctx, node, values, &g);
  if (rc) return rc;
  const int64_t rows = g.N * g.OH, T = px_parallel_threads();
  max_job j = {&g, values[node->in[0]].data, values[node->out[0]].data, NULL, node->output_min, node->output_max,
               !POOL_X86 ? 0 : px_cpu()->avx512f ? 2 : px_cpu()->avx2};
  j.taps = px_scratch(ctx, sizeof(float *) * (size_t)(g.ph * g.pw * T));
  if (!j.taps) return PYEXEC_ERR_EXECUTION;
  px_parallel_for(rows, 1, rows * g.OW * g.C * g.ph * g.pw, max_rows, &j);
  return 0;
}

typedef struct avg_job {
  const pool_geom *g;
  const float *x;
  float *y;
  const float *zero; /* C zeros: the taps in the padding read them */
  const float **taps; /* per thread: ph * pw + 8 tap pointers */
  float lo, hi;
} avg_job;

/* XNNPACK's sum of one pass of 9 taps (its 9p kernel's tree):
 * ((t2 + t3) + (t4 + t5)) + (((t0 + t1) + t8) + (t6 + t7)). */
#define AVG_TREE9(L, t)                                                                      \
  (((L((t)[2]) + L((t)[3])) + (L((t)[4]) + L((t)[5]))) +                                   \
   (((L((t)[0]) + L((t)[1])) + L((t)[8])) + (L((t)[6]) + L((t)[7]))))

#if POOL_X86
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32)));
#define V8(p) (*(v8f_u *)(p))

/* One pixel of a window of at most 9 taps (t[0..9)), 8 channels at a time
 * with AVX2, the same arithmetic as avg_rows; returns the channels done. */
__attribute__((target("avx2"))) static int64_t avg_pixel9_avx2(const float *const *t, int64_t C, float scale,
                                                               float lo, float hi, float *o) {
  const float *const p0 = t[0], *const p1 = t[1], *const p2 = t[2], *const p3 = t[3], *const p4 = t[4];
  const float *const p5 = t[5], *const p6 = t[6], *const p7 = t[7], *const p8 = t[8];
  const v8f vs = {scale, scale, scale, scale, scale, scale, scale, scale};
  const v8f vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi}, zero = {0};
  int64_t c = 0;
  for (; c + 8 <= C; c += 8) {
    const v8f sum = ((V8(p2 + c) + V8(p3 + c)) + (V8(p4 + c) + V8(p5 + c))) +
                    (((V8(p0 + c) + V8(p1 + c)) + V8(p8 + c)) + (V8(p6 + c) + V8(p7 + c)));
    v8f v = (zero + sum) * vs;
    v8i m = v < vlo;
    v = (v8f)(((v8i)v & ~m) | ((v8i)vlo & m));
    m = v > vhi;
    V8(o + c) = (v8f)(((v8i)v & ~m) | ((v8i)vhi & m));
  }
  return c;
}
#endif

/* Output rows [r0, r1) (image * OH + output row) of an average pooling, as
 * XNNPACK computes it: the window's taps listed column by column (as its
 * indirection buffer lists them), those in the padding reading zeros; in
 * passes of 9 (the last padded with zeros), each pass's tree added to the
 * previous passes' sum (from +0.0); then times 1 / (taps inside the input)
 * and clamped. 8 channels at a time (AVX2, one pass), or 4, the rest one by one. */
static void avg_rows(void *arg, int64_t r0, int64_t r1, int tid) {
  const avg_job *j = arg;
  const pool_geom *g = j->g;
  const int64_t C = g->C, KK = g->ph * g->pw, passes = (KK + 8) / 9;
  const float **t = j->taps + (int64_t)tid * (passes * 9);
  for (int64_t row = r0; row < r1; row++) {
    const int64_t n = row / g->OH, oh = row % g->OH;
    for (int64_t ow = 0; ow < g->OW; ow++) {
      float *o = j->y + (row * g->OW + ow) * C;
      const int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
      int64_t k = 0, inside = 0;
      for (int64_t kj = 0; kj < g->pw; kj++)
        for (int64_t ki = 0; ki < g->ph; ki++, k++) {
          const int64_t ih = ih0 + ki * g->dh, iw = iw0 + kj * g->dw;
          const bool in = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;
          t[k] = in ? j->x + ((n * g->H + ih) * g->W + iw) * C : j->zero;
          inside += in;
        }
      for (; k < passes * 9; k++) t[k] = j->zero;
      /* a window wholly in the padding gives 0 */
      const float scale = inside ? 1.0f / (float)inside : 0.0f;
      const v4f vs = {scale, scale, scale, scale}, vlo = {j->lo, j->lo, j->lo, j->lo}, vhi = {j->hi, j->hi, j->hi, j->hi};
      int64_t c = 0;
#if POOL_X86
      if (passes == 1 && px_cpu()->avx2) c = avg_pixel9_avx2(t, C, scale, j->lo, j->hi, o);
#endif
      for (; c + 4 <= C; c += 4) {
#define AVG_V4(p) V4((p) + c)
        v4f acc = {0};
        for (int64_t p = 0; p < passes; p++) acc = acc + AVG_TREE9(AVG_V4, t + 9 * p);
#undef AVG_V4
        v4f v = acc * vs; /* clampf's comparisons: a NaN passes through */
        v = vsel(v < vlo, v, vlo);
        V4(o + c) = vsel(v > vhi, v, vhi);
      }
      for (; c < C; c++) {
#define AVG_S(p) (p)[c]
        float acc = 0.0f;
        for (int64_t p = 0; p < passes; p++) acc = acc + AVG_TREE9(AVG_S, t + 9 * p);
#undef AVG_S
        o[c] = clampf(acc * scale, j->lo, j->hi);
      }
    }
  }
}

int xnn_exec_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  pool_geom g;
  int rc = pool_geometry(ctx, node, values, &g);
  if (rc) return rc;
  const int T = px_parallel_threads();
  const size_t ntaps = (size_t)((g.ph * g.pw + 8) / 9 * 9);
  float *zero = px_scratch(ctx, sizeof(float) * (size_t)(g.C > 0 ? g.C : 1));
  const float **taps = px_scratch(ctx, sizeof(*taps) * ntaps * (size_t)T);
  if (!zero || !taps) return PYEXEC_ERR_EXECUTION;
  memset(zero, 0, sizeof(float) * (size_t)(g.C > 0 ? g.C : 1));
  avg_job j = {&g, values[node->in[0]].data, values[node->out[0]].data, zero, taps, node->output_min,
               node->output_max};
  const int64_t rows = g.N * g.OH;
  px_parallel_for(rows, 1, rows * g.OW * g.C * g.ph * g.pw, avg_rows, &j);
  return 0;
}

int xnn_exec_argmax_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  pool_geom g;
  int rc = pool_geometry(ctx, node, values, &g);
  if (rc) return rc;
  const float *x = values[node->in[0]].data;
  float *y = values[node->out[0]].data;
  int32_t *yi = values[node->out[1]].data;
  const int64_t C = g.C;
  if (g.ph * g.pw > INT32_MAX)
    return px_fail(ctx, "a %lldx%lld window has indices beyond int32", (long long)g.ph,
                   (long long)g.pw);
  if (g.H < 1 || g.W < 1) return 0; /* then there is no output either */
  /* As XNNPACK: the window is walked down each column first, index
   * kj * ph + ki; a tap in the padding reads the nearest input pixel (its
   * coordinates clamped into the input), so it ties with that pixel and,
   * coming first, may give its own index; the first maximum wins. */
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t oh = 0; oh < g.OH; oh++)
      for (int64_t ow = 0; ow < g.OW; ow++) {
        int64_t off = ((n * g.OH + oh) * g.OW + ow) * C;
        float *o = y + off;
        int32_t *oi = yi + off;
        for (int64_t kj = 0; kj < g.pw; kj++) {
          int64_t iw = ow * g.pw - g.pl + kj;
          iw = iw < 0 ? 0 : iw >= g.W ? g.W - 1 : iw;
          for (int64_t ki = 0; ki < g.ph; ki++) {
            int64_t ih = oh * g.ph - g.pt + ki;
            ih = ih < 0 ? 0 : ih >= g.H ? g.H - 1 : ih;
            const float *xp = x + ((n * g.H + ih) * g.W + iw) * C;
            int32_t k = (int32_t)(kj * g.ph + ki);
            if (k == 0) {
              memcpy(o, xp, sizeof(float) * (size_t)C);
              memset(oi, 0, sizeof(int32_t) * (size_t)C);
              continue;
            }
            for (int64_t c = 0; c < C; c++)
              if (xp[c] > o[c]) o[c] = xp[c], oi[c] = k;
          }
        }
      }
  return 0;
}

/* ---- GlobalAvgPooling2d -------------------------------------------------------- */

int xnn_shape_global_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  int rc = require_nhwc(ctx, x, y);
  if (rc) return rc;
  int64_t d[4] = {x->dims[0], 1, 1, x->dims[3]};
  return set_out(ctx, node, y, d);
}

/* GlobalAvgPooling2d: each channel's sum over the pixels in pixel order
 * (from 0, one add a pixel), times 1 / HW, clamped. Channels go in blocks
 * of GAP_CB, over the pool, each block's sums in registers while the
 * pixels stream past: the same additions in the same order as a running
 * sum in memory, so the same bits however the channels are split. */
#define GAP_CB 64

typedef struct gap_job {
  const float *x;
  float *y;
  int64_t N, HW, C, nb; /* nb: channel blocks per image */
  float scale, lo, hi;
} gap_job;

#define DEFINE_GAP_BLOCK(NAME, ATTR, VT, VTU, VL)                                                 \
  ATTR static void NAME(const float *x, int64_t HW, int64_t C, int64_t nc, float *o) {             \
    VT acc[GAP_CB / VL];                                                                           \
    const int nv = (int)(nc / VL);                                                                 \
    for (int v = 0; v < nv; v++) acc[v] = (VT){0};                                                 \
    for (int64_t c = nv * VL; c < nc; c++) o[c] = 0.0f;                                            \
    for (int64_t p = 0; p < HW; p++) {                                                             \
      const float *xp = x + p * C;                                                                 \
      for (int v = 0; v < nv; v++) acc[v] += *(const VTU *)(xp + v * VL);                          \
      for (int64_t c = nv * VL; c < nc; c++) o[c] += xp[c];                                        \
    }                                                                                              \
    for (int v = 0; v < nv; v++) *(VTU *)(o + v * VL) = acc[v];                                    \
  }
DEFINE_GAP_BLOCK(gap_block, , v4f, v4f_u, 4)
#if POOL_X86
DEFINE_GAP_BLOCK(gap_block_avx512, __attribute__((target("avx512f"))), v16f, v16f_u, 16)
#endif

static void gap_blocks(void *arg, int64_t b0, int64_t b1, int tid) {
  (void)tid;
  const gap_job *j = arg;
  for (int64_t b = b0; b < b1; b++) {
    const int64_t n = b / j->nb, c0 = b % j->nb * GAP_CB, nc = j->C - c0 < GAP_CB ? j->C - c0 : GAP_CB;
    const float *x = j->x + n * j->HW * j->C + c0;
    float *o = j->y + n * j->C + c0;
#if POOL_X86
    if (px_cpu()->avx512f)
      gap_block_avx512(x, j->HW, j->C, nc, o);
    else
#endif
      gap_block(x, j->HW, j->C, nc, o);
    for (int64_t c = 0; c < nc; c++) o[c] = clampf(o[c] * j->scale, j->lo, j->hi);
  }
}

int xnn_exec_global_avg_pooling2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *xv = &values[node->in[0]];
  const int64_t N = xv->dims[0], HW = xv->dims[1] * xv->dims[2], C = xv->dims[3];
  gap_job j = {xv->data, values[node->out[0]].data, N, HW, C, (C + GAP_CB - 1) / GAP_CB,
               HW ? 1.0f / (float)HW : 0.0f, node->output_min, node->output_max};
  px_parallel_for(N * j.nb, 1, N * HW * C, gap_blocks, &j);
  return 0;
}

/* ---- StaticResizeBilinear2D ------------------------------------------------------ */

int xnn_shape_resize_bilinear2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  int rc = require_nhwc(ctx, x, y);
  if (rc) return rc;
  if (node->flags & ~XNN_FLAG_ALIGN_CORNERS)
    return px_fail(ctx, "unsupported flags 0x%x", node->flags);
  uint32_t oh = node->p.resize.new_height, ow = node->p.resize.new_width;
  if (!oh || !ow || oh > POOL_PARAM_MAX || ow > POOL_PARAM_MAX)
    return px_fail(ctx, "output size %ux%u must be positive and at most %u", oh, ow,
                   POOL_PARAM_MAX);
  if (x->dims[1] < 1 || x->dims[2] < 1)
    return px_fail(ctx, "empty %lldx%lld input", (long long)x->dims[1],
                   (long long)x->dims[2]);
  int64_t d[4] = {x->dims[0], oh, ow, x->dims[3]};
  return set_out(ctx, node, y, d);
}

/* Source index pair and weight per output coordinate, as XNNPACK computes
 * them: align_corners: src = dst * (in-1)/(out-1); otherwise half-pixel
 * src = dst * in/out + (0.5 * in/out - 0.5), clamped to [0, in-1]. */
static void resize_axis(int64_t in, int64_t out, bool align, int32_t *i0, int32_t *i1, float *a) {
  int64_t adj = align && out != 1;
  float scale = (float)(in - adj) / (float)(out - adj);
  float offset = align ? 0.0f : 0.5f * scale - 0.5f;
  for (int64_t o = 0; o < out; o++) {
    float s = (float)o * scale + offset;
    if (!align) s = s < 0.0f ? 0.0f : s > (float)(in - 1) ? (float)(in - 1) : s;
    int64_t lo = (int64_t)s;
    if (lo > in - 1) lo = in - 1;
    i0[o] = (int32_t)lo;
    i1[o] = (int32_t)(lo + 1 < in ? lo + 1 : in - 1);
    a[o] = s - (float)lo;
  }
}

int xnn_exec_resize_bilinear2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *xv = &values[node->in[0]], *yv = &values[node->out[0]];
  const float *x = xv->data;
  float *y = yv->data;
  const int64_t N = xv->dims[0], H = xv->dims[1], W = xv->dims[2], C = xv->dims[3];
  const int64_t OH = yv->dims[1], OW = yv->dims[2];
  bool align = node->flags & XNN_FLAG_ALIGN_CORNERS;
  int32_t *ix = px_scratch(ctx, sizeof(int32_t) * 2 * (size_t)(OH + OW));
  float *ax = px_scratch(ctx, sizeof(float) * (size_t)(OH + OW));
  if (!ix || !ax) return PYEXEC_ERR_EXECUTION;
  int32_t *y0 = ix, *y1 = ix + OH, *x0 = ix + 2 * OH, *x1 = ix + 2 * OH + OW;
  float *ay = ax, *axw = ax + OH;
  resize_axis(H, OH, align, y0, y1, ay);
  resize_axis(W, OW, align, x0, x1, axw);
  for (int64_t n = 0; n < N; n++) {
    const float *xn = x + n * H * W * C;
    for (int64_t oh = 0; oh < OH; oh++) {
      const float *rt = xn + (int64_t)y0[oh] * W * C, *rb = xn + (int64_t)y1[oh] * W * C;
      const float av = ay[oh];
      for (int64_t ow = 0; ow < OW; ow++) {
        const float *tl = rt + (int64_t)x0[ow] * C, *tr = rt + (int64_t)x1[ow] * C;
        const float *bl = rb + (int64_t)x0[ow] * C, *br = rb + (int64_t)x1[ow] * C;
        const float ah = axw[ow];
        float *o = y + ((n * OH + oh) * OW + ow) * C;
        for (int64_t c = 0; c < C; c++) {
          float t = tl[c] + (tr[c] - tl[c]) * ah;
          float b = bl[c] + (br[c] - bl[c]) * ah;
          o[c] = t + (b - t) * av;
        }
      }
    }
  }
  return 0;
}

/* ---- PReLU ------------------------------------------------------------------------ */

int xnn_shape_prelu(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_value *x = &values[node->in[0]], *s = &values[node->in[1]];
  xnn_value *y = &values[node->out[0]];
  if (x->datatype != XNN_DT_FP32 || s->datatype != XNN_DT_FP32 || y->datatype != XNN_DT_FP32)
    return px_fail(ctx, "PReLU: only fp32 values are supported");
  if (x->num_dims != y->num_dims)
    return px_fail(ctx, "PReLU: input has %u dims, output %u", x->num_dims, y->num_dims);
  int64_t sn = xnn_numel(s), C = x->dims[x->num_dims - 1];
  if (sn != 1 && sn != C)
    return px_fail(ctx, "PReLU: slope has %lld elements; expected 1 or the %lld channels of the "
                   "last dim", (long long)sn, (long long)C);
  return set_out(ctx, node, y, x->dims);
}

int xnn_exec_prelu(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  (void)ctx;
  const xnn_value *xv = &values[node->in[0]], *sv = &values[node->in[1]];
  const float *x = xv->data, *s = sv->data;
  float *y = values[node->out[0]].data;
  const int64_t C = xv->dims[xv->num_dims - 1], rows = C ? xnn_numel(xv) / C : 0;
  const bool one = xnn_numel(sv) == 1;
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * C;
    float *yr = y + r * C;
    int64_t c = 0;
    for (; c + 4 <= C; c += 4) {
      v4f v = V4(xr + c), k;
      if (one)
        k = (v4f){0} + s[0];
      else
        k = V4(s + c);
      V4(yr + c) = vsel(v < 0.0f, v, v * k);
    }
    for (; c < C; c++) yr[c] = xr[c] < 0.0f ? xr[c] * s[one ? 0 : c] : xr[c];
  }
  return 0;
}
