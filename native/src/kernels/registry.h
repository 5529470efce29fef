/*
 * registry.h - the kernel registry: every kernel family's table, looked up by
 * "namespace::name.overload" (private).
 */
#ifndef PX_REGISTRY_H
#define PX_REGISTRY_H

#include "kernels/kernel.h"

/* The kernel registered under `name` (e.g. "aten::add.out"), or NULL. */
const px_kernel_def *px_kernel_find(const char *name);

/* All kernels, sorted by name. */
size_t px_kernel_count(void);
const px_kernel_def *px_kernel_at(size_t index);

/* The name of px_kernel_at(index), or NULL past the end. */
const char *px_kernel_name(size_t index);

#endif /* PX_REGISTRY_H */
