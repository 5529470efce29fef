/*
 * program.h - a loaded .pte file: header, segments, constant data and the
 * execution plans, plus the tensor descriptions every other part reads
 * (private).
 */
#ifndef PX_PROGRAM_H
#define PX_PROGRAM_H

#include "core/limits.h"
#include "core/tensor.h"
#include "loader/data_map.h"
#include "loader/fb.h"

/* Slots of the schema's tables (declaration order in program.fbs). */
enum { PROG_VERSION, PROG_PLANS, PROG_CONST_BUFFER, PROG_DELEGATE_DATA, PROG_SEGMENTS,
       PROG_CONST_SEGMENT, PROG_MUTABLE_SEGMENTS, PROG_NAMED_DATA };
enum { PLAN_NAME, PLAN_CONTAINER_META, PLAN_VALUES, PLAN_INPUTS, PLAN_OUTPUTS, PLAN_CHAINS,
       PLAN_OPERATORS, PLAN_DELEGATES, PLAN_BUFFER_SIZES, PLAN_BUFFER_DEVICE };
enum { EVALUE_TYPE, EVALUE_VAL };
enum { TENSOR_SCALAR_TYPE, TENSOR_STORAGE_OFFSET, TENSOR_SIZES, TENSOR_DIM_ORDER,
       TENSOR_REQUIRES_GRAD, TENSOR_DATA_BUFFER_IDX, TENSOR_ALLOCATION_INFO, TENSOR_LAYOUT,
       TENSOR_SHAPE_DYNAMISM, TENSOR_EXTRA_INFO };
enum { ALLOC_MEMORY_ID, ALLOC_OFFSET_LOW, ALLOC_OFFSET_HIGH };
enum { EXTRA_MUTABLE_IDX, EXTRA_FQN, EXTRA_LOCATION, EXTRA_DEVICE_TYPE, EXTRA_DEVICE_INDEX };
enum { CHAIN_INPUTS, CHAIN_OUTPUTS, CHAIN_INSTRUCTIONS, CHAIN_STACKTRACE };
enum { INSTR_ARGS_TYPE, INSTR_ARGS };
enum { INSTR_KERNEL = 1, INSTR_DELEGATE = 2, INSTR_MOVE = 3, INSTR_JUMP_FALSE = 4,
       INSTR_FREE = 5 };
enum { OPERATOR_NAME, OPERATOR_OVERLOAD };
enum { SEGMENT_OFFSET, SEGMENT_SIZE };
enum { SUBSEG_INDEX, SUBSEG_OFFSETS };
enum { BUFFER_STORAGE };
enum { DELEGATE_ID, DELEGATE_PROCESSED, DELEGATE_COMPILE_SPECS };
enum { DATAREF_LOCATION, DATAREF_INDEX };
enum { DATALOC_INLINE = 0, DATALOC_SEGMENT = 1 };
enum { INLINE_DATA };
enum { COMPILE_SPEC_KEY, COMPILE_SPEC_VALUE };
enum { NAMED_DATA_KEY, NAMED_DATA_SEGMENT };


typedef struct px_plan {
  char *name; /* NUL-terminated copy */
  px_fb_table table;
} px_plan;

struct pyexec_program {
  const uint8_t *data; /* the whole file */
  size_t size;
  void *owned; /* heap copy (load_buffer), or NULL */
  void *map;   /* mapping (load_file), or NULL */
  size_t map_len;
  px_fb_table root;
  uint64_t seg_base; /* absolute offset of the first segment */
  px_fb_vec segments;
  px_plan *plans;
  uint32_t nplans;
  /* Constants: either a segment with sub-offsets, or the legacy inline buffers. */
  bool const_in_segment;
  const uint8_t *const_base;
  size_t const_len;
  px_fb_vec const_offsets;
  px_fb_vec const_buffers;
  /* Initial values of mutable buffers: mutable_data_segments[0]. */
  bool has_mutable;
  const uint8_t *mut_base;
  size_t mut_len;
  px_fb_vec mut_offsets;
  /* Delegate payloads stored inline (BackendDelegateInlineData) and keyed
   * blobs in segments (NamedData), for backends. */
  px_fb_vec delegate_data;
  px_fb_vec named_data;
  /* The attached data file (.ptd), or NULL: external tensors resolve there,
   * and delegates see its named data before the program's. */
  px_data_map *data_map;
  /* The content hash of data[0..size) (runtime/weight_cache.c), once taken:
   * content_hashed is read and set with __atomic builtins. */
  uint64_t content_hash;
  int content_hashed;
  /* The mapped file's identity (all zero for bytes given in memory). */
  px_file_id file_id;
  /* A bundled program (.bpte): data/size above are the program inside it;
   * the whole file is bundle/bundle_size (loader/bundle.c). */
  const uint8_t *bundle;
  size_t bundle_size;
  px_fb_vec test_suites; /* BundledMethodTestSuite tables */
  char **suite_methods;  /* NUL-terminated copies, test_suites.count */
};

/* One BackendDelegate of a plan, its bytes located and bounds-checked. */
typedef struct px_delegate_desc {
  const char *id; /* not NUL-terminated; valid UTF-8 */
  uint32_t id_len;
  const uint8_t *data; /* the processed payload */
  size_t size;
  px_fb_vec specs; /* CompileSpec tables; px_program_compile_spec reads one */
} px_delegate_desc;

/* Everything the file says about one tensor value, validated. */
typedef struct px_tensor_desc {
  int dtype;
  int dim;
  int64_t sizes[PX_MAX_DIM]; /* upper bound when dynamic */
  uint8_t dim_order[PX_MAX_DIM];
  bool contiguous;
  bool dynamic;
  uint32_t data_buffer_idx;
  bool has_alloc;
  bool external; /* extra_tensor_info.location EXTERNAL: bytes in the data file */
  const char *fqn; /* its key there (valid UTF-8, not NUL-terminated) */
  uint32_t fqn_len;
  uint32_t memory_id;
  uint64_t offset;
  size_t nbytes; /* at the upper bound */
} px_tensor_desc;

/* Looks up a plan by name; sets the error and returns NULL when absent. */
const px_plan *px_program_plan(const pyexec_program *p, const char *name);

/* Reads and validates values[index] of a plan as a tensor description.
 * `where` names the value in messages ("input 0"). */
pyexec_status px_parse_tensor(const pyexec_program *p, const px_fb_table *tensor,
                              const char *where, px_tensor_desc *d);

/* The value table at `index` of plan `plan`: its tag (a PX_V_* code) and payload. */
pyexec_status px_plan_value(const pyexec_program *p, const px_plan *plan, int64_t index,
                            int *tag, px_fb_table *payload);

/* Constant bytes for data_buffer_idx `idx` (nbytes long, bounds-checked). */
pyexec_status px_program_constant(const pyexec_program *p, uint32_t idx, size_t nbytes,
                                  size_t align, const uint8_t **out);

/* Initial bytes of a mutable buffer with data_buffer_idx `idx`. */
pyexec_status px_program_mutable_init(const pyexec_program *p, uint32_t idx, size_t nbytes,
                                      const uint8_t **out);

/* Number of delegates of a plan, and delegate `index` (id, payload and
 * compile specs checked). */
pyexec_status px_plan_delegate_count(const px_plan *plan, uint32_t *count);
pyexec_status px_plan_delegate(const pyexec_program *p, const px_plan *plan, uint32_t index,
                               px_delegate_desc *out);
/* Compile spec `k` of a delegate (k < specs.count). */
pyexec_status px_program_compile_spec(const px_delegate_desc *d, uint32_t k, const char **key,
                                      uint32_t *key_len, const uint8_t **value, size_t *value_len);

/* The bytes of external tensor `d` (d->external) from the attached data
 * file, its layout checked against d's exactly (dtype, rank, sizes,
 * dim_order) and its size and alignment checked; inside the data file.
 * InvalidProgram naming the tensor (`where`) and its key when no data file
 * is attached, the key is absent, or the layouts differ. */
pyexec_status px_program_external_tensor(const pyexec_program *p, const px_tensor_desc *d, const char *where,
                                         const uint8_t **out);

/* The named data under key[0..n) that delegates see: the attached data
 * file's first, then the program's own (bytes inside the one or the other).
 * InvalidProgram naming the key when it is in neither or out of bounds. */
pyexec_status px_program_named_data(const pyexec_program *p, const char *key, size_t n,
                                    const uint8_t **data, size_t *size);


/* Number of inputs / outputs of a plan. */
pyexec_status px_plan_io_count(const pyexec_program *p, const px_plan *plan, size_t *nin,
                               size_t *nout);


/* "aten::add.out" for operator `i` of a plan, into buf. */
pyexec_status px_plan_operator_name(const px_plan *plan, uint32_t i, char *buf, size_t cap);

/* The bodies of the public entry points pyexec_<name> (pyexec.h documents
 * each; api.c forwards to them). */
pyexec_status px_program_load_file(const char *path, pyexec_program **out);
pyexec_status px_program_load_buffer(const void *data, size_t size, pyexec_program **out);
pyexec_status px_program_load_borrowed(const void *data, size_t size, pyexec_program **out);
pyexec_status px_program_attach_data_file(pyexec_program *p, const char *path);
pyexec_status px_program_attach_data_buffer(pyexec_program *p, const void *data, size_t size);
void px_program_free(pyexec_program *p);
size_t px_program_method_count(const pyexec_program *p);
const char *px_program_method_name(const pyexec_program *p, size_t index);

#endif /* PX_PROGRAM_H */
