/*
 * ew.h - the machinery every elementwise kernel shares (private): compute
 * kinds, the loop generators, float32 math that vectorises, type promotion
 * and the driver (driver.c) that runs a loop over broadcast operands. The
 * kernels are binary.c (arithmetic, comparisons, logical and bitwise),
 * unary.c (math, rounding, pow with a scalar exponent, fill), activation.c
 * and select.c (where, masked_fill, clamp, maximum / minimum).
 *
 * Structure
 *   1. Compute kinds. Every op runs its inner loop in one of five storage
 *      types: float, double, int32, int64 or bool (uint8 0/1). float16 and
 *      bfloat16 compute in float (torch's "opmath"), int8/int16/uint8 in
 *      int64 (results are truncated back on store, which gives the same
 *      wrap-around as computing in the narrow type).
 *   2. Loops. Each (op, kind) pair is a plain C function, stamped out by the
 *      UN / BIN / TER macros, that processes one strided row. Unit-stride and
 *      stride-0 (scalar) operands get their own branch so the compiler can
 *      vectorise them; there is no per-element dispatch. float32 exp, tanh
 *      and erf (and sigmoid / silu / gelu / glu built on them) use branch-free
 *      versions that vectorise. On x86-64 every loop is also compiled for
 *      AVX2 and picked at run time (define PX_NO_CPU_DISPATCH to disable).
 *   3. Driver (px_ew_run). Same-shape contiguous operands already in the compute
 *      type are handled by a single call of the loop. Anything else goes
 *      through px_iter; operands whose dtype differs from the compute type are
 *      converted in blocks of EW_BLK elements through scratch memory.
 *   4. Kernels: argument decoding, type promotion (torch's result_type,
 *      including the lower priority of 0-d tensors and Python scalars) and
 *      the choice of loops.
 */
#ifndef PX_EW_H
#define PX_EW_H

#include <math.h>
#include <string.h>

#include "kernels/kernel.h"

/* GCC's -O2 cost model ("very-cheap") vectorises only loops whose trip count
 * is a known multiple of the vector width; ours are not, so this file asks
 * for the normal cost model. no-trapping-math lets it if-convert the selects
 * in the float32 exp / tanh / erf below (no code here reads FP exception
 * flags). clang vectorises these loops at -O2 anyway. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")
#endif

/* ---- compute kinds and loop signature ---------------------------------- */

enum { K_F32, K_F64, K_I32, K_I64, K_B, NK };
static const int kind_dtype[NK] = {PX_F32, PX_F64, PX_I32, PX_I64, PX_BOOL};

static inline int kind_of(int dtype) {
  switch (dtype) {
    case PX_F32:
    case PX_F16:
    case PX_BF16: return K_F32;
    case PX_F64: return K_F64;
    case PX_I32: return K_I32;
    case PX_BOOL: return K_B;
    default: return K_I64;
  }
}

/* Parameters of an op (alpha, bounds, slopes...). Floating loops read d[],
 * integer loops i[]. `err` is set by a loop that hit an integer division by
 * zero. */
typedef struct {
  double d[4];
  int64_t i[4];
  int err;
} eparam;

/* One row: n elements; in[k] / is[k] are input k's first element and stride
 * (in elements, possibly 0), o / os the output's. */
typedef void (*ew_fn)(int64_t n, const char *const *in, const int64_t *is, char *o,
                      int64_t os, eparam *P);

/* A float32 unary loop over contiguous arrays: what flat.h's entry points
 * (px_f32_tanh, ...) run, each from the file that stamps the loop out for
 * the tensor kernels (one copy of each loop in the library). */
static inline void ew_run_un_f32(ew_fn fn, int64_t n, const float *x, float *y) {
  const char *in[1] = {(const char *)x};
  const int64_t is[1] = {1};
  eparam p = {0};
  if (n > 0) fn(n, in, is, (char *)y, 1, &p);
}

typedef struct {
  ew_fn f[NK];
} ew_ops;

/* Reads parameter k in the loop's type (inside a loop body, where T is
 * defined). */
#define PARAM(k) \
  _Generic((T)0, float: (T)P->d[k], double: (T)P->d[k], default: (T)P->i[k])

/* float / double versions of libm functions, picked from the argument. */
#define M1(fn, x) _Generic((x), float: fn##f, default: fn)(x)
#define M2(fn, x, y) _Generic((x), float: fn##f, default: fn)((x), (y))

/* ---- scalar helpers ------------------------------------------------------ */

/* NaN-propagating maximum / minimum / clamp (torch.maximum, torch.clamp). */
#define DEF_FLOAT_HELPERS(T, SUF)                                             \
  /* Written as a plain max / min and a NaN select, the shapes GCC turns  \
   * into vector max / blend instructions (no branch per element). */       \
  static inline T maxp_##SUF(T a, T b) {                                      \
    T m = a > b ? a : b;                                                      \
    return a != a ? a : m;                                                    \
  }                                                                           \
  static inline T minp_##SUF(T a, T b) {                                      \
    T m = a < b ? a : b;                                                      \
    return a != a ? a : m;                                                    \
  }                                                                           \
  static inline T clampp_##SUF(T x, T lo, T hi) {                             \
    return minp_##SUF(maxp_##SUF(x, lo), hi);                                 \
  }                                                                           \
  /* Python-style floor division and remainder (torch's definitions). */      \
  static inline T divfloor_##SUF(T a, T b) {                                  \
    if (b == 0) return a / b;                                                 \
    T mod = M2(fmod, a, b);                                                   \
    T div = (a - mod) / b;                                                    \
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;                         \
    if (div == 0) return M2(copysign, (T)0, a / b);                           \
    T fl = M1(floor, div);                                                    \
    if (div - fl > (T)0.5) fl += 1;                                           \
    return fl;                                                                \
  }                                                                           \
  static inline T rem_##SUF(T a, T b) {                                       \
    T mod = M2(fmod, a, b);                                                   \
    if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;                         \
    return mod;                                                               \
  }
DEF_FLOAT_HELPERS(float, f)
DEF_FLOAT_HELPERS(double, d)

#define MAXP(a, b) _Generic((a), float: maxp_f, default: maxp_d)((a), (b))
#define MINP(a, b) _Generic((a), float: minp_f, default: minp_d)((a), (b))
#define CLAMPP(x, lo, hi) _Generic((x), float: clampp_f, default: clampp_d)((x), (lo), (hi))
#define DIVFLOOR(a, b) _Generic((a), float: divfloor_f, default: divfloor_d)((a), (b))
#define REMF(a, b) _Generic((a), float: rem_f, default: rem_d)((a), (b))

/* Integer division family on int64 (int32 loops use them too and truncate).
 * Division by zero sets *err; x / -1 is done as a wrapping negation (INT_MIN
 * / -1 would trap). */
static inline int64_t i_neg(int64_t x) { return (int64_t)(0 - (uint64_t)x); }
static inline int64_t i_div_trunc(int64_t x, int64_t y, int *err) {
  if (y == 0) { *err = 1; return 0; }
  if (y == -1) return i_neg(x);
  return x / y;
}
static inline int64_t i_div_floor(int64_t x, int64_t y, int *err) {
  if (y == 0) { *err = 1; return 0; }
  if (y == -1) return i_neg(x);
  int64_t q = x / y, r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) q--;
  return q;
}
static inline int64_t i_rem(int64_t x, int64_t y, int *err) {
  if (y == 0) { *err = 1; return 0; }
  if (y == -1) return 0;
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}
static inline int64_t i_fmod(int64_t x, int64_t y, int *err) {
  if (y == 0) { *err = 1; return 0; }
  if (y == -1) return 0;
  return x % y;
}
/* torch's integer pow: negative exponents give 0 except for bases +-1. */
static inline int64_t i_pow(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, base = (uint64_t)a;
  while (b) {
    if (b & 1) r *= base;
    b >>= 1;
    base *= base;
  }
  return (int64_t)r;
}
/* Shifts: amounts outside [0, bits) give 0 (left) or the sign fill (right). */
static inline int64_t i_shl(int64_t a, int64_t b, int bits) {
  if (b < 0 || b >= bits) return 0;
  return (int64_t)((uint64_t)a << b);
}
static inline int64_t i_shr(int64_t a, int64_t b, int bits) {
  if (b < 0 || b >= bits) return a < 0 ? -1 : 0;
  return a >> b;
}

/* Helpers called from loops are inlined into both clones. */
#if defined(__GNUC__)
#define FORCE_INLINE __attribute__((always_inline)) inline
#else
#define FORCE_INLINE inline
#endif

/* ---- float32 exp / tanh / erf that vectorise ------------------------------
 * Branch-free (selects only), so the loops that call them vectorise; libm's
 * expf / tanhf / erff are calls the compiler cannot vectorise. Accuracy: exp
 * within 2 ulp (Cephes' polynomial), tanh within a few ulp, erf within 2e-7
 * absolute (Abramowitz-Stegun 7.1.26, as torch's own vectorised erf; a Taylor
 * series near 0 keeps small results relatively accurate). */

static FORCE_INLINE float f_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static FORCE_INLINE uint32_t f_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* e^w = 2^n * e^r for w inside [-104, 89]: n = round(w / ln 2) by the
 * 1.5 * 2^23 trick (ties to even; *t keeps n in its low bits), r = w - n ln 2
 * in two steps, and e^r's polynomial (Cephes), which this returns. */
static FORCE_INLINE float exp_reduced(float w, float *t) {
  *t = w * 1.44269504088896341f + 12582912.0f;
  const float nf = *t - 12582912.0f;
  float r = w - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r + 1.0f;
}

static FORCE_INLINE float vexpf(float x) {
  float xc = x > -103.0f ? x : -103.0f; /* NaN -> -103 (fixed at the end) */
  xc = xc < 88.8f ? xc : 88.8f;
  float t;
  const float p = exp_reduced(xc, &t);
  int32_t n = (int32_t)(f_bits(t) - 0x4b400000u);
  /* 2^n as two factors so that n in [-149, 128] stays representable */
  int32_t n1 = n >> 1, n2 = n - n1;
  float res = p * f_from_bits((uint32_t)(n1 + 127) << 23) * f_from_bits((uint32_t)(n2 + 127) << 23);
  res = x > 88.72283935546875f ? (float)INFINITY : res;
  res = x < -103.97208404541015625f ? 0.0f : res;
  return x == x ? res : x;
}

/* sigmoid(x) = 1 / (1 + e^-x), e^-x by vexpf's reduction and polynomial,
 * so the value is 1 / (1 + vexpf(-x))'s and rounds as that does (float16
 * and bfloat16 results included), in a third fewer operations: -x is
 * clamped to [-86.6, 89]; below, e^-x < 2^-124 leaves 1 + e^-x = 1 as the
 * exact value does; above, e^-x overflows to +inf (result 0) as expf's
 * does. So 2^n is one factor 2^(n-1) (n - 1 in [-126, 127]) and an exact
 * doubling, and no overflow or underflow fix-up is needed. NaN stays NaN. */
static FORCE_INLINE float vsigmoidf(float x) {
  float w = -x > -86.6f ? -x : -86.6f; /* NaN -> -86.6, fixed at the end */
  w = w < 89.0f ? w : 89.0f;
  float t;
  const float p = exp_reduced(w, &t);
  /* t's low bits hold n: 2^(n-1)'s exponent field is n + 126 */
  float e = p * f_from_bits((f_bits(t) - 0x4b400000u + 126u) << 23);
  e = e + e;
  const float y = 1.0f / (1.0f + e);
  return x == x ? y : x;
}

static FORCE_INLINE float vtanhf(float x) {
  float ax = f_from_bits(f_bits(x) & 0x7fffffffu);
  /* |x| < 0.625: odd polynomial (Cephes) */
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  small = f_from_bits(f_bits(small) | (f_bits(x) & 0x80000000u)); /* tanh(-0) = -0 */
  /* otherwise 1 - 2 / (exp(2|x|) + 1), with x's sign */
  float big = 1.0f - 2.0f / (vexpf(2.0f * ax) + 1.0f);
  big = f_from_bits(f_bits(big) | (f_bits(x) & 0x80000000u));
  return ax < 0.625f ? small : big;
}

static FORCE_INLINE float verff(float x) {
  float ax = f_from_bits(f_bits(x) & 0x7fffffffu);
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float r = 1.061405429f;
  r = r * t - 1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t - 0.284496736f;
  r = r * t + 0.254829592f;
  float big = 1.0f - r * t * vexpf(-ax * ax);
  big = f_from_bits(f_bits(big) | (f_bits(x) & 0x80000000u));
  /* |x| < 0.25: 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216) */
  float z = x * x;
  float q = 1.0f / 216.0f;
  q = q * z - 1.0f / 42.0f;
  q = q * z + 0.1f;
  q = q * z - 1.0f / 3.0f;
  q = q * z + 1.0f;
  float small = 1.12837916709551257f * x * q;
  return ax < 0.25f ? small : (x == x ? big : x);
}

/* float64 keeps libm; the loops pick by type. */
#define EXPV(x) _Generic((x), float: vexpf, default: exp)(x)
static inline double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
#define SIGMOIDV(x) _Generic((x), float: vsigmoidf, default: sigmoid_d)(x)
#define TANHV(x) _Generic((x), float: vtanhf, default: tanh)(x)
#define ERFV(x) _Generic((x), float: verff, default: erf)(x)

/* float16 / bfloat16 <-> float, branch-free (round to nearest even). */
static FORCE_INLINE float h2f(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  uint32_t em = (uint32_t)h & 0x7fffu;
  /* exponent and mantissa moved into place, rebiased by 2^112: exact for
   * normals, subnormals and zero */
  uint32_t b = f_bits(f_from_bits(em << 13) * 0x1p112f);
  b = em >= 0x7c00u ? ((em << 13) | 0x7f800000u) : b; /* inf / nan */
  return f_from_bits(b | sign);
}
static FORCE_INLINE uint16_t f2h(float f) {
  uint32_t x = f_bits(f);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t o_inf = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  /* subnormal results: let the float adder round at the right place */
  uint32_t o_sub = f_bits(f_from_bits(x) + 0.5f) - 0x3f000000u;
  uint32_t o_norm = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
  uint32_t o = x >= 0x47800000u ? o_inf : (x < 0x38800000u ? o_sub : o_norm);
  return (uint16_t)(o | (sign >> 16));
}
static FORCE_INLINE uint16_t f2bf(float f) {
  uint32_t u = f_bits(f);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}
static FORCE_INLINE float bf2f(uint16_t b) { return f_from_bits((uint32_t)b << 16); }

/* v rounded to float16 (dt == PX_F16) or bfloat16 (otherwise): one operation
 * of c10::Half / c10::BFloat16 arithmetic, which ExecuTorch's kernels use
 * where they compute in the 16-bit type (computed in float, rounded). */
static FORCE_INLINE float r16(float v, int64_t dt) { return dt == PX_F16 ? h2f(f2h(v)) : bf2f(f2bf(v)); }

/* ---- loop generators ----------------------------------------------------- */

/* Every loop is compiled twice on x86-64: for the baseline (SSE2) and for
 * AVX2, picked at run time per call (one test of a CPU feature bit per row,
 * not per element). LOOP_FN(NAME) declares NAME (the dispatcher), the clones
 * and opens the definition of the shared body NAME##_impl. */
#define LOOP_ARGS \
  int64_t n, const char *const *in, const int64_t *is, char *po, int64_t so, eparam *P
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#define EW_CLONE_AVX2 1
/* The baseline clone runs only on x86-64 CPUs without AVX2 (none made for
 * desktops or servers since about 2013): left scalar, it keeps the library
 * inside the wheel's 1 MiB (vectorised for SSE2 it doubled these files). */
#if defined(__clang__)
#define EW_BASELINE_ATTR
#else
#define EW_BASELINE_ATTR __attribute__((optimize("no-tree-loop-vectorize", "no-tree-slp-vectorize")))
#endif
#define ALWAYS_INLINE __attribute__((always_inline)) inline
#define LOOP_FN(NAME)                                                   \
  static ALWAYS_INLINE void NAME##_impl(LOOP_ARGS);                     \
  __attribute__((target("avx2"))) static void NAME##_avx2(LOOP_ARGS) { \
    NAME##_impl(n, in, is, po, so, P);                                  \
  }                                                                     \
  EW_BASELINE_ATTR static void NAME(LOOP_ARGS) {                      \
    if (__builtin_cpu_supports("avx2"))                                 \
      NAME##_avx2(n, in, is, po, so, P);                                \
    else                                                                \
      NAME##_impl(n, in, is, po, so, P);                                \
  }                                                                     \
  static ALWAYS_INLINE void NAME##_impl(LOOP_ARGS)
/* float64, integer and bool loops are compiled once, for the baseline:
 * float64 is rare in exported programs, and their integer and bool
 * tensors are indices, shapes and masks of a few values (the heavy
 * integer work of quantized programs has kernels of its own). An AVX2
 * clone of each took 30 KB for float64 and about as much again for the
 * others. */
#define LOOP_FN1(NAME) EW_BASELINE_ATTR static void NAME(LOOP_ARGS)
#else
#define ALWAYS_INLINE inline
#define LOOP_FN(NAME) static void NAME(LOOP_ARGS)
#define LOOP_FN1(NAME) static void NAME(LOOP_ARGS)
#endif

/* Inside EXPR / PRE: T (compute type), U (its unsigned twin), x / y / z (the
 * operands), P (eparam *), err_ (set to report a division by zero),
 * PARAM(k). */
#define LOOP_HEAD(TY, UTY)                         \
  typedef TY T __attribute__((unused));            \
  typedef UTY U __attribute__((unused));           \
  int err_ = 0;

#define UN_(LF, NAME, TY, UTY, TOY, PRE, EXPR)                                        \
  LF(NAME) {                                                                      \
    LOOP_HEAD(TY, UTY)                                                           \
    const T *A = (const T *)in[0];                                               \
    TOY *O = (TOY *)po;                                                          \
    const int64_t sa = is[0];                                                    \
    PRE;                                                                         \
    if (sa == 1 && so == 1) {                                                    \
      for (int64_t k = 0; k < n; k++) {                                          \
        const T x = A[k];                                                        \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else {                                                                     \
      for (int64_t k = 0; k < n; k++) {                                          \
        const T x = A[k * sa];                                                   \
        O[k * so] = (TOY)(EXPR);                                                 \
      }                                                                          \
    }                                                                            \
    if (err_) P->err = err_;                                                     \
  }

#define BIN_(LF, NAME, TY, UTY, TOY, PRE, EXPR)                                       \
  LF(NAME) {                                                                      \
    LOOP_HEAD(TY, UTY)                                                           \
    const T *A = (const T *)in[0], *B = (const T *)in[1];                        \
    TOY *O = (TOY *)po;                                                          \
    const int64_t sa = is[0], sb = is[1];                                        \
    PRE;                                                                         \
    if (so == 1 && sa == 1 && sb == 1) {                                         \
      for (int64_t k = 0; k < n; k++) {                                          \
        const T x = A[k], y = B[k];                                              \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else if (so == 1 && sa == 1 && sb == 0) {                                  \
      const T y = B[0];                                                          \
      for (int64_t k = 0; k < n; k++) {                                          \
        const T x = A[k];                                                        \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else if (so == 1 && sa == 0 && sb == 1) {                                  \
      const T x = A[0];                                                          \
      for (int64_t k = 0; k < n; k++) {                                          \
        const T y = B[k];                                                        \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else {                                                                     \
      for (int64_t k = 0; k < n; k++) {                                          \
        const T x = A[k * sa], y = B[k * sb];                                    \
        O[k * so] = (TOY)(EXPR);                                                 \
      }                                                                          \
    }                                                                            \
    if (err_) P->err = err_;                                                     \
  }

/* Three operands; the first has type CTY (the condition of where). */
#define TER_(LF, NAME, CTY, TY, UTY, TOY, EXPR)                                       \
  LF(NAME) {                                                                      \
    LOOP_HEAD(TY, UTY)                                                           \
    (void)P;                                                                     \
    const CTY *A = (const CTY *)in[0];                                           \
    const T *B = (const T *)in[1], *C = (const T *)in[2];                        \
    TOY *O = (TOY *)po;                                                          \
    const int64_t sa = is[0], sb = is[1], sc = is[2];                            \
    if (so == 1 && sa == 1 && sb == 1 && sc == 1) {                              \
      for (int64_t k = 0; k < n; k++) {                                          \
        const CTY x = A[k];                                                      \
        const T y = B[k], z = C[k];                                              \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else if (so == 1 && sa == 1 && sb == 1 && sc == 0) {                       \
      const T z = C[0];                                                          \
      for (int64_t k = 0; k < n; k++) {                                          \
        const CTY x = A[k];                                                      \
        const T y = B[k];                                                        \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else if (so == 1 && sa == 1 && sb == 0 && sc == 1) {                       \
      const T y = B[0];                                                          \
      for (int64_t k = 0; k < n; k++) {                                          \
        const CTY x = A[k];                                                      \
        const T z = C[k];                                                        \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else if (so == 1 && sa == 1 && sb == 0 && sc == 0) {                       \
      const T y = B[0], z = C[0];                                                \
      for (int64_t k = 0; k < n; k++) {                                          \
        const CTY x = A[k];                                                      \
        O[k] = (TOY)(EXPR);                                                      \
      }                                                                          \
    } else {                                                                     \
      for (int64_t k = 0; k < n; k++) {                                          \
        const CTY x = A[k * sa];                                                 \
        const T y = B[k * sb], z = C[k * sc];                                    \
        O[k * so] = (TOY)(EXPR);                                                 \
      }                                                                          \
    }                                                                            \
    if (err_) P->err = err_;                                                     \
  }

#define UN(...) UN_(LOOP_FN, __VA_ARGS__)
#define BIN(...) BIN_(LOOP_FN, __VA_ARGS__)
#define TER(...) TER_(LOOP_FN, __VA_ARGS__)
#define UN1(...) UN_(LOOP_FN1, __VA_ARGS__)
#define BIN1(...) BIN_(LOOP_FN1, __VA_ARGS__)
#define TER1(...) TER_(LOOP_FN1, __VA_ARGS__)

/* Instantiation helpers: F = float + double, I = int32 + int64, B = bool.
 * The _OB variants write bool (uint8) results. Only float32 gets an AVX2
 * clone (the UN1 / BIN1 / TER1 forms are compiled once, above). */
#define UN_F(OP, PRE, E) \
  UN(OP##_f32, float, uint32_t, float, PRE, E) UN1(OP##_f64, double, uint64_t, double, PRE, E)
#define UN_I(OP, PRE, E)                                 \
  UN1(OP##_i32, int32_t, uint32_t, int32_t, PRE, E)     \
  UN1(OP##_i64, int64_t, uint64_t, int64_t, PRE, E)
#define UN_B(OP, PRE, E) UN1(OP##_b, uint8_t, uint8_t, uint8_t, PRE, E)
#define UN_F_OB(OP, E) \
  UN(OP##_f32, float, uint32_t, uint8_t, , E) UN1(OP##_f64, double, uint64_t, uint8_t, , E)
#define UN_I_OB(OP, E) \
  UN1(OP##_i32, int32_t, uint32_t, uint8_t, , E) UN1(OP##_i64, int64_t, uint64_t, uint8_t, , E)

#define BIN_F(OP, PRE, E) \
  BIN(OP##_f32, float, uint32_t, float, PRE, E) BIN1(OP##_f64, double, uint64_t, double, PRE, E)
#define BIN_I(OP, PRE, E)                                \
  BIN1(OP##_i32, int32_t, uint32_t, int32_t, PRE, E)    \
  BIN1(OP##_i64, int64_t, uint64_t, int64_t, PRE, E)
#define BIN_B(OP, PRE, E) BIN1(OP##_b, uint8_t, uint8_t, uint8_t, PRE, E)
#define BIN_ALL_OB(OP, E)                                 \
  BIN(OP##_f32, float, uint32_t, uint8_t, , E)            \
  BIN1(OP##_f64, double, uint64_t, uint8_t, , E)         \
  BIN1(OP##_i32, int32_t, uint32_t, uint8_t, , E)        \
  BIN1(OP##_i64, int64_t, uint64_t, uint8_t, , E)        \
  BIN1(OP##_b, uint8_t, uint8_t, uint8_t, , E)

#define OPS(NAME, F32, F64, I32, I64, B) \
  static const ew_ops NAME = {{F32, F64, I32, I64, B}};
#define OPS_F(OP) OPS(t_##OP, OP##_f32, OP##_f64, NULL, NULL, NULL)
#define OPS_FI(OP) OPS(t_##OP, OP##_f32, OP##_f64, OP##_i32, OP##_i64, NULL)
#define OPS_FIB(OP) OPS(t_##OP, OP##_f32, OP##_f64, OP##_i32, OP##_i64, OP##_b)
#define OPS_I(OP) OPS(t_##OP, NULL, NULL, OP##_i32, OP##_i64, NULL)
#define OPS_IB(OP) OPS(t_##OP, NULL, NULL, OP##_i32, OP##_i64, OP##_b)
#define OPS_B(OP) OPS(t_##OP, NULL, NULL, NULL, NULL, OP##_b)

/* ---- type promotion ------------------------------------------------------------ */

/* torch.result_type state: dimensioned tensors, 0-d tensors and Python
 * scalars are promoted separately, then combined by category. -1: none. */
typedef struct {
  int dimr, zeror, wrapr;
} rt_state;

static inline void rt_init(rt_state *s) { s->dimr = s->zeror = s->wrapr = -1; }
static inline int rt_upd(int cur, int t) { return cur < 0 ? t : px_promote(cur, t); }
static inline void rt_tensor(rt_state *s, const px_tensor *t) {
  if (t->dim == 0)
    s->zeror = rt_upd(s->zeror, t->dtype);
  else
    s->dimr = rt_upd(s->dimr, t->dtype);
}
static inline void rt_scalar(rt_state *s, const px_value *v) {
  int k = px_scalar_kind(v);
  s->wrapr = rt_upd(s->wrapr, k == PX_F64 ? PX_F32 : k);
}
static inline int rt_combine(int higher, int lower) {
  if (higher < 0) return lower;
  if (lower < 0) return higher;
  if (px_is_floating(higher)) return higher;
  if (higher == PX_BOOL || px_is_floating(lower)) return px_promote(higher, lower);
  return higher;
}
static inline int rt_result(const rt_state *s) {
  return rt_combine(s->dimr, rt_combine(s->zeror, s->wrapr));
}

/* A scalar argument as a 0-d tensor of `dtype` (reduced floats keep double
 * precision, as torch's opmath does). */
typedef struct {
  px_tensor t;
  int64_t v;
} scalar_box;

static inline const px_tensor *box_scalar(scalar_box *b, const px_value *v, int dtype) {
  memset(b, 0, sizeof *b);
  if (dtype == PX_F16 || dtype == PX_BF16) dtype = PX_F64;
  b->t.data = &b->v;
  b->t.dtype = (int8_t)dtype;
  b->t.dim = 0;
  b->t.numel = 1;
  b->t.nbytes = px_elsize(dtype);
  b->t.capacity = b->t.nbytes;
  b->t.cap_numel = 1;
  b->t.contiguous = 1;
  if (px_is_floating(dtype))
    px_store_d(&b->v, dtype, 0, px_scalar_d(v));
  else
    px_store_i(&b->v, dtype, 0, px_scalar_i(v));
  return &b->t;
}

/* ---- generic kernel bodies ------------------------------------------------------ */

enum {
  FL_FLOAT = 1,   /* integral / bool inputs compute in float */
  FL_OUTBOOL = 2, /* the loop writes bool */
  FL_LOGICAL = 4, /* inputs are read as bool, the loop writes bool */
  FL_COND0 = 8,   /* input 0 is a condition, read as bool */
  FL_NOBOOL = 16, /* refuse bool inputs (torch does) */
};

static inline bool str_is(const px_value *v, const char *s) {
  size_t n = strlen(s);
  return v->u.str.n == n && memcmp(v->u.str.p, s, n) == 0;
}

#define ARGT(k) (args[k]->u.t)

/* Binary tensor-tensor / tensor-scalar kernels with no parameters. */
#define K_TT(NAME, OPS, FLAGS)                                       \
  static int NAME(px_ctx *ctx, px_value *const *args) {              \
    eparam p = {0};                                                  \
    return px_ew_tt(ctx, &OPS, FLAGS, ARGT(0), ARGT(1), ARGT(2), &p);   \
  }
#define K_TS(NAME, OPS, FLAGS)                                              \
  static int NAME(px_ctx *ctx, px_value *const *args) {                     \
    eparam p = {0};                                                         \
    return px_ew_ts(ctx, &OPS, FLAGS, ARGT(0), args[1], false, ARGT(2), &p);   \
  }

#define K_UN(NAME, OPS, FLAGS)                                  \
  static int NAME(px_ctx *ctx, px_value *const *args) {         \
    eparam p = {0};                                             \
    return px_ew_un(ctx, &OPS, FLAGS, ARGT(0), ARGT(1), &p);       \
  }

/* ---- the driver (driver.c) ------------------------------------------------ */

/* Runs fn over out (already sized) and nin inputs that broadcast to it.
 * Input k is read as dtype want[k]; fn writes dtype odt. */
int px_ew_run(px_ctx *ctx, ew_fn fn, int nin, const px_tensor *const *ins, const int *want, px_tensor *out,
              int odt, eparam *p);
/* Picks the loop for `common` (the promoted dtype), checks the output dtype,
 * and runs it. The output must already have its final shape. */
int px_ew_apply(px_ctx *ctx, const ew_ops *ops, int flags, int common, int nin, const px_tensor *const *ins,
                px_tensor *out, eparam *p);
/* Broadcasts the inputs and resizes out to the result. */
int px_ew_resize(px_ctx *ctx, int nin, const px_tensor *const *ins, px_tensor *out);
/* Broadcasts, resizes and runs; `common` < 0: computed from the tensors. */
int px_ew_n(px_ctx *ctx, const ew_ops *ops, int flags, int common, int nin, const px_tensor *const *ins,
            px_tensor *out, eparam *p);
/* Tensor-tensor binary op. */
int px_ew_tt(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, px_tensor *b, px_tensor *out,
             eparam *p);
/* Tensor-scalar binary op (swap: the scalar is the left operand). */
int px_ew_ts(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, const px_value *s, bool swap,
             px_tensor *out, eparam *p);
/* Unary op; common is self's dtype. */
int px_ew_un(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, px_tensor *out, eparam *p);
/* The same for an op whose float32 loop (ops->f[K_F32]) is costly per
 * element (libm's erfcf): a float16 or bfloat16 `a` into an `out` of its
 * dtype, both contiguous, reads each result from a table of the loop's
 * 65536 results for that dtype (*table: NULL until the first such call
 * builds it, kept for the process), element by element the bits px_ew_un
 * computes. Other dtypes or layouts: px_ew_un. */
int px_ew_un_table16(px_ctx *ctx, const ew_ops *ops, int flags, uint16_t *_Atomic *table, px_tensor *a,
                     px_tensor *out, eparam *p);

#endif /* PX_EW_H */
