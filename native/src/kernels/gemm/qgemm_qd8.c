/*
 * qgemm_qd8.c - XNNPACK's dynamic per-row quantization of float activations
 * to int8 (px_quantize_qd8, qgemm.h; the reference's A10), on the path the
 * products run: the AVX2 / AVX-512 row passes here, the NEON ones in
 * qgemm_neon.c, else the portable ones here.
 */
#include <math.h>

#include "kernels/gemm/qgemm.h"
#include "kernels/gemm/qgemm_impl.h"

/* ---- x86-64: the AVX2 and AVX-512 row passes --------------------------------- */

#if QG_X86
#include <immintrin.h>

/* Each pass of a row: its range (NaN ignored, both ends starting at 0) and
 * its quantization (min(max(x * mult, lo), hi), rounded half to even, plus
 * zp), the same results on every path. */
#define QD8_AVX2 static __attribute__((target("avx2")))
#define QD8_AVX512 static __attribute__((target("avx512f,avx512bw,avx512vl")))

/* min_ps(x, m) is x < m ? x : m, so a NaN x leaves m (as the scalar pass);
 * lanes start at +0 and a -0 never replaces it, so the order of the final
 * reduction cannot matter. */
QD8_AVX2 void qg_qd8_range_avx2(const float *r, int64_t K, float *rmin, float *rmax) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 x = _mm256_loadu_ps(r + k);
    lo = _mm256_min_ps(x, lo);
    hi = _mm256_max_ps(x, hi);
  }
  float l[8], h[8];
  _mm256_storeu_ps(l, lo);
  _mm256_storeu_ps(h, hi);
  float a = 0.0f, b = 0.0f;
  for (int i = 0; i < 8; i++) {
    a = l[i] < a ? l[i] : a;
    b = h[i] > b ? h[i] : b;
  }
  for (; k < K; k++) {
    a = r[k] < a ? r[k] : a;
    b = r[k] > b ? r[k] : b;
  }
  *rmin = a;
  *rmax = b;
}

/* max_ps(v, lo) is v > lo ? v : lo (lo for NaN), min_ps(v, hi) v < hi ? v :
 * hi, as qgemm.c's scalar pass; cvtps2dq rounds half to even as lrintf. */
QD8_AVX2 void qg_qd8_quant_avx2(const float *r, int64_t K, float mult, float lo, float hi, int32_t zp, int8_t *q) {
  const __m256 m = _mm256_set1_ps(mult), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256i z = _mm256_set1_epi32(zp);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m256 f0 = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(r + k), m), vlo), vhi);
    __m256 f1 = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(r + k + 8), m), vlo), vhi);
    __m256i q0 = _mm256_add_epi32(_mm256_cvtps_epi32(f0), z), q1 = _mm256_add_epi32(_mm256_cvtps_epi32(f1), z);
    __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
    _mm_storeu_si128((__m128i *)(q + k),
                     _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1)));
  }
  for (; k < K; k++) {
    float v = r[k] * mult;
    v = lo < v ? v : lo;
    v = v < hi ? v : hi;
    q[k] = (int8_t)(_mm_cvtss_si32(_mm_set_ss(v)) + zp);
  }
}

/* px_quantize_qd8's passes 16 lanes wide: the range in four independent
 * pairs of min / max chains (one 8-lane chain is 256 dependent steps for a
 * row of 2048), the same extremes (min and max of values that never take a
 * NaN or a negative zero into the chains: a NaN x leaves the chain as it
 * was, and -0.0 never replaces the starting 0.0); the quantization as
 * qg_qd8_quant_avx2's, the int32 values already within int8 (clamped to
 * [lo, hi] before zp is added), so the narrowing's saturation never acts. */
QD8_AVX512 void qg_qd8_range_avx512(const float *r, int64_t K, float *rmin, float *rmax) {
  __m512 lo[4], hi[4];
  for (int c = 0; c < 4; c++) lo[c] = hi[c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 64 <= K; k += 64)
    for (int c = 0; c < 4; c++) {
      const __m512 x = _mm512_loadu_ps(r + k + 16 * c);
      lo[c] = _mm512_min_ps(x, lo[c]);
      hi[c] = _mm512_max_ps(x, hi[c]);
    }
  for (; k + 16 <= K; k += 16) {
    const __m512 x = _mm512_loadu_ps(r + k);
    lo[0] = _mm512_min_ps(x, lo[0]);
    hi[0] = _mm512_max_ps(x, hi[0]);
  }
  /* the chains hold neither NaNs nor -0.0, so the order they are combined
   * in (vectors, then lanes by shuffles) gives the same extremes */
  float a = _mm512_reduce_min_ps(_mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3])));
  float b = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3])));
  for (; k < K; k++) {
    a = r[k] < a ? r[k] : a;
    b = r[k] > b ? r[k] : b;
  }
  *rmin = a;
  *rmax = b;
}

QD8_AVX512 void qg_qd8_quant_avx512(const float *r, int64_t K, float mult, float lo, float hi, int32_t zp,
                                   int8_t *q) {
  const __m512 m = _mm512_set1_ps(mult), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512i z = _mm512_set1_epi32(zp);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 f = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(r + k), m), vlo), vhi);
    _mm_storeu_si128((__m128i *)(q + k), _mm512_cvtsepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), z)));
  }
  qg_qd8_quant_avx2(r + k, K - k, mult, lo, hi, zp, q + k);
}

#endif

/* ---- the portable passes and the entry point ---------------------------------- */


static void qg_qd8_range_c(const float *r, int64_t K, float *rmin, float *rmax) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t k = 0; k < K; k++) {
    lo = r[k] < lo ? r[k] : lo;
    hi = r[k] > hi ? r[k] : hi;
  }
  *rmin = lo;
  *rmax = hi;
}

static void qg_qd8_quant_c(const float *r, int64_t K, float mult, float lo, float hi, int32_t zp, int8_t *q) {
  for (int64_t k = 0; k < K; k++) {
    float v = qg_min(qg_max(r[k] * mult, lo), hi);
    q[k] = (int8_t)(lrintf(v) + zp);
  }
}

void px_quantize_qd8(const float *x, int64_t M, int64_t K, int64_t ldx, int8_t *q, int32_t *zp,
                     float *scale) {
  void (*range)(const float *, int64_t, float *, float *) = qg_qd8_range_c;
  void (*quant)(const float *, int64_t, float, float, float, int32_t, int8_t *) = qg_qd8_quant_c;
#if QG_X86
  if (px_qgemm_path() == PX_QGEMM_AVX2) {
    range = qg_qd8_range_avx2;
    quant = qg_qd8_quant_avx2;
  }
  if (px_qgemm_path() == PX_QGEMM_AVX512_VNNI) {
    range = qg_qd8_range_avx512;
    quant = qg_qd8_quant_avx512;
  }
#endif
#if QG_NEON
  if (px_qgemm_path() == PX_QGEMM_NEON || px_qgemm_path() == PX_QGEMM_NEON_DOT) {
    range = qg_qd8_range_neon;
    quant = qg_qd8_quant_neon;
  }
#endif
  for (int64_t m = 0; m < M; m++) {
    const float *r = x + m * ldx;
    float rmin, rmax; /* NaN ignored */
    range(r, K, &rmin, &rmax);
    float mult = rmin == rmax ? 1.0f : 255.0f / (rmax - rmin);
    float dmin = rmin * mult, dmax = rmax * mult;
    float z = (-128.0f + dmin) + (127.0f + dmax) > 0.0f ? -128.0f - dmin : 127.0f - dmax;
    z = qg_min(qg_max(z, -128.0f), 127.0f);
    if (!(z == z)) z = 0.0f; /* a row with an infinity: keep lrintf defined */
    long izp = lrintf(z);
    quant(r, K, mult, (float)(-128 - izp), (float)(127 - izp), (int32_t)izp, q + m * K);
    zp[m] = (int32_t)izp;
    scale[m] = 1.0f / mult;
  }
}
