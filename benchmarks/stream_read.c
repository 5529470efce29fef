/*
 * stream_read.c - the machine's streaming-read bandwidth: how fast one or
 * more threads read a buffer far larger than the last-level cache, the limit
 * that a decode step, which reads every weight once, cannot beat.
 *
 * A shared library for bench_llm.py (ctypes), so that the bandwidth is
 * measured in the same rounds as the decode it bounds (a noisy neighbour
 * then slows both alike):
 *
 *   cc -O2 -shared -fPIC -pthread stream_read.c -o libstream_read.so
 *   double stream_read_gbps(size_t mib, int threads, int runs)
 *
 * returns GB/s (1e9 bytes a second), the best of `runs` reads of a buffer
 * of `mib` MiB (allocated, written and kept on the first call of a size).
 * Each thread reads its own contiguous part with 32-byte (AVX2) or 16-byte
 * loads summed into four independent accumulators, so no dependency limits
 * the loads; the threads are started together and the time runs from the
 * first start to the last finish. Built with -DSTREAM_MAIN it is also a
 * program: ./stream_read [MiB] [runs] [max threads] prints JSON.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef long long v4i __attribute__((vector_size(32)));
typedef long long v4i_u __attribute__((vector_size(32), aligned(8), may_alias));

#define READ_LOOP                                   \
  v4i s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};       \
  for (; p < end; p += 128) {                       \
    s0 += *(const v4i_u *)p;                        \
    s1 += *(const v4i_u *)(p + 32);                 \
    s2 += *(const v4i_u *)(p + 64);                 \
    s3 += *(const v4i_u *)(p + 96);                 \
  }                                                 \
  v4i s = s0 + s1 + s2 + s3;                        \
  return s[0] + s[1] + s[2] + s[3];

static long long read_plain(const char *p, const char *end) { READ_LOOP }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static long long read_avx2(const char *p, const char *end) { READ_LOOP }
#endif

typedef struct {
  const char *p;
  size_t n;
  pthread_barrier_t *start;
  double t0, t1;
  long long sum;
} part;

static void *reader(void *arg) {
  part *w = arg;
  pthread_barrier_wait(w->start);
  w->t0 = now_s();
  const char *end = w->p + w->n / 128 * 128;
#if defined(__x86_64__) && defined(__GNUC__)
  w->sum = __builtin_cpu_supports("avx2") ? read_avx2(w->p, end) : read_plain(w->p, end);
#else
  w->sum = read_plain(w->p, end);
#endif
  w->t1 = now_s();
  return NULL;
}

static volatile long long sink;

static double run(const char *buf, size_t bytes, int threads) {
  pthread_t tid[64];
  part parts[64];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  size_t each = bytes / (size_t)threads / 4096 * 4096;
  for (int t = 0; t < threads; t++) {
    parts[t] = (part){buf + (size_t)t * each, each, &start, 0, 0, 0};
    if (t > 0) pthread_create(&tid[t], NULL, reader, &parts[t]);
  }
  reader(&parts[0]);
  double t0 = parts[0].t0, t1 = parts[0].t1;
  for (int t = 1; t < threads; t++) {
    pthread_join(tid[t], NULL);
    if (parts[t].t0 < t0) t0 = parts[t].t0;
    if (parts[t].t1 > t1) t1 = parts[t].t1;
  }
  for (int t = 0; t < threads; t++) sink += parts[t].sum;
  pthread_barrier_destroy(&start);
  return (double)(each * (size_t)threads) / (t1 - t0) / 1e9;
}

static char *buf;
static size_t buf_bytes;

double stream_read_gbps(size_t mib, int threads, int runs) {
  size_t bytes = mib << 20;
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  if (bytes != buf_bytes) {
    free(buf);
    buf = aligned_alloc(1 << 21, bytes);
    buf_bytes = buf ? bytes : 0;
    if (!buf) return 0.0;
    for (size_t i = 0; i < bytes; i += 8) *(uint64_t *)(buf + i) = i * 0x9E3779B97F4A7C15ull;
  }
  double best = 0.0;
  for (int r = 0; r < runs; r++) {
    double g = run(buf, bytes, threads);
    if (g > best) best = g;
  }
  return best;
}

#ifdef STREAM_MAIN
int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
  int runs = argc > 2 ? atoi(argv[2]) : 10;
  int maxt = argc > 3 ? atoi(argv[3]) : 2;
  printf("{\"bytes\": %zu, \"gbps\": {", mib << 20);
  for (int t = 1; t <= maxt; t++) printf("%s\"%d\": %.2f", t > 1 ? ", " : "", t, stream_read_gbps(mib, t, runs));
  printf("}}\n");
  return 0;
}
#endif
