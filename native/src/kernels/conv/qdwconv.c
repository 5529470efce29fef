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
 * depth multiplier of 1, the channels run in registers: two taps' int8
 * inputs widened to int16 and interleaved channel by channel, multiplied by
 * the filter packed at load in the same order and pair-summed into int32
 * (|x * w| <= 2^14, so a pair never overflows). On AVX-512 VNNI machines
 * (the int8 GEMM's path, kernels/gemm/qgemm.h) 32 channels at a time with
 * VPDPWSSD, the last block masked; on AVX2 machines 16 channels with
 * VPMADDWD, then 8 with the low halves of the same packing, the last
 * channels in a plain loop, as other multipliers are. The requantization is
 * the same float arithmetic on every path: float(acc) * requant, clamped,
 * rounded to nearest even, plus the output zero point.
 *
 * A row's pixels whose taps all lie inside the input columns (the interior)
 * share one set of tap pointers, moved by stride * C per pixel: the taps of
 * rows above or below the input point into a row of in_zp bytes as wide as
 * the input, so that they move the same way. The border pixels find their
 * taps one by one.
 */
#include "kernels/conv/qdwconv.h"

#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/common.h"
#include "kernels/gemm/qgemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define QDW_X86 1
#include <immintrin.h>
#else
#define QDW_X86 0
#endif

#define QDW_PARAM_MAX 65536
enum { QDW_C, QDW_AVX2, QDW_AVX512 }; /* the pixel kernels */

struct px_qdwconv {
  int64_t C, mult, CO, kh, kw, KK, sh, sw, dh, dw, pt, pl;
  int32_t out_zp;
  float lo, hi;      /* qmin - out_zp, qmax - out_zp */
  int8_t *w;         /* [KK][CO] */
  int32_t *bias;     /* [CO], the input zero point folded in */
  float *requant;    /* [CO] */
  int8_t in_zp;      /* the taps outside the input read it (rows of it in scratch) */
  /* AVX2 / AVX-512, multiplier 1: per block of B channels (16 / 32), per
   * pair of taps, the filter as 2 * B int16 in VPUNPCKLWD / VPUNPCKHWD
   * order; bias and requant per block in the order of the two accumulators */
  int isa, B;
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
  free(c->wp);
  free(c->bp);
  free(c->rqp);
  free(c);
}

size_t px_qdwconv_bytes(const px_qdwconv *c) { return c ? c->bytes : 0; }

#if QDW_X86
/* Where channel j of a block of B sits in the two accumulators: 128-bit
 * lane j / 8 of the unpacked pairs; the first accumulator holds channels
 * 0-3 of each group of 8, the second 4-7. Returns acc * B / 2 + position. */
static int qdw_slot(int j, int B) { return ((j >> 2) & 1) * (B / 2) + (j >> 3) * 4 + (j & 3); }

static void qdw_pack_blocks(px_qdwconv *c) {
  const int64_t CO = c->CO, KK = c->KK;
  const int B = c->B, half = B / 2;
  for (int64_t b = 0; b < c->blocks; b++)
    for (int j = 0; j < B; j++) {
      int64_t ch = b * B + j;
      int s = qdw_slot(j, B);
      c->bp[b * B + s] = ch < CO ? c->bias[ch] : 0;
      c->rqp[b * B + s] = ch < CO ? c->requant[ch] : 0.0f;
      for (int64_t k = 0; k < c->pairs; k++)
        for (int h = 0; h < 2; h++) { /* tap 2k + h */
          int64_t t = 2 * k + h;
          int16_t v = ch < CO && t < KK ? c->w[t * CO + ch] : 0;
          /* accumulator s / half, position s % half: int16 slot 2 * (s % half) + h */
          c->wp[(b * c->pairs + k) * 2 * B + (s / half) * B + 2 * (s % half) + h] = v;
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
  if (!c->w || !c->bias || !c->requant) goto oom;
  memcpy(c->w, d->weights, KK * CO);
  memcpy(c->requant, d->requant, sizeof(float) * CO);
  c->in_zp = (int8_t)d->in_zp;
  for (size_t ch = 0; ch < CO; ch++) {
    int64_t sum = 0;
    for (size_t t = 0; t < KK; t++) sum += c->w[t * CO + ch];
    /* |sum| <= 2^16 taps * 128 and |in_zp| <= 128 (int8 zero points, checked by the caller): in int64 */
    int64_t b = (d->bias ? d->bias[ch] : 0) - (int64_t)d->in_zp * sum;
    c->bias[ch] = (int32_t)(uint32_t)b; /* as XNNPACK's int32 packing: wraps */
  }
  c->bytes = KK * CO + (sizeof(int32_t) + sizeof(float)) * CO;
#if QDW_X86
  /* the int8 GEMM's path chooses (px_qgemm_use_path picks a lesser one for tests) */
  const int path = px_qgemm_path();
  if (c->mult == 1 && (path == PX_QGEMM_AVX512_VNNI || path == PX_QGEMM_AVX2)) {
    c->isa = path == PX_QGEMM_AVX512_VNNI ? QDW_AVX512 : QDW_AVX2;
    c->B = c->isa == QDW_AVX512 ? 32 : 16;
    c->blocks = (c->CO + c->B - 1) / c->B;
    c->pairs = (c->KK + 1) / 2;
    const size_t nb = (size_t)c->blocks, B = (size_t)c->B;
    c->wp = aligned_alloc(64, nb * (size_t)c->pairs * B * 4);
    c->bp = aligned_alloc(64, nb * B * 4);
    c->rqp = aligned_alloc(64, nb * B * 4);
    if (!c->wp || !c->bp || !c->rqp) goto oom;
    qdw_pack_blocks(c);
    c->bytes += nb * (size_t)c->pairs * B * 4 + nb * B * 8;
  }
#endif
  return c;
oom:
  px_qdwconv_free(c);
  px_no_memory("quantized depthwise convolution");
  return NULL;
}

/* ---- one output pixel ------------------------------------------------------- */

/* Channels [c0, CO) of one pixel from its KK tap rows xs + off (input
 * channel 0). */
static void qdw_pixel_c(const px_qdwconv *c, const int8_t *const *xs, int64_t off, int64_t c0, int8_t *o) {
  const int64_t CO = c->CO, KK = c->KK, mult = c->mult;
  for (int64_t ch = c0; ch < CO; ch++) {
    int32_t acc = c->bias[ch];
    int64_t ci = (mult == 1 ? ch : ch / mult) + off;
    for (int64_t t = 0; t < KK; t++) acc += (int32_t)xs[t][ci] * (int32_t)c->w[t * CO + ch];
    o[ch] = px_q8_step((float)acc * c->requant[ch], c->lo, c->hi, c->out_zp);
  }
}

#if QDW_X86
/* AVX2: the channels of one pixel (taps xs + off) in blocks of 16, then 8;
 * returns the first channel left to qdw_pixel_c. xs has pairs * 2 entries
 * (an odd count's last one repeats a tap; its filter is zero). */
__attribute__((target("avx2"), always_inline)) static inline int64_t qdw_pixel_avx2(const px_qdwconv *c,
                                                                                  const int8_t *const *xs,
                                                                                  int64_t off, int8_t *o) {
  const int64_t CO = c->CO, pairs = c->pairs;
  const __m256 vlo = _mm256_set1_ps(c->lo), vhi = _mm256_set1_ps(c->hi);
  const __m256i vzp = _mm256_set1_epi16((short)c->out_zp);
  int64_t b = 0;
  for (; (b + 1) * 16 <= CO; b++) {
    const int64_t c0 = b * 16, x0 = off + c0;
    __m256i a0 = _mm256_load_si256((const __m256i *)(c->bp + c0));
    __m256i a1 = _mm256_load_si256((const __m256i *)(c->bp + c0 + 8));
    const int16_t *w = c->wp + b * pairs * 32;
    for (int64_t k = 0; k < pairs; k++, w += 32) {
      __m256i xa = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xs[2 * k] + x0)));
      __m256i xb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xs[2 * k + 1] + x0)));
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
  int64_t c0 = b * 16;
  if (c0 + 8 <= CO) { /* the low halves of block b: channels 0-3 and 4-7 */
    const int64_t x0 = off + c0;
    __m128i a0 = _mm_load_si128((const __m128i *)(c->bp + c0));
    __m128i a1 = _mm_load_si128((const __m128i *)(c->bp + c0 + 8));
    const int16_t *w = c->wp + b * pairs * 32;
    for (int64_t k = 0; k < pairs; k++, w += 32) {
      __m128i xa = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(xs[2 * k] + x0)));
      __m128i xb = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(xs[2 * k + 1] + x0)));
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

#define QDW_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* AVX-512 VNNI: every channel of one pixel (taps xs + off), 32 at a time,
 * the last block masked (masked loads read nothing past the channels). The
 * accumulators' 128-bit lanes hold channels 8k..8k+3 and 8k+4..8k+7, so
 * VPACKSSDW puts each lane's 8 channels back in order. */
QDW_512 __attribute__((always_inline)) static inline void qdw_pixel_512(const px_qdwconv *c, const int8_t *const *xs,
                                                                        int64_t off, int8_t *o) {
  const int64_t CO = c->CO, pairs = c->pairs;
  const __m512 vlo = _mm512_set1_ps(c->lo), vhi = _mm512_set1_ps(c->hi);
  const __m512i vzp = _mm512_set1_epi16((short)c->out_zp);
  const int32_t *bp = c->bp;
  const float *rq = c->rqp;
  const int16_t *w = c->wp;
  for (int64_t c0 = 0; c0 < CO; c0 += 32, bp += 32, rq += 32) {
    const __mmask32 m = CO - c0 >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << (CO - c0)) - 1);
    const int64_t x0 = off + c0;
    __m512i a0 = _mm512_load_si512((const void *)bp), a1 = _mm512_load_si512((const void *)(bp + 16));
    for (int64_t k = 0; k < pairs; k++, w += 64) {
      __m512i xa = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, xs[2 * k] + x0));
      __m512i xb = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, xs[2 * k + 1] + x0));
      a0 = _mm512_dpwssd_epi32(a0, _mm512_unpacklo_epi16(xa, xb), _mm512_load_si512((const void *)w));
      a1 = _mm512_dpwssd_epi32(a1, _mm512_unpackhi_epi16(xa, xb), _mm512_load_si512((const void *)(w + 32)));
    }
    __m512 f0 = _mm512_mul_ps(_mm512_cvtepi32_ps(a0), _mm512_load_ps(rq));
    __m512 f1 = _mm512_mul_ps(_mm512_cvtepi32_ps(a1), _mm512_load_ps(rq + 16));
    f0 = _mm512_min_ps(_mm512_max_ps(f0, vlo), vhi);
    f1 = _mm512_min_ps(_mm512_max_ps(f1, vlo), vhi);
    __m512i q = _mm512_adds_epi16(_mm512_packs_epi32(_mm512_cvtps_epi32(f0), _mm512_cvtps_epi32(f1)), vzp);
    _mm256_mask_storeu_epi8(o + c0, m, _mm512_cvtsepi16_epi8(q));
  }
}
#endif

/* ---- the rows --------------------------------------------------------------- */

typedef struct {
  const px_qdwconv *c;
  const int8_t *x;
  int8_t *y;
  int64_t H, W, OH, OW;
  const int8_t **ptrs; /* per thread: 2 * (KK + 1) tap rows (border, interior) */
  const int8_t *zrows; /* W * C bytes of in_zp */
} qdw_job;

/* The KK tap rows of output pixel (oh, ow) of one image, and the odd tap's
 * partner (zero filter) after them. */
static inline void qdw_taps(const px_qdwconv *c, const int8_t *img, const int8_t *zrow, int64_t H, int64_t W,
                            int64_t oh, int64_t ow, const int8_t **xs) {
  int64_t t = 0;
  for (int64_t i = 0; i < c->kh; i++) {
    int64_t ih = oh * c->sh + i * c->dh - c->pt;
    for (int64_t k = 0; k < c->kw; k++, t++) {
      int64_t iw = ow * c->sw + k * c->dw - c->pl;
      xs[t] = ih >= 0 && ih < H && iw >= 0 && iw < W ? img + (ih * W + iw) * c->C : zrow;
    }
  }
  xs[t] = xs[t - 1];
}

/* [lo, hi): the output columns whose taps all lie inside the input's W
 * columns; the tap rows of output row oh at column lo, those above or below
 * the input in the zero-point rows (as wide as the input). */
static void qdw_interior(const px_qdwconv *c, const int8_t *img, const int8_t *zrows, int64_t H, int64_t W,
                         int64_t oh, int64_t OW, int64_t *lo, int64_t *hi, const int8_t **xs) {
  const int64_t span = (c->kw - 1) * c->dw;
  int64_t l = (c->pl + c->sw - 1) / c->sw, h = W - 1 - span + c->pl >= 0 ? (W - 1 - span + c->pl) / c->sw + 1 : 0;
  if (h > OW) h = OW;
  if (l > h) l = h;
  *lo = l, *hi = h;
  if (l == h) return;
  int64_t t = 0;
  for (int64_t i = 0; i < c->kh; i++) {
    const int64_t ih = oh * c->sh + i * c->dh - c->pt;
    const int8_t *row = ih >= 0 && ih < H ? img + ih * W * c->C : zrows;
    for (int64_t k = 0; k < c->kw; k++, t++) xs[t] = row + (l * c->sw + k * c->dw - c->pl) * c->C;
  }
  xs[t] = xs[t - 1];
}

/* One output row: the border pixels' taps one by one, the interior's moved
 * by stride * C; PIXEL(xs, off, o) computes one pixel. */
#define QDW_ROW(PIXEL)                                                                              \
  do {                                                                                              \
    int64_t lo, hi;                                                                                 \
    qdw_interior(c, img, zrows, H, W, oh, OW, &lo, &hi, xi);                                        \
    for (int64_t ow = 0; ow < OW; ow++) {                                                           \
      if (ow == lo && lo < hi) {                                                                    \
        for (; ow < hi; ow++) PIXEL(xi, (ow - lo) * c->sw * c->C, orow + ow * c->CO);              \
        if (ow == OW) break;                                                                        \
      }                                                                                             \
      qdw_taps(c, img, zrows, H, W, oh, ow, xb);                                                    \
      PIXEL(xb, 0, orow + ow * c->CO);                                                              \
    }                                                                                               \
  } while (0)

#if QDW_X86
#define QDW_PIXEL_AVX2(xs, off, o)                                        \
  do {                                                                    \
    int8_t *o_ = (o);                                                     \
    int64_t done_ = qdw_pixel_avx2(c, (xs), (off), o_);                   \
    if (done_ < c->CO) qdw_pixel_c(c, (xs), (off), done_, o_);            \
  } while (0)

__attribute__((target("avx2"))) static void qdw_row_avx2(const px_qdwconv *c, const int8_t *img, const int8_t *zrows,
                                                         int64_t H, int64_t W, int64_t oh, int64_t OW,
                                                         const int8_t **xb, const int8_t **xi, int8_t *orow) {
  QDW_ROW(QDW_PIXEL_AVX2);
}

#define QDW_PIXEL_512(xs, off, o) qdw_pixel_512(c, (xs), (off), (o))

QDW_512 static void qdw_row_512(const px_qdwconv *c, const int8_t *img, const int8_t *zrows, int64_t H, int64_t W,
                                int64_t oh, int64_t OW, const int8_t **xb, const int8_t **xi, int8_t *orow) {
  QDW_ROW(QDW_PIXEL_512);
}
#endif

#define QDW_PIXEL_C(xs, off, o) qdw_pixel_c(c, (xs), (off), 0, (o))

static void qdw_row_c(const px_qdwconv *c, const int8_t *img, const int8_t *zrows, int64_t H, int64_t W, int64_t oh,
                      int64_t OW, const int8_t **xb, const int8_t **xi, int8_t *orow) {
  QDW_ROW(QDW_PIXEL_C);
}

static void qdw_rows(void *arg, int64_t begin, int64_t end, int tid) {
  const qdw_job *j = arg;
  const px_qdwconv *c = j->c;
  const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
  const int8_t **xb = j->ptrs + (int64_t)tid * 2 * (c->KK + 1), **xi = xb + c->KK + 1;
  for (int64_t row = begin; row < end; row++) {
    const int64_t n = row / OH, oh = row % OH;
    const int8_t *img = j->x + n * H * W * c->C;
    int8_t *orow = j->y + row * OW * c->CO;
#if QDW_X86
    if (c->isa == QDW_AVX512) {
      qdw_row_512(c, img, j->zrows, H, W, oh, OW, xb, xi, orow);
      continue;
    }
    if (c->isa == QDW_AVX2) {
      qdw_row_avx2(c, img, j->zrows, H, W, oh, OW, xb, xi, orow);
      continue;
    }
#endif
    qdw_row_c(c, img, j->zrows, H, W, oh, OW, xb, xi, orow);
  }
}

int px_qdwconv_qs8(px_ctx *ctx, const px_qdwconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x, int64_t OH,
                   int64_t OW, int8_t *y) {
  if (N <= 0 || OH <= 0 || OW <= 0) return 0;
  const int T = px_parallel_threads();
  qdw_job j = {c, x, y, H, W, OH, OW, NULL, NULL};
  const size_t nptr = sizeof(int8_t *) * 2 * (size_t)(c->KK + 1) * (size_t)T, nz = (size_t)(W > 1 ? W : 1) * (size_t)c->C;
  uint8_t *scratch = px_scratch(ctx, nptr + nz);
  if (!scratch) return PYEXEC_ERR_EXECUTION;
  j.ptrs = (const int8_t **)(void *)scratch;
  memset(scratch + nptr, (int)(uint8_t)c->in_zp, nz);
  j.zrows = (const int8_t *)(scratch + nptr);
  const int64_t rows = N * OH;
  px_parallel_for(rows, 1, rows * OW * c->CO * c->KK, qdw_rows, &j);
  return 0;
}
