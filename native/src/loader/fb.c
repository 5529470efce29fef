/*
 * fb.c - bounds-checked flatbuffer reading. All multi-byte reads go through
 * memcpy, so unaligned data is read safely on every target.
 */
#include "loader/fb.h"

#include <string.h>

static bool in_bounds(size_t len, size_t pos, size_t n) {
  return pos <= len && n <= len - pos;
}

static uint32_t rd_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static int32_t rd_i32(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint16_t rd_u16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

static bool table_at(const uint8_t *buf, size_t len, size_t pos, px_fb_table *out) {
  if (!in_bounds(len, pos, 4)) return false;
  int64_t vt = (int64_t)pos - (int64_t)rd_i32(buf + pos);
  if (vt < 0 || !in_bounds(len, (size_t)vt, 4)) return false;
  uint16_t vtlen = rd_u16(buf + vt);
  uint16_t tlen = rd_u16(buf + vt + 2);
  if (vtlen < 4 || (vtlen & 1) || !in_bounds(len, (size_t)vt, vtlen)) return false;
  if (!in_bounds(len, pos, tlen)) return false;
  out->buf = buf;
  out->len = len;
  out->pos = pos;
  out->vt = (size_t)vt;
  out->vtlen = vtlen;
  return true;
}

bool px_fb_root(const uint8_t *buf, size_t len, px_fb_table *out) {
  if (len < 8) return false;
  return table_at(buf, len, rd_u32(buf), out);
}

/* Absolute position of field `slot`, 0 when absent. */
static size_t field_pos(const px_fb_table *t, int slot) {
  size_t e = 4 + 2 * (size_t)slot;
  if (slot < 0 || e + 2 > t->vtlen) return 0;
  uint16_t off = rd_u16(t->buf + t->vt + e);
  return off ? t->pos + off : 0;
}

bool px_fb_has(const px_fb_table *t, int slot) { return field_pos(t, slot) != 0; }

#define SCALAR_READER(NAME, TYPE)                                             \
  bool NAME(const px_fb_table *t, int slot, TYPE def, TYPE *out) {            \
    size_t p = field_pos(t, slot);                                            \
    if (!p) {                                                                 \
      *out = def;                                                             \
      return true;                                                            \
    }                                                                         \
    if (!in_bounds(t->len, p, sizeof(TYPE))) return false;                    \
    memcpy(out, t->buf + p, sizeof(TYPE));                                    \
    return true;                                                              \
  }

SCALAR_READER(px_fb_u8, uint8_t)
SCALAR_READER(px_fb_i8, int8_t)
SCALAR_READER(px_fb_i32, int32_t)
SCALAR_READER(px_fb_u32, uint32_t)
SCALAR_READER(px_fb_i64, int64_t)
SCALAR_READER(px_fb_u64, uint64_t)
SCALAR_READER(px_fb_f64, double)

/* Follows the uoffset stored at absolute position p. */
static bool deref(const uint8_t *buf, size_t len, size_t p, size_t *target) {
  if (!in_bounds(len, p, 4)) return false;
  uint64_t t = (uint64_t)p + rd_u32(buf + p);
  if (t >= len) return false;
  *target = (size_t)t;
  return true;
}

bool px_fb_subtable(const px_fb_table *t, int slot, px_fb_table *out, bool *present) {
  size_t p = field_pos(t, slot);
  *present = p != 0;
  if (!p) return true;
  size_t target;
  return deref(t->buf, t->len, p, &target) && table_at(t->buf, t->len, target, out);
}

static bool vector_at(const uint8_t *buf, size_t len, size_t target, size_t elsize,
                      px_fb_vec *out) {
  if (!in_bounds(len, target, 4)) return false;
  uint32_t count = rd_u32(buf + target);
  if ((uint64_t)count * elsize > len - target - 4) return false;
  out->buf = buf;
  out->len = len;
  out->pos = target + 4;
  out->count = count;
  return true;
}

bool px_fb_vector(const px_fb_table *t, int slot, size_t elsize, px_fb_vec *out) {
  size_t p = field_pos(t, slot);
  if (!p) {
    out->buf = t->buf;
    out->len = t->len;
    out->pos = 0;
    out->count = 0;
    return true;
  }
  size_t target;
  return deref(t->buf, t->len, p, &target) && vector_at(t->buf, t->len, target, elsize, out);
}

static bool string_at(const uint8_t *buf, size_t len, size_t target, const char **s,
                      uint32_t *n) {
  px_fb_vec v;
  /* As flatbuffers' verifier: the terminating NUL must be inside the buffer. */
  if (!vector_at(buf, len, target, 1, &v) || v.pos + v.count >= len || buf[v.pos + v.count] != 0)
    return false;
  *s = (const char *)buf + v.pos;
  *n = v.count;
  return true;
}

bool px_fb_string(const px_fb_table *t, int slot, const char **s, uint32_t *n) {
  size_t p = field_pos(t, slot);
  if (!p) {
    *s = "";
    *n = 0;
    return true;
  }
  size_t target;
  return deref(t->buf, t->len, p, &target) && string_at(t->buf, t->len, target, s, n);
}

bool px_fb_vec_table(const px_fb_vec *v, uint32_t i, px_fb_table *out) {
  size_t target;
  return i < v->count && deref(v->buf, v->len, v->pos + 4 * (size_t)i, &target) &&
         table_at(v->buf, v->len, target, out);
}

bool px_fb_vec_string(const px_fb_vec *v, uint32_t i, const char **s, uint32_t *n) {
  size_t target;
  return i < v->count && deref(v->buf, v->len, v->pos + 4 * (size_t)i, &target) &&
         string_at(v->buf, v->len, target, s, n);
}

uint8_t px_fb_vec_u8(const px_fb_vec *v, uint32_t i) { return v->buf[v->pos + i]; }

int32_t px_fb_vec_i32(const px_fb_vec *v, uint32_t i) {
  return rd_i32(v->buf + v->pos + 4 * (size_t)i);
}

int64_t px_fb_vec_i64(const px_fb_vec *v, uint32_t i) {
  int64_t x;
  memcpy(&x, v->buf + v->pos + 8 * (size_t)i, 8);
  return x;
}

uint64_t px_fb_vec_u64(const px_fb_vec *v, uint32_t i) {
  uint64_t x;
  memcpy(&x, v->buf + v->pos + 8 * (size_t)i, 8);
  return x;
}

double px_fb_vec_f64(const px_fb_vec *v, uint32_t i) {
  double x;
  memcpy(&x, v->buf + v->pos + 8 * (size_t)i, 8);
  return x;
}

/* UTF-8 rules: fb.h. */
bool px_fb_valid_name(const char *str, size_t n) {
  const uint8_t *s = (const uint8_t *)str;
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    if (c == 0) return false;
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c < 0xC2 || c > 0xF4 || len > n - i) return false;
    for (size_t k = 1; k < len; k++)
      if ((s[i + k] & 0xC0) != 0x80) return false;
    if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) || (c == 0xF0 && s[i + 1] < 0x90) ||
        (c == 0xF4 && s[i + 1] > 0x8F))
      return false;
    i += len;
  }
  return true;
}
