/*
 * qgemm_qd8.c - XNNPACK's dynamic per-row quantization of float activations
 * to int8 (px_quantize_qd8, qgemm.h; the reference's A10), on the path the
 * products run: AVX2 / AVX-512 or NEON row passes, else the portable ones
 * here.
 */
#include <math.h>

#include "kernels/gemm/qgemm.h"
#include "kernels/gemm/qgemm_impl.h"

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
