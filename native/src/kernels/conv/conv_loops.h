/*
 * conv_loops.h - the vector types and small float32 loops the convolution
 * files share (private, header-only).
 */
#ifndef PX_CONV_LOOPS_H
#define PX_CONV_LOOPS_H

#include <stdint.h>

/* 16-byte vectors for the portable paths (native on every x86-64 and AArch64
 * target); 32-byte ones only inside functions compiled for AVX2. */
typedef float v4f __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
#define v4_load(p) (*(const v4f_u *)(p))
#define v4_store(p, v) (*(v4f_u *)(p) = (v))
#define v8_load(p) (*(const v8f_u *)(p))
#define v8_store(p, v) (*(v8f_u *)(p) = (v))
/* 64-byte vectors: only inside functions compiled for AVX-512. */
typedef float v16f __attribute__((vector_size(64)));
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));
#define v16_load(p) (*(const v16f_u *)(p))
#define v16_store(p, v) (*(v16f_u *)(p) = (v))

/* y[0..n) += a * x[0..n) */
static inline void axpy_f32(int64_t n, float a, const float *x, float *y) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) v4_store(y + i, v4_load(y + i) + a * v4_load(x + i));
  for (; i < n; i++) y[i] += a * x[i];
}

/* y[0..n) = v */
static inline void fill_f32(int64_t n, float v, float *y) {
  v4f vv = {v, v, v, v};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) v4_store(y + i, vv);
  for (; i < n; i++) y[i] = v;
}

/* y[0..n) clamped to [lo, hi] (max then min, so lo > hi gives hi, as
 * torch's clamp does). A NaN stays NaN: both compares are false for it, as
 * in torch's relu / hardtanh and the GEMM epilogue. */
static inline void clamp_f32(int64_t n, float lo, float hi, float *y) {
  for (int64_t i = 0; i < n; i++) {
    float v = y[i] < lo ? lo : y[i];
    y[i] = v > hi ? hi : v;
  }
}

#endif /* PX_CONV_LOOPS_H */
