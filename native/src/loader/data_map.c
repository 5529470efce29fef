/*
 * data_map.c - loading an ExecuTorch data file (.ptd): the header that
 * locates the flatbuffer and the segments, the FlatTensor tables, and a
 * sorted index of its keys (data_map.h).
 *
 * Layout (ExecuTorch's flat_tensor): the flatbuffer starts at byte 0 with
 * the identifier "FT01" at byte 4; a 40-byte header (padded to 48) sits
 * inside it at byte 8: "FH01", its length, flatbuffer_offset and
 * flatbuffer_size (the flatbuffer, header included, is the first
 * offset + size bytes), segment_base_offset and segment_data_size.
 */
#include "loader/data_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "loader/file_map.h"

#define BAD(...) px_invalid_program("data file: " __VA_ARGS__)

enum { HEADER_AT = 8, HEADER_MIN_LEN = 40 };

static uint64_t rd_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t rd_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

void px_data_key_display(const char *key, size_t n, char *buf, size_t cap) {
  size_t shown = n > 80 ? 80 : n;
  for (size_t k = 0; k < shown; k++)
    if ((unsigned char)key[k] < 0x20 || (unsigned char)key[k] > 0x7e) {
      snprintf(buf, cap, "<non-printable key>");
      return;
    }
  snprintf(buf, cap, "%.*s%s", (int)shown, key, n > shown ? "..." : "");
}

/* named_data[i]'s table, key and segment index. */
static pyexec_status read_entry(const px_data_map *dm, uint32_t i, px_fb_table *nd, const char **key,
                                uint32_t *key_len, uint32_t *seg) {
  if (!px_fb_vec_table(&dm->named_data, i, nd) || !px_fb_string(nd, FT_NAMED_KEY, key, key_len) ||
      !px_fb_u32(nd, FT_NAMED_SEGMENT, 0, seg))
    return BAD("named_data[%u] is malformed", i);
  return PYEXEC_OK;
}

static pyexec_status read_layout(const px_data_map *dm, uint32_t i, px_data_layout *out) {
  px_fb_table nd, lay;
  const char *key;
  uint32_t kn, seg;
  bool present;
  memset(out, 0, sizeof *out);
  pyexec_status st = read_entry(dm, i, &nd, &key, &kn, &seg);
  if (st) return st;
  if (!px_fb_subtable(&nd, FT_NAMED_LAYOUT, &lay, &present)) return BAD("named_data[%u].tensor_layout is malformed", i);
  if (!present) return PYEXEC_OK;
  px_fb_vec sizes, order;
  if (!px_fb_i8(&lay, FT_LAYOUT_SCALAR_TYPE, 0, &out->dtype) || !px_fb_vector(&lay, FT_LAYOUT_SIZES, 4, &sizes) ||
      !px_fb_vector(&lay, FT_LAYOUT_DIM_ORDER, 1, &order))
    return BAD("named_data[%u].tensor_layout is malformed", i);
  if (sizes.count > PX_MAX_DIM)
    return BAD("named_data[%u].tensor_layout.sizes: rank %u exceeds the maximum of %d", i, sizes.count, PX_MAX_DIM);
  if (order.count != sizes.count)
    return BAD("named_data[%u].tensor_layout.dim_order has %u entries for rank %u", i, order.count, sizes.count);
  unsigned seen = 0;
  for (uint32_t k = 0; k < sizes.count; k++) {
    int32_t s = px_fb_vec_i32(&sizes, k);
    uint8_t o = px_fb_vec_u8(&order, k);
    if (s < 0) return BAD("named_data[%u].tensor_layout.sizes[%u] is negative (%d)", i, k, s);
    if (o >= sizes.count || (seen & (1u << o)))
      return BAD("named_data[%u].tensor_layout.dim_order is not a permutation", i);
    seen |= 1u << o;
    out->sizes[k] = s;
    out->dim_order[k] = o;
  }
  out->present = true;
  out->dim = (int)sizes.count;
  return PYEXEC_OK;
}

pyexec_status px_data_map_layout(const px_data_map *dm, const px_data_entry *e, px_data_layout *out) {
  return read_layout(dm, e->index, out);
}

static int key_cmp(const char *a, uint32_t an, const char *b, uint32_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c ? c : (an > bn) - (an < bn);
}

static int by_key(const void *x, const void *y) {
  const px_data_entry *a = x, *b = y;
  return key_cmp(a->key, a->key_len, b->key, b->key_len);
}

static pyexec_status parse(px_data_map *dm) {
  const uint8_t *d = dm->data;
  const size_t size = dm->size;
  if (size < HEADER_AT + 8 || memcmp(d + HEADER_AT, "FH01", 4) != 0)
    return BAD("not an ExecuTorch data file (.ptd): no 'FH01' header at byte 8");
  uint32_t hlen = rd_u32(d + HEADER_AT + 4);
  if (hlen < HEADER_MIN_LEN || hlen > size - HEADER_AT)
    return BAD("header length %u is invalid (at least %d, within the %zu-byte file)", hlen, HEADER_MIN_LEN, size);
  uint64_t fb_off = rd_u64(d + 16), fb_size = rd_u64(d + 24);
  uint64_t seg_base = rd_u64(d + 32), seg_size = rd_u64(d + 40);
  if (fb_off > size || fb_size > size - fb_off)
    return BAD("flatbuffer_offset %llu + flatbuffer_size %llu exceed the %zu-byte file", (unsigned long long)fb_off,
               (unsigned long long)fb_size, size);
  const size_t fb_len = (size_t)(fb_off + fb_size);
  if (fb_len < HEADER_AT + (size_t)hlen)
    return BAD("flatbuffer_offset %llu + flatbuffer_size %llu end inside the header", (unsigned long long)fb_off,
               (unsigned long long)fb_size);
  if (seg_base < fb_len || seg_base > size)
    return BAD("segment_base_offset %llu is not between the flatbuffer's end (%zu) and the file's (%zu)",
               (unsigned long long)seg_base, fb_len, size);
  if (seg_size > size - seg_base)
    return BAD("file is truncated: segment_data_size is %llu bytes after offset %llu, the file has %zu",
               (unsigned long long)seg_size, (unsigned long long)seg_base, size);
  if (memcmp(d + 4, "FT01", 4) != 0) return BAD("file identifier is not 'FT01'");

  px_fb_table root;
  px_fb_vec segments;
  if (!px_fb_root(d, fb_len, &root)) return BAD("root table is out of bounds");
  if (!px_fb_has(&root, FT_SEGMENTS)) return BAD("segments is missing");
  if (!px_fb_has(&root, FT_NAMED_DATA)) return BAD("named_data is missing");
  if (!px_fb_vector(&root, FT_SEGMENTS, 4, &segments)) return BAD("segments is malformed");
  if (!px_fb_vector(&root, FT_NAMED_DATA, 4, &dm->named_data)) return BAD("named_data is malformed");

  dm->entries = calloc(dm->named_data.count ? dm->named_data.count : 1, sizeof *dm->entries);
  if (!dm->entries) return px_no_memory("data file index");
  for (uint32_t i = 0; i < dm->named_data.count; i++) {
    px_data_entry *e = &dm->entries[i];
    px_fb_table nd, seg;
    uint32_t si;
    pyexec_status st = read_entry(dm, i, &nd, &e->key, &e->key_len, &si);
    if (st) return st;
    if (!px_fb_valid_name(e->key, e->key_len)) return BAD("named_data[%u].key is not valid UTF-8", i);
    if (si >= segments.count)
      return BAD("named_data[%u].segment_index %u is out of range (%u segments)", i, si, segments.count);
    uint64_t off, n;
    if (!px_fb_vec_table(&segments, si, &seg) || !px_fb_u64(&seg, FT_SEGMENT_OFFSET, 0, &off) ||
        !px_fb_u64(&seg, FT_SEGMENT_SIZE, 0, &n))
      return BAD("segments[%u] is malformed", si);
    if (off > seg_size || n > seg_size - off)
      return BAD("segments[%u] (%llu bytes at offset %llu) lies outside the %llu bytes of segment data", si,
                 (unsigned long long)n, (unsigned long long)off, (unsigned long long)seg_size);
    e->index = i;
    e->data = d + seg_base + off;
    e->size = (size_t)n;
    px_data_layout lay;
    if ((st = read_layout(dm, i, &lay))) return st;
  }
  dm->count = dm->named_data.count;
  qsort(dm->entries, dm->count, sizeof *dm->entries, by_key);
  for (uint32_t i = 1; i < dm->count; i++)
    if (by_key(&dm->entries[i - 1], &dm->entries[i]) == 0) {
      char shown[96];
      px_data_key_display(dm->entries[i].key, dm->entries[i].key_len, shown, sizeof shown);
      return BAD("named_data key '%s' appears more than once", shown);
    }
  return PYEXEC_OK;
}

static pyexec_status finish(px_data_map *dm, px_data_map **out) {
  pyexec_status st = parse(dm);
  if (st) {
    px_data_map_free(dm);
    return st;
  }
  *out = dm;
  return PYEXEC_OK;
}

pyexec_status px_data_map_load_file(const char *path, px_data_map **out) {
  void *map;
  size_t size;
  px_file_id id;
  pyexec_status st = px_map_file(path, "data file", &map, &size, &id);
  if (st) return st;
  px_data_map *dm = calloc(1, sizeof *dm);
  if (!dm) {
    if (map) munmap(map, size);
    return px_no_memory("data file");
  }
  dm->map = map;
  dm->map_len = size;
  dm->data = map ? map : (const uint8_t *)"";
  dm->size = size;
  dm->file_id = id;
  return finish(dm, out);
}

pyexec_status px_data_map_load_buffer(const void *data, size_t size, px_data_map **out) {
  px_data_map *dm = calloc(1, sizeof *dm);
  if (!dm) return px_no_memory("data file");
  dm->owned = aligned_alloc(64, size ? (size + 63) & ~(size_t)63 : 64);
  if (!dm->owned) {
    free(dm);
    return px_no_memory("data file copy");
  }
  if (size) memcpy(dm->owned, data, size);
  dm->data = dm->owned;
  dm->size = size;
  return finish(dm, out);
}

void px_data_map_free(px_data_map *dm) {
  if (!dm) return;
  free(dm->entries);
  if (dm->map) munmap(dm->map, dm->map_len);
  free(dm->owned);
  free(dm);
}

const px_data_entry *px_data_map_find(const px_data_map *dm, const char *key, size_t n) {
  if (!dm || n > UINT32_MAX) return NULL;
  size_t lo = 0, hi = dm->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const px_data_entry *e = &dm->entries[mid];
    int c = key_cmp(e->key, e->key_len, key, (uint32_t)n);
    if (c == 0) return e;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}
