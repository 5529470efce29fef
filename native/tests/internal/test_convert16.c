/*
 * test_convert16.c - the float16 / bfloat16 conversions (kernels/convert16.h):
 * values worked out by hand (ties to even, overflow, subnormals, NaN), then
 * the vector paths (F16C / AVX2 on x86-64, NEON on AArch64) against the
 * portable one-element definitions, bit for bit, on every float16 value,
 * on every midpoint between neighbouring float16 values and the floats
 * beside it, on the bfloat16 rounding boundaries and on random bit patterns
 * (NaNs included). Linked against the library's objects (see the Makefile).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/convert/convert16.h"
#include "check.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static void hand_worked(void) {
  static const struct {
    float f;
    uint16_t h, b;
  } cases[] = {
      {1.0f, 0x3c00, 0x3f80},
      {-2.0f, 0xc000, 0xc000},
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {65504.0f, 0x7bff, 0x4780},          /* the largest float16 */
      {65519.99609375f, 0x7bff, 0x4780},   /* just below the midpoint to 65536: stays */
      {65520.0f, 0x7c00, 0x4780},          /* the midpoint: to infinity (even) */
      {0x1.0p-24f, 0x0001, 0x3380},        /* the smallest float16 subnormal */
      {0x1.0p-25f, 0x0000, 0x3300},        /* half of it: a tie, to zero (even) */
      {0x1.8p-25f, 0x0001, 0x3340},        /* above the tie */
      {0x1.8p-24f, 0x0002, 0x33c0},        /* 1.5 subnormal steps: a tie, to 2 (even) */
      {0x1.ffcp-15f, 0x0400, 0x3880},      /* rounds up into the smallest normal */
      {1.0f + 0x1.0p-11f, 0x3c00, 0x3f80}, /* a float16 tie, to even */
      {1.0f + 0x3.0p-11f, 0x3c02, 0x3f80}, /* a tie, to even (up) */
      {1.0f + 0x1.0p-8f, 0x3c04, 0x3f80},  /* a bfloat16 tie, to even (down) */
      {1.0f + 0x3.0p-8f, 0x3c0c, 0x3f82},  /* a bfloat16 tie, to even (up) */
      {3.0e38f, 0x7c00, 0x7f62},
      {INFINITY, 0x7c00, 0x7f80},
      {-INFINITY, 0xfc00, 0xff80},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const float f = cases[i].f;
    CHECK(px_f32_to_f16_bits(f) == cases[i].h, "%a -> 0x%04x, want 0x%04x", (double)f, px_f32_to_f16_bits(f),
          cases[i].h);
    CHECK(px_f32_to_bf16_bits(f) == cases[i].b, "%a -> bf16 0x%04x, want 0x%04x", (double)f,
          px_f32_to_bf16_bits(f), cases[i].b);
  }
  CHECK(px_f16_bits_to_f32(0x3555) == 0x1.554p-2f, "0x3555 -> %a", (double)px_f16_bits_to_f32(0x3555));
  CHECK(px_f16_bits_to_f32(0x83ff) == -0x1.ff8p-15f, "0x83ff -> %a", (double)px_f16_bits_to_f32(0x83ff));
  /* NaN: made quiet, sign and top payload bits kept */
  CHECK(px_f32_to_f16_bits(from_bits(0x7fc00000u)) == 0x7e00, "quiet NaN");
  CHECK(px_f32_to_f16_bits(from_bits(0xff812345u)) == 0xfe09, "signalling NaN -> 0x%04x",
        px_f32_to_f16_bits(from_bits(0xff812345u)));
  CHECK(to_bits(px_f16_bits_to_f32(0x7c01)) == 0x7fc02000u, "float16 sNaN -> 0x%08x",
        to_bits(px_f16_bits_to_f32(0x7c01)));
  CHECK(px_f32_to_bf16_bits(from_bits(0x7f800001u)) == 0x7fc0, "bf16 sNaN -> 0x%04x",
        px_f32_to_bf16_bits(from_bits(0x7f800001u)));
  /* every finite float16 survives the round trip */
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++)
    if ((h & 0x7c00) != 0x7c00 && px_f32_to_f16_bits(px_f16_bits_to_f32((uint16_t)h)) != h) bad++;
  CHECK(bad == 0, "%d float16 values do not round-trip", bad);
}

/* The vector paths against the one-element definitions on n floats. Odd
 * offsets and lengths reach the tails too. */
static void against_scalar(const float *x, int64_t n, const char *what) {
  uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n), *b = malloc(sizeof(uint16_t) * (size_t)n);
  float *w = malloc(sizeof(float) * (size_t)n), *r = malloc(sizeof(float) * (size_t)n);
  if (!h || !b || !w || !r) {
    CHECK(0, "out of memory");
    goto out;
  }
  for (int64_t off = 0; off < 3; off++) {
    const int64_t m = n - off;
    px_f32_to_f16(h, x + off, m);
    px_f32_to_bf16(b, x + off, m);
    int64_t wrong = 0, first = -1;
    for (int64_t k = 0; k < m; k++)
      if (h[k] != px_f32_to_f16_bits(x[off + k]) || b[k] != px_f32_to_bf16_bits(x[off + k])) {
        if (first < 0) first = k;
        wrong++;
      }
    CHECK(wrong == 0, "%s: narrowing: %lld of %lld differ, first 0x%08x", what, (long long)wrong, (long long)m,
          first < 0 ? 0 : to_bits(x[off + first]));
    px_f16_to_f32(w, h, m);
    wrong = 0;
    for (int64_t k = 0; k < m; k++) wrong += to_bits(w[k]) != to_bits(px_f16_bits_to_f32(h[k]));
    CHECK(wrong == 0, "%s: widening float16: %lld differ", what, (long long)wrong);
    px_bf16_to_f32(w, b, m);
    wrong = 0;
    for (int64_t k = 0; k < m; k++) wrong += to_bits(w[k]) != (uint32_t)b[k] << 16;
    CHECK(wrong == 0, "%s: widening bfloat16: %lld differ", what, (long long)wrong);
    memcpy(r, x + off, sizeof(float) * (size_t)m);
    px_round_f16(r, m);
    wrong = 0;
    for (int64_t k = 0; k < m; k++) wrong += to_bits(r[k]) != to_bits(px_f16_bits_to_f32(h[k]));
    CHECK(wrong == 0, "%s: rounding to float16 in place: %lld differ", what, (long long)wrong);
    memcpy(r, x + off, sizeof(float) * (size_t)m);
    px_round_bf16(r, m);
    wrong = 0;
    for (int64_t k = 0; k < m; k++) wrong += to_bits(r[k]) != (uint32_t)b[k] << 16;
    CHECK(wrong == 0, "%s: rounding to bfloat16 in place: %lld differ", what, (long long)wrong);
  }
out:
  free(h), free(b), free(w), free(r);
}

static void vector_paths(void) {
  /* every float16 value (NaNs and infinities included) */
  float *x = malloc(sizeof(float) * 0x10000 * 4);
  if (!x) {
    CHECK(0, "out of memory");
    return;
  }
  uint16_t all[0x10000];
  for (uint32_t k = 0; k < 0x10000; k++) all[k] = (uint16_t)k;
  px_f16_to_f32(x, all, 0x10000);
  int wrong = 0;
  for (uint32_t k = 0; k < 0x10000; k++) wrong += to_bits(x[k]) != to_bits(px_f16_bits_to_f32((uint16_t)k));
  CHECK(wrong == 0, "widening every float16: %d differ from the definition", wrong);
  against_scalar(x, 0x10000, "every float16");
  /* midpoints between neighbouring positive float16 values and the floats beside them */
  int64_t n = 0;
  for (uint32_t k = 0; k < 0x7c00; k++) {
    const uint32_t mid = (to_bits(px_f16_bits_to_f32((uint16_t)k)) + to_bits(px_f16_bits_to_f32((uint16_t)(k + 1)))) / 2;
    const double m = ((double)px_f16_bits_to_f32((uint16_t)k) + (double)px_f16_bits_to_f32((uint16_t)(k + 1))) / 2;
    x[n++] = (float)m;
    x[n++] = from_bits(to_bits((float)m) - 1);
    x[n++] = from_bits(to_bits((float)m) + 1);
    x[n++] = -from_bits(mid);
  }
  against_scalar(x, n, "float16 midpoints");
  /* bfloat16 boundaries: the low half 0x7fff, 0x8000, 0x8001 under every high half */
  n = 0;
  for (uint32_t hi = 0; hi < 0x10000; hi += 1) {
    x[n++] = from_bits(hi << 16 | 0x7fffu);
    x[n++] = from_bits(hi << 16 | 0x8000u);
    x[n++] = from_bits(hi << 16 | 0x8001u);
    x[n++] = from_bits(hi << 16);
  }
  against_scalar(x, n, "bfloat16 boundaries");
  /* random bit patterns */
  uint64_t st = 7;
  for (int64_t k = 0; k < 0x40000; k++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    x[k] = from_bits((uint32_t)(st >> 32));
  }
  against_scalar(x, 0x40000, "random bits");
  free(x);
}

int main(void) {
  hand_worked();
  vector_paths();
  printf("convert16: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
