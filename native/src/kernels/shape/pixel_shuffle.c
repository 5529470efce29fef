/*
 * pixel_shuffle.c - pixel_shuffle and pixel_unshuffle: moving channels into
 * spatial blocks and back, written once per element size.
 */
#include <string.h>

#include "kernels/common.h"

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

const px_kernel_def px_kernels_pixel_shuffle[] = {
    {"aten::pixel_shuffle.out", "TIT|T", k_pixel_shuffle},
    {"aten::pixel_unshuffle.out", "TIT|T", k_pixel_unshuffle},
    {NULL, NULL, NULL},
};
