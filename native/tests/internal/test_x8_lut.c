/*
 * test_x8_lut.c - the byte table kernel (kernels/quantized/x8_lut.h) on
 * every path this build and CPU have, against table[x] read here: runs of
 * every length from 0 to 300 and a long one (the SIMD blocks, their tails
 * and the masked last block), at every start offset within a vector, every
 * byte value as an index, random tables and a table whose blocks are all
 * equal (where a wrong XOR of pieces cancels to zero), and in place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quantized/x8_lut.h"
#include "check.h"

static const char *const path_names[PX_LUT_NPATHS] = {"C", "AVX2", "AVX-512 VBMI", "NEON"};

static void check_run(int path, const uint8_t *table, const uint8_t *x, int64_t n) {
  uint8_t *y = malloc((size_t)n + 1), *z = malloc((size_t)n + 1);
  y[n] = 0xA5; /* a canary after the run */
  px_x8_lut_on(path, x, n, table, y);
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (y[i] != table[x[i]]) bad = i;
  CHECK(bad < 0, "n = %lld: byte %lld (index %u) is %u, the table says %u", (long long)n, (long long)bad,
        bad < 0 ? 0 : x[bad], bad < 0 ? 0 : y[bad], bad < 0 ? 0 : table[x[bad]]);
  CHECK(y[n] == 0xA5, "n = %lld: the byte after the run was written", (long long)n);
  memcpy(z, x, (size_t)n); /* in place */
  px_x8_lut_on(path, z, n, table, z);
  CHECK(memcmp(y, z, (size_t)n) == 0, "n = %lld: in place differs", (long long)n);
  free(y);
  free(z);
}

static void test_path(int path) {
  uint8_t table[256], *x = malloc(4096 + 64);
  for (int rep = 0; rep < 3; rep++) {
    for (int e = 0; e < 256; e++)
      table[e] = rep == 0 ? (uint8_t)rnd() : rep == 1 ? (uint8_t)(e % 16 * 7 + 3) : (uint8_t)(255 - e);
    for (int i = 0; i < 4096 + 64; i++) x[i] = (uint8_t)(i < 256 ? (uint32_t)i : rnd());
    check_run(path, table, x, 256); /* every index once */
    for (int64_t n = 0; n <= 300; n++) check_run(path, table, x + 256 + n % 64, n);
    check_run(path, table, x + 3, 4096);
  }
  free(x);
}

int main(void) {
  for (int p = 0; p < PX_LUT_NPATHS; p++) {
    if (!px_x8_lut_has(p)) continue;
    check_label = path_names[p];
    int before = failures;
    rng_state = 0x2545F4914F6CDD1Dull;
    test_path(p);
    printf("x8_lut: %s: %s\n", path_names[p], failures == before ? "ok" : "FAILED");
  }
  /* the dispatching entry point takes one of them */
  uint8_t table[256], x[100], y[100];
  for (int e = 0; e < 256; e++) table[e] = (uint8_t)(e ^ 0x5A);
  for (int i = 0; i < 100; i++) x[i] = (uint8_t)(i * 37);
  px_x8_lut(x, 100, table, y);
  int ok = 1;
  for (int i = 0; i < 100; i++) ok &= y[i] == table[x[i]];
  CHECK(ok, "px_x8_lut");
  printf("test_x8_lut: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
