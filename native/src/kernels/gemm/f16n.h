/*
 * f16n.h - float16 arithmetic on CPUs with AVX512-FP16 (private; f16n.c):
 * the products and depthwise convolutions of the XNNPACK delegate's float16
 * graphs, computed as XNNPACK computes them on the same CPUs, so that the
 * two agree bit for bit.
 *
 * XNNPACK's float16 GEMM, IGEMM and depthwise kernels for AVX512-FP16 keep
 * each output's sum in a float16 register: it starts at the bias (zero
 * without one) and takes one fused multiply-add per depth step, rounded to
 * float16 each time, in depth order; the output bounds are applied in
 * float16. The depth order is the packed weights' order: for a convolution
 * the taps row by row, channels fastest within a tap (XNNPACK's indirection
 * order). A depthwise convolution follows the kernel XNNPACK picks by tap
 * count: up to 9 taps (its 3-, 4- and 9-tap kernels) one sum over the taps
 * column by column (kernel x outer, kernel y inner: its dwconv packing);
 * 10 to 25 taps (its 25-tap kernel with two accumulators) the same order,
 * even taps summed from the bias and odd ones from zero, the two sums added
 * at the end; more (its multipass kernels) one sum over the taps row by
 * row. Every function here keeps those orders, so a result does not depend
 * on tiling or threads.
 *
 * Values enter and leave as float32 holding float16 values (the delegate's
 * storage of float16 values, xnn_graph.h); operands are float16 bits. The
 * products and convolutions below may only be called where
 * px_f16n_available(): on x86-64 they are the AVX512-FP16 kernels alone.
 */
#ifndef PX_F16N_H
#define PX_F16N_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Columns per packed panel (one 512-bit register of float16). */
#define PX_F16N_NR 32

/* This CPU has AVX512-FP16 (with AVX512BW/VL) and PYEXEC_F16_ARITH is not
 * "float32" (which keeps float16 graphs in float32 arithmetic, rounded after
 * each node, as XNNPACK computes them on CPUs without AVX512-FP16). Read
 * once per process. */
bool px_f16n_available(void);

/* B (K x N, element (k, j) at B[k * rsb + j * csb]) as ceil(N / 32) panels
 * of K x 32 float16 values, columns past N zero: px_f16n_pack_size bytes. */
size_t px_f16n_pack_size(int64_t N, int64_t K);
void px_f16n_pack_b(int64_t N, int64_t K, const uint16_t *B, int64_t rsb, int64_t csb, uint16_t *pb);
/* The same from float32 values (each rounded to float16). */
void px_f16n_pack_b_f32(int64_t N, int64_t K, const float *B, int64_t rsb, int64_t csb, uint16_t *pb);

/* C[i][j] for rows [0, M) and the columns of panels [q0, q1) (clipped to N):
 * float16 sums of A's row i (float16, row stride lda) times B's column j
 * from bias[j] (float16, at least q1 * 32 entries; NULL: zero), bounded to
 * [lo, hi] (rounded to float16; both infinite: no bound), stored as float32
 * into C (row stride ldc). */
void px_f16n_gemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *pb,
                  int64_t q0, int64_t q1, const uint16_t *bias, float lo, float hi, float *C, int64_t ldc);

/* The same over rows given by pointers, as a convolution reads its input in
 * place: row i of A is, for s in [0, nseg), the L values at rows[i] + off[s]
 * (K = nseg * L). */
void px_f16n_conv_gemm(int64_t M, int64_t N, int64_t nseg, int64_t L, const int64_t *off,
                       const uint16_t *const *rows, const uint16_t *pb, int64_t q0, int64_t q1, const uint16_t *bias,
                       float lo, float hi, float *C, int64_t ldc);

/* One depthwise convolution (channel multiplier 1) of output rows
 * [oh0, oh1) of image x (NHWC float16, zero-padded: Hp x Wp x C, every
 * window inside it) into y (float32, OW x C per row, row oh at
 * y + oh * OW * C): w is the filter [KH*KW][C] (tap-major, channel fastest,
 * float16), bias [C] float16. px_f16n_dw_taps fills toff and woff (KH * KW
 * entries each: the taps in XNNPACK's order, as offsets into the window and
 * into w) once per call. */
typedef struct px_f16n_dw {
  int64_t Hp, Wp, C, KH, KW, sh, sw, dh, dw, OH, OW;
  const uint16_t *w, *bias;
  const int64_t *toff, *woff;
  float lo, hi;
} px_f16n_dw;
void px_f16n_dw_taps(const px_f16n_dw *d, int64_t *toff, int64_t *woff);
void px_f16n_dwconv_rows(const px_f16n_dw *d, const uint16_t *x, int64_t oh0, int64_t oh1, float *y);

#endif /* PX_F16N_H */
