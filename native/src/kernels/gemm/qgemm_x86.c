/*
 * qgemm_x86.c - the x86-64 micro-kernels of the integer GEMM (qgemm_impl.h
 * has the packed layout and the contract): AVX2 and AVX-512 VNNI, compiled
 * with target attributes and chosen at run time by qgemm.c.
 *
 * 8-bit weights are stored as uint8 (w - zp + 128). AVX2 widens both sides
 * to int16 and multiplies with vpmaddwd (255 * 128 * 2 fits; vpmaddubsw could
 * saturate here, so it is not used); VNNI's vpdpbusd takes the uint8 weights
 * and int8 activations directly. 4-bit weights are unpacked in registers
 * (mask, shift): AVX2 uses vpmaddubsw (nibble <= 15, so a pair is at most
 * 3840 in magnitude, and up to 8 such sums are added in int16 before
 * vpmaddwd widens them: 30720 < 32767, no saturation), VNNI vpdpbusd.
 */
#include "kernels/gemm/qgemm_impl.h"

#if QG_X86
#include <immintrin.h>
#include <string.h>

static inline int32_t qg_load4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* ---- AVX2, 8-bit: two rows at a time ---------------------------------------- */

#define QG_AVX2 __attribute__((target("avx2"), always_inline)) static inline

/* Lanes (n, half) of four vectors holding channels 0-3, 4-7, 8-11, 12-15 as
 * pairs of partial sums, folded to 16 sums in channel order. */
QG_AVX2 void qg_fold8_avx2(__m256i c0, __m256i c1, __m256i c2, __m256i c3, int32_t *raw) {
  __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c0, c1), 0xD8);
  __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c2, c3), 0xD8);
  _mm256_storeu_si256((__m256i *)raw, lo);
  _mm256_storeu_si256((__m256i *)(raw + 8), hi);
}

QG_AVX2 void qg_rows8_avx2(const uint8_t *w, const int8_t *a0, const int8_t *a1, int two, int64_t nu,
                           int32_t *raw0, int32_t *raw1) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c02 = c00, c03 = c00;
  __m256i c10 = c00, c11 = c00, c12 = c00, c13 = c00;
  for (int64_t u = 0; u < nu; u++, w += 128) {
    __m128i x0 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(a0 + u * 8)));
    __m128i x1 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(a1 + u * 8)));
    for (int q = 0; q < 2; q++) {
      __m256i b0 = _mm256_broadcastq_epi64(q ? _mm_unpackhi_epi64(x0, x0) : x0);
      __m256i b1 = _mm256_broadcastq_epi64(q ? _mm_unpackhi_epi64(x1, x1) : x1);
      const uint8_t *wq = w + q * 64;
      __m256i w0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)wq));
      __m256i w1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(wq + 16)));
      __m256i w2 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(wq + 32)));
      __m256i w3 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(wq + 48)));
      c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(w0, b0));
      c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(w1, b0));
      c02 = _mm256_add_epi32(c02, _mm256_madd_epi16(w2, b0));
      c03 = _mm256_add_epi32(c03, _mm256_madd_epi16(w3, b0));
      if (two) {
        c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(w0, b1));
        c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(w1, b1));
        c12 = _mm256_add_epi32(c12, _mm256_madd_epi16(w2, b1));
        c13 = _mm256_add_epi32(c13, _mm256_madd_epi16(w3, b1));
      }
    }
  }
  qg_fold8_avx2(c00, c01, c02, c03, raw0);
  if (two) qg_fold8_avx2(c10, c11, c12, c13, raw1);
}

__attribute__((target("avx2"))) void qg_ukr8_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr,
                                                  int64_t nu, int32_t *raw) {
  for (int i = 0; i < mr; i += 2) {
    if (mr - i >= 2)
      qg_rows8_avx2(w, a + i * lda, a + (i + 1) * lda, 1, nu, raw + i * QG_NR, raw + (i + 1) * QG_NR);
    else
      qg_rows8_avx2(w, a + i * lda, a + i * lda, 0, nu, raw + i * QG_NR, raw + i * QG_NR);
  }
}

/* ---- AVX2, 4-bit ------------------------------------------------------------ */

#define QG_U16 4 /* units summed in int16 before widening (8 vpmaddubsw sums) */

QG_AVX2 void qg_rows4_avx2(const uint8_t *w, const int8_t *a, int64_t lda, const int mr, int64_t nu,
                           int32_t *raw) {
  const __m256i mask = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  __m256i c[QG_MR][2];
  for (int i = 0; i < mr; i++) c[i][0] = c[i][1] = _mm256_setzero_si256();
  for (int64_t u0 = 0; u0 < nu; u0 += QG_U16) {
    int64_t ue = u0 + QG_U16 < nu ? u0 + QG_U16 : nu;
    __m256i p[QG_MR][2];
    for (int i = 0; i < mr; i++) p[i][0] = p[i][1] = _mm256_setzero_si256();
    for (int64_t u = u0; u < ue; u++) {
      const uint8_t *wu = w + u * 64;
      __m256i v0 = _mm256_loadu_si256((const __m256i *)wu);
      __m256i v1 = _mm256_loadu_si256((const __m256i *)(wu + 32));
      __m256i lo0 = _mm256_and_si256(v0, mask), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), mask);
      __m256i lo1 = _mm256_and_si256(v1, mask), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), mask);
      for (int i = 0; i < mr; i++) {
        const int8_t *ar = a + i * lda + u * 8;
        __m256i q0 = _mm256_set1_epi32(qg_load4(ar)), q1 = _mm256_set1_epi32(qg_load4(ar + 4));
        p[i][0] = _mm256_add_epi16(p[i][0], _mm256_add_epi16(_mm256_maddubs_epi16(lo0, q0),
                                                             _mm256_maddubs_epi16(hi0, q1)));
        p[i][1] = _mm256_add_epi16(p[i][1], _mm256_add_epi16(_mm256_maddubs_epi16(lo1, q0),
                                                             _mm256_maddubs_epi16(hi1, q1)));
      }
    }
    for (int i = 0; i < mr; i++) {
      c[i][0] = _mm256_add_epi32(c[i][0], _mm256_madd_epi16(p[i][0], ones));
      c[i][1] = _mm256_add_epi32(c[i][1], _mm256_madd_epi16(p[i][1], ones));
    }
  }
  for (int i = 0; i < mr; i++) {
    _mm256_storeu_si256((__m256i *)(raw + i * QG_NR), c[i][0]);
    _mm256_storeu_si256((__m256i *)(raw + i * QG_NR + 8), c[i][1]);
  }
}

#define QG_DISPATCH_MR(fn)                                                 \
  switch (mr) {                                                            \
  case 1:                                                                  \
    fn(w, a, lda, 1, nu, raw);                                             \
    break;                                                                 \
  case 2:                                                                  \
    fn(w, a, lda, 2, nu, raw);                                             \
    break;                                                                 \
  case 3:                                                                  \
    fn(w, a, lda, 3, nu, raw);                                             \
    break;                                                                 \
  default:                                                                 \
    fn(w, a, lda, 4, nu, raw);                                             \
    break;                                                                 \
  }

__attribute__((target("avx2"))) void qg_ukr4_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr,
                                                  int64_t nu, int32_t *raw) {
  QG_DISPATCH_MR(qg_rows4_avx2)
}

/* ---- AVX-512 VNNI ------------------------------------------------------------ */

#define QG_VNNI_T __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define QG_VNNI QG_VNNI_T __attribute__((always_inline)) static inline

/* Two accumulators per row (even and odd quads) to hide vpdpbusd's latency. */
QG_VNNI void qg_rows8_vnni(const uint8_t *w, const int8_t *a, int64_t lda, const int mr, int64_t nu,
                           int32_t *raw) {
  __m512i c[QG_MR][2];
  for (int i = 0; i < mr; i++) c[i][0] = c[i][1] = _mm512_setzero_si512();
  for (int64_t u = 0; u < nu; u++, w += 128) {
    __m512i w0 = _mm512_loadu_si512((const void *)w);
    __m512i w1 = _mm512_loadu_si512((const void *)(w + 64));
    for (int i = 0; i < mr; i++) {
      const int8_t *ar = a + i * lda + u * 8;
      c[i][0] = _mm512_dpbusd_epi32(c[i][0], w0, _mm512_set1_epi32(qg_load4(ar)));
      c[i][1] = _mm512_dpbusd_epi32(c[i][1], w1, _mm512_set1_epi32(qg_load4(ar + 4)));
    }
  }
  for (int i = 0; i < mr; i++) _mm512_storeu_si512((void *)(raw + i * QG_NR), _mm512_add_epi32(c[i][0], c[i][1]));
}

QG_VNNI void qg_rows4_vnni(const uint8_t *w, const int8_t *a, int64_t lda, const int mr, int64_t nu,
                           int32_t *raw) {
  const __m512i mask = _mm512_set1_epi8(15);
  __m512i c[QG_MR][2];
  for (int i = 0; i < mr; i++) c[i][0] = c[i][1] = _mm512_setzero_si512();
  for (int64_t u = 0; u < nu; u++, w += 64) {
    __m512i v = _mm512_loadu_si512((const void *)w);
    __m512i lo = _mm512_and_si512(v, mask), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
    for (int i = 0; i < mr; i++) {
      const int8_t *ar = a + i * lda + u * 8;
      c[i][0] = _mm512_dpbusd_epi32(c[i][0], lo, _mm512_set1_epi32(qg_load4(ar)));
      c[i][1] = _mm512_dpbusd_epi32(c[i][1], hi, _mm512_set1_epi32(qg_load4(ar + 4)));
    }
  }
  for (int i = 0; i < mr; i++) _mm512_storeu_si512((void *)(raw + i * QG_NR), _mm512_add_epi32(c[i][0], c[i][1]));
}

QG_VNNI_T void qg_ukr8_vnni(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, int32_t *raw) {
  QG_DISPATCH_MR(qg_rows8_vnni)
}

QG_VNNI_T void qg_ukr4_vnni(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, int32_t *raw) {
  QG_DISPATCH_MR(qg_rows4_vnni)
}

#else
typedef int qg_x86_unused; /* ISO C wants a translation unit to declare something */
#endif
