/*
 * conv_loops.h - what the convolution files share (private, header-only):
 * vector types, small float32 loops, the 1-D / 2-D geometry, the fused
 * epilogue, and the per-ISA paths of conv_x86.c.
 */
#ifndef PX_CONV_LOOPS_H
#define PX_CONV_LOOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

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

/* A 1-D / 2-D convolution's geometry (conv.c). */
typedef struct conv_geom {
  int64_t N, Cin, H, W;      /* input */
  int64_t Cout, KH, KW;      /* output channels, kernel */
  int64_t OH, OW;            /* output spatial */
  int64_t sh, sw, ph, pw, dh, dw, oph, opw;
  int64_t G, Cin_g, Cout_g;  /* groups, channels per group */
} conv_geom;

/* What a fused convolution applies to its output (px_conv_fused): the
 * clamp of a ReLU / hardtanh the load-time fusion folded into it. */
typedef struct conv_epi {
  float lo, hi;
  bool clamp;               /* false: lo = -inf, hi = +inf, nothing to do */
  const px_tensor *packed;  /* the filter packed at load for px_conv_nhwc, or NULL */
} conv_epi;


/* AVX2 / AVX-512 variants (conv.c, conv_x86.c), chosen at run time; define
 * PX_PORTABLE_KERNELS to build only the portable code. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(PX_PORTABLE_KERNELS)
#define PX_X86_KERNELS 1
#include <immintrin.h>
/* A depthwise plane at stride 2 along the rows on AVX-512 (conv_x86.c). */
void px_dw_plane_s2_avx512(const conv_geom *g, const float *plane, const float *wk, float b, const conv_epi *ep,
                           float *o);
#else
#define PX_X86_KERNELS 0
#endif

#endif /* PX_CONV_LOOPS_H */
