/*
 * conv_x86.c - conv.c's AVX-512 path (conv_loops.h): the stride-2 depthwise
 * plane. Elsewhere than on x86-64 this file compiles to nothing.
 */
#include "kernels/conv/conv_loops.h"

#if PX_X86_KERNELS
/* A depthwise plane at stride 2 along the rows (no column dilation) on
 * AVX-512: sixteen outputs at a time, each tap's inputs (every other
 * column) picked from two loads by one permute. The per-plane loops below
 * handle stride 2 one scalar tap pass at a time, which left mobilenet_v2's
 * 112x112 x 96 stride-2 layer at 1.1 ms. Each output is bias + its taps in
 * (ki, kj) order, as in the scalar loops; columns outside the vector span
 * are summed one by one. */
__attribute__((target("avx512f"))) void px_dw_plane_s2_avx512(const conv_geom *g, const float *plane,
                                                              const float *wk, float b, const conv_epi *ep,
                                                              float *o) {
  const int64_t W = g->W, H = g->H, OW = g->OW, KH = g->KH, KW = g->KW, pw = g->pw;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512 vlo = _mm512_set1_ps(ep->lo), vhi = _mm512_set1_ps(ep->hi), vb = _mm512_set1_ps(b);
  /* vector blocks start at columns [owA, owL]: 2*ow - pw >= 0, and the
   * last tap of the block's last output, 2*(ow + 15) - pw + KW - 1, inside
   * the row (the second load of a tap takes 15 floats, the 16th is never
   * used); the last block may overlap the one before (it stores the same
   * values again) */
  const int64_t owA = (pw + 1) / 2, lastc = W - KW + pw; /* 2*ow + 30 <= lastc */
  const int64_t owL = lastc >= 30 ? (lastc - 30) / 2 : -1;
  const bool vec = owL >= owA && OW - owA >= 16;
  int64_t owE = owA; /* the vector part is [owA, owE) */
  if (vec) owE = owL + 16 < OW ? owL + 16 : OW;
  for (int64_t oh = 0; oh < g->OH; oh++) {
    float *orow = o + oh * OW;
    const int64_t ih0 = oh * g->sh - g->ph;
    int64_t ki0 = 0, ki1 = KH; /* taps whose row is inside the input */
    while (ki0 < KH && ih0 + ki0 * g->dh < 0) ki0++;
    while (ki1 > ki0 && ih0 + (ki1 - 1) * g->dh >= H) ki1--;
    for (int64_t ow = owA; vec && ow < owE;) {
      const int64_t at = ow + 16 <= owE ? ow : owE - 16;
      __m512 acc = vb;
      for (int64_t ki = ki0; ki < ki1; ki++) {
        const float *r = plane + (ih0 + ki * g->dh) * W + 2 * at - pw;
        for (int64_t kj = 0; kj < KW; kj++) {
          __m512 v = _mm512_permutex2var_ps(_mm512_loadu_ps(r + kj), even,
                                            _mm512_maskz_loadu_ps((__mmask16)0x7FFF, r + kj + 16));
          acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[ki * KW + kj]), v, acc);
        }
      }
      if (ep->clamp) acc = _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc)); /* NaN stays NaN */
      _mm512_storeu_ps(orow + at, acc);
      ow = at + 16;
    }
    const int64_t ow = owE;
    for (int64_t c = 0; c < OW; c++) {
      if (c == owA) c = ow; /* skip the vector part */
      if (c >= OW) break;
      float acc = b;
      for (int64_t ki = ki0; ki < ki1; ki++) {
        const float *r = plane + (ih0 + ki * g->dh) * W;
        for (int64_t kj = 0; kj < KW; kj++) {
          const int64_t iw = 2 * c - pw + kj;
          if (iw >= 0 && iw < W) acc += wk[ki * KW + kj] * r[iw];
        }
      }
      if (ep->clamp) {
        acc = acc < ep->lo ? ep->lo : acc;
        acc = acc > ep->hi ? ep->hi : acc;
      }
      orow[c] = acc;
    }
  }
}
#endif

typedef int px_conv_x86_unused; /* ISO C: no empty translation unit */
