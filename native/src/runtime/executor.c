/*
 * executor.c - runs a method's chains: kernel calls, moves, conditional
 * jumps and frees, with a bound on the number of instructions executed so
 * that a malformed program cannot loop forever.
 */
#include "runtime/executor.h"

#include <string.h>

#include "core/error.h"
#include "core/limits.h"
#include "runtime/debug.h"
#include "runtime/memory.h"
#include "runtime/profile.h"

/* A Bool tensor counts as true only when every element is true. */
static bool condition_true(const px_value *v) {
  if (v->tag == PX_V_BOOL) return v->u.b;
  /* A Bool the scalar kernels replaced with an int or double. */
  if (v->tag == PX_V_INT) return v->u.i != 0;
  if (v->tag == PX_V_DOUBLE) return v->u.d != 0.0;
  const px_tensor *t = v->u.t;
  for (int64_t k = 0; k < t->numel; k++)
    if (px_load_d(t->data, t->dtype, k) == 0.0) return false;
  return true;
}

static pyexec_status prepare_outputs(pyexec_method *m) {
  for (uint32_t i = 0; i < m->nout; i++) {
    px_output *o = &m->outs[i];
    px_value *v = &m->values[o->vidx];
    if (v->tag != PX_V_TENSOR || v->u.t->mem != PX_MEM_UNPLANNED || o->alias_input >= 0) continue;
    if (o->bound)
      v->u.t->data = o->bound; /* re-applied: a view or move may have redirected it */
    else if (!v->u.t->data || v->u.t->data != o->own) {
      pyexec_status st = px_output_ensure_storage(m, o);
      if (st) return st;
    }
  }
  return PYEXEC_OK;
}

/* Calls a kernel that only handles row-major tensors with row-major copies
 * of its non-row-major tensor arguments (channels-last and other dim
 * orders), copying the values it writes back into their own layout. */
static int call_relayout(pyexec_method *m, const px_instr *in) {
  px_ctx *ctx = &m->ctx;
  px_value *vals = px_scratch(ctx, sizeof(px_value) * in->nargs);
  px_value **argv = px_scratch(ctx, sizeof(px_value *) * in->nargs);
  px_tensor *tmps = px_scratch(ctx, sizeof(px_tensor) * in->nargs);
  if (!vals || !argv || !tmps) return PYEXEC_ERR_EXECUTION;
  for (uint32_t j = 0; j < in->nargs; j++) {
    px_value *v = in->args[j];
    argv[j] = v;
    if (v->tag != PX_V_TENSOR || v->u.t->contiguous) continue;
    uint32_t same = j;
    for (uint32_t k = 0; k < j; k++)
      if (in->args[k] == v) same = k; /* an in-place argument appears twice: one copy */
    if (same != j) {
      argv[j] = argv[same];
      continue;
    }
    const px_tensor *t = v->u.t;
    px_tensor *r = &tmps[j];
    *r = *t;
    for (int d = 0; d < r->dim; d++) r->dim_order[d] = (uint8_t)d;
    r->contiguous = 1;
    px_tensor_update_layout(r);
    r->data = px_scratch(ctx, t->capacity ? t->capacity : 1);
    if (!r->data) return PYEXEC_ERR_EXECUTION;
    if (t->data && t->numel && px_copy_strided(ctx, r, t)) return PYEXEC_ERR_EXECUTION;
    vals[j] = *v;
    vals[j].u.t = r;
    argv[j] = &vals[j];
  }
  int rc = in->fn(ctx, argv);
  if (rc) return rc;
  for (uint32_t j = 0; j < in->nargs; j++) {
    px_value *v = in->args[j];
    if (argv[j] != &vals[j] || !m->written[v - m->values]) continue;
    px_tensor *t = v->u.t;
    const px_tensor *r = &tmps[j];
    if (px_resize(ctx, t, r->dim, r->sizes) || (t->numel && px_copy_strided(ctx, t, r)))
      return PYEXEC_ERR_EXECUTION;
  }
  return 0;
}

/* Opens the event of instruction `pc` of chain `c`: its name and the
 * shapes of the values it reads (schema arguments of a kernel, the
 * arguments a delegate does not write), then the start time. */
static long profile_begin(pyexec_method *m, uint32_t c, uint32_t pc, const px_instr *in) {
  px_profile *p = m->ctx.prof;
  p->chain = (int32_t)c;
  if (in->kind == INSTR_DELEGATE) {
    const px_delegate *del = &m->delegates[in->a];
    long ev = px_profile_begin(p, "delegate:", del->id, 0, (int)pc);
    for (uint32_t j = 0; j < in->nargs; j++)
      if (!del->backend->writes_arg(del->handle, j)) px_profile_value(p, ev, in->args[j]);
    px_profile_start(p, ev);
    return ev;
  }
  /* Folded at load, nothing runs; with a debug buffer, an event still
   * carries the value the folded kernel left (a view). */
  const bool kernel = in->kind == INSTR_KERNEL || (in->kind == INSTR_NOP && m->debug && in->op);
  if (!kernel && in->kind != INSTR_MOVE && in->kind != INSTR_JUMP_FALSE) return -1;
  long ev = px_profile_begin(p, "",
                             kernel ? in->op
                             : in->kind == INSTR_MOVE ? "(move)"
                                                      : "(jump_false)",
                             0, (int)pc);
  if (kernel) {
    const char *sig = in->sig ? in->sig : "";
    if (*sig == '@') sig++;
    const char *bar = strchr(sig, '|');
    uint32_t nin = bar ? (uint32_t)(bar - sig) : in->nargs;
    for (uint32_t j = 0; j < nin && j < in->nargs; j++) {
      bool written = false; /* an out= argument: also among the returns */
      for (uint32_t k = nin; k < in->nargs; k++) written |= in->args[k] == in->args[j];
      if (!written) px_profile_value(p, ev, in->args[j]);
    }
  }
  px_profile_start(p, ev);
  return ev;
}

/* The instruction loop. `profiled` is a constant at each of the two call
 * sites, so the loop without profiling has no profiling code in it. A
 * profiled run with a debug buffer runs the unfused chains, when fusion
 * changed any, and records what each instruction wrote (runtime/debug.h). */
static inline __attribute__((always_inline)) pyexec_status run_chains(pyexec_method *m, const bool profiled) {
  long steps = 0;
  const bool debug = profiled && m->debug;
  const px_chain *chains = debug && m->plain_chains ? m->plain_chains : m->chains;
  for (uint32_t c = 0; c < m->nchains; c++) {
    const px_chain *ch = &chains[c];
    uint32_t pc = 0;
    while (pc < ch->n) {
      if (++steps > px_max_steps)
        return px_error(PYEXEC_ERR_EXECUTION, "method '%s' ran more than %ld instructions; stopped",
                        m->plan->name, px_max_steps);
      const px_instr *in = &ch->instrs[pc];
      long ev = profiled ? profile_begin(m, c, pc, in) : -1;
      switch (in->kind) {
        case INSTR_KERNEL: {
          m->ctx.op = in->op;
          m->ctx.scratch_cur = m->ctx.scratch;
          m->ctx.scratch_used = 0;
          m->msg[0] = 0;
          int rc = in->relayout ? call_relayout(m, in) : in->fn(&m->ctx, in->args);
          if (profiled) px_profile_end(m->ctx.prof, ev);
          if (rc != 0)
            return px_error(PYEXEC_ERR_EXECUTION, "method '%s' instruction %u: %s", m->plan->name, pc,
                            m->msg[0] ? m->msg : in->op);
          if (debug) {
            pyexec_status st = px_debug_instruction(m, ev, c, pc, in);
            if (st) return st;
          }
          pc++;
          break;
        }
        case INSTR_DELEGATE: {
          const px_delegate *del = &m->delegates[in->a];
          m->ctx.op = in->op;
          m->ctx.scratch_cur = m->ctx.scratch;
          m->ctx.scratch_used = 0;
          m->msg[0] = 0;
          int rc = del->backend->execute(&m->ctx, del->handle, in->args, in->nargs);
          if (profiled) px_profile_end(m->ctx.prof, ev);
          if (rc != 0)
            return px_error(PYEXEC_ERR_EXECUTION, "method '%s' instruction %u: delegate %s: %s", m->plan->name,
                            pc, del->id, m->msg[0] ? m->msg : "failed");
          if (debug) {
            pyexec_status st = px_debug_instruction(m, ev, c, pc, in);
            if (st) return st;
          }
          pc++;
          break;
        }
        case INSTR_MOVE:
          m->values[in->b] = m->values[in->a];
          if (profiled) px_profile_end(m->ctx.prof, ev);
          pc++;
          break;
        case INSTR_JUMP_FALSE:
          pc = condition_true(&m->values[in->a]) ? pc + 1 : (uint32_t)in->b;
          if (profiled) px_profile_end(m->ctx.prof, ev);
          break;
        default: /* NOP (folded at load), or FREE: only emitted for unbounded tensors, refused at load */
          if (profiled) px_profile_end(m->ctx.prof, ev);
          if (debug && in->kind == INSTR_NOP) {
            pyexec_status st = px_debug_instruction(m, ev, c, pc, in);
            if (st) return st;
          }
          pc++;
          break;
      }
    }
  }
  return PYEXEC_OK;
}

/* A bound output whose tensor was redirected (a view of another tensor)
 * still gets its data in the caller's buffer. */
static void finish_outputs(pyexec_method *m) {
  for (uint32_t i = 0; i < m->nout; i++) {
    px_output *o = &m->outs[i];
    px_value *v = &m->values[o->vidx];
    if (o->bound && v->tag == PX_V_TENSOR && v->u.t->data != o->bound && v->u.t->data) {
      memmove(o->bound, v->u.t->data, v->u.t->nbytes);
      v->u.t->data = o->bound;
    }
  }
}

pyexec_status px_executor_run(pyexec_method *m) {
  for (uint32_t j = 0; j < m->nin; j++)
    if (!m->input_set[j]) return px_invalid_argument("input %u has not been set", j);
  /* Planned inputs this run's values overwrite are restored, unless they
   * were just installed. */
  if (!m->inputs_fresh)
    for (uint32_t j = 0; j < m->nin; j++)
      if (m->in_restore[j]) {
        px_tensor *t = m->values[m->inputs[j]].u.t;
        if (t->nbytes) memcpy(t->data, m->in_stage[j], t->nbytes);
      }
  m->inputs_fresh = false;
  pyexec_status st = prepare_outputs(m);
  if (st) return st;
  if (m->ctx.prof) {
    px_profile_run_begin(m->ctx.prof);
    st = run_chains(m, true);
    px_profile_run_end(m->ctx.prof);
    if (st) return st;
    finish_outputs(m);
    return m->debug ? px_debug_outputs(m) : PYEXEC_OK;
  }
  st = run_chains(m, false);
  if (st) return st;
  finish_outputs(m);
  return PYEXEC_OK;
}

