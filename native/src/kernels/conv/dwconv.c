/*
 * dwconv.c - depthwise convolution on NHWC float32 (dwconv.h): the XNNPACK
 * backend's DepthwiseConv2d node and the portable convolution's depthwise
 * case (through NHWC, conv_nhwc.c) run this one engine.
 *
 * Output rows (image, output row) are split over the thread pool; each
 * output pixel sums bias + its taps in (ki, kj) order whichever task holds
 * it. Multiplier 1 keeps the channels in vector registers: on AVX-512
 * machines a 3x3, 5x5 or 7x7 filter runs a row kernel (dwconv_x86.c) over the columns whose
 * taps all lie inside the input (a zero row standing in for padding rows),
 * the border columns (and other filters) per pixel with 256-bit (or
 * 128-bit) vectors; a multiplier above 1 runs plain loops.
 */
#include "kernels/conv/dwconv.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/parallel.h"
#include "kernels/shape/strided.h"

typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4f __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));
/* a where m is false, b where m is true (m a comparison's all-ones mask). */
#define VSEL(VT, VI, m, a, b) ((VT)((((VI)(a)) & ~(m)) | (((VI)(b)) & (m))))

/* y[0..n) clamped to [lo, hi] (skipped when both are infinite); NaN stays. */
static void clamp_row(float *y, int64_t n, float lo, float hi) {
  if (lo == -INFINITY && hi == INFINITY) return;
  for (int64_t i = 0; i < n; i++) {
    float v = y[i];
    v = v < lo ? lo : v;
    y[i] = v > hi ? hi : v;
  }
}

/* One output pixel of a depthwise convolution with multiplier 1: the taps
 * inside the input are xs[0..nt) (input pixel pointers) with filter rows
 * ws[0..nt); channels in registers, VL at a time. */
#define DEFINE_DW_PIXEL(NAME, ATTR, VT, VI, VTU, VL)                                               \
  ATTR static void NAME(int64_t C, int nt, const float *const *xs, const float *const *ws,    \
                        const float *bias, float lo, float hi, float *o) {                     \
    int64_t c = 0;                                                                             \
    VT vlo = (VT){0} + lo, vhi = (VT){0} + hi;                                                 \
    for (; c + 2 * VL <= C; c += 2 * VL) {                                                     \
      VT a0 = *(const VTU *)(bias + c), a1 = *(const VTU *)(bias + c + VL);                   \
      for (int t = 0; t < nt; t++) {                                                           \
        a0 += *(const VTU *)(xs[t] + c) * *(const VTU *)(ws[t] + c);                          \
        a1 += *(const VTU *)(xs[t] + c + VL) * *(const VTU *)(ws[t] + c + VL);                \
      }                                                                                        \
      a0 = VSEL(VT, VI, a0 < vlo, a0, vlo);                                                    \
      a1 = VSEL(VT, VI, a1 < vlo, a1, vlo);                                                    \
      *(VTU *)(o + c) = VSEL(VT, VI, a0 > vhi, a0, vhi);                                       \
      *(VTU *)(o + c + VL) = VSEL(VT, VI, a1 > vhi, a1, vhi);                                  \
    }                                                                                          \
    for (; c + VL <= C; c += VL) {                                                             \
      VT a0 = *(const VTU *)(bias + c);                                                        \
      for (int t = 0; t < nt; t++) a0 += *(const VTU *)(xs[t] + c) * *(const VTU *)(ws[t] + c); \
      a0 = VSEL(VT, VI, a0 < vlo, a0, vlo);                                                    \
      *(VTU *)(o + c) = VSEL(VT, VI, a0 > vhi, a0, vhi);                                       \
    }                                                                                          \
    for (; c < C; c++) {                                                                       \
      float a = bias[c];                                                                       \
      for (int t = 0; t < nt; t++) a += xs[t][c] * ws[t][c];                                   \
      a = a < lo ? lo : a;                                                                     \
      o[c] = a > hi ? hi : a;                                                                  \
    }                                                                                          \
  }

DEFINE_DW_PIXEL(dw_pixel, , v4f, v4i, v4f_u, 4)
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define DW_X86 1
DEFINE_DW_PIXEL(dw_pixel_avx2, __attribute__((target("avx2,fma"))), v8f, v8i, v8f_u, 8)
#else
#define DW_X86 0
#endif

#if DW_X86
#include "kernels/conv/dwconv_x86.h"
#endif

/* A workspace of the row-by-row interface (dwconv.h): the path this CPU
 * takes, the interior columns the row kernels cover, the tap pointers of
 * one pixel, and (for the row kernels) a zero input row standing in for
 * padding rows. */
typedef struct dw_ws {
  int isa;            /* 0 portable, 1 AVX2, 2 AVX-512 row kernels */
  int64_t owA, owB;   /* interior output columns [owA, owB): every tap's input column in [0, W) */
  const float *zeros; /* W * C zeros (isa 2), or NULL */
  const float **xs, **ws; /* 2 * KH * KW */
  const float **rows;     /* KH: the input rows of px_dwconv_nhwc's row */
} dw_ws;

static int64_t dw_ws_floats(const px_dwconv *p) { return p->W * p->C * p->Mul + 16; }

size_t px_dwconv_row_bytes(const px_dwconv *p) {
  const int64_t KK = p->KH * p->KW;
  return (sizeof(dw_ws) + 63) / 64 * 64 + ((2 * (size_t)KK + (size_t)p->KH) * sizeof(float *) + 63) / 64 * 64 +
         sizeof(float) * (size_t)dw_ws_floats(p);
}

#if DW_X86
/* Whether the AVX-512 row kernels (dwconv_x86.c) run this convolution's
 * interior columns. */
static bool row_kernels(const px_dwconv *p) {
  return px_cpu()->avx2 && px_cpu()->fma && px_cpu()->avx512f && p->Mul == 1 && p->KH == p->KW &&
         (p->KH == 3 || p->KH == 5 || p->KH == 7);
}
#endif

/* The output columns [*owA, *owB) whose taps all lie inside the input's
 * columns (empty when there are none). */
static void interior_columns(const px_dwconv *p, int64_t *owA, int64_t *owB) {
  int64_t b = p->W - 1 + p->pl - (p->KW - 1) * p->dw;
  b = b < 0 ? 0 : b / p->sw + 1;
  *owB = b > p->OW ? p->OW : b;
  *owA = (p->pl + p->sw - 1) / p->sw;
  if (*owA > *owB) *owA = *owB;
}

void px_dwconv_row_init(const px_dwconv *p, void *mem) {
  const int64_t KK = p->KH * p->KW;
  dw_ws *s = mem;
  char *after = (char *)mem + (sizeof(dw_ws) + 63) / 64 * 64;
  s->xs = (const float **)after;
  s->ws = s->xs + KK;
  s->rows = s->ws + KK;
  s->isa = 0;
  s->zeros = NULL;
#if DW_X86
  s->isa = px_cpu()->avx2 && px_cpu()->fma;
  if (row_kernels(p)) {
    float *z = (float *)(after + ((2 * (size_t)KK + (size_t)p->KH) * sizeof(float *) + 63) / 64 * 64);
    memset(z, 0, sizeof(float) * (size_t)dw_ws_floats(p));
    s->zeros = z;
    s->isa = 2;
  }
#endif
  interior_columns(p, &s->owA, &s->owB);
}

void px_dwconv_row(const px_dwconv *p, void *mem, const float *const *rows, float *orow) {
  const dw_ws *s = mem;
  const int64_t W = p->W, OW = p->OW, Cin = p->C, C = p->C * p->Mul, Mul = p->Mul;
  const float lo = p->lo, hi = p->hi;
  const float **xs = s->xs, **ws = s->ws;
  int64_t skip0 = 0, skip1 = 0; /* columns the row kernel did */
#if DW_X86
  if (s->isa == 2 && s->owA < s->owB) {
    const float *rk[7];
    for (int64_t ki = 0; ki < p->KH; ki++) rk[ki] = rows[ki] ? rows[ki] : s->zeros;
    if (p->KH == 3)
      px_dw_row_3x3_avx512(rk, C, p->sw, p->dw, p->pl, s->owA, s->owB, p->w, p->bias, lo, hi, orow);
    else if (p->KH == 5)
      px_dw_row_5x5_avx512(rk, C, p->sw, p->dw, p->pl, s->owA, s->owB, p->w, p->bias, lo, hi, orow);
    else
      px_dw_row_7x7_avx512(rk, C, p->sw, p->dw, p->pl, s->owA, s->owB, p->w, p->bias, lo, hi, orow);
    skip0 = s->owA, skip1 = s->owB;
  }
#endif
  for (int64_t ow = 0; ow < OW; ow++) {
    if (ow == skip0 && skip1 > skip0) {
      ow = skip1 - 1;
      continue;
    }
    int nt = 0;
    const int64_t iw0 = ow * p->sw - p->pl;
    for (int64_t ki = 0; ki < p->KH; ki++) {
      if (!rows[ki]) continue;
      for (int64_t kj = 0; kj < p->KW; kj++) {
        int64_t iw = iw0 + kj * p->dw;
        if (iw < 0 || iw >= W) continue;
        xs[nt] = rows[ki] + iw * Cin;
        ws[nt] = p->w + (ki * p->KW + kj) * C;
        nt++;
      }
    }
    float *o = orow + ow * C;
    if (Mul == 1) {
#if DW_X86
      if (s->isa >= 1) {
        dw_pixel_avx2(C, nt, xs, ws, p->bias, lo, hi, o);
        continue;
      }
#endif
      dw_pixel(C, nt, xs, ws, p->bias, lo, hi, o);
      continue;
    }
    /* multiplier > 1: output channel c reads input channel c / Mul */
    memcpy(o, p->bias, sizeof(float) * (size_t)C);
    for (int t = 0; t < nt; t++)
      for (int64_t ci = 0, c = 0; ci < Cin; ci++) {
        float xv1 = xs[t][ci];
        for (int64_t m = 0; m < Mul; m++, c++) o[c] += xv1 * ws[t][c];
      }
    clamp_row(o, C, lo, hi);
  }
  if (p->post) p->post(OW * C, orow);
}

typedef struct dw_job {
  const px_dwconv *p;
  const float *x;
  float *y;
  char *ws;        /* one workspace per thread */
  size_t ws_bytes;
} dw_job;

/* Output rows [begin, end) (row = n * OH + oh) of a depthwise convolution;
 * each output pixel is computed the same way whichever task holds it. */
static void dw_rows(void *arg, int64_t begin, int64_t end, int tid) {
  const dw_job *j = arg;
  const px_dwconv *p = j->p;
  dw_ws *ws = (dw_ws *)(j->ws + (size_t)tid * j->ws_bytes);
  const float **rows = ws->rows;
  for (int64_t row = begin; row < end; row++) {
    const int64_t n = row / p->OH, ih0 = row % p->OH * p->sh - p->pt;
    for (int64_t ki = 0; ki < p->KH; ki++) {
      int64_t ih = ih0 + ki * p->dh;
      rows[ki] = ih >= 0 && ih < p->H ? j->x + (n * p->H + ih) * p->W * p->C : NULL;
    }
    px_dwconv_row(p, ws, rows, j->y + row * p->OW * p->C * p->Mul);
  }
}

/* Whether the AVX-512 row kernels leave many columns to the per-pixel
 * path: on small maps (mobilenet_v3's 5x5 layers over 7x7 and 14x14) the
 * border columns, whose taps fall partly in the padding, are most of them,
 * and the per-pixel path gathers tap pointers and runs one or two chains.
 * Those maps are read from a copy with zero columns on both sides instead,
 * in which every column is interior (mobilenet_v3's 5x5 layers over 7x7 x
 * 576: 58-60 -> 45-50 us).
 * A zero column adds zeros, as a padding row already does in the row
 * kernels and as XNNPACK's zero buffer does. */
static bool pad_columns(const px_dwconv *p, int64_t *Wp) {
#if DW_X86
  if (!row_kernels(p) || p->pl == 0) return false;
  int64_t owA, owB;
  interior_columns(p, &owA, &owB);
  if (4 * (p->OW - (owB - owA)) < p->OW) return false; /* under a quarter of the columns on the border */
  const int64_t need = (p->OW - 1) * p->sw + (p->KW - 1) * p->dw + 1;
  *Wp = p->W + p->pl > need ? p->W + p->pl : need;
  return true;
#else
  (void)p, (void)Wp;
  return false;
#endif
}

int px_dwconv_nhwc(px_ctx *ctx, const px_dwconv *p, const float *x, float *y) {
  const int T = px_parallel_threads();
  px_dwconv q = *p;
  int64_t Wp;
  if (pad_columns(p, &Wp)) {
    float *xp = px_scratch(ctx, sizeof(float) * (size_t)(p->N * p->H * Wp * p->C));
    if (!xp) return PYEXEC_ERR_EXECUTION;
    px_pad_nhwc(xp, x, p->N, p->H, p->W, sizeof(float) * (size_t)p->C, 0, p->pl, 0, Wp - p->W - p->pl, 0);
    x = xp;
    q.W = Wp;
    q.pl = 0;
  }
  dw_job j = {&q, x, y, NULL, (px_dwconv_row_bytes(&q) + 63) / 64 * 64};
  j.ws = px_scratch(ctx, j.ws_bytes * (size_t)T);
  if (!j.ws) return PYEXEC_ERR_EXECUTION;
  for (int t = 0; t < T; t++) px_dwconv_row_init(&q, j.ws + (size_t)t * j.ws_bytes);
  const int64_t rows = q.N * q.OH, KK = q.KH * q.KW;
  px_parallel_for(rows, 1, rows * q.OW * q.C * q.Mul * KK, dw_rows, &j);
  return 0;
}
