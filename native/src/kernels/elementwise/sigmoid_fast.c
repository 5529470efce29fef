/*
 * sigmoid_fast.c - the float32 sigmoid of XNNPACK graphs' Sigmoid and SiLU
 * nodes (flat.h): fused multiply-adds, a 14-bit reciprocal estimate and one
 * Newton step in place of the division, as XNNPACK's own AVX-512 kernels
 * compute it. Within 3 ulp of the exact value (the portable loops'
 * sigmoid, which a division rounds, is within 2.5): a different rounding,
 * so it is kept to float32 graphs; float16 / bfloat16 graphs and aten's
 * sigmoid keep px_f32_sigmoid, whose bits their tests pin to ExecuTorch's.
 *
 * sigmoid(x) = f for x <= 0 and 1 - f for x > 0, f = e / (1 + e) with
 * e = 2^n p(r) = exp(-|x|) (n = round(-|x| log2 e), r the remainder in two
 * parts of ln 2, p the Cephes polynomial of expf); scalef takes 2^n to 0
 * far below the normal range (the delegate runs with denormals off). A
 * NaN comes out as itself, infinities as 0 and 1.
 */
#include <math.h>

#include "core/cpu.h"
#include "kernels/elementwise/flat.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#include <immintrin.h>
#define SIG_X86 1

__attribute__((target("avx512f"), always_inline)) static inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  /* -|x|, at least -104 (infinities: e^-104 is below every float, so 2^n p
   * comes out 0 as e^-inf would); a NaN becomes -104 here and x at the end */
  const __m512 z = _mm512_max_ps(
      _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))),
      _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(z, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), z);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), one);
  const __m512 e = _mm512_scalef_ps(p, n);
  const __m512 d = _mm512_add_ps(e, one);
  __m512 q = _mm512_rcp14_ps(d);
  q = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, d, one), q, q);
  const __m512 f = _mm512_mul_ps(e, q);
  const __m512 y = _mm512_mask_sub_ps(f, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), one, f);
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/* y = sigmoid(x), or x * sigmoid(x) (the product rounded once) when times_x. */
__attribute__((target("avx512f"))) static void sigmoid_rows512(int64_t n, const float *x, float *y, bool times_x) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k), s = sigmoid16(v);
    _mm512_storeu_ps(y + k, times_x ? _mm512_mul_ps(v, s) : s);
  }
  if (k < n) {
    const __mmask16 m = (__mmask16)((1u << (n - k)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k), s = sigmoid16(v);
    _mm512_mask_storeu_ps(y + k, m, times_x ? _mm512_mul_ps(v, s) : s);
  }
}
#else
#define SIG_X86 0
#endif

void px_f32_sigmoid_fast(int64_t n, const float *x, float *y) {
#if SIG_X86
  if (px_cpu()->avx512f) {
    sigmoid_rows512(n, x, y, false);
    return;
  }
#endif
  px_f32_sigmoid(n, x, y);
}

void px_f32_mul_sigmoid_fast_inplace(int64_t n, float *y) {
#if SIG_X86
  if (px_cpu()->avx512f) {
    sigmoid_rows512(n, y, y, true);
    return;
  }
#endif
  px_f32_mul_sigmoid_inplace(n, y);
}
