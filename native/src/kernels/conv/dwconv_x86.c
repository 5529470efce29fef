/*
 * dwconv_x86.c - the AVX-512 row kernels of the depthwise engine
 * (dwconv.c, dwconv_x86.h). Elsewhere than on x86-64 this file compiles to
 * nothing.
 */
#include "kernels/conv/dwconv_x86.h"

#if PX_DW_X86
#include <immintrin.h>

/* Four pixels' sums (C floats apart from o) clamped to [vlo, vhi] and
 * stored, the channels in m. */
static inline __attribute__((target("avx512f"), always_inline)) void dw_store4(float *o, int64_t C, __mmask16 m,
                                                                               __m512 vlo, __m512 vhi, __m512 a0,
                                                                               __m512 a1, __m512 a2, __m512 a3) {
  _mm512_mask_storeu_ps(o, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a0)));
  _mm512_mask_storeu_ps(o + C, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a1)));
  _mm512_mask_storeu_ps(o + 2 * C, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a2)));
  _mm512_mask_storeu_ps(o + 3 * C, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a3)));
}

/* Four pixels' sums over one 16-channel block (lanes in m), the window path:
 * input pixel j of filter row ki at rows[ki] + (base + j) * C + c. */
#define DW_FOUR_WIN(KH_, KW_, SW_, LOAD)                                                        \
  for (int ki = 0; ki < KH_; ki++) {                                                          \
    const float *r = rows[ki] + base * C + c;                                                  \
    __m512 v[3 * 2 + (KW_)]; /* SW_ is 1 or 2: a fixed size, so it can live in registers */   \
    _Pragma("GCC unroll 16") for (int j = 0; j < 3 * (SW_) + (KW_); j++) v[j] = LOAD(r + j * C); \
    _Pragma("GCC unroll 8") for (int kj = 0; kj < KW_; kj++) {                                 \
      const __m512 wt = LOAD(w + (ki * KW_ + kj) * C + c);                                     \
      a0 = _mm512_fmadd_ps(v[kj], wt, a0);                                                     \
      a1 = _mm512_fmadd_ps(v[kj + (SW_)], wt, a1);                                             \
      a2 = _mm512_fmadd_ps(v[kj + 2 * (SW_)], wt, a2);                                         \
      a3 = _mm512_fmadd_ps(v[kj + 3 * (SW_)], wt, a3);                                         \
    }                                                                                          \
  }

#define DW_LOAD_FULL(p) _mm512_loadu_ps(p)
#define DW_LOAD_MASK(p) _mm512_maskz_loadu_ps(m, p)

/* Depthwise with multiplier 1 on AVX-512, output columns [ow0, ow1) of one
 * output row whose taps are all inside the input's columns: four output
 * pixels at a time (four independent chains), each 16-channel block of them
 * summing its KH_ x KW_ taps. Pixels are the outer loop: the filter block is
 * reloaded from L1 for each four pixels, but the input is read in address
 * order, every channel of a pixel at once (channel blocks outside, with the
 * filter held in registers, read one 64-byte slice of every pixel per pass
 * over the row and ran 17% slower on mobilenet_v2's depthwise layers).
 * Without dilation and at strides 1 and 2 the four pixels' taps of one
 * filter row lie in 3 * sw + KW_ consecutive input pixels, which are loaded
 * once into registers for all of them (13 loads rather than 20 for a 5x5 at
 * stride 1, so the multiply-adds rather than the loads set the pace); whole
 * 16-channel blocks load without a mask, the last partial one with.
 * rows[ki] is input row oh*sh - pt + ki*dh at channel 0 (a zero row in the
 * padding), w the filter [KH*KW][C]. The sum is bias + taps in (ki, kj)
 * order, as in dw_pixel (a padding row adds zeros). */
#define DEFINE_DW_ROW512(NAME, KH_, KW_)                                                       \
  static inline __attribute__((target("avx512f"), always_inline)) void NAME##_win(          \
      const int SW_, const float *const *rows, int64_t C, int64_t pl, int64_t ow0, int64_t ow1, \
      const float *w, const float *bias, float lo, float hi, float *orow, int64_t *ow_done) {   \
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);                            \
    int64_t ow = ow0;                                                                            \
    for (; ow + 4 <= ow1; ow += 4) {                                                             \
      const int64_t base = ow * SW_ - pl;                                                        \
      int64_t c = 0;                                                                             \
      for (; c + 16 <= C; c += 16) {                                                             \
        const __m512 b = _mm512_loadu_ps(bias + c);                                              \
        __m512 a0 = b, a1 = b, a2 = b, a3 = b;                                                   \
        DW_FOUR_WIN(KH_, KW_, SW_, DW_LOAD_FULL)                                                 \
        dw_store4(orow + ow * C + c, C, (__mmask16)0xFFFF, vlo, vhi, a0, a1, a2, a3);             \
      }                                                                                          \
      if (c < C) {                                                                               \
        const __mmask16 m = (__mmask16)((1u << (C - c)) - 1);                                    \
        const __m512 b = _mm512_maskz_loadu_ps(m, bias + c);                                     \
        __m512 a0 = b, a1 = b, a2 = b, a3 = b;                                                   \
        DW_FOUR_WIN(KH_, KW_, SW_, DW_LOAD_MASK)                                                 \
        dw_store4(orow + ow * C + c, C, m, vlo, vhi, a0, a1, a2, a3);                            \
      }                                                                                          \
    }                                                                                            \
    *ow_done = ow;                                                                               \
  }                                                                                              \
  __attribute__((target("avx512f"))) void NAME(                                          \
      const float *const *rows, int64_t C, int64_t sw, int64_t dw, int64_t pl, int64_t ow0,      \
      int64_t ow1, const float *w, const float *bias, float lo, float hi, float *orow) {        \
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);                            \
    const int64_t xs = sw * C, ts = dw * C;                                                      \
    int64_t ow = ow0;                                                                            \
    if (dw == 1 && sw == 1)                                                                      \
      NAME##_win(1, rows, C, pl, ow0, ow1, w, bias, lo, hi, orow, &ow);                         \
    else if (dw == 1 && sw == 2)                                                                 \
      NAME##_win(2, rows, C, pl, ow0, ow1, w, bias, lo, hi, orow, &ow);                         \
    for (; ow + 4 <= ow1; ow += 4) {                                                             \
      for (int64_t c = 0; c < C; c += 16) {                                                      \
        const __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);  \
        const __m512 b = _mm512_maskz_loadu_ps(m, bias + c);                                     \
        __m512 a0 = b, a1 = b, a2 = b, a3 = b;                                                   \
        for (int ki = 0; ki < KH_; ki++) {                                                       \
          const float *r = rows[ki] + (ow * sw - pl) * C + c;                                    \
          for (int kj = 0; kj < KW_; kj++) {                                                     \
            const float *q = r + kj * ts;                                                        \
            const __m512 wt = _mm512_maskz_loadu_ps(m, w + (ki * KW_ + kj) * C + c);              \
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q), wt, a0);                           \
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + xs), wt, a1);                      \
            a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + 2 * xs), wt, a2);                  \
            a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + 3 * xs), wt, a3);                  \
          }                                                                                      \
        }                                                                                        \
        dw_store4(orow + ow * C + c, C, m, vlo, vhi, a0, a1, a2, a3);                            \
      }                                                                                          \
    }                                                                                            \
    for (; ow < ow1; ow++) {                                                                     \
      /* one pixel: four channel blocks at a time, four chains (one chain of                      \
       * KH_ x KW_ dependent multiply-adds per block was most of a 14-wide row) */                 \
      int64_t c = 0;                                                                             \
      for (; c + 64 <= C; c += 64) {                                                             \
        __m512 a0 = _mm512_loadu_ps(bias + c), a1 = _mm512_loadu_ps(bias + c + 16);              \
        __m512 a2 = _mm512_loadu_ps(bias + c + 32), a3 = _mm512_loadu_ps(bias + c + 48);         \
        for (int ki = 0; ki < KH_; ki++) {                                                       \
          const float *r = rows[ki] + (ow * sw - pl) * C + c;                                    \
          for (int kj = 0; kj < KW_; kj++) {                                                     \
            const float *q = r + kj * ts, *wk = w + (ki * KW_ + kj) * C + c;                     \
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(wk), a0);                   \
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), _mm512_loadu_ps(wk + 16), a1);         \
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), _mm512_loadu_ps(wk + 32), a2);         \
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), _mm512_loadu_ps(wk + 48), a3);         \
          }                                                                                      \
        }                                                                                        \
        float *o = orow + ow * C + c;                                                            \
        _mm512_storeu_ps(o, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a0)));                         \
        _mm512_storeu_ps(o + 16, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a1)));                    \
        _mm512_storeu_ps(o + 32, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a2)));                    \
        _mm512_storeu_ps(o + 48, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a3)));                    \
      }                                                                                          \
      for (; c < C; c += 16) {                                                                   \
        const __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);  \
        __m512 a0 = _mm512_maskz_loadu_ps(m, bias + c);                                          \
        for (int ki = 0; ki < KH_; ki++) {                                                       \
          const float *r = rows[ki] + (ow * sw - pl) * C + c;                                    \
          for (int kj = 0; kj < KW_; kj++)                                                       \
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r + kj * ts),                          \
                                 _mm512_maskz_loadu_ps(m, w + (ki * KW_ + kj) * C + c), a0);     \
        }                                                                                        \
        _mm512_mask_storeu_ps(orow + ow * C + c, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, a0)));  \
      }                                                                                          \
    }                                                                                            \
  }

DEFINE_DW_ROW512(px_dw_row_3x3_avx512, 3, 3)
DEFINE_DW_ROW512(px_dw_row_5x5_avx512, 5, 5)
DEFINE_DW_ROW512(px_dw_row_7x7_avx512, 7, 7) /* ConvNeXt */
#endif

typedef int px_dwconv_x86_unused; /* ISO C: no empty translation unit */
