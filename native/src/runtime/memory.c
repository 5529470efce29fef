/*
 * memory.c - the storage of a method's unplanned outputs (memory.h), from
 * core/alloc.h's large-buffer allocator.
 */
#include "runtime/memory.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

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
