/* file_map.h - a whole regular file mapped read-only, for the loaders of
 * programs (.pte) and data files (.ptd). */
#ifndef PX_FILE_MAP_H
#define PX_FILE_MAP_H

#include <stddef.h>

#include "pyexec.h"

/* Maps the file at `path`. `what` names it in error messages ("data file"),
 * or is NULL. On success *map is the mapping (NULL for an empty file, which
 * nothing needs to unmap) and *size its length; on failure (IO: cannot open,
 * stat or map it, or it is not a regular file) both are left untouched. */
pyexec_status px_map_file(const char *path, const char *what, void **map, size_t *size);

#endif
