/*
 * nodes_conv.c - the XNNPACK delegate's convolutions on NHWC float32:
 * Conv2d (7), DepthwiseConv2d (13), ConvTranspose2d (39). Pooling, resize
 * and PReLU are nodes_pool.c.
 *
 * Every parameter comes from the payload and is checked once, in the
 * prepare hook, which also packs the weights into a conv_plan (node->packed):
 *   - Conv2d: per group, the filter [Cout_g, KH, KW, Cin_g] read as the
 *     K x Cout_g matrix B (K = KH*KW*Cin_g, tap-major, channel fastest) and
 *     packed into the GEMM engine's panels. A run is one GEMM per group and
 *     row tile (rows = output pixels): where the engine has an indirect
 *     kernel (AVX-512) it reads each pixel's taps from the NHWC input in
 *     place; elsewhere the im2col rows are packed straight into the engine's
 *     row panels; a 1x1 stride-1 unpadded convolution reads the input
 *     itself;
 *   - DepthwiseConv2d: the filter [1, KH, KW, C*M] is already taps x
 *     channels, kept as is beside the bias; a run is the depthwise engine
 *     of kernels/dwconv.c (which the portable convolution shares);
 *   - ConvTranspose2d: per group, B[ic][(tap, oc)] = filter[oc][tap][ic],
 *     packed; a run is col = x @ B per row tile, then each column block is
 *     added into the output pixel it lands on.
 * Bias (zeros when absent) and the node's output_min/output_max clamp are
 * applied while the output is in cache: Conv2d's in the GEMM's registers
 * (or its tile epilogue) as each micro-tile is stored, the others' per row
 * tile.
 *
 * An fp16 / bf16 filter (a constant kept in its type, xnn_graph.h) is
 * widened at prepare and packed into the same float32 panels: the packed
 * copy is twice the filter's bytes in the file, whose pages are handed back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/conv_plan.h"
#include "backends/xnnpack/nodes.h"
#include "backends/xnnpack/qnodes.h"
#include "core/parallel.h"
#include "kernels/convert/convert16.h"
#include "kernels/conv/dwconv.h"
#include "kernels/conv/winograd.h"
#include "kernels/gemm/gemm.h"
#include "kernels/shape/strided.h"

/* Largest stride, dilation, kernel or padding accepted: keeps every size
 * computed from them far inside int64. */
#define CONV_PARAM_MAX (1u << 24)

/* ---- checks and plan ---------------------------------------------------- */

/* Output size of one spatial dim; -1 when the dilated kernel does not fit
 * the padded input (plain) or the result is not positive (transposed). */
static int64_t conv_out_size(const conv_plan *p, int64_t in, bool height) {
  int64_t k = height ? p->KH : p->KW, d = height ? p->dh : p->dw, s = height ? p->sh : p->sw;
  int64_t pad = height ? p->pt + p->pb : p->pl + p->pr, adj = height ? p->ah : p->aw;
  int64_t eff = d * (k - 1) + 1;
  if (p->kind == CONV_TRANSPOSED) {
    int64_t o = s * (in - 1) + adj + eff - pad;
    return in >= 1 && o >= 1 ? o : -1;
  }
  if (in + pad < eff) return -1;
  return (in + pad - eff) / s + 1;
}

/* The packed-weight cache's tag for a convolution plan's data. */
#define CACHE_CONV 0x564e4350u /* "PCNV" */

static int conv_prepare(px_ctx *ctx, xnn_node *node, xnn_value *values, int kind) {
  const xnn_value *x = &values[node->in[0]], *f = &values[node->in[1]];
  const xnn_value *y = &values[node->out[0]];
  const xnn_value *b = node->in[2] == XNN_INVALID_ID ? NULL : &values[node->in[2]];
  const uint32_t pr[] = {node->p.conv.padding_top, node->p.conv.padding_right,
                         node->p.conv.padding_bottom, node->p.conv.padding_left,
                         node->p.conv.kernel_height, node->p.conv.kernel_width,
                         node->p.conv.subsampling_height, node->p.conv.subsampling_width,
                         node->p.conv.dilation_height, node->p.conv.dilation_width,
                         node->p.conv.group_input_channels, node->p.conv.group_output_channels,
                         node->p.conv.groups, node->p.conv.adjustment_height,
                         node->p.conv.adjustment_width};
  for (size_t k = 0; k < sizeof pr / sizeof pr[0]; k++)
    if (pr[k] > CONV_PARAM_MAX)
      return px_fail(ctx, "parameter %u exceeds %u", pr[k], CONV_PARAM_MAX);
  conv_plan p = {0};
  p.kind = kind;
  p.pt = pr[0], p.pr = pr[1], p.pb = pr[2], p.pl = pr[3];
  p.KH = pr[4], p.KW = pr[5], p.sh = pr[6], p.sw = pr[7], p.dh = pr[8], p.dw = pr[9];
  p.Cin_g = pr[10], p.Cout_g = pr[11], p.G = pr[12], p.ah = pr[13], p.aw = pr[14];
  if (!p.KH || !p.KW || !p.sh || !p.sw || !p.dh || !p.dw)
    return px_fail(ctx, "kernel %lldx%lld, stride %lldx%lld and dilation %lldx%lld must be "
                   "positive", (long long)p.KH, (long long)p.KW, (long long)p.sh,
                   (long long)p.sw, (long long)p.dh, (long long)p.dw);
  if (!p.G || !p.Cin_g || !p.Cout_g)
    return px_fail(ctx, "groups (%lld) and channels per group (%lld in, %lld out) must be "
                   "positive", (long long)p.G, (long long)p.Cin_g, (long long)p.Cout_g);
  if (kind != CONV_TRANSPOSED && (p.ah || p.aw))
    return px_fail(ctx, "adjustment is only for ConvTranspose2d");
  if (kind == CONV_TRANSPOSED && (p.ah >= p.sh || p.aw >= p.sw))
    return px_fail(ctx, "adjustment %lldx%lld must be smaller than the stride %lldx%lld",
                   (long long)p.ah, (long long)p.aw, (long long)p.sh, (long long)p.sw);
  if (kind == CONV_DEPTHWISE && p.Cin_g != 1)
    return px_fail(ctx, "group_input_channels must be 1, got %lld", (long long)p.Cin_g);
  p.Cin = p.G * p.Cin_g;
  p.Cout = p.G * p.Cout_g;
  if (p.Cout > CONV_PARAM_MAX || p.Cin > CONV_PARAM_MAX || p.KH * p.KW > CONV_PARAM_MAX)
    return px_fail(ctx, "%lld groups x channels or a %lldx%lld kernel is too large",
                   (long long)p.G, (long long)p.KH, (long long)p.KW);
  /* values: NHWC input and output, the filter a constant of the layout's dims */
  if (x->num_dims != 4 || y->num_dims != 4)
    return px_fail(ctx, "input and output must be 4-D (NHWC), got %u and %u dims",
                   x->num_dims, y->num_dims);
  const bool half_filter = f->datatype == XNN_DT_FP16 || f->datatype == XNN_DT_BF16;
  if (x->datatype != XNN_DT_FP32 || y->datatype != XNN_DT_FP32 || (f->datatype != XNN_DT_FP32 && !half_filter) ||
      (b && b->datatype != XNN_DT_FP32))
    return px_fail(ctx, "only fp32 input, filter, bias and output (or an fp16 / bf16 filter) are supported");
  int64_t fd[4] = {p.Cout, p.KH, p.KW, p.Cin_g};
  if (kind == CONV_DEPTHWISE) fd[0] = 1, fd[3] = p.Cout;
  if (f->num_dims != 4 || f->max_dims[0] != fd[0] || f->max_dims[1] != fd[1] ||
      f->max_dims[2] != fd[2] || f->max_dims[3] != fd[3])
    return px_fail(ctx, "filter must have dims [%lld, %lld, %lld, %lld] for %lld groups of "
                   "%lld -> %lld channels", (long long)fd[0], (long long)fd[1],
                   (long long)fd[2], (long long)fd[3], (long long)p.G, (long long)p.Cin_g,
                   (long long)p.Cout_g);
  int64_t fn = fd[0] * fd[1] * fd[2] * fd[3];
  const size_t fes = half_filter ? 2 : sizeof(float);
  if (!f->constant || f->constant_size < (size_t)fn * fes)
    return px_fail(ctx, "the filter must be a constant of %lld %s values", (long long)fn,
                   xnn_datatype_name(f->datatype));
  int64_t bn = 1;
  if (b)
    for (uint32_t k = 0; k < b->num_dims; k++) bn *= b->max_dims[k];
  if (b && (!b->constant || bn != p.Cout || b->constant_size < (size_t)p.Cout * sizeof(float)))
    return px_fail(ctx, "the bias must be a constant of %lld floats", (long long)p.Cout);
  if (x->max_dims[3] != p.Cin)
    return px_fail(ctx, "input has %lld channels, the node expects %lld (%lld groups of %lld)",
                   (long long)x->max_dims[3], (long long)p.Cin, (long long)p.G,
                   (long long)p.Cin_g);
  if (y->max_dims[3] != p.Cout)
    return px_fail(ctx, "output has %lld channels, the node computes %lld",
                   (long long)y->max_dims[3], (long long)p.Cout);
  int64_t oh = conv_out_size(&p, x->max_dims[1], true);
  int64_t ow = conv_out_size(&p, x->max_dims[2], false);
  if (oh < 0 || ow < 0)
    return px_fail(ctx, "a %lldx%lld kernel (dilation %lldx%lld, padding %lld/%lld/%lld/%lld) "
                   "gives no output for a %lldx%lld input", (long long)p.KH, (long long)p.KW,
                   (long long)p.dh, (long long)p.dw, (long long)p.pt, (long long)p.pr,
                   (long long)p.pb, (long long)p.pl, (long long)x->max_dims[1],
                   (long long)x->max_dims[2]);
  /* Float16 arithmetic (nodes_f16n.c) where the backend marked the node and
   * its operands are float16: the float16 plan replaces all of what follows. */
  if (node->f16n) {
    p.kind = kind;
    int rc = xnn_f16n_prepare_conv(ctx, node, values, &p);
    if (rc || node->f16n) return rc;
  }
  /* A depthwise convolution of a one-channel input (one group, a depth
   * multiplier of Cout) is a plain convolution with one input channel: with
   * a kernel of several taps it runs as one, through the GEMM (the taps x
   * channels filter is the GEMM's B as it stands), where the depthwise
   * engine would walk the whole kernel once per output channel. */
  const bool dw_as_gemm = kind == CONV_DEPTHWISE && p.G == 1 && p.KH * p.KW >= 8;
  if (dw_as_gemm) kind = p.kind = CONV_PLAIN;
  /* ---- pack ---- */
  /* An fp16 / bf16 filter is widened into a temporary float32 copy, packed
   * like a float32 one, and its file pages handed back. */
  float *wide = NULL;
  if (half_filter) {
    if (!(wide = malloc(sizeof(float) * (size_t)fn + 1)))
      return px_fail(ctx, "out of memory widening a %lld-element filter", (long long)fn);
    if (f->datatype == XNN_DT_FP16)
      px_f16_to_f32(wide, f->constant, fn);
    else
      px_bf16_to_f32(wide, f->constant, fn);
  }
  const float *fw = half_filter ? wide : f->constant;
  size_t wfloats;
  p.direct = false;
  if (kind == CONV_PLAIN) {
    p.K = p.KH * p.KW * p.Cin_g;
    p.wg = px_gemm_f32_prepack_size(p.Cout_g, p.K) / sizeof(float);
    p.direct = p.KH == 1 && p.KW == 1 && p.sh == 1 && p.sw == 1 && !p.pt && !p.pl && !p.pb && !p.pr;
  } else if (kind == CONV_TRANSPOSED) {
    p.K = p.Cin_g;
    p.wg = px_gemm_f32_prepack_size(p.KH * p.KW * p.Cout_g, p.K) / sizeof(float);
  } else {
    p.K = p.KH * p.KW;
    p.wg = (size_t)fn;
  }
  /* 3x3 stride-1 layers with enough channels keep the filter transformed
   * for Winograd instead (winograd.h says which), and run through it: the
   * switch is read once per process, so the direct filter would never be
   * read and is not packed */
  const bool wino = kind == CONV_PLAIN &&
                    px_wino_applicable(p.G, p.Cin_g, p.Cout_g, p.KH, p.KW, p.sh, p.sw, p.dh, p.dw);
  /* one packed filter per group; a depthwise filter is copied whole (wg = all of it) */
  wfloats = wino ? 0 : kind == CONV_DEPTHWISE ? p.wg : p.wg * (size_t)p.G;
  size_t head = (sizeof(conv_plan) + 63) / 64 * 64, bias_b = ((size_t)p.Cout * 4 + 63) / 64 * 64;
  const size_t wino_b = wino ? px_wino_packed_size(p.Cin, p.Cout) : 0;
  size_t total = head + bias_b + (wfloats * 4 + 63) / 64 * 64 + wino_b;
  if (wfloats > ((size_t)1 << 40) / 4) {
    free(wide);
    return px_fail(ctx, "packed weights of %zu floats are too large", wfloats);
  }
  /* The plan's data (bias, packed or transformed filter) from the packed-
   * weight cache when it holds this node's: the plan head then points into
   * the cache's mapping, and nothing is packed or transformed. */
  const size_t body = total - head;
  const void *entry = xnn_cache_take(CACHE_CONV, body);
  if (entry) {
    conv_plan *plan = malloc(sizeof *plan);
    if (!plan) {
      free(wide);
      return px_fail(ctx, "out of memory for a convolution's plan");
    }
    char *m = (char *)(uintptr_t)entry;
    *plan = p;
    plan->bias = (float *)m;
    plan->w = wino ? NULL : (float *)(m + bias_b);
    plan->wino = wino ? (float *)(m + bias_b + (wfloats * 4 + 63) / 64 * 64) : NULL;
    if (half_filter) free(wide);
    px_drop_file_pages(f->constant, f->constant_size);
    xnn_set_packed(node, plan, sizeof *plan, false);
    return 0;
  }
  char *mem = aligned_alloc(64, total);
  if (!mem) {
    free(wide);
    return px_fail(ctx, "out of memory packing %zu bytes of weights", total);
  }
  conv_plan *plan = (conv_plan *)mem;
  *plan = p;
  plan->bias = (float *)(mem + head);
  plan->w = wino ? NULL : (float *)(mem + head + bias_b);
  plan->wino = wino ? (float *)(mem + head + bias_b + (wfloats * 4 + 63) / 64 * 64) : NULL;
  if (wino && !px_wino_pack(p.Cin, p.Cout, fw, 9 * p.Cin, 1, p.Cin, plan->wino)) {
    free(mem);
    free(wide);
    return px_fail(ctx, "out of memory transforming a %lld -> %lld channel filter",
                   (long long)p.Cin, (long long)p.Cout);
  }
  if (b)
    memcpy(plan->bias, b->constant, (size_t)p.Cout * sizeof(float));
  else
    memset(plan->bias, 0, (size_t)p.Cout * sizeof(float));
  if (wino) {
    /* transformed above */
  } else if (dw_as_gemm) {
    /* B(k, j) = filter[0][k][j]: row stride Cout, column stride 1 */
    px_gemm_f32_prepack_b(p.Cout, p.K, fw, p.Cout, 1, plan->w);
  } else if (kind == CONV_PLAIN) {
    /* B(k, j) = filter[g*Cout_g + j][k]: row stride 1, column stride K */
    for (int64_t g = 0; g < p.G; g++)
      px_gemm_f32_prepack_b(p.Cout_g, p.K, fw + g * p.Cout_g * p.K, 1, p.K, plan->w + g * p.wg);
  } else if (kind == CONV_TRANSPOSED) {
    /* B(ic, t*Cout_g + oc) = filter[g*Cout_g + oc][t][ic], through a
     * row-major copy */
    int64_t KK = p.KH * p.KW, N = KK * p.Cout_g;
    float *tmp = malloc(sizeof(float) * (size_t)(N * p.Cin_g));
    if (!tmp) {
      free(mem);
      free(wide);
      return px_fail(ctx, "out of memory packing weights");
    }
    for (int64_t g = 0; g < p.G; g++) {
      for (int64_t oc = 0; oc < p.Cout_g; oc++)
        for (int64_t t = 0; t < KK; t++) {
          const float *src = fw + ((g * p.Cout_g + oc) * KK + t) * p.Cin_g;
          for (int64_t ic = 0; ic < p.Cin_g; ic++) tmp[ic * N + t * p.Cout_g + oc] = src[ic];
        }
      px_gemm_f32_prepack_b(N, p.Cin_g, tmp, N, 1, plan->w + g * p.wg);
    }
    free(tmp);
  } else {
    memcpy(plan->w, fw, (size_t)fn * sizeof(float));
  }
  /* The run reads only the plan: the file's pages of the filter go back
   * (as the fully connected layer's do), so the program is not resident
   * beside its packed or transformed copy. */
  if (half_filter) free(wide);
  px_drop_file_pages(f->constant, f->constant_size);
  xnn_cache_put(CACHE_CONV, mem + head, body);
  xnn_set_packed(node, plan, total, false);
  return 0;
}

int xnn_prepare_conv2d(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  return conv_prepare(ctx, node, values, CONV_PLAIN);
}
int xnn_prepare_depthwise_conv2d(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  return conv_prepare(ctx, node, values, CONV_DEPTHWISE);
}
int xnn_prepare_conv_transpose2d(px_ctx *ctx, xnn_node *node, xnn_value *values) {
  return conv_prepare(ctx, node, values, CONV_TRANSPOSED);
}

/* ---- shape ----------------------------------------------------------------- */

static int conv_shape(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const conv_plan *p = node->packed;
  if (!p) return px_fail(ctx, "convolution was not prepared");
  const xnn_value *x = &values[node->in[0]];
  xnn_value *y = &values[node->out[0]];
  if (x->dims[3] != p->Cin)
    return px_fail(ctx, "input has %lld channels, expected %lld", (long long)x->dims[3],
                   (long long)p->Cin);
  int64_t d[4] = {x->dims[0], conv_out_size(p, x->dims[1], true),
                  conv_out_size(p, x->dims[2], false), p->Cout};
  if (d[1] < 0 || d[2] < 0)
    return px_fail(ctx, "the kernel does not fit a %lldx%lld input",
                   (long long)x->dims[1], (long long)x->dims[2]);
  for (int k = 0; k < 4; k++)
    if (d[k] > y->max_dims[k])
      return px_fail(ctx, "output dim %d would be %lld, above its bound %lld", k,
                     (long long)d[k], (long long)y->max_dims[k]);
  return xnn_set_dims(ctx, node, y, 4, d);
}

int xnn_shape_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return conv_shape(ctx, node, values);
}
int xnn_shape_depthwise_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return conv_shape(ctx, node, values);
}
int xnn_shape_conv_transpose2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  return conv_shape(ctx, node, values);
}

/* ---- shared epilogue --------------------------------------------------------- */

typedef float v4f __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef int32_t v4i __attribute__((vector_size(16)));
/* a where m is false, b where m is true (m a comparison's all-ones mask). */
#define VSEL(VT, VI, m, a, b) ((VT)((((VI)(a)) & ~(m)) | (((VI)(b)) & (m))))

/* y[0..n) clamped to [lo, hi] (skipped when both are infinite); NaN stays. */
static void clamp_rows(float *y, int64_t n, float lo, float hi) {
  if (lo == -INFINITY && hi == INFINITY) return;
  const v4f vlo = (v4f){0} + lo, vhi = (v4f){0} + hi;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f v = *(v4f_u *)(y + i);
    v = VSEL(v4f, v4i, v < vlo, v, vlo);
    *(v4f_u *)(y + i) = VSEL(v4f, v4i, v > vhi, v, vhi);
  }
  for (; i < n; i++) {
    float v = y[i];
    v = v < lo ? lo : v;
    y[i] = v > hi ? hi : v;
  }
}

/* Rows per tile: about 128 KiB of output, a multiple of 24 (the engine's
 * row panels are 8, 6 or 4 high), at least 24. */
static int64_t tile_rows(int64_t row_floats) {
  int64_t t = (32768 / (row_floats > 0 ? row_floats : 1)) / 24 * 24;
  return t < 24 ? 24 : t > 960 ? 960 : t;
}

/* ---- Conv2d ------------------------------------------------------------------ */

/* Implicit im2col of one group over the NHWC input: row r = (n, oh, ow)
 * (counted from row0), depth k = (ki*KW + kj)*Cin_g + c. */
typedef struct im2col_src {
  const conv_plan *p;
  const float *x; /* input + the group's first channel */
  int64_t H, W, OH, OW, row0;
} im2col_src;

#define IM2COL_MR_MAX PX_GEMM_MR_MAX /* the engine's tallest row panel */

static void im2col_pack(const void *src, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int mr,
                        float *pa) {
  const im2col_src *s = src;
  const conv_plan *p = s->p;
  const int64_t Cg = p->Cin_g, Cin = p->Cin, OHW = s->OH * s->OW, H = s->H, W = s->W;
  static const float zeros[1] = {0.0f};
  for (int64_t i0 = 0; i0 < mc; i0 += mr, pa += (int64_t)mr * kc) {
    int m = (int)(mc - i0 < mr ? mc - i0 : mr);
    /* each row's image and window origin, once per panel */
    const float *xn[IM2COL_MR_MAX];
    int64_t ih0[IM2COL_MR_MAX], iw0[IM2COL_MR_MAX];
    for (int i = 0; i < m; i++) {
      int64_t r = s->row0 + ic + i0 + i, rem = r % OHW;
      xn[i] = s->x + r / OHW * H * W * Cin;
      ih0[i] = rem / s->OW * p->sh - p->pt;
      iw0[i] = rem % s->OW * p->sw - p->pl;
    }
    /* one kernel row is contiguous in the input when every channel is in
     * the group and taps are adjacent (no column dilation) */
    const bool rows_contig = Cg == Cin && p->dw == 1;
    int64_t t = pc / Cg, c = pc % Cg;
    for (int64_t q = 0; q < kc;) {
      int64_t len = Cg - c < kc - q ? Cg - c : kc - q;
      int64_t dih = t / p->KW * p->dh, diw = t % p->KW * p->dw;
      if (rows_contig && m == mr && p->KW - t % p->KW > 1) {
        /* the rest of kernel row t / KW at once, when every row's span of it
         * is inside the input */
        int64_t run = (p->KW - t % p->KW) * Cg - c, L = run < kc - q ? run : kc - q;
        int64_t last = diw + (c + L - 1) / Cg; /* column offset of the last tap touched */
        const float *sp[IM2COL_MR_MAX];
        bool inside = true;
        for (int i = 0; i < mr && inside; i++) {
          int64_t ih = ih0[i] + dih;
          inside = ih >= 0 && ih < H && iw0[i] + diw >= 0 && iw0[i] + last < W;
          if (inside) sp[i] = xn[i] + (ih * W + iw0[i] + diw) * Cin + c;
        }
        if (inside) {
          float *d = pa + q * mr;
          if (mr == 8) {
            const float *s0 = sp[0], *s1 = sp[1], *s2 = sp[2], *s3 = sp[3], *s4 = sp[4];
            const float *s5 = sp[5], *s6 = sp[6], *s7 = sp[7];
            for (int64_t e = 0; e < L; e++, d += 8) {
              d[0] = s0[e], d[1] = s1[e], d[2] = s2[e], d[3] = s3[e];
              d[4] = s4[e], d[5] = s5[e], d[6] = s6[e], d[7] = s7[e];
            }
          } else if (mr == 6) {
            const float *s0 = sp[0], *s1 = sp[1], *s2 = sp[2], *s3 = sp[3], *s4 = sp[4];
            const float *s5 = sp[5];
            for (int64_t e = 0; e < L; e++, d += 6) {
              d[0] = s0[e], d[1] = s1[e], d[2] = s2[e];
              d[3] = s3[e], d[4] = s4[e], d[5] = s5[e];
            }
          } else {
            for (int64_t e = 0; e < L; e++, d += mr)
              for (int i = 0; i < mr; i++) d[i] = sp[i][e];
          }
          q += L;
          t += (c + L) / Cg;
          c = (c + L) % Cg;
          continue;
        }
      }
      /* the tap's input pixel for every row (a zero source in the padding,
       * read with step 0) */
      const float *sp[IM2COL_MR_MAX];
      int64_t step[IM2COL_MR_MAX];
      bool all_in = true;
      for (int i = 0; i < mr; i++) {
        int64_t ih = i < m ? ih0[i] + dih : -1, iw = i < m ? iw0[i] + diw : -1;
        bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
        sp[i] = in ? xn[i] + (ih * W + iw) * Cin + c : zeros;
        step[i] = in;
        all_in = all_in && in;
      }
      float *d = pa + q * mr;
      if (all_in && mr == 8) {
        const float *s0 = sp[0], *s1 = sp[1], *s2 = sp[2], *s3 = sp[3], *s4 = sp[4], *s5 = sp[5];
        const float *s6 = sp[6], *s7 = sp[7];
        for (int64_t e = 0; e < len; e++, d += 8) {
          d[0] = s0[e], d[1] = s1[e], d[2] = s2[e], d[3] = s3[e];
          d[4] = s4[e], d[5] = s5[e], d[6] = s6[e], d[7] = s7[e];
        }
      } else if (all_in && mr == 6) {
        const float *s0 = sp[0], *s1 = sp[1], *s2 = sp[2], *s3 = sp[3], *s4 = sp[4], *s5 = sp[5];
        for (int64_t e = 0; e < len; e++, d += 6) {
          d[0] = s0[e], d[1] = s1[e], d[2] = s2[e];
          d[3] = s3[e], d[4] = s4[e], d[5] = s5[e];
        }
      } else if (all_in) {
        for (int64_t e = 0; e < len; e++, d += mr)
          for (int i = 0; i < mr; i++) d[i] = sp[i][e];
      } else {
        for (int64_t e = 0; e < len; e++, d += mr)
          for (int i = 0; i < mr; i++) d[i] = sp[i][e * step[i]];
      }
      q += len;
      c += len;
      if (c == Cg) t++, c = 0;
    }
  }
}

const char *xnn_conv2d_profile_name(const xnn_node *node) {
  static const char *const names[2][3] = {
      {"Conv2d [direct]", "Conv2d [direct, SiLU]", "Conv2d [direct, Hardswish]"},
      {"Conv2d [winograd F(2x2,3x3)]", "Conv2d [winograd F(2x2,3x3), SiLU]",
       "Conv2d [winograd F(2x2,3x3), Hardswish]"}};
  const conv_plan *p = node->packed;
  return names[p && p->wino][node->post <= XNN_POST_HARDSWISH ? node->post : 0];
}

/* The largest input (floats, padding included) the indirect path reads from
 * a zero-padded copy: a few L1-sized copies cost less than the border tiles'
 * gathers they save. */
#define PAD_COPY_MAX 16384

int xnn_exec_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const conv_plan *p = node->packed;
  if (p->f16n) return xnn_f16n_exec_conv(ctx, node, values);
  const xnn_value *xv = &values[node->in[0]], *yv = &values[node->out[0]];
  const float *x = xv->data;
  float *y = yv->data;
  const int64_t H = xv->dims[1], W = xv->dims[2], OH = yv->dims[1], OW = yv->dims[2];
  const int64_t M = yv->dims[0] * OH * OW, Cout = p->Cout, Cg = p->Cout_g;
  if (M == 0) return 0;
  if (p->wino) {
    px_wino_geom wg = {yv->dims[0], H, W, p->Cin, Cout, OH, OW, p->pt, p->pl};
    int rc = px_wino_conv_nhwc(ctx, &wg, x, p->wino, p->bias, node->output_min, node->output_max, y);
    if (!rc) xnn_post_all(node, y, M * Cout);
    return rc;
  }
  /* One thread: tiles of rows whose outputs stay in cache. More: every row
   * in one product, which the GEMM cuts into row blocks for the threads
   * (tiles of a few row blocks each left threads idle at each tile's end:
   * 5 blocks on 2 threads ran at 0.6 of ideal). Each output is computed the
   * same way however the rows are cut. */
  const int64_t T = px_parallel_threads() > 1 ? M : tile_rows(Cout);
  /* Input channels read in place through tap pointers where the engine can
   * (no im2col rows packed). A few channels per tap make short runs between
   * pointer loads, so those keep the packed path, unless the group is the
   * whole pixel and taps are adjacent: then a kernel row is one run. */
  const bool indirect = !p->direct && px_gemm_f32_conv_available() &&
                        (p->Cin_g >= 8 || (p->G == 1 && p->dw == 1 && p->KW * p->Cin_g >= 8));
  void *work = px_scratch(ctx, px_gemm_f32_work_size(T, Cg, p->K));
  if (!work) return PYEXEC_ERR_EXECUTION;
  /* A small padded input with short kernel rows is read from a zero-padded
   * copy: every window then lies inside it, and no tile on the border
   * gathers its kernel rows into a buffer (half the tiles of a 32-pixel-wide
   * image with 8-pixel tiles, whose 3-channel rows are only 9 deep). */
  int64_t Hx = H, Wx = W, pt = p->pt, pl = p->pl;
  if (indirect && (p->pt | p->pl | p->pb | p->pr) && p->KW * p->Cin_g <= 64 &&
      yv->dims[0] * (H + p->pt + p->pb) * (W + p->pl + p->pr) * p->Cin <= PAD_COPY_MAX) {
    Hx = H + p->pt + p->pb, Wx = W + p->pl + p->pr, pt = 0, pl = 0;
    float *xp = px_scratch(ctx, sizeof(float) * (size_t)(yv->dims[0] * Hx * Wx * p->Cin));
    if (!xp) return PYEXEC_ERR_EXECUTION;
    px_pad_nhwc(xp, x, yv->dims[0], H, W, sizeof(float) * (size_t)p->Cin, p->pt, p->pl, p->pb, p->pr, 0);
    x = xp;
  }
  for (int64_t r0 = 0; r0 < M; r0 += T) {
    int64_t rows = M - r0 < T ? M - r0 : T;
    float *yt = y + r0 * Cout;
    for (int64_t g = 0; g < p->G; g++) {
      /* bias and clamp on each tile as the engine stores it */
      px_gemm_epilogue ep = {p->bias + g * Cg, node->output_min, node->output_max, false, xnn_post_fn(node)};
      int rc;
      if (p->direct) {
        rc = px_gemm_f32_prepacked_ep(ctx, work, rows, Cg, p->K, x + r0 * p->Cin + g * p->Cin_g,
                                      p->Cin, 1, NULL, NULL, p->w + g * p->wg, 0.0f, yt + g * Cg,
                                      Cout, &ep);
      } else if (indirect) {
        px_gemm_conv cv = {x + g * p->Cin_g, Hx * Wx * p->Cin, Hx, Wx, p->Cin, p->Cin_g, p->KH, p->KW,
                           p->sh, p->sw, p->dh, p->dw, pt, pl, OH, OW, r0};
        rc = px_gemm_f32_conv(ctx, work, &cv, rows, Cg, p->w + g * p->wg, yt + g * Cg, Cout, &ep);
      } else {
        im2col_src s = {p, x + g * p->Cin_g, H, W, OH, OW, r0};
        rc = px_gemm_f32_prepacked_ep(ctx, work, rows, Cg, p->K, NULL, 0, 0, im2col_pack, &s,
                                      p->w + g * p->wg, 0.0f, yt + g * Cg, Cout, &ep);
      }
      if (rc) return rc;
    }
  }
  return 0;
}

/* ---- DepthwiseConv2d ------------------------------------------------------------ */

/* The filter [1, KH, KW, C*M] is taps x channels already: the engine
 * (kernels/dwconv.c) reads it as packed at prepare, with the bias. */
int xnn_exec_depthwise_conv2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const conv_plan *p = node->packed;
  if (p->f16n) return xnn_f16n_exec_conv(ctx, node, values);
  if (p->kind == CONV_PLAIN) return xnn_exec_conv2d(ctx, node, values); /* one input channel (prepare) */
  const xnn_value *xv = &values[node->in[0]], *yv = &values[node->out[0]];
  px_dwconv d = {xv->dims[0], xv->dims[1], xv->dims[2], p->Cin, p->Cout_g, p->KH, p->KW,
                 p->sh, p->sw, p->dh, p->dw, p->pt, p->pl, yv->dims[1], yv->dims[2],
                 p->w, p->bias, node->output_min, node->output_max, xnn_post_fn(node)};
  return px_dwconv_nhwc(ctx, &d, xv->data, yv->data);
}

/* ---- ConvTranspose2d ----------------------------------------------------------- */

int xnn_exec_conv_transpose2d(px_ctx *ctx, const xnn_node *node, xnn_value *values) {
  const conv_plan *p = node->packed;
  const xnn_value *xv = &values[node->in[0]], *yv = &values[node->out[0]];
  const float *x = xv->data;
  float *y = yv->data;
  const int64_t N = xv->dims[0], H = xv->dims[1], W = xv->dims[2];
  const int64_t OH = yv->dims[1], OW = yv->dims[2], Cout = p->Cout, Cg = p->Cout_g;
  const int64_t KK = p->KH * p->KW, NB = KK * Cg, M = N * H * W;
  for (int64_t r = 0; r < N * OH * OW; r++)
    memcpy(y + r * Cout, p->bias, sizeof(float) * (size_t)Cout);
  if (M == 0) return 0;
  const int64_t T = tile_rows(NB);
  float *col = px_scratch(ctx, sizeof(float) * (size_t)(T * NB));
  void *work = px_scratch(ctx, px_gemm_f32_work_size(T, NB, p->K));
  if (!col || !work) return PYEXEC_ERR_EXECUTION;
  for (int64_t r0 = 0; r0 < M; r0 += T) {
    int64_t rows = M - r0 < T ? M - r0 : T;
    for (int64_t g = 0; g < p->G; g++) {
      int rc = px_gemm_f32_prepacked(ctx, work, rows, NB, p->K, x + r0 * p->Cin + g * p->Cin_g,
                                     p->Cin, 1, NULL, NULL, p->w + g * p->wg, 0.0f, col, NB);
      if (rc) return rc;
      for (int64_t r = 0; r < rows; r++) {
        int64_t q = r0 + r, n = q / (H * W), ih = q / W % H, iw = q % W;
        const float *cr = col + r * NB;
        for (int64_t ki = 0; ki < p->KH; ki++) {
          int64_t oh = ih * p->sh - p->pt + ki * p->dh;
          if (oh < 0 || oh >= OH) continue;
          for (int64_t kj = 0; kj < p->KW; kj++) {
            int64_t ow = iw * p->sw - p->pl + kj * p->dw;
            if (ow < 0 || ow >= OW) continue;
            float *o = y + ((n * OH + oh) * OW + ow) * Cout + g * Cg;
            const float *src = cr + (ki * p->KW + kj) * Cg;
            int64_t c = 0;
            for (; c + 4 <= Cg; c += 4) *(v4f_u *)(o + c) += *(const v4f_u *)(src + c);
            for (; c < Cg; c++) o[c] += src[c];
          }
        }
      }
    }
  }
  clamp_rows(y, N * OH * OW * Cout, node->output_min, node->output_max);
  return 0;
}
