/*
 * convert16_isa.h - the vector runs of convert16.c (private): each converts
 * the longest prefix of [0, n) it handles in whole vectors and returns its
 * length; convert16.c finishes the rest element by element, with the same
 * bits. convert16_x86.c (F16C, AVX2) and convert16_neon.c (AArch64) define
 * them (the AVX-512 float16 runs finish with the F16C ones); each is
 * called only where px_cpu() reports its features.
 */
#ifndef PX_CONVERT16_ISA_H
#define PX_CONVERT16_ISA_H

#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(PX_PORTABLE_KERNELS)
#define CV16_X86 1
#include <immintrin.h>
int64_t px_cv16_f16_to_f32_f16c(float *dst, const uint16_t *src, int64_t n);
int64_t px_cv16_f32_to_f16_f16c(uint16_t *dst, const float *src, int64_t n);
int64_t px_cv16_round_f16_f16c(float *x, int64_t n);
int64_t px_cv16_f16_to_f32_avx512(float *dst, const uint16_t *src, int64_t n);
int64_t px_cv16_f32_to_f16_avx512(uint16_t *dst, const float *src, int64_t n);
int64_t px_cv16_round_f16_avx512(float *x, int64_t n);
int64_t px_cv16_bf16_to_f32_avx2(float *dst, const uint16_t *src, int64_t n);
int64_t px_cv16_f32_to_bf16_avx2(uint16_t *dst, const float *src, int64_t n);
int64_t px_cv16_round_bf16_avx2(float *x, int64_t n);
#else
#define CV16_X86 0
#endif

#if defined(__aarch64__) && defined(__GNUC__) && !defined(PX_PORTABLE_KERNELS)
#define CV16_NEON 1
#include <arm_neon.h>
int64_t px_cv16_f16_to_f32_neon(float *dst, const uint16_t *src, int64_t n);
int64_t px_cv16_f32_to_f16_neon(uint16_t *dst, const float *src, int64_t n);
int64_t px_cv16_round_f16_neon(float *x, int64_t n);
#else
#define CV16_NEON 0
#endif

#endif /* PX_CONVERT16_ISA_H */
