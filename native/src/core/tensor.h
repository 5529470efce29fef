/*
 * tensor.h - the runtime's tensor and value types (private).
 *
 * A method's values live in one array of px_value. Tensor values point to a
 * px_tensor owned by the method; a MoveCall copies the px_value, so after a
 * move two values share one px_tensor (the same rule as ExecuTorch's EValue).
 */
#ifndef PX_TENSOR_H
#define PX_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "pyexec.h"

#define PX_MAX_DIM PYEXEC_MAX_DIM

/* Where a tensor's storage comes from. */
enum {
  PX_MEM_UNPLANNED = 0, /* caller-provided (input) or bound / method-owned (output) */
  PX_MEM_PLANNED = 1,   /* inside one of the method's arenas */
  PX_MEM_CONST = 2      /* inside the program's constant data; read-only */
};

typedef struct px_tensor {
  void *data;
  int64_t numel;
  size_t nbytes;   /* numel * element size, at the current sizes */
  size_t capacity; /* bytes at the upper-bound sizes */
  int64_t cap_numel;
  int32_t dim;
  int8_t dtype;
  uint8_t dynamic; /* 1: DYNAMIC_BOUND */
  uint8_t mem;     /* PX_MEM_* */
  uint8_t contiguous; /* dim_order is 0..dim-1 */
  int64_t sizes[PX_MAX_DIM];
  int64_t strides[PX_MAX_DIM]; /* in elements, derived from dim_order */
  int64_t max_sizes[PX_MAX_DIM];
  uint8_t dim_order[PX_MAX_DIM];
} px_tensor;

/* Value tags: ExecuTorch's KernelTypes codes, with NONE and Null merged. */
enum {
  PX_V_NONE = 1,
  PX_V_INT = 2,
  PX_V_BOOL = 3,
  PX_V_DOUBLE = 4,
  PX_V_TENSOR = 5,
  PX_V_STRING = 6,
  PX_V_INT_LIST = 7,
  PX_V_DOUBLE_LIST = 8,
  PX_V_BOOL_LIST = 9,
  PX_V_TENSOR_LIST = 10,
  PX_V_OPT_TENSOR_LIST = 11
};

struct px_value;

typedef struct px_value {
  uint8_t tag;
  union {
    int64_t i;
    double d;
    bool b;
    px_tensor *t;
    struct {
      const char *p;
      uint32_t n;
    } str;
    /* IntList: items are Int values (they may change at run time: symbolic
     * sizes); px_intlist() refreshes `vals` from them. */
    struct {
      struct px_value **items;
      int64_t *vals;
      uint32_t n;
    } il;
    struct {
      const double *vals; /* unaligned-safe copy owned by the method */
      uint32_t n;
    } dl;
    struct {
      const bool *vals;
      uint32_t n;
    } bl;
    /* TensorList / OptionalTensorList: items are Tensor values (or NULL for
     * None in an optional list); px_tensorlist() refreshes `ts`. */
    struct {
      struct px_value **items;
      px_tensor **ts;
      uint32_t n;
    } tl;
  } u;
} px_value;

/* Bytes per element; 0 for an unsupported dtype. */
size_t px_elsize(int dtype);
const char *px_dtype_name(int dtype);
/* A value tag's name ("int", "tensor", "int list"); "unknown" if none. */
const char *px_value_type_name(int tag);
bool px_dtype_supported(int dtype);
static inline bool px_is_floating(int dtype) {
  return dtype == PX_F16 || dtype == PX_F32 || dtype == PX_F64 ||
         dtype == PX_BF16;
}
static inline bool px_is_integral(int dtype, bool include_bool) {
  return dtype == PX_U8 || dtype == PX_I8 || dtype == PX_I16 ||
         dtype == PX_I32 || dtype == PX_I64 || (include_bool && dtype == PX_BOOL);
}

/* Strides (elements) of a contiguous layout in `dim_order`. */
void px_strides_from_dim_order(int dim, const int64_t *sizes,
                               const uint8_t *dim_order, int64_t *strides);
/* Recomputes numel, nbytes and strides after sizes changed. */
void px_tensor_update_layout(px_tensor *t);

/* Current values of an IntList's items. */
static inline const int64_t *px_intlist(px_value *v) {
  for (uint32_t k = 0; k < v->u.il.n; k++) v->u.il.vals[k] = v->u.il.items[k]->u.i;
  return v->u.il.vals;
}
/* Current tensors of a TensorList / OptionalTensorList (NULL entries: None). */
static inline px_tensor *const *px_tensorlist(px_value *v) {
  for (uint32_t k = 0; k < v->u.tl.n; k++) {
    px_value *it = v->u.tl.items[k];
    v->u.tl.ts[k] = (it && it->tag == PX_V_TENSOR) ? it->u.t : NULL;
  }
  return v->u.tl.ts;
}

/* float16 / bfloat16 conversions (round to nearest even). */
float px_half_to_float(uint16_t h);
uint16_t px_float_to_half(float f);
static inline float px_bf16_to_float(uint16_t b) {
  union {
    uint32_t u;
    float f;
  } c;
  c.u = (uint32_t)b << 16;
  return c.f;
}
uint16_t px_float_to_bf16(float f);

#endif /* PX_TENSOR_H */
