/*
 * method_io.c - a loaded method's IO: its metadata, checking and installing
 * inputs, binding and describing outputs, and the run entry points (which
 * hand the instructions to executor.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/parallel.h"
#include "runtime/executor.h"
#include "runtime/method.h"
#include "runtime/program_info.h"

/* ---- metadata ---------------------------------------------------------- */

const char *px_method_name(const pyexec_method *m) { return m ? m->plan->name : NULL; }
size_t px_method_input_count(const pyexec_method *m) { return m ? m->nin : 0; }
size_t px_method_output_count(const pyexec_method *m) { return m ? m->nout : 0; }
size_t px_method_planned_nbytes(const pyexec_method *m) { return m ? m->planned_total : 0; }

pyexec_status px_method_input_info(const pyexec_method *m, size_t index, pyexec_value_info *out) {
  if (!m || !out) return px_invalid_argument("method and out must not be NULL");
  return px_plan_io_info(m->program, m->plan, false, index, out);
}

pyexec_status px_method_output_info(const pyexec_method *m, size_t index, pyexec_value_info *out) {
  if (!m || !out) return px_invalid_argument("method and out must not be NULL");
  return px_plan_io_info(m->program, m->plan, true, index, out);
}

int px_method_query_alias(const pyexec_method *m, size_t index, size_t *input_index) {
  if (!m || index >= m->nout || m->outs[index].alias_input < 0) return 0;
  if (input_index) *input_index = (size_t)m->outs[index].alias_input;
  return 1;
}

/* ---- inputs ------------------------------------------------------------ */

static void format_shape(char *buf, size_t cap, int dim, const int64_t *sizes) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int k = 0; k < dim && n < cap; k++)
    n += (size_t)snprintf(buf + n, cap - n, k ? ", %lld" : "%lld", (long long)sizes[k]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Whether [p, p + n) overlaps the method's planned memory (arenas_only) or
 * also the storage it allocated for unplanned outputs; *output is set to the
 * output whose storage it overlaps, or -1 for planned memory. */
static bool in_method_memory(const pyexec_method *m, const void *p, size_t n, bool arenas_only, int64_t *output) {
  *output = -1;
  for (uint32_t i = 1; i < m->narenas; i++)
    if (px_bytes_overlap(p, n, m->arenas[i], m->arena_sizes[i])) return true;
  for (uint32_t i = 0; !arenas_only && i < m->nout; i++) {
    const px_output *o = &m->outs[i];
    if (o->own && px_bytes_overlap(p, n, o->own, m->values[o->vidx].u.t->capacity)) {
      *output = i;
      return true;
    }
  }
  return false;
}

static const char *kind_name(int kind) {
  switch (kind) {
    case PYEXEC_VALUE_NONE: return "None";
    case PYEXEC_VALUE_INT: return "an int";
    case PYEXEC_VALUE_DOUBLE: return "a float";
    case PYEXEC_VALUE_BOOL: return "a bool";
    case PYEXEC_VALUE_TENSOR: return "a tensor";
    case PYEXEC_VALUE_STRING: return "a string";
    default: return "an unsupported value";
  }
}

static const char *slot_kind_name(int tag) {
  switch (tag) {
    case PX_V_NONE: return "None";
    case PX_V_INT: return "an int";
    case PX_V_DOUBLE: return "a float";
    case PX_V_BOOL: return "a bool";
    case PX_V_TENSOR: return "a tensor";
    case PX_V_STRING: return "a string";
    default: return "a list";
  }
}

static pyexec_status check_tensor_input(pyexec_method *m, uint32_t j, const px_tensor *t, const pyexec_tensor *x,
                                        size_t *need) {
  if (x->dtype != t->dtype)
    return px_invalid_argument("input %u has dtype %s, tensor has %s", j, px_dtype_name(t->dtype),
                               px_dtype_name(x->dtype));
  if (x->dim != t->dim)
    return px_invalid_argument("input %u has rank %d, tensor has rank %d", j, t->dim, x->dim);
  if (x->dim > 0 && !x->sizes) return px_invalid_argument("input %u: sizes must not be NULL", j);
  uint64_t numel = 1;
  for (int k = 0; k < t->dim; k++) {
    int64_t s = x->sizes[k];
    bool bad = s < 0 || (t->dynamic ? s > t->max_sizes[k] : s != t->max_sizes[k]);
    if (bad) {
      char a[200], b[200];
      format_shape(a, sizeof a, t->dim, t->max_sizes);
      format_shape(b, sizeof b, x->dim, x->sizes);
      if (t->dynamic)
        return px_invalid_argument("input %u has shape at most %s, tensor has shape %s (dim %d above its bound)",
                                   j, a, b, k);
      return px_invalid_argument("input %u has shape %s, tensor has shape %s (dim %d differs)", j, a, b, k);
    }
    numel *= (uint64_t)s;
  }
  *need = (size_t)numel * px_elsize(t->dtype);
  if (x->nbytes < *need)
    return px_invalid_argument("input %u needs %zu bytes, the buffer has %zu", j, *need, x->nbytes);
  if (*need && !x->data) return px_invalid_argument("input %u: data must not be NULL", j);
  if (t->mem == PX_MEM_UNPLANNED) {
    size_t es = px_elsize(t->dtype);
    if ((uintptr_t)x->data % es)
      return px_invalid_argument("input %u: buffer is not aligned to %zu bytes", j, es);
    int64_t o;
    if (m->written[m->inputs[j]] && in_method_memory(m, x->data, *need, false, &o))
      return px_invalid_argument("input %u is written in place by the program, but its memory is the method's own "
                                 "storage (an output returned without a copy); pass a copy",
                                 j);
    for (uint32_t i = 0; i < m->nout; i++) {
      const px_output *o = &m->outs[i];
      if (o->bound && px_bytes_overlap(x->data, *need, o->bound, o->bound_nbytes))
        return px_invalid_argument("input %u overlaps the memory bound to output %u", j, i);
    }
  }
  return PYEXEC_OK;
}

static pyexec_status check_input(pyexec_method *m, uint32_t j, const pyexec_value *x, size_t *need) {
  px_value *v = &m->values[m->inputs[j]];
  static const int want_kind[] = {
      [PX_V_NONE] = PYEXEC_VALUE_NONE,     [PX_V_INT] = PYEXEC_VALUE_INT,
      [PX_V_BOOL] = PYEXEC_VALUE_BOOL,     [PX_V_DOUBLE] = PYEXEC_VALUE_DOUBLE,
      [PX_V_TENSOR] = PYEXEC_VALUE_TENSOR, [PX_V_STRING] = PYEXEC_VALUE_STRING,
  };
  if (v->tag > PX_V_STRING)
    return px_unsupported("input %u is %s, which cannot be set", j, slot_kind_name(v->tag));
  if (x->kind != want_kind[v->tag])
    return px_invalid_argument("input %u is %s, got %s", j, slot_kind_name(v->tag), kind_name(x->kind));
  switch (v->tag) {
    case PX_V_TENSOR: return check_tensor_input(m, j, v->u.t, &x->tensor, need);
    case PX_V_INT:
      if (x->i != v->u.i)
        return px_invalid_argument("input %u was exported as the constant %lld, got %lld", j, (long long)v->u.i,
                                   (long long)x->i);
      return PYEXEC_OK;
    case PX_V_BOOL:
      if ((x->b != 0) != v->u.b)
        return px_invalid_argument("input %u was exported as the constant %s", j, v->u.b ? "True" : "False");
      return PYEXEC_OK;
    case PX_V_DOUBLE:
      if (!(fabs(x->d - v->u.d) <= 1e-4 + 1e-5 * fabs(v->u.d)) && !(isnan(x->d) && isnan(v->u.d)))
        return px_invalid_argument("input %u was exported as the constant %g, got %g", j, v->u.d, x->d);
      return PYEXEC_OK;
    case PX_V_STRING:
      if (x->string.size != v->u.str.n || (x->string.size && memcmp(x->string.data, v->u.str.p, x->string.size)))
        return px_invalid_argument("input %u was exported as the string '%.*s'", j, (int)v->u.str.n, v->u.str.p);
      return PYEXEC_OK;
    default: return PYEXEC_OK;
  }
}

/* set_inputs with m->lock held. */
static pyexec_status set_inputs_locked(pyexec_method *m, const pyexec_value *inputs, size_t count) {
  pyexec_status st = PYEXEC_OK;
  if (count != m->nin)
    st = px_invalid_argument("method '%s' takes %u input%s, got %zu", m->plan->name, m->nin, m->nin == 1 ? "" : "s",
                             count);
  for (uint32_t j = 0; !st && j < m->nin; j++) st = check_input(m, j, &inputs[j], &m->in_need[j]);
  /* An input whose memory is the method's own (an output returned without a
   * copy and fed back, as recurrent state is) cannot be read in place: the run
   * overwrites it. Unplanned ones are copied into a stage buffer, like planned
   * ones into planned memory; those lying in planned memory are first set
   * aside, as the copies below write planned memory. */
  size_t aside = 0;
  for (uint32_t j = 0; !st && j < m->nin; j++) {
    const px_value *v = &m->values[m->inputs[j]];
    const pyexec_tensor *x = &inputs[j].tensor;
    int64_t o;
    m->in_src[j] = NULL;
    if (v->tag != PX_V_TENSOR || !m->in_need[j]) continue;
    m->in_src[j] = x->data;
    if (!m->in_stage[j] && (m->in_restore[j] || (v->u.t->mem == PX_MEM_UNPLANNED &&
                                                  in_method_memory(m, x->data, m->in_need[j], false, &o)))) {
      size_t n = (v->u.t->capacity + 63) & ~(size_t)63;
      if (!(m->in_stage[j] = aligned_alloc(64, n))) st = px_no_memory("input staging");
    }
    if (in_method_memory(m, x->data, m->in_need[j], true, &o)) aside += m->in_need[j];
  }
  uint8_t *tmp = NULL;
  if (!st && aside && !(tmp = malloc(aside))) st = px_no_memory("input staging");
  if (st) {
    for (uint32_t j = 0; j < m->nin; j++) m->input_set[j] = false;
    return st;
  }
  for (size_t j = 0, off = 0; tmp && j < m->nin; j++) {
    int64_t o;
    if (!m->in_src[j] || !in_method_memory(m, m->in_src[j], m->in_need[j], true, &o)) continue;
    memcpy(tmp + off, m->in_src[j], m->in_need[j]);
    m->in_src[j] = tmp + off;
    off += m->in_need[j];
  }
  for (uint32_t j = 0; j < m->nin; j++) {
    px_value *v = &m->values[m->inputs[j]];
    m->input_set[j] = true;
    if (v->tag != PX_V_TENSOR) continue;
    px_tensor *t = v->u.t;
    const pyexec_tensor *x = &inputs[j].tensor;
    const void *src = m->in_src[j];
    int64_t o;
    if (t->dynamic) {
      memcpy(t->sizes, x->sizes, sizeof(int64_t) * (size_t)t->dim);
      px_tensor_update_layout(t);
    }
    if (t->mem != PX_MEM_UNPLANNED) {
      if (t->nbytes && t->data != src) memmove(t->data, src, t->nbytes);
      if (m->in_restore[j] && t->nbytes) memcpy(m->in_stage[j], t->data, t->nbytes);
    } else if (src && (src != x->data || in_method_memory(m, src, m->in_need[j], false, &o))) {
      memcpy(m->in_stage[j], src, m->in_need[j]);
      t->data = m->in_stage[j];
    } else {
      t->data = x->data;
    }
  }
  free(tmp);
  m->inputs_fresh = true;
  return PYEXEC_OK;
}

pyexec_status px_method_set_inputs(pyexec_method *m, const pyexec_value *inputs, size_t count) {
  if (!m) return px_invalid_argument("method must not be NULL");
  if (count && !inputs) return px_invalid_argument("inputs must not be NULL");
  pthread_mutex_lock(&m->lock);
  pyexec_status st = set_inputs_locked(m, inputs, count);
  pthread_mutex_unlock(&m->lock);
  return st;
}

pyexec_status px_method_clear_inputs(pyexec_method *m) {
  if (!m) return px_invalid_argument("method must not be NULL");
  pthread_mutex_lock(&m->lock);
  for (uint32_t j = 0; j < m->nin; j++) {
    m->input_set[j] = false;
    px_value *v = &m->values[m->inputs[j]];
    /* An unplanned input points at caller memory (or its stage copy): point
     * nowhere, so that nothing the method describes leads there. */
    if (v->tag == PX_V_TENSOR && v->u.t->mem == PX_MEM_UNPLANNED) v->u.t->data = NULL;
  }
  pthread_mutex_unlock(&m->lock);
  return PYEXEC_OK;
}

/* ---- outputs ----------------------------------------------------------- */

static pyexec_status check_bindable(const pyexec_method *m, size_t index) {
  if (index >= m->nout)
    return px_invalid_argument("output index %zu is out of range (method '%s' has %u outputs)", index,
                               m->plan->name, m->nout);
  const px_output *o = &m->outs[index];
  const px_value *v = &m->values[o->vidx];
  if (v->tag != PX_V_TENSOR) return px_invalid_argument("output %zu is not a tensor", index);
  if (o->alias_input >= 0)
    return px_invalid_argument("output %zu is input %d (the same program value); it cannot be bound", index,
                               o->alias_input);
  if (v->u.t->mem != PX_MEM_UNPLANNED)
    return px_invalid_argument("output %zu is memory-planned%s; only unplanned outputs (exported with "
                               "alloc_graph_output=False) can be bound",
                               index, v->u.t->mem == PX_MEM_CONST ? " (a constant)" : "");
  if (o->duplicate)
    return px_invalid_argument("output %zu is listed at more than one output index; it cannot be bound", index);
  if (!v->u.t->contiguous) return px_invalid_argument("output %zu has a non-contiguous dim_order", index);
  return PYEXEC_OK;
}

pyexec_status px_method_check_bindable(const pyexec_method *m, size_t index) {
  if (!m) return px_invalid_argument("method must not be NULL");
  return check_bindable(m, index);
}

pyexec_status px_method_set_output_ptr(pyexec_method *m, size_t index, void *data, size_t nbytes) {
  if (!m) return px_invalid_argument("method must not be NULL");
  pthread_mutex_lock(&m->lock);
  pyexec_status st = check_bindable(m, index);
  if (!st && data) {
    const px_tensor *t = m->values[m->outs[index].vidx].u.t;
    size_t es = px_elsize(t->dtype);
    if (nbytes < t->capacity)
      st = px_invalid_argument("output %zu needs %zu bytes (its upper bound), the buffer has %zu", index,
                               t->capacity, nbytes);
    else if ((uintptr_t)data % es)
      st = px_invalid_argument("output %zu: buffer is not aligned to %zu bytes", index, es);
    for (uint32_t i = 0; !st && i < m->nout; i++)
      if (i != index && m->outs[i].bound && px_bytes_overlap(data, nbytes, m->outs[i].bound, m->outs[i].bound_nbytes))
        st = px_invalid_argument("output %zu overlaps the memory bound to output %u", index, i);
    int64_t own;
    if (!st && in_method_memory(m, data, nbytes, false, &own) && own != (int64_t)index) {
      if (own < 0)
        st = px_invalid_argument("output %zu overlaps memory the method uses (its planned memory); bind memory "
                                 "the caller owns", index);
      else
        st = px_invalid_argument("output %zu overlaps memory the method uses (the storage of output %lld); bind "
                                 "memory the caller owns", index, (long long)own);
    }
    for (uint32_t j = 0; !st && j < m->nin; j++) {
      const px_value *iv = &m->values[m->inputs[j]];
      if (!m->input_set[j] || iv->tag != PX_V_TENSOR || iv->u.t->mem != PX_MEM_UNPLANNED) continue;
      if (px_bytes_overlap(data, nbytes, iv->u.t->data, iv->u.t->nbytes))
        st = px_invalid_argument("output %zu overlaps the memory of input %u", index, j);
    }
  }
  if (!st) {
    px_output *o = &m->outs[index];
    px_tensor *t = m->values[o->vidx].u.t;
    o->bound = data;
    o->bound_nbytes = data ? nbytes : 0;
    t->data = data ? data : o->own; /* NULL own: allocated at the next execute */
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

static void describe_output(const pyexec_method *m, size_t index, pyexec_value *out) {
  const px_value *v = &m->values[m->outs[index].vidx];
  memset(out, 0, sizeof *out);
  switch (v->tag) {
    case PX_V_NONE: out->kind = PYEXEC_VALUE_NONE; break;
    case PX_V_INT: out->kind = PYEXEC_VALUE_INT; out->i = v->u.i; break;
    case PX_V_DOUBLE: out->kind = PYEXEC_VALUE_DOUBLE; out->d = v->u.d; break;
    case PX_V_BOOL: out->kind = PYEXEC_VALUE_BOOL; out->b = v->u.b; break;
    case PX_V_STRING:
      out->kind = PYEXEC_VALUE_STRING;
      out->string.data = v->u.str.p;
      out->string.size = v->u.str.n;
      break;
    case PX_V_TENSOR: {
      const px_tensor *t = v->u.t;
      out->kind = PYEXEC_VALUE_TENSOR;
      out->tensor.dtype = t->dtype;
      out->tensor.dim = t->dim;
      out->tensor.sizes = t->sizes;
      out->tensor.data = t->data;
      out->tensor.nbytes = t->nbytes;
      break;
    }
    default: out->kind = PYEXEC_VALUE_OTHER; break;
  }
}

pyexec_status px_method_get_output(pyexec_method *m, size_t index, pyexec_value *out) {
  if (!m || !out) return px_invalid_argument("method and out must not be NULL");
  if (index >= m->nout)
    return px_invalid_argument("output index %zu is out of range (method '%s' has %u outputs)", index,
                               m->plan->name, m->nout);
  pthread_mutex_lock(&m->lock);
  describe_output(m, index, out);
  pthread_mutex_unlock(&m->lock);
  return PYEXEC_OK;
}

pyexec_status px_method_get_attribute(pyexec_method *m, size_t index, pyexec_value *out) {
  if (!m || !out) return px_invalid_argument("method and out must not be NULL");
  int32_t vidx;
  pyexec_status st = px_plan_attribute(m->program, m->plan, index, NULL, &vidx, NULL);
  if (st) return st;
  if (vidx < 0 || (uint32_t)vidx >= m->nvalues || m->values[vidx].tag != PX_V_TENSOR)
    return px_invalid_argument("attribute %zu of method '%s' is not a tensor value", index, m->plan->name);
  pthread_mutex_lock(&m->lock);
  const px_tensor *t = m->values[vidx].u.t;
  memset(out, 0, sizeof *out);
  out->kind = PYEXEC_VALUE_TENSOR;
  out->tensor.dtype = t->dtype;
  out->tensor.dim = t->dim;
  out->tensor.sizes = t->sizes;
  out->tensor.data = t->data;
  out->tensor.nbytes = t->nbytes;
  pthread_mutex_unlock(&m->lock);
  return PYEXEC_OK;
}

pyexec_status px_method_get_outputs(pyexec_method *m, pyexec_value *out, size_t count) {
  if (!m || (count && !out)) return px_invalid_argument("method and out must not be NULL");
  if (count > m->nout)
    return px_invalid_argument("asked for %zu outputs, method '%s' has %u", count, m->plan->name, m->nout);
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < count; i++) describe_output(m, i, &out[i]);
  pthread_mutex_unlock(&m->lock);
  return PYEXEC_OK;
}

/* Describes output i into *out and reports whether that description differs
 * from the one the previous pyexec_method_run gave (m->last_out). */
static bool describe_output_changed(pyexec_method *m, size_t i, pyexec_value *out) {
  describe_output(m, i, out);
  pyexec_value *last = &m->last_out[i];
  int64_t *last_sizes = m->last_sizes + i * PYEXEC_MAX_DIM;
  bool changed = memcmp(out, last, sizeof *out) != 0;
  if (!changed && out->kind == PYEXEC_VALUE_TENSOR)
    changed = memcmp(out->tensor.sizes, last_sizes, sizeof(int64_t) * (size_t)out->tensor.dim) != 0;
  if (changed) {
    *last = *out; /* both zero-filled by describe_output, padding included */
    if (out->kind == PYEXEC_VALUE_TENSOR)
      memcpy(last_sizes, out->tensor.sizes, sizeof(int64_t) * (size_t)out->tensor.dim);
  }
  return changed;
}

pyexec_status px_method_run(pyexec_run *run) {
  if (!run || !run->method) return px_invalid_argument("run and run->method must not be NULL");
  pyexec_method *m = run->method;
  if (run->inputs == NULL && run->input_count)
    return px_invalid_argument("inputs is NULL, input_count is %zu", run->input_count);
  if (run->output_count && !run->outputs)
    return px_invalid_argument("outputs is NULL, output_count is %zu", run->output_count);
  if (run->output_count > m->nout)
    return px_invalid_argument("asked for %zu outputs, method '%s' has %u", run->output_count, m->plan->name,
                               m->nout);
  pthread_mutex_lock(&m->lock);
  pyexec_status st = run->inputs ? set_inputs_locked(m, run->inputs, run->input_count) : PYEXEC_OK;
  if (!st) {
    int pin = px_parallel_pin();
    st = px_executor_run(m);
    px_parallel_unpin(pin);
  }
  if (!st) {
    bool changed = run->output_count != m->last_count;
    for (size_t i = 0; i < run->output_count; i++) changed |= describe_output_changed(m, i, &run->outputs[i]);
    m->last_count = run->output_count;
    run->outputs_changed = changed;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

pyexec_status px_method_execute(pyexec_method *m) {
  if (!m) return px_invalid_argument("method must not be NULL");
  pthread_mutex_lock(&m->lock);
  int pin = px_parallel_pin();
  pyexec_status st = px_executor_run(m);
  px_parallel_unpin(pin);
  pthread_mutex_unlock(&m->lock);
  return st;
}
