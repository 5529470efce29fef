/*
 * memory.h - the storage of a method's unplanned outputs (private); planned
 * arenas and other large buffers come from core/alloc.h.
 */
#ifndef PX_MEMORY_H
#define PX_MEMORY_H

#include "core/alloc.h"
#include "runtime/method.h"

/* Gives an unplanned output with no binding its own storage (once). */
pyexec_status px_output_ensure_storage(pyexec_method *m, px_output *o);

#endif /* PX_MEMORY_H */
