/* file_map.c - see file_map.h. */
#include "loader/file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

pyexec_status px_map_file(const char *path, const char *what, void **map, size_t *size, px_file_id *id) {
  const char *sep = what ? " " : "";
  what = what ? what : "";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return px_error(PYEXEC_ERR_IO, "cannot open %s%s'%s': %s", what, sep, path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return px_error(PYEXEC_ERR_IO, "cannot stat %s%s'%s': %s", what, sep, path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return px_error(PYEXEC_ERR_IO, "%s%s'%s' is not a regular file", what, sep, path);
  }
  size_t len = (size_t)sb.st_size;
  void *m = NULL;
  if (len > 0) {
    m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      close(fd);
      return px_error(PYEXEC_ERR_IO, "cannot map %s%s'%s': %s", what, sep, path, strerror(e));
    }
  }
  close(fd);
  *map = m;
  *size = len;
  *id = (px_file_id){
      .dev = (uint64_t)sb.st_dev,
      .ino = (uint64_t)sb.st_ino,
      .size = (uint64_t)sb.st_size,
      .mtime_s = (int64_t)sb.st_mtim.tv_sec,
      .mtime_ns = (int64_t)sb.st_mtim.tv_nsec,
      .ctime_s = (int64_t)sb.st_ctim.tv_sec,
      .ctime_ns = (int64_t)sb.st_ctim.tv_nsec,
  };
  return PYEXEC_OK;
}
