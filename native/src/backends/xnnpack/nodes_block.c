/*
 * nodes_block.c - fuse.c's block node: an inverted-residual chain
 *   [Conv2d 1x1 (expand)] -> DepthwiseConv2d -> Conv2d 1x1 (project) [-> Add]
 * run a band of output rows at a time (xnn_block, xnn_graph.h).
 *
 * Node by node, a MobileNet block writes its expanded map (6 times its
 * input's channels) out to memory, reads it back for the depthwise layer,
 * writes that layer's output and reads it again for the projection: at
 * 56 x 56 x 144 channels each of those maps is 1.8 MB, more than a core's
 * L2 holds. Here each thread keeps a ring of the few expanded input rows
 * the next band of depthwise output rows needs, and one band of depthwise
 * output: the expansion writes rows into the ring just before the depthwise
 * engine reads them, the projection multiplies the band while it is still
 * in cache, and the residual is added to the band's output rows right
 * after. No intermediate map is ever written whole.
 *
 * The bits are the nodes' own: each step is the kernel the node runs
 * (nodes_conv.c's plans, the GEMM engine with the node's bias, bounds and
 * post; the depthwise engine row by row; px_f32_binary with the Add's
 * operand order and bounds), and those compute every output element the
 * same way whichever rows a call covers. The bands of one image are split
 * over the thread pool in runs of rows; a run recomputes the few expanded
 * rows its first depthwise rows share with the run before it, which gives
 * the same values again.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/conv_plan.h"
#include "backends/xnnpack/nodes.h"
#include "core/parallel.h"
#include "kernels/conv/dwconv.h"
#include "kernels/elementwise/flat.h"
#include "kernels/gemm/gemm.h"

void xnn_release_block(void *packed) {
  xnn_block *b = packed;
  if (!b) return;
  free(b->expand.packed);
  free(b->dw.packed);
  free(b->project.packed);
  free(b);
}

int xnn_prepare_block(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  xnn_block *b = node->packed;
  if (b->expand.type && xnn_prepare_conv2d(ctx, &b->expand, values)) return PYEXEC_ERR_INVALID_PROGRAM;
  if (xnn_prepare_depthwise_conv2d(ctx, &b->dw, values)) return PYEXEC_ERR_INVALID_PROGRAM;
  if (xnn_prepare_conv2d(ctx, &b->project, values)) return PYEXEC_ERR_INVALID_PROGRAM;
  return 0;
}

int xnn_shape_block(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_block *b = node->packed;
  int rc = b->expand.type ? xnn_shape_conv2d(ctx, &b->expand, values) : 0;
  if (!rc) rc = xnn_shape_depthwise_conv2d(ctx, &b->dw, values);
  if (!rc) rc = xnn_shape_conv2d(ctx, &b->project, values);
  if (!rc && b->add.type) {
    rc = xnn_shape_binary(ctx, &b->add, values);
    const xnn_value *p = &values[b->p], *r = &values[node->in[1]];
    for (uint32_t k = 0; !rc && k < p->num_dims; k++)
      if (r->dims[k] != p->dims[k])
        rc = px_fail(ctx, "the residual operand's dim %u is %lld, the projection's %lld", k, (long long)r->dims[k],
                     (long long)p->dims[k]);
  }
  return rc;
}

/* Rows per band: enough output pixels for the projection's product to run
 * at the GEMM engine's pace (about 128 rows of it), at most the image. */
static int64_t band_rows(int64_t OH, int64_t OW) {
  int64_t r = (128 + OW - 1) / OW;
  return r < 1 ? 1 : r > OH ? OH : r;
}

typedef struct block_job {
  const xnn_block *b;
  const conv_plan *pe, *pd, *pp; /* expand (or NULL), depthwise, project */
  px_dwconv dw;                  /* the depthwise layer (N = 1: rows are given) */
  const float *x, *r;            /* the chain's input and the residual operand (or NULL) */
  float *y;                      /* its output */
  int64_t H, W, Cx, Ce, OH, OW, Cd, Cy;
  int64_t R, ring;               /* depthwise output rows per band; expanded rows the ring holds */
  int64_t runs;                  /* runs of rows per image */
  char *mem;                     /* per thread: ring, band, depthwise workspace, row pointers */
  size_t ring_b, band_b, dw_b, per_thread;
  char *work;                    /* the products' workspaces (block_task) */
  size_t work_b;
  px_ctx *ctx;
  int rc;                        /* the first failure of a run (a product's), or 0 */
} block_job;

/* Expanded rows [a, b) of image n into their ring slots (row ih in slot
 * ih % ring), contiguous slots one product. */
static int expand_rows(const block_job *J, int64_t n, int64_t a, int64_t b, float *ring, void *work) {
  const conv_plan *pe = J->pe;
  px_gemm_epilogue ep = {pe->bias, J->b->expand.output_min, J->b->expand.output_max, false, xnn_post_fn(&J->b->expand)};
  while (a < b) {
    const int64_t slot = a % J->ring, len = b - a < J->ring - slot ? b - a : J->ring - slot;
    int rc = px_gemm_f32_prepacked_ep(J->ctx, work, len * J->W, J->Ce, pe->K, J->x + (n * J->H + a) * J->W * J->Cx,
                                      J->Cx, 1, NULL, NULL, pe->w, 0.0f, ring + slot * J->W * J->Ce, J->Ce, &ep);
    if (rc) return rc;
    a += len;
  }
  return 0;
}

/* Output rows [o0, o1) of image n, band by band. */
static int run_rows(const block_job *J, int64_t n, int64_t o0, int64_t o1, char *mem, void *work) {
  const xnn_block *b = J->b;
  const px_dwconv *dw = &J->dw;
  float *ring = (float *)mem, *band = (float *)(mem + J->ring_b);
  void *dws = mem + J->ring_b + J->band_b;
  const float **rp = (const float **)(mem + J->ring_b + J->band_b + J->dw_b);
  int64_t have = -1; /* expanded rows [.., have) are in the ring */
  for (int64_t oh = o0; oh < o1; oh += J->R) {
    const int64_t rn = o1 - oh < J->R ? o1 - oh : J->R;
    if (J->pe) {
      int64_t need0 = oh * dw->sh - dw->pt, need1 = (oh + rn - 1) * dw->sh - dw->pt + (dw->KH - 1) * dw->dh + 1;
      if (need0 < 0) need0 = 0;
      if (need1 > J->H) need1 = J->H;
      const int64_t from = have > need0 ? have : need0;
      if (from < need1) {
        int rc = expand_rows(J, n, from, need1, ring, work);
        if (rc) return rc;
        have = need1;
      }
    }
    /* the depthwise rows into the band, each through the post */
    for (int64_t o = oh; o < oh + rn; o++) {
      for (int64_t ki = 0; ki < dw->KH; ki++) {
        const int64_t ih = o * dw->sh - dw->pt + ki * dw->dh;
        rp[ki] = ih < 0 || ih >= J->H ? NULL
                 : J->pe             ? ring + ih % J->ring * J->W * J->Ce
                                     : J->x + (n * J->H + ih) * J->W * J->Ce;
      }
      px_dwconv_row(dw, dws, rp, band + (o - oh) * J->OW * J->Cd);
    }
    const int64_t m = rn * J->OW, at = (n * J->OH + oh) * J->OW;
    float *yb = J->y + at * J->Cy;
    px_gemm_epilogue ep = {J->pp->bias, b->project.output_min, b->project.output_max, false,
                           xnn_post_fn(&b->project)};
    int rc = px_gemm_f32_prepacked_ep(J->ctx, work, m, J->Cy, J->pp->K, band, J->Cd, 1, NULL, NULL, J->pp->w, 0.0f,
                                      yb, J->Cy, &ep);
    if (rc) return rc;
    if (J->r) { /* the Add, its operands in its order, on the rows just written */
      const float *rb = J->r + at * J->Cy, *p0 = b->add_first ? yb : rb, *p1 = b->add_first ? rb : yb;
      const float lo = b->add.output_min, hi = b->add.output_max;
      px_f32_binary(PX_F32_ADD, m * J->Cy, p0, 1, p1, 1, yb, !xnn_unbounded(lo, hi), lo, hi);
    }
  }
  return 0;
}

/* Task t: run t % runs of image t / runs, on this thread's buffers. A
 * product called here runs on this thread alone (a px_parallel_for inside
 * a chunk runs inline) with workspace slot tid, except when this job itself
 * ran inline on the calling thread (one task, or a pool busy with another
 * job): then tid is 0, no other task runs meanwhile, and its products may
 * spread over the pool, using slots 0 .. T - 1. T slots cover both. */
static void block_task(void *arg, int64_t t0, int64_t t1, int tid) {
  block_job *J = arg;
  char *mem = J->mem + (size_t)tid * J->per_thread;
  void *work = J->work + (size_t)tid * J->work_b;
  px_dwconv_row_init(&J->dw, mem + J->ring_b + J->band_b);
  for (int64_t t = t0; t < t1; t++) {
    const int64_t n = t / J->runs, k = t % J->runs, per = (J->OH + J->runs - 1) / J->runs;
    const int64_t o0 = k * per, o1 = o0 + per < J->OH ? o0 + per : J->OH;
    if (o0 >= o1) continue;
    int rc = run_rows(J, n, o0, o1, mem, work);
    if (rc) __atomic_compare_exchange_n(&J->rc, &(int){0}, rc, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
}

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

int xnn_exec_block(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const xnn_block *b = node->packed;
  const xnn_value *xv = &values[node->in[0]], *dv = &values[b->d], *yv = &values[node->out[0]];
  block_job J = {.b = b, .ctx = ctx};
  J.pe = b->expand.type ? b->expand.packed : NULL;
  J.pd = b->dw.packed;
  J.pp = b->project.packed;
  J.x = xv->data;
  J.r = b->add.type ? values[node->in[1]].data : NULL;
  J.y = yv->data;
  const int64_t N = xv->dims[0];
  J.H = xv->dims[1], J.W = xv->dims[2], J.Cx = xv->dims[3];
  J.Ce = J.pe ? J.pe->Cout : J.Cx;
  J.OH = dv->dims[1], J.OW = dv->dims[2], J.Cd = dv->dims[3];
  J.Cy = yv->dims[3];
  if (N == 0 || J.OH == 0 || J.OW == 0) return 0;
  const conv_plan *pd = J.pd;
  J.dw = (px_dwconv){1, J.H, J.W, pd->Cin, pd->Cout_g, pd->KH, pd->KW, pd->sh, pd->sw, pd->dh, pd->dw, pd->pt, pd->pl,
                     J.OH, J.OW, pd->w, pd->bias, b->dw.output_min, b->dw.output_max, xnn_post_fn(&b->dw)};
  J.R = band_rows(J.OH, J.OW);
  /* Runs of rows: one per thread over the images, a small map's run one
   * band. Each thread then runs its rows through the whole chain, reading
   * what it wrote itself; on a 14 x 14 map at two threads that beat
   * leaving the chain to the nodes (whose products and depthwise rows split
   * differently, so each core read the other's output) by 15% in
   * mobilenet_v2, for the expansion rows both runs compute. */
  const int T = px_parallel_threads();
  J.runs = T > N ? (T + N - 1) / N : 1;
  if (J.runs > J.OH) J.runs = J.OH;
  const int64_t per = (J.OH + J.runs - 1) / J.runs;
  if (J.R > per) J.R = per;
  J.ring = (J.R - 1) * pd->sh + (pd->KH - 1) * pd->dh + 1;
  if (J.ring > J.H) J.ring = J.H;
  J.ring_b = J.pe ? round64(sizeof(float) * (size_t)(J.ring * J.W * J.Ce)) : 0;
  J.band_b = round64(sizeof(float) * (size_t)(J.R * J.OW * J.Cd));
  J.dw_b = round64(px_dwconv_row_bytes(&J.dw));
  const size_t we = J.pe ? px_gemm_f32_thread_work_size(J.ring * J.W, J.Ce, J.pe->K) : 0;
  const size_t wp = px_gemm_f32_thread_work_size(J.R * J.OW, J.Cy, J.pp->K);
  J.work_b = round64(we > wp ? we : wp);
  J.per_thread = J.ring_b + J.band_b + J.dw_b + round64(sizeof(float *) * (size_t)pd->KH);
  J.mem = px_scratch(ctx, J.per_thread * (size_t)T);
  J.work = px_scratch(ctx, J.work_b * (size_t)T);
  if (!J.mem || !J.work) return PYEXEC_ERR_EXECUTION;
  const int64_t macs = N * J.OH * J.OW * J.Cd * (pd->KH * pd->KW + J.Cy + (J.pe ? J.Cx * pd->sh * pd->sw : 0));
  px_parallel_for(N * J.runs, 1, macs, block_task, &J);
  return J.rc;
}
