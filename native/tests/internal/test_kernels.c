/*
 * test_kernels.c - kernels called directly, with answers worked out by hand
 * (no torch needed to know them): the GEMM engine on small integer matrices,
 * a 3x3 convolution of a known image, softmax of [0, ln 2, ln 3], argmax with
 * ties, float16 / bfloat16 steps rounded as ExecuTorch rounds them, and the
 * dtype table. It calls internal functions the shared library
 * does not export, so it is linked against the library's objects (see the
 * Makefile) and is part of `make test` and `make asan-test`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/elementwise/flat.h"
#include "kernels/gemm/gemm.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "kernels/shape/transpose.h"
#include "check.h"

/* ---- a kernel context and values, as the runtime builds them ---------------- */

static char msg[1024];
static px_ctx ctx = {.op = "test", .msg = msg, .msg_cap = sizeof msg};

/* A contiguous, static tensor over `data`. */
static px_tensor tensor(void *data, int dtype, int dim, const int64_t *sizes) {
  px_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = (int8_t)dtype;
  t.dim = dim;
  t.mem = PX_MEM_UNPLANNED;
  t.contiguous = 1;
  for (int k = 0; k < dim; k++) {
    t.sizes[k] = t.max_sizes[k] = sizes[k];
    t.dim_order[k] = (uint8_t)k;
  }
  px_tensor_update_layout(&t);
  t.capacity = t.nbytes;
  t.cap_numel = t.numel;
  return t;
}

static px_value tensor_value(px_tensor *t) {
  px_value v = {.tag = PX_V_TENSOR};
  v.u.t = t;
  return v;
}

static px_value int_value(int64_t i) {
  px_value v = {.tag = PX_V_INT};
  v.u.i = i;
  return v;
}

static px_value bool_value(bool b) {
  px_value v = {.tag = PX_V_BOOL};
  v.u.b = b;
  return v;
}

static px_value none_value(void) { return (px_value){.tag = PX_V_NONE}; }

/* An IntList of n items; items and vals are the caller's storage. */
static px_value int_list(uint32_t n, px_value *items, px_value **ptrs, int64_t *vals, const int64_t *v) {
  for (uint32_t k = 0; k < n; k++) {
    items[k] = int_value(v[k]);
    ptrs[k] = &items[k];
  }
  px_value l = {.tag = PX_V_INT_LIST};
  l.u.il.items = ptrs;
  l.u.il.vals = vals;
  l.u.il.n = n;
  return l;
}

/* Runs the registered kernel `name` on args; returns its status. */
static int call(const char *name, px_value *const *args) {
  const px_kernel_def *k = px_kernel_find(name);
  CHECK(k != NULL);
  if (!k) return -1;
  msg[0] = 0;
  ctx.op = name;
  ctx.scratch_cur = ctx.scratch;
  ctx.scratch_used = 0;
  return k->fn(&ctx, args);
}

/* ---- GEMM -------------------------------------------------------------------- */

static void test_gemm_small(void) {
  /* [[1 2 3] [4 5 6]] @ [[7 8] [9 10] [11 12]] = [[58 64] [139 154]] */
  const float A[6] = {1, 2, 3, 4, 5, 6};
  const float B[6] = {7, 8, 9, 10, 11, 12};
  float C[4] = {-1, -1, -1, -1};
  CHECK(px_gemm_f32(&ctx, NULL, 2, 2, 3, 1.0f, A, 3, 1, B, 2, 1, 0.0f, C, 2) == 0);
  CHECK(C[0] == 58 && C[1] == 64 && C[2] == 139 && C[3] == 154);

  /* beta = 1 accumulates, alpha scales: C = 2 * A @ B + C */
  CHECK(px_gemm_f32(&ctx, NULL, 2, 2, 3, 2.0f, A, 3, 1, B, 2, 1, 1.0f, C, 2) == 0);
  CHECK(C[0] == 174 && C[1] == 192 && C[2] == 417 && C[3] == 462);

  /* B given transposed through its strides (B^T stored row-major as 2 x 3). */
  const float Bt[6] = {7, 9, 11, 8, 10, 12};
  float D[4] = {0};
  CHECK(px_gemm_f32(&ctx, NULL, 2, 2, 3, 1.0f, A, 3, 1, Bt, 1, 3, 0.0f, D, 2) == 0);
  CHECK(D[0] == 58 && D[1] == 64 && D[2] == 139 && D[3] == 154);

  /* beta = 0 never reads C: a NaN already there does not survive. */
  float E[4] = {NAN, NAN, NAN, NAN};
  CHECK(px_gemm_f32(&ctx, NULL, 2, 2, 3, 1.0f, A, 3, 1, B, 2, 1, 0.0f, E, 2) == 0);
  CHECK(E[0] == 58 && E[3] == 154);
}

/* Sizes past every blocking edge (packed panels, partial tiles) with small
 * integers, so that every float sum is exact and equals the integer one. */
static void test_gemm_blocked(void) {
  enum { M = 131, N = 37, K = 300 };
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
  float *C = malloc(sizeof(float) * M * N);
  CHECK(A && B && C);
  if (!A || !B || !C) goto out;
  for (int i = 0; i < M * K; i++) A[i] = (float)(i % 7 - 3);
  for (int i = 0; i < K * N; i++) B[i] = (float)(i % 5 - 2);
  CHECK(px_gemm_f32(&ctx, NULL, M, N, K, 1.0f, A, K, 1, B, N, 1, 0.0f, C, N) == 0);
  int wrong = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      long s = 0;
      for (int k = 0; k < K; k++) s += (long)((i * K + k) % 7 - 3) * ((k * N + j) % 5 - 2);
      wrong += C[i * N + j] != (float)s;
    }
  CHECK(wrong == 0);
out:
  free(A);
  free(B);
  free(C);
}

/* ---- convolution ------------------------------------------------------------- */

static void test_conv_3x3(void) {
  /* A 4x4 image 1..16, a 3x3 box kernel, bias 1, no padding: each output is
   * 1 + the sum of its 3x3 window: 1 + 54, 1 + 63, 1 + 90, 1 + 99. */
  float img[16], w[9], bias[1] = {1}, out[4] = {0};
  for (int k = 0; k < 16; k++) img[k] = (float)(k + 1);
  for (int k = 0; k < 9; k++) w[k] = 1;
  px_tensor ti = tensor(img, PX_F32, 4, (int64_t[]){1, 1, 4, 4});
  px_tensor tw = tensor(w, PX_F32, 4, (int64_t[]){1, 1, 3, 3});
  px_tensor tb = tensor(bias, PX_F32, 1, (int64_t[]){1});
  px_tensor to = tensor(out, PX_F32, 4, (int64_t[]){1, 1, 2, 2});
  px_value items[8], *ptrs[8];
  int64_t vals[8];
  px_value vi = tensor_value(&ti), vw = tensor_value(&tw), vb = tensor_value(&tb), vo = tensor_value(&to);
  px_value stride = int_list(2, items, ptrs, vals, (int64_t[]){1, 1});
  px_value pad = int_list(2, items + 2, ptrs + 2, vals + 2, (int64_t[]){0, 0});
  px_value dil = int_list(2, items + 4, ptrs + 4, vals + 4, (int64_t[]){1, 1});
  px_value opad = int_list(2, items + 6, ptrs + 6, vals + 6, (int64_t[]){0, 0});
  px_value transposed = bool_value(false), groups = int_value(1);
  px_value *args[] = {&vi, &vw, &vb, &stride, &pad, &dil, &transposed, &opad, &groups, &vo, &vo};
  CHECK(call("aten::convolution.out", args) == 0);
  CHECK(out[0] == 55 && out[1] == 64 && out[2] == 91 && out[3] == 100);

  /* Padding 1 keeps the size; the corner sees 1 + 2 + 5 + 6 (+ bias). */
  float out2[16] = {0};
  px_tensor to2 = tensor(out2, PX_F32, 4, (int64_t[]){1, 1, 4, 4});
  px_value vo2 = tensor_value(&to2);
  pad = int_list(2, items + 2, ptrs + 2, vals + 2, (int64_t[]){1, 1});
  px_value *args2[] = {&vi, &vw, &vb, &stride, &pad, &dil, &transposed, &opad, &groups, &vo2, &vo2};
  CHECK(call("aten::convolution.out", args2) == 0);
  CHECK(out2[0] == 15 && out2[5] == 55 && out2[15] == 1 + 11 + 12 + 15 + 16);
}

/* ---- softmax ----------------------------------------------------------------- */

static void test_softmax(void) {
  /* exp([0, ln 2, ln 3]) = [1, 2, 3], so softmax = [1/6, 2/6, 3/6]. */
  float x[3] = {0.0f, (float)log(2.0), (float)log(3.0)}, y[3] = {0};
  px_tensor tx = tensor(x, PX_F32, 1, (int64_t[]){3}), ty = tensor(y, PX_F32, 1, (int64_t[]){3});
  px_value vx = tensor_value(&tx), vy = tensor_value(&ty), dim = int_value(-1), h2f = bool_value(false);
  px_value *args[] = {&vx, &dim, &h2f, &vy, &vy};
  CHECK(call("aten::_softmax.out", args) == 0);
  for (int k = 0; k < 3; k++) CHECK(fabsf(y[k] - (float)(k + 1) / 6.0f) <= 1e-6f);

  /* The same in float64, along dim 0 of a 3 x 1 tensor (strided rows). */
  double xd[3] = {0.0, log(2.0), log(3.0)}, yd[3] = {0};
  px_tensor txd = tensor(xd, PX_F64, 2, (int64_t[]){3, 1}), tyd = tensor(yd, PX_F64, 2, (int64_t[]){3, 1});
  px_value vxd = tensor_value(&txd), vyd = tensor_value(&tyd), dim0 = int_value(0);
  px_value *argsd[] = {&vxd, &dim0, &h2f, &vyd, &vyd};
  CHECK(call("aten::_softmax.out", argsd) == 0);
  for (int k = 0; k < 3; k++) CHECK(fabs(yd[k] - (double)(k + 1) / 6.0) <= 1e-15);
}

/* ---- argmax ties ------------------------------------------------------------- */

static void test_argmax_ties(void) {
  /* Ties keep the first index, over the whole tensor and along a dim. */
  float x[8] = {1, 3, 3, 2, /* row 1: */ 5, 5, 5, 5};
  int64_t all = -1, rows[2] = {-1, -1};
  px_tensor tx = tensor(x, PX_F32, 2, (int64_t[]){2, 4});
  px_tensor tall = tensor(&all, PX_I64, 0, NULL), trows = tensor(rows, PX_I64, 1, (int64_t[]){2});
  px_value vx = tensor_value(&tx), vall = tensor_value(&tall), vrows = tensor_value(&trows);
  px_value none = none_value(), dim1 = int_value(1), keep = bool_value(false);
  px_value *args[] = {&vx, &none, &keep, &vall, &vall};
  CHECK(call("aten::argmax.out", args) == 0);
  CHECK(all == 4);
  px_value *args1[] = {&vx, &dim1, &keep, &vrows, &vrows};
  CHECK(call("aten::argmax.out", args1) == 0);
  CHECK(rows[0] == 1 && rows[1] == 0);

  /* Integers too, and argmin's ties. */
  int32_t xi[5] = {-2, 7, -2, 7, 0};
  int64_t amin = -1, amax = -1;
  px_tensor ti = tensor(xi, PX_I32, 1, (int64_t[]){5});
  px_tensor tmin = tensor(&amin, PX_I64, 0, NULL), tmax = tensor(&amax, PX_I64, 0, NULL);
  px_value vi = tensor_value(&ti), vmin = tensor_value(&tmin), vmax = tensor_value(&tmax);
  px_value *amin_args[] = {&vi, &none, &keep, &vmin, &vmin};
  px_value *amax_args[] = {&vi, &none, &keep, &vmax, &vmax};
  CHECK(call("aten::argmin.out", amin_args) == 0);
  CHECK(call("aten::argmax.out", amax_args) == 0);
  CHECK(amin == 0 && amax == 1);
}

/* ---- float16 / bfloat16 computed as ExecuTorch's kernels round them ----------- */

static void test_16bit_rounding_steps(void) {
  /* glu in float16 on subnormals: a = 3 * 2^-24, b = -131 * 2^-24.
   * ExecuTorch rounds every step to float16: exp(-b) = 1.0000078 -> 1.0,
   * 1 + 1 = 2, 1 / 2 = 0.5, a * 0.5 = 1.5 * 2^-24 -> 2 * 2^-24 (the tie goes
   * to the even 2). In float, a / (1 + exp(-b)) = 1.49999 * 2^-24 -> 1. */
  uint16_t x[2] = {0x0003, 0x8083}, y[1] = {0};
  px_tensor tx = tensor(x, PX_F16, 1, (int64_t[]){2}), ty = tensor(y, PX_F16, 1, (int64_t[]){1});
  px_value vx = tensor_value(&tx), vy = tensor_value(&ty), dim = int_value(0);
  px_value *args[] = {&vx, &dim, &vy, &vy};
  CHECK(call("aten::glu.out", args) == 0);
  CHECK(y[0] == 0x0002);

  /* leaky_relu in bfloat16 with slope 0.1: ExecuTorch casts the slope to
   * bfloat16 first, 0.10009765625; -1.125 * that = -0.11260986328125, which
   * is 230.625 steps of 2^-11 and rounds to 231 (-0.11279296875, 0xBDE7);
   * -1.125 * 0.1 = -0.1125 would round to 230. */
  uint16_t bx[1] = {0xBF90 /* -1.125 */}, by[1] = {0};
  px_tensor tbx = tensor(bx, PX_BF16, 1, (int64_t[]){1}), tby = tensor(by, PX_BF16, 1, (int64_t[]){1});
  px_value vbx = tensor_value(&tbx), vby = tensor_value(&tby);
  px_value slope = {.tag = PX_V_DOUBLE, .u.d = 0.1};
  px_value *largs[] = {&vbx, &slope, &vby, &vby};
  CHECK(call("aten::leaky_relu.out", largs) == 0);
  CHECK(by[0] == 0xBDE7);
}

/* ---- the dtype table ----------------------------------------------------------- */

static void test_dtype_table(void) {
  /* Every entry round-trips through the generated queries and the public ones. */
#define ROUND_TRIP(code, id, public_id, name, size, ctype)                            \
  CHECK(px_elsize(code) == (size) && sizeof(ctype) == (size));                       \
  CHECK(strcmp(px_dtype_name(code), name) == 0);                                     \
  CHECK(px_dtype_supported(code));                                                   \
  CHECK(pyexec_dtype_size(PYEXEC_DTYPE_##public_id) == (size));                      \
  CHECK(strcmp(pyexec_dtype_name(PYEXEC_DTYPE_##public_id), name) == 0);
  PX_DTYPES(ROUND_TRIP)
#undef ROUND_TRIP
  /* Codes named only for messages have no size. */
  CHECK(px_elsize(9) == 0 && strcmp(px_dtype_name(9), "complex64") == 0);
  CHECK(px_elsize(27) == 0 && strcmp(pyexec_dtype_name(27), "uint16") == 0);
  CHECK(px_elsize(-1) == 0 && strcmp(px_dtype_name(-1), "unknown") == 0);
  CHECK(!px_dtype_supported(100) && strcmp(px_dtype_name(100), "unknown") == 0);
  /* float16 / bfloat16 conversions of values both represent exactly. */
  CHECK(px_half_to_float(px_float_to_half(-2.5f)) == -2.5f);
  CHECK(px_bf16_to_float(px_float_to_bf16(384.0f)) == 384.0f);
}

/* ---- the registry ----------------------------------------------------------------- */

static void test_registry(void) {
  /* Sorted, unique, and every name found again. */
  size_t n = px_kernel_count();
  CHECK(n > 0);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    const px_kernel_def *k = px_kernel_at(i);
    bad += !k || px_kernel_find(k->name) != k || (i && strcmp(px_kernel_at(i - 1)->name, k->name) >= 0);
  }
  CHECK(bad == 0);
  CHECK(px_kernel_at(n) == NULL && px_kernel_name(n) == NULL);
  CHECK(px_kernel_find("aten::no_such_op.out") == NULL);
}

/* px_transpose2d: a 2x3 by hand, then every element size over shapes that
 * are and are not multiples of the 8x8 tile and the 64x64 block, single
 * rows and columns, and leading dims wider than the matrices (the gap must
 * stay untouched). Element (r, c) holds r * 1000 + c, so each output element
 * names where it came from. */
static void test_transpose2d(void) {
  const float a[6] = {1, 2, 3, 4, 5, 6};
  float t[6] = {0};
  px_transpose2d(4, t, 2, a, 3, 2, 3);
  CHECK(t[0] == 1 && t[1] == 4 && t[2] == 2 && t[3] == 5 && t[4] == 3 && t[5] == 6);
  /* bits, not values: a NaN payload and -0.0 survive the AVX2 tiles */
  uint32_t bits[64], tb[64];
  for (int k = 0; k < 64; k++) bits[k] = 0x7fc00000u + (uint32_t)k;
  bits[9] = 0x80000000u;
  px_transpose2d(4, tb, 8, bits, 8, 8, 8);
  int bad = 0;
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 8; c++) bad += tb[c * 8 + r] != bits[r * 8 + c];
  CHECK(bad == 0);

  static const int64_t shapes[][2] = {{1, 1},  {1, 20}, {20, 1}, {7, 9},   {8, 8},   {9, 8},
                                      {8, 13}, {16, 3}, {3, 96}, {13, 11}, {67, 130}, {96, 200},
                                      {16, 16}, {17, 33}, {130, 67}, {2, 40}, {2, 37}, {2, 5},
                                      {3, 50}, {3, 53}, {3, 41}, {3, 7}};
  static const size_t sizes[] = {1, 2, 4, 8};
  for (size_t e = 0; e < sizeof sizes / sizeof *sizes; e++) {
    size_t es = sizes[e];
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
      int64_t rows = shapes[s][0], cols = shapes[s][1];
      int64_t sld = cols + 3, dld = rows + 5; /* gaps after each row */
      if ((rows == 2 || rows == 3) && s % 2) dld = rows; /* contiguous pairs / triples (the interleaves) */
      unsigned char *src = malloc((size_t)(rows * sld) * es), *dst = malloc((size_t)(cols * dld) * es);
      CHECK(src && dst);
      if (!src || !dst) return;
      memset(dst, 0xab, (size_t)(cols * dld) * es);
      for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
          uint64_t v = (uint64_t)(r * 1000 + c);
          memcpy(src + (size_t)(r * sld + c) * es, &v, es); /* little-endian: the low bytes */
        }
      px_transpose2d(es, dst, dld, src, sld, rows, cols);
      int wrong = 0, gap = 0;
      for (int64_t c = 0; c < cols; c++)
        for (int64_t r = 0; r < dld; r++) {
          const unsigned char *p = dst + (size_t)(c * dld + r) * es;
          if (r >= rows) {
            for (size_t b = 0; b < es; b++) gap += p[b] != 0xab;
            continue;
          }
          uint64_t v = 0, want = (uint64_t)(r * 1000 + c);
          memcpy(&v, p, es);
          if (es < 8) want &= (UINT64_C(1) << (8 * es)) - 1;
          wrong += v != want;
        }
      if (wrong || gap) fprintf(stderr, "transpose %lldx%lld es %zu: %d wrong, %d gap bytes written\n",
                                (long long)rows, (long long)cols, es, wrong, gap);
      CHECK(wrong == 0 && gap == 0);
      free(src);
      free(dst);
    }
  }
}

/* The XNNPACK graphs' sigmoid (px_f32_sigmoid_fast) and SiLU against a
 * float64 sigmoid over every 61st float: within 3 ulp wherever the result
 * is a normal float (the delegate runs with denormals off, which these
 * loops' callers set; here they are on, so results below the normal range
 * are left out), a NaN comes back a NaN, infinities as 0 and 1, and the
 * SiLU is x times the sigmoid's value. Without AVX-512 these are the
 * portable loops, held to the same bound. */
static void test_sigmoid_fast(void) {
  enum { B = 4096 };
  static float x[B], y[B], s[B];
  double worst = 0.0;
  int bad_nan = 0, bad_silu = 0;
  for (uint64_t u0 = 0; u0 < ((uint64_t)1 << 32); u0 += (uint64_t)B * 61) {
    int n = 0;
    for (uint64_t u = u0; u < u0 + (uint64_t)B * 61 && u < ((uint64_t)1 << 32) && n < B; u += 61, n++) {
      const uint32_t bits = (uint32_t)u;
      memcpy(&x[n], &bits, 4);
    }
    px_f32_sigmoid_fast(n, x, s);
    memcpy(y, x, sizeof(float) * (size_t)n);
    px_f32_mul_sigmoid_fast_inplace(n, y);
    for (int i = 0; i < n; i++) {
      if (x[i] != x[i]) {
        bad_nan += s[i] == s[i] || y[i] == y[i];
        continue;
      }
      bad_silu += isfinite(x[i]) && memcmp(&(float){x[i] * s[i]}, &y[i], 4) != 0;
      const double exact = 1.0 / (1.0 + exp(-(double)x[i]));
      if (exact < 0x1p-126 || fabsf(x[i]) < 0x1p-126f) continue;
      const float e = (float)exact;
      const double ulp = (double)nextafterf(e, INFINITY) - (double)e;
      const double err = fabs((double)s[i] - exact) / ulp;
      if (err > worst) worst = err;
    }
  }
  CHECK(worst <= 3.0, "sigmoid within %.2f ulp", worst);
  CHECK(bad_nan == 0, "%d NaNs not NaN", bad_nan);
  CHECK(bad_silu == 0, "%d SiLU values not x times the sigmoid", bad_silu);
  const float ends[4] = {INFINITY, -INFINITY, 0.0f, -0.0f};
  float got[4];
  px_f32_sigmoid_fast(4, ends, got);
  CHECK(got[0] == 1.0f && got[1] == 0.0f && got[2] == 0.5f && got[3] == 0.5f);
}

int main(void) {
  check_context = msg; /* a failing kernel's message */
  test_sigmoid_fast();
  test_gemm_small();
  test_gemm_blocked();
  test_conv_3x3();
  test_softmax();
  test_argmax_ties();
  test_16bit_rounding_steps();
  test_transpose2d();
  test_dtype_table();
  test_registry();
  px_scratch_release(&ctx);
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
