/*
 * tensor.c - the dtype queries generated from dtype.h, layout helpers and
 * half-precision conversions.
 */
#include "core/tensor.h"

#include <string.h>

/* The public dtype enum is the same table: each of the library's dtypes
 * has its pyexec.h constant, with the same code, and its C type its size. */
#define CHECK_(code, id, public_id, name, size, ctype)                                  \
  _Static_assert(PX_##id == code && code == (int)PYEXEC_DTYPE_##public_id,               \
                 "pyexec.h's PYEXEC_DTYPE_" #public_id " differs from dtype.h");       \
  _Static_assert(sizeof(ctype) == size, "dtype.h: the size of " name " is not its C type's");
PX_DTYPES(CHECK_)
#undef CHECK_

size_t px_elsize(int dtype) {
  switch (dtype) {
#define SIZE_(code, id, public_id, name, size, ctype) \
  case code: return size;
    PX_DTYPES(SIZE_)
#undef SIZE_
    default: return 0;
  }
}

bool px_dtype_supported(int dtype) { return px_elsize(dtype) != 0; }

const char *px_dtype_name(int dtype) {
  switch (dtype) {
#define NAME_(code, id, public_id, name, size, ctype) \
  case code: return name;
    PX_DTYPES(NAME_)
#undef NAME_
#define NAMED_ONLY_(code, name) \
  case code: return name;
    PX_DTYPES_NAMED_ONLY(NAMED_ONLY_)
#undef NAMED_ONLY_
    default: return "unknown";
  }
}

const char *px_value_type_name(int tag) {
  switch (tag) {
    case PX_V_NONE: return "None";
    case PX_V_INT: return "int";
    case PX_V_BOOL: return "bool";
    case PX_V_DOUBLE: return "double";
    case PX_V_TENSOR: return "tensor";
    case PX_V_STRING: return "string";
    case PX_V_INT_LIST: return "int list";
    case PX_V_DOUBLE_LIST: return "double list";
    case PX_V_BOOL_LIST: return "bool list";
    case PX_V_TENSOR_LIST: return "tensor list";
    case PX_V_OPT_TENSOR_LIST: return "optional tensor list";
    default: return "unknown";
  }
}

void px_strides_from_dim_order(int dim, const int64_t *sizes,
                               const uint8_t *dim_order, int64_t *strides) {
  int64_t s = 1;
  for (int k = dim - 1; k >= 0; k--) {
    int d = dim_order[k];
    strides[d] = s;
    if (sizes[d] != 0) s *= sizes[d];
  }
}

void px_tensor_update_layout(px_tensor *t) {
  int64_t n = 1;
  for (int k = 0; k < t->dim; k++) n *= t->sizes[k];
  t->numel = n;
  t->nbytes = (size_t)n * px_elsize(t->dtype);
  px_strides_from_dim_order(t->dim, t->sizes, t->dim_order, t->strides);
}

float px_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t px_float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
    return (uint16_t)(sign | 0x7c00u);
  if (absx < 0x38800000u) { /* below the smallest normal half: subnormal */
    if (absx < 0x33000000u) return (uint16_t)sign; /* rounds to zero */
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = absx - 0x38000000u; /* rebias exponent by 112 */
  uint32_t out = r >> 13;
  uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1))) out++;
  return (uint16_t)(sign | out);
}

uint16_t px_float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}
