/*
 * check.h - what the kernel tests share: the check counters, CHECK, and a
 * seeded xorshift generator. Each test is one .c file that includes this
 * once (everything here is static to it).
 *
 *   CHECK(cond)                   counts a check; a failure prints the file,
 *   CHECK(cond, "fmt", args...)   line, condition and the message, if any
 *
 * check_label (when set) is printed in brackets with each failure: the path
 * or case being run. check_context (when set) is a kernel context's message
 * buffer, printed after a failure when it holds a message. The first 30
 * failures are printed; all are counted.
 */
#ifndef PX_TEST_CHECK_H
#define PX_TEST_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int failures = 0, checks = 0;
static const char *check_label = NULL;
static const char *check_context = NULL;

static inline void check_failed(const char *file, int line, const char *cond, const char *fmt, ...) {
  if (++failures > 30) return;
  fprintf(stderr, "%s:%d: ", file, line);
  if (check_label) fprintf(stderr, "[%s] ", check_label);
  fprintf(stderr, "CHECK failed: %s", cond);
  if (fmt[0]) {
    va_list ap;
    va_start(ap, fmt);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  if (check_context && check_context[0]) fprintf(stderr, " (%s)", check_context);
  fputc('\n', stderr);
}

/* "" __VA_ARGS__: the message, when given, is a string literal and its
 * arguments; without one the format is "". */
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    checks++;                                                              \
    if (!(cond)) check_failed(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
  } while (0)

/* xorshift64: the state's next value. Tests seed rng_state themselves
 * where their cases depend on the sequence. */
static uint64_t rng_state __attribute__((unused)) = 0x2545F4914F6CDD1Dull;
static inline uint64_t rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static inline uint32_t rnd(void) { return (uint32_t)(rng_next() >> 11); }
/* An int in [lo, hi], the ends more often than chance (edge values). */
static inline int rnd_int(int lo, int hi) {
  uint32_t r = rnd() % 16;
  if (r == 0) return lo;
  if (r == 1) return hi;
  return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}
static inline float rnd_float(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() % 1000001) / 1e6f; }
/* Uniform in [-1, 1). */
static inline float rnd_unit(void) { return (float)((double)(rng_next() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

#endif /* PX_TEST_CHECK_H */
