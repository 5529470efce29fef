/*
 * gemm_h16.c - products whose B is float16 or bfloat16 (gemm.h): B packed
 * once into 16-bit column panels. Products of few rows read the panels in
 * place and widen each vector in registers (px_gemm_h16_panels_ep, on
 * AVX-512); others widen each depth block of the panels to float32 into the
 * engine's own packing buffer while the product runs (px_gemm_f32_packed_ep's
 * pack callback). The float32 arithmetic is the engine's, so the results are
 * those of the same product on B widened beforehand, either way.
 */
#include <string.h>

#include "kernels/convert/convert16.h"
#include "kernels/gemm/gemm.h"

/* Panels of nr columns, each K x nr: panel q holds columns q*nr ..., element
 * (k, j) at pb[q*K*nr + k*nr + j]. */
size_t px_gemm_h16_prepack_size(int64_t N, int64_t K) {
  if (N <= 0 || K <= 0) return 64;
  const int64_t nr = px_gemm_f32_panel_width();
  return (size_t)((N + nr - 1) / nr) * (size_t)(K * nr) * sizeof(uint16_t);
}

void px_gemm_h16_prepack_b(int64_t N, int64_t K, const uint16_t *B, int64_t rsb, int64_t csb,
                           uint16_t *pb) {
  if (N <= 0 || K <= 0) return;
  const int64_t nr = px_gemm_f32_panel_width();
  for (int64_t q = 0; q * nr < N; q++) {
    uint16_t *panel = pb + q * K * nr;
    const int64_t n = N - q * nr < nr ? N - q * nr : nr;
    for (int64_t k = 0; k < K; k++) {
      uint16_t *row = panel + k * nr;
      const uint16_t *src = B + k * rsb + q * nr * csb;
      for (int64_t j = 0; j < n; j++) row[j] = src[j * csb];
      for (int64_t j = n; j < nr; j++) row[j] = 0;
    }
  }
}

typedef struct h16_src {
  const uint16_t *pb;
  int64_t K, N;
  bool bf16;
} h16_src;

static void widen(const h16_src *s, float *dst, const uint16_t *src, int64_t n) {
  if (s->bf16)
    px_bf16_to_f32(dst, src, n);
  else
    px_f16_to_f32(dst, src, n);
}

/* px_gemm_pack_fn: depth [pc, pc + kc) x columns [jc, jc + nc) as
 * ceil(nc / nr) panels of kc x nr floats. The engine's column blocks start
 * on panel boundaries, so each output panel is one contiguous run of a
 * packed panel; any other start is gathered element by element. */
static void pack_h16(const void *src, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int nr, float *out) {
  const h16_src *s = src;
  const int64_t K = s->K;
  if (jc % nr == 0) {
    for (int64_t q = 0; q * nr < nc; q++) {
      float *dst = out + q * kc * nr;
      widen(s, dst, s->pb + (jc / nr + q) * K * nr + pc * nr, kc * nr);
      const int64_t n = nc - q * nr;
      if (n < nr) /* columns past nc: zero, as the callback's contract says */
        for (int64_t p = 0; p < kc; p++) memset(dst + p * nr + n, 0, sizeof(float) * (size_t)(nr - n));
    }
    return;
  }
  for (int64_t q = 0; q * nr < nc; q++)
    for (int64_t p = 0; p < kc; p++)
      for (int64_t j = 0; j < nr; j++) {
        const int64_t c = jc + q * nr + j;
        float v = 0.0f;
        if (q * nr + j < nc) widen(s, &v, s->pb + (c / nr) * K * nr + (pc + p) * nr + c % nr, 1);
        out[q * kc * nr + p * nr + j] = v;
      }
}

int px_gemm_h16_prepacked_ep(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t rsa, int64_t csa, const uint16_t *pb, bool bf16,
                             float beta, float *C, int64_t ldc, const px_gemm_epilogue *ep) {
  if (M <= px_gemm_h16_panel_rows())
    return px_gemm_h16_panels_ep(ctx, work, M, N, K, A, rsa, csa, pb, bf16, beta, C, ldc, ep);
  h16_src s = {pb, K, N, bf16};
  return px_gemm_f32_packed_ep(ctx, work, M, N, K, 1.0f, A, rsa, csa, pack_h16, &s, beta, C, ldc, ep);
}
