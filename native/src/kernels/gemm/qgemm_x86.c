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

#define QG_UNROLL _Pragma("GCC unroll 4")

static inline int32_t qg_load4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

#define QG_AVX2_T __attribute__((target("avx2")))
#define QG_AVX2 QG_AVX2_T __attribute__((always_inline)) static inline
/* the blockwise kernels, whose steps are fused multiply-adds (the AVX2 path
 * is only chosen where the CPU has FMA) */
#define QG_AVX2F_T __attribute__((target("avx2,fma")))
#define QG_AVX2F QG_AVX2F_T __attribute__((always_inline)) static inline

/* The sum of n int8 values (qg_sum_fn): bytes flipped to unsigned (x ^ 0x80
 * = x + 128) and summed by vpsadbw, 64 bytes a step into two accumulators
 * (a gathered convolution row is 100s of bytes), then 32, 16 and 8, the
 * 128s taken back. */
QG_AVX2 int32_t qg_sum_s8_body(const int8_t *p, int64_t n) {
  const __m256i flip = _mm256_set1_epi8((char)0x80), zero = _mm256_setzero_si256();
  __m256i acc0 = zero, acc1 = zero;
  int64_t k = 0;
  for (; k + 64 <= n; k += 64) {
    acc0 = _mm256_add_epi64(acc0, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + k)), flip), zero));
    acc1 = _mm256_add_epi64(acc1, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + k + 32)), flip), zero));
  }
  if (k + 32 <= n) {
    acc0 = _mm256_add_epi64(acc0, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + k)), flip), zero));
    k += 32;
  }
  acc0 = _mm256_add_epi64(acc0, acc1);
  __m128i acc = _mm_add_epi64(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
  const __m128i flip16 = _mm_set1_epi8((char)0x80), zero16 = _mm_setzero_si128();
  if (k + 16 <= n) {
    acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + k)), flip16), zero16));
    k += 16;
  }
  if (k + 8 <= n) {
    const __m128i flip8 = _mm_set_epi64x(0, (long long)0x8080808080808080ull); /* the high 8 bytes stay 0 */
    acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_xor_si128(_mm_loadl_epi64((const __m128i *)(p + k)), flip8), zero16));
    k += 8;
  }
  int64_t s = _mm_cvtsi128_si64(acc) + _mm_extract_epi64(acc, 1) - 128 * k;
  for (; k < n; k++) s += p[k];
  return (int32_t)s;
}

QG_AVX2_T int32_t qg_sum_s8_avx2(const int8_t *p, int64_t n) { return qg_sum_s8_body(p, n); }

/* out[r] = the sum of row r's n values (rows stride bytes apart), the loop
 * over rows inside the AVX2 code: a 1x1 convolution's rows are 16-64 bytes,
 * where a call per row cost as much as the sum. */
QG_AVX2_T void qg_sums_s8_avx2(const int8_t *p, int64_t rows, int64_t n, int64_t stride, int32_t *out) {
  for (int64_t r = 0; r < rows; r++) out[r] = qg_sum_s8_body(p + r * stride, n);
}

/* ---- AVX2, 8-bit: two rows at a time ---------------------------------------- */

/* Lanes (n, half) of four vectors holding channels 0-3, 4-7, 8-11, 12-15 as
 * pairs of partial sums, folded to 16 sums in channel order. */
QG_AVX2 void qg_fold8_avx2(__m256i c0, __m256i c1, __m256i c2, __m256i c3, int32_t *raw) {
  __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c0, c1), 0xD8);
  __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c2, c3), 0xD8);
  _mm256_storeu_si256((__m256i *)raw, lo);
  _mm256_storeu_si256((__m256i *)(raw + 8), hi);
}

QG_AVX2 void qg_rows8_avx2(const uint8_t *w, const int8_t *a0, const int8_t *a1, const int two, int64_t nu,
                           int32_t *raw0, int32_t *raw1) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c02 = c00, c03 = c00;
  __m256i c10 = c00, c11 = c00, c12 = c00, c13 = c00;
  for (int64_t u = 0; u < nu; u++, w += 128) {
    __m128i x0 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(a0 + u * 8)));
    __m128i x1 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(a1 + u * 8)));
    _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++) {
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

QG_AVX2 void qg_block8_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, int32_t *raw) {
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
  /* The int32 sums live in raw (memory), updated once per QG_U16 units, so
   * that the int16 sums, weights and constants fit the 16 registers. */
  QG_UNROLL for (int i = 0; i < mr; i++) {
    _mm256_storeu_si256((__m256i *)(raw + i * QG_NR), _mm256_setzero_si256());
    _mm256_storeu_si256((__m256i *)(raw + i * QG_NR + 8), _mm256_setzero_si256());
  }
  for (int64_t u0 = 0; u0 < nu; u0 += QG_U16) {
    int64_t ue = u0 + QG_U16 < nu ? u0 + QG_U16 : nu;
    __m256i p0[QG_MR], p1[QG_MR];
    QG_UNROLL for (int i = 0; i < mr; i++) p0[i] = p1[i] = _mm256_setzero_si256();
    for (int64_t u = u0; u < ue; u++) {
      const uint8_t *wu = w + u * 64;
      __m256i v0 = _mm256_loadu_si256((const __m256i *)wu);
      __m256i v1 = _mm256_loadu_si256((const __m256i *)(wu + 32));
      __m256i lo0 = _mm256_and_si256(v0, mask), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), mask);
      __m256i lo1 = _mm256_and_si256(v1, mask), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), mask);
      QG_UNROLL for (int i = 0; i < mr; i++) {
        const int8_t *ar = a + i * lda + u * 8;
        __m256i q0 = _mm256_set1_epi32(qg_load4(ar)), q1 = _mm256_set1_epi32(qg_load4(ar + 4));
        p0[i] = _mm256_add_epi16(p0[i], _mm256_add_epi16(_mm256_maddubs_epi16(lo0, q0),
                                                         _mm256_maddubs_epi16(hi0, q1)));
        p1[i] = _mm256_add_epi16(p1[i], _mm256_add_epi16(_mm256_maddubs_epi16(lo1, q0),
                                                         _mm256_maddubs_epi16(hi1, q1)));
      }
    }
    QG_UNROLL for (int i = 0; i < mr; i++) {
      __m256i *r0 = (__m256i *)(raw + i * QG_NR), *r1 = (__m256i *)(raw + i * QG_NR + 8);
      _mm256_storeu_si256(r0, _mm256_add_epi32(_mm256_loadu_si256(r0), _mm256_madd_epi16(p0[i], ones)));
      _mm256_storeu_si256(r1, _mm256_add_epi32(_mm256_loadu_si256(r1), _mm256_madd_epi16(p1[i], ones)));
    }
  }
}

QG_AVX2 void qg_block4_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, int32_t *raw) {
  switch (mr) {
  case 1:
    qg_rows4_avx2(w, a, lda, 1, nu, raw);
    break;
  case 2:
    qg_rows4_avx2(w, a, lda, 2, nu, raw);
    break;
  case 3:
    qg_rows4_avx2(w, a, lda, 3, nu, raw);
    break;
  default:
    qg_rows4_avx2(w, a, lda, 4, nu, raw);
    break;
  }
}

/* Blockwise 4-bit weights with each block finished in registers (the 8da4w
 * decode case: at M = 1 nothing but the weights goes through memory). */
QG_AVX2F void qg_rows4b_avx2(const uint8_t *w, const int8_t *a, int64_t lda, const int mr, int64_t nu,
                            const qg_blocks *b, float *out) {
  const __m256i mask = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  __m256 f0[QG_MR], f1[QG_MR];
  const __m256 corr0 = _mm256_loadu_ps(b->corr), corr1 = _mm256_loadu_ps(b->corr + 8);
  QG_UNROLL for (int i = 0; i < mr; i++) {
    const __m256 z = _mm256_set1_ps(-(float)b->azp[i]);
    f0[i] = _mm256_mul_ps(z, corr0);
    f1[i] = _mm256_mul_ps(z, corr1);
  }
  for (int64_t g = 0; g < b->nb; g++, w += b->wstride, a += b->astride) {
    __m256i c0[QG_MR], c1[QG_MR];
    QG_UNROLL for (int i = 0; i < mr; i++) c0[i] = c1[i] = _mm256_setzero_si256();
    for (int64_t u0 = 0; u0 < nu; u0 += QG_U16) {
      int64_t ue = u0 + QG_U16 < nu ? u0 + QG_U16 : nu;
      __m256i p0[QG_MR], p1[QG_MR];
      QG_UNROLL for (int i = 0; i < mr; i++) p0[i] = p1[i] = _mm256_setzero_si256();
      for (int64_t u = u0; u < ue; u++) {
        const uint8_t *wu = w + u * 64;
        __m256i v0 = _mm256_loadu_si256((const __m256i *)wu);
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(wu + 32));
        __m256i lo0 = _mm256_and_si256(v0, mask), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), mask);
        __m256i lo1 = _mm256_and_si256(v1, mask), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), mask);
        QG_UNROLL for (int i = 0; i < mr; i++) {
          const int8_t *ar = a + i * lda + u * 8;
          __m256i q0 = _mm256_set1_epi32(qg_load4(ar)), q1 = _mm256_set1_epi32(qg_load4(ar + 4));
          p0[i] = _mm256_add_epi16(p0[i], _mm256_add_epi16(_mm256_maddubs_epi16(lo0, q0),
                                                           _mm256_maddubs_epi16(hi0, q1)));
          p1[i] = _mm256_add_epi16(p1[i], _mm256_add_epi16(_mm256_maddubs_epi16(lo1, q0),
                                                           _mm256_maddubs_epi16(hi1, q1)));
        }
      }
      QG_UNROLL for (int i = 0; i < mr; i++) {
        c0[i] = _mm256_add_epi32(c0[i], _mm256_madd_epi16(p0[i], ones));
        c1[i] = _mm256_add_epi32(c1[i], _mm256_madd_epi16(p1[i], ones));
      }
    }
    __m256 sc0, sc1;
    if (b->sbf16) {
      const uint16_t *p = qg_blk_sc(b, g);
      sc0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
      sc1 = _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 8))), 16));
    } else {
      sc0 = _mm256_loadu_ps((const float *)qg_blk_sc(b, g));
      sc1 = _mm256_loadu_ps((const float *)qg_blk_sc(b, g) + 8);
    }
    QG_UNROLL for (int i = 0; i < mr; i++) {
      __m256i cc = _mm256_set1_epi32(qg_wrap_mul(b->sbias, b->sa[i * b->nb + g]));
      f0[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(c0[i], cc)), sc0, f0[i]);
      f1[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(c1[i], cc)), sc1, f1[i]);
    }
  }
  QG_UNROLL for (int i = 0; i < mr; i++) {
    _mm256_storeu_ps(out + i * QG_NR, f0[i]);
    _mm256_storeu_ps(out + i * QG_NR + 8, f1[i]);
  }
}

/* Block g's raw sums corrected, scaled and added into f (qg_blocks). */
QG_AVX2F void qg_epi_avx2(const int32_t *raw, int mr, const qg_blocks *b, int64_t g, float *f) {
  __m256 sc[2];
  for (int h = 0; h < 2; h++) {
    int at = 8 * h;
    sc[h] = b->sbf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(
                           _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)qg_blk_sc(b, g) + at))), 16))
                     : _mm256_loadu_ps((const float *)qg_blk_sc(b, g) + at);
  }
  for (int i = 0; i < mr; i++) {
    __m256i c = _mm256_set1_epi32(qg_wrap_mul(b->sbias, b->sa[i * b->nb + g]));
    for (int h = 0; h < 2; h++) {
      __m256i v = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(raw + i * QG_NR + 8 * h)), c);
      float *fo = f + i * QG_NR + 8 * h;
      _mm256_storeu_ps(fo, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), sc[h], _mm256_loadu_ps(fo)));
    }
  }
}

QG_AVX2F void qg_ukr_avx2(const int bits, const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                         const qg_blocks *b, void *out) {
  if (!b) {
    if (bits == 8)
      qg_block8_avx2(w, a, lda, mr, nu, out);
    else
      qg_block4_avx2(w, a, lda, mr, nu, out);
    return;
  }
  if (bits == 4) {
    switch (mr) {
    case 1:
      qg_rows4b_avx2(w, a, lda, 1, nu, b, out);
      break;
    case 2:
      qg_rows4b_avx2(w, a, lda, 2, nu, b, out);
      break;
    case 3:
      qg_rows4b_avx2(w, a, lda, 3, nu, b, out);
      break;
    default:
      qg_rows4b_avx2(w, a, lda, 4, nu, b, out);
      break;
    }
    return;
  }
  int32_t raw[QG_MR * QG_NR];
  float *f = out;
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < QG_NR; j++) f[i * QG_NR + j] = -(float)b->azp[i] * b->corr[j];
  for (int64_t g = 0; g < b->nb; g++, w += b->wstride, a += b->astride) {
    if (bits == 8)
      qg_block8_avx2(w, a, lda, mr, nu, raw);
    else
      qg_block4_avx2(w, a, lda, mr, nu, raw);
    qg_epi_avx2(raw, mr, b, g, f);
  }
}

QG_AVX2F_T void qg_ukr8_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                            const qg_blocks *b, void *out) {
  qg_ukr_avx2(8, w, a, lda, mr, nu, b, out);
}

QG_AVX2F_T void qg_ukr4_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                            const qg_blocks *b, void *out) {
  qg_ukr_avx2(4, w, a, lda, mr, nu, b, out);
}

/* ---- the static int8 product's output step -------------------------------------- */

/* cvtps2dq rounds to nearest even under the default MXCSR, as lrintf does;
 * max/min return the bound for NaN as qgemm.c's scalar step does. */
QG_AVX2_T void qg_qs8_out_avx2(const int32_t *raw, int mr, int nn, const int32_t *rowc, const int32_t *kb,
                               const float *rq, float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc) {
  const __m256 lo = _mm256_set1_ps(qlo), hi = _mm256_set1_ps(qhi);
  const __m256i z = _mm256_set1_epi32(zp);
  __m256i kb0 = _mm256_loadu_si256((const __m256i *)kb), kb1 = _mm256_loadu_si256((const __m256i *)(kb + 8));
  __m256 rq0 = _mm256_loadu_ps(rq), rq1 = _mm256_loadu_ps(rq + 8);
  for (int i = 0; i < mr; i++) {
    __m256i c = _mm256_set1_epi32(rowc[i]);
    __m256i v0 = _mm256_add_epi32(_mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(raw + i * QG_NR)), c), kb0);
    __m256i v1 =
        _mm256_add_epi32(_mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(raw + i * QG_NR + 8)), c), kb1);
    __m256 f0 = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v0), rq0), lo), hi);
    __m256 f1 = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v1), rq1), lo), hi);
    __m256i q0 = _mm256_add_epi32(_mm256_cvtps_epi32(f0), z), q1 = _mm256_add_epi32(_mm256_cvtps_epi32(f1), z);
    __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
    __m128i b8 = _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1));
    if (nn == QG_NR) {
      _mm_storeu_si128((__m128i *)(out + i * ldc), b8);
    } else {
      int8_t tmp[QG_NR];
      _mm_storeu_si128((__m128i *)tmp, b8);
      memcpy(out + i * ldc, tmp, (size_t)nn);
    }
  }
}

/* max(lo, y) / min(hi, y) with the bound first: y when y is NaN, as the
 * scalar step's comparisons keep it. */
QG_AVX2_T void qg_f32_out_avx2(const int32_t *raw, const float *facc, int mr, int nn, const int32_t *rowc,
                               const int32_t *azp, const int32_t *ws, const float *as, const float *sc,
                               const float *bias, float lo, float hi, float *out, int64_t ldc) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (int i = 0; i < mr; i++) {
    float tmp[QG_NR];
    float *o = nn == QG_NR ? out + i * ldc : tmp;
    __m256 a = _mm256_set1_ps(as[i]);
    for (int h = 0; h < 2; h++) {
      __m256 y;
      if (raw) {
        __m256i v = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(raw + i * QG_NR + 8 * h)),
                                     _mm256_set1_epi32(rowc[i]));
        v = _mm256_sub_epi32(v, _mm256_mullo_epi32(_mm256_set1_epi32(azp[i]),
                                                   _mm256_loadu_si256((const __m256i *)(ws + 8 * h))));
        y = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), a), _mm256_loadu_ps(sc + 8 * h));
      } else {
        y = _mm256_mul_ps(_mm256_loadu_ps(facc + i * QG_NR + 8 * h), a);
      }
      if (bias) y = _mm256_add_ps(y, _mm256_loadu_ps(bias + 8 * h));
      y = _mm256_min_ps(vhi, _mm256_max_ps(vlo, y));
      _mm256_storeu_ps(o + 8 * h, y);
    }
    if (nn != QG_NR) memcpy(out + i * ldc, tmp, sizeof(float) * (size_t)nn);
  }
}

/* ---- AVX-512 VNNI ------------------------------------------------------------ */

#define QG_VNNI_T __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define QG_VNNI QG_VNNI_T __attribute__((always_inline)) static inline

/* acc += dot products of the unsigned bytes of u and the signed bytes of s
 * (vpdpbusd), written as one instruction on acc's register: through the
 * intrinsic GCC 12 copies every accumulator into a fresh register and back
 * on each use (two moves per vpdpbusd, a third of a loop's instructions). */
#define QG_DPBUSD(acc, u, s) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s))

/* mr rows; two accumulators per row (the unit's two quads) to hide
 * vpdpbusd's latency. Blocks are finished in registers. */
QG_VNNI void qg_rows_vnni(const int bits, const uint8_t *w, const int8_t *a, int64_t lda, const int mr,
                          int64_t nu, const qg_blocks *b, void *out) {
  const __m512i mask = _mm512_set1_epi8(15);
  __m512 f[QG_MR];
  QG_UNROLL for (int i = 0; i < mr; i++)
    f[i] = b ? _mm512_mul_ps(_mm512_set1_ps(-(float)b->azp[i]), _mm512_loadu_ps(b->corr)) : _mm512_setzero_ps();
  int64_t nb = b ? b->nb : 1;
  for (int64_t g = 0; g < nb; g++) {
    __m512i c0[QG_MR], c1[QG_MR];
    QG_UNROLL for (int i = 0; i < mr; i++) c0[i] = c1[i] = _mm512_setzero_si512();
    const uint8_t *wu = w;
    const int8_t *au = a;
    for (int64_t u = 0; u < nu; u++, au += 8) {
      __m512i lo, hi;
      if (bits == 8) {
        lo = _mm512_loadu_si512((const void *)wu);
        hi = _mm512_loadu_si512((const void *)(wu + 64));
        wu += 128;
      } else {
        __m512i v = _mm512_loadu_si512((const void *)wu);
        lo = _mm512_and_si512(v, mask);
        hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
        wu += 64;
      }
      QG_UNROLL for (int i = 0; i < mr; i++) {
        QG_DPBUSD(c0[i], lo, _mm512_set1_epi32(qg_load4(au + i * lda)));
        QG_DPBUSD(c1[i], hi, _mm512_set1_epi32(qg_load4(au + i * lda + 4)));
      }
    }
    if (!b) {
      int32_t *raw = out;
      QG_UNROLL for (int i = 0; i < mr; i++)
        _mm512_storeu_si512((void *)(raw + i * QG_NR), _mm512_add_epi32(c0[i], c1[i]));
      return;
    }
    __m512 sc = b->sbf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(
                               _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)qg_blk_sc(b, g))), 16))
                         : _mm512_loadu_ps((const float *)qg_blk_sc(b, g));
    QG_UNROLL for (int i = 0; i < mr; i++) {
      __m512i v = _mm512_add_epi32(c0[i], c1[i]);
      v = _mm512_sub_epi32(v, _mm512_set1_epi32(qg_wrap_mul(b->sbias, b->sa[i * nb + g])));
      f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), sc, f[i]);
    }
    w += b->wstride;
    a += b->astride;
  }
  float *fo = out;
  QG_UNROLL for (int i = 0; i < mr; i++) _mm512_storeu_ps(fo + i * QG_NR, f[i]);
}

#define QG_DISPATCH_MR(fn, bits)                \
  switch (mr) {                                 \
  case 1:                                       \
    fn(bits, w, a, lda, 1, nu, b, out);         \
    break;                                      \
  case 2:                                       \
    fn(bits, w, a, lda, 2, nu, b, out);         \
    break;                                      \
  case 3:                                       \
    fn(bits, w, a, lda, 3, nu, b, out);         \
    break;                                      \
  default:                                      \
    fn(bits, w, a, lda, 4, nu, b, out);         \
    break;                                      \
  }

QG_VNNI_T void qg_ukr8_vnni(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                            const qg_blocks *b, void *out) {
  QG_DISPATCH_MR(qg_rows_vnni, 8)
}

QG_VNNI_T void qg_ukr4_vnni(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                            const qg_blocks *b, void *out) {
  QG_DISPATCH_MR(qg_rows_vnni, 4)
}

/* c[i][t] += the 8-bit sums of mr rows and nt tiles (tile t at w + t * tb):
 * per unit, the rows' two broadcasts each, then tile by tile two loads and
 * 2 * mr vpdpbusd into that (row, tile)'s accumulator, so that a broadcast
 * serves 2 * nt products (16 chains at 4 x 4). pf: 0, or the distance in
 * bytes to the next unit's weights, whose lines each step then asks for. */
QG_VNNI void qg_sums8_vnni(const int mr, const int nt, const uint8_t *w, int64_t tb, const int8_t *a, int64_t lda,
                           int64_t nu, int64_t pf, __m512i c[QG_MR][QG_GV]) {
  for (int64_t u = 0; u < nu; u++, w += 128) {
    __m512i x0[QG_MR], x1[QG_MR];
    QG_UNROLL for (int i = 0; i < mr; i++) {
      x0[i] = _mm512_set1_epi32(qg_load4(a + i * lda + u * 8));
      x1[i] = _mm512_set1_epi32(qg_load4(a + i * lda + u * 8 + 4));
    }
    QG_UNROLL for (int t = 0; t < nt; t++) {
      const __m512i lo = _mm512_loadu_si512((const void *)(w + t * tb)),
                    hi = _mm512_loadu_si512((const void *)(w + t * tb + 64));
      if (pf) { /* the same step pf bytes on (see qg_pc_out) */
        _mm_prefetch((const char *)(w + pf + t * tb), _MM_HINT_T0);
        _mm_prefetch((const char *)(w + pf + t * tb + 64), _MM_HINT_T0);
      }
      QG_UNROLL for (int i = 0; i < mr; i++) {
        QG_DPBUSD(c[i][t], lo, x0[i]);
        QG_DPBUSD(c[i][t], hi, x1[i]);
      }
    }
  }
}

/* One row times nt tiles of blockwise 4-bit weights (qg_gemv_fn). Per unit
 * and tile: one load, two masks and two vpdpbusd into the tile's own pair of
 * accumulators, the row's two broadcasts shared by every tile. The high
 * nibbles are multiplied in place (v & 0xF0 is 16 times the nibble, at most
 * 240 as an unsigned byte) and their sums divided by 16 at the block's end:
 * exact, as each is a multiple of 16 that cannot wrap for the block sizes
 * the driver sends here (see qgemm.c). The block's end is qg_blocks' step,
 * tile by tile. Each tile's stream is prefetched 2 KiB ahead: from memory,
 * 25 -> 33 GB/s on one Zen 5 core (a plain read of memory there: 26-34). */
QG_VNNI void qg_gemv4_vnni_n(const int nt, const uint8_t *w, int64_t tb, const int8_t *a, int64_t nu,
                             const qg_blocks *b, float *out) {
  const __m512i mlo = _mm512_set1_epi8(0x0F), mhi = _mm512_set1_epi8((char)0xF0);
  __m512 f[QG_GV];
  QG_UNROLL for (int t = 0; t < nt; t++)
    f[t] = _mm512_mul_ps(_mm512_set1_ps(-(float)b->azp[0]), _mm512_loadu_ps(b->corr + t * QG_NR));
  for (int64_t g = 0; g < b->nb; g++, w += b->wstride, a += b->astride) {
    __m512i cl[QG_GV], ch[QG_GV];
    QG_UNROLL for (int t = 0; t < nt; t++) cl[t] = ch[t] = _mm512_setzero_si512();
    for (int64_t u = 0; u < nu; u++) {
      const __m512i x0 = _mm512_set1_epi32(qg_load4(a + u * 8)), x1 = _mm512_set1_epi32(qg_load4(a + u * 8 + 4));
      QG_UNROLL for (int t = 0; t < nt; t++) {
        const __m512i v = _mm512_loadu_si512((const void *)(w + t * tb + u * 64));
        _mm_prefetch((const char *)(w + t * tb + u * 64 + 2048), _MM_HINT_T0);
        QG_DPBUSD(cl[t], _mm512_and_si512(v, mlo), x0);
        QG_DPBUSD(ch[t], _mm512_and_si512(v, mhi), x1);
      }
    }
    const __m512i rowc = _mm512_set1_epi32(qg_wrap_mul(b->sbias, b->sa[g]));
    QG_UNROLL for (int t = 0; t < nt; t++) {
      const uint8_t *sp = (const uint8_t *)qg_blk_sc(b, g) + t * tb;
      __m512 sc = b->sbf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(
                                 _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)sp)), 16))
                           : _mm512_loadu_ps((const float *)sp);
      const __m512i v = _mm512_sub_epi32(_mm512_add_epi32(cl[t], _mm512_srai_epi32(ch[t], 4)), rowc);
      f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), sc, f[t]);
    }
  }
  QG_UNROLL for (int t = 0; t < nt; t++) _mm512_storeu_ps(out + t * QG_NR, f[t]);
}

QG_VNNI_T void qg_gemv4_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t nu,
                             const qg_blocks *b, float *out) {
  switch (nt) {
  case 1:
    qg_gemv4_vnni_n(1, w, tile_bytes, a, nu, b, out);
    break;
  case 2:
    qg_gemv4_vnni_n(2, w, tile_bytes, a, nu, b, out);
    break;
  case 3:
    qg_gemv4_vnni_n(3, w, tile_bytes, a, nu, b, out);
    break;
  default:
    qg_gemv4_vnni_n(4, w, tile_bytes, a, nu, b, out);
    break;
  }
}

/* ---- AVX-512 VNNI, up to eight rows a weight load ------------------------------- */

/* The kernels above broadcast QG_MR rows once for up to QG_GV tiles; those
 * below load two tiles' weights once for up to QG_MR8 rows, for products
 * whose weights come from L2 or memory rather than L1: 8 rows x 2 tiles is
 * 16 accumulators, one zmm load of weights per 8 vpdpbusd (per 4 at 4 x 4),
 * and a 4-bit unit is unpacked once for 8 rows rather than for 4. A tile
 * group is done in passes of two tiles; a pass of one tile (the last of an
 * odd group) reads it as both (tb 0), the second one's sums unused. full:
 * mr is QG_MR8; otherwise the rows past mr are skipped, a branch per row
 * and step, and no row is read or computed twice. */
#define QG_UNROLL8 _Pragma("GCC unroll 8")

/* c[i][t] += the 8-bit sums of rows i < mr (a + i * lda) and tiles w, w + tb;
 * pf as qg_sums8_vnni's. */
QG_VNNI void qg_sums8w_vnni(const int full, const int two, int mr, const uint8_t *w, int64_t tb, const int8_t *a,
                            int64_t lda, int64_t nu, int64_t pf, __m512i c[QG_MR8][2]) {
  for (int64_t u = 0; u < nu; u++, w += 128, a += 8) {
    _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++) {
      const __m512i w0 = _mm512_loadu_si512((const void *)(w + q * 64)),
                    w1 = two ? _mm512_loadu_si512((const void *)(w + tb + q * 64)) : w0;
      if (pf) {
        _mm_prefetch((const char *)(w + pf + q * 64), _MM_HINT_T0);
        _mm_prefetch((const char *)(w + pf + tb + q * 64), _MM_HINT_T0);
      }
      QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
        if (!full && i >= mr) break;
        const __m512i x = _mm512_set1_epi32(qg_load4(a + i * lda + q * 4));
        QG_DPBUSD(c[i][0], w0, x);
        if (two) QG_DPBUSD(c[i][1], w1, x);
      }
    }
  }
}

/* The static int8 product's step (qg_qs8_out_avx2's, in 512-bit
 * registers: times the requantization scales, max with qlo, min with qhi,
 * rounded to nearest even, plus zp) for four rows of one tile, all stored.
 * They clamp in two halves: min with qhi in float (so that the rounding
 * cannot overflow), then after the rounding the rows packed to int16 and to
 * int8 two at a time with signed saturation (VPACKSSDW, VPADDSW zp,
 * VPACKSSWB) and max with qmin. Equal to the float clamp: qlo and qhi are
 * integers and rounding is monotonic, so max(round(v), qlo) =
 * round(max(v, qlo)), and a value the int16 step saturates lies below qlo
 * either way. Each 128-bit lane then holds 4 channels of each row; one
 * VPERMD gathers every row's 16 bytes into one lane. */
QG_VNNI void qg_qs8_st4_vnni(__m512i c0, __m512i c1, __m512i c2, __m512i c3, __m512 vrq, float qlo, float qhi,
                             int32_t zp, __mmask16 keep, int8_t *o, int64_t ldc) {
  const __m512 vhi = _mm512_set1_ps(qhi);
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c0), vrq), vhi));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c1), vrq), vhi));
  const __m512i q2 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c2), vrq), vhi));
  const __m512i q3 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c3), vrq), vhi));
  const __m512i vzp = _mm512_set1_epi16((short)zp);
  const __m512i p01 = _mm512_adds_epi16(_mm512_packs_epi32(q0, q1), vzp);
  const __m512i p23 = _mm512_adds_epi16(_mm512_packs_epi32(q2, q3), vzp);
  __m512i b = _mm512_max_epi8(_mm512_packs_epi16(p01, p23), _mm512_set1_epi8((char)(int)(qlo + (float)zp)));
  /* lane k: rows 0-3, channels 4k..4k+3 each -> lane i: row i's 16 channels */
  b = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);
  _mm_mask_storeu_epi8(o, keep, _mm512_castsi512_si128(b));
  _mm_mask_storeu_epi8(o + ldc, keep, _mm512_extracti32x4_epi32(b, 1));
  _mm_mask_storeu_epi8(o + 2 * ldc, keep, _mm512_extracti32x4_epi32(b, 2));
  _mm_mask_storeu_epi8(o + 3 * ldc, keep, _mm512_extracti32x4_epi32(b, 3));
}

/* The static product's accumulators for up to QG_MR8 rows and nt <= 2
 * tiles (the second tile tile 0 again when nt is 1): kb - rowc, rows past
 * mr 0. */
QG_VNNI void qg_qs8_init8_vnni(const int full, int mr, int nt, const int32_t *rowc, const int32_t *kb,
                               __m512i c[QG_MR8][2]) {
  const __m512i kb0 = _mm512_loadu_si512((const void *)kb),
                kb1 = _mm512_loadu_si512((const void *)(kb + (nt > 1 ? QG_NR : 0)));
  QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
    const __m512i r = full || i < mr ? _mm512_set1_epi32(rowc[i]) : kb0;
    c[i][0] = _mm512_sub_epi32(kb0, r);
    c[i][1] = _mm512_sub_epi32(kb1, r);
  }
}

/* The static product's step for up to QG_MR8 rows and nt <= 2 tiles: rows
 * 0-3 and 4-7 each as qg_qs8_st4_vnni when all four are there, other rows
 * one by one (the float clamp, then the rounding). */
QG_VNNI void qg_qs8_store8_vnni(const int full, int mr, int nt, __m512i c[QG_MR8][2], int64_t nn, const float *rq,
                                float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc) {
  const __m512i vzp = _mm512_set1_epi32(zp);
  const __m512 vlo = _mm512_set1_ps(qlo), vhi = _mm512_set1_ps(qhi);
  _Pragma("GCC unroll 2") for (int t = 0; t < 2; t++) {
    if (t >= nt) break;
    const int64_t left = nn - t * QG_NR;
    const __mmask16 keep = left >= QG_NR ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    const __m512 vrq = _mm512_loadu_ps(rq + t * QG_NR);
    int8_t *o = out + t * QG_NR;
    if (full || mr >= 4)
      qg_qs8_st4_vnni(c[0][t], c[1][t], c[2][t], c[3][t], vrq, qlo, qhi, zp, keep, o, ldc);
    if (full) {
      qg_qs8_st4_vnni(c[4][t], c[5][t], c[6][t], c[7][t], vrq, qlo, qhi, zp, keep, o + 4 * ldc, ldc);
      continue;
    }
    QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
      if (i >= mr) break;
      if (i < 4 && mr >= 4) continue;
      __m512 f = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c[i][t]), vrq), vlo), vhi);
      _mm512_mask_cvtepi32_storeu_epi8(o + i * ldc, keep, _mm512_add_epi32(_mm512_cvtps_epi32(f), vzp));
    }
  }
}

/* qg_sums8w_vnni over indirect rows (an implicit convolution): row i's
 * depth is `taps` runs of tu units, run t at ind[i * taps + t] (an input
 * pixel's channels, or a run of the zero point for a tap outside the
 * input), multiplied by the weights' units of tap wtap[t] (t where wtap is
 * NULL); the rows' pointers are reloaded at each run. */
QG_VNNI void qg_sums8w_ind_vnni(const int full, const int two, int mr, const uint8_t *w0, int64_t tb,
                                const int8_t *const *ind, int64_t taps, const int32_t *wtap, int64_t tu,
                                __m512i c[QG_MR8][2]) {
  for (int64_t t = 0; t < taps; t++) {
    const int8_t *p[QG_MR8];
    QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) p[i] = full || i < mr ? ind[i * taps + t] : NULL;
    const uint8_t *w = w0 + (wtap ? wtap[t] : t) * tu * 128;
    for (int64_t u = 0; u < tu; u++, w += 128) {
      _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++) {
        const __m512i wa = _mm512_loadu_si512((const void *)(w + q * 64)),
                      wb = two ? _mm512_loadu_si512((const void *)(w + tb + q * 64)) : wa;
        QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
          if (!full && i >= mr) break;
          const __m512i x = _mm512_set1_epi32(qg_load4(p[i] + u * 8 + q * 4));
          QG_DPBUSD(c[i][0], wa, x);
          if (two) QG_DPBUSD(c[i][1], wb, x);
        }
      }
    }
  }
}

/* One pass of qg_qs8_tile_vnni (a, lda) or qg_qs8_ind_tile_vnni (ind): mr
 * rows times nt <= 2 tiles. */
QG_VNNI void qg_qs8w_rows_vnni(const int full, const int nt, int mr, const uint8_t *w, int64_t tb, const int8_t *a,
                               int64_t lda, int64_t nu, const int8_t *const *ind, int64_t taps, const int32_t *wtap,
                               int64_t nn, const int32_t *rowc, const int32_t *kb, const float *rq, float qlo,
                               float qhi, int32_t zp, int8_t *out, int64_t ldc) {
  __m512i c[QG_MR8][2];
  qg_qs8_init8_vnni(full, mr, nt, rowc, kb, c);
  if (ind)
    qg_sums8w_ind_vnni(full, nt > 1, mr, w, tb, ind, taps, wtap, nu, c);
  else
    qg_sums8w_vnni(full, nt > 1, mr, w, tb, a, lda, nu, 0, c);
  qg_qs8_store8_vnni(full, mr, nt, c, nn, rq, qlo, qhi, zp, out, ldc);
}

#define QG_QS8W(FULL, NT)                                                                                 \
  qg_qs8w_rows_vnni(FULL, NT, mr, wt, tile_bytes, am, lda, nu, im, taps, wtap, nn - t0 * QG_NR, rowc + m, \
                    kb + t0 * QG_NR, rq + t0 * QG_NR, qlo, qhi, zp, o, ldc)

/* rows rows (a row block) times nt tiles of the static product
 * (qg_qs8_tile_fn, and its indirect form): 8 rows at a time, the group in
 * passes of two tiles, as qg_f32pc8_vnni's 8-row calls, here for every row
 * count (against 4 x 4, on one Sapphire Rapids core: gathered rows M 784,
 * N 128, K 1152 277 -> 322 GMAC/s; M 3136, N 32, K 288 218 -> 251; M 49,
 * N 512, K 4608 242 -> 294; indirect 3 x 3, M 784, N 128, 64 channels
 * 310 -> 351; 4 rows of a whole group 186 -> 173). A pass of one tile is
 * compiled on its own: with a single tile (a stem's 16 channels) reading it
 * twice would double the work. */
QG_VNNI void qg_qs8w_block_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda,
                                const int8_t *const *ind, int64_t taps, const int32_t *wtap, int64_t rows, int64_t nu,
                                int64_t nn, const int32_t *rowc, const int32_t *kb, const float *rq, float qlo,
                                float qhi, int32_t zp, int8_t *out, int64_t ldc) {
  for (int64_t m = 0; m < rows; m += QG_MR8) {
    const int mr = (int)(rows - m < QG_MR8 ? rows - m : QG_MR8);
    for (int t0 = 0; t0 < nt; t0 += 2) {
      const int n2 = nt - t0 < 2 ? nt - t0 : 2;
      const uint8_t *wt = w + t0 * tile_bytes;
      const int8_t *am = ind ? NULL : a + m * lda;
      const int8_t *const *im = ind ? ind + m * taps : NULL;
      int8_t *o = out + m * ldc + t0 * QG_NR;
      if (mr == QG_MR8 && n2 == 2)
        QG_QS8W(1, 2);
      else if (mr == QG_MR8)
        QG_QS8W(1, 1);
      else if (n2 == 2)
        QG_QS8W(0, 2);
      else
        QG_QS8W(0, 1);
    }
  }
}
#undef QG_QS8W

QG_VNNI_T void qg_qs8_tile_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda,
                                int64_t rows, int64_t nu, int64_t nn, const int32_t *rowc, const int32_t *kb,
                                const float *rq, float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc) {
  qg_qs8w_block_vnni(w, tile_bytes, nt, a, lda, NULL, 0, NULL, rows, nu, nn, rowc, kb, rq, qlo, qhi, zp, out, ldc);
}

QG_VNNI_T void qg_qs8_ind_tile_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *const *ind,
                                    int64_t taps, const int32_t *wtap, int64_t tu, int64_t rows, int64_t nn,
                                    const int32_t *rowc, const int32_t *kb, const float *rq, float qlo, float qhi,
                                    int32_t zp, int8_t *out, int64_t ldc) {
  qg_qs8w_block_vnni(w, tile_bytes, nt, NULL, 0, ind, taps, wtap, rows, tu, nn, rowc, kb, rq, qlo, qhi, zp, out, ldc);
}

/* One pass of qg_f32pc8_vnni over nt <= 2 tiles: qg_sums8w_vnni's sums, then
 * qg_f32pc8_vnni_n's step. */
QG_VNNI void qg_f32pc8w_vnni_n(const int full, int mr, int nt, const uint8_t *w, int64_t tb, const int8_t *a,
                               int64_t lda, int64_t nu, const qg_pc_out *p, float *out, int64_t ldc) {
  __m512i c[QG_MR8][2];
  QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) c[i][0] = c[i][1] = _mm512_setzero_si512();
  qg_sums8w_vnni(full, 1, mr, w, nt > 1 ? tb : 0, a, lda, nu, p->pf, c);
  const __m512 vlo = _mm512_set1_ps(p->lo), vhi = _mm512_set1_ps(p->hi);
  _Pragma("GCC unroll 2") for (int t = 0; t < 2; t++) {
    if (t >= nt) break;
    const int64_t left = p->nn - t * QG_NR;
    const __mmask16 keep = left >= QG_NR ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    const __m512i ws = _mm512_loadu_si512((const void *)(p->ws + t * QG_NR));
    const __m512 sc = _mm512_loadu_ps(p->sc + t * QG_NR);
    QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
      if (!full && i >= mr) break;
      __m512i v = _mm512_sub_epi32(c[i][t], _mm512_set1_epi32(p->rowc[i]));
      v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(p->azp[i]), ws));
      __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(p->as[i])), sc);
      if (p->bias) y = _mm512_add_ps(y, _mm512_loadu_ps(p->bias + t * QG_NR));
      y = _mm512_min_ps(vhi, _mm512_max_ps(vlo, y));
      _mm512_mask_storeu_ps(out + i * ldc + t * QG_NR, keep, y);
    }
  }
}

/* mr rows times nt tiles of per-channel 8-bit weights, float out
 * (qg_f32pc8_fn): qg_sums8_vnni's sums, then qg_f32_out_avx2's step, 16 channels at a time: max(lo, y) is
 * y < lo ? lo : y with a NaN y kept, and min(hi, y) the same. */
QG_VNNI void qg_f32pc8_vnni_n(const int mr, const int nt, const uint8_t *w, int64_t tb, const int8_t *a, int64_t lda,
                              int64_t nu, const qg_pc_out *p, float *out, int64_t ldc) {
  __m512i c[QG_MR][QG_GV];
  QG_UNROLL for (int i = 0; i < mr; i++) QG_UNROLL for (int t = 0; t < nt; t++) c[i][t] = _mm512_setzero_si512();
  qg_sums8_vnni(mr, nt, w, tb, a, lda, nu, p->pf, c);
  const __m512 vlo = _mm512_set1_ps(p->lo), vhi = _mm512_set1_ps(p->hi);
  QG_UNROLL for (int t = 0; t < nt; t++) {
    const int64_t left = p->nn - t * QG_NR;
    const __mmask16 keep = left >= QG_NR ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    const __m512i ws = _mm512_loadu_si512((const void *)(p->ws + t * QG_NR));
    const __m512 sc = _mm512_loadu_ps(p->sc + t * QG_NR);
    QG_UNROLL for (int i = 0; i < mr; i++) {
      __m512i v = _mm512_sub_epi32(c[i][t], _mm512_set1_epi32(p->rowc[i]));
      v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(p->azp[i]), ws));
      __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(p->as[i])), sc);
      if (p->bias) y = _mm512_add_ps(y, _mm512_loadu_ps(p->bias + t * QG_NR));
      y = _mm512_min_ps(vhi, _mm512_max_ps(vlo, y));
      _mm512_mask_storeu_ps(out + i * ldc + t * QG_NR, keep, y);
    }
  }
}

/* Four rows of a whole group: 4 x 4, a broadcast for every tile (the
 * better shape while the group's weights stay in L1; see qgemm.c). Eight
 * rows: 8 x 2 in passes, as any other count (1-3 and 5-7 rows skipped,
 * and 4 rows of the last, narrower group). */
QG_VNNI_T void qg_f32pc8_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda, int mr,
                              int64_t nu, const qg_pc_out *p, float *out, int64_t ldc) {
  if (mr == QG_MR && nt == QG_GV) {
    qg_f32pc8_vnni_n(QG_MR, QG_GV, w, tile_bytes, a, lda, nu, p, out, ldc);
    return;
  }
  for (int t0 = 0; t0 < nt; t0 += 2) {
    qg_pc_out q = *p;
    q.ws += t0 * QG_NR, q.sc += t0 * QG_NR, q.bias = p->bias ? p->bias + t0 * QG_NR : NULL, q.nn -= t0 * QG_NR;
    const int n2 = nt - t0 < 2 ? nt - t0 : 2;
    if (mr == QG_MR8)
      qg_f32pc8w_vnni_n(1, QG_MR8, n2, w + t0 * tile_bytes, tile_bytes, a, lda, nu, &q, out + t0 * QG_NR, ldc);
    else
      qg_f32pc8w_vnni_n(0, mr, n2, w + t0 * tile_bytes, tile_bytes, a, lda, nu, &q, out + t0 * QG_NR, ldc);
  }
}

/* One pass of qg_gemm4_vnni: mr rows times nt <= 2 tiles of blockwise 4-bit
 * weights. Per unit, each tile's 64 bytes are loaded and unpacked once
 * (mask; shift and mask) for all the rows, then per row two broadcasts and
 * four vpdpbusd. Each block's accumulators start at b->nrc (-sbias * sa),
 * so that its step is qg_blocks', a conversion and one fused multiply-add
 * per row and tile. The float sums live in fo (L1), QG_MR8 x 2 vectors
 * started at qg_blocks' zero-point term; after the last block they get
 * qg_f32_out_fn's blockwise step (times as, plus bias, clamp) and are
 * stored. */
QG_VNNI void qg_gemm4_vnni_n(const int full, int mr, int nt, const uint8_t *w, int64_t tb, const int8_t *a,
                             int64_t lda, int64_t nu, const qg_blocks *b, const qg_pc_out *p, float *fo, float *out,
                             int64_t ldc) {
  const __m512i mask = _mm512_set1_epi8(15);
  if (nt < 2) tb = 0;
  const __m512 corr0 = _mm512_loadu_ps(b->corr), corr1 = _mm512_loadu_ps(b->corr + (nt < 2 ? 0 : QG_NR));
  QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
    const __m512 z = _mm512_set1_ps(full || i < mr ? -(float)b->azp[i] : 0.0f);
    _mm512_storeu_ps(fo + (2 * i) * QG_NR, _mm512_mul_ps(z, corr0));
    _mm512_storeu_ps(fo + (2 * i + 1) * QG_NR, _mm512_mul_ps(z, corr1));
  }
  for (int64_t g = 0; g < b->nb; g++, w += b->wstride, a += b->astride) {
    __m512i c[QG_MR8][2];
    QG_UNROLL8 for (int i = 0; i < QG_MR8; i++)
      c[i][0] = c[i][1] = full || i < mr ? _mm512_set1_epi32(b->nrc[i * b->nb + g]) : _mm512_setzero_si512();
    for (int64_t u = 0; u < nu; u++) {
      const __m512i v0 = _mm512_loadu_si512((const void *)(w + u * 64)),
                    v1 = _mm512_loadu_si512((const void *)(w + tb + u * 64));
      const __m512i lo0 = _mm512_and_si512(v0, mask), hi0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), mask);
      const __m512i lo1 = _mm512_and_si512(v1, mask), hi1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), mask);
      QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
        if (!full && i >= mr) break;
        const __m512i x0 = _mm512_set1_epi32(qg_load4(a + i * lda + u * 8)),
                      x1 = _mm512_set1_epi32(qg_load4(a + i * lda + u * 8 + 4));
        QG_DPBUSD(c[i][0], lo0, x0);
        QG_DPBUSD(c[i][1], lo1, x0);
        QG_DPBUSD(c[i][0], hi0, x1);
        QG_DPBUSD(c[i][1], hi1, x1);
      }
    }
    _Pragma("GCC unroll 2") for (int t = 0; t < 2; t++) {
      const uint8_t *sp = (const uint8_t *)qg_blk_sc(b, g) + t * tb;
      const __m512 sc = b->sbf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(
                                       _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)sp)), 16))
                                 : _mm512_loadu_ps((const float *)sp);
      QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
        if (!full && i >= mr) break;
        float *f = fo + (2 * i + t) * QG_NR;
        _mm512_storeu_ps(f, _mm512_fmadd_ps(_mm512_cvtepi32_ps(c[i][t]), sc, _mm512_loadu_ps(f)));
      }
    }
  }
  const __m512 vlo = _mm512_set1_ps(p->lo), vhi = _mm512_set1_ps(p->hi);
  _Pragma("GCC unroll 2") for (int t = 0; t < 2; t++) {
    if (t >= nt) break;
    const int64_t left = p->nn - t * QG_NR;
    const __mmask16 keep = left >= QG_NR ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    QG_UNROLL8 for (int i = 0; i < QG_MR8; i++) {
      if (!full && i >= mr) break;
      __m512 y = _mm512_mul_ps(_mm512_loadu_ps(fo + (2 * i + t) * QG_NR), _mm512_set1_ps(p->as[i]));
      if (p->bias) y = _mm512_add_ps(y, _mm512_loadu_ps(p->bias + t * QG_NR));
      y = _mm512_min_ps(vhi, _mm512_max_ps(vlo, y));
      _mm512_mask_storeu_ps(out + i * ldc + t * QG_NR, keep, y);
    }
  }
}

/* qg_gemm_fn: the tile group in passes of two tiles, 8 rows compiled on
 * their own and any other count with rows skipped. */
QG_VNNI_T void qg_gemm4_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda, int mr,
                             int64_t nu, const qg_blocks *b, const qg_pc_out *p, float *out, int64_t ldc) {
  float fo[QG_MR8 * 2 * QG_NR];
  for (int t0 = 0; t0 < nt; t0 += 2) {
    qg_blocks bt = *b;
    bt.corr = b->corr + t0 * QG_NR, bt.scales = (const uint8_t *)b->scales + t0 * tile_bytes;
    qg_pc_out q = *p;
    q.bias = p->bias ? p->bias + t0 * QG_NR : NULL, q.nn -= t0 * QG_NR;
    const int n2 = nt - t0 < 2 ? nt - t0 : 2;
    if (mr == QG_MR8)
      qg_gemm4_vnni_n(1, QG_MR8, n2, w + t0 * tile_bytes, tile_bytes, a, lda, nu, &bt, &q, fo, out + t0 * QG_NR, ldc);
    else
      qg_gemm4_vnni_n(0, mr, n2, w + t0 * tile_bytes, tile_bytes, a, lda, nu, &bt, &q, fo, out + t0 * QG_NR, ldc);
  }
}

#else
typedef int qg_x86_unused; /* ISO C wants a translation unit to declare something */
#endif
