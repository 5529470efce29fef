/*
 * parallel.c - the library-wide thread pool behind parallel.h.
 *
 * One pool for the whole process, created on the first range that is worth
 * splitting, with (threads - 1) workers; the calling thread works too. A job
 * is cut statically: with T threads taking part, into C = min(U, 4T) chunks,
 * chunk c holding grain units [c*U/C, (c+1)*U/C) of the U = ceil(n/grain)
 * units, so the cut is a pure function of (n, grain, T). Thread i (the
 * caller is tid 0, worker i tid i) first takes the chunks of its own share,
 * [i*C/T, (i+1)*C/T), in order; then it takes chunks from the back of the
 * others' shares. So a thread the OS preempts on a busy machine holds up one
 * chunk, not a fixed share, and in the usual case each thread runs the same
 * share of every job: the rows a kernel reads are mostly the rows the same
 * core wrote in the kernel before (EfficientNet-B0 at two threads 9% faster
 * than with chunks taken in order by whichever thread was free).
 *
 * One job owns the workers at a time. A range that cannot own them - a
 * nested px_parallel_for from inside a chunk, or another application thread
 * while a job is in flight (two Methods executing at once) - runs inline on
 * its own thread, whole, as tid 0. So the threads the library runs never
 * exceed the count set, however many callers there are, and nothing waits on
 * anything but its own job's chunks (no deadlock). Results never depend on
 * this: kernels compute each output element the same way in any chunk.
 *
 * Waking: a worker that has just finished spins for a short while on the
 * claim word (a model runs one kernel after the other, so the next job usually
 * comes within microseconds), then sleeps on a condition variable; the owner
 * spins likewise for the last chunks, then sleeps. Every few microseconds of
 * spinning yields the CPU (sched_yield), so that a spinner sharing a core
 * with the thread it waits for (a busy machine) does not hold it up.
 *
 * Thread count: pyexec_set_num_threads, else PYEXEC_NUM_THREADS, else the
 * CPUs in the process's affinity mask capped by a cgroup CPU quota (v2
 * cpu.max, v1 cfs_quota_us / cfs_period_us) when one is set.
 *
 * A Method execute pins the count it starts with on its thread
 * (px_parallel_pin), so a kernel that sizes per-thread scratch from
 * px_parallel_threads() gets no higher tid even when another thread changes
 * the count meanwhile.
 *
 * Fork: the workers are joined before the fork (after any job in flight),
 * and parent and child each make the pool again when they next need it.
 * Unload: a destructor stops and joins the workers when no job is in flight.
 */
#include "core/parallel.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/error.h"

/* Below this cost (parallel.h's units: about one multiply-add or one byte)
 * a range runs inline; each thread taking part gets at least this much.
 * Waking the workers and waiting for them costs about 2-5 us when they are
 * spinning and 20-60 us when they sleep; 64K units is 15-40 us of work.
 * PYEXEC_PARALLEL_MIN_COST (read once) replaces it: the tests set it to 1 so
 * that even the small programs of the operator tests are split. */
#ifndef PX_PARALLEL_MIN_COST
#define PX_PARALLEL_MIN_COST ((int64_t)1 << 16)
#endif

static int64_t g_min_cost;
static pthread_once_t g_min_cost_once = PTHREAD_ONCE_INIT;

static void read_min_cost(void) {
  g_min_cost = PX_PARALLEL_MIN_COST;
  const char *s = getenv("PYEXEC_PARALLEL_MIN_COST");
  if (s && *s) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*end && v >= 1) g_min_cost = v;
  }
}

/* How long a worker (or the owner waiting for the last chunks) spins before
 * it sleeps. */
#define PX_SPIN_NS 100000L

typedef struct job {
  px_parallel_fn fn;
  void *arg;
  int64_t n, grain, units;
  int nchunks;
  uint64_t fp; /* the owner's floating-point control word (px_fp_mode) */
} job;

typedef struct worker {
  pthread_cond_t wake; /* a new job, or stop */
  bool sleeping;       /* waiting on `wake` (under the pool's mutex) */
  int index;           /* 1..nworkers: the tid it runs */
  uint64_t start_gen;  /* the generation when it was made */
  pthread_t thread;
} worker;

/* The claim word: which job is current. Bits 40..63 the job's generation,
 * 27..39 the threads taking part, 13..26 the chunk count. Each thread taking
 * part has a share word: bits 40..63 the generation again, 20..39 the end
 * and 0..19 the start of the chunks of its share not yet taken. A chunk is
 * taken by a compare-and-swap on a share word (start + 1 by its thread, end
 * - 1 by another), so a thread can only ever take a chunk of the job it
 * read, and only if its index is below that job's thread count. */
#define CW_CHUNKS_SHIFT 13
#define CW_THREADS_SHIFT 27
#define CW_GEN_SHIFT 40
#define CW_MASK13 ((uint64_t)0x1fff)
#define PX_MAX_CHUNKS 4096 /* below 2^13 */
#define CHUNKS_PER_THREAD 4

#define SW_END_SHIFT 20
#define SW_MASK20 ((uint64_t)0xfffff)
typedef struct {
  _Alignas(64) atomic_uint_fast64_t w;
} share_word;

typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t done; /* owner: the last chunk finished */
  worker *workers;
  int nworkers;
  bool owner_waiting; /* the owner waits on `done` (under mu) */
  atomic_bool stop;   /* set under mu */
  uint64_t gen;       /* the owner's job counter */
  job cur;            /* written before the claim word names its job */
  _Alignas(64) atomic_uint_fast64_t claim; /* stored under mu */
  _Alignas(64) atomic_int done_chunks;
  share_word share[PX_MAX_THREADS]; /* thread i's share of the current job's chunks */
  atomic_uint wakes; /* pool_wake's count, changed under mu */
} pool;

static pool g_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
static atomic_flag g_busy = ATOMIC_FLAG_INIT; /* a job owns the workers */
static atomic_int g_count;                    /* 0: not decided yet */
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static _Thread_local int tl_in_task; /* inside a chunk (workers: always) */
static _Thread_local int tl_pinned;  /* the count an execute on this thread started with */

/* ------------------------------------------------------------------------ */
/* Thread count                                                             */
/* ------------------------------------------------------------------------ */

/* Reads a small text file whole into buf (NUL-terminated); false if absent. */
static bool read_small(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "re");
  if (!f) return false;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  return n > 0;
}

/* CPUs a quota of `quota` per `period` microseconds pays for, rounded up; 0
 * when there is no quota. */
static int quota_cpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  long long c = (quota + period - 1) / period;
  return c > PX_MAX_THREADS ? PX_MAX_THREADS : (int)c;
}

/* The cgroup path of this process for v2 ("0::/path") or for the v1
 * controller named `ctrl` ("N:cpu,cpuacct:/path"), into out. */
static bool cgroup_path(const char *ctrl, char *out, size_t cap) {
  char buf[4096];
  if (!read_small("/proc/self/cgroup", buf, sizeof buf)) return false;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    char *c1 = strchr(line, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = 0;
    const char *ctrls = c1 + 1, *path = c2 + 1;
    bool match = false;
    if (!ctrl) {
      match = *ctrls == 0 && strncmp(line, "0", 1) == 0;
    } else {
      for (const char *p = ctrls; *p;) {
        size_t len = strcspn(p, ",");
        if (len == strlen(ctrl) && strncmp(p, ctrl, len) == 0) match = true;
        p += len + (p[len] == ',');
      }
    }
    if (match) {
      snprintf(out, cap, "%s", path);
      return true;
    }
  }
  return false;
}

/* The tightest quota on this cgroup or its ancestors below `root` (v2:
 * cpu.max "max 100000" or "200000 100000"), 0 if none. */
static int cgroup_v2_cpus(void) {
  char rel[2048], path[2600], buf[128];
  if (!cgroup_path(NULL, rel, sizeof rel)) return 0;
  int best = 0;
  for (;;) {
    snprintf(path, sizeof path, "/sys/fs/cgroup%s%scpu.max", rel, rel[strlen(rel) - 1] == '/' ? "" : "/");
    long long q, p;
    if (read_small(path, buf, sizeof buf) && strncmp(buf, "max", 3) != 0 && sscanf(buf, "%lld %lld", &q, &p) == 2) {
      int c = quota_cpus(q, p);
      if (c && (!best || c < best)) best = c;
    }
    char *slash = strrchr(rel, '/');
    if (!slash || (slash == rel && rel[1] == 0)) break;
    if (slash == rel) rel[1] = 0;
    else *slash = 0;
  }
  return best;
}

/* v1: cpu.cfs_quota_us / cpu.cfs_period_us in the cpu controller's
 * hierarchy, at this process's cgroup or the mount's root. */
static int cgroup_v1_cpus(void) {
  static const char *const mounts[] = {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"};
  char rel[2048], path[2600], buf[64];
  if (!cgroup_path("cpu", rel, sizeof rel)) rel[0] = 0;
  for (size_t i = 0; i < sizeof mounts / sizeof *mounts; i++) {
    for (int at_root = 0; at_root < 2; at_root++) {
      const char *r = at_root ? "" : rel;
      long long q, p;
      snprintf(path, sizeof path, "%s%s/cpu.cfs_quota_us", mounts[i], r);
      if (!read_small(path, buf, sizeof buf) || sscanf(buf, "%lld", &q) != 1) continue;
      snprintf(path, sizeof path, "%s%s/cpu.cfs_period_us", mounts[i], r);
      if (!read_small(path, buf, sizeof buf) || sscanf(buf, "%lld", &p) != 1) continue;
      return quota_cpus(q, p);
    }
  }
  return 0;
}

int px_parallel_default_threads(void) {
  int n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (int)c : 1;
  }
  int q = cgroup_v2_cpus();
  if (!q) q = cgroup_v1_cpus();
  if (q && q < n) n = q;
  return n > PX_MAX_THREADS ? PX_MAX_THREADS : n;
}

/* PYEXEC_NUM_THREADS as a count, 0 when unset, -1 when it is not one. */
static int env_threads(const char **text) {
  const char *s = getenv("PYEXEC_NUM_THREADS");
  *text = s;
  if (!s || !*s) return 0;
  while (isspace((unsigned char)*s)) s++;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  while (isspace((unsigned char)*end)) end++;
  if (errno || end == s || *end || v < 1 || v > PX_MAX_THREADS) return -1;
  return (int)v;
}

static int decide_count(void) {
  const char *text;
  int n = env_threads(&text);
  if (n > 0) return n;
  int d = px_parallel_default_threads();
  if (n < 0)
    fprintf(stderr,
            "pyexec: PYEXEC_NUM_THREADS='%.64s' is not a thread count (a whole number from 1 to %d); using %d, "
            "the CPUs this process may run on\n",
            text, PX_MAX_THREADS, d);
  return d;
}

static int global_count(void) {
  int n = atomic_load_explicit(&g_count, memory_order_relaxed);
  if (n) return n;
  int d = decide_count();
  int expected = 0;
  /* Whoever decides first wins (the message above may print twice at most
   * when two threads race here; the value is the same). */
  if (!atomic_compare_exchange_strong(&g_count, &expected, d)) return expected;
  return d;
}

int px_parallel_threads(void) { return tl_pinned ? tl_pinned : global_count(); }

int px_parallel_get_num_threads(void) { return global_count(); }

pyexec_status px_parallel_set_num_threads(int n) {
  if (n < 1 || n > PX_MAX_THREADS)
    return px_invalid_argument("num_threads must be from 1 to %d, got %d", PX_MAX_THREADS, n);
  atomic_store(&g_count, n);
  return PYEXEC_OK;
}

static void pool_wake(void);

int px_parallel_pin(void) {
  int prev = tl_pinned;
  if (!prev) {
    tl_pinned = global_count();
    if (tl_pinned > 1) pool_wake();
  }
  return prev;
}

void px_parallel_unpin(int prev) { tl_pinned = prev; }

/* ------------------------------------------------------------------------ */
/* The pool                                                                 */
/* ------------------------------------------------------------------------ */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Every 64 pauses of a spin: hands the CPU to another thread that is ready
 * to run on it, if any (returns at once on an idle core). On a machine whose
 * other cores are busy, a spinning worker and the thread it waits for often
 * share one core; without this the spinner would take its whole time slice
 * from the thread doing the work (a small CNN's convolution at two threads
 * took 6x its one-thread time with the other core busy). */
static inline void spin_yield(void) { sched_yield(); }

static void run_chunk(const job *j, int c, int tid) {
  int64_t u0 = j->units * c / j->nchunks, u1 = j->units * (c + 1) / j->nchunks;
  int64_t b = u0 * j->grain, e = u1 * j->grain;
  if (e > j->n) e = j->n;
  if (b < e) j->fn(j->arg, b, e, tid);
}

/* One chunk from share word sw of job generation g: its first (from the
 * front) or its last; -1 when it has none left or belongs to another job. */
static int take_from(share_word *sw, uint64_t g, bool front) {
  uint64_t w = atomic_load_explicit(&sw->w, memory_order_acquire);
  for (;;) {
    uint64_t start = w & SW_MASK20, end = (w >> SW_END_SHIFT) & SW_MASK20;
    if ((w >> CW_GEN_SHIFT) != g || start >= end) return -1;
    uint64_t next = front ? w + 1 : w - ((uint64_t)1 << SW_END_SHIFT);
    if (atomic_compare_exchange_weak_explicit(&sw->w, &w, next, memory_order_acq_rel, memory_order_acquire))
      return (int)(front ? start : end - 1);
  }
}

/* Takes a chunk of the job the claim word names, as thread `index`: the
 * next of its own share, else the last of another's (the next thread's
 * first); -1 when there is none for it. *gen receives the job's generation. */
static int claim_chunk(pool *pl, int index, uint64_t *gen) {
  uint64_t c = atomic_load_explicit(&pl->claim, memory_order_acquire);
  *gen = c >> CW_GEN_SHIFT;
  int threads = (int)((c >> CW_THREADS_SHIFT) & CW_MASK13);
  if (index >= threads) return -1;
  int chunk = take_from(&pl->share[index], *gen, true);
  for (int k = 1; chunk < 0 && k < threads; k++)
    chunk = take_from(&pl->share[(index + k) % threads], *gen, false);
  return chunk;
}

/* Runs chunks of the current job as thread `index` until none is left for
 * it; a worker runs each under the floating-point control word of the
 * thread that started its job (denormals off inside an XNNPACK delegate
 * call, as there, and back on for the next job from outside one). */
static int work_chunks(pool *pl, int index, uint64_t *gen) {
  int c, ran = 0;
  uint64_t mode = index ? px_fp_mode() : 0;
  while ((c = claim_chunk(pl, index, gen)) >= 0) {
    /* the job cannot change before this chunk is counted done */
    const job *j = &pl->cur;
    int nchunks = j->nchunks;
    if (index && j->fp != mode) px_fp_set_mode(mode = j->fp);
    run_chunk(j, c, index);
    ran++;
    if (atomic_fetch_add_explicit(&pl->done_chunks, 1, memory_order_acq_rel) + 1 == nchunks) {
      pthread_mutex_lock(&pl->mu);
      if (pl->owner_waiting) pthread_cond_signal(&pl->done);
      pthread_mutex_unlock(&pl->mu);
    }
  }
  return ran;
}

static void *worker_main(void *p) {
  worker *w = p;
  pool *pl = &g_pool;
  uint64_t seen = w->start_gen;
  tl_in_task = 1;
  for (;;) {
    /* Wait for a job newer than the last one seen: spin, then sleep. */
    int64_t t0 = now_ns();
    for (int k = 1;; k++) {
      if ((atomic_load_explicit(&pl->claim, memory_order_acquire) >> CW_GEN_SHIFT) != seen ||
          atomic_load_explicit(&pl->stop, memory_order_acquire))
        break;
      cpu_relax();
      if ((k & 63) == 0 && now_ns() - t0 <= PX_SPIN_NS) {
        spin_yield();
      } else if ((k & 63) == 0) {
        pthread_mutex_lock(&pl->mu);
        w->sleeping = true;
        const unsigned wakes = atomic_load(&pl->wakes);
        while ((atomic_load(&pl->claim) >> CW_GEN_SHIFT) == seen && !atomic_load(&pl->stop) &&
               atomic_load(&pl->wakes) == wakes)
          pthread_cond_wait(&w->wake, &pl->mu);
        w->sleeping = false;
        pthread_mutex_unlock(&pl->mu);
        break;
      }
    }
    if (atomic_load_explicit(&pl->stop, memory_order_acquire)) break;
    work_chunks(pl, w->index, &seen);
  }
  return NULL;
}

/* An execute is starting on several threads: workers asleep since the last
 * one are woken to spin, so that its first split does not wait 20-60 us
 * for them (the serial work before it, a layout transpose or a conversion,
 * covers the wake-up). A woken worker finds no new job, takes no chunk of
 * the old one (all taken) and spins, then sleeps again if none comes. */
static void pool_wake(void) {
  pool *pl = &g_pool;
  /* the pool is owned for this, as for a job (or it is busy with one) */
  if (atomic_flag_test_and_set_explicit(&g_busy, memory_order_acquire)) return;
  if (!pl->workers) {
    atomic_flag_clear_explicit(&g_busy, memory_order_release);
    return;
  }
  pthread_mutex_lock(&pl->mu);
  bool any = false;
  for (int i = 0; i < pl->nworkers; i++) any = any || pl->workers[i].sleeping;
  if (any) {
    atomic_fetch_add(&pl->wakes, 1);
    for (int i = 0; i < pl->nworkers; i++)
      if (pl->workers[i].sleeping) pthread_cond_signal(&pl->workers[i].wake);
  }
  pthread_mutex_unlock(&pl->mu);
  atomic_flag_clear_explicit(&g_busy, memory_order_release);
}

/* Stops and joins every worker (the caller owns g_busy). */
static void pool_stop(pool *pl) {
  if (!pl->workers) return;
  pthread_mutex_lock(&pl->mu);
  atomic_store(&pl->stop, true);
  for (int i = 0; i < pl->nworkers; i++) pthread_cond_signal(&pl->workers[i].wake);
  pthread_mutex_unlock(&pl->mu);
  for (int i = 0; i < pl->nworkers; i++) {
    pthread_join(pl->workers[i].thread, NULL);
    pthread_cond_destroy(&pl->workers[i].wake);
  }
  free(pl->workers);
  pl->workers = NULL;
  pl->nworkers = 0;
  atomic_store(&pl->stop, false);
}

/* Before a fork: wait for a job in flight on another thread, then stop and
 * join the workers, so that the process forks with none of the pool's
 * threads (emulators such as qemu-user cannot fork a threaded process
 * safely, and the child could not use them anyway). Both processes make the
 * pool again on their next split. A fork from inside a chunk (the caller
 * owns the pool) leaves the pool alone. */
static _Thread_local bool g_fork_owns; /* prepare and parent run on the forking thread */

static void atfork_prepare(void) {
  g_fork_owns = false;
  if (!tl_in_task) {
    while (atomic_flag_test_and_set_explicit(&g_busy, memory_order_acquire)) sched_yield();
    g_fork_owns = true;
    pool_stop(&g_pool);
  }
  pthread_mutex_lock(&g_pool.mu);
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&g_pool.mu);
  if (g_fork_owns) atomic_flag_clear_explicit(&g_busy, memory_order_release);
}

/* The child has only the forking thread. Normally the pool was stopped in
 * prepare: release what prepare took. After a fork from inside a chunk the
 * workers (and a job in flight) did not come along: drop their records
 * without freeing (their condition variables may be in any state) and start
 * over. */
static void atfork_child(void) {
  pool *pl = &g_pool;
  pthread_mutex_unlock(&pl->mu);
  if (g_fork_owns) {
    atomic_flag_clear_explicit(&g_busy, memory_order_release);
    return;
  }
  pl->workers = NULL;
  pl->nworkers = 0;
  pl->owner_waiting = false;
  atomic_store(&pl->stop, false);
  atomic_store(&pl->claim, 0);
  pl->gen = 0;
  pthread_cond_init(&pl->done, NULL);
  atomic_flag_clear(&g_busy);
  tl_in_task = 0;
}

static void register_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

/* Makes the pool hold `want` workers (the caller owns g_busy). Returns how
 * many it holds: fewer when threads cannot be created (the job then uses
 * what there is). */
static int pool_resize(pool *pl, int want) {
  if (pl->nworkers == want) return want;
  pthread_once(&g_atfork_once, register_atfork);
  pool_stop(pl);
  if (want <= 0) return 0;
  pl->workers = malloc(sizeof(worker) * (size_t)want);
  if (!pl->workers) return 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)1 << 20);
  for (int i = 0; i < want; i++) {
    worker *w = &pl->workers[i];
    pthread_cond_init(&w->wake, NULL);
    w->start_gen = pl->gen;
    w->sleeping = false;
    w->index = i + 1;
    if (pthread_create(&w->thread, &attr, worker_main, w) != 0) {
      pthread_cond_destroy(&w->wake);
      break;
    }
    pl->nworkers++;
  }
  pthread_attr_destroy(&attr);
  return pl->nworkers;
}

/* Back-off from workers the system holds up (state of the job owner: read
 * and written only while holding g_busy). After each job on several
 * threads the owner compares the job's time (its own chunks, then the wait
 * for the others') with what it would have taken alone (its time per chunk
 * times the chunks), and keeps a running average of the ratio. A worker
 * held up while it runs a chunk (its core busy with other processes) makes
 * the owner wait for that chunk, often a whole time slice. While the
 * average says the threads cost more than they give (above 1), jobs run
 * their chunks on the owner alone (the same chunks, so the same bits), 16
 * jobs at first, twice as many each time in a row (up to 1024), a job on
 * the workers between them measuring again (a ratio counts up to 4, so
 * that one outlier is outweighed in a few jobs); once the average is back
 * under 0.8 the workers take part in every job. Two threads on a machine
 * whose other core is busy are then about as fast as one. Only a job that
 * lost more than PX_STALL_NS to the threads counts at its ratio: a worker
 * held up by another process costs a time slice (milliseconds), while
 * waking a sleeping worker or an uneven split costs tens of microseconds,
 * and a run of such small losses (short jobs after a pause) must not turn
 * the threads off for the large jobs that follow. A job that lost less
 * counts as one the threads sped up.
 * PYEXEC_POOL_BACKOFF=0 turns it off (read once). */
#define PX_STALL_NS 200000.0
#define PX_BACKOFF_FIRST 16
#define PX_BACKOFF_MAX 1024
static int g_backoff_left, g_backoff_len;
static int g_backoff_off = -1;
static double g_par_ratio = 0.5; /* running average: job time over time alone */

static void note_job(int64_t own_ns, int64_t wait_ns, int owner_chunks, int nchunks) {
  if (g_backoff_off < 0) {
    const char *e = getenv("PYEXEC_POOL_BACKOFF");
    g_backoff_off = e && !strcmp(e, "0");
  }
  if (g_backoff_off || owner_chunks <= 0 || own_ns <= 0) return;
  const double alone = (double)own_ns * nchunks / owner_chunks;
  double r = (double)(own_ns + wait_ns) / alone;
  if ((double)(own_ns + wait_ns) - alone < PX_STALL_NS && r > 0.75) r = 0.75;
  g_par_ratio = 0.75 * g_par_ratio + 0.25 * (r < 4.0 ? r : 4.0);
  if (g_par_ratio > 1.0) {
    g_backoff_len = g_backoff_len ? (g_backoff_len * 2 < PX_BACKOFF_MAX ? g_backoff_len * 2 : PX_BACKOFF_MAX)
                                  : PX_BACKOFF_FIRST;
    g_backoff_left = g_backoff_len;
  } else if (g_par_ratio < 0.8) {
    g_backoff_len = 0;
  }
}

void px_parallel_for(int64_t n, int64_t grain, int64_t cost, px_parallel_fn fn, void *arg) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t units = (n - 1) / grain + 1;
  int t = px_parallel_threads();
  pthread_once(&g_min_cost_once, read_min_cost);
  int64_t by_cost = cost / g_min_cost;
  if (by_cost < t) t = (int)(by_cost < 1 ? 1 : by_cost);
  if (units < t) t = (int)units;
  if (t <= 1 || tl_in_task || atomic_flag_test_and_set_explicit(&g_busy, memory_order_acquire)) {
    fn(arg, 0, n, 0);
    return;
  }
  pool *pl = &g_pool;
  /* Workers for the set count, not this job's share, so that jobs of
   * different sizes do not rebuild the pool. The pool only grows: after the
   * count drops, the extra workers take no chunks (the claim word names the
   * threads taking part) and are never woken, so callers alternating between
   * counts do not rebuild it every job. */
  int target = px_parallel_threads() - 1;
  if (pl->nworkers < target) pool_resize(pl, target);
  if (t > pl->nworkers + 1) t = pl->nworkers + 1;
  if (t <= 1) {
    atomic_flag_clear_explicit(&g_busy, memory_order_release);
    fn(arg, 0, n, 0);
    return;
  }
  /* Several chunks per thread, each thread's share first, then the others'
   * from their ends: a thread the OS preempts holds up only its current
   * chunk (the others take the rest of its share). The chunks depend only
   * on (n, grain, t). */
  int64_t nchunks = units < (int64_t)t * CHUNKS_PER_THREAD ? units : (int64_t)t * CHUNKS_PER_THREAD;
  if (nchunks > PX_MAX_CHUNKS) nchunks = PX_MAX_CHUNKS;
  const job jb = {.fn = fn, .arg = arg, .n = n, .grain = grain, .units = units, .nchunks = (int)nchunks,
                  .fp = px_fp_mode()};
  if (g_backoff_left > 0) { /* workers stalled lately: the same chunks, all on this thread */
    g_backoff_left--;
    tl_in_task = 1;
    for (int c = 0; c < (int)nchunks; c++) run_chunk(&jb, c, 0);
    tl_in_task = 0;
    atomic_flag_clear_explicit(&g_busy, memory_order_release);
    return;
  }
  pl->cur = jb;
  const int64_t t_start = now_ns();
  atomic_store_explicit(&pl->done_chunks, 0, memory_order_relaxed);
  pl->gen = (pl->gen + 1) & ((UINT64_C(1) << (64 - CW_GEN_SHIFT)) - 1);
  uint64_t word = pl->gen << CW_GEN_SHIFT | (uint64_t)t << CW_THREADS_SHIFT | (uint64_t)nchunks << CW_CHUNKS_SHIFT;
  for (int i = 0; i < t; i++) /* published by the claim word's release below */
    atomic_store_explicit(&pl->share[i].w,
                          pl->gen << CW_GEN_SHIFT | (uint64_t)((i + 1) * nchunks / t) << SW_END_SHIFT |
                              (uint64_t)(i * nchunks / t),
                          memory_order_relaxed);
  pthread_mutex_lock(&pl->mu);
  atomic_store_explicit(&pl->claim, word, memory_order_release);
  for (int i = 0; i < t - 1; i++)
    if (pl->workers[i].sleeping) pthread_cond_signal(&pl->workers[i].wake);
  pthread_mutex_unlock(&pl->mu);

  uint64_t gen;
  tl_in_task = 1;
  const int owner_chunks = work_chunks(pl, 0, &gen);
  tl_in_task = 0;
  const int64_t t_own = now_ns();

  if (atomic_load_explicit(&pl->done_chunks, memory_order_acquire) != nchunks) {
    int64_t t0 = now_ns();
    for (int k = 1; atomic_load_explicit(&pl->done_chunks, memory_order_acquire) != nchunks; k++) {
      cpu_relax();
      if ((k & 63) == 0 && now_ns() - t0 <= PX_SPIN_NS) {
        spin_yield();
      } else if ((k & 63) == 0) {
        pthread_mutex_lock(&pl->mu);
        pl->owner_waiting = true;
        while (atomic_load(&pl->done_chunks) != nchunks) pthread_cond_wait(&pl->done, &pl->mu);
        pl->owner_waiting = false;
        pthread_mutex_unlock(&pl->mu);
        break;
      }
    }
  }
  note_job(t_own - t_start, now_ns() - t_own, owner_chunks, (int)nchunks);
  atomic_flag_clear_explicit(&g_busy, memory_order_release);
}

/* At unload (dlclose, or exit): stop the workers, unless a job is in flight
 * on a thread that is still running (then the process is going away anyway). */
__attribute__((destructor)) static void pool_shutdown(void) {
  if (atomic_flag_test_and_set(&g_busy)) return;
  pool_stop(&g_pool);
  atomic_flag_clear(&g_busy);
}
