/*
 * test_neon.c - the CPU feature module and the SIMD kernels it selects,
 * against plain references computed here in double precision.
 *
 * On every machine: px_cpu() agrees with the kernel's own report
 * (/proc/cpuinfo, when it describes this architecture), and the float32 GEMM
 * engine - whichever micro-kernel px_cpu() led it to - matches a double
 * reference over shapes that hit every edge tile, depth blocking, strided and
 * transposed operands, alpha / beta, and the prepacked product with its bias
 * and clamp epilogue. On AArch64 the NEON pieces are also called directly:
 * the 6 x 16 micro-kernel on every partial tile, the transposed-B packing,
 * the tile epilogue (bit for bit, NaN and -0 included) and the vectorised
 * exp / tanh / sigmoid used by softmax and the activations. Under qemu-aarch64
 * (make CROSS=aarch64-linux-gnu- test) this is what checks the NEON code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_neon.h"
#include "kernels/kernel.h"
#include "kernels/elementwise/math_neon.h"
#include "kernels/registry.h"
#include "check.h"

static char msg[1024];
static px_ctx ctx = {.op = "test_neon", .msg = msg, .msg_cap = sizeof msg};

/* ---- deterministic inputs ------------------------------------------------ */

static uint64_t lcg_state = 0x9e3779b97f4a7c15ULL;
static float frand(void) { /* uniform in [-1, 1) */
  lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(lcg_state >> 40) / (double)(1ULL << 23) - 1.0);
}
static void fill(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = frand();
}

/* ---- px_cpu ----------------------------------------------------------------- */

/* The line of /proc/cpuinfo that lists the features ("flags" on x86,
 * "Features" on AArch64), or 0 when it is not there (qemu-user shows the
 * host's file, which has the other architecture's line). */
static int cpuinfo_line(const char *key, char *line, size_t cap) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  int found = 0;
  size_t klen = strlen(key);
  while (fgets(line, (int)cap, f))
    if (strncmp(line, key, klen) == 0 && (line[klen] == ' ' || line[klen] == '\t' || line[klen] == ':')) {
      found = 1;
      break;
    }
  fclose(f);
  return found;
}

static int has_word(const char *line, const char *word) {
  const char *p = strchr(line, ':');
  size_t n = strlen(word);
  for (p = p ? p + 1 : line; (p = strstr(p, word)) != NULL; p += n)
    if ((p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return 1;
  return 0;
}

static void test_cpu(void) {
  const px_cpu_features *f = px_cpu();
  CHECK(f == px_cpu(), "px_cpu() must return the same record every time");
  static char line[1 << 16];
#if defined(__x86_64__)
  CHECK(!f->asimd && !f->dotprod && !f->sve, "AArch64 flags set on x86-64");
  if (cpuinfo_line("flags", line, sizeof line)) {
    /* the kernel lists what the CPU and the OS both support, as GCC's check does */
    CHECK(f->avx2 == has_word(line, "avx2"), "avx2 %d disagrees with /proc/cpuinfo", f->avx2);
    CHECK(f->fma == has_word(line, "fma"), "fma %d disagrees with /proc/cpuinfo", f->fma);
    CHECK(f->avx512f == has_word(line, "avx512f"), "avx512f %d disagrees", f->avx512f);
    CHECK(f->avx512bw == has_word(line, "avx512bw"), "avx512bw %d disagrees", f->avx512bw);
    CHECK(f->avx512vl == has_word(line, "avx512vl"), "avx512vl %d disagrees", f->avx512vl);
    CHECK(f->avx512vnni == has_word(line, "avx512_vnni"), "avx512vnni %d disagrees", f->avx512vnni);
    CHECK(f->avxvnni == has_word(line, "avx_vnni"), "avxvnni %d disagrees", f->avxvnni);
  } else {
    printf("test_neon: no x86 flags line in /proc/cpuinfo; feature cross-check skipped\n");
  }
#elif defined(__aarch64__)
  CHECK(f->asimd, "asimd must be set on AArch64");
  CHECK(!f->avx2 && !f->fma && !f->avx512f, "x86 flags set on AArch64");
  if (cpuinfo_line("Features", line, sizeof line)) {
    CHECK(f->dotprod == has_word(line, "asimddp"), "dotprod %d disagrees with /proc/cpuinfo", f->dotprod);
    CHECK(f->sve == has_word(line, "sve"), "sve %d disagrees with /proc/cpuinfo", f->sve);
    CHECK(f->i8mm == has_word(line, "i8mm"), "i8mm %d disagrees with /proc/cpuinfo", f->i8mm);
  } else {
    printf("test_neon: no AArch64 Features line in /proc/cpuinfo (qemu-user shows the host's);"
           " feature cross-check skipped\n");
  }
  printf("test_neon: aarch64 asimd=%d dotprod=%d fp16=%d i8mm=%d sve=%d\n", f->asimd, f->dotprod,
         f->fp16, f->i8mm, f->sve);
#endif
}

/* ---- GEMM engine against a double reference -------------------------------- */

/* C = alpha * A @ B + beta * C0 in double, and the bound on float32's error:
 * a few units of rounding per term of the depth sum, scaled by the sum of
 * magnitudes (what any summation order can lose). */
static void ref_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t rsa,
                     int64_t csa, const float *B, int64_t rsb, int64_t csb, float beta,
                     const float *C0, int64_t ldc, double *R, double *E) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0.0, m = 0.0;
      for (int64_t k = 0; k < K; k++) {
        double t = (double)A[i * rsa + k * csa] * (double)B[k * rsb + j * csb];
        s += t;
        m += fabs(t);
      }
      double c0 = beta == 0.0f ? 0.0 : (double)beta * (double)C0[i * ldc + j];
      R[i * N + j] = (double)alpha * s + c0;
      E[i * N + j] = (fabs((double)alpha) * m + fabs(c0)) * (double)(K + 4) * 1.2e-7 + 1e-30;
    }
}

static int check_close(const char *what, int64_t M, int64_t N, const float *C, int64_t ldc,
                       const double *R, const double *E) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double got = C[i * ldc + j], want = R[i * N + j];
      if (!(fabs(got - want) <= E[i * N + j])) {
        CHECK(0, "%s: C[%lld, %lld] = %.9g, reference %.9g (bound %.3g)", what, (long long)i,
              (long long)j, got, want, E[i * N + j]);
        return 0;
      }
    }
  checks++;
  return 1;
}

/* One product through px_gemm_f32 with the given layouts. */
static void gemm_case(int64_t M, int64_t N, int64_t K, float alpha, float beta, bool a_trans,
                      bool b_trans) {
  const int64_t ldc = N + 3; /* a row stride wider than the row */
  float *A = malloc(sizeof(float) * (size_t)(M * K + 1));
  float *B = malloc(sizeof(float) * (size_t)(K * N + 1));
  float *C = malloc(sizeof(float) * (size_t)(M * ldc + 1));
  float *C0 = malloc(sizeof(float) * (size_t)(M * ldc + 1));
  double *R = malloc(sizeof(double) * (size_t)(M * N + 1));
  double *E = malloc(sizeof(double) * (size_t)(M * N + 1));
  fill(A, (size_t)(M * K));
  fill(B, (size_t)(K * N));
  fill(C0, (size_t)(M * ldc));
  if (beta == 0.0f) /* beta == 0 must not read C: NaN there must not propagate */
    for (int64_t q = 0; q < M * ldc; q++) C0[q] = NAN;
  memcpy(C, C0, sizeof(float) * (size_t)(M * ldc));
  int64_t rsa = a_trans ? 1 : K, csa = a_trans ? M : 1;
  int64_t rsb = b_trans ? 1 : N, csb = b_trans ? K : 1;
  ref_gemm(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C0, ldc, R, E);
  int rc = px_gemm_f32(&ctx, NULL, M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, ldc);
  char what[160];
  snprintf(what, sizeof what, "gemm M=%lld N=%lld K=%lld alpha=%g beta=%g%s%s", (long long)M,
           (long long)N, (long long)K, alpha, beta, a_trans ? " A^T" : "", b_trans ? " B^T" : "");
  CHECK(rc == 0, "%s: returned %d (%s)", what, rc, msg);
  check_close(what, M, N, C, ldc, R, E);
  free(A);
  free(B);
  free(C);
  free(C0);
  free(R);
  free(E);
}

static void test_gemm_engine(void) {
  /* sizes around the tile edges (6 x 16 on NEON and AVX2, 4 x 8 portable),
   * below and above the unpacked small-M paths, and K past one depth block */
  static const int64_t Ms[] = {1, 5, 6, 7, 13, 33, 121};
  static const int64_t Ns[] = {1, 3, 16, 17, 40};
  static const int64_t Ks[] = {1, 2, 7, 64, 300};
  for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
    for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
      for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
        int64_t M = Ms[a], N = Ns[b], K = Ks[c];
        if (M * N * K > 600000) continue;
        gemm_case(M, N, K, 1.0f, 0.0f, false, false);
        gemm_case(M, N, K, 1.0f, 0.0f, false, true);
        if ((a + b + c) % 2 == 0) {
          gemm_case(M, N, K, -0.5f, 1.0f, true, false);
          gemm_case(M, N, K, 2.0f, 0.25f, false, true);
        }
      }
  /* wide enough for a second column block of the engine */
  gemm_case(7, 4100, 3, 1.0f, 0.0f, false, false);
  gemm_case(20, 50, 40, 1.5f, -1.0f, true, true);
}

/* The prepacked product with a bias and clamp epilogue. */
static void prepacked_case(int64_t M, int64_t N, int64_t K, float beta, bool bias_on, float lo,
                           float hi) {
  float *A = malloc(sizeof(float) * (size_t)(M * K + 1));
  float *B = malloc(sizeof(float) * (size_t)(K * N + 1));
  float *bias = malloc(sizeof(float) * (size_t)(N + 1));
  float *C = malloc(sizeof(float) * (size_t)(M * N + 1));
  float *C0 = malloc(sizeof(float) * (size_t)(M * N + 1));
  double *R = malloc(sizeof(double) * (size_t)(M * N + 1));
  double *E = malloc(sizeof(double) * (size_t)(M * N + 1));
  float *pb = malloc(px_gemm_f32_prepack_size(N, K));
  fill(A, (size_t)(M * K));
  fill(B, (size_t)(K * N));
  fill(bias, (size_t)N);
  fill(C0, (size_t)(M * N));
  memcpy(C, C0, sizeof(float) * (size_t)(M * N));
  /* B transposed ([N, K], as a Linear weight) */
  ref_gemm(M, N, K, 1.0f, A, K, 1, B, 1, K, beta, C0, N, R, E);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double v = R[i * N + j] + (bias_on ? bias[j] : 0.0);
      v = v < lo ? lo : v;
      R[i * N + j] = v > hi ? hi : v;
      E[i * N + j] += 1.2e-7 * fabs(v);
    }
  px_gemm_f32_prepack_b(N, K, B, 1, K, pb);
  px_gemm_epilogue ep = {bias_on ? bias : NULL, lo, hi, false, NULL};
  int rc = px_gemm_f32_prepacked_ep(&ctx, NULL, M, N, K, A, K, 1, NULL, NULL, pb, beta, C, N, &ep);
  char what[160];
  snprintf(what, sizeof what, "prepacked M=%lld N=%lld K=%lld beta=%g bias=%d clamp=[%g, %g]",
           (long long)M, (long long)N, (long long)K, beta, bias_on, lo, hi);
  CHECK(rc == 0, "%s: returned %d (%s)", what, rc, msg);
  check_close(what, M, N, C, N, R, E);
  free(A);
  free(B);
  free(bias);
  free(C);
  free(C0);
  free(R);
  free(E);
  free(pb);
}

static void test_gemm_prepacked(void) {
  prepacked_case(13, 37, 19, 0.0f, true, -0.25f, 0.5f);
  prepacked_case(6, 16, 300, 1.0f, false, 0.0f, INFINITY);
  prepacked_case(50, 33, 70, 0.0f, true, -INFINITY, INFINITY);
  prepacked_case(1, 5, 3, 0.0f, true, -1.0f, 1.0f);
}

/* ---- the NEON pieces called directly ---------------------------------------- */

#if PX_NEON_KERNELS
/* The micro-kernel on every partial tile, with A as gemm.c hands it over: a
 * packed panel (rsa 1, csa MR), in place (row stride, csa 1) and with other
 * strides (a panel padded to 7 per depth). */
static void test_neon_ukr(void) {
  enum { MR = PX_NEON_GEMM_MR, NR = PX_NEON_GEMM_NR, LDC = 21, KMAX = 17, LDA = KMAX + 3 };
  static const int64_t kcs[] = {1, 2, 3, 4, 5, 9, 17};
  static const float alphas[] = {1.0f, -2.0f};
  static const float betas[] = {0.0f, 1.0f, 0.5f};
  static const char *const modes[] = {"packed", "in place", "strided"};
  float pa[KMAX * 7], rows[MR * LDA], b[KMAX * NR], c[MR * LDC], c0[MR * LDC];
  double R[MR * NR], E[MR * NR];
  for (size_t q = 0; q < sizeof kcs / sizeof *kcs; q++) {
    int64_t kc = kcs[q];
    fill(rows, MR * LDA);
    fill(b, (size_t)(kc * NR));
    for (int mode = 0; mode < 3; mode++)
      for (int mr = 1; mr <= MR; mr++) {
        const float *a = rows;
        int64_t rsa = LDA, csa = 1;
        if (mode != 1) { /* the same A as a panel: csa = MR, or 7 with a padding slot */
          csa = mode == 0 ? MR : 7;
          for (int64_t p = 0; p < kc; p++)
            for (int i = 0; i < csa; i++) pa[p * csa + i] = i < mr ? rows[i * LDA + p] : (i < MR ? 0.0f : NAN);
          a = pa, rsa = 1;
        }
        for (int nr = 1; nr <= NR; nr++)
          for (size_t s = 0; s < 2; s++)
            for (size_t t = 0; t < 3; t++) {
              float alpha = alphas[s], beta = betas[t];
              fill(c0, MR * LDC);
              if (beta == 0.0f)
                for (int k = 0; k < MR * LDC; k++) c0[k] = NAN;
              memcpy(c, c0, sizeof c);
              ref_gemm(mr, nr, kc, alpha, rows, LDA, 1, b, NR, 1, beta, c0, LDC, R, E);
              px_ukr_f32_6x16_neon(kc, a, rsa, csa, b, c, LDC, alpha, beta, mr, nr);
              char what[112];
              snprintf(what, sizeof what, "ukr 6x16 (A %s) kc=%lld mr=%d nr=%d alpha=%g beta=%g",
                       modes[mode], (long long)kc, mr, nr, alpha, beta);
              check_close(what, mr, nr, c, LDC, R, E);
              /* nothing outside the mr x nr part is written */
              int outside = 0;
              for (int i = 0; i < MR; i++)
                for (int j = 0; j < LDC; j++)
                  if ((i >= mr || j >= nr) && memcmp(&c[i * LDC + j], &c0[i * LDC + j], sizeof(float)))
                    outside = 1;
              CHECK(!outside, "%s: wrote outside the tile", what);
            }
      }
  }
}

/* The small-M paths: C += alpha * A @ B with B column-major (dots) or
 * row-major (rows), every remainder of the 4 x 4 dot tiles and the 4-row /
 * 8-column steps of the rows kernel. */
static void test_neon_small_m(void) {
  static const int64_t Ms[] = {1, 3, 4, 5, 9};
  static const int64_t Ns[] = {1, 4, 7, 9, 17};
  static const int64_t Ks[] = {1, 3, 4, 8, 13, 37};
  enum { LDC = 19 };
  for (size_t a = 0; a < 5; a++)
    for (size_t b = 0; b < 5; b++)
      for (size_t q = 0; q < 6; q++)
        for (int kind = 0; kind < 3; kind++) { /* dots, rows, dots with strided A */
          const int64_t M = Ms[a], N = Ns[b], K = Ks[q];
          float A[800], B[800], C[9 * LDC], C0[9 * LDC]; /* A: < 9 * 38, B: < 37 * 19 */
          double R[9 * 17], E[9 * 17];
          fill(A, sizeof A / sizeof *A);
          fill(B, sizeof B / sizeof *B);
          fill(C0, sizeof C0 / sizeof *C0);
          memcpy(C, C0, sizeof C);
          const float alpha = kind == 1 ? 0.75f : -1.5f;
          const int64_t rsa = kind == 2 ? 1 : K + 1, csa = kind == 2 ? M : 1;
          if (kind == 1) { /* B row-major K x N, row stride N + 2 */
            ref_gemm(M, N, K, alpha, A, rsa, csa, B, N + 2, 1, 1.0f, C0, LDC, R, E);
            px_gemm_rows_neon(M, N, K, alpha, A, rsa, csa, B, N + 2, C, LDC);
          } else { /* B column-major: column j at B + j * (K + 1) */
            ref_gemm(M, N, K, alpha, A, rsa, csa, B, 1, K + 1, 1.0f, C0, LDC, R, E);
            px_gemm_dots_neon(M, N, K, alpha, A, rsa, csa, B, K + 1, C, LDC);
          }
          char what[96];
          snprintf(what, sizeof what, "%s M=%lld N=%lld K=%lld", kind == 1 ? "rows" : kind ? "dots (strided A)" : "dots",
                   (long long)M, (long long)N, (long long)K);
          check_close(what, M, N, C, LDC, R, E);
          int outside = 0;
          for (int64_t i = 0; i < 9; i++)
            for (int64_t j = 0; j < LDC; j++)
              if ((i >= M || j >= N) && memcmp(&C[i * LDC + j], &C0[i * LDC + j], sizeof(float))) outside = 1;
          CHECK(!outside, "%s: wrote outside the product", what);
        }
}

static void test_neon_pack(void) {
  static const int64_t shapes[][2] = {{1, 16}, {7, 33}, {8, 48}, {13, 15}, {64, 70}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    const int64_t kc = shapes[s][0], nc = shapes[s][1], csb = kc + 2;
    float *B = malloc(sizeof(float) * (size_t)(nc * csb));
    float *pb = malloc(sizeof(float) * (size_t)(kc * (nc + 16)));
    fill(B, (size_t)(nc * csb));
    for (int64_t q = 0; q < kc * (nc + 16); q++) pb[q] = -7.0f;
    int64_t done = px_pack_b_trans16_neon(B, csb, kc, nc, pb);
    CHECK(done == nc / 16 * 16, "pack kc=%lld nc=%lld: packed %lld columns", (long long)kc,
          (long long)nc, (long long)done);
    int bad = 0;
    for (int64_t j = 0; j < done; j++)
      for (int64_t p = 0; p < kc; p++)
        if (pb[(j / 16) * 16 * kc + p * 16 + j % 16] != B[j * csb + p]) bad = 1;
    for (int64_t q = done * kc; q < kc * (nc + 16); q++)
      if (pb[q] != -7.0f) bad = 1;
    CHECK(!bad, "pack kc=%lld nc=%lld: panels differ from B or spill past them", (long long)kc,
          (long long)nc);
    free(B);
    free(pb);
  }
}

static void test_neon_epilogue(void) {
  enum { M = 3, N = 19, LD = 23 };
  float c[M * LD], want[M * LD], bias[N];
  fill(bias, N);
  for (int variant = 0; variant < 6; variant++) {
    bool with_bias = variant & 1, clamp = variant >= 2;
    /* ReLU's [0, inf) and [-0.25, 0]: +-0 results on either bound */
    const float lo = variant >= 4 ? 0.0f : -0.25f, hi = variant >= 4 ? INFINITY : 0.0f;
    fill(c, M * LD);
    c[0] = NAN;
    c[1] = -0.0f;
    c[LD + 4] = INFINITY;
    c[2 * LD + 18] = -INFINITY;
    memcpy(want, c, sizeof c);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        float v = want[i * LD + j];
        if (with_bias) v += bias[j];
        if (clamp) {
          v = v < lo ? lo : v;
          v = v > hi ? hi : v;
        }
        want[i * LD + j] = v;
      }
    px_tile_epilogue_neon(c, LD, M, N, with_bias ? bias : NULL, clamp, lo, hi);
    int bad = 0;
    for (int q = 0; q < M * LD; q++)
      if (memcmp(&c[q], &want[q], sizeof(float)) && !(isnan(c[q]) && isnan(want[q]))) bad = 1;
    CHECK(!bad, "epilogue bias=%d clamp=%d differs from the scalar one", with_bias, clamp);
  }
}
#endif

#if PX_NEON_MATH
/* ---- NEON exp / tanh / erf and the rows built on them ------------------------ */

typedef void (*row_fn)(int64_t n, const float *x, float *y);

static double logd(double v) { return log(v); }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_silu(double x) { return x / (1.0 + exp(-x)); }
static double ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440)); }
static double ref_gelu_tanh(double x) {
  return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* Every float in [lo, hi] on a fine grid plus the special values, through
 * the row function (odd lengths, so the 8-, 4- and 1..3-element paths all
 * run), against the double reference: |got - ref| <= rel * |ref| + abs, and
 * the special values exactly (NaN for NaN). Returns the largest error in
 * units of the bound, printed so the margin is visible. */
static void check_row_fn(const char *name, row_fn f, double (*ref)(double), double lo, double hi,
                         double rel, double abs_) {
  enum { N = 20001 };
  static float x[N + 8], y[N + 8];
  int64_t n = 0;
  for (int i = 0; i < N - 8; i++) x[n++] = (float)(lo + (hi - lo) * i / (N - 9));
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 0.625f};
  for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) x[n++] = specials[i];
  double worst = 0.0;
  int bad = 0;
  for (int64_t len = n; len >= n - 3; len--) { /* tails of 1..3 */
    memset(y, 0, sizeof y);
    f(len, x, y);
    for (int64_t i = 0; i < len; i++) {
      double want = ref((double)x[i]), got = y[i];
      if (isnan(want)) {
        if (!isnan(got)) bad++;
        continue;
      }
      if (isinf(want)) {
        if (got != want) bad++;
        continue;
      }
      double bound = rel * fabs(want) + abs_, dev = fabs(got - want);
      double err = dev == 0.0 ? 0.0 : dev / bound;
      if (!(dev <= bound)) {
        if (bad++ < 3)
          fprintf(stderr, "%s(%.9g) = %.9g, reference %.9g\n", name, (double)x[i], got, want);
      }
      if (err > worst) worst = err;
    }
  }
  /* in place (y == x) gives the same */
  memcpy(y, x, sizeof(float) * (size_t)n);
  f(n, y, y);
  for (int64_t i = 0; i < n; i++) {
    float z;
    f(1, &x[i], &z);
    if (memcmp(&z, &y[i], sizeof z) && !(isnan(z) && isnan(y[i]))) bad++;
  }
  CHECK(bad == 0, "%s: %d values outside %g * |ref| + %g (or specials wrong)", name, bad, rel, abs_);
  printf("test_neon: %-10s worst error %.2f of the bound (%g rel + %g abs)\n", name, worst, rel, abs_);
}

static void test_neon_math(void) {
  /* bounds: a few float32 ulps (1.19e-7 relative), far inside the 1e-4 /
   * 1e-5 that the ops tests allow float32 results */
  check_row_fn("exp", px_neon_exp_f32, exp, -87.0, 88.7, 3.6e-7, 0.0);
  check_row_fn("exp(tiny)", px_neon_exp_f32, exp, -104.5, -87.0, 3.6e-7, 1.5e-45);
  check_row_fn("tanh", px_neon_tanh_f32, tanh, -12.0, 12.0, 6e-7, 1e-38);
  check_row_fn("sigmoid", px_neon_sigmoid_f32, ref_sigmoid, -100.0, 100.0, 6e-7, 1e-38);
  /* silu(x < -88.7) is x / inf = -0 (as the portable loop computes it); the
   * exact value is below 1e-36 */
  check_row_fn("silu", px_neon_silu_f32, ref_silu, -100.0, 100.0, 6e-7, 1e-36);
  check_row_fn("gelu", px_neon_gelu_f32, ref_gelu, -12.0, 12.0, 6e-7, 4e-7);
  check_row_fn("gelu_tanh", px_neon_gelu_tanh_f32, ref_gelu_tanh, -12.0, 12.0, 6e-7, 2e-7);
}

/* softmax / log_softmax rows against double, NaN rows, -inf entries. */
static void test_neon_softmax(void) {
  static const int64_t lens[] = {1, 3, 4, 7, 33, 1000};
  float x[1000], y[1000];
  for (size_t q = 0; q < sizeof lens / sizeof *lens; q++) {
    const int64_t n = lens[q];
    for (int log = 0; log < 2; log++) {
      for (int64_t i = 0; i < n; i++) x[i] = 20.0f * frand();
      if (n > 2) x[n / 2] = -INFINITY;
      double m = -INFINITY, s = 0.0;
      for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
      for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
      px_neon_softmax_row_f32(n, x, y, log);
      int bad = 0;
      for (int64_t i = 0; i < n; i++) {
        double want = log ? (double)x[i] - m - logd(s) : exp((double)x[i] - m) / s;
        /* log_softmax's x - (max + log(sum)) cancels: the error is relative
         * to x's magnitude, not the result's */
        double bound = 1e-6 * fabs(want) + 1e-7 + (log ? 2.4e-7 * (fabs(x[i]) + fabs(m)) : 0.0);
        if (isinf(want) ? y[i] != want : !(fabs(y[i] - want) <= bound)) {
          if (bad++ < 3) fprintf(stderr, "row %lld [%lld]: x %.9g got %.9g want %.9g\n", (long long)n, (long long)i, (double)x[i], (double)y[i], want);
        }
      }
      CHECK(bad == 0, "%s row of %lld: %d values off", log ? "log_softmax" : "softmax", (long long)n, bad);
      x[n - 1] = NAN;
      px_neon_softmax_row_f32(n, x, y, log);
      bad = 0;
      for (int64_t i = 0; i < n; i++) bad += !isnan(y[i]);
      CHECK(bad == 0, "a NaN must make the whole %s row NaN", log ? "log_softmax" : "softmax");
    }
  }
}
#endif

/* ---- the operators through the registry ----------------------------------- */

/* A contiguous 1-D tensor over data. */
static px_tensor vec_tensor(void *data, int dtype, int64_t n) {
  px_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = (int8_t)dtype;
  t.dim = 1;
  t.mem = PX_MEM_UNPLANNED;
  t.contiguous = 1;
  t.sizes[0] = t.max_sizes[0] = n;
  t.dim_order[0] = 0;
  px_tensor_update_layout(&t);
  t.capacity = t.nbytes;
  t.cap_numel = t.numel;
  return t;
}

static double ref_exp(double x) { return exp(x); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_sigmoid2(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_silu2(double x) { return x / (1.0 + exp(-x)); }
static double ref_gelu2(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440)); }
static double ref_gelu_tanh2(double x) {
  return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* aten::exp / tanh / sigmoid / silu / gelu (both forms) on float32 and
 * float64 tensors, as the runtime calls them (on AArch64 the float32 ones
 * take the NEON rows), against double within a few float32 ulps. */
static void test_ops_registry(void) {
  enum { N = 1003 };
  static float xf[N], yf[N];
  static double xd[N], yd[N];
  for (int i = 0; i < N; i++) xd[i] = (double)(xf[i] = 12.0f * frand());
  struct {
    const char *op, *approx;
    double (*ref)(double);
  } ops[] = {{"aten::exp.out", NULL, ref_exp},         {"aten::tanh.out", NULL, ref_tanh},
             {"aten::sigmoid.out", NULL, ref_sigmoid2}, {"aten::silu.out", NULL, ref_silu2},
             {"aten::gelu.out", "none", ref_gelu2},     {"aten::gelu.out", "tanh", ref_gelu_tanh2}};
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
    for (int f64 = 0; f64 < 2; f64++) {
      const px_kernel_def *k = px_kernel_find(ops[o].op);
      CHECK(k != NULL, "%s is not registered", ops[o].op);
      if (!k) continue;
      px_tensor tx = f64 ? vec_tensor(xd, PX_F64, N) : vec_tensor(xf, PX_F32, N);
      px_tensor ty = f64 ? vec_tensor(yd, PX_F64, N) : vec_tensor(yf, PX_F32, N);
      px_value vx = {.tag = PX_V_TENSOR}, vy = {.tag = PX_V_TENSOR}, va = {.tag = PX_V_STRING};
      vx.u.t = &tx, vy.u.t = &ty;
      if (ops[o].approx) va.u.str.p = ops[o].approx, va.u.str.n = (uint32_t)strlen(ops[o].approx);
      px_value *args_un[] = {&vx, &vy, &vy}, *args_gelu[] = {&vx, &va, &vy, &vy};
      msg[0] = 0;
      ctx.op = ops[o].op;
      int rc = k->fn(&ctx, ops[o].approx ? args_gelu : args_un);
      CHECK(rc == 0, "%s: returned %d (%s)", ops[o].op, rc, msg);
      int bad = 0;
      for (int i = 0; i < N; i++) {
        double want = ops[o].ref(xd[i]), got = f64 ? yd[i] : (double)yf[i];
        double tol = f64 ? 1e-12 * fabs(want) + 1e-14 : 6e-7 * fabs(want) + 4e-7;
        if (!(fabs(got - want) <= tol) && bad++ < 2)
          fprintf(stderr, "%s %s (%s)(%.9g) = %.12g, reference %.12g\n", f64 ? "float64" : "float32", ops[o].op,
                  ops[o].approx ? ops[o].approx : "", xd[i], got, want);
      }
      CHECK(bad == 0, "%s on %s: %d values off", ops[o].op, f64 ? "float64" : "float32", bad);
    }
}

int main(void) {
  test_cpu();
  test_gemm_engine();
  test_gemm_prepacked();
  test_ops_registry();
#if PX_NEON_KERNELS
  test_neon_ukr();
  test_neon_small_m();
  test_neon_pack();
  test_neon_epilogue();
#endif
#if PX_NEON_MATH
  test_neon_math();
  test_neon_softmax();
#endif
  printf("test_neon: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
