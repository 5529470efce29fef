/*
 * convert16.h - contiguous float16 / bfloat16 <-> float32 conversions
 * (private; convert16.c), for the XNNPACK backend's fp16 / bf16 values and
 * its reduced-precision weights.
 *
 * float16 -> float32 is exact; float32 -> float16 and float32 -> bfloat16
 * round to nearest, ties to even, overflowing to infinity, with float16
 * subnormals kept. Every path gives the same bits: F16C (x86-64, chosen at
 * run time from px_cpu()), FCVTL / FCVTN (AArch64) and the portable loops,
 * NaN included (quieted, sign and top payload bits kept, as the hardware
 * conversions do).
 */
#ifndef PX_CONVERT16_H
#define PX_CONVERT16_H

#include <stdint.h>

/* dst[k] = src[k] for k in [0, n) (dst and src do not overlap). */
void px_f16_to_f32(float *dst, const uint16_t *src, int64_t n);
void px_bf16_to_f32(float *dst, const uint16_t *src, int64_t n);
void px_f32_to_f16(uint16_t *dst, const float *src, int64_t n);
void px_f32_to_bf16(uint16_t *dst, const float *src, int64_t n);

/* x[k] = x[k] rounded to float16 / bfloat16 and widened back to float32. */
void px_round_f16(float *x, int64_t n);
void px_round_bf16(float *x, int64_t n);

/* One element, the portable definitions every path matches. */
float px_f16_bits_to_f32(uint16_t h);
uint16_t px_f32_to_f16_bits(float f);
uint16_t px_f32_to_bf16_bits(float f);

#endif /* PX_CONVERT16_H */
