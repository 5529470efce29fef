/*
 * backend.h - the delegate backend interface (private).
 *
 * A backend runs the part of a program that the exporter handed to it (an
 * ExecuTorch DelegateCall). It is a table of functions registered under the
 * id the program's BackendDelegate entry names (registry.c); the method
 * builder and the executor know nothing else about it.
 *
 * Life of a delegate:
 *   init     once, when the method is loaded: the processed payload, the
 *            compile specs and the named data (px_named_data). It parses and
 *            checks everything once and returns a handle. Every pointer it
 *            receives points into the program, which outlives the method, so
 *            the handle may keep them. Failure: a pyexec status with the
 *            thread's error message set (core/error.h), InvalidProgram for a
 *            malformed payload, Unsupported for something well-formed this
 *            library does not run.
 *   check_call (optional) once per DelegateCall instruction, when the
 *            method is built: the handle and the call's arguments as the
 *            program declares them (tensors at their upper-bound sizes). It
 *            refuses an argument the delegate cannot take (a non-tensor
 *            where it reads a tensor, a dtype, rank or dim_order it does not
 *            run) with InvalidProgram or Unsupported and the message set
 *            naming the argument; the builder prefixes the instruction.
 *   execute  per DelegateCall: the handle and the call's arguments: every
 *            value the instruction lists, in order, whatever its type.
 *            ExecuTorch hands a delegate ints, SymInts, bools, lists and
 *            None among its tensors; a backend reads the arguments it uses
 *            and ignores the others. A tensor argument may have any
 *            dim_order (its data lie in memory in that order). A MoveCall
 *            may put another tensor (other sizes, dtype or dim_order, never
 *            another value type) behind an argument between calls, so
 *            execute checks again what check_call checked of a tensor.
 *            Returns 0, or the result of px_fail(ctx, ...) with the message
 *            in ctx (the executor prefixes the method and instruction).
 *            Output tensors are resized with px_resize (their bound is the
 *            runtime's), never reallocated.
 *   destroy  when the method is freed; NULL is a harmless no-op.
 *   describe (optional) at program level, with no handle: what a payload
 *            holds and what of it this backend cannot run, for
 *            pyexec_program_delegate_describe (loader/program.c).
 */
#ifndef PX_BACKEND_H
#define PX_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* One CompileSpec{key, value}: bytes inside the program (key not NUL-terminated). */
typedef struct px_compile_spec {
  const char *key;
  uint32_t key_len;
  const uint8_t *value;
  size_t value_len;
} px_compile_spec;

/* The named data a delegate sees: the program's attached data file (.ptd)
 * first, then the program's own Program.named_data (key -> segment). get()
 * returns PYEXEC_OK with the bytes (inside the data file or the program, both
 * alive as long as the program), or an error status with the message set
 * naming the key when it is absent or out of bounds. */
typedef struct px_named_data {
  const void *owner;
  pyexec_status (*get)(const void *owner, const char *key, size_t key_len, const uint8_t **data,
                       size_t *size);
} px_named_data;

typedef struct px_backend {
  const char *id; /* as the program spells it: "XnnpackBackend" */
  pyexec_status (*init)(px_ctx *ctx, const uint8_t *payload, size_t size, const px_compile_spec *specs,
                        size_t nspecs, const px_named_data *named, void **handle);
  /* Optional (may be NULL): see check_call above. */
  pyexec_status (*check_call)(const void *handle, px_value *const *args, size_t nargs);
  int (*execute)(px_ctx *ctx, void *handle, px_value *const *args, size_t nargs);
  void (*destroy)(void *handle);
  /* True when the delegate writes argument `arg` (an output tensor); the
   * builder uses it to know which values the call writes. */
  bool (*writes_arg)(const void *handle, size_t arg);
  /* Optional (may be NULL): describes a payload without initialising it
   * (so also one init refuses): the node types it uses, one name per line,
   * sorted, no duplicates, "!" before each this backend does not run, into
   * buf (snprintf rules, buf may be NULL when cap is 0); *needed the length
   * with the terminator, *unsupported the "!" lines. Bounds-checked like
   * init: InvalidProgram with the message set naming the field for a
   * malformed payload; never crashes on one. */
  pyexec_status (*describe)(const uint8_t *payload, size_t size, char *buf, size_t cap, size_t *needed,
                            size_t *unsupported);
} px_backend;

/* How many backends the library has, and the id of backend `index` (NULL
 * past the end). */
size_t px_backend_count(void);
const char *px_backend_name(size_t index);

/* The backend registered under id[0..n), or NULL. */
const px_backend *px_backend_find(const char *id, size_t n);

#endif /* PX_BACKEND_H */
