/*
 * test_pcache.c - the packed-weight cache file (core/pcache.c) as untrusted
 * input: a file written and read back; then every header and table byte
 * flipped, every truncation length, a byte of each entry flipped, another
 * key and garbage: each is refused (no entry handed out, or the damaged
 * entry refused), never a crash. And the hash: every length and every
 * flipped bit gives another value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/pcache.h"
#include "check.h"

static const uint64_t KEY[4] = {1, 2, 3, 4};
static unsigned char A[300], B[5000];

static void write_file(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) exit(2);
  if (n) fwrite(b, 1, n, f);
  fclose(f);
}

static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*n ? *n : 1);
  if (fread(b, 1, *n, f) != *n) exit(2);
  fclose(f);
  return b;
}

/* Entries handed out by a cache at path: 0, 1 or 2 (both right). */
static int takes(const char *path, const uint64_t *key) {
  px_pcache *c = px_pcache_open(path, key);
  size_t n;
  int got = 0;
  const unsigned char *e = px_pcache_take(c, 7, &n);
  if (e) {
    if (n != px_pcache_layout((size_t[]){sizeof A, 10}, 2, 2) || memcmp(e, A, sizeof A)) got = -100;
    got++;
    e = px_pcache_take(c, 8, &n);
    if (e) {
      if (n != sizeof B || memcmp(e, B, sizeof B)) got = -100;
      got++;
    }
  }
  px_pcache_close(c); /* not committed: the file stays as it is */
  return got;
}

int main(void) {
  char dir[] = "/tmp/pcache_test.XXXXXX";
  if (!mkdtemp(dir)) return 2;
  char path[256];
  snprintf(path, sizeof path, "%s/x.pxw", dir);
  for (size_t i = 0; i < sizeof A; i++) A[i] = (unsigned char)(i * 7 + 1);
  for (size_t i = 0; i < sizeof B; i++) B[i] = (unsigned char)(i * 13 + 5);

  /* written: two entries, the first of two parts */
  px_pcache *c = px_pcache_open(path, KEY);
  size_t n;
  CHECK(!px_pcache_take(c, 7, &n), "an absent file hands out an entry");
  px_pcache_put(c, 7, 2, (const void *[]){A, "0123456789"}, (size_t[]){sizeof A, 10});
  px_pcache_put(c, 8, 1, (const void *[]){B}, (size_t[]){sizeof B});
  CHECK(px_pcache_commit(c) == 1, "commit");
  px_pcache_close(c);
  CHECK(takes(path, KEY) == 2, "the file written does not read back");
  c = px_pcache_open(path, KEY);
  const unsigned char *e = px_pcache_take(c, 7, &n);
  CHECK(e && (uintptr_t)e % 64 == 0 && !memcmp(e + 320, "0123456789", 10), "parts: aligned at 64");
  px_pcache_close(c);
  uint64_t other[4] = {1, 2, 3, 5};
  CHECK(takes(path, other) == 0, "another key reads the file");

  size_t len;
  unsigned char *good = read_file(path, &len);
  unsigned char *bad = malloc(len);
  /* the header's checked bytes (the 80 before its padding) and the table */
  for (size_t i = 0; i < len; i++) {
    if (i >= 80 && i < len - 64) continue;
    memcpy(bad, good, len);
    bad[i] ^= 0x40;
    write_file(path, bad, len);
    CHECK(takes(path, KEY) == 0, "byte %zu flipped: entries handed out", i);
  }
  /* an entry's byte: that entry (and the ones after it) refused */
  memcpy(bad, good, len);
  bad[128 + 5] ^= 1;
  write_file(path, bad, len);
  CHECK(takes(path, KEY) == 0, "the first entry damaged is handed out");
  memcpy(bad, good, len);
  bad[len - 64 - 100] ^= 1;
  write_file(path, bad, len);
  CHECK(takes(path, KEY) == 1, "the second entry damaged is handed out");
  for (size_t k = 0; k < len; k += (k < 200 ? 1 : 97)) {
    write_file(path, good, k);
    CHECK(takes(path, KEY) == 0, "truncated to %zu bytes: entries handed out", k);
  }
  srand(1);
  for (int r = 0; r < 200; r++) {
    for (size_t i = 0; i < len; i++) bad[i] = (unsigned char)rand();
    if (r % 2) memcpy(bad, good, 16); /* magic and version right */
    write_file(path, bad, len);
    CHECK(takes(path, KEY) == 0, "garbage read as a cache");
  }
  /* a damaged file is rewritten whole from the packers' entries */
  memcpy(bad, good, len);
  bad[len - 64 - 100] ^= 1;
  write_file(path, bad, len);
  c = px_pcache_open(path, KEY);
  CHECK(px_pcache_take(c, 7, &n) != NULL, "first entry");
  CHECK(px_pcache_take(c, 8, &n) == NULL, "damaged second entry");
  px_pcache_put(c, 8, 1, (const void *[]){B}, (size_t[]){sizeof B});
  CHECK(px_pcache_commit(c) == 1, "rewrite");
  px_pcache_close(c);
  size_t len2;
  unsigned char *again = read_file(path, &len2);
  CHECK(len2 == len && !memcmp(again, good, len), "the rewritten file differs");
  free(again);

  /* the hash */
  unsigned char h[200];
  for (size_t i = 0; i < sizeof h; i++) h[i] = (unsigned char)i;
  uint64_t seen[201];
  for (size_t k = 0; k <= sizeof h; k++) {
    seen[k] = px_hash64(h, k, 0);
    for (size_t j = 0; j < k; j++) CHECK(seen[j] != seen[k], "lengths %zu and %zu hash alike", j, k);
  }
  uint64_t base = px_hash64(h, sizeof h, 0);
  for (size_t bit = 0; bit < 8 * sizeof h; bit++) {
    h[bit / 8] ^= (unsigned char)(1u << bit % 8);
    CHECK(px_hash64(h, sizeof h, 0) != base, "bit %zu flipped hashes alike", bit);
    h[bit / 8] ^= (unsigned char)(1u << bit % 8);
  }
  CHECK(px_hash64(h, sizeof h, 1) != base, "the seed changes nothing");

  free(good);
  free(bad);
  unlink(path);
  rmdir(dir);
  printf("pcache: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
