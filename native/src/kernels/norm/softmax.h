/*
 * softmax.h - the float32 softmax row of softmax.c, for callers outside the
 * operator registry (the XNNPACK backend's Softmax node).
 */
#ifndef PX_SOFTMAX_H
#define PX_SOFTMAX_H

#include <stdint.h>

/* y = softmax(x) over one contiguous row of n floats (y may be x): the
 * row's maximum taken out, a vectorised exp within about an ulp of expf,
 * the sum of the exps, then each times the sum's reciprocal. A NaN
 * anywhere in the row makes every output NaN. */
void px_f32_softmax_row(int64_t n, const float *x, float *y);

#endif /* PX_SOFTMAX_H */
