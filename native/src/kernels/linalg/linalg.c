/*
 * linalg.c - matrix products for every dtype: mm, bmm and addmm (float32
 * through the GEMM engine in gemm/, which reads operands of any strides, so
 * transposed and channels-last operands are not copied; float16 / bfloat16
 * through it too, the first operand widened to float32, the second widened
 * as the engine packs it, read through its strides, the sums rounded once).
 */

#include "kernels/linalg/linalg.h"

#include <math.h>

#include <string.h>

#include "kernels/convert/convert16.h"
#include "kernels/gemm/gemm.h"
#include "kernels/kernel.h"

/* A bias broadcast to M x N: element (i, j) at data[i * rs + j * cs]. */
typedef struct bias_view {
  const void *data;
  int dtype;
  int64_t rs, cs;
} bias_view;

static bool is_mm_dtype(int dt) { return dt != PX_BOOL && px_dtype_supported(dt); }

/* B[b] (K x N): element (k, j) of batch b at data[b * bs + k * rs + j * cs]. */
typedef struct mat_view {
  const void *data;
  int64_t bs, rs, cs;
} mat_view;

/* A 16-bit B read through its strides: element (k, j) at B[k * rsb + j * csb]. */
typedef struct h16_strided {
  const uint16_t *B;
  int64_t rsb, csb;
  bool bf16;
} h16_strided;

static void widen16(bool bf16, float *dst, const uint16_t *src, int64_t n) {
  if (bf16)
    px_bf16_to_f32(dst, src, n);
  else
    px_f16_to_f32(dst, src, n);
}

/* px_gemm_pack_fn over a strided 16-bit B: depth [pc, pc + kc) x columns
 * [jc, jc + nc) widened into nr-wide float32 panels (columns past nc zero).
 * Rows of B run along its memory when csb is 1 (a row widened at a time),
 * else its columns do (a column widened into a row of the panel's depth). */
static void pack_h16_strided(const void *src, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int nr,
                             float *pb) {
  const h16_strided *s = src;
  const uint16_t *B = s->B + pc * s->rsb + jc * s->csb;
  const int64_t pstride = (int64_t)nr * kc;
  if (s->csb == 1) {
    for (int64_t p = 0; p < kc; p++)
      for (int64_t j0 = 0; j0 < nc; j0 += nr) {
        const int64_t n = nc - j0 < nr ? nc - j0 : nr;
        float *dst = pb + j0 / nr * pstride + p * nr;
        widen16(s->bf16, dst, B + p * s->rsb + j0, n);
        if (n < nr) memset(dst + n, 0, sizeof(float) * (size_t)(nr - n));
      }
    return;
  }
  float col[PX_GEMM_KC_MAX];
  for (int64_t j = 0; j < nc; j++) {
    const uint16_t *c = B + j * s->csb;
    if (s->rsb == 1 && kc <= PX_GEMM_KC_MAX) {
      widen16(s->bf16, col, c, kc);
      float *dst = pb + j / nr * pstride + j % nr;
      for (int64_t p = 0; p < kc; p++) dst[p * nr] = col[p];
    } else {
      float *dst = pb + j / nr * pstride + j % nr;
      for (int64_t p = 0; p < kc; p++) widen16(s->bf16, dst + p * nr, c + p * s->rsb, 1);
    }
  }
  if (nc % nr) {
    float *last = pb + nc / nr * pstride;
    for (int64_t p = 0; p < kc; p++)
      memset(last + p * nr + nc % nr, 0, sizeof(float) * (size_t)(nr - nc % nr));
  }
}

int px_matmul16(px_ctx *ctx, int dtype, int64_t M, int64_t N, int64_t K, const void *A, const void *B,
                int64_t rsb, int64_t csb, const void *bias, int64_t bias_rs, int64_t bias_cs, float alpha,
                float beta, void *out) {
  if (M <= 0 || N <= 0) return 0;
  const bool bf16 = dtype == PX_BF16;
  float *fa = px_scratch(ctx, sizeof(float) * (size_t)(M * K + 1));
  float *fo = px_scratch(ctx, sizeof(float) * (size_t)(M * N));
  float *fb = bias ? px_scratch(ctx, sizeof(float) * (size_t)N) : NULL;
  if (!fa || !fo || (bias && !fb)) return PYEXEC_ERR_EXECUTION;
  px_convert(fa, PX_F32, A, dtype, M * K);
  h16_strided src = {B, rsb, csb, bf16};
  int rc = px_gemm_f32_packed_ep(ctx, NULL, M, N, K, alpha, fa, K, 1, pack_h16_strided, &src, 0.0f, fo, N, NULL);
  if (rc) return rc;
  if (bias)
    for (int64_t i = 0; i < M; i++) {
      float *v = fo + i * N;
      const uint16_t *br = (const uint16_t *)bias + i * bias_rs;
      if (bias_cs == 1) {
        widen16(bf16, fb, br, N);
      } else {
        widen16(bf16, fb, br, 1);
        for (int64_t j = 1; j < N; j++) widen16(bf16, fb + j, br + j * bias_cs, 1);
      }
      for (int64_t j = 0; j < N; j++) v[j] += beta * fb[j];
    }
  px_convert(out, dtype, fo, PX_F32, M * N);
  return 0;
}

static int matmul16(px_ctx *ctx, int dtype, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                    mat_view Bv, void *out, const bias_view *bias, float alpha, float beta) {
  for (int64_t b = 0; b < batch; b++) {
    int rc = px_matmul16(ctx, dtype, M, N, K, (const uint16_t *)A + b * M * K, (const uint16_t *)Bv.data + b * Bv.bs,
                         Bv.rs, Bv.cs, bias ? bias->data : NULL, bias ? bias->rs : 0, bias ? bias->cs : 0, alpha,
                         beta, (uint16_t *)out + b * M * N);
    if (rc) return rc;
  }
  return 0;
}

/* out[b] (M x N, contiguous) = alpha * A[b] @ B[b] + beta * bias, for `batch`
 * products; A is M x K and contiguous; B is K x N with any strides for
 * float32 and contiguous otherwise. bias may be NULL. */
static int matmul_any(px_ctx *ctx, int dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                      const void *A, mat_view Bv, void *out, const bias_view *bias,
                      const px_value *alpha_v, const px_value *beta_v) {
  const void *B = Bv.data;
  if (batch == 0 || M == 0 || N == 0) return 0;
  bool use_bias = bias != NULL;
  if (dtype == PX_F32) {
    float alpha = alpha_v ? (float)px_scalar_d(alpha_v) : 1.0f;
    float beta = beta_v ? (float)px_scalar_d(beta_v) : 0.0f;
    if (use_bias && beta == 0.0f) use_bias = false;
    void *work = NULL;
    if (M >= 4 && K > 0) { /* shared across the batch */
      work = px_scratch(ctx, px_gemm_f32_work_size(M, N, K));
      if (!work) return PYEXEC_ERR_EXECUTION;
    }
    for (int64_t b = 0; b < batch; b++) {
      float *o = (float *)out + b * M * N;
      if (use_bias)
        for (int64_t i = 0; i < M; i++)
          for (int64_t j = 0; j < N; j++)
            o[i * N + j] = ((const float *)bias->data)[i * bias->rs + j * bias->cs];
      int rc = px_gemm_f32(ctx, work, M, N, K, alpha, (const float *)A + b * M * K, K, 1,
                           (const float *)B + b * Bv.bs, Bv.rs, Bv.cs, use_bias ? beta : 0.0f, o, N);
      if (rc) return rc;
    }
    return 0;
  }
  if (px_is_floating(dtype)) {
    double alpha = alpha_v ? px_scalar_d(alpha_v) : 1.0;
    double beta = beta_v ? px_scalar_d(beta_v) : 0.0;
    if (use_bias && beta == 0.0) use_bias = false;
    if (dtype == PX_F64) {
      double *acc = px_scratch(ctx, sizeof(double) * (size_t)N);
      if (!acc) return PYEXEC_ERR_EXECUTION;
      for (int64_t b = 0; b < batch; b++) {
        const double *a = (const double *)A + b * M * K, *bm = (const double *)B + b * K * N;
        double *o = (double *)out + b * M * N;
        for (int64_t i = 0; i < M; i++) {
          for (int64_t j = 0; j < N; j++) acc[j] = 0.0;
          for (int64_t k = 0; k < K; k++) {
            double s = a[i * K + k];
            const double *br = bm + k * N;
            for (int64_t j = 0; j < N; j++) acc[j] += s * br[j];
          }
          for (int64_t j = 0; j < N; j++) {
            double v = alpha * acc[j];
            if (use_bias) v += beta * ((const double *)bias->data)[i * bias->rs + j * bias->cs];
            o[i * N + j] = v;
          }
        }
      }
      return 0;
    }
    /* float16 / bfloat16: A widened to float32, B widened as the engine
     * packs it, the product summed in float32, rounded once. */
    return matmul16(ctx, dtype, batch, M, N, K, A, Bv, out, use_bias ? bias : NULL, (float)alpha, (float)beta);
  }
  /* Integers: wrap-around arithmetic in 64 bits, truncated on store (the same
   * result modulo 2^bits as torch's accumulation in the narrow type). */
  if ((alpha_v && alpha_v->tag == PX_V_DOUBLE) || (beta_v && beta_v->tag == PX_V_DOUBLE))
    return px_fail(ctx, "alpha and beta must be integers for an integer (%s) product",
                   px_dtype_name(dtype));
  uint64_t alpha = alpha_v ? (uint64_t)px_scalar_i(alpha_v) : 1u;
  uint64_t beta = beta_v ? (uint64_t)px_scalar_i(beta_v) : 0u;
  int64_t *ia = px_scratch(ctx, sizeof(int64_t) * (size_t)(M * K + 1));
  int64_t *ib = px_scratch(ctx, sizeof(int64_t) * (size_t)(K * N + 1));
  uint64_t *acc = px_scratch(ctx, sizeof(uint64_t) * (size_t)N);
  if (!ia || !ib || !acc) return PYEXEC_ERR_EXECUTION;
  size_t es = px_elsize(dtype);
  for (int64_t b = 0; b < batch; b++) {
    px_convert(ia, PX_I64, (const char *)A + (size_t)(b * M * K) * es, dtype, M * K);
    px_convert(ib, PX_I64, (const char *)B + (size_t)(b * K * N) * es, dtype, K * N);
    for (int64_t i = 0; i < M; i++) {
      for (int64_t j = 0; j < N; j++) acc[j] = 0;
      for (int64_t k = 0; k < K; k++) {
        uint64_t s = (uint64_t)ia[i * K + k];
        const int64_t *br = ib + k * N;
        for (int64_t j = 0; j < N; j++) acc[j] += s * (uint64_t)br[j];
      }
      for (int64_t j = 0; j < N; j++) {
        uint64_t v = alpha * acc[j];
        if (use_bias)
          v += beta * (uint64_t)px_load_i(bias->data, bias->dtype, i * bias->rs + j * bias->cs);
        px_store_i(out, dtype, b * M * N + i * N + j, (int64_t)v);
      }
    }
  }
  return 0;
}

static int check_mm_operands(px_ctx *ctx, const px_tensor *a, const px_tensor *b,
                             const px_tensor *out, int rank) {
  if (a->dim != rank || b->dim != rank)
    return px_fail(ctx, "expected %d-D operands, got self with %d dims and mat2 with %d dims",
                   rank, a->dim, b->dim);
  if (a->sizes[rank - 1] != b->sizes[rank - 2])
    return px_fail(ctx, "self's columns (%lld) do not match mat2's rows (%lld)",
                   (long long)a->sizes[rank - 1], (long long)b->sizes[rank - 2]);
  if (rank == 3 && a->sizes[0] != b->sizes[0])
    return px_fail(ctx, "batch sizes differ: self has %lld, mat2 has %lld",
                   (long long)a->sizes[0], (long long)b->sizes[0]);
  int rc;
  if ((rc = px_require_same_dtype(ctx, a, "self", b, "mat2"))) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", a, "self"))) return rc;
  if (!is_mm_dtype(a->dtype))
    return px_fail(ctx, "dtype %s is not supported", px_dtype_name(a->dtype));
  return 0;
}

/* t's data laid out row-major: t's own when it already is, else a copy in
 * scratch memory. NULL when scratch memory runs out. */
static const void *row_major(px_ctx *ctx, const px_tensor *t) {
  if (t->contiguous || t->numel == 0) return t->data;
  px_tensor r = *t;
  for (int d = 0; d < r.dim; d++) r.dim_order[d] = (uint8_t)d;
  r.contiguous = 1;
  px_tensor_update_layout(&r);
  r.data = px_scratch(ctx, t->nbytes);
  if (!r.data || px_copy_strided(ctx, &r, t)) return NULL;
  return r.data;
}

/* The mat2 operand as the products read it: through its strides for float32,
 * float16 and bfloat16 (a transposed weight costs no copy), row-major
 * otherwise. */
static int mat2_view(px_ctx *ctx, const px_tensor *b, mat_view *v) {
  int r = b->dim;
  if (b->dtype == PX_F32 || b->dtype == PX_F16 || b->dtype == PX_BF16 || b->contiguous) {
    v->data = b->data;
    v->bs = r == 3 ? b->strides[0] : 0;
    v->rs = b->strides[r - 2];
    v->cs = b->strides[r - 1];
    return 0;
  }
  if (!(v->data = row_major(ctx, b))) return PYEXEC_ERR_EXECUTION;
  v->cs = 1;
  v->rs = b->sizes[r - 1];
  v->bs = b->sizes[r - 2] * b->sizes[r - 1];
  return 0;
}

/* Runs a product into `out` whatever its dim_order: straight into its memory
 * when row-major, else through a row-major scratch result. */
static int matmul_into(px_ctx *ctx, px_tensor *out, int64_t batch, int64_t M, int64_t N, int64_t K,
                       const px_tensor *a, const px_tensor *b, const bias_view *bias,
                       const px_value *alpha_v, const px_value *beta_v) {
  mat_view bv;
  const void *A = row_major(ctx, a);
  if (!A || mat2_view(ctx, b, &bv)) return PYEXEC_ERR_EXECUTION;
  if (out->contiguous) return matmul_any(ctx, a->dtype, batch, M, N, K, A, bv, out->data, bias, alpha_v, beta_v);
  px_tensor r = *out;
  for (int d = 0; d < r.dim; d++) r.dim_order[d] = (uint8_t)d;
  r.contiguous = 1;
  px_tensor_update_layout(&r);
  if (!(r.data = px_scratch(ctx, out->nbytes))) return PYEXEC_ERR_EXECUTION;
  int rc = matmul_any(ctx, a->dtype, batch, M, N, K, A, bv, r.data, bias, alpha_v, beta_v);
  return rc ? rc : px_copy_strided(ctx, out, &r);
}

/* aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) */
static int k_mm(px_ctx *ctx, px_value *const *args) {
  px_tensor *a = args[0]->u.t, *b = args[1]->u.t, *out = args[2]->u.t;
  int rc = check_mm_operands(ctx, a, b, out, 2);
  if (rc) return rc;
  int64_t M = a->sizes[0], K = a->sizes[1], N = b->sizes[1];
  int64_t os[2] = {M, N};
  if ((rc = px_resize(ctx, out, 2, os))) return rc;
  if (M * N == 0) return 0;
  return matmul_into(ctx, out, 1, M, N, K, a, b, NULL, NULL, NULL);
}

/* aten::bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) */
static int k_bmm(px_ctx *ctx, px_value *const *args) {
  px_tensor *a = args[0]->u.t, *b = args[1]->u.t, *out = args[2]->u.t;
  int rc = check_mm_operands(ctx, a, b, out, 3);
  if (rc) return rc;
  int64_t B = a->sizes[0], M = a->sizes[1], K = a->sizes[2], N = b->sizes[2];
  int64_t os[3] = {B, M, N};
  if ((rc = px_resize(ctx, out, 3, os))) return rc;
  if (B * M * N == 0) return 0;
  return matmul_into(ctx, out, B, M, N, K, a, b, NULL, NULL, NULL);
}

/* aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1,
 *                 Scalar alpha=1, Tensor(a!) out) */
static int k_addmm(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *a = args[1]->u.t, *b = args[2]->u.t, *out = args[5]->u.t;
  int rc = check_mm_operands(ctx, a, b, out, 2);
  if (rc) return rc;
  if ((rc = px_require_same_dtype(ctx, self, "self", a, "mat1"))) return rc;
  int64_t M = a->sizes[0], K = a->sizes[1], N = b->sizes[1];
  bias_view bv = {self->data, self->dtype, 0, 0};
  if (self->dim > 2)
    return px_fail(ctx, "self must have at most 2 dims, got %d", self->dim);
  int64_t sm = self->dim == 2 ? self->sizes[0] : 1;
  int64_t sn = self->dim >= 1 ? self->sizes[self->dim - 1] : 1;
  if ((sm != 1 && sm != M) || (sn != 1 && sn != N))
    return px_fail(ctx, "self of size [%lld, %lld] cannot be broadcast to [%lld, %lld]",
                   (long long)sm, (long long)sn, (long long)M, (long long)N);
  bv.cs = sn == 1 ? 0 : self->strides[self->dim - 1];
  bv.rs = sm == 1 ? 0 : self->strides[0];
  int64_t os[2] = {M, N};
  if ((rc = px_resize(ctx, out, 2, os))) return rc;
  if (M * N == 0) return 0;
  return matmul_into(ctx, out, 1, M, N, K, a, b, &bv, args[4], args[3]);
}

/* The 16-bit panels' bytes rounded up to 64, so that the float32 bias after
 * them is aligned. */
static size_t panels16_bytes(int64_t N, int64_t K) { return (px_gemm_h16_prepack_size(N, K) + 63) / 64 * 64; }

size_t px_linear_packed16_size(int64_t N, int64_t K, bool bias) {
  return panels16_bytes(N, K) + (bias ? sizeof(float) * (size_t)N : 0);
}

/* The same row major result written into out: in place, or from o. */
static int store_rows(px_ctx *ctx, px_tensor *out, void *o) {
  if (o == out->data) return 0;
  px_tensor r = *out;
  for (int d = 0; d < r.dim; d++) r.dim_order[d] = (uint8_t)d;
  r.contiguous = 1;
  px_tensor_update_layout(&r);
  r.data = o;
  return px_copy_strided(ctx, out, &r);
}

/* px_linear_packed for float16 / bfloat16: mat2 packed on the first call into
 * 16-bit panels and its bias widened to float32 once; each call widens
 * mat1, multiplies (the bias added to each tile in float32, as px_matmul16
 * adds it) and rounds once. */
static int linear_packed16(px_ctx *ctx, const px_tensor *bias, const px_tensor *a, const px_tensor *b,
                           const px_tensor *pk, px_value *packed, px_tensor *out, int64_t M, int64_t N, int64_t K) {
  const int dt = a->dtype;
  if (pk->nbytes < px_linear_packed16_size(N, K, bias != NULL))
    return px_fail(ctx, "the packed %lld x %lld filter does not fit", (long long)K, (long long)N);
  uint16_t *panels = pk->data;
  float *fbias = bias ? (float *)((char *)pk->data + panels16_bytes(N, K)) : NULL;
  if (!packed->u.i) {
    px_gemm_h16_prepack_b(N, K, b->data, b->strides[0], b->strides[1], panels);
    if (bias) px_convert(fbias, PX_F32, bias->data, dt, N);
    packed->u.i = 1;
  }
  const void *A = row_major(ctx, a);
  float *fa = px_scratch(ctx, sizeof(float) * (size_t)(M * K + 1));
  float *fo = px_scratch(ctx, sizeof(float) * (size_t)(M * N));
  void *o = out->contiguous ? out->data : px_scratch(ctx, out->nbytes);
  if (!A || !fa || !fo || !o) return PYEXEC_ERR_EXECUTION;
  px_convert(fa, PX_F32, A, dt, M * K);
  px_gemm_epilogue ep = {fbias, -INFINITY, INFINITY, false, NULL};
  int rc = px_gemm_h16_prepacked_ep(ctx, NULL, M, N, K, fa, K, 1, panels, dt == PX_BF16, 0.0f, fo, N, &ep);
  if (rc) return rc;
  px_convert(o, dt, fo, PX_F32, M * N);
  return store_rows(ctx, out, o);
}

int px_linear_packed(px_ctx *ctx, px_value *const *args) {
  const px_tensor *bias = args[0]->tag == PX_V_TENSOR ? args[0]->u.t : NULL;
  const px_tensor *a = args[1]->u.t, *b = args[2]->u.t, *pk = args[3]->u.t;
  px_value *packed = args[4];
  px_tensor *out = args[5]->u.t;
  const int dt = a->dtype;
  if ((dt != PX_F32 && dt != PX_F16 && dt != PX_BF16) || a->dim != 2 || b->dim != 2 || b->dtype != dt ||
      out->dtype != dt)
    return px_fail(ctx, "expected a float32, float16 or bfloat16 [M, K] input and a matching weight and output, "
                   "got %s with %d dims", px_dtype_name(a->dtype), a->dim);
  const int64_t M = a->sizes[0], K = a->sizes[1], N = b->sizes[1];
  if (K != b->sizes[0])
    return px_fail(ctx, "self's columns (%lld) do not match mat2's rows (%lld)", (long long)K,
                   (long long)b->sizes[0]);
  if (pk->dtype != PX_F32 ||
      (bias && (bias->dtype != dt || bias->dim != 1 || bias->sizes[0] != N || !bias->contiguous)))
    return px_fail(ctx, "the packed %lld x %lld filter or its [%lld] bias does not fit", (long long)K,
                   (long long)N, (long long)N);
  int64_t os[2] = {M, N};
  int rc = px_resize(ctx, out, 2, os);
  if (rc || M * N == 0) return rc;
  if (dt != PX_F32) return linear_packed16(ctx, bias, a, b, pk, packed, out, M, N, K);
  if (pk->nbytes < px_gemm_f32_prepack_size(N, K))
    return px_fail(ctx, "the packed %lld x %lld filter or its [%lld] bias does not fit", (long long)K,
                   (long long)N, (long long)N);
  if (!packed->u.i && M < PX_LINEAR_PACK_MIN_ROWS) { /* not packed yet: read mat2 in place */
    bias_view bv = {bias ? bias->data : NULL, PX_F32, 0, 1};
    px_value one = {.tag = PX_V_DOUBLE, .u.d = 1.0};
    return matmul_into(ctx, out, 1, M, N, K, a, b, bias ? &bv : NULL, &one, &one);
  }
  if (!packed->u.i) {
    px_gemm_f32_prepack_b(N, K, b->data, b->strides[0], b->strides[1], pk->data);
    packed->u.i = 1;
  }
  const float *A = row_major(ctx, a);
  if (!A) return PYEXEC_ERR_EXECUTION;
  float *o = out->contiguous ? out->data : px_scratch(ctx, out->nbytes);
  if (!o) return PYEXEC_ERR_EXECUTION;
  px_gemm_epilogue ep = {bias ? bias->data : NULL, -INFINITY, INFINITY, false, NULL};
  rc = px_gemm_f32_prepacked_ep(ctx, NULL, M, N, K, A, K, 1, NULL, NULL, pk->data, 0.0f, o, N, &ep);
  return rc ? rc : store_rows(ctx, out, o);
}

const px_kernel_def px_kernels_linalg[] = {
    {"aten::mm.out", "@TTT|T", k_mm},
    {"aten::bmm.out", "@TTT|T", k_bmm},
    {"aten::addmm.out", "@TTTSST|T", k_addmm},
    {NULL, NULL, NULL},
};
