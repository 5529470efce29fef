/*
 * registry.c - one sorted table of every kernel family's entries.
 */
#include "kernels/registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FAMILY_(family) px_kernels_##family,
static const px_kernel_def *const families[] = {PX_KERNEL_FAMILIES(FAMILY_)};
#undef FAMILY_

static const px_kernel_def **table;
static size_t table_len;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static int by_name(const void *a, const void *b) {
  const px_kernel_def *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

static void build_table(void) {
  size_t n = 0;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const px_kernel_def *d = families[f]; d->name; d++) n++;
  table = malloc((n ? n : 1) * sizeof *table);
  if (!table) return; /* lookups then find nothing: reported as missing kernels */
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const px_kernel_def *d = families[f]; d->name; d++) table[table_len++] = d;
  qsort(table, table_len, sizeof *table, by_name);
}

static void ensure_table(void) { pthread_once(&table_once, build_table); }

const px_kernel_def *px_kernel_find(const char *name) {
  ensure_table();
  size_t lo = 0, hi = table_len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(table[mid]->name, name);
    if (c == 0) return table[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

size_t px_kernel_count(void) {
  ensure_table();
  return table_len;
}

const px_kernel_def *px_kernel_at(size_t index) {
  ensure_table();
  return index < table_len ? table[index] : NULL;
}

const char *px_kernel_name(size_t index) {
  const px_kernel_def *k = px_kernel_at(index);
  return k ? k->name : NULL;
}
