/*
 * sort.c - sort (stable or not, ascending or descending) and topk along one
 * dim: values map to order-preserving 64-bit keys sorted by one stable merge
 * sort (or, for small k, an insertion selection); indices follow.
 */
#include "kernels/reduction/plan.h"

/* Sorting works on (key, index) pairs whose unsigned 64-bit keys order like
 * the values: floats map to their order-preserving bit pattern with every NaN
 * above +inf (torch's order) and -0.0 equal to 0.0; ints flip their sign bit.
 * Descending sorts complement the key, so one stable ascending sort serves. */
typedef struct kv {
  uint64_t k;
  int64_t i;
} kv;

static inline uint64_t key_of_double(double d) {
  if (d != d) return UINT64_MAX;
  if (d == 0) d = 0.0;
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return (b >> 63) ? ~b : (b | ((uint64_t)1 << 63));
}

static inline uint64_t key_of_int(int64_t v) { return (uint64_t)v ^ ((uint64_t)1 << 63); }

/* Stable sort of a[0..n) by k: insertion-sorted runs of 16, then bottom-up
 * merges through tmp (room for n). */
static void kv_sort(kv *a, kv *tmp, int64_t n) {
  for (int64_t lo = 0; lo < n; lo += 16) {
    int64_t hi = lo + 16 < n ? lo + 16 : n;
    for (int64_t i = lo + 1; i < hi; i++) {
      kv x = a[i];
      int64_t j = i;
      while (j > lo && x.k < a[j - 1].k) {
        a[j] = a[j - 1];
        j--;
      }
      a[j] = x;
    }
  }
  kv *src = a, *dst = tmp;
  for (int64_t w = 16; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) {
        bool right = src[j].k < src[i].k;
        dst[o++] = right ? src[j++] : src[i++];
      }
      while (i < mid) dst[o++] = src[i++];
      while (j < hi) dst[o++] = src[j++];
    }
    kv *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof(kv));
}

/* The k smallest keys of a[0..n), in order (ties by position), into
 * a[0..k), by insertion into a sorted prefix; for small k. */
static void kv_select(kv *a, int64_t n, int64_t k) {
  int64_t m = 0;
  for (int64_t e = 0; e < n; e++) {
    kv x = a[e];
    if (m == k) {
      if (!(x.k < a[k - 1].k)) continue;
      m--;
    }
    int64_t j = m;
    while (j > 0 && x.k < a[j - 1].k) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = x;
    m++;
  }
}

#define SELECT_MAX_K 32

/* values / indices = the first k elements of each slice along dim d of `in`
 * sorted ascending or descending (stable). */
static int sort_run(px_ctx *ctx, const px_tensor *in, int d, int64_t k, bool desc, px_tensor *vals,
                    px_tensor *idx) {
  int st;
  if ((st = check_io(ctx, in, vals)) || (st = px_require_contiguous(ctx, idx, "indices"))) return st;
  if (vals->dtype != in->dtype)
    return px_fail(ctx, "values has dtype %s, self has %s (they must match)", px_dtype_name(vals->dtype),
                   px_dtype_name(in->dtype));
  if ((st = px_require_dtype(ctx, idx, PX_I64, "indices"))) return st;
  int64_t sz[PX_MAX_DIM];
  for (int j = 0; j < in->dim; j++) sz[j] = j == d ? k : in->sizes[j];
  if (vals->dim != in->dim || idx->dim != in->dim)
    return px_fail(ctx, "values / indices have rank %d / %d, self has rank %d", (int)vals->dim,
                   (int)idx->dim, (int)in->dim);
  if ((st = px_resize(ctx, vals, in->dim, sz)) || (st = px_resize(ctx, idx, in->dim, sz))) return st;
  if (vals->numel == 0) return 0;
  int64_t outer, n, inner;
  split_dim(in, d, &outer, &n, &inner);
  bool fl = px_is_floating(in->dtype);
  bool sel = k <= SELECT_MAX_K && k < n;
  kv *a = px_scratch(ctx, (size_t)n * sizeof(kv));
  kv *tmp = sel ? NULL : px_scratch(ctx, (size_t)n * sizeof(kv));
  if (!a || (!sel && !tmp)) return ERR;
  uint64_t flip = desc ? UINT64_MAX : 0;
  size_t es = px_elsize(in->dtype);
  const char *src = in->data;
  char *dst = vals->data;
  int64_t *di = idx->data;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i, obase = o * k * inner + i;
      if (in->dtype == PX_F32) {
        const float *p = (const float *)src + base;
        for (int64_t j = 0; j < n; j++) a[j] = (kv){key_of_double(p[j * inner]) ^ flip, j};
      } else if (fl) {
        for (int64_t j = 0; j < n; j++)
          a[j] = (kv){key_of_double(px_load_d(src, in->dtype, base + j * inner)) ^ flip, j};
      } else {
        for (int64_t j = 0; j < n; j++)
          a[j] = (kv){key_of_int(px_load_i(src, in->dtype, base + j * inner)) ^ flip, j};
      }
      if (sel)
        kv_select(a, n, k);
      else
        kv_sort(a, tmp, n);
      for (int64_t j = 0; j < k; j++) {
        int64_t so = base + a[j].i * inner, oo = obase + j * inner;
        memcpy(dst + (size_t)oo * es, src + (size_t)so * es, es);
        di[oo] = a[j].i;
      }
    }
  }
  return 0;
}

/* sort.values(self, dim, descending, values, indices) -> (values, indices) */
static int k_sort(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t;
  int d = px_wrap_dim(ctx, a[1]->u.i, in->dim);
  if (d < 0) return ERR;
  return sort_run(ctx, in, d, in->dim ? in->sizes[d] : 1, a[2]->u.b, a[3]->u.t, a[4]->u.t);
}

/* sort.values_stable(self, stable?, dim, descending, values, indices) */
static int k_sort_stable(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t;
  int d = px_wrap_dim(ctx, a[2]->u.i, in->dim);
  if (d < 0) return ERR;
  return sort_run(ctx, in, d, in->dim ? in->sizes[d] : 1, a[3]->u.b, a[4]->u.t, a[5]->u.t);
}

/* topk.values(self, k, dim, largest, sorted, values, indices) -> (values, indices);
 * the result is always sorted. */
static int k_topk(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t;
  int d = px_wrap_dim(ctx, a[2]->u.i, in->dim);
  if (d < 0) return ERR;
  int64_t n = in->dim ? in->sizes[d] : 1, k = a[1]->u.i;
  if (k < 0 || k > n)
    return px_fail(ctx, "k = %lld is out of range for a dimension of size %lld", (long long)k,
                   (long long)n);
  return sort_run(ctx, in, d, k, a[3]->u.b, a[5]->u.t, a[6]->u.t);
}

const px_kernel_def px_kernels_sort[] = {
    {"aten::sort.values", "TIBTT|X", k_sort},
    {"aten::sort.values_stable", "TbIBTT|X", k_sort_stable},
    {"aten::topk.values", "TIIBBTT|X", k_topk},
    {NULL, NULL, NULL},
};
