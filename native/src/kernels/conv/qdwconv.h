/*
 * qdwconv.h - quantized depthwise convolution on NHWC int8 (private;
 * qdwconv.c): XNNPACK's qs8 / qs8-qc8w depthwise convolution (int8 in and
 * out, per-channel fp32 requantization).
 *
 * Input [N, H, W, C], output [N, OH, OW, C * mult] (output channel c reads
 * input channel c / mult), filter [KH, KW, C * mult] (XNNPACK's layout):
 *   acc[c] = bias[c] + sum over the taps inside the input of (x - in_zp) * w   (int32, exact)
 *   y[c]   = round(clamp(acc[c] * requant[c], qmin - out_zp, qmax - out_zp)) + out_zp  (ties to even)
 * The sums are exact, so the result is XNNPACK's whatever the order the
 * taps are added in, and does not depend on the thread count.
 */
#ifndef PX_QDWCONV_H
#define PX_QDWCONV_H

#include <stddef.h>

#include "kernels/kernel.h"

typedef struct px_qdwconv px_qdwconv;

typedef struct {
  int64_t C, mult;                /* input channels, depth multiplier */
  int64_t kh, kw, sh, sw, dh, dw; /* kernel, stride, dilation */
  int64_t pt, pl;                 /* padding above and to the left (the rest follows from the output size) */
  const int8_t *weights;          /* [kh, kw, C * mult] */
  const int32_t *bias;            /* [C * mult], or NULL */
  const float *requant;           /* [C * mult] */
  int32_t in_zp, out_zp, qmin, qmax;
} px_qdwconv_desc;

/* The filter packed for the kernels; NULL (with px_error's message) when
 * memory runs out or a parameter is out of range. Owns copies of
 * everything in `d`. */
px_qdwconv *px_qdwconv_pack(const px_qdwconv_desc *d);
void px_qdwconv_free(px_qdwconv *c);
size_t px_qdwconv_bytes(const px_qdwconv *c);

/* y [N, OH, OW, C * mult] from x [N, H, W, C]; 0, or px_fail's status when
 * scratch memory runs out. */
int px_qdwconv_qs8(px_ctx *ctx, const px_qdwconv *c, int64_t N, int64_t H, int64_t W, const int8_t *x, int64_t OH,
                   int64_t OW, int8_t *y);

#endif /* PX_QDWCONV_H */
