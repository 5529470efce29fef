/*
 * pcache.c - the packed-weight cache file: its hash, reading (mapped
 * read-only, MAP_SHARED, every field checked) and writing (a temporary file
 * renamed into place). See pcache.h for the format.
 */
#include "core/pcache.h"

#include "core/alloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- hash ------------------------------------------------------------------------------------ */

#define H_P1 0x9E3779B185EBCA87ULL
#define H_P2 0xC2B2AE3D27D4EB4FULL
#define H_P3 0x165667B19E3779F9ULL

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t rd64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline uint64_t lane(uint64_t acc, uint64_t v) { return rotl64(acc + v * H_P2, 31) * H_P1; }
static inline uint64_t fmix(uint64_t h) {
  h ^= h >> 33;
  h *= H_P2;
  h ^= h >> 29;
  h *= H_P3;
  h ^= h >> 32;
  return h;
}

uint64_t px_hash64(const void *data, size_t n, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t a = seed + H_P1 + H_P2, b = seed + H_P2, c = seed, d = seed - H_P1;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    /* The lanes' multiply chains leave too few loads in flight for the
     * hardware prefetcher alone: reading ahead takes a hash of bytes out of
     * memory (not cache) from 4 to 7 GB/s. A prefetch never faults, so
     * reading past the end is harmless. */
    if (!(i & 63)) __builtin_prefetch(p + i + 1024);
    a = lane(a, rd64(p + i));
    b = lane(b, rd64(p + i + 8));
    c = lane(c, rd64(p + i + 16));
    d = lane(d, rd64(p + i + 24));
  }
  uint64_t h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18);
  h = (h ^ lane(0, a)) * H_P1 + H_P3;
  h = (h ^ lane(0, b)) * H_P1 + H_P3;
  h = (h ^ lane(0, c)) * H_P1 + H_P3;
  h = (h ^ lane(0, d)) * H_P1 + H_P3;
  h += (uint64_t)n;
  for (; i + 8 <= n; i += 8) h = rotl64(h ^ lane(0, rd64(p + i)), 27) * H_P1 + H_P3;
  for (; i < n; i++) h = rotl64(h ^ (p[i] * H_P3), 11) * H_P1;
  return fmix(h);
}

/* ---- the file -------------------------------------------------------------------------------- */

static const char MAGIC[8] = {'P', 'X', 'W', 'C', 'A', 'C', 'H', 'E'};
#define HDR_SIZE 128
#define ALIGN 64
#define MAX_ENTRIES (1u << 24)

typedef struct {
  char magic[8];
  uint32_t version, count;
  uint64_t key[4];
  uint64_t file_size, table_off, table_hash;
  uint64_t header_hash; /* of the bytes above */
  unsigned char pad[HDR_SIZE - 80];
} hdr_t;

typedef struct {
  uint32_t tag, zero;
  uint64_t size, offset, hash;
} ent_t;

_Static_assert(sizeof(hdr_t) == HDR_SIZE, "header layout");
_Static_assert(sizeof(ent_t) == 32, "entry layout");

struct px_pcache {
  char *path;
  uint64_t key[4];
  /* reading */
  const unsigned char *map;
  size_t map_len;
  const ent_t *table;
  uint32_t count, cursor;
  int reading;
  /* writing */
  char *tmp;
  int fd, wfail;
  uint64_t wpos;
  ent_t *ents;
  uint32_t nents, cap;
  uint32_t hits, puts;
};

static __thread px_pcache *current;
px_pcache *px_pcache_current(void) { return current; }
void px_pcache_set_current(px_pcache *c) { current = c; }

static int validate(px_pcache *c) {
  if (c->map_len < HDR_SIZE) return 0;
  hdr_t h;
  memcpy(&h, c->map, sizeof h);
  if (memcmp(h.magic, MAGIC, 8) || h.version != PX_PCACHE_FORMAT) return 0;
  if (memcmp(h.key, c->key, sizeof h.key)) return 0;
  if (h.header_hash != px_hash64(c->map, offsetof(hdr_t, header_hash), 0)) return 0;
  if (h.file_size != c->map_len || h.count > MAX_ENTRIES) return 0;
  if (h.table_off < HDR_SIZE || h.table_off % 8 || h.table_off > h.file_size ||
      (h.file_size - h.table_off) / sizeof(ent_t) < h.count || h.file_size - h.table_off != h.count * sizeof(ent_t))
    return 0;
  const ent_t *t = (const ent_t *)(c->map + h.table_off);
  if (h.table_hash != px_hash64(t, (size_t)h.count * sizeof(ent_t), 1)) return 0;
  for (uint32_t i = 0; i < h.count; i++) {
    if (t[i].offset % ALIGN || t[i].offset < HDR_SIZE || t[i].offset > h.table_off ||
        t[i].size > h.table_off - t[i].offset || t[i].zero)
      return 0;
  }
  c->table = t;
  c->count = h.count;
  return 1;
}

static void try_map(px_pcache *c) {
  int fd = open(c->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= HDR_SIZE) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      c->map = p;
      c->map_len = (size_t)st.st_size;
      if (validate(c)) c->reading = 1;
      else {
        munmap(p, c->map_len);
        c->map = NULL;
        c->map_len = 0;
      }
    }
  }
  close(fd);
}

px_pcache *px_pcache_open(const char *path, const uint64_t key[4]) {
  px_pcache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->path = strdup(path);
  if (!c->path) {
    free(c);
    return NULL;
  }
  memcpy(c->key, key, sizeof c->key);
  c->fd = -1;
  try_map(c);
  return c;
}

static void wbytes(px_pcache *c, const void *p, size_t n, uint64_t off) {
  const unsigned char *b = p;
  while (n && !c->wfail) {
    ssize_t k = pwrite(c->fd, b, n, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      c->wfail = 1;
      break;
    }
    b += k;
    n -= (size_t)k;
    off += (uint64_t)k;
  }
}

static int add_ent(px_pcache *c, ent_t e) {
  if (c->nents == c->cap) {
    uint32_t cap = c->cap ? c->cap * 2 : 64;
    ent_t *n = realloc(c->ents, cap * sizeof *n);
    if (!n) return c->wfail = 1, 0;
    c->ents = n;
    c->cap = cap;
  }
  c->ents[c->nents++] = e;
  return 1;
}

/* A writer renames or removes its temporary file (PATH.tmp.XXXXXX) itself,
 * and writes to it as the packers go; one that was killed mid-write leaves
 * it behind. Those untouched for an hour are removed when a new writer of
 * the same cache file starts. */
#define STALE_TMP_SECONDS 3600

static void remove_stale_temporaries(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char dir[4096];
  size_t dlen = slash ? (size_t)(slash - path) : 0;
  if (dlen + 2 > sizeof dir) return;
  if (!slash)
    strcpy(dir, ".");
  else if (dlen == 0)
    strcpy(dir, "/");
  else {
    memcpy(dir, path, dlen);
    dir[dlen] = 0;
  }
  DIR *d = opendir(dir);
  if (!d) return;
  const size_t blen = strlen(base);
  const time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strlen(name) != blen + 11 || strncmp(name, base, blen) || strncmp(name + blen, ".tmp.", 5)) continue;
    int fd = openat(dirfd(d), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    int stale = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > STALE_TMP_SECONDS;
    close(fd);
    if (stale) (void)unlinkat(dirfd(d), name, 0);
  }
  closedir(d);
}

/* Leaves reading: a temporary file gets the entries taken so far, and the
 * packers' entries from here on. */
static void start_writing(px_pcache *c) {
  uint32_t keep = c->reading ? c->cursor : 0;
  c->reading = 0;
  if (c->fd >= 0 || c->wfail) return;
  size_t n = strlen(c->path) + 16;
  c->tmp = malloc(n);
  if (!c->tmp) {
    c->wfail = 1;
    return;
  }
  snprintf(c->tmp, n, "%s.tmp.XXXXXX", c->path);
  remove_stale_temporaries(c->path);
  c->fd = mkstemp(c->tmp);
  if (c->fd < 0) {
    free(c->tmp);
    c->tmp = NULL;
    c->wfail = 1;
    return;
  }
  (void)fchmod(c->fd, 0644);
  c->wpos = HDR_SIZE;
  for (uint32_t i = 0; i < keep && !c->wfail; i++) {
    const ent_t *t = &c->table[i];
    ent_t e = *t;
    e.offset = c->wpos;
    wbytes(c, c->map + t->offset, (size_t)t->size, e.offset);
    c->wpos = (e.offset + e.size + ALIGN - 1) / ALIGN * ALIGN;
    add_ent(c, e);
  }
}

const void *px_pcache_take(px_pcache *c, uint32_t tag, size_t *size) {
  if (!c || !c->reading) return NULL;
  if (c->cursor < c->count) {
    const ent_t *t = &c->table[c->cursor];
    const unsigned char *p = c->map + t->offset;
    if (t->tag == tag && t->hash == px_hash64(p, (size_t)t->size, 2)) {
      c->cursor++;
      c->hits++;
      *size = (size_t)t->size;
      return p;
    }
  }
  start_writing(c);
  return NULL;
}

void px_pcache_reject(px_pcache *c) {
  if (!c || !c->reading || !c->cursor) return;
  c->cursor--;
  c->hits--;
  start_writing(c);
}

size_t px_pcache_layout(const size_t *sizes, int nparts, int i) {
  size_t off = 0;
  for (int k = 0; k < i && k < nparts; k++) {
    off += sizes[k];
    if (k + 1 < nparts) off = (off + ALIGN - 1) / ALIGN * ALIGN;
  }
  return off;
}

void px_pcache_put(px_pcache *c, uint32_t tag, int nparts, const void *const *parts, const size_t *sizes) {
  if (!c) return;
  if (c->reading || c->fd < 0) start_writing(c);
  if (c->wfail) return;
  c->puts++;
  ent_t e = {.tag = tag, .offset = c->wpos, .size = px_pcache_layout(sizes, nparts, nparts)};
  if (nparts == 1) { /* as it is: no copy */
    e.hash = px_hash64(parts[0], (size_t)e.size, 2);
    wbytes(c, parts[0], (size_t)e.size, e.offset);
    c->wpos = (e.offset + e.size + ALIGN - 1) / ALIGN * ALIGN;
    add_ent(c, e);
    return;
  }
  /* the hash over the entry as laid out, padding (zeros) included. The
   * staging copy is mapped when large and unmapped after: from the heap,
   * freed copies stayed resident (a 4.5 MB 8da4w program's first load kept
   * 2.6 MiB more than packing alone). */
  bool mapped;
  const size_t n = e.size ? (size_t)e.size : 1;
  unsigned char *buf = px_big_alloc(n, &mapped);
  if (!buf) {
    c->wfail = 1;
    return;
  }
  for (int i = 0; i < nparts; i++)
    if (sizes[i]) memcpy(buf + px_pcache_layout(sizes, nparts, i), parts[i], sizes[i]);
  e.hash = px_hash64(buf, (size_t)e.size, 2);
  wbytes(c, buf, (size_t)e.size, e.offset);
  px_big_free(buf, n, mapped);
  c->wpos = (e.offset + e.size + ALIGN - 1) / ALIGN * ALIGN;
  add_ent(c, e);
}

int px_pcache_commit(px_pcache *c) {
  if (!c || c->reading || c->fd < 0 || c->wfail || !c->nents) return 0;
  hdr_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MAGIC, 8);
  h.version = PX_PCACHE_FORMAT;
  h.count = c->nents;
  memcpy(h.key, c->key, sizeof h.key);
  h.table_off = c->wpos;
  h.file_size = h.table_off + (uint64_t)c->nents * sizeof(ent_t);
  h.table_hash = px_hash64(c->ents, (size_t)c->nents * sizeof(ent_t), 1);
  h.header_hash = px_hash64(&h, offsetof(hdr_t, header_hash), 0);
  wbytes(c, c->ents, (size_t)c->nents * sizeof(ent_t), h.table_off);
  wbytes(c, &h, sizeof h, 0);
  int ok = !c->wfail && close(c->fd) == 0;
  c->fd = -1;
  if (ok) ok = rename(c->tmp, c->path) == 0;
  if (!ok) unlink(c->tmp);
  free(c->tmp);
  c->tmp = NULL;
  return ok;
}

void px_pcache_close(px_pcache *c) {
  if (!c) return;
  if (c->fd >= 0) {
    close(c->fd);
    unlink(c->tmp);
  }
  free(c->tmp);
  if (c->map) munmap((void *)c->map, c->map_len);
  free(c->ents);
  free(c->path);
  free(c);
}

void px_pcache_stats(const px_pcache *c, uint32_t *hits, uint32_t *puts, int *mapped) {
  *hits = c ? c->hits : 0;
  *puts = c ? c->puts : 0;
  *mapped = c && c->map && c->hits;
}
