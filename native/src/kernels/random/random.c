/*
 * random.c - random numbers: native_dropout, rand (uniform) and randn
 * (normal), from an xorshift64* stream that each call seeds afresh.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/common.h"

/* xorshift64* streams; each kernel call seeds a fresh stream from a
 * process-wide counter (splitmix64), so successive calls differ and a
 * process replays the same sequence. */
static _Atomic uint64_t rng_calls;

typedef struct {
  uint64_t s;
} rng_t;

static void rng_seed(rng_t *r) {
  uint64_t z = atomic_fetch_add(&rng_calls, 1) * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  r->s = z ? z : 0x9E3779B97F4A7C15ull;
}

static inline uint64_t rng_next(rng_t *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_uniform(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* aten::native_dropout.out(Tensor input, float p, bool? train, *,
 *   Tensor(a!) out0, Tensor(b!) out1): train (or None): mask ~ Bernoulli(1-p),
 *   out0 = input * mask / (1 - p); otherwise out0 = input, mask all true. */
static int k_native_dropout(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[3]->u.t, *mask = args[4]->u.t;
  double p = arg_d(args[1]);
  bool train = args[2]->tag == PX_V_NONE ? true : args[2]->u.b;
  int rc;
  if ((rc = px_require_same_dtype(ctx, out, "out0", in, "input"))) return rc;
  if ((rc = px_require_contiguous(ctx, in, "input")) ||
      (rc = px_require_contiguous(ctx, out, "out0")) ||
      (rc = px_require_contiguous(ctx, mask, "out1")))
    return rc;
  if ((rc = px_resize_like(ctx, out, in)) || (rc = px_resize_like(ctx, mask, in))) return rc;
  int64_t n = in->numel;
  if (n == 0) return 0;
  if (!train) {
    memcpy(out->data, in->data, in->nbytes);
    if (mask->dtype == PX_BOOL)
      memset(mask->data, 1, (size_t)n);
    else
      for (int64_t k = 0; k < n; k++) px_store_i(mask->data, mask->dtype, k, 1);
    return 0;
  }
  if (!(p >= 0.0 && p <= 1.0))
    return px_fail(ctx, "dropout probability must be in [0, 1], got %g", p);
  if ((rc = require_floating(ctx, in, "input"))) return rc;
  double keep = 1.0 - p, scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  rng_t r;
  rng_seed(&r);
  bool mb = mask->dtype == PX_BOOL;
  uint8_t *mp = mask->data;
  if (in->dtype == PX_F32) {
    const float *x = in->data;
    float *o = out->data, fs = (float)scale;
    for (int64_t k = 0; k < n; k++) {
      bool m = rng_uniform(&r) < keep;
      o[k] = (x[k] * (float)m) * fs;
      if (mb)
        mp[k] = m;
      else
        px_store_i(mask->data, mask->dtype, k, m);
    }
    return 0;
  }
  for (int64_t k = 0; k < n; k++) {
    bool m = rng_uniform(&r) < keep;
    double x = px_load_d(in->data, in->dtype, k);
    if (in->dtype == PX_F64)
      ((double *)out->data)[k] = (x * (double)m) * scale;
    else /* float16 / bfloat16: x * m is exact; the scale is applied in float */
      px_store_d(out->data, out->dtype, k, (double)((float)(x * (double)m) * (float)scale));
    px_store_i(mask->data, mask->dtype, k, m);
  }
  return 0;
}

static int random_fill(px_ctx *ctx, px_value *const *args, bool normal) {
  const int64_t *size = px_intlist(args[0]);
  uint32_t nd = args[0]->u.il.n;
  px_tensor *out = args[1]->u.t;
  int rc;
  if (!px_is_floating(out->dtype))
    return px_fail(ctx, "out has dtype %s; %s supports floating dtypes only",
                   px_dtype_name(out->dtype), normal ? "randn" : "rand");
  if ((int)nd != out->dim)
    return px_fail(ctx, "size has %u dims but out has %d", nd, out->dim);
  if ((rc = px_resize(ctx, out, (int)nd, size))) return rc;
  int64_t n = out->numel;
  rng_t r;
  rng_seed(&r);
  if (!normal) {
    /* as many random bits as the dtype's significand holds, so that no
     * value rounds up to 1 */
    for (int64_t k = 0; k < n; k++) {
      uint64_t x = rng_next(&r);
      switch (out->dtype) {
        case PX_F32: ((float *)out->data)[k] = (float)(x >> 40) * 0x1.0p-24f; break;
        case PX_F64: ((double *)out->data)[k] = (double)(x >> 11) * 0x1.0p-53; break;
        case PX_F16: px_store_d(out->data, out->dtype, k, (double)(x >> 53) * 0x1.0p-11); break;
        default: px_store_d(out->data, out->dtype, k, (double)(x >> 56) * 0x1.0p-8); break;
      }
    }
    return 0;
  }
  /* Box-Muller, two values per pair of uniforms */
  for (int64_t k = 0; k < n; k += 2) {
    double u1 = 1.0 - rng_uniform(&r), u2 = rng_uniform(&r); /* u1 in (0, 1] */
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    double z0 = rad * cos(th), z1 = rad * sin(th);
    if (out->dtype == PX_F32) {
      float *o = out->data;
      o[k] = (float)z0;
      if (k + 1 < n) o[k + 1] = (float)z1;
    } else {
      px_store_d(out->data, out->dtype, k, z0);
      if (k + 1 < n) px_store_d(out->data, out->dtype, k + 1, z1);
    }
  }
  return 0;
}

/* aten::rand.out(SymInt[] size, *, Tensor(a!) out): uniform on [0, 1) */
static int k_rand(px_ctx *ctx, px_value *const *args) { return random_fill(ctx, args, false); }
/* aten::randn.out(SymInt[] size, *, Tensor(a!) out): standard normal */
static int k_randn(px_ctx *ctx, px_value *const *args) { return random_fill(ctx, args, true); }

const px_kernel_def px_kernels_random[] = {
    {"aten::native_dropout.out", "TDb|TTX", k_native_dropout},
    {"aten::rand.out", "LT|T", k_rand},
    {"aten::randn.out", "LT|T", k_randn},
    {NULL, NULL, NULL},
};
