/*
 * pyexec.h - the whole public C API of libpyexec.
 *
 * libpyexec loads ExecuTorch programs (.pte files: portable operators, and
 * parts delegated to a backend pyexec has, e.g. XNNPACK) and runs them on the
 * CPU. Anything not declared in this header is private.
 *
 * Conventions
 *   - Every exported name starts with `pyexec_` (functions, types) or
 *     `PYEXEC_` (macros, enum constants).
 *   - Handles (`pyexec_program`, `pyexec_method`) are opaque. Each is created by
 *     one function and destroyed by one `_free` function; freeing NULL is a
 *     harmless no-op, so destructors may run in any order.
 *   - Functions that can fail return a `pyexec_status`. On failure, a message
 *     describing the problem is available from `pyexec_last_error()` on the same
 *     thread until the next failing call on that thread. Output parameters are
 *     left untouched on failure.
 *   - Byte counts are `size_t`; indices are `size_t`; tensor sizes are int64.
 *   - How many of something there are is spelled `<object>_<thing>_count`
 *     (`pyexec_method_input_count`, `pyexec_kernel_count`); `<thing>_info`
 *     and `<thing>_name` take an index below it.
 *   - Parameters that hold a code take its enum type (`pyexec_dtype`,
 *     `pyexec_status`); struct fields hold codes as fixed-width integers, so
 *     that the layout does not depend on the compiler's enum size.
 *   - Thread safety: a program may be shared by any number of threads. A method
 *     serialises its own calls with an internal mutex: concurrent calls on one
 *     method never interleave. Different methods run in parallel.
 *   - A program must outlive every method loaded from it.
 *
 * Example (error checks shortened; every call returns PYEXEC_OK on success):
 *
 *     pyexec_program *prog;
 *     pyexec_method *m;
 *     if (pyexec_program_load_file("model.pte", &prog) != PYEXEC_OK) {
 *         fprintf(stderr, "%s\n", pyexec_last_error());
 *         return 1;
 *     }
 *     pyexec_method_load(prog, "forward", &m);
 *
 *     float x[4] = {1, 2, 3, 4};
 *     int64_t xs[1] = {4};
 *     pyexec_value in = {0};
 *     in.kind = PYEXEC_VALUE_TENSOR;
 *     in.tensor.dtype = PYEXEC_DTYPE_FLOAT32;
 *     in.tensor.dim = 1;
 *     in.tensor.sizes = xs;
 *     in.tensor.data = x;
 *     in.tensor.nbytes = sizeof x;
 *     pyexec_method_set_inputs(m, &in, 1);      // planned: copied; unplanned: borrowed
 *
 *     float y[4];                               // optional: bind output 0 to y
 *     pyexec_method_set_output_ptr(m, 0, y, sizeof y);
 *     pyexec_method_execute(m);
 *
 *     pyexec_value out;
 *     pyexec_method_get_output(m, 0, &out);     // out.tensor.data == y
 *
 *     pyexec_method_free(m);
 *     pyexec_program_free(prog);
 */
#ifndef PYEXEC_H
#define PYEXEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PYEXEC_BUILD)
#define PYEXEC_API __attribute__((visibility("default")))
#else
#define PYEXEC_API
#endif

/* Version of this header. pyexec_version() and pyexec_version_number()
 * return the library's: a program compares them with these to detect a
 * header and library of different releases. Minor and patch each range over
 * 0..999 in the number (0.2.0 is 2000, 1.10.3 is 1010003). */
#define PYEXEC_VERSION_MAJOR 0
#define PYEXEC_VERSION_MINOR 3
#define PYEXEC_VERSION_PATCH 0
#define PYEXEC_VERSION_STRING "0.3.0"
#define PYEXEC_VERSION_NUMBER                                                  \
  (PYEXEC_VERSION_MAJOR * 1000000 + PYEXEC_VERSION_MINOR * 1000 +              \
   PYEXEC_VERSION_PATCH)

/* Largest tensor rank the library handles (the same limit as ExecuTorch). */
#define PYEXEC_MAX_DIM 16

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef enum pyexec_status {
  PYEXEC_OK = 0,
  /* The caller passed something wrong: an index out of range, a tensor of the
   * wrong dtype or shape, an overlapping binding, a missing input. */
  PYEXEC_ERR_INVALID_ARGUMENT = 1,
  /* The file is not a valid ExecuTorch program (bad identifier, truncated,
   * an offset or index out of bounds, inconsistent tables). */
  PYEXEC_ERR_INVALID_PROGRAM = 2,
  /* The program is valid but needs something this library does not provide:
   * an operator without a kernel, a delegate, a dtype, external data. */
  PYEXEC_ERR_UNSUPPORTED = 3,
  /* A kernel failed while the method was executing. */
  PYEXEC_ERR_EXECUTION = 4,
  /* An allocation failed. */
  PYEXEC_ERR_OUT_OF_MEMORY = 5,
  /* A file could not be opened, read or mapped. */
  PYEXEC_ERR_IO = 6
} pyexec_status;

/* The message of the last failing call on this thread, or "" if none.
 * Owned by the library; valid until the next failing call on this thread. */
PYEXEC_API const char *pyexec_last_error(void);

/* A static, human-readable name for a status code ("invalid argument"). */
PYEXEC_API const char *pyexec_status_name(pyexec_status status);

/* The library's version string ("0.2.0"); static storage. */
PYEXEC_API const char *pyexec_version(void);

/* The library's version as PYEXEC_VERSION_NUMBER computes it. */
PYEXEC_API int pyexec_version_number(void);

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */
/* ------------------------------------------------------------------------ */

/* Sets how many threads the library's kernels may use from now on (the
 * calling thread included), for every method in the process; an execute
 * already running keeps the count it started with. 1 runs everything on the
 * calling thread. n must be from 1 to 1024, else
 * PYEXEC_ERR_INVALID_ARGUMENT. Outputs are bit-identical for every count.
 *
 * The threads are one pool of count - 1 workers (the calling thread is the
 * other), created when first needed and shared by all methods: while one
 * execute uses it, an execute on another thread runs its kernels on that
 * thread alone, so however many callers there are, at most count - 1 of the
 * library's own threads work beside them. (The pool grows when the count
 * rises and keeps its threads when it drops; the extra ones sleep.) fork()
 * waits for a split in flight on another thread, joins the pool's threads
 * and forks without them; parent and child each make the pool again when
 * they next need it. */
PYEXEC_API pyexec_status pyexec_set_num_threads(int n);

/* The count kernels may use: the last pyexec_set_num_threads, else the
 * PYEXEC_NUM_THREADS environment variable (read once; a value that is not a
 * whole number from 1 to 1024 is reported on stderr and ignored), else the
 * CPUs this process may run on (its affinity mask, capped by a cgroup CPU
 * quota when one is set). */
PYEXEC_API int pyexec_get_num_threads(void);

/* ------------------------------------------------------------------------ */
/* Data types (ExecuTorch ScalarType codes)                                 */
/* ------------------------------------------------------------------------ */

typedef enum pyexec_dtype {
  PYEXEC_DTYPE_UINT8 = 0,
  PYEXEC_DTYPE_INT8 = 1,
  PYEXEC_DTYPE_INT16 = 2,
  PYEXEC_DTYPE_INT32 = 3,
  PYEXEC_DTYPE_INT64 = 4,
  PYEXEC_DTYPE_FLOAT16 = 5,
  PYEXEC_DTYPE_FLOAT32 = 6,
  PYEXEC_DTYPE_FLOAT64 = 7,
  PYEXEC_DTYPE_BOOL = 11,
  PYEXEC_DTYPE_BFLOAT16 = 15
} pyexec_dtype;

/* Bytes per element of `dtype`, or 0 when the library does not support it. */
PYEXEC_API size_t pyexec_dtype_size(pyexec_dtype dtype);

/* A static name for `dtype` in torch's spelling ("float32"), or "unknown". */
PYEXEC_API const char *pyexec_dtype_name(pyexec_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Values passed in and out of a method                                     */
/* ------------------------------------------------------------------------ */

typedef enum pyexec_value_kind {
  PYEXEC_VALUE_NONE = 0,
  PYEXEC_VALUE_INT = 1,
  PYEXEC_VALUE_DOUBLE = 2,
  PYEXEC_VALUE_BOOL = 3,
  PYEXEC_VALUE_TENSOR = 4,
  PYEXEC_VALUE_STRING = 5,
  /* Lists and other values the program keeps internally. */
  PYEXEC_VALUE_OTHER = 6
} pyexec_value_kind;

/* A dense tensor: `data` holds numel elements of `dtype`, laid out
 * contiguously in the order given by the method's dim_order for that slot
 * (row-major for the usual contiguous dim_order). */
typedef struct pyexec_tensor {
  int32_t dtype;        /* a pyexec_dtype code */
  int32_t dim;          /* rank, 0..PYEXEC_MAX_DIM */
  const int64_t *sizes; /* dim entries */
  void *data;           /* first element */
  size_t nbytes;        /* bytes available at data */
} pyexec_tensor;

typedef struct pyexec_value {
  int32_t kind; /* a pyexec_value_kind */
  int32_t reserved;
  union {
    int64_t i;
    double d;
    int32_t b;
    pyexec_tensor tensor;
    struct {
      const char *data;
      size_t size;
    } string;
  };
} pyexec_value;

/* What a method's input or output slot holds. For tensors the sizes are the
 * upper bound when the slot is dynamic, and nbytes is the upper bound. */
typedef struct pyexec_value_info {
  int32_t kind;  /* a pyexec_value_kind */
  int32_t dtype; /* tensors only */
  int32_t dim;
  int32_t is_memory_planned; /* 1: storage is part of the method's plan */
  int32_t is_dynamic;        /* 1: sizes may change up to the bound */
  int32_t is_contiguous;     /* 1: dim_order is 0, 1, ..., dim-1 */
  /* Inputs: 1 when the program writes the input in place (what
   * torch.export records as a user-input mutation: the caller's tensor is
   * updated when the input is unplanned, and its new value is also an output,
   * the one pyexec_method_query_alias maps to it). Outputs: always 0 (every
   * output is written; pyexec_method_query_alias says which is an input).
   * Attributes: 1 when the program writes the tensor (a mutable buffer).
   * (0.2's is_mutated, which was 1 for every output the program computes.) */
  int32_t is_mutated_input;
  int32_t reserved;
  int64_t sizes[PYEXEC_MAX_DIM];
  uint8_t dim_order[PYEXEC_MAX_DIM];
  size_t nbytes;
} pyexec_value_info;

/* ------------------------------------------------------------------------ */
/* Programs                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct pyexec_program pyexec_program;

/* Constructs a program from the file at `path`, which is memory-mapped
 * read-only; constant tensors point into the mapping (no copy). On success
 * *out owns the mapping; free it with pyexec_program_free. */
PYEXEC_API pyexec_status pyexec_program_load_file(const char *path,
                                                  pyexec_program **out);

/* Constructs a program from `size` bytes at `data`, copied into memory the
 * program owns; the caller may free `data` on return. */
PYEXEC_API pyexec_status pyexec_program_load_buffer(const void *data,
                                                    size_t size,
                                                    pyexec_program **out);

/* Constructs a program over `size` bytes at `data` without copying them. The
 * caller retains ownership and must keep the bytes alive and unchanged until
 * pyexec_program_free returns. `data` must be 16-byte aligned. */
PYEXEC_API pyexec_status pyexec_program_load_borrowed(const void *data,
                                                      size_t size,
                                                      pyexec_program **out);

/* Attaches a data file (.ptd, ExecuTorch's "flat_tensor" format) to a
 * program exported with its weights kept apart
 * (ExecutorchBackendConfig(external_constants=True), or XNNPACK weights
 * routed to a .ptd). The file at `path` is memory-mapped read-only and
 * checked whole (header, tables, every entry's bounds and layout, no
 * duplicate key); methods loaded afterwards resolve their external tensors
 * there by name (zero-copy for constants, copied into planned memory for
 * mutable ones; dtype, rank, sizes and dim_order must match exactly) and
 * their delegates read named data there first, then in the program. The
 * program owns the mapping and releases it in pyexec_program_free.
 *
 * Attach before loading methods and before sharing the program between
 * threads; methods loaded earlier are unaffected. At most one data file per
 * program: a second attach is PYEXEC_ERR_INVALID_ARGUMENT.
 * PYEXEC_ERR_IO when the file cannot be opened or mapped;
 * PYEXEC_ERR_INVALID_PROGRAM, naming the field, when it is malformed or
 * holds a key the program's own named data also holds. On failure the
 * program is unchanged. */
PYEXEC_API pyexec_status pyexec_program_attach_data_file(pyexec_program *program,
                                                         const char *path);

/* pyexec_program_attach_data_file over `size` bytes at `data`, copied into
 * memory the program owns; the caller may free `data` on return. */
PYEXEC_API pyexec_status pyexec_program_attach_data_buffer(
    pyexec_program *program, const void *data, size_t size);

/* Destroys a program. Every method loaded from it must be freed first.
 * NULL is a no-op. */
PYEXEC_API void pyexec_program_free(pyexec_program *program);

/* Number of methods (execution plans) in the program. */
PYEXEC_API size_t pyexec_program_method_count(const pyexec_program *program);

/* Name of method `index`, NUL-terminated; owned by the program and valid until
 * it is freed. NULL when the index is out of range. */
PYEXEC_API const char *pyexec_program_method_name(const pyexec_program *program,
                                                  size_t index);

/* Input and output counts and metadata of method `name`, read from the file
 * without loading the method. The counts are stored in *count. */
PYEXEC_API pyexec_status pyexec_program_input_count(
    const pyexec_program *program, const char *name, size_t *count);
PYEXEC_API pyexec_status pyexec_program_output_count(
    const pyexec_program *program, const char *name, size_t *count);
PYEXEC_API pyexec_status pyexec_program_input_info(const pyexec_program *program,
                                                   const char *name,
                                                   size_t index,
                                                   pyexec_value_info *out);
PYEXEC_API pyexec_status pyexec_program_output_info(
    const pyexec_program *program, const char *name, size_t index,
    pyexec_value_info *out);

/* Attributes of method `name`: the tensors the program names (a
 * fully_qualified_name in the file), such as mutable buffers exported with
 * ExecutorchBackendConfig(emit_mutable_buffer_names=True) and weights kept in
 * a data file, in the order of the method's values (ExecuTorch's
 * MethodMeta::num_attributes / attribute_tensor_meta). The count is stored
 * in *count. attribute_info describes attribute `index` into *out and writes
 * its name into `fqn` (capacity `cap` bytes, always NUL-terminated when
 * cap > 0, truncated to fit); *needed, when not NULL, receives the length the
 * name needs, including the terminator. PYEXEC_ERR_INVALID_ARGUMENT for an
 * unknown method or an index out of range. */
PYEXEC_API pyexec_status pyexec_program_attribute_count(
    const pyexec_program *program, const char *name, size_t *count);
PYEXEC_API pyexec_status pyexec_program_attribute_info(
    const pyexec_program *program, const char *name, size_t index,
    pyexec_value_info *out, char *fqn, size_t cap, size_t *needed);

/* Writes into `buf` (capacity `cap` bytes, always NUL-terminated when cap > 0)
 * the operators method `name` uses, one `name.overload` per line, sorted, and
 * sets *missing to how many of them have no kernel in this library (those
 * lines start with "!"). *needed receives the length the full list needs,
 * including the terminator. */
PYEXEC_API pyexec_status pyexec_program_method_operators(
    const pyexec_program *program, const char *name, char *buf, size_t cap,
    size_t *needed, size_t *missing);

/* Number of delegates method `name` calls (its BackendDelegate entries, the
 * parts of the program the exporter handed to a backend such as XNNPACK),
 * stored in *count; read from the file without loading the method. */
PYEXEC_API pyexec_status pyexec_program_delegate_count(
    const pyexec_program *program, const char *name, size_t *count);

/* Describes delegate `index` (below pyexec_program_delegate_count) of method
 * `name` without loading the method, so also one that load refuses. Writes
 * into `buf` (capacity `cap` bytes, always NUL-terminated when cap > 0):
 *   - first line: the backend id the program names ("XnnpackBackend"),
 *     starting with "!" when this library has no backend with that id
 *     (control characters in the id are shown as '?');
 *   - then, for a backend this library has, the node types the delegate's
 *     payload uses, one per line, sorted; those starting with "!" are ones
 *     this library does not run there (a node type it lacks, or a node with
 *     quantized values). A backend without a description lists none.
 * *unsupported receives how many lines start with "!" (0: every part is
 * one this library runs); *needed the length the full text needs, including
 * the terminator. A malformed payload is PYEXEC_ERR_INVALID_PROGRAM with a
 * message naming the method, delegate and field; nothing is written then. */
PYEXEC_API pyexec_status pyexec_program_delegate_describe(
    const pyexec_program *program, const char *name, size_t index, char *buf,
    size_t cap, size_t *needed, size_t *unsupported);

/* ------------------------------------------------------------------------ */
/* Bundled programs (.bpte)                                                 */
/* ------------------------------------------------------------------------ */

/* A bundled program (ExecuTorch's BundledProgram, file identifier "BP08",
 * usually a .bpte file) wraps a program with test sets: for some methods,
 * test cases of inputs and the outputs expected from them. Every load
 * function accepts one: the program loaded is the one inside (read in place,
 * as a part of the mapped file or of the buffer, without another copy), and
 * the test sets are read with the functions below. The whole bundle is
 * checked at load (every offset, count, tensor shape and data length), so
 * that a malformed one is PYEXEC_ERR_INVALID_PROGRAM naming the field, and
 * an unknown bundle version ("BP07") PYEXEC_ERR_UNSUPPORTED. Whether a test
 * case fits its method (input count, dtypes, shapes) is not checked here: a
 * method input check (pyexec_method_set_inputs) does that when it is run. */

/* One input or expected output of a test case. */
typedef struct pyexec_test_value {
  int32_t kind;  /* PYEXEC_VALUE_TENSOR, _INT, _DOUBLE or _BOOL */
  int32_t dtype; /* tensors: a pyexec_dtype code */
  int32_t dim;   /* tensors: rank */
  int32_t b;     /* _BOOL: 0 or 1 */
  int64_t i;     /* _INT */
  double d;      /* _DOUBLE */
  int64_t sizes[PYEXEC_MAX_DIM];
  uint8_t dim_order[PYEXEC_MAX_DIM];
  /* Tensors: nbytes (numel * element size) bytes laid out in dim_order,
   * aligned to the element size; inside the program's memory, valid until
   * the program is freed. */
  const void *data;
  size_t nbytes;
} pyexec_test_value;

/* 1 when the program was loaded from a bundled program, else 0 (also for
 * NULL). */
PYEXEC_API int pyexec_program_is_bundled(const pyexec_program *program);

/* Number of test suites (one per tested method); 0 for a plain program. */
PYEXEC_API size_t pyexec_program_test_suite_count(const pyexec_program *program);

/* Name of the method test suite `suite` tests, NUL-terminated; owned by the
 * program and valid until it is freed. NULL when the index is out of range.
 * It may name a method the program lacks (the bundle says so, not the
 * program). */
PYEXEC_API const char *pyexec_program_test_suite_method(
    const pyexec_program *program, size_t suite);

/* Number of test cases of suite `suite`, stored in *count. */
PYEXEC_API pyexec_status pyexec_program_test_case_count(
    const pyexec_program *program, size_t suite, size_t *count);

/* Number of inputs (expected 0) or expected outputs (expected 1) of test case
 * `test_case` of suite `suite`, stored in *count. */
PYEXEC_API pyexec_status pyexec_program_test_value_count(
    const pyexec_program *program, size_t suite, size_t test_case,
    int expected, size_t *count);

/* Describes input (expected 0) or expected output (expected 1) `index` of
 * test case `test_case` of suite `suite` in *out; tensor bytes are not
 * copied (see pyexec_test_value). PYEXEC_ERR_INVALID_ARGUMENT for an index
 * out of range. */
PYEXEC_API pyexec_status pyexec_program_test_value(
    const pyexec_program *program, size_t suite, size_t test_case,
    int expected, size_t index, pyexec_test_value *out);

/* ------------------------------------------------------------------------ */
/* Methods                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct pyexec_method pyexec_method;

/* Constructs an executable instance of method `name`: its own planned memory
 * (zero-filled, initial mutable-buffer values copied in), state and bindings.
 * Fails with PYEXEC_ERR_UNSUPPORTED listing every operator without a kernel.
 * The program must outlive the method. Free with pyexec_method_free. */
PYEXEC_API pyexec_status pyexec_method_load(pyexec_program *program,
                                            const char *name,
                                            pyexec_method **out);

/* Destroys a method and the storage it owns. Caller storage (unplanned
 * inputs, bound outputs) is not touched. NULL is a no-op. */
PYEXEC_API void pyexec_method_free(pyexec_method *method);

/* Name of the method; owned by the program. */
PYEXEC_API const char *pyexec_method_name(const pyexec_method *method);

/* Number of inputs / outputs of the method (0 for NULL). */
PYEXEC_API size_t pyexec_method_input_count(const pyexec_method *method);
PYEXEC_API size_t pyexec_method_output_count(const pyexec_method *method);

/* Metadata of input / output `index` (the same as the program-level calls). */
PYEXEC_API pyexec_status pyexec_method_input_info(const pyexec_method *method,
                                                  size_t index,
                                                  pyexec_value_info *out);
PYEXEC_API pyexec_status pyexec_method_output_info(const pyexec_method *method,
                                                   size_t index,
                                                   pyexec_value_info *out);

/* Installs all `count` inputs at once; count must equal the number of inputs.
 * Everything is checked before anything is installed: on failure no input
 * changes and the method refuses to execute until a complete valid set is
 * installed.
 *   - Planned tensor inputs are copied into the method's memory; the caller's
 *     buffer may be changed or freed on return.
 *   - Unplanned tensor inputs are borrowed: the method reads (and, where the
 *     program mutates the input, writes) `data` during every later execute. The
 *     caller must keep that memory alive until the next successful
 *     set_inputs or until the method is freed.
 *   - Scalar inputs must equal the value the program was traced with (the
 *     same rule as ExecuTorch; doubles within rtol 1e-5, atol 1e-4).
 * Tensor data must be contiguous in the slot's dim_order; dtype must match
 * exactly; rank must match; sizes must match a static slot and stay within
 * the bound of a dynamic one; an unplanned input must not overlap a bound
 * output. */
PYEXEC_API pyexec_status pyexec_method_set_inputs(pyexec_method *method,
                                                  const pyexec_value *inputs,
                                                  size_t count);

/* Uninstalls every input: the method keeps no pointer to caller memory
 * (unplanned inputs are no longer read), and it refuses to execute
 * ("input 0 has not been set") until a complete valid set is installed. A
 * binding calls it when its own checks refuse inputs before they reach
 * set_inputs, so that the previous set is not run by mistake. Fails only for
 * a NULL method. */
PYEXEC_API pyexec_status pyexec_method_clear_inputs(pyexec_method *method);

/* Binds unplanned tensor output `index` to caller memory: every later execute
 * writes that output straight into `data`. NULL unbinds (the method's own
 * storage is used again). The caller retains ownership and must keep the
 * memory alive while it is bound. Refused (PYEXEC_ERR_INVALID_ARGUMENT) for an
 * index out of range, a non-tensor or memory-planned output, an output listed
 * at more than one index, an output that is an input, a non-contiguous
 * dim_order, `nbytes` below the output's upper bound, or memory overlapping
 * another bound output or an installed unplanned input. */
PYEXEC_API pyexec_status pyexec_method_set_output_ptr(pyexec_method *method,
                                                      size_t index, void *data,
                                                      size_t nbytes);

/* Returns PYEXEC_OK when output `index` can be bound with
 * pyexec_method_set_output_ptr, or the reason it cannot (the slot-level
 * checks of that function, without a buffer and without side effects). */
PYEXEC_API pyexec_status pyexec_method_check_bindable(const pyexec_method *method,
                                                      size_t index);

/* If output `index` is the very same program value as an input, stores that
 * input's index in *input_index and returns 1; otherwise returns 0 (also for an
 * index out of range). Decided from the program's structure; no side effects. */
PYEXEC_API int pyexec_method_query_alias(const pyexec_method *method,
                                         size_t index, size_t *input_index);

/* Runs the method once with the installed inputs. Fails with
 * PYEXEC_ERR_INVALID_ARGUMENT ("input N has not been set") when inputs are
 * missing and with PYEXEC_ERR_EXECUTION when a kernel fails. */
PYEXEC_API pyexec_status pyexec_method_execute(pyexec_method *method);

/* Describes output `index` after execute: kind, scalar value or tensor dtype,
 * rank, sizes (as written) and data pointer. For tensors, `sizes` and `data`
 * point into memory owned by the method (or the caller, for bound outputs and
 * unplanned inputs); valid until the next execute, set_inputs or
 * set_output_ptr call, or until the method is freed. */
PYEXEC_API pyexec_status pyexec_method_get_output(pyexec_method *method,
                                                  size_t index,
                                                  pyexec_value *out);

/* Describes attribute `index` (see pyexec_program_attribute_info) as the
 * method holds it now: a tensor whose `data` is the method's own storage
 * (a mutable buffer's current value, updated by every execute) or the
 * program's constant. Valid until the method is freed; the caller must not
 * write through it while another call runs on the method. */
PYEXEC_API pyexec_status pyexec_method_get_attribute(pyexec_method *method,
                                                     size_t index,
                                                     pyexec_value *out);

/* Describes outputs 0..count-1 at once (as pyexec_method_get_output does for
 * one), into out[0..count-1]; count must not exceed the number of outputs. */
PYEXEC_API pyexec_status pyexec_method_get_outputs(pyexec_method *method,
                                                   pyexec_value *out,
                                                   size_t count);

/* The hot path in one call, described by a struct the caller prepares once
 * and reuses (through an FFI, each argument of a call has a price; a
 * prepared call has one):
 *   - installs `inputs` unless it is NULL (exactly as pyexec_method_set_inputs;
 *     input_count must then be the number of inputs); NULL runs on the
 *     inputs already installed;
 *   - executes;
 *   - describes outputs 0..output_count-1 into `outputs` (as
 *     pyexec_method_get_outputs);
 *   - sets outputs_changed to 1 when any of those descriptions (kind, scalar
 *     value, dtype, rank, sizes, data pointer, byte count) differs from what
 *     the previous successful pyexec_method_run on this method described (or
 *     there was none), else 0: a caller can keep the objects it built over
 *     the outputs of that run. The record is the library's, kept by runs
 *     alone: get_output(s), set_output_ptr and set_inputs neither read nor
 *     reset it, so objects built from get_output(s) belong apart from the
 *     ones a caller reuses across runs.
 * On failure nothing is described; a failure while installing leaves the
 * method with no inputs. The struct is only read during the call. */
typedef struct pyexec_run {
  pyexec_method *method;
  const pyexec_value *inputs;
  size_t input_count;
  pyexec_value *outputs;
  size_t output_count;
  int32_t outputs_changed; /* set by the call */
} pyexec_run;

PYEXEC_API pyexec_status pyexec_method_run(pyexec_run *run);

/* Total bytes of planned memory the method owns (all arenas). */
PYEXEC_API size_t pyexec_method_planned_nbytes(const pyexec_method *method);

/* ------------------------------------------------------------------------ */
/* Profiling                                                                */
/* ------------------------------------------------------------------------ */

/* One timed event. While profiling is enabled, every instruction an execute
 * runs appends one (depth 0), in execution order: only the instructions
 * actually run, so a conditional program lists the branch it took. A
 * delegate call is named "delegate:<backend id>"; the nodes the backend runs
 * inside it follow it at depth 1 (XNNPACK: one per node, named by node
 * type), their time included in the call's. */
typedef struct pyexec_profile_event {
  const char *name;    /* "aten::add.out", "delegate:XnnpackBackend", "FullyConnected" */
  const char *shapes;  /* input shapes, "[1,3,8,8] [16]"; a tensor list as "{[2] [2]}" */
  int64_t start_ns;    /* CLOCK_MONOTONIC */
  int64_t duration_ns;
  int32_t depth;       /* 0: an instruction; 1: a node inside the delegate call before it */
  int32_t chain;       /* the instruction's chain */
  int32_t index;       /* depth 0: its index in the chain; depth 1: the node's index */
  int32_t run;         /* which execute since the last reset, from 0 */
} pyexec_profile_event;

/* Turns collection on (enabled != 0) or off for the method's later
 * executes. Off by default, and then free: the executor runs a loop with no
 * profiling in it. Turning it on or off keeps the events recorded so far.
 * Events are kept in memory the method owns, up to 2^21 of them (more are
 * dropped; see pyexec_method_profile_set_limit). Fails only for a NULL method. */
PYEXEC_API pyexec_status pyexec_method_profile_enable(pyexec_method *method,
                                                      int enabled);

/* Number of events recorded since the last reset (0 for NULL). */
PYEXEC_API size_t pyexec_method_profile_event_count(pyexec_method *method);

/* Describes event `index` (below pyexec_method_profile_event_count). `name`
 * and `shapes` point into memory the method owns, valid until the next
 * execute, reset or free of the method. */
PYEXEC_API pyexec_status pyexec_method_profile_event(pyexec_method *method,
                                                     size_t index,
                                                     pyexec_profile_event *out);

/* Forgets every recorded event (collection stays as it was). Fails only for
 * a NULL method. */
PYEXEC_API pyexec_status pyexec_method_profile_reset(pyexec_method *method);

/* Events not recorded since the last reset because the limit was reached
 * (or memory ran out); 0 for NULL. A profile with drops is missing its
 * latest events, not earlier ones. */
PYEXEC_API size_t pyexec_method_profile_dropped(pyexec_method *method);

/* The most events kept until the next reset (those beyond are counted by
 * pyexec_method_profile_dropped); 0 restores the default, 2^21 (about
 * 100 MB). Fails only for a NULL method or when memory runs out. */
PYEXEC_API pyexec_status pyexec_method_profile_set_limit(pyexec_method *method,
                                                         size_t max_events);

/* Executes recorded while enabled since the last reset (0 for NULL); event
 * `run` numbers index them. */
PYEXEC_API size_t pyexec_method_profile_run_count(pyexec_method *method);

/* The CLOCK_MONOTONIC start and the duration of execute `run`'s
 * instruction loop (below pyexec_method_profile_run_count): the span its
 * depth-0 events lie in. */
PYEXEC_API pyexec_status pyexec_method_profile_run(pyexec_method *method, size_t run,
                                                   int64_t *start_ns, int64_t *duration_ns);

/* ---- Debug buffer: the values each instruction wrote ----------------------
 *
 * With a debug buffer (off by default), a profiled execute also copies
 * values into it, as ExecuTorch's ETDump does with a debug buffer and
 * intermediate-output logging on:
 *   - after a kernel call: each value it writes (its out= tensors, a tensor
 *     list it fills, a scalar it returns), once each, in argument order; the
 *     prim ops ExecuTorch registers without logging (executorch_prim::*,
 *     aten::sym_*, aten::_local_scalar_dense) record nothing;
 *   - after a delegate call: every argument of the call, inputs then
 *     outputs, in the call's order (ExecuTorch's DelegateCall logging);
 *   - after the execute: each method output, marked as a program output.
 * Instructions load-time rewriting removed (a weight transpose folded into
 * a view) still record their value and get a profile event, and instead of
 * fused instructions (a convolution with its batch norm and ReLU) the
 * method runs the unfused ones while the debug buffer is on, so every
 * instruction of the program records what ExecuTorch records for it.
 * Nothing of this runs without profiling on (pyexec_method_profile_enable):
 * an execute that is not profiled is unchanged.
 *
 * Tensor bytes are stored row-major (whatever the tensor's dim_order), each
 * tensor starting at a multiple of 64 bytes, as ExecuTorch's buffer sink
 * aligns them. When the next value does not fit, the execute stops there
 * and fails with PYEXEC_ERR_OUT_OF_MEMORY, its message naming the
 * instruction and the bytes needed (ExecuTorch aborts the process); the
 * values recorded before it stay readable. The buffer's bytes and the
 * values recorded are kept until pyexec_method_profile_reset, a new
 * pyexec_method_profile_set_debug_buffer or the method's free. */

/* One recorded value. A tensor list is recorded as one value of kind
 * PYEXEC_VALUE_OTHER whose `count` tensors are the values that follow it. */
typedef struct pyexec_debug_value {
  int64_t offset;       /* TENSOR: where its bytes start in the debug buffer; -1 when it has none */
  int64_t nbytes;       /* TENSOR: its bytes (numel x element size) */
  int64_t int_value;    /* INT: the value; BOOL: 0 or 1 */
  double double_value;  /* DOUBLE: the value */
  int64_t sizes[PYEXEC_MAX_DIM]; /* TENSOR: its first `dim` sizes */
  int32_t kind;         /* pyexec_value_kind: TENSOR, INT, DOUBLE, BOOL, or OTHER (a tensor list) */
  int32_t count;        /* OTHER: the number of tensors that follow; else 0 */
  int32_t dtype;        /* TENSOR: a pyexec_dtype code */
  int32_t dim;          /* TENSOR: its rank */
  int32_t event;        /* the profile event of the instruction that wrote it; -1 for a program output */
  int32_t run;          /* which execute since the last reset, from 0 */
  int32_t output;       /* -1, or the index of the method output it is (recorded after the run) */
  int32_t in_list;      /* 1: a tensor of the tensor list recorded before it */
} pyexec_debug_value;

/* Gives the method a debug buffer of `nbytes` bytes (0 removes it and
 * turns the recording off), forgetting the values recorded so far. The
 * buffer is the method's own memory, reserved now. Fails for a NULL method,
 * or when memory runs out. */
PYEXEC_API pyexec_status pyexec_method_profile_set_debug_buffer(pyexec_method *method,
                                                                size_t nbytes);

/* Number of values recorded since the last reset (0 for NULL or without a
 * debug buffer). */
PYEXEC_API size_t pyexec_method_profile_debug_count(pyexec_method *method);

/* Describes recorded value `index` (below pyexec_method_profile_debug_count). */
PYEXEC_API pyexec_status pyexec_method_profile_debug_value(pyexec_method *method, size_t index,
                                                           pyexec_debug_value *out);

/* The debug buffer's bytes in use (every offset above lies below *used):
 * memory the method owns, valid until the next execute, reset, new debug
 * buffer or free of the method. Without a debug buffer: NULL and 0. Fails
 * only for a NULL argument. */
PYEXEC_API pyexec_status pyexec_method_profile_debug_buffer(pyexec_method *method,
                                                            const void **data, size_t *used);

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */
/* ------------------------------------------------------------------------ */

/* Number of kernels (operators) the library provides. */
PYEXEC_API size_t pyexec_kernel_count(void);

/* Name of kernel `index` ("aten::add.out"), sorted; static storage. NULL when
 * the index is out of range. */
PYEXEC_API const char *pyexec_kernel_name(size_t index);

/* Number of delegate backends the library has (a program's DelegateCall to
 * any other backend id is refused at method load). */
PYEXEC_API size_t pyexec_backend_count(void);

/* Id of backend `index` as programs name it ("XnnpackBackend"); static
 * storage. NULL when the index is out of range. */
PYEXEC_API const char *pyexec_backend_name(size_t index);

#ifdef __cplusplus
}
#endif

#endif /* PYEXEC_H */
