/*
 * test_winograd.c - the Winograd F(2x2, 3x3) convolution (kernels/conv/
 * winograd.c) against a float64 direct sum over odd sizes (output sizes not
 * multiples of the 2x2 tile, channels not multiples of the 16-channel
 * transform step or the GEMM panels), every kind of padding (none, one
 * side, more than the kernel), more than one image and tile block, with
 * bias and a clamp; every output must be within a bound proportional to the
 * sum of its products' magnitudes, and the same bits at 1, 2 and 3 threads.
 * Linked against the library's objects (see the Makefile).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "kernels/conv/winograd.h"
#include "kernels/kernel.h"
#include "check.h"

static char msg[1024];
static px_ctx ctx = {.op = "test_winograd", .msg = msg, .msg_cap = sizeof msg};

static void one(int64_t N, int64_t H, int64_t W, int64_t Cin, int64_t Cout, int64_t pt, int64_t pl,
                int64_t pb, int64_t pr, bool with_bias, float lo, float hi) {
  const int64_t OH = H + pt + pb - 2, OW = W + pl + pr - 2;
  const size_t nx = (size_t)(N * H * W * Cin), nw = (size_t)(Cout * 9 * Cin), ny = (size_t)(N * OH * OW * Cout);
  float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *bias = malloc(sizeof(float) * (size_t)Cout);
  float *y[3] = {malloc(sizeof(float) * ny), malloc(sizeof(float) * ny), malloc(sizeof(float) * ny)};
  float *pk = aligned_alloc(64, px_wino_packed_size(Cin, Cout));
  if (!x || !w || !bias || !y[0] || !y[1] || !y[2] || !pk) {
    CHECK(0, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < nx; i++) x[i] = rnd_unit();
  for (size_t i = 0; i < nw; i++) w[i] = rnd_unit();
  for (int64_t i = 0; i < Cout; i++) bias[i] = rnd_unit();
  /* the filter OHWI, as the XNNPACK node reads it */
  CHECK(px_wino_pack(Cin, Cout, w, 9 * Cin, 1, Cin, pk), "pack");
  px_wino_geom g = {N, H, W, Cin, Cout, OH, OW, pt, pl};
  for (int t = 0; t < 3; t++) {
    CHECK(px_parallel_set_num_threads(t + 1) == 0, "set %d threads", t + 1);
    for (size_t i = 0; i < ny; i++) y[t][i] = NAN; /* every output must be written */
    int rc = px_wino_conv_nhwc(&ctx, &g, x, pk, with_bias ? bias : NULL, lo, hi, y[t]);
    CHECK(rc == 0, "%s", msg);
    px_scratch_release(&ctx);
  }
  CHECK(px_parallel_set_num_threads(1) == 0, "reset threads");
  int64_t wrong = 0, first = -1;
  double worst = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        for (int64_t oc = 0; oc < Cout; oc++) {
          double s = with_bias ? bias[oc] : 0.0, mag = fabs(s);
          for (int64_t ki = 0; ki < 3; ki++)
            for (int64_t kj = 0; kj < 3; kj++) {
              int64_t ih = oh - pt + ki, iw = ow - pl + kj;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int64_t c = 0; c < Cin; c++) {
                double p = (double)x[((n * H + ih) * W + iw) * Cin + c] * w[(oc * 9 + ki * 3 + kj) * Cin + c];
                s += p, mag += fabs(p);
              }
            }
          if (s < lo) s = lo;
          if (s > hi) s = hi;
          const int64_t at = ((n * OH + oh) * OW + ow) * Cout + oc;
          const double err = fabs(y[0][at] - s);
          /* float32 rounding of the transforms and the sums: a few units of
           * 2^-24 times the products' magnitude (NaN fails too) */
          if (!(err <= 16 * 0x1p-24 * (mag + 1.0))) {
            if (first < 0) first = at;
            wrong++;
          }
          if (err > worst) worst = err;
        }
  CHECK(wrong == 0, "N=%lld %lldx%lld %lld->%lld pads %lld/%lld/%lld/%lld: %lld wrong, first at %lld "
        "(worst error %g)", (long long)N, (long long)H, (long long)W, (long long)Cin, (long long)Cout,
        (long long)pt, (long long)pl, (long long)pb, (long long)pr, (long long)wrong, (long long)first, worst);
  for (int t = 1; t < 3; t++)
    CHECK(memcmp(y[t], y[0], sizeof(float) * ny) == 0, "%d threads differ from one (%lldx%lld %lld->%lld)",
          t + 1, (long long)H, (long long)W, (long long)Cin, (long long)Cout);
out:
  free(x), free(w), free(bias), free(y[0]), free(y[1]), free(y[2]), free(pk);
}

int main(void) {
  rng_state = 88172645463325252ull;
  setenv("PYEXEC_PARALLEL_MIN_COST", "1", 1); /* split even small convolutions over the threads */
  CHECK(px_wino_applicable(1, 16, 16, 3, 3, 1, 1, 1, 1), "16 -> 16, 3x3 stride 1 takes Winograd");
  CHECK(!px_wino_applicable(1, 8, 64, 3, 3, 1, 1, 1, 1), "8 input channels stay direct");
  CHECK(!px_wino_applicable(1, 64, 64, 3, 3, 2, 2, 1, 1), "stride 2 stays direct");
  CHECK(!px_wino_applicable(1, 64, 64, 3, 3, 1, 1, 2, 2), "dilation 2 stays direct");
  CHECK(!px_wino_applicable(2, 64, 64, 3, 3, 1, 1, 1, 1), "groups stay direct");
  CHECK(!px_wino_applicable(1, 64, 64, 5, 5, 1, 1, 1, 1), "5x5 stays direct");
  one(1, 8, 8, 16, 16, 1, 1, 1, 1, true, -INFINITY, INFINITY);
  one(2, 13, 11, 17, 33, 1, 1, 1, 1, true, 0.0f, 6.0f);   /* odd sizes, ReLU6 */
  one(1, 9, 10, 21, 19, 0, 0, 0, 0, false, -INFINITY, INFINITY); /* no padding, odd output */
  one(1, 7, 12, 32, 40, 2, 0, 1, 3, true, 0.0f, INFINITY); /* uneven padding, ReLU */
  one(1, 3, 3, 16, 16, 4, 4, 4, 4, true, -INFINITY, INFINITY); /* padding beyond the kernel */
  one(3, 30, 29, 48, 24, 1, 1, 1, 1, true, -1.0f, 1.0f);  /* several tile blocks */
  one(1, 5, 6, 300, 20, 1, 1, 1, 1, false, -INFINITY, INFINITY); /* depth over a GEMM block */
  printf("winograd: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
