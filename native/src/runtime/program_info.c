/*
 * program_info.c - what a program's methods take, return, use and lack, read
 * without loading them: the bodies of the pyexec_program_* queries. They sit
 * above the loader because they consult the kernel registry (a kernel's
 * signature says which arguments it writes; which operators are missing) and
 * the backends (describing a delegate's payload).
 */
#include "runtime/program_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/error.h"
#include "kernels/registry.h"

#define BAD(...) px_invalid_program(__VA_ARGS__)

bool px_plan_value_written(const pyexec_program *p, const px_plan *plan, int32_t vidx) {
  (void)p;
  px_fb_vec chains;
  if (!px_fb_vector(&plan->table, PLAN_CHAINS, 4, &chains)) return false;
  for (uint32_t c = 0; c < chains.count; c++) {
    px_fb_table chain;
    px_fb_vec instrs;
    if (!px_fb_vec_table(&chains, c, &chain) || !px_fb_vector(&chain, CHAIN_INSTRUCTIONS, 4, &instrs)) return false;
    for (uint32_t i = 0; i < instrs.count; i++) {
      px_fb_table ins, args;
      uint8_t type;
      bool present;
      if (!px_fb_vec_table(&instrs, i, &ins) || !px_fb_u8(&ins, INSTR_ARGS_TYPE, 0, &type) ||
          !px_fb_subtable(&ins, INSTR_ARGS, &args, &present) || !present)
        continue;
      if (type == INSTR_MOVE) {
        int32_t to;
        if (px_fb_i32(&args, 1, 0, &to) && to == vidx) return true;
      } else if (type == INSTR_KERNEL) {
        int32_t opi;
        px_fb_vec a;
        char name[512];
        if (!px_fb_i32(&args, 0, 0, &opi) || opi < 0 || !px_fb_vector(&args, 1, 4, &a)) continue;
        if (px_plan_operator_name(plan, (uint32_t)opi, name, sizeof name)) continue;
        const px_kernel_def *k = px_kernel_find(name);
        const char *bar = k ? strchr(k->sig, '|') : NULL;
        /* Unknown kernels: the emitter's convention is that the last argument is the return value. */
        uint32_t first = bar ? (uint32_t)(bar - k->sig) : (a.count ? a.count - 1 : 0);
        for (uint32_t j = first; j < a.count; j++)
          if (px_fb_vec_i32(&a, j) == vidx) return true;
      }
    }
  }
  return false;
}

pyexec_status px_plan_io_info(const pyexec_program *p, const px_plan *plan, bool is_output, size_t index,
                              pyexec_value_info *out) {
  px_fb_vec io;
  if (!px_fb_vector(&plan->table, is_output ? PLAN_OUTPUTS : PLAN_INPUTS, 4, &io))
    return BAD("method '%s': inputs/outputs are malformed", plan->name);
  if (index >= io.count)
    return px_invalid_argument("%s index %zu is out of range (method '%s' has %u)", is_output ? "output" : "input",
                               index, plan->name, io.count);
  int32_t vidx = px_fb_vec_i32(&io, (uint32_t)index);
  int tag;
  px_fb_table payload;
  pyexec_status st = px_plan_value(p, plan, vidx, &tag, &payload);
  if (st) return st;
  memset(out, 0, sizeof *out);
  switch (tag) {
    case PX_V_NONE: out->kind = PYEXEC_VALUE_NONE; return PYEXEC_OK;
    case PX_V_INT: out->kind = PYEXEC_VALUE_INT; return PYEXEC_OK;
    case PX_V_DOUBLE: out->kind = PYEXEC_VALUE_DOUBLE; return PYEXEC_OK;
    case PX_V_BOOL: out->kind = PYEXEC_VALUE_BOOL; return PYEXEC_OK;
    case PX_V_STRING: out->kind = PYEXEC_VALUE_STRING; return PYEXEC_OK;
    case PX_V_TENSOR: break;
    default: out->kind = PYEXEC_VALUE_OTHER; return PYEXEC_OK;
  }
  char where[64];
  snprintf(where, sizeof where, "%s %zu", is_output ? "output" : "input", index);
  px_tensor_desc d;
  st = px_parse_tensor(p, &payload, where, &d);
  if (st) return st;
  out->kind = PYEXEC_VALUE_TENSOR;
  out->dtype = d.dtype;
  out->dim = d.dim;
  out->is_memory_planned = d.has_alloc || d.data_buffer_idx != 0;
  out->is_dynamic = d.dynamic;
  out->is_contiguous = d.contiguous;
  /* An input the program writes is a user-input mutation; every output is
   * written, so the flag would say nothing there (pyexec.h). */
  out->is_mutated_input = !is_output && px_plan_value_written(p, plan, vidx);
  memcpy(out->sizes, d.sizes, sizeof(int64_t) * (size_t)d.dim);
  memcpy(out->dim_order, d.dim_order, (size_t)d.dim);
  out->nbytes = d.nbytes;
  return PYEXEC_OK;
}

/* ---- queries on a method that is not loaded --------------------------------- */

static pyexec_status find_plan(const pyexec_program *p, const char *name, const px_plan **plan) {
  *plan = NULL;
  if (!p || !name) return px_invalid_argument("program and name must not be NULL");
  *plan = px_program_plan(p, name);
  return *plan ? PYEXEC_OK : PYEXEC_ERR_INVALID_ARGUMENT;
}

/* Input (outputs false) or output count of method `name`. */
static pyexec_status io_count(const pyexec_program *p, const char *name, bool outputs, size_t *count) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  if (!count) return px_invalid_argument("count must not be NULL");
  size_t a, b;
  st = px_plan_io_count(p, plan, &a, &b);
  if (st) return st;
  *count = outputs ? b : a;
  return PYEXEC_OK;
}

pyexec_status px_program_input_count(const pyexec_program *p, const char *name, size_t *count) {
  return io_count(p, name, false, count);
}

pyexec_status px_program_output_count(const pyexec_program *p, const char *name, size_t *count) {
  return io_count(p, name, true, count);
}

pyexec_status px_program_input_info(const pyexec_program *p, const char *name, size_t index,
                                    pyexec_value_info *out) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  if (!out) return px_invalid_argument("out must not be NULL");
  return px_plan_io_info(p, plan, false, index, out);
}

pyexec_status px_program_output_info(const pyexec_program *p, const char *name, size_t index,
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

pyexec_status px_program_method_operators(const pyexec_program *p, const char *name, char *buf, size_t cap,
                                          size_t *needed, size_t *missing) {
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

pyexec_status px_program_delegate_count(const pyexec_program *p, const char *name, size_t *count) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  if (!count) return px_invalid_argument("count must not be NULL");
  uint32_t n = 0;
  if ((st = px_plan_delegate_count(plan, &n))) return px_invalid_program("method '%s': delegates are malformed", name);
  *count = n;
  return PYEXEC_OK;
}

/* The error message of the failing call, prefixed with `what` (and the
 * same status returned). */
static pyexec_status prefix_error(pyexec_status st, const char *name, const char *what) {
  size_t cap;
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", px_error_buffer(&cap));
  return px_error(st, "method '%s': %s%s", name, what, tmp);
}

pyexec_status px_program_delegate_describe(const pyexec_program *p, const char *name, size_t index, char *buf,
                                           size_t cap, size_t *needed, size_t *unsupported) {
  const px_plan *plan = NULL;
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  size_t count;
  if ((st = px_program_delegate_count(p, name, &count))) return st;
  if (index >= count)
    return px_invalid_argument("method '%s': delegate %zu is out of range (%zu delegates)", name, index, count);
  px_delegate_desc d;
  if ((st = px_plan_delegate(p, plan, (uint32_t)index, &d))) return prefix_error(st, name, "");
  const px_backend *backend = px_backend_find(d.id, d.id_len);
  const bool describes = backend && backend->describe;
  /* Describe first, into nothing: a malformed payload fails before any
   * output is touched. */
  size_t nodes_len = 1, miss = 0;
  if (describes && (st = backend->describe(d.data, d.size, NULL, 0, &nodes_len, &miss))) {
    char what[96];
    snprintf(what, sizeof what, "delegate %zu (%s): ", index, backend->id);
    return prefix_error(st, name, what);
  }
  /* The id line: the program's bytes (valid UTF-8), "!" first when no
   * backend has the id, a control character shown as '?' so that the id
   * stays on one line. */
  size_t pos = 0;
#define PUT(c)                               \
  do {                                       \
    if (buf && pos + 1 < cap) buf[pos] = (c); \
    pos++;                                   \
  } while (0)
  if (!backend) PUT('!');
  for (uint32_t k = 0; k < d.id_len; k++) PUT((unsigned char)d.id[k] < 0x20 ? '?' : d.id[k]);
  PUT('\n');
#undef PUT
  if (buf && cap) buf[pos < cap ? pos : cap - 1] = 0;
  if (describes && buf && pos < cap) backend->describe(d.data, d.size, buf + pos, cap - pos, &nodes_len, &miss);
  if (needed) *needed = pos + nodes_len;
  if (unsupported) *unsupported = miss + !backend;
  return PYEXEC_OK;
}

/* ---- attributes: the named tensors of a method ---------------------------- */

pyexec_status px_plan_attribute(const pyexec_program *p, const px_plan *plan, size_t index, size_t *count,
                                int32_t *vidx, px_tensor_desc *desc) {
  px_fb_vec values;
  if (!px_fb_vector(&plan->table, PLAN_VALUES, 4, &values))
    return BAD("method '%s': values are malformed", plan->name);
  size_t n = 0;
  for (uint32_t i = 0; i < values.count; i++) {
    int tag;
    px_fb_table payload;
    pyexec_status st = px_plan_value(p, plan, i, &tag, &payload);
    if (st) return st;
    if (tag != PX_V_TENSOR) continue;
    char where[48];
    snprintf(where, sizeof where, "value %u", i);
    px_tensor_desc d;
    st = px_parse_tensor(p, &payload, where, &d);
    if (st) return st;
    if (d.fqn_len == 0) continue;
    if (n == index && vidx) {
      *vidx = (int32_t)i;
      if (desc) *desc = d;
      if (count) *count = n + 1;
      return PYEXEC_OK;
    }
    n++;
  }
  if (count) *count = n;
  if (vidx)
    return px_invalid_argument("attribute index %zu is out of range (method '%s' has %zu)", index, plan->name, n);
  return PYEXEC_OK;
}

pyexec_status px_program_attribute_count(const pyexec_program *p, const char *name, size_t *count) {
  const px_plan *plan;
  if (!count) return px_invalid_argument("count must not be NULL");
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  return px_plan_attribute(p, plan, 0, count, NULL, NULL);
}

pyexec_status px_program_attribute_info(const pyexec_program *p, const char *name, size_t index,
                                        pyexec_value_info *out, char *fqn, size_t cap, size_t *needed) {
  const px_plan *plan;
  if (!out) return px_invalid_argument("out must not be NULL");
  pyexec_status st = find_plan(p, name, &plan);
  if (st) return st;
  int32_t vidx;
  px_tensor_desc d;
  st = px_plan_attribute(p, plan, index, NULL, &vidx, &d);
  if (st) return st;
  memset(out, 0, sizeof *out);
  out->kind = PYEXEC_VALUE_TENSOR;
  out->dtype = d.dtype;
  out->dim = d.dim;
  out->is_memory_planned = d.has_alloc || d.data_buffer_idx != 0;
  out->is_dynamic = d.dynamic;
  out->is_contiguous = d.contiguous;
  out->is_mutated_input = px_plan_value_written(p, plan, vidx);
  memcpy(out->sizes, d.sizes, sizeof(int64_t) * (size_t)d.dim);
  memcpy(out->dim_order, d.dim_order, (size_t)d.dim);
  out->nbytes = d.nbytes;
  if (needed) *needed = (size_t)d.fqn_len + 1;
  if (fqn && cap) {
    size_t k = d.fqn_len < cap - 1 ? d.fqn_len : cap - 1;
    memcpy(fqn, d.fqn, k);
    fqn[k] = '\0';
  }
  return PYEXEC_OK;
}
