/*
 * debug.c - a method's debug buffer (debug.h): after each instruction of a
 * profiled execute, the values it wrote are copied into the buffer, and
 * described, as ExecuTorch's ETDumpGen logs them with a debug buffer and
 * intermediate-output logging on (its kernel wrappers log each out argument
 * after the call; its DelegateCall logs every argument of the call; its
 * Method logs the outputs after the run).
 */
#include "runtime/debug.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/events.h"
#include "kernels/kernel.h"

/* ExecuTorch's BufferDataSink starts every blob at a multiple of 64 bytes. */
#define PX_DEBUG_ALIGN 64

/* The next record (zeroed), or NULL when memory runs out. */
static pyexec_debug_value *next_record(px_debug *d) {
  if (d->n == d->vcap) {
    size_t cap = d->vcap ? d->vcap * 2 : 64;
    pyexec_debug_value *v = realloc(d->v, cap * sizeof *v);
    if (!v) return NULL;
    d->v = v;
    d->vcap = cap;
  }
  pyexec_debug_value *r = &d->v[d->n++];
  memset(r, 0, sizeof *r);
  r->output = -1;
  return r;
}

/* Copies t's elements, row-major, to the next aligned offset of the buffer. */
static pyexec_status put_tensor(pyexec_method *m, px_debug *d, const px_tensor *t, pyexec_debug_value *r,
                                const char *what) {
  r->kind = PYEXEC_VALUE_TENSOR;
  r->dtype = t->dtype;
  r->dim = t->dim;
  for (int k = 0; k < t->dim && k < PYEXEC_MAX_DIM; k++) r->sizes[k] = t->sizes[k];
  r->nbytes = (int64_t)t->nbytes;
  r->offset = -1;
  if (!t->nbytes) return PYEXEC_OK; /* ExecuTorch writes nothing either */
  size_t at = (d->used + PX_DEBUG_ALIGN - 1) & ~(size_t)(PX_DEBUG_ALIGN - 1);
  if (at > d->cap || t->nbytes > d->cap - at) {
    d->n--; /* the record is not kept */
    return px_error(PYEXEC_ERR_OUT_OF_MEMORY,
                    "method '%s': the debug buffer (%zu bytes) is full: %s writes a tensor of %zu bytes "
                    "after the %zu bytes used; give a larger debug buffer",
                    m->plan->name, d->cap, what, t->nbytes, d->used);
  }
  memset(d->buf + d->used, 0, at - d->used);
  uint8_t *dst = d->buf + at;
  if (!t->data) {
    memset(dst, 0, t->nbytes);
  } else if (t->contiguous) {
    memcpy(dst, t->data, t->nbytes);
  } else {
    px_tensor rm = *t;
    for (int k = 0; k < rm.dim; k++) rm.dim_order[k] = (uint8_t)k;
    rm.contiguous = 1;
    px_tensor_update_layout(&rm);
    rm.data = dst;
    if (px_copy_strided(&m->ctx, &rm, t)) {
      d->n--;
      return px_error(PYEXEC_ERR_EXECUTION, "method '%s': cannot copy %s's tensor into the debug buffer: %s",
                      m->plan->name, what, m->msg);
    }
  }
  r->offset = (int64_t)at;
  d->used = at + t->nbytes;
  return PYEXEC_OK;
}

/* Records value v (nothing for a kind the ETDump has no entry for: None, a
 * string, an int list...). */
static pyexec_status record(pyexec_method *m, long ev, int32_t output, const px_value *v, const char *what) {
  px_debug *d = m->debug;
  const px_profile *p = m->ctx.prof;
  if (v->tag != PX_V_TENSOR && v->tag != PX_V_TENSOR_LIST && v->tag != PX_V_INT && v->tag != PX_V_DOUBLE &&
      v->tag != PX_V_BOOL)
    return PYEXEC_OK;
  if (v->tag == PX_V_TENSOR_LIST)
    for (uint32_t k = 0; k < v->u.tl.n; k++)
      if (!v->u.tl.items[k] || v->u.tl.items[k]->tag != PX_V_TENSOR) return PYEXEC_OK;
  pyexec_debug_value *r = next_record(d);
  if (!r) return px_no_memory("debug values");
  r->event = (int32_t)ev;
  r->run = p ? p->runs - 1 : 0;
  r->output = output;
  switch (v->tag) {
    case PX_V_TENSOR:
      return put_tensor(m, d, v->u.t, r, what);
    case PX_V_INT:
      r->kind = PYEXEC_VALUE_INT;
      r->int_value = v->u.i;
      return PYEXEC_OK;
    case PX_V_DOUBLE:
      r->kind = PYEXEC_VALUE_DOUBLE;
      r->double_value = v->u.d;
      return PYEXEC_OK;
    case PX_V_BOOL:
      r->kind = PYEXEC_VALUE_BOOL;
      r->int_value = v->u.b ? 1 : 0;
      return PYEXEC_OK;
    default: { /* a tensor list: its header, then its tensors */
      const size_t head = d->n - 1;
      r->kind = PYEXEC_VALUE_OTHER;
      r->count = (int32_t)v->u.tl.n;
      for (uint32_t k = 0; k < v->u.tl.n; k++) {
        pyexec_debug_value *it = next_record(d);
        if (!it) {
          d->n = head;
          return px_no_memory("debug values");
        }
        it->event = (int32_t)ev;
        it->run = d->v[head].run;
        it->output = output;
        it->in_list = 1;
        pyexec_status st = put_tensor(m, d, v->u.tl.items[k]->u.t, it, what);
        if (st) {
          d->n = head; /* the list is kept whole or not at all */
          return st;
        }
      }
      return PYEXEC_OK;
    }
  }
}

/* Ops ExecuTorch registers in register_prim_ops.cpp, whose wrappers log nothing. */
static bool unlogged_op(const char *op) {
  return !strncmp(op, "executorch_prim::", 17) || !strncmp(op, "aten::sym_", 10) ||
         !strcmp(op, "aten::_local_scalar_dense");
}

/* The index of the first argument after '|' in the kernel's signature
 * (the values it writes), or nargs when it has none. */
static uint32_t first_written(const px_instr *in) {
  uint32_t k = 0;
  for (const char *c = in->sig ? in->sig : ""; *c; c++) {
    if (*c == '@') continue;
    if (*c == '|') return k;
    k++;
  }
  return in->nargs;
}

/* Whether kernel argument j is one ExecuTorch logs: a value the kernel
 * writes (after '|' in its signature, or an out= argument passed again
 * there as the return), not logged before it in this call (logged[k] says
 * which were), and not a tensor list of tensors all logged already (a
 * tuple return of the out= tensors). */
static bool logged_kernel_arg(const px_instr *in, uint32_t bar, const bool *logged, uint32_t j) {
  const px_value *v = in->args[j];
  bool written = j >= bar;
  for (uint32_t k = j + 1 > bar ? j + 1 : bar; k < in->nargs && !written; k++) written = in->args[k] == v;
  if (!written) return false;
  for (uint32_t k = 0; k < j; k++)
    if (logged[k] && in->args[k] == v) return false;
  if (v->tag == PX_V_TENSOR_LIST && v->u.tl.n) {
    for (uint32_t i = 0; i < v->u.tl.n; i++) {
      bool seen = false;
      for (uint32_t k = 0; k < j && !seen; k++) seen = logged[k] && in->args[k] == v->u.tl.items[i];
      if (!seen) return true;
    }
    return false;
  }
  return true;
}

pyexec_status px_debug_instruction(pyexec_method *m, long ev, uint32_t chain, uint32_t pc, const px_instr *in) {
  if (ev < 0) return PYEXEC_OK; /* its event was dropped (the profile's limit) */
  char what[160];
  if (in->kind == INSTR_DELEGATE) {
    snprintf(what, sizeof what, "instruction %u of chain %u (delegate %s)", pc, chain, m->delegates[in->a].id);
    for (uint32_t j = 0; j < in->nargs; j++) {
      pyexec_status st = record(m, ev, -1, in->args[j], what);
      if (st) return st;
    }
    return PYEXEC_OK;
  }
  if ((in->kind != INSTR_KERNEL && in->kind != INSTR_NOP) || !in->op || unlogged_op(in->op)) return PYEXEC_OK;
  snprintf(what, sizeof what, "instruction %u of chain %u (%s)", pc, chain, in->op);
  bool few[32];
  bool *logged = in->nargs <= 32 ? few : calloc(in->nargs, sizeof *logged);
  if (!logged) return px_no_memory("debug values");
  const uint32_t bar = first_written(in);
  pyexec_status st = PYEXEC_OK;
  for (uint32_t j = 0; j < in->nargs && !st; j++) {
    logged[j] = logged_kernel_arg(in, bar, logged, j);
    if (logged[j]) st = record(m, ev, -1, in->args[j], what);
  }
  if (logged != few) free(logged);
  return st;
}

pyexec_status px_debug_outputs(pyexec_method *m) {
  char what[64];
  for (uint32_t i = 0; i < m->nout; i++) {
    snprintf(what, sizeof what, "output %u", i);
    pyexec_status st = record(m, -1, (int32_t)i, &m->values[m->outs[i].vidx], what);
    if (st) return st;
  }
  return PYEXEC_OK;
}

void px_debug_free(px_debug *d) {
  if (!d) return;
  free(d->buf);
  free(d->v);
  free(d);
}

/* ---- the public entry points (pyexec.h) ------------------------------------ */

pyexec_status px_method_profile_set_debug_buffer(pyexec_method *m, size_t nbytes) {
  if (!m) return px_invalid_argument("method is NULL");
  px_debug *d = NULL;
  if (nbytes) {
    d = calloc(1, sizeof *d);
    /* Rounded up so that aligned_alloc takes it; only nbytes are used. */
    size_t alloc = (nbytes + PX_DEBUG_ALIGN - 1) & ~(size_t)(PX_DEBUG_ALIGN - 1);
    if (!d || alloc < nbytes || !(d->buf = aligned_alloc(PX_DEBUG_ALIGN, alloc))) {
      free(d);
      return px_error(PYEXEC_ERR_OUT_OF_MEMORY, "out of memory: a debug buffer of %zu bytes", nbytes);
    }
    d->cap = nbytes;
  }
  pthread_mutex_lock(&m->lock);
  px_debug *old = m->debug;
  m->debug = d;
  pthread_mutex_unlock(&m->lock);
  px_debug_free(old);
  return PYEXEC_OK;
}

size_t px_method_profile_debug_count(pyexec_method *m) {
  if (!m) return 0;
  pthread_mutex_lock(&m->lock);
  size_t n = m->debug ? m->debug->n : 0;
  pthread_mutex_unlock(&m->lock);
  return n;
}

pyexec_status px_method_profile_debug_value(pyexec_method *m, size_t index, pyexec_debug_value *out) {
  if (!m || !out) return px_invalid_argument("method or out is NULL");
  pthread_mutex_lock(&m->lock);
  size_t n = m->debug ? m->debug->n : 0;
  if (index < n) *out = m->debug->v[index];
  pthread_mutex_unlock(&m->lock);
  if (index >= n) return px_invalid_argument("debug value %zu out of range (%zu values)", index, n);
  return PYEXEC_OK;
}

pyexec_status px_method_profile_debug_buffer(pyexec_method *m, const void **data, size_t *used) {
  if (!m || !data || !used) return px_invalid_argument("method, data or used is NULL");
  pthread_mutex_lock(&m->lock);
  *data = m->debug ? m->debug->buf : NULL;
  *used = m->debug ? m->debug->used : 0;
  pthread_mutex_unlock(&m->lock);
  return PYEXEC_OK;
}
