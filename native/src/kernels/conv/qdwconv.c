/*
 * qdwconv.c - quantized depthwise convolution on NHWC int8 (qdwconv.h).
 *
 * The input's zero point is folded into the bias at load,
 *   bias'[c] = bias[c] - in_zp * sum over every tap of w[t][c],
 * so that each output pixel sums x * w over all KH*KW taps, a tap outside
 * the input reading a row of in_zp bytes (which adds in_zp * w, taken back
 * by the folded term): the sum is the same exact int32 as XNNPACK's.
 *
 * Output rows (image, output row) are split over the thread pool. With a
 * depth multiplier of 1 on AVX2 machines, 16 channels at a time run in
 * registers: two taps' int8 inputs widened to int16 and interleaved channel
 * by channel, multiplied by the filter packed at load in the same order and
 * pair-summed into int32 (VPMADDWD: |x * w| <= 2^14, so a pair never
 * overflows); 8 channels with the low halves of the same packing; the last
 * channels, and other multipliers, in plain loops. The requantization is
 * the same float arithmetic on every path: float(acc) * requant, clamped,
 * rounded to nearest even, plus the output zero point.
 */
#include "kernels/conv/qdwconv.h"

#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/common.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define QDW_X86 1
#include <immintrin.h>
#else
#define QDW_X86 0
#endif

#define QDW_PARAM_MAX 65536
#define QDW_BLOCK 16 /* channels per packed block */

struct px_qdwconv {
  int64_t C, mult, CO, kh, kw, KK, sh, sw, dh, dw, pt, pl;
  int32_t out_zp;
  float lo, hi;      /* qmin - out_zp, qmax - out_zp */
  int8_t *w;         /* [KK][CO] */
  int32_t *bias;     /* [CO], the input zero point folded in */
  float *requant;    /* [CO] */
  int8_t *zrow;      /* C bytes of in_zp: the taps outside the input */
  /* AVX2, multiplier 1: per block of 16 channels, per pair of taps, the
   * filter as 32 int16 in VPUNPCKLWD / VPUNPCKHWD order; bias and requant
   * per block in the order of the two accumulators */
  int16_t *wp;
  int32_t *bp;
  float *rqp;
  int64_t blocks, pairs;
  size_t bytes;
};

void px_qdwconv_free(px_qdwconv *c) {
  if (!c) return;
  free(c->w);
  free(c->bias);
  free(c->requant);
  free(c->zrow);
  free(c->wp);
  free(c->bp);
  free(c->rqp);
  free(c);
}

size_t px_qdwconv_bytes(const px_qdwconv *c) { return c ? c->bytes : 0; }

#if QDW_X86
/* Where channel j (0..15) of a block sits in the two accumulators: the
 * first holds 0-3 and 8-11, the second 4-7 and 12-15 (the 128-bit lanes of
 * the unpacked pairs). Returns acc * 8 + lane. */
static int qdw_slot(int j) { return ((j >> 2) & 1) * 8 + (j >> 3) * 4 + (j & 3); }

static void qdw_pack_blocks(px_qdwconv *c) {
  const int64_t CO = c->CO, KK = c->KK;
  for (int64_t b = 0; b < c->blocks; b++)
    for (int j = 0; j < QDW_BLOCK; j++) {
      int64_t ch = b * QDW_BLOCK + j;
      int s = qdw_slot(j);
      c->bp[b * QDW_BLOCK + s] = ch < CO ? c->bias[ch] : 0;
      c->rqp[b * QDW_BLOCK + s] = ch < CO ? c->requant[ch] : 0.0f;
      for (int64_t k = 0; k < c->pairs; k++)
        for (int h = 0; h < 2; h++) { /* tap 2k + h */
          int64_t t = 2 * k + h;
          int16_t v = ch < CO && t < KK ? c->w[t * CO + ch] : 0;
          /* in accumulator a = s / 8, lane position s % 8: int16 slot 2 * (s % 8) + h */
          c->wp[(b * c->pairs + k) * 32 + (s / 8) * 16 + 2 * (s % 8) + h] = v;
        }
    }
}
#endif

px_qdwconv *px_qdwconv_pack(const px_qdwconv_desc *d) {
  if (!d || !d->weights || !d->requant) {
    px_invalid_program("quantized depthwise convolution: no filter or requantization");
    return NULL;
  }
  const int64_t v[] = {d->C, d->mult, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i] < 1 || v[i] > QDW_PARAM_MAX) {
      px_invalid_program("quantized depthwise convolution: channels %lld x %lld, kernel %lldx%lld, stride %lldx%lld "
                         "and dilation %lldx%lld must lie in [1, %d]",
                         (long long)d->C, (long long)d->mult, (long long)d->kh, (long long)d->kw, (long long)d->sh,
                         (long long)d->sw, (long long)d->dh, (long long)d->dw, QDW_PARAM_MAX);
      return NULL;
    }
  if (d->pt < 0 || d->pl < 0 || d->pt > QDW_PARAM_MAX || d->pl > QDW_PARAM_MAX || d->C * d->mult > QDW_PARAM_MAX ||
      d->kh * d->kw > QDW_PARAM_MAX) {
    px_invalid_program("quantized depthwise convolution: %lld x %lld channels, a %lldx%lld kernel or padding "
                       "%lld/%lld is too large",
                       (long long)d->C, (long long)d->mult, (long long)d->kh, (long long)d->kw, (long long)d->pt,
                       (long long)d->pl);
    return NULL;
  }
  px_qdwconv *c = calloc(1, sizeof *c);
  if (!c) {
    px_no_memory("quantized depthwise convolution");
    return NULL;
  }
  c->C = d->C, c->mult = d->mult, c->CO = d->C * d->mult, c->kh = d->kh, c->kw = d->kw, c->KK = d->kh * d->kw;
  c->sh = d->sh, c->sw = d->sw, c->dh = d->dh, c->dw = d->dw, c->pt = d->pt, c->pl = d->pl;
  c->out_zp = d->out_zp;
  c->lo = (float)(d->qmin - d->out_zp), c->hi = (float)(d->qmax - d->out_zp);
  const size_t CO = (size_t)c->CO, KK = (size_t)c->KK;
  c->w = malloc(KK * CO);
  c->bias = malloc(sizeof(int32_t) * CO);
  c->requant = malloc(sizeof(float) * CO);
  c->zrow = malloc((size_t)c->C);
  if (!c->w || !c->bias || !c->requant || !c->zrow) goto oom;
  memcpy(c->w, d->weights, KK * CO);
  memcpy(c->requant, d->requant, sizeof(float) * CO);
  memset(c->zrow, (int)(int8_t)d->in_zp, (size_t)c->C);
  for (size_t ch = 0; ch < CO; ch++) {
    int64_t sum = 0;
    for (size_t t = 0; t < KK; t++) sum += c->w[t * CO + ch];
    /* |sum| <= 2^16 taps * 128 and |in_zp| <= 128 (int8 zero points, checked by the caller): in int64 */
    int64_t b = (d->bias ? d->bias[ch] : 0) - (int64_t)d->in_zp * sum;
    c->bias[ch] = (int32_t)(uint32_t)b; /* as XNNPACK's int32 packing: wraps */
  }
  c->bytes = KK * CO + (sizeof(int32_t) + sizeof(float)) * CO + (size_t)c->C;
#if QDW_X86
  if (c->mult == 1 && px_cpu()->avx2) {
    c->blocks = (c->CO + QDW_BLOCK - 1) / QDW_BLOCK;
    c->pairs = (c->KK + 1) / 2;
    size_t nb = (size_t)c->blocks;
    c->wp = aligned_alloc(32, nb * (size_t)c->pairs * 64);
    c->bp = aligned_alloc(32, nb * 64);
    c->rqp = aligned_alloc(32, nb * 64);
    if (!c->wp || !c->bp || !c->rqp) goto oom;
    qdw_pack_blocks(c);
    c->bytes += nb * (size_t)c->pairs * 64 + nb * 128;
  }
#endif
  return c;
oom:
  px_qdwconv_free(c);
  px_no_memory("quantized depthwise convolution");
  return NULL;
}

/* ---- one output pixel ------------------------------------------------------- */

/* Channels [c0, CO) of one pixel from its KK tap rows xs (input channel 0). */
static void qdw_pixel_c(const px_qdwconv *c, const int8_t *const *xs, int64_t c0, int8_t *o) {
  const int64_t CO = c->CO, KK = c->KK, mult = c->mult;
  for (int64_t ch = c0; ch < CO; ch++) {
    int32_t acc = c->bias[ch];
    int64_t ci = mult == 1 ? ch : ch / mult;
    for (int64_t t = 0; t < KK; t++) acc += (int32_t)xs[t][ci] * (int32_t)c->w[t * CO + ch];
    o[ch] = px_q8_step((float)acc * c->requant[ch], c->lo, c->hi, c->out_zp);
  }
}

#if QDW_X86
/* The channels of one pixel in blocks of 16, then 8; returns the first
 * channel left to qdw_pixel_c. xs has pairs * 2 entries (an odd count's last
 * one repeats a tap; its filter is zero). */
__attribute__((target("avx2"), always_inline)) static inline int64_t qdw_pixel_avx2(const px_qdwconv *c,
                                                                                  const int8_t *const *xs,
                                                                                  int8_t *o) {
  const int64_t CO = c->CO, pairs = c->pairs;
  const __m256 vlo = _mm256_set1_ps(c->lo), vhi = _mm256_set1_ps(c->hi);
  const __m256i vzp = _mm256_set1_epi16((short)c->out_zp);
  int64_t b = 0;
  for (; (b + 1) * QDW_BLOCK <= CO; b++) {
    const int64_t c0 = b * QDW_BLOCK;
    __m256i a0 = _mm256_load_si256((const __m256i *)(c->bp + c0));
    __m256i a1 = _mm256_load_si256((const __m256i *)(c->bp + c0 + 8));
    const int16_t *w = c->wp + b * pairs * 32;
    for (int64_t k = 0; k < pairs; k++, w += 32) {
      __m256i xa = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xs[2 * k] + c0)));
      __m256i xb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xs[2 * k + 1] + c0)));
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(xa, xb), _mm256_load_si256((const __m256i *)w)));
      a1 = _mm256_add_epi32(a1,
                            _mm256_madd_epi16(_mm256_unpackhi_epi16(xa, xb), _mm256_load_si256((const __m256i *)(w + 16))));
    }
    __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(a0), _mm256_load_ps(c->rqp + c0));
    __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(a1), _mm256_load_ps(c->rqp + c0 + 8));
    f0 = _mm256_min_ps(_mm256_max_ps(f0, vlo), vhi);
    f1 = _mm256_min_ps(_mm256_max_ps(f1, vlo), vhi);
    /* packs keeps each 128-bit lane: channels 0-7 then 8-15, in order */
    __m256i q = _mm256_adds_epi16(_mm256_packs_epi32(_mm256_cvtps_epi32(f0), _mm256_cvtps_epi32(f1)), vzp);
    _mm_storeu_si128((__m128i *)(o + c0),
                     _mm_packs_epi16(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)));
  }
  int64_t c0 = b * QDW_BLOCK;
  if (c0 + 8 <= CO) { /* the low halves of block b: channels 0-3 and 4-7 */
    __m128i a0 = _mm_load_si128((const __m128i *)(c->bp + c0));
    __m128i a1 = _mm_load_si128((const __m128i *)(c->bp + c0 + 8));
    const int16_t *w = c->wp + b * pairs * 32;
    for (int64_t k = 0; k < pairs; k++, w += 32) {
      __m128i xa = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(xs[2 * k] + c0)));
      __m128i xb = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(xs[2 * k + 1] + c0)));
      a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi16(xa, xb), _mm_load_si128((const __m128i *)w)));
      a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi16(xa, xb), _mm_load_si128((const __m128i *)(w + 16))));
    }
    __m128 f0 = _mm_mul_ps(_mm_cvtepi32_ps(a0), _mm_load_ps(c->rqp + c0));
    __m128 f1 = _mm_mul_ps(_mm_cvtepi32_ps(a1), _mm_load_ps(c->rqp + c0 + 8));
    f0 = _mm_min_ps(_mm_max_ps(f0, _mm256_castps256_ps128(vlo)), _mm256_castps256_ps128(vhi));
    f1 = _mm_min_ps(_mm_max_ps(f1, _mm256_castps256_ps128(vlo)), _mm256_castps256_ps128(vhi));
    __m128i q = _mm_adds_epi16(_mm_packs_epi32(_mm_cvtps_epi32(f0), _mm_cvtps_epi32(f1)), _mm256_castsi256_si128(vzp));
    _mm_storel_epi64((__m128i *)(o + c0), _mm_packs_epi16(q, q));
    c0 += 8;
  }
  return c0;
}
#endif

/* ---- the rows --------------------------------------------------------------- */

typedef struct {
  const px_qdwconv *c;
  const int8_t *x;
  int8_t *y;
  int64_t H, W, OH, OW;
  const int8_t **ptrs; /* per thread: KK + 1 tap rows */
} qdw_job;

/* The KK tap rows of output pixel (oh, ow) of one image, and the odd tap's
 * partner (zero filter) after them. */
static inline void qdw_taps(const px_qdwconv *c, const int8_t *img, int64_t H, int64_t W, int64_t oh, int64_t ow,
                            const int8_t **xs) {
  int64_t t = 0;
  for (int64_t i = 0; i < c->kh; i++) {
    int64_t ih = oh * c->sh + i * c->dh - c->pt;
    for (int64_t k = 0; k < c->kw; k++, t++) {
      int64_t iw = ow * c->sw + k * c->dw - c->pl;
      xs[t] = ih >= 0 && ih < H && iw >= 0 && iw < W ? img + (ih * W + iw) * c->C : c->zrow;
    }
  }
  xs[t] = xs[t - 1];
}

#if QDW_X86
/* One output row on the AVX2 path, the pixel kernel inlined. */
__attribute__((target("avx2"))) static void qdw_row_avx2(const px_qdwconv *c, const int8_t *img, int64_t H, int64_t W,
                                                         int64_t oh, int64_t OW, const int8_t **xs, int8_t *orow) {
  for (int64_t ow = 0; ow < OW; ow++) {
    qdw_taps(c, img, H, W, oh, ow, xs);
    int8_t *o = orow + ow * c->CO;
    int64_t done = qdw_pixel_avx2(c, xs, o);
    if (done < c->CO) qdw_pixel_c(c, xs, done, o);
  }
}
#endif

static void qdw_rows(void *arg, int64_t begin, int64_t end, int tid) {
  const qdw_job *j = arg;
  const px_qdwconv *c = j->c;
  const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
  const int8_t **xs = j->ptrs + (int64_t)tid * (c->KK + 1);
  for (int64_t row = begin; row < end; row++) {
    const int64_t n = row / OH, oh = row % OH;
    const int8_t *img = j->x + n * H * W * c->C;
    int8_t *orow = j->y + row * OW * c->CO;
#if QDW_X86
    if (c->wp) {
      qdw_row_avx2(c, img, H, W, oh, OW, xs, orow);
      continue;
    }
#endif
    for (int64_t ow = 0; ow < OW; ow++) {
      qdw_taps(c, img, H, W, oh, ow, xs);
      qdw_pixel_c(c, xs, 0, orow + ow * c->CO);
    }
  }
}

int px_qdwconv_qs8(px_ctx *ctx, const px_qdwconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x, int64_t OH,
                   int64_t OW, int8_t *y) {
  if (N <= 0 || OH <= 0 || OW <= 0) return 0;
  const int T = px_parallel_threads();
  qdw_job j = {c, x, y, H, W, OH, OW, NULL};
  j.ptrs = px_scratch(ctx, sizeof(int8_t *) * (size_t)(c->KK + 1) * (size_t)T);
  if (!j.ptrs) return PYEXEC_ERR_EXECUTION;
  const int64_t rows = N * OH;
  px_parallel_for(rows, 1, rows * OW * c->CO * c->KK, qdw_rows, &j);
  return 0;
}
