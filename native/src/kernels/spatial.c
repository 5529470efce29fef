/*
 * spatial.c - padding modes (reflection, replication), pixel shuffles, grid
 * sampling and antialiased bilinear resizing; and, until they move to their
 * own families, a few operators of other families: masked_scatter (index),
 * linear (linalg), _pdist_forward (distance), native_dropout / rand / randn
 * (random) and training-mode batch norm with running statistics (norm).
 *
 * Pure data movement (padding, pixel shuffles, masked_scatter) is written
 * once per element size, which covers every dtype with tight loops. The
 * arithmetic kernels have typed loops for float32 and float64 and compute
 * float16 / bfloat16 in float (integer dtypes where torch supports them).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "gemm.h"

/* ---- shared helpers ----------------------------------------------------- */

static int require_floating(px_ctx *ctx, const px_tensor *t, const char *what) {
  if (!px_is_floating(t->dtype))
    return px_fail(ctx, "%s has dtype %s; only floating dtypes are supported", what,
                   px_dtype_name(t->dtype));
  return 0;
}

/* A 'D' argument: a double, or an int the emitter wrote for a whole number. */
static double arg_d(const px_value *v) { return v->tag == PX_V_INT ? (double)v->u.i : v->u.d; }

static int fail_shape(px_ctx *ctx, const char *what, const px_tensor *t, const char *why) {
  char buf[160];
  size_t n = (size_t)snprintf(buf, sizeof buf, "[");
  for (int k = 0; k < t->dim && n < sizeof buf; k++)
    n += (size_t)snprintf(buf + n, sizeof buf - n, k ? ", %lld" : "%lld", (long long)t->sizes[k]);
  if (n < sizeof buf) snprintf(buf + n, sizeof buf - n, "]");
  return px_fail(ctx, "%s has shape %s; %s", what, buf, why);
}

/* Runs BODY with `E` defined as an unsigned integer type of the element size
 * `es` (1, 2, 4 or 8 bytes): data movement that is the same for every dtype. */
#define BY_ELSIZE(es, ...)                 \
  switch (es) {                            \
    case 1: {                              \
      typedef uint8_t E;                   \
      __VA_ARGS__;                         \
    } break;                               \
    case 2: {                              \
      typedef uint16_t E;                  \
      __VA_ARGS__;                         \
    } break;                               \
    case 4: {                              \
      typedef uint32_t E;                  \
      __VA_ARGS__;                         \
    } break;                               \
    default: {                             \
      typedef uint64_t E;                  \
      __VA_ARGS__;                         \
    } break;                               \
  }

/* Element access for the floating kernels: storage type -> compute type. */
#define LD_NATIVE(p, k) ((p)[k])
#define SV_NATIVE(p, k, v) ((p)[k] = (v))
#define LD_HALF(p, k) px_half_to_float((p)[k])
#define SV_HALF(p, k, v) ((p)[k] = px_float_to_half((float)(v)))
#define LD_BF16(p, k) px_bf16_to_float((p)[k])
#define SV_BF16(p, k, v) ((p)[k] = px_float_to_bf16((float)(v)))

/* ======================================================================== */
/* Padding: reflection_pad{1,2,3}d, replication_pad{1,2,3}d                  */
/* ======================================================================== */

/* Source index along one dimension of every output position. */
static void pad_index_map(int64_t *map, int64_t osz, int64_t isz, int64_t lo, bool reflect) {
  for (int64_t o = 0; o < osz; o++) {
    int64_t x = o - lo;
    if (reflect) {
      if (x < 0)
        x = -x;
      else if (x >= isz)
        x = 2 * (isz - 1) - x;
    } else {
      if (x < 0)
        x = 0;
      else if (x >= isz)
        x = isz - 1;
    }
    map[o] = x;
  }
}

/* One output row: the unpadded middle is a memcpy, the edges a gather. */
static void pad_row(char *dst, const char *src, const int64_t *map, int64_t ow, int64_t lo,
                    int64_t iw, size_t es) {
  int64_t a = lo > 0 ? lo : 0;
  int64_t b = iw + lo < ow ? iw + lo : ow;
  if (a > ow) a = ow;
  if (b < a) b = a;
  BY_ELSIZE(es, {
    E *d = (E *)dst;
    const E *s = (const E *)src;
    for (int64_t o = 0; o < a; o++) d[o] = s[map[o]];
    if (b > a) memcpy(d + a, s + (a - lo), (size_t)(b - a) * sizeof(E));
    for (int64_t o = b; o < ow; o++) d[o] = s[map[o]];
  })
}

/* aten::{reflection,replication}_pad{nsp}d.out(Tensor self, SymInt[2*nsp]
 *   padding, *, Tensor(a!) out) */
static int pad_nd(px_ctx *ctx, px_value *const *args, int nsp, bool reflect) {
  px_tensor *in = args[0]->u.t, *out = args[2]->u.t;
  const int64_t *pad = px_intlist(args[1]);
  uint32_t np = args[1]->u.il.n;
  int rc;
  if (np != (uint32_t)(2 * nsp))
    return px_fail(ctx, "padding must have %d values, got %u", 2 * nsp, np);
  if (in->dim != nsp + 1 && in->dim != nsp + 2)
    return px_fail(ctx, "expected a %dD or %dD (batch mode) input, got %dD", nsp + 1, nsp + 2,
                   in->dim);
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  for (int k = in->dim == nsp + 2 ? 1 : 0; k < in->dim; k++)
    if (in->sizes[k] == 0)
      return fail_shape(ctx, "self", in,
                        "only the batch dimension may be empty (other dimensions must be non-zero)");
  int64_t osz[PX_MAX_DIM];
  memcpy(osz, in->sizes, sizeof(int64_t) * (size_t)in->dim);
  int64_t isp[3] = {1, 1, 1}, osp[3] = {1, 1, 1}, lo[3] = {0, 0, 0}; /* D, H, W */
  for (int k = 0; k < nsp; k++) {
    int d = in->dim - 1 - k;
    int64_t l = pad[2 * k], r = pad[2 * k + 1], s = in->sizes[d], o;
    if (reflect && (l >= s || r >= s))
      return px_fail(ctx, "padding (%lld, %lld) at dim %d must be less than the input size %lld",
                     (long long)l, (long long)r, d, (long long)s);
    if (__builtin_add_overflow(s, l, &o) || __builtin_add_overflow(o, r, &o) || o < 1)
      return px_fail(ctx, "input size %lld at dim %d is too small for padding (%lld, %lld)",
                     (long long)s, d, (long long)l, (long long)r);
    osz[d] = o;
    isp[2 - k] = s;
    osp[2 - k] = o;
    lo[2 - k] = l;
  }
  if ((rc = px_resize(ctx, out, in->dim, osz))) return rc;
  if (out->numel == 0) return 0;
  int64_t *map = px_scratch(ctx, sizeof(int64_t) * (size_t)(osp[0] + osp[1] + osp[2]));
  if (!map) return PYEXEC_ERR_EXECUTION;
  int64_t *md = map, *mh = map + osp[0], *mw = mh + osp[1];
  pad_index_map(md, osp[0], isp[0], lo[0], reflect);
  pad_index_map(mh, osp[1], isp[1], lo[1], reflect);
  pad_index_map(mw, osp[2], isp[2], lo[2], reflect);
  int64_t planes = px_prod(in->sizes, 0, in->dim - nsp);
  size_t es = px_elsize(in->dtype);
  const char *ip = in->data;
  char *op = out->data;
  for (int64_t p = 0; p < planes; p++)
    for (int64_t od = 0; od < osp[0]; od++)
      for (int64_t oh = 0; oh < osp[1]; oh++) {
        const char *src = ip + (size_t)(((p * isp[0] + md[od]) * isp[1] + mh[oh]) * isp[2]) * es;
        char *dst = op + (size_t)(((p * osp[0] + od) * osp[1] + oh) * osp[2]) * es;
        pad_row(dst, src, mw, osp[2], lo[2], isp[2], es);
      }
  return 0;
}

static int k_reflection_pad1d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 1, true); }
static int k_reflection_pad2d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 2, true); }
static int k_reflection_pad3d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 3, true); }
static int k_replication_pad1d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 1, false); }
static int k_replication_pad2d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 2, false); }
static int k_replication_pad3d(px_ctx *ctx, px_value *const *args) { return pad_nd(ctx, args, 3, false); }

/* ======================================================================== */
/* Pixel shuffle / unshuffle                                                */
/* ======================================================================== */

/* Checks shared by both directions; fills B (leading dims), C, H, W, r*r. */
static int shuffle_common(px_ctx *ctx, const px_tensor *in, px_tensor *out, int64_t r,
                          const char *name, int64_t *r2) {
  int rc;
  if (in->dim < 3)
    return px_fail(ctx, "%s expects input to have at least 3 dimensions, got %d", name, in->dim);
  if (r <= 0) return px_fail(ctx, "%s expects a positive factor, got %lld", name, (long long)r);
  if (__builtin_mul_overflow(r, r, r2))
    return px_fail(ctx, "%s factor %lld is too large", name, (long long)r);
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if (out->dim != in->dim)
    return px_fail(ctx, "out has %d dims, self has %d", out->dim, in->dim);
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  return 0;
}

/* aten::pixel_shuffle.out(Tensor self, int upscale_factor, *, Tensor(a!) out) */
static int k_pixel_shuffle(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[2]->u.t;
  int64_t r = args[1]->u.i, r2;
  int rc;
  if ((rc = shuffle_common(ctx, in, out, r, "pixel_shuffle", &r2))) return rc;
  int d = in->dim;
  int64_t C = in->sizes[d - 3], H = in->sizes[d - 2], W = in->sizes[d - 1], OH, OW;
  if (C % r2)
    return px_fail(ctx, "channels (%lld) must be divisible by upscale_factor^2 (%lld)",
                   (long long)C, (long long)r2);
  if (__builtin_mul_overflow(H, r, &OH) || __builtin_mul_overflow(W, r, &OW))
    return px_fail(ctx, "output size overflows");
  int64_t osz[PX_MAX_DIM];
  memcpy(osz, in->sizes, sizeof(int64_t) * (size_t)d);
  int64_t OC = C / r2;
  osz[d - 3] = OC;
  osz[d - 2] = OH;
  osz[d - 1] = OW;
  if ((rc = px_resize(ctx, out, d, osz))) return rc;
  if (out->numel == 0) return 0;
  int64_t B = px_prod(in->sizes, 0, d - 3);
  size_t es = px_elsize(in->dtype);
  /* out[b][c][h*r + i][w*r + j] = in[b][c*r*r + i*r + j][h][w] */
  BY_ELSIZE(es, {
    const E *ip = in->data;
    E *op = out->data;
    for (int64_t b = 0; b < B; b++)
      for (int64_t c = 0; c < OC; c++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t i = 0; i < r; i++) {
            E *dst = op + ((b * OC + c) * OH + h * r + i) * OW;
            for (int64_t j = 0; j < r; j++) {
              const E *src = ip + ((b * C + c * r2 + i * r + j) * H + h) * W;
              for (int64_t w = 0; w < W; w++) dst[w * r + j] = src[w];
            }
          }
  })
  return 0;
}

/* aten::pixel_unshuffle.out(Tensor self, int downscale_factor, *, Tensor(a!) out) */
static int k_pixel_unshuffle(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[2]->u.t;
  int64_t r = args[1]->u.i, r2;
  int rc;
  if ((rc = shuffle_common(ctx, in, out, r, "pixel_unshuffle", &r2))) return rc;
  int d = in->dim;
  int64_t C = in->sizes[d - 3], H = in->sizes[d - 2], W = in->sizes[d - 1], OC;
  if (H % r || W % r)
    return px_fail(ctx, "height (%lld) and width (%lld) must be divisible by downscale_factor (%lld)",
                   (long long)H, (long long)W, (long long)r);
  if (__builtin_mul_overflow(C, r2, &OC)) return px_fail(ctx, "output size overflows");
  int64_t OH = H / r, OW = W / r;
  int64_t osz[PX_MAX_DIM];
  memcpy(osz, in->sizes, sizeof(int64_t) * (size_t)d);
  osz[d - 3] = OC;
  osz[d - 2] = OH;
  osz[d - 1] = OW;
  if ((rc = px_resize(ctx, out, d, osz))) return rc;
  if (out->numel == 0) return 0;
  int64_t B = px_prod(in->sizes, 0, d - 3);
  size_t es = px_elsize(in->dtype);
  /* out[b][c*r*r + i*r + j][h][w] = in[b][c][h*r + i][w*r + j] */
  BY_ELSIZE(es, {
    const E *ip = in->data;
    E *op = out->data;
    E *dst = op;
    for (int64_t b = 0; b < B; b++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < r; i++)
          for (int64_t j = 0; j < r; j++)
            for (int64_t h = 0; h < OH; h++, dst += OW) {
              const E *src = ip + ((b * C + c) * H + h * r + i) * W + j;
              for (int64_t w = 0; w < OW; w++) dst[w] = src[w * r];
            }
  })
  return 0;
}

/* ======================================================================== */
/* grid_sampler_2d                                                          */
/* ======================================================================== */

/* Grid coordinates follow torch's vectorised CPU kernel: unnormalise, then
 * clip (NaN -> 0) or reflect-and-clip. float16 / bfloat16 are computed as
 * torch's vectorised half types do: every operation in float, rounded back
 * to the storage type (the R macro). Locations far outside any tensor map to
 * an out-of-bounds index. */
static inline int64_t gs_index(double v) {
  return (v > -1e15 && v < 1e15) ? (int64_t)v : -2;
}

#define R_ID(x) (x)
#define R_HALF(x) px_half_to_float(px_float_to_half(x))
#define R_BF16(x) px_bf16_to_float(px_float_to_bf16(x))

#define GS_HELPERS(CT, SFX, R)                                                           \
  typedef struct {                                                                       \
    CT scale, max_val, low, twice_span;                                                  \
    bool ac, empty;                                                                      \
    int pad;                                                                             \
  } gs_loc_##SFX;                                                                        \
  static void gs_loc_init_##SFX(gs_loc_##SFX *l, int64_t size, bool ac, int pad) {       \
    l->ac = ac;                                                                          \
    l->pad = pad;                                                                        \
    l->max_val = R((CT)(size - 1));                                                      \
    if (ac) {                                                                            \
      l->scale = R(R((CT)(size - 1)) / 2);                                               \
      l->low = 0;                                                                        \
      l->twice_span = R(R((CT)(size - 1)) * 2);                                          \
      l->empty = size <= 1;                                                              \
    } else {                                                                             \
      l->scale = R(R((CT)size) / 2);                                                     \
      l->low = (CT)-0.5;                                                                 \
      l->twice_span = R(R((CT)size) * 2);                                                \
      l->empty = size <= 0;                                                              \
    }                                                                                    \
  }                                                                                      \
  static inline CT gs_unnorm_##SFX(const gs_loc_##SFX *l, CT g) {                        \
    CT u = R(R(g + 1) * l->scale);                                                       \
    return l->ac ? u : R(u - (CT)0.5);                                                   \
  }                                                                                      \
  static inline CT gs_clip_##SFX(const gs_loc_##SFX *l, CT x) {                          \
    if (!(x > 0)) return 0; /* NaN clips to 0, as torch's vectorised clamp */           \
    return x < l->max_val ? x : l->max_val;                                              \
  }                                                                                      \
  static inline CT gs_reflect_##SFX(const gs_loc_##SFX *l, CT x) {                       \
    if (l->empty) return 0;                                                              \
    CT a = (CT)fabs((double)R(x - l->low));                                              \
    CT flips = (CT)trunc((double)R(a / l->twice_span));                                  \
    CT extra = R(a - R(flips * l->twice_span));                                          \
    CT other = R(l->twice_span - extra);                                                 \
    CT m = (extra != extra || other != other) ? extra + other : (extra < other ? extra : other); \
    return R(m + l->low);                                                                \
  }                                                                                      \
  static inline CT gs_coord_##SFX(const gs_loc_##SFX *l, CT x) {                         \
    if (l->pad == 1) return gs_clip_##SFX(l, x);                                         \
    if (l->pad == 2) return gs_clip_##SFX(l, gs_reflect_##SFX(l, x));                    \
    return x;                                                                            \
  }

GS_HELPERS(float, f32, R_ID)
GS_HELPERS(double, f64, R_ID)
GS_HELPERS(float, f16, R_HALF)
GS_HELPERS(float, bf16, R_BF16)

/* Bicubic convolution coefficients (A = -0.75) for fraction t. */
#define GS_CUBIC(CT, R, c, t)                                                   \
  do {                                                                          \
    const CT A_ = (CT)-0.75;                                                    \
    CT x_ = R((t) + 1);                                                         \
    (c)[0] = R(R(R(R(R(R(A_ * x_) - 5 * A_) * x_) + 8 * A_) * x_) - 4 * A_);    \
    x_ = (t);                                                                   \
    (c)[1] = R(R(R(R(R((A_ + 2) * x_) - (A_ + 3)) * x_) * x_) + 1);             \
    x_ = R(1 - (t));                                                            \
    (c)[2] = R(R(R(R(R((A_ + 2) * x_) - (A_ + 3)) * x_) * x_) + 1);             \
    x_ = R(2 - (t));                                                            \
    (c)[3] = R(R(R(R(R(R(A_ * x_) - 5 * A_) * x_) + 8 * A_) * x_) - 4 * A_);    \
  } while (0)

/* a0*b0 + a1*b1 + a2*b2 + a3*b3, left to right */
#define GS_DOT4(R, a, b) \
  R(R(R(R((a)[0] * (b)[0]) + R((a)[1] * (b)[1])) + R((a)[2] * (b)[2])) + R((a)[3] * (b)[3]))

#define GS_DEFINE(NAME, ST, CT, SFX, R, LD, SV)                                             \
  static void NAME(const px_tensor *in, const px_tensor *grid, px_tensor *out, int mode,   \
                   int pad, bool ac) {                                                     \
    const ST *ip = in->data, *gp = grid->data;                                             \
    ST *op = out->data;                                                                    \
    int64_t N = in->sizes[0], C = in->sizes[1], H = in->sizes[2], W = in->sizes[3];        \
    int64_t OH = grid->sizes[1], OW = grid->sizes[2], HW = H * W, OHW = OH * OW;           \
    gs_loc_##SFX lw, lh;                                                                   \
    gs_loc_init_##SFX(&lw, W, ac, pad);                                                    \
    gs_loc_init_##SFX(&lh, H, ac, pad);                                                    \
    for (int64_t n = 0; n < N; n++)                                                        \
      for (int64_t s = 0; s < OHW; s++) {                                                  \
        CT gx = LD(gp, (n * OHW + s) * 2), gy = LD(gp, (n * OHW + s) * 2 + 1);             \
        const ST *pl = ip + n * C * HW;                                                    \
        int64_t o = n * C * OHW + s;                                                       \
        if (mode == 0) { /* bilinear */                                                    \
          CT x = gs_coord_##SFX(&lw, gs_unnorm_##SFX(&lw, gx));                            \
          CT y = gs_coord_##SFX(&lh, gs_unnorm_##SFX(&lh, gy));                            \
          CT xw = (CT)floor((double)x), yn = (CT)floor((double)y);                         \
          CT w = R(x - xw), e = R(1 - w), nn = R(y - yn), so = R(1 - nn);                  \
          CT wt[4] = {R(so * e), R(so * w), R(nn * e), R(nn * w)}; /* nw ne sw se */       \
          int64_t ix = gs_index((double)xw), iy = gs_index((double)yn);                   \
          bool mw = ix >= 0 && ix < W, me = ix + 1 >= 0 && ix + 1 < W;                     \
          bool mn = iy >= 0 && iy < H, ms = iy + 1 >= 0 && iy + 1 < H;                     \
          int64_t onw = iy * W + ix;                                                       \
          for (int64_t c = 0; c < C; c++, pl += HW, o += OHW) {                            \
            CT v[4] = {mn && mw ? LD(pl, onw) : 0, mn && me ? LD(pl, onw + 1) : 0,         \
                       ms && mw ? LD(pl, onw + W) : 0, ms && me ? LD(pl, onw + W + 1) : 0}; \
            SV(op, o, GS_DOT4(R, v, wt));                                                  \
          }                                                                                \
        } else if (mode == 1) { /* nearest */                                              \
          CT x = gs_coord_##SFX(&lw, gs_unnorm_##SFX(&lw, gx));                            \
          CT y = gs_coord_##SFX(&lh, gs_unnorm_##SFX(&lh, gy));                            \
          int64_t ix = gs_index(nearbyint((double)x)), iy = gs_index(nearbyint((double)y)); \
          bool in_b = ix >= 0 && ix < W && iy >= 0 && iy < H;                              \
          for (int64_t c = 0; c < C; c++, pl += HW, o += OHW) {                            \
            CT r = in_b ? LD(pl, iy * W + ix) : 0;                                         \
            SV(op, o, r);                                                                  \
          }                                                                                \
        } else { /* bicubic */                                                             \
          CT x = gs_unnorm_##SFX(&lw, gx), y = gs_unnorm_##SFX(&lh, gy);                   \
          CT x0 = (CT)floor((double)x), y0 = (CT)floor((double)y);                         \
          CT cx[4], cy[4];                                                                 \
          GS_CUBIC(CT, R, cx, R(x - x0));                                                  \
          GS_CUBIC(CT, R, cy, R(y - y0));                                                  \
          int64_t ixs[4], iys[4];                                                          \
          bool mx[4], my[4];                                                               \
          for (int k = 0; k < 4; k++) {                                                    \
            ixs[k] = gs_index((double)gs_coord_##SFX(&lw, R(x0 + (CT)(k - 1))));           \
            iys[k] = gs_index((double)gs_coord_##SFX(&lh, R(y0 + (CT)(k - 1))));           \
            mx[k] = ixs[k] >= 0 && ixs[k] < W;                                             \
            my[k] = iys[k] >= 0 && iys[k] < H;                                             \
          }                                                                                \
          for (int64_t c = 0; c < C; c++, pl += HW, o += OHW) {                            \
            CT rows[4];                                                                    \
            for (int i = 0; i < 4; i++) {                                                  \
              CT v[4];                                                                     \
              for (int j = 0; j < 4; j++)                                                  \
                v[j] = my[i] && mx[j] ? LD(pl, iys[i] * W + ixs[j]) : 0;                   \
              rows[i] = GS_DOT4(R, cx, v);                                                 \
            }                                                                              \
            SV(op, o, GS_DOT4(R, cy, rows));                                               \
          }                                                                                \
        }                                                                                  \
      }                                                                                    \
  }

GS_DEFINE(grid_sample_f32, float, float, f32, R_ID, LD_NATIVE, SV_NATIVE)
GS_DEFINE(grid_sample_f64, double, double, f64, R_ID, LD_NATIVE, SV_NATIVE)
GS_DEFINE(grid_sample_f16, uint16_t, float, f16, R_HALF, LD_HALF, SV_HALF)
GS_DEFINE(grid_sample_bf16, uint16_t, float, bf16, R_BF16, LD_BF16, SV_BF16)

/* aten::grid_sampler_2d.out(Tensor input, Tensor grid, int interpolation_mode,
 *   int padding_mode, bool align_corners, *, Tensor(a!) out) */
static int k_grid_sampler_2d(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *grid = args[1]->u.t, *out = args[5]->u.t;
  int64_t mode = args[2]->u.i, pad = args[3]->u.i;
  bool ac = args[4]->u.b;
  int rc;
  if (in->dim != 4) return fail_shape(ctx, "input", in, "expected a 4-D (N, C, H, W) tensor");
  if (grid->dim != 4 || grid->sizes[3] != 2)
    return fail_shape(ctx, "grid", grid, "expected a 4-D (N, H_out, W_out, 2) tensor");
  if (in->sizes[0] != grid->sizes[0])
    return px_fail(ctx, "input and grid must have the same batch size, got %lld and %lld",
                   (long long)in->sizes[0], (long long)grid->sizes[0]);
  if (in->sizes[2] == 0 || in->sizes[3] == 0)
    return fail_shape(ctx, "input", in, "expected non-empty spatial dimensions");
  if (mode < 0 || mode > 2)
    return px_fail(ctx, "interpolation_mode %lld is not one of 0 (bilinear), 1 (nearest), 2 (bicubic)",
                   (long long)mode);
  if (pad < 0 || pad > 2)
    return px_fail(ctx, "padding_mode %lld is not one of 0 (zeros), 1 (border), 2 (reflection)",
                   (long long)pad);
  if ((rc = require_floating(ctx, in, "input")) || (rc = px_require_same_dtype(ctx, grid, "grid", in, "input")) ||
      (rc = px_require_same_dtype(ctx, out, "out", in, "input")))
    return rc;
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, grid, "grid")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t osz[4] = {in->sizes[0], in->sizes[1], grid->sizes[1], grid->sizes[2]};
  if (out->dim != 4) return px_fail(ctx, "out must be 4-D, got %d dims", out->dim);
  if ((rc = px_resize(ctx, out, 4, osz))) return rc;
  if (out->numel == 0) return 0;
  switch (in->dtype) {
    case PX_F32: grid_sample_f32(in, grid, out, (int)mode, (int)pad, ac); break;
    case PX_F64: grid_sample_f64(in, grid, out, (int)mode, (int)pad, ac); break;
    case PX_F16: grid_sample_f16(in, grid, out, (int)mode, (int)pad, ac); break;
    default: grid_sample_bf16(in, grid, out, (int)mode, (int)pad, ac); break;
  }
  return 0;
}

/* ======================================================================== */
/* _upsample_bilinear2d_aa                                                  */
/* ======================================================================== */

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
  if (in->dtype != PX_F32 && in->dtype != PX_F64 && in->dtype != PX_U8)
    return px_fail(ctx, "self has dtype %s; supported: float32, float64, uint8",
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

/* ======================================================================== */
/* Index family: masked_scatter                                             */
/* ======================================================================== */

/* aten::masked_scatter.out(Tensor self, Tensor mask, Tensor source, *,
 *   Tensor(a!) out): out = broadcast(self, mask); positions where the mask is
 *   true take the next element of source (row-major order). */
static int k_masked_scatter(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *mask = args[1]->u.t, *src = args[2]->u.t, *out = args[3]->u.t;
  int rc;
  if (mask->dtype != PX_BOOL)
    return px_fail(ctx, "mask must be bool, got %s", px_dtype_name(mask->dtype));
  if ((rc = px_require_same_dtype(ctx, src, "source", self, "self")) ||
      (rc = px_require_same_dtype(ctx, out, "out", self, "self")))
    return rc;
  if ((rc = px_require_contiguous(ctx, src, "source")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int od;
  int64_t osz[PX_MAX_DIM];
  if ((rc = px_broadcast_sizes(ctx, self->dim, self->sizes, mask->dim, mask->sizes, &od, osz)))
    return rc;
  if ((rc = px_resize(ctx, out, od, osz))) return rc;
  if (out->numel == 0) return 0;
  px_iter it;
  px_iter_init(&it, out->dim, out->sizes);
  px_iter_add(&it, out);
  px_iter_add(&it, self);
  px_iter_add(&it, mask);
  px_iter_coalesce(&it);
  const uint8_t *mp = mask->data;
  int64_t used = 0, avail = src->numel;
  BY_ELSIZE(px_elsize(self->dtype), {
    E *op = out->data;
    const E *sp = self->data, *cp = src->data;
    do {
      E *o = op + it.off[0];
      const E *s = sp + it.off[1];
      const uint8_t *m = mp + it.off[2];
      int64_t so = it.inner_stride[0], ss = it.inner_stride[1], sm = it.inner_stride[2];
      for (int64_t k = 0; k < it.inner; k++) {
        if (m[k * sm]) {
          if (used >= avail)
            return px_fail(ctx, "source has %lld elements, fewer than the mask's true entries",
                           (long long)avail);
          o[k * so] = cp[used++];
        } else {
          o[k * so] = s[k * ss];
        }
      }
    } while (px_iter_next(&it));
  })
  return 0;
}

/* ======================================================================== */
/* Linalg family: linear                                                    */
/* ======================================================================== */

/* aten::linear.out(Tensor input, Tensor weight, Tensor? bias=None, *,
 *   Tensor(a!) out): out = input @ weight.T + bias. */
static int k_linear(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *w = args[1]->u.t, *out = args[3]->u.t;
  px_tensor *b = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  int rc;
  if (in->dim < 1) return px_fail(ctx, "input must be at least 1-D, got a 0-D tensor");
  if (w->dim != 2) return fail_shape(ctx, "weight", w, "expected a 2-D (out_features, in_features) tensor");
  if ((rc = px_require_same_dtype(ctx, w, "weight", in, "input")) ||
      (b && (rc = px_require_same_dtype(ctx, b, "bias", in, "input"))) ||
      (rc = px_require_same_dtype(ctx, out, "out", in, "input")))
    return rc;
  if (in->dtype == PX_BOOL) return px_fail(ctx, "linear does not support bool tensors");
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, w, "weight")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t K = in->sizes[in->dim - 1], NO = w->sizes[0];
  if (w->sizes[1] != K)
    return px_fail(ctx, "input's last dimension (%lld) does not match weight's in_features (%lld)",
                   (long long)K, (long long)w->sizes[1]);
  int64_t osz[PX_MAX_DIM];
  memcpy(osz, in->sizes, sizeof(int64_t) * (size_t)in->dim);
  osz[in->dim - 1] = NO;
  if ((rc = px_resize(ctx, out, in->dim, osz))) return rc;
  int64_t M = px_prod(in->sizes, 0, in->dim - 1);
  if (b) { /* bias must broadcast to the output's shape without changing it */
    int bd;
    int64_t bs[PX_MAX_DIM];
    if ((rc = px_broadcast_sizes(ctx, out->dim, out->sizes, b->dim, b->sizes, &bd, bs))) return rc;
    bool ok = bd == out->dim;
    for (int k = 0; ok && k < bd; k++) ok = bs[k] == out->sizes[k];
    if (!ok) return fail_shape(ctx, "bias", b, "it does not broadcast to the output's shape");
  }
  if (out->numel == 0) return 0;
  if (b) { /* out = broadcast bias, then accumulate the product into it */
    px_tensor view = *b;
    view.dim = out->dim;
    int lead = out->dim - b->dim;
    for (int k = 0; k < out->dim; k++) {
      int bk = k - lead;
      view.sizes[k] = out->sizes[k];
      view.strides[k] = (bk >= 0 && b->sizes[bk] != 1) ? b->strides[bk] : 0;
    }
    view.numel = out->numel;
    if ((rc = px_copy_strided(ctx, out, &view))) return rc;
  }
  if (in->dtype == PX_F32)
    return px_gemm_f32(ctx, NULL, M, NO, K, 1.0f, in->data, K, 1, w->data, 1, K, b ? 1.0f : 0.0f,
                       out->data, NO);
  if (in->dtype == PX_F64) {
    const double *x = in->data, *wt = w->data;
    double *o = out->data;
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = 0; j < NO; j++) {
        const double *xr = x + m * K, *wr = wt + j * K;
        double acc = 0.0;
        for (int64_t k = 0; k < K; k++) acc += xr[k] * wr[k];
        o[m * NO + j] = b ? o[m * NO + j] + acc : acc;
      }
    return 0;
  }
  bool fl = px_is_floating(in->dtype);
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < NO; j++) {
      int64_t oi = m * NO + j;
      if (fl) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; k++)
          acc += px_load_d(in->data, in->dtype, m * K + k) * px_load_d(w->data, w->dtype, j * K + k);
        if (b) acc += px_load_d(out->data, out->dtype, oi);
        px_store_d(out->data, out->dtype, oi, acc);
      } else { /* integers wrap, as torch's */
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += (uint64_t)px_load_i(in->data, in->dtype, m * K + k) *
                 (uint64_t)px_load_i(w->data, w->dtype, j * K + k);
        if (b) acc += (uint64_t)px_load_i(out->data, out->dtype, oi);
        px_store_i(out->data, out->dtype, oi, (int64_t)acc);
      }
    }
  return 0;
}

/* ======================================================================== */
/* Distance: _pdist_forward                                                 */
/* ======================================================================== */

#define PDIST_DEFINE(NAME, CT)                                                             \
  static void NAME(const CT *x, CT *o, int64_t N, int64_t M, double p) {                   \
    int kind = p == 0.0 ? 0 : p == 1.0 ? 1 : p == 2.0 ? 2 : isinf(p) ? 3 : 4;             \
    for (int64_t i = 0; i < N; i++)                                                        \
      for (int64_t j = i + 1; j < N; j++) {                                                \
        const CT *a = x + i * M, *b = x + j * M;                                           \
        double acc = 0.0;                                                                  \
        switch (kind) {                                                                    \
          case 0:                                                                          \
            for (int64_t k = 0; k < M; k++) {                                              \
              CT d = a[k] - b[k];                                                          \
              acc += d != d ? (double)d : (d != 0);                                        \
            }                                                                              \
            break;                                                                         \
          case 1:                                                                          \
            for (int64_t k = 0; k < M; k++) acc += fabs((double)(a[k] - b[k]));            \
            break;                                                                         \
          case 2:                                                                          \
            for (int64_t k = 0; k < M; k++) {                                              \
              double d = (double)(a[k] - b[k]);                                            \
              acc += d * d;                                                                \
            }                                                                              \
            acc = sqrt(acc);                                                               \
            break;                                                                         \
          case 3:                                                                          \
            for (int64_t k = 0; k < M; k++) {                                              \
              double d = fabs((double)(a[k] - b[k]));                                      \
              if (d != d || d > acc) acc = d;                                              \
              if (acc != acc) break;                                                       \
            }                                                                              \
            break;                                                                         \
          default:                                                                         \
            for (int64_t k = 0; k < M; k++) acc += pow(fabs((double)(a[k] - b[k])), p);    \
            acc = pow(acc, 1.0 / p);                                                       \
            break;                                                                         \
        }                                                                                  \
        *o++ = (CT)acc;                                                                    \
      }                                                                                    \
  }

PDIST_DEFINE(pdist_f32, float)
PDIST_DEFINE(pdist_f64, double)

/* aten::_pdist_forward.out(Tensor self, float p=2., *, Tensor(a!) out) */
static int k_pdist_forward(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[2]->u.t;
  double p = arg_d(args[1]);
  int rc;
  if (in->dim != 2) return fail_shape(ctx, "self", in, "pdist expects a 2-D tensor");
  if (in->dtype != PX_F32 && in->dtype != PX_F64)
    return px_fail(ctx, "self has dtype %s; pdist supports float32 and float64",
                   px_dtype_name(in->dtype));
  if (p != p) return px_fail(ctx, "p must not be NaN");
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "self"))) return rc;
  if (out->dim != 1) return px_fail(ctx, "out must be 1-D, got %d dims", out->dim);
  int64_t N = in->sizes[0], M = in->sizes[1];
  int64_t n = N > 1 ? N * (N - 1) / 2 : 0;
  if ((rc = px_resize(ctx, out, 1, &n))) return rc;
  if (n == 0) return 0;
  if (in->dtype == PX_F32)
    pdist_f32(in->data, out->data, N, M, p);
  else
    pdist_f64(in->data, out->data, N, M, p);
  return 0;
}

/* ======================================================================== */
/* Random: native_dropout, rand, randn                                      */
/* ======================================================================== */

/* xorshift64* streams; each kernel call seeds a fresh stream from a
 * process-wide counter (splitmix64), so successive calls differ and a
 * process replays the same sequence. */
static _Atomic uint64_t rng_calls;

typedef struct {
  uint64_t s;
} rng_t;

static void rng_seed(rng_t *r) {
  uint64_t z = atomic_fetch_add(&rng_calls, 1) * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  r->s = z ? z : 0x9E3779B97F4A7C15ull;
}

static inline uint64_t rng_next(rng_t *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_uniform(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* aten::native_dropout.out(Tensor input, float p, bool? train, *,
 *   Tensor(a!) out0, Tensor(b!) out1): train (or None): mask ~ Bernoulli(1-p),
 *   out0 = input * mask / (1 - p); otherwise out0 = input, mask all true. */
static int k_native_dropout(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[3]->u.t, *mask = args[4]->u.t;
  double p = arg_d(args[1]);
  bool train = args[2]->tag == PX_V_NONE ? true : args[2]->u.b;
  int rc;
  if ((rc = px_require_same_dtype(ctx, out, "out0", in, "input"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out0")) ||
      (rc = px_require_contiguous(ctx, mask, "out1")))
    return rc;
  if ((rc = px_resize_like(ctx, out, in)) || (rc = px_resize_like(ctx, mask, in))) return rc;
  int64_t n = in->numel;
  if (n == 0) return 0;
  if (!train) {
    memcpy(out->data, in->data, in->nbytes);
    if (mask->dtype == PX_BOOL)
      memset(mask->data, 1, (size_t)n);
    else
      for (int64_t k = 0; k < n; k++) px_store_i(mask->data, mask->dtype, k, 1);
    return 0;
  }
  if (!(p >= 0.0 && p <= 1.0))
    return px_fail(ctx, "dropout probability must be in [0, 1], got %g", p);
  if ((rc = require_floating(ctx, in, "input"))) return rc;
  double keep = 1.0 - p, scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  rng_t r;
  rng_seed(&r);
  bool mb = mask->dtype == PX_BOOL;
  uint8_t *mp = mask->data;
  if (in->dtype == PX_F32) {
    const float *x = in->data;
    float *o = out->data, fs = (float)scale;
    for (int64_t k = 0; k < n; k++) {
      bool m = rng_uniform(&r) < keep;
      o[k] = (x[k] * (float)m) * fs;
      if (mb)
        mp[k] = m;
      else
        px_store_i(mask->data, mask->dtype, k, m);
    }
    return 0;
  }
  for (int64_t k = 0; k < n; k++) {
    bool m = rng_uniform(&r) < keep;
    double x = px_load_d(in->data, in->dtype, k);
    if (in->dtype == PX_F64)
      ((double *)out->data)[k] = (x * (double)m) * scale;
    else /* float16 / bfloat16: x * m is exact; the scale is applied in float */
      px_store_d(out->data, out->dtype, k, (double)((float)(x * (double)m) * (float)scale));
    px_store_i(mask->data, mask->dtype, k, m);
  }
  return 0;
}

static int random_fill(px_ctx *ctx, px_value *const *args, bool normal) {
  const int64_t *size = px_intlist(args[0]);
  uint32_t nd = args[0]->u.il.n;
  px_tensor *out = args[1]->u.t;
  int rc;
  if (!px_is_floating(out->dtype))
    return px_fail(ctx, "out has dtype %s; %s supports floating dtypes only",
                   px_dtype_name(out->dtype), normal ? "randn" : "rand");
  if ((int)nd != out->dim)
    return px_fail(ctx, "size has %u dims but out has %d", nd, out->dim);
  if ((rc = px_resize(ctx, out, (int)nd, size))) return rc;
  int64_t n = out->numel;
  rng_t r;
  rng_seed(&r);
  if (!normal) {
    /* as many random bits as the dtype's significand holds, so that no
     * value rounds up to 1 */
    for (int64_t k = 0; k < n; k++) {
      uint64_t x = rng_next(&r);
      switch (out->dtype) {
        case PX_F32: ((float *)out->data)[k] = (float)(x >> 40) * 0x1.0p-24f; break;
        case PX_F64: ((double *)out->data)[k] = (double)(x >> 11) * 0x1.0p-53; break;
        case PX_F16: px_store_d(out->data, out->dtype, k, (double)(x >> 53) * 0x1.0p-11); break;
        default: px_store_d(out->data, out->dtype, k, (double)(x >> 56) * 0x1.0p-8); break;
      }
    }
    return 0;
  }
  /* Box-Muller, two values per pair of uniforms */
  for (int64_t k = 0; k < n; k += 2) {
    double u1 = 1.0 - rng_uniform(&r), u2 = rng_uniform(&r); /* u1 in (0, 1] */
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    double z0 = rad * cos(th), z1 = rad * sin(th);
    if (out->dtype == PX_F32) {
      float *o = out->data;
      o[k] = (float)z0;
      if (k + 1 < n) o[k + 1] = (float)z1;
    } else {
      px_store_d(out->data, out->dtype, k, z0);
      if (k + 1 < n) px_store_d(out->data, out->dtype, k + 1, z1);
    }
  }
  return 0;
}

/* aten::rand.out(SymInt[] size, *, Tensor(a!) out): uniform on [0, 1) */
static int k_rand(px_ctx *ctx, px_value *const *args) { return random_fill(ctx, args, false); }
/* aten::randn.out(SymInt[] size, *, Tensor(a!) out): standard normal */
static int k_randn(px_ctx *ctx, px_value *const *args) { return random_fill(ctx, args, true); }

/* ======================================================================== */
/* Norm family: _native_batch_norm_legit.out (running statistics)           */
/* ======================================================================== */

static int channel_vec(px_ctx *ctx, const px_tensor *t, int64_t C, const char *what) {
  if (t->dim != 1 || t->sizes[0] != C)
    return fail_shape(ctx, what, t, "expected a 1-D tensor with one value per channel");
  return require_floating(ctx, t, what);
}

/* aten::_native_batch_norm_legit.out(Tensor input, Tensor? weight,
 *   Tensor? bias, Tensor(a!) running_mean, Tensor(b!) running_var,
 *   bool training, float momentum, float eps, *, Tensor(d!) out,
 *   Tensor(e!) save_mean, Tensor(f!) save_invstd)
 * training: normalises with the batch statistics (biased variance), writes
 * them to save_mean / save_invstd and updates running_mean / running_var in
 * place (the unbiased variance goes into running_var). Otherwise normalises
 * with the running statistics and save_mean / save_invstd become empty. */
static int k_batch_norm_legit(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t;
  px_tensor *w = args[1]->tag == PX_V_NONE ? NULL : args[1]->u.t;
  px_tensor *b = args[2]->tag == PX_V_NONE ? NULL : args[2]->u.t;
  px_tensor *rm = args[3]->u.t, *rv = args[4]->u.t;
  bool training = args[5]->u.b;
  double momentum = arg_d(args[6]), eps = arg_d(args[7]);
  px_tensor *out = args[8]->u.t, *sm = args[9]->u.t, *si = args[10]->u.t;
  int rc;
  if (in->dim < 2) return fail_shape(ctx, "input", in, "expected at least 2 dims (N, C, ...)");
  if ((rc = require_floating(ctx, in, "input")) || (rc = px_require_same_dtype(ctx, out, "out", in, "input")))
    return rc;
  int64_t C = in->sizes[1];
  if ((w && (rc = channel_vec(ctx, w, C, "weight"))) || (b && (rc = channel_vec(ctx, b, C, "bias"))) ||
      (rc = channel_vec(ctx, rm, C, "running_mean")) || (rc = channel_vec(ctx, rv, C, "running_var")) ||
      (rc = require_floating(ctx, sm, "save_mean")) || (rc = require_floating(ctx, si, "save_invstd")))
    return rc;
  if (sm->dim != 1 || si->dim != 1)
    return px_fail(ctx, "save_mean and save_invstd must be 1-D, got %d and %d dims", sm->dim, si->dim);
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t zero = 0;
  if ((rc = px_resize_like(ctx, out, in)) || (rc = px_resize(ctx, sm, 1, training ? &C : &zero)) ||
      (rc = px_resize(ctx, si, 1, training ? &C : &zero)))
    return rc;
  int64_t N = in->sizes[0], inner = px_prod(in->sizes, 2, in->dim), cnt = N * inner;
  double *alpha = px_scratch(ctx, sizeof(double) * (size_t)(2 * C + 1));
  if (!alpha) return PYEXEC_ERR_EXECUTION;
  double *beta = alpha + C;
  for (int64_t c = 0; c < C; c++) {
    double mean, invstd;
    if (training) {
      double s = 0.0, q = 0.0;
      for (int64_t n = 0; n < N; n++) {
        int64_t o = (n * C + c) * inner;
        if (in->dtype == PX_F32) {
          const float *x = (const float *)in->data + o;
          for (int64_t k = 0; k < inner; k++) s += x[k];
        } else {
          for (int64_t k = 0; k < inner; k++) s += px_load_d(in->data, in->dtype, o + k);
        }
      }
      mean = cnt ? s / (double)cnt : NAN;
      for (int64_t n = 0; n < N; n++) {
        int64_t o = (n * C + c) * inner;
        if (in->dtype == PX_F32) {
          const float *x = (const float *)in->data + o;
          for (int64_t k = 0; k < inner; k++) {
            double d = x[k] - mean;
            q += d * d;
          }
        } else {
          for (int64_t k = 0; k < inner; k++) {
            double d = px_load_d(in->data, in->dtype, o + k) - mean;
            q += d * d;
          }
        }
      }
      double var = cnt ? q / (double)cnt : NAN;
      invstd = 1.0 / sqrt(var + eps);
      px_store_d(sm->data, sm->dtype, c, mean);
      px_store_d(si->data, si->dtype, c, invstd);
      double unbiased = q / (double)(cnt - 1);
      px_store_d(rm->data, rm->dtype, c,
                 momentum * mean + (1.0 - momentum) * px_load_d(rm->data, rm->dtype, c));
      px_store_d(rv->data, rv->dtype, c,
                 momentum * unbiased + (1.0 - momentum) * px_load_d(rv->data, rv->dtype, c));
    } else {
      mean = px_load_d(rm->data, rm->dtype, c);
      invstd = 1.0 / sqrt(px_load_d(rv->data, rv->dtype, c) + eps);
    }
    double a = invstd * (w ? px_load_d(w->data, w->dtype, c) : 1.0);
    alpha[c] = a;
    beta[c] = (b ? px_load_d(b->data, b->dtype, c) : 0.0) - mean * a;
  }
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      int64_t o = (n * C + c) * inner;
      if (in->dtype == PX_F32) {
        const float *x = (const float *)in->data + o;
        float *y = (float *)out->data + o, a = (float)alpha[c], bb = (float)beta[c];
        for (int64_t k = 0; k < inner; k++) y[k] = x[k] * a + bb;
      } else {
        for (int64_t k = 0; k < inner; k++)
          px_store_d(out->data, out->dtype, o + k,
                     px_load_d(in->data, in->dtype, o + k) * alpha[c] + beta[c]);
      }
    }
  return 0;
}

/* ======================================================================== */

/* running_mean / running_var of _native_batch_norm_legit.out are written in
 * place but sit among the schema arguments, before '|': the signature
 * grammar has no way to mark them; being 1-D they are always row-major, so
 * the executor never substitutes copies for them. */
const px_kernel_def px_kernels_spatial[] = {
    /* padding */
    {"aten::reflection_pad1d.out", "TLT|T", k_reflection_pad1d},
    {"aten::reflection_pad2d.out", "TLT|T", k_reflection_pad2d},
    {"aten::reflection_pad3d.out", "TLT|T", k_reflection_pad3d},
    {"aten::replication_pad1d.out", "TLT|T", k_replication_pad1d},
    {"aten::replication_pad2d.out", "TLT|T", k_replication_pad2d},
    {"aten::replication_pad3d.out", "TLT|T", k_replication_pad3d},
    /* pixel shuffles */
    {"aten::pixel_shuffle.out", "TIT|T", k_pixel_shuffle},
    {"aten::pixel_unshuffle.out", "TIT|T", k_pixel_unshuffle},
    /* sampling and resizing */
    {"aten::grid_sampler_2d.out", "TTIIBT|T", k_grid_sampler_2d},
    {"aten::_upsample_bilinear2d_aa.out", "TLBddT|T", k_upsample_bilinear2d_aa},
    /* index family */
    {"aten::masked_scatter.out", "TTTT|T", k_masked_scatter},
    /* linalg family */
    {"aten::linear.out", "TTtT|T", k_linear},
    /* distance */
    {"aten::_pdist_forward.out", "TDT|T", k_pdist_forward},
    /* random */
    {"aten::native_dropout.out", "TDb|TTX", k_native_dropout},
    {"aten::rand.out", "LT|T", k_rand},
    {"aten::randn.out", "LT|T", k_randn},
    /* norm family */
    {"aten::_native_batch_norm_legit.out", "TttTTBDD|TTTX", k_batch_norm_legit},
    {NULL, NULL, NULL},
};
