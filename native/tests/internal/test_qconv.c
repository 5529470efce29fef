/*
 * test_qconv.c - the quantized convolution and transposed convolution
 * (kernels/gemm/qconv.h) against a naive reference written here: int64 sums
 * of (x - x_zp) * w over every tap, the transposed form written the other
 * way round (each input pixel scattered to the outputs its taps reach), then
 * the float steps of the reference's A10 in the documented order, so the
 * results must match bit for bit. Static (int8 out) and dynamic (qd8 in,
 * float out, a zero point and scale per image, or per pixel for 1x1); one
 * and several groups; strides, dilations, paddings and adjustments,
 * kernels smaller than the stride (transposed phases with no taps: the
 * bias alone), values and zero points at the int8 extremes, clamps. Every
 * micro-kernel path this build and CPU have, and 1, 2 and 3 threads. Also
 * the description errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/conv/qconv.h"
#include "kernels/gemm/qgemm.h"
#include "kernels/kernel.h"
#include "check.h"

static char msg[1024];
static px_ctx ctx = {.op = "test", .msg = msg, .msg_cap = sizeof msg};

typedef struct {
  int transposed, dynamic, per_pixel, bias, clamp;
  int64_t N, H, W, groups, gic, goc, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, ah, aw;
} ccase;

static int64_t out_dim(const ccase *c, int64_t in, int64_t k, int64_t s, int64_t d, int64_t pa, int64_t pb,
                       int64_t adj) {
  if (c->transposed) return s * (in - 1) + adj + d * (k - 1) + 1 - pa - pb;
  int64_t span = d * (k - 1) + 1;
  return in + pa + pb < span ? -1 : (in + pa + pb - span) / s + 1;
}

static void run_case(const ccase *c) {
  const int64_t cin = c->groups * c->gic, cout = c->groups * c->goc, K = c->kh * c->kw * c->gic;
  const int64_t OH = out_dim(c, c->H, c->kh, c->sh, c->dh, c->pt, c->pb, c->ah);
  const int64_t OW = out_dim(c, c->W, c->kw, c->sw, c->dw, c->pl, c->pr, c->aw);
  if (OH < 1 || OW < 1) return;
  const int64_t nx = c->N * c->H * c->W * cin, ny = c->N * OH * OW * cout;
  int8_t *x = malloc((size_t)nx + 1), *w = malloc((size_t)(cout * K) + 1), *y8 = malloc((size_t)ny + 1);
  float *yf = malloc(sizeof(float) * (size_t)ny + 4), *rq = malloc(sizeof(float) * (size_t)cout);
  float *ws = malloc(sizeof(float) * (size_t)cout), *fb = malloc(sizeof(float) * (size_t)cout);
  int32_t *ib = malloc(sizeof(int32_t) * (size_t)cout);
  int64_t *acc = calloc((size_t)ny + 1, sizeof(int64_t));
  int64_t nq = c->per_pixel ? c->N * c->H * c->W : c->N;
  int32_t *zp = malloc(sizeof(int32_t) * (size_t)nq);
  float *sc = malloc(sizeof(float) * (size_t)nq);
  int32_t in_zp = rnd_int(-128, 127), out_zp = rnd_int(-128, 127);
  for (int64_t i = 0; i < nx; i++) x[i] = (int8_t)rnd_int(-128, 127);
  for (int64_t i = 0; i < cout * K; i++) w[i] = (int8_t)rnd_int(-127, 127);
  for (int64_t i = 0; i < cout; i++) {
    rq[i] = rnd_float(1e-5f, 4e-3f);
    ws[i] = rnd_float(0.001f, 0.05f);
    fb[i] = rnd_float(-3.0f, 3.0f);
    ib[i] = rnd_int(-20000, 20000);
  }
  for (int64_t i = 0; i < nq; i++) zp[i] = rnd_int(-128, 127), sc[i] = rnd_float(0.005f, 0.1f);
  /* the row's zero point: the image's, or (per pixel) the input pixel's */
#define XZP(n, h, wd) (c->dynamic ? zp[c->per_pixel ? ((n) * c->H + (h)) * c->W + (wd) : (n)] : in_zp)
  /* reference sums */
  if (!c->transposed) {
    for (int64_t n = 0; n < c->N; n++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++)
          for (int64_t co = 0; co < cout; co++) {
            int64_t g = co / c->goc, s = 0;
            for (int64_t i = 0; i < c->kh; i++)
              for (int64_t j = 0; j < c->kw; j++) {
                int64_t ih = oh * c->sh + i * c->dh - c->pt, iw = ow * c->sw + j * c->dw - c->pl;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                for (int64_t ic = 0; ic < c->gic; ic++)
                  s += ((int64_t)x[((n * c->H + ih) * c->W + iw) * cin + g * c->gic + ic] - XZP(n, ih, iw)) *
                       w[((co * c->kh + i) * c->kw + j) * c->gic + ic];
              }
            acc[((n * OH + oh) * OW + ow) * cout + co] = s;
          }
  } else {
    for (int64_t n = 0; n < c->N; n++)
      for (int64_t ih = 0; ih < c->H; ih++)
        for (int64_t iw = 0; iw < c->W; iw++)
          for (int64_t i = 0; i < c->kh; i++)
            for (int64_t j = 0; j < c->kw; j++) {
              int64_t oh = ih * c->sh + i * c->dh - c->pt, ow = iw * c->sw + j * c->dw - c->pl;
              if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
              for (int64_t co = 0; co < cout; co++) {
                int64_t g = co / c->goc, s = 0;
                for (int64_t ic = 0; ic < c->gic; ic++)
                  s += ((int64_t)x[((n * c->H + ih) * c->W + iw) * cin + g * c->gic + ic] - XZP(n, ih, iw)) *
                       w[((co * c->kh + i) * c->kw + j) * c->gic + ic];
                acc[((n * OH + oh) * OW + ow) * cout + co] += s;
              }
            }
  }
  float lo = c->clamp ? rnd_float(-4.0f, -0.5f) : -INFINITY, hi = c->clamp ? rnd_float(0.5f, 4.0f) : INFINITY;
  int32_t qmin = c->clamp ? rnd_int(-128, -20) : -128, qmax = c->clamp ? rnd_int(20, 127) : 127;
  px_qconv_desc d = {.transposed = c->transposed, .dynamic = c->dynamic, .groups = c->groups, .gic = c->gic,
                     .goc = c->goc, .kh = c->kh, .kw = c->kw, .sh = c->sh, .sw = c->sw, .dh = c->dh, .dw = c->dw,
                     .pt = c->pt, .pl = c->pl, .pb = c->pb, .pr = c->pr, .ah = c->ah, .aw = c->aw, .weights = w,
                     .bias = c->bias ? ib : NULL, .requant = rq, .in_zp = in_zp, .out_zp = out_zp, .qmin = qmin,
                     .qmax = qmax, .wscale = ws, .fbias = c->bias ? fb : NULL, .lo = lo, .hi = hi};
  px_qconv *q = px_qconv_pack(&d);
  CHECK(q != NULL);
  if (!q) {
    fprintf(stderr, "pack: %s\n", px_last_error());
    goto done;
  }
  int64_t oh, ow;
  px_qconv_out_size(q, c->H, c->W, &oh, &ow);
  CHECK(oh == OH && ow == OW);
  ctx.scratch_cur = ctx.scratch;
  ctx.scratch_used = 0;
  int rc = c->dynamic ? px_qconv_qd8_f32(&ctx, q, c->N, c->H, c->W, x, zp, sc, c->per_pixel, OH, OW, yf)
                      : px_qconv_qs8(&ctx, q, c->N, c->H, c->W, x, OH, OW, y8);
  CHECK(rc == 0);
  if (rc) fprintf(stderr, "run: %s\n", msg);
  int bad = 0;
  for (int64_t e = 0; e < ny && !rc; e++) {
    int64_t co = e % cout, pix = e / cout, n = pix / (OH * OW);
    int32_t a32 = (int32_t)acc[e];
    if (c->dynamic) {
      float s = c->per_pixel ? sc[pix] : sc[n]; /* per pixel: 1x1, stride 1: output pixel = input pixel */
      float v = ((float)a32 * s) * ws[co];
      if (c->bias) v = v + fb[co];
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      if (memcmp(&v, &yf[e], 4) != 0 && bad++ < 3)
        fprintf(stderr, "  element %lld: %.9g, expected %.9g\n", (long long)e, (double)yf[e], (double)v);
    } else {
      int32_t t = a32 + (c->bias ? ib[co] : 0);
      float v = (float)t * rq[co];
      float flo = (float)(qmin - out_zp), fhi = (float)(qmax - out_zp);
      v = v < flo ? flo : v;
      v = v > fhi ? fhi : v;
      int8_t want = (int8_t)(lrintf(v) + out_zp);
      if (want != y8[e] && bad++ < 3)
        fprintf(stderr, "  element %lld: %d, expected %d\n", (long long)e, y8[e], want);
    }
  }
  CHECK(bad == 0);
  if (bad)
    fprintf(stderr, "  case: %s %s N%lld %lldx%lld g%lld %lld->%lld k%lldx%lld s%lldx%lld d%lldx%lld p%lld/%lld/%lld/%lld "
                    "a%lldx%lld\n",
            c->transposed ? "transposed" : "conv", c->dynamic ? (c->per_pixel ? "qd8/pixel" : "qd8") : "qs8",
            (long long)c->N, (long long)c->H, (long long)c->W, (long long)c->groups, (long long)c->gic,
            (long long)c->goc, (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw,
            (long long)c->dh, (long long)c->dw, (long long)c->pt, (long long)c->pl, (long long)c->pb,
            (long long)c->pr, (long long)c->ah, (long long)c->aw);
  CHECK(px_qconv_bytes(q) > 0);
  px_qconv_free(q);
done:
  free(x), free(w), free(y8), free(yf), free(rq), free(ws), free(fb), free(ib), free(acc), free(zp), free(sc);
#undef XZP
}

static void test_cases(void) {
  /* hand-picked shapes */
  static const ccase fixed[] = {
      /* t  dyn pp  b  cl  N  H  W  g gic goc kh kw sh sw dh dw pt pl pb pr ah aw */
      {0, 0, 0, 1, 0, 1, 8, 8, 1, 3, 10, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 1, 1, 2, 9, 7, 2, 3, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0},  /* grouped, strided, padded */
      {0, 0, 0, 0, 0, 1, 5, 5, 4, 2, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},  /* grouped 1x1: in place */
      {0, 0, 0, 1, 0, 1, 6, 11, 3, 5, 17, 2, 3, 1, 2, 2, 1, 0, 2, 1, 0, 0, 0}, /* dilated, odd channels */
      {1, 0, 0, 1, 0, 1, 8, 8, 1, 3, 10, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, /* transposed, stride 1 */
      {1, 0, 0, 1, 1, 2, 7, 9, 1, 4, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}, /* stride 2, adjustment */
      {1, 0, 0, 1, 0, 1, 4, 5, 1, 4, 3, 2, 2, 4, 3, 1, 1, 0, 0, 0, 0, 3, 2}, /* kernel < stride: empty phases */
      {1, 0, 0, 1, 0, 1, 5, 4, 2, 2, 3, 5, 3, 3, 2, 2, 1, 2, 1, 3, 0, 2, 1}, /* grouped, dilated */
      {1, 0, 0, 0, 0, 2, 3, 3, 3, 1, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}, /* grouped, one input channel each */
      {0, 1, 0, 1, 0, 1, 8, 8, 1, 3, 10, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, /* qd8 */
      {0, 1, 0, 1, 1, 3, 6, 7, 2, 4, 3, 3, 2, 2, 1, 1, 2, 1, 0, 1, 1, 0, 0},
      {0, 1, 1, 1, 0, 2, 5, 6, 1, 7, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, /* qd8 per pixel (1x1) */
      {0, 1, 0, 0, 0, 2, 5, 6, 1, 7, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, /* qd8 1x1 per image */
      {1, 1, 0, 1, 0, 1, 8, 8, 1, 3, 10, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}, /* qd8 transposed */
      {1, 1, 0, 1, 1, 2, 4, 5, 1, 4, 7, 5, 5, 3, 3, 1, 1, 2, 2, 2, 2, 0, 0},
      {1, 1, 0, 0, 0, 1, 3, 3, 1, 2, 3, 1, 1, 3, 3, 1, 1, 0, 0, 0, 0, 2, 2}, /* qd8, empty phases, no bias */
      {0, 0, 0, 1, 0, 1, 40, 40, 1, 20, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, /* several tiles */
      {1, 1, 0, 1, 0, 1, 24, 24, 1, 24, 20, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0},
      /* channel counts in whole 8-byte units: the implicit (indirect) product where the path has it */
      {0, 0, 0, 1, 0, 1, 9, 10, 1, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
      {0, 0, 0, 1, 1, 2, 13, 11, 1, 32, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, /* 2 images, 3 tiles + 1 */
      {0, 0, 0, 0, 0, 1, 15, 12, 1, 16, 64, 3, 3, 2, 2, 1, 1, 0, 1, 1, 0, 0, 0}, /* strided, 4 tiles */
      {0, 0, 0, 1, 0, 1, 10, 9, 2, 24, 20, 3, 2, 1, 2, 2, 1, 2, 0, 1, 1, 0, 0},  /* grouped, dilated */
      {0, 0, 0, 1, 1, 1, 4, 4, 1, 8, 70, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0},    /* taps mostly outside */
      {0, 0, 0, 1, 0, 1, 6, 7, 1, 40, 17, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0},   /* 1x3, 5 units a tap */
      {0, 0, 0, 1, 0, 1, 7, 5, 1, 16, 8, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0},    /* 1x1 with stride */
      {0, 0, 0, 1, 0, 1, 70, 70, 1, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},  /* several row chunks */
      /* stride 1: runs of pixels whose taps all lie inside, 8 pointers and 16 sums a store */
      {0, 0, 0, 1, 0, 2, 23, 37, 1, 8, 16, 4, 4, 1, 1, 1, 1, 1, 2, 2, 1, 0, 0},  /* 16 taps: no part store */
      {0, 0, 0, 1, 1, 1, 30, 41, 1, 16, 20, 5, 5, 1, 1, 2, 1, 4, 2, 4, 2, 0, 0}, /* 25 taps, dilated rows */
      {0, 0, 0, 1, 0, 1, 9, 52, 2, 8, 17, 1, 7, 1, 1, 1, 2, 0, 6, 0, 6, 0, 0},   /* 7 taps, dilated, grouped */
      /* dilations past the input (an atrous pyramid): taps no pixel of a band reads inside are left out */
      {0, 0, 0, 1, 0, 1, 7, 7, 1, 16, 20, 3, 3, 1, 1, 8, 8, 8, 8, 8, 8, 0, 0},  /* only the centre tap */
      {0, 0, 0, 1, 1, 2, 9, 9, 1, 8, 33, 3, 3, 1, 1, 6, 6, 6, 6, 6, 6, 0, 0},  /* bands of 3, 6 and 9 taps */
      {0, 0, 0, 1, 0, 1, 10, 6, 1, 24, 17, 3, 3, 2, 2, 4, 5, 4, 5, 4, 5, 0, 0}, /* strided, unequal dilations */
      {0, 0, 0, 0, 0, 1, 6, 6, 2, 8, 12, 3, 3, 1, 1, 5, 5, 5, 5, 5, 5, 0, 0},  /* grouped, no bias */
      {0, 0, 0, 1, 0, 1, 5, 40, 1, 8, 16, 5, 3, 1, 1, 3, 1, 6, 1, 6, 1, 0, 0},  /* kernel rows outside for bands */
      /* few channels: kernel rows read in place, their bytes padded to 8 by the next pixels' */
      {0, 0, 0, 1, 1, 2, 19, 17, 1, 3, 20, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0}, /* a 7x7 stride-2 stem */
      {0, 0, 0, 1, 0, 1, 12, 9, 1, 5, 7, 3, 3, 2, 1, 2, 1, 1, 0, 2, 1, 0, 0},   /* dilated rows */
      {0, 0, 0, 0, 0, 1, 6, 6, 1, 12, 16, 2, 4, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0},  /* 48-byte kernel rows */
      {0, 0, 0, 1, 0, 1, 64, 48, 1, 3, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}, /* several row chunks */
  };
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) run_case(&fixed[i]);
  /* random shapes */
  for (int t = 0; t < 60; t++) {
    ccase c = {0};
    c.transposed = (int)(rnd() % 2);
    c.dynamic = (int)(rnd() % 2);
    c.bias = (int)(rnd() % 3 != 0);
    c.clamp = (int)(rnd() % 3 == 0);
    c.N = 1 + rnd() % 3;
    c.H = 1 + rnd() % 9;
    c.W = 1 + rnd() % 9;
    c.groups = 1 + rnd() % 3;
    c.gic = 1 + rnd() % 6;
    c.goc = 1 + rnd() % 7;
    c.kh = 1 + rnd() % 4;
    c.kw = 1 + rnd() % 4;
    c.sh = 1 + rnd() % 3;
    c.sw = 1 + rnd() % 3;
    c.dh = 1 + rnd() % 2;
    c.dw = 1 + rnd() % 2;
    c.pt = rnd() % 3, c.pl = rnd() % 3, c.pb = rnd() % 3, c.pr = rnd() % 3;
    if (c.transposed) c.ah = rnd() % c.sh, c.aw = rnd() % c.sw;
    run_case(&c);
  }
}

static void test_errors(void) {
  int8_t w[64] = {0};
  float rq[8] = {0.01f, 0.01f, 0.01f, 0.01f, 0.01f, 0.01f, 0.01f, 0.01f};
  px_qconv_desc d = {.transposed = 1, .groups = 1, .gic = 2, .goc = 2, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
                     .dh = 1, .dw = 1, .ah = 2, .weights = w, .requant = rq, .qmin = -128, .qmax = 127};
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "smaller than the stride") != NULL);
  d.ah = 1;
  d.transposed = 0;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "only for transposed") != NULL);
  d.transposed = 1;
  d.kh = 0;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "must lie in [1, 65536]") != NULL);
  d.kh = 2;
  d.groups = 70000;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "groups 70000") != NULL);
  d.groups = 1;
  d.pt = -1;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "padding") != NULL);
  d.pt = 0;
  rq[1] = 256.0f;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "requantization scale 256 of channel 1") != NULL);
  rq[1] = 0.01f;
  d.in_zp = 128;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "zero points") != NULL);
  d.in_zp = 0;
  d.qmin = 5, d.qmax = 4;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "clamp") != NULL);
  d.qmin = -128, d.qmax = 127;
  px_qconv *q = px_qconv_pack(&d);
  CHECK(q != NULL);
  int64_t oh, ow;
  px_qconv_out_size(q, 0, 3, &oh, &ow);
  CHECK(oh == -1 && ow == 2 * 2 + 1 + 1);
  int8_t x[8] = {0}, y[64];
  ctx.scratch_cur = ctx.scratch;
  ctx.scratch_used = 0;
  CHECK(px_qconv_qs8(&ctx, q, 1, 1, 1, x, 3, 3, y) != 0 && strstr(msg, "output") != NULL); /* 1x1 gives 3x2 */
  CHECK(px_qconv_qd8_f32(&ctx, q, 1, 1, 1, x, NULL, NULL, 0, 3, 2, NULL) != 0 && strstr(msg, "static") != NULL);
  px_qconv_free(q);
  px_qconv_free(NULL);
  d.dynamic = 1;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "no filter scales") != NULL);
  float ws[2] = {0.1f, -1.0f};
  d.wscale = ws;
  d.lo = -INFINITY, d.hi = INFINITY;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "scale 1") != NULL);
  ws[1] = 0.1f;
  d.lo = 1.0f, d.hi = 0.0f;
  CHECK(px_qconv_pack(&d) == NULL && strstr(px_last_error(), "empty") != NULL);
  /* per-pixel parameters for a convolution that reads other pixels */
  d.lo = -INFINITY, d.hi = INFINITY;
  d.transposed = 0, d.ah = 0;
  q = px_qconv_pack(&d);
  CHECK(q != NULL);
  int32_t zp[4] = {0};
  float sc[4] = {1, 1, 1, 1};
  float yf[16];
  if (q) CHECK(px_qconv_qd8_f32(&ctx, q, 1, 2, 2, x, zp, sc, 1, 1, 1, yf) != 0 && strstr(msg, "per-pixel") != NULL);
  px_qconv_free(q);
}

int main(void) {
  rng_state = 0x2545F4914F6CDD1Dull;
  setenv("PYEXEC_PARALLEL_MIN_COST", "1", 1); /* split even small products over the threads */
  static const int paths[] = {PX_QGEMM_PORTABLE, PX_QGEMM_AVX2, PX_QGEMM_AVX512_VNNI, PX_QGEMM_NEON,
                              PX_QGEMM_NEON_DOT};
  int best = px_qgemm_path();
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    if (px_qgemm_use_path(paths[i]) != 0) continue;
    check_label = px_qgemm_path_name(paths[i]);
    int before = failures;
    rng_state = 0x2545F4914F6CDD1Dull; /* the same cases on every path */
    test_cases();
    printf("qconv: %s: %s\n", check_label, failures == before ? "ok" : "FAILED");
  }
  px_qgemm_use_path(PX_QGEMM_AUTO);
  /* the same cases split over 2 and 3 threads: still exact */
  int threads = px_parallel_get_num_threads();
  for (int t = 1; t <= 3; t++) {
    if (px_parallel_set_num_threads(t) != PYEXEC_OK) continue;
    char name[32];
    snprintf(name, sizeof name, "%d thread%s", t, t > 1 ? "s" : "");
    check_label = name;
    int before = failures;
    rng_state = 0x2545F4914F6CDD1Dull;
    test_cases();
    printf("qconv: %s, %s: %s\n", px_qgemm_path_name(best), name, failures == before ? "ok" : "FAILED");
  }
  px_parallel_set_num_threads(threads);
  check_label = "errors";
  test_errors();
  px_scratch_release(&ctx);
  printf("test_qconv: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
