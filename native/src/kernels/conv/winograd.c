/*
 * winograd.c - 3x3 stride-1 float32 convolution by F(2x2, 3x3)
 * (winograd.h says what and when).
 *
 * The transforms run on CB channels at a time (the inner loops over
 * channels vectorise); the products are the GEMM engine's, B prepacked.
 * Tiles go in blocks of TB so that a block's transformed input and products
 * stay in cache between the three passes.
 */
#include "kernels/conv/winograd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "kernels/gemm/gemm.h"

#define CB 16 /* channels per transform step */
#define TM 2            /* output tile: TM x TM */
#define TA 4            /* input tile: TA x TA (TM + 2) */
#define NP (TA * TA)    /* products per tile */

/* PYEXEC_CONV_WINOGRAD, read on the first call (-1: not yet); programs may
 * be loaded on several threads at once, hence the atomics */
static int wino_env = -1;

bool px_wino_enabled(void) {
  int v = __atomic_load_n(&wino_env, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *e = getenv("PYEXEC_CONV_WINOGRAD");
    v = !(e && !strcmp(e, "0"));
    __atomic_store_n(&wino_env, v, __ATOMIC_RELAXED);
  }
  return v == 1;
}

bool px_wino_applicable(int64_t G, int64_t Cin, int64_t Cout, int64_t KH, int64_t KW, int64_t sh,
                        int64_t sw, int64_t dh, int64_t dw) {
  return px_wino_enabled() && G == 1 && KH == 3 && KW == 3 && sh == 1 && sw == 1 && dh == 1 &&
         dw == 1 && Cin >= 16 && Cout >= 16;
}

/* Floats of one position's packed matrix, whole cache lines. */
static size_t pos_floats(int64_t Cin, int64_t Cout) {
  return (px_gemm_f32_prepack_size(Cout, Cin) + 63) / 64 * 16;
}

size_t px_wino_packed_size(int64_t Cin, int64_t Cout) {
  return NP * pos_floats(Cin, Cout) * sizeof(float);
}

/* One output channel's filters for Cin adjacent input channels (tap k of
 * channel ic at g[k * st + ic]) transformed as px_wino_pack's loop does it,
 * element by element in double, each position's values written to
 * u[p * ps + ic]. Written over the channels so that the compiler vectorises
 * it without reordering any element's arithmetic. */
#define WINO_ROW_BODY                                                                      \
  for (int64_t ic = 0; ic < Cin; ic++) {                                                   \
    double t[4][3];                                                                        \
    for (int j = 0; j < 3; j++) {                                                          \
      double g0 = g[(0 * 3 + j) * st + ic], g1 = g[(1 * 3 + j) * st + ic], g2 = g[(2 * 3 + j) * st + ic]; \
      t[0][j] = g0;                                                                        \
      t[1][j] = (g0 + g1 + g2) / 2;                                                        \
      t[2][j] = (g0 - g1 + g2) / 2;                                                        \
      t[3][j] = g2;                                                                        \
    }                                                                                      \
    for (int i = 0; i < 4; i++) {                                                          \
      double g0 = t[i][0], g1 = t[i][1], g2 = t[i][2];                                     \
      u[(i * 4 + 0) * ps + ic] = (float)g0;                                                \
      u[(i * 4 + 1) * ps + ic] = (float)((g0 + g1 + g2) / 2);                              \
      u[(i * 4 + 2) * ps + ic] = (float)((g0 - g1 + g2) / 2);                              \
      u[(i * 4 + 3) * ps + ic] = (float)g2;                                                \
    }                                                                                      \
  }

#if defined(__GNUC__) && defined(__x86_64__)
typedef double wv4d __attribute__((vector_size(32)));
typedef float wv4f __attribute__((vector_size(16)));
typedef float wv4f_u __attribute__((vector_size(16), aligned(4), may_alias));

/* WINO_ROW_BODY four channels at a time in double vectors: each lane's
 * operations are the scalar loop's (halving is exact, as a product by 0.5
 * or a quotient by 2), so the bits are the same. */
__attribute__((target("avx2"))) static void wino_filter_row_avx2(int64_t Cin, const float *restrict g, int64_t st,
                                                                 float *restrict u, int64_t ps) {
  int64_t ic0 = 0;
  for (; ic0 + 4 <= Cin; ic0 += 4) {
    wv4d t[4][3];
    for (int j = 0; j < 3; j++) {
      wv4d g0 = __builtin_convertvector(*(const wv4f_u *)(g + (0 * 3 + j) * st + ic0), wv4d);
      wv4d g1 = __builtin_convertvector(*(const wv4f_u *)(g + (1 * 3 + j) * st + ic0), wv4d);
      wv4d g2 = __builtin_convertvector(*(const wv4f_u *)(g + (2 * 3 + j) * st + ic0), wv4d);
      t[0][j] = g0;
      t[1][j] = (g0 + g1 + g2) * 0.5;
      t[2][j] = (g0 - g1 + g2) * 0.5;
      t[3][j] = g2;
    }
    for (int i = 0; i < 4; i++) {
      wv4d g0 = t[i][0], g1 = t[i][1], g2 = t[i][2];
      *(wv4f_u *)(u + (i * 4 + 0) * ps + ic0) = __builtin_convertvector(g0, wv4f);
      *(wv4f_u *)(u + (i * 4 + 1) * ps + ic0) = __builtin_convertvector((g0 + g1 + g2) * 0.5, wv4f);
      *(wv4f_u *)(u + (i * 4 + 2) * ps + ic0) = __builtin_convertvector((g0 - g1 + g2) * 0.5, wv4f);
      *(wv4f_u *)(u + (i * 4 + 3) * ps + ic0) = __builtin_convertvector(g2, wv4f);
    }
  }
  g += ic0;
  u += ic0;
  Cin -= ic0;
  WINO_ROW_BODY
}
#endif

static void wino_filter_row(int64_t Cin, const float *restrict g, int64_t st, float *restrict u, int64_t ps) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    wino_filter_row_avx2(Cin, g, st, u, ps);
    return;
  }
#endif
  WINO_ROW_BODY
}

bool px_wino_pack(int64_t Cin, int64_t Cout, const float *w, int64_t so, int64_t si, int64_t st,
                  float *dst) {
  float *u = malloc(sizeof(float) * NP * (size_t)(Cin * Cout > 0 ? Cin * Cout : 1));
  if (!u) return false;
  if (si == 1) { /* input channels adjacent (NHWC filters): the same arithmetic, vectorised over them */
    for (int64_t oc = 0; oc < Cout; oc++) wino_filter_row(Cin, w + oc * so, st, u + (size_t)oc * Cin, Cout * Cin);
  } else
  for (int64_t oc = 0; oc < Cout; oc++)
    for (int64_t ic = 0; ic < Cin; ic++) {
      const float *g = w + oc * so + ic * si;
      double t[4][3], r[4][4];
      for (int j = 0; j < 3; j++) { /* G g, column by column */
        double g0 = g[(0 * 3 + j) * st], g1 = g[(1 * 3 + j) * st], g2 = g[(2 * 3 + j) * st];
        t[0][j] = g0;
        t[1][j] = (g0 + g1 + g2) / 2;
        t[2][j] = (g0 - g1 + g2) / 2;
        t[3][j] = g2;
      }
      for (int i = 0; i < 4; i++) { /* (G g) G^T, row by row */
        double g0 = t[i][0], g1 = t[i][1], g2 = t[i][2];
        r[i][0] = g0;
        r[i][1] = (g0 + g1 + g2) / 2;
        r[i][2] = (g0 - g1 + g2) / 2;
        r[i][3] = g2;
      }
      /* u[pos][oc][ic]: position pos's Cin x Cout matrix, column-major, so
       * that the loop over ic writes each position's values one after the
       * other (row-major, each pair's 16 values landed Cout floats apart
       * in 16 planes: most of a ResNet's load time) */
      for (int p = 0; p < NP; p++) u[((size_t)p * Cout + oc) * Cin + ic] = (float)r[p / TA][p % TA];
    }
  for (int p = 0; p < NP; p++)
    px_gemm_f32_prepack_b(Cout, Cin, u + (size_t)p * Cin * Cout, 1, Cin,
                          dst + (size_t)p * pos_floats(Cin, Cout));
  free(u);
  return true;
}

/* ---- run ------------------------------------------------------------------ */

typedef struct wino_run {
  const px_wino_geom *g;
  const float *x, *bias;
  float lo, hi;
  bool clamp;
  float *y;
  float *V, *M; /* [NP][TB][Cin], [NP][TB][Cout] */
  int64_t t0, TB, TH, TW; /* the block's first tile, tiles per block, tiles per column / row */
} wino_run;

/* B^T applied along one axis: o[k] = sum_i BT[k][i] * d[i], on n channels,
 * inputs and outputs s floats apart. */
static inline void bt4(const float *d, int64_t s, float *o, int64_t so, int n) {
  for (int c = 0; c < n; c++) {
    float d0 = d[c], d1 = d[s + c], d2 = d[2 * s + c], d3 = d[3 * s + c];
    o[c] = d0 - d2;
    o[so + c] = d1 + d2;
    o[2 * so + c] = d2 - d1;
    o[3 * so + c] = d1 - d3;
  }
}

/* A^T applied along one axis: o[k] = sum_i AT[k][i] * m[i] (k < 2). */
static inline void at4(const float *m, int64_t s, float *o, int64_t so, int n) {
  for (int c = 0; c < n; c++) {
    float m0 = m[c], m1 = m[s + c], m2 = m[2 * s + c], m3 = m[3 * s + c];
    o[c] = m0 + m1 + m2;
    o[so + c] = m1 - m2 - m3;
  }
}

/* Input transform of the block's tiles [begin, end). */
static void wino_in(void *arg, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const wino_run *r = arg;
  const px_wino_geom *g = r->g;
  const int64_t Cin = g->Cin, TBC = r->TB * Cin;
  float d[NP * CB], t[NP * CB];
  for (int64_t b = begin; b < end; b++) {
    const int64_t tile = r->t0 + b, n = tile / (r->TH * r->TW), rem = tile % (r->TH * r->TW);
    const int64_t ih0 = rem / r->TW * TM - g->pt, iw0 = rem % r->TW * TM - g->pl;
    const float *xn = r->x + n * g->H * g->W * Cin;
    for (int64_t c0 = 0; c0 < Cin; c0 += CB) {
      const int nc = (int)(Cin - c0 < CB ? Cin - c0 : CB);
      for (int i = 0; i < TA; i++)
        for (int j = 0; j < TA; j++) {
          const int64_t ih = ih0 + i, iw = iw0 + j;
          float *dp = d + (i * TA + j) * CB;
          if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
            memset(dp, 0, sizeof(float) * CB);
          else
            memcpy(dp, xn + (ih * g->W + iw) * Cin + c0, sizeof(float) * (size_t)nc);
        }
      for (int j = 0; j < TA; j++) bt4(d + j * CB, TA * CB, t + j * CB, TA * CB, nc); /* rows */
      float *v = r->V + b * Cin + c0;
      for (int k = 0; k < TA; k++) bt4(t + k * TA * CB, CB, v + k * TA * TBC, TBC, nc); /* columns */
    }
  }
}

/* Output transform of the block's tiles [begin, end), bias and clamp. */
static void wino_out(void *arg, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const wino_run *r = arg;
  const px_wino_geom *g = r->g;
  const int64_t Cout = g->Cout, TBC = r->TB * Cout;
  float m[NP * CB], t[TM * TA * CB], o[TM * TM * CB];
  for (int64_t b = begin; b < end; b++) {
    const int64_t tile = r->t0 + b, n = tile / (r->TH * r->TW), rem = tile % (r->TH * r->TW);
    const int64_t oh0 = rem / r->TW * TM, ow0 = rem % r->TW * TM;
    float *yn = r->y + n * g->OH * g->OW * Cout;
    for (int64_t c0 = 0; c0 < Cout; c0 += CB) {
      const int nc = (int)(Cout - c0 < CB ? Cout - c0 : CB);
      for (int p = 0; p < NP; p++)
        memcpy(m + p * CB, r->M + p * TBC + b * Cout + c0, sizeof(float) * (size_t)nc);
      for (int j = 0; j < TA; j++) at4(m + j * CB, TA * CB, t + j * CB, TA * CB, nc); /* t[TM][TA] */
      for (int k = 0; k < TM; k++) at4(t + k * TA * CB, CB, o + k * TM * CB, CB, nc); /* o[TM][TM] */
      for (int i = 0; i < TM && oh0 + i < g->OH; i++)
        for (int j = 0; j < TM && ow0 + j < g->OW; j++) {
          const float *op = o + (i * TM + j) * CB;
          float *yp = yn + ((oh0 + i) * g->OW + ow0 + j) * Cout + c0;
          for (int c = 0; c < nc; c++) {
            float v = op[c] + (r->bias ? r->bias[c0 + c] : 0.0f);
            if (r->clamp) {
              v = v < r->lo ? r->lo : v;
              v = v > r->hi ? r->hi : v;
            }
            yp[c] = v;
          }
        }
    }
  }
}

/* Several threads, filters that fit a core's L2: each thread takes blocks
 * of tiles through all three passes on its own buffers (tile_job), so that
 * a pass reads what the same core wrote, with one wait at the end, where
 * the passes split over the threads each way took 18 waits per block and
 * each core read the other's transforms. The products' rows do not depend
 * on which tiles share a call, so the bits are the same. */
typedef struct tile_job {
  wino_run r;        /* V and M: thread 0's; t0 and TB set per block */
  int64_t T, TBt;    /* tiles, tiles per block */
  const float *packed;
  size_t pf;         /* floats per position's packed filter */
  char *bufs;        /* per thread: V then M (NP x TBt x (Cin + Cout) floats) */
  size_t buf_b;
  char *work;        /* per thread: a product's workspace */
  size_t work_b;
  px_ctx *ctx;       /* not failed on from a chunk: the products have their workspace */
} tile_job;

static void wino_tiles(void *arg, int64_t b0, int64_t b1, int tid) {
  const tile_job *J = arg;
  const px_wino_geom *g = J->r.g;
  wino_run r = J->r;
  r.V = (float *)(J->bufs + (size_t)tid * J->buf_b);
  r.M = r.V + NP * J->TBt * g->Cin;
  r.TB = J->TBt;
  /* Inside the pool a product runs on this thread alone; if this job ran
   * inline on the calling thread (tid 0), a product may spread over the
   * pool from slot 0: T slots cover both. */
  void *work = J->work + (size_t)tid * J->work_b;
  for (int64_t b = b0; b < b1; b++) {
    r.t0 = b * J->TBt;
    const int64_t nb = J->T - r.t0 < J->TBt ? J->T - r.t0 : J->TBt;
    wino_in(&r, 0, nb, tid);
    for (int p = 0; p < NP; p++)
      px_gemm_f32_prepacked(J->ctx, work, nb, g->Cout, g->Cin, r.V + p * r.TB * g->Cin, g->Cin, 1, NULL, NULL,
                            J->packed + p * J->pf, 0.0f, r.M + p * r.TB * g->Cout, g->Cout);
    wino_out(&r, 0, nb, tid);
  }
}

/* The products of one block of tiles, positions [p0, p1). Over the pool
 * (several threads dividing the positions evenly, filters past a core's
 * L2): each position's product whole on one thread (a product called from
 * a chunk runs on that thread alone, workspace slot tid), so that a block
 * waits three times rather than once per position and each core reads only
 * its own positions' filters. Otherwise called once for all positions on
 * the calling thread, each product split over the pool. A product given
 * its workspace cannot fail. */
typedef struct pos_job {
  const wino_run *r;
  const float *packed;
  size_t pf;
  char *work;
  size_t work_b;
  int64_t nb;
  px_ctx *ctx;
} pos_job;

static void wino_pos(void *arg, int64_t p0, int64_t p1, int tid) {
  const pos_job *J = arg;
  const px_wino_geom *g = J->r->g;
  for (int64_t p = p0; p < p1; p++)
    px_gemm_f32_prepacked(J->ctx, J->work + (size_t)tid * J->work_b, J->nb, g->Cout, g->Cin,
                          J->r->V + p * J->r->TB * g->Cin, g->Cin, 1, NULL, NULL, J->packed + p * J->pf, 0.0f,
                          J->r->M + p * J->r->TB * g->Cout, g->Cout);
}

int px_wino_conv_nhwc(px_ctx *ctx, const px_wino_geom *g, const float *x, const float *packed,
                      const float *bias, float lo, float hi, float *y) {
  const int64_t TH = (g->OH + TM - 1) / TM, TW = (g->OW + TM - 1) / TM, T = g->N * TH * TW;
  if (T == 0 || g->Cout == 0) return 0;
  const int threads = px_parallel_threads();
  const size_t pf = pos_floats(g->Cin, g->Cout);
  if (threads > 1 && NP * pf * sizeof(float) <= ((size_t)1 << 20)) {
    tile_job J = {{g, x, bias, lo, hi, !(lo == -INFINITY && hi == INFINITY), y, NULL, NULL, 0, 0, TH, TW},
                  T, 0, packed, pf, NULL, 0, NULL, 0, ctx};
    /* blocks of at most 128 tiles, at least two per thread where there are enough tiles */
    J.TBt = (T + 2 * threads - 1) / (2 * threads);
    J.TBt = J.TBt < 8 ? 8 : J.TBt > 128 ? 128 : J.TBt;
    J.buf_b = (sizeof(float) * NP * (size_t)(J.TBt * (g->Cin + g->Cout)) + 63) / 64 * 64;
    J.work_b = (px_gemm_f32_thread_work_size(J.TBt, g->Cout, g->Cin) + 63) / 64 * 64;
    J.bufs = px_scratch(ctx, J.buf_b * (size_t)threads);
    J.work = px_scratch(ctx, J.work_b * (size_t)threads);
    if (!J.bufs || !J.work) return PYEXEC_ERR_EXECUTION;
    const int64_t blocks = (T + J.TBt - 1) / J.TBt;
    px_parallel_for(blocks, 1, T * NP * g->Cin * g->Cout, wino_tiles, &J);
    return 0;
  }
  /* tiles per block: the block's V and M (NP x (Cin + Cout) floats per
   * tile) within about 2 MiB, a multiple of 8 rows */
  int64_t TB = (2 << 20) / (NP * 4 * (g->Cin + g->Cout)) / 8 * 8;
  TB = TB < 8 ? 8 : TB > 512 ? 512 : TB;
  if (TB > T) TB = T;
  float *V = px_scratch(ctx, sizeof(float) * NP * (size_t)(TB * g->Cin));
  float *M = px_scratch(ctx, sizeof(float) * NP * (size_t)(TB * g->Cout));
  const bool by_pos = threads > 1 && NP % threads == 0;
  const size_t work_b = (px_gemm_f32_thread_work_size(TB, g->Cout, g->Cin) + 63) / 64 * 64;
  void *work = px_scratch(ctx, by_pos ? work_b * (size_t)threads : px_gemm_f32_work_size(TB, g->Cout, g->Cin));
  if (!V || !M || !work) return PYEXEC_ERR_EXECUTION;
  wino_run r = {g, x, bias, lo, hi, !(lo == -INFINITY && hi == INFINITY), y, V, M, 0, TB, TH, TW};
  for (int64_t t0 = 0; t0 < T; t0 += TB) {
    const int64_t nb = T - t0 < TB ? T - t0 : TB;
    r.t0 = t0;
    px_parallel_for(nb, 1, nb * NP * g->Cin * 4, wino_in, &r);
    pos_job P = {&r, packed, pf, work, work_b, nb, ctx};
    if (by_pos)
      px_parallel_for(NP, 1, nb * NP * g->Cin * g->Cout, wino_pos, &P);
    else /* one position after another, each product over the pool */
      wino_pos(&P, 0, NP, 0);
    px_parallel_for(nb, 1, nb * NP * g->Cout * 4, wino_out, &r);
  }
  return 0;
}
