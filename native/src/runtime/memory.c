/*
 * memory.c - a method's own memory (memory.h): small zeroed allocations
 * freed with the method (what load-time passes such as fuse.c add to it),
 * and the storage of its unplanned outputs, from core/alloc.h's large-buffer
 * allocator.
 */
#include "runtime/memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

/* ---- allocation ------------------------------------------------------- */

struct px_alloc {
  px_alloc *next;
  max_align_t data[];
};

/* Zeroed memory owned by the method, freed with it. */
void *px_method_alloc(pyexec_method *m, size_t count, size_t size) {
  if (size && count > (SIZE_MAX - sizeof(px_alloc)) / size) return NULL;
  px_alloc *a = calloc(1, sizeof(px_alloc) + count * size);
  if (!a) return NULL;
  a->next = m->allocs;
  m->allocs = a;
  return a->data;
}

void px_method_free_allocs(pyexec_method *m) {
  for (px_alloc *a = m->allocs; a;) {
    px_alloc *n = a->next;
    free(a);
    a = n;
  }
  m->allocs = NULL;
}


pyexec_status px_output_ensure_storage(pyexec_method *m, px_output *o) {
  px_tensor *t = m->values[o->vidx].u.t;
  if (!o->own) {
    /* Zeroed; a large one is mapped, so pages the kernels never write (a
     * dynamic output below its bound) cost no memory. */
    o->own_len = (t->capacity + 63) & ~(size_t)63;
    o->own = px_big_alloc(o->own_len, &o->own_mapped);
    if (!o->own) return px_no_memory("output storage");
  }
  t->data = o->own;
  return PYEXEC_OK;
}
