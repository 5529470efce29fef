/*
 * conv.c - convolution (1-D, 2-D and 3-D, grouped, depthwise, transposed).
 * Pooling is pool.c, upsampling upsample.c.
 *
 * float32 convolution goes through the shared GEMM (gemm.h): im2col into
 * scratch (or the input itself for 1x1 / stride 1 / no padding), direct loops
 * for depthwise, GEMM + col2im for transposed. float16 / bfloat16 run the
 * same on float32 copies of their operands, rounded once at the end. Other
 * dtypes use plain loops on operands widened to double (floating) or 64-bit
 * wrap-around integers.
 * 1-D operators arrive as 2-D ones with a height of 1 (the exporter inserts
 * the unsqueeze), and 1-D convolution is run as 2-D with a 1-row kernel.
 * 3-D convolution (5-D input, NCDHW) has its own im2col / col2im around the
 * same GEMM.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/cpu.h"
#include "core/parallel.h"
#include "kernels/common.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_loops.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/gemm/gemm.h"


/* AVX2/FMA variants (PX_X86_KERNELS, conv_loops.h), chosen at run time. */
#if PX_X86_KERNELS
static bool have_avx2(void) {
  return (__builtin_cpu_init(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
}
#endif

static const conv_epi no_epi = {-INFINITY, INFINITY, false, NULL};

/* ======================================================================== */
/* convolution                                                               */
/* ======================================================================== */


/* Unfolds one group of one image: col[(c*KH + ki)*KW + kj][oh*OW + ow]. */
static void im2col_f32(const conv_geom *g, const float *in, float *col) {
  int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
  for (int64_t c = 0; c < g->Cin_g; c++) {
    const float *plane = in + c * HW;
    for (int64_t ki = 0; ki < g->KH; ki++)
      for (int64_t kj = 0; kj < g->KW; kj++) {
        float *row = col + ((c * g->KH + ki) * g->KW + kj) * OHW;
        /* ow range whose input column is inside [0, W) */
        int64_t off = kj * g->dw - g->pw;
        int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
        int64_t hi = g->W - off <= 0 ? 0 : (g->W - off - 1) / g->sw + 1;
        if (hi > g->OW) hi = g->OW;
        if (lo > hi) lo = hi;
        for (int64_t oh = 0; oh < g->OH; oh++) {
          float *dst = row + oh * g->OW;
          int64_t ih = oh * g->sh - g->ph + ki * g->dh;
          if (ih < 0 || ih >= g->H) {
            memset(dst, 0, sizeof(float) * (size_t)g->OW);
            continue;
          }
          const float *src = plane + ih * g->W + off;
          for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
          if (g->sw == 1)
            memcpy(dst + lo, src + lo, sizeof(float) * (size_t)(hi - lo));
          else
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->sw];
          for (int64_t ow = hi; ow < g->OW; ow++) dst[ow] = 0.0f;
        }
      }
  }
}

/* The im2col matrix of one group of one image, packed straight into GEMM
 * panels (px_gemm_pack_fn): B(k, j) with k = (c*KH + ki)*KW + kj and
 * j = oh*OW + ow is x[c][oh*sh - ph + ki*dh][ow*sw - pw + kj*dw], or 0 in the
 * padding. koff/kih/kiw hold per k: c*H*W, ki*dh - ph and kj*dw - pw. */
#define GEMM_NR_LIMIT PX_GEMM_NR_MAX /* the widest panel px_gemm_f32_panel_width() returns */

typedef struct conv_bsrc {
  const conv_geom *g;
  const float *x;
  const int64_t *koff, *kih, *kiw;
} conv_bsrc;

static void conv_pack_b(const void *src, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int nr,
                        float *pb) {
  const conv_bsrc *s = src;
  const conv_geom *g = s->g;
  const int64_t OW = g->OW, W = g->W, H = g->H, sw = g->sw, sh = g->sh;
  /* Panel by panel (kc x nr floats, in L1 while it is written): packing row
   * by row across every panel touched a new cache line per 16 floats over
   * a block far larger than L2. */
  for (int64_t j0 = 0; j0 < nc; j0 += nr, pb += (int64_t)nr * kc) {
    int n = (int)(nc - j0 < nr ? nc - j0 : nr);
    /* the panel's columns as segments of output rows (a 32-wide panel
     * spans two or more rows of a narrow output) */
    int seg_e[GEMM_NR_LIMIT + 1], nseg = 0;
    int64_t seg_h[GEMM_NR_LIMIT], seg_w[GEMM_NR_LIMIT];
    for (int e = 0; e < n;) {
      int64_t jo = (jc + j0 + e) / OW, jw = (jc + j0 + e) % OW;
      int len = (int)(OW - jw < n - e ? OW - jw : n - e);
      seg_e[nseg] = e, seg_h[nseg] = jo * sh, seg_w[nseg] = jw * sw;
      nseg++;
      e += len;
    }
    seg_e[nseg] = n;
    for (int64_t p = 0; p < kc; p++) {
      int64_t k = pc + p;
      const float *xc = s->x + s->koff[k];
      int64_t dih = s->kih[k], diw = s->kiw[k];
      float *d = pb + p * nr;
      for (int q = 0; q < nseg; q++) {
        const int e0 = seg_e[q], len = seg_e[q + 1] - e0;
        const int64_t ih = seg_h[q] + dih, iw0 = seg_w[q] + diw;
        float *dq = d + e0;
        if (ih < 0 || ih >= H) {
          for (int e = 0; e < len; e++) dq[e] = 0.0f;
          continue;
        }
        const float *row = xc + ih * W;
        if (iw0 >= 0 && iw0 + (len - 1) * sw < W) {
          const float *sp = row + iw0;
          if (sw == 1)
            for (int e = 0; e < len; e++) dq[e] = sp[e];
          else
            for (int e = 0; e < len; e++) dq[e] = sp[e * sw];
        } else {
          for (int e = 0; e < len; e++) {
            int64_t x = iw0 + e * sw;
            dq[e] = x >= 0 && x < W ? row[x] : 0.0f;
          }
        }
      }
      for (int e = n; e < nr; e++) d[e] = 0.0f;
    }
  }
}

/* Folds one group of one image back (transposed convolution): out[c][oh][ow]
 * += col[(c*KH + ki)*KW + kj][ih*W + iw] with oh = ih*sh - ph + ki*dh. */
static void col2im_f32(const conv_geom *g, const float *col, float *out) {
  int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
  for (int64_t c = 0; c < g->Cout_g; c++) {
    float *plane = out + c * OHW;
    for (int64_t ki = 0; ki < g->KH; ki++)
      for (int64_t kj = 0; kj < g->KW; kj++) {
        const float *row = col + ((c * g->KH + ki) * g->KW + kj) * HW;
        int64_t off = kj * g->dw - g->pw; /* ow = iw*sw + off */
        int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
        int64_t hi = g->OW - off <= 0 ? 0 : (g->OW - off - 1) / g->sw + 1;
        if (hi > g->W) hi = g->W;
        if (lo > hi) lo = hi;
        for (int64_t ih = 0; ih < g->H; ih++) {
          int64_t oh = ih * g->sh - g->ph + ki * g->dh;
          if (oh < 0 || oh >= g->OH) continue;
          float *dst = plane + oh * g->OW + off;
          const float *src = row + ih * g->W;
          if (g->sw == 1)
            axpy_f32(hi - lo, 1.0f, src + lo, dst + lo);
          else
            for (int64_t iw = lo; iw < hi; iw++) dst[iw * g->sw] += src[iw];
        }
      }
  }
}

/* Depthwise convolution, one output plane, unit column stride: each output
 * row is built in registers over every tap (one store per output). Columns
 * whose taps are all inside the input use vectors; the border columns and a
 * tail use scalar code. Stamped out for 16-byte vectors and, with 32-byte
 * vectors, for AVX2. */
#define DEFINE_DW_PLANE(NAME, ATTR, VT, VL, VLOAD, VSTORE)                                 \
  ATTR static void NAME(const conv_geom *g, const float *plane, const float *wk, float b,  \
                        const conv_epi *ep, float *o) {                                     \
    const int64_t W = g->W, H = g->H, OW = g->OW, KH = g->KH, KW = g->KW;                  \
    const int64_t pw = g->pw, dw = g->dw;                                                   \
    /* interior columns: ow - pw >= 0 and ow - pw + (KW-1)*dw <= W - 1 */                   \
    int64_t owA = pw < OW ? pw : OW;                                                        \
    int64_t owB = W + pw - (KW - 1) * dw;                                                   \
    if (owB > OW) owB = OW;                                                                 \
    if (owB < owA) owB = owA;                                                               \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                \
      float *orow = o + oh * OW;                                                            \
      int64_t ih0 = oh * g->sh - g->ph;                                                     \
      int64_t ki0 = 0, ki1 = KH; /* taps whose row is inside the input */                  \
      while (ki0 < KH && ih0 + ki0 * g->dh < 0) ki0++;                                      \
      while (ki1 > ki0 && ih0 + (ki1 - 1) * g->dh >= H) ki1--;                              \
      int64_t ow = owA;                                                                     \
      for (; ow + 2 * VL <= owB; ow += 2 * VL) {                                            \
        VT a0 = (VT){0} + b, a1 = a0;                                                       \
        for (int64_t ki = ki0; ki < ki1; ki++) {                                            \
          const float *r = plane + (ih0 + ki * g->dh) * W + ow - pw;                        \
          const float *wr = wk + ki * KW;                                                   \
          for (int64_t kj = 0; kj < KW; kj++) {                                             \
            float wv = wr[kj];                                                              \
            a0 += wv * VLOAD(r + kj * dw);                                                  \
            a1 += wv * VLOAD(r + kj * dw + VL);                                             \
          }                                                                                 \
        }                                                                                   \
        VSTORE(orow + ow, a0);                                                              \
        VSTORE(orow + ow + VL, a1);                                                         \
      }                                                                                     \
      /* the rest of the interior: vectors, the last one overlapping (it    \
       * recomputes and stores the same values) */                          \
      if (ow < owB && owB - owA >= VL) {                                                    \
        for (;;) {                                                                          \
          int64_t at = ow + VL <= owB ? ow : owB - VL;                                      \
          VT a0 = (VT){0} + b;                                                              \
          for (int64_t ki = ki0; ki < ki1; ki++) {                                          \
            const float *r = plane + (ih0 + ki * g->dh) * W + at - pw;                      \
            for (int64_t kj = 0; kj < KW; kj++) a0 += wk[ki * KW + kj] * VLOAD(r + kj * dw); \
          }                                                                                 \
          VSTORE(orow + at, a0);                                                            \
          ow = at + VL;                                                                     \
          if (ow >= owB) break;                                                             \
        }                                                                                   \
      }                                                                                     \
      for (int64_t c = 0; c < OW; c++) {                                                    \
        if (c == owA) c = ow; /* skip the vector part */                                    \
        if (c >= OW) break;                                                                 \
        float acc = b;                                                                      \
        for (int64_t ki = ki0; ki < ki1; ki++) {                                            \
          const float *r = plane + (ih0 + ki * g->dh) * W;                                  \
          for (int64_t kj = 0; kj < KW; kj++) {                                             \
            int64_t iw = c - pw + kj * dw;                                                  \
            if (iw >= 0 && iw < W) acc += wk[ki * KW + kj] * r[iw];                         \
          }                                                                                 \
        }                                                                                   \
        orow[c] = acc;                                                                      \
      }                                                                                     \
      if (ep->clamp) clamp_f32(OW, ep->lo, ep->hi, orow); /* the row is in L1 */            \
    }                                                                                       \
  }

DEFINE_DW_PLANE(dw_plane, , v4f, 4, v4_load, v4_store)
#if PX_X86_KERNELS
DEFINE_DW_PLANE(dw_plane_avx2, __attribute__((target("avx2,fma"))), v8f, 8, v8_load, v8_store)
DEFINE_DW_PLANE(dw_plane_avx512, __attribute__((target("avx512f"))), v16f, 16, v16_load, v16_store)
#endif

/* Arguments of depthwise_planes. */
#if PX_X86_KERNELS
#endif

typedef struct dw_args {
  const conv_geom *g;
  const float *in, *w, *bias;
  const conv_epi *ep;
  float *out;
} dw_args;

/* Output planes [begin, end) (plane = n * Cout + oc), each computed whole. */
static void depthwise_planes(void *arg, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const dw_args *a = arg;
  const conv_geom *g = a->g;
  int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
#if PX_X86_KERNELS
  bool avx2 = have_avx2();
  /* 16-wide vectors pay off only when rows hold several of them */
  bool avx512 = avx2 && g->OW >= 48 && (__builtin_cpu_init(), __builtin_cpu_supports("avx512f"));
#endif
  for (int64_t q = begin; q < end; q++) {
    const int64_t n = q / g->Cout, oc = q % g->Cout;
    const float *plane = a->in + (n * g->Cin + oc / g->Cout_g) * HW;
    float *o = a->out + q * OHW;
    const float *wk = a->w + oc * g->KH * g->KW;
    float b = a->bias ? a->bias[oc] : 0.0f;
    if (g->sw == 1) {
#if PX_X86_KERNELS
      if (avx512) {
        dw_plane_avx512(g, plane, wk, b, a->ep, o);
        continue;
      }
      if (avx2) {
        dw_plane_avx2(g, plane, wk, b, a->ep, o);
        continue;
      }
#endif
      dw_plane(g, plane, wk, b, a->ep, o);
      continue;
    }
#if PX_X86_KERNELS
    if (g->sw == 2 && g->dw == 1 && avx512) {
      px_dw_plane_s2_avx512(g, plane, wk, b, a->ep, o);
      continue;
    }
#endif
    fill_f32(OHW, b, o);
    for (int64_t ki = 0; ki < g->KH; ki++)
      for (int64_t kj = 0; kj < g->KW; kj++) {
        float wv = wk[ki * g->KW + kj];
        int64_t off = kj * g->dw - g->pw;
        int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
        int64_t hi = g->W - off <= 0 ? 0 : (g->W - off - 1) / g->sw + 1;
        if (hi > g->OW) hi = g->OW;
        if (lo > hi) lo = hi;
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t ih = oh * g->sh - g->ph + ki * g->dh;
          if (ih < 0 || ih >= g->H) continue;
          const float *src = plane + ih * g->W + off;
          float *dst = o + oh * g->OW;
          for (int64_t ow = lo; ow < hi; ow++) dst[ow] += wv * src[ow * g->sw];
        }
      }
    if (a->ep->clamp) clamp_f32(OHW, a->ep->lo, a->ep->hi, o);
  }
}

/* Depthwise (one input channel per group): direct loops, output planes
 * split over the thread pool. */
static void depthwise_f32(const conv_geom *g, const float *in, const float *w, const float *bias,
                          const conv_epi *ep, float *out) {
  dw_args a = {g, in, w, bias, ep, out};
  int64_t planes = g->N * g->Cout;
  px_parallel_for(planes, 1, planes * g->OH * g->OW * g->KH * g->KW, depthwise_planes, &a);
}

/* out = convolution of in by w, plus bias (NULL: none), then ep's clamp. */
static int conv_f32(px_ctx *ctx, const conv_geom *g, bool transposed, const float *in,
                    const float *w, const float *bias, const conv_epi *ep, float *out) {
  int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
  int64_t kk = g->KH * g->KW;
  if (!transposed && ep->packed) { /* filter packed at load: the NHWC indirect GEMM */
    px_conv_nhwc_geom ng = {g->N, g->Cin, g->H, g->W, g->Cout, g->KH, g->KW, g->OH, g->OW,
                            g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->G};
    return px_conv_nhwc(ctx, &ng, in, ep->packed->data, bias, ep->lo, ep->hi, out);
  }
  if (!transposed) {
    /* One input channel per group, few outputs from it: direct loops. Many
     * outputs (a first layer over one channel, as audio models have) read
     * that channel once per output: the GEMM below shares the reads. */
    if (g->Cin_g == 1 && kk > 1 && g->Cout_g < 8) {
      /* 3x3 / 5x5 / 7x7 multiplier 1 where the NHWC engine has its AVX-512 row
       * kernel, on planes up to 64x64: there, through NHWC (two transposes;
       * mobilenet_v2's 7x7 x 960 layers 339 -> 38 us, 14x14 x 384 185 ->
       * 48 us). Larger planes keep the per-plane loops, which stream them
       * well, where the transposes of a map larger than L2 cost more than
       * they save (112x112 x 32: 264 us per plane, 498 through NHWC). */
      if (g->Cout_g == 1 && g->KH == g->KW && (g->KH == 3 || g->KH == 5 || g->KH == 7) && g->H * g->W <= 4096 &&
          px_cpu()->avx512f) {
        px_conv_nhwc_geom ng = {g->N, g->Cin, g->H, g->W, g->Cout, g->KH, g->KW, g->OH, g->OW,
                                g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->G};
        return px_conv_nhwc_depthwise(ctx, &ng, in, w, bias, ep->lo, ep->hi, out);
      }
      depthwise_f32(g, in, w, bias, ep, out);
      return 0;
    }
    int64_t K = g->Cin_g * kk;
    bool direct = kk == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    /* Few output channels per group: explicit im2col and the GEMM's
     * unpacked few-rows path; otherwise im2col packed straight into panels. */
    bool implicit = !direct && g->Cout_g >= 8;
    float *col = NULL;
    int64_t *kt = NULL;
    if (!direct && !implicit) {
      col = px_scratch(ctx, sizeof(float) * (size_t)(K * OHW));
      if (!col) return PYEXEC_ERR_EXECUTION;
    }
    if (implicit) {
      kt = px_scratch(ctx, sizeof(int64_t) * (size_t)(3 * K));
      if (!kt) return PYEXEC_ERR_EXECUTION;
      for (int64_t c = 0, k = 0; c < g->Cin_g; c++)
        for (int64_t ki = 0; ki < g->KH; ki++)
          for (int64_t kj = 0; kj < g->KW; kj++, k++) {
            kt[k] = c * HW;
            kt[K + k] = ki * g->dh - g->ph;
            kt[2 * K + k] = kj * g->dw - g->pw;
          }
    }
    void *work = px_scratch(ctx, px_gemm_f32_work_size(g->Cout_g, OHW, K));
    if (!work) return PYEXEC_ERR_EXECUTION;
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t gi = 0; gi < g->G; gi++) {
        const float *x = in + (n * g->Cin + gi * g->Cin_g) * HW;
        float *o = out + (n * g->Cout + gi * g->Cout_g) * OHW;
        const float *wg = w + gi * g->Cout_g * K;
        const float *bg = bias ? bias + gi * g->Cout_g : NULL;
        int rc;
        if (implicit) {
          /* one output channel per row: the bias and clamp in the epilogue */
          conv_bsrc bs = {g, x, kt, kt + K, kt + 2 * K};
          px_gemm_epilogue e = {bg, ep->lo, ep->hi, true, NULL};
          rc = px_gemm_f32_packed_ep(ctx, work, g->Cout_g, OHW, K, 1.0f, wg, K, 1, conv_pack_b,
                                     &bs, 0.0f, o, OHW, &e);
        } else {
          if (!direct) im2col_f32(g, x, col);
          rc = px_conv_gemm_rows(ctx, work, g->Cout_g, OHW, K, wg, direct ? x : col, bg, ep->lo, ep->hi, o);
        }
        if (rc) return rc;
      }
    return 0;
  }
  /* transposed: weight is [Cin, Cout_g, KH, KW] */
  int64_t R = g->Cout_g * kk; /* rows of col */
  float *col = px_scratch(ctx, sizeof(float) * (size_t)(R * HW));
  void *work = px_scratch(ctx, px_gemm_f32_work_size(R, HW, g->Cin_g));
  if (!col || !work) return PYEXEC_ERR_EXECUTION;
  for (int64_t n = 0; n < g->N; n++) {
    for (int64_t c = 0; c < g->Cout; c++) {
      fill_f32(OHW, bias ? bias[c] : 0.0f, out + (n * g->Cout + c) * OHW);
    }
    for (int64_t gi = 0; gi < g->G; gi++) {
      const float *x = in + (n * g->Cin + gi * g->Cin_g) * HW;
      const float *wg = w + gi * g->Cin_g * R;
      /* col[R, HW] = wg^T [R, Cin_g] @ x [Cin_g, HW] */
      int rc = px_gemm_f32(ctx, work, R, HW, g->Cin_g, 1.0f, wg, 1, R, x, HW, 1, 0.0f, col, HW);
      if (rc) return rc;
      col2im_f32(g, col, out + (n * g->Cout + gi * g->Cout_g) * OHW);
    }
  }
  if (ep->clamp) clamp_f32(g->N * g->Cout * OHW, ep->lo, ep->hi, out);
  return 0;
}

/* Naive loops for the other dtypes, on widened copies (ACC = double or
 * uint64_t). in/w/bias/out are contiguous arrays of ACC. */
#define DEFINE_CONV_NAIVE(NAME, ACC)                                                          \
  static void NAME(const conv_geom *g, bool transposed, const ACC *in, const ACC *w,         \
                   const ACC *bias, ACC *out) {                                              \
    int64_t HW = g->H * g->W, OHW = g->OH * g->OW, kk = g->KH * g->KW;                       \
    if (!transposed) {                                                                       \
      for (int64_t n = 0; n < g->N; n++)                                                     \
        for (int64_t oc = 0; oc < g->Cout; oc++) {                                           \
          int64_t gi = oc / g->Cout_g;                                                       \
          for (int64_t oh = 0; oh < g->OH; oh++)                                             \
            for (int64_t ow = 0; ow < g->OW; ow++) {                                         \
              ACC acc = bias ? bias[oc] : (ACC)0;                                            \
              for (int64_t c = 0; c < g->Cin_g; c++) {                                       \
                const ACC *plane = in + (n * g->Cin + gi * g->Cin_g + c) * HW;               \
                const ACC *wk = w + (oc * g->Cin_g + c) * kk;                                \
                for (int64_t ki = 0; ki < g->KH; ki++) {                                     \
                  int64_t ih = oh * g->sh - g->ph + ki * g->dh;                              \
                  if (ih < 0 || ih >= g->H) continue;                                        \
                  for (int64_t kj = 0; kj < g->KW; kj++) {                                   \
                    int64_t iw = ow * g->sw - g->pw + kj * g->dw;                            \
                    if (iw < 0 || iw >= g->W) continue;                                      \
                    acc += plane[ih * g->W + iw] * wk[ki * g->KW + kj];                      \
                  }                                                                          \
                }                                                                            \
              }                                                                              \
              out[(n * g->Cout + oc) * OHW + oh * g->OW + ow] = acc;                         \
            }                                                                                \
        }                                                                                    \
      return;                                                                                \
    }                                                                                        \
    for (int64_t n = 0; n < g->N; n++)                                                       \
      for (int64_t oc = 0; oc < g->Cout; oc++)                                               \
        for (int64_t k = 0; k < OHW; k++)                                                    \
          out[(n * g->Cout + oc) * OHW + k] = bias ? bias[oc] : (ACC)0;                      \
    for (int64_t n = 0; n < g->N; n++)                                                       \
      for (int64_t ic = 0; ic < g->Cin; ic++) {                                              \
        int64_t gi = ic / g->Cin_g;                                                          \
        for (int64_t ih = 0; ih < g->H; ih++)                                                \
          for (int64_t iw = 0; iw < g->W; iw++) {                                            \
            ACC v = in[(n * g->Cin + ic) * HW + ih * g->W + iw];                             \
            for (int64_t c = 0; c < g->Cout_g; c++) {                                        \
              const ACC *wk = w + (ic * g->Cout_g + c) * kk;                                 \
              ACC *plane = out + (n * g->Cout + gi * g->Cout_g + c) * OHW;                   \
              for (int64_t ki = 0; ki < g->KH; ki++) {                                       \
                int64_t oh = ih * g->sh - g->ph + ki * g->dh;                                \
                if (oh < 0 || oh >= g->OH) continue;                                         \
                for (int64_t kj = 0; kj < g->KW; kj++) {                                     \
                  int64_t ow = iw * g->sw - g->pw + kj * g->dw;                              \
                  if (ow < 0 || ow >= g->OW) continue;                                       \
                  plane[oh * g->OW + ow] += v * wk[ki * g->KW + kj];                         \
                }                                                                            \
              }                                                                              \
            }                                                                                \
          }                                                                                  \
      }                                                                                      \
  }

DEFINE_CONV_NAIVE(conv_naive_f64, double)
DEFINE_CONV_NAIVE(conv_naive_u64, uint64_t)

/* Whether a's and b's bytes overlap. */
static bool overlaps(const px_tensor *a, const px_tensor *b) {
  return a && b && px_bytes_overlap(a->data, a->nbytes, b->data, b->nbytes);
}

/* aten::convolution.out(Tensor input, Tensor weight, Tensor? bias,
 *   SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed,
 *   SymInt[] output_padding, SymInt groups, *, Tensor(a!) out), the output
 * `out` then clamped by ep (fused convolutions; float32 2-D only). */
static int convolution(px_ctx *ctx, px_value *const *args, px_tensor *out, const conv_epi *ep) {
  px_tensor *in = args[0]->u.t, *w = args[1]->u.t;
  px_tensor *bias = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  bool transposed = args[6]->u.b;
  int64_t groups = args[8]->u.i;
  int rc;
  /* ---- dtypes and ranks ---- */
  if (in->dim < 3 || in->dim > 5)
    return px_fail(ctx, "input must be 3-D, 4-D or 5-D (batched 1-D, 2-D or 3-D convolution), "
                   "got %d dims", in->dim);
  if (w->dim != in->dim)
    return px_fail(ctx, "weight has %d dims but input has %d", w->dim, in->dim);
  if (out->dim != in->dim)
    return px_fail(ctx, "out has %d dims but input has %d", out->dim, in->dim);
  if ((rc = px_require_same_dtype(ctx, w, "weight", in, "input"))) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "input"))) return rc;
  if (bias && (rc = px_require_same_dtype(ctx, bias, "bias", in, "input"))) return rc;
  if (in->dtype == PX_BOOL || !px_dtype_supported(in->dtype))
    return px_fail(ctx, "dtype %s is not supported", px_dtype_name(in->dtype));
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, w, "weight")) ||
      (rc = px_require_contiguous(ctx, out, "out")) ||
      (bias && (rc = px_require_contiguous(ctx, bias, "bias"))))
    return rc;
  /* ---- parameters ---- */
  int nsp = in->dim - 2;
  int64_t st[3], pd[3], dl[3], op[3];
  if ((rc = spatial_param(ctx, args[3], nsp, "stride", NULL, st)) ||
      (rc = spatial_param(ctx, args[4], nsp, "padding", NULL, pd)) ||
      (rc = spatial_param(ctx, args[5], nsp, "dilation", NULL, dl)))
    return rc;
  if (transposed) {
    if ((rc = spatial_param(ctx, args[7], nsp, "output_padding", NULL, op))) return rc;
  } else {
    op[0] = op[1] = op[2] = 0;
  }
  if (groups <= 0) return px_fail(ctx, "groups must be positive, got %lld", (long long)groups);
  for (int k = 0; k < nsp; k++) {
    if (st[k] <= 0) return px_fail(ctx, "stride must be positive, got %lld", (long long)st[k]);
    if (dl[k] <= 0)
      return px_fail(ctx, "dilation must be positive, got %lld", (long long)dl[k]);
    if (pd[k] < 0) return px_fail(ctx, "padding must be non-negative, got %lld", (long long)pd[k]);
    if (op[k] < 0 || (transposed && op[k] >= st[k] && op[k] >= dl[k]))
      return px_fail(ctx, "output_padding %lld must be non-negative and smaller than stride "
                     "(%lld) or dilation (%lld)", (long long)op[k], (long long)st[k],
                     (long long)dl[k]);
    if ((st[k] | dl[k] | pd[k] | op[k]) >> 30) return px_fail(ctx, "stride, padding, dilation or output_padding exceeds 2^30");
  }
  if (ep->clamp && (nsp != 2 || in->dtype != PX_F32))
    return px_fail(ctx, "a fused activation needs a float32 2-D convolution");
  if (nsp == 3) return px_convolution3d(ctx, in, w, bias, out, transposed, groups, st, pd, dl, op);
  conv_geom g;
  g.N = in->sizes[0];
  g.Cin = in->sizes[1];
  g.H = nsp == 2 ? in->sizes[2] : 1;
  g.W = in->sizes[in->dim - 1];
  g.KH = nsp == 2 ? w->sizes[2] : 1;
  g.KW = w->sizes[w->dim - 1];
  g.sh = nsp == 2 ? st[0] : 1;
  g.sw = st[nsp - 1];
  g.ph = nsp == 2 ? pd[0] : 0;
  g.pw = pd[nsp - 1];
  g.dh = nsp == 2 ? dl[0] : 1;
  g.dw = dl[nsp - 1];
  g.oph = nsp == 2 ? op[0] : 0;
  g.opw = op[nsp - 1];
  g.G = groups;
  px_conv_channels ch;
  if ((rc = px_conv_check_channels(ctx, in, w, bias, transposed, groups, &ch))) return rc;
  g.Cin_g = ch.Cin_g, g.Cout = ch.Cout, g.Cout_g = ch.Cout_g;
  if ((rc = px_conv_out_size(ctx, g.H, g.KH, g.sh, g.ph, g.dh, g.oph, transposed, &g.OH)) ||
      (rc = px_conv_out_size(ctx, g.W, g.KW, g.sw, g.pw, g.dw, g.opw, transposed, &g.OW)))
    return rc;
  if (ep->packed) { /* packed at load for this filter and groups (runtime/fuse.c) */
    px_conv_nhwc_geom ng = {g.N, g.Cin, g.H, g.W, g.Cout, g.KH, g.KW, g.OH, g.OW,
                            g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.G};
    if (transposed || nsp != 2 || in->dtype != PX_F32 || !px_gemm_f32_conv_available() ||
        ep->packed->dtype != PX_F32 || ep->packed->nbytes < px_conv_nhwc_packed_size(&ng))
      return px_fail(ctx, "the packed filter (%lld bytes) does not fit a %lld -> %lld channel "
                     "%lldx%lld convolution in %lld groups", (long long)ep->packed->nbytes,
                     (long long)g.Cin, (long long)g.Cout, (long long)g.KH, (long long)g.KW,
                     (long long)g.G);
  }
  int64_t os[4] = {g.N, g.Cout, g.OH, g.OW};
  if (nsp == 1) os[2] = g.OW;
  if ((rc = px_resize(ctx, out, in->dim, os))) return rc;
  if (out->numel == 0) return 0;
  /* ---- compute ---- */
  if (in->dtype == PX_F32) {
    /* A fused convolution writes the output of the activation that followed
     * it, whose planned bytes may be the (by then dead) input's: compute
     * aside and copy when they overlap. */
    float *dst = out->data;
    if (overlaps(out, in) || overlaps(out, w) || overlaps(out, bias)) {
      dst = px_scratch(ctx, out->nbytes);
      if (!dst) return PYEXEC_ERR_EXECUTION;
    }
    rc = conv_f32(ctx, &g, transposed, in->data, w->data, bias ? bias->data : NULL, ep, dst);
    if (!rc && dst != out->data) memcpy(out->data, dst, out->nbytes);
    return rc;
  }
  if (in->dtype == PX_F16 || in->dtype == PX_BF16) {
    /* float16 / bfloat16: float32 copies through the float32 path, the
     * result rounded once (torch's float accumulation; ExecuTorch's
     * portable loops add in the 16-bit type, a rounding per term) */
    px_conv_widened o;
    if (px_conv_widen(ctx, in, w, bias, out, PX_F32, &o)) return PYEXEC_ERR_EXECUTION;
    rc = conv_f32(ctx, &g, transposed, o.in, o.w, o.bias, ep, o.out);
    if (!rc) px_convert(out->data, out->dtype, o.out, PX_F32, out->numel);
    return rc;
  }
  bool fl = px_is_floating(in->dtype);
  int wide = fl ? PX_F64 : PX_I64;
  px_conv_widened o;
  if (px_conv_widen(ctx, in, w, bias, out, wide, &o)) return PYEXEC_ERR_EXECUTION;
  if (fl)
    conv_naive_f64(&g, transposed, o.in, o.w, o.bias, o.out);
  else
    conv_naive_u64(&g, transposed, o.in, o.w, o.bias, o.out);
  px_convert(out->data, out->dtype, o.out, wide, out->numel);
  return 0;
}

static int k_convolution(px_ctx *ctx, px_value *const *args) {
  return convolution(ctx, args, args[9]->u.t, &no_epi);
}

int px_conv_fused(px_ctx *ctx, px_value *const *args) {
  conv_epi ep = {(float)args[9]->u.d, (float)args[10]->u.d, false, NULL};
  ep.clamp = !(ep.lo == -INFINITY && ep.hi == INFINITY);
  if (args[11]->tag == PX_V_TENSOR) ep.packed = args[11]->u.t;
  return convolution(ctx, args, args[12]->u.t, &ep);
}

const px_kernel_def px_kernels_conv[] = {
    {"aten::convolution.out", "TTtLLLBLIT|T", k_convolution},
    {NULL, NULL, NULL},
};
