/*
 * alloc.c - large zeroed buffers, mapped or aligned (alloc.h).
 */
#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Large buffers come from mmap (zeroed, paged in on first touch); small ones
 * from an aligned allocation. Sanitizer builds raise the threshold so that
 * AddressSanitizer sees the bounds of all but the largest (sanitize.mk). */
#ifndef PX_MMAP_THRESHOLD
#define PX_MMAP_THRESHOLD ((size_t)1 << 20)
#endif

void *px_big_alloc(size_t n, bool *mapped) {
  if (n >= PX_MMAP_THRESHOLD) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *mapped = p != MAP_FAILED;
    return p == MAP_FAILED ? NULL : p;
  }
  *mapped = false;
  size_t r = (n + 63) & ~(size_t)63;
  void *p = aligned_alloc(64, r ? r : 64);
  if (p) memset(p, 0, r ? r : 64);
  return p;
}

void px_big_free(void *p, size_t n, bool mapped) {
  if (!p) return;
  if (mapped)
    munmap(p, n);
  else
    free(p);
}
