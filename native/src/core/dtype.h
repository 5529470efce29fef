/*
 * dtype.h - the one table of the element types the runtime computes with
 * (private). Everything that knows a dtype's code, name, size or C type is
 * generated from it: the PX_* codes and px_elsize / px_dtype_name
 * (tensor.h, tensor.c), and with them the public pyexec_dtype_size /
 * pyexec_dtype_name. The public header keeps its own pyexec_dtype enum (it
 * is the ABI); tensor.c asserts at compile time that the two agree.
 *
 * PX_DTYPES(X) calls X(code, id, public_id, name, size, ctype) per dtype:
 *   code       ExecuTorch's ScalarType code (what a .pte file stores)
 *   id         the library's constant is PX_<id>
 *   public_id  pyexec.h's constant is PYEXEC_DTYPE_<public_id>
 *   name       torch's name, as messages and pyexec_dtype_name give it
 *   size       bytes per element
 *   ctype      the C type one element is stored as (float16 and bfloat16
 *              as their 16 bits)
 */
#ifndef PX_DTYPE_H
#define PX_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

#define PX_DTYPES(X)                                  \
  X(0, U8, UINT8, "uint8", 1, uint8_t)                \
  X(1, I8, INT8, "int8", 1, int8_t)                   \
  X(2, I16, INT16, "int16", 2, int16_t)               \
  X(3, I32, INT32, "int32", 4, int32_t)               \
  X(4, I64, INT64, "int64", 8, int64_t)               \
  X(5, F16, FLOAT16, "float16", 2, uint16_t)          \
  X(6, F32, FLOAT32, "float32", 4, float)             \
  X(7, F64, FLOAT64, "float64", 8, double)            \
  X(11, BOOL, BOOL, "bool", 1, bool)                  \
  X(15, BF16, BFLOAT16, "bfloat16", 2, uint16_t)

/* ExecuTorch ScalarType codes the runtime does not compute with, named so
 * that a message about a program using one can say which it is:
 * X(code, name). */
#define PX_DTYPES_NAMED_ONLY(X) \
  X(8, "complex32")             \
  X(9, "complex64")             \
  X(10, "complex128")           \
  X(12, "qint8")                \
  X(13, "quint8")               \
  X(14, "qint32")               \
  X(16, "quint4x2")             \
  X(17, "quint2x4")             \
  X(22, "bits16")               \
  X(23, "float8_e5m2")          \
  X(24, "float8_e4m3fn")        \
  X(25, "float8_e5m2fnuz")      \
  X(26, "float8_e4m3fnuz")      \
  X(27, "uint16")               \
  X(28, "uint32")               \
  X(29, "uint64")

/* The library's codes: PX_U8, PX_I8, ... PX_BF16. */
#define PX_DTYPE_ENUM_(code, id, public_id, name, size, ctype) PX_##id = code,
enum { PX_DTYPES(PX_DTYPE_ENUM_) };
#undef PX_DTYPE_ENUM_

#endif /* PX_DTYPE_H */
