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

#include "core/parallel.h"

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

typedef struct dw_job {
  const px_dwconv *p;
  const float *x;
  float *y;
  const float **ptrs;  /* per thread: 2 * KK tap pointers */
  const float *zeros;  /* a zero input row (W * C floats) for the row kernels, or NULL */
  int isa;             /* 0 portable, 1 AVX2, 2 AVX-512 */
} dw_job;

/* Output rows [begin, end) (row = n * OH + oh) of a depthwise convolution;
 * each output pixel is computed the same way whichever task holds it. */
static void dw_rows(void *arg, int64_t begin, int64_t end, int tid) {
  const dw_job *j = arg;
  const px_dwconv *p = j->p;
  const int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW, Cin = p->C, C = p->C * p->Mul;
  const int64_t Mul = p->Mul, KK = p->KH * p->KW;
  const float lo = p->lo, hi = p->hi;
  const float **xs = j->ptrs + (int64_t)tid * 2 * KK, **ws = xs + KK;
  /* interior output columns [owA, owB): every tap's input column in [0, W) */
  int64_t owA = (p->pl + p->sw - 1) / p->sw, owB = W - 1 + p->pl - (p->KW - 1) * p->dw;
  owB = owB < 0 ? 0 : owB / p->sw + 1;
  if (owB > OW) owB = OW;
  if (owA > owB) owA = owB;
  for (int64_t row = begin; row < end; row++) {
    const int64_t n = row / OH, oh = row % OH, ih0 = oh * p->sh - p->pt;
    float *orow = j->y + row * OW * C;
    int64_t skip0 = 0, skip1 = 0; /* columns the row kernel did */
#if DW_X86
    if (j->zeros && owA < owB) {
      const float *rows[7];
      for (int64_t ki = 0; ki < p->KH; ki++) {
        int64_t ih = ih0 + ki * p->dh;
        rows[ki] = ih >= 0 && ih < H ? j->x + (n * H + ih) * W * Cin : j->zeros;
      }
      if (p->KH == 3)
        px_dw_row_3x3_avx512(rows, C, p->sw, p->dw, p->pl, owA, owB, p->w, p->bias, lo, hi, orow);
      else if (p->KH == 5)
        px_dw_row_5x5_avx512(rows, C, p->sw, p->dw, p->pl, owA, owB, p->w, p->bias, lo, hi, orow);
      else
        px_dw_row_7x7_avx512(rows, C, p->sw, p->dw, p->pl, owA, owB, p->w, p->bias, lo, hi, orow);
      skip0 = owA, skip1 = owB;
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
        int64_t ih = ih0 + ki * p->dh;
        if (ih < 0 || ih >= H) continue;
        for (int64_t kj = 0; kj < p->KW; kj++) {
          int64_t iw = iw0 + kj * p->dw;
          if (iw < 0 || iw >= W) continue;
          xs[nt] = j->x + ((n * H + ih) * W + iw) * Cin;
          ws[nt] = p->w + (ki * p->KW + kj) * C;
          nt++;
        }
      }
      float *o = orow + ow * C;
      if (Mul == 1) {
#if DW_X86
        if (j->isa >= 1) {
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
}

int px_dwconv_nhwc(px_ctx *ctx, const px_dwconv *p, const float *x, float *y) {
  dw_job j = {p, x, y, NULL, NULL, 0};
  const int64_t KK = p->KH * p->KW, C = p->C * p->Mul;
  const int T = px_parallel_threads();
  j.ptrs = px_scratch(ctx, sizeof(float *) * 2 * (size_t)KK * (size_t)T);
  if (!j.ptrs) return PYEXEC_ERR_EXECUTION;
#if DW_X86
  __builtin_cpu_init();
  j.isa = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (j.isa && __builtin_cpu_supports("avx512f") && p->Mul == 1 &&
      p->KH == p->KW && (p->KH == 3 || p->KH == 5 || p->KH == 7)) {
    j.isa = 2;
    float *z = px_scratch(ctx, sizeof(float) * (size_t)(p->W * C + 16));
    if (!z) return PYEXEC_ERR_EXECUTION;
    memset(z, 0, sizeof(float) * (size_t)(p->W * C + 16));
    j.zeros = z;
  }
#endif
  const int64_t rows = p->N * p->OH;
  px_parallel_for(rows, 1, rows * p->OW * C * KK, dw_rows, &j);
  return 0;
}
