/*
 * weight_cache.c - where a method's packed-weight cache file lives and what
 * its key is (the file itself: core/pcache.c).
 *
 * On or off: PYEXEC_CACHE=0 turns it off, PYEXEC_CACHE=1 turns it on for
 * every program; otherwise it is on for programs whose file plus data file
 * hold at least PX_WEIGHT_CACHE_MIN bytes (small programs pack in
 * milliseconds and never touch the disk). The directory: PYEXEC_CACHE_DIR,
 * else $XDG_CACHE_HOME/pyexec, else $HOME/.cache/pyexec (created when
 * missing). A directory that cannot be written still lets a valid file be
 * read; when neither works the load packs as usual.
 *
 * The key: the content hashes of the program and of its data file, the
 * method's name, the library's version and the cache format, and what
 * chooses the packed layout: the architecture, this CPU's features and the
 * environment variables that pick a kernel or a packing (PYEXEC_GEMM_ISA,
 * PYEXEC_LINEAR_PACK, PYEXEC_CONV_PACK, PYEXEC_FUSE). The thread count does
 * not change a packing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/cpu.h"
#include "core/pcache.h"
#include "loader/program.h"
#include "pyexec.h"
#include "runtime/method.h"

#define PX_WEIGHT_CACHE_MIN ((size_t)16 << 20)

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

/* The content hash of bytes that never change (a program's, a data
 * file's), taken once and kept in *hash. Hashing read every page; the
 * weights among them are packed (or taken from the cache) and need not
 * stay resident. */
static uint64_t content_hash(const void *data, size_t size, uint64_t seed, uint64_t *hash, int *hashed) {
  if (__atomic_load_n(hashed, __ATOMIC_ACQUIRE)) return *hash;
  *hash = px_hash64(data, size, seed);
  px_drop_file_pages(data, size);
  __atomic_store_n(hashed, 1, __ATOMIC_RELEASE);
  return *hash;
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
  key[0] = content_hash(p->data, p->size, 0, &p->content_hash, &p->content_hashed);
  px_data_map *dm = p->data_map;
  key[1] = dm ? content_hash(dm->data, dm->size, 1, &dm->content_hash, &dm->content_hashed) : 0;
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
  key[2] = b;
  key[3] = px_hash64(m->plan->name, strlen(m->plan->name), 3);
  char path[4200];
  uint64_t tail = px_hash64(key, sizeof key, 4);
  int n = snprintf(path, sizeof path, "%s/%016llx%016llx.pxw", dir, (unsigned long long)key[0],
                   (unsigned long long)tail);
  if (n <= 0 || (size_t)n >= sizeof path) return NULL;
  return px_pcache_open(path, key);
}
