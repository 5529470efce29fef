/*
 * conv_nhwc.c - NCHW convolution through the NHWC indirect GEMM
 * (conv_nhwc.h says when and why).
 */
#include "kernels/conv/conv_nhwc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "kernels/conv/dwconv.h"
#include "kernels/conv/winograd.h"
#include "kernels/gemm/gemm.h"
#include "kernels/shape/transpose.h"

/* Depth of one group's product: taps x input channels of the group. */
static int64_t group_depth(const px_conv_nhwc_geom *g) { return g->KH * g->KW * (g->Cin / g->G); }

/* Floats of one group's packed filter, rounded to whole cache lines. */
static size_t group_floats(const px_conv_nhwc_geom *g) {
  size_t b = px_gemm_f32_prepack_size(g->Cout / g->G, group_depth(g));
  return (b + 63) / 64 * 16;
}

/* Whether the convolution runs as Winograd F(2x2, 3x3) (winograd.h's
 * rule): its transformed filter is then all that is packed (the switch is
 * read once per process, so the direct filter would never be read). */
static bool use_wino(const px_conv_nhwc_geom *g) {
  return px_wino_applicable(g->G, g->Cin, g->Cout, g->KH, g->KW, g->sh, g->sw, g->dh, g->dw);
}

size_t px_conv_nhwc_packed_size(const px_conv_nhwc_geom *g) {
  if (use_wino(g)) return px_wino_packed_size(g->Cin, g->Cout);
  return group_floats(g) * sizeof(float) * (size_t)g->G;
}

bool px_conv_nhwc_pack(const px_conv_nhwc_geom *g, const float *w, float *dst) {
  /* the filter [Cout][Cin][3][3] */
  if (use_wino(g)) return px_wino_pack(g->Cin, g->Cout, w, 9 * g->Cin, 9, 1, dst);
  const int64_t Cg = g->Cin / g->G, Og = g->Cout / g->G, KK = g->KH * g->KW, K = KK * Cg;
  /* B(k, j) with k = tap * Cg + c: the filter [Og][Cg][KK] reordered to
   * [Og][KK][Cg] (row j of B^T), then packed through its strides */
  float *t = malloc(sizeof(float) * (size_t)(Og * K > 0 ? Og * K : 1));
  if (!t) return false;
  for (int64_t gi = 0; gi < g->G; gi++) {
    const float *wg = w + gi * Og * K;
    for (int64_t j = 0; j < Og; j++)
      for (int64_t c = 0; c < Cg; c++)
        for (int64_t tap = 0; tap < KK; tap++) t[j * K + tap * Cg + c] = wg[(j * Cg + c) * KK + tap];
    px_gemm_f32_prepack_b(Og, K, t, 1, K, dst + (size_t)gi * group_floats(g));
  }
  free(t);
  return true;
}

/* A float transpose (transpose.h) over the pool: slabs of 64 rows, or of
 * 64 columns when there are more columns, each slab one 2-D transpose on
 * its own rows of dst. On two threads the layout changes around a layer
 * were a serial sixth of its time. Bytes only: the same bits. */
typedef struct tr_job {
  float *dst;
  const float *src;
  int64_t dst_ld, src_ld, rows, cols;
  bool by_rows;
} tr_job;

#define TR_SLAB 64

static void tr_slabs(void *arg, int64_t b0, int64_t b1, int tid) {
  (void)tid;
  const tr_job *j = arg;
  const int64_t n = j->by_rows ? j->rows : j->cols, i0 = b0 * TR_SLAB, i1 = b1 * TR_SLAB < n ? b1 * TR_SLAB : n;
  if (j->by_rows)
    px_transpose2d(sizeof(float), j->dst + i0, j->dst_ld, j->src + i0 * j->src_ld, j->src_ld, i1 - i0, j->cols);
  else
    px_transpose2d(sizeof(float), j->dst + i0 * j->dst_ld, j->dst_ld, j->src + i0, j->src_ld, j->rows, i1 - i0);
}

static void transpose_f32(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows,
                          int64_t cols) {
  tr_job j = {dst, src, dst_ld, src_ld, rows, cols, rows >= cols};
  const int64_t n = j.by_rows ? rows : cols;
  px_parallel_for((n + TR_SLAB - 1) / TR_SLAB, 1, rows * cols, tr_slabs, &j);
}

/* A 1x1 unpadded convolution with a stride (resnet's downsampling
 * shortcuts) reads one input pixel in sh x sw: only those are gathered,
 * plane by plane over the pool, before the layout change, which then moves
 * a quarter of the input at stride 2, and the product runs at stride 1 over
 * them. The rows of A hold the same values in the same order: the same bits
 * (resnet18's 64 -> 128 shortcut at 56x56: 212 -> 175 us on one thread,
 * 171 -> 154 us on two). */
static bool strided_pointwise(const px_conv_nhwc_geom *g) {
  return g->KH == 1 && g->KW == 1 && !g->ph && !g->pw && (g->sh > 1 || g->sw > 1);
}

typedef struct sub_job {
  float *dst;
  const float *src;
  int64_t H, W, OH, OW, sh, sw;
} sub_job;

static void sub_planes(void *arg, int64_t c0, int64_t c1, int tid) {
  (void)tid;
  const sub_job *j = arg;
  for (int64_t c = c0; c < c1; c++) {
    const float *s = j->src + c * j->H * j->W;
    float *d = j->dst + c * j->OH * j->OW;
    for (int64_t oh = 0; oh < j->OH; oh++, d += j->OW) {
      const float *r = s + oh * j->sh * j->W;
      for (int64_t ow = 0; ow < j->OW; ow++) d[ow] = r[ow * j->sw];
    }
  }
}

/* Output rows (pixels) per product on one thread: about 128 KiB of output,
 * so each tile's rows stay in cache across the depth blocks. */
static int64_t tile_rows(int64_t cout) {
  int64_t t = (32768 / (cout > 0 ? cout : 1)) / 24 * 24;
  return t < 24 ? 24 : t > 960 ? 960 : t;
}

int px_conv_nhwc(px_ctx *ctx, const px_conv_nhwc_geom *g, const float *x, const float *packed,
                 const float *bias, float lo, float hi, float *y) {
  const int64_t HW = g->H * g->W, OHW = g->OH * g->OW, Cg = g->Cin / g->G, Og = g->Cout / g->G;
  const int64_t M = g->N * OHW, K = group_depth(g);
  if (M == 0 || g->Cout == 0) return 0;
  if (!px_gemm_f32_conv_available()) return px_fail(ctx, "no indirect convolution kernel here");
  /* the input the product reads: the whole map, or the pixels a strided
   * pointwise convolution reads (IH x IW, read at stride 1) */
  const bool sub = strided_pointwise(g);
  const int64_t IH = sub ? g->OH : g->H, IW = sub ? g->OW : g->W, IHW = IH * IW;
  float *xs = px_scratch(ctx, sizeof(float) * (size_t)(g->N * IHW * g->Cin));
  float *xsub = sub ? px_scratch(ctx, sizeof(float) * (size_t)(IHW * g->Cin)) : NULL;
  float *ys = px_scratch(ctx, sizeof(float) * (size_t)(M * g->Cout));
  const int64_t T = px_parallel_threads() > 1 ? M : tile_rows(g->Cout);
  void *work = px_scratch(ctx, px_gemm_f32_work_size(T, Og, K));
  if (!xs || !ys || !work || (sub && !xsub)) return PYEXEC_ERR_EXECUTION;
  for (int64_t n = 0; n < g->N; n++) { /* [Cin, HW] -> [IHW, Cin] */
    const float *xn = x + n * g->Cin * HW;
    if (sub) {
      sub_job sj = {xsub, xn, g->H, g->W, g->OH, g->OW, g->sh, g->sw};
      px_parallel_for(g->Cin, 1, g->Cin * IHW * 2, sub_planes, &sj);
      xn = xsub;
    }
    transpose_f32(xs + n * IHW * g->Cin, g->Cin, xn, IHW, g->Cin, IHW);
  }
  for (int64_t r0 = use_wino(g) ? M : 0; r0 < M; r0 += T) {
    const int64_t rows = M - r0 < T ? M - r0 : T;
    for (int64_t gi = 0; gi < g->G; gi++) {
      px_gemm_conv cv = {xs + gi * Cg, IHW * g->Cin, IH, IW, g->Cin, Cg, g->KH, g->KW, sub ? 1 : g->sh,
                         sub ? 1 : g->sw, g->dh, g->dw, g->ph, g->pw, g->OH, g->OW, r0};
      px_gemm_epilogue ep = {bias ? bias + gi * Og : NULL, lo, hi, false, NULL};
      int rc = px_gemm_f32_conv(ctx, work, &cv, rows, Og, packed + (size_t)gi * group_floats(g),
                                ys + r0 * g->Cout + gi * Og, g->Cout, &ep);
      if (rc) return rc;
    }
  }
  if (use_wino(g)) {
    px_wino_geom wg = {g->N, g->H, g->W, g->Cin, g->Cout, g->OH, g->OW, g->ph, g->pw};
    int rc = px_wino_conv_nhwc(ctx, &wg, xs, packed, bias, lo, hi, ys);
    if (rc) return rc;
  }
  for (int64_t n = 0; n < g->N; n++) /* [OHW, Cout] -> [Cout, OHW] */
    transpose_f32(y + n * g->Cout * OHW, OHW, ys + n * OHW * g->Cout, g->Cout, OHW, g->Cout);
  return 0;
}

int px_conv_nhwc_depthwise(px_ctx *ctx, const px_conv_nhwc_geom *g, const float *x, const float *w,
                           const float *bias, float lo, float hi, float *y) {
  const int64_t HW = g->H * g->W, OHW = g->OH * g->OW, KK = g->KH * g->KW;
  if (g->N * OHW == 0 || g->Cout == 0) return 0;
  float *xs = px_scratch(ctx, sizeof(float) * (size_t)(g->N * HW * g->Cin));
  float *ys = px_scratch(ctx, sizeof(float) * (size_t)(g->N * OHW * g->Cout));
  float *wt = px_scratch(ctx, sizeof(float) * (size_t)(KK * g->Cout + g->Cout));
  if (!xs || !ys || !wt) return PYEXEC_ERR_EXECUTION;
  float *b = wt + KK * g->Cout;
  /* [Cout, KK] -> [KK, Cout]; the engine wants a bias */
  px_transpose2d(sizeof(float), wt, g->Cout, w, KK, g->Cout, KK);
  if (bias)
    memcpy(b, bias, sizeof(float) * (size_t)g->Cout);
  else
    memset(b, 0, sizeof(float) * (size_t)g->Cout);
  for (int64_t n = 0; n < g->N; n++)
    transpose_f32(xs + n * HW * g->Cin, g->Cin, x + n * g->Cin * HW, HW, g->Cin, HW);
  px_dwconv d = {g->N, g->H, g->W, g->Cin, g->Cout / g->Cin, g->KH, g->KW, g->sh, g->sw, g->dh, g->dw,
                 g->ph, g->pw, g->OH, g->OW, wt, b, lo, hi, NULL};
  int rc = px_dwconv_nhwc(ctx, &d, xs, ys);
  if (rc) return rc;
  for (int64_t n = 0; n < g->N; n++)
    transpose_f32(y + n * g->Cout * OHW, OHW, ys + n * OHW * g->Cout, g->Cout, OHW, g->Cout);
  return 0;
}
