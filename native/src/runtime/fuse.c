/*
 * fuse.c - load-time fusion of a convolution with the batch norm and the
 * ReLU / hardtanh (ReLU6) that follow it.
 *
 * torch.export lowers Conv2d -> BatchNorm2d (eval) -> ReLU to
 *   aten::convolution.out -> aten::_native_batch_norm_legit_no_training.out
 *   -> aten::relu.out (or aten::hardtanh.out)
 * and a run would pass over the convolution's output twice more after
 * writing it. When the program allows it, the three become one instruction
 * (conv.h's px_conv_fused): the batch norm is folded into a copy of the
 * convolution's weights and bias (per output channel oc, with
 * s = gamma / sqrt(var + eps): w' = w * s, b' = (b - mean) * s + beta,
 * computed in double and stored as float32), and the activation becomes a
 * clamp the GEMM applies to each output tile while it is in cache. The
 * fused instruction writes the last instruction's output; the batch norm and
 * the activation become NOPs.
 *
 * It fuses only when the result cannot differ from the unfused program
 * beyond rounding:
 *   - a float32 2-D (4-D tensors), non-transposed convolution whose weight
 *     and bias are constants; row-major tensors throughout;
 *   - a batch norm reading the convolution's output, with constant
 *     running_mean / running_var and constant (or None) weight / bias, every
 *     s finite;
 *   - a ReLU, or a hardtanh with constant bounds, reading the batch norm's
 *     output (or the convolution's, without a batch norm);
 *   - each intermediate written once, read only by the next instruction of
 *     the pattern (which follows it directly, folded NOPs aside), and not a
 *     method input or output; the batch norm's save_mean / save_invstd and
 *     its returned list are read by nothing; no jump lands inside the
 *     pattern.
 * The memory planner may give the last output the bytes of the
 * convolution's input (dead once the convolution has read it); the fused
 * kernel sees the overlap at run time and computes aside.
 *
 * Packing: where the GEMM engine has its indirect convolution kernel
 * (AVX-512), every such float32 2-D convolution with a constant filter
 * (fused or alone), except depthwise and 1x1 stride-1 ones, also gets its
 * filter packed here (after the batch norm is folded in) into the GEMM's
 * panels, an extra argument of the fused instruction; the kernel then runs
 * through NHWC (kernels/conv_nhwc.h) and reads only the weight's sizes.
 *
 * Memory: each fused convolution with a batch norm holds a float32 copy of
 * its weights and bias, owned by the method and freed with it; a packed one
 * holds its packed filter instead of the folded copy (about the filter's
 * size, plus up to 31 zero columns per group). The file's pages of the
 * original weights, which then nothing reads, are no longer mapped
 * (px_drop_file_pages; they stay in the page cache).
 *
 * The profile and ETDump name the fused instruction after what it runs,
 * e.g. "aten::convolution.out (+batch_norm+relu)"; the dropped instructions
 * record no events. PYEXEC_FUSE=0 in the environment turns the pass off (A/B
 * comparisons).
 *
 * Runs after fold.c: the fused instruction's new weight, bias and bound
 * values are the method's own allocations, outside m->values, so no pass
 * that indexes values by an argument's address may run after it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/gemm/gemm.h"
#include "kernels/linalg/linalg.h"
#include "runtime/memory.h"
#include "runtime/method.h"

/* Per value: the instructions writing it, the kernel argument slots reading
 * it, and whether something fusion cannot follow uses it (a list holding
 * it, a move, a jump, a delegate, the method's inputs and outputs). */
typedef struct fuse_use {
  uint32_t writers;
  uint32_t reads;
  uint32_t stamp; /* the last instruction counted as a writer, plus 1 */
  bool pinned;
} fuse_use;

static void note_write(fuse_use *u, uint32_t stamp) {
  if (u->stamp != stamp) {
    u->stamp = stamp;
    u->writers++;
  }
}

static void count_uses(const pyexec_method *m, fuse_use *use) {
  uint32_t stamp = 0;
  for (uint32_t c = 0; c < m->nchains; c++)
    for (uint32_t i = 0; i < m->chains[c].n; i++) {
      const px_instr *in = &m->chains[c].instrs[i];
      stamp++;
      switch (in->kind) {
        case INSTR_KERNEL:
          for (uint32_t j = 0; j < in->nargs; j++) {
            const px_value *a = in->args[j];
            fuse_use *u = &use[a - m->values];
            bool list = a->tag == PX_V_TENSOR_LIST || a->tag == PX_V_OPT_TENSOR_LIST;
            if (px_instr_writes_arg(in, j)) {
              note_write(u, stamp);
              if (list) /* a returned list: its items are written here */
                for (uint32_t k = 0; k < a->u.tl.n; k++)
                  if (a->u.tl.items[k]) note_write(&use[a->u.tl.items[k] - m->values], stamp);
              continue;
            }
            bool written = false; /* an out= parameter, passed again as the return value */
            for (uint32_t r = 0; r < in->nargs; r++) written |= in->args[r] == a && px_instr_writes_arg(in, r);
            if (written) continue;
            u->reads++;
            if (list)
              for (uint32_t k = 0; k < a->u.tl.n; k++)
                if (a->u.tl.items[k]) use[a->u.tl.items[k] - m->values].pinned = true;
          }
          break;
        case INSTR_MOVE:
          use[in->a].pinned = true;
          use[in->b].pinned = true;
          note_write(&use[in->b], stamp);
          break;
        case INSTR_JUMP_FALSE: use[in->a].pinned = true; break;
        case INSTR_DELEGATE:
          for (uint32_t j = 0; j < in->nargs; j++) {
            use[in->args[j] - m->values].pinned = true;
            note_write(&use[in->args[j] - m->values], stamp);
          }
          break;
        default: break;
      }
    }
  for (uint32_t j = 0; j < m->nin; j++) use[m->inputs[j]].pinned = true;
  for (uint32_t i = 0; i < m->nout; i++) use[m->outs[i].vidx].pinned = true;
}

/* ---- what a value must be ------------------------------------------------ */

static const px_tensor *tensor_of(const px_value *v) { return v->tag == PX_V_TENSOR ? v->u.t : NULL; }

/* A row-major float32 tensor of `dim` dims (dim 0: any). */
static bool plain_f32(const px_tensor *t, int dim) {
  return t && t->dtype == PX_F32 && t->contiguous && (!dim || t->dim == dim);
}

/* A constant row-major float32 tensor nothing writes. */
static bool const_f32(const pyexec_method *m, const px_value *v, int dim) {
  const px_tensor *t = tensor_of(v);
  return plain_f32(t, dim) && t->mem == PX_MEM_CONST && t->data && !t->dynamic && !m->written[v - m->values];
}

/* None, or a constant float32 vector of n elements. */
static bool const_vec_or_none(const pyexec_method *m, const px_value *v, int64_t n) {
  if (v->tag == PX_V_NONE) return true;
  return const_f32(m, v, 1) && v->u.t->sizes[0] == n;
}

/* A constant number (int or double) nothing writes. */
static bool const_number(const pyexec_method *m, const px_value *v, double *out) {
  if (m->written[v - m->values]) return false;
  if (v->tag == PX_V_DOUBLE) *out = v->u.d;
  else if (v->tag == PX_V_INT) *out = (double)v->u.i;
  else return false;
  return true;
}

/* An intermediate: a row-major float32 tensor shaped like `like`, written
 * once, read once (by the next instruction of the pattern), not pinned. */
static bool intermediate(const pyexec_method *m, const fuse_use *use, const px_value *v, const px_tensor *like) {
  const px_tensor *t = tensor_of(v);
  const fuse_use *u = &use[v - m->values];
  if (!plain_f32(t, like->dim) || t->dynamic != like->dynamic || u->writers != 1 || u->reads != 1 || u->pinned)
    return false;
  return !memcmp(t->max_sizes, like->max_sizes, sizeof(int64_t) * (size_t)t->dim);
}

/* A value nothing reads: written once, by the instruction being fused. */
static bool unused(const pyexec_method *m, const fuse_use *use, const px_value *v) {
  const fuse_use *u = &use[v - m->values];
  return u->writers == 1 && u->reads == 0 && !u->pinned;
}

/* ---- the pattern ---------------------------------------------------------- */

/* The next instruction of chain c after index i that is not a NOP, or -1. */
static int64_t next_kernel(const pyexec_method *m, uint32_t c, int64_t i) {
  const px_chain *ch = &m->chains[c];
  for (int64_t k = i + 1; k < ch->n; k++) {
    if (ch->instrs[k].kind == INSTR_NOP) continue;
    return ch->instrs[k].kind == INSTR_KERNEL ? k : -1;
  }
  return -1;
}

static bool is_op(const px_instr *in, const char *op, uint32_t nargs) {
  return in->kind == INSTR_KERNEL && in->nargs == nargs && !in->relayout && !strcmp(in->op, op);
}

/* Whether a jump of chain c lands in (first, last]: inside the pattern. */
static bool jumped_into(const pyexec_method *m, uint32_t c, int64_t first, int64_t last) {
  const px_chain *ch = &m->chains[c];
  for (uint32_t k = 0; k < ch->n; k++)
    if (ch->instrs[k].kind == INSTR_JUMP_FALSE && ch->instrs[k].b > first && ch->instrs[k].b <= last) return true;
  return false;
}


/* A new value the method owns, outside m->values. */
static px_value *new_value(pyexec_method *m, uint8_t tag) {
  px_value *v = px_method_alloc(m, 1, sizeof *v);
  if (v) v->tag = tag;
  return v;
}

/* A constant float32 tensor with t's sizes (row-major) over new storage. */
static px_value *new_const_tensor(pyexec_method *m, int dim, const int64_t *sizes, float **data) {
  px_value *v = new_value(m, PX_V_TENSOR);
  px_tensor *t = v ? px_method_alloc(m, 1, sizeof *t) : NULL;
  if (!t) return NULL;
  t->dtype = PX_F32;
  t->dim = dim;
  t->mem = PX_MEM_CONST;
  t->contiguous = 1;
  for (int d = 0; d < dim; d++) {
    t->sizes[d] = t->max_sizes[d] = sizes[d];
    t->dim_order[d] = (uint8_t)d;
  }
  px_tensor_update_layout(t);
  t->capacity = t->nbytes;
  t->cap_numel = t->numel;
  t->data = px_method_alloc(m, t->numel ? (size_t)t->numel : 1, sizeof(float));
  if (!t->data) return NULL;
  *data = t->data;
  v->u.t = t;
  return v;
}

/* The names the profile gives fused instructions. */
static const char *fused_name(bool bn, int act) {
  static const char *const names[2][3] = {
      {"aten::convolution.out", "aten::convolution.out (+relu)", "aten::convolution.out (+hardtanh)"},
      {"aten::convolution.out (+batch_norm)", "aten::convolution.out (+batch_norm+relu)",
       "aten::convolution.out (+batch_norm+hardtanh)"}};
  return names[bn][act];
}

/* Whether a convolution runs through the NHWC indirect GEMM with its filter
 * packed here (kernels/conv_nhwc.h): where the GEMM engine has that kernel,
 * for every float32 2-D convolution with a constant filter except the
 * depthwise ones (their own engine) and 1x1 stride-1 unpadded ones (the
 * NCHW input is their product's operand as it is). Fills g's filter
 * geometry (the spatial sizes are the run's). PYEXEC_CONV_PACK=0 turns it
 * off. */
static bool pack_wanted(const pyexec_method *m, px_value *const *ca, const px_tensor *w,
                        px_conv_nhwc_geom *g) {
  const char *env = getenv("PYEXEC_CONV_PACK");
  if ((env && !strcmp(env, "0")) || !px_gemm_f32_conv_available()) return false;
  if (ca[8]->tag != PX_V_INT || m->written[ca[8] - m->values]) return false;
  for (int k = 3; k <= 5; k++)
    if (ca[k]->tag != PX_V_INT_LIST || ca[k]->u.il.n != 2) return false;
  const int64_t G = ca[8]->u.i, Cout = w->sizes[0], Cin_g = w->sizes[1], KH = w->sizes[2], KW = w->sizes[3];
  if (G <= 0 || Cout % G || Cin_g <= 0) return false;
  const int64_t *st = px_intlist(ca[3]), *pd = px_intlist(ca[4]), *dl = px_intlist(ca[5]);
  if (KH == 1 && KW == 1 && st[0] == 1 && st[1] == 1 && pd[0] == 0 && pd[1] == 0) return false;
  if (Cin_g == 1 && Cout / G < 8) return false;
  if (!(Cin_g >= 8 || (G == 1 && dl[1] == 1 && KW * Cin_g >= 8))) return false;
  *g = (px_conv_nhwc_geom){0};
  g->Cin = Cin_g * G, g->Cout = Cout, g->KH = KH, g->KW = KW, g->G = G;
  g->sh = st[0], g->sw = st[1], g->dh = dl[0], g->dw = dl[1]; /* they choose Winograd (winograd.h) */
  return true;
}

/* Tries the pattern at instruction i of chain c (a convolution). Returns
 * PYEXEC_OK whether or not it fused; an error only when memory runs out. */
static pyexec_status fuse_at(pyexec_method *m, const fuse_use *use, uint32_t c, uint32_t i) {
  px_instr *conv = &m->chains[c].instrs[i];
  /* convolution.out(input, weight, bias, stride, padding, dilation,
   * transposed, output_padding, groups, out) -> out */
  if (!is_op(conv, "aten::convolution.out", 11) || conv->args[9] != conv->args[10]) return PYEXEC_OK;
  px_value *const *ca = conv->args;
  const px_tensor *x = tensor_of(ca[0]);
  if (!plain_f32(x, 4) || !const_f32(m, ca[1], 4)) return PYEXEC_OK;
  const px_tensor *w = ca[1]->u.t;
  const int64_t cout = w->sizes[0];
  if (!const_vec_or_none(m, ca[2], cout)) return PYEXEC_OK;
  if (ca[6]->tag != PX_V_BOOL || ca[6]->u.b || m->written[ca[6] - m->values]) return PYEXEC_OK; /* transposed */
  px_value *y = ca[9];
  const px_tensor *yt = tensor_of(y);
  if (!plain_f32(yt, 4) || yt->max_sizes[1] != cout) return PYEXEC_OK;

  /* batch norm: (input, weight, bias, running_mean, running_var, momentum,
   * eps, out0, out1, out2) -> [out0, out1, out2] */
  int64_t last = i;
  px_instr *bn = NULL, *act = NULL;
  px_value *result = y;
  double eps = 0.0;
  int64_t k = next_kernel(m, c, last);
  if (k >= 0 && is_op(&m->chains[c].instrs[k], "aten::_native_batch_norm_legit_no_training.out", 11)) {
    px_value *const *ba = m->chains[c].instrs[k].args;
    px_value *list = ba[10];
    bool ok = ba[0] == y && intermediate(m, use, y, yt) && const_vec_or_none(m, ba[1], cout) &&
              const_vec_or_none(m, ba[2], cout) && const_f32(m, ba[3], 1) && ba[3]->u.t->sizes[0] == cout &&
              const_f32(m, ba[4], 1) && ba[4]->u.t->sizes[0] == cout && const_number(m, ba[6], &eps) &&
              ba[7] != ba[8] && ba[7] != ba[9] && ba[8] != ba[9] && tensor_of(ba[7]) && unused(m, use, ba[8]) &&
              unused(m, use, ba[9]) && (list->tag == PX_V_TENSOR_LIST || list->tag == PX_V_OPT_TENSOR_LIST) &&
              unused(m, use, list);
    if (ok) {
      const px_tensor *zt = ba[7]->u.t;
      ok = plain_f32(zt, 4) && zt->dynamic == yt->dynamic &&
           !memcmp(zt->max_sizes, yt->max_sizes, sizeof(int64_t) * 4);
    }
    if (ok) {
      bn = &m->chains[c].instrs[k];
      result = ba[7];
      last = k;
    }
  }

  /* activation: relu.out(self, out) -> out; hardtanh.out(self, min, max, out) -> out */
  int act_kind = 0; /* 1: relu, 2: hardtanh */
  double lo = -INFINITY, hi = INFINITY;
  k = next_kernel(m, c, last);
  if (k >= 0) {
    px_instr *in = &m->chains[c].instrs[k];
    px_value *const *aa = in->args;
    if (is_op(in, "aten::relu.out", 3) && aa[1] == aa[2] && aa[0] == result) {
      act_kind = 1;
      lo = 0.0;
    } else if (is_op(in, "aten::hardtanh.out", 5) && aa[3] == aa[4] && aa[0] == result &&
               const_number(m, aa[1], &lo) && const_number(m, aa[2], &hi)) {
      act_kind = 2;
      /* the bounds the unfused kernel compares float32 elements with */
      lo = (double)(float)lo;
      hi = (double)(float)hi;
    }
    const px_tensor *rt = act_kind ? tensor_of(aa[1 + 2 * (act_kind == 2)]) : NULL;
    const px_tensor *like = tensor_of(result);
    if (act_kind && (!intermediate(m, use, result, like) || !plain_f32(rt, 4) || rt->dynamic != like->dynamic ||
                     memcmp(rt->max_sizes, like->max_sizes, sizeof(int64_t) * 4))) {
      act_kind = 0;
      lo = -INFINITY, hi = INFINITY;
    }
    if (act_kind) {
      act = in;
      result = aa[1 + 2 * (act_kind == 2)];
      last = k;
    }
  }
  px_conv_nhwc_geom pg;
  const bool pack = pack_wanted(m, ca, w, &pg);
  if ((!bn && !act && !pack) || jumped_into(m, c, i, last)) return PYEXEC_OK;

  /* ---- rewrite ---- */
  px_value *wv = ca[1], *bv = ca[2];
  float *folded = NULL; /* batch norm folded into the filter, when it is packed */
  if (bn) {
    px_value *const *ba = bn->args;
    const float *gamma = ba[1]->tag == PX_V_NONE ? NULL : ba[1]->u.t->data;
    const float *beta = ba[2]->tag == PX_V_NONE ? NULL : ba[2]->u.t->data;
    const float *mean = ba[3]->u.t->data, *var = ba[4]->u.t->data;
    const float *b0 = ca[2]->tag == PX_V_NONE ? NULL : ca[2]->u.t->data;
    double *s = malloc(sizeof(double) * (size_t)(cout ? cout : 1));
    if (!s) return px_no_memory("load-time fusion");
    bool finite = true;
    for (int64_t oc = 0; oc < cout; oc++) {
      s[oc] = (gamma ? (double)gamma[oc] : 1.0) / sqrt((double)var[oc] + eps);
      finite &= isfinite(s[oc]) != 0;
    }
    if (!finite) { /* a degenerate channel: leave the program as it is */
      free(s);
      return PYEXEC_OK;
    }
    float *nw, *nb;
    int64_t bsz = cout;
    if (pack) { /* folded only to be packed below: a temporary */
      nw = malloc(sizeof(float) * (size_t)(w->numel ? w->numel : 1));
      bv = nw ? new_const_tensor(m, 1, &bsz, &nb) : NULL;
      if (!bv) free(nw);
    } else {
      wv = new_const_tensor(m, 4, w->sizes, &nw);
      bv = wv ? new_const_tensor(m, 1, &bsz, &nb) : NULL;
    }
    if (!bv) {
      free(s);
      return px_no_memory("load-time fusion");
    }
    const int64_t per = cout ? w->numel / cout : 0;
    const float *w0 = w->data;
    for (int64_t oc = 0; oc < cout; oc++) {
      for (int64_t e = 0; e < per; e++) nw[oc * per + e] = (float)((double)w0[oc * per + e] * s[oc]);
      nb[oc] = (float)(((b0 ? (double)b0[oc] : 0.0) - (double)mean[oc]) * s[oc] + (beta ? (double)beta[oc] : 0.0));
    }
    free(s);
    folded = pack ? nw : NULL;
  }
  px_value *pv; /* the filter in the GEMM's panels (the weight keeps only its sizes), or None */
  if (pack) {
    float *pk;
    int64_t n = (int64_t)(px_conv_nhwc_packed_size(&pg) / sizeof(float));
    pv = new_const_tensor(m, 1, &n, &pk);
    bool ok = pv && px_conv_nhwc_pack(&pg, folded ? folded : w->data, pk);
    free(folded);
    if (!ok) return px_no_memory("load-time fusion");
  } else if (!(pv = new_value(m, PX_V_NONE))) {
    return px_no_memory("load-time fusion");
  }
  /* Nothing else reads the original weights: hand their pages back. */
  if ((bn || pack) && use[ca[1] - m->values].reads == 1) px_drop_file_pages(w->data, w->nbytes);
  px_value *lov = new_value(m, PX_V_DOUBLE), *hiv = new_value(m, PX_V_DOUBLE);
  px_value **args = px_method_alloc(m, 14, sizeof *args);
  if (!lov || !hiv || !args) return px_no_memory("load-time fusion");
  lov->u.d = lo;
  hiv->u.d = hi;
  args[0] = ca[0];
  args[1] = wv;
  args[2] = bv;
  for (int j = 3; j <= 8; j++) args[j] = ca[j];
  args[9] = lov;
  args[10] = hiv;
  args[11] = pv;
  args[12] = args[13] = result;
  conv->args = args;
  conv->nargs = 14;
  conv->fn = px_conv_fused;
  conv->sig = PX_CONV_FUSED_SIG;
  conv->op = fused_name(bn != NULL, act_kind);
  conv->any_layout = false;
  conv->relayout = false; /* every tensor argument is row-major (checked above) */
  if (bn) bn->kind = INSTR_NOP;
  if (act) act->kind = INSTR_NOP;
  return PYEXEC_OK;
}

/* aten::addmm.out(self, mat1, mat2, beta, alpha, out) or aten::mm.out(self,
 * mat2, out) whose mat2 is a constant float32 matrix (a weight, often the
 * transposed view fold.c leaves) becomes linalg.h's px_linear_packed, which
 * packs the weight into the GEMM's panels once, on its first product of 8
 * rows or more, instead of on every call (a [16 x 768] @ [768 x 3072]
 * product spent most of its time doing that). addmm only with beta = alpha
 * = 1 and a constant float32 [N] bias. PYEXEC_LINEAR_PACK=0 turns it off.
 * Only when mat1's row count is fixed (not a dynamic dimension) and at least
 * PX_LINEAR_PACK_MIN_ROWS. Memory: room for the packed copy (K x N rounded
 * up to whole 32-column panels), reserved here but written, and so
 * resident, on the first call; programs with dynamic row counts (an LLM's
 * prefill and decode) keep reading the mapped weights and add nothing. */
static pyexec_status pack_linear_at(pyexec_method *m, uint32_t c, uint32_t i) {
  px_instr *in = &m->chains[c].instrs[i];
  const bool addmm = is_op(in, "aten::addmm.out", 7), mm = is_op(in, "aten::mm.out", 4);
  if (!addmm && !mm) return PYEXEC_OK;
  px_value *const *a = in->args;
  px_value *bias = addmm ? a[0] : NULL, *mat1 = a[addmm ? 1 : 0], *mat2 = a[addmm ? 2 : 1];
  px_value *out = a[addmm ? 5 : 2];
  if (out != a[addmm ? 6 : 3]) return PYEXEC_OK;
  const px_tensor *w = tensor_of(mat2), *x = tensor_of(mat1), *y = tensor_of(out);
  if (!w || !x || !y) return PYEXEC_OK;
  const int dt = w->dtype;
  const bool half = dt == PX_F16 || dt == PX_BF16;
  if ((dt != PX_F32 && !half) || w->dim != 2 || w->mem != PX_MEM_CONST || !w->data || w->dynamic ||
      m->written[mat2 - m->values] || x->dtype != dt || x->dim != 2 || y->dtype != dt)
    return PYEXEC_OK;
  const int64_t K = w->sizes[0], N = w->sizes[1];
  if (K <= 0 || N <= 0) return PYEXEC_OK;
  /* float32: only products of a fixed, large enough row count (a vision
   * model's tokens): a dynamic one (an LLM's prompt) is mostly one-row
   * decode steps, for which the mapped weight is read as it is, and a packed
   * copy of every weight would only add its size to the resident memory.
   * float16 / bfloat16 are packed at any row count: read in place they are
   * widened on every call, and their 16-bit panels take the weight's size. */
  if (!half && (x->dynamic || x->sizes[0] < PX_LINEAR_PACK_MIN_ROWS)) return PYEXEC_OK;
  if (addmm) {
    double beta, alpha;
    const px_tensor *bt = tensor_of(bias);
    if (!const_number(m, a[3], &beta) || !const_number(m, a[4], &alpha) || beta != 1.0 || alpha != 1.0 || !bt ||
        bt->dtype != dt || !bt->contiguous || bt->dim != 1 || bt->mem != PX_MEM_CONST || !bt->data ||
        bt->dynamic || m->written[bias - m->values] || bt->sizes[0] != N)
      return PYEXEC_OK;
  }
  float *pk;
  int64_t n = half ? (int64_t)((px_linear_packed16_size(N, K, addmm) + sizeof(float) - 1) / sizeof(float))
                   : (int64_t)(px_gemm_f32_prepack_size(N, K) / sizeof(float));
  px_value *pv = new_const_tensor(m, 1, &n, &pk);
  px_value **args = px_method_alloc(m, 7, sizeof *args);
  px_value *none = bias ? NULL : new_value(m, PX_V_NONE), *state = new_value(m, PX_V_INT);
  if (!pv || !args || !state || (!bias && !none)) return px_no_memory("load-time packing");
  state->u.i = 0; /* packed by the first product of PX_LINEAR_PACK_MIN_ROWS rows or more */
  args[0] = bias ? bias : none;
  args[1] = mat1;
  args[2] = mat2;
  args[3] = pv;
  args[4] = state;
  args[5] = args[6] = out;
  in->args = args;
  in->nargs = 7;
  in->fn = px_linear_packed;
  in->sig = PX_LINEAR_PACKED_SIG;
  return PYEXEC_OK;
}

/* A copy of every chain's instructions as they are before fusion: a
 * fused instruction gets a new argument array and the instructions it
 * absorbs only change kind, so the copies still describe the unfused
 * program, whose values and weights fusion leaves as they were. The
 * executor runs them while a debug buffer is on (runtime/debug.h), so that
 * every instruction records its own output. */
static pyexec_status keep_plain_chains(pyexec_method *m) {
  if (!m->nchains) return PYEXEC_OK;
  m->plain_chains = calloc(m->nchains, sizeof *m->plain_chains);
  if (!m->plain_chains) return px_no_memory("load-time fusion");
  for (uint32_t c = 0; c < m->nchains; c++) {
    const px_chain *ch = &m->chains[c];
    m->plain_chains[c].n = ch->n;
    if (!ch->n) continue;
    m->plain_chains[c].instrs = malloc(ch->n * sizeof *ch->instrs);
    if (!m->plain_chains[c].instrs) return px_no_memory("load-time fusion"); /* freed with the method */
    memcpy(m->plain_chains[c].instrs, ch->instrs, ch->n * sizeof *ch->instrs);
  }
  return PYEXEC_OK;
}

/* The copies are dropped when fusion changed nothing. */
static void drop_plain_chains_if_same(pyexec_method *m) {
  if (!m->plain_chains) return;
  for (uint32_t c = 0; c < m->nchains; c++)
    if (m->chains[c].n && memcmp(m->plain_chains[c].instrs, m->chains[c].instrs, m->chains[c].n * sizeof(px_instr)))
      return;
  for (uint32_t c = 0; c < m->nchains; c++) free(m->plain_chains[c].instrs);
  free(m->plain_chains);
  m->plain_chains = NULL;
}

pyexec_status px_fuse_method(pyexec_method *m) {
  const char *env = getenv("PYEXEC_FUSE");
  if (env && !strcmp(env, "0")) return PYEXEC_OK;
  fuse_use *use = calloc(m->nvalues ? m->nvalues : 1, sizeof *use);
  if (!use) return px_no_memory("load-time fusion");
  count_uses(m, use);
  const char *lp = getenv("PYEXEC_LINEAR_PACK");
  const bool pack_linear = !(lp && !strcmp(lp, "0"));
  pyexec_status st = keep_plain_chains(m);
  for (uint32_t c = 0; c < m->nchains && !st; c++)
    for (uint32_t i = 0; i < m->chains[c].n && !st; i++)
      if (m->chains[c].instrs[i].kind == INSTR_KERNEL) {
        st = fuse_at(m, use, c, i);
        if (!st && m->chains[c].instrs[i].kind == INSTR_KERNEL && pack_linear)
          st = pack_linear_at(m, c, i);
      }
  free(use);
  if (!st) drop_plain_chains_if_same(m);
  return st;
}
