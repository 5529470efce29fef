/*
 * qs8_binary.c - qint8 add / subtract / multiply runs (qs8_binary.h). Each
 * loop is written once and compiled for the generic target and, on x86-64,
 * for AVX2 (8 lanes of VPMULLD / VPMINSD where SSE2 has neither) and
 * AVX-512 (16 lanes), chosen per call by the CPU. Integer arithmetic and the one float
 * multiply per element are exact lane by lane, so both give the same bytes.
 */
#include "kernels/quantized/qs8_binary.h"

#include "core/cpu.h"
#include "kernels/common.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define QB_X86 1
#else
#define QB_X86 0
#endif

#define QB_INLINE static inline __attribute__((always_inline))

QB_INLINE void addsub_body(const px_qs8_binop *p, const int8_t *restrict a, const int8_t *restrict b,
                           int8_t *restrict o, int64_t n) {
  const int32_t bias = p->bias, ma = p->ma, mb = p->mb, shift = p->shift, lo = p->lo, hi = p->hi, ozp = p->ozp;
  for (int64_t i = 0; i < n; i++) {
    int32_t v = (bias + a[i] * ma + b[i] * mb) >> shift; /* arithmetic: gcc and clang shift signed values so */
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    o[i] = (int8_t)(v + ozp);
  }
}

QB_INLINE void mul_body(const px_qs8_binop *p, const int8_t *restrict a, const int8_t *restrict b, int8_t *restrict o,
                        int64_t n) {
  const int32_t azp = p->azp, bzp = p->bzp, ozp = p->ozp;
  const float scale = p->scale, flo = (float)p->lo, fhi = (float)p->hi;
  for (int64_t i = 0; i < n; i++) {
    float v = (float)((a[i] - azp) * (b[i] - bzp)) * scale;
    o[i] = px_q8_step(v, flo, fhi, ozp);
  }
}

static void addsub_generic(const px_qs8_binop *p, const int8_t *a, const int8_t *b, int8_t *o, int64_t n) {
  addsub_body(p, a, b, o, n);
}
static void mul_generic(const px_qs8_binop *p, const int8_t *a, const int8_t *b, int8_t *o, int64_t n) {
  mul_body(p, a, b, o, n);
}

#if QB_X86
__attribute__((target("avx2"))) static void addsub_avx2(const px_qs8_binop *p, const int8_t *a, const int8_t *b,
                                                        int8_t *o, int64_t n) {
  addsub_body(p, a, b, o, n);
}
__attribute__((target("avx2"))) static void mul_avx2(const px_qs8_binop *p, const int8_t *a, const int8_t *b,
                                                     int8_t *o, int64_t n) {
  mul_body(p, a, b, o, n);
}
__attribute__((target("avx512f,avx512bw"))) static void addsub_avx512(const px_qs8_binop *p, const int8_t *a,
                                                                     const int8_t *b, int8_t *o, int64_t n) {
  addsub_body(p, a, b, o, n);
}
__attribute__((target("avx512f,avx512bw"))) static void mul_avx512(const px_qs8_binop *p, const int8_t *a,
                                                                  const int8_t *b, int8_t *o, int64_t n) {
  mul_body(p, a, b, o, n);
}
#endif

void px_qs8_addsub_row(const px_qs8_binop *p, const int8_t *a, const int8_t *b, int8_t *o, int64_t n) {
#if QB_X86
  if (px_cpu()->avx512bw && n >= 64) { /* whole 64-byte steps; the rest below, in 32 or fewer */
    const int64_t m = n & ~(int64_t)63;
    addsub_avx512(p, a, b, o, m);
    a += m, b += m, o += m, n -= m;
  }
  if (px_cpu()->avx2) {
    addsub_avx2(p, a, b, o, n);
    return;
  }
#endif
  addsub_generic(p, a, b, o, n);
}

void px_qs8_mul_row(const px_qs8_binop *p, const int8_t *a, const int8_t *b, int8_t *o, int64_t n) {
#if QB_X86
  if (px_cpu()->avx512bw && n >= 64) { /* whole 64-byte steps; the rest below, in 32 or fewer */
    const int64_t m = n & ~(int64_t)63;
    mul_avx512(p, a, b, o, m);
    a += m, b += m, o += m, n -= m;
  }
  if (px_cpu()->avx2) {
    mul_avx2(p, a, b, o, n);
    return;
  }
#endif
  mul_generic(p, a, b, o, n);
}
