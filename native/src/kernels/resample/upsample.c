/*
 * upsample.c - upsample_nearest2d and upsample_bilinear2d (output size or
 * scale factors, align_corners), with torch's source-index arithmetic.
 * Antialiased bilinear is upsample_aa.c.
 */
#include <math.h>

#include "kernels/common.h"

/* Output size and per-dim scale for the .vec overloads: exactly one of
 * output_size (args[osz]) and scale_factors (args[sf]) is given. scale[k] is
 * the scale_factor given (0 when the output size was given). */
static int upsample_setup(px_ctx *ctx, const px_tensor *in, px_value *osz_v, px_value *sf_v,
                          px_tensor *out, int64_t *oh, int64_t *ow, double *scale) {
  int rc;
  if (in->dim != 4) return px_fail(ctx, "input must be 4-D, got %d dims", in->dim);
  if (out->dim != 4) return px_fail(ctx, "out must be 4-D, got %d dims", out->dim);
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "input"))) return rc;
  bool has_o = osz_v->tag != PX_V_NONE, has_s = sf_v->tag != PX_V_NONE;
  if (has_o == has_s)
    return px_fail(ctx, "exactly one of output_size and scale_factors must be given");
  int64_t H = in->sizes[2], W = in->sizes[3];
  if (has_o) {
    if (osz_v->u.il.n != 2)
      return px_fail(ctx, "output_size must have 2 values, got %u", osz_v->u.il.n);
    const int64_t *o = px_intlist(osz_v);
    *oh = o[0];
    *ow = o[1];
    scale[0] = scale[1] = 0.0;
  } else {
    if (sf_v->u.dl.n != 2)
      return px_fail(ctx, "scale_factors must have 2 values, got %u", sf_v->u.dl.n);
    scale[0] = sf_v->u.dl.vals[0];
    scale[1] = sf_v->u.dl.vals[1];
    if (!(fabs(scale[0]) < 1e9 && fabs(scale[1]) < 1e9)) return px_fail(ctx, "scale_factors are out of range");
    *oh = (int64_t)floor((double)H * scale[0]);
    *ow = (int64_t)floor((double)W * scale[1]);
  }
  if (*oh <= 0 || *ow <= 0)
    return px_fail(ctx, "output size [%lld, %lld] must be positive", (long long)*oh,
                   (long long)*ow);
  if (H <= 0 || W <= 0)
    return px_fail(ctx, "input spatial size [%lld, %lld] must be positive", (long long)H,
                   (long long)W);
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t os[4] = {in->sizes[0], in->sizes[1], *oh, *ow};
  return px_resize(ctx, out, 4, os);
}

/* torch's compute_scales_value<float>: 1/scale_factor when given, else in/out */
static float scale_value(double sf, int64_t in, int64_t out) {
  return sf > 0 ? (float)(1.0 / sf) : (float)in / (float)out;
}

static int64_t nearest_src(int64_t dst, int64_t in, int64_t out, double sf) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  float s = scale_value(sf, in, out);
  int64_t v = (int64_t)floorf((float)dst * s);
  return v < in - 1 ? v : in - 1;
}

/* aten::upsample_nearest2d.vec_out(Tensor input, SymInt[]? output_size,
 *   float[]? scale_factors, *, Tensor(a!) out) */
static int k_upsample_nearest2d(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[3]->u.t;
  int64_t OH, OW;
  double sf[2];
  int rc = upsample_setup(ctx, in, args[1], args[2], out, &OH, &OW, sf);
  if (rc) return rc;
  if (out->numel == 0) return 0;
  int64_t H = in->sizes[2], W = in->sizes[3], planes = in->sizes[0] * in->sizes[1];
  int64_t *wi = px_scratch(ctx, sizeof(int64_t) * (size_t)OW);
  if (!wi) return PYEXEC_ERR_EXECUTION;
  for (int64_t ow = 0; ow < OW; ow++) wi[ow] = nearest_src(ow, W, OW, sf[1]);
  size_t es = px_elsize(in->dtype);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t ih = nearest_src(oh, H, OH, sf[0]);
      int64_t src = (pl * H + ih) * W, dst = (pl * OH + oh) * OW;
      switch (es) {
        case 4: {
          const uint32_t *s = (const uint32_t *)in->data + src;
          uint32_t *d = (uint32_t *)out->data + dst;
          for (int64_t ow = 0; ow < OW; ow++) d[ow] = s[wi[ow]];
          break;
        }
        case 8: {
          const uint64_t *s = (const uint64_t *)in->data + src;
          uint64_t *d = (uint64_t *)out->data + dst;
          for (int64_t ow = 0; ow < OW; ow++) d[ow] = s[wi[ow]];
          break;
        }
        case 2: {
          const uint16_t *s = (const uint16_t *)in->data + src;
          uint16_t *d = (uint16_t *)out->data + dst;
          for (int64_t ow = 0; ow < OW; ow++) d[ow] = s[wi[ow]];
          break;
        }
        default: {
          const uint8_t *s = (const uint8_t *)in->data + src;
          uint8_t *d = (uint8_t *)out->data + dst;
          for (int64_t ow = 0; ow < OW; ow++) d[ow] = s[wi[ow]];
          break;
        }
      }
    }
  return 0;
}

/* Source index and weights of linear interpolation along one dim. */
static void linear_coeffs(int64_t in, int64_t out, bool align, double sf, int64_t *i0,
                          int64_t *i1, float *l1) {
  float scale = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                      : scale_value(sf, in, out);
  for (int64_t d = 0; d < out; d++) {
    float src = align ? scale * (float)d : scale * ((float)d + 0.5f) - 0.5f;
    if (!align && src < 0) src = 0;
    int64_t a = (int64_t)src;
    if (a > in - 1) a = in - 1;
    float l = src - (float)a;
    if (l < 0) l = 0;
    if (l > 1) l = 1;
    i0[d] = a;
    i1[d] = a + (a < in - 1 ? 1 : 0);
    l1[d] = l;
  }
}

/* aten::upsample_bilinear2d.vec_out(Tensor input, SymInt[]? output_size,
 *   bool align_corners, float[]? scale_factors, *, Tensor(a!) out) */
static int k_upsample_bilinear2d(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[4]->u.t;
  bool align = args[2]->u.b;
  int64_t OH, OW;
  double sf[2];
  if (!px_is_floating(in->dtype))
    return px_fail(ctx, "dtype %s is not supported (floating types only)",
                   px_dtype_name(in->dtype));
  int rc = upsample_setup(ctx, in, args[1], args[3], out, &OH, &OW, sf);
  if (rc) return rc;
  if (out->numel == 0) return 0;
  int64_t H = in->sizes[2], W = in->sizes[3], planes = in->sizes[0] * in->sizes[1];
  int64_t *hi0 = px_scratch(ctx, sizeof(int64_t) * (size_t)OH);
  int64_t *hi1 = px_scratch(ctx, sizeof(int64_t) * (size_t)OH);
  int64_t *wi0 = px_scratch(ctx, sizeof(int64_t) * (size_t)OW);
  int64_t *wi1 = px_scratch(ctx, sizeof(int64_t) * (size_t)OW);
  float *hl = px_scratch(ctx, sizeof(float) * (size_t)OH);
  float *wl = px_scratch(ctx, sizeof(float) * (size_t)OW);
  if (!hi0 || !hi1 || !wi0 || !wi1 || !hl || !wl) return PYEXEC_ERR_EXECUTION;
  linear_coeffs(H, OH, align, sf[0], hi0, hi1, hl);
  linear_coeffs(W, OW, align, sf[1], wi0, wi1, wl);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t oh = 0; oh < OH; oh++) {
      float h1 = hl[oh], h0 = 1.0f - h1;
      int64_t r0 = (pl * H + hi0[oh]) * W, r1 = (pl * H + hi1[oh]) * W;
      int64_t dst = (pl * OH + oh) * OW;
      if (in->dtype == PX_F32) {
        const float *x = in->data;
        float *o = (float *)out->data + dst;
        for (int64_t ow = 0; ow < OW; ow++) {
          float w1 = wl[ow], w0 = 1.0f - w1;
          o[ow] = h0 * (w0 * x[r0 + wi0[ow]] + w1 * x[r0 + wi1[ow]]) +
                  h1 * (w0 * x[r1 + wi0[ow]] + w1 * x[r1 + wi1[ow]]);
        }
      } else if (in->dtype == PX_F16 || in->dtype == PX_BF16) {
        /* float16 / bfloat16: the float32 expression, rounded once (what
         * ExecuTorch's kernel computes) */
        const int dt = in->dtype;
        for (int64_t ow = 0; ow < OW; ow++) {
          float w1 = wl[ow], w0 = 1.0f - w1;
          float top = w0 * px_ld16(in->data, dt, r0 + wi0[ow]) + w1 * px_ld16(in->data, dt, r0 + wi1[ow]);
          float bot = w0 * px_ld16(in->data, dt, r1 + wi0[ow]) + w1 * px_ld16(in->data, dt, r1 + wi1[ow]);
          px_st16(out->data, dt, dst + ow, h0 * top + h1 * bot);
        }
      } else {
        for (int64_t ow = 0; ow < OW; ow++) {
          double w1 = wl[ow], w0 = 1.0 - w1;
          double v = h0 * (w0 * px_load_d(in->data, in->dtype, r0 + wi0[ow]) +
                           w1 * px_load_d(in->data, in->dtype, r0 + wi1[ow])) +
                     h1 * (w0 * px_load_d(in->data, in->dtype, r1 + wi0[ow]) +
                           w1 * px_load_d(in->data, in->dtype, r1 + wi1[ow]));
          px_store_d(out->data, out->dtype, dst + ow, v);
        }
      }
    }
  return 0;
}

const px_kernel_def px_kernels_upsample[] = {
    {"aten::upsample_nearest2d.vec_out", "TlfT|T", k_upsample_nearest2d},
    {"aten::upsample_bilinear2d.vec_out", "TlBfT|T", k_upsample_bilinear2d},
    {NULL, NULL, NULL},
};
