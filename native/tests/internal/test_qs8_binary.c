/*
 * test_qs8_binary.c - the qint8 add / subtract and multiply runs
 * (kernels/quantized/qs8_binary.h) against their formulas evaluated here
 * element by element: random parameters in the ranges the XNNPACK backend
 * gives (multipliers up to 2^21, shifts 1..30, zero points and bounds in
 * int8), every length from 0 to 300 and a long run, so that each SIMD width
 * this CPU has (64 and 32 bytes at a time) meets its tail, at every start
 * offset within a vector; bytes after the run stay unwritten.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quantized/qs8_binary.h"
#include "check.h"

static int8_t ref_addsub(const px_qs8_binop *p, int8_t a, int8_t b) {
  int64_t acc = (int64_t)p->bias + (int64_t)a * p->ma + (int64_t)b * p->mb;
  int64_t v = acc >> p->shift;
  v = v < p->lo ? p->lo : v > p->hi ? p->hi : v;
  return (int8_t)(v + p->ozp);
}

static int8_t ref_mul(const px_qs8_binop *p, int8_t a, int8_t b) {
  float v = (float)((a - p->azp) * (b - p->bzp)) * p->scale;
  v = v > (float)p->lo ? v : (float)p->lo;
  v = v < (float)p->hi ? v : (float)p->hi;
  return (int8_t)((int32_t)nearbyintf(v) + p->ozp); /* to nearest, ties to even: the default mode */
}

static px_qs8_binop random_params(void) {
  px_qs8_binop p = {0};
  p.ozp = rnd_int(-128, 127);
  p.lo = rnd_int(-128, 127) - p.ozp;
  p.hi = rnd_int(p.lo + p.ozp, 127) - p.ozp;
  p.shift = rnd_int(11, 21); /* 20 - exponent of the larger ratio, as the backend sets it */
  int32_t limit = 1 << 21;
  p.ma = rnd_int(-limit, limit);
  p.mb = rnd_int(-limit, limit);
  p.azp = rnd_int(-128, 127);
  p.bzp = rnd_int(-128, 127);
  p.bias = (int32_t)(1u << (p.shift - 1)) - p.ma * p.azp - p.mb * p.bzp;
  p.scale = ldexpf((float)(rnd() % 1000 + 1) / 1000.0f, -rnd_int(0, 12));
  return p;
}

static void check_runs(int mul, const px_qs8_binop *p, const int8_t *a, const int8_t *b, int64_t n) {
  int8_t *o = malloc((size_t)n + 1);
  o[n] = 0x5A;
  if (mul)
    px_qs8_mul_row(p, a, b, o, n);
  else
    px_qs8_addsub_row(p, a, b, o, n);
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (o[i] != (mul ? ref_mul(p, a[i], b[i]) : ref_addsub(p, a[i], b[i]))) bad = i;
  CHECK(bad < 0, "%s, n = %lld: element %lld (a %d, b %d) is %d, the formula gives %d", mul ? "mul" : "add",
        (long long)n, (long long)bad, bad < 0 ? 0 : a[bad], bad < 0 ? 0 : b[bad], bad < 0 ? 0 : o[bad],
        bad < 0 ? 0 : (mul ? ref_mul(p, a[bad], b[bad]) : ref_addsub(p, a[bad], b[bad])));
  CHECK(o[n] == 0x5A, "%s, n = %lld: the byte after the run was written", mul ? "mul" : "add", (long long)n);
  free(o);
}

int main(void) {
  enum { LONG = 5000 };
  int8_t *a = malloc(LONG + 64), *b = malloc(LONG + 64);
  for (int rep = 0; rep < 12; rep++) {
    for (int i = 0; i < LONG + 64; i++) a[i] = (int8_t)rnd(), b[i] = (int8_t)rnd();
    px_qs8_binop p = random_params();
    for (int mul = 0; mul < 2; mul++) {
      for (int64_t n = 0; n <= 300; n++) check_runs(mul, &p, a + n % 64, b + (n * 7) % 64, n);
      check_runs(mul, &p, a + 1, b + 3, LONG);
    }
  }
  free(a);
  free(b);
  printf("test_qs8_binary: %d checks, %d failures\n", checks, failures);
  return failures != 0;
}
