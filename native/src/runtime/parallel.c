/*
 * parallel.c - the thread pool behind parallel.h. For now every range runs
 * inline on the calling thread; the pool itself is issue 17's.
 */
#include "runtime/parallel.h"

int px_parallel_threads(void) { return 1; }

void px_parallel_for(int64_t n, int64_t grain, int64_t cost, px_parallel_fn fn, void *arg) {
  (void)grain;
  (void)cost;
  if (n > 0) fn(arg, 0, n, 0);
}
