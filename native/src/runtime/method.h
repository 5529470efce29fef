/*
 * method.h - a loaded method: its values, planned arenas, decoded
 * instructions and IO state (private). method_build.c builds and frees it,
 * fold.c rewrites it at load, method_io.c installs its inputs and describes
 * its outputs, executor.c runs its instructions, memory.c owns its large
 * buffers.
 */
#ifndef PX_METHOD_H
#define PX_METHOD_H

#include <pthread.h>

#include "backends/backend.h"
#include "kernels/kernel.h"
#include "loader/program.h"

typedef struct px_instr {
  uint8_t kind; /* INSTR_* */
  uint32_t nargs;
  px_kernel_fn fn;
  px_value **args;
  const char *op; /* operator name, for messages */
  int32_t a, b;   /* move: from, to; jump: cond, dest; free: value; delegate: index */
  bool relayout;  /* a tensor argument is not row-major and the kernel needs it to be */
  bool any_layout; /* the kernel reads and writes tensors of any dim_order ('@') */
  const char *sig; /* the kernel's signature (kernel.h) */
} px_instr;

/* Whether argument j of a kernel call is one it writes (after '|' in its
 * signature): the load-time passes (fold.c, fuse.c) count writers by it. */
static inline bool px_instr_writes_arg(const px_instr *in, uint32_t j) {
  uint32_t k = 0;
  for (const char *s = in->sig; *s; s++) {
    if (*s == '@') continue;
    if (*s == '|') return j >= k;
    k++;
  }
  return false;
}

/* An instruction load-time folding removed (fold.c); the run skips it. */
#define INSTR_NOP 0

typedef struct px_chain {
  px_instr *instrs;
  uint32_t n;
} px_chain;

typedef struct px_output {
  int32_t vidx;
  int32_t alias_input; /* the input with the same value, or -1 */
  bool duplicate;      /* the value is listed at more than one output index */
  void *bound;         /* caller storage, or NULL */
  size_t bound_nbytes;
  void *own;           /* storage the method allocated for an unplanned output */
  size_t own_len;      /* its size, and whether it is a mapping (big_alloc) */
  bool own_mapped;
} px_output;

/* A delegate, initialised once at load (backends/backend.h). */
typedef struct px_delegate {
  const px_backend *backend;
  void *handle;
  char id[64]; /* for messages, truncated */
} px_delegate;

typedef struct px_alloc px_alloc;

struct pyexec_method {
  pyexec_program *program;
  const px_plan *plan;
  pthread_mutex_t lock;
  px_alloc *allocs; /* everything allocated for the method, freed together */

  px_value *values;
  uint32_t nvalues;
  bool *written; /* per value: some instruction writes it */

  uint8_t **arenas; /* arenas[0] unused, as memory_id is 1-based */
  size_t *arena_sizes;
  bool *arena_mapped;
  uint32_t narenas;
  size_t planned_total;

  px_chain *chains;
  uint32_t nchains;
  /* The chains as they were before fusion (fuse.c), which the executor runs
   * while a debug buffer is on; NULL when fusion changed nothing. */
  px_chain *plain_chains;

  px_delegate *delegates;
  uint32_t ndelegates;

  int32_t *inputs;
  uint32_t nin;
  bool *input_set;
  void **in_stage;      /* per input: copy of an unplanned input that lies in the method's own memory */
  const void **in_src;  /* per input, during set_inputs: where its bytes are copied from */
  size_t *in_need;      /* per input, during set_inputs: bytes at its sizes */
  bool *in_restore;     /* planned input that values of a run overwrite: kept in in_stage */
  bool inputs_fresh;    /* no run since the inputs were installed */

  px_output *outs;
  uint32_t nout;
  /* What the previous pyexec_method_run described (it reports changes). */
  pyexec_value *last_out;
  int64_t *last_sizes; /* PYEXEC_MAX_DIM per output */
  size_t last_count;

  px_ctx ctx;
  char msg[1024];
  struct px_profile *prof_store; /* the events, once profiling was first enabled; ctx.prof while on */
  struct px_pcache *pcache;      /* the packed-weight cache file; packed weights may point into it */
  struct px_debug *debug;        /* the debug buffer (runtime/debug.h), or NULL: off */
};

/* The packed-weight cache for loading m (weight_cache.c), or NULL when the
 * cache is off for it (PYEXEC_CACHE, the size threshold, no usable
 * directory). */
struct px_pcache *px_weight_cache_open(const pyexec_method *m);

/* Load-time rewrites that leave results unchanged (fold.c): drops the
 * per-call transpose of constant weights that only matrix products read. */
pyexec_status px_fold_method(pyexec_method *m);

/* Load-time fusion (fuse.c): a float32 convolution with the batch norm and
 * ReLU / hardtanh after it becomes one instruction, the batch norm folded
 * into a copy of its weights. Runs after px_fold_method. */
pyexec_status px_fuse_method(pyexec_method *m);


/* The bodies of the public entry points pyexec_<name> (pyexec.h documents
 * each; api.c forwards to them). */
pyexec_status px_method_load(pyexec_program *program, const char *name, pyexec_method **out);
void px_method_free(pyexec_method *m);
const char *px_method_name(const pyexec_method *m);
size_t px_method_input_count(const pyexec_method *m);
size_t px_method_output_count(const pyexec_method *m);
size_t px_method_planned_nbytes(const pyexec_method *m);
pyexec_status px_method_input_info(const pyexec_method *m, size_t index, pyexec_value_info *out);
pyexec_status px_method_output_info(const pyexec_method *m, size_t index, pyexec_value_info *out);
int px_method_query_alias(const pyexec_method *m, size_t index, size_t *input_index);
pyexec_status px_method_set_inputs(pyexec_method *m, const pyexec_value *inputs, size_t count);
pyexec_status px_method_get_attribute(pyexec_method *m, size_t index, pyexec_value *out);
pyexec_status px_method_clear_inputs(pyexec_method *m);
pyexec_status px_method_check_bindable(const pyexec_method *m, size_t index);
pyexec_status px_method_set_output_ptr(pyexec_method *m, size_t index, void *data, size_t nbytes);
pyexec_status px_method_get_output(pyexec_method *m, size_t index, pyexec_value *out);
pyexec_status px_method_get_outputs(pyexec_method *m, pyexec_value *out, size_t count);
pyexec_status px_method_run(pyexec_run *run);
pyexec_status px_method_execute(pyexec_method *m);

#endif /* PX_METHOD_H */
