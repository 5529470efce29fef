/*
 * driver.c - runs an elementwise loop over broadcast operands (ew.h): dtype
 * conversion in and out of the compute type in blocks, the single-call fast
 * path for same-shape contiguous operands, and the choice of loop by the
 * promoted dtype.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "kernels/convert/convert16.h"
#include "kernels/elementwise/ew.h"

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
  /* contiguous float16 / bfloat16 into float32: the vector conversions
   * (convert16.h: the same values, NaN payloads aside) */
  if (st == 1 && ddt == PX_F32 && n >= 8 && (sdt == PX_F16 || sdt == PX_BF16)) {
    if (sdt == PX_F16)
      px_f16_to_f32(dst, (const uint16_t *)src, n);
    else
      px_bf16_to_f32(dst, (const uint16_t *)src, n);
    return;
  }
#ifdef EW_CLONE_AVX2
  if (__builtin_cpu_supports("avx2")) {
    gather_avx2(dst, ddt, src, sdt, st, n);
    return;
  }
#endif
  gather_impl(dst, ddt, src, sdt, st, n);
}
static void scatter(char *dst, int ddt, int64_t st, const void *src, int sdt, int64_t n) {
  if (st == 1 && sdt == PX_F32 && n >= 8 && (ddt == PX_F16 || ddt == PX_BF16)) {
    if (ddt == PX_F16)
      px_f32_to_f16((uint16_t *)dst, src, n);
    else
      px_f32_to_bf16((uint16_t *)dst, src, n);
    return;
  }
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
/* Rows of a contiguous run are cut into pieces of this many elements when
 * the work is split over threads (a multiple of every vector width). */
#define EW_PIECE 4096

/* One elementwise job over threads: work item u is piece u % npiece of outer
 * row u / npiece (the iterator's rows). Every element is computed by the
 * same loop whichever piece holds it, so outputs do not depend on the split. */
typedef struct ew_job {
  ew_fn fn;
  int nin;
  const px_tensor *const *in;
  const int *want;
  const bool *conv;
  bool oconv, any_conv;
  px_tensor *out;
  int odt;
  const eparam *p;
  const px_iter *it; /* NULL: the simple path (one contiguous row) */
  const char *const *ptr;
  const int64_t *str;
  int64_t inner, blk, npiece;
  char *scratch; /* per thread: nin + 1 buffers of EW_BLK * 8 bytes */
  atomic_int err;
} ew_job;

static void ew_chunk(void *arg, int64_t b, int64_t e, int tid) {
  ew_job *J = arg;
  eparam p = *J->p;
  p.err = 0;
  const char *ptr[EW_MAXIN];
  int64_t str[EW_MAXIN];
  if (!J->it) { /* contiguous operands: pieces of one row */
    int64_t s0 = b * J->blk, s1 = e * J->blk < J->inner ? e * J->blk : J->inner;
    for (int i = 0; i < J->nin; i++) {
      ptr[i] = J->ptr[i] + (size_t)(s0 * J->str[i]) * px_elsize(J->in[i]->dtype);
      str[i] = J->str[i];
    }
    J->fn(s1 - s0, ptr, str, (char *)J->out->data + (size_t)s0 * px_elsize(J->out->dtype), 1, &p);
    if (p.err) atomic_store(&J->err, 1);
    return;
  }
  px_iter it = *J->it;
  /* seek to row b / npiece */
  int64_t row = b / J->npiece;
  px_iter_seek(&it, row);
  /* conversion buffers: this thread's share of the scratch (none without conversion) */
  void *buf[EW_MAXIN] = {NULL, NULL, NULL}, *obuf = NULL;
  if (J->scratch) {
    char *scr = J->scratch + (size_t)tid * (size_t)(J->nin + 1) * EW_BLK * 8;
    for (int i = 0; i < J->nin; i++) buf[i] = scr + (size_t)i * EW_BLK * 8;
    obuf = scr + (size_t)J->nin * EW_BLK * 8;
  }
  const size_t oes = px_elsize(J->out->dtype);
  for (int64_t u = b; u < e;) {
    int64_t pe = (row + 1) * J->npiece < e ? (row + 1) * J->npiece : e; /* this row's items */
    int64_t s_end = (pe - row * J->npiece) * J->blk;
    if (s_end > it.inner) s_end = it.inner;
    for (int64_t s = (u - row * J->npiece) * J->blk, m; s < s_end; s += m) {
      /* converting: EW_BLK at a time (the scratch size); else the whole stretch */
      m = s_end - s;
      if (J->any_conv && m > EW_BLK) m = EW_BLK;
      for (int i = 0; i < J->nin; i++) {
        int64_t st = it.inner_stride[i + 1];
        const char *base = (const char *)J->in[i]->data + (size_t)(it.off[i + 1] + s * st) * px_elsize(J->in[i]->dtype);
        if (J->conv[i]) {
          /* a broadcast row needs only its one element converted */
          gather(buf[i], J->want[i], base, J->in[i]->dtype, st, st == 0 ? 1 : m);
          ptr[i] = buf[i];
          str[i] = st == 0 ? 0 : 1;
        } else {
          ptr[i] = base;
          str[i] = st;
        }
      }
      int64_t ost = it.inner_stride[0];
      char *obase = (char *)J->out->data + (size_t)(it.off[0] + s * ost) * oes;
      if (J->oconv) {
        J->fn(m, ptr, str, obuf, 1, &p);
        scatter(obase, J->out->dtype, ost, obuf, J->odt, m);
      } else {
        J->fn(m, ptr, str, obase, ost, &p);
      }
    }
    u = pe;
    row++;
    if (u < e) px_iter_next(&it);
  }
  if (p.err) atomic_store(&J->err, 1);
}

/* Runs fn over out (already sized) and nin inputs that broadcast to it.
 * Input k is read as dtype want[k]; fn writes dtype odt. Large outputs are
 * split over the thread pool by rows and pieces of rows. */
int px_ew_run(px_ctx *ctx, ew_fn fn, int nin, const px_tensor *const *ins,
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
  /* Cost: bytes touched (a transcendental op costs more, but the split only
   * needs the order of magnitude). */
  int64_t cost = n * (int64_t)px_elsize(out->dtype);
  for (int i = 0; i < nin; i++) cost += in[i]->numel == n ? n * (int64_t)px_elsize(in[i]->dtype) : 0;
  const char *ptr[EW_MAXIN];
  int64_t str[EW_MAXIN];
  ew_job J = {.fn = fn, .nin = nin, .in = in, .want = want, .conv = conv, .oconv = oconv,
              .any_conv = any_conv,
              .out = out, .odt = odt, .p = p};
  atomic_init(&J.err, 0);
  if (simple) {
    for (int i = 0; i < nin; i++) {
      ptr[i] = (const char *)in[i]->data;
      str[i] = in[i]->numel == n ? 1 : 0;
    }
    J.ptr = ptr;
    J.str = str;
    J.inner = n;
    J.blk = EW_PIECE;
    J.npiece = (n + EW_PIECE - 1) / EW_PIECE;
    px_parallel_for(J.npiece, 1, cost, ew_chunk, &J);
  } else {
    px_iter it;
    px_iter_init(&it, out->dim, out->sizes);
    px_iter_add(&it, out);
    for (int i = 0; i < nin; i++) px_iter_add(&it, in[i]);
    px_iter_coalesce(&it);
    int64_t rows = n / it.inner;
    /* pieces of a row: EW_BLK when converting (the scratch size), else
     * EW_PIECE where the rows are too few to share out, else whole rows */
    J.blk = any_conv ? EW_BLK : rows >= 64 ? it.inner : EW_PIECE;
    J.npiece = (it.inner + J.blk - 1) / J.blk;
    J.it = &it;
    J.inner = it.inner;
    if (any_conv) {
      int nt = px_parallel_threads();
      J.scratch = px_scratch(ctx, (size_t)nt * (size_t)(nin + 1) * EW_BLK * 8);
      if (!J.scratch) return PYEXEC_ERR_EXECUTION;
    }
    px_parallel_for(rows * J.npiece, 1, cost, ew_chunk, &J);
  }
  if (atomic_load(&J.err)) p->err = 1;
  if (p->err) return px_fail(ctx, "ZeroDivisionError");
  return 0;
}
/* torch's canCast: no floating -> integral, no non-bool -> bool. */
static bool can_cast(int from, int to) {
  if (px_is_floating(from) && !px_is_floating(to)) return false;
  if (from != PX_BOOL && to == PX_BOOL) return false;
  return true;
}

/* Picks the loop for `common` (the promoted dtype), checks the output dtype,
 * and runs it. The output must already have its final shape. */
int px_ew_apply(px_ctx *ctx, const ew_ops *ops, int flags, int common, int nin,
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
  return px_ew_run(ctx, fn, nin, ins, want, out, odt, p);
}

/* Broadcasts the inputs and resizes out to the result. */
int px_ew_resize(px_ctx *ctx, int nin, const px_tensor *const *ins, px_tensor *out) {
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
int px_ew_n(px_ctx *ctx, const ew_ops *ops, int flags, int common, int nin,
                const px_tensor *const *ins, px_tensor *out, eparam *p) {
  if (px_ew_resize(ctx, nin, ins, out)) return PYEXEC_ERR_EXECUTION;
  if (common < 0) {
    rt_state s;
    rt_init(&s);
    for (int i = (flags & FL_COND0) ? 1 : 0; i < nin; i++) rt_tensor(&s, ins[i]);
    common = rt_result(&s);
  }
  return px_ew_apply(ctx, ops, flags, common, nin, ins, out, p);
}

/* Tensor-tensor binary op. */
int px_ew_tt(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, px_tensor *b,
                 px_tensor *out, eparam *p) {
  const px_tensor *ins[2] = {a, b};
  return px_ew_n(ctx, ops, flags, -1, 2, ins, out, p);
}

/* Tensor-scalar binary op (swap: the scalar is the left operand). */
int px_ew_ts(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, const px_value *s,
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
  return px_ew_apply(ctx, ops, flags, common, 2, ins, out, p);
}

/* Unary op; common is self's dtype. */
int px_ew_un(px_ctx *ctx, const ew_ops *ops, int flags, px_tensor *a, px_tensor *out,
                 eparam *p) {
  const px_tensor *ins[1] = {a};
  if (px_resize_like(ctx, out, a)) return PYEXEC_ERR_EXECUTION;
  return px_ew_apply(ctx, ops, flags, a->dtype, 1, ins, out, p);
}

/* Every 16-bit pattern through the float32 loop, as px_ew_run's gather and
 * scatter convert them. */
static uint16_t *table16_build(ew_fn fn, int dtype) {
  enum { N = 1 << 16 };
  uint16_t *t = malloc(sizeof(uint16_t) * N);
  float *x = malloc(sizeof(float) * N);
  if (!t || !x) {
    free(t), free(x);
    return NULL;
  }
  for (int32_t h = 0; h < N; h++) x[h] = dtype == PX_F16 ? h2f((uint16_t)h) : bf2f((uint16_t)h);
  ew_run_un_f32(fn, N, x, x);
  for (int32_t h = 0; h < N; h++) t[h] = dtype == PX_F16 ? f2h(x[h]) : f2bf(x[h]);
  free(x);
  return t;
}

typedef struct table16_job {
  const uint16_t *table, *x;
  uint16_t *y;
} table16_job;

static void table16_chunk(void *arg, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const table16_job *j = arg;
  for (int64_t k = begin; k < end; k++) j->y[k] = j->table[j->x[k]];
}

int px_ew_un_table16(px_ctx *ctx, const ew_ops *ops, int flags, uint16_t *_Atomic *table, px_tensor *a,
                     px_tensor *out, eparam *p) {
  if ((a->dtype != PX_F16 && a->dtype != PX_BF16) || out->dtype != a->dtype || !a->contiguous ||
      !out->contiguous || !ops->f[K_F32])
    return px_ew_un(ctx, ops, flags, a, out, p);
  if (px_resize_like(ctx, out, a)) return PYEXEC_ERR_EXECUTION;
  uint16_t *t = atomic_load(table);
  if (!t) {
    uint16_t *mine = table16_build(ops->f[K_F32], a->dtype), *none = NULL;
    if (!mine) return px_fail(ctx, "out of memory for a table of 65536 results");
    if (atomic_compare_exchange_strong(table, &none, mine))
      t = mine;
    else /* another thread built it first */
      free(mine), t = none;
  }
  table16_job j = {t, a->data, out->data};
  px_parallel_for(a->numel, 16384, a->numel * 4, table16_chunk, &j);
  return 0;
}
