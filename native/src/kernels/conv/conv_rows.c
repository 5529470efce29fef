/*
 * conv_rows.c - what the 2-D (conv.c) and 3-D (conv3d.c) convolutions share:
 * the row GEMM with its bias and clamp epilogue over an im2col matrix (or
 * the input itself), the channel and group checks, the output-size rule and
 * the operands' conversion to a working type.
 */
#include <math.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_loops.h"
#include "kernels/gemm/gemm.h"

/* A row-major K x N matrix (element (k, j) at B[k * ld + j]) packed into
 * GEMM panels (a px_gemm_pack_fn): the input itself for 1x1 convolutions,
 * or an explicit im2col matrix. Row by row: contiguous reads. */
typedef struct rows_bsrc {
  const float *B;
  int64_t ld;
} rows_bsrc;

static inline void copy_panel_row(float *d, const float *s, int nr) {
  switch (nr) { /* constant sizes: copied in vector registers, no call */
    case 32: memcpy(d, s, 32 * sizeof(float)); return;
    case 16: memcpy(d, s, 16 * sizeof(float)); return;
    case 8: memcpy(d, s, 8 * sizeof(float)); return;
    default:
      for (int j = 0; j < nr; j++) d[j] = s[j];
  }
}

static void pack_b_rows(const void *src, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int nr,
                        float *pb) {
  const rows_bsrc *s = src;
  const int64_t pstride = (int64_t)nr * kc; /* floats between panels */
  for (int64_t p = 0; p < kc; p++) {
    const float *sp = s->B + (pc + p) * s->ld + jc;
    float *d = pb + p * nr;
    int64_t j0 = 0;
    for (; j0 + nr <= nc; j0 += nr, d += pstride) copy_panel_row(d, sp + j0, nr);
    if (j0 < nc) {
      int n = (int)(nc - j0);
      for (int j = 0; j < n; j++) d[j] = sp[j0 + j];
      for (int j = n; j < nr; j++) d[j] = 0.0f;
    }
  }
}

/* C (M x N, row-major, M output channels) = A @ B + bias per row, clamped:
 * B a row-major K x N matrix. Products of at least PX_GEMM_MR_MAX rows add
 * the bias and clamp in the GEMM's tile epilogue, while each tile is in
 * cache; fewer rows take px_gemm_f32's unpacked path (the bias written
 * first and accumulated onto, the clamp after). */
int px_conv_gemm_rows(px_ctx *ctx, void *work, int64_t M, int64_t N, int64_t K, const float *A,
                      const float *B, const float *bias, float lo, float hi, float *C) {
  const bool clamp = !(lo == -INFINITY && hi == INFINITY);
  if (M >= PX_GEMM_MR_MAX) {
    rows_bsrc rs = {B, N};
    px_gemm_epilogue e = {bias, lo, hi, true, NULL};
    return px_gemm_f32_packed_ep(ctx, work, M, N, K, 1.0f, A, K, 1, pack_b_rows, &rs, 0.0f, C, N,
                                 &e);
  }
  if (bias)
    for (int64_t c = 0; c < M; c++) fill_f32(N, bias[c], C + c * N);
  int rc = px_gemm_f32(ctx, work, M, N, K, 1.0f, A, K, 1, B, N, 1, bias ? 1.0f : 0.0f, C, N);
  if (!rc && clamp) clamp_f32(M * N, lo, hi, C);
  return rc;
}

/* Channels of a convolution from its input and weight (transposed: weight
 * [Cin, Cout / groups, ...], else [Cout, Cin / groups, ...]), checked
 * against groups and the bias. Shared by the 2-D and 3-D paths. */
int px_conv_check_channels(px_ctx *ctx, const px_tensor *in, const px_tensor *w,
                           const px_tensor *bias, bool transposed, int64_t groups,
                           px_conv_channels *ch) {
  ch->Cin = in->sizes[1];
  if (ch->Cin % groups)
    return px_fail(ctx, "input channels (%lld) are not divisible by groups (%lld)",
                   (long long)ch->Cin, (long long)groups);
  ch->Cin_g = ch->Cin / groups;
  if (!transposed) {
    ch->Cout = w->sizes[0];
    if (ch->Cout % groups)
      return px_fail(ctx, "output channels (%lld) are not divisible by groups (%lld)",
                     (long long)ch->Cout, (long long)groups);
    ch->Cout_g = ch->Cout / groups;
    if (w->sizes[1] != ch->Cin_g)
      return px_fail(ctx, "weight expects %lld input channels per group, input has %lld",
                     (long long)w->sizes[1], (long long)ch->Cin_g);
  } else {
    if (w->sizes[0] != ch->Cin)
      return px_fail(ctx, "transposed weight has %lld input channels, input has %lld",
                     (long long)w->sizes[0], (long long)ch->Cin);
    ch->Cout_g = w->sizes[1];
    ch->Cout = ch->Cout_g * groups;
  }
  if (bias && (bias->dim != 1 || bias->sizes[0] != ch->Cout))
    return px_fail(ctx, "bias must have shape [%lld], got %d dims with %lld elements",
                   (long long)ch->Cout, bias->dim, (long long)bias->numel);
  return 0;
}

int px_conv_out_size(px_ctx *ctx, int64_t in, int64_t k, int64_t st, int64_t pd, int64_t dl,
                     int64_t op, bool transposed, int64_t *out) {
  int64_t eff = dl * (k - 1) + 1;
  if (!transposed) {
    if (in + 2 * pd < eff)
      return px_fail(ctx, "input size %lld (padded %lld) is smaller than the dilated kernel "
                     "size %lld", (long long)in, (long long)(in + 2 * pd), (long long)eff);
    *out = (in + 2 * pd - eff) / st + 1;
    return 0;
  }
  *out = (in - 1) * st - 2 * pd + eff + op;
  if (*out <= 0) return px_fail(ctx, "computed output size %lld is not positive", (long long)*out);
  return 0;
}

int px_conv_widen(px_ctx *ctx, const px_tensor *in, const px_tensor *w, const px_tensor *bias,
                  const px_tensor *out, int wide, px_conv_widened *o) {
  size_t es = px_elsize(wide);
  o->in = px_scratch(ctx, es * (size_t)(in->numel + 1));
  o->w = px_scratch(ctx, es * (size_t)(w->numel + 1));
  o->bias = bias ? px_scratch(ctx, es * (size_t)(bias->numel + 1)) : NULL;
  o->out = px_scratch(ctx, es * (size_t)out->numel);
  if (!o->in || !o->w || (bias && !o->bias) || !o->out) return PYEXEC_ERR_EXECUTION;
  px_convert(o->in, wide, in->data, in->dtype, in->numel);
  px_convert(o->w, wide, w->data, w->dtype, w->numel);
  if (bias) px_convert(o->bias, wide, bias->data, bias->dtype, bias->numel);
  return 0;
}
