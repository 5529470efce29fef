/*
 * fb.h - a bounds-checked reader for the flatbuffer encoding of ExecuTorch's
 * program schema (private).
 *
 * Nothing read from the buffer is trusted: every table, vtable, vector and
 * string is checked to lie inside the buffer before it is used, and vector
 * lengths are checked against the bytes that remain, so a malformed file can
 * neither read out of bounds nor make a caller allocate more than the file's
 * own size implies. Readers return false on a malformed buffer; callers turn
 * that into PYEXEC_ERR_INVALID_PROGRAM naming what they were reading.
 */
#ifndef PX_FB_H
#define PX_FB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct px_fb_table {
  const uint8_t *buf;
  size_t len;
  size_t pos;     /* table start */
  size_t vt;      /* vtable start */
  uint16_t vtlen; /* vtable size in bytes */
} px_fb_table;

typedef struct px_fb_vec {
  const uint8_t *buf;
  size_t len;
  size_t pos;     /* first element */
  uint32_t count; /* elements */
} px_fb_vec;

/* The root table of a buffer (the uoffset at byte 0). */
bool px_fb_root(const uint8_t *buf, size_t len, px_fb_table *out);

/* True when field `slot` is present. */
bool px_fb_has(const px_fb_table *t, int slot);

/* Scalar fields; absent fields read as `def`. False when the field lies
 * outside the buffer. */
bool px_fb_u8(const px_fb_table *t, int slot, uint8_t def, uint8_t *out);
bool px_fb_i8(const px_fb_table *t, int slot, int8_t def, int8_t *out);
bool px_fb_i32(const px_fb_table *t, int slot, int32_t def, int32_t *out);
bool px_fb_u32(const px_fb_table *t, int slot, uint32_t def, uint32_t *out);
bool px_fb_i64(const px_fb_table *t, int slot, int64_t def, int64_t *out);
bool px_fb_u64(const px_fb_table *t, int slot, uint64_t def, uint64_t *out);
bool px_fb_f64(const px_fb_table *t, int slot, double def, double *out);

/* Sub-table at `slot`. *present is false (and the call succeeds) when absent. */
bool px_fb_subtable(const px_fb_table *t, int slot, px_fb_table *out, bool *present);

/* Vector at `slot` of elements `elsize` bytes wide (4 for tables and
 * strings). An absent vector reads as empty. */
bool px_fb_vector(const px_fb_table *t, int slot, size_t elsize, px_fb_vec *out);

/* String at `slot`: pointer and length (not NUL-terminated in the buffer).
 * An absent string reads as "" (length 0). */
bool px_fb_string(const px_fb_table *t, int slot, const char **s, uint32_t *n);

/* Elements of vectors (index must be < count; checked by the vector read). */
bool px_fb_vec_table(const px_fb_vec *v, uint32_t i, px_fb_table *out);
bool px_fb_vec_string(const px_fb_vec *v, uint32_t i, const char **s, uint32_t *n);
uint8_t px_fb_vec_u8(const px_fb_vec *v, uint32_t i);
int32_t px_fb_vec_i32(const px_fb_vec *v, uint32_t i);
int64_t px_fb_vec_i64(const px_fb_vec *v, uint32_t i);
uint64_t px_fb_vec_u64(const px_fb_vec *v, uint32_t i);
double px_fb_vec_f64(const px_fb_vec *v, uint32_t i);

/* True when s[0..n) is well-formed UTF-8 without NUL (no overlong forms,
 * surrogates or code points above U+10FFFF): names from a file reach callers
 * as C strings and Python str. */
bool px_fb_valid_name(const char *s, size_t n);

#endif /* PX_FB_H */
