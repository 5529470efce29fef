/*
 * test_gemm.c - the float32 GEMM engine over shapes that cross every tile and
 * block edge (M and N not multiples of MR / NR, depth split into blocks),
 * through each entry point (strided, B packed by a callback, B prepacked with
 * A read in place, packed or given by a callback, the bias / clamp
 * epilogue), on small integers so that every float sum is exact and must
 * equal the integer one. The micro-kernel is chosen once per process, so on
 * x86-64 the test runs itself again with PYEXEC_GEMM_ISA=avx2 and =portable
 * to check the fallbacks on a machine that has AVX-512. Then, on random (non-integer)
 * values, the products split over 2 and 3 threads must equal the
 * single-threaded ones bit for bit. B in float16 / bfloat16 (gemm_h16.c:
 * 16-bit panels widened per block) goes through the same shapes, its small
 * integers being exact in both. Linked against the library's objects
 * (see the Makefile).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/parallel.h"
#include "kernels/convert/convert16.h"
#include "kernels/gemm/gemm.h"
#include "kernels/kernel.h"
#include "check.h"

static char msg[1024];
static px_ctx ctx = {.op = "test_gemm", .msg = msg, .msg_cap = sizeof msg};

static float aval(int64_t i, int64_t k) { return (float)((i * 7 + k * 3) % 9 - 4); }
static float bval(int64_t k, int64_t j) { return (float)((k * 5 + j * 11) % 7 - 3); }

/* The exact product, in double. */
static double ref(int64_t i, int64_t j, int64_t K) {
  double s = 0;
  for (int64_t k = 0; k < K; k++) s += (double)aval(i, k) * bval(k, j);
  return s;
}

/* A packing callback over A given as a plain row-major matrix. */
typedef struct asrc {
  const float *A;
  int64_t K;
} asrc;
static void pack_rows(const void *src, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int mr,
                      float *pa) {
  const asrc *s = src;
  for (int64_t i0 = 0; i0 < mc; i0 += mr, pa += (int64_t)mr * kc)
    for (int64_t p = 0; p < kc; p++)
      for (int i = 0; i < mr; i++)
        pa[p * mr + i] = i0 + i < mc ? s->A[(ic + i0 + i) * s->K + pc + p] : 0.0f;
}

/* A packing callback over B given as a plain row-major matrix. */
typedef struct bsrc {
  const float *B;
  int64_t N;
} bsrc;
static void pack_cols(const void *src, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int nr,
                      float *pb) {
  const bsrc *s = src;
  for (int64_t j0 = 0; j0 < nc; j0 += nr, pb += (int64_t)nr * kc)
    for (int64_t p = 0; p < kc; p++)
      for (int j = 0; j < nr; j++)
        pb[p * nr + j] = j0 + j < nc ? s->B[(pc + p) * s->N + jc + j0 + j] : 0.0f;
}

/* The epilogue's post in the tests: exact on the small integers they use,
 * and wrong wherever an element is missed or run twice. */
static void post_twice_plus_one(int64_t n, float *y) {
  for (int64_t k = 0; k < n; k++) y[k] = 2.0f * y[k] + 1.0f;
}

static void one_shape(int64_t M, int64_t N, int64_t K) {
  float *A = malloc(sizeof(float) * (size_t)(M * K)), *At = malloc(sizeof(float) * (size_t)(M * K));
  float *B = malloc(sizeof(float) * (size_t)(K * N)), *Bt = malloc(sizeof(float) * (size_t)(K * N));
  float *C = malloc(sizeof(float) * (size_t)(M * (N + 3)));
  float *bias = malloc(sizeof(float) * (size_t)N), *rbias = malloc(sizeof(float) * (size_t)M);
  float *pb = malloc(px_gemm_f32_prepack_size(N, K) + 64);
  uint16_t *B16 = malloc(sizeof(uint16_t) * (size_t)(K * N)), *Bt16 = malloc(sizeof(uint16_t) * (size_t)(K * N));
  uint16_t *pb16 = malloc(px_gemm_h16_prepack_size(N, K) + 64);
  double *R = malloc(sizeof(double) * (size_t)(M * N));
  if (!A || !At || !B || !Bt || !C || !bias || !rbias || !pb || !R || !B16 || !Bt16 || !pb16) {
    CHECK(0, "out of memory");
    goto out;
  }
  for (int64_t i = 0; i < M; i++)
    for (int64_t k = 0; k < K; k++) A[i * K + k] = At[k * M + i] = aval(i, k);
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < N; j++) B[k * N + j] = Bt[j * K + k] = bval(k, j);
  px_f32_to_f16(B16, B, K * N);
  px_f32_to_bf16(Bt16, Bt, K * N);
  for (int64_t j = 0; j < N; j++) bias[j] = (float)(j % 5) - 2.0f;
  for (int64_t i = 0; i < M; i++) rbias[i] = (float)(i % 7) - 3.0f;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) R[i * N + j] = ref(i, j, K);
  const int64_t ldc = N + 3; /* a row stride past N: the gap must stay untouched */
  for (int variant = 0; variant < 17; variant++) {
    for (int64_t e = 0; e < M * ldc; e++) C[e] = (e % ldc) >= N ? 1234.0f : (variant == 1 ? 1.0f : NAN);
    int rc = 0;
    px_gemm_epilogue ep = {bias, -20.0f, 25.0f, false, NULL};
    px_gemm_epilogue rep = {rbias, -20.0f, 25.0f, true, NULL}; /* one bias per row (NCHW convolution) */
    px_gemm_epilogue pep = {bias, -20.0f, 25.0f, false, post_twice_plus_one}; /* and a post */
    px_gemm_epilogue prep = {rbias, -20.0f, 25.0f, true, post_twice_plus_one};
    switch (variant) {
    case 0: rc = px_gemm_f32(&ctx, NULL, M, N, K, 1.0f, A, K, 1, B, N, 1, 0.0f, C, ldc); break;
    case 1: rc = px_gemm_f32(&ctx, NULL, M, N, K, 2.0f, At, 1, M, Bt, 1, K, 1.0f, C, ldc); break;
    case 2: rc = px_gemm_f32(&ctx, NULL, M, N, K, 1.0f, A, K, 1, Bt, 1, K, 0.0f, C, ldc); break;
    case 3: {
      bsrc s = {B, N};
      rc = px_gemm_f32_packed(&ctx, NULL, M, N, K, 1.0f, A, K, 1, pack_cols, &s, 0.0f, C, ldc);
      break;
    }
    case 4:
      px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
      rc = px_gemm_f32_prepacked(&ctx, NULL, M, N, K, A, K, 1, NULL, NULL, pb, 0.0f, C, ldc);
      break;
    case 5:
      px_gemm_f32_prepack_b(N, K, Bt, 1, K, pb);
      rc = px_gemm_f32_prepacked(&ctx, NULL, M, N, K, At, 1, M, NULL, NULL, pb, 0.0f, C, ldc);
      break;
    case 6: {
      asrc s = {A, K};
      px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
      rc = px_gemm_f32_prepacked_ep(&ctx, NULL, M, N, K, NULL, 0, 0, pack_rows, &s, pb, 0.0f, C, ldc,
                                    &ep);
      break;
    }
    case 7:
      px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
      rc = px_gemm_f32_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, NULL, NULL, pb, 0.0f, C, ldc, &ep);
      break;
    case 8: {
      bsrc s = {B, N};
      rc = px_gemm_f32_packed_ep(&ctx, NULL, M, N, K, 1.0f, A, K, 1, pack_cols, &s, 0.0f, C, ldc, &rep);
      break;
    }
    case 9:
      px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
      rc = px_gemm_f32_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, NULL, NULL, pb, 0.0f, C, ldc, &rep);
      break;
    case 10: /* float16 B, row-major, with the epilogue */
      px_gemm_h16_prepack_b(N, K, B16, N, 1, pb16);
      rc = px_gemm_h16_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, pb16, false, 0.0f, C, ldc, &ep);
      break;
    case 11: /* bfloat16 B, column-major */
      px_gemm_h16_prepack_b(N, K, Bt16, 1, K, pb16);
      rc = px_gemm_h16_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, pb16, true, 0.0f, C, ldc, NULL);
      break;
    case 12: /* the post after the last depth block: A in place */
      px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
      rc = px_gemm_f32_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, NULL, NULL, pb, 0.0f, C, ldc, &pep);
      break;
    case 13: { /* A packed by the caller's rows */
      asrc s = {A, K};
      px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
      rc = px_gemm_f32_prepacked_ep(&ctx, NULL, M, N, K, NULL, 0, 0, pack_rows, &s, pb, 0.0f, C, ldc,
                                    &pep);
      break;
    }
    case 14: { /* B packed per call, a bias per row */
      bsrc s = {B, N};
      rc = px_gemm_f32_packed_ep(&ctx, NULL, M, N, K, 1.0f, A, K, 1, pack_cols, &s, 0.0f, C, ldc, &prep);
      break;
    }
    case 15: /* float16 panels read in place (AVX-512), whatever M; a bias per row and a post */
      px_gemm_h16_prepack_b(N, K, B16, N, 1, pb16);
      rc = px_gemm_h16_panels_available()
               ? px_gemm_h16_panels_ep(&ctx, NULL, M, N, K, A, K, 1, pb16, false, 0.0f, C, ldc, &prep)
               : px_gemm_h16_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, pb16, false, 0.0f, C, ldc, &prep);
      break;
    case 16: /* bfloat16 panels read in place, A strided by columns, a bias per column and a post */
      px_gemm_h16_prepack_b(N, K, Bt16, 1, K, pb16);
      rc = px_gemm_h16_panels_available()
               ? px_gemm_h16_panels_ep(&ctx, NULL, M, N, K, At, 1, M, pb16, true, 0.0f, C, ldc, &pep)
               : px_gemm_h16_prepacked_ep(&ctx, NULL, M, N, K, At, 1, M, pb16, true, 0.0f, C, ldc, &pep);
      break;
    }
    CHECK(rc == 0, "variant %d: %s", variant, msg);
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < ldc; j++) {
        double want;
        if (j >= N)
          want = 1234.0;
        else if (variant == 1)
          want = 2.0 * R[i * N + j] + 1.0;
        else if (variant == 11)
          want = R[i * N + j];
        else if (variant == 14 || variant == 15)
          want = 2.0 * fmin(25.0, fmax(-20.0, R[i * N + j] + rbias[i])) + 1.0;
        else if (variant >= 12)
          want = 2.0 * fmin(25.0, fmax(-20.0, R[i * N + j] + bias[j])) + 1.0;
        else if (variant == 8 || variant == 9)
          want = fmin(25.0, fmax(-20.0, R[i * N + j] + rbias[i]));
        else if (variant >= 6)
          want = fmin(25.0, fmax(-20.0, R[i * N + j] + bias[j]));
        else
          want = R[i * N + j];
        if ((double)C[i * ldc + j] != want) {
          if (first < 0) first = i * ldc + j;
          wrong++;
        }
      }
    CHECK(wrong == 0, "M=%lld N=%lld K=%lld variant %d: %lld wrong, first at (%lld, %lld)",
          (long long)M, (long long)N, (long long)K, variant, (long long)wrong,
          (long long)(first / ldc), (long long)(first % ldc));
  }
out:
  free(A), free(At), free(B), free(Bt), free(C), free(bias), free(rbias), free(pb), free(R);
  free(B16), free(Bt16), free(pb16);
}

/* Random floats: sums of them depend on the order of the additions, so equal
 * results across thread counts mean equal orders. */
static float frand(uint64_t *st) {
  *st = *st * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((int64_t)(*st >> 40) - (1 << 23)) / (float)(1 << 23);
}

static void threads_invariance(void) {
  static const int64_t shapes[][3] = {{250, 70, 513}, {9, 300, 40}, {1000, 33, 64}, {40, 1000, 300}, {1, 1000, 600},
                                      {1, 997, 2051}, {3, 517, 200}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
    const int64_t M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *bias = malloc(sizeof(float) * (size_t)N);
    float *pb = malloc(px_gemm_f32_prepack_size(N, K) + 64);
    float *C[3][3];
    float *Bt = malloc(sizeof(float) * (size_t)(K * N)); /* B as a linear layer's weight, W[n, k] */
    for (int64_t k = 0; k < K; k++)
      for (int64_t j = 0; j < N; j++) Bt[j * K + k] = 0.0f;
    uint64_t st = 42 + sh;
    for (int64_t i = 0; i < M * K; i++) A[i] = frand(&st);
    for (int64_t i = 0; i < K * N; i++) B[i] = frand(&st);
    for (int64_t j = 0; j < N; j++) bias[j] = frand(&st);
    for (int64_t k = 0; k < K; k++)
      for (int64_t j = 0; j < N; j++) Bt[j * K + k] = B[k * N + j];
    px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
    px_gemm_epilogue ep = {bias, -0.5f, 0.5f, false, NULL};
    for (int t = 0; t < 3; t++) {
      CHECK(px_parallel_set_num_threads(t + 1) == 0, "set %d threads", t + 1);
      for (int v = 0; v < 3; v++) {
        C[t][v] = malloc(sizeof(float) * (size_t)(M * N));
        void *work = malloc(px_gemm_f32_work_size(M, N, K));
        int rc = v == 0   ? px_gemm_f32_prepacked_ep(&ctx, work, M, N, K, A, K, 1, NULL, NULL, pb, 0.0f,
                                                     C[t][v], N, &ep)
                 : v == 1 ? px_gemm_f32(&ctx, work, M, N, K, 1.0f, A, K, 1, B, N, 1, 0.0f, C[t][v], N)
                          : px_gemm_f32(&ctx, work, M, N, K, 1.0f, A, K, 1, Bt, 1, K, 0.0f, C[t][v], N);
        CHECK(rc == 0, "%s", msg);
        free(work);
      }
    }
    for (int t = 1; t < 3; t++)
      for (int v = 0; v < 3; v++)
        CHECK(memcmp(C[t][v], C[0][v], sizeof(float) * (size_t)(M * N)) == 0,
              "M=%lld N=%lld K=%lld: %d threads differ from 1 (%s)", (long long)M, (long long)N,
              (long long)K, t + 1, v == 0 ? "prepacked" : v == 1 ? "packed" : "transposed B");
    for (int t = 0; t < 3; t++) free(C[t][0]), free(C[t][1]), free(C[t][2]);
    free(A), free(B), free(Bt), free(bias), free(pb);
  }
  px_parallel_set_num_threads(1);
}

/* 16-bit B read in place (px_gemm_h16_panels_ep) against the same product
 * on B widened beforehand (px_gemm_f32_prepacked_ep), on random float16 and
 * bfloat16 values, at 1 and 3 threads: bit for bit, so the widening in
 * registers keeps the engine's order of multiply-adds. */
static void h16_panels_agree(void) {
  if (!px_gemm_h16_panels_available()) return;
  static const int64_t shapes[][3] = {{1, 1000, 600}, {8, 1024, 256}, {5, 70, 513}, {33, 300, 1030}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
    for (int bf16 = 0; bf16 < 2; bf16++) {
      const int64_t M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
      float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
      uint16_t *B16 = malloc(sizeof(uint16_t) * (size_t)(K * N));
      uint16_t *pb16 = malloc(px_gemm_h16_prepack_size(N, K) + 64);
      float *pb = malloc(px_gemm_f32_prepack_size(N, K) + 64), *bias = malloc(sizeof(float) * (size_t)N);
      float *want = malloc(sizeof(float) * (size_t)(M * N)), *got = malloc(sizeof(float) * (size_t)(M * N));
      uint64_t st = 7 + sh;
      for (int64_t i = 0; i < M * K; i++) A[i] = frand(&st);
      for (int64_t i = 0; i < K * N; i++) B[i] = frand(&st);
      for (int64_t j = 0; j < N; j++) bias[j] = frand(&st);
      if (bf16) {
        px_f32_to_bf16(B16, B, K * N);
        px_bf16_to_f32(B, B16, K * N);
      } else {
        px_f32_to_f16(B16, B, K * N);
        px_f16_to_f32(B, B16, K * N);
      }
      px_gemm_f32_prepack_b(N, K, B, N, 1, pb);
      px_gemm_h16_prepack_b(N, K, B16, N, 1, pb16);
      px_gemm_epilogue ep = {bias, -0.5f, 0.5f, false, NULL};
      for (int t = 1; t <= 3; t += 2) {
        CHECK(px_parallel_set_num_threads(t) == 0, "set %d threads", t);
        int rc = px_gemm_f32_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, NULL, NULL, pb, 0.0f, want, N, &ep);
        rc |= px_gemm_h16_panels_ep(&ctx, NULL, M, N, K, A, K, 1, pb16, bf16, 0.0f, got, N, &ep);
        CHECK(rc == 0, "%s", msg);
        CHECK(memcmp(want, got, sizeof(float) * (size_t)(M * N)) == 0,
              "M=%lld N=%lld K=%lld %s, %d threads: 16-bit panels in place differ from B widened first",
              (long long)M, (long long)N, (long long)K, bf16 ? "bfloat16" : "float16", t);
      }
      free(A), free(B), free(B16), free(pb16), free(pb), free(bias), free(want), free(got);
    }
  px_parallel_set_num_threads(1);
}

/* Indirect-GEMM convolution (px_gemm_f32_conv, AVX-512 machines): NHWC
 * input of small integers against a direct sum over the taps, with the
 * padding, strides, dilations, groups (the group's channels a slice of each
 * pixel), images, row offsets (row0), bias per column, the clamp and a
 * post, at 1, 2 and 3 threads; every result exact. */
static void one_conv(int64_t NI, int64_t H, int64_t W, int64_t Cin, int64_t Cg, int64_t N, int64_t KH,
                     int64_t KW, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt, int64_t pl,
                     int64_t pb_, int64_t pr, int64_t row0) {
  const int64_t OH = (H + pt + pb_ - dh * (KH - 1) - 1) / sh + 1;
  const int64_t OW = (W + pl + pr - dw * (KW - 1) - 1) / sw + 1;
  const int64_t K = KH * KW * Cg, M = NI * OH * OW - row0, c0 = Cin - Cg; /* the last group */
  float *x = malloc(sizeof(float) * (size_t)(NI * H * W * Cin));
  float *B = malloc(sizeof(float) * (size_t)(K * N)), *bias = malloc(sizeof(float) * (size_t)N);
  float *pbk = malloc(px_gemm_f32_prepack_size(N, K) + 64);
  float *C = malloc(sizeof(float) * (size_t)(M * N + 1));
  if (!x || !B || !bias || !pbk || !C) {
    CHECK(0, "out of memory");
    goto out;
  }
  for (int64_t e = 0; e < NI * H * W * Cin; e++) x[e] = (float)((e * 7) % 11 - 5);
  for (int64_t e = 0; e < K * N; e++) B[e] = (float)((e * 5) % 7 - 3);
  for (int64_t j = 0; j < N; j++) bias[j] = (float)(j % 5) - 2.0f;
  px_gemm_f32_prepack_b(N, K, B, N, 1, pbk);
  px_gemm_conv cv = {x + c0, H * W * Cin, H, W, Cin, Cg, KH, KW, sh, sw, dh, dw, pt, pl, OH, OW, row0};
  px_gemm_epilogue ep = {bias, -60.0f, 70.0f, false, post_twice_plus_one};
  for (int t = 1; t <= 3; t++) {
    CHECK(px_parallel_set_num_threads(t) == 0, "set %d threads", t);
    C[M * N] = 1234.0f;
    int rc = px_gemm_f32_conv(&ctx, NULL, &cv, M, N, pbk, C, N, &ep);
    CHECK(rc == 0, "%s", msg);
    int64_t wrong = 0;
    for (int64_t r = 0; r < M; r++) {
      int64_t p = row0 + r, n = p / (OH * OW), oh = p % (OH * OW) / OW, ow = p % OW;
      for (int64_t j = 0; j < N; j++) {
        double sum = bias[j];
        for (int64_t ki = 0; ki < KH; ki++)
          for (int64_t kj = 0; kj < KW; kj++) {
            int64_t ih = oh * sh - pt + ki * dh, iw = ow * sw - pl + kj * dw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            for (int64_t c = 0; c < Cg; c++)
              sum += (double)x[((n * H + ih) * W + iw) * Cin + c0 + c] * B[((ki * KW + kj) * Cg + c) * N + j];
          }
        wrong += (double)C[r * N + j] != 2.0 * fmin(70.0, fmax(-60.0, sum)) + 1.0;
      }
    }
    CHECK(wrong == 0 && C[M * N] == 1234.0f,
          "conv %lldx%lldx%lld Cg %lld -> %lld, %lldx%lld kernel, %d threads: %lld wrong", (long long)NI,
          (long long)H, (long long)W, (long long)Cg, (long long)N, (long long)KH, (long long)KW, t,
          (long long)wrong);
  }
  CHECK(px_parallel_set_num_threads(1) == 0, "reset threads");
out:
  free(x), free(B), free(bias), free(pbk), free(C);
}

int main(int argc, char **argv) {
  (void)argc;
  setenv("PYEXEC_PARALLEL_MIN_COST", "1", 1); /* split even small products over the threads */
  static const int64_t Ms[] = {1, 5, 7, 8, 9, 17, 121, 250};
  static const int64_t Ns[] = {1, 3, 16, 17, 31, 32, 33, 70};
  static const int64_t Ks[] = {1, 7, 300, 513};
  for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
    for (size_t b = 0; b < sizeof Ns / sizeof Ns[0]; b++)
      for (size_t c = 0; c < sizeof Ks / sizeof Ks[0]; c++) one_shape(Ms[a], Ns[b], Ks[c]);
  one_shape(17, 33, 1024); /* rows 4 KiB apart: A packed instead of read in place */
  one_shape(9, 70, 2048);
  one_shape(13, 1100, 40); /* several column blocks (NC) */
  one_shape(1, 1100, 600); /* one row (the decode step's streaming kernel) over column and depth blocks */
  one_shape(1, 95, 2048);  /* one row, 4 KiB rows read in place, an odd last panel */
  threads_invariance();
  h16_panels_agree();
  if (px_gemm_f32_conv_available()) {
    one_conv(1, 9, 11, 96, 96, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0);  /* depth blocks start mid-tap */
    one_conv(2, 13, 17, 16, 8, 48, 3, 2, 2, 3, 2, 1, 2, 1, 2, 1, 0);  /* groups, stride, dilation */
    one_conv(2, 7, 6, 24, 24, 17, 5, 5, 2, 1, 1, 2, 2, 3, 1, 0, 5);   /* row0, odd N, asymmetric pads */
    one_conv(1, 20, 20, 8, 8, 70, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 11);  /* 1x1 stride 2, three panels */
    one_conv(1, 5, 5, 300, 300, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0);  /* a tap deeper than a block */
    one_conv(2, 23, 21, 3, 3, 64, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0);   /* kernel rows as one run */
    one_conv(1, 12, 40, 4, 4, 33, 3, 9, 1, 1, 1, 1, 1, 4, 1, 4, 3);   /* runs across depth blocks */
    one_conv(1, 14, 14, 40, 40, 24, 3, 3, 1, 1, 12, 12, 12, 12, 12, 12, 0); /* taps in the padding skipped */
    one_conv(1, 9, 10, 16, 16, 8, 3, 3, 1, 1, 24, 24, 24, 24, 24, 24, 0);   /* only the centre tap inside */
    one_conv(1, 6, 9, 4, 4, 20, 3, 3, 1, 1, 1, 1, 3, 3, 3, 2, 0);         /* padding past the kernel: a run outside for some rows of a tile */
  }
  px_scratch_release(&ctx);
  const char *isa = getenv("PYEXEC_GEMM_ISA");
  printf("GEMM (%s, panel width %d): %d checks, %d failed\n", isa ? isa : "best", px_gemm_f32_panel_width(),
         checks, failures);
  if (failures) return 1;
#if defined(__x86_64__)
  /* the fallbacks, each in a fresh process (x86-64 only: under qemu-user a
   * child would be exec'd without the emulator; PYEXEC_GEMM_ISA=portable
   * checks the fallback there by hand) */
  if (!isa) {
    static const char *const others[] = {"avx2", "portable"};
    for (int o = 0; o < 2; o++) {
      fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        setenv("PYEXEC_GEMM_ISA", others[o], 1);
        execv("/proc/self/exe", argv);
        _exit(127);
      }
      int st = 0;
      if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "the %s run failed\n", others[o]);
        return 1;
      }
    }
  }
#else
  (void)argv;
#endif
  return 0;
}
