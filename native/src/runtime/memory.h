/*
 * memory.h - a method's own memory (private): allocations freed with it and
 * the storage of its unplanned outputs; planned arenas and other large
 * buffers come from core/alloc.h.
 */
#ifndef PX_MEMORY_H
#define PX_MEMORY_H

#include "core/alloc.h"
#include "runtime/method.h"

/* `count` zeroed elements of `size` bytes owned by the method (NULL when
 * memory runs out), all freed at once by px_method_free_allocs. */
void *px_method_alloc(pyexec_method *m, size_t count, size_t size);
void px_method_free_allocs(pyexec_method *m);

/* Gives an unplanned output with no binding its own storage (once). */
pyexec_status px_output_ensure_storage(pyexec_method *m, px_output *o);

#endif /* PX_MEMORY_H */
