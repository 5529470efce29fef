/*
 * test_qgemm.c - the integer GEMM (kernels/gemm/qgemm.h) against a naive
 * reference written here: int64 sums of (a - a_zp) * (w - zp) (blockwise:
 * of a * (w - zp), the zero point's term apart, as qgemm_impl.h says), then
 * the float steps of the documented formulas in their order, so the
 * products must match bit for bit (and a double-precision reference within a
 * few float roundings). Every micro-kernel path this build and CPU have runs
 * (portable C, AVX2, AVX-512 VNNI, NEON, NEON dot product), over edge shapes:
 * one row, depths that are not multiples of 4, 8, 16 or 32, channel counts
 * that are not multiples of the 16-wide tile, both nibble orders, zero
 * points and values at the int8 extremes, block sizes 32, 64, 128 (and odd
 * ones), no bias, clamps; every row count to 16 for the kernels that take
 * up to 8 rows a call, and the limits of the blockwise kernel's float step.
 * Also XNNPACK's dynamic row quantization (qd8) with
 * round-half-even cases worked out by hand, and the packing errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/gemm/qgemm.h"
#include "kernels/kernel.h"
#include "check.h"

static char msg[1024];
static px_ctx ctx = {.op = "test", .msg = msg, .msg_cap = sizeof msg};

static void scratch_reset(void) {
  ctx.scratch_cur = ctx.scratch;
  ctx.scratch_used = 0;
}

/* ---- one product case --------------------------------------------------------- */

typedef struct {
  int bits, high_first, with_bias, clamp;
  int bf16;    /* scales that are exactly bfloat16 (XNNPACK's qb4w), packed as such */
  int wconst;  /* every weight at its lowest value (block sums past int16) */
  int nanbias; /* bias NaN, +inf and -inf on the first channels (NaN is kept, infinities clamped) */
  int aneg;    /* activations in [-128, -100]: with wconst and wzp 15, products near the largest, 1920 */
  int32_t azp; /* nonzero: the rows' activation zero points azp, -azp, azp, ... */
  int wraps;   /* the int32 sums wrap (as every path's do): no comparison with the double reference */
  int64_t M, N, K, block;
  int32_t wzp;
} qcase;

/* Weights w[n][k] as integers (int8, or nibbles 0..15), encoded into bytes as
 * XNNPACK's payload has them. */
static void encode(const qcase *c, const int *w, uint8_t *data, int64_t row_bytes) {
  memset(data, 0, (size_t)(c->N * row_bytes));
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t k = 0; k < c->K; k++) {
      int v = w[n * c->K + k];
      uint8_t *row = data + n * row_bytes;
      if (c->bits == 8) {
        row[k] = (uint8_t)(int8_t)v;
      } else {
        int high = (int)(k & 1) ^ c->high_first;
        row[k >> 1] |= (uint8_t)(high ? v << 4 : v);
      }
    }
}

static void run_case(const qcase *c) {
  int64_t M = c->M, N = c->N, K = c->K;
  int64_t nb = c->block ? K / c->block : 1, bk = K / nb;
  int64_t row_bytes = c->bits == 8 ? K : (K + 1) / 2;
  int *w = malloc(sizeof(int) * (size_t)(N * K));
  uint8_t *data = malloc((size_t)(N * row_bytes) + 1);
  float *scales = malloc(sizeof(float) * (size_t)(N * nb));
  float *bias = malloc(sizeof(float) * (size_t)N);
  int64_t lda = K + 3; /* a row stride wider than K */
  int8_t *a = malloc((size_t)(M * lda));
  int32_t *azp = malloc(sizeof(int32_t) * (size_t)M);
  float *as = malloc(sizeof(float) * (size_t)M);
  int64_t ldc = N + 2;
  float *out = malloc(sizeof(float) * (size_t)(M * ldc));
  int8_t *qout = malloc((size_t)(M * ldc));
  int32_t *ibias = malloc(sizeof(int32_t) * (size_t)N);
  float *requant = malloc(sizeof(float) * (size_t)N);

  for (int64_t i = 0; i < N * K; i++) w[i] = c->bits == 8 ? rnd_int(-128, 127) : rnd_int(0, 15);
  if (c->bits == 8 && c->wzp != 0) /* keep w - zp within int8 */
    for (int64_t i = 0; i < N * K; i++) {
      int lo = c->wzp - 128 > -128 ? c->wzp - 128 : -128, hi = c->wzp + 127 < 127 ? c->wzp + 127 : 127;
      if (w[i] < lo) w[i] = lo;
      if (w[i] > hi) w[i] = hi;
    }
  if (c->wconst)
    for (int64_t i = 0; i < N * K; i++) w[i] = c->bits == 8 ? -128 : 0;
  encode(c, w, data, row_bytes);
  for (int64_t i = 0; i < N * nb; i++) {
    scales[i] = rnd_float(0.001f, 0.05f);
    if (c->bf16) {
      uint32_t u;
      memcpy(&u, &scales[i], sizeof u);
      u &= 0xFFFF0000u;
      memcpy(&scales[i], &u, sizeof u);
    }
  }
  for (int64_t n = 0; n < N; n++) {
    bias[n] = rnd_float(-2.0f, 2.0f);
    ibias[n] = rnd_int(-5000, 5000);
    requant[n] = rnd_float(0.0001f, 0.01f);
  }
  for (int64_t i = 0; i < M * lda; i++) a[i] = (int8_t)rnd_int(-128, c->aneg ? -100 : 127);
  if (c->nanbias) {
    bias[0] = NAN;
    if (N > 1) bias[1] = INFINITY;
    if (N > 2) bias[2] = -INFINITY;
  }
  for (int64_t m = 0; m < M; m++) {
    azp[m] = rnd_int(-128, 127);
    if (c->azp) azp[m] = m & 1 ? -c->azp : c->azp;
    as[m] = rnd_float(0.001f, 0.1f);
  }
  float lo = c->clamp ? -1.0f : -INFINITY, hi = c->clamp ? 1.5f : INFINITY;

  px_qweights_desc d = {.bits = c->bits,
                        .N = N,
                        .K = K,
                        .data = data,
                        .row_bytes = row_bytes,
                        .nibble_high_first = c->high_first,
                        .zero_point = c->wzp,
                        .block = c->block,
                        .scales = scales,
                        .bias = c->with_bias ? bias : NULL};
  px_qweights *pw = px_qweights_pack(&d);
  CHECK(pw != NULL);
  if (!pw) {
    fprintf(stderr, "pack failed: %s\n", px_last_error());
    goto done;
  }
  CHECK(px_qweights_bytes(pw) >= (size_t)(N * K * c->bits / 8));
  /* 4-bit stays 4-bit: packed size about the file's, not 2x or 8x it */
  CHECK(px_qweights_bytes(pw) <= (size_t)((N + 15) / 16 * 16 * (nb * ((bk + 7) / 8 * 8) * c->bits / 8 + nb * 8 + 4)) + 4096);

  /* dynamic product, float out */
  for (int64_t i = 0; i < M * ldc; i++) out[i] = 12345.0f;
  scratch_reset();
  CHECK(px_qgemm_qd8_f32(&ctx, pw, M, a, lda, azp, as, out, ldc, lo, hi) == 0);
  int bad = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float f = 0.0f;
      double dref = 0.0;
      if (c->block) { /* blockwise: the zero point's term first, -azp * sum_g wsum_g * scale_g */
        float corr = 0.0f;
        for (int64_t g = 0; g < nb; g++) {
          int64_t ws = 0;
          for (int64_t kk = 0; kk < bk; kk++) ws += w[n * K + g * bk + kk] - c->wzp;
          corr = fmaf((float)ws, scales[n * nb + g], corr);
        }
        f = -(float)azp[m] * corr;
      }
      for (int64_t g = 0; g < nb; g++) {
        int64_t s = 0, x = 0;
        for (int64_t kk = 0; kk < bk; kk++) {
          int64_t k = g * bk + kk;
          s += (int64_t)(a[m * lda + k] - azp[m]) * (w[n * K + k] - c->wzp);
          x += (int64_t)a[m * lda + k] * (w[n * K + k] - c->wzp);
        }
        if (c->block) { /* then each block's sum without the zero point, one fused multiply-add */
          f = fmaf((float)(int32_t)(uint32_t)(uint64_t)x, scales[n * nb + g], f);
          dref += (double)s * scales[n * nb + g];
        } else {
          f = (float)(int32_t)s;
          dref = (double)s * scales[n];
        }
      }
      float y = c->block ? f * as[m] : (f * as[m]) * scales[n];
      dref *= as[m];
      if (c->with_bias) {
        y = y + bias[n];
        dref += bias[n];
      }
      if (y < lo) y = lo;
      if (y > hi) y = hi;
      if (dref < lo) dref = lo;
      if (dref > hi) dref = hi;
      float got = out[m * ldc + n];
      int same = got == y || (isnan(got) && isnan(y));
      if (!same || (!c->wraps && fabs(got - dref) > 1e-5 * (1.0 + fabs(dref)))) {
        if (bad++ < 3)
          fprintf(stderr, "[%s] qd8 bits %d M %lld N %lld K %lld block %lld: out[%lld,%lld] = %.9g, expected %.9g (double %.9g)\n",
                  check_label, c->bits, (long long)M, (long long)N, (long long)K, (long long)c->block,
                  (long long)m, (long long)n, (double)got, (double)y, dref);
      }
    }
  CHECK(bad == 0);
  for (int64_t m = 0; m < M; m++) /* the padding between rows is untouched */
    for (int64_t n = N; n < ldc; n++) CHECK(out[m * ldc + n] == 12345.0f);

  /* static product, int8 out (per-channel weights only) */
  if (!c->block) {
    int32_t ozp = rnd_int(-128, 127), qmin = c->clamp ? -100 : -128, qmax = c->clamp ? 90 : 127;
    int32_t azp1 = azp[0];
    memset(qout, 0x5A, (size_t)(M * ldc));
    scratch_reset();
    CHECK(px_qgemm_qs8(&ctx, pw, M, a, lda, azp1, c->with_bias ? ibias : NULL, requant, ozp, qmin, qmax, qout,
                       ldc) == 0);
    int qbad = 0;
    for (int64_t m = 0; m < M; m++) {
      for (int64_t n = 0; n < N; n++) {
        int64_t s = 0;
        for (int64_t k = 0; k < K; k++) s += (int64_t)(a[m * lda + k] - azp1) * (w[n * K + k] - c->wzp);
        if (c->with_bias) s += ibias[n];
        float v = (float)(int32_t)s * requant[n];
        float vlo = (float)(qmin - ozp), vhi = (float)(qmax - ozp);
        if (v < vlo) v = vlo;
        if (v > vhi) v = vhi;
        long q = lrintf(v) + ozp;
        /* and the same from a double reference: within one step, in range */
        double dv = (double)s * requant[n] + ozp;
        if (qout[m * ldc + n] != q || qout[m * ldc + n] < qmin || qout[m * ldc + n] > qmax ||
            (dv > qmin && dv < qmax && fabs(qout[m * ldc + n] - dv) > 0.5001)) {
          if (qbad++ < 3)
            fprintf(stderr, "[%s] qs8 bits %d M %lld N %lld K %lld: out[%lld,%lld] = %d, expected %ld\n", check_label,
                    c->bits, (long long)M, (long long)N, (long long)K, (long long)m, (long long)n,
                    qout[m * ldc + n], q);
        }
      }
      for (int64_t n = N; n < ldc; n++) CHECK(qout[m * ldc + n] == 0x5A);
    }
    CHECK(qbad == 0);
  } else {
    scratch_reset();
    msg[0] = 0;
    CHECK(px_qgemm_qs8(&ctx, pw, M, a, lda, 0, NULL, requant, 0, -128, 127, qout, ldc) != 0);
    CHECK(strstr(msg, "blockwise") != NULL);
  }
  px_qweights_free(pw);
done:
  free(w);
  free(data);
  free(scales);
  free(bias);
  free(a);
  free(azp);
  free(as);
  free(out);
  free(qout);
  free(ibias);
  free(requant);
}

static void test_products(void) {
  static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 9};
  static const int64_t Ns[] = {1, 5, 16, 17, 33};
  static const int64_t Ks[] = {1, 3, 7, 8, 13, 16, 31, 33, 64, 100};
  for (int bits = 4; bits <= 8; bits += 4)
    for (size_t im = 0; im < sizeof Ms / sizeof *Ms; im++)
      for (size_t in = 0; in < sizeof Ns / sizeof *Ns; in++)
        for (size_t ik = 0; ik < sizeof Ks / sizeof *Ks; ik++) {
          qcase c = {.bits = bits, .M = Ms[im], .N = Ns[in], .K = Ks[ik]};
          c.high_first = (int)(rnd() & 1);
          c.with_bias = (int)(rnd() % 3 != 0);
          c.clamp = (int)(rnd() % 3 == 0);
          c.wzp = bits == 4 ? 8 : 0;
          run_case(&c);
        }
  /* blockwise 4-bit (and 8-bit), both nibble orders, block sizes 32, 64, 128, odd ones */
  static const int64_t blocks[][2] = {{32, 64},  {32, 96},  {64, 128}, {128, 256}, {32, 256},
                                      {128, 384}, {3, 9},   {5, 35},   {8, 24},    {12, 36}};
  for (size_t ib = 0; ib < sizeof blocks / sizeof *blocks; ib++)
    for (int hf = 0; hf < 2; hf++)
      for (int64_t M = 1; M <= 6; M += 5)
        for (int bits = 4; bits <= 8; bits += 4) {
          qcase c = {.bits = bits, .M = M, .N = 19 + (int64_t)ib, .K = blocks[ib][1], .block = blocks[ib][0]};
          c.high_first = hf;
          c.with_bias = hf;
          c.bf16 = (int)(ib % 3 != 0);
          c.clamp = (int)(ib & 1);
          c.wzp = bits == 4 ? 8 : 0;
          run_case(&c);
        }
  /* one row of blockwise 4-bit weights (decode): every count of tiles the
   * one-row kernels take at once (1 to 4) and several groups of them, sums
   * past int16, the high nibbles first or second */
  static const int64_t gemv[][3] = {{5, 64, 32},   {40, 256, 128}, {64, 96, 32},  {149, 2048, 128},
                                    {70, 384, 128}, {33, 64, 64},  {17, 4096, 4096}, {130, 1024, 256}};
  for (size_t ig = 0; ig < sizeof gemv / sizeof *gemv; ig++) {
    qcase c = {.bits = 4, .M = 1, .N = gemv[ig][0], .K = gemv[ig][1], .block = gemv[ig][2], .wzp = 8};
    c.high_first = (int)(ig & 1);
    c.with_bias = (int)(ig % 3 != 2);
    c.bf16 = (int)(ig % 4 != 3);
    c.clamp = (int)(ig % 2);
    c.wconst = ig == 6;
    run_case(&c);
  }
  /* zero points away from XNNPACK's 0 and 8, at the ends of their ranges */
  static const int32_t zps8[] = {-128, -3, 127}, zps4[] = {0, 15, 7};
  for (int i = 0; i < 3; i++) {
    qcase c8 = {.bits = 8, .M = 3, .N = 18, .K = 37, .wzp = zps8[i], .with_bias = 1};
    run_case(&c8);
    /* depths whose row sums take every step of the vector sum (64, 32, 16, 8 bytes, single ones) */
    qcase c8k = {.bits = 8, .M = 5, .N = 18, .K = i == 0 ? 100 : i == 1 ? 291 : 64, .wzp = zps8[i], .with_bias = 1};
    run_case(&c8k);
    qcase c4 = {.bits = 4, .M = 3, .N = 18, .K = 37, .wzp = zps4[i], .high_first = i & 1};
    run_case(&c4);
    qcase c4b = {.bits = 4, .M = 2, .N = 18, .K = 64, .block = 32, .wzp = zps4[i]};
    run_case(&c4b);
  }
  /* non-finite biases, with and without a clamp, per channel and blockwise */
  for (int cl = 0; cl < 2; cl++) {
    qcase nb8 = {.bits = 8, .M = 3, .N = 20, .K = 24, .with_bias = 1, .nanbias = 1, .clamp = cl};
    run_case(&nb8);
    qcase nb4 = {.bits = 4, .M = 2, .N = 5, .K = 64, .block = 32, .bf16 = 1, .wzp = 8, .with_bias = 1,
                 .nanbias = 1, .clamp = cl};
    run_case(&nb4);
  }
  /* blockwise weight sums past int16 */
  qcase wc8 = {.bits = 8, .M = 3, .N = 17, .K = 1024, .block = 512, .wconst = 1, .bf16 = 1};
  run_case(&wc8);
  qcase wc4 = {.bits = 4, .M = 2, .N = 17, .K = 8192, .block = 4096, .wconst = 1, .wzp = 15};
  run_case(&wc4);
  /* rows over several of the drivers' 64-row work items */
  qcase tall8 = {.bits = 8, .M = 150, .N = 20, .K = 40, .with_bias = 1, .clamp = 1};
  run_case(&tall8);
  qcase tall4 = {.bits = 4, .M = 131, .N = 35, .K = 64, .block = 32, .bf16 = 1, .wzp = 8};
  run_case(&tall4);
  /* long depths (int32 sums well past 2^24), more tiles and row blocks */
  qcase big8 = {.bits = 8, .M = 6, .N = 40, .K = 4100, .with_bias = 1};
  run_case(&big8);
  qcase big4 = {.bits = 4, .M = 5, .N = 40, .K = 4096, .block = 128, .with_bias = 1, .high_first = 1};
  run_case(&big4);
  qcase big4c = {.bits = 4, .M = 1, .N = 33, .K = 2050, .wzp = 8};
  run_case(&big4c);
}

/* The AVX-512 VNNI kernels that take up to 8 rows a call (8 x 2 tiles,
 * rows skipped below 8, 4 x 4 for four rows of a whole tile group): every
 * row count to 16, so that each chunk size and remainder is met, over
 * channel counts whose last tile group has 1 to 4 tiles (passes of two
 * tiles and of one) with a partial last tile, depths below and above the
 * one where 8-row calls take over at any row count (K > 768), not
 * multiples of 8, with and without prefetching (M <= 8, K <= 512); and
 * blockwise 4-bit weights with several blocks, padded blocks and bfloat16
 * or float scales. Then large blocks (8192 and 16384 values, |azp| 16384,
 * the largest products, sums past 2^24): every output still equal. */
static void test_rows(void) {
  static const int64_t Ns[] = {17, 50, 70, 100};
  for (int64_t M = 1; M <= 16; M++)
    for (size_t in = 0; in < sizeof Ns / sizeof *Ns; in++) {
      qcase c8 = {.bits = 8, .M = M, .N = Ns[in], .K = in & 1 ? 1000 : 37};
      c8.with_bias = (int)(rnd() % 3 != 0);
      c8.clamp = (int)(rnd() % 3 == 0);
      c8.wzp = (int32_t)rnd_int(-3, 3);
      run_case(&c8);
      if (in == 0) {
        qcase c8m = {.bits = 8, .M = M, .N = 33, .K = 784, .with_bias = 1};
        run_case(&c8m);
      }
      static const int64_t blocks[][2] = {{32, 96}, {20, 100}, {128, 512}, {64, 64}};
      qcase c4 = {.bits = 4, .M = M, .N = Ns[in], .K = blocks[in][1], .block = blocks[in][0], .wzp = 8};
      c4.high_first = (int)(rnd() & 1);
      c4.with_bias = (int)(rnd() % 3 != 0);
      c4.clamp = (int)(rnd() % 3 == 0);
      c4.bf16 = (int)(in != 1);
      run_case(&c4);
    }
  /* |x| up to 1920 * 8192, |azp * wsum| up to 16384 * 15 * 8192, both
   * with low bits set */
  qcase big = {.bits = 4, .M = 9, .N = 17, .K = 16384, .block = 8192, .wconst = 1, .wzp = 15, .aneg = 1,
               .azp = 16384, .bf16 = 1};
  run_case(&big);
  qcase rnd4 = {.bits = 4, .M = 6, .N = 40, .K = 16384, .block = 8192, .azp = -16384, .with_bias = 1};
  run_case(&rnd4);
  /* |azp * wsum| past int32 (the zero point's term is taken in float),
   * and |x| past 2^24 in a block of 16384 */
  qcase wrap = {.bits = 4, .M = 9, .N = 17, .K = 16384, .block = 8192, .wconst = 1, .wzp = 15, .aneg = 1,
                .azp = 20000};
  run_case(&wrap);
  qcase past = {.bits = 4, .M = 3, .N = 17, .K = 16384, .block = 16384, .wconst = 1, .wzp = 15, .aneg = 1, .azp = 100};
  run_case(&past);
}

/* ---- dynamic row quantization ------------------------------------------------- */

/* A10's table, typed again here. */
static void ref_qd8(const float *x, int64_t K, int8_t *q, int32_t *zp, float *scale) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t k = 0; k < K; k++) {
    if (x[k] < lo) lo = x[k];
    if (x[k] > hi) hi = x[k];
  }
  float mult = lo == hi ? 1.0f : 255.0f / (hi - lo);
  float dmin = lo * mult, dmax = hi * mult;
  float z = (-128.0f + dmin) + (127.0f + dmax) > 0.0f ? -128.0f - dmin : 127.0f - dmax;
  z = z < -128.0f ? -128.0f : z > 127.0f ? 127.0f : z;
  long izp = lrintf(z);
  for (int64_t k = 0; k < K; k++) {
    float v = x[k] * mult;
    if (v < (float)(-128 - izp)) v = (float)(-128 - izp);
    if (v > (float)(127 - izp)) v = (float)(127 - izp);
    q[k] = (int8_t)(lrintf(v) + izp);
  }
  *zp = (int32_t)izp;
  *scale = 1.0f / mult;
}

static void test_qd8(void) {
  /* by hand: the row 0 .. 255 has mult 1 and zero point -128; x.5 rounds to even */
  float x[6] = {0.0f, 2.5f, 3.5f, 255.0f, 254.5f, 1.5f};
  int8_t q[6];
  int32_t zp;
  float sc;
  px_quantize_qd8(x, 1, 6, 6, q, &zp, &sc);
  CHECK(zp == -128 && sc == 1.0f);
  CHECK(q[0] == -128 && q[1] == -126 && q[2] == -124 && q[3] == 127 && q[4] == 126 && q[5] == -126);
  /* a zero row: scale 1, zero point... (-128 + 0) + (127 + 0) < 0 so 127 - 0 */
  float z[3] = {0.0f, 0.0f, 0.0f};
  px_quantize_qd8(z, 1, 3, 3, q, &zp, &sc);
  CHECK(zp == 127 && sc == 1.0f && q[0] == 127 && q[2] == 127);
  /* negative-only row: rmax = 0, zero maps to 127 exactly */
  float neg[2] = {-2.0f, -1.0f};
  px_quantize_qd8(neg, 1, 2, 2, q, &zp, &sc);
  CHECK(zp == 127 && q[0] == -128 && fabsf(sc - 2.0f / 255.0f) < 1e-9f);
  /* NaN is left out of the range and quantizes to the low end: range [-1, 1],
   * mult 127.5, zero point lrintf(127 - 127.5) = 0; 127.5 clamps to 127,
   * -127.5 rounds to even (-128) */
  float withnan[3] = {NAN, 1.0f, -1.0f};
  px_quantize_qd8(withnan, 1, 3, 3, q, &zp, &sc);
  CHECK(zp == 0 && sc == 1.0f / 127.5f && q[0] == -128 && q[1] == 127 && q[2] == -128);
  /* random rows against the reference; 0.0 always exactly representable */
  for (int t = 0; t < 50; t++) {
    int64_t M = 1 + rnd() % 4, K = 1 + rnd() % 200, ldx = K + (int64_t)(rnd() % 3);
    float *xs = malloc(sizeof(float) * (size_t)(M * ldx));
    int8_t *qs = malloc((size_t)(M * K)), rq[200];
    int32_t zps[4], rzp;
    float scs[4], rsc;
    float off = rnd_float(-3.0f, 3.0f), spread = rnd_float(0.01f, 10.0f);
    for (int64_t i = 0; i < M * ldx; i++) xs[i] = off + spread * rnd_float(-1.0f, 1.0f);
    px_quantize_qd8(xs, M, K, ldx, qs, zps, scs);
    for (int64_t m = 0; m < M; m++) {
      ref_qd8(xs + m * ldx, K, rq, &rzp, &rsc);
      CHECK(zps[m] == rzp && scs[m] == rsc);
      CHECK(memcmp(qs + m * K, rq, (size_t)K) == 0);
      for (int64_t k = 0; k < K; k++) /* within half a step */
        CHECK(fabs(((double)qs[m * K + k] - zps[m]) * scs[m] - xs[m * ldx + k]) <= 0.5001 * scs[m] + 1e-6);
    }
    free(xs);
    free(qs);
  }
}

/* ---- packing errors --------------------------------------------------------------- */

static void test_pack_errors(void) {
  uint8_t data[64] = {0};
  float scales[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  px_qweights_desc d = {.bits = 4, .N = 2, .K = 8, .data = data, .row_bytes = 4, .zero_point = 8,
                        .block = 3, .scales = scales};
  CHECK(px_qweights_pack(&d) == NULL && strstr(px_last_error(), "does not divide") != NULL);
  d.block = 4;
  scales[3] = 0.0f;
  CHECK(px_qweights_pack(&d) == NULL && strstr(px_last_error(), "scale 3") != NULL);
  scales[3] = -1.0f;
  CHECK(px_qweights_pack(&d) == NULL && strstr(px_last_error(), "positive") != NULL);
  scales[3] = NAN;
  CHECK(px_qweights_pack(&d) == NULL);
  scales[3] = 1.0f;
  d.bits = 3;
  CHECK(px_qweights_pack(&d) == NULL && strstr(px_last_error(), "3-bit") != NULL);
  d.bits = 4;
  d.zero_point = 16;
  CHECK(px_qweights_pack(&d) == NULL && strstr(px_last_error(), "zero point") != NULL);
  d.zero_point = 8;
  d.row_bytes = 3;
  CHECK(px_qweights_pack(&d) == NULL && strstr(px_last_error(), "bytes") != NULL);
  d.row_bytes = 4;
  px_qweights *w = px_qweights_pack(&d);
  CHECK(w != NULL);
  px_qweights_free(w);
  px_qweights_free(NULL);
  /* 8-bit: a weight minus the zero point outside int8 */
  data[0] = 0x80; /* -128 */
  px_qweights_desc d8 = {.bits = 8, .N = 2, .K = 8, .data = data, .row_bytes = 8, .zero_point = 1,
                         .scales = scales};
  CHECK(px_qweights_pack(&d8) == NULL && strstr(px_last_error(), "int8") != NULL);
}

int main(void) {
  rng_state = 0x9E3779B97F4A7C15ull;
  setenv("PYEXEC_PARALLEL_MIN_COST", "1", 1); /* split even small products over the threads */
  static const int paths[] = {PX_QGEMM_PORTABLE, PX_QGEMM_AVX2, PX_QGEMM_AVX512_VNNI, PX_QGEMM_NEON,
                              PX_QGEMM_NEON_DOT};
  int best = px_qgemm_path();
  printf("qgemm: best path here: %s\n", px_qgemm_path_name(best));
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    if (px_qgemm_use_path(paths[i]) != 0) {
      printf("qgemm: %s not available in this build / CPU (skipped)\n", px_qgemm_path_name(paths[i]));
      continue;
    }
    check_label = px_qgemm_path_name(paths[i]);
    int before = failures;
    rng_state = 0x9E3779B97F4A7C15ull; /* the same cases for every path */
    test_products();
    test_rows();
    test_qd8(); /* its passes are vectorised on some paths too */
    printf("qgemm: %s: %s\n", check_label, failures == before ? "ok" : "FAILED");
  }
  CHECK(px_qgemm_use_path(PX_QGEMM_AUTO) == 0 && px_qgemm_path() == best);
  /* the same checks with the work split over 3 threads: every output is
   * still exact, so results do not depend on the thread count */
  int threads = px_parallel_get_num_threads();
  if (px_parallel_set_num_threads(3) == PYEXEC_OK) {
    check_label = "3 threads";
    int before = failures;
    rng_state = 0x9E3779B97F4A7C15ull;
    test_products();
    test_rows();
    printf("qgemm: %s, 3 threads: %s\n", px_qgemm_path_name(best), failures == before ? "ok" : "FAILED");
    px_parallel_set_num_threads(threads);
  }
  check_label = "pack";
  test_pack_errors();
  px_scratch_release(&ctx);
  printf("test_qgemm: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
