/*
 * data_map.h - an ExecuTorch data file (.ptd, "flat_tensor"): named blobs a
 * program keeps outside itself, external constant tensors (keyed by their
 * fully qualified name, with a tensor layout) and backend weights (keyed by
 * the backend, no layout) (private).
 *
 * Nothing in the file is trusted. Loading checks the header, the flatbuffer
 * and every entry (segment bounds, key, layout) once, and sorts the keys, so
 * a lookup is a binary search over checked entries and a duplicate key is
 * refused. A malformed file is PYEXEC_ERR_INVALID_PROGRAM naming the field.
 */
#ifndef PX_DATA_MAP_H
#define PX_DATA_MAP_H

#include "core/tensor.h"
#include "loader/fb.h"
#include "loader/file_map.h"

/* Slots of flat_tensor.fbs. */
enum { FT_VERSION, FT_SEGMENTS, FT_NAMED_DATA };
enum { FT_SEGMENT_OFFSET, FT_SEGMENT_SIZE };
enum { FT_NAMED_KEY, FT_NAMED_SEGMENT, FT_NAMED_LAYOUT };
enum { FT_LAYOUT_SCALAR_TYPE, FT_LAYOUT_SIZES, FT_LAYOUT_DIM_ORDER };

/* One entry, checked: its key and bytes lie inside the file. Small, since
 * a hostile file may declare many: the layout is read again when asked for. */
typedef struct px_data_entry {
  const char *key; /* not NUL-terminated; valid UTF-8 */
  uint32_t key_len;
  uint32_t index; /* in named_data */
  const uint8_t *data;
  size_t size;
} px_data_entry;

/* An entry's TensorLayout, checked: rank <= PX_MAX_DIM, sizes >= 0,
 * dim_order a permutation. */
typedef struct px_data_layout {
  bool present;
  int8_t dtype; /* ExecuTorch ScalarType, as the file says */
  int dim;
  int64_t sizes[PX_MAX_DIM];
  uint8_t dim_order[PX_MAX_DIM];
} px_data_layout;

typedef struct px_data_map {
  const uint8_t *data; /* the whole file */
  size_t size;
  void *owned; /* heap copy (buffer), or NULL */
  void *map;   /* mapping (file), or NULL */
  size_t map_len;
  px_fb_vec named_data;
  px_data_entry *entries; /* sorted by key */
  uint32_t count;
  /* The content hash of data[0..size) (runtime/weight_cache.c), once taken:
   * content_hashed is read and set with __atomic builtins. */
  uint64_t content_hash;
  int content_hashed;
  /* The mapped file's identity (all zero for bytes given in memory). */
  px_file_id file_id;
} px_data_map;

/* Loads the file at `path` (memory-mapped read-only) or a copy of
 * data[0..size) (aligned to 64 bytes). */
pyexec_status px_data_map_load_file(const char *path, px_data_map **out);
pyexec_status px_data_map_load_buffer(const void *data, size_t size, px_data_map **out);
void px_data_map_free(px_data_map *dm);

/* The entry under key[0..n), or NULL. */
const px_data_entry *px_data_map_find(const px_data_map *dm, const char *key, size_t n);

/* The layout of an entry (checked when the map was loaded, so this only
 * fails if the map is not the one the entry came from). */
pyexec_status px_data_map_layout(const px_data_map *dm, const px_data_entry *e, px_data_layout *out);

/* Formats a key from a file for a message: printable ASCII as is (at most
 * 80 bytes), anything else as "<non-printable key>". */
void px_data_key_display(const char *key, size_t n, char *buf, size_t cap);

#endif /* PX_DATA_MAP_H */
