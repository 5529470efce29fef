/*
 * gemm_peak.c - the machine's single-core float32 FMA peak and the GEMM
 * engine's speed at the sizes the model zoo multiplies, as a fraction of it.
 *
 * Built and run by bench_gemm.py, linked against the library's objects (the
 * GEMM engine is internal): cc -O2 -Inative/include -Inative/src gemm_peak.c
 * <objects> -lm -lpthread. Prints one JSON object on stdout.
 *
 * Peak: a loop of independent fused multiply-adds on registers only (no
 * memory), 512-bit and 256-bit, enough chains in flight to hide the FMA
 * latency; GFLOP/s = 2 * lanes * FMAs / s. The best of several runs.
 * GEMM: px_gemm_f32_prepacked on a pre-packed constant B (as convolution and
 * linear weights are packed at load), A a plain row-major matrix, C
 * overwritten; best of several runs of a calibrated number of calls.
 * One thread (PYEXEC_NUM_THREADS=1). On a shared machine both figures are
 * the best of many short runs, and the peak is measured again between the
 * products' runs, so that both see the machine's quiet moments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef PEAK_ONLY /* -DPEAK_ONLY: the peak alone, built without the library */
#include "core/parallel.h"
#include "kernels/gemm/gemm.h"
#endif

/* Wall-clock time. (Thread CPU time would ignore other processes, but in a
 * virtual machine it undercounts: it gave an FMA peak of 64 flops a cycle.) */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* 12 independent chains of 512-bit FMAs; returns a value so nothing is
 * optimised away. */
__attribute__((target("avx512f"), noinline)) static float fma_loop_512(long iters, float s) {
  __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
  /* distinct starting values, and every chain passed through an empty asm
   * each iteration: otherwise the compiler merges identical chains */
  __m512 c0 = _mm512_set1_ps(s), c1 = _mm512_set1_ps(s + 1), c2 = _mm512_set1_ps(s + 2);
  __m512 c3 = _mm512_set1_ps(s + 3), c4 = _mm512_set1_ps(s + 4), c5 = _mm512_set1_ps(s + 5);
  __m512 c6 = _mm512_set1_ps(s + 6), c7 = _mm512_set1_ps(s + 7), c8 = _mm512_set1_ps(s + 8);
  __m512 c9 = _mm512_set1_ps(s + 9), c10 = _mm512_set1_ps(s + 10), c11 = _mm512_set1_ps(s + 11);
  for (long i = 0; i < iters; i++) {
    c0 = _mm512_fmadd_ps(a, c0, b);
    c1 = _mm512_fmadd_ps(a, c1, b);
    c2 = _mm512_fmadd_ps(a, c2, b);
    c3 = _mm512_fmadd_ps(a, c3, b);
    c4 = _mm512_fmadd_ps(a, c4, b);
    c5 = _mm512_fmadd_ps(a, c5, b);
    c6 = _mm512_fmadd_ps(a, c6, b);
    c7 = _mm512_fmadd_ps(a, c7, b);
    c8 = _mm512_fmadd_ps(a, c8, b);
    c9 = _mm512_fmadd_ps(a, c9, b);
    c10 = _mm512_fmadd_ps(a, c10, b);
    c11 = _mm512_fmadd_ps(a, c11, b);
    __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5));
    __asm__ volatile("" : "+v"(c6), "+v"(c7), "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11));
  }
  __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  t = _mm512_add_ps(t, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  return _mm512_reduce_add_ps(t);
}

/* The same with 256-bit FMAs (AVX2). */
__attribute__((target("avx2,fma"), noinline)) static float fma_loop_256(long iters, float s) {
  __m256 a = _mm256_set1_ps(1.0000001f), b = _mm256_set1_ps(0.9999999f);
  /* distinct starting values, and every chain passed through an empty asm
   * each iteration: otherwise the compiler merges identical chains */
  __m256 c0 = _mm256_set1_ps(s), c1 = _mm256_set1_ps(s + 1), c2 = _mm256_set1_ps(s + 2);
  __m256 c3 = _mm256_set1_ps(s + 3), c4 = _mm256_set1_ps(s + 4), c5 = _mm256_set1_ps(s + 5);
  __m256 c6 = _mm256_set1_ps(s + 6), c7 = _mm256_set1_ps(s + 7), c8 = _mm256_set1_ps(s + 8);
  __m256 c9 = _mm256_set1_ps(s + 9), c10 = _mm256_set1_ps(s + 10), c11 = _mm256_set1_ps(s + 11);
  for (long i = 0; i < iters; i++) {
    c0 = _mm256_fmadd_ps(a, c0, b);
    c1 = _mm256_fmadd_ps(a, c1, b);
    c2 = _mm256_fmadd_ps(a, c2, b);
    c3 = _mm256_fmadd_ps(a, c3, b);
    c4 = _mm256_fmadd_ps(a, c4, b);
    c5 = _mm256_fmadd_ps(a, c5, b);
    c6 = _mm256_fmadd_ps(a, c6, b);
    c7 = _mm256_fmadd_ps(a, c7, b);
    c8 = _mm256_fmadd_ps(a, c8, b);
    c9 = _mm256_fmadd_ps(a, c9, b);
    c10 = _mm256_fmadd_ps(a, c10, b);
    c11 = _mm256_fmadd_ps(a, c11, b);
    __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5));
    __asm__ volatile("" : "+x"(c6), "+x"(c7), "+x"(c8), "+x"(c9), "+x"(c10), "+x"(c11));
  }
  __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  t = _mm256_add_ps(t, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  float v[8];
  _mm256_storeu_ps(v, t);
  return v[0] + v[7];
}

/* 12 independent chains of 512-bit vpdpbusd (64 int8 multiply-adds each),
 * the integer product's instruction; the same guards against merging. */
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) static int dpbusd_loop_512(long iters, int s) {
  __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x01FF02FE);
  __m512i c0 = _mm512_set1_epi32(s), c1 = _mm512_set1_epi32(s + 1), c2 = _mm512_set1_epi32(s + 2);
  __m512i c3 = _mm512_set1_epi32(s + 3), c4 = _mm512_set1_epi32(s + 4), c5 = _mm512_set1_epi32(s + 5);
  __m512i c6 = _mm512_set1_epi32(s + 6), c7 = _mm512_set1_epi32(s + 7), c8 = _mm512_set1_epi32(s + 8);
  __m512i c9 = _mm512_set1_epi32(s + 9), c10 = _mm512_set1_epi32(s + 10), c11 = _mm512_set1_epi32(s + 11);
  for (long i = 0; i < iters; i++) {
    c0 = _mm512_dpbusd_epi32(c0, a, b);
    c1 = _mm512_dpbusd_epi32(c1, a, b);
    c2 = _mm512_dpbusd_epi32(c2, a, b);
    c3 = _mm512_dpbusd_epi32(c3, a, b);
    c4 = _mm512_dpbusd_epi32(c4, a, b);
    c5 = _mm512_dpbusd_epi32(c5, a, b);
    c6 = _mm512_dpbusd_epi32(c6, a, b);
    c7 = _mm512_dpbusd_epi32(c7, a, b);
    c8 = _mm512_dpbusd_epi32(c8, a, b);
    c9 = _mm512_dpbusd_epi32(c9, a, b);
    c10 = _mm512_dpbusd_epi32(c10, a, b);
    c11 = _mm512_dpbusd_epi32(c11, a, b);
    __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5));
    __asm__ volatile("" : "+v"(c6), "+v"(c7), "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11));
  }
  __m512i t = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                               _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
  t = _mm512_add_epi32(t, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
  return _mm512_reduce_add_epi32(t);
}

/* Best int8 GOP/s (2 x 64 operations a vpdpbusd) of `runs` timed loops; 0
 * without AVX-512 VNNI. */
static double peak_int8_gops(int runs) {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))) return 0.0;
  const long iters = 4 * 1000 * 1000;
  double best = 0.0;
  volatile int sink = 0;
  for (int r = 0; r < runs; r++) {
    double t0 = now_s();
    sink += dpbusd_loop_512(iters, r);
    double dt = now_s() - t0;
    double g = 2.0 * 64 * 12.0 * (double)iters / dt * 1e-9;
    if (g > best) best = g;
  }
  (void)sink;
  return best;
}

/* Best GFLOP/s of `runs` timed loops of `iters` iterations of 12 FMAs of
 * `lanes` floats; 0 when the CPU lacks the instructions. */
static double peak_gflops(int lanes, int runs) {
  __builtin_cpu_init();
  if (lanes == 16 && !__builtin_cpu_supports("avx512f")) return 0.0;
  if (lanes == 8 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0.0;
  const long iters = 4 * 1000 * 1000;
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int r = 0; r < runs; r++) {
    double t0 = now_s();
    sink += lanes == 16 ? fma_loop_512(iters, (float)r) : fma_loop_256(iters, (float)r);
    double dt = now_s() - t0;
    double g = 2.0 * lanes * 12.0 * (double)iters / dt * 1e-9;
    if (g > best) best = g;
  }
  (void)sink;
  return best;
}
#else
static double peak_gflops(int lanes, int runs) {
  (void)lanes;
  (void)runs;
  return 0.0;
}
static double peak_int8_gops(int runs) {
  (void)runs;
  return 0.0;
}
#endif

static double peak512, peak256; /* best seen so far */

static void peak_update(int runs) {
  double a = peak_gflops(16, runs), b = peak_gflops(8, runs);
  if (a > peak512) peak512 = a;
  if (b > peak256) peak256 = b;
}

#ifdef PEAK_ONLY
int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 10;
  peak_update(runs < 1 ? 1 : runs);
  printf("{\"peak_avx512_gflops\": %.2f, \"peak_avx2_gflops\": %.2f, \"peak_vnni_int8_gops\": %.2f}\n", peak512,
         peak256, peak_int8_gops(runs < 1 ? 1 : runs));
  return 0;
}
#else
typedef struct shape {
  const char *name;
  int64_t M, N, K;
} shape;

/* The products behind the zoo's convolutions (NHWC: M output pixels, N output
 * channels, K = taps x input channels) and matrix products. */
static const shape SHAPES[] = {
    {"resnet18 3x3 56x56x64", 3136, 64, 576},
    {"resnet18 3x3 28x28x128", 784, 128, 1152},
    {"resnet18 3x3 14x14x256", 196, 256, 2304},
    {"resnet18 3x3 7x7x512", 49, 512, 4608},
    {"mobile_block 1x1 56x56 32->128", 3136, 128, 32},
    {"mobile_block 1x1 56x56 128->32", 3136, 32, 128},
    {"mobilenet_v2 1x1 112x112 16->96", 12544, 96, 16},
    {"mobilenet_v2 1x1 56x56 24->144", 3136, 144, 24},
    {"mobilenet_v2 1x1 28x28 192->32", 784, 32, 192},
    {"mobilenet_v2 1x1 14x14 384->64", 196, 64, 384},
    {"mobilenet_v2 1x1 7x7 960->320", 49, 320, 960},
    {"transformer 128x256 @ 256x1024", 128, 1024, 256},
    {"transformer 128x1024 @ 1024x256", 128, 256, 1024},
    {"square 512", 512, 512, 512},
};

static double bench_shape(const shape *s, int runs, double *checksum) {
  float *A = aligned_alloc(64, sizeof(float) * (size_t)(s->M * s->K + 16));
  float *B = aligned_alloc(64, sizeof(float) * (size_t)(s->K * s->N + 16));
  float *C = aligned_alloc(64, sizeof(float) * (size_t)(s->M * s->N + 16));
  size_t pbytes = px_gemm_f32_prepack_size(s->N, s->K);
  float *pb = aligned_alloc(64, (pbytes + 63) / 64 * 64);
  size_t wbytes = px_gemm_f32_work_size(s->M, s->N, s->K);
  void *work = aligned_alloc(64, (wbytes + 63) / 64 * 64);
  if (!A || !B || !C || !pb || !work) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < s->M * s->K; i++) A[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
  for (int64_t i = 0; i < s->K * s->N; i++) B[i] = (float)((i * 5) % 11) * 0.1f - 0.5f;
  px_gemm_f32_prepack_b(s->N, s->K, B, s->N, 1, pb);
  double flops = 2.0 * (double)s->M * (double)s->N * (double)s->K;
  int calls = 1;
  for (;;) { /* calibrate to about 10 ms a run (short runs catch the quiet moments) */
    double t0 = now_s();
    for (int c = 0; c < calls; c++)
      px_gemm_f32_prepacked(NULL, work, s->M, s->N, s->K, A, s->K, 1, NULL, NULL, pb, 0.0f, C,
                            s->N);
    double dt = now_s() - t0;
    if (dt > 0.004 || calls > 1 << 20) {
      calls = (int)(calls * 0.01 / dt) + 1;
      break;
    }
    calls *= 4;
  }
  double best = 0.0;
  for (int r = 0; r < runs; r++) {
    double t0 = now_s();
    for (int c = 0; c < calls; c++)
      px_gemm_f32_prepacked(NULL, work, s->M, s->N, s->K, A, s->K, 1, NULL, NULL, pb, 0.0f, C,
                            s->N);
    double g = flops * calls / (now_s() - t0) * 1e-9;
    if (g > best) best = g;
    peak_update(2);
  }
  double cs = 0.0;
  for (int64_t i = 0; i < s->M * s->N; i++) cs += C[i];
  *checksum = cs;
  free(A), free(B), free(C), free(pb), free(work);
  return best;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 5;
  if (runs < 1) runs = 1;
  peak_update(runs);
  size_t n = sizeof SHAPES / sizeof SHAPES[0];
  double g[sizeof SHAPES / sizeof SHAPES[0]], cs[sizeof SHAPES / sizeof SHAPES[0]];
  for (size_t i = 0; i < n; i++) g[i] = bench_shape(&SHAPES[i], runs, &cs[i]);
  peak_update(runs);
  printf("{\"threads\": %d, \"peak_avx512_gflops\": %.2f, \"peak_avx2_gflops\": %.2f, \"gemm\": [",
         px_parallel_threads(), peak512, peak256);
  for (size_t i = 0; i < n; i++)
    printf("%s{\"name\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"gflops\": %.2f, "
           "\"checksum\": %.6g}",
           i ? ", " : "", SHAPES[i].name, (long long)SHAPES[i].M, (long long)SHAPES[i].N,
           (long long)SHAPES[i].K, g[i], cs[i]);
  printf("]}\n");
  return 0;
}
#endif /* PEAK_ONLY */
