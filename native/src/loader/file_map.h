/* file_map.h - a whole regular file mapped read-only, for the loaders of
 * programs (.pte) and data files (.ptd). */
#ifndef PX_FILE_MAP_H
#define PX_FILE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "pyexec.h"

/* What names a file's bytes without reading them: its device and inode, its
 * size and its modification and status-change times (runtime/weight_cache.c
 * keys a record of the file's content hash by it). All zero for bytes that
 * did not come from a file. */
typedef struct px_file_id {
  uint64_t dev, ino, size;
  int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
} px_file_id;

/* Maps the file at `path`. `what` names it in error messages ("data file"),
 * or is NULL. On success *map is the mapping (NULL for an empty file, which
 * nothing needs to unmap), *size its length and *id the file's identity as
 * it was when mapped; on failure (IO: cannot open, stat or map it, or it is
 * not a regular file) all three are left untouched. */
pyexec_status px_map_file(const char *path, const char *what, void **map, size_t *size, px_file_id *id);

#endif
