/*
 * qgemm_bench.c - the integer GEMM (kernels/gemm/qgemm.h) at LLM-like shapes
 * against the machine's memory bandwidth, one thread.
 *
 * Built and run by bench_qgemm.py, linked against the library's objects (the
 * integer GEMM is internal): cc -O2 -Inative/include -Inative/src
 * qgemm_bench.c <objects> -lm -lpthread. Prints one JSON object on stdout.
 *
 * Bandwidth: memcpy between two 256 MiB buffers (bytes copied per second)
 * and a plain read of 256 MiB (bytes summed per second), each far larger than
 * the last-level cache; best of the runs.
 * Products: px_qgemm_qd8_f32 (activations already quantized to int8, as the
 * XNNPACK FullyConnected node has them) for 8-bit per-channel weights (qc8w)
 * and 4-bit weights with per-block scales (qb4w, blocks of 32 and 128) or
 * per-channel scales (qc4w); M = 1 (decode) and M = 64 (prefill); K = N =
 * 2048 and 4096; each micro-kernel path the CPU has. At M = 1 the product
 * cycles through enough packed copies of the weights to exceed 128 MiB, so
 * every call streams its weights from memory, not from the cache; GB/s is the
 * packed weight bytes (with their scales and sums) read per second, from the
 * quickest single call, beside a plain read of as many bytes from memory
 * timed the same way (the bound for that call on this machine now: on a
 * shared machine both move together, their ratio much less).
 * GOP/s = 2 M N K / s. Every call is timed alone and the quickest kept: on a
 * shared machine that is the figure least disturbed by other processes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm/qgemm.h"
#include "kernels/kernel.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

#define BW_BYTES ((size_t)256 << 20)

static volatile uint64_t sink;

/* Sums n bytes (a multiple of 32) of p, as a streaming read: 128 bytes per
 * step in four independent vector sums, so that the loop is not what limits
 * it (a scalar loop reads memory slower than the products do). */
typedef uint64_t qb_v4 __attribute__((vector_size(32)));
static uint64_t read_bytes(const uint8_t *p8, size_t n) {
  qb_v4 s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    qb_v4 a, b, c, d;
    memcpy(&a, p8 + i, 32);
    memcpy(&b, p8 + i + 32, 32);
    memcpy(&c, p8 + i + 64, 32);
    memcpy(&d, p8 + i + 96, 32);
    s0 += a;
    s1 += b;
    s2 += c;
    s3 += d;
  }
  for (; i < n; i += 32) {
    qb_v4 a;
    memcpy(&a, p8 + i, 32);
    s0 += a;
  }
  qb_v4 t = s0 + s1 + s2 + s3;
  return t[0] + t[1] + t[2] + t[3];
}

static void bandwidth(int runs, double *copy_gbs, double *read_gbs) {
  uint8_t *src = malloc(BW_BYTES), *dst = malloc(BW_BYTES);
  if (!src || !dst) {
    *copy_gbs = *read_gbs = 0.0;
    free(src);
    free(dst);
    return;
  }
  for (size_t i = 0; i < BW_BYTES; i++) src[i] = (uint8_t)rnd();
  memset(dst, 2, BW_BYTES);
  double best_c = 1e30, best_r = 1e30;
  for (int r = 0; r < runs; r++) {
    double t = now_s();
    memcpy(dst, src, BW_BYTES);
    t = now_s() - t;
    if (t < best_c) best_c = t;
    sink += dst[rnd() % BW_BYTES];
    t = now_s();
    sink += read_bytes(src, BW_BYTES);
    t = now_s() - t;
    if (t < best_r) best_r = t;
  }
  *copy_gbs = (double)BW_BYTES / best_c / 1e9;
  *read_gbs = (double)BW_BYTES / best_r / 1e9;
  free(src);
  free(dst);
}

typedef struct {
  const char *name;
  int bits;
  int64_t block;
} wkind;

static char msg[512];

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 5;
  if (runs < 1) runs = 1;
  int quick = argc > 2 && strcmp(argv[2], "quick") == 0;
  /* optional: only the products whose name contains argv[3], of size argv[4] */
  const char *only = argc > 3 ? argv[3] : NULL;
  int64_t only_n = argc > 4 ? atoll(argv[4]) : 0;
  px_ctx ctx = {.op = "bench", .msg = msg, .msg_cap = sizeof msg};
  double copy_gbs, read_gbs;
  bandwidth(runs, &copy_gbs, &read_gbs);
  uint8_t *rbuf = malloc(BW_BYTES);
  if (!rbuf) return 1;
  for (size_t i = 0; i < BW_BYTES; i++) rbuf[i] = (uint8_t)rnd();
  printf("{\"copy_gbs\": %.3f, \"read_gbs\": %.3f, \"best_path\": \"%s\", \"results\": [", copy_gbs, read_gbs,
         px_qgemm_path_name(px_qgemm_path()));

  static const wkind kinds[] = {{"qd8 x qc8w", 8, 0}, {"qd8 x qb4w g32", 4, 32}, {"qd8 x qb4w g128", 4, 128},
                                {"qd8 x qc4w", 4, 0}};
  static const int paths[] = {PX_QGEMM_AUTO, PX_QGEMM_AVX2, PX_QGEMM_NEON, PX_QGEMM_PORTABLE};
  static const int64_t sizes[] = {2048, 4096};
  static const int64_t Ms[] = {1, 64};
  int first = 1;
  int best = px_qgemm_path();
  for (size_t is = 0; is < sizeof sizes / sizeof *sizes; is++) {
    int64_t N = sizes[is], K = sizes[is];
    for (size_t ik = 0; ik < sizeof kinds / sizeof *kinds; ik++) {
      const wkind *wk = &kinds[ik];
      if ((only && !strstr(wk->name, only)) || (only_n && only_n != N)) continue;
      int64_t row_bytes = wk->bits == 8 ? K : K / 2;
      uint8_t *data = malloc((size_t)(N * row_bytes));
      int64_t nsc = wk->block ? N * (K / wk->block) : N;
      float *scales = malloc(sizeof(float) * (size_t)nsc);
      float *bias = malloc(sizeof(float) * (size_t)N);
      for (int64_t i = 0; i < N * row_bytes; i++) data[i] = (uint8_t)rnd();
      for (int64_t i = 0; i < nsc; i++) scales[i] = 0.001f + (float)(rnd() % 1000) * 1e-6f;
      for (int64_t i = 0; i < N; i++) bias[i] = (float)(rnd() % 100) * 0.01f;
      px_qweights_desc d = {.bits = wk->bits, .N = N, .K = K, .data = data, .row_bytes = row_bytes,
                            .zero_point = wk->bits == 4 ? 8 : 0, .block = wk->block, .scales = scales,
                            .bias = bias};
      px_qweights *w0 = px_qweights_pack(&d);
      if (!w0) {
        fprintf(stderr, "pack failed\n");
        return 1;
      }
      size_t wbytes = px_qweights_bytes(w0);
      /* copies so that M = 1 streams from memory */
      int ncopies = (int)(((size_t)128 << 20) / wbytes + 1);
      px_qweights **ws = malloc(sizeof *ws * (size_t)ncopies);
      ws[0] = w0;
      /* different bytes in every copy (and in every buffer below), so that no
       * page can be shared with another (kernel same-page merging) */
      for (int c = 1; c < ncopies; c++) {
        for (int64_t i = 0; i < N * row_bytes; i++) data[i] = (uint8_t)rnd();
        ws[c] = px_qweights_pack(&d);
        if (!ws[c]) {
          fprintf(stderr, "pack failed\n");
          return 1;
        }
      }
      int8_t *a = malloc((size_t)(64 * K));
      float *out = malloc(sizeof(float) * (size_t)(64 * N));
      int32_t azp[64];
      float as[64];
      for (int64_t i = 0; i < 64 * K; i++) a[i] = (int8_t)rnd();
      for (int i = 0; i < 64; i++) {
        azp[i] = (int32_t)(rnd() % 256) - 128;
        as[i] = 0.01f;
      }
      for (size_t ip = 0; ip < sizeof paths / sizeof *paths; ip++) {
        int path = paths[ip] == PX_QGEMM_AUTO ? best : paths[ip];
        if (ip > 0 && path == best) continue;
        if (px_qgemm_use_path(path) != 0) continue;
        for (size_t im = 0; im < sizeof Ms / sizeof *Ms; im++) {
          int64_t M = Ms[im];
          if (path == PX_QGEMM_PORTABLE && (M > 1 || quick)) continue;
          int copies = M == 1 ? ncopies : 1;
          /* calls per timed run: about 0.2 s of work */
          double t = now_s();
          ctx.scratch_cur = ctx.scratch;
          ctx.scratch_used = 0;
          px_qgemm_qd8_f32(&ctx, ws[0], M, a, K, azp, as, out, N, -1e30f, 1e30f);
          double one = now_s() - t;
          int calls = (int)(0.2 / (one > 1e-7 ? one : 1e-7));
          if (calls < 3) calls = 3;
          if (quick && calls > 20) calls = 20;
          double best_t = 1e30, best_read = 1e30;
          for (int r = 0; r < runs; r++) {
            if (M == 1) {
              /* each call timed alone, the quickest kept (the least disturbed
               * by other processes), and a plain read of as many bytes from
               * memory timed the same way */
              for (int c = 0; c < calls; c++) {
                ctx.scratch_cur = ctx.scratch;
                ctx.scratch_used = 0;
                t = now_s();
                px_qgemm_qd8_f32(&ctx, ws[c % copies], M, a, K, azp, as, out, N, -1e30f, 1e30f);
                t = now_s() - t;
                if (t < best_t) best_t = t;
                size_t slice = wbytes / 32 * 32, nslices = BW_BYTES / slice;
                t = now_s();
                sink += read_bytes(rbuf + (size_t)c % nslices * slice, slice);
                t = now_s() - t;
                if (t < best_read) best_read = t;
              }
              continue;
            }
            for (int c = 0; c < calls; c++) { /* each call timed alone too: the least disturbed */
              ctx.scratch_cur = ctx.scratch;
              ctx.scratch_used = 0;
              t = now_s();
              px_qgemm_qd8_f32(&ctx, ws[c % copies], M, a, K, azp, as, out, N, -1e30f, 1e30f);
              t = now_s() - t;
              if (t < best_t) best_t = t;
            }
          }
          double gops = 2.0 * (double)M * (double)N * (double)K / best_t / 1e9;
          double gbs = (double)wbytes / best_t / 1e9;
          double rgbs = M == 1 ? (double)(wbytes / 32 * 32) / best_read / 1e9 : 0.0;
          printf("%s{\"kind\": \"%s\", \"path\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"us\": %.2f, "
                 "\"gops\": %.2f, \"weight_bytes\": %zu, \"weight_gbs\": %.3f, \"read_same_gbs\": %.3f}",
                 first ? "" : ", ", wk->name, px_qgemm_path_name(path), (long long)M, (long long)N, (long long)K,
                 best_t * 1e6, gops, wbytes, gbs, rgbs);
          first = 0;
          fflush(stdout);
        }
      }
      px_qgemm_use_path(PX_QGEMM_AUTO);
      for (int c = 0; c < ncopies; c++) px_qweights_free(ws[c]);
      free(ws);
      free(a);
      free(out);
      free(data);
      free(scales);
      free(bias);
    }
  }
  printf("]}\n");
  px_scratch_release(&ctx);
  free(rbuf);
  return 0;
}
