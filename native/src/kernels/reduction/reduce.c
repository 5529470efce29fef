/*
 * reduce.c - reductions over dims to one value per output: sum, mean, prod,
 * amax / amin (and max / min of the whole tensor), any / all. The loops run
 * in 8 independent lanes over contiguous chunks (INNER) or rows (ROW) of the
 * plan (plan.h), in float32, float64, int64 or bytes.
 */
#include "core/cpu.h"
#include "core/parallel.h"
#include "kernels/reduction/plan.h"

/* ---- chunk and row loops ------------------------------------------------ */

enum { RK_SUM, RK_PROD, RK_MAX, RK_MIN, RK_ANY, RK_ALL };

#define LANES 8

/* R NAME(p, n): folds n contiguous T into an R with STEP (a = accumulator,
 * v = element as R), in 8 independent lanes (kept in registers) merged with
 * COMBINE (a, v = two lanes). */
#define LSTEP_(L, K, R, STEP)  \
  {                            \
    R a = L, v = (R)p[i + K];  \
    L = (STEP);                \
  }
#define LCOMB_(L, R, COMBINE) \
  {                           \
    R v = L;                  \
    a = (COMBINE);            \
  }
#define DEF_CHUNK_C(NAME, T, R, INIT, STEP, COMBINE)                                       \
  static R NAME(const T *restrict p, int64_t n) {                                          \
    R l0 = (INIT), l1 = l0, l2 = l0, l3 = l0, l4 = l0, l5 = l0, l6 = l0, l7 = l0;          \
    int64_t i = 0;                                                                         \
    for (; i + 8 <= n; i += 8) {                                                           \
      LSTEP_(l0, 0, R, STEP) LSTEP_(l1, 1, R, STEP) LSTEP_(l2, 2, R, STEP)                 \
      LSTEP_(l3, 3, R, STEP) LSTEP_(l4, 4, R, STEP) LSTEP_(l5, 5, R, STEP)                 \
      LSTEP_(l6, 6, R, STEP) LSTEP_(l7, 7, R, STEP)                                        \
    }                                                                                      \
    R a = l0;                                                                              \
    LCOMB_(l1, R, COMBINE) LCOMB_(l2, R, COMBINE) LCOMB_(l3, R, COMBINE)                   \
    LCOMB_(l4, R, COMBINE) LCOMB_(l5, R, COMBINE) LCOMB_(l6, R, COMBINE)                   \
    LCOMB_(l7, R, COMBINE)                                                                 \
    for (; i < n; i++) {                                                                   \
      R v = (R)p[i];                                                                       \
      a = (STEP);                                                                          \
    }                                                                                      \
    return a;                                                                              \
  }

#define DEF_CHUNK(NAME, T, R, INIT, STEP) DEF_CHUNK_C(NAME, T, R, INIT, STEP, STEP)

/* NAME(acc, p, n): acc[i] = STEP(acc[i], p[i]). */
#define DEF_ROW(NAME, T, R, STEP)                                            \
  static void NAME(R *restrict acc, const T *restrict p, int64_t n) {       \
    int64_t i = 0;                                                          \
    for (; i + LANES <= n; i += LANES)                                      \
      for (int j = 0; j < LANES; j++) {                                     \
        R a = acc[i + j], v = (R)p[i + j];                                  \
        acc[i + j] = (STEP);                                                \
      }                                                                     \
    for (; i < n; i++) {                                                    \
      R a = acc[i], v = (R)p[i];                                            \
      acc[i] = (STEP);                                                      \
    }                                                                       \
  }

#define S_ADD (a + v)
#define S_MUL (a * v)
#define S_IADD ((int64_t)((uint64_t)a + (uint64_t)v))
#define S_IMUL ((int64_t)((uint64_t)a * (uint64_t)v))
#define S_CNT (a + (v != 0))
/* NaN propagates: once a is NaN nothing replaces it. */
#define S_FMAX ((v > a || v != v) ? v : a)
#define S_FMIN ((v < a || v != v) ? v : a)
#define S_IMAX (v > a ? v : a)
#define S_IMIN (v < a ? v : a)
#define S_ANY (a | (int64_t)(v != 0))
#define S_ALL (a & (int64_t)(v != 0))

DEF_CHUNK(ch_sum_f64, double, double, 0.0, S_ADD)
DEF_CHUNK(ch_prod_f64, double, double, 1.0, S_MUL)
DEF_CHUNK(ch_max_f32_nan, float, float, -INFINITY, S_FMAX)
DEF_CHUNK(ch_min_f32_nan, float, float, INFINITY, S_FMIN)
/* Without the NaN test the step compiles to maxss / minss (8 chains). */
DEF_CHUNK(ch_max_f32_fin, float, float, -INFINITY, (v > a ? v : a))
DEF_CHUNK(ch_min_f32_fin, float, float, INFINITY, (v < a ? v : a))
DEF_CHUNK(ch_max_f64, double, double, -INFINITY, S_FMAX)
DEF_CHUNK(ch_min_f64, double, double, INFINITY, S_FMIN)
DEF_CHUNK(ch_sum_i64, int64_t, int64_t, 0, S_IADD)
DEF_CHUNK(ch_prod_i64, int64_t, int64_t, 1, S_IMUL)
DEF_CHUNK(ch_max_i64, int64_t, int64_t, INT64_MIN, S_IMAX)
DEF_CHUNK(ch_min_i64, int64_t, int64_t, INT64_MAX, S_IMIN)
DEF_CHUNK(ch_any_i64, int64_t, int64_t, 0, S_ANY)
DEF_CHUNK(ch_all_i64, int64_t, int64_t, 1, S_ALL)
DEF_CHUNK(ch_any_f64, double, double, 0.0, ((a != 0 || v != 0) ? 1.0 : 0.0))
DEF_CHUNK(ch_all_f64, double, double, 1.0, ((a != 0 && v != 0) ? 1.0 : 0.0))
DEF_CHUNK_C(ch_cnt_u8, uint8_t, int64_t, 0, S_CNT, S_IADD)
DEF_CHUNK(ch_any_u8, uint8_t, int64_t, 0, S_ANY)
DEF_CHUNK(ch_all_u8, uint8_t, int64_t, 1, S_ALL)

DEF_ROW(rw_sum_f32, float, double, S_ADD)
DEF_ROW(rw_sum_f64, double, double, S_ADD)
DEF_ROW(rw_prod_f64, double, double, S_MUL)
DEF_ROW(rw_max_f32_nan, float, double, S_FMAX)
DEF_ROW(rw_min_f32_nan, float, double, S_FMIN)
DEF_ROW(rw_max_f32_fin, float, double, (v > a ? v : a))
DEF_ROW(rw_min_f32_fin, float, double, (v < a ? v : a))
DEF_ROW(rw_max_f64, double, double, S_FMAX)
DEF_ROW(rw_min_f64, double, double, S_FMIN)
DEF_ROW(rw_sum_i64, int64_t, int64_t, S_IADD)
DEF_ROW(rw_prod_i64, int64_t, int64_t, S_IMUL)
DEF_ROW(rw_max_i64, int64_t, int64_t, S_IMAX)
DEF_ROW(rw_min_i64, int64_t, int64_t, S_IMIN)
DEF_ROW(rw_any_i64, int64_t, int64_t, S_ANY)
DEF_ROW(rw_all_i64, int64_t, int64_t, S_ALL)
DEF_ROW(rw_cnt_u8, uint8_t, int64_t, S_CNT)
DEF_ROW(rw_any_u8, uint8_t, int64_t, S_ANY)
DEF_ROW(rw_all_u8, uint8_t, int64_t, S_ALL)

/* The loops var.c shares (plan.h). */
double px_red_sum_f64(const double *restrict p, int64_t n) { return ch_sum_f64(p, n); }
void px_red_row_sum_f32(double *restrict acc, const float *restrict p, int64_t n) { rw_sum_f32(acc, p, n); }
void px_red_row_sum_f64(double *restrict acc, const double *restrict p, int64_t n) { rw_sum_f64(acc, p, n); }

/* The float16 / bfloat16 sum routines of this CPU (plan.h): one run, and
 * four runs together where there is such a routine; NULL where there is
 * none (the values are then converted to double a piece at a time and
 * summed by ch_sum_f64, in the same order). */
typedef double (*sum16_fn)(int bf16, const uint16_t *p, int64_t n);
typedef void (*sum16x4_fn)(int bf16, const uint16_t *const p[4], int64_t n, double s[4]);
static void sum16_pick(sum16_fn *one, sum16x4_fn *four) {
  *one = NULL, *four = NULL;
#if PX_RED_X86
  if (px_cpu()->avx512f && px_cpu()->f16c)
    *one = px_red_sum16_avx512, *four = px_red_sum16x4_avx512;
  else if (px_cpu()->avx2 && px_cpu()->f16c)
    *one = px_red_sum16_avx2;
#endif
}

/* float32 sum: blocks of 512 elements summed in 16 float lanes (SIMD-friendly,
 * each lane adds at most 32 values), block sums accumulated in double. */
#define F4_(A, B, C, D, K) \
  A += p[i + K];           \
  B += p[i + K + 1];       \
  C += p[i + K + 2];       \
  D += p[i + K + 3];
double px_red_sum_f32(const float *restrict p, int64_t n) {
  double total = 0;
  int64_t i = 0;
  while (i + 16 <= n) {
    int64_t end = i + 512 < n ? i + 512 : n;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    float c0 = 0, c1 = 0, c2 = 0, c3 = 0, d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (; i + 16 <= end; i += 16) {
      F4_(a0, a1, a2, a3, 0)
      F4_(b0, b1, b2, b3, 4)
      F4_(c0, c1, c2, c3, 8)
      F4_(d0, d1, d2, d3, 12)
    }
    total += (double)((a0 + b0) + (c0 + d0)) + (double)((a1 + b1) + (c1 + d1)) +
             (double)((a2 + b2) + (c2 + d2)) + (double)((a3 + b3) + (c3 + d3));
  }
  for (; i < n; i++) total += p[i];
  return total;
}

/* Whether p[0..n) is free of NaN and infinities: the sum of v * 0 (16 float
 * lanes, vectorised) is NaN exactly when one is present. */
#define Z4_(A, B, C, D, K)    \
  A += p[i + K] * 0.0f;       \
  B += p[i + K + 1] * 0.0f;   \
  C += p[i + K + 2] * 0.0f;   \
  D += p[i + K + 3] * 0.0f;
static bool f32_all_finite(const float *restrict p, int64_t n) {
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0, d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Z4_(a0, a1, a2, a3, 0)
    Z4_(b0, b1, b2, b3, 4)
    Z4_(c0, c1, c2, c3, 8)
    Z4_(d0, d1, d2, d3, 12)
  }
  float t = ((a0 + a1) + (a2 + a3)) + ((b0 + b1) + (b2 + b3)) + ((c0 + c1) + (c2 + c3)) +
            ((d0 + d1) + (d2 + d3));
  for (; i < n; i++) t += p[i] * 0.0f;
  return t == t;
}

/* float32 max / min with NaN propagation: blocks free of NaN / inf (checked
 * first, while the block is in cache) take the fast loop. */
#define F32_BLOCK 1024
float px_red_max_f32(const float *restrict p, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i += F32_BLOCK) {
    int64_t b = n - i < F32_BLOCK ? n - i : F32_BLOCK;
    float v = f32_all_finite(p + i, b) ? ch_max_f32_fin(p + i, b) : ch_max_f32_nan(p + i, b);
    if (v != v) return v;
    if (v > m) m = v;
  }
  return m;
}
float px_red_min_f32(const float *restrict p, int64_t n) {
  float m = INFINITY;
  for (int64_t i = 0; i < n; i += F32_BLOCK) {
    int64_t b = n - i < F32_BLOCK ? n - i : F32_BLOCK;
    float v = f32_all_finite(p + i, b) ? ch_min_f32_fin(p + i, b) : ch_min_f32_nan(p + i, b);
    if (v != v) return v;
    if (v < m) m = v;
  }
  return m;
}

/* Reductions carried in double: sum / prod / max / min of floating types. */
static double chunk_d(int rk, int ct, const void *p, int64_t n) {
  if (ct == CT_F32) {
    switch (rk) {
      case RK_SUM: return px_red_sum_f32(p, n);
      case RK_MAX: return px_red_max_f32(p, n);
      case RK_MIN: return px_red_min_f32(p, n);
      default: return 0.0;
    }
  }
  switch (rk) {
    case RK_SUM: return ch_sum_f64(p, n);
    case RK_PROD: return ch_prod_f64(p, n);
    case RK_MAX: return ch_max_f64(p, n);
    case RK_MIN: return ch_min_f64(p, n);
    case RK_ANY: return ch_any_f64(p, n);
    default: return ch_all_f64(p, n);
  }
}

static void row_d(int rk, int ct, double *acc, const void *p, int64_t n) {
  if (ct == CT_F32) {
    switch (rk) {
      case RK_SUM: rw_sum_f32(acc, p, n); return;
      /* a NaN already in acc stays: v > NaN is false */
      case RK_MAX:
        if (f32_all_finite(p, n))
          rw_max_f32_fin(acc, p, n);
        else
          rw_max_f32_nan(acc, p, n);
        return;
      case RK_MIN:
        if (f32_all_finite(p, n))
          rw_min_f32_fin(acc, p, n);
        else
          rw_min_f32_nan(acc, p, n);
        return;
      default: return;
    }
  }
  switch (rk) {
    case RK_SUM: rw_sum_f64(acc, p, n); return;
    case RK_PROD: rw_prod_f64(acc, p, n); return;
    case RK_MAX: rw_max_f64(acc, p, n); return;
    case RK_MIN: rw_min_f64(acc, p, n); return;
    default: return;
  }
}

/* Reductions carried in int64: integer sum / prod / max / min, any / all. */
static int64_t chunk_i(int rk, int ct, const void *p, int64_t n) {
  if (ct == CT_U8) {
    switch (rk) {
      case RK_SUM: return ch_cnt_u8(p, n);
      case RK_ANY: return ch_any_u8(p, n);
      default: return ch_all_u8(p, n);
    }
  }
  if (ct == CT_F64) return chunk_d(rk, ct, p, n) != 0.0; /* any / all of floats */
  switch (rk) {
    case RK_SUM: return ch_sum_i64(p, n);
    case RK_PROD: return ch_prod_i64(p, n);
    case RK_MAX: return ch_max_i64(p, n);
    case RK_MIN: return ch_min_i64(p, n);
    case RK_ANY: return ch_any_i64(p, n);
    default: return ch_all_i64(p, n);
  }
}

static void row_i(int rk, int ct, int64_t *acc, const void *p, int64_t n) {
  if (ct == CT_U8) {
    switch (rk) {
      case RK_SUM: rw_cnt_u8(acc, p, n); return;
      case RK_ANY: rw_any_u8(acc, p, n); return;
      default: rw_all_u8(acc, p, n); return;
    }
  }
  if (ct == CT_F64) { /* any / all of floats */
    const double *q = p;
    for (int64_t i = 0; i < n; i++) {
      if (rk == RK_ANY)
        acc[i] |= q[i] != 0;
      else
        acc[i] &= q[i] != 0;
    }
    return;
  }
  switch (rk) {
    case RK_SUM: rw_sum_i64(acc, p, n); return;
    case RK_PROD: rw_prod_i64(acc, p, n); return;
    case RK_MAX: rw_max_i64(acc, p, n); return;
    case RK_MIN: rw_min_i64(acc, p, n); return;
    case RK_ANY: rw_any_i64(acc, p, n); return;
    default: rw_all_i64(acc, p, n); return;
  }
}

static double ident_d(int rk) {
  switch (rk) {
    case RK_PROD: return 1.0;
    case RK_MAX: return -INFINITY;
    case RK_MIN: return INFINITY;
    default: return 0.0;
  }
}

static int64_t ident_i(int rk) {
  switch (rk) {
    case RK_PROD:
    case RK_ALL: return 1;
    case RK_MAX: return INT64_MIN;
    case RK_MIN: return INT64_MAX;
    default: return 0;
  }
}

static double combine_d(int rk, double a, double v) {
  switch (rk) {
    case RK_SUM: return a + v;
    case RK_PROD: return a * v;
    case RK_MAX: return S_FMAX;
    default: return S_FMIN;
  }
}

static int64_t combine_i(int rk, int64_t a, int64_t v) {
  switch (rk) {
    case RK_SUM: return S_IADD;
    case RK_PROD: return S_IMUL;
    case RK_MAX: return S_IMAX;
    case RK_MIN: return S_IMIN;
    case RK_ANY: return a | v;
    default: return a & v;
  }
}

/* The compute type of a reduction of `in_dtype` into `out_dtype`. Sums and
 * products follow torch: the input is taken as the output's dtype. */
static int pick_ct(int rk, int in_dtype, int out_dtype) {
  switch (rk) {
    case RK_SUM:
    case RK_PROD:
      if (px_is_floating(out_dtype)) return (rk == RK_SUM && in_dtype == PX_F32) ? CT_F32 : CT_F64;
      if (rk == RK_SUM && in_dtype == PX_BOOL) return CT_U8;
      return CT_I64;
    case RK_MAX:
    case RK_MIN:
      if (in_dtype == PX_F32) return CT_F32;
      return px_is_floating(in_dtype) ? CT_F64 : CT_I64;
    default:
      if (in_dtype == PX_BOOL || in_dtype == PX_U8) return CT_U8;
      return px_is_floating(in_dtype) ? CT_F64 : CT_I64;
  }
}

/* out = reduction of in over mask (out already resized). mean: divide by the
 * number of reduced elements. */
typedef struct reduce_job {
  const px_tensor *in;
  px_tensor *out;
  const rplan *P;
  int rk, ct;
  bool mean, dcar;
  sum16_fn sum16;     /* a sum of float16 / bfloat16 values in the INNER form, where the CPU has one */
  sum16x4_fn sum16x4; /* four such sums together, or NULL */
  int64_t pl;     /* conversion piece (elements) */
  char *buf;      /* per thread: pl elements of the compute type, or NULL */
  int64_t cb, ncb; /* ROW form: column block and blocks per kept position */
  char *acc;      /* ROW form, per thread: cb accumulators of 8 bytes */
} reduce_job;

/* INNER form: outputs [b, e). ROW form: items [b, e), item u being column
 * block u % ncb of kept position u / ncb. */
static void reduce_items(void *arg, int64_t b, int64_t e, int tid) {
  const reduce_job *J = arg;
  const rplan *P = J->P;
  const px_tensor *in = J->in;
  px_tensor *out = J->out;
  const int rk = J->rk, ct = J->ct;
  const int64_t pl = J->pl;
  void *buf = J->buf ? J->buf + (size_t)tid * (size_t)pl * ct_size(ct) : NULL;
  odo ko, ro;
  odo_init(&ko, P->nk, P->ksz, P->kst);
  odo_init(&ro, P->nr, P->rsz, P->rst);
  double nred = (double)P->nred;
  if (P->inner) {
    odo_seek(&ko, b);
    int64_t o = b;
    /* float16 / bfloat16 sums of one contiguous run each, four outputs at a
     * time: four independent chains instead of one (each output's sum is
     * the same as alone) */
    if (J->sum16x4 && P->riters == 1 && P->len <= pl) {
      for (; o + 4 <= e; o += 4) {
        const uint16_t *p4[4];
        double s4[4];
        for (int q = 0; q < 4; q++, odo_next(&ko)) p4[q] = (const uint16_t *)in->data + ko.off + ro.off;
        J->sum16x4(in->dtype == PX_BF16, p4, P->len, s4);
        for (int q = 0; q < 4; q++) store_d(out, o + q, J->mean ? s4[q] / nred : s4[q]);
      }
    }
    for (; o < e; o++, odo_next(&ko)) {
      if (J->sum16) { /* float16 / bfloat16 sums, widened in registers */
        double a = 0.0;
        for (int64_t rit = 0; rit < P->riters; rit++, odo_next(&ro))
          FOR_PIECES(s, m, P->len, pl)
          a += J->sum16(in->dtype == PX_BF16, (const uint16_t *)in->data + ko.off + ro.off + s, m);
        store_d(out, o, J->mean ? a / nred : a);
      } else if (J->dcar) {
        double a = ident_d(rk);
        for (int64_t rit = 0; rit < P->riters; rit++, odo_next(&ro))
          FOR_PIECES(s, m, P->len, pl)
          a = combine_d(rk, a, chunk_d(rk, ct, chunk_at(in, ct, ko.off + ro.off + s, m, buf), m));
        store_d(out, o, J->mean ? a / nred : a);
      } else {
        int64_t a = ident_i(rk);
        for (int64_t rit = 0; rit < P->riters; rit++, odo_next(&ro))
          FOR_PIECES(s, m, P->len, pl)
          a = combine_i(rk, a, chunk_i(rk, ct, chunk_at(in, ct, ko.off + ro.off + s, m, buf), m));
        px_store_i(out->data, out->dtype, o, a);
      }
    }
    return;
  }
  void *accp = J->acc + (size_t)tid * (size_t)J->cb * 8;
  for (int64_t u = b; u < e; u++) {
    int64_t kit = u / J->ncb, c0 = (u % J->ncb) * J->cb;
    int64_t len = P->len - c0 < J->cb ? P->len - c0 : J->cb;
    int64_t o = kit * P->len + c0;
    odo_seek(&ko, kit);
    if (J->dcar) {
      double *acc = accp, id = ident_d(rk);
      for (int64_t i = 0; i < len; i++) acc[i] = id;
      for (int64_t rit = 0; rit < P->riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, len, pl)
        row_d(rk, ct, acc + s, chunk_at(in, ct, ko.off + ro.off + c0 + s, m, buf), m);
      if (J->mean)
        for (int64_t i = 0; i < len; i++) acc[i] /= nred;
      if (out->dtype == PX_F32) {
        float *q = (float *)out->data + o;
        for (int64_t i = 0; i < len; i++) q[i] = (float)acc[i];
      } else {
        for (int64_t i = 0; i < len; i++) px_store_d(out->data, out->dtype, o + i, acc[i]);
      }
    } else {
      int64_t *acc = accp, id = ident_i(rk);
      for (int64_t i = 0; i < len; i++) acc[i] = id;
      for (int64_t rit = 0; rit < P->riters; rit++, odo_next(&ro))
        FOR_PIECES(s, m, len, pl)
        row_i(rk, ct, acc + s, chunk_at(in, ct, ko.off + ro.off + c0 + s, m, buf), m);
      if (out->dtype == PX_I64)
        memcpy((int64_t *)out->data + o, acc, (size_t)len * sizeof(int64_t));
      else
        for (int64_t i = 0; i < len; i++) px_store_i(out->data, out->dtype, o + i, acc[i]);
    }
  }
}

/* A product into a float16 / bfloat16 output, as ExecuTorch computes it:
 * each element taken as the output's type, multiplied in one by one in
 * order, every product rounded to the 16-bit type. */
static void prod16_run(const px_tensor *in, px_tensor *out, const bool *mask) {
  const int dt = out->dtype;
  rplan P;
  plan_build(&P, in, mask);
  for (int64_t o = 0; o < out->numel; o++) {
    seqwalk w;
    int64_t off;
    float acc = 1.0f;
    seq_begin(&w, &P, o);
    while (seq_next(&w, &off)) acc = px_r16(dt, acc * px_r16(dt, (float)px_load_d(in->data, in->dtype, off)));
    px_st16(out->data, dt, o, acc);
  }
}

static int reduce_run(px_ctx *ctx, const px_tensor *in, px_tensor *out, const bool *mask, int rk,
                      bool mean) {
  if (out->numel == 0) return 0;
  if (rk == RK_PROD && px_is16(out->dtype) && in->numel > 0) {
    prod16_run(in, out, mask);
    return 0;
  }
  int ct = pick_ct(rk, in->dtype, out->dtype);
  bool dcar = (ct == CT_F32 || ct == CT_F64) && rk != RK_ANY && rk != RK_ALL;
  if (in->numel == 0) { /* every output reduces zero elements */
    if (rk == RK_MAX || rk == RK_MIN)
      return px_fail(ctx, "cannot reduce over a zero-size dimension (the operation has no identity)");
    for (int64_t k = 0; k < out->numel; k++) {
      if (mean)
        store_d(out, k, NAN);
      else if (dcar)
        store_d(out, k, ident_d(rk));
      else
        px_store_i(out->data, out->dtype, k, ident_i(rk));
    }
    return 0;
  }
  rplan P;
  plan_build(&P, in, mask);
  /* Outputs are shared out over the thread pool; each output (each column
   * of a ROW block) is accumulated whole by one thread in the usual order,
   * so the split changes no bit. */
  reduce_job J = {.in = in, .out = out, .P = &P, .rk = rk, .ct = ct, .mean = mean, .dcar = dcar};
  int nt = px_parallel_threads();
  void *buf0;
  if (chunk_buf(ctx, in, ct, P.len, &buf0, &J.pl)) return ERR;
  if (buf0 && !(J.buf = px_scratch(ctx, (size_t)J.pl * ct_size(ct) * (size_t)nt))) return ERR;
  int64_t items;
  if (P.inner) {
    items = P.kiters;
    if (rk == RK_SUM && ct == CT_F64 && (in->dtype == PX_F16 || in->dtype == PX_BF16)) sum16_pick(&J.sum16, &J.sum16x4);
  } else {
    /* ROW form: few blocks are cut into column pieces */
    J.cb = P.kiters >= 16 || P.len <= 1024 ? P.len : 1024;
    J.ncb = (P.len + J.cb - 1) / J.cb;
    items = P.kiters * J.ncb;
    if (!(J.acc = px_scratch(ctx, (size_t)J.cb * 8 * (size_t)nt))) return ERR;
  }
  px_parallel_for(items, 1, in->numel * (int64_t)px_elsize(in->dtype), reduce_items, &J);
  return 0;
}

static int check_out_dtype(px_ctx *ctx, int rk, bool mean, const px_tensor *in, const px_tensor *out) {
  if (mean && !px_is_floating(out->dtype))
    return px_fail(ctx, "mean needs a floating output dtype, out has %s (pass dtype=)",
                   px_dtype_name(out->dtype));
  if ((rk == RK_MAX || rk == RK_MIN) && out->dtype != in->dtype)
    return px_fail(ctx, "out has dtype %s, self has %s (they must match)", px_dtype_name(out->dtype),
                   px_dtype_name(in->dtype));
  if ((rk == RK_ANY || rk == RK_ALL) && out->dtype != PX_BOOL && out->dtype != PX_U8)
    return px_fail(ctx, "out has dtype %s, expected bool or uint8", px_dtype_name(out->dtype));
  return 0;
}

/* Shared body: checks, output shape, compute. dims = NULL: every dim. */
static int reduce_op(px_ctx *ctx, px_tensor *in, px_value *dims, bool empty_all, bool keepdim,
                     px_tensor *out, int rk, bool mean) {
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, out)) || (st = check_out_dtype(ctx, rk, mean, in, out))) return st;
  if (dims) {
    if ((st = dims_mask(ctx, dims, in->dim, empty_all, mask))) return st;
  } else {
    for (int k = 0; k < PX_MAX_DIM; k++) mask[k] = k < in->dim;
  }
  if ((st = resize_reduced(ctx, in, mask, keepdim, out, "out"))) return st;
  return reduce_run(ctx, in, out, mask, rk, mean);
}

static int reduce_op1(px_ctx *ctx, px_tensor *in, int64_t d, bool keepdim, px_tensor *out, int rk) {
  bool mask[PX_MAX_DIM];
  int st;
  if ((st = check_io(ctx, in, out)) || (st = check_out_dtype(ctx, rk, false, in, out))) return st;
  if ((st = dim_mask1(ctx, d, in->dim, mask))) return st;
  if ((st = resize_reduced(ctx, in, mask, keepdim, out, "out"))) return st;
  return reduce_run(ctx, in, out, mask, rk, false);
}

/* sum.IntList_out(self, dim?, keepdim, dtype?, out) */
static int k_sum(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[3], a[4]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[4]->u.t, RK_SUM, false);
}

/* sum.out(self, dtype?, out) */
static int k_sum_all(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[1], a[2]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[2]->u.t, RK_SUM, false);
}

/* mean.out(self, dim?, keepdim, dtype?, out) */
static int k_mean(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[3], a[4]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[4]->u.t, RK_SUM, true);
}

/* mean.dtype_out(self, dtype?, out) */
static int k_mean_all(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[1], a[2]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[2]->u.t, RK_SUM, true);
}

/* prod.out(self, dtype?, out) */
static int k_prod_all(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[1], a[2]->u.t);
  if (st) return st;
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[2]->u.t, RK_PROD, false);
}

/* prod.int_out(self, dim, keepdim, dtype?, out) */
static int k_prod(px_ctx *ctx, px_value *const *a) {
  int st = check_dtype_arg(ctx, a[3], a[4]->u.t);
  if (st) return st;
  return reduce_op1(ctx, a[0]->u.t, a[1]->u.i, a[2]->u.b, a[4]->u.t, RK_PROD);
}

/* amax.out / amin.out(self, dim[], keepdim, out) */
static int k_amax(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[3]->u.t, RK_MAX, false);
}
static int k_amin(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], true, a[2]->u.b, a[3]->u.t, RK_MIN, false);
}

/* max.unary_out / min.unary_out(self, out) */
static int k_max_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_MAX, false);
}
static int k_min_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_MIN, false);
}

/* any.out / all.out(self, dim, keepdim, out) */
static int k_any(px_ctx *ctx, px_value *const *a) {
  return reduce_op1(ctx, a[0]->u.t, a[1]->u.i, a[2]->u.b, a[3]->u.t, RK_ANY);
}
static int k_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op1(ctx, a[0]->u.t, a[1]->u.i, a[2]->u.b, a[3]->u.t, RK_ALL);
}
/* any.all_out / all.all_out(self, out) */
static int k_any_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_ANY, false);
}
static int k_all_all(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, NULL, true, false, a[1]->u.t, RK_ALL, false);
}
/* any.dims_out / all.dims_out(self, dim[]?, keepdim, out): an empty list
 * reduces nothing (torch). */
static int k_any_dims(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], false, a[2]->u.b, a[3]->u.t, RK_ANY, false);
}
static int k_all_dims(px_ctx *ctx, px_value *const *a) {
  return reduce_op(ctx, a[0]->u.t, a[1], false, a[2]->u.b, a[3]->u.t, RK_ALL, false);
}

const px_kernel_def px_kernels_reduction[] = {
    {"aten::sum.IntList_out", "TlBiT|T", k_sum},
    {"aten::sum.out", "TiT|T", k_sum_all},
    {"aten::mean.out", "TlBiT|T", k_mean},
    {"aten::mean.dtype_out", "TiT|T", k_mean_all},
    {"aten::prod.out", "TiT|T", k_prod_all},
    {"aten::prod.int_out", "TIBiT|T", k_prod},
    {"aten::amax.out", "TlBT|T", k_amax},
    {"aten::amin.out", "TlBT|T", k_amin},
    {"aten::max.unary_out", "TT|T", k_max_all},
    {"aten::min.unary_out", "TT|T", k_min_all},
    {"aten::any.out", "TIBT|T", k_any},
    {"aten::any.all_out", "TT|T", k_any_all},
    {"aten::any.dims_out", "TlBT|T", k_any_dims},
    {"aten::all.out", "TIBT|T", k_all},
    {"aten::all.all_out", "TT|T", k_all_all},
    {"aten::all.dims_out", "TlBT|T", k_all_dims},
    {NULL, NULL, NULL},
};
