/*
 * f16n.c - float16 arithmetic on AVX512-FP16 (f16n.h): the product's
 * 8 x 64 micro-kernel (two 32-column panels, A broadcast from memory into
 * the multiply-add, sixteen float16 accumulators) and the depthwise
 * convolution's 32-channel loop. Elsewhere (other CPUs, other
 * architectures) px_f16n_available() is false and the delegate never calls
 * these; their portable loops below compute the same sums one at a time.
 */
#include "kernels/gemm/f16n.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/convert/convert16.h"

/* AVX512-FP16 intrinsics and _Float16: GCC 12 and clang 16 onwards (clang 14 and 15 have no _Float16 outside -mavx512fp16 builds) */
#if defined(__x86_64__) && !defined(PX_PORTABLE_KERNELS) && \
    ((defined(__clang__) && __clang_major__ >= 16) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12))
#define PX_F16N_X86 1
#include <immintrin.h>
#else
#define PX_F16N_X86 0
#endif

static int f16n_state; /* 0: not read yet, 1: available, 2: not */

bool px_f16n_available(void) {
  int s = __atomic_load_n(&f16n_state, __ATOMIC_ACQUIRE);
  if (!s) {
    const px_cpu_features *f = px_cpu();
    const char *env = getenv("PYEXEC_F16_ARITH");
    bool on = PX_F16N_X86 && f->avx512fp16 && f->avx512bw && f->avx512vl && !(env && strcmp(env, "float32") == 0);
    s = on ? 1 : 2;
    __atomic_store_n(&f16n_state, s, __ATOMIC_RELEASE);
  }
  return s == 1;
}

size_t px_f16n_pack_size(int64_t N, int64_t K) {
  if (N <= 0 || K <= 0) return 64;
  return (size_t)((N + PX_F16N_NR - 1) / PX_F16N_NR) * (size_t)K * PX_F16N_NR * sizeof(uint16_t);
}

void px_f16n_pack_b(int64_t N, int64_t K, const uint16_t *B, int64_t rsb, int64_t csb, uint16_t *pb) {
  for (int64_t q = 0; q * PX_F16N_NR < N; q++) {
    const int64_t n = N - q * PX_F16N_NR < PX_F16N_NR ? N - q * PX_F16N_NR : PX_F16N_NR;
    uint16_t *panel = pb + q * K * PX_F16N_NR;
    for (int64_t k = 0; k < K; k++) {
      const uint16_t *src = B + k * rsb + q * PX_F16N_NR * csb;
      uint16_t *row = panel + k * PX_F16N_NR;
      for (int64_t j = 0; j < n; j++) row[j] = src[j * csb];
      for (int64_t j = n; j < PX_F16N_NR; j++) row[j] = 0;
    }
  }
}

void px_f16n_pack_b_f32(int64_t N, int64_t K, const float *B, int64_t rsb, int64_t csb, uint16_t *pb) {
  for (int64_t q = 0; q * PX_F16N_NR < N; q++) {
    const int64_t n = N - q * PX_F16N_NR < PX_F16N_NR ? N - q * PX_F16N_NR : PX_F16N_NR;
    uint16_t *panel = pb + q * K * PX_F16N_NR;
    for (int64_t k = 0; k < K; k++) {
      uint16_t *row = panel + k * PX_F16N_NR;
      if (csb == 1) {
        px_f32_to_f16(row, B + k * rsb + q * PX_F16N_NR, n);
      } else {
        const float *src = B + k * rsb + q * PX_F16N_NR * csb;
        for (int64_t j = 0; j < n; j++) row[j] = px_f32_to_f16_bits(src[j * csb]);
      }
      for (int64_t j = n; j < PX_F16N_NR; j++) row[j] = 0;
    }
  }
}

#if PX_F16N_X86

#define F16N_TARGET __attribute__((target("avx512fp16,avx512vl,avx512bw,avx512f")))
typedef _Float16 f16_alias __attribute__((may_alias));

/* 32 float16 lanes widened to float32 and stored to c[0 .. n) (n <= 32). */
F16N_TARGET __attribute__((always_inline)) static inline void store32(float *c, __m512h v, int n) {
  const __m512 lo = _mm512_cvtxph_ps(_mm512_castph512_ph256(v));
  const __m512 hi = _mm512_cvtxph_ps(_mm256_castsi256_ph(_mm512_extracti64x4_epi64(_mm512_castph_si512(v), 1)));
  if (n >= 32) {
    _mm512_storeu_ps(c, lo);
    _mm512_storeu_ps(c + 16, hi);
    return;
  }
  const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
  const __mmask16 m1 = (__mmask16)(n <= 16 ? 0 : (1u << (n - 16)) - 1);
  _mm512_mask_storeu_ps(c, m0, lo);
  _mm512_mask_storeu_ps(c + 16, m1, hi);
}

/* The bounds as XNNPACK applies them: max(lo, acc) then min(hi, acc), a NaN
 * sum kept (the second operand wins when either is NaN). */
F16N_TARGET __attribute__((always_inline)) static inline __m512h bound(__m512h v, __m512h lo, __m512h hi) {
  return _mm512_min_ph(hi, _mm512_max_ph(lo, v));
}

/* mr rows x np panels (np 1 or 2) of the product, columns n0 (first panel)
 * and n1 (second) of them valid. Row i of A is, segment after segment, the
 * L values at a[i] + off[s] (s < nseg). */
F16N_TARGET __attribute__((always_inline)) static inline void
tile(const int mr, const int np, int64_t nseg, int64_t L, const int64_t *off, const uint16_t *const *a,
     const uint16_t *b0, const uint16_t *b1, const uint16_t *bias, bool clamp, __m512h vlo, __m512h vhi, float *c,
     int64_t ldc, int n0, int n1, int valid) {
  __m512h acc0[8], acc1[8];
  const __m512h z = _mm512_setzero_ph();
  const __m512h bv0 = bias ? _mm512_loadu_ph(bias) : z;
  const __m512h bv1 = bias && np == 2 ? _mm512_loadu_ph(bias + PX_F16N_NR) : z;
#pragma GCC unroll 8
  for (int i = 0; i < mr; i++) acc0[i] = bv0, acc1[i] = bv1;
  for (int64_t s = 0; s < nseg; s++) {
    const f16_alias *ap[8];
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) ap[i] = (const f16_alias *)(a[i] + off[s]);
    for (int64_t e = 0; e < L; e++, b0 += PX_F16N_NR, b1 += PX_F16N_NR) {
      const __m512h w0 = _mm512_loadu_ph(b0);
      if (np == 2) {
        const __m512h w1 = _mm512_loadu_ph(b1);
#pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
          const __m512h va = _mm512_set1_ph(ap[i][e]);
          acc0[i] = _mm512_fmadd_ph(va, w0, acc0[i]);
          acc1[i] = _mm512_fmadd_ph(va, w1, acc1[i]);
        }
      } else {
#pragma GCC unroll 8
        for (int i = 0; i < mr; i++) acc0[i] = _mm512_fmadd_ph(_mm512_set1_ph(ap[i][e]), w0, acc0[i]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < mr; i++) {
    if (i >= valid) break;
    __m512h v0 = acc0[i];
    if (clamp) v0 = bound(v0, vlo, vhi);
    store32(c + i * ldc, v0, n0);
    if (np == 2) {
      __m512h v1 = acc1[i];
      if (clamp) v1 = bound(v1, vlo, vhi);
      store32(c + i * ldc + PX_F16N_NR, v1, n1);
    }
  }
}

/* Tiles of 8 rows and of 1 (a product of one row, as in a decode step):
 * each is a fully unrolled copy of the loop, and the library stays small.
 * 2 to 7 last rows run as an 8-row tile whose missing rows repeat the last
 * one (their sums computed, not stored). */
F16N_TARGET static void tile_any(int valid, int np, int64_t nseg, int64_t L, const int64_t *off,
                                 const uint16_t *const *a, const uint16_t *b0, const uint16_t *b1,
                                 const uint16_t *bias, bool clamp, __m512h vlo, __m512h vhi, float *c, int64_t ldc,
                                 int n0, int n1) {
  if (valid == 1) {
    if (np == 2) tile(1, 2, nseg, L, off, a, b0, b1, bias, clamp, vlo, vhi, c, ldc, n0, n1, 1);
    else tile(1, 1, nseg, L, off, a, b0, b1, bias, clamp, vlo, vhi, c, ldc, n0, n1, 1);
    return;
  }
  const uint16_t *rows[8];
  for (int i = 0; i < 8; i++) rows[i] = a[i < valid ? i : valid - 1];
  if (np == 2) tile(8, 2, nseg, L, off, rows, b0, b1, bias, clamp, vlo, vhi, c, ldc, n0, n1, valid);
  else tile(8, 1, nseg, L, off, rows, b0, b1, bias, clamp, vlo, vhi, c, ldc, n0, n1, valid);
}

F16N_TARGET static void gemm_x86(int64_t M, int64_t N, int64_t nseg, int64_t L, const int64_t *off,
                                 const uint16_t *const *rows, const uint16_t *pb, int64_t q0, int64_t q1,
                                 const uint16_t *bias, float lo, float hi, float *C, int64_t ldc) {
  const int64_t K = nseg * L;
  const bool clamp = !(isinf(lo) && lo < 0 && isinf(hi) && hi > 0);
  const __m512h vlo = _mm512_set1_ph((_Float16)lo), vhi = _mm512_set1_ph((_Float16)hi);
  for (int64_t q = q0; q < q1; q += 2) {
    const int np = q + 1 < q1 ? 2 : 1;
    const int64_t j0 = q * PX_F16N_NR;
    const int n0 = (int)(N - j0 < PX_F16N_NR ? N - j0 : PX_F16N_NR);
    const int n1 = np == 2 ? (int)(N - j0 - PX_F16N_NR < PX_F16N_NR ? N - j0 - PX_F16N_NR : PX_F16N_NR) : 0;
    const uint16_t *b0 = pb + q * K * PX_F16N_NR, *b1 = b0 + K * PX_F16N_NR;
    for (int64_t i = 0; i < M; i += 8)
      tile_any((int)(M - i < 8 ? M - i : 8), np, nseg, L, off, rows + i, b0, b1, bias ? bias + j0 : NULL, clamp,
               vlo, vhi, C + i * ldc + j0, ldc, n0, n1);
  }
  /* back to code built without AVX: clean upper halves, no SSE transition stalls */
  _mm256_zeroupper();
}

/* 32 channels (n of them valid) of one output pixel, its window at x. */
F16N_TARGET __attribute__((always_inline)) static inline void dw_pixel(const px_f16n_dw *d, const uint16_t *x,
                                                                       int64_t c, __mmask32 m, bool two, bool clamp,
                                                                       __m512h vlo, __m512h vhi, float *out, int n) {
  const int64_t taps = d->KH * d->KW;
  __m512h acc0 = _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, d->bias + c)), acc1 = _mm512_setzero_ph();
  int64_t t = 0;
  if (two) {
    for (; t + 2 <= taps; t += 2) {
      acc0 = _mm512_fmadd_ph(_mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, x + d->toff[t] + c)),
                             _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, d->w + d->woff[t] + c)), acc0);
      acc1 = _mm512_fmadd_ph(_mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, x + d->toff[t + 1] + c)),
                             _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, d->w + d->woff[t + 1] + c)), acc1);
    }
  }
  for (; t < taps; t++)
    acc0 = _mm512_fmadd_ph(_mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, x + d->toff[t] + c)),
                           _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, d->w + d->woff[t] + c)), acc0);
  __m512h r = two ? _mm512_add_ph(acc0, acc1) : acc0;
  if (clamp) r = bound(r, vlo, vhi);
  store32(out, r, n);
}

F16N_TARGET static void dw_x86(const px_f16n_dw *d, const uint16_t *x, int64_t oh0, int64_t oh1, float *y) {
  const int64_t taps = d->KH * d->KW;
  const bool two = taps > 9 && taps <= 25;
  const bool clamp = !(isinf(d->lo) && d->lo < 0 && isinf(d->hi) && d->hi > 0);
  const __m512h vlo = _mm512_set1_ph((_Float16)d->lo), vhi = _mm512_set1_ph((_Float16)d->hi);
  for (int64_t oh = oh0; oh < oh1; oh++)
    for (int64_t ow = 0; ow < d->OW; ow++) {
      float *out = y + (oh * d->OW + ow) * d->C;
      const uint16_t *win = x + (oh * d->sh * d->Wp + ow * d->sw) * d->C;
      for (int64_t c = 0; c < d->C; c += PX_F16N_NR) {
        const int n = (int)(d->C - c < PX_F16N_NR ? d->C - c : PX_F16N_NR);
        dw_pixel(d, win, c, n == PX_F16N_NR ? 0xffffffffu : (1u << n) - 1, two, clamp, vlo, vhi, out + c, n);
      }
    }
  _mm256_zeroupper();
}

#endif /* PX_F16N_X86 */

/* ---- the entry points: the AVX512-FP16 kernels where they are built (the
 * callers only call where px_f16n_available()); elsewhere the portable
 * definitions, never selected there either, which say the same sums one at
 * a time ---- */

#if !PX_F16N_X86
static float f16(float v) { return px_f16_bits_to_f32(px_f32_to_f16_bits(v)); }

/* One float16 multiply-add, acc + a * b rounded once: the product of two
 * float16 values is exact in double, and so is its sum with a float16
 * accumulator across the range these products take. */
static float fma16(float acc, float a, float b) { return f16((float)((double)acc + (double)a * (double)b)); }

static float bound1(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}
#endif

void px_f16n_conv_gemm(int64_t M, int64_t N, int64_t nseg, int64_t L, const int64_t *off,
                       const uint16_t *const *rows, const uint16_t *pb, int64_t q0, int64_t q1, const uint16_t *bias,
                       float lo, float hi, float *C, int64_t ldc) {
  const int64_t K = nseg * L;
  if (q1 * PX_F16N_NR > N + PX_F16N_NR - 1) q1 = (N + PX_F16N_NR - 1) / PX_F16N_NR;
  if (M <= 0 || K <= 0 || q0 >= q1) return;
#if PX_F16N_X86
  gemm_x86(M, N, nseg, L, off, rows, pb, q0, q1, bias, lo, hi, C, ldc);
#else
  const float flo = f16(lo), fhi = f16(hi);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = q0 * PX_F16N_NR; j < N && j < q1 * PX_F16N_NR; j++) {
      const uint16_t *col = pb + (j / PX_F16N_NR) * K * PX_F16N_NR + j % PX_F16N_NR;
      float acc = bias ? px_f16_bits_to_f32(bias[j]) : 0.0f;
      for (int64_t k = 0; k < K; k++)
        acc = fma16(acc, px_f16_bits_to_f32(rows[i][off[k / L] + k % L]), px_f16_bits_to_f32(col[k * PX_F16N_NR]));
      C[i * ldc + j] = bound1(acc, flo, fhi);
    }
#endif
}

void px_f16n_gemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *pb,
                  int64_t q0, int64_t q1, const uint16_t *bias, float lo, float hi, float *C, int64_t ldc) {
  static const int64_t zero = 0;
  const uint16_t *rows[8];
  for (int64_t i = 0; i < M; i += 8) {
    const int64_t mr = M - i < 8 ? M - i : 8;
    for (int64_t r = 0; r < mr; r++) rows[r] = A + (i + r) * lda;
    px_f16n_conv_gemm(mr, N, 1, K, &zero, rows, pb, q0, q1, bias, lo, hi, C + i * ldc, ldc);
  }
}

void px_f16n_dw_taps(const px_f16n_dw *d, int64_t *toff, int64_t *woff) {
  const int64_t taps = d->KH * d->KW;
  const bool rows = taps > 25; /* XNNPACK's multipass kernels: row by row; else column by column */
  for (int64_t t = 0; t < taps; t++) {
    const int64_t ky = rows ? t / d->KW : t % d->KH, kx = rows ? t % d->KW : t / d->KH;
    toff[t] = (ky * d->dh * d->Wp + kx * d->dw) * d->C;
    woff[t] = (ky * d->KW + kx) * d->C;
  }
}

void px_f16n_dwconv_rows(const px_f16n_dw *d, const uint16_t *x, int64_t oh0, int64_t oh1, float *y) {
#if PX_F16N_X86
  dw_x86(d, x, oh0, oh1, y);
#else
  const float flo = f16(d->lo), fhi = f16(d->hi);
  const int64_t taps = d->KH * d->KW;
  const bool two = taps > 9 && taps <= 25;
  for (int64_t oh = oh0; oh < oh1; oh++)
    for (int64_t ow = 0; ow < d->OW; ow++)
      for (int64_t c = 0; c < d->C; c++) {
        const uint16_t *win = x + (oh * d->sh * d->Wp + ow * d->sw) * d->C + c;
        float acc[2] = {px_f16_bits_to_f32(d->bias[c]), 0.0f};
        for (int64_t t = 0; t < taps; t++) {
          const int a = two ? (int)(t & 1) : 0;
          acc[a] = fma16(acc[a], px_f16_bits_to_f32(win[d->toff[t]]), px_f16_bits_to_f32(d->w[d->woff[t] + c]));
        }
        const float r = two ? f16(acc[0] + acc[1]) : acc[0];
        y[(oh * d->OW + ow) * d->C + c] = bound1(r, flo, fhi);
      }
#endif
}
