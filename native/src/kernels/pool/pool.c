/*
 * pool.c - 2-D and 3-D pooling: max_pool2d/3d_with_indices, avg_pool2d/3d
 * and _adaptive_avg_pool2d/3d, for every floating dtype (float16 / bfloat16
 * computed in float); one code path, 2-D pooling being 3-D with a depth of
 * one.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/parallel.h"
#include "kernels/common.h"

typedef struct pool_geom {
  int64_t planes, D, H, W, OD, OH, OW; /* 2-D pooling: D = OD = 1 */
  int64_t kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw;
} pool_geom;

static int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (o - 1) * s >= in + p) o--;
  return o;
}

/* Shared checks of max_pool2d / avg_pool2d (nsp 2) and max_pool3d /
 * avg_pool3d (nsp 3): input rank, kernel, stride, padding, dilation, output
 * size; resizes `out` (and `out2`). */
static int pool_setup(px_ctx *ctx, int nsp, const px_tensor *in, px_value *kernel,
                      px_value *stride, px_value *padding, px_value *dilation, bool ceil,
                      px_tensor *out, px_tensor *out2, pool_geom *g) {
  int rc;
  if (in->dim != nsp + 1 && in->dim != nsp + 2)
    return px_fail(ctx, "input must be %d-D or %d-D, got %d dims", nsp + 1, nsp + 2, in->dim);
  if (out->dim != in->dim || (out2 && out2->dim != in->dim))
    return px_fail(ctx, "outputs must have the input's rank (%d)", in->dim);
  int64_t k[3], s[3], p[3], d[3] = {1, 1, 1};
  if ((rc = spatial_param(ctx, kernel, nsp, "kernel_size", NULL, k))) return rc;
  if ((rc = spatial_param(ctx, stride, nsp, "stride", k, s))) return rc;
  if ((rc = spatial_param(ctx, padding, nsp, "padding", NULL, p))) return rc;
  if (dilation && (rc = spatial_param(ctx, dilation, nsp, "dilation", NULL, d))) return rc;
  int64_t sp[3], o[3];
  for (int i = 0; i < nsp; i++) {
    sp[i] = in->sizes[in->dim - nsp + i];
    if (k[i] <= 0 || s[i] <= 0 || d[i] <= 0)
      return px_fail(ctx, "kernel_size (%lld), stride (%lld) and dilation (%lld) must be "
                     "positive", (long long)k[i], (long long)s[i], (long long)d[i]);
    if (p[i] < 0 || p[i] > k[i] / 2)
      return px_fail(ctx, "padding %lld must be non-negative and at most half the kernel size "
                     "%lld", (long long)p[i], (long long)k[i]);
    if ((k[i] | s[i] | p[i] | d[i]) >> 30)
      return px_fail(ctx, "kernel_size, stride, padding or dilation exceeds 2^30");
    o[i] = pool_out_size(sp[i], k[i], s[i], p[i], d[i], ceil);
    if (o[i] < 1 || sp[i] < 1)
      return px_fail(ctx, "input size %lld with kernel %lld, padding %lld and dilation %lld "
                     "gives output size %lld", (long long)sp[i], (long long)k[i],
                     (long long)p[i], (long long)d[i], (long long)o[i]);
  }
  int64_t os[5];
  memcpy(os, in->sizes, sizeof(int64_t) * (size_t)in->dim);
  for (int i = 0; i < nsp; i++) os[in->dim - nsp + i] = o[i];
  if ((rc = px_resize(ctx, out, in->dim, os))) return rc;
  if (out2 && (rc = px_resize(ctx, out2, in->dim, os))) return rc;
  /* 2-D: a depth of one, kernel 1, stride 1, no padding */
  int z = nsp == 3 ? 0 : -1; /* index of depth in the arrays, -1: none */
  g->planes = px_prod(in->sizes, 0, in->dim - nsp);
  g->D = z < 0 ? 1 : sp[0], g->OD = z < 0 ? 1 : o[0];
  g->kd = z < 0 ? 1 : k[0], g->sd = z < 0 ? 1 : s[0], g->pd = z < 0 ? 0 : p[0];
  g->dd = z < 0 ? 1 : d[0];
  int h = nsp - 2, w = nsp - 1;
  g->H = sp[h], g->W = sp[w], g->OH = o[h], g->OW = o[w];
  g->kh = k[h], g->kw = k[w], g->sh = s[h], g->sw = s[w];
  g->ph = p[h], g->pw = p[w], g->dh = d[h], g->dw = d[w];
  return 0;
}

/* Max pooling for one dtype: T elements compared as C; NaN wins (and a later
 * NaN replaces an earlier one), ties keep the first position, as in torch.
 * Indices are flat within the input plane (d*H + h)*W + w. */
#define DEFINE_MAXPOOL(NAME, T, C, LOAD, LOWEST)                                             \
  static void NAME(const pool_geom *g, const void *inp, void *outp, int64_t *idx,          \
                   int64_t pl0, int64_t pl1) {                                               \
    const T *in = inp;                                                                       \
    T *out = outp;                                                                           \
    const int64_t HW = g->H * g->W;                                                          \
    for (int64_t pl = pl0; pl < pl1; pl++) {                                                 \
      const T *plane = in + pl * g->D * HW;                                                  \
      for (int64_t od = 0; od < g->OD; od++) {                                               \
        int64_t d0 = od * g->sd - g->pd, d1 = d0 + (g->kd - 1) * g->dd + 1;                  \
        if (d1 > g->D) d1 = g->D;                                                            \
        while (d0 < 0) d0 += g->dd;                                                          \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                             \
          int64_t h0 = oh * g->sh - g->ph, h1 = h0 + (g->kh - 1) * g->dh + 1;                \
          if (h1 > g->H) h1 = g->H;                                                          \
          while (h0 < 0) h0 += g->dh;                                                        \
          for (int64_t ow = 0; ow < g->OW; ow++) {                                           \
            int64_t w0 = ow * g->sw - g->pw, w1 = w0 + (g->kw - 1) * g->dw + 1;              \
            if (w1 > g->W) w1 = g->W;                                                        \
            while (w0 < 0) w0 += g->dw;                                                      \
            int64_t best = (d0 * g->H + h0) * g->W + w0;                                     \
            C bv = LOWEST;                                                                   \
            for (int64_t id = d0; id < d1; id += g->dd)                                      \
              for (int64_t ih = h0; ih < h1; ih += g->dh)                                    \
                for (int64_t iw = w0; iw < w1; iw += g->dw) {                                \
                  int64_t at = (id * g->H + ih) * g->W + iw;                                 \
                  C v = LOAD(plane[at]);                                                     \
                  if (v > bv || v != v) {                                                    \
                    bv = v;                                                                  \
                    best = at;                                                               \
                  }                                                                          \
                }                                                                            \
            int64_t o = ((pl * g->OD + od) * g->OH + oh) * g->OW + ow;                       \
            out[o] = plane[best < g->D * HW ? best : 0];                                     \
            idx[o] = best;                                                                   \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }

#define LOAD_SAME(x) (x)
#define LOAD_HALF(x) px_half_to_float(x)
#define LOAD_BF16(x) px_bf16_to_float(x)
DEFINE_MAXPOOL(maxpool_f32, float, float, LOAD_SAME, -INFINITY)
DEFINE_MAXPOOL(maxpool_f64, double, double, LOAD_SAME, -INFINITY)
DEFINE_MAXPOOL(maxpool_f16, uint16_t, float, LOAD_HALF, -INFINITY)
DEFINE_MAXPOOL(maxpool_bf16, uint16_t, float, LOAD_BF16, -INFINITY)
DEFINE_MAXPOOL(maxpool_i64, int64_t, int64_t, LOAD_SAME, INT64_MIN)
DEFINE_MAXPOOL(maxpool_i32, int32_t, int32_t, LOAD_SAME, INT32_MIN)
DEFINE_MAXPOOL(maxpool_i16, int16_t, int16_t, LOAD_SAME, INT16_MIN)
DEFINE_MAXPOOL(maxpool_i8, int8_t, int8_t, LOAD_SAME, INT8_MIN)
DEFINE_MAXPOOL(maxpool_u8, uint8_t, uint8_t, LOAD_SAME, 0)

/* ---- float32 2-D max pooling: the fast path --------------------------------
 *
 * The same values and indices as maxpool_f32 (the scan above), bit for bit,
 * about 16 times faster on resnet18's stem pool. Per output row the window's
 * rows are fixed; the output columns split into the interior, whose windows
 * lie wholly inside the input row (all kw taps valid), and the borders. The
 * interior goes in blocks of LANES columns, one vector lane per column: for
 * each tap a load (plain for stride 1, two loads and a deinterleave for
 * stride 2, one float at a time otherwise), a compare and two selects update
 * each lane's running maximum and the offset of its tap. The update rule is
 * maxpool_f32's: a greater value, or any NaN, takes the place, so the first
 * maximum in scan order is reported, or the last NaN. The taps are split into
 * two halves scanned side by side (two independent compare-select chains)
 * and combined by the same rule, which gives the scan's answer because the
 * halves are consecutive in scan order. A partial last block is computed
 * again overlapping the block before it (the same results written twice).
 * Border columns, rows without taps, and windows of more than MP_MAX_TAPS
 * taps take mp_one, the scan's own loop for one output.
 *
 * The block code is written once with GCC / clang vector extensions and
 * compiled for 4 lanes (SSE2 on x86-64, NEON on AArch64, generic code
 * elsewhere), and on x86-64 for 8 (AVX2) and 16 (AVX-512), chosen at run
 * time. Offsets within a plane are int32: the caller checks H * W < 2^31. */

/* One output by the scan (maxpool_f32's body for a depth of one). */
static inline void mp_one(const float *plane, int64_t H, int64_t W, int64_t h0, int64_t h1,
                          int64_t dh, int64_t w0, int64_t w1, int64_t dw, float *o, int64_t *ix) {
  int64_t best = h0 * W + w0;
  float bv = -INFINITY;
  for (int64_t ih = h0; ih < h1; ih += dh)
    for (int64_t iw = w0; iw < w1; iw += dw) {
      float v = plane[ih * W + iw];
      if (v > bv || v != v) {
        bv = v;
        best = ih * W + iw;
      }
    }
  *o = plane[best < H * W ? best : 0];
  *ix = best;
}

typedef float mp_f4 __attribute__((vector_size(16)));
typedef int32_t mp_i4 __attribute__((vector_size(16)));
typedef float mp_f8 __attribute__((vector_size(32)));
typedef int32_t mp_i8 __attribute__((vector_size(32)));
#define MP_IOTA4 ((mp_i4){0, 1, 2, 3})
#define MP_IOTA8 ((mp_i8){0, 1, 2, 3, 4, 5, 6, 7})
#define MP_IOTA16 ((mp_i16){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
/* Floats 0, 2, 4, ... of p[0..2 LANES - 1) from lo = p[0..LANES) and
 * hi = p[LANES - 1..2 LANES - 1) (hi's element j, index LANES + j of the
 * pair, is p[LANES - 1 + j]): the first LANES / 2 from lo, the rest from hi.
 * hi ends at the last float used, so no load reaches past the window. */
#define MP_EVEN4(lo, hi) __builtin_shufflevector(lo, hi, 0, 2, 5, 7)
#define MP_EVEN8(lo, hi) __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 9, 11, 13, 15)
#define MP_EVEN16(lo, hi)                                                                   \
  __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31)

/* v = the LANES floats p[0], p[SW], p[2 SW], ... */
#define MP_LOAD(VF, LANES, EVEN, SW, v, p)                                                  \
  do {                                                                                      \
    if ((SW) == 1) {                                                                        \
      memcpy(&(v), (p), sizeof(v));                                                         \
    } else if ((SW) == 2) {                                                                 \
      VF lo_, hi_;                                                                          \
      memcpy(&lo_, (p), sizeof lo_);                                                        \
      memcpy(&hi_, (p) + (LANES) - 1, sizeof hi_);                                          \
      (v) = EVEN(lo_, hi_);                                                                 \
    } else {                                                                                \
      for (int l_ = 0; l_ < (LANES); l_++) (v)[l_] = (p)[l_ * (SW)];                        \
    }                                                                                       \
  } while (0)

/* The scan's update in every lane: a greater value or a NaN v takes the
 * place of bv, and its offset off (a scalar or a vector) that of bo. */
#define MP_UPDATE(VF, VI, v, bv, bo, off)                                                   \
  do {                                                                                      \
    VI m_ = ((v) > (bv)) | ((v) != (v));                                                    \
    (bv) = (VF)(((VI)(v) & m_) | ((VI)(bv) & ~m_));                                         \
    (bo) = ((off) & m_) | ((bo) & ~m_);                                                     \
  } while (0)

/* One block: output columns [c, c + LANES) of the row, columns SW apart in
 * the input; src is the window's first tap of column c. Tap i of the first
 * half is at src + offa[i], of the second at src + offb[i] (for an odd tap
 * count the second half, one shorter, repeats its last tap, or the first
 * half's only one, which changes nothing). bo / co: each lane's best tap as
 * an offset from its window's first tap. */
#define MP_BLOCK_BODY(VF, VI, IOTA, EVEN, LANES, SW)                                        \
  do {                                                                                      \
    const VI iota = IOTA;                                                                   \
    VF bv = (VF){0} - INFINITY, cv = bv, v, u;                                              \
    VI bo = {0}, co = {0};                                                                  \
    for (int i = 0; i < half; i++) {                                                        \
      const int32_t oa = offa[i], ob = offb[i];                                             \
      MP_LOAD(VF, LANES, EVEN, SW, v, src + oa);                                            \
      MP_LOAD(VF, LANES, EVEN, SW, u, src + ob);                                            \
      MP_UPDATE(VF, VI, v, bv, bo, oa);                                                     \
      MP_UPDATE(VF, VI, u, cv, co, ob);                                                     \
    }                                                                                       \
    MP_UPDATE(VF, VI, cv, bv, bo, co); /* the second half after the first */                \
    int32_t at[LANES];                                                                      \
    memcpy(orow + c, &bv, sizeof bv);                                                       \
    bo += iota * (int32_t)(SW);                                                             \
    memcpy(at, &bo, sizeof bo);                                                             \
    for (int l = 0; l < (LANES); l++) irow[c + l] = first + at[l];                          \
  } while (0)

/* Windows of more taps than this take mp_one (the tap tables are on the
 * stack). */
#define MP_MAX_TAPS 1024

/* maxpool_fn over planes [pl0, pl1) for a depth of one. */
#define DEFINE_MAXPOOL_F32_FAST(NAME, ATTR, VF, VI, IOTA, EVEN, LANES)                      \
  ATTR static void NAME(const pool_geom *g, const void *inp, void *outp, int64_t *idx,      \
                        int64_t pl0, int64_t pl1) {                                         \
    const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, kw = g->kw, dw = g->dw;      \
    const int64_t sw = g->sw, dh = g->dh;                                                   \
    int32_t offa[MP_MAX_TAPS / 2], offb[MP_MAX_TAPS / 2];                                   \
    /* interior columns [ca, cb): w0 = ow * sw - pw >= 0, w0 + (kw - 1) * dw < W */         \
    int64_t ca = (g->pw + sw - 1) / sw, last = W - 1 - (kw - 1) * dw + g->pw;              \
    int64_t cb = last < 0 ? 0 : last / sw + 1;                                              \
    if (cb > OW) cb = OW;                                                                   \
    if (ca > cb) ca = cb;                                                                   \
    int64_t tabled = -1; /* the window row count the tap tables are for */                  \
    int half = 0;                                                                           \
    for (int64_t pl = pl0; pl < pl1; pl++) {                                                \
      const float *plane = (const float *)inp + pl * H * W;                                 \
      for (int64_t oh = 0; oh < OH; oh++) {                                                 \
        float *orow = (float *)outp + (pl * OH + oh) * OW;                                  \
        int64_t *irow = idx + (pl * OH + oh) * OW;                                          \
        int64_t h0 = oh * g->sh - g->ph, h1 = h0 + (g->kh - 1) * dh + 1;                    \
        if (h1 > H) h1 = H;                                                                 \
        while (h0 < 0) h0 += dh;                                                            \
        const int64_t nr = h0 < h1 ? (h1 - h0 + dh - 1) / dh : 0, taps = nr * kw;           \
        /* the interior [a, b), if at least a block wide and with taps */                   \
        int64_t a = taps > 0 && taps <= MP_MAX_TAPS && cb - ca >= (LANES) ? ca : OW;        \
        int64_t b = a == OW ? OW : cb;                                                      \
        if (a < b && nr != tabled) {                                                        \
          half = (int)(taps + 1) / 2;                                                       \
          for (int64_t t = 0; t < taps; t++) {                                              \
            int32_t off = (int32_t)((t / kw) * dh * W + (t % kw) * dw);                     \
            if (t < half)                                                                   \
              offa[t] = off;                                                                \
            else                                                                            \
              offb[t - half] = off;                                                         \
          }                                                                                 \
          if (taps % 2) offb[half - 1] = taps > 1 ? offb[half - 2] : offa[0];               \
          tabled = nr;                                                                      \
        }                                                                                   \
        for (int64_t ow = 0; ow < OW; ow++) {                                               \
          if (ow == a) ow = b; /* the interior: below */                                    \
          if (ow == OW) break;                                                              \
          int64_t w0 = ow * sw - g->pw, w1 = w0 + (kw - 1) * dw + 1;                        \
          if (w1 > W) w1 = W;                                                               \
          while (w0 < 0) w0 += dw;                                                          \
          mp_one(plane, H, W, h0, h1, dh, w0, w1, dw, orow + ow, irow + ow);                \
        }                                                                                   \
        for (int64_t c = a; c < b; c += (LANES)) {                                          \
          if (c + (LANES) > b) c = b - (LANES); /* overlaps the block before */             \
          const int64_t first = h0 * W + c * sw - g->pw;                                    \
          const float *src = plane + first;                                                 \
          if (sw == 1)                                                                      \
            MP_BLOCK_BODY(VF, VI, IOTA, EVEN, LANES, 1);                                    \
          else if (sw == 2)                                                                 \
            MP_BLOCK_BODY(VF, VI, IOTA, EVEN, LANES, 2);                                    \
          else                                                                              \
            MP_BLOCK_BODY(VF, VI, IOTA, EVEN, LANES, sw);                                   \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  }

DEFINE_MAXPOOL_F32_FAST(maxpool_f32_fast, , mp_f4, mp_i4, MP_IOTA4, MP_EVEN4, 4)
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(PX_PORTABLE_KERNELS)
#define PX_X86_KERNELS 1
/* 64-byte vectors: only inside functions compiled for AVX-512. */
typedef float mp_f16 __attribute__((vector_size(64)));
typedef int32_t mp_i16 __attribute__((vector_size(64)));
DEFINE_MAXPOOL_F32_FAST(maxpool_f32_fast_avx2, __attribute__((target("avx2"))), mp_f8, mp_i8,
                        MP_IOTA8, MP_EVEN8, 8)
#define MP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
DEFINE_MAXPOOL_F32_FAST(maxpool_f32_fast_avx512, MP_AVX512, mp_f16, mp_i16, MP_IOTA16, MP_EVEN16, 16)
#else
#define PX_X86_KERNELS 0
#endif

typedef void (*maxpool_fn)(const pool_geom *g, const void *in, void *out, int64_t *idx, int64_t pl0,
                           int64_t pl1);

/* The float32 2-D kernels' vector width for this CPU, chosen once: 16 lanes
 * with AVX-512, 8 with AVX2, else 4 (SSE2 on x86-64, NEON on AArch64,
 * generic vector code elsewhere). PYEXEC_POOL_ISA=avx2 or =portable picks a
 * lesser one (for the tests of every variant on one machine, and for
 * benchmarks). */
enum { POOL_ISA_PORTABLE, POOL_ISA_AVX2, POOL_ISA_AVX512 };
static int pool_isa_cached;
static pthread_once_t pool_isa_once = PTHREAD_ONCE_INIT;

static void pool_isa_init(void) {
  int isa = POOL_ISA_PORTABLE;
#if PX_X86_KERNELS
  const px_cpu_features *cpu = px_cpu();
  const char *env = getenv("PYEXEC_POOL_ISA");
  bool portable = env && strcmp(env, "portable") == 0;
  bool no512 = portable || (env && strcmp(env, "avx2") == 0);
  if (!portable && cpu->avx2) isa = POOL_ISA_AVX2;
  if (!no512 && cpu->avx512f && cpu->avx512bw && cpu->avx512vl) isa = POOL_ISA_AVX512;
#endif
  pool_isa_cached = isa;
}

static int pool_isa(void) {
  pthread_once(&pool_isa_once, pool_isa_init);
  return pool_isa_cached;
}

static maxpool_fn maxpool_f32_fast_select(void) {
  int isa = pool_isa();
#if PX_X86_KERNELS
  if (isa == POOL_ISA_AVX512) return maxpool_f32_fast_avx512;
  if (isa == POOL_ISA_AVX2) return maxpool_f32_fast_avx2;
#endif
  (void)isa;
  return maxpool_f32_fast;
}

typedef struct maxpool_job {
  const pool_geom *g;
  const void *in;
  void *out;
  int64_t *idx;
  maxpool_fn fn;
} maxpool_job;

static void maxpool_planes(void *arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const maxpool_job *j = arg;
  j->fn(j->g, j->in, j->out, j->idx, p0, p1);
}

/* aten::max_pool2d_with_indices.out(Tensor self, int[2] kernel_size,
 *   int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False,
 *   *, Tensor(a!) out, Tensor(b!) indices) -> (Tensor(a!), Tensor(b!)) */
static int max_pool_nd(px_ctx *ctx, px_value *const *args, int nsp) {
  px_tensor *in = args[0]->u.t, *out = args[6]->u.t, *ind = args[7]->u.t;
  int rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if ((rc = px_require_dtype(ctx, ind, PX_I64, "indices"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")) ||
      (rc = px_require_contiguous(ctx, ind, "indices")))
    return rc;
  pool_geom g;
  if ((rc = pool_setup(ctx, nsp, in, args[1], args[2], args[3], args[4], args[5]->u.b, out, ind,
                       &g)))
    return rc;
  if (out->numel == 0) return 0;
  maxpool_job j = {&g, in->data, out->data, ind->data, NULL};
  switch (in->dtype) {
    case PX_F32:
      /* 2-D with int32 offsets inside a plane: the fast path */
      j.fn = nsp == 2 && g.H * g.W < ((int64_t)1 << 31) ? maxpool_f32_fast_select() : maxpool_f32;
      break;
    case PX_F64: j.fn = maxpool_f64; break;
    case PX_F16: j.fn = maxpool_f16; break;
    case PX_BF16: j.fn = maxpool_bf16; break;
    case PX_I64: j.fn = maxpool_i64; break;
    case PX_I32: j.fn = maxpool_i32; break;
    case PX_I16: j.fn = maxpool_i16; break;
    case PX_I8: j.fn = maxpool_i8; break;
    case PX_U8: j.fn = maxpool_u8; break;
    default: return px_fail(ctx, "dtype %s is not supported", px_dtype_name(in->dtype));
  }
  /* planes shared out over the thread pool; each plane whole in one task */
  const int64_t taps = g.kd * g.kh * g.kw;
  px_parallel_for(g.planes, 1, out->numel * taps, maxpool_planes, &j);
  return 0;
}

static int k_max_pool2d_with_indices(px_ctx *ctx, px_value *const *args) {
  return max_pool_nd(ctx, args, 2);
}

/* aten::max_pool3d_with_indices.out: the same arguments with 3 values each. */
static int k_max_pool3d_with_indices(px_ctx *ctx, px_value *const *args) {
  return max_pool_nd(ctx, args, 3);
}

/* ---- float32 2-D average pooling: the fast path -----------------------------
 *
 * The same bits as avg_pool_nd's float32 loop: every output sums its window's
 * valid taps in scan order in float from 0, then divides by the same count.
 * Interior columns (window wholly inside the input row) go in vector blocks
 * of LANES columns as in max pooling, two blocks side by side where they fit,
 * one lane per output column doing that output's additions in that order;
 * the border columns take ap_one, the scan for one output. The window's
 * count is the same across a row's interior. */

typedef struct avgpool_job {
  const pool_geom *g;
  const float *in;
  float *out;
  bool include_pad, has_div;
  int64_t divisor;
} avgpool_job;

/* The scan's bounds for output row oh: rows [a0, a1) valid, the window's
 * height counted as h1 - h0 (padding included, as in avg_pool_nd). */
static inline void ap_rows(const pool_geom *g, int64_t oh, int64_t *h0, int64_t *h1, int64_t *a0,
                           int64_t *a1) {
  *h0 = oh * g->sh - g->ph, *h1 = *h0 + g->kh;
  if (*h1 > g->H + g->ph) *h1 = g->H + g->ph;
  *a0 = *h0 < 0 ? 0 : *h0, *a1 = *h1 > g->H ? g->H : *h1;
}

/* One output by avg_pool_nd's float32 loop (depth one). */
static inline float ap_one(const avgpool_job *j, const float *plane, int64_t h0, int64_t h1,
                           int64_t a0, int64_t a1, int64_t ow) {
  const pool_geom *g = j->g;
  int64_t w0 = ow * g->sw - g->pw, w1 = w0 + g->kw;
  if (w1 > g->W + g->pw) w1 = g->W + g->pw;
  int64_t pool = (h1 - h0) * (w1 - w0);
  int64_t b0 = w0 < 0 ? 0 : w0, b1 = w1 > g->W ? g->W : w1;
  if (a0 >= a1 || b0 >= b1) return 0.0f;
  int64_t div = j->has_div ? j->divisor : j->include_pad ? pool : (a1 - a0) * (b1 - b0);
  float s = 0.0f;
  for (int64_t ih = a0; ih < a1; ih++)
    for (int64_t iw = b0; iw < b1; iw++) s += plane[ih * g->W + iw];
  return s / (float)div;
}

/* NV (1 or 2) blocks side by side: output columns [c, c + NV LANES), each
 * lane summing its window's taps in scan order (two blocks: two independent
 * chains of additions in flight). */
#define AP_BLOCK_BODY(VF, EVEN, LANES, SW, NV)                                              \
  do {                                                                                      \
    const float *src = plane + a0 * W + c * sw - g->pw;                                     \
    VF acc = {0}, acc2 = {0}, v, u;                                                         \
    for (int64_t r = 0; r < a1 - a0; r++)                                                   \
      for (int64_t kx = 0; kx < kw; kx++) {                                                 \
        MP_LOAD(VF, LANES, EVEN, SW, v, src + r * W + kx);                                  \
        acc += v;                                                                           \
        if ((NV) == 2) {                                                                    \
          MP_LOAD(VF, LANES, EVEN, SW, u, src + r * W + kx + (LANES) * (SW));               \
          acc2 += u;                                                                        \
        }                                                                                   \
      }                                                                                     \
    acc = acc / fdiv;                                                                       \
    memcpy(orow + c, &acc, sizeof acc);                                                     \
    if ((NV) == 2) {                                                                        \
      acc2 = acc2 / fdiv;                                                                   \
      memcpy(orow + c + (LANES), &acc2, sizeof acc2);                                       \
    }                                                                                       \
  } while (0)

#define AP_BLOCK(VF, EVEN, LANES, NV)                                                       \
  do {                                                                                      \
    if (sw == 1)                                                                            \
      AP_BLOCK_BODY(VF, EVEN, LANES, 1, NV);                                                \
    else if (sw == 2)                                                                       \
      AP_BLOCK_BODY(VF, EVEN, LANES, 2, NV);                                                \
    else                                                                                    \
      AP_BLOCK_BODY(VF, EVEN, LANES, sw, NV);                                               \
  } while (0)

/* px_parallel_for body over planes [pl0, pl1). */
#define DEFINE_AVGPOOL_F32_FAST(NAME, ATTR, VF, EVEN, LANES)                                \
  ATTR static void NAME(void *arg, int64_t pl0, int64_t pl1, int tid) {                     \
    (void)tid;                                                                              \
    const avgpool_job *j = arg;                                                             \
    const pool_geom *g = j->g;                                                              \
    const int64_t W = g->W, OH = g->OH, OW = g->OW, kw = g->kw, sw = g->sw;                 \
    /* interior columns [ca, cb): w0 = ow * sw - pw >= 0, w0 + kw <= W */                   \
    int64_t ca = (g->pw + sw - 1) / sw, last = W - kw + g->pw;                              \
    int64_t cb = last < 0 ? 0 : last / sw + 1;                                              \
    if (cb > OW) cb = OW;                                                                   \
    if (ca > cb) ca = cb;                                                                   \
    for (int64_t pl = pl0; pl < pl1; pl++) {                                                \
      const float *plane = j->in + pl * g->H * W;                                           \
      for (int64_t oh = 0; oh < OH; oh++) {                                                 \
        float *orow = j->out + (pl * OH + oh) * OW;                                         \
        int64_t h0, h1, a0, a1;                                                             \
        ap_rows(g, oh, &h0, &h1, &a0, &a1);                                                 \
        int64_t a = a0 < a1 && cb - ca >= (LANES) ? ca : OW, b = a == OW ? OW : cb;         \
        for (int64_t ow = 0; ow < OW; ow++) {                                               \
          if (ow == a) ow = b; /* the interior: below */                                    \
          if (ow == OW) break;                                                              \
          orow[ow] = ap_one(j, plane, h0, h1, a0, a1, ow);                                  \
        }                                                                                   \
        const int64_t div = j->has_div ? j->divisor                                         \
                            : j->include_pad ? (h1 - h0) * kw                               \
                                             : (a1 - a0) * kw;                              \
        const float fdiv = (float)div;                                                      \
        int64_t c = a;                                                                      \
        for (; c + 2 * (LANES) <= b; c += 2 * (LANES)) AP_BLOCK(VF, EVEN, LANES, 2);        \
        for (; c < b; c += (LANES)) {                                                       \
          if (c + (LANES) > b) c = b - (LANES); /* overlaps the block before */             \
          AP_BLOCK(VF, EVEN, LANES, 1);                                                     \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  }

/* No AVX-512 variant: its 16-lane blocks measured slower than AVX2's 8-lane
 * ones here (1x64x112x112, 3x3 / 2: 213 vs 189 us on an AVX-512 EPYC), the
 * chains of additions, not the width, setting the pace. */
DEFINE_AVGPOOL_F32_FAST(avgpool_f32_fast, , mp_f4, MP_EVEN4, 4)
#if PX_X86_KERNELS
DEFINE_AVGPOOL_F32_FAST(avgpool_f32_fast_avx2, __attribute__((target("avx2"))), mp_f8, MP_EVEN8, 8)
#endif

/* The float32 2-D average pool, planes over the thread pool. */
static void avgpool_f32_2d(const pool_geom *g, const px_tensor *in, px_tensor *out, bool include_pad,
                           bool has_div, int64_t divisor) {
  avgpool_job j = {g, in->data, out->data, include_pad, has_div, divisor};
  void (*fn)(void *, int64_t, int64_t, int) = avgpool_f32_fast;
  int isa = pool_isa();
#if PX_X86_KERNELS
  if (isa == POOL_ISA_AVX2 || isa == POOL_ISA_AVX512) fn = avgpool_f32_fast_avx2;
#endif
  (void)isa;
  px_parallel_for(g->planes, 1, out->numel * g->kh * g->kw, fn, &j);
}

/* aten::avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[],
 *   int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True,
 *   int? divisor_override=None, *, Tensor(a!) out) */
static int avg_pool_nd(px_ctx *ctx, px_value *const *args, int nsp) {
  px_tensor *in = args[0]->u.t, *out = args[7]->u.t;
  bool include_pad = args[5]->u.b;
  bool has_div = args[6]->tag != PX_V_NONE;
  int64_t divisor = has_div ? args[6]->u.i : 0;
  int rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if (in->dtype == PX_BOOL || !px_dtype_supported(in->dtype))
    return px_fail(ctx, "dtype %s is not supported", px_dtype_name(in->dtype));
  if (has_div && divisor == 0) return px_fail(ctx, "divisor_override must be non-zero");
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  pool_geom g;
  if ((rc = pool_setup(ctx, nsp, in, args[1], args[2], args[3], NULL, args[4]->u.b, out, NULL, &g)))
    return rc;
  if (out->numel == 0) return 0;
  if (in->dtype == PX_F32 && nsp == 2) {
    avgpool_f32_2d(&g, in, out, include_pad, has_div, divisor);
    return 0;
  }
  bool fl = px_is_floating(in->dtype);
  const int64_t HW = g.H * g.W;
  for (int64_t pl = 0; pl < g.planes; pl++) {
    int64_t base = pl * g.D * HW;
    for (int64_t od = 0; od < g.OD; od++) {
      int64_t d0 = od * g.sd - g.pd, d1 = d0 + g.kd;
      if (d1 > g.D + g.pd) d1 = g.D + g.pd;
      int64_t e0 = d0 < 0 ? 0 : d0, e1 = d1 > g.D ? g.D : d1;
      for (int64_t oh = 0; oh < g.OH; oh++) {
        int64_t h0 = oh * g.sh - g.ph, h1 = h0 + g.kh;
        if (h1 > g.H + g.ph) h1 = g.H + g.ph;
        int64_t a0 = h0 < 0 ? 0 : h0, a1 = h1 > g.H ? g.H : h1;
        for (int64_t ow = 0; ow < g.OW; ow++) {
          int64_t w0 = ow * g.sw - g.pw, w1 = w0 + g.kw;
          if (w1 > g.W + g.pw) w1 = g.W + g.pw;
          int64_t pool = (d1 - d0) * (h1 - h0) * (w1 - w0);
          int64_t b0 = w0 < 0 ? 0 : w0, b1 = w1 > g.W ? g.W : w1;
          int64_t o = ((pl * g.OD + od) * g.OH + oh) * g.OW + ow;
          if (e0 >= e1 || a0 >= a1 || b0 >= b1) {
            px_store_d(out->data, out->dtype, o, 0.0);
            continue;
          }
          int64_t div = has_div ? divisor : include_pad ? pool : (e1 - e0) * (a1 - a0) * (b1 - b0);
          if (in->dtype == PX_F32) {
            const float *p = (const float *)in->data + base;
            float s = 0.0f;
            for (int64_t id = e0; id < e1; id++)
              for (int64_t ih = a0; ih < a1; ih++)
                for (int64_t iw = b0; iw < b1; iw++) s += p[id * HW + ih * g.W + iw];
            ((float *)out->data)[o] = s / (float)div;
          } else if (fl) {
            double s = 0.0;
            for (int64_t id = e0; id < e1; id++)
              for (int64_t ih = a0; ih < a1; ih++)
                for (int64_t iw = b0; iw < b1; iw++)
                  s += px_load_d(in->data, in->dtype, base + id * HW + ih * g.W + iw);
            px_store_d(out->data, out->dtype, o, s / (double)div);
          } else {
            int64_t s = 0;
            for (int64_t id = e0; id < e1; id++)
              for (int64_t ih = a0; ih < a1; ih++)
                for (int64_t iw = b0; iw < b1; iw++)
                  s = (int64_t)((uint64_t)s +
                                (uint64_t)px_load_i(in->data, in->dtype, base + id * HW + ih * g.W + iw));
            px_store_i(out->data, out->dtype, o, (div == -1 && s == INT64_MIN) ? s : s / div);
          }
        }
      }
    }
  }
  return 0;
}

static int k_avg_pool2d(px_ctx *ctx, px_value *const *args) { return avg_pool_nd(ctx, args, 2); }

/* aten::avg_pool3d.out: the same arguments with 3 values each. */
static int k_avg_pool3d(px_ctx *ctx, px_value *const *args) { return avg_pool_nd(ctx, args, 3); }

/* aten::_adaptive_avg_pool2d.out(Tensor self, SymInt[2] output_size, *,
 *   Tensor(a!) out) */
static int adaptive_avg_pool_nd(px_ctx *ctx, px_value *const *args, int nsp) {
  px_tensor *in = args[0]->u.t, *out = args[2]->u.t;
  int rc;
  if (in->dim != nsp + 1 && in->dim != nsp + 2)
    return px_fail(ctx, "input must be %d-D or %d-D, got %d dims", nsp + 1, nsp + 2, in->dim);
  if (out->dim != in->dim)
    return px_fail(ctx, "out has %d dims but input has %d", out->dim, in->dim);
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "self"))) return rc;
  if (!px_is_floating(in->dtype))
    return px_fail(ctx, "dtype %s is not supported (floating types only)",
                   px_dtype_name(in->dtype));
  if (args[1]->u.il.n != (uint32_t)nsp)
    return px_fail(ctx, "output_size must have %d values, got %u", nsp, args[1]->u.il.n);
  const int64_t *osz = px_intlist(args[1]);
  for (int i = 0; i < nsp; i++)
    if (osz[i] < 0 || osz[i] >> 40)
      return px_fail(ctx, "output_size %lld must be non-negative (and below 2^40)",
                     (long long)osz[i]);
  for (int k = 1; k < in->dim; k++)
    if (in->sizes[k] == 0)
      return px_fail(ctx, "input has a zero-sized non-batch dimension %d", k);
  if ((rc = px_require_contiguous(ctx, in, "self")) ||
      (rc = px_require_contiguous(ctx, out, "out")))
    return rc;
  int64_t os[5];
  memcpy(os, in->sizes, sizeof(int64_t) * (size_t)in->dim);
  for (int i = 0; i < nsp; i++) os[in->dim - nsp + i] = osz[i];
  if ((rc = px_resize(ctx, out, in->dim, os))) return rc;
  if (out->numel == 0) return 0;
  int64_t planes = px_prod(in->sizes, 0, in->dim - nsp);
  int64_t D = nsp == 3 ? in->sizes[in->dim - 3] : 1, OD = nsp == 3 ? osz[0] : 1;
  int64_t H = in->sizes[in->dim - 2], W = in->sizes[in->dim - 1];
  int64_t OH = osz[nsp - 2], OW = osz[nsp - 1], HW = H * W;
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t od = 0; od < OD; od++) {
      int64_t d0 = (od * D) / OD, d1 = ((od + 1) * D + OD - 1) / OD;
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
          int64_t o = ((pl * OD + od) * OH + oh) * OW + ow;
          int64_t cnt = (d1 - d0) * (h1 - h0) * (w1 - w0), base = pl * D * HW;
          if (in->dtype == PX_F32) {
            const float *p = (const float *)in->data + base;
            float s = 0.0f;
            for (int64_t id = d0; id < d1; id++)
              for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) s += p[id * HW + ih * W + iw];
            ((float *)out->data)[o] = s / (float)cnt;
          } else {
            double s = 0.0;
            for (int64_t id = d0; id < d1; id++)
              for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++)
                  s += px_load_d(in->data, in->dtype, base + id * HW + ih * W + iw);
            px_store_d(out->data, out->dtype, o, s / (double)cnt);
          }
        }
      }
    }
  return 0;
}

static int k_adaptive_avg_pool2d(px_ctx *ctx, px_value *const *args) {
  return adaptive_avg_pool_nd(ctx, args, 2);
}

/* aten::_adaptive_avg_pool3d.out(Tensor self, SymInt[3] output_size, *,
 *   Tensor(a!) out) */
static int k_adaptive_avg_pool3d(px_ctx *ctx, px_value *const *args) {
  return adaptive_avg_pool_nd(ctx, args, 3);
}

const px_kernel_def px_kernels_pool[] = {
    {"aten::max_pool2d_with_indices.out", "TLLLLB|TTX", k_max_pool2d_with_indices},
    {"aten::avg_pool2d.out", "TLLLBBiT|T", k_avg_pool2d},
    {"aten::_adaptive_avg_pool2d.out", "TLT|T", k_adaptive_avg_pool2d},
    {"aten::max_pool3d_with_indices.out", "TLLLLB|TTX", k_max_pool3d_with_indices},
    {"aten::avg_pool3d.out", "TLLLBBiT|T", k_avg_pool3d},
    {"aten::_adaptive_avg_pool3d.out", "TLT|T", k_adaptive_avg_pool3d},
    {NULL, NULL, NULL},
};
