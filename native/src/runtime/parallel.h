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
 * Results must not depend on the chunking: a kernel gives each output element
 * to exactly one chunk and computes it the same way whichever chunk holds it,
 * so outputs are bit-identical for any thread count.
 */
#ifndef PX_PARALLEL_H
#define PX_PARALLEL_H

#include <stdint.h>

typedef void (*px_parallel_fn)(void *arg, int64_t begin, int64_t end, int tid);

/* Threads the next px_parallel_for may use (at least 1): the count set by
 * pyexec_set_num_threads / PYEXEC_NUM_THREADS, or the process's CPUs. */
int px_parallel_threads(void);

void px_parallel_for(int64_t n, int64_t grain, int64_t cost, px_parallel_fn fn, void *arg);

#endif /* PX_PARALLEL_H */
