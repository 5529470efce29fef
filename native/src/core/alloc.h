/*
 * alloc.h - large zeroed buffers (private): what a method's planned arenas,
 * its unplanned outputs and a delegate's intermediate values are made of.
 */
#ifndef PX_ALLOC_H
#define PX_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* n zeroed bytes, 64-byte aligned: mapped from the system when n is at least
 * PX_MMAP_THRESHOLD (then *mapped is true), else an aligned allocation.
 * NULL when memory runs out. Freed with px_big_free(p, n, *mapped). */
void *px_big_alloc(size_t n, bool *mapped);
void px_big_free(void *p, size_t n, bool mapped);

/* The read-only file mappings (a program's, its data file's) whose pages
 * px_drop_file_pages may hand back, for this thread: set while a method is
 * built, cleared (NULLs) after. */
void px_file_pages_set(const void *a, size_t an, const void *b, size_t bn);

/* For packers done with a constant: when [p, p + n) lies in one of this
 * thread's read-only file mappings, the process stops mapping its whole
 * pages, so its resident memory does not hold the file beside the packed
 * copy. They stay in the page cache (the next load finds them there) and
 * are mapped again if ever read. Bytes anywhere else are left alone. */
void px_drop_file_pages(const void *p, size_t n);

/* Whether the bytes [a, a + an) and [b, b + bn) meet (an empty range meets
 * nothing). */
static inline bool px_bytes_overlap(const void *a, size_t an, const void *b, size_t bn) {
  const char *x = a, *y = b;
  return an && bn && x < y + bn && y < x + an;
}

#endif /* PX_ALLOC_H */
