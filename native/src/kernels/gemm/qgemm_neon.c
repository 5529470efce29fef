/*
 * qgemm_neon.c - the aarch64 micro-kernels of the integer GEMM (qgemm_impl.h
 * has the packed layout and the contract). 8-bit weights are stored as int8
 * (w - zp) here, 4-bit ones as their nibbles, so both sides are signed bytes.
 *
 * NEON (every aarch64 CPU): vmull_s8 products (at most 128 * 128) added in
 * pairs into int32 lanes with vpadalq_s16; for 4-bit weights two products
 * (|nibble * a| <= 1920) are added in int16 first. Dot product (sdot, chosen
 * when getauxval(AT_HWCAP) has HWCAP_ASIMDDP): four byte products per int32
 * lane, compiled with a target attribute.
 */
#include "kernels/gemm/qgemm_impl.h"

#if QG_NEON
#include <arm_neon.h>
#include <string.h>

static inline int32_t qg_load4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* ---- plain NEON, one row at a time ----------------------------------------- */

/* acc[v][h]: lanes (channel 4v + 2h + c, half p) as c * 2 + p; folded with
 * vpaddq_s32 into channels 4v .. 4v + 3. */
static void qg_store_pairs(int32x4_t acc[4][2], int32_t *raw) {
  for (int v = 0; v < 4; v++) vst1q_s32(raw + 4 * v, vpaddq_s32(acc[v][0], acc[v][1]));
}

static void qg_block8_neon(const uint8_t *w0, const int8_t *a, int64_t lda, int mr, int64_t nu, int32_t *raw) {
  for (int i = 0; i < mr; i++) {
    const int8_t *ar = a + i * lda;
    const int8_t *w = (const int8_t *)w0;
    int32x4_t acc[4][2];
    for (int v = 0; v < 4; v++) acc[v][0] = acc[v][1] = vdupq_n_s32(0);
    for (int64_t u = 0; u < nu; u++, w += 128) {
      for (int q = 0; q < 2; q++) {
        int8x16_t aq = vreinterpretq_s8_s32(vdupq_n_s32(qg_load4(ar + u * 8 + q * 4)));
        for (int v = 0; v < 4; v++) {
          int8x16_t wv = vld1q_s8(w + q * 64 + v * 16);
          acc[v][0] = vpadalq_s16(acc[v][0], vmull_s8(vget_low_s8(wv), vget_low_s8(aq)));
          acc[v][1] = vpadalq_s16(acc[v][1], vmull_high_s8(wv, aq));
        }
      }
    }
    qg_store_pairs(acc, raw + i * QG_NR);
  }
}

static void qg_block4_neon(const uint8_t *w0, const int8_t *a, int64_t lda, int mr, int64_t nu, int32_t *raw) {
  const uint8x16_t mask = vdupq_n_u8(15);
  for (int i = 0; i < mr; i++) {
    const int8_t *ar = a + i * lda;
    const uint8_t *w = w0;
    int32x4_t acc[4][2];
    for (int v = 0; v < 4; v++) acc[v][0] = acc[v][1] = vdupq_n_s32(0);
    for (int64_t u = 0; u < nu; u++, w += 64) {
      int8x16_t a0 = vreinterpretq_s8_s32(vdupq_n_s32(qg_load4(ar + u * 8)));
      int8x16_t a1 = vreinterpretq_s8_s32(vdupq_n_s32(qg_load4(ar + u * 8 + 4)));
      for (int v = 0; v < 4; v++) {
        uint8x16_t b = vld1q_u8(w + v * 16);
        int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(b, mask));
        int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
        int16x8_t pl = vmlal_s8(vmull_s8(vget_low_s8(lo), vget_low_s8(a0)), vget_low_s8(hi), vget_low_s8(a1));
        int16x8_t ph = vmlal_high_s8(vmull_high_s8(lo, a0), hi, a1);
        acc[v][0] = vpadalq_s16(acc[v][0], pl);
        acc[v][1] = vpadalq_s16(acc[v][1], ph);
      }
    }
    qg_store_pairs(acc, raw + i * QG_NR);
  }
}

/* ---- dot product --------------------------------------------------------------- */

#define QG_DOT_T __attribute__((target("arch=armv8.2-a+dotprod")))
#define QG_DOT QG_DOT_T __attribute__((always_inline)) static inline

QG_DOT void qg_rows8_sdot(const uint8_t *w0, const int8_t *a, int64_t lda, const int mr, int64_t nu,
                          int32_t *raw) {
  const int8_t *w = (const int8_t *)w0;
  int32x4_t acc[QG_MR][4];
  _Pragma("GCC unroll 4") for (int i = 0; i < mr; i++)
    for (int v = 0; v < 4; v++) acc[i][v] = vdupq_n_s32(0);
  for (int64_t u = 0; u < nu; u++, w += 128) {
    int8x16_t b0 = vld1q_s8(w), b1 = vld1q_s8(w + 16), b2 = vld1q_s8(w + 32), b3 = vld1q_s8(w + 48);
    int8x16_t c0 = vld1q_s8(w + 64), c1 = vld1q_s8(w + 80), c2 = vld1q_s8(w + 96), c3 = vld1q_s8(w + 112);
    _Pragma("GCC unroll 4") for (int i = 0; i < mr; i++) {
      int8x8_t av = vld1_s8(a + i * lda + u * 8);
      acc[i][0] = vdotq_lane_s32(vdotq_lane_s32(acc[i][0], b0, av, 0), c0, av, 1);
      acc[i][1] = vdotq_lane_s32(vdotq_lane_s32(acc[i][1], b1, av, 0), c1, av, 1);
      acc[i][2] = vdotq_lane_s32(vdotq_lane_s32(acc[i][2], b2, av, 0), c2, av, 1);
      acc[i][3] = vdotq_lane_s32(vdotq_lane_s32(acc[i][3], b3, av, 0), c3, av, 1);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < 4; v++) vst1q_s32(raw + i * QG_NR + 4 * v, acc[i][v]);
}

QG_DOT void qg_rows4_sdot(const uint8_t *w, const int8_t *a, int64_t lda, const int mr, int64_t nu,
                          int32_t *raw) {
  const uint8x16_t mask = vdupq_n_u8(15);
  int32x4_t acc[QG_MR][4];
  _Pragma("GCC unroll 4") for (int i = 0; i < mr; i++)
    for (int v = 0; v < 4; v++) acc[i][v] = vdupq_n_s32(0);
  for (int64_t u = 0; u < nu; u++, w += 64) {
    int8x16_t lo[4], hi[4];
    for (int v = 0; v < 4; v++) {
      uint8x16_t b = vld1q_u8(w + v * 16);
      lo[v] = vreinterpretq_s8_u8(vandq_u8(b, mask));
      hi[v] = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < mr; i++) {
      int8x8_t av = vld1_s8(a + i * lda + u * 8);
      for (int v = 0; v < 4; v++) acc[i][v] = vdotq_lane_s32(vdotq_lane_s32(acc[i][v], lo[v], av, 0), hi[v], av, 1);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < 4; v++) vst1q_s32(raw + i * QG_NR + 4 * v, acc[i][v]);
}

#define QG_DISPATCH_MR(fn)     \
  switch (mr) {                \
  case 1:                      \
    fn(w, a, lda, 1, nu, raw); \
    break;                     \
  case 2:                      \
    fn(w, a, lda, 2, nu, raw); \
    break;                     \
  case 3:                      \
    fn(w, a, lda, 3, nu, raw); \
    break;                     \
  default:                     \
    fn(w, a, lda, 4, nu, raw); \
    break;                     \
  }

QG_DOT_T static void qg_block8_sdot(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                                    int32_t *raw) {
  QG_DISPATCH_MR(qg_rows8_sdot)
}

QG_DOT_T static void qg_block4_sdot(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                                    int32_t *raw) {
  QG_DISPATCH_MR(qg_rows4_sdot)
}

/* ---- blocks -------------------------------------------------------------------- */

/* Block g's raw sums corrected, scaled and added into f (qg_blocks): one
 * fused multiply-add, as every path does. */
static void qg_epi_neon(const int32_t *raw, int mr, const qg_blocks *b, int64_t g, float *f) {
  float32x4_t sc[4];
  for (int v = 0; v < 4; v++) {
    int at = 4 * v;
    sc[v] = b->sbf16 ? vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)qg_blk_sc(b, g) + at), 16))
                     : vld1q_f32((const float *)qg_blk_sc(b, g) + at);
  }
  for (int i = 0; i < mr; i++) {
    int32x4_t c = vdupq_n_s32(qg_wrap_mul(b->sbias, b->sa[i * b->nb + g]));
    for (int v = 0; v < 4; v++) {
      int32x4_t x = vsubq_s32(vld1q_s32(raw + i * QG_NR + 4 * v), c);
      vst1q_f32(f + i * QG_NR + 4 * v, vfmaq_f32(vld1q_f32(f + i * QG_NR + 4 * v), vcvtq_f32_s32(x), sc[v]));
    }
  }
}

typedef void (*qg_block_fn)(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, int32_t *raw);

static void qg_blocks_neon(qg_block_fn fn, const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                           const qg_blocks *b, void *out) {
  if (!b) {
    fn(w, a, lda, mr, nu, out);
    return;
  }
  int32_t raw[QG_MR * QG_NR];
  float *f = out;
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < QG_NR; j++) f[i * QG_NR + j] = -(float)b->azp[i] * b->corr[j];
  for (int64_t g = 0; g < b->nb; g++, w += b->wstride, a += b->astride) {
    fn(w, a, lda, mr, nu, raw);
    qg_epi_neon(raw, mr, b, g, f);
  }
}

void qg_ukr8_neon(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                  void *out) {
  qg_blocks_neon(qg_block8_neon, w, a, lda, mr, nu, b, out);
}

void qg_ukr4_neon(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                  void *out) {
  qg_blocks_neon(qg_block4_neon, w, a, lda, mr, nu, b, out);
}

void qg_ukr8_sdot(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                  void *out) {
  qg_blocks_neon(qg_block8_sdot, w, a, lda, mr, nu, b, out);
}

void qg_ukr4_sdot(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                  void *out) {
  qg_blocks_neon(qg_block4_sdot, w, a, lda, mr, nu, b, out);
}

/* One row times nt tiles of blockwise 4-bit weights (qg_gemv_fn), two tiles
 * at a time: the low and the high nibbles of each tile go to accumulators of
 * their own (16 chains of sdot in flight instead of 4 chains of two), and
 * each block ends as qg_epi_neon ends it, in registers. */
QG_DOT void qg_gemv4_sdot_n(const int nt, const uint8_t *w, int64_t tb, const int8_t *a, int64_t nu,
                            const qg_blocks *b, float *out) {
  const uint8x16_t mask = vdupq_n_u8(15);
  float32x4_t f[2][4];
  const float32x4_t z = vdupq_n_f32(-(float)b->azp[0]);
  for (int t = 0; t < nt; t++)
    for (int v = 0; v < 4; v++) f[t][v] = vmulq_f32(z, vld1q_f32(b->corr + t * QG_NR + 4 * v));
  for (int64_t g = 0; g < b->nb; g++, w += b->wstride, a += b->astride) {
    int32x4_t cl[2][4], ch[2][4];
    for (int t = 0; t < nt; t++)
      for (int v = 0; v < 4; v++) cl[t][v] = ch[t][v] = vdupq_n_s32(0);
    for (int64_t u = 0; u < nu; u++) {
      const int8x8_t av = vld1_s8(a + u * 8);
      _Pragma("GCC unroll 2") for (int t = 0; t < nt; t++) {
        const uint8_t *wu = w + t * tb + u * 64;
        for (int v = 0; v < 4; v++) {
          uint8x16_t x = vld1q_u8(wu + v * 16);
          const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(x, mask)), hi = vreinterpretq_s8_u8(vshrq_n_u8(x, 4));
          cl[t][v] = vdotq_lane_s32(cl[t][v], lo, av, 0);
          ch[t][v] = vdotq_lane_s32(ch[t][v], hi, av, 1);
        }
      }
    }
    const int32x4_t c = vdupq_n_s32(qg_wrap_mul(b->sbias, b->sa[g]));
    for (int t = 0; t < nt; t++) {
      const uint8_t *sp = (const uint8_t *)qg_blk_sc(b, g) + t * tb;
      for (int v = 0; v < 4; v++) {
        float32x4_t sc = b->sbf16 ? vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)sp + 4 * v), 16))
                                  : vld1q_f32((const float *)sp + 4 * v);
        int32x4_t x = vsubq_s32(vaddq_s32(cl[t][v], ch[t][v]), c);
        f[t][v] = vfmaq_f32(f[t][v], vcvtq_f32_s32(x), sc);
      }
    }
  }
  for (int t = 0; t < nt; t++)
    for (int v = 0; v < 4; v++) vst1q_f32(out + t * QG_NR + 4 * v, f[t][v]);
}

QG_DOT_T void qg_gemv4_sdot(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t nu,
                            const qg_blocks *b, float *out) {
  for (int t = 0; t < nt; t += 2) {
    qg_blocks bt = *b;
    bt.corr = b->corr + t * QG_NR;
    bt.scales = (const uint8_t *)b->scales + t * tile_bytes;
    if (nt - t >= 2)
      qg_gemv4_sdot_n(2, w + t * tile_bytes, tile_bytes, a, nu, &bt, out + t * QG_NR);
    else
      qg_gemv4_sdot_n(1, w + t * tile_bytes, tile_bytes, a, nu, &bt, out + t * QG_NR);
  }
}

/* ---- the static int8 product's output step -------------------------------------- */

/* fcvtns rounds to nearest even, as lrintf does under the default rounding;
 * fmaxnm / fminnm return the bound for NaN as qgemm.c's scalar step does. */
void qg_qs8_out_neon(const int32_t *raw, int mr, int nn, const int32_t *rowc, const int32_t *kb, const float *rq,
                     float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc) {
  const float32x4_t lo = vdupq_n_f32(qlo), hi = vdupq_n_f32(qhi);
  const int32x4_t z = vdupq_n_s32(zp);
  for (int i = 0; i < mr; i++) {
    int32x4_t c = vdupq_n_s32(rowc[i]);
    int16x4_t h[4];
    for (int v = 0; v < 4; v++) {
      int32x4_t x = vaddq_s32(vsubq_s32(vld1q_s32(raw + i * QG_NR + 4 * v), c), vld1q_s32(kb + 4 * v));
      float32x4_t f = vmulq_f32(vcvtq_f32_s32(x), vld1q_f32(rq + 4 * v));
      f = vminnmq_f32(vmaxnmq_f32(f, lo), hi);
      h[v] = vqmovn_s32(vaddq_s32(vcvtnq_s32_f32(f), z));
    }
    int8x16_t b = vcombine_s8(vqmovn_s16(vcombine_s16(h[0], h[1])), vqmovn_s16(vcombine_s16(h[2], h[3])));
    if (nn == QG_NR) {
      vst1q_s8(out + i * ldc, b);
    } else {
      int8_t tmp[QG_NR];
      vst1q_s8(tmp, b);
      memcpy(out + i * ldc, tmp, (size_t)nn);
    }
  }
}

/* The clamp as compare and select (y < lo -> lo, y > hi -> hi), so NaN and
 * the sign of zero come out as in the scalar step. */
void qg_f32_out_neon(const int32_t *raw, const float *facc, int mr, int nn, const int32_t *rowc, const int32_t *azp,
                     const int32_t *ws, const float *as, const float *sc, const float *bias, float lo, float hi,
                     float *out, int64_t ldc) {
  const float32x4_t vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  for (int i = 0; i < mr; i++) {
    float tmp[QG_NR];
    float *o = nn == QG_NR ? out + i * ldc : tmp;
    float32x4_t a = vdupq_n_f32(as[i]);
    for (int v = 0; v < 4; v++) {
      float32x4_t y;
      if (raw) {
        int32x4_t x = vsubq_s32(vld1q_s32(raw + i * QG_NR + 4 * v), vdupq_n_s32(rowc[i]));
        x = vsubq_s32(x, vmulq_s32(vdupq_n_s32(azp[i]), vld1q_s32(ws + 4 * v)));
        y = vmulq_f32(vmulq_f32(vcvtq_f32_s32(x), a), vld1q_f32(sc + 4 * v));
      } else {
        y = vmulq_f32(vld1q_f32(facc + i * QG_NR + 4 * v), a);
      }
      if (bias) y = vaddq_f32(y, vld1q_f32(bias + 4 * v));
      y = vbslq_f32(vcltq_f32(y, vlo), vlo, y);
      y = vbslq_f32(vcgtq_f32(y, vhi), vhi, y);
      vst1q_f32(o + 4 * v, y);
    }
    if (nn != QG_NR) memcpy(out + i * ldc, tmp, sizeof(float) * (size_t)nn);
  }
}

/* ---- px_quantize_qd8's passes ---------------------------------------------------- */

/* fminnm / fmaxnm ignore NaN as the scalar pass does (a -0 may end up as the
 * minimum here where the scalar pass keeps +0; both give the same scale,
 * zero point and values). */
void qg_qd8_range_neon(const float *r, int64_t K, float *rmin, float *rmax) {
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    float32x4_t x = vld1q_f32(r + k);
    lo = vminnmq_f32(lo, x);
    hi = vmaxnmq_f32(hi, x);
  }
  float a = vminnmvq_f32(lo), b = vmaxnmvq_f32(hi);
  for (; k < K; k++) {
    a = r[k] < a ? r[k] : a;
    b = r[k] > b ? r[k] : b;
  }
  *rmin = a;
  *rmax = b;
}

/* fmaxnm(v, lo) is lo for NaN, as the scalar pass; fcvtns rounds half to
 * even as lrintf. */
void qg_qd8_quant_neon(const float *r, int64_t K, float mult, float lo, float hi, int32_t zp, int8_t *q) {
  const float32x4_t m = vdupq_n_f32(mult), vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  const int32x4_t z = vdupq_n_s32(zp);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    float32x4_t f0 = vminnmq_f32(vmaxnmq_f32(vmulq_f32(vld1q_f32(r + k), m), vlo), vhi);
    float32x4_t f1 = vminnmq_f32(vmaxnmq_f32(vmulq_f32(vld1q_f32(r + k + 4), m), vlo), vhi);
    int16x8_t h = vcombine_s16(vqmovn_s32(vaddq_s32(vcvtnq_s32_f32(f0), z)), vqmovn_s32(vaddq_s32(vcvtnq_s32_f32(f1), z)));
    vst1_s8(q + k, vqmovn_s16(h));
  }
  for (; k < K; k++) {
    float v = r[k] * mult;
    v = lo < v ? v : lo;
    v = v < hi ? v : hi;
    q[k] = (int8_t)(vcvtns_s32_f32(v) + zp);
  }
}

#else
typedef int qg_neon_unused; /* ISO C wants a translation unit to declare something */
#endif
