/*
 * alloc.c - large zeroed buffers, mapped or aligned (alloc.h).
 */
#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* ---- file pages ---- */

static __thread struct {
  const char *p;
  size_t n;
} file_ranges[2];

void px_file_pages_set(const void *a, size_t an, const void *b, size_t bn) {
  file_ranges[0].p = a, file_ranges[0].n = a ? an : 0;
  file_ranges[1].p = b, file_ranges[1].n = b ? bn : 0;
}

void px_drop_file_pages(const void *p, size_t n) {
  const char *c = p;
  for (int i = 0; i < 2; i++) {
    const char *f = file_ranges[i].p;
    if (!f || c < f || n > file_ranges[i].n || (size_t)(c - f) > file_ranges[i].n - n) continue;
    /* MAP_PRIVATE and PROT_READ: its pages were never written, so DONTNEED
     * loses nothing (a written private page would read back as the file) */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t s = ((uintptr_t)c + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t e = ((uintptr_t)c + n) & ~(uintptr_t)(page - 1);
    if (e > s) (void)madvise((void *)s, e - s, MADV_DONTNEED);
    return;
  }
}
