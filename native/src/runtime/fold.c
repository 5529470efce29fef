/*
 * fold.c - load-time rewrites of a method's instructions.
 *
 * The exporter lowers nn.Linear to permute_copy(weight, [1, 0]) feeding
 * addmm / mm, so a run would transpose every weight before using it (which is
 * what ExecuTorch's portable runtime does, on every call). When the permuted
 * tensor is a constant and only matrix products read it, the copy is dropped:
 * the value becomes a view of the constant whose dim_order says how its dims
 * lie in memory, and the products (which take any dim_order) read it through
 * its strides. No memory is copied or added.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/method.h"

/* Products that read a tensor of any dim_order and never write their inputs. */
static bool reads_any_layout(const px_instr *in) {
  return in->any_layout && (!strcmp(in->op, "aten::mm.out") || !strcmp(in->op, "aten::addmm.out") ||
                            !strcmp(in->op, "aten::bmm.out"));
}

/* Per value: how many places write it, and whether anything other than a
 * product's read uses it (a list, a move, a jump, another kernel). */
typedef struct value_use {
  uint32_t writers;
  bool other_use;
} value_use;

static void note_uses(pyexec_method *m, value_use *use) {
  for (uint32_t c = 0; c < m->nchains; c++)
    for (uint32_t i = 0; i < m->chains[c].n; i++) {
      const px_instr *in = &m->chains[c].instrs[i];
      switch (in->kind) {
        case INSTR_KERNEL:
          for (uint32_t j = 0; j < in->nargs; j++) {
            const px_value *a = in->args[j];
            size_t v = (size_t)(a - m->values);
            /* An out= parameter is passed again as the return value: one write. */
            bool written = false;
            for (uint32_t r = 0; r < in->nargs; r++) written |= in->args[r] == a && px_instr_writes_arg(in, r);
            if (written) {
              if (px_instr_writes_arg(in, j)) use[v].writers++;
            } else if (!reads_any_layout(in)) {
              use[v].other_use = true;
            }
            if (a->tag == PX_V_TENSOR_LIST || a->tag == PX_V_OPT_TENSOR_LIST)
              for (uint32_t k = 0; k < a->u.tl.n; k++)
                if (a->u.tl.items[k]) use[a->u.tl.items[k] - m->values].other_use = true;
          }
          break;
        case INSTR_MOVE:
          use[in->a].other_use = true;
          use[in->b].other_use = true;
          break;
        case INSTR_JUMP_FALSE: use[in->a].other_use = true; break;
        case INSTR_DELEGATE: /* a backend reads and writes its arguments' memory as it lies */
          for (uint32_t j = 0; j < in->nargs; j++) {
            use[in->args[j] - m->values].other_use = true;
            use[in->args[j] - m->values].writers++;
          }
          break;
        default: break;
      }
    }
  for (uint32_t j = 0; j < m->nin; j++) use[m->inputs[j]].other_use = true;
  for (uint32_t i = 0; i < m->nout; i++) use[m->outs[i].vidx].other_use = true;
}

/* permute_copy(self, dims, out) of a constant into a value only products
 * read: makes `out` a view of the constant and the instruction a no-op. */
static void fold_permute(pyexec_method *m, px_instr *in, const value_use *use) {
  /* permute_copy.out(self, dims, out) -> out: four arguments, out twice. */
  if (in->nargs != 4 || strcmp(in->op, "aten::permute_copy.out") || in->args[2] != in->args[3]) return;
  const px_value *sv = in->args[0], *dv = in->args[1];
  px_value *ov = in->args[2];
  if (sv->tag != PX_V_TENSOR || dv->tag != PX_V_INT_LIST || ov->tag != PX_V_TENSOR) return;
  const px_tensor *self = sv->u.t;
  px_tensor *out = ov->u.t;
  size_t o = (size_t)(ov - m->values);
  if (self->mem != PX_MEM_CONST || !self->data || self->dynamic || out->dynamic) return;
  if (out->mem != PX_MEM_PLANNED || use[o].writers != 1 || use[o].other_use) return;
  if (out->dtype != self->dtype || out->dim != self->dim || dv->u.il.n != (uint32_t)self->dim) return;
  int dim = self->dim;
  int inv[PX_MAX_DIM]; /* self's dim p is out's dim inv[p] */
  for (int d = 0; d < dim; d++) inv[d] = -1;
  for (int d = 0; d < dim; d++) {
    const px_value *item = dv->u.il.items[d];
    if (!item || item->tag != PX_V_INT || m->written[item - m->values]) return; /* not a constant */
    int64_t p = item->u.i < 0 ? item->u.i + dim : item->u.i;
    if (p < 0 || p >= dim || inv[p] >= 0 || out->sizes[d] != self->sizes[p]) return;
    inv[p] = d;
  }
  /* Memory holds self's dims in self's dim_order, outermost first: out's
   * dims in memory order are the inv[] of those. */
  bool row_major = true;
  for (int k = 0; k < dim; k++) {
    out->dim_order[k] = (uint8_t)inv[self->dim_order[k]];
    row_major &= out->dim_order[k] == k;
  }
  out->contiguous = row_major;
  out->data = self->data;
  out->mem = PX_MEM_CONST;
  px_tensor_update_layout(out);
  m->written[o] = false;
  in->kind = INSTR_NOP;
}

pyexec_status px_fold_method(pyexec_method *m) {
  value_use *use = calloc(m->nvalues ? m->nvalues : 1, sizeof *use);
  if (!use) return px_no_memory("load-time folding");
  note_uses(m, use);
  for (uint32_t c = 0; c < m->nchains; c++)
    for (uint32_t i = 0; i < m->chains[c].n; i++)
      if (m->chains[c].instrs[i].kind == INSTR_KERNEL) fold_permute(m, &m->chains[c].instrs[i], use);
  free(use);
  return PYEXEC_OK;
}
