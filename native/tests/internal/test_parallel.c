/*
 * test_parallel.c - the thread pool (core/parallel.h) driven directly:
 * every range covered exactly once in grain-aligned chunks (as many as the
 * pool's rule says) with tids below the count, small work inline, nested ranges inline, several application
 * threads at once (one owns the workers, the others run inline, never more
 * threads busy than the count), each thread's own share of a job first and
 * the others' taken from their ends, count changes between jobs, and a fork
 * after a parallel run. Linked with the library's objects; run under
 * `make test`, ASan (`make asan-test`) and ThreadSanitizer (`make tsan-test`).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/parallel.h"
#include "check.h"

/* Far above the inline threshold. */
#define BIG ((int64_t)1 << 40)

/* ---- coverage: each index once, chunks grain-aligned, tids in range ------- */

typedef struct cover {
  atomic_int *hits;
  int64_t grain, n;
  int nthreads;
  atomic_int bad;      /* chunks breaking the contract */
  atomic_int tid_mask; /* tids seen */
  atomic_int busy, max_busy;
  atomic_int calls;
} cover;

static void cover_fn(void *p, int64_t b, int64_t e, int tid) {
  cover *c = p;
  int now = atomic_fetch_add(&c->busy, 1) + 1;
  int m = atomic_load(&c->max_busy);
  while (now > m && !atomic_compare_exchange_weak(&c->max_busy, &m, now)) {
  }
  atomic_fetch_add(&c->calls, 1);
  if (b < 0 || e > c->n || b >= e || b % c->grain || (e % c->grain && e != c->n) || tid < 0 ||
      tid >= c->nthreads)
    atomic_fetch_add(&c->bad, 1);
  if (tid >= 0 && tid < 31) atomic_fetch_or(&c->tid_mask, 1 << tid);
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
  /* a little work, so that the workers overlap */
  volatile double x = 0;
  for (int k = 0; k < 2000; k++) x = x + k;
  (void)x;
  atomic_fetch_sub(&c->busy, 1);
}

/* Runs one range; *tids_used: how many distinct tids ran chunks, *calls: chunks. */
static void check_cover(int64_t n, int64_t grain, int64_t cost, int *tids_used, int *calls) {
  cover c = {.grain = grain, .n = n, .nthreads = px_parallel_threads()};
  c.hits = calloc((size_t)n + 1, sizeof *c.hits);
  px_parallel_for(n, grain, cost, cover_fn, &c);
  int once = 1;
  for (int64_t i = 0; i < n; i++) once &= atomic_load(&c.hits[i]) == 1;
  CHECK(once);
  CHECK(atomic_load(&c.bad) == 0);
  CHECK(atomic_load(&c.max_busy) <= c.nthreads);
  *tids_used = __builtin_popcount((unsigned)atomic_load(&c.tid_mask));
  *calls = atomic_load(&c.calls);
  free(c.hits);
}

static void test_cover(void) {
  for (int t = 1; t <= 4; t++) {
    CHECK(px_parallel_set_num_threads(t) == PYEXEC_OK);
    CHECK(px_parallel_threads() == t && px_parallel_get_num_threads() == t);
    static const int64_t ns[] = {1, 2, 3, 7, 64, 1000, 4097};
    static const int64_t grains[] = {1, 3, 16, 5000};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
      for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
        int used = 0, calls = 0;
        check_cover(ns[i], grains[g], BIG, &used, &calls);
        int64_t units = (ns[i] + grains[g] - 1) / grains[g];
        /* min(units, t) threads take part, cutting min(units, 4 t) chunks;
         * one thread runs the range inline, whole */
        int64_t takers = units < t ? units : t;
        CHECK(calls == (takers == 1 ? 1 : units < 4 * takers ? units : 4 * takers));
        CHECK(used >= 1 && used <= takers);
      }
    /* small work: one chunk, inline */
    int used = 0, calls = 0;
    check_cover(4096, 1, 100, &used, &calls);
    CHECK(used == 1 && calls == 1);
  }
  px_parallel_for(0, 1, BIG, cover_fn, NULL); /* nothing to do: fn never called */
}

/* ---- nested ranges run inline ---------------------------------------------- */

typedef struct nest {
  atomic_int outer_calls, inner_calls, inner_bad;
  atomic_int *hits;
} nest;

typedef struct inner_arg {
  nest *ns;
  int64_t base;
} inner_arg;

static void inner_fn(void *p, int64_t b, int64_t e, int tid) {
  inner_arg *ia = p;
  atomic_fetch_add(&ia->ns->inner_calls, 1);
  if (tid != 0 || b != 0 || e != 8) atomic_fetch_add(&ia->ns->inner_bad, 1);
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&ia->ns->hits[ia->base + i], 1);
}

static void outer_fn(void *p, int64_t b, int64_t e, int tid) {
  (void)tid;
  nest *ns = p;
  atomic_fetch_add(&ns->outer_calls, 1);
  for (int64_t i = b; i < e; i++) {
    inner_arg ia = {ns, i * 8};
    px_parallel_for(8, 1, BIG, inner_fn, &ia);
  }
}

static void test_nested(void) {
  px_parallel_set_num_threads(3);
  nest ns = {0};
  ns.hits = calloc(64 * 8, sizeof *ns.hits);
  px_parallel_for(64, 1, BIG, outer_fn, &ns);
  int once = 1;
  for (int i = 0; i < 64 * 8; i++) once &= atomic_load(&ns.hits[i]) == 1;
  CHECK(once);
  CHECK(atomic_load(&ns.outer_calls) == 12); /* 4 chunks per thread */
  CHECK(atomic_load(&ns.inner_calls) == 64 && atomic_load(&ns.inner_bad) == 0);
  free(ns.hits);
}

/* ---- several application threads at once ----------------------------------- */

static atomic_int g_busy_now, g_busy_max;

static void counting_fn(void *p, int64_t b, int64_t e, int tid) {
  (void)tid;
  int now = atomic_fetch_add(&g_busy_now, 1) + 1;
  int m = atomic_load(&g_busy_max);
  while (now > m && !atomic_compare_exchange_weak(&g_busy_max, &m, now)) {
  }
  double *out = p;
  for (int64_t i = b; i < e; i++) {
    double x = (double)i;
    for (int k = 0; k < 50; k++) x = x * 0.999 + 1.0;
    out[i] = x;
  }
  atomic_fetch_sub(&g_busy_now, 1);
}

typedef struct app_arg {
  int id, bad;
} app_arg;

static void *app_thread(void *p) {
  app_arg *a = p;
  enum { N = 3000 };
  double *out = malloc(N * sizeof *out), *want = malloc(N * sizeof *want);
  for (int64_t i = 0; i < N; i++) {
    double x = (double)i;
    for (int k = 0; k < 50; k++) x = x * 0.999 + 1.0;
    want[i] = x;
  }
  for (int r = 0; r < 200; r++) {
    int prev = px_parallel_pin();
    memset(out, 0, N * sizeof *out);
    px_parallel_for(N, 7, BIG, counting_fn, out);
    px_parallel_unpin(prev);
    if (memcmp(out, want, N * sizeof *out)) a->bad++;
    /* one thread keeps changing the count meanwhile */
    if (a->id == 0 && r % 10 == 0) px_parallel_set_num_threads(1 + (r / 10) % 3);
  }
  free(out);
  free(want);
  return NULL;
}

static void test_concurrent_callers(void) {
  px_parallel_set_num_threads(2);
  enum { APPS = 4 };
  pthread_t th[APPS];
  app_arg args[APPS];
  for (int i = 0; i < APPS; i++) {
    args[i] = (app_arg){.id = i};
    pthread_create(&th[i], NULL, app_thread, &args[i]);
  }
  for (int i = 0; i < APPS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < APPS; i++) CHECK(args[i].bad == 0);
  /* the pool's threads never exceed the count (at most 3 here) above what
   * the application threads run themselves inline: APPS callers + 2 workers */
  CHECK(atomic_load(&g_busy_max) <= APPS + 2);
}

/* ---- shares: each thread its own chunks first, then the others' from the back -- */

/* Two threads, eight chunks of one unit: thread 0's share is 0-3, thread
 * 1's 4-7. Whoever runs chunk 0 stays in it until the seven others are
 * done, which only stealing lets happen: with thread 0 held there, thread 1
 * runs its share in order, then thread 0's from the back (3, 2, 1). A pool
 * that did not steal would leave chunk 0 waiting out its timeout. */
typedef struct held {
  atomic_int done, order_len, timed_out;
  int order[8], tid_of[8];
} held;

static void held_fn(void *p, int64_t b, int64_t e, int tid) {
  held *h = p;
  (void)e;
  h->tid_of[b] = tid;
  if (b == 0) {
    const time_t t0 = time(NULL);
    while (atomic_load(&h->done) < 7)
      if (time(NULL) - t0 > 10) {
        atomic_store(&h->timed_out, 1);
        break;
      }
  }
  if (tid == 1) h->order[atomic_fetch_add(&h->order_len, 1)] = (int)b;
  atomic_fetch_add(&h->done, 1);
}

static void test_shares(void) {
  px_parallel_set_num_threads(2);
  for (int r = 0; r < 20; r++) {
    held h = {0};
    px_parallel_for(8, 1, BIG, held_fn, &h);
    CHECK(atomic_load(&h.timed_out) == 0 && atomic_load(&h.done) == 8);
    if (atomic_load(&h.timed_out)) break;
    if (h.tid_of[0] != 0) continue; /* the owner came late to its own first chunk */
    static const int expect[7] = {4, 5, 6, 7, 3, 2, 1};
    CHECK(atomic_load(&h.order_len) == 7 && !memcmp(h.order, expect, sizeof expect));
  }
}

/* ---- count API and pinning -------------------------------------------------- */

static void test_count(void) {
  CHECK(px_parallel_default_threads() >= 1);
  CHECK(px_parallel_set_num_threads(0) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(px_parallel_set_num_threads(-3) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(px_parallel_set_num_threads(PX_MAX_THREADS + 1) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(px_parallel_set_num_threads(2) == PYEXEC_OK);
  int prev = px_parallel_pin();
  CHECK(prev == 0);
  px_parallel_set_num_threads(3);
  CHECK(px_parallel_threads() == 2 && px_parallel_get_num_threads() == 3); /* pinned here */
  int inner = px_parallel_pin();
  CHECK(inner == 2 && px_parallel_threads() == 2);
  px_parallel_unpin(inner);
  px_parallel_unpin(prev);
  CHECK(px_parallel_threads() == 3);
}

/* ---- fork after a parallel run ------------------------------------------------ */

static void test_fork(void) {
  px_parallel_set_num_threads(2);
  int used = 0, calls = 0;
  check_cover(1000, 1, BIG, &used, &calls);
  CHECK(calls == 8 && used >= 1 && used <= 2);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    /* the child: no workers were copied; a new pool comes up on demand */
    int ok = 1;
    for (int r = 0; r < 3; r++) {
      cover c = {.grain = 1, .n = 1000, .nthreads = 2};
      c.hits = calloc(1001, sizeof *c.hits);
      px_parallel_for(1000, 1, BIG, cover_fn, &c);
      for (int i = 0; i < 1000; i++) ok &= atomic_load(&c.hits[i]) == 1;
      ok &= atomic_load(&c.calls) == 8 && atomic_load(&c.bad) == 0;
      free(c.hits);
    }
    _exit(ok ? 0 : 1);
  }
  CHECK(pid > 0);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  check_cover(1000, 1, BIG, &used, &calls); /* the parent's pool still works */
  CHECK(calls == 8);
}

int main(void) {
  /* chunks here wait for each other (test_shares): never all on one thread */
  setenv("PYEXEC_POOL_BACKOFF", "0", 1);
  test_count();
  test_cover();
  test_nested();
  test_concurrent_callers();
  test_shares();
  test_fork();
  if (failures) {
    fprintf(stderr, "test_parallel: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_parallel: %d checks passed\n", checks);
  return 0;
}
