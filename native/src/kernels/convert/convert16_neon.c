/*
 * convert16_neon.c - the AArch64 runs of convert16.c (convert16_isa.h).
 * Elsewhere this file compiles to nothing.
 */
#include "kernels/convert/convert16_isa.h"

/* ---- AArch64: FCVTL / FCVTN (round to nearest even under the default FPCR) - */

#if CV16_NEON
int64_t px_cv16_f16_to_f32_neon(float *dst, const uint16_t *src, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) vst1q_f32(dst + k, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + k))));
  return k;
}

int64_t px_cv16_f32_to_f16_neon(uint16_t *dst, const float *src, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) vst1_u16(dst + k, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + k))));
  return k;
}

int64_t px_cv16_round_f16_neon(float *x, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) vst1q_f32(x + k, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(x + k))));
  return k;
}
#endif

typedef int px_convert16_neon_unused; /* ISO C: no empty translation unit */
