/*
 * weight_cache.c - where a method's packed-weight cache file lives and what
 * its key is (the file itself: core/pcache.c).
 *
 * On or off: PYEXEC_CACHE=0 turns it off, PYEXEC_CACHE=1 turns it on for
 * every program; otherwise it is on for programs whose file plus data file
 * hold at least PX_WEIGHT_CACHE_MIN bytes. Small programs pack in under a
 * millisecond and never touch the disk; from a few MiB on, mapping the
 * cache is faster than packing (mobilenet_v2, 14 MB: load_method 2.4 ms
 * from the cache against 5.8 ms packing, in a fresh process). The directory: PYEXEC_CACHE_DIR,
 * else $XDG_CACHE_HOME/pyexec, else $HOME/.cache/pyexec (created when
 * missing). A directory that cannot be written still lets a valid file be
 * read; when neither works the load packs as usual.
 *
 * The key: the content hashes of the program and of its data file (taken
 * from a record of the file's identity when the file has one, below), the
 * method's name, the library's version and the cache format, and what
 * chooses the packed layout: the architecture, this CPU's features and the
 * environment variables that pick a kernel or a packing (PYEXEC_GEMM_ISA,
 * PYEXEC_LINEAR_PACK, PYEXEC_CONV_PACK, PYEXEC_FUSE, PYEXEC_CONV_WINOGRAD,
 * PYEXEC_F16_ARITH). The thread count does not change a packing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/cpu.h"
#include "core/pcache.h"
#include "loader/program.h"
#include "pyexec.h"
#include "runtime/method.h"

#define PX_WEIGHT_CACHE_MIN ((size_t)4 << 20)

static int wanted(const pyexec_program *p) {
  const char *e = getenv("PYEXEC_CACHE");
  if (e && strcmp(e, "0") == 0) return 0;
  if (e && strcmp(e, "1") == 0) return 1;
  size_t total = p->size + (p->data_map ? p->data_map->size : 0);
  return total >= PX_WEIGHT_CACHE_MIN;
}

/* mkdir -p; failures are left to the open that follows. */
static void make_dirs(char *path) {
  for (char *s = path + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    (void)mkdir(path, 0755);
    *s = '/';
  }
  (void)mkdir(path, 0755);
}

static int cache_dir(char *buf, size_t cap) {
  const char *d = getenv("PYEXEC_CACHE_DIR");
  int n;
  if (d && *d) n = snprintf(buf, cap, "%s", d);
  else if ((d = getenv("XDG_CACHE_HOME")) && *d == '/') n = snprintf(buf, cap, "%s/pyexec", d);
  else if ((d = getenv("HOME")) && *d) n = snprintf(buf, cap, "%s/.cache/pyexec", d);
  else return 0;
  if (n <= 0 || (size_t)n >= cap) return 0;
  make_dirs(buf);
  return 1;
}

/* ---- a file's content hash without reading it ----
 *
 * Hashing a program's bytes reads every page of its weights, which a load
 * from the cache never needs: for resnet18 that is 47 MB read at memory
 * speed before anything else happens. So the directory also keeps, for each
 * file hashed, a record (NAME.pxid, named by the file's identity) of its
 * identity (device, inode, size, modification and status-change times) and
 * its content hash. A later load of the same unchanged file takes the hash
 * from there.
 *
 * Writing a file changes its times, but only to the timestamp's granularity
 * (a clock tick; two seconds on FAT): a file written again within the same
 * tick, at the same size, would keep its identity. As git does for its index
 * ("racy" files), a record is written only for a file whose times are more
 * than RACY_SECONDS old, so any later write falls in a later tick. The
 * status-change time cannot be set by a user, so copying old times back
 * onto changed bytes does not fool it. A record that cannot be read, names
 * another identity or fails its check is ignored and the file is hashed. */
#define RACY_SECONDS 3

static const char ID_MAGIC[8] = {'P', 'X', 'F', 'I', 'L', 'E', 'I', 'D'};
#define ID_VERSION 1

typedef struct {
  char magic[8];
  uint32_t version, seed;
  px_file_id id;
  uint64_t size; /* of the bytes hashed: the file, or the program inside a bundle */
  uint64_t hash;
  uint64_t check; /* px_hash64 of the bytes above */
} id_record;

static int id_path(char *buf, size_t cap, const char *dir, const px_file_id *id, uint64_t seed) {
  uint64_t name = px_hash64(id, sizeof *id, seed ^ 0x5157);
  int n = snprintf(buf, cap, "%s/%016llx.pxid", dir, (unsigned long long)name);
  return n > 0 && (size_t)n < cap;
}

static int id_known(const px_file_id *id) { return id->ino || id->dev || id->size; }

static int read_record(const char *path, const px_file_id *id, uint64_t seed, uint64_t size, uint64_t *hash) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  id_record r;
  ssize_t k = read(fd, &r, sizeof r);
  close(fd);
  if (k != (ssize_t)sizeof r || memcmp(r.magic, ID_MAGIC, 8) || r.version != ID_VERSION || r.seed != seed ||
      r.size != size || memcmp(&r.id, id, sizeof *id) || r.check != px_hash64(&r, offsetof(id_record, check), 5))
    return 0;
  *hash = r.hash;
  return 1;
}

/* Whether the file's times are old enough for its identity to name its
 * bytes from now on (see above). */
static int settled(const px_file_id *id) {
  struct timespec now;
  if (clock_gettime(CLOCK_REALTIME, &now) != 0) return 0;
  int m_newer = id->mtime_s > id->ctime_s || (id->mtime_s == id->ctime_s && id->mtime_ns > id->ctime_ns);
  int64_t s = m_newer ? id->mtime_s : id->ctime_s, ns = m_newer ? id->mtime_ns : id->ctime_ns;
  if (s >= (int64_t)now.tv_sec) return 0;                   /* now, or in the future */
  if (s < (int64_t)now.tv_sec - RACY_SECONDS - 1) return 1; /* (no arithmetic on far-off times) */
  return ((int64_t)now.tv_sec - s) * 1000000000 + (now.tv_nsec - ns) > (int64_t)RACY_SECONDS * 1000000000;
}

static void write_record(const char *path, const px_file_id *id, uint64_t seed, uint64_t size, uint64_t hash) {
  id_record r;
  memset(&r, 0, sizeof r);
  memcpy(r.magic, ID_MAGIC, 8);
  r.version = ID_VERSION;
  r.seed = (uint32_t)seed;
  r.id = *id;
  r.size = size;
  r.hash = hash;
  r.check = px_hash64(&r, offsetof(id_record, check), 5);
  char tmp[4300];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  if (n <= 0 || (size_t)n >= sizeof tmp) return;
  int fd = mkstemp(tmp);
  if (fd < 0) return;
  int ok = write(fd, &r, sizeof r) == (ssize_t)sizeof r;
  ok = fchmod(fd, 0644) == 0 && ok;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* The content hash of bytes that never change (a program's, a data
 * file's), taken once and kept in *hash: from the file's record when it has
 * one, else by reading them (and then recording it). Hashing read every
 * page; the weights among them are packed (or taken from the cache) and need
 * not stay resident. */
static uint64_t content_hash(const char *dir, const px_file_id *id, const void *data, size_t size, uint64_t seed,
                             uint64_t *hash, int *hashed) {
  if (__atomic_load_n(hashed, __ATOMIC_ACQUIRE)) return *hash;
  char rec[4200];
  int named = id_known(id) && id_path(rec, sizeof rec, dir, id, seed);
  uint64_t h;
  if (!named || !read_record(rec, id, seed, size, &h)) {
    h = px_hash64(data, size, seed);
    px_drop_file_pages(data, size);
    if (named && settled(id)) write_record(rec, id, seed, size, h);
  }
  *hash = h;
  __atomic_store_n(hashed, 1, __ATOMIC_RELEASE);
  return h;
}

static uint64_t hash_env(uint64_t h, const char *name) {
  const char *v = getenv(name);
  h = px_hash64(name, strlen(name), h);
  return v ? px_hash64(v, strlen(v) + 1, h) : px_hash64("", 0, h ^ 1);
}

struct px_pcache *px_weight_cache_open(const pyexec_method *m) {
  pyexec_program *p = m->program;
  if (!wanted(p)) return NULL;
  char dir[4096];
  if (!cache_dir(dir, sizeof dir)) return NULL;
  uint64_t key[4];
  key[0] = content_hash(dir, &p->file_id, p->data, p->size, 0, &p->content_hash, &p->content_hashed);
  px_data_map *dm = p->data_map;
  key[1] = dm ? content_hash(dir, &dm->file_id, dm->data, dm->size, 1, &dm->content_hash, &dm->content_hashed) : 0;
  char build[256];
  snprintf(build, sizeof build, "pyexec %s format %d arch %s ptr %zu", PYEXEC_VERSION_STRING, PX_PCACHE_FORMAT,
#if defined(__x86_64__)
           "x86_64",
#elif defined(__aarch64__)
           "aarch64",
#else
           "other",
#endif
           sizeof(void *));
  uint64_t b = px_hash64(build, strlen(build), 2);
  px_cpu_features f = *px_cpu();
  b = px_hash64(&f, sizeof f, b);
  b = hash_env(b, "PYEXEC_GEMM_ISA");
  b = hash_env(b, "PYEXEC_LINEAR_PACK");
  b = hash_env(b, "PYEXEC_CONV_PACK");
  b = hash_env(b, "PYEXEC_FUSE");
  b = hash_env(b, "PYEXEC_CONV_WINOGRAD");
  b = hash_env(b, "PYEXEC_F16_ARITH");
  key[2] = b;
  key[3] = px_hash64(m->plan->name, strlen(m->plan->name), 3);
  char path[4200];
  uint64_t tail = px_hash64(key, sizeof key, 4);
  int n = snprintf(path, sizeof path, "%s/%016llx%016llx.pxw", dir, (unsigned long long)key[0],
                   (unsigned long long)tail);
  if (n <= 0 || (size_t)n >= sizeof path) return NULL;
  return px_pcache_open(path, key);
}
