/*
 * parallel.h - the library-wide thread pool, as kernels see it (private).
 *
 * px_parallel_for(n, grain, cost, fn, arg) runs fn(arg, begin, end, tid) over
 * disjoint chunks [begin, end) that cover [0, n) exactly once. Chunks are
 * multiples of grain items (the last may be shorter). tid is in
 * [0, px_parallel_threads()) and no two chunks run at the same time with the
 * same tid, so a kernel may index per-thread scratch by it. cost estimates the
 * whole range's work (roughly, multiply-adds or bytes touched); below the
 * pool's threshold the whole range runs inline on the calling thread as one
 * chunk with tid 0.
 *
 * The chunks are a pure function of (n, grain, thread count); which thread
 * runs which chunk is not (threads take them as they come free, and a thread
 * may run several, one after the other).
 *
 * Results must not depend on the chunking: a kernel gives each output element
 * to exactly one chunk and computes it the same way whichever chunk holds it,
 * so outputs are bit-identical for any thread count.
 *
 * A px_parallel_for called from inside a chunk, or while another thread's
 * range holds the pool, runs inline (one chunk, tid 0). A kernel may call
 * anything from a chunk except px_scratch (not thread-safe: take per-thread
 * scratch before the call) and px_fail on the shared context (give each chunk
 * its own message buffer, as llm/sdpa.c does).
 */
#ifndef PX_PARALLEL_H
#define PX_PARALLEL_H

#include <stdint.h>

#include "pyexec.h"

/* The most threads a count may ask for (pyexec_set_num_threads,
 * PYEXEC_NUM_THREADS). */
#define PX_MAX_THREADS 1024

typedef void (*px_parallel_fn)(void *arg, int64_t begin, int64_t end, int tid);

/* Threads the next px_parallel_for may use (at least 1): the count set by
 * pyexec_set_num_threads / PYEXEC_NUM_THREADS, or the process's CPUs. */
int px_parallel_threads(void);

void px_parallel_for(int64_t n, int64_t grain, int64_t cost, px_parallel_fn fn, void *arg);

/* The count pyexec_get_num_threads reports / pyexec_set_num_threads sets
 * (1..PX_MAX_THREADS; anything else is PYEXEC_ERR_INVALID_ARGUMENT). */
int px_parallel_get_num_threads(void);
pyexec_status px_parallel_set_num_threads(int n);

/* The count a process gets by default: the CPUs in its affinity mask, capped
 * by a cgroup CPU quota (v2 cpu.max, v1 cfs quota) when one is set. */
int px_parallel_default_threads(void);

/* A Method execute pins the current count on its thread for its duration:
 * px_parallel_threads() and px_parallel_for there keep to it even if another
 * thread changes the count meanwhile. pin returns what unpin restores
 * (nested pins keep the outer one). */
int px_parallel_pin(void);
void px_parallel_unpin(int prev);

#endif /* PX_PARALLEL_H */
