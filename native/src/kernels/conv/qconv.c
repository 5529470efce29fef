/*
 * qconv.c - quantized convolution and transposed convolution over the
 * integer GEMM (qconv.h): the filter packed per group (and, transposed, per
 * phase), the rows of kernel taps gathered a tile at a time, multiplied by
 * px_qgemm_qs8 / px_qgemm_qd8_f32, and (transposed) scattered to their
 * output pixels.
 */
#include "kernels/conv/qconv.h"

#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/gemm/qgemm.h"
#include "kernels/shape/strided.h"

#define QC_PARAM_MAX 65536

struct px_qconv {
  int transposed, dynamic;
  int64_t groups, gic, goc, cin, cout;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, ah, aw;
  int64_t nph;          /* phases: sh * sw transposed, else 1 */
  int64_t *taps_h;      /* transposed: kh tap rows, phase by phase (taps_h[toff_h[r] .. toff_h[r + 1])) */
  int64_t *toff_h;      /* sh + 1 offsets */
  int64_t *taps_w, *toff_w;
  px_qweights **w;      /* [group * nph + phase], NULL for a phase without taps */
  px_qweights *wrow;    /* a few-channel static convolution: the filter with each kernel row's kw * gic
                           values padded with zeros to rowlen, a multiple of 8 (qc_run_rows); or NULL */
  int64_t rowlen;
  int32_t *tapsum;      /* static plain: [tap][cout], the sum of the tap's weights (qc_run_indirect leaves out taps
                           no output pixel of a band reads inside the input); or NULL */
  int32_t *bias;        /* static: cout (zeros when none) */
  float *requant;       /* static: cout */
  int32_t in_zp, out_zp, qmin, qmax;
  float *fbias;         /* dynamic: cout (zeros when none) */
  float lo, hi;
  size_t bytes;
};

void px_qconv_free(px_qconv *c) {
  if (!c) return;
  if (c->w)
    for (int64_t i = 0; i < c->groups * c->nph; i++) px_qweights_free(c->w[i]);
  free(c->w);
  px_qweights_free(c->wrow);
  free(c->tapsum);
  free(c->taps_h);
  free(c->toff_h);
  free(c->taps_w);
  free(c->toff_w);
  free(c->bias);
  free(c->requant);
  free(c->fbias);
  free(c);
}

size_t px_qconv_bytes(const px_qconv *c) { return c ? c->bytes : 0; }

/* The taps along one dimension by phase: tap i belongs to phase (i * d) mod s. */
static int phase_taps(int64_t k, int64_t s, int64_t d, int64_t **taps, int64_t **off) {
  *taps = malloc(sizeof(int64_t) * (size_t)k);
  *off = calloc((size_t)s + 1, sizeof(int64_t));
  if (!*taps || !*off) return -1;
  int64_t n = 0;
  for (int64_t r = 0; r < s; r++) {
    (*off)[r] = n;
    for (int64_t i = 0; i < k; i++)
      if ((i * d) % s == r) (*taps)[n++] = i;
  }
  (*off)[s] = n;
  return 0;
}

static px_qconv *bad(px_qconv *c) {
  px_qconv_free(c);
  return NULL;
}

px_qconv *px_qconv_pack(const px_qconv_desc *d) {
  if (!d || !d->weights) {
    px_invalid_program("quantized convolution: no filter");
    return NULL;
  }
  const int64_t v[] = {d->groups, d->gic, d->goc, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i] < 1 || v[i] > QC_PARAM_MAX) {
      px_invalid_program("quantized convolution: groups %lld, channels %lld -> %lld, kernel %lldx%lld, stride "
                         "%lldx%lld and dilation %lldx%lld must lie in [1, %d]",
                         (long long)d->groups, (long long)d->gic, (long long)d->goc, (long long)d->kh,
                         (long long)d->kw, (long long)d->sh, (long long)d->sw, (long long)d->dh, (long long)d->dw,
                         QC_PARAM_MAX);
      return NULL;
    }
  const int64_t pads[] = {d->pt, d->pl, d->pb, d->pr, d->ah, d->aw};
  for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++)
    if (pads[i] < 0 || pads[i] > QC_PARAM_MAX) {
      px_invalid_program("quantized convolution: padding %lld/%lld/%lld/%lld and adjustment %lldx%lld must lie in "
                         "[0, %d]",
                         (long long)d->pt, (long long)d->pl, (long long)d->pb, (long long)d->pr, (long long)d->ah,
                         (long long)d->aw, QC_PARAM_MAX);
      return NULL;
    }
  if (!d->transposed && (d->ah || d->aw)) {
    px_invalid_program("quantized convolution: adjustment %lldx%lld is only for transposed convolutions",
                       (long long)d->ah, (long long)d->aw);
    return NULL;
  }
  if (d->transposed && (d->ah >= d->sh || d->aw >= d->sw)) {
    px_invalid_program("quantized transposed convolution: adjustment %lldx%lld must be smaller than the stride "
                       "%lldx%lld",
                       (long long)d->ah, (long long)d->aw, (long long)d->sh, (long long)d->sw);
    return NULL;
  }
  /* every product below stays far inside int64: each factor <= 2^16 */
  int64_t cin = d->groups * d->gic, cout = d->groups * d->goc, taps = d->kh * d->kw;
  if (cin > QC_PARAM_MAX || cout > QC_PARAM_MAX || taps > QC_PARAM_MAX || taps * d->gic > ((int64_t)1 << 28)) {
    px_invalid_program("quantized convolution: %lld -> %lld channels with a %lldx%lld kernel of %lld input "
                       "channels per group is too large",
                       (long long)cin, (long long)cout, (long long)d->kh, (long long)d->kw, (long long)d->gic);
    return NULL;
  }
  if (d->dynamic) {
    if (!d->wscale) {
      px_invalid_program("quantized convolution: no filter scales");
      return NULL;
    }
    if (!(d->lo <= d->hi)) {
      px_invalid_program("quantized convolution: the output clamp [%g, %g] is empty", (double)d->lo, (double)d->hi);
      return NULL;
    }
  } else {
    if (!d->requant) {
      px_invalid_program("quantized convolution: no requantization scales");
      return NULL;
    }
    for (int64_t n = 0; n < cout; n++)
      if (!(d->requant[n] > 0.0f && d->requant[n] < 256.0f)) {
        px_invalid_program("quantized convolution: requantization scale %g of channel %lld is outside (0, 256)",
                           (double)d->requant[n], (long long)n);
        return NULL;
      }
    if (d->in_zp < -128 || d->in_zp > 127 || d->out_zp < -128 || d->out_zp > 127 || d->qmin < -128 ||
        d->qmax > 127 || d->qmin > d->qmax) {
      px_invalid_program("quantized convolution: zero points %d / %d or clamp [%d, %d] outside int8", (int)d->in_zp,
                         (int)d->out_zp, (int)d->qmin, (int)d->qmax);
      return NULL;
    }
  }

  px_qconv *c = calloc(1, sizeof *c);
  if (!c) {
    px_no_memory("quantized convolution");
    return NULL;
  }
  c->transposed = d->transposed;
  c->dynamic = d->dynamic;
  c->groups = d->groups, c->gic = d->gic, c->goc = d->goc, c->cin = cin, c->cout = cout;
  c->kh = d->kh, c->kw = d->kw, c->sh = d->sh, c->sw = d->sw, c->dh = d->dh, c->dw = d->dw;
  c->pt = d->pt, c->pl = d->pl, c->pb = d->pb, c->pr = d->pr, c->ah = d->ah, c->aw = d->aw;
  c->in_zp = d->in_zp, c->out_zp = d->out_zp, c->qmin = d->qmin, c->qmax = d->qmax;
  c->lo = d->lo, c->hi = d->hi;
  c->nph = d->transposed ? d->sh * d->sw : 1;
  c->w = calloc((size_t)(c->groups * c->nph), sizeof *c->w);
  float *ones = malloc(sizeof(float) * (size_t)cout);
  int8_t *rows = malloc((size_t)(d->goc * taps * d->gic));
  bool ok = c->w && ones && rows;
  if (d->dynamic) {
    ok = ok && (c->fbias = calloc((size_t)cout, sizeof(float)));
    if (ok && d->fbias) memcpy(c->fbias, d->fbias, sizeof(float) * (size_t)cout);
  } else {
    ok = ok && (c->bias = calloc((size_t)cout, sizeof(int32_t))) && (c->requant = malloc(sizeof(float) * (size_t)cout));
    if (ok && d->bias) memcpy(c->bias, d->bias, sizeof(int32_t) * (size_t)cout);
    if (ok) memcpy(c->requant, d->requant, sizeof(float) * (size_t)cout);
  }
  if (ok && d->transposed)
    ok = !phase_taps(d->kh, d->sh, d->dh, &c->taps_h, &c->toff_h) &&
         !phase_taps(d->kw, d->sw, d->dw, &c->taps_w, &c->toff_w);
  if (!ok) {
    free(ones);
    free(rows);
    px_no_memory("quantized convolution");
    return bad(c);
  }
  for (int64_t n = 0; n < cout; n++) ones[n] = 1.0f;
  c->bytes = sizeof *c + (size_t)cout * 8;
  const int64_t K_all = taps * d->gic;
  for (int64_t g = 0; g < c->groups; g++)
    for (int64_t p = 0; p < c->nph; p++) {
      const int8_t *src = d->weights + g * d->goc * K_all; /* this group's rows of K_all bytes */
      int64_t K = K_all;
      if (d->transposed) { /* the rows of this phase's taps only */
        int64_t rh = p / c->sw, rw = p % c->sw;
        int64_t h0 = c->toff_h[rh], h1 = c->toff_h[rh + 1], w0 = c->toff_w[rw], w1 = c->toff_w[rw + 1];
        K = (h1 - h0) * (w1 - w0) * d->gic;
        if (!K) continue; /* no taps: the bias alone */
        for (int64_t oc = 0; oc < d->goc; oc++) {
          int8_t *dst = rows + oc * K;
          for (int64_t a = h0; a < h1; a++)
            for (int64_t b = w0; b < w1; b++, dst += d->gic)
              memcpy(dst, src + oc * K_all + (c->taps_h[a] * d->kw + c->taps_w[b]) * d->gic, (size_t)d->gic);
        }
        src = rows;
      }
      px_qweights_desc wd = {.bits = 8,
                             .N = d->goc,
                             .K = K,
                             .data = src,
                             .row_bytes = K,
                             .scales = d->dynamic ? d->wscale + g * d->goc : ones,
                             .bias = d->dynamic && d->fbias ? d->fbias + g * d->goc : NULL};
      c->w[g * c->nph + p] = px_qweights_pack(&wd);
      if (!c->w[g * c->nph + p]) {
        free(ones);
        free(rows);
        return bad(c); /* px_qweights_pack said why */
      }
      c->bytes += px_qweights_bytes(c->w[g * c->nph + p]);
    }
  /* The row form: one group, stride along the width only, a kernel row of
   * kw * gic bytes that is not whole 8-byte units (whole ones per channel
   * take the tap-by-tap form), at most 64 of them. */
  const int64_t krow = d->kw * d->gic;
  if (!d->transposed && !d->dynamic && d->groups == 1 && d->dw == 1 && d->gic % 8 && krow <= 64 &&
      taps > 1) {
    c->rowlen = (krow + 7) / 8 * 8;
    int8_t *wr = calloc((size_t)(d->goc * d->kh * c->rowlen), 1);
    if (wr) {
      for (int64_t oc = 0; oc < d->goc; oc++)
        for (int64_t i = 0; i < d->kh; i++)
          memcpy(wr + (oc * d->kh + i) * c->rowlen, d->weights + (oc * d->kh + i) * krow, (size_t)krow);
      px_qweights_desc wd = {.bits = 8, .N = d->goc, .K = d->kh * c->rowlen, .data = wr, .row_bytes = d->kh * c->rowlen,
                             .scales = ones};
      c->wrow = px_qweights_pack(&wd); /* without it (out of memory) the gathered form runs */
      free(wr);
      if (c->wrow) c->bytes += px_qweights_bytes(c->wrow);
    }
  }
  /* only for the convolutions qc_run takes through qc_run_indirect (the one user) */
  if (!d->transposed && !d->dynamic && taps > 1 && px_qgemm_qs8_indirect_ok(c->w[0], taps) &&
      (c->tapsum = malloc(sizeof(int32_t) * (size_t)(taps * cout)))) {
    for (int64_t t = 0; t < taps; t++)
      for (int64_t n = 0; n < cout; n++) {
        const int8_t *wn = d->weights + (n * taps + t) * d->gic;
        int32_t sum = 0; /* |sum| <= 2^16 * 128 */
        for (int64_t k = 0; k < d->gic; k++) sum += wn[k];
        c->tapsum[t * cout + n] = sum;
      }
    c->bytes += sizeof(int32_t) * (size_t)(taps * cout);
  } /* without it (out of memory) every tap runs */
  free(ones);
  free(rows);
  return c;
}

void px_qconv_out_size(const px_qconv *c, int64_t H, int64_t W, int64_t *oh, int64_t *ow) {
  if (c->transposed) {
    int64_t h = H < 1 ? -1 : c->sh * (H - 1) + c->ah + c->dh * (c->kh - 1) + 1 - c->pt - c->pb;
    int64_t w = W < 1 ? -1 : c->sw * (W - 1) + c->aw + c->dw * (c->kw - 1) + 1 - c->pl - c->pr;
    *oh = h >= 1 ? h : -1;
    *ow = w >= 1 ? w : -1;
    return;
  }
  int64_t spanh = c->dh * (c->kh - 1) + 1, spanw = c->dw * (c->kw - 1) + 1;
  int64_t ph = H + c->pt + c->pb, pw = W + c->pl + c->pr;
  *oh = H >= 0 && ph >= spanh ? (ph - spanh) / c->sh + 1 : -1;
  *ow = W >= 0 && pw >= spanw ? (pw - spanw) / c->sw + 1 : -1;
}

/* ---- the product's rows ------------------------------------------------------ */

/* What one call works on: the output pixels of one phase (all of them for a
 * plain convolution), enumerated n-major then oh then ow; row m is output
 * pixel (n, oh0 + a * step_h, ow0 + b * step_w). */
typedef struct {
  const px_qconv *c;
  const int8_t *x;
  int64_t H, W, OH, OW;
  int64_t oh0, ow0, nh, nw, step_h, step_w; /* this phase's output pixels */
  int64_t h0, h1, w0, w1;                   /* transposed: its taps (taps_h[h0 .. h1)) */
  int64_t K;                                /* bytes per gathered row */
  const int32_t *zp;                        /* dynamic: per batch; else NULL */
  const int8_t *x_end;                      /* one past the input */
} qc_phase;

static inline void qc_pixel(const qc_phase *P, int64_t m, int64_t *n, int64_t *oh, int64_t *ow) {
  int64_t per = P->nh * P->nw;
  *n = m / per;
  int64_t r = m % per;
  *oh = P->oh0 + (r / P->nw) * P->step_h;
  *ow = P->ow0 + (r % P->nw) * P->step_w;
}

/* One tap's C channels into a gathered row: the input pixel's, or the pad
 * value (src NULL). A few channels (a 3-channel stem) are copied in a loop
 * rather than by a call per tap. */
static inline void qc_tap(int8_t *row, const int8_t *src, int64_t C, int pad) {
  if (C > 16) {
    if (src)
      memcpy(row, src, (size_t)C);
    else
      memset(row, pad, (size_t)C);
    return;
  }
  for (int64_t c = 0; c < C; c++) row[c] = src ? src[c] : (int8_t)pad;
}

/* Rows [m0, m0 + rows) of group g's taps into a: rows of lda bytes, the
 * P->K gathered ones then zeros (the product's padded depth). a has
 * QC_SLACK bytes after its last row. */
#define QC_SLACK 16
static inline __attribute__((always_inline)) void qc_gather_body(const qc_phase *P, int64_t g, int64_t m0,
                                                                 int64_t rows, int8_t *a, int64_t lda) {
  const px_qconv *c = P->c;
  const int64_t C = c->gic, H = P->H, W = P->W, run_bytes = c->kw * C;
  /* the rows' pixels in order: (n, oh, ow) stepped, not divided out per row */
  int64_t n, oh, ow;
  qc_pixel(P, m0, &n, &oh, &ow);
  for (int64_t r = 0; r < rows; r++) {
    if (r) {
      ow += P->step_w;
      if (ow >= P->ow0 + P->nw * P->step_w) {
        ow = P->ow0, oh += P->step_h;
        if (oh >= P->oh0 + P->nh * P->step_h) oh = P->oh0, n++;
      }
    }
    const int8_t *img = P->x + n * H * W * c->cin + g * C;
    int pad = (int)(int8_t)(P->zp ? P->zp[n] : c->in_zp);
    int8_t *const row0 = a + r * lda, *row = row0;
    if (!c->transposed) {
      const int64_t iw0 = ow * c->sw - c->pl;
      /* a kernel row of adjacent taps wholly inside the input is one run of
       * kw * C bytes (groups of 1): up to 16 bytes as one 16-byte copy where
       * the input has them (the bytes past the run land where the row's next
       * bytes, its zero padding, the next row or the slack go, all written
       * after it) */
      const bool run = c->dw == 1 && c->groups == 1 && iw0 >= 0 && iw0 + c->kw <= W;
      for (int64_t i = 0; i < c->kh; i++) {
        int64_t ih = oh * c->sh + i * c->dh - c->pt;
        if (run && ih >= 0 && ih < H) {
          const int8_t *src = img + (ih * W + iw0) * c->cin;
          if (run_bytes <= 16 && P->x_end - src >= 16) {
            memcpy(row, src, 16);
          } else if (run_bytes > 16 && run_bytes <= 32) { /* two overlapping 16-byte copies (a 7x7 3-channel stem: 21) */
            memcpy(row, src, 16);
            memcpy(row + run_bytes - 16, src + run_bytes - 16, 16);
          } else if (run_bytes > 32 && run_bytes <= 64) {
            memcpy(row, src, 32);
            memcpy(row + run_bytes - 32, src + run_bytes - 32, 32);
          } else if (run_bytes > 64 && run_bytes <= 128) { /* 3 taps of 32 channels: 96 */
            memcpy(row, src, 64);
            memcpy(row + run_bytes - 64, src + run_bytes - 64, 64);
          } else {
            memcpy(row, src, (size_t)run_bytes);
          }
          row += run_bytes;
          continue;
        }
        for (int64_t j = 0; j < c->kw; j++, row += C) {
          int64_t iw = ow * c->sw + j * c->dw - c->pl;
          qc_tap(row, ih < 0 || ih >= H || iw < 0 || iw >= W ? NULL : img + (ih * W + iw) * c->cin, C, pad);
        }
      }
    } else {
      for (int64_t ia = P->h0; ia < P->h1; ia++) {
        int64_t t = oh + c->pt - c->taps_h[ia] * c->dh; /* a multiple of sh: this phase's taps */
        int64_t ih = t >= 0 ? t / c->sh : -1;
        for (int64_t ib = P->w0; ib < P->w1; ib++, row += C) {
          int64_t u = ow + c->pl - c->taps_w[ib] * c->dw;
          int64_t iw = u >= 0 ? u / c->sw : -1;
          qc_tap(row, ih < 0 || ih >= H || iw < 0 || iw >= W ? NULL : img + (ih * W + iw) * c->cin, C, pad);
        }
      }
    }
    if (lda > P->K) memset(row0 + P->K, 0, (size_t)(lda - P->K)); /* after the runs' spills */
  }
}

/* The gather compiled twice: the fixed-size copies of a row's runs are
 * 16-byte moves in the baseline build and 32-byte ones with AVX2 (a 3x3
 * convolution over 32 channels: a fifth of its time went to gathering). */
static void qc_gather_generic(const qc_phase *P, int64_t g, int64_t m0, int64_t rows, int8_t *a, int64_t lda) {
  qc_gather_body(P, g, m0, rows, a, lda);
}
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2"))) static void qc_gather_avx2(const qc_phase *P, int64_t g, int64_t m0, int64_t rows,
                                                           int8_t *a, int64_t lda) {
  qc_gather_body(P, g, m0, rows, a, lda);
}
#endif
static void qc_gather(const qc_phase *P, int64_t g, int64_t m0, int64_t rows, int8_t *a, int64_t lda) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (px_cpu()->avx2) {
    qc_gather_avx2(P, g, m0, rows, a, lda);
    return;
  }
#endif
  qc_gather_generic(P, g, m0, rows, a, lda);
}

/* The scratch position, to hand back what each tile's product took. */
typedef struct {
  struct px_scratch_block *cur;
  size_t used;
} qc_mark;
static qc_mark qc_scratch_mark(const px_ctx *ctx) { return (qc_mark){ctx->scratch_cur, ctx->scratch_used}; }
static void qc_scratch_back(px_ctx *ctx, qc_mark m) {
  ctx->scratch_cur = m.cur;
  ctx->scratch_used = m.used;
}

/* The tile: about 256 KiB of gathered rows, at least 16 rows. */
static int64_t qc_tile(int64_t K, int64_t M) {
  int64_t t = ((int64_t)1 << 18) / (K ? K : 1);
  if (t < 16) t = 16;
  return t > M ? M : t;
}

/* Rows of one phase and group written to their output pixels: int8 (static)
 * or float, from a [rows][goc] tile. */
static void qc_scatter(const qc_phase *P, int64_t g, int64_t m0, int64_t rows, const void *tile, void *y) {
  const px_qconv *c = P->c;
  size_t es = c->dynamic ? sizeof(float) : 1;
  for (int64_t r = 0; r < rows; r++) {
    int64_t n, oh, ow;
    qc_pixel(P, m0 + r, &n, &oh, &ow);
    char *dst = (char *)y + (((n * P->OH + oh) * P->OW + ow) * c->cout + g * c->goc) * (int64_t)es;
    memcpy(dst, (const char *)tile + r * c->goc * (int64_t)es, (size_t)c->goc * es);
  }
}

/* A phase without taps: every output is the bias alone, through the same
 * epilogue as a product's (a zero sum). */
static void qc_bias_only(const qc_phase *P, int64_t g, int64_t rows, void *tile) {
  const px_qconv *c = P->c;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < c->goc; j++) {
      int64_t ch = g * c->goc + j;
      if (c->dynamic) {
        float v = 0.0f + c->fbias[ch];
        if (v < c->lo) v = c->lo;
        if (v > c->hi) v = c->hi;
        ((float *)tile)[r * c->goc + j] = v;
      } else {
        float v = (float)c->bias[ch] * c->requant[ch];
        float lo = (float)(c->qmin - c->out_zp), hi = (float)(c->qmax - c->out_zp);
        v = v < lo ? lo : v; /* as px_qgemm_qs8: max, then min */
        v = hi < v ? hi : v;
        ((int8_t *)tile)[r * c->goc + j] = (int8_t)(lrintf(v) + c->out_zp);
      }
    }
}

/* The kernel rows [*lo, *hi) that output row oh reads inside the input (a
 * range, since a window's rows go down the input in order). */
static void qc_rows_in(const px_qconv *c, int64_t H, int64_t oh, int64_t *lo, int64_t *hi) {
  const int64_t ih0 = oh * c->sh - c->pt;
  int64_t a = ih0 >= 0 ? 0 : (-ih0 + c->dh - 1) / c->dh, b = ih0 <= H - 1 ? (H - 1 - ih0) / c->dh + 1 : 0;
  if (b > c->kh) b = c->kh;
  if (a > b) a = b;
  *lo = a, *hi = b;
}

/* Whether kernel column j reads inside the input for any output column:
 * the first output column whose tap is right of the input's left edge is
 * the only one that can, if any does. */
static bool qc_col_in(const px_qconv *c, int64_t W, int64_t OW, int64_t j) {
  const int64_t off = j * c->dw - c->pl; /* iw = ow * sw + off */
  const int64_t ow = off >= 0 ? 0 : (-off + c->sw - 1) / c->sw;
  return ow < OW && ow * c->sw + off < W;
}

/* The sum of each pixel's C channels (stride cin bytes apart), pixels split
 * over the pool: run before every product, on one thread it held the
 * others idle for 2-3% of a 64-channel 3 x 3 convolution's time. */
typedef struct {
  const int8_t *x;
  int64_t C, cin;
  int32_t *out;
} qc_sums_job;
static void qc_sums_chunk(void *arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const qc_sums_job *J = arg;
  px_qgemm_sums_s8(J->x + p0 * J->cin, p1 - p0, J->C, J->cin, J->out + p0);
}

/* n output pixels side by side along a row, stride 1, every tap of each
 * inside the input: pixel r's taps' pointers (rp + r * step + poff[t]) at
 * pr[r * taps + t] and the sum of their pixel sums (sp[r + toff[t]]) at
 * sums[r]; eight pointers and sixteen sums a store (AVX-512F: the indirect
 * product runs only where the CPU has AVX-512 VNNI). Per pixel this was
 * taps scalar loads, adds and stores: 6% of a 64-channel 3 x 3
 * convolution's time. */
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f"))) static void qc_inside_run_avx512(const int8_t **pr, int32_t *sums, int64_t n,
                                                                    const int8_t *rp, int64_t step,
                                                                    const int32_t *sp, const int64_t *poff,
                                                                    const int64_t *toff, int64_t taps) {
  const __mmask8 last = (__mmask8)(0xFFu >> ((8 - taps % 8) % 8));
  for (int64_t r = 0; r < n; r++) {
    const __m512i base = _mm512_set1_epi64((long long)(intptr_t)(rp + r * step));
    int64_t t = 0;
    for (; t + 8 <= taps; t += 8)
      _mm512_storeu_si512((void *)(pr + r * taps + t),
                          _mm512_add_epi64(base, _mm512_loadu_si512((const void *)(poff + t))));
    if (t < taps)
      _mm512_mask_storeu_epi64((void *)(pr + r * taps + t), last,
                               _mm512_add_epi64(base, _mm512_maskz_loadu_epi64(last, poff + t)));
  }
  for (int64_t r = 0; r < n; r += 16) {
    const __mmask16 m = n - r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - r)) - 1);
    __m512i acc = _mm512_setzero_si512();
    for (int64_t t = 0; t < taps; t++) acc = _mm512_add_epi32(acc, _mm512_maskz_loadu_epi32(m, sp + r + toff[t]));
    _mm512_mask_storeu_epi32(sums + r, m, acc);
  }
}
#endif

/* A static plain convolution without a gather (px_qgemm_qs8_indirect): each
 * output pixel's row is its kh * kw taps, each a pointer to the input
 * pixel's gic channels (or to a run of the input zero point for a tap
 * outside the input), and its sum is the sum of its taps' pixel sums
 * (taken once per input pixel) and of the zero point's. Rows go in chunks,
 * so that the pointers take bounded scratch.
 *
 * A tap that no pixel of a band of output rows reads inside the input (a
 * dilated convolution whose dilation reaches past a small input, as
 * DeepLab's atrous pyramid: at rate 36 on 28 x 28, 8 of 9 taps) adds
 * (in_zp - in_zp) * w = 0 to every pixel: such taps are left out of the
 * product, the bias taking in_zp * the tap's weight sums back for the
 * weight-sum term the product subtracts, so that the int32 sums are the
 * same. Bands are runs of output rows whose kernel rows inside the input
 * are the same; a kernel column counts as read when any output column
 * reads it. */
static int qc_run_indirect(px_ctx *ctx, const px_qconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x,
                           int64_t OH, int64_t OW, int8_t *y) {
  const int64_t taps = c->kh * c->kw, C = c->gic, G = c->groups, M = N * OH * OW;
  const int64_t chunk = M < 2048 ? M : 2048;
  int32_t *pixsum = px_scratch(ctx, sizeof(int32_t) * (size_t)(N * H * W * G)); /* [group][pixel] */
  int8_t *zrun = px_scratch(ctx, (size_t)C + 16);
  const int8_t **ind = px_scratch(ctx, sizeof(*ind) * (size_t)(chunk * taps));
  int32_t *sums = px_scratch(ctx, sizeof(int32_t) * (size_t)chunk);
  int64_t *toff = px_scratch(ctx, sizeof(int64_t) * (size_t)taps); /* a tap's pixel offset from the window's corner */
  int64_t *poff = px_scratch(ctx, sizeof(int64_t) * (size_t)taps); /* and its byte offset */
  int32_t *list = px_scratch(ctx, sizeof(int32_t) * (size_t)taps);  /* a band's taps */
  int32_t *badj = px_scratch(ctx, sizeof(int32_t) * (size_t)c->goc); /* its bias */
  bool *col_in = px_scratch(ctx, sizeof(bool) * (size_t)c->kw);
  if (!pixsum || !zrun || !ind || !sums || !toff || !poff || !list || !badj || !col_in) return PYEXEC_ERR_EXECUTION;
  for (int64_t i = 0; i < c->kh; i++)
    for (int64_t j = 0; j < c->kw; j++) toff[i * c->kw + j] = i * c->dh * W + j * c->dw;
  for (int64_t t = 0; t < taps; t++) poff[t] = toff[t] * c->cin;
  for (int64_t j = 0; j < c->kw; j++) col_in[j] = qc_col_in(c, W, OW, j);
  const int64_t span_h = (c->kh - 1) * c->dh + 1, span_w = (c->kw - 1) * c->dw + 1;
  memset(zrun, (int)(int8_t)c->in_zp, (size_t)C + 16);
  for (int64_t g = 0; g < G; g++) {
    qc_sums_job sj = {.x = x + g * C, .C = C, .cin = c->cin, .out = pixsum + g * N * H * W};
    px_parallel_for(N * H * W, 64, N * H * W * C, qc_sums_chunk, &sj);
  }
  const int32_t zsum = (int32_t)(c->in_zp * C);
#if defined(__GNUC__) && defined(__x86_64__)
  const bool vec_run = c->sw == 1 && px_cpu()->avx512f;
#endif
  for (int64_t g = 0; g < G; g++) {
    const int32_t *gsum = pixsum + g * N * H * W;
    for (int64_t m0 = 0, rows; m0 < M; m0 += rows) {
      /* the band of output rows from m0's on, within its image */
      int64_t n = m0 / (OH * OW), oh = m0 / OW % OH, ow = m0 % OW, ilo, ihi;
      qc_rows_in(c, H, oh, &ilo, &ihi);
      int64_t oe = oh + 1;
      for (int64_t a, b; oe < OH; oe++) {
        qc_rows_in(c, H, oe, &a, &b);
        if (a != ilo || b != ihi) break;
      }
      rows = (oe - oh) * OW - ow;
      if (rows > chunk) rows = chunk;
      /* its taps, and the bias for those left out */
      int64_t nl = 0;
      for (int64_t t = 0; t < taps; t++)
        if (t / c->kw >= ilo && t / c->kw < ihi && col_in[t % c->kw]) list[nl++] = (int32_t)t;
      const bool some = c->tapsum && nl > 0 && nl < taps;
      const int32_t *bias = c->bias + g * c->goc;
      if (some) {
        for (int64_t k = 0; k < c->goc; k++) badj[k] = bias[k];
        for (int64_t t = 0, l = 0; t < taps; t++) {
          if (l < nl && list[l] == t) {
            l++;
            continue;
          }
          const int32_t *ts = c->tapsum + t * c->cout + g * c->goc;
          for (int64_t k = 0; k < c->goc; k++)
            badj[k] = (int32_t)((uint32_t)badj[k] + (uint32_t)c->in_zp * (uint32_t)ts[k]);
        }
        bias = badj;
      }
      const int64_t nt = some ? nl : taps;
      /* the rows' pixels stepped in order, not divided out per row */
      for (int64_t r = 0; r < rows; r++) {
        const int8_t **pr = ind + r * nt;
        const int8_t *img = x + n * H * W * c->cin + g * C;
        const int32_t *isum = gsum + n * H * W;
        int32_t sum = 0;
        const int64_t ih0 = oh * c->sh - c->pt, iw0 = ow * c->sw - c->pl;
        if (!some && ih0 >= 0 && ih0 + span_h <= H && iw0 >= 0 && iw0 + span_w <= W) { /* every tap inside */
          const int64_t base = ih0 * W + iw0;
#if defined(__GNUC__) && defined(__x86_64__)
          if (vec_run) { /* this pixel and the next ones of its row whose taps are all inside */
            int64_t last = W - span_w + c->pl < OW - 1 ? W - span_w + c->pl : OW - 1, k = last - ow + 1;
            if (k > rows - r) k = rows - r;
            qc_inside_run_avx512(pr, sums + r, k, img + base * c->cin, c->cin, isum + base, poff, toff, taps);
            r += k - 1, ow += k - 1;
            goto next;
          }
#endif
          for (int64_t t = 0; t < taps; t++) {
            pr[t] = img + base * c->cin + poff[t];
            sum += isum[base + toff[t]];
          }
        } else {
          for (int64_t l = 0; l < nt; l++) {
            const int64_t t = some ? list[l] : l, ih = ih0 + t / c->kw * c->dh, iw = iw0 + t % c->kw * c->dw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
              *pr++ = img + (ih * W + iw) * c->cin;
              sum += isum[ih * W + iw];
            } else {
              *pr++ = zrun;
              sum += zsum;
            }
          }
        }
        sums[r] = sum;
#if defined(__GNUC__) && defined(__x86_64__)
      next:
#endif
        if (++ow == OW) {
          ow = 0;
          if (++oh == OH) oh = 0, n++;
        }
      }
      qc_mark mk = qc_scratch_mark(ctx);
      int rc = px_qgemm_qs8_indirect(ctx, c->w[g], rows, ind, taps, nt, some ? list : NULL, sums, c->in_zp, bias,
                                     c->requant + g * c->goc, c->out_zp, c->qmin, c->qmax,
                                     y + m0 * c->cout + g * c->goc, c->cout);
      qc_scratch_back(ctx, mk);
      if (rc) return rc;
    }
  }
  return 0;
}

/* The row form of a few-channel convolution (a 3-channel stem): each
 * output pixel's row is its kh kernel rows, each a pointer to rowlen input
 * bytes from the window's first pixel of that input row, the kw * gic the
 * kernel reads followed by bytes of the next pixels, which meet zero
 * weights. A kernel row that leaves the input (or whose bytes would run
 * past its end) is built in scratch instead: its pixels' channels or the
 * zero point, then zeros. A row's sum (for the product's offset correction)
 * counts every byte the product reads. */
/* A kernel row's run of L bytes (a multiple of 8, at most 64) summed into
 * a row's running sum: on x86-64, 16 or 8 bytes a step by PSADBW (SSE2) on
 * the bytes flipped to unsigned, into a vector the row reduces once (its
 * 128s taken back then); elsewhere a plain loop. */
#if defined(__x86_64__)
typedef __m128i qc_rowsum;
static inline qc_rowsum qc_rowsum_zero(void) { return _mm_setzero_si128(); }
static inline qc_rowsum qc_rowsum_add(qc_rowsum acc, const int8_t *p, int64_t L) {
  const __m128i flip = _mm_set1_epi8((char)0x80), zero = _mm_setzero_si128();
  int64_t k = 0;
  for (; k + 16 <= L; k += 16)
    acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + k)), flip), zero));
  if (k < L) /* 8 left */
    acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_xor_si128(_mm_loadl_epi64((const __m128i *)(p + k)),
                                                        _mm_set_epi64x(0, (long long)0x8080808080808080ull)),
                                          zero));
  return acc;
}
static inline int32_t qc_rowsum_total(qc_rowsum acc, int64_t bytes) {
  return (int32_t)(_mm_cvtsi128_si64(acc) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)) - 128 * bytes);
}
#else
typedef int32_t qc_rowsum;
static inline qc_rowsum qc_rowsum_zero(void) { return 0; }
static inline qc_rowsum qc_rowsum_add(qc_rowsum acc, const int8_t *p, int64_t L) {
  for (int64_t k = 0; k < L; k++) acc += p[k];
  return acc;
}
static inline int32_t qc_rowsum_total(qc_rowsum acc, int64_t bytes) {
  (void)bytes;
  return acc;
}
#endif

/* The largest padded input (bytes) qc_run_rows copies, padding filled with
 * the zero point, so that every kernel row lies inside: a 32 x 32 RGB stem
 * built half its rows in scratch, tap by tap. */
#define QC_PAD_COPY_MAX 65536

static __attribute__((noinline)) int qc_run_rows(px_ctx *ctx, const px_qconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x, int64_t OH,
                       int64_t OW, int8_t *y) {
  const int64_t C = c->gic, L = c->rowlen, KH = c->kh, M = N * OH * OW;
  int64_t pt = c->pt, pl = c->pl;
  const int64_t Hp = H + c->pt + c->pb, Wp = W + c->pl + c->pr;
  bool padded = false;
  if ((pt | pl | c->pb | c->pr) && N * Hp * Wp * C + L <= QC_PAD_COPY_MAX) {
    /* the padded copy, and L bytes after it for the last rows' runs (read
     * with zero weights, and counted in the row sums as any byte read) */
    int8_t *xp = px_scratch(ctx, (size_t)(N * Hp * Wp * C + L));
    if (!xp) return PYEXEC_ERR_EXECUTION;
    px_pad_nhwc(xp, x, N, H, W, (size_t)C, c->pt, c->pl, c->pb, c->pr, (int)(int8_t)c->in_zp);
    memset(xp + N * Hp * Wp * C, (int)(int8_t)c->in_zp, (size_t)L);
    x = xp, H = Hp, W = Wp, pt = 0, pl = 0, padded = true;
  }
  const int64_t total = N * H * W * C + (padded ? L : 0); /* bytes a run may read */
  const int64_t chunk = M < 2048 ? M : 2048;
  const int8_t **ind = px_scratch(ctx, sizeof(*ind) * (size_t)(chunk * KH));
  int32_t *sums = px_scratch(ctx, sizeof(int32_t) * (size_t)chunk);
  int8_t *built = px_scratch(ctx, (size_t)(chunk * KH * L));
  if (!ind || !sums || !built) return PYEXEC_ERR_EXECUTION;
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    const int64_t rows = M - m0 < chunk ? M - m0 : chunk;
    int64_t n = m0 / (OH * OW), oh = m0 / OW % OH, ow = m0 % OW, nb = 0;
    for (int64_t r = 0; r < rows; r++) {
      const int64_t iw0 = ow * c->sw - pl, img = n * H * W;
      const bool cols_in = iw0 >= 0 && iw0 + c->kw <= W;
      int32_t sum = 0;
      qc_rowsum vsum = qc_rowsum_zero();
      int64_t vbytes = 0;
      for (int64_t i = 0; i < KH; i++) {
        const int64_t ih = oh * c->sh + i * c->dh - pt;
        const int64_t off = ((img + ih * W) + iw0) * C; /* meaningful when the row lies inside */
        if (cols_in && ih >= 0 && ih < H && off + L <= total) {
          ind[r * KH + i] = x + off;
          vsum = qc_rowsum_add(vsum, x + off, L);
          vbytes += L;
          continue;
        }
        int8_t *b = built + nb++ * L;
        for (int64_t j = 0; j < c->kw; j++) {
          const int64_t iw = iw0 + j;
          if (ih >= 0 && ih < H && iw >= 0 && iw < W)
            memcpy(b + j * C, x + (img + ih * W + iw) * C, (size_t)C);
          else
            memset(b + j * C, (int)(int8_t)c->in_zp, (size_t)C);
        }
        memset(b + c->kw * C, 0, (size_t)(L - c->kw * C));
        for (int64_t k = 0; k < c->kw * C; k++) sum += b[k];
        ind[r * KH + i] = b;
      }
      sum += qc_rowsum_total(vsum, vbytes);
      sums[r] = sum;
      if (++ow == OW) {
        ow = 0;
        if (++oh == OH) oh = 0, n++;
      }
    }
    qc_mark mk = qc_scratch_mark(ctx);
    int rc = px_qgemm_qs8_indirect(ctx, c->wrow, rows, ind, KH, KH, NULL, sums, c->in_zp, c->bias, c->requant, c->out_zp,
                                   c->qmin, c->qmax, y + m0 * c->cout, c->cout);
    qc_scratch_back(ctx, mk);
    if (rc) return rc;
  }
  return 0;
}

static int qc_run(px_ctx *ctx, const px_qconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x, const int32_t *zp,
                  const float *scale, int per_pixel, int64_t OH, int64_t OW, void *y) {
  int64_t oh, ow;
  px_qconv_out_size(c, H, W, &oh, &ow);
  if (oh < 0 || ow < 0 || oh != OH || ow != OW)
    return px_fail(ctx, "a %lldx%lld input gives a %lldx%lld output, not %lldx%lld", (long long)H, (long long)W,
                   (long long)oh, (long long)ow, (long long)OH, (long long)OW);
  if (N <= 0 || OH * OW == 0) return 0;
  if (!c->transposed && !c->dynamic && !(c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && !c->pt && !c->pl &&
                                         !c->pb && !c->pr) &&
      px_qgemm_qs8_indirect_ok(c->w[0], c->kh * c->kw))
    return qc_run_indirect(ctx, c, N, H, W, x, OH, OW, y);
  if (c->wrow && px_qgemm_qs8_indirect_ok(c->wrow, c->kh)) return qc_run_rows(ctx, c, N, H, W, x, OH, OW, y);
  size_t es = c->dynamic ? sizeof(float) : 1;
  for (int64_t p = 0; p < c->nph; p++) {
    qc_phase P = {.c = c, .x = x, .H = H, .W = W, .OH = OH, .OW = OW, .zp = zp, .x_end = x + N * H * W * c->cin};
    if (c->transposed) {
      int64_t rh = p / c->sw, rw = p % c->sw;
      P.oh0 = ((rh - c->pt) % c->sh + c->sh) % c->sh; /* the first output row with (oh + pt) mod sh = rh */
      P.ow0 = ((rw - c->pl) % c->sw + c->sw) % c->sw;
      P.nh = P.oh0 < OH ? (OH - P.oh0 + c->sh - 1) / c->sh : 0;
      P.nw = P.ow0 < OW ? (OW - P.ow0 + c->sw - 1) / c->sw : 0;
      P.step_h = c->sh, P.step_w = c->sw;
      P.h0 = c->toff_h[rh], P.h1 = c->toff_h[rh + 1], P.w0 = c->toff_w[rw], P.w1 = c->toff_w[rw + 1];
      P.K = (P.h1 - P.h0) * (P.w1 - P.w0) * c->gic;
    } else {
      P.nh = OH, P.nw = OW, P.step_h = 1, P.step_w = 1;
      P.K = c->kh * c->kw * c->gic;
    }
    int64_t M = N * P.nh * P.nw;
    if (!M) continue;
    /* A plain 1x1 convolution of stride 1 without padding reads its rows in place. */
    bool direct = !c->transposed && c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && !c->pt && !c->pl &&
                  !c->pb && !c->pr;
    if (per_pixel && !direct)
      return px_fail(ctx, "per-pixel quantization parameters for a convolution that reads other pixels");
    /* gathered rows are padded to the product's depth (the same for every group of a phase) */
    const px_qweights *w0 = c->w[p];
    int64_t lda_g = w0 ? px_qgemm_padded_depth(w0) : P.K;
    if (lda_g < P.K) lda_g = P.K;
    int64_t tile = qc_tile(lda_g, M);
    int8_t *a = direct || !P.K ? NULL : px_scratch(ctx, (size_t)(tile * lda_g) + QC_SLACK);
    void *out = c->transposed ? px_scratch(ctx, (size_t)(tile * c->goc) * es) : NULL;
    int32_t *rzp = c->dynamic ? px_scratch(ctx, sizeof(int32_t) * (size_t)tile) : NULL;
    float *rsc = c->dynamic ? px_scratch(ctx, sizeof(float) * (size_t)tile) : NULL;
    if ((!direct && P.K && !a) || (c->transposed && !out) || (c->dynamic && (!rzp || !rsc)))
      return PYEXEC_ERR_EXECUTION;
    for (int64_t m0 = 0; m0 < M; m0 += tile) {
      int64_t rows = M - m0 < tile ? M - m0 : tile;
      if (c->dynamic)
        for (int64_t r = 0; r < rows; r++) {
          int64_t q = per_pixel ? m0 + r : (m0 + r) / (P.nh * P.nw); /* direct: output pixel = input pixel */
          rzp[r] = zp[q];
          rsc[r] = scale[q];
        }
      for (int64_t g = 0; g < c->groups; g++) {
        const px_qweights *w = c->w[g * c->nph + p];
        if (!w) { /* a phase without taps */
          qc_bias_only(&P, g, rows, out);
          qc_scatter(&P, g, m0, rows, out, y);
          continue;
        }
        const int8_t *rowsp;
        int64_t lda;
        if (direct) {
          rowsp = x + m0 * c->cin + g * c->gic;
          lda = c->cin;
        } else {
          qc_gather(&P, g, m0, rows, a, lda_g);
          rowsp = a;
          lda = lda_g;
        }
        /* static / dynamic output, straight into y (plain) or into the tile (transposed) */
        void *dst = c->transposed ? out : (char *)y + (m0 * c->cout + g * c->goc) * (int64_t)es;
        int64_t ldc = c->transposed ? c->goc : c->cout;
        qc_mark mk = qc_scratch_mark(ctx);
        int rc;
        if (c->dynamic)
          rc = (direct ? px_qgemm_qd8_f32 : px_qgemm_qd8_f32_padded)(ctx, w, rows, rowsp, lda, rzp, rsc, dst, ldc,
                                                                     c->lo, c->hi);
        else
          rc = (direct ? px_qgemm_qs8 : px_qgemm_qs8_padded)(ctx, w, rows, rowsp, lda, c->in_zp,
                                                             c->bias + g * c->goc, c->requant + g * c->goc,
                                                             c->out_zp, c->qmin, c->qmax, dst, ldc);
        qc_scratch_back(ctx, mk);
        if (rc) return rc;
        if (c->transposed) qc_scatter(&P, g, m0, rows, out, y);
      }
    }
  }
  return 0;
}

int px_qconv_qs8(px_ctx *ctx, const px_qconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x, int64_t OH,
                 int64_t OW, int8_t *y) {
  if (c->dynamic) return px_fail(ctx, "a dynamically quantized convolution run as a static one");
  return qc_run(ctx, c, N, H, W, x, NULL, NULL, 0, OH, OW, y);
}

int px_qconv_qd8_f32(px_ctx *ctx, const px_qconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x,
                     const int32_t *zp, const float *scale, int per_pixel, int64_t OH, int64_t OW, float *y) {
  if (!c->dynamic) return px_fail(ctx, "a static quantized convolution run as a dynamic one");
  return qc_run(ctx, c, N, H, W, x, zp, scale, per_pixel, OH, OW, y);
}
