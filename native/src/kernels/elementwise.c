/*
 * elementwise.c - pointwise kernels: arithmetic, comparisons, logical and
 * bitwise operators, unary math, activations, where / masked_fill / clamp /
 * fill.
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
 *   3. Driver (ew_run). Same-shape contiguous operands already in the compute
 *      type are handled by a single call of the loop. Anything else goes
 *      through px_iter; operands whose dtype differs from the compute type are
 *      converted in blocks of EW_BLK elements through scratch memory.
 *   4. Kernels: argument decoding, type promotion (torch's result_type,
 *      including the lower priority of 0-d tensors and Python scalars) and
 *      the choice of loops.
 */
#include <math.h>
#include <string.h>

#include "../kernel.h"

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

static int kind_of(int dtype) {
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

static FORCE_INLINE float vexpf(float x) {
  float xc = x > -103.0f ? x : -103.0f; /* NaN -> -103 (fixed at the end) */
  xc = xc < 88.8f ? xc : 88.8f;
  /* n = round(x / ln 2) by the 1.5 * 2^23 trick (ties to even) */
  float t = xc * 1.44269504088896341f + 12582912.0f;
  int32_t n = (int32_t)(f_bits(t) - 0x4b400000u);
  float nf = t - 12582912.0f;
  float r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  /* 2^n as two factors so that n in [-149, 128] stays representable */
  int32_t n1 = n >> 1, n2 = n - n1;
  float res = p * f_from_bits((uint32_t)(n1 + 127) << 23) * f_from_bits((uint32_t)(n2 + 127) << 23);
  res = x > 88.72283935546875f ? (float)INFINITY : res;
  res = x < -103.97208404541015625f ? 0.0f : res;
  return x == x ? res : x;
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

static const double k_sqrt1_2 = 0.70710678118654752440;
static const double k_sqrt_2_pi = 0.79788456080286535588; /* sqrt(2 / pi) */

static FORCE_INLINE float gelu_f(float x) {
  return 0.5f * x * (1.0f + verff(x * (float)k_sqrt1_2));
}
static inline double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x * k_sqrt1_2)); }
static FORCE_INLINE float gelu_tanh_f(float x) {
  float inner = (float)k_sqrt_2_pi * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + vtanhf(inner));
}
static inline double gelu_tanh_d(double x) {
  double inner = k_sqrt_2_pi * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + tanh(inner));
}
#define GELU(x) _Generic((x), float: gelu_f, default: gelu_d)(x)
#define GELU_TANH(x) _Generic((x), float: gelu_tanh_f, default: gelu_tanh_d)(x)

/* ---- loop generators ----------------------------------------------------- */

/* Every loop is compiled twice on x86-64: for the baseline (SSE2) and for
 * AVX2, picked at run time per call (one test of a CPU feature bit per row,
 * not per element). LOOP_FN(NAME) declares NAME (the dispatcher), the clones
 * and opens the definition of the shared body NAME##_impl. */
#define LOOP_ARGS \
  int64_t n, const char *const *in, const int64_t *is, char *po, int64_t so, eparam *P
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PX_NO_CPU_DISPATCH)
#define EW_CLONE_AVX2 1
#define ALWAYS_INLINE __attribute__((always_inline)) inline
#define LOOP_FN(NAME)                                                   \
  static ALWAYS_INLINE void NAME##_impl(LOOP_ARGS);                     \
  __attribute__((target("avx2"))) static void NAME##_avx2(LOOP_ARGS) { \
    NAME##_impl(n, in, is, po, so, P);                                  \
  }                                                                     \
  static void NAME(LOOP_ARGS) {                                         \
    if (__builtin_cpu_supports("avx2"))                                 \
      NAME##_avx2(n, in, is, po, so, P);                                \
    else                                                                \
      NAME##_impl(n, in, is, po, so, P);                                \
  }                                                                     \
  static ALWAYS_INLINE void NAME##_impl(LOOP_ARGS)
#else
#define ALWAYS_INLINE inline
#define LOOP_FN(NAME) static void NAME(LOOP_ARGS)
#endif

/* Inside EXPR / PRE: T (compute type), U (its unsigned twin), x / y / z (the
 * operands), P (eparam *), err_ (set to report a division by zero),
 * PARAM(k). */
#define LOOP_HEAD(TY, UTY)                         \
  typedef TY T __attribute__((unused));            \
  typedef UTY U __attribute__((unused));           \
  int err_ = 0;

#define UN(NAME, TY, UTY, TOY, PRE, EXPR)                                        \
  LOOP_FN(NAME) {                                                                 \
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

#define BIN(NAME, TY, UTY, TOY, PRE, EXPR)                                       \
  LOOP_FN(NAME) {                                                                 \
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
#define TER(NAME, CTY, TY, UTY, TOY, EXPR)                                       \
  LOOP_FN(NAME) {                                                                 \
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

/* Instantiation helpers: F = float + double, I = int32 + int64, B = bool.
 * The _OB variants write bool (uint8) results. */
#define UN_F(OP, PRE, E) \
  UN(OP##_f32, float, uint32_t, float, PRE, E) UN(OP##_f64, double, uint64_t, double, PRE, E)
#define UN_I(OP, PRE, E)                                 \
  UN(OP##_i32, int32_t, uint32_t, int32_t, PRE, E)       \
  UN(OP##_i64, int64_t, uint64_t, int64_t, PRE, E)
#define UN_B(OP, PRE, E) UN(OP##_b, uint8_t, uint8_t, uint8_t, PRE, E)
#define UN_F_OB(OP, E) \
  UN(OP##_f32, float, uint32_t, uint8_t, , E) UN(OP##_f64, double, uint64_t, uint8_t, , E)
#define UN_I_OB(OP, E) \
  UN(OP##_i32, int32_t, uint32_t, uint8_t, , E) UN(OP##_i64, int64_t, uint64_t, uint8_t, , E)

#define BIN_F(OP, PRE, E) \
  BIN(OP##_f32, float, uint32_t, float, PRE, E) BIN(OP##_f64, double, uint64_t, double, PRE, E)
#define BIN_I(OP, PRE, E)                                \
  BIN(OP##_i32, int32_t, uint32_t, int32_t, PRE, E)      \
  BIN(OP##_i64, int64_t, uint64_t, int64_t, PRE, E)
#define BIN_B(OP, PRE, E) BIN(OP##_b, uint8_t, uint8_t, uint8_t, PRE, E)
#define BIN_ALL_OB(OP, E)                                 \
  BIN(OP##_f32, float, uint32_t, uint8_t, , E)            \
  BIN(OP##_f64, double, uint64_t, uint8_t, , E)           \
  BIN(OP##_i32, int32_t, uint32_t, uint8_t, , E)          \
  BIN(OP##_i64, int64_t, uint64_t, uint8_t, , E)          \
  BIN(OP##_b, uint8_t, uint8_t, uint8_t, , E)

#define OPS(NAME, F32, F64, I32, I64, B) \
  static const ew_ops NAME = {{F32, F64, I32, I64, B}};
#define OPS_F(OP) OPS(t_##OP, OP##_f32, OP##_f64, NULL, NULL, NULL)
#define OPS_FI(OP) OPS(t_##OP, OP##_f32, OP##_f64, OP##_i32, OP##_i64, NULL)
#define OPS_FIB(OP) OPS(t_##OP, OP##_f32, OP##_f64, OP##_i32, OP##_i64, OP##_b)
#define OPS_I(OP) OPS(t_##OP, NULL, NULL, OP##_i32, OP##_i64, NULL)
#define OPS_IB(OP) OPS(t_##OP, NULL, NULL, OP##_i32, OP##_i64, OP##_b)
#define OPS_B(OP) OPS(t_##OP, NULL, NULL, NULL, NULL, OP##_b)

/* ---- binary loops ---------------------------------------------------------- */

/* add / sub / rsub: x + alpha * y (sub and rsub negate alpha). */
BIN_F(add, const T al = PARAM(0), x + al * y)
BIN_I(add, const T al = PARAM(0), (T)((U)x + (U)al * (U)y))
OPS_FI(add)
/* alpha == 1, the common case. */
BIN_F(add1, , x + y)
BIN_I(add1, , (T)((U)x + (U)y))
OPS_FI(add1)
BIN_F(mul, , x * y)
BIN_I(mul, , (T)((U)x * (U)y))
BIN_B(mul, , x & y)
OPS_FIB(mul)
BIN_F(div, , x / y)
OPS_F(div)
BIN_F(div_trunc, , M1(trunc, x / y))
BIN_I(div_trunc, , (T)i_div_trunc(x, y, &err_))
OPS_FI(div_trunc)
BIN_F(div_floor, , DIVFLOOR(x, y))
BIN_I(div_floor, , (T)i_div_floor(x, y, &err_))
OPS_FI(div_floor)
BIN_F(remainder, , REMF(x, y))
BIN_I(remainder, , (T)i_rem(x, y, &err_))
OPS_FI(remainder)
BIN_F(fmod, , M2(fmod, x, y))
BIN_I(fmod, , (T)i_fmod(x, y, &err_))
OPS_FI(fmod)
BIN_F(atan2, , M2(atan2, x, y))
OPS_F(atan2)
BIN_F(pow, , M2(pow, x, y))
BIN_I(pow, , (T)i_pow(x, y))
OPS_FI(pow)
BIN_F(maximum, , MAXP(x, y))
BIN_I(maximum, , x > y ? x : y)
BIN_B(maximum, , x | y)
OPS_FIB(maximum)
BIN_F(minimum, , MINP(x, y))
BIN_I(minimum, , x < y ? x : y)
BIN_B(minimum, , x & y)
OPS_FIB(minimum)
BIN_I(bit_and, , x & y)
BIN_B(bit_and, , x & y)
OPS_IB(bit_and)
BIN_I(bit_or, , x | y)
BIN_B(bit_or, , x | y)
OPS_IB(bit_or)
BIN_I(bit_xor, , x ^ y)
BIN_B(bit_xor, , x ^ y)
OPS_IB(bit_xor)
BIN_I(shl, , (T)i_shl(x, y, (int)(8 * sizeof(T))))
OPS_I(shl)
BIN_I(shr, , (T)i_shr(x, y, (int)(8 * sizeof(T))))
OPS_I(shr)
/* Logical ops see their operands converted to bool (0/1). */
BIN_B(logical_and, , x & y)
OPS_B(logical_and)
BIN_B(logical_or, , x | y)
OPS_B(logical_or)
BIN_B(logical_xor, , x ^ y)
OPS_B(logical_xor)
BIN_ALL_OB(eq, x == y)
OPS_FIB(eq)
BIN_ALL_OB(ne, x != y)
OPS_FIB(ne)
BIN_ALL_OB(lt, x < y)
OPS_FIB(lt)
BIN_ALL_OB(le, x <= y)
OPS_FIB(le)
BIN_ALL_OB(gt, x > y)
OPS_FIB(gt)
BIN_ALL_OB(ge, x >= y)
OPS_FIB(ge)

/* ---- ternary loops --------------------------------------------------------- */

#define TER_ALL(OP, CTY, EF, EI, EB)                            \
  TER(OP##_f32, CTY, float, uint32_t, float, EF)                \
  TER(OP##_f64, CTY, double, uint64_t, double, EF)              \
  TER(OP##_i32, CTY, int32_t, uint32_t, int32_t, EI)            \
  TER(OP##_i64, CTY, int64_t, uint64_t, int64_t, EI)            \
  TER(OP##_b, CTY, uint8_t, uint8_t, uint8_t, EB)

/* where(cond, self, other): the condition is read as bool. */
TER_ALL(where, uint8_t, x ? y : z, x ? y : z, x ? y : z)
OPS_FIB(where)
/* clamp(self, min, max) with both bounds. */
TER_ALL(clamp, T, CLAMPP(x, y, z), (x < y ? y : x) > z ? z : (x < y ? y : x),
        (x < y ? y : x) > z ? z : (x < y ? y : x))
OPS_FIB(clamp)
/* clamp with scalar bounds (hardtanh, relu6, clamp(min=, max=)): one
 * contiguous input, so the loop vectorises instead of broadcasting two 0-d
 * tensors through the ternary one. */
UN_F(clamp_s, const T lo = PARAM(0); const T hi = PARAM(1), CLAMPP(x, lo, hi))
OPS_F(clamp_s)

/* ---- unary loops ----------------------------------------------------------- */

UN_F(copy, , x)
UN_I(copy, , x)
UN_B(copy, , x)
OPS_FIB(copy)
UN_F(neg, , -x)
UN_I(neg, , (T)(0 - (U)x))
OPS_FI(neg)
UN_F(abs, , M1(fabs, x))
UN_I(abs, , x < 0 ? (T)(0 - (U)x) : x)
OPS_FI(abs)
UN_F(relu, , x < 0 ? (T)0 : x)
UN_I(relu, , x < 0 ? (T)0 : x)
OPS_FI(relu)
UN_F(sign, , (T)((x > 0) - (x < 0)))
UN_I(sign, , (T)((x > 0) - (x < 0)))
OPS_FI(sign)
UN_I(bit_not, , ~x)
UN_B(bit_not, , x == 0)
OPS_IB(bit_not)
UN_B(logical_not, , x == 0)
OPS_B(logical_not)
UN_F(floor, , M1(floor, x))
UN_F(ceil, , M1(ceil, x))
UN_F(round, , M1(nearbyint, x))
UN_F(trunc, , M1(trunc, x))
OPS(t_floor, floor_f32, floor_f64, copy_i32, copy_i64, copy_b)
OPS(t_ceil, ceil_f32, ceil_f64, copy_i32, copy_i64, copy_b)
OPS(t_round, round_f32, round_f64, copy_i32, copy_i64, copy_b)
OPS(t_trunc, trunc_f32, trunc_f64, copy_i32, copy_i64, copy_b)
UN_F_OB(isnan, __builtin_isnan(x))
UN_I_OB(isnan, 0 * x)
OPS_FI(isnan)
UN_F_OB(isinf, __builtin_isinf(x) != 0)
UN_I_OB(isinf, 0 * x)
OPS_FI(isinf)

/* Floating-only functions (integer inputs are promoted to float). */
#define UN_MATH(OP, FN) \
  UN_F(OP, , M1(FN, x)) \
  OPS_F(OP)
UN_F(exp, , EXPV(x))
OPS_F(exp)
UN_MATH(log, log)
UN_MATH(sqrt, sqrt)
UN_F(tanh, , TANHV(x))
OPS_F(tanh)
UN_MATH(sin, sin)
UN_MATH(cos, cos)
UN_MATH(tan, tan)
UN_MATH(asin, asin)
UN_MATH(acos, acos)
UN_MATH(atan, atan)
UN_MATH(sinh, sinh)
UN_MATH(cosh, cosh)
UN_MATH(asinh, asinh)
UN_MATH(acosh, acosh)
UN_MATH(atanh, atanh)
UN_F(erf, , ERFV(x))
OPS_F(erf)
UN_MATH(expm1, expm1)
UN_MATH(log1p, log1p)
UN_MATH(log2, log2)
UN_MATH(log10, log10)
UN_F(rsqrt, , (T)1 / M1(sqrt, x))
OPS_F(rsqrt)
UN_F(reciprocal, , (T)1 / x)
OPS_F(reciprocal)
UN_F(sigmoid, , (T)1 / ((T)1 + EXPV(-x)))
OPS_F(sigmoid)
UN_F(silu, , x / ((T)1 + EXPV(-x)))
OPS_F(silu)
UN_F(gelu, , GELU(x))
OPS_F(gelu)
UN_F(gelu_tanh, , GELU_TANH(x))
OPS_F(gelu_tanh)
UN_F(hardswish, , x * CLAMPP(x + (T)3, (T)0, (T)6) / (T)6)
OPS_F(hardswish)
UN_F(hardsigmoid, , CLAMPP(x + (T)3, (T)0, (T)6) / (T)6)
OPS_F(hardsigmoid)
UN_F(leaky_relu, const T slope = PARAM(0), x > 0 ? x : x * slope)
OPS_F(leaky_relu)
/* elu: d[0] = alpha * scale, d[1] = scale, d[2] = input_scale. */
UN_F(elu, const T negc = PARAM(0); const T posc = PARAM(1); const T insc = PARAM(2),
     x <= 0 ? M1(expm1, x * insc) * negc : x * posc)
OPS_F(elu)
UN_F(logit, , M1(log, x / ((T)1 - x)))
OPS_F(logit)
/* logit with eps: d[0] = eps, d[1] = 1 - eps. */
UN_F(logit_eps, const T lo = PARAM(0); const T hi = PARAM(1),
     M1(log, (x < lo ? lo : (x > hi ? hi : x)) / ((T)1 - (x < lo ? lo : (x > hi ? hi : x)))))
OPS_F(logit_eps)

/* pow(tensor, scalar exponent): the exponents torch special-cases. */
UN_F(pow_sq, , x * x)
UN_F(pow_cube, , x * x * x)
UN_F(pow_rsq, , (T)1 / (x * x))
UN_F(pow_s, const T e = PARAM(0), M2(pow, x, e))
UN_I(pow_sq, , (T)((U)x * (U)x))
UN_I(pow_cube, , (T)((U)x * (U)x * (U)x))
UN_I(pow_s, const T e = PARAM(0), (T)i_pow(x, e))
OPS(t_pow_sq, pow_sq_f32, pow_sq_f64, pow_sq_i32, pow_sq_i64, NULL)
OPS(t_pow_cube, pow_cube_f32, pow_cube_f64, pow_cube_i32, pow_cube_i64, NULL)
OPS(t_pow_sqrt, sqrt_f32, sqrt_f64, NULL, NULL, NULL)
OPS(t_pow_rsqrt, rsqrt_f32, rsqrt_f64, NULL, NULL, NULL)
OPS(t_pow_recip, reciprocal_f32, reciprocal_f64, NULL, NULL, NULL)
OPS(t_pow_rsq, pow_rsq_f32, pow_rsq_f64, NULL, NULL, NULL)
OPS(t_pow_si, pow_s_f32, pow_s_f64, pow_s_i32, pow_s_i64, NULL)

/* ---- dtype conversion in and out of the compute type ----------------------- */

static inline int64_t f2i(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

#define G_LOOP(DT, ST, E)                          \
  {                                                \
    const ST *s_ = (const ST *)src;                \
    for (int64_t k = 0; k < n; k++) {              \
      const ST v = s_[k * st];                     \
      d[k] = (DT)(E);                              \
    }                                              \
  }                                                \
  break;

/* Integer sources, common to every destination; E converts v. */
#define G_INT_CASES(DT, E)                                      \
  case PX_I64: G_LOOP(DT, int64_t, E)                           \
  case PX_I32: G_LOOP(DT, int32_t, E)                           \
  case PX_I16: G_LOOP(DT, int16_t, E)                           \
  case PX_I8: G_LOOP(DT, int8_t, E)                             \
  case PX_U8: G_LOOP(DT, uint8_t, E)                            \
  case PX_BOOL: G_LOOP(DT, uint8_t, v != 0)

/* Reads n elements of dtype sdt at src (stride st) into d[0..n) of dtype
 * ddt (a compute dtype). */
static ALWAYS_INLINE void gather_impl(void *dst, int ddt, const char *src, int sdt, int64_t st,
                                      int64_t n) {
  switch (ddt) {
    case PX_F32: {
      float *d = dst;
      switch (sdt) {
        case PX_F32: G_LOOP(float, float, v)
        case PX_F64: G_LOOP(float, double, v)
        case PX_F16: G_LOOP(float, uint16_t, h2f(v))
        case PX_BF16: G_LOOP(float, uint16_t, bf2f(v))
        G_INT_CASES(float, v)
        default: break;
      }
      break;
    }
    case PX_F64: {
      double *d = dst;
      switch (sdt) {
        case PX_F32: G_LOOP(double, float, v)
        case PX_F64: G_LOOP(double, double, v)
        case PX_F16: G_LOOP(double, uint16_t, h2f(v))
        case PX_BF16: G_LOOP(double, uint16_t, bf2f(v))
        G_INT_CASES(double, v)
        default: break;
      }
      break;
    }
    case PX_I64: {
      int64_t *d = dst;
      switch (sdt) {
        case PX_F32: G_LOOP(int64_t, float, f2i(v))
        case PX_F64: G_LOOP(int64_t, double, f2i(v))
        case PX_F16: G_LOOP(int64_t, uint16_t, f2i(h2f(v)))
        case PX_BF16: G_LOOP(int64_t, uint16_t, f2i(bf2f(v)))
        G_INT_CASES(int64_t, v)
        default: break;
      }
      break;
    }
    case PX_I32: {
      int32_t *d = dst;
      switch (sdt) {
        case PX_F32: G_LOOP(int32_t, float, f2i(v))
        case PX_F64: G_LOOP(int32_t, double, f2i(v))
        case PX_F16: G_LOOP(int32_t, uint16_t, f2i(h2f(v)))
        case PX_BF16: G_LOOP(int32_t, uint16_t, f2i(bf2f(v)))
        G_INT_CASES(int32_t, v)
        default: break;
      }
      break;
    }
    case PX_BOOL: {
      uint8_t *d = dst;
      switch (sdt) {
        case PX_F32: G_LOOP(uint8_t, float, v != 0)
        case PX_F64: G_LOOP(uint8_t, double, v != 0)
        case PX_F16: G_LOOP(uint8_t, uint16_t, h2f(v) != 0)
        case PX_BF16: G_LOOP(uint8_t, uint16_t, bf2f(v) != 0)
        G_INT_CASES(uint8_t, v != 0)
        default: break;
      }
      break;
    }
    default: break;
  }
}

#define S_LOOP(DT, E)                               \
  {                                                 \
    DT *d_ = (DT *)dst;                             \
    for (int64_t k = 0; k < n; k++) {               \
      const ST v = s[k];                            \
      d_[k * st] = (DT)(E);                         \
    }                                               \
  }                                                 \
  break;

/* Writes n compute-type values s[0..n) to dst (dtype ddt, stride st). */
static ALWAYS_INLINE void scatter_impl(char *dst, int ddt, int64_t st, const void *src, int sdt,
                                       int64_t n) {
  switch (sdt) {
    case PX_F32: {
      typedef float ST;
      const ST *s = src;
      switch (ddt) {
        case PX_F32: S_LOOP(float, v)
        case PX_F16: S_LOOP(uint16_t, f2h(v))
        case PX_BF16: S_LOOP(uint16_t, f2bf(v))
        case PX_F64: S_LOOP(double, v)
        case PX_BOOL: S_LOOP(uint8_t, v != 0)
        default:
          for (int64_t k = 0; k < n; k++) px_store_d(dst, ddt, k * st, s[k]);
          break;
      }
      break;
    }
    case PX_F64: {
      typedef double ST;
      const ST *s = src;
      switch (ddt) {
        case PX_F32: S_LOOP(float, v)
        case PX_BOOL: S_LOOP(uint8_t, v != 0)
        default:
          for (int64_t k = 0; k < n; k++) px_store_d(dst, ddt, k * st, s[k]);
          break;
      }
      break;
    }
    case PX_I64: {
      typedef int64_t ST;
      const ST *s = src;
      switch (ddt) {
        case PX_I64: S_LOOP(int64_t, v)
        case PX_I32: S_LOOP(int32_t, v)
        case PX_I16: S_LOOP(int16_t, v)
        case PX_I8: S_LOOP(int8_t, v)
        case PX_U8: S_LOOP(uint8_t, v)
        case PX_BOOL: S_LOOP(uint8_t, v != 0)
        case PX_F32: S_LOOP(float, v)
        case PX_F64: S_LOOP(double, v)
        default:
          for (int64_t k = 0; k < n; k++) px_store_i(dst, ddt, k * st, s[k]);
          break;
      }
      break;
    }
    case PX_I32: {
      typedef int32_t ST;
      const ST *s = src;
      switch (ddt) {
        case PX_I64: S_LOOP(int64_t, v)
        case PX_I16: S_LOOP(int16_t, v)
        case PX_I8: S_LOOP(int8_t, v)
        case PX_U8: S_LOOP(uint8_t, v)
        case PX_BOOL: S_LOOP(uint8_t, v != 0)
        case PX_F32: S_LOOP(float, v)
        default:
          for (int64_t k = 0; k < n; k++) px_store_i(dst, ddt, k * st, s[k]);
          break;
      }
      break;
    }
    default: { /* bool */
      const uint8_t *s = src;
      for (int64_t k = 0; k < n; k++) px_store_i(dst, ddt, k * st, s[k] != 0);
      break;
    }
  }
}

#ifdef EW_CLONE_AVX2
__attribute__((target("avx2"))) static void gather_avx2(void *dst, int ddt, const char *src,
                                                        int sdt, int64_t st, int64_t n) {
  gather_impl(dst, ddt, src, sdt, st, n);
}
__attribute__((target("avx2"))) static void scatter_avx2(char *dst, int ddt, int64_t st,
                                                         const void *src, int sdt, int64_t n) {
  scatter_impl(dst, ddt, st, src, sdt, n);
}
#endif
static void gather(void *dst, int ddt, const char *src, int sdt, int64_t st, int64_t n) {
#ifdef EW_CLONE_AVX2
  if (__builtin_cpu_supports("avx2")) {
    gather_avx2(dst, ddt, src, sdt, st, n);
    return;
  }
#endif
  gather_impl(dst, ddt, src, sdt, st, n);
}
static void scatter(char *dst, int ddt, int64_t st, const void *src, int sdt, int64_t n) {
#ifdef EW_CLONE_AVX2
  if (__builtin_cpu_supports("avx2")) {
    scatter_avx2(dst, ddt, st, src, sdt, n);
    return;
  }
#endif
  scatter_impl(dst, ddt, st, src, sdt, n);
}

/* ---- driver ------------------------------------------------------------------ */

#define EW_BLK 512
#define EW_MAXIN 3

/* Runs fn over out (already sized) and nin inputs that broadcast to it.
 * Input k is read as dtype want[k]; fn writes dtype odt. */
static int ew_run(px_ctx *ctx, ew_fn fn, int nin, const px_tensor *const *ins,
                  const int *want, px_tensor *out, int odt, eparam *p) {
  const int64_t n = out->numel;
  /* Every input must broadcast to the output's shape. */
  for (int i = 0; i < nin; i++) {
    const px_tensor *t = ins[i];
    if (t->dim > out->dim)
      return px_fail(ctx, "input %d has rank %d, more than the output's %d", i, t->dim,
                     out->dim);
    for (int k = 0; k < t->dim; k++) {
      int64_t s = t->sizes[k], os = out->sizes[out->dim - t->dim + k];
      if (s != 1 && s != os)
        return px_fail(ctx, "input %d has size %lld at dim %d, output has %lld", i,
                       (long long)s, k, (long long)os);
    }
  }
  if (n == 0) return 0;

  /* One-element inputs of another dtype are converted once, here. */
  px_tensor tmp[EW_MAXIN];
  int64_t tmpv[EW_MAXIN];
  const px_tensor *in[EW_MAXIN];
  for (int i = 0; i < nin; i++) {
    in[i] = ins[i];
    if (ins[i]->numel == 1 && ins[i]->dtype != want[i]) {
      memset(&tmp[i], 0, sizeof tmp[i]);
      tmp[i].data = &tmpv[i];
      tmp[i].dtype = (int8_t)want[i];
      tmp[i].numel = 1;
      tmp[i].contiguous = 1;
      gather(&tmpv[i], want[i], ins[i]->data, ins[i]->dtype, 0, 1);
      in[i] = &tmp[i];
    }
  }

  bool oconv = out->dtype != odt;
  bool conv[EW_MAXIN];
  bool any_conv = oconv;
  bool simple = !oconv && out->contiguous;
  for (int i = 0; i < nin; i++) {
    conv[i] = in[i]->dtype != want[i];
    any_conv = any_conv || conv[i];
    if (conv[i] || !in[i]->contiguous || (in[i]->numel != n && in[i]->numel != 1))
      simple = false;
  }
  const char *ptr[EW_MAXIN];
  int64_t str[EW_MAXIN];
  if (simple) {
    for (int i = 0; i < nin; i++) {
      ptr[i] = (const char *)in[i]->data;
      str[i] = in[i]->numel == n ? 1 : 0;
    }
    fn(n, ptr, str, (char *)out->data, 1, p);
  } else {
    px_iter it;
    px_iter_init(&it, out->dim, out->sizes);
    px_iter_add(&it, out);
    for (int i = 0; i < nin; i++) px_iter_add(&it, in[i]);
    px_iter_coalesce(&it);
    void *buf[EW_MAXIN] = {NULL, NULL, NULL};
    void *obuf = NULL;
    for (int i = 0; i < nin; i++)
      if (conv[i] && !(buf[i] = px_scratch(ctx, EW_BLK * 8))) return PYEXEC_ERR_EXECUTION;
    if (oconv && !(obuf = px_scratch(ctx, EW_BLK * 8))) return PYEXEC_ERR_EXECUTION;
    const size_t oes = px_elsize(out->dtype);
    size_t ies[EW_MAXIN];
    for (int i = 0; i < nin; i++) ies[i] = px_elsize(in[i]->dtype);
    const int64_t blk = any_conv ? EW_BLK : it.inner;
    do {
      for (int64_t s = 0; s < it.inner; s += blk) {
        int64_t m = it.inner - s < blk ? it.inner - s : blk;
        for (int i = 0; i < nin; i++) {
          int64_t st = it.inner_stride[i + 1];
          const char *base =
              (const char *)in[i]->data + (size_t)(it.off[i + 1] + s * st) * ies[i];
          if (conv[i]) {
            /* a broadcast row needs only its one element converted */
            gather(buf[i], want[i], base, in[i]->dtype, st, st == 0 ? 1 : m);
            ptr[i] = buf[i];
            str[i] = st == 0 ? 0 : 1;
          } else {
            ptr[i] = base;
            str[i] = st;
          }
        }
        int64_t ost = it.inner_stride[0];
        char *obase = (char *)out->data + (size_t)(it.off[0] + s * ost) * oes;
        if (oconv) {
          fn(m, ptr, str, obuf, 1, p);
          scatter(obase, out->dtype, ost, obuf, odt, m);
        } else {
          fn(m, ptr, str, obase, ost, p);
        }
      }
    } while (px_iter_next(&it));
  }
  if (p->err) return px_fail(ctx, "ZeroDivisionError");
  return 0;
}

/* ---- type promotion ------------------------------------------------------------ */

/* torch.result_type state: dimensioned tensors, 0-d tensors and Python
 * scalars are promoted separately, then combined by category. -1: none. */
typedef struct {
  int dimr, zeror, wrapr;
} rt_state;

static void rt_init(rt_state *s) { s->dimr = s->zeror = s->wrapr = -1; }
static int rt_upd(int cur, int t) { return cur < 0 ? t : px_promote(cur, t); }
static void rt_tensor(rt_state *s, const px_tensor *t) {
  if (t->dim == 0)
    s->zeror = rt_upd(s->zeror, t->dtype);
  else
    s->dimr = rt_upd(s->dimr, t->dtype);
}
static void rt_scalar(rt_state *s, const px_value *v) {
  int k = px_scalar_kind(v);
  s->wrapr = rt_upd(s->wrapr, k == PX_F64 ? PX_F32 : k);
}
static int rt_combine(int higher, int lower) {
  if (higher < 0) return lower;
  if (lower < 0) return higher;
  if (px_is_floating(higher)) return higher;
  if (higher == PX_BOOL || px_is_floating(lower)) return px_promote(higher, lower);
  return higher;
}
static int rt_result(const rt_state *s) {
  return rt_combine(s->dimr, rt_combine(s->zeror, s->wrapr));
}

/* torch's canCast: no floating -> integral, no non-bool -> bool. */
static bool can_cast(int from, int to) {
  if (px_is_floating(from) && !px_is_floating(to)) return false;
  if (from != PX_BOOL && to == PX_BOOL) return false;
  return true;
}

/* A scalar argument as a 0-d tensor of `dtype` (reduced floats keep double
 * precision, as torch's opmath does). */
typedef struct {
  px_tensor t;
  int64_t v;
} scalar_box;

static const px_tensor *box_scalar(scalar_box *b, const px_value *v, int dtype) {
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

/* Picks the loop for `common` (the promoted dtype), checks the output dtype,
 * and runs it. The output must already have its final shape. */
static int ew_apply(px_ctx *ctx, const ew_ops *ops, int flags, int common, int nin,
                    const px_tensor *const *ins, px_tensor *out, eparam *p) {
  if ((flags & FL_NOBOOL) && common == PX_BOOL)
    return px_fail(ctx, "not supported for bool tensors");
  int k;
  if (flags & FL_LOGICAL) {
    k = K_B;
  } else {
    if ((flags & FL_FLOAT) && !px_is_floating(common))
      common = out->dtype == PX_F64 ? PX_F64 : PX_F32;
    if (!(flags & FL_OUTBOOL) && !can_cast(common, out->dtype))
      return px_fail(ctx, "result type %s can't be cast to the desired output type %s",
                     px_dtype_name(common), px_dtype_name(out->dtype));
    k = kind_of(common);
    if (!ops->f[k] && (k == K_B || k == K_I32)) k = K_I64;
  }
  ew_fn fn = ops->f[k];
  if (!fn) return px_fail(ctx, "not implemented for dtype %s", px_dtype_name(common));
  int want[EW_MAXIN];
  for (int i = 0; i < nin; i++) want[i] = kind_dtype[k];
  if (flags & FL_COND0) want[0] = PX_BOOL;
  int odt = (flags & (FL_OUTBOOL | FL_LOGICAL)) ? PX_BOOL : kind_dtype[k];
  p->err = 0;
  return ew_run(ctx, fn, nin, ins, want, out, odt, p);
}

/* Broadcasts the inputs and resizes out to the result. */
static int ew_resize(px_ctx *ctx, int nin, const px_tensor *const *ins, px_tensor *out) {
  int dim = 0;
  int64_t sizes[PX_MAX_DIM];
  for (int i = 0; i < nin; i++) {
    int64_t nsizes[PX_MAX_DIM];
    int ndim;
    if (px_broadcast_sizes(ctx, dim, sizes, ins[i]->dim, ins[i]->sizes, &ndim, nsizes))
      return PYEXEC_ERR_EXECUTION;
    dim = ndim;
    memcpy(sizes, nsizes, sizeof(int64_t) * (size_t)dim);
  }
  return px_resize(ctx, out, dim, sizes);
}

/* Broadcasts, resizes and runs; `common` < 0: computed from the tensors. */
static int ew_n(px_ctx *ctx, const ew_ops *ops, int flags, int common, int nin,
                const px_tensor *const *ins, px_tensor *out, eparam *p) {
  if (ew_resize(ctx, nin, ins, out)) return PYEXEC_ERR_EXECUTION;
  if (common < 0) {
    rt_state s;
    rt_init(&s);
    for (int i = (flags & FL_COND0) ? 1 : 0; i < nin; i++) rt_tensor(&s, ins[i]);
    common = rt_result(&s);
  }
  return ew_apply(ctx, ops, flags, common, nin, ins, out, p);
}

/* Tensor-tensor binary op. */
static int ew_tt(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, px_tensor *b,
                 px_tensor *out, eparam *p) {
  const px_tensor *ins[2] = {a, b};
  return ew_n(ctx, ops, flags, -1, 2, ins, out, p);
}

/* Tensor-scalar binary op (swap: the scalar is the left operand). */
static int ew_ts(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, const px_value *s,
                 bool swap, px_tensor *out, eparam *p) {
  rt_state st;
  rt_init(&st);
  rt_tensor(&st, a);
  rt_scalar(&st, s);
  int common = rt_result(&st);
  scalar_box box;
  const px_tensor *bs = box_scalar(&box, s, common);
  const px_tensor *ins[2] = {swap ? bs : a, swap ? a : bs};
  if (px_resize_like(ctx, out, a)) return PYEXEC_ERR_EXECUTION;
  return ew_apply(ctx, ops, flags, common, 2, ins, out, p);
}

/* Unary op; common is self's dtype. */
static int ew_un(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, px_tensor *out,
                 eparam *p) {
  const px_tensor *ins[1] = {a};
  if (px_resize_like(ctx, out, a)) return PYEXEC_ERR_EXECUTION;
  return ew_apply(ctx, ops, flags, a->dtype, 1, ins, out, p);
}

static bool str_is(const px_value *v, const char *s) {
  size_t n = strlen(s);
  return v->u.str.n == n && memcmp(v->u.str.p, s, n) == 0;
}

#define ARGT(k) (args[k]->u.t)

/* ---- arithmetic ------------------------------------------------------------------ */

static void set_alpha(eparam *p, const px_value *alpha, bool negate) {
  memset(p, 0, sizeof *p);
  double d = px_scalar_d(alpha);
  int64_t i = px_scalar_i(alpha);
  p->d[0] = negate ? -d : d;
  p->i[0] = negate ? i_neg(i) : i;
}

static bool alpha_is_one(const px_value *alpha) { return px_scalar_d(alpha) == 1.0; }

static int k_add_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], false);
  return ew_tt(ctx, alpha_is_one(args[2]) ? &t_add1 : &t_add, 0, ARGT(0), ARGT(1), ARGT(3),
               &p);
}
static int k_add_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], false);
  return ew_ts(ctx, alpha_is_one(args[2]) ? &t_add1 : &t_add, 0, ARGT(0), args[1], false,
               ARGT(3), &p);
}
static int k_sub_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], true);
  return ew_tt(ctx, &t_add, FL_NOBOOL, ARGT(0), ARGT(1), ARGT(3), &p);
}
static int k_sub_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p;
  set_alpha(&p, args[2], true);
  return ew_ts(ctx, &t_add, FL_NOBOOL, ARGT(0), args[1], false, ARGT(3), &p);
}
static int k_rsub_scalar_out(px_ctx *ctx, px_value *const *args) {
  /* other - alpha * self == other + (-alpha) * self */
  eparam p;
  set_alpha(&p, args[2], true);
  return ew_ts(ctx, &t_add, FL_NOBOOL, ARGT(0), args[1], true, ARGT(3), &p);
}
static int k_mul_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return ew_tt(ctx, &t_mul, 0, ARGT(0), ARGT(1), ARGT(2), &p);
}
static int k_mul_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return ew_ts(ctx, &t_mul, 0, ARGT(0), args[1], false, ARGT(2), &p);
}

/* rounding_mode: NULL/None -> true division, "trunc", "floor". */
static int div_mode(px_ctx *ctx, const px_value *mode, const ew_ops **ops, int *flags) {
  if (!mode || mode->tag == PX_V_NONE) {
    *ops = &t_div;
    *flags = FL_FLOAT;
  } else if (str_is(mode, "trunc")) {
    *ops = &t_div_trunc;
    *flags = FL_NOBOOL;
  } else if (str_is(mode, "floor")) {
    *ops = &t_div_floor;
    *flags = FL_NOBOOL;
  } else {
    return px_fail(ctx, "rounding_mode must be None, 'trunc' or 'floor', got '%.*s'",
                   (int)mode->u.str.n, mode->u.str.p);
  }
  return 0;
}
static int k_div_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return ew_tt(ctx, &t_div, FL_FLOAT, ARGT(0), ARGT(1), ARGT(2), &p);
}
static int k_div_out_mode(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  const ew_ops *ops = NULL;
  int flags = 0;
  if (div_mode(ctx, args[2], &ops, &flags)) return PYEXEC_ERR_EXECUTION;
  return ew_tt(ctx, ops, flags, ARGT(0), ARGT(1), ARGT(3), &p);
}
static int k_div_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return ew_ts(ctx, &t_div, FL_FLOAT, ARGT(0), args[1], false, ARGT(2), &p);
}
static int k_div_scalar_mode_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  const ew_ops *ops = NULL;
  int flags = 0;
  if (div_mode(ctx, args[2], &ops, &flags)) return PYEXEC_ERR_EXECUTION;
  return ew_ts(ctx, ops, flags, ARGT(0), args[1], false, ARGT(3), &p);
}
static int k_floor_divide_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return ew_tt(ctx, &t_div_floor, FL_NOBOOL, ARGT(0), ARGT(1), ARGT(2), &p);
}

/* Binary tensor-tensor / tensor-scalar kernels with no parameters. */
#define K_TT(NAME, OPS, FLAGS)                                       \
  static int NAME(px_ctx *ctx, px_value *const *args) {              \
    eparam p = {0};                                                  \
    return ew_tt(ctx, &OPS, FLAGS, ARGT(0), ARGT(1), ARGT(2), &p);   \
  }
#define K_TS(NAME, OPS, FLAGS)                                              \
  static int NAME(px_ctx *ctx, px_value *const *args) {                     \
    eparam p = {0};                                                         \
    return ew_ts(ctx, &OPS, FLAGS, ARGT(0), args[1], false, ARGT(2), &p);   \
  }

K_TT(k_remainder_tensor_out, t_remainder, FL_NOBOOL)
K_TS(k_remainder_scalar_out, t_remainder, FL_NOBOOL)
K_TT(k_fmod_tensor_out, t_fmod, FL_NOBOOL)
K_TS(k_fmod_scalar_out, t_fmod, FL_NOBOOL)
K_TT(k_atan2_out, t_atan2, FL_FLOAT)
K_TT(k_maximum_out, t_maximum, 0)
K_TT(k_minimum_out, t_minimum, 0)
K_TT(k_pow_tt_out, t_pow, FL_NOBOOL)

K_TT(k_eq_tensor_out, t_eq, FL_OUTBOOL)
K_TS(k_eq_scalar_out, t_eq, FL_OUTBOOL)
K_TT(k_ne_tensor_out, t_ne, FL_OUTBOOL)
K_TS(k_ne_scalar_out, t_ne, FL_OUTBOOL)
K_TT(k_lt_tensor_out, t_lt, FL_OUTBOOL)
K_TS(k_lt_scalar_out, t_lt, FL_OUTBOOL)
K_TT(k_le_tensor_out, t_le, FL_OUTBOOL)
K_TS(k_le_scalar_out, t_le, FL_OUTBOOL)
K_TT(k_gt_tensor_out, t_gt, FL_OUTBOOL)
K_TS(k_gt_scalar_out, t_gt, FL_OUTBOOL)
K_TT(k_ge_tensor_out, t_ge, FL_OUTBOOL)
K_TS(k_ge_scalar_out, t_ge, FL_OUTBOOL)

K_TT(k_logical_and_out, t_logical_and, FL_LOGICAL)
K_TT(k_logical_or_out, t_logical_or, FL_LOGICAL)
K_TT(k_logical_xor_out, t_logical_xor, FL_LOGICAL)

/* Bitwise ops exist for integral and bool tensors only. */
static int need_integral(px_ctx *ctx, const px_tensor *a, const px_tensor *b) {
  if (px_is_floating(a->dtype) || (b && px_is_floating(b->dtype)))
    return px_fail(ctx, "not implemented for floating tensors (%s%s%s)",
                   px_dtype_name(a->dtype), b ? ", " : "", b ? px_dtype_name(b->dtype) : "");
  return 0;
}
static int need_integral_scalar(px_ctx *ctx, const px_tensor *a, const px_value *s) {
  if (need_integral(ctx, a, NULL)) return PYEXEC_ERR_EXECUTION;
  if (s->tag == PX_V_DOUBLE) return px_fail(ctx, "not implemented for a float scalar");
  return 0;
}
#define K_BIT_TT(NAME, OPS, FLAGS)                                              \
  static int NAME(px_ctx *ctx, px_value *const *args) {                         \
    eparam p = {0};                                                             \
    if (need_integral(ctx, ARGT(0), ARGT(1))) return PYEXEC_ERR_EXECUTION;      \
    return ew_tt(ctx, &OPS, FLAGS, ARGT(0), ARGT(1), ARGT(2), &p);              \
  }
#define K_BIT_TS(NAME, OPS, FLAGS)                                                   \
  static int NAME(px_ctx *ctx, px_value *const *args) {                              \
    eparam p = {0};                                                                  \
    if (need_integral_scalar(ctx, ARGT(0), args[1])) return PYEXEC_ERR_EXECUTION;    \
    return ew_ts(ctx, &OPS, FLAGS, ARGT(0), args[1], false, ARGT(2), &p);            \
  }
K_BIT_TT(k_bitwise_and_tensor_out, t_bit_and, 0)
K_BIT_TS(k_bitwise_and_scalar_out, t_bit_and, 0)
K_BIT_TT(k_bitwise_or_tensor_out, t_bit_or, 0)
K_BIT_TS(k_bitwise_or_scalar_out, t_bit_or, 0)
K_BIT_TT(k_bitwise_xor_tensor_out, t_bit_xor, 0)
K_BIT_TS(k_bitwise_xor_scalar_out, t_bit_xor, 0)
K_BIT_TT(k_lshift_tensor_out, t_shl, 0)
K_BIT_TS(k_lshift_scalar_out, t_shl, 0)
K_BIT_TT(k_rshift_tensor_out, t_shr, 0)
K_BIT_TS(k_rshift_scalar_out, t_shr, 0)

static int k_bitwise_not_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  if (need_integral(ctx, ARGT(0), NULL)) return PYEXEC_ERR_EXECUTION;
  return ew_un(ctx, &t_bit_not, 0, ARGT(0), ARGT(1), &p);
}
static int k_logical_not_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  return ew_un(ctx, &t_logical_not, FL_LOGICAL, ARGT(0), ARGT(1), &p);
}

/* ---- pow ------------------------------------------------------------------------ */

static int k_pow_ts_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *a = ARGT(0), *out = ARGT(2);
  const px_value *e = args[1];
  eparam p = {0};
  rt_state st;
  rt_init(&st);
  rt_tensor(&st, a);
  rt_scalar(&st, e);
  int common = rt_result(&st);
  if (common == PX_BOOL) common = PX_I64; /* bool ** bool is integral in torch */
  if (px_resize_like(ctx, out, a)) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[1] = {a};
  const ew_ops *ops = &t_pow_si;
  if (px_is_floating(common)) {
    double d = px_scalar_d(e);
    /* torch uses sqrt / rsqrt / reciprocal for these exponents except for
     * float16, where it calls pow (they differ at -inf and -0) */
    bool special = common != PX_F16;
    if (d == 2.0)
      ops = &t_pow_sq;
    else if (d == 3.0)
      ops = &t_pow_cube;
    else if (special && d == 0.5)
      ops = &t_pow_sqrt;
    else if (special && d == -0.5)
      ops = &t_pow_rsqrt;
    else if (special && d == -1.0)
      ops = &t_pow_recip;
    else if (d == -2.0)
      ops = &t_pow_rsq;
    p.d[0] = d;
  } else {
    int64_t i = px_scalar_i(e);
    if (i < 0) return px_fail(ctx, "Integers to negative integer powers are not allowed.");
    if (i == 2)
      ops = &t_pow_sq;
    else if (i == 3)
      ops = &t_pow_cube;
    p.i[0] = i;
  }
  return ew_apply(ctx, ops, 0, common, 1, ins, out, &p);
}

static int k_pow_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  rt_state st;
  rt_init(&st);
  rt_tensor(&st, ARGT(1));
  rt_scalar(&st, args[0]);
  int common = rt_result(&st);
  if (common == PX_BOOL) common = PX_I64;
  scalar_box box;
  const px_tensor *ins[2] = {box_scalar(&box, args[0], common), ARGT(1)};
  if (px_resize_like(ctx, ARGT(2), ARGT(1))) return PYEXEC_ERR_EXECUTION;
  return ew_apply(ctx, &t_pow, 0, common, 2, ins, ARGT(2), &p);
}

/* ---- where, masked_fill, clamp --------------------------------------------------- */

static int check_cond(px_ctx *ctx, const px_tensor *c, const char *what) {
  if (c->dtype != PX_BOOL && c->dtype != PX_U8)
    return px_fail(ctx, "%s must be bool, got %s", what, px_dtype_name(c->dtype));
  return 0;
}

static int k_where_self_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  if (check_cond(ctx, ARGT(0), "condition")) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[3] = {ARGT(0), ARGT(1), ARGT(2)};
  return ew_n(ctx, &t_where, FL_COND0, -1, 3, ins, ARGT(3), &p);
}

static int k_masked_fill_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *self = ARGT(0), *mask = ARGT(1), *out = ARGT(3);
  if (check_cond(ctx, mask, "mask")) return PYEXEC_ERR_EXECUTION;
  /* the output has the broadcast shape of self and mask (as torch's
   * out-of-place masked_fill) */
  const px_tensor *shape_of[2] = {self, mask};
  if (ew_resize(ctx, 2, shape_of, out)) return PYEXEC_ERR_EXECUTION;
  scalar_box box;
  const px_tensor *ins[3] = {mask, box_scalar(&box, args[2], self->dtype), self};
  return ew_apply(ctx, &t_where, FL_COND0, self->dtype, 3, ins, out, &p);
}

/* clamp with optional bounds: both -> ternary clamp, one -> maximum / minimum,
 * none -> an error (as torch). */
static int clamp_run(px_ctx *ctx, int common, px_tensor *self, const px_tensor *lo,
                     const px_tensor *hi, px_tensor *out) {
  eparam p = {0};
  if (common == PX_BOOL) return px_fail(ctx, "not implemented for bool tensors");
  if (lo && hi) {
    const px_tensor *ins[3] = {self, lo, hi};
    return ew_apply(ctx, &t_clamp, 0, common, 3, ins, out, &p);
  }
  const px_tensor *ins[2] = {self, lo ? lo : hi};
  return ew_apply(ctx, lo ? &t_maximum : &t_minimum, 0, common, 2, ins, out, &p);
}

/* Float self and out of one dtype, scalar bounds: the unary clamp. */
static bool clamp_scalar_fast(const px_tensor *self, const px_tensor *out, int common) {
  return (self->dtype == PX_F32 || self->dtype == PX_F64) && common == self->dtype && out->dtype == self->dtype;
}

static int clamp_scalar_run(px_ctx *ctx, px_tensor *self, const px_value *lo, const px_value *hi,
                            px_tensor *out) {
  eparam p = {0};
  p.d[0] = lo ? px_scalar_d(lo) : -INFINITY;
  p.d[1] = hi ? px_scalar_d(hi) : INFINITY;
  return ew_un(ctx, &t_clamp_s, FL_FLOAT, self, out, &p);
}

static int k_clamp_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = ARGT(0), *out = ARGT(3);
  bool has_lo = args[1]->tag != PX_V_NONE, has_hi = args[2]->tag != PX_V_NONE;
  if (!has_lo && !has_hi) return px_fail(ctx, "at least one of 'min' or 'max' must not be None");
  rt_state st;
  rt_init(&st);
  rt_tensor(&st, self);
  if (has_lo) rt_scalar(&st, args[1]);
  if (has_hi) rt_scalar(&st, args[2]);
  int common = rt_result(&st);
  if (px_resize_like(ctx, out, self)) return PYEXEC_ERR_EXECUTION;
  if (clamp_scalar_fast(self, out, common))
    return clamp_scalar_run(ctx, self, has_lo ? args[1] : NULL, has_hi ? args[2] : NULL, out);
  scalar_box blo, bhi;
  const px_tensor *lo = has_lo ? box_scalar(&blo, args[1], common) : NULL;
  const px_tensor *hi = has_hi ? box_scalar(&bhi, args[2], common) : NULL;
  return clamp_run(ctx, common, self, lo, hi, out);
}

static int k_clamp_tensor_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = ARGT(0), *out = ARGT(3);
  const px_tensor *lo = args[1]->tag == PX_V_NONE ? NULL : ARGT(1);
  const px_tensor *hi = args[2]->tag == PX_V_NONE ? NULL : ARGT(2);
  if (!lo && !hi) return px_fail(ctx, "at least one of 'min' or 'max' must not be None");
  const px_tensor *ins[3];
  int nin = 0;
  ins[nin++] = self;
  if (lo) ins[nin++] = lo;
  if (hi) ins[nin++] = hi;
  if (ew_resize(ctx, nin, ins, out)) return PYEXEC_ERR_EXECUTION;
  rt_state st;
  rt_init(&st);
  for (int i = 0; i < nin; i++) rt_tensor(&st, ins[i]);
  return clamp_run(ctx, rt_result(&st), self, lo, hi, out);
}

static int k_hardtanh_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = ARGT(0), *out = ARGT(3);
  if (px_resize_like(ctx, out, self)) return PYEXEC_ERR_EXECUTION;
  if (clamp_scalar_fast(self, out, self->dtype)) return clamp_scalar_run(ctx, self, args[1], args[2], out);
  scalar_box blo, bhi;
  const px_tensor *lo = box_scalar(&blo, args[1], self->dtype);
  const px_tensor *hi = box_scalar(&bhi, args[2], self->dtype);
  return clamp_run(ctx, self->dtype, self, lo, hi, out);
}

/* ---- fill ------------------------------------------------------------------------- */

static int k_fill_scalar_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *out = ARGT(2);
  if (px_resize_like(ctx, out, ARGT(0))) return PYEXEC_ERR_EXECUTION;
  scalar_box box;
  const px_tensor *ins[1] = {box_scalar(&box, args[1], out->dtype)};
  return ew_apply(ctx, &t_copy, 0, out->dtype, 1, ins, out, &p);
}

static int k_fill_tensor_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *value = ARGT(1), *out = ARGT(2);
  if (value->dim != 0)
    return px_fail(ctx, "fill only supports a 0-dimension value tensor, got %d dimensions",
                   value->dim);
  if (px_resize_like(ctx, out, ARGT(0))) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[1] = {value};
  /* the value is cast to the output's dtype (no promotion check, as torch) */
  int k = kind_of(out->dtype);
  int want[1] = {kind_dtype[k]};
  return ew_run(ctx, t_copy.f[k], 1, ins, want, out, kind_dtype[k], &p);
}

static int k_scalar_tensor_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *out = ARGT(1);
  if (px_resize(ctx, out, 0, NULL)) return PYEXEC_ERR_EXECUTION;
  scalar_box box;
  const px_tensor *ins[1] = {box_scalar(&box, args[0], out->dtype)};
  int k = kind_of(out->dtype);
  int want[1] = {kind_dtype[k]};
  return ew_run(ctx, t_copy.f[k], 1, ins, want, out, kind_dtype[k], &p);
}

/* ---- unary kernels ---------------------------------------------------------------- */

#define K_UN(NAME, OPS, FLAGS)                                  \
  static int NAME(px_ctx *ctx, px_value *const *args) {         \
    eparam p = {0};                                             \
    return ew_un(ctx, &OPS, FLAGS, ARGT(0), ARGT(1), &p);       \
  }

K_UN(k_neg_out, t_neg, FL_NOBOOL)
K_UN(k_abs_out, t_abs, 0)
K_UN(k_relu_out, t_relu, 0)
K_UN(k_sign_out, t_sign, 0)
K_UN(k_floor_out, t_floor, 0)
K_UN(k_ceil_out, t_ceil, 0)
K_UN(k_round_out, t_round, 0)
K_UN(k_trunc_out, t_trunc, 0)
K_UN(k_isnan_out, t_isnan, FL_OUTBOOL)
K_UN(k_isinf_out, t_isinf, FL_OUTBOOL)
K_UN(k_exp_out, t_exp, FL_FLOAT)
K_UN(k_log_out, t_log, FL_FLOAT)
K_UN(k_sqrt_out, t_sqrt, FL_FLOAT)
K_UN(k_rsqrt_out, t_rsqrt, FL_FLOAT)
K_UN(k_tanh_out, t_tanh, FL_FLOAT)
K_UN(k_sigmoid_out, t_sigmoid, FL_FLOAT)
K_UN(k_sin_out, t_sin, FL_FLOAT)
K_UN(k_cos_out, t_cos, FL_FLOAT)
K_UN(k_tan_out, t_tan, FL_FLOAT)
K_UN(k_asin_out, t_asin, FL_FLOAT)
K_UN(k_acos_out, t_acos, FL_FLOAT)
K_UN(k_atan_out, t_atan, FL_FLOAT)
K_UN(k_sinh_out, t_sinh, FL_FLOAT)
K_UN(k_cosh_out, t_cosh, FL_FLOAT)
K_UN(k_asinh_out, t_asinh, FL_FLOAT)
K_UN(k_acosh_out, t_acosh, FL_FLOAT)
K_UN(k_atanh_out, t_atanh, FL_FLOAT)
K_UN(k_erf_out, t_erf, FL_FLOAT)
K_UN(k_expm1_out, t_expm1, FL_FLOAT)
K_UN(k_log1p_out, t_log1p, FL_FLOAT)
K_UN(k_log2_out, t_log2, FL_FLOAT)
K_UN(k_log10_out, t_log10, FL_FLOAT)
K_UN(k_reciprocal_out, t_reciprocal, FL_FLOAT)
K_UN(k_silu_out, t_silu, FL_FLOAT)
K_UN(k_hardswish_out, t_hardswish, FL_FLOAT)
K_UN(k_hardsigmoid_out, t_hardsigmoid, FL_FLOAT)

static int k_gelu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  const ew_ops *ops;
  if (str_is(args[1], "none"))
    ops = &t_gelu;
  else if (str_is(args[1], "tanh"))
    ops = &t_gelu_tanh;
  else
    return px_fail(ctx, "approximate must be 'none' or 'tanh', got '%.*s'",
                   (int)args[1]->u.str.n, args[1]->u.str.p);
  return ew_un(ctx, ops, FL_FLOAT, ARGT(0), ARGT(2), &p);
}

static int k_leaky_relu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  p.d[0] = px_scalar_d(args[1]);
  return ew_un(ctx, &t_leaky_relu, FL_FLOAT, ARGT(0), ARGT(2), &p);
}

static int k_elu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  double alpha = px_scalar_d(args[1]), scale = px_scalar_d(args[2]);
  p.d[0] = alpha * scale;
  p.d[1] = scale;
  p.d[2] = px_scalar_d(args[3]);
  return ew_un(ctx, &t_elu, FL_FLOAT, ARGT(0), ARGT(4), &p);
}

static int k_logit_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  if (args[1]->tag == PX_V_NONE || px_scalar_d(args[1]) < 0)
    return ew_un(ctx, &t_logit, FL_FLOAT, ARGT(0), ARGT(2), &p);
  p.d[0] = px_scalar_d(args[1]);
  p.d[1] = 1.0 - p.d[0];
  return ew_un(ctx, &t_logit_eps, FL_FLOAT, ARGT(0), ARGT(2), &p);
}

/* glu: the first half along dim times the sigmoid of the second half. */
BIN_F(glu, , x / ((T)1 + EXPV(-y)))
OPS_F(glu)

static int k_glu_out(px_ctx *ctx, px_value *const *args) {
  eparam p = {0};
  px_tensor *self = ARGT(0), *out = ARGT(2);
  if (self->dim == 0) return px_fail(ctx, "glu does not support 0-dimensional tensors");
  int d = px_wrap_dim(ctx, args[1]->u.i, self->dim);
  if (d < 0) return PYEXEC_ERR_EXECUTION;
  if (self->sizes[d] % 2 != 0)
    return px_fail(ctx, "halving dimension must be even, but dimension %d is size %lld", d,
                   (long long)self->sizes[d]);
  px_tensor va = *self, vb;
  va.sizes[d] = self->sizes[d] / 2;
  va.numel = self->numel / 2;
  va.contiguous = 0; /* a view: strides are self's */
  vb = va;
  vb.data = (char *)self->data + (size_t)(va.sizes[d] * self->strides[d]) * px_elsize(self->dtype);
  if (px_resize(ctx, out, va.dim, va.sizes)) return PYEXEC_ERR_EXECUTION;
  const px_tensor *ins[2] = {&va, &vb};
  return ew_apply(ctx, &t_glu, FL_FLOAT, self->dtype, 2, ins, out, &p);
}

/* ---- registry table ------------------------------------------------------------------ */

const px_kernel_def px_kernels_elementwise[] = {
    /* arithmetic */
    {"aten::add.out", "TTST|T", k_add_out},
    {"aten::add.Scalar_out", "TSST|T", k_add_scalar_out},
    {"aten::sub.out", "TTST|T", k_sub_out},
    {"aten::sub.Scalar_out", "TSST|T", k_sub_scalar_out},
    {"aten::rsub.Scalar_out", "TSST|T", k_rsub_scalar_out},
    {"aten::mul.out", "TTT|T", k_mul_out},
    {"aten::mul.Scalar_out", "TST|T", k_mul_scalar_out},
    {"aten::div.out", "TTT|T", k_div_out},
    {"aten::div.out_mode", "TTrT|T", k_div_out_mode},
    {"aten::div.Scalar_out", "TST|T", k_div_scalar_out},
    {"aten::div.Scalar_mode_out", "TSrT|T", k_div_scalar_mode_out},
    {"aten::floor_divide.out", "TTT|T", k_floor_divide_out},
    {"aten::remainder.Tensor_out", "TTT|T", k_remainder_tensor_out},
    {"aten::remainder.Scalar_out", "TST|T", k_remainder_scalar_out},
    {"aten::fmod.Tensor_out", "TTT|T", k_fmod_tensor_out},
    {"aten::fmod.Scalar_out", "TST|T", k_fmod_scalar_out},
    {"aten::pow.Tensor_Scalar_out", "TST|T", k_pow_ts_out},
    {"aten::pow.Tensor_Tensor_out", "TTT|T", k_pow_tt_out},
    {"aten::pow.Scalar_out", "STT|T", k_pow_scalar_out},
    {"aten::atan2.out", "TTT|T", k_atan2_out},
    {"aten::maximum.out", "TTT|T", k_maximum_out},
    {"aten::minimum.out", "TTT|T", k_minimum_out},
    /* comparisons */
    {"aten::eq.Scalar_out", "TST|T", k_eq_scalar_out},
    {"aten::eq.Tensor_out", "TTT|T", k_eq_tensor_out},
    {"aten::ne.Scalar_out", "TST|T", k_ne_scalar_out},
    {"aten::ne.Tensor_out", "TTT|T", k_ne_tensor_out},
    {"aten::lt.Scalar_out", "TST|T", k_lt_scalar_out},
    {"aten::lt.Tensor_out", "TTT|T", k_lt_tensor_out},
    {"aten::le.Scalar_out", "TST|T", k_le_scalar_out},
    {"aten::le.Tensor_out", "TTT|T", k_le_tensor_out},
    {"aten::gt.Scalar_out", "TST|T", k_gt_scalar_out},
    {"aten::gt.Tensor_out", "TTT|T", k_gt_tensor_out},
    {"aten::ge.Scalar_out", "TST|T", k_ge_scalar_out},
    {"aten::ge.Tensor_out", "TTT|T", k_ge_tensor_out},
    /* logical and bitwise */
    {"aten::logical_not.out", "TT|T", k_logical_not_out},
    {"aten::logical_and.out", "TTT|T", k_logical_and_out},
    {"aten::logical_or.out", "TTT|T", k_logical_or_out},
    {"aten::logical_xor.out", "TTT|T", k_logical_xor_out},
    {"aten::bitwise_and.Tensor_out", "TTT|T", k_bitwise_and_tensor_out},
    {"aten::bitwise_and.Scalar_out", "TST|T", k_bitwise_and_scalar_out},
    {"aten::bitwise_or.Tensor_out", "TTT|T", k_bitwise_or_tensor_out},
    {"aten::bitwise_or.Scalar_out", "TST|T", k_bitwise_or_scalar_out},
    {"aten::bitwise_xor.Tensor_out", "TTT|T", k_bitwise_xor_tensor_out},
    {"aten::bitwise_xor.Scalar_out", "TST|T", k_bitwise_xor_scalar_out},
    {"aten::bitwise_not.out", "TT|T", k_bitwise_not_out},
    {"aten::bitwise_left_shift.Tensor_out", "TTT|T", k_lshift_tensor_out},
    {"aten::bitwise_left_shift.Tensor_Scalar_out", "TST|T", k_lshift_scalar_out},
    {"aten::bitwise_right_shift.Tensor_out", "TTT|T", k_rshift_tensor_out},
    {"aten::bitwise_right_shift.Tensor_Scalar_out", "TST|T", k_rshift_scalar_out},
    /* selection, clamping, filling */
    {"aten::where.self_out", "TTTT|T", k_where_self_out},
    {"aten::masked_fill.Scalar_out", "TTST|T", k_masked_fill_scalar_out},
    {"aten::clamp.out", "TssT|T", k_clamp_out},
    {"aten::clamp.Tensor_out", "TttT|T", k_clamp_tensor_out},
    {"aten::hardtanh.out", "TSST|T", k_hardtanh_out},
    {"aten::fill.Scalar_out", "TST|T", k_fill_scalar_out},
    {"aten::fill.Tensor_out", "TTT|T", k_fill_tensor_out},
    {"aten::scalar_tensor.out", "ST|T", k_scalar_tensor_out},
    /* unary */
    {"aten::neg.out", "TT|T", k_neg_out},
    {"aten::abs.out", "TT|T", k_abs_out},
    {"aten::sign.out", "TT|T", k_sign_out},
    {"aten::floor.out", "TT|T", k_floor_out},
    {"aten::ceil.out", "TT|T", k_ceil_out},
    {"aten::round.out", "TT|T", k_round_out},
    {"aten::trunc.out", "TT|T", k_trunc_out},
    {"aten::isnan.out", "TT|T", k_isnan_out},
    {"aten::isinf.out", "TT|T", k_isinf_out},
    {"aten::exp.out", "TT|T", k_exp_out},
    {"aten::log.out", "TT|T", k_log_out},
    {"aten::sqrt.out", "TT|T", k_sqrt_out},
    {"aten::rsqrt.out", "TT|T", k_rsqrt_out},
    {"aten::tanh.out", "TT|T", k_tanh_out},
    {"aten::sin.out", "TT|T", k_sin_out},
    {"aten::cos.out", "TT|T", k_cos_out},
    {"aten::tan.out", "TT|T", k_tan_out},
    {"aten::asin.out", "TT|T", k_asin_out},
    {"aten::acos.out", "TT|T", k_acos_out},
    {"aten::atan.out", "TT|T", k_atan_out},
    {"aten::sinh.out", "TT|T", k_sinh_out},
    {"aten::cosh.out", "TT|T", k_cosh_out},
    {"aten::asinh.out", "TT|T", k_asinh_out},
    {"aten::acosh.out", "TT|T", k_acosh_out},
    {"aten::atanh.out", "TT|T", k_atanh_out},
    {"aten::erf.out", "TT|T", k_erf_out},
    {"aten::expm1.out", "TT|T", k_expm1_out},
    {"aten::log1p.out", "TT|T", k_log1p_out},
    {"aten::log2.out", "TT|T", k_log2_out},
    {"aten::log10.out", "TT|T", k_log10_out},
    {"aten::reciprocal.out", "TT|T", k_reciprocal_out},
    /* activations */
    {"aten::relu.out", "TT|T", k_relu_out},
    {"aten::sigmoid.out", "TT|T", k_sigmoid_out},
    {"aten::gelu.out", "TRT|T", k_gelu_out},
    {"aten::silu.out", "TT|T", k_silu_out},
    {"aten::hardswish.out", "TT|T", k_hardswish_out},
    {"aten::hardsigmoid.out", "TT|T", k_hardsigmoid_out},
    {"aten::leaky_relu.out", "TST|T", k_leaky_relu_out},
    {"aten::elu.out", "TSSST|T", k_elu_out},
    {"aten::logit.out", "TdT|T", k_logit_out},
    {"aten::glu.out", "TIT|T", k_glu_out},
    {NULL, NULL, NULL},
};
