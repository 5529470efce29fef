/*
 * upsample_aa.c - _upsample_bilinear2d_aa: antialiased bilinear resizing, as
 * separable horizontal and vertical passes with precomputed weights (uint8
 * in fixed point, as torch does); float16 / bfloat16, which torch's CPU
 * kernel does not take, with ExecuTorch's window and weights (below). Plain
 * bilinear and nearest upsampling are upsample.c.
 */
#include <math.h>
#include <string.h>

#include "kernels/common.h"

/* Separable antialiased (PIL-style triangle filter) resampling, as torch's
 * CPU kernel: weights per axis computed in the tensor's floating type
 * (float64 for uint8, then quantised to int16), the last dimension resampled
 * first, intermediate values stored in the tensor's dtype. */

typedef struct {
  int64_t *xmin, *xsize; /* [out] */
  int64_t taps;          /* weights per output */
  void *w;               /* [out][taps] CT, or int16 for uint8 */
  unsigned prec;         /* uint8 only: fixed-point precision */
} aa_axis;

#define AA_WEIGHTS(CT, SFX)                                                                 \
  static int aa_axis_##SFX(px_ctx *ctx, aa_axis *ax, int64_t in, int64_t out, bool ac,      \
                           const px_value *sv) {                                            \
    CT scale;                                                                               \
    if (ac)                                                                                 \
      scale = out > 1 ? (CT)(in - 1) / (CT)(out - 1) : (CT)0;                               \
    else if (sv->tag != PX_V_NONE && arg_d(sv) > 0)                                         \
      scale = (CT)(1.0 / arg_d(sv));                                                        \
    else                                                                                    \
      scale = (CT)in / (CT)out;                                                             \
    CT support = scale >= 1.0 ? (CT)(1.0 * scale) : (CT)1.0;                                \
    double cs = ceil((double)support);                                                      \
    if (!(cs < 1e9)) return px_fail(ctx, "scale %g is too large", (double)scale);          \
    int64_t taps = (int64_t)cs * 2 + 1;                                                     \
    ax->taps = taps;                                                                        \
    ax->xmin = px_scratch(ctx, sizeof(int64_t) * (size_t)out * 2);                          \
    CT *w = px_scratch(ctx, sizeof(CT) * (size_t)(out * taps));                             \
    if (!ax->xmin || !w) return PYEXEC_ERR_EXECUTION;                                       \
    ax->xsize = ax->xmin + out;                                                             \
    ax->w = w;                                                                              \
    CT invscale = scale >= 1.0 ? (CT)(1.0 / scale) : (CT)1.0;                               \
    for (int64_t i = 0; i < out; i++) {                                                     \
      CT center = (CT)((double)scale * ((double)i + 0.5));                                  \
      int64_t xmin = (int64_t)((double)(center - support) + 0.5);                           \
      if (xmin < 0) xmin = 0;                                                               \
      int64_t xmax = (int64_t)((double)(center + support) + 0.5);                           \
      if (xmax > in) xmax = in;                                                             \
      int64_t xsize = xmax - xmin;                                                          \
      if (xsize < 0) xsize = 0;                                                             \
      if (xsize > taps) xsize = taps;                                                       \
      CT *wi = w + i * taps, total = 0;                                                     \
      for (int64_t j = 0; j < xsize; j++) {                                                 \
        CT t = (CT)((((CT)(j + xmin) - center) + 0.5) * (double)invscale);                  \
        t = t < 0 ? -t : t;                                                                 \
        CT v = t < 1.0 ? (CT)(1.0 - t) : (CT)0;                                             \
        wi[j] = v;                                                                          \
        total += v;                                                                         \
      }                                                                                     \
      if (total != 0)                                                                       \
        for (int64_t j = 0; j < xsize; j++) wi[j] /= total;                                 \
      for (int64_t j = xsize; j < taps; j++) wi[j] = 0;                                     \
      ax->xmin[i] = xmin;                                                                   \
      ax->xsize[i] = xsize;                                                                 \
    }                                                                                       \
    return 0;                                                                               \
  }

AA_WEIGHTS(float, f32)
AA_WEIGHTS(double, f64)

/* uint8: float64 weights quantised to int16 at the largest precision (< 22
 * bits) at which the largest weight still fits. */
static int aa_axis_u8(px_ctx *ctx, aa_axis *ax, int64_t in, int64_t out, bool ac,
                      const px_value *sv) {
  int rc = aa_axis_f64(ctx, ax, in, out, ac, sv);
  if (rc) return rc;
  const double *wd = ax->w;
  int64_t n = out * ax->taps;
  double wmax = 0.0;
  for (int64_t k = 0; k < n; k++)
    if (wd[k] > wmax) wmax = wd[k];
  unsigned prec;
  for (prec = 0; prec < 22; prec++) {
    int next = (int)(0.5 + wmax * (double)(1 << (prec + 1)));
    if (next >= (1 << 15)) break;
  }
  int16_t *wi = px_scratch(ctx, sizeof(int16_t) * (size_t)n);
  if (!wi) return PYEXEC_ERR_EXECUTION;
  for (int64_t k = 0; k < n; k++) {
    double v = wd[k] * (double)(1 << prec);
    wi[k] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
  }
  ax->w = wi;
  ax->prec = prec;
  return 0;
}

/* Resamples `rows` rows of `inw` elements along the row into `outw`. */
#define AA_HPASS(CT, ST, SFX)                                                               \
  static void aa_h_##SFX(const ST *src, ST *dst, int64_t rows, int64_t inw, int64_t outw,  \
                         const aa_axis *ax) {                                               \
    const CT *w = ax->w;                                                                    \
    for (int64_t r = 0; r < rows; r++, src += inw, dst += outw)                            \
      for (int64_t o = 0; o < outw; o++) {                                                  \
        const ST *s = src + ax->xmin[o];                                                    \
        const CT *wo = w + o * ax->taps;                                                    \
        int64_t n = ax->xsize[o];                                                           \
        CT acc = n > 0 ? (CT)s[0] * wo[0] : (CT)0;                                          \
        for (int64_t j = 1; j < n; j++) acc += (CT)s[j] * wo[j];                            \
        dst[o] = acc;                                                                       \
      }                                                                                     \
  }                                                                                         \
  /* Resamples `planes` planes of inh x width rows into outh rows. */                       \
  static void aa_v_##SFX(const ST *src, ST *dst, int64_t planes, int64_t inh, int64_t outh, \
                         int64_t width, const aa_axis *ax) {                                \
    const CT *w = ax->w;                                                                    \
    for (int64_t p = 0; p < planes; p++, src += inh * width)                               \
      for (int64_t o = 0; o < outh; o++, dst += width) {                                    \
        const ST *s = src + ax->xmin[o] * width;                                            \
        const CT *wo = w + o * ax->taps;                                                    \
        int64_t n = ax->xsize[o];                                                           \
        if (n <= 0) {                                                                       \
          for (int64_t x = 0; x < width; x++) dst[x] = 0;                                   \
          continue;                                                                         \
        }                                                                                   \
        for (int64_t x = 0; x < width; x++) dst[x] = (CT)s[x] * wo[0];                      \
        for (int64_t j = 1; j < n; j++) {                                                   \
          const ST *sj = s + j * width;                                                     \
          CT wj = wo[j];                                                                    \
          for (int64_t x = 0; x < width; x++) dst[x] += (CT)sj[x] * wj;                     \
        }                                                                                   \
      }                                                                                     \
  }

AA_HPASS(float, float, f32)
AA_HPASS(double, double, f64)

static inline uint8_t aa_u8_round(int32_t acc, unsigned prec) {
  if (acc < 0) return 0;
  acc >>= prec;
  return (uint8_t)(acc > 255 ? 255 : acc);
}

static void aa_h_u8(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t inw, int64_t outw,
                    const aa_axis *ax) {
  const int16_t *w = ax->w;
  for (int64_t r = 0; r < rows; r++, src += inw, dst += outw)
    for (int64_t o = 0; o < outw; o++) {
      const uint8_t *s = src + ax->xmin[o];
      const int16_t *wo = w + o * ax->taps;
      int32_t acc = (int32_t)1 << (ax->prec - 1);
      for (int64_t j = 0; j < ax->xsize[o]; j++) acc += (int32_t)s[j] * wo[j];
      dst[o] = aa_u8_round(acc, ax->prec);
    }
}

static void aa_v_u8(const uint8_t *src, uint8_t *dst, int64_t planes, int64_t inh, int64_t outh,
                    int64_t width, const aa_axis *ax) {
  const int16_t *w = ax->w;
  for (int64_t p = 0; p < planes; p++, src += inh * width)
    for (int64_t o = 0; o < outh; o++, dst += width) {
      const uint8_t *s = src + ax->xmin[o] * width;
      const int16_t *wo = w + o * ax->taps;
      for (int64_t x = 0; x < width; x++) {
        int32_t acc = (int32_t)1 << (ax->prec - 1);
        for (int64_t j = 0; j < ax->xsize[o]; j++) acc += (int32_t)s[j * width + x] * wo[j];
        dst[x] = aa_u8_round(acc, ax->prec);
      }
    }
}

/* ---- float16 / bfloat16 ---------------------------------------------------
 * ExecuTorch's kernel (torch's CPU kernel takes neither type): not
 * separable, each output the sum of input(ih, iw) * h_weight * w_weight
 * over its window, with float weights normalised per axis. ExecuTorch adds
 * each term to a 16-bit accumulator; here the sum is carried in float and
 * rounded once. */

typedef struct aa16_axis {
  int64_t xmin, xmax, fallback;
  float center, invscale, total;
} aa16_axis;

static inline float aa16_filter(float x) {
  x = x < 0 ? -x : x;
  return x < 1.0f ? 1.0f - x : 0.0f;
}

static aa16_axis aa16_params(int64_t i, float scale, int64_t in) {
  aa16_axis a;
  a.center = scale * ((float)i + 0.5f);
  float support = scale >= 1.0f ? 1.0f * scale : 1.0f;
  a.invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  int64_t lo = (int64_t)(a.center - support + 0.5f), hi = (int64_t)(a.center + support + 0.5f);
  a.xmin = lo > 0 ? lo : 0;
  a.xmax = hi < in ? hi : in;
  a.fallback = -1;
  a.total = 0.0f;
  for (int64_t x = a.xmin; x < a.xmax; x++) a.total += aa16_filter(((float)x - a.center + 0.5f) * a.invscale);
  if (a.xmax <= a.xmin || !(a.total > 0.0f)) {
    int64_t c = (int64_t)a.center;
    if (c > in - 1) c = in - 1;
    if (c < 0) c = 0;
    a.xmin = a.fallback = c;
    a.xmax = c + 1;
    a.total = 1.0f;
  }
  return a;
}

static inline float aa16_weight(const aa16_axis *a, int64_t i) {
  if (a->fallback >= 0) return i == a->fallback ? 1.0f : 0.0f;
  return aa16_filter(((float)i - a->center + 0.5f) * a->invscale) / a->total;
}

/* ExecuTorch's scale of one axis: (in - 1) / (out - 1) with align_corners,
 * else 1 / the given scale factor, or 1 / (out / in) without one. */
static float aa16_scale(int64_t in, int64_t out, bool ac, const px_value *sv, bool both_given) {
  if (ac) return out > 1 ? (float)((double)(in - 1) / (double)(out - 1)) : 0.0f;
  double f = both_given ? arg_d(sv) : (double)out / (double)in;
  return f > 0 ? (float)(1.0 / f) : (float)((double)in / (double)out);
}

static void aa16_run(const px_tensor *in, px_tensor *out, bool ac, const px_value *sh, const px_value *sw) {
  const int dt = in->dtype;
  int64_t N = in->sizes[0], C = in->sizes[1], H = in->sizes[2], W = in->sizes[3];
  int64_t OH = out->sizes[2], OW = out->sizes[3];
  bool given = sh->tag != PX_V_NONE && sw->tag != PX_V_NONE;
  float scale_h = aa16_scale(H, OH, ac, sh, given), scale_w = aa16_scale(W, OW, ac, sw, given);
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < OH; oh++) {
      aa16_axis ah = aa16_params(oh, scale_h, H);
      for (int64_t ow = 0; ow < OW; ow++) {
        aa16_axis aw = aa16_params(ow, scale_w, W);
        for (int64_t c = 0; c < C; c++) {
          int64_t ip = (n * C + c) * H * W;
          float v = 0.0f;
          for (int64_t ih = ah.xmin; ih < ah.xmax; ih++) {
            float hw = aa16_weight(&ah, ih);
            for (int64_t iw = aw.xmin; iw < aw.xmax; iw++) {
              v += px_ld16(in->data, dt, ip + ih * W + iw) * hw * aa16_weight(&aw, iw);
            }
          }
          px_st16(out->data, dt, ((n * C + c) * OH + oh) * OW + ow, v);
        }
      }
    }
}

/* aten::_upsample_bilinear2d_aa.out(Tensor self, SymInt[2] output_size,
 *   bool align_corners, float? scales_h=None, float? scales_w=None, *,
 *   Tensor(a!) out) */
static int k_upsample_bilinear2d_aa(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[5]->u.t;
  const int64_t *os = px_intlist(args[1]);
  bool ac = args[2]->u.b;
  int rc;
  if (args[1]->u.il.n != 2)
    return px_fail(ctx, "output_size must have 2 values, got %u", args[1]->u.il.n);
  if (in->dim != 4) return fail_shape(ctx, "self", in, "expected a 4-D (N, C, H, W) tensor");
  if (in->dtype != PX_F32 && in->dtype != PX_F64 && in->dtype != PX_U8 && !px_is16(in->dtype))
    return px_fail(ctx, "self has dtype %s; supported: float32, float64, float16, bfloat16, uint8",
                   px_dtype_name(in->dtype));
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t N = in->sizes[0], C = in->sizes[1], H = in->sizes[2], W = in->sizes[3];
  int64_t OH = os[0], OW = os[1];
  if (H <= 0 || W <= 0 || OH <= 0 || OW <= 0)
    return px_fail(ctx, "input and output sizes must be greater than 0, got input (H: %lld, W: %lld) "
                   "output (H: %lld, W: %lld)", (long long)H, (long long)W, (long long)OH,
                   (long long)OW);
  if (out->dim != 4) return px_fail(ctx, "out must be 4-D, got %d dims", out->dim);
  int64_t osz[4] = {N, C, OH, OW};
  if ((rc = px_resize(ctx, out, 4, osz))) return rc;
  if (out->numel == 0) return 0;
  if (px_is16(in->dtype)) {
    aa16_run(in, out, ac, args[3], args[4]);
    return 0;
  }
  if (OH == H && OW == W) {
    memcpy(out->data, in->data, out->nbytes);
    return 0;
  }
  int64_t planes = N * C;
  size_t es = px_elsize(in->dtype);
  aa_axis axw, axh;
  void *tmp = NULL;
  bool hpass = OW != W, vpass = OH != H;
  if (hpass && vpass) {
    tmp = px_scratch(ctx, es * (size_t)(planes * H * OW));
    if (!tmp) return PYEXEC_ERR_EXECUTION;
  }
  switch (in->dtype) {
    case PX_F32:
      if (hpass && (rc = aa_axis_f32(ctx, &axw, W, OW, ac, args[4]))) return rc;
      if (vpass && (rc = aa_axis_f32(ctx, &axh, H, OH, ac, args[3]))) return rc;
      if (hpass) aa_h_f32(in->data, vpass ? tmp : out->data, planes * H, W, OW, &axw);
      if (vpass) aa_v_f32(hpass ? tmp : in->data, out->data, planes, H, OH, OW, &axh);
      break;
    case PX_F64:
      if (hpass && (rc = aa_axis_f64(ctx, &axw, W, OW, ac, args[4]))) return rc;
      if (vpass && (rc = aa_axis_f64(ctx, &axh, H, OH, ac, args[3]))) return rc;
      if (hpass) aa_h_f64(in->data, vpass ? tmp : out->data, planes * H, W, OW, &axw);
      if (vpass) aa_v_f64(hpass ? tmp : in->data, out->data, planes, H, OH, OW, &axh);
      break;
    default:
      if (hpass && (rc = aa_axis_u8(ctx, &axw, W, OW, ac, args[4]))) return rc;
      if (vpass && (rc = aa_axis_u8(ctx, &axh, H, OH, ac, args[3]))) return rc;
      if (hpass) aa_h_u8(in->data, vpass ? tmp : out->data, planes * H, W, OW, &axw);
      if (vpass) aa_v_u8(hpass ? tmp : in->data, out->data, planes, H, OH, OW, &axh);
      break;
  }
  return 0;
}

const px_kernel_def px_kernels_upsample_aa[] = {
    {"aten::_upsample_bilinear2d_aa.out", "TLBddT|T", k_upsample_bilinear2d_aa},
    {NULL, NULL, NULL},
};
