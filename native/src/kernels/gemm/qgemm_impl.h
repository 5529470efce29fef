/*
 * qgemm_impl.h - what qgemm.c shares with its micro-kernels (qgemm_c.c,
 * qgemm_x86.c, qgemm_neon.c); private to kernels/gemm/.
 *
 * Packed weights. Output channels are grouped in tiles of QG_NR = 16; depth
 * is cut into nb blocks of bk values (nb = 1 and bk = K for per-channel
 * scales), each block padded with zeros to bkp, a multiple of QG_KU = 8. A
 * tile's bytes are contiguous, block after block, one "unit" per 8 depth
 * values:
 *   8-bit unit (128 bytes): for quad q in 0..1, channel j in 0..15, i in 0..3:
 *     byte[q * 64 + j * 4 + i] = s(n0 + j, k0 + 4 q + i)
 *   4-bit unit (64 bytes): byte[j * 4 + i] = s(n0 + j, k0 + i)
 *                                           | s(n0 + j, k0 + 4 + i) << 4
 * Blockwise weights follow each block's units with its 16 scales
 * (qg_blocks), so a tile is one stream of bytes; each channel's correction
 * for the activations' zero point (qg_blocks) is kept apart, one float.
 * s is the stored weight: 4-bit, the nibble as given (0..15); 8-bit, the
 * centred weight w - zero_point plus QG_BIAS8 (128 on x86, where VNNI's
 * vpdpbusd wants unsigned weights, so s is a uint8; 0 elsewhere, s an int8).
 *
 * The activations are copied (padded the same way, zeros in the padding) and
 * each row's per-block sums sa are taken. A micro-kernel returns, for up to
 * QG_MR rows and the 16 channels of a tile, raw[i][j] = sum_k a[i][k] *
 * s[j][k] over one block (int32, wrapping). The exact product is then
 *   sum_k (a - a_zp) * (w - zp) = raw - sbias * sa - a_zp * wsum[j]
 * with sbias = zero_point for 4-bit and QG_BIAS8 for 8-bit, and wsum the
 * block's sum of w - zp (computed at packing). Every path returns the same raw
 * sums, so the same results.
 */
#ifndef PX_QGEMM_IMPL_H
#define PX_QGEMM_IMPL_H

#include <stdint.h>

#define QG_NR 16
#define QG_KU 8
#define QG_MR 4
#define QG_MR8 8 /* rows of the x86 kernels that load a tile's weights once for up to 8 rows */

#if defined(__x86_64__) || defined(__i386__)
#define QG_BIAS8 128
#else
#define QG_BIAS8 0
#endif

/* Per-block scales (blockwise weights): the micro-kernel itself turns each
 * block's sums into floats and adds them up, in block order, with one fused
 * multiply-add a block, from a start that carries the activations' zero
 * point for all the blocks at once:
 *   f = -(float)azp[i] * corr[j]
 *   f = fma((float)(raw_g[i][j] - sbias * sa[i * nb + g]), scales[g * QG_NR + j], f)   for g = 0 .. nb - 1
 * (the difference in wrapping int32), where corr[j] = sum_g wsum_g[j] *
 * scales_g[j] is taken at packing, one fused multiply-add a block in the
 * same order from 0. Every path computes these same roundings. A block's
 * step is then a conversion and one fused multiply-add per row and
 * channel; XNNPACK takes the zero point's term out of each block's integer
 * sum instead, which costs the x86 kernel two more operations a block
 * (about 15% of an 8-row product at blocks of 32) and agrees with this to
 * within an ulp or so of the output. The scales are stored as bfloat16 when
 * every one is exactly a bfloat16 (as XNNPACK's qb4w scales are), to keep
 * 4-bit weights close to their file size. */
typedef struct qg_blocks {
  int64_t nb;          /* blocks */
  int32_t sbias;       /* see above */
  const int32_t *sa;   /* activation sums of the call's rows */
  const int32_t *nrc;  /* qg_gemm_fn only, instead of sa: -sbias * sa[i * nb + g] (wrapping) */
  const int32_t *azp;  /* activation zero points of the call's rows */
  const float *corr;   /* the tile's QG_NR corrections (tile t's, a kernel given several, corr + t * QG_NR) */
  const void *scales;  /* block 0's QG_NR scales: bfloat16 if sbf16, else float */
  int sbf16;           /* (block g's scales are wstride bytes on: they follow its weights) */
  int64_t wstride;     /* weight bytes per block of the tile */
  int64_t bk;          /* depth values per block (the rest of astride is zero padding) */
  int64_t astride;     /* activation bytes per block of a packed row */
} qg_blocks;

/* w: the tile's first unit; a: row 0 of the packed activations (row stride
 * lda); nu: units per block. With b NULL (one block) out is int32
 * raw[i * QG_NR + j] for i < mr; otherwise float, as qg_blocks says. */
typedef void (*qg_ukr_fn)(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu,
                          const qg_blocks *b, void *out);

/* Block g's scales (qg_blocks). */
static inline const void *qg_blk_sc(const qg_blocks *b, int64_t g) { return (const char *)b->scales + g * b->wstride; }
static inline float qg_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}
static inline float qg_blk_scale(const qg_blocks *b, int64_t g, int j) {
  return b->sbf16 ? qg_bf16(((const uint16_t *)qg_blk_sc(b, g))[j]) : ((const float *)qg_blk_sc(b, g))[j];
}

/* XNNPACK's scalar min / max: the second operand when the comparison fails,
 * so a NaN in `a` gives b. */
static inline float qg_max(float a, float b) { return b < a ? a : b; }
static inline float qg_min(float a, float b) { return a < b ? a : b; }

/* Wrapping int32 arithmetic (as the SIMD instructions wrap) without signed
 * overflow in C. */
static inline int32_t qg_wrap(uint32_t u) {
  int32_t s;
  __builtin_memcpy(&s, &u, sizeof s);
  return s;
}

/* Wrapping int32 products as the SIMD instructions compute them. */
static inline int32_t qg_wrap_mul(int32_t x, int32_t y) {
  uint32_t u = (uint32_t)x * (uint32_t)y;
  int32_t r;
  __builtin_memcpy(&r, &u, sizeof r);
  return r;
}

/* One row (a decode step's matrix-vector product) times nt <= QG_GV tiles
 * of blockwise 4-bit weights, each tile finished as a qg_ukr_fn with mr = 1
 * and b given finishes it (out[t * QG_NR + j], tile t's weights at
 * w + t * tile_bytes, its sums and scales tile_bytes after tile 0's): the
 * same floats, but the tiles' loads and products interleaved, so that the
 * row is limited by how fast the weights stream from memory rather than by
 * the latency of one tile's chain of dot products. */
#define QG_GV 4
typedef void (*qg_gemv_fn)(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t nu,
                           const qg_blocks *b, float *out);

/* Up to QG_MR8 rows times nt <= QG_GV tiles of per-channel 8-bit weights,
 * dynamic activations, float out: the raw int32 sums (as qg_ukr_fn with b
 * NULL), then qg_f32_out_fn's per-channel step on them in registers, the
 * same integers and floats. The rows' activations are read once for
 * several tiles and each tile's weights once for several rows. p's arrays
 * start at row 0 and at channel 0 of tile 0; nn channels are left from
 * there (the last tile's are masked). pf: 0, or how far on (in bytes) the
 * weights of the next unit of work lie, asked for while this one runs. */
typedef struct {
  const int32_t *rowc, *azp, *ws;
  const float *as, *sc, *bias;
  float lo, hi;
  int64_t nn, pf;
} qg_pc_out;
typedef void (*qg_f32pc8_fn)(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda, int mr,
                             int64_t nu, const qg_pc_out *p, float *out, int64_t ldc);

/* Up to QG_MR8 rows times nt <= QG_GV tiles of blockwise 4-bit weights (a
 * prompt's product), each block's sums turned into floats and added up as
 * qg_blocks says (with b->nrc for the activation sums), then finished as
 * qg_f32_out_fn's blockwise step with p's as, bias, lo, hi and nn (p's
 * arrays as qg_f32pc8_fn's; its other fields unused): row i, channel j of
 * tile t at out[i * ldc + t * QG_NR + j]. Each tile's unpacked weights
 * serve every row. */
typedef void (*qg_gemm_fn)(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda, int mr,
                           int64_t nu, const qg_blocks *b, const qg_pc_out *p, float *out, int64_t ldc);

/* The kernels each path provides (8-bit and 4-bit weights). */
void qg_ukr8_c(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_ukr4_c(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
/* The static int8 product's output step for mr rows of a tile (nn <= QG_NR
 * channels): v = raw[i][j] - rowc[i] + kb[j] (int32, wrapping), then
 * out[i * ldc + j] = lrintf(min(max((float)v * rq[j], qlo), qhi)) + zp. */
typedef void (*qg_qs8_out_fn)(const int32_t *raw, int mr, int nn, const int32_t *rowc, const int32_t *kb,
                              const float *rq, float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc);

/* The static int8 product of `rows` rows (any count; rowc has one entry per
 * row) times nt <= QG_GV tiles of 8-bit weights (one block; tile t at
 * w + t * tile_bytes), finished in registers: qg_ukr_fn's raw sums, then
 * qg_qs8_out_fn's step on them, the same integers and floats. kb and rq
 * hold nt * QG_NR entries, nn channels are left from the first tile's
 * (the last tile's are masked). */
typedef void (*qg_qs8_tile_fn)(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda,
                               int64_t rows, int64_t nu, int64_t nn, const int32_t *rowc, const int32_t *kb,
                               const float *rq, float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc);

/* The dynamic product's output step for mr rows of a tile (nn <= QG_NR
 * channels; sc, ws and bias padded to QG_NR). Per-channel weights (raw given):
 *   y = ((float)(raw[i][j] - rowc[i] - azp[i] * ws[j]) * as[i]) * sc[j]
 * blockwise (facc given): y = facc[i][j] * as[i]; then y + bias[j] when bias,
 * then y < lo -> lo, y > hi -> hi (NaN kept), out[i * ldc + j] = y. */
typedef void (*qg_f32_out_fn)(const int32_t *raw, const float *facc, int mr, int nn, const int32_t *rowc,
                              const int32_t *azp, const int32_t *ws, const float *as, const float *sc,
                              const float *bias, float lo, float hi, float *out, int64_t ldc);

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(PX_PORTABLE_KERNELS)
#define QG_X86 1
void qg_f32_out_avx2(const int32_t *raw, const float *facc, int mr, int nn, const int32_t *rowc, const int32_t *azp,
                     const int32_t *ws, const float *as, const float *sc, const float *bias, float lo, float hi,
                     float *out, int64_t ldc);
int32_t qg_sum_s8_avx2(const int8_t *p, int64_t n);
void qg_sums_s8_avx2(const int8_t *p, int64_t rows, int64_t n, int64_t stride, int32_t *out);
void qg_qs8_out_avx2(const int32_t *raw, int mr, int nn, const int32_t *rowc, const int32_t *kb, const float *rq,
                     float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc);
void qg_ukr8_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_ukr4_avx2(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_ukr8_vnni(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_ukr4_vnni(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_qs8_tile_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda, int64_t rows,
                      int64_t nu, int64_t nn, const int32_t *rowc, const int32_t *kb, const float *rq, float qlo,
                      float qhi, int32_t zp, int8_t *out, int64_t ldc);
/* qg_qs8_tile_vnni over indirect rows: row r's depth is taps runs of tu
 * units, run t at ind[r * taps + t], multiplied by the weights of tap
 * wtap[t] (t itself where wtap is NULL) (px_qgemm_qs8_indirect). */
void qg_qs8_ind_tile_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *const *ind, int64_t taps,
                          const int32_t *wtap, int64_t tu, int64_t rows, int64_t nn, const int32_t *rowc,
                          const int32_t *kb, const float *rq, float qlo, float qhi, int32_t zp, int8_t *out,
                          int64_t ldc);
void qg_gemv4_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t nu, const qg_blocks *b,
                   float *out);
void qg_gemm4_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda, int mr, int64_t nu,
                   const qg_blocks *b, const qg_pc_out *p, float *out, int64_t ldc);
void qg_f32pc8_vnni(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t lda, int mr, int64_t nu,
                    const qg_pc_out *p, float *out, int64_t ldc);
#else
#define QG_X86 0
#endif
#if defined(__aarch64__) && defined(__GNUC__) && !defined(PX_PORTABLE_KERNELS)
#define QG_NEON 1
void qg_qd8_range_neon(const float *r, int64_t K, float *rmin, float *rmax);
void qg_qd8_quant_neon(const float *r, int64_t K, float mult, float lo, float hi, int32_t zp, int8_t *q);
void qg_f32_out_neon(const int32_t *raw, const float *facc, int mr, int nn, const int32_t *rowc, const int32_t *azp,
                     const int32_t *ws, const float *as, const float *sc, const float *bias, float lo, float hi,
                     float *out, int64_t ldc);
void qg_qs8_out_neon(const int32_t *raw, int mr, int nn, const int32_t *rowc, const int32_t *kb, const float *rq,
                     float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc);
void qg_ukr8_neon(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_ukr4_neon(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_ukr8_sdot(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_ukr4_sdot(const uint8_t *w, const int8_t *a, int64_t lda, int mr, int64_t nu, const qg_blocks *b,
                void *out);
void qg_gemv4_sdot(const uint8_t *w, int64_t tile_bytes, int nt, const int8_t *a, int64_t nu, const qg_blocks *b,
                   float *out);
#else
#define QG_NEON 0
#endif

#endif /* PX_QGEMM_IMPL_H */
