/*
 * debug.h - a method's debug buffer (private): the values each instruction
 * writes, copied after it runs while the method is profiled with a debug
 * buffer (pyexec.h, "Debug buffer"), for the ETDump's debug events.
 */
#ifndef PX_DEBUG_H
#define PX_DEBUG_H

#include <stddef.h>
#include <stdint.h>

#include "pyexec.h"
#include "runtime/method.h"

/* The buffer and the values recorded into it. */
typedef struct px_debug {
  uint8_t *buf; /* cap bytes, 64-byte aligned */
  size_t cap, used;
  pyexec_debug_value *v;
  size_t n, vcap;
} px_debug;

/* Records what instruction `in` (profile event `ev`, -1: not recorded)
 * wrote, after it ran. Fails with PYEXEC_ERR_OUT_OF_MEMORY when the buffer
 * is full or memory runs out. */
pyexec_status px_debug_instruction(pyexec_method *m, long ev, uint32_t chain, uint32_t pc, const px_instr *in);

/* Records the method's outputs, after a run. */
pyexec_status px_debug_outputs(pyexec_method *m);

void px_debug_free(px_debug *d);

/* The bodies of pyexec_method_profile_*debug* (pyexec.h; api.c forwards).
 * They take the method's lock. */
pyexec_status px_method_profile_set_debug_buffer(pyexec_method *m, size_t nbytes);
size_t px_method_profile_debug_count(pyexec_method *m);
pyexec_status px_method_profile_debug_value(pyexec_method *m, size_t index, pyexec_debug_value *out);
pyexec_status px_method_profile_debug_buffer(pyexec_method *m, const void **data, size_t *used);

#endif /* PX_DEBUG_H */
