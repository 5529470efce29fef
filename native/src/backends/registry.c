/*
 * registry.c - the delegate backends this library has, by id. A new backend
 * adds its table here; nothing else changes.
 */
#include <string.h>

#include "backends/backend.h"

extern const px_backend px_backend_xnnpack;

static const px_backend *const backends[] = {&px_backend_xnnpack};

size_t px_backend_count(void) { return sizeof backends / sizeof *backends; }

const char *px_backend_name(size_t index) { return index < px_backend_count() ? backends[index]->id : NULL; }

const px_backend *px_backend_find(const char *id, size_t n) {
  for (size_t k = 0; k < sizeof backends / sizeof *backends; k++)
    if (strlen(backends[k]->id) == n && memcmp(backends[k]->id, id, n) == 0) return backends[k];
  return NULL;
}
