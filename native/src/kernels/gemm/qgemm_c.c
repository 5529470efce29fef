/*
 * qgemm_c.c - the portable micro-kernels of the integer GEMM (qgemm_impl.h
 * has the packed layout and the contract): plain C over the same packed
 * bytes as the SIMD paths, every path's reference (the tests compare them).
 */
#include <math.h>
#include <string.h>

#include "kernels/gemm/qgemm_impl.h"

static inline int qg_s8(uint8_t b) {
#if QG_BIAS8 == 128
  return b; /* stored as uint8 */
#else
  return (int8_t)b;
#endif
}

/* One block's raw sums for mr rows (uint32: wrapping, as SIMD wraps). */
static void qg_block8_c(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                        uint32_t acc[QG_MR][QG_NR]) {
  memset(acc, 0, sizeof(uint32_t) * QG_MR * QG_NR);
  for (int64_t u = 0; u < nu; u++, w += 128) {
    for (int i = 0; i < mr; i++) {
      const int8_t *ar = a + i * lda + u * QG_KU;
      for (int q = 0; q < 2; q++)
        for (int j = 0; j < QG_NR; j++) {
          const uint8_t *wj = w + q * 64 + j * 4;
          int32_t s = 0;
          for (int t = 0; t < 4; t++) s += ar[q * 4 + t] * qg_s8(wj[t]);
          acc[i][j] += (uint32_t)s;
        }
    }
  }
}

static void qg_block4_c(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                        uint32_t acc[QG_MR][QG_NR]) {
  memset(acc, 0, sizeof(uint32_t) * QG_MR * QG_NR);
  for (int64_t u = 0; u < nu; u++, w += 64) {
    for (int i = 0; i < mr; i++) {
      const int8_t *ar = a + i * lda + u * QG_KU;
      for (int j = 0; j < QG_NR; j++) {
        const uint8_t *wj = w + j * 4;
        int32_t s = 0;
        for (int t = 0; t < 4; t++) s += ar[t] * (wj[t] & 15) + ar[4 + t] * (wj[t] >> 4);
        acc[i][j] += (uint32_t)s;
      }
    }
  }
}

static void qg_ukr_c(int bits, const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                     const qg_blocks *b, void *out) {
  uint32_t acc[QG_MR][QG_NR];
  if (!b) {
    int32_t *raw = out;
    if (bits == 8)
      qg_block8_c(w, a, lda, mr, nu, acc);
    else
      qg_block4_c(w, a, lda, mr, nu, acc);
    for (int i = 0; i < mr; i++)
      for (int j = 0; j < QG_NR; j++) raw[i * QG_NR + j] = qg_wrap(acc[i][j]);
    return;
  }
  float *f = out;
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < QG_NR; j++) f[i * QG_NR + j] = -(float)b->azp[i] * b->corr[j];
  for (int64_t g = 0; g < b->nb; g++, w += b->wstride, a += b->astride) {
    if (bits == 8)
      qg_block8_c(w, a, lda, mr, nu, acc);
    else
      qg_block4_c(w, a, lda, mr, nu, acc);
    for (int i = 0; i < mr; i++) {
      int32_t c = qg_wrap_mul(b->sbias, b->sa[i * b->nb + g]);
      for (int j = 0; j < QG_NR; j++)
        f[i * QG_NR + j] = fmaf((float)qg_wrap(acc[i][j] - (uint32_t)c), qg_blk_scale(b, g, j), f[i * QG_NR + j]);
    }
  }
}

void qg_ukr8_c(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
               void *out) {
  qg_ukr_c(8, w, a, lda, mr, nu, b, out);
}

void qg_ukr4_c(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
               void *out) {
  qg_ukr_c(4, w, a, lda, mr, nu, b, out);
}
