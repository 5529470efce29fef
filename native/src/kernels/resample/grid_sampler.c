/*
 * grid_sampler.c - grid_sampler_2d: bilinear, nearest and bicubic sampling
 * of an image at the points of a grid, with zeros / border / reflection
 * padding; typed loops for float32 and float64, float16 / bfloat16 as
 * ExecuTorch computes them (below).
 */
#include <math.h>

#include "kernels/common.h"

/* Grid coordinates follow torch's vectorised CPU kernel: unnormalise, then
 * clip (NaN -> 0) or reflect-and-clip. float16 / bfloat16 follow
 * ExecuTorch's kernel: bilinear sampling (its coordinates and weights
 * included) in float, rounded once; nearest and bicubic in the 16-bit type,
 * every operation in float rounded back to it (the R macro). Locations far
 * outside any tensor map to an out-of-bounds index. */
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
/* X3 is the argument of the last coefficient: torch's vectorised kernel
 * takes 2 - t; ExecuTorch (float16 / bfloat16 here) (1 - t) + 1. */
#define GS_X3_TORCH(R, t) R(2 - (t))
#define GS_X3_ET(R, t) R(R(1 - (t)) + 1)
#define GS_CUBIC(CT, R, X3, c, t)                                               \
  do {                                                                          \
    const CT A_ = (CT)-0.75;                                                    \
    CT x_ = R((t) + 1);                                                         \
    (c)[0] = R(R(R(R(R(R(A_ * x_) - 5 * A_) * x_) + 8 * A_) * x_) - 4 * A_);    \
    x_ = (t);                                                                   \
    (c)[1] = R(R(R(R(R((A_ + 2) * x_) - (A_ + 3)) * x_) * x_) + 1);             \
    x_ = R(1 - (t));                                                            \
    (c)[2] = R(R(R(R(R((A_ + 2) * x_) - (A_ + 3)) * x_) * x_) + 1);             \
    x_ = X3(R, t);                                                              \
    (c)[3] = R(R(R(R(R(R(A_ * x_) - 5 * A_) * x_) + 8 * A_) * x_) - 4 * A_);    \
  } while (0)

/* a0*b0 + a1*b1 + a2*b2 + a3*b3, left to right */
#define GS_DOT4(R, a, b) \
  R(R(R(R((a)[0] * (b)[0]) + R((a)[1] * (b)[1])) + R((a)[2] * (b)[2])) + R((a)[3] * (b)[3]))

/* SFX / R: the coordinate helpers and rounding of nearest and bicubic;
 * BSFX / BR those of bilinear (float16 / bfloat16: bilinear in float, as
 * ExecuTorch's kernel accumulates it; the others in the 16-bit type). */
#define GS_DEFINE(NAME, ST, CT, SFX, R, BSFX, BR, X3, LD, SV)                               \
  static void NAME(const px_tensor *in, const px_tensor *grid, px_tensor *out, int mode,   \
                   int pad, bool ac) {                                                     \
    const ST *ip = in->data, *gp = grid->data;                                             \
    ST *op = out->data;                                                                    \
    int64_t N = in->sizes[0], C = in->sizes[1], H = in->sizes[2], W = in->sizes[3];        \
    int64_t OH = grid->sizes[1], OW = grid->sizes[2], HW = H * W, OHW = OH * OW;           \
    gs_loc_##SFX lw, lh;                                                                   \
    gs_loc_##BSFX bw, bh;                                                                  \
    gs_loc_init_##SFX(&lw, W, ac, pad);                                                    \
    gs_loc_init_##SFX(&lh, H, ac, pad);                                                    \
    gs_loc_init_##BSFX(&bw, W, ac, pad);                                                   \
    gs_loc_init_##BSFX(&bh, H, ac, pad);                                                   \
    for (int64_t n = 0; n < N; n++)                                                        \
      for (int64_t s = 0; s < OHW; s++) {                                                  \
        CT gx = LD(gp, (n * OHW + s) * 2), gy = LD(gp, (n * OHW + s) * 2 + 1);             \
        const ST *pl = ip + n * C * HW;                                                    \
        int64_t o = n * C * OHW + s;                                                       \
        if (mode == 0) { /* bilinear */                                                    \
          CT x = gs_coord_##BSFX(&bw, gs_unnorm_##BSFX(&bw, gx));                          \
          CT y = gs_coord_##BSFX(&bh, gs_unnorm_##BSFX(&bh, gy));                          \
          CT xw = (CT)floor((double)x), yn = (CT)floor((double)y);                         \
          CT w = BR(x - xw), e = BR(1 - w), nn = BR(y - yn), so = BR(1 - nn);              \
          CT wt[4] = {BR(so * e), BR(so * w), BR(nn * e), BR(nn * w)}; /* nw ne sw se */   \
          int64_t ix = gs_index((double)xw), iy = gs_index((double)yn);                   \
          bool mw = ix >= 0 && ix < W, me = ix + 1 >= 0 && ix + 1 < W;                     \
          bool mn = iy >= 0 && iy < H, ms = iy + 1 >= 0 && iy + 1 < H;                     \
          int64_t onw = iy * W + ix;                                                       \
          for (int64_t c = 0; c < C; c++, pl += HW, o += OHW) {                            \
            CT v[4] = {mn && mw ? LD(pl, onw) : 0, mn && me ? LD(pl, onw + 1) : 0,         \
                       ms && mw ? LD(pl, onw + W) : 0, ms && me ? LD(pl, onw + W + 1) : 0}; \
            SV(op, o, GS_DOT4(BR, v, wt));                                                 \
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
          GS_CUBIC(CT, R, X3, cx, R(x - x0));                                              \
          GS_CUBIC(CT, R, X3, cy, R(y - y0));                                              \
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

GS_DEFINE(grid_sample_f32, float, float, f32, R_ID, f32, R_ID, GS_X3_TORCH, LD_NATIVE, SV_NATIVE)
GS_DEFINE(grid_sample_f64, double, double, f64, R_ID, f64, R_ID, GS_X3_TORCH, LD_NATIVE, SV_NATIVE)
GS_DEFINE(grid_sample_f16, uint16_t, float, f16, R_HALF, f32, R_ID, GS_X3_ET, LD_HALF, SV_HALF)
GS_DEFINE(grid_sample_bf16, uint16_t, float, bf16, R_BF16, f32, R_ID, GS_X3_ET, LD_BF16, SV_BF16)

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

const px_kernel_def px_kernels_grid_sampler[] = {
    {"aten::grid_sampler_2d.out", "TTIIBT|T", k_grid_sampler_2d},
    {NULL, NULL, NULL},
};
