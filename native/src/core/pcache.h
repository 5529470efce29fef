/*
 * pcache.h - the packed-weight cache file (private): weights packed at load
 * (px_qweights and the like) are written once into a file keyed by the
 * program's content, and later loads map that file read-only and shared, so
 * every process reads the same pages instead of packing its own copy.
 *
 * The file is untrusted input. Layout (native byte order; the magic tells
 * another byte order apart):
 *   header (128 bytes): magic "PXWCACHE", format version, entry count, the
 *     32-byte key, the file size, the entry table's offset, the table's
 *     hash and the header's own hash (of the bytes before it)
 *   entries: each at a 64-byte aligned offset, after the header and before
 *     the table
 *   table: per entry {tag, size, offset, hash of its bytes}
 * Opening checks the magic, version, key, size and the table's bounds and
 * hashes; an entry's own hash is checked when it is taken. Anything wrong
 * and the file is ignored: the load packs as usual and writes a new file
 * (to a temporary name in the same directory, then rename(2)).
 *
 * Packers see one cache per thread (px_pcache_current), set by the method
 * load around the steps that pack. A packer asks for its next entry
 * (px_pcache_take) and checks its size against what the shapes say; on a
 * miss or a mismatch it packs and hands the result to px_pcache_put. Taken
 * entries point into the mapping: whoever holds them does not own them, and
 * the mapping lives until px_pcache_close, after every holder is gone.
 */
#ifndef PX_PCACHE_H
#define PX_PCACHE_H

#include <stddef.h>
#include <stdint.h>

#define PX_PCACHE_FORMAT 1

/* A 64-bit non-cryptographic hash of data[0..n): four independent
 * multiply-rotate lanes over 32-byte stripes, mixed at the end. */
uint64_t px_hash64(const void *data, size_t n, uint64_t seed);

typedef struct px_pcache px_pcache;

/* The cache at `path` under `key`: mapped when it is valid, otherwise (or
 * when it does not exist) a new one is written as the packers put entries.
 * NULL only when out of memory. */
px_pcache *px_pcache_open(const char *path, const uint64_t key[4]);

/* The next entry when it has `tag` and its bytes hash right (its size in
 * *size); NULL otherwise, and from then on the cache is rewritten. */
const void *px_pcache_take(px_pcache *c, uint32_t tag, size_t *size);
/* The entry just taken does not fit what the packer expects: it packs and
 * puts its own, and the file is rewritten. */
void px_pcache_reject(px_pcache *c);
/* Appends an entry: the concatenation of parts[i] (sizes[i] bytes each),
 * each part starting at a 64-byte aligned offset within the entry. */
void px_pcache_put(px_pcache *c, uint32_t tag, int nparts, const void *const *parts, const size_t *sizes);
/* Offset of part i in an entry made of parts of these sizes (as put lays
 * them out); the entry's size is px_pcache_layout(sizes, nparts, nparts). */
size_t px_pcache_layout(const size_t *sizes, int nparts, int i);

/* The load succeeded: a file being written is completed and renamed into
 * place. Returns 1 when a file was written. */
int px_pcache_commit(px_pcache *c);
/* Unmaps the file (nothing may still point into it) and removes an
 * uncommitted temporary file. */
void px_pcache_close(px_pcache *c);

/* Entries taken from the file / packed and put, so far. */
void px_pcache_stats(const px_pcache *c, uint32_t *hits, uint32_t *puts, int *mapped);

px_pcache *px_pcache_current(void);
void px_pcache_set_current(px_pcache *c);

#endif /* PX_PCACHE_H */
