/*
 * api.c - the public entry points that only forward to the program,
 * registry and dtype internals (the method entry points live in method.c,
 * next to the state they guard).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "program.h"
#include "registry.h"

PYEXEC_API size_t pyexec_dtype_size(int dtype) { return px_elsize(dtype); }

PYEXEC_API const char *pyexec_dtype_name(int dtype) { return px_dtype_name(dtype); }

PYEXEC_API size_t pyexec_kernel_count(void) { return px_kernel_count(); }

PYEXEC_API const char *pyexec_kernel_name(size_t index) {
  const px_kernel_def *k = px_kernel_at(index);
  return k ? k->name : NULL;
}

static pyexec_status find_plan(const pyexec_program *p, const char *name, const px_plan **plan) {
  *plan = NULL;
  if (!p || !name) return px_invalid_argument("program and name must not be NULL");
  *plan = px_program_plan(p, name);
  return *plan ? PYEXEC_OK : PYEXEC_ERR_INVALID_ARGUMENT;
}

PYEXEC_API pyexec_status pyexec_program_method_io_count(const pyexec_program *p, const char *name,
                                                        size_t *num_inputs, size_t *num_outputs) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  size_t a, b;
  st = px_plan_io_count(p, plan, &a, &b);
  if (st) return st;
  if (num_inputs) *num_inputs = a;
  if (num_outputs) *num_outputs = b;
  return PYEXEC_OK;
}

PYEXEC_API pyexec_status pyexec_program_input_info(const pyexec_program *p, const char *name, size_t index,
                                                   pyexec_value_info *out) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  if (!out) return px_invalid_argument("out must not be NULL");
  return px_plan_io_info(p, plan, false, index, out);
}

PYEXEC_API pyexec_status pyexec_program_output_info(const pyexec_program *p, const char *name, size_t index,
                                                    pyexec_value_info *out) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  if (!out) return px_invalid_argument("out must not be NULL");
  return px_plan_io_info(p, plan, true, index, out);
}

static int by_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

PYEXEC_API pyexec_status pyexec_program_method_operators(const pyexec_program *p, const char *name, char *buf,
                                                         size_t cap, size_t *needed, size_t *missing) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  px_fb_vec ops;
  if (!px_fb_vector(&plan->table, PLAN_OPERATORS, 4, &ops))
    return px_invalid_program("method '%s': operators are malformed", name);
  char **names = calloc(ops.count + 1, sizeof *names);
  if (!names) return px_no_memory("operator list");
  uint32_t n = 0;
  for (uint32_t i = 0; i < ops.count; i++) {
    char tmp[512];
    if ((st = px_plan_operator_name(plan, i, tmp, sizeof tmp))) break;
    bool dup = false;
    for (uint32_t j = 0; j < n && !dup; j++) dup = strcmp(names[j], tmp) == 0;
    if (dup) continue;
    if (!(names[n] = strdup(tmp))) {
      st = px_no_memory("operator list");
      break;
    }
    n++;
  }
  size_t len = 1, miss = 0;
  if (!st) {
    qsort(names, n, sizeof *names, by_str);
    size_t pos = 0;
    if (buf && cap) buf[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
      bool have = px_kernel_find(names[i]) != NULL;
      miss += !have;
      int w = snprintf(buf && pos < cap ? buf + pos : NULL, buf && pos < cap ? cap - pos : 0, "%s%s\n",
                       have ? "" : "!", names[i]);
      pos += (size_t)w;
    }
    len = pos + 1;
    if (needed) *needed = len;
    if (missing) *missing = miss;
  }
  for (uint32_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return st;
}
