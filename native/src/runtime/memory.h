/*
 * memory.h - a method's large buffers (private): planned arenas and the
 * storage of unplanned outputs.
 */
#ifndef PX_MEMORY_H
#define PX_MEMORY_H

#include "runtime/method.h"

/* n zeroed bytes, 64-byte aligned: mapped from the system when n is at least
 * PX_MMAP_THRESHOLD (then *mapped is true), else an aligned allocation.
 * NULL when memory runs out. Freed with px_big_free(p, n, *mapped). */
void *px_big_alloc(size_t n, bool *mapped);
void px_big_free(void *p, size_t n, bool mapped);

/* Gives an unplanned output with no binding its own storage (once). */
pyexec_status px_output_ensure_storage(pyexec_method *m, px_output *o);

#endif /* PX_MEMORY_H */
