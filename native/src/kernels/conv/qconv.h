/*
 * qconv.h - quantized 2-D convolution and transposed convolution on NHWC
 * int8 activations (private): XNNPACK's qs8 / qs8-qc8w convolution and
 * deconvolution (int8 out, fp32 requantization) and its qd8-f32-qc8w ones
 * (dynamically quantized int8 in, float out), grouped or not, over the
 * integer GEMM of qgemm.h.
 *
 * Both forms gather, for each output pixel, the input pixels its kernel
 * taps read into one row of int8 values (a tap outside the input holds the
 * input's zero point, so it adds nothing) and multiply the rows by the
 * packed filter rows. A static convolution whose input channels per group
 * are a multiple of 8 gathers nothing where the product path allows it
 * (AVX-512 VNNI): each row is a list of pointers, one per tap, to the input
 * pixel's channels or to a run of the zero point, and the product reads the
 * input in place (px_qgemm_qs8_indirect); a row's sum, which the product's
 * offset correction needs, is the sum of its taps' per-pixel sums. A
 * few-channel one (a 3-channel stem: one group, kernel rows of at most 64
 * bytes) lists its kernel rows instead, each read in place and padded to
 * 8 bytes by the next pixels' bytes, which meet zero weights. A transposed convolution is split into its stride_h x
 * stride_w phases (the output pixels whose (o + padding) mod stride is the
 * same read the same subset of the taps): each phase is an ordinary product
 * over its own taps only, so no work is spent on the taps that fall between
 * input pixels; a phase with no taps gives the bias alone. The sums are
 * exact int32 sums, so they equal XNNPACK's whatever the order; the float
 * steps are px_qgemm_qs8's and px_qgemm_qd8_f32's. Results do not depend on
 * the thread count.
 *
 * Layouts: input [N, H, W, groups * gic], output [N, OH, OW, groups * goc],
 * filter [groups * goc, KH, KW, gic] (XNNPACK's OHWI; ConvTranspose2d's too).
 *   conv:       ih = oh * stride + i * dilation - pad_top
 *               OH = (H + pad_top + pad_bottom - dilation * (KH - 1) - 1) / stride + 1
 *   transposed: oh = ih * stride + i * dilation - pad_top
 *               OH = stride * (H - 1) + adjustment + dilation * (KH - 1) + 1 - pad_top - pad_bottom
 * (the same along the width).
 */
#ifndef PX_QCONV_H
#define PX_QCONV_H

#include "kernels/kernel.h"

typedef struct px_qconv px_qconv;

typedef struct px_qconv_desc {
  int transposed;              /* 1: ConvTranspose2d */
  int dynamic;                 /* 1: qd8 input, float output; 0: int8 in and out */
  int64_t groups, gic, goc;    /* groups, input / output channels per group */
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pt, pl, pb, pr;      /* padding top, left, bottom, right */
  int64_t ah, aw;              /* transposed: output adjustment (< stride); else 0 */
  const int8_t *weights;       /* [groups * goc][kh][kw][gic] */
  /* static (dynamic = 0) */
  const int32_t *bias;         /* groups * goc, or NULL */
  const float *requant;        /* groups * goc: in_scale * w_scale / out_scale, in (0, 256) */
  int32_t in_zp, out_zp;       /* in [-128, 127] */
  int32_t qmin, qmax;          /* the output clamp in int8, qmin <= qmax */
  /* dynamic (dynamic = 1) */
  const float *wscale;         /* groups * goc filter scales, finite and > 0 */
  const float *fbias;          /* groups * goc, or NULL */
  float lo, hi;                /* the output clamp */
} px_qconv_desc;

/* Packs the filter and copies the parameters (desc's pointers need not
 * outlive the call). NULL with px_error's message (core/error.h) on a bad
 * description: a non-positive size, stride or dilation, an adjustment not
 * smaller than the stride (or any for a plain convolution), a parameter
 * above 65536, a scale out of range, zero points or clamp out of int8,
 * sizes whose product overflows; or out of memory. */
px_qconv *px_qconv_pack(const px_qconv_desc *desc);
void px_qconv_free(px_qconv *c); /* NULL is a no-op */
size_t px_qconv_bytes(const px_qconv *c);

/* The output height and width for an H x W input; -1 in *oh / *ow when the
 * kernel leaves no output along that dimension (or H / W is < 1 for a
 * transposed convolution). */
void px_qconv_out_size(const px_qconv *c, int64_t H, int64_t W, int64_t *oh, int64_t *ow);

/* Static: x [N, H, W, groups * gic] int8 -> y [N, OH, OW, groups * goc] int8.
 * OH / OW must be px_qconv_out_size's. Returns 0 or px_fail's status. */
int px_qconv_qs8(px_ctx *ctx, const px_qconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x, int64_t OH,
                 int64_t OW, int8_t *y);

/* Dynamic: x as above with the zero points zp and scales scale of
 * XNNPACK's qd8 quantization -> y float. per_pixel 0: one per image (zp[n],
 * num_nonbatch_dims 3); per_pixel 1: one per input pixel (zp[(n * H + h) *
 * W + w], num_nonbatch_dims 1), for a convolution that reads each output's
 * own input pixel only (1x1 kernel, stride 1, no padding: the form XNNPACK
 * runs as a FullyConnected). */
int px_qconv_qd8_f32(px_ctx *ctx, const px_qconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x,
                     const int32_t *zp, const float *scale, int per_pixel, int64_t OH, int64_t OW, float *y);

#endif /* PX_QCONV_H */
