/*
 * conv3d.c - aten::convolution.out on 5-D inputs (video networks such as
 * r3d_18): plain and transposed, grouped, any stride / padding / dilation,
 * every dtype. float32 goes through the GEMM engine (an explicit im2col
 * matrix, or the input itself for 1x1x1 stride-1 convolutions; col2im for
 * transposed ones), float16 / bfloat16 on float32 copies of their operands;
 * other dtypes through plain loops on widened copies.
 * conv.c checks the arguments and hands 5-D inputs here.
 */
#include <math.h>
#include <string.h>

#include "kernels/conv/conv.h"
#include "kernels/gemm/gemm.h"

typedef struct conv3_geom {
  int64_t N, Cin, Cout, G, Cin_g, Cout_g;
  int64_t in[3], k[3], out[3]; /* depth, height, width */
  int64_t s[3], p[3], d[3];
} conv3_geom;

/* Unfolds one group of one image: col[((c*KD + a)*KH + b)*KW + e][(od*OH +
 * oh)*OW + ow] = x[c][od*s0 - p0 + a*d0][oh*s1 - p1 + b*d1][ow*s2 - p2 +
 * e*d2], 0 in the padding. */
static void im2col3_f32(const conv3_geom *g, const float *x, float *col) {
  const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
  const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], OS = OD * OH * OW;
  float *row = col;
  for (int64_t c = 0; c < g->Cin_g; c++)
    for (int64_t a = 0; a < g->k[0]; a++)
      for (int64_t b = 0; b < g->k[1]; b++)
        for (int64_t e = 0; e < g->k[2]; e++, row += OS) {
          const float *xc = x + c * D * H * W;
          int64_t off = e * g->d[2] - g->p[2]; /* iw = ow*s2 + off */
          int64_t lo = off >= 0 ? 0 : (-off + g->s[2] - 1) / g->s[2];
          int64_t hi = W - off <= 0 ? 0 : (W - off - 1) / g->s[2] + 1;
          if (hi > OW) hi = OW;
          if (lo > hi) lo = hi;
          for (int64_t od = 0; od < OD; od++) {
            int64_t id = od * g->s[0] - g->p[0] + a * g->d[0];
            for (int64_t oh = 0; oh < OH; oh++) {
              int64_t ih = oh * g->s[1] - g->p[1] + b * g->d[1];
              float *dst = row + (od * OH + oh) * OW;
              if (id < 0 || id >= D || ih < 0 || ih >= H) {
                memset(dst, 0, sizeof(float) * (size_t)OW);
                continue;
              }
              const float *src = xc + (id * H + ih) * W + off;
              for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
              for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->s[2]];
              for (int64_t ow = hi; ow < OW; ow++) dst[ow] = 0.0f;
            }
          }
        }
}

/* Folds one group of one image back (transposed): out[c][od][oh][ow] +=
 * col[((c*KD + a)*KH + b)*KW + e][(id*H + ih)*W + iw], od = id*s0 - p0 +
 * a*d0 and likewise. */
static void col2im3_f32(const conv3_geom *g, const float *col, float *out) {
  const int64_t D = g->in[0], H = g->in[1], W = g->in[2], IS = D * H * W;
  const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
  const float *row = col;
  for (int64_t c = 0; c < g->Cout_g; c++)
    for (int64_t a = 0; a < g->k[0]; a++)
      for (int64_t b = 0; b < g->k[1]; b++)
        for (int64_t e = 0; e < g->k[2]; e++, row += IS) {
          float *oc = out + c * OD * OH * OW;
          for (int64_t id = 0; id < D; id++) {
            int64_t od = id * g->s[0] - g->p[0] + a * g->d[0];
            if (od < 0 || od >= OD) continue;
            for (int64_t ih = 0; ih < H; ih++) {
              int64_t oh = ih * g->s[1] - g->p[1] + b * g->d[1];
              if (oh < 0 || oh >= OH) continue;
              const float *src = row + (id * H + ih) * W;
              float *dst = oc + (od * OH + oh) * OW;
              for (int64_t iw = 0; iw < W; iw++) {
                int64_t ow = iw * g->s[2] - g->p[2] + e * g->d[2];
                if (ow >= 0 && ow < OW) dst[ow] += src[iw];
              }
            }
          }
        }
}

/* float32: im2col + the GEMM per image and group (the bias in the GEMM's
 * epilogue); transposed: the bias written first, col2im accumulating onto
 * it. */
static int conv3_f32(px_ctx *ctx, const conv3_geom *g, bool transposed, const float *in,
                     const float *w, const float *bias, float *out) {
  const int64_t IS = g->in[0] * g->in[1] * g->in[2], OS = g->out[0] * g->out[1] * g->out[2];
  const int64_t KK = g->k[0] * g->k[1] * g->k[2];
  if (!transposed) {
    const int64_t K = g->Cin_g * KK;
    const bool direct = KK == 1 && g->s[0] == 1 && g->s[1] == 1 && g->s[2] == 1 && !g->p[0] &&
                        !g->p[1] && !g->p[2];
    float *col = direct ? NULL : px_scratch(ctx, sizeof(float) * (size_t)(K * OS));
    void *work = px_scratch(ctx, px_gemm_f32_work_size(g->Cout_g, OS, K));
    if ((!direct && !col) || !work) return PYEXEC_ERR_EXECUTION;
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t gi = 0; gi < g->G; gi++) {
        const float *x = in + (n * g->Cin + gi * g->Cin_g) * IS;
        if (!direct) im2col3_f32(g, x, col);
        int rc = px_conv_gemm_rows(ctx, work, g->Cout_g, OS, K, w + gi * g->Cout_g * K,
                                   direct ? x : col, bias ? bias + gi * g->Cout_g : NULL, -INFINITY,
                                   INFINITY, out + (n * g->Cout + gi * g->Cout_g) * OS);
        if (rc) return rc;
      }
    return 0;
  }
  /* transposed: weight [Cin, Cout_g, KD, KH, KW]; col[R, IS] = wg^T @ x */
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t c = 0; c < g->Cout; c++)
      for (int64_t i = 0; i < OS; i++) out[(n * g->Cout + c) * OS + i] = bias ? bias[c] : 0.0f;
  const int64_t R = g->Cout_g * KK;
  float *col = px_scratch(ctx, sizeof(float) * (size_t)(R * IS));
  void *work = px_scratch(ctx, px_gemm_f32_work_size(R, IS, g->Cin_g));
  if (!col || !work) return PYEXEC_ERR_EXECUTION;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t gi = 0; gi < g->G; gi++) {
      const float *x = in + (n * g->Cin + gi * g->Cin_g) * IS;
      int rc = px_gemm_f32(ctx, work, R, IS, g->Cin_g, 1.0f, w + gi * g->Cin_g * R, 1, R, x, IS, 1,
                           0.0f, col, IS);
      if (rc) return rc;
      col2im3_f32(g, col, out + (n * g->Cout + gi * g->Cout_g) * OS);
    }
  return 0;
}

/* Plain loops for the other dtypes, on widened copies (ACC = double or
 * uint64_t, wrapping like the integer types). */
#define DEFINE_CONV3_NAIVE(NAME, ACC)                                                          \
  static void NAME(const conv3_geom *g, bool transposed, const ACC *in, const ACC *w,         \
                   const ACC *bias, ACC *out) {                                               \
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2], IS = D * H * W;                   \
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], OS = OD * OH * OW;          \
    const int64_t KD = g->k[0], KH = g->k[1], KW = g->k[2], KK = KD * KH * KW;                \
    for (int64_t n = 0; n < g->N; n++)                                                        \
      for (int64_t c = 0; c < g->Cout; c++)                                                   \
        for (int64_t o = 0; o < OS; o++) out[(n * g->Cout + c) * OS + o] = bias ? bias[c] : (ACC)0; \
    for (int64_t n = 0; n < g->N; n++)                                                        \
      for (int64_t ic = 0; ic < g->Cin; ic++) {                                               \
        const int64_t gi = ic / g->Cin_g, icg = ic % g->Cin_g;                                \
        const ACC *x = in + (n * g->Cin + ic) * IS;                                           \
        for (int64_t ocg = 0; ocg < g->Cout_g; ocg++) {                                       \
          const int64_t oc = gi * g->Cout_g + ocg;                                            \
          ACC *y = out + (n * g->Cout + oc) * OS;                                             \
          const ACC *wk = transposed ? w + (ic * g->Cout_g + ocg) * KK                        \
                                     : w + (oc * g->Cin_g + icg) * KK;                        \
          for (int64_t a = 0; a < KD; a++)                                                    \
            for (int64_t b = 0; b < KH; b++)                                                  \
              for (int64_t e = 0; e < KW; e++) {                                              \
                ACC wv = wk[(a * KH + b) * KW + e];                                           \
                if (!transposed) {                                                            \
                  for (int64_t od = 0; od < OD; od++) {                                       \
                    int64_t id = od * g->s[0] - g->p[0] + a * g->d[0];                        \
                    if (id < 0 || id >= D) continue;                                          \
                    for (int64_t oh = 0; oh < OH; oh++) {                                     \
                      int64_t ih = oh * g->s[1] - g->p[1] + b * g->d[1];                      \
                      if (ih < 0 || ih >= H) continue;                                        \
                      for (int64_t ow = 0; ow < OW; ow++) {                                   \
                        int64_t iw = ow * g->s[2] - g->p[2] + e * g->d[2];                    \
                        if (iw < 0 || iw >= W) continue;                                      \
                        y[(od * OH + oh) * OW + ow] += x[(id * H + ih) * W + iw] * wv;        \
                      }                                                                       \
                    }                                                                         \
                  }                                                                           \
                } else {                                                                      \
                  for (int64_t id = 0; id < D; id++) {                                        \
                    int64_t od = id * g->s[0] - g->p[0] + a * g->d[0];                        \
                    if (od < 0 || od >= OD) continue;                                         \
                    for (int64_t ih = 0; ih < H; ih++) {                                      \
                      int64_t oh = ih * g->s[1] - g->p[1] + b * g->d[1];                      \
                      if (oh < 0 || oh >= OH) continue;                                       \
                      for (int64_t iw = 0; iw < W; iw++) {                                    \
                        int64_t ow = iw * g->s[2] - g->p[2] + e * g->d[2];                    \
                        if (ow < 0 || ow >= OW) continue;                                     \
                        y[(od * OH + oh) * OW + ow] += x[(id * H + ih) * W + iw] * wv;        \
                      }                                                                       \
                    }                                                                         \
                  }                                                                           \
                }                                                                             \
              }                                                                               \
        }                                                                                     \
      }                                                                                       \
  }

DEFINE_CONV3_NAIVE(conv3_naive_f64, double)
DEFINE_CONV3_NAIVE(conv3_naive_u64, uint64_t)

/* aten::convolution.out with a 5-D input: shapes checked, out resized, run.
 * st / pd / dl / op hold the checked spatial parameters. */
int px_convolution3d(px_ctx *ctx, px_tensor *in, px_tensor *w, px_tensor *bias, px_tensor *out,
                     bool transposed, int64_t groups, const int64_t *st, const int64_t *pd,
                     const int64_t *dl, const int64_t *op) {
  conv3_geom g;
  g.N = in->sizes[0];
  g.Cin = in->sizes[1];
  g.G = groups;
  px_conv_channels ch;
  int rc = px_conv_check_channels(ctx, in, w, bias, transposed, groups, &ch);
  if (rc) return rc;
  g.Cin_g = ch.Cin_g, g.Cout = ch.Cout, g.Cout_g = ch.Cout_g;
  for (int k = 0; k < 3; k++) {
    g.in[k] = in->sizes[2 + k];
    g.k[k] = w->sizes[2 + k];
    g.s[k] = st[k], g.p[k] = pd[k], g.d[k] = dl[k];
    if ((rc = px_conv_out_size(ctx, g.in[k], g.k[k], st[k], pd[k], dl[k], op[k], transposed, &g.out[k])))
      return rc;
  }
  int64_t os[5] = {g.N, g.Cout, g.out[0], g.out[1], g.out[2]};
  if ((rc = px_resize(ctx, out, 5, os))) return rc;
  if (out->numel == 0) return 0;
  if (in->numel == 0) { /* no input channels or positions: the bias alone */
    for (int64_t i = 0; i < out->numel; i++) {
      int64_t c = i / (g.out[0] * g.out[1] * g.out[2]) % g.Cout;
      px_store_d(out->data, out->dtype, i, bias ? px_load_d(bias->data, bias->dtype, c) : 0.0);
    }
    return 0;
  }
  if (in->dtype == PX_F32)
    return conv3_f32(ctx, &g, transposed, in->data, w->data, bias ? bias->data : NULL, out->data);
  if (in->dtype == PX_F16 || in->dtype == PX_BF16) { /* float32 copies, rounded once (as conv.c) */
    px_conv_widened o;
    if (px_conv_widen(ctx, in, w, bias, out, PX_F32, &o)) return PYEXEC_ERR_EXECUTION;
    rc = conv3_f32(ctx, &g, transposed, o.in, o.w, o.bias, o.out);
    if (!rc) px_convert(out->data, out->dtype, o.out, PX_F32, out->numel);
    return rc;
  }
  bool fl = px_is_floating(in->dtype);
  int wide = fl ? PX_F64 : PX_I64;
  px_conv_widened o;
  if (px_conv_widen(ctx, in, w, bias, out, wide, &o)) return PYEXEC_ERR_EXECUTION;
  if (fl)
    conv3_naive_f64(&g, transposed, o.in, o.w, o.bias, o.out);
  else
    conv3_naive_u64(&g, transposed, o.in, o.w, o.bias, o.out);
  px_convert(out->data, out->dtype, o.out, wide, out->numel);
  return 0;
}
