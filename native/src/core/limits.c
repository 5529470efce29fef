/*
 * limits.c - the bounds of limits.h.
 */
#include "core/limits.h"

uint64_t px_max_declared_bytes = (uint64_t)1 << 40;
long px_max_steps = 10000000L;
