/*
 * test_qdwconv.c - the quantized depthwise convolution (kernels/conv/qdwconv.h)
 * against a naive reference written here: int64 sums of (x - in_zp) * w over
 * the taps inside the input, plus the bias, wrapped to int32, then the
 * header's float steps, so the results must match bit for bit. Channel
 * counts on both sides of every SIMD block (8, 16 and 32 channels, and the
 * masked and scalar tails), depth multipliers, kernels, strides, dilations
 * and paddings (the border and interior pixels), zero points at the int8
 * extremes and clamps; on every int8 path this build and CPU have (the
 * depthwise kernel follows the int8 GEMM's), and over 1, 2 and 3 threads.
 * Also the description errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/conv/qdwconv.h"
#include "kernels/gemm/qgemm.h"
#include "kernels/kernel.h"
#include "check.h"

static char msg[1024];
static px_ctx ctx = {.op = "test", .msg = msg, .msg_cap = sizeof msg};

typedef struct {
  int64_t N, H, W, C, mult, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int bias, clamp;
} dcase;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pa, int64_t pb) {
  int64_t span = d * (k - 1) + 1;
  return in + pa + pb < span ? -1 : (in + pa + pb - span) / s + 1;
}

static void run_case(const dcase *c) {
  const int64_t CO = c->C * c->mult, KK = c->kh * c->kw;
  const int64_t OH = out_dim(c->H, c->kh, c->sh, c->dh, c->pt, c->pb);
  const int64_t OW = out_dim(c->W, c->kw, c->sw, c->dw, c->pl, c->pr);
  if (OH < 1 || OW < 1) return;
  const int64_t nx = c->N * c->H * c->W * c->C, ny = c->N * OH * OW * CO;
  int8_t *x = malloc((size_t)nx), *w = malloc((size_t)(KK * CO)), *y = malloc((size_t)ny);
  int32_t *ib = malloc(sizeof(int32_t) * (size_t)CO);
  float *rq = malloc(sizeof(float) * (size_t)CO);
  int32_t in_zp = rnd_int(-128, 127), out_zp = rnd_int(-128, 127);
  for (int64_t i = 0; i < nx; i++) x[i] = (int8_t)rnd_int(-128, 127);
  for (int64_t i = 0; i < KK * CO; i++) w[i] = (int8_t)rnd_int(-127, 127);
  for (int64_t i = 0; i < CO; i++) ib[i] = rnd_int(-30000, 30000), rq[i] = rnd_float(1e-4f, 8e-3f);
  int32_t qmin = c->clamp ? rnd_int(-128, -10) : -128, qmax = c->clamp ? rnd_int(10, 127) : 127;
  px_qdwconv_desc d = {.C = c->C, .mult = c->mult, .kh = c->kh, .kw = c->kw, .sh = c->sh, .sw = c->sw,
                       .dh = c->dh, .dw = c->dw, .pt = c->pt, .pl = c->pl, .weights = w,
                       .bias = c->bias ? ib : NULL, .requant = rq, .in_zp = in_zp, .out_zp = out_zp,
                       .qmin = qmin, .qmax = qmax};
  px_qdwconv *q = px_qdwconv_pack(&d);
  CHECK(q != NULL);
  if (!q) {
    fprintf(stderr, "pack: %s\n", px_last_error());
    goto done;
  }
  memset(y, 0x5A, (size_t)ny);
  ctx.scratch_cur = ctx.scratch;
  ctx.scratch_used = 0;
  int rc = px_qdwconv_qs8(&ctx, q, c->N, c->H, c->W, x, OH, OW, y);
  CHECK(rc == 0);
  int bad = 0;
  for (int64_t n = 0; n < c->N && !rc; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        for (int64_t co = 0; co < CO; co++) {
          int64_t s = c->bias ? ib[co] : 0, ci = co / c->mult;
          for (int64_t i = 0; i < c->kh; i++)
            for (int64_t j = 0; j < c->kw; j++) {
              int64_t ih = oh * c->sh + i * c->dh - c->pt, iw = ow * c->sw + j * c->dw - c->pl;
              if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
              s += ((int64_t)x[((n * c->H + ih) * c->W + iw) * c->C + ci] - in_zp) * w[(i * c->kw + j) * CO + co];
            }
          float v = (float)(int32_t)(uint32_t)s * rq[co];
          float flo = (float)(qmin - out_zp), fhi = (float)(qmax - out_zp);
          v = v < flo ? flo : v;
          v = v > fhi ? fhi : v;
          int8_t want = (int8_t)(lrintf(v) + out_zp), got = y[((n * OH + oh) * OW + ow) * CO + co];
          if (want != got && bad++ < 3)
            fprintf(stderr, "  (%lld, %lld, %lld, %lld): %d, expected %d\n", (long long)n, (long long)oh,
                    (long long)ow, (long long)co, got, want);
        }
  CHECK(bad == 0);
  if (bad)
    fprintf(stderr, "  case: N%lld %lldx%lld C%lld x%lld k%lldx%lld s%lldx%lld d%lldx%lld p%lld/%lld/%lld/%lld\n",
            (long long)c->N, (long long)c->H, (long long)c->W, (long long)c->C, (long long)c->mult,
            (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->dh,
            (long long)c->dw, (long long)c->pt, (long long)c->pl, (long long)c->pb, (long long)c->pr);
  CHECK(px_qdwconv_bytes(q) > 0);
  px_qdwconv_free(q);
done:
  free(x), free(w), free(y), free(ib), free(rq);
}

static void test_cases(void) {
  static const dcase fixed[] = {
      /* N  H   W   C  mult kh kw sh sw dh dw pt pl pb pr bias clamp */
      {1, 9, 9, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},  /* one 32-channel block, a 16 block pair */
      {1, 8, 10, 144, 1, 3, 3, 2, 2, 1, 1, 0, 1, 1, 0, 1, 0}, /* 4 blocks of 32 and a masked 16 */
      {2, 7, 7, 27, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},  /* 16 + 8 + 3 */
      {1, 6, 12, 40, 1, 5, 5, 1, 2, 1, 1, 2, 2, 2, 2, 1, 0}, /* 25 taps (odd: a zero partner) */
      {1, 11, 9, 72, 1, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0, 1}, /* dilation 2 */
      {1, 5, 5, 24, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},  /* depth multiplier 2 */
      {1, 4, 20, 8, 1, 1, 4, 1, 3, 1, 1, 0, 3, 0, 3, 1, 0},  /* wide padding, no interior column */
      {1, 3, 3, 33, 1, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1},  /* padding wider than the interior */
      {1, 1, 40, 7, 1, 1, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0},  /* scalar channels only */
  };
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) run_case(&fixed[i]);
  for (int t = 0; t < 80; t++) {
    dcase c = {0};
    c.N = 1 + rnd() % 2;
    c.H = 1 + rnd() % 8;
    c.W = 1 + rnd() % 12;
    c.C = 1 + rnd() % 70;
    c.mult = rnd() % 4 == 0 ? 2 : 1;
    c.kh = 1 + rnd() % 4;
    c.kw = 1 + rnd() % 4;
    c.sh = 1 + rnd() % 3;
    c.sw = 1 + rnd() % 3;
    c.dh = 1 + rnd() % 2;
    c.dw = 1 + rnd() % 2;
    c.pt = rnd() % 3, c.pl = rnd() % 3, c.pb = rnd() % 3, c.pr = rnd() % 3;
    c.bias = (int)(rnd() % 3 != 0);
    c.clamp = (int)(rnd() % 3 == 0);
    run_case(&c);
  }
}

static void test_errors(void) {
  int8_t w[16] = {0};
  float rq[2] = {0.01f, 0.01f};
  px_qdwconv_desc d = {.C = 2, .mult = 1, .kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .weights = w,
                       .requant = rq, .qmin = -128, .qmax = 127};
  d.kh = 0;
  CHECK(px_qdwconv_pack(&d) == NULL && strstr(px_last_error(), "must lie in [1, 65536]") != NULL);
  d.kh = 2;
  d.pt = -1;
  CHECK(px_qdwconv_pack(&d) == NULL && strstr(px_last_error(), "too large") != NULL);
  d.pt = 0;
  d.requant = NULL;
  CHECK(px_qdwconv_pack(&d) == NULL && strstr(px_last_error(), "no filter") != NULL);
  px_qdwconv_free(NULL);
}

int main(void) {
  setenv("PYEXEC_PARALLEL_MIN_COST", "1", 1); /* split even small convolutions over the threads */
  static const int paths[] = {PX_QGEMM_PORTABLE, PX_QGEMM_AVX2, PX_QGEMM_AVX512_VNNI, PX_QGEMM_NEON,
                              PX_QGEMM_NEON_DOT};
  int best = px_qgemm_path();
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    if (px_qgemm_use_path(paths[i]) != 0) continue;
    check_label = px_qgemm_path_name(paths[i]);
    int before = failures;
    rng_state = 0x2545F4914F6CDD1Dull; /* the same cases on every path */
    test_cases();
    printf("qdwconv: %s: %s\n", check_label, failures == before ? "ok" : "FAILED");
  }
  px_qgemm_use_path(PX_QGEMM_AUTO);
  int threads = px_parallel_get_num_threads();
  for (int t = 1; t <= 3; t++) {
    if (px_parallel_set_num_threads(t) != PYEXEC_OK) continue;
    char name[32];
    snprintf(name, sizeof name, "%d thread%s", t, t > 1 ? "s" : "");
    check_label = name;
    int before = failures;
    rng_state = 0x2545F4914F6CDD1Dull;
    test_cases();
    printf("qdwconv: %s, %s: %s\n", px_qgemm_path_name(best), name, failures == before ? "ok" : "FAILED");
  }
  px_parallel_set_num_threads(threads);
  check_label = "errors";
  test_errors();
  px_scratch_release(&ctx);
  printf("test_qdwconv: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
