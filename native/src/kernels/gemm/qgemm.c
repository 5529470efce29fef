/*
 * qgemm.c - integer matrix products for quantized programs (qgemm.h): weight
 * packing, the drivers that split the products over the thread pool, and
 * the choice of the micro-kernels this CPU runs best (the portable ones are
 * qgemm_c.c's; XNNPACK's dynamic row quantization is qgemm_qd8.c's). qgemm_impl.h describes the packed
 * layout and the arithmetic every path shares.
 */
#include "kernels/gemm/qgemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/pcache.h"
#include "kernels/gemm/qgemm_impl.h"


struct px_qweights {
  int bits;
  int64_t N, K;
  int64_t ntiles;     /* ceil(N / QG_NR) */
  int64_t nb, bk;     /* blocks and depth values per block (nb = 1, bk = K per channel) */
  int64_t bkp;        /* bk rounded up to QG_KU */
  int64_t nu;         /* units per block (bkp / QG_KU) */
  int64_t unit_bytes; /* 128 (8-bit) or 64 (4-bit) */
  int64_t blk_bytes;  /* a block of a tile: its units, then (blockwise) its scales */
  int64_t tile_bytes; /* nb * blk_bytes */
  int32_t zero_point;
  int32_t sbias;   /* see qgemm_impl.h */
  int blockwise;   /* desc.block > 0 */
  uint8_t *packed; /* ntiles * tile_bytes */
  void *wsum;      /* per channel: [tile][QG_NR] int32 sums; blockwise: [tile][QG_NR] float corrections */
  void *scales;    /* per channel: [tile][QG_NR] float, padding channels 0 (blockwise: in the tiles) */
  int sbf16;       /* blockwise: scales bfloat16 */
  float *bias;     /* [ntiles * QG_NR] or NULL */
  size_t bytes;
  int borrowed;    /* packed / wsum / scales / bias point into the cache file's mapping (core/pcache.h) */
};

/* ---- micro-kernel choice -------------------------------------------------- */

static int qg_path_cache; /* 0 until chosen; accessed with __atomic builtins */

static int qg_best_path(void) {
  const px_cpu_features *cpu = px_cpu();
  (void)cpu;
#if QG_X86
  if (cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512vnni) return PX_QGEMM_AVX512_VNNI;
  if (cpu->avx2 && cpu->fma) return PX_QGEMM_AVX2; /* blockwise steps are fused multiply-adds */
#endif
#if QG_NEON
  if (cpu->dotprod) return PX_QGEMM_NEON_DOT;
  return PX_QGEMM_NEON;
#endif
  return PX_QGEMM_PORTABLE;
}

static int qg_has_path(int path) {
  switch (path) {
  case PX_QGEMM_PORTABLE:
    return 1;
#if QG_X86
  case PX_QGEMM_AVX2:
    return px_cpu()->avx2 && px_cpu()->fma;
  case PX_QGEMM_AVX512_VNNI:
    return qg_best_path() == PX_QGEMM_AVX512_VNNI;
#endif
#if QG_NEON
  case PX_QGEMM_NEON:
    return 1;
  case PX_QGEMM_NEON_DOT:
    return px_cpu()->dotprod;
#endif
  default:
    return 0;
  }
}

int px_qgemm_path(void) {
  int p = __atomic_load_n(&qg_path_cache, __ATOMIC_RELAXED);
  if (p == 0) {
    p = qg_best_path();
    __atomic_store_n(&qg_path_cache, p, __ATOMIC_RELAXED);
  }
  return p;
}

int px_qgemm_use_path(int path) {
  if (path == PX_QGEMM_AUTO) path = qg_best_path();
  if (!qg_has_path(path)) return -1;
  __atomic_store_n(&qg_path_cache, path, __ATOMIC_RELAXED);
  return 0;
}

const char *px_qgemm_path_name(int path) {
  switch (path) {
  case PX_QGEMM_PORTABLE:
    return "portable C";
  case PX_QGEMM_AVX2:
    return "AVX2";
  case PX_QGEMM_AVX512_VNNI:
    return "AVX-512 VNNI";
  case PX_QGEMM_NEON:
    return "NEON";
  case PX_QGEMM_NEON_DOT:
    return "NEON dot product";
  default:
    return "auto";
  }
}

static qg_ukr_fn qg_kernel(int bits) {
  switch (px_qgemm_path()) {
#if QG_X86
  case PX_QGEMM_AVX2:
    return bits == 4 ? qg_ukr4_avx2 : qg_ukr8_avx2;
  case PX_QGEMM_AVX512_VNNI:
    return bits == 4 ? qg_ukr4_vnni : qg_ukr8_vnni;
#endif
#if QG_NEON
  case PX_QGEMM_NEON:
    return bits == 4 ? qg_ukr4_neon : qg_ukr8_neon;
  case PX_QGEMM_NEON_DOT:
    return bits == 4 ? qg_ukr4_sdot : qg_ukr8_sdot;
#endif
  default:
    return bits == 4 ? qg_ukr4_c : qg_ukr8_c;
  }
}

/* The path's one-row kernel for blockwise 4-bit weights, or NULL (the row
 * then goes through the path's micro-kernel one tile at a time). */
static qg_gemv_fn qg_gemv_kernel(void) {
  switch (px_qgemm_path()) {
#if QG_X86
  case PX_QGEMM_AVX512_VNNI:
    return qg_gemv4_vnni;
#endif
#if QG_NEON
  case PX_QGEMM_NEON_DOT:
    return qg_gemv4_sdot;
#endif
  default:
    return NULL;
  }
}

/* The path's several-tile kernel for rows of blockwise 4-bit weights, or
 * NULL (the rows then go through the micro-kernel one tile at a time). */
static qg_gemm_fn qg_gemm_kernel(void) {
  switch (px_qgemm_path()) {
#if QG_X86
  case PX_QGEMM_AVX512_VNNI:
    return qg_gemm4_vnni;
#endif
  default:
    return NULL;
  }
}

/* ---- packing ------------------------------------------------------------- */

static void *qg_alloc(size_t bytes) {
  size_t n = (bytes + 63) / 64 * 64;
  return aligned_alloc(64, n ? n : 64);
}

/* The stored integer for weight (n, k) as the description has it. */
static inline int qg_weight(const px_qweights_desc *d, int64_t n, int64_t k) {
  const uint8_t *row = (const uint8_t *)d->data + n * d->row_bytes;
  if (d->bits == 8) return (int8_t)row[k];
  uint8_t b = row[k >> 1];
  int high = (int)(k & 1) ^ (d->nibble_high_first ? 1 : 0);
  return high ? b >> 4 : b & 15;
}

void px_qweights_free(px_qweights *w) {
  if (!w) return;
  if (w->borrowed) {
    free(w);
    return;
  }
  free(w->packed);
  free(w->wsum);
  free(w->scales);
  free(w->bias);
  free(w);
}

size_t px_qweights_bytes(const px_qweights *w) { return w ? w->bytes : 0; }

/* ---- the packed-weight cache (core/pcache.h) ------------------------------- */

/* An entry: this header, then packed, wsum, scales and bias (each at a
 * 64-byte aligned offset; absent ones empty). Every geometry field must be
 * what the description gives; the sizes follow from it. */
#define QW_TAG 0x33575150u /* "PQW3": blockwise zero-point corrections apart from the tiles */
typedef struct qw_blob_hdr {
  int32_t bits, blockwise, sbf16, has_bias, sbias, bias8, zero_point, pad;
  int64_t N, K, nb;
} qw_blob_hdr;

static void qw_header(const px_qweights *w, qw_blob_hdr *h) {
  memset(h, 0, sizeof *h);
  h->bits = w->bits;
  h->blockwise = w->blockwise;
  h->sbf16 = w->sbf16;
  h->has_bias = w->bias != NULL;
  h->sbias = w->sbias;
  h->bias8 = QG_BIAS8;
  h->zero_point = w->zero_point;
  h->N = w->N;
  h->K = w->K;
  h->nb = w->nb;
}

static void qw_sizes(const px_qweights *w, const qw_blob_hdr *h, size_t sizes[5]) {
  size_t npad = (size_t)w->ntiles * QG_NR;
  sizes[0] = sizeof *h;
  sizes[1] = (size_t)w->ntiles * (size_t)w->tile_bytes;
  sizes[2] = npad * sizeof(int32_t); /* int32 sums, or float corrections */
  sizes[3] = w->blockwise ? 0 : npad * sizeof(float);
  sizes[4] = h->has_bias ? npad * sizeof(float) : 0;
}

/* The layout every packing of `d` with nb blocks a row has: sizes, tiles,
 * blocks and their padded depth, the unit size, zero point and the bias
 * added to stored values. */
static void qw_geometry(px_qweights *w, const px_qweights_desc *d, int64_t nb) {
  w->bits = d->bits;
  w->N = d->N;
  w->K = d->K;
  w->ntiles = (d->N + QG_NR - 1) / QG_NR;
  w->nb = nb;
  w->bk = d->K / nb;
  w->bkp = (w->bk + QG_KU - 1) / QG_KU * QG_KU;
  w->nu = w->bkp / QG_KU;
  w->unit_bytes = d->bits == 8 ? 128 : 64;
  w->zero_point = d->zero_point;
  w->sbias = d->bits == 4 ? d->zero_point : QG_BIAS8;
  w->blockwise = d->block > 0;
}

static int qw_from_cache(px_qweights *w, const px_qweights_desc *d, int64_t nb, const uint8_t *e, size_t n) {
  qw_blob_hdr h;
  if (n < sizeof h) return 0;
  memcpy(&h, e, sizeof h);
  int blockwise = d->block > 0;
  if (h.bits != d->bits || h.N != d->N || h.K != d->K || h.nb != nb || h.blockwise != blockwise ||
      h.has_bias != (d->bias != NULL) || h.zero_point != d->zero_point || h.bias8 != QG_BIAS8 ||
      h.sbias != (d->bits == 4 ? d->zero_point : QG_BIAS8) || (h.sbf16 != 0 && h.sbf16 != 1) ||
      (!blockwise && h.sbf16) || h.pad != 0)
    return 0;
  qw_geometry(w, d, nb); /* the header's sbias and blockwise were checked equal to these */
  w->sbf16 = h.sbf16;
  w->blk_bytes = w->nu * w->unit_bytes + (w->blockwise ? QG_NR * (w->sbf16 ? 2 : 4) : 0);
  w->tile_bytes = nb * w->blk_bytes;
  size_t sizes[5];
  qw_sizes(w, &h, sizes);
  if (px_pcache_layout(sizes, 5, 5) != n) return 0;
  uint8_t *base = (uint8_t *)(uintptr_t)e;
  w->packed = base + px_pcache_layout(sizes, 5, 1);
  w->wsum = sizes[2] ? base + px_pcache_layout(sizes, 5, 2) : NULL;
  w->scales = sizes[3] ? base + px_pcache_layout(sizes, 5, 3) : NULL;
  w->bias = sizes[4] ? (float *)(void *)(base + px_pcache_layout(sizes, 5, 4)) : NULL;
  w->borrowed = 1;
  w->bytes = sizeof *w; /* the rest is the cache file's, shared */
  return 1;
}

px_qweights *px_qweights_pack(const px_qweights_desc *d) {
  if (!d || (d->bits != 8 && d->bits != 4)) {
    px_invalid_program("quantized weights: %d-bit weights are not supported (8 or 4)", d ? d->bits : 0);
    return NULL;
  }
  if (d->N <= 0 || d->K <= 0 || d->N > ((int64_t)1 << 31) || d->K > ((int64_t)1 << 31)) {
    px_invalid_program("quantized weights: bad shape %lld x %lld", (long long)d->N, (long long)d->K);
    return NULL;
  }
  int64_t need = d->bits == 8 ? d->K : (d->K + 1) / 2;
  if (!d->data || d->row_bytes < need) {
    px_invalid_program("quantized weights: rows of %lld bytes cannot hold %lld %d-bit values",
                       (long long)d->row_bytes, (long long)d->K, d->bits);
    return NULL;
  }
  if (d->block < 0 || (d->block > 0 && d->K % d->block != 0)) {
    px_invalid_program("quantized weights: block size %lld does not divide the depth %lld",
                       (long long)d->block, (long long)d->K);
    return NULL;
  }
  if (d->bits == 4 ? (d->zero_point < 0 || d->zero_point > 15)
                   : (d->zero_point < -128 || d->zero_point > 127)) {
    px_invalid_program("quantized weights: zero point %d is out of range for %d-bit weights",
                       (int)d->zero_point, d->bits);
    return NULL;
  }
  if (!d->scales) {
    px_invalid_program("quantized weights: no scales");
    return NULL;
  }
  int64_t nb = d->block > 0 ? d->K / d->block : 1;
  int64_t nscales = d->N * nb;
  for (int64_t i = 0; i < nscales; i++)
    if (!(isfinite(d->scales[i]) && d->scales[i] > 0.0f)) {
      px_invalid_program("quantized weights: scale %lld is %g (scales must be finite and positive)",
                         (long long)i, (double)d->scales[i]);
      return NULL;
    }

  px_qweights *w = calloc(1, sizeof *w);
  if (!w) {
    px_no_memory("quantized weights");
    return NULL;
  }
  px_pcache *cache = px_pcache_current();
  size_t csize;
  const uint8_t *centry = px_pcache_take(cache, QW_TAG, &csize);
  if (centry) {
    if (qw_from_cache(w, d, nb, centry, csize)) return w;
    px_pcache_reject(cache);
    memset(w, 0, sizeof *w);
  }
  qw_geometry(w, d, nb);
  size_t npad = (size_t)w->ntiles * QG_NR;
  size_t nmeta = npad * (size_t)nb;

  /* first pass: the weights checked and each block's sum of w - zp */
  int32_t *sums = qg_alloc(nmeta * sizeof(int32_t));
  if (!sums) {
    px_qweights_free(w);
    px_no_memory("quantized weights");
    return NULL;
  }
  memset(sums, 0, nmeta * sizeof(int32_t));
  for (int64_t n = 0; n < d->N; n++)
    for (int64_t g = 0; g < nb; g++) {
      int32_t sum = 0;
      for (int64_t kk = 0; kk < w->bk; kk++) {
        int v = qg_weight(d, n, g * w->bk + kk);
        if (d->bits == 8 && (v - d->zero_point < -128 || v - d->zero_point > 127)) {
          free(sums);
          px_qweights_free(w);
          px_invalid_program("quantized weights: weight %d minus the zero point %d is out of int8 range", v,
                             (int)d->zero_point);
          return NULL;
        }
        sum += v - d->zero_point;
      }
      sums[((n / QG_NR) * nb + g) * QG_NR + n % QG_NR] = sum;
    }
  /* blockwise: scales as bfloat16 when every one is exactly one, stored
   * after each block's weights (one stream per tile); the sums kept only
   * as each channel's correction for the activations' zero point,
   * corr = sum_g wsum_g * scale_g (qg_blocks), in place of the sums */
  if (w->blockwise) {
    w->sbf16 = 1;
    for (int64_t i = 0; i < nscales && w->sbf16; i++) {
      uint32_t u;
      memcpy(&u, &d->scales[i], sizeof u);
      w->sbf16 = (u & 0xFFFF) == 0;
    }
    float *corr = qg_alloc(npad * sizeof(float));
    if (!corr) {
      free(sums);
      px_qweights_free(w);
      px_no_memory("quantized weights");
      return NULL;
    }
    for (int64_t n = 0; n < (int64_t)npad; n++) {
      float c = 0.0f; /* 0 for the padding channels */
      for (int64_t g = 0; n < d->N && g < nb; g++)
        c = fmaf((float)sums[(n / QG_NR * nb + g) * QG_NR + n % QG_NR], d->scales[n * nb + g], c);
      corr[n] = c;
    }
    free(sums);
    sums = (int32_t *)(void *)corr;
  }
  int64_t ssz = w->sbf16 ? 2 : 4;
  w->blk_bytes = w->nu * w->unit_bytes + (w->blockwise ? QG_NR * ssz : 0);
  w->tile_bytes = nb * w->blk_bytes;
  size_t packed_bytes = (size_t)w->ntiles * (size_t)w->tile_bytes;
  w->packed = qg_alloc(packed_bytes);
  w->wsum = sums;
  sums = NULL;
  if (!w->blockwise) w->scales = qg_alloc(npad * sizeof(float));
  if (d->bias) w->bias = qg_alloc(npad * sizeof(float));
  if (!w->packed || (!w->blockwise && !w->scales) || (d->bias && !w->bias)) {
    free(sums);
    px_qweights_free(w);
    px_no_memory("quantized weights");
    return NULL;
  }
  memset(w->packed, 0, packed_bytes);
  if (!w->blockwise) memset(w->scales, 0, npad * sizeof(float));
  if (w->bias) {
    memset(w->bias, 0, npad * sizeof(float));
    memcpy(w->bias, d->bias, (size_t)d->N * sizeof(float));
  }

  /* second pass: the packed weights (and, blockwise, each block's scales) */
  for (int64_t n = 0; n < d->N; n++) {
    int64_t t = n / QG_NR, j = n % QG_NR;
    uint8_t *tile = w->packed + t * w->tile_bytes;
    for (int64_t g = 0; g < nb; g++) {
      uint8_t *blk = tile + g * w->blk_bytes;
      for (int64_t kk = 0; kk < w->bk; kk++) {
        int v = qg_weight(d, n, g * w->bk + kk);
        uint8_t *unit = blk + (kk / QG_KU) * w->unit_bytes;
        int r = (int)(kk % QG_KU);
        if (d->bits == 8)
          unit[(r / 4) * 64 + j * 4 + r % 4] = (uint8_t)(v - d->zero_point + QG_BIAS8);
        else
          unit[j * 4 + r % 4] |= (uint8_t)(v << (r / 4 * 4));
      }
      if (!w->blockwise) {
        ((float *)w->scales)[n] = d->scales[n];
        continue;
      }
      uint8_t *sm = blk + w->nu * w->unit_bytes;
      float sc = d->scales[n * nb + g];
      uint32_t u;
      memcpy(&u, &sc, sizeof u);
      if (w->sbf16) {
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(sm + j * 2, &h, 2);
      } else {
        memcpy(sm + j * 4, &sc, 4);
      }
    }
  }
  w->bytes = sizeof *w + packed_bytes + npad * sizeof(int32_t) + (w->blockwise ? 0 : npad * sizeof(float)) +
             (d->bias ? npad * sizeof(float) : 0);
  if (cache) {
    qw_blob_hdr h;
    qw_header(w, &h);
    size_t sizes[5];
    qw_sizes(w, &h, sizes);
    const void *parts[5] = {&h, w->packed, w->wsum, w->scales, w->bias};
    px_pcache_put(cache, QW_TAG, 5, parts, sizes);
  }
  return w;
}

/* ---- drivers ------------------------------------------------------------- */

/* The work is split over tiles of QG_NR channels times blocks of QG_MB rows
 * (a multiple of QG_MR); each output element belongs to one item and is
 * computed the same way whichever thread runs it, so results do not depend
 * on the thread count. Items of one tile are adjacent, so a thread's chunk
 * reuses a tile's weights over its rows. */
#define QG_MB 64

/* The activations, copied into blocks padded to bkp with zeros, and their
 * per-block sums: ap[m * Kp + g * bkp + kk], sa[m * nb + g]. */
/* The sum of a row's n int8 values (int32, wrapping), vectorised where the
 * CPU allows (vec: px_cpu()->avx2, read once per product). */
static int32_t qg_sum_s8(const int8_t *p, int64_t n, bool vec) {
#if QG_X86
  if (vec) return qg_sum_s8_avx2(p, n);
#endif
  (void)vec;
  int32_t s = 0;
  for (int64_t k = 0; k < n; k++) s += p[k];
  return s;
}

static void qg_pack_a(const px_qweights *w, int64_t M, const int8_t *a, int64_t lda, int8_t *ap,
                      int32_t *sa) {
  int64_t Kp = w->nb * w->bkp;
  const bool vec = px_cpu()->avx2;
  for (int64_t m = 0; m < M; m++) {
    const int8_t *ar = a + m * lda;
    int8_t *dst = ap + m * Kp;
    for (int64_t g = 0; g < w->nb; g++) {
      const int8_t *src = ar + g * w->bk;
      int8_t *db = dst + g * w->bkp;
      memcpy(db, src, (size_t)w->bk);
      memset(db + w->bk, 0, (size_t)(w->bkp - w->bk));
      sa[m * w->nb + g] = qg_sum_s8(src, w->bk, vec);
    }
  }
}

typedef struct {
  const px_qweights *w;
  qg_ukr_fn ukr;
  int64_t M;
  int64_t nmb; /* row blocks of QG_MB rows: work item it is tile it / nmb, row block it % nmb */
  const int8_t *ap; /* activations as the micro-kernels read them, rows of lda bytes */
  int64_t lda;
  const int32_t *sa;
  /* qd8 -> f32 */
  const int32_t *a_zp;
  const float *a_scale;
  float *out;
  float lo, hi;
  /* qs8 */
  int32_t azp1;
  const int32_t *ibias;
  const float *requant;
  int32_t out_zp;
  float qlo, qhi;
  int8_t *qout;
  qg_qs8_out_fn qs8_out;
  qg_qs8_tile_fn qs8_tile; /* the path's fused product and step, or NULL */
  const int8_t *const *ind; /* indirect rows (px_qgemm_qs8_indirect): taps runs of tu units a row */
  const int32_t *wtap;      /* the weights' tap of each run, or NULL (run t, tap t) */
  int64_t taps, tu;
  qg_f32_out_fn f32_out;
  qg_gemv_fn gemv;
  qg_gemm_fn gemm;
  qg_f32pc8_fn f32pc8;
  bool prefetch; /* f32pc8: each unit asks for the next unit's weights as it runs */
  int rows;      /* f32pc8: rows per kernel call */
  const int32_t *nrc; /* gemm: -sbias * sa (qg_blocks) */
  int64_t ldc;
} qg_job;

/* The scalar form of qg_f32_out_fn. */
static void qg_f32_out_c(const int32_t *raw, const float *facc, int mr, int nn, const int32_t *rowc,
                         const int32_t *azp, const int32_t *ws, const float *as, const float *sc, const float *bias,
                         float lo, float hi, float *out, int64_t ldc) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nn; j++) {
      float y;
      if (raw) {
        int32_t v = qg_wrap((uint32_t)raw[i * QG_NR + j] - (uint32_t)rowc[i] - (uint32_t)qg_wrap_mul(azp[i], ws[j]));
        y = ((float)v * as[i]) * sc[j];
      } else {
        y = facc[i * QG_NR + j] * as[i];
      }
      if (bias) y = y + bias[j];
      if (y < lo) y = lo;
      if (y > hi) y = hi;
      out[i * ldc + j] = y;
    }
}

/* Tile t's blockwise weights as the micro-kernels read them (the rows'
 * fields, sa or nrc and azp, left to the caller). */
static qg_blocks qg_tile_blocks(const px_qweights *w, int64_t t) {
  return (qg_blocks){.nb = w->nb,
                     .sbias = w->sbias,
                     .corr = (const float *)w->wsum + t * QG_NR,
                     .scales = w->packed + t * w->tile_bytes + w->nu * w->unit_bytes,
                     .sbf16 = w->sbf16,
                     .wstride = w->blk_bytes,
                     .bk = w->bk,
                     .astride = w->bkp};
}

static void qg_run_f32(void *arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const qg_job *J = arg;
  const px_qweights *w = J->w;
  int64_t nb = w->nb;
  int32_t raw[QG_MR * QG_NR], rowc[QG_MR];
  float facc[QG_MR * QG_NR];
  for (int64_t it = i0; it < i1; it++) {
    int64_t t = it / J->nmb, mb = it % J->nmb;
    int64_t mend = (mb + 1) * QG_MB < J->M ? (mb + 1) * QG_MB : J->M;
    const uint8_t *wt = w->packed + t * w->tile_bytes;
    int nn = (int)(w->N - t * QG_NR < QG_NR ? w->N - t * QG_NR : QG_NR);
    /* per channel: the tile's scales and weight sums (padded to QG_NR) */
    const float *sc = w->blockwise ? NULL : (const float *)w->scales + t * QG_NR;
    const int32_t *ws = w->blockwise ? NULL : (const int32_t *)w->wsum + t * QG_NR;
    const float *bias = w->bias ? w->bias + t * QG_NR : NULL;
    for (int64_t m0 = mb * QG_MB; m0 < mend; m0 += QG_MR) {
      int mr = (int)(mend - m0 < QG_MR ? mend - m0 : QG_MR);
      float *o = J->out + m0 * J->ldc + t * QG_NR;
      if (w->blockwise) {
        qg_blocks B = qg_tile_blocks(w, t);
        B.sa = J->sa + m0 * nb, B.azp = J->a_zp + m0;
        J->ukr(wt, J->ap + m0 * J->lda, J->lda, mr, w->nu, &B, facc);
        J->f32_out(NULL, facc, mr, nn, NULL, NULL, NULL, J->a_scale + m0, NULL, bias, J->lo, J->hi, o, J->ldc);
      } else {
        J->ukr(wt, J->ap + m0 * J->lda, J->lda, mr, w->nu, NULL, raw);
        for (int i = 0; i < mr; i++) rowc[i] = qg_wrap_mul(w->sbias, J->sa[m0 + i]);
        J->f32_out(raw, NULL, mr, nn, rowc, J->a_zp + m0, ws, J->a_scale + m0, sc, bias, J->lo, J->hi, o, J->ldc);
      }
    }
  }
}

/* One row, blockwise 4-bit weights: work item it is tiles [it * QG_GV,
 * it * QG_GV + QG_GV), each channel's floats those of qg_run_f32. */
static void qg_run_gemv(void *arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const qg_job *J = arg;
  const px_qweights *w = J->w;
  float facc[QG_GV * QG_NR];
  for (int64_t it = i0; it < i1; it++) {
    int64_t t0 = it * QG_GV;
    int nt = (int)(w->ntiles - t0 < QG_GV ? w->ntiles - t0 : QG_GV);
    const uint8_t *wt = w->packed + t0 * w->tile_bytes;
    qg_blocks B = qg_tile_blocks(w, t0);
    B.sa = J->sa, B.azp = J->a_zp;
    J->gemv(wt, w->tile_bytes, nt, J->ap, w->nu, &B, facc);
    for (int t = 0; t < nt; t++) {
      int64_t n0 = (t0 + t) * QG_NR;
      int nn = (int)(w->N - n0 < QG_NR ? w->N - n0 : QG_NR);
      J->f32_out(NULL, facc + t * QG_NR, 1, nn, NULL, NULL, NULL, J->a_scale, NULL, w->bias ? w->bias + n0 : NULL,
                 J->lo, J->hi, J->out + n0, J->ldc);
    }
  }
}

/* Rows of blockwise 4-bit weights: work item it is tile group it / nmb
 * (QG_GV tiles), row block it % nmb, QG_MR8 rows a kernel call, finished
 * there; each output element's floats are those of qg_run_f32. */
static void qg_run_gemm(void *arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const qg_job *J = arg;
  const px_qweights *w = J->w;
  for (int64_t it = i0; it < i1; it++) {
    int64_t t0 = it / J->nmb * QG_GV, mb = it % J->nmb, n0 = t0 * QG_NR;
    int nt = (int)(w->ntiles - t0 < QG_GV ? w->ntiles - t0 : QG_GV);
    int64_t mend = (mb + 1) * QG_MB < J->M ? (mb + 1) * QG_MB : J->M;
    const uint8_t *wt = w->packed + t0 * w->tile_bytes;
    for (int64_t m0 = mb * QG_MB; m0 < mend; m0 += QG_MR8) {
      int mr = (int)(mend - m0 < QG_MR8 ? mend - m0 : QG_MR8);
      qg_blocks B = qg_tile_blocks(w, t0);
      B.nrc = J->nrc + m0 * w->nb, B.azp = J->a_zp + m0;
      qg_pc_out p = {.as = J->a_scale + m0, .bias = w->bias ? w->bias + n0 : NULL, .lo = J->lo, .hi = J->hi,
                     .nn = w->N - n0};
      J->gemm(wt, w->tile_bytes, nt, J->ap + m0 * J->lda, J->lda, mr, w->nu, &B, &p, J->out + m0 * J->ldc + n0,
              J->ldc);
    }
  }
}

#if QG_X86
/* Per-channel 8-bit weights, several rows (qd8 -> f32): QG_GV tiles and
 * J->rows rows per kernel call, finished in its registers. */
static void qg_run_f32pc8(void *arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const qg_job *J = arg;
  const px_qweights *w = J->w;
  for (int64_t it = i0; it < i1; it++) {
    int64_t t0 = it / J->nmb * QG_GV, mb = it % J->nmb, n0 = t0 * QG_NR;
    int nt = (int)(w->ntiles - t0 < QG_GV ? w->ntiles - t0 : QG_GV);
    int64_t mend = (mb + 1) * QG_MB < J->M ? (mb + 1) * QG_MB : J->M;
    const uint8_t *wt = w->packed + t0 * w->tile_bytes;
    for (int64_t m0 = mb * QG_MB; m0 < mend; m0 += J->rows) {
      int mr = (int)(mend - m0 < J->rows ? mend - m0 : J->rows);
      int32_t rowc[QG_MR8];
      for (int i = 0; i < mr; i++) rowc[i] = qg_wrap_mul(w->sbias, J->sa[m0 + i]);
      qg_pc_out p = {.rowc = rowc, .azp = J->a_zp + m0, .ws = (const int32_t *)w->wsum + n0, .as = J->a_scale + m0,
                     .sc = (const float *)w->scales + n0, .bias = w->bias ? w->bias + n0 : NULL, .lo = J->lo,
                     .hi = J->hi, .nn = w->N - n0, .pf = J->prefetch ? nt * w->tile_bytes : 0};
      J->f32pc8(wt, w->tile_bytes, nt, J->ap + m0 * J->lda, J->lda, mr, w->nu, &p, J->out + m0 * J->ldc + n0, J->ldc);
    }
  }
}
#endif

/* The scalar form of qg_qs8_out_fn. */
static void qg_qs8_out_c(const int32_t *raw, int mr, int nn, const int32_t *rowc, const int32_t *kb, const float *rq,
                         float qlo, float qhi, int32_t zp, int8_t *out, int64_t ldc) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nn; j++) {
      int32_t v = qg_wrap((uint32_t)raw[i * QG_NR + j] - (uint32_t)rowc[i] + (uint32_t)kb[j]);
      float y = qg_min(qg_max((float)v * rq[j], qlo), qhi);
      out[i * ldc + j] = (int8_t)(lrintf(y) + zp);
    }
}

/* The static product's output step: a_zp, bias, the requantization scales
 * and the output's zero point, clamp and rows. */
static void qg_qs8_step(qg_job *J, int32_t a_zp, const int32_t *bias, const float *requant, int32_t out_zp,
                        int32_t qmin, int32_t qmax, int8_t *out, int64_t ldc) {
  J->azp1 = a_zp;
  J->ibias = bias;
  J->requant = requant;
  J->out_zp = out_zp;
  J->qlo = (float)(qmin - out_zp);
  J->qhi = (float)(qmax - out_zp);
  J->qout = out;
  J->ldc = ldc;
}

/* nt tiles' constants from channel n0: bias - a_zp * wsum, and the
 * requantization scales (0 past the last channel). */
static void qg_qs8_consts(const qg_job *J, int64_t n0, int nt, int32_t *kb, float *rq) {
  const px_qweights *w = J->w;
  const int64_t left = w->N - n0;
  for (int j = 0; j < nt * QG_NR; j++) {
    kb[j] = j < left ? qg_wrap((J->ibias ? (uint32_t)J->ibias[n0 + j] : 0u) -
                               (uint32_t)qg_wrap_mul(J->azp1, ((const int32_t *)w->wsum)[n0 + j]))
                     : 0;
    rq[j] = j < left ? J->requant[n0 + j] : 0.0f;
  }
}

static void qg_run_qs8(void *arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const qg_job *J = arg;
  const px_qweights *w = J->w;
  int32_t raw[QG_MR * QG_NR], rowc[QG_MR], kb[QG_GV * QG_NR];
  float rq[QG_GV * QG_NR];
  const int gv = J->qs8_tile ? QG_GV : 1; /* tiles per work item */
  for (int64_t it = i0; it < i1; it++) {
    int64_t t0 = it / J->nmb * gv, mb = it % J->nmb;
    int nt = (int)(w->ntiles - t0 < gv ? w->ntiles - t0 : gv);
    int64_t mend = (mb + 1) * QG_MB < J->M ? (mb + 1) * QG_MB : J->M;
    const uint8_t *wt = w->packed + t0 * w->tile_bytes;
    int64_t n0 = t0 * QG_NR, left = w->N - n0;
    qg_qs8_consts(J, n0, nt, kb, rq);
    if (J->qs8_tile) { /* the row block in one call */
      int32_t rowcs[QG_MB];
      int64_t m0 = mb * QG_MB;
      for (int64_t i = 0; i < mend - m0; i++) rowcs[i] = qg_wrap_mul(w->sbias, J->sa[m0 + i]);
      J->qs8_tile(wt, w->tile_bytes, nt, J->ap + m0 * J->lda, J->lda, mend - m0, w->nu, left, rowcs, kb, rq, J->qlo,
                  J->qhi, J->out_zp, J->qout + m0 * J->ldc + n0, J->ldc);
      continue;
    }
    int nn = (int)(left < QG_NR ? left : QG_NR);
    for (int64_t m0 = mb * QG_MB; m0 < mend; m0 += QG_MR) {
      int mr = (int)(mend - m0 < QG_MR ? mend - m0 : QG_MR);
      for (int i = 0; i < mr; i++) rowc[i] = qg_wrap_mul(w->sbias, J->sa[m0 + i]);
      J->ukr(wt, J->ap + m0 * J->lda, J->lda, mr, w->nu, NULL, raw);
      J->qs8_out(raw, mr, nn, rowc, kb, rq, J->qlo, J->qhi, J->out_zp, J->qout + m0 * J->ldc + n0, J->ldc);
    }
  }
}

/* The activations as the micro-kernels read them (rows of lda bytes, blocks
 * of bkp): the caller's own rows when no block needs padding or the caller
 * padded them, else a padded copy in scratch; and their block sums
 * (scratch). */
static int qg_prepare_a(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda, bool padded,
                        const int8_t **ap, int64_t *ldap, int32_t **sa) {
  int copy = !padded && w->bkp != w->bk;
  size_t Kp = (size_t)(w->nb * w->bkp);
  size_t abytes = copy ? ((size_t)M * Kp + 63) / 64 * 64 : 0;
  uint8_t *s = px_scratch(ctx, abytes + (size_t)M * (size_t)w->nb * sizeof(int32_t));
  if (!s) return -1;
  *sa = (int32_t *)(s + abytes);
  if (copy) {
    qg_pack_a(w, M, a, lda, (int8_t *)s, *sa);
    *ap = (const int8_t *)s;
    *ldap = (int64_t)Kp;
    return 0;
  }
  const bool vec = px_cpu()->avx2;
#if QG_X86
  if (vec && w->nb == 1) {
    qg_sums_s8_avx2(a, M, w->bk, lda, *sa);
    *ap = a;
    *ldap = lda;
    return 0;
  }
#endif
  for (int64_t m = 0; m < M; m++)
    for (int64_t g = 0; g < w->nb; g++) (*sa)[m * w->nb + g] = qg_sum_s8(a + m * lda + g * w->bk, w->bk, vec);
  *ap = a;
  *ldap = lda;
  return 0;
}

/* What a job over either output starts from: the weights, the kernel for
 * their width, the activations (packed where the kernels need it) with
 * their block sums, and the count of row blocks. */
static int qg_job_init(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda, bool padded,
                       qg_job *J) {
  memset(J, 0, sizeof *J);
  const int8_t *ap;
  int64_t ldap;
  int32_t *sa;
  if (qg_prepare_a(ctx, w, M, a, lda, padded, &ap, &ldap, &sa)) return PYEXEC_ERR_OUT_OF_MEMORY;
  J->w = w;
  J->ukr = qg_kernel(w->bits);
  J->M = M;
  J->ap = ap;
  J->lda = ldap;
  J->sa = sa;
  J->nmb = (M + QG_MB - 1) / QG_MB;
  return 0;
}

static int qg_qd8_f32(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda, bool padded,
                      const int32_t *a_zp, const float *a_scale, float *out, int64_t ldc, float lo, float hi) {
  if (M <= 0) return 0;
  if (padded && (w->blockwise || lda < w->bkp))
    return px_fail(ctx, "padded rows of %lld bytes for a depth of %lld", (long long)lda, (long long)w->bkp);
  qg_job J;
  int rc = qg_job_init(ctx, w, M, a, lda, padded, &J);
  if (rc) return rc;
  J.a_zp = a_zp;
  J.a_scale = a_scale;
  J.out = out;
  J.ldc = ldc;
  J.lo = lo;
  J.hi = hi;
  J.f32_out = qg_f32_out_c;
#if QG_X86
  if (px_qgemm_path() == PX_QGEMM_AVX2 || px_qgemm_path() == PX_QGEMM_AVX512_VNNI) J.f32_out = qg_f32_out_avx2;
#endif
#if QG_NEON
  if (px_qgemm_path() == PX_QGEMM_NEON || px_qgemm_path() == PX_QGEMM_NEON_DOT) J.f32_out = qg_f32_out_neon;
#endif
  /* One row of blockwise 4-bit weights (8da4w decode): several tiles at
   * once where the path has a kernel for it. Its high-nibble sums are 16
   * times the true ones, so blocks are kept short enough not to wrap them
   * (240 * 128 * bkp / 2 < 2^31). */
  J.gemv = M == 1 && w->blockwise && w->bits == 4 && w->bkp <= 65536 ? qg_gemv_kernel() : NULL;
  if (J.gemv) {
    px_parallel_for((w->ntiles + QG_GV - 1) / QG_GV, 1, w->K * w->N, qg_run_gemv, &J);
    return 0;
  }
  /* Several rows of blockwise 4-bit weights, where the path has a kernel
   * for them (qg_gemm_fn), with the activation sums times -sbias once. */
  J.gemm = w->blockwise && w->bits == 4 ? qg_gemm_kernel() : NULL;
  if (J.gemm) {
    int32_t *nrc = px_scratch(ctx, (size_t)(M * w->nb) * sizeof(int32_t));
    if (!nrc) return PYEXEC_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < M * w->nb; i++) nrc[i] = qg_wrap_mul(-w->sbias, J.sa[i]);
    J.nrc = nrc;
    px_parallel_for((w->ntiles + QG_GV - 1) / QG_GV * J.nmb, 1, M * w->K * w->N, qg_run_gemm, &J);
    return 0;
  }
#if QG_X86
  J.f32pc8 = M > 1 && !w->blockwise && w->bits == 8 && px_qgemm_path() == PX_QGEMM_AVX512_VNNI ? qg_f32pc8_vnni : NULL;
  if (J.f32pc8) {
    /* A few rows over short tiles (a small K, as a BERT's layers at a few
     * tokens) use each weight once, fetched from memory by a product too
     * short for the hardware prefetcher to follow its four streams. */
    J.prefetch = M <= 2 * QG_MR && w->tile_bytes <= 8192;
    /* Eight rows a call (qg_f32pc8_vnni's 8 x 2 passes) where a tile group
     * does not stay in L1 (48 KiB on Sapphire Rapids) or there are few rows:
     * then each weight fetched counts; four (4 x 4) where the group's
     * weights are in L1 and the broadcasts shared by four tiles count more.
     * On one Sapphire Rapids core, M = 197: K = 768 4 x 4 319 GMAC/s, 8 x 2
     * 313; K = 1024 300 / 317; K = 3072 295 / 321; M = 8, K = 512: 270 / 300. */
    J.rows = M <= 2 * QG_MR || w->tile_bytes * QG_GV > 48 * 1024 ? QG_MR8 : QG_MR;
    px_parallel_for((w->ntiles + QG_GV - 1) / QG_GV * J.nmb, 1, M * w->K * w->N, qg_run_f32pc8, &J);
    return 0;
  }
#endif
  px_parallel_for(w->ntiles * J.nmb, 1, M * w->K * w->N, qg_run_f32, &J);
  return 0;
}

static int qg_qs8(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda, bool padded,
                  int32_t a_zp, const int32_t *bias, const float *requant, int32_t out_zp, int32_t qmin,
                  int32_t qmax, int8_t *out, int64_t ldc) {
  if (w->blockwise) return px_fail(ctx, "static int8 product with blockwise weight scales");
  if (M <= 0) return 0;
  if (padded && lda < w->bkp)
    return px_fail(ctx, "padded rows of %lld bytes for a depth of %lld", (long long)lda, (long long)w->bkp);
  qg_job J;
  int rc = qg_job_init(ctx, w, M, a, lda, padded, &J);
  if (rc) return rc;
  qg_qs8_step(&J, a_zp, bias, requant, out_zp, qmin, qmax, out, ldc);
  J.qs8_out = qg_qs8_out_c;
#if QG_X86
  if (px_qgemm_path() == PX_QGEMM_AVX2 || px_qgemm_path() == PX_QGEMM_AVX512_VNNI) J.qs8_out = qg_qs8_out_avx2;
  if (px_qgemm_path() == PX_QGEMM_AVX512_VNNI && w->bits == 8) J.qs8_tile = qg_qs8_tile_vnni;
#endif
#if QG_NEON
  if (px_qgemm_path() == PX_QGEMM_NEON || px_qgemm_path() == PX_QGEMM_NEON_DOT) J.qs8_out = qg_qs8_out_neon;
#endif
  const int64_t gv = J.qs8_tile ? QG_GV : 1;
  px_parallel_for((w->ntiles + gv - 1) / gv * J.nmb, 1, M * w->K * w->N, qg_run_qs8, &J);
  return 0;
}

/* ---- indirect rows ---------------------------------------------------------------------- */

void px_qgemm_sums_s8(const int8_t *p, int64_t count, int64_t n, int64_t stride, int32_t *out) {
  const bool vec = px_cpu()->avx2;
#if QG_X86
  if (vec) {
    qg_sums_s8_avx2(p, count, n, stride, out);
    return;
  }
#endif
  for (int64_t i = 0; i < count; i++) out[i] = qg_sum_s8(p + i * stride, n, vec);
}

bool px_qgemm_qs8_indirect_ok(const px_qweights *w, int64_t taps) {
#if QG_X86
  return px_qgemm_path() == PX_QGEMM_AVX512_VNNI && w && w->bits == 8 && !w->blockwise && w->nb == 1 &&
         w->bkp == w->bk && taps > 0 && w->bk % taps == 0 && (w->bk / taps) % QG_KU == 0;
#else
  (void)w;
  (void)taps;
  return false;
#endif
}

#if QG_X86
/* qg_run_qs8's fused branch over indirect rows. */
static void qg_run_qs8_ind(void *arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const qg_job *J = arg;
  const px_qweights *w = J->w;
  int32_t kb[QG_GV * QG_NR], rowcs[QG_MB];
  float rq[QG_GV * QG_NR];
  for (int64_t it = i0; it < i1; it++) {
    int64_t t0 = it / J->nmb * QG_GV, mb = it % J->nmb;
    int nt = (int)(w->ntiles - t0 < QG_GV ? w->ntiles - t0 : QG_GV);
    int64_t m0 = mb * QG_MB, mend = m0 + QG_MB < J->M ? m0 + QG_MB : J->M;
    int64_t n0 = t0 * QG_NR, left = w->N - n0;
    qg_qs8_consts(J, n0, nt, kb, rq);
    for (int64_t i = 0; i < mend - m0; i++) rowcs[i] = qg_wrap_mul(w->sbias, J->sa[m0 + i]);
    qg_qs8_ind_tile_vnni(w->packed + t0 * w->tile_bytes, w->tile_bytes, nt, J->ind + m0 * J->taps, J->taps, J->wtap,
                         J->tu,
                         mend - m0, left, rowcs, kb, rq, J->qlo, J->qhi, J->out_zp, J->qout + m0 * J->ldc + n0,
                         J->ldc);
  }
}
#endif

int px_qgemm_qs8_indirect(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *const *ind, int64_t taps,
                          int64_t nlist, const int32_t *list, const int32_t *row_sums, int32_t a_zp,
                          const int32_t *bias, const float *requant, int32_t out_zp, int32_t qmin, int32_t qmax,
                          int8_t *out, int64_t ldc) {
  if (!px_qgemm_qs8_indirect_ok(w, taps))
    return px_fail(ctx, "indirect int8 product on weights or a path that does not take it");
  if (list && (nlist < 0 || nlist > taps))
    return px_fail(ctx, "indirect int8 product: %lld listed taps of %lld", (long long)nlist, (long long)taps);
  for (int64_t t = 0; list && t < nlist; t++)
    if (list[t] < 0 || list[t] >= taps)
      return px_fail(ctx, "indirect int8 product: listed tap %lld of %lld", (long long)list[t], (long long)taps);
  if (M <= 0) return 0;
#if QG_X86
  qg_job J;
  memset(&J, 0, sizeof J);
  J.w = w;
  J.M = M;
  J.nmb = (M + QG_MB - 1) / QG_MB;
  J.sa = row_sums;
  J.ind = ind;
  J.taps = list ? nlist : taps;
  J.wtap = list;
  J.tu = w->bk / taps / QG_KU;
  qg_qs8_step(&J, a_zp, bias, requant, out_zp, qmin, qmax, out, ldc);
  px_parallel_for((w->ntiles + QG_GV - 1) / QG_GV * J.nmb, 1, M * w->K * w->N, qg_run_qs8_ind, &J);
  return 0;
#else
  (void)ind, (void)row_sums, (void)a_zp, (void)bias, (void)requant, (void)out_zp, (void)qmin, (void)qmax, (void)out,
      (void)ldc, (void)nlist;
  return 0;
#endif
}

int px_qgemm_qd8_f32(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda,
                     const int32_t *a_zp, const float *a_scale, float *out, int64_t ldc, float lo, float hi) {
  return qg_qd8_f32(ctx, w, M, a, lda, false, a_zp, a_scale, out, ldc, lo, hi);
}

int px_qgemm_qd8_f32_padded(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda,
                            const int32_t *a_zp, const float *a_scale, float *out, int64_t ldc, float lo,
                            float hi) {
  return qg_qd8_f32(ctx, w, M, a, lda, true, a_zp, a_scale, out, ldc, lo, hi);
}

int px_qgemm_qs8(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda, int32_t a_zp,
                 const int32_t *bias, const float *requant, int32_t out_zp, int32_t qmin, int32_t qmax, int8_t *out,
                 int64_t ldc) {
  return qg_qs8(ctx, w, M, a, lda, false, a_zp, bias, requant, out_zp, qmin, qmax, out, ldc);
}

int px_qgemm_qs8_padded(px_ctx *ctx, const px_qweights *w, int64_t M, const int8_t *a, int64_t lda, int32_t a_zp,
                        const int32_t *bias, const float *requant, int32_t out_zp, int32_t qmin, int32_t qmax,
                        int8_t *out, int64_t ldc) {
  return qg_qs8(ctx, w, M, a, lda, true, a_zp, bias, requant, out_zp, qmin, qmax, out, ldc);
}

int64_t px_qgemm_padded_depth(const px_qweights *w) { return w->nb * w->bkp; }
