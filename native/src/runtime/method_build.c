/*
 * method_build.c - building a method from its execution plan (values,
 * planned arenas, constants, decoded and checked instructions), and freeing
 * it. Its IO (inputs, outputs, runs) is method_io.c; running its
 * instructions is executor.c.
 */
#include "runtime/method.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/pcache.h"
#include "kernels/registry.h"
#include "runtime/debug.h"
#include "runtime/memory.h"
#include "runtime/profile.h"

#define BAD(...) px_invalid_program(__VA_ARGS__)

#define ALLOC_OR_FAIL(ptr, count, what)                               \
  do {                                                                \
    (ptr) = px_method_alloc(m, (count), sizeof *(ptr));               \
    if (!(ptr)) return px_no_memory(what);                            \
  } while (0)

/* ---- values ------------------------------------------------------------ */

static pyexec_status build_tensor(pyexec_method *m, int64_t vidx, const px_fb_table *payload, px_tensor *t) {
  char where[48];
  snprintf(where, sizeof where, "value %lld", (long long)vidx);
  px_tensor_desc d;
  pyexec_status st = px_parse_tensor(m->program, payload, where, &d);
  if (st) return st;
  t->dtype = (int8_t)d.dtype;
  t->dim = d.dim;
  t->dynamic = d.dynamic;
  t->contiguous = d.contiguous;
  memcpy(t->sizes, d.sizes, sizeof(int64_t) * (size_t)d.dim);
  memcpy(t->max_sizes, d.sizes, sizeof(int64_t) * (size_t)d.dim);
  memcpy(t->dim_order, d.dim_order, (size_t)d.dim);
  px_tensor_update_layout(t);
  t->capacity = t->nbytes;
  t->cap_numel = t->numel;
  size_t es = px_elsize(d.dtype);
  const uint8_t *ext = NULL; /* an external tensor's bytes, in the data file */
  if (d.external && (st = px_program_external_tensor(m->program, &d, where, &ext))) return st;
  if (d.has_alloc) {
    if (d.memory_id == 0 || d.memory_id >= m->narenas)
      return BAD("%s: memory_id %u is out of range (%u planned buffers)", where, d.memory_id,
                 m->narenas ? m->narenas - 1 : 0);
    size_t cap = m->arena_sizes[d.memory_id];
    if (d.offset > cap || d.nbytes > cap - d.offset)
      return BAD("%s: %zu bytes at offset %llu lie outside planned buffer %u (%zu bytes)", where, d.nbytes,
                 (unsigned long long)d.offset, d.memory_id, cap);
    if (d.offset % es) return BAD("%s: planned offset %llu is not aligned to its element size", where,
                                  (unsigned long long)d.offset);
    t->data = m->arenas[d.memory_id] + d.offset;
    t->mem = PX_MEM_PLANNED;
    if (ext) { /* a mutable external tensor starts as the data file's bytes */
      if (d.nbytes) memcpy(t->data, ext, d.nbytes);
    } else if (d.data_buffer_idx) { /* planned with initial state (mutable buffer) */
      const uint8_t *init;
      st = px_program_mutable_init(m->program, d.data_buffer_idx, d.nbytes, &init);
      if (st) return st;
      if (d.nbytes) memcpy(t->data, init, d.nbytes);
    }
  } else if (ext) { /* zero-copy: tensors with one name share the data file's bytes */
    t->data = (void *)ext;
    t->mem = PX_MEM_CONST;
  } else if (d.data_buffer_idx) {
    const uint8_t *c;
    st = px_program_constant(m->program, d.data_buffer_idx, d.nbytes, es, &c);
    if (st) return st;
    t->data = (void *)c; /* read-only: kernels never write constants */
    t->mem = PX_MEM_CONST;
  } else {
    t->data = NULL;
    t->mem = PX_MEM_UNPLANNED;
  }
  return PYEXEC_OK;
}

static pyexec_status build_values(pyexec_method *m) {
  px_fb_vec values;
  if (!px_fb_vector(&m->plan->table, PLAN_VALUES, 4, &values)) return BAD("values are malformed");
  m->nvalues = values.count;
  ALLOC_OR_FAIL(m->values, m->nvalues ? m->nvalues : 1, "values");
  ALLOC_OR_FAIL(m->written, m->nvalues ? m->nvalues : 1, "values");
  for (uint32_t i = 0; i < m->nvalues; i++) {
    int tag;
    px_fb_table pl;
    pyexec_status st = px_plan_value(m->program, m->plan, i, &tag, &pl);
    if (st) return st;
    px_value *v = &m->values[i];
    v->tag = (uint8_t)tag;
    bool ok = true;
    switch (tag) {
      case PX_V_NONE: break;
      case PX_V_INT: ok = px_fb_i64(&pl, 0, 0, &v->u.i); break;
      case PX_V_DOUBLE: ok = px_fb_f64(&pl, 0, 0, &v->u.d); break;
      case PX_V_BOOL: {
        uint8_t b;
        ok = px_fb_u8(&pl, 0, 0, &b);
        v->u.b = b != 0;
        break;
      }
      case PX_V_STRING: ok = px_fb_string(&pl, 0, &v->u.str.p, &v->u.str.n); break;
      case PX_V_TENSOR: {
        px_tensor *t;
        ALLOC_OR_FAIL(t, 1, "tensor");
        st = build_tensor(m, i, &pl, t);
        if (st) return st;
        v->u.t = t;
        break;
      }
      case PX_V_INT_LIST: {
        px_fb_vec items;
        if (!(ok = px_fb_vector(&pl, 0, 8, &items))) break;
        v->u.il.n = items.count;
        ALLOC_OR_FAIL(v->u.il.items, items.count + 1, "int list");
        ALLOC_OR_FAIL(v->u.il.vals, items.count + 1, "int list");
        for (uint32_t k = 0; k < items.count; k++) {
          int64_t r = px_fb_vec_i64(&items, k);
          if (r < 0 || r >= m->nvalues)
            return BAD("value %u: int list item %u refers to value %lld, out of range", i, k, (long long)r);
          v->u.il.items[k] = &m->values[r]; /* checked to be an Int below */
        }
        break;
      }
      case PX_V_DOUBLE_LIST: {
        px_fb_vec items;
        double *vals;
        if (!(ok = px_fb_vector(&pl, 0, 8, &items))) break;
        ALLOC_OR_FAIL(vals, items.count + 1, "double list");
        for (uint32_t k = 0; k < items.count; k++) vals[k] = px_fb_vec_f64(&items, k);
        v->u.dl.vals = vals;
        v->u.dl.n = items.count;
        break;
      }
      case PX_V_BOOL_LIST: {
        px_fb_vec items;
        bool *vals;
        if (!(ok = px_fb_vector(&pl, 0, 1, &items))) break;
        ALLOC_OR_FAIL(vals, items.count + 1, "bool list");
        for (uint32_t k = 0; k < items.count; k++) vals[k] = px_fb_vec_u8(&items, k) != 0;
        v->u.bl.vals = vals;
        v->u.bl.n = items.count;
        break;
      }
      case PX_V_TENSOR_LIST:
      case PX_V_OPT_TENSOR_LIST: {
        px_fb_vec items;
        if (!(ok = px_fb_vector(&pl, 0, 4, &items))) break;
        v->u.tl.n = items.count;
        ALLOC_OR_FAIL(v->u.tl.items, items.count + 1, "tensor list");
        ALLOC_OR_FAIL(v->u.tl.ts, items.count + 1, "tensor list");
        for (uint32_t k = 0; k < items.count; k++) {
          int32_t r = px_fb_vec_i32(&items, k);
          if (r == -1 && tag == PX_V_OPT_TENSOR_LIST) continue; /* None */
          if (r < 0 || (uint32_t)r >= m->nvalues)
            return BAD("value %u: tensor list item %u refers to value %d, out of range", i, k, r);
          v->u.tl.items[k] = &m->values[r];
        }
        break;
      }
      default: return BAD("value %u has unsupported type %d", i, tag);
    }
    if (!ok) return BAD("value %u is malformed", i);
  }
  /* List items must be of the element kind the list promises. */
  for (uint32_t i = 0; i < m->nvalues; i++) {
    px_value *v = &m->values[i];
    if (v->tag == PX_V_INT_LIST) {
      for (uint32_t k = 0; k < v->u.il.n; k++)
        if (v->u.il.items[k]->tag != PX_V_INT) return BAD("value %u: int list item %u is not an int", i, k);
    } else if (v->tag == PX_V_TENSOR_LIST || v->tag == PX_V_OPT_TENSOR_LIST) {
      for (uint32_t k = 0; k < v->u.tl.n; k++) {
        px_value *it = v->u.tl.items[k];
        if (it && it->tag != PX_V_TENSOR && !(it->tag == PX_V_NONE && v->tag == PX_V_OPT_TENSOR_LIST))
          return BAD("value %u: tensor list item %u is not a tensor", i, k);
      }
    }
  }
  return PYEXEC_OK;
}

static pyexec_status build_arenas(pyexec_method *m) {
  px_fb_vec sizes;
  if (!px_fb_vector(&m->plan->table, PLAN_BUFFER_SIZES, 8, &sizes)) return BAD("non_const_buffer_sizes is malformed");
  m->narenas = sizes.count;
  ALLOC_OR_FAIL(m->arenas, sizes.count + 1, "arenas");
  ALLOC_OR_FAIL(m->arena_sizes, sizes.count + 1, "arenas");
  ALLOC_OR_FAIL(m->arena_mapped, sizes.count + 1, "arenas");
  for (uint32_t i = 1; i < sizes.count; i++) {
    int64_t n = px_fb_vec_i64(&sizes, i);
    if (n < 0 || (uint64_t)n > px_max_declared_bytes)
      return BAD("planned buffer %u has an invalid size %lld (the limit is %llu bytes)", i, (long long)n,
                 (unsigned long long)px_max_declared_bytes);
    m->arena_sizes[i] = (size_t)n;
    m->arenas[i] = px_big_alloc((size_t)n, &m->arena_mapped[i]);
    if (!m->arenas[i]) {
      m->arena_sizes[i] = 0;
      return px_error(PYEXEC_ERR_OUT_OF_MEMORY, "out of memory: planned buffer %u needs %lld bytes", i,
                      (long long)n);
    }
    m->planned_total += (size_t)n;
  }
  return PYEXEC_OK;
}

/* ---- instructions ------------------------------------------------------ */

static bool sig_accepts(char c, const px_value *v) {
  int t = v->tag;
  switch (c) {
    case 'T': return t == PX_V_TENSOR;
    case 't': return t == PX_V_TENSOR || t == PX_V_NONE;
    case 'S': return t == PX_V_INT || t == PX_V_DOUBLE || t == PX_V_BOOL;
    case 's': return t == PX_V_INT || t == PX_V_DOUBLE || t == PX_V_BOOL || t == PX_V_NONE;
    case 'I': return t == PX_V_INT;
    case 'i': return t == PX_V_INT || t == PX_V_NONE;
    case 'D': return t == PX_V_DOUBLE || t == PX_V_INT;
    case 'd': return t == PX_V_DOUBLE || t == PX_V_INT || t == PX_V_NONE;
    case 'B': return t == PX_V_BOOL;
    case 'b': return t == PX_V_BOOL || t == PX_V_NONE;
    case 'L': return t == PX_V_INT_LIST;
    case 'l': return t == PX_V_INT_LIST || t == PX_V_NONE;
    case 'F': return t == PX_V_DOUBLE_LIST;
    case 'f': return t == PX_V_DOUBLE_LIST || t == PX_V_NONE;
    case 'Q': return t == PX_V_BOOL_LIST;
    case 'X': return t == PX_V_TENSOR_LIST;
    case 'Y': return t == PX_V_TENSOR_LIST || t == PX_V_OPT_TENSOR_LIST;
    case 'R': return t == PX_V_STRING;
    case 'r': return t == PX_V_STRING || t == PX_V_NONE;
    case '*': return true;
    default: return false;
  }
}

static void mark_written(pyexec_method *m, px_value *v) {
  m->written[v - m->values] = true;
  if (v->tag == PX_V_TENSOR_LIST || v->tag == PX_V_OPT_TENSOR_LIST)
    for (uint32_t k = 0; k < v->u.tl.n; k++)
      if (v->u.tl.items[k]) m->written[v->u.tl.items[k] - m->values] = true;
}

/* Resolves every operator to a kernel; lists all missing ones at once. */
static pyexec_status resolve_operators(pyexec_method *m, const px_kernel_def ***kernels, char ***names,
                                       uint32_t *nops) {
  px_fb_vec ops;
  if (!px_fb_vector(&m->plan->table, PLAN_OPERATORS, 4, &ops)) return BAD("operators are malformed");
  *nops = ops.count;
  ALLOC_OR_FAIL(*kernels, ops.count + 1, "operators");
  ALLOC_OR_FAIL(*names, ops.count + 1, "operators");
  size_t missing = 0;
  for (uint32_t i = 0; i < ops.count; i++) {
    char buf[512];
    pyexec_status st = px_plan_operator_name(m->plan, i, buf, sizeof buf);
    if (st) return st;
    ALLOC_OR_FAIL((*names)[i], strlen(buf) + 1, "operator name");
    memcpy((*names)[i], buf, strlen(buf) + 1);
    (*kernels)[i] = px_kernel_find(buf);
    if (!(*kernels)[i]) missing++;
  }
  if (!missing) return PYEXEC_OK;
  size_t cap;
  char *msg = px_error_buffer(&cap);
  size_t n = (size_t)snprintf(msg, cap, "method '%s' uses %zu operator%s this library has no kernel for: ",
                              m->plan->name, missing, missing == 1 ? "" : "s");
  bool first = true;
  for (uint32_t i = 0; i < ops.count && n < cap; i++) {
    if ((*kernels)[i]) continue;
    bool dup = false;
    for (uint32_t j = 0; j < i; j++)
      if (!(*kernels)[j] && strcmp((*names)[j], (*names)[i]) == 0) dup = true;
    if (dup) continue;
    n += (size_t)snprintf(msg + n, cap - n, "%s%s", first ? "" : ", ", (*names)[i]);
    first = false;
  }
  return PYEXEC_ERR_UNSUPPORTED;
}

static pyexec_status check_value_index(pyexec_method *m, int32_t v, uint32_t c, uint32_t i, const char *what);

static pyexec_status named_data_get(const void *owner, const char *key, size_t key_len, const uint8_t **data,
                                    size_t *size) {
  return px_program_named_data(owner, key, key_len, data, size);
}

/* Initialises every delegate of the plan once (backends/backend.h); an id
 * no registered backend has is refused, naming it. */
static pyexec_status build_delegates(pyexec_method *m) {
  uint32_t n;
  pyexec_status st = px_plan_delegate_count(m->plan, &n);
  if (st) return st;
  ALLOC_OR_FAIL(m->delegates, n + 1, "delegates");
  px_named_data named = {m->program, named_data_get};
  for (uint32_t i = 0; i < n; i++) {
    px_delegate_desc d;
    if ((st = px_plan_delegate(m->program, m->plan, i, &d))) return st;
    px_delegate *del = &m->delegates[i];
    int shown = (int)(d.id_len > 63 ? 63 : d.id_len);
    snprintf(del->id, sizeof del->id, "%.*s", shown, d.id);
    del->backend = px_backend_find(d.id, d.id_len);
    if (!del->backend)
      return px_unsupported("method '%s' calls delegate '%s' (DelegateCall); this library has no backend "
                            "with that id (it has: XnnpackBackend)",
                            m->plan->name, del->id);
    px_compile_spec *specs;
    ALLOC_OR_FAIL(specs, d.specs.count + 1, "compile specs");
    for (uint32_t k = 0; k < d.specs.count; k++)
      if ((st = px_program_compile_spec(&d, k, &specs[k].key, &specs[k].key_len, &specs[k].value,
                                        &specs[k].value_len)))
        return st;
    m->ctx.op = del->id;
    m->msg[0] = 0;
    st = del->backend->init(&m->ctx, d.data, d.size, specs, d.specs.count, &named, &del->handle);
    m->ndelegates = i + 1; /* destroyed with the method from here on */
    if (st) {
      if (st == PYEXEC_ERR_INVALID_PROGRAM || st == PYEXEC_ERR_UNSUPPORTED) {
        size_t cap;
        char *buf = px_error_buffer(&cap);
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", buf);
        snprintf(buf, cap, "delegate %u (%s): %s", i, del->id, tmp);
      }
      return st;
    }
  }
  return PYEXEC_OK;
}

static pyexec_status build_delegate_call(pyexec_method *m, const px_fb_table *args, px_instr *ins, uint32_t c,
                                         uint32_t i) {
  int32_t di;
  px_fb_vec a;
  if (!px_fb_i32(args, 0, 0, &di) || !px_fb_vector(args, 1, 4, &a))
    return BAD("chain %u instruction %u: delegate call is malformed", c, i);
  if (di < 0 || (uint32_t)di >= m->ndelegates)
    return BAD("chain %u instruction %u: delegate index %d is out of range (%u delegates)", c, i, di,
               m->ndelegates);
  const px_delegate *del = &m->delegates[di];
  ins->a = di;
  ins->op = del->id;
  ins->nargs = a.count;
  ALLOC_OR_FAIL(ins->args, a.count + 1, "instruction arguments");
  /* Every argument goes to the backend, whatever its type (ExecuTorch
   * passes ints, SymInts, bools, lists and None among the tensors); the
   * backend's check_call refuses those it cannot take. */
  for (uint32_t j = 0; j < a.count; j++) {
    int32_t v = px_fb_vec_i32(&a, j);
    pyexec_status st = check_value_index(m, v, c, i, "argument");
    if (st) return st;
    ins->args[j] = &m->values[v];
  }
  if (del->backend->check_call) {
    pyexec_status st = del->backend->check_call(del->handle, ins->args, a.count);
    if (st) {
      size_t cap;
      char *buf = px_error_buffer(&cap);
      char tmp[1024];
      snprintf(tmp, sizeof tmp, "%s", buf);
      snprintf(buf, cap, "chain %u instruction %u: delegate %s: %s", c, i, del->id, tmp);
      return st;
    }
  }
  for (uint32_t j = 0; j < a.count; j++)
    if (del->backend->writes_arg(del->handle, j)) mark_written(m, ins->args[j]);
  return PYEXEC_OK;
}

static pyexec_status check_value_index(pyexec_method *m, int32_t v, uint32_t c, uint32_t i, const char *what) {
  if (v < 0 || (uint32_t)v >= m->nvalues)
    return BAD("chain %u instruction %u: %s value %d is out of range (%u values)", c, i, what, v, m->nvalues);
  return PYEXEC_OK;
}

static pyexec_status build_kernel_call(pyexec_method *m, const px_fb_table *args, px_instr *ins, uint32_t c,
                                       uint32_t i, const px_kernel_def **kernels, char **names, uint32_t nops) {
  int32_t opi;
  px_fb_vec a;
  if (!px_fb_i32(args, 0, 0, &opi) || !px_fb_vector(args, 1, 4, &a))
    return BAD("chain %u instruction %u: kernel call is malformed", c, i);
  if (opi < 0 || (uint32_t)opi >= nops)
    return BAD("chain %u instruction %u: operator index %d is out of range (%u operators)", c, i, opi, nops);
  const px_kernel_def *k = kernels[opi];
  ins->fn = k->fn;
  ins->op = names[opi];
  ins->nargs = a.count;
  ALLOC_OR_FAIL(ins->args, a.count + 1, "instruction arguments");
  for (uint32_t j = 0; j < a.count; j++) {
    int32_t v = px_fb_vec_i32(&a, j);
    pyexec_status st = check_value_index(m, v, c, i, "argument");
    if (st) return st;
    ins->args[j] = &m->values[v];
  }
  /* Check the argument kinds against the kernel's signature once, here. A
   * leading '@' says the kernel handles any dim_order itself. */
  const char *sig = k->sig;
  bool any_layout = *sig == '@';
  ins->sig = sig;
  ins->any_layout = any_layout;
  if (any_layout) sig++;
  uint32_t want = 0;
  for (const char *s = sig; *s; s++)
    if (*s != '|') want++;
  if (want != a.count)
    return BAD("chain %u instruction %u: %s takes %u arguments, the program passes %u", c, i, ins->op, want,
               a.count);
  bool returns = false;
  uint32_t j = 0;
  for (const char *s = sig; *s; s++) {
    if (*s == '|') {
      returns = true;
      continue;
    }
    px_value *v = ins->args[j];
    if (!sig_accepts(*s, v))
      return BAD("chain %u instruction %u: %s argument %u is %s, which the kernel does not accept ('%c')", c,
                 i, ins->op, j, px_value_type_name(v->tag), *s);
    /* A scalar kernel ('*' return) stores a new int, double or bool, tag
     * included, into its return value: only a scalar slot may receive it,
     * or a tensor or list value would turn into a number under the kernels
     * checked against its kind here. */
    if (returns && *s == '*' && v->tag != PX_V_INT && v->tag != PX_V_DOUBLE && v->tag != PX_V_BOOL)
      return BAD("chain %u instruction %u: %s returns a scalar into value %d, a %s", c, i, ins->op,
                 (int)(v - m->values), px_value_type_name(v->tag));
    if (returns) mark_written(m, v);
    if (!any_layout && v->tag == PX_V_TENSOR && !v->u.t->contiguous) ins->relayout = true;
    j++;
  }
  return PYEXEC_OK;
}

static pyexec_status build_chains(pyexec_method *m) {
  const px_kernel_def **kernels = NULL;
  char **names = NULL;
  uint32_t nops = 0;
  pyexec_status st = resolve_operators(m, &kernels, &names, &nops);
  if (st) return st;
  px_fb_vec chains;
  if (!px_fb_vector(&m->plan->table, PLAN_CHAINS, 4, &chains)) return BAD("chains are malformed");
  m->nchains = chains.count;
  ALLOC_OR_FAIL(m->chains, chains.count + 1, "chains");
  for (uint32_t c = 0; c < chains.count; c++) {
    px_fb_table chain;
    px_fb_vec instrs;
    if (!px_fb_vec_table(&chains, c, &chain) || !px_fb_vector(&chain, CHAIN_INSTRUCTIONS, 4, &instrs))
      return BAD("chain %u is malformed", c);
    px_chain *ch = &m->chains[c];
    ch->n = instrs.count;
    ALLOC_OR_FAIL(ch->instrs, instrs.count + 1, "instructions");
    for (uint32_t i = 0; i < instrs.count; i++) {
      px_fb_table in, args;
      uint8_t type;
      bool present;
      if (!px_fb_vec_table(&instrs, i, &in) || !px_fb_u8(&in, INSTR_ARGS_TYPE, 0, &type) ||
          !px_fb_subtable(&in, INSTR_ARGS, &args, &present) || !present)
        return BAD("chain %u instruction %u is malformed", c, i);
      px_instr *ins = &ch->instrs[i];
      ins->kind = type;
      switch (type) {
        case INSTR_KERNEL:
          st = build_kernel_call(m, &args, ins, c, i, kernels, names, nops);
          break;
        case INSTR_DELEGATE:
          st = build_delegate_call(m, &args, ins, c, i);
          break;
        case INSTR_MOVE:
          if (!px_fb_i32(&args, 0, 0, &ins->a) || !px_fb_i32(&args, 1, 0, &ins->b))
            return BAD("chain %u instruction %u is malformed", c, i);
          if ((st = check_value_index(m, ins->a, c, i, "move source")) ||
              (st = check_value_index(m, ins->b, c, i, "move target")))
            return st;
          if (m->values[ins->a].tag != m->values[ins->b].tag)
            return BAD("chain %u instruction %u: move from a %s to a %s", c, i,
                       px_value_type_name(m->values[ins->a].tag), px_value_type_name(m->values[ins->b].tag));
          m->written[ins->b] = true;
          break;
        case INSTR_JUMP_FALSE:
          if (!px_fb_i32(&args, 0, 0, &ins->a) || !px_fb_i32(&args, 1, 0, &ins->b))
            return BAD("chain %u instruction %u is malformed", c, i);
          if ((st = check_value_index(m, ins->a, c, i, "condition"))) return st;
          if (m->values[ins->a].tag != PX_V_BOOL && m->values[ins->a].tag != PX_V_TENSOR)
            return BAD("chain %u instruction %u: jump condition is a %s", c, i,
                       px_value_type_name(m->values[ins->a].tag));
          if (ins->b < 0 || (uint32_t)ins->b > instrs.count)
            return BAD("chain %u instruction %u: jump destination %d is out of range", c, i, ins->b);
          break;
        case INSTR_FREE:
          if (!px_fb_i32(&args, 0, 0, &ins->a)) return BAD("chain %u instruction %u is malformed", c, i);
          if ((st = check_value_index(m, ins->a, c, i, "freed"))) return st;
          break;
        default: return BAD("chain %u instruction %u has unknown kind %u", c, i, type);
      }
      if (st) return st;
    }
  }
  return PYEXEC_OK;
}

typedef struct byte_range {
  uintptr_t start, end;
} byte_range;

static int by_start(const void *a, const void *b) {
  uintptr_t x = ((const byte_range *)a)->start, y = ((const byte_range *)b)->start;
  return x < y ? -1 : x > y;
}

/* The memory planner may give a planned input's bytes to values computed
 * after the input's last use, so a run can overwrite an input it was given.
 * Such inputs (in_restore) are kept aside when installed and copied back
 * before every later run on the same inputs (execute() with installed
 * inputs). An input the program itself mutates is left as the run leaves it. */
static pyexec_status find_clobbered_inputs(pyexec_method *m) {
  ALLOC_OR_FAIL(m->in_restore, m->nin + 1, "inputs");
  byte_range *r = malloc(sizeof *r * (m->nvalues ? m->nvalues : 1));
  if (!r) return px_no_memory("inputs");
  size_t n = 0; /* the written planned tensors' byte ranges */
  for (uint32_t v = 0; v < m->nvalues; v++) {
    const px_value *val = &m->values[v];
    if (val->tag != PX_V_TENSOR || val->u.t->mem != PX_MEM_PLANNED || !m->written[v] || !val->u.t->capacity) continue;
    r[n].start = (uintptr_t)val->u.t->data;
    r[n].end = r[n].start + val->u.t->capacity;
    n++;
  }
  qsort(r, n, sizeof *r, by_start);
  for (size_t k = 1; k < n; k++)
    if (r[k].end < r[k - 1].end) r[k].end = r[k - 1].end; /* end: the furthest end so far */
  for (uint32_t j = 0; j < m->nin; j++) {
    const px_value *val = &m->values[m->inputs[j]];
    if (val->tag != PX_V_TENSOR || val->u.t->mem != PX_MEM_PLANNED || m->written[m->inputs[j]]) continue;
    uintptr_t a = (uintptr_t)val->u.t->data, b = a + val->u.t->capacity;
    size_t lo = 0, hi = n; /* ranges [0, lo) start before b */
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (r[mid].start < b) lo = mid + 1;
      else hi = mid;
    }
    m->in_restore[j] = lo > 0 && r[lo - 1].end > a;
  }
  free(r);
  return PYEXEC_OK;
}

static pyexec_status build_io(pyexec_method *m) {
  px_fb_vec in, out;
  if (!px_fb_vector(&m->plan->table, PLAN_INPUTS, 4, &in) || !px_fb_vector(&m->plan->table, PLAN_OUTPUTS, 4, &out))
    return BAD("inputs/outputs are malformed");
  m->nin = in.count;
  m->nout = out.count;
  ALLOC_OR_FAIL(m->inputs, in.count + 1, "inputs");
  ALLOC_OR_FAIL(m->input_set, in.count + 1, "inputs");
  ALLOC_OR_FAIL(m->in_stage, in.count + 1, "inputs");
  ALLOC_OR_FAIL(m->in_src, in.count + 1, "inputs");
  ALLOC_OR_FAIL(m->in_need, in.count + 1, "inputs");
  ALLOC_OR_FAIL(m->outs, out.count + 1, "outputs");
  ALLOC_OR_FAIL(m->last_out, out.count + 1, "outputs");
  ALLOC_OR_FAIL(m->last_sizes, ((size_t)out.count + 1) * PYEXEC_MAX_DIM, "outputs");
  m->last_count = SIZE_MAX; /* the first run reports its outputs as changed */
  for (uint32_t j = 0; j < in.count; j++) {
    int32_t v = px_fb_vec_i32(&in, j);
    if (v < 0 || (uint32_t)v >= m->nvalues) return BAD("input %u refers to value %d, out of range", j, v);
    m->inputs[j] = v;
  }
  for (uint32_t i = 0; i < out.count; i++) {
    int32_t v = px_fb_vec_i32(&out, i);
    if (v < 0 || (uint32_t)v >= m->nvalues) return BAD("output %u refers to value %d, out of range", i, v);
    px_output *o = &m->outs[i];
    o->vidx = v;
    o->alias_input = -1;
    for (uint32_t j = 0; j < in.count; j++)
      if (m->inputs[j] == v) {
        o->alias_input = (int32_t)j;
        break;
      }
    for (uint32_t k = 0; k < out.count; k++)
      if (k != i && px_fb_vec_i32(&out, k) == v) o->duplicate = true;
  }
  pyexec_status st = find_clobbered_inputs(m);
  if (st) return st;
  /* Unplanned tensors that are neither inputs nor outputs (the exporter
   * leaves none, but a file may) get storage now, so no kernel ever sees a
   * NULL buffer. */
  for (uint32_t v = 0; v < m->nvalues; v++) {
    px_value *val = &m->values[v];
    if (val->tag != PX_V_TENSOR || val->u.t->mem != PX_MEM_UNPLANNED) continue;
    bool io = false;
    for (uint32_t j = 0; j < m->nin && !io; j++) io = m->inputs[j] == (int32_t)v;
    for (uint32_t i = 0; i < m->nout && !io; i++) io = m->outs[i].vidx == (int32_t)v;
    if (io) continue;
    px_tensor *t = val->u.t;
    void *p = px_method_alloc(m, t->capacity ? t->capacity : 1, 1);
    if (!p) return px_no_memory("unplanned tensor");
    t->data = p;
  }
  return PYEXEC_OK;
}

static void method_destroy(pyexec_method *m) {
  for (uint32_t i = 0; i < m->ndelegates; i++)
    if (m->delegates[i].handle) m->delegates[i].backend->destroy(m->delegates[i].handle);
  for (uint32_t i = 0; i < m->nout; i++) px_big_free(m->outs[i].own, m->outs[i].own_len, m->outs[i].own_mapped);
  for (uint32_t j = 0; j < m->nin; j++) free(m->in_stage[j]);
  for (uint32_t i = 1; i < m->narenas; i++) px_big_free(m->arenas[i], m->arena_sizes[i], m->arena_mapped[i]);
  px_scratch_release(&m->ctx);
  px_profile_free(m->prof_store);
  px_debug_free(m->debug);
  if (m->plain_chains)
    for (uint32_t c = 0; c < m->nchains; c++) free(m->plain_chains[c].instrs);
  free(m->plain_chains);
  px_method_free_allocs(m);
  px_pcache_close(m->pcache); /* after everything that may point into it */
  pthread_mutex_destroy(&m->lock);
  free(m);
}

pyexec_status px_method_load(pyexec_program *program, const char *name, pyexec_method **out) {
  if (!program || !name || !out) return px_invalid_argument("program, name and out must not be NULL");
  const px_plan *plan = px_program_plan(program, name);
  if (!plan) return PYEXEC_ERR_INVALID_ARGUMENT;
  pyexec_method *m = calloc(1, sizeof *m);
  if (!m) return px_no_memory("method");
  pthread_mutex_init(&m->lock, NULL);
  m->program = program;
  m->plan = plan;
  m->ctx.msg = m->msg;
  m->ctx.msg_cap = sizeof m->msg;
  pyexec_status st;
  const px_data_map *dm = program->data_map;
  px_file_pages_set(program->map, program->map_len, dm ? dm->map : NULL, dm ? dm->map_len : 0);
  m->pcache = px_weight_cache_open(m);
  px_pcache_set_current(m->pcache); /* the packers find it there */
  if ((st = build_arenas(m)) || (st = build_values(m)) || (st = build_delegates(m)) ||
      (st = build_chains(m)) || (st = build_io(m)) ||
      (st = px_fold_method(m)) || (st = px_fuse_method(m))) {
    px_pcache_set_current(NULL);
    px_file_pages_set(NULL, 0, NULL, 0);
    if (st == PYEXEC_ERR_INVALID_PROGRAM) {
      /* Prefix the method name, keeping the detail. */
      size_t cap;
      char *buf = px_error_buffer(&cap);
      char tmp[1024];
      snprintf(tmp, sizeof tmp, "%s", buf);
      snprintf(buf, cap, "method '%s': %s", name, tmp);
    }
    method_destroy(m);
    return st;
  }
  px_pcache_set_current(NULL);
  px_file_pages_set(NULL, 0, NULL, 0);
  px_pcache_commit(m->pcache);
  *out = m;
  return PYEXEC_OK;
}

void px_method_free(pyexec_method *m) {
  if (m) method_destroy(m);
}
