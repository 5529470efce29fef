/*
 * mixed.c - quantized_decomposed::mixed_linear.out and mixed_mm.out: a
 * float32 or float16 input times an int8 weight with float scales.
 *
 *   mixed_linear: in [m, n], weight [p, n], scales [p] or [p, G] (groups of
 *                 n / G along n); out[i][j] = sum_k x[i][k] w[j][k] s[j][k / (n/G)]
 *   mixed_mm:     in [m, n], weight [n, p], scales [n] (one per reduction
 *                 index); out[i][j] = sum_k x[i][k] w[k][j] s[k]
 *
 * Both run on the float32 GEMM engine, which packs the weight panel by
 * panel through a callback that dequantizes it on the way (w * s in float),
 * so no dequantized copy of the weight is ever made. ExecuTorch's
 * vec_quantized_matmul loops instead accumulate left to right in the out
 * dtype (and, for mixed_linear, each group's partial sum before scaling):
 * results agree to float32 rounding, not bit for bit, and a float16 input is
 * computed here in float32 (closer to the exact sum than ExecuTorch's float16
 * accumulation). Zero points are rejected, as ExecuTorch rejects them; its
 * group size ceil(n / G) misreads the scales when G does not divide n, so
 * here G must divide n.
 */
#include "kernels/gemm/gemm.h"
#include "kernels/quantized/qcommon.h"

/* What the packing callback reads: B[k][j] = w[k * rk + j * rj] * s[...]. */
typedef struct q_wsrc {
  const int8_t *w;
  int64_t rk, rj;  /* weight strides along depth k and column j */
  const void *s;   /* scales (float32 or float16) */
  int sdtype;
  int64_t G, gsize; /* linear: scale (j, k / gsize) at s[j * G + k / gsize]; mm: G == 0, scale s[k] */
} q_wsrc;

static void q_pack_weight(const void *bsrc, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int nr, float *pb) {
  const q_wsrc *ws = bsrc;
  int64_t panels = (nc + nr - 1) / nr;
  for (int64_t q = 0; q < panels; q++) {
    float *panel = pb + q * kc * nr;
    for (int64_t p = 0; p < kc; p++) {
      int64_t k = pc + p;
      float *dst = panel + p * nr;
      for (int jj = 0; jj < nr; jj++) {
        int64_t j = jc + q * nr + jj;
        if (j >= jc + nc) {
          dst[jj] = 0.0f;
          continue;
        }
        int64_t si = ws->G ? j * ws->G + k / ws->gsize : k;
        dst[jj] = (float)ws->w[k * ws->rk + j * ws->rj] * q_load_f(ws->s, ws->sdtype, si);
      }
    }
  }
}

/* out [m, p] = x [m, n] @ B [n, p] with B supplied by q_pack_weight. */
static int q_mixed_gemm(px_ctx *ctx, const px_tensor *in, const q_wsrc *ws, int64_t m, int64_t n, int64_t p,
                        px_tensor *out) {
  if (m == 0 || p == 0) return 0;
  const float *x = in->data;
  if (in->dtype != PX_F32) {
    float *xf = px_scratch(ctx, (size_t)(m * n) * sizeof *xf);
    if (!xf) return PYEXEC_ERR_EXECUTION;
    for (int64_t k = 0; k < m * n; k++) xf[k] = q_load_f(in->data, in->dtype, k);
    x = xf;
  }
  float *c = out->dtype == PX_F32 ? out->data : px_scratch(ctx, (size_t)(m * p) * sizeof *c);
  if (!c) return PYEXEC_ERR_EXECUTION;
  if (n == 0) {
    for (int64_t k = 0; k < m * p; k++) c[k] = 0.0f;
  } else {
    int rc = px_gemm_f32_packed(ctx, NULL, m, p, n, 1.0f, x, n, 1, q_pack_weight, ws, 0.0f, c, p);
    if (rc) return rc;
  }
  if (out->dtype != PX_F32)
    for (int64_t k = 0; k < m * p; k++) q_store_f(out->data, out->dtype, k, c[k]);
  return 0;
}

/* The checks both kernels share. */
static int q_mixed_common(px_ctx *ctx, const px_tensor *in, const px_tensor *w, const px_tensor *s,
                          const px_value *zp, const px_tensor *out) {
  if (in->dtype != PX_F32 && in->dtype != PX_F16)
    return px_fail(ctx, "input has dtype %s; expected float32 or float16", px_dtype_name(in->dtype));
  if (in->dim != 2) return fail_shape(ctx, "input", in, "expected 2 dimensions");
  if (w->dim != 2) return fail_shape(ctx, "weight", w, "expected 2 dimensions");
  if (out->dim != 2) return fail_shape(ctx, "out", out, "expected 2 dimensions");
  if (w->dtype != PX_I8) return px_fail(ctx, "weight has dtype %s; expected int8", px_dtype_name(w->dtype));
  int rc = px_require_same_dtype(ctx, s, "weight_scales", in, "input");
  if (rc) return rc;
  if (zp->tag != PX_V_NONE) return px_fail(ctx, "weight_zero_points are not supported (ExecuTorch rejects them too)");
  return 0;
}

/* mixed_linear.out(input, weight, weight_scales, weight_zero_points?, dtype?, *, out) */
static int k_mixed_linear(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *w = a[1]->u.t, *s = a[2]->u.t, *out = a[5]->u.t;
  int rc = q_mixed_common(ctx, in, w, s, a[3], out);
  if (rc) return rc;
  int64_t dt = q_opt_dtype(a[4]);
  if (dt >= 0 && dt != PX_F32 && dt != PX_F16)
    return px_fail(ctx, "dtype is %s; expected float32 or float16", q_dtype_arg_name(dt));
  if ((rc = q_check_out_dtype(ctx, a[4], out, "dtype"))) return rc;
  if (out->dtype != PX_F32 && out->dtype != PX_F16 && out->dtype != PX_F64)
    return px_fail(ctx, "out has dtype %s; expected float32, float64 or float16", px_dtype_name(out->dtype));
  int64_t m = in->sizes[0], n = in->sizes[1], p = w->sizes[0];
  if (w->sizes[1] != n)
    return px_fail(ctx, "weight has %lld columns but input has %lld", (long long)w->sizes[1], (long long)n);
  if (s->dim != 1 && s->dim != 2) return fail_shape(ctx, "weight_scales", s, "expected 1 or 2 dimensions");
  if (s->sizes[0] != p)
    return px_fail(ctx, "weight_scales has %lld rows but weight has %lld", (long long)s->sizes[0], (long long)p);
  int64_t G = s->dim == 2 ? s->sizes[1] : 1;
  if (G <= 0 || n % G != 0)
    return px_fail(ctx, "weight_scales has %lld groups per row, which does not divide the input's %lld columns",
                   (long long)G, (long long)n);
  int64_t sizes[2] = {m, p};
  if ((rc = px_resize(ctx, out, 2, sizes))) return rc;
  q_wsrc ws = {w->data, 1, n, s->data, s->dtype, G, n / G}; /* gsize >= 1 whenever n > 0 */
  return q_mixed_gemm(ctx, in, &ws, m, n, p, out);
}

/* mixed_mm.out(input, weight, weight_scales, weight_zero_points?, *, out) */
static int k_mixed_mm(px_ctx *ctx, px_value *const *a) {
  px_tensor *in = a[0]->u.t, *w = a[1]->u.t, *s = a[2]->u.t, *out = a[4]->u.t;
  int rc = q_mixed_common(ctx, in, w, s, a[3], out);
  if (rc) return rc;
  if ((rc = px_require_same_dtype(ctx, out, "out", in, "input"))) return rc;
  int64_t m = in->sizes[0], n = in->sizes[1], p = w->sizes[1];
  if (w->sizes[0] != n)
    return px_fail(ctx, "weight has %lld rows but input has %lld columns", (long long)w->sizes[0], (long long)n);
  if (s->dim != 1 || s->sizes[0] != n)
    return fail_shape(ctx, "weight_scales", s, "expected one scale per weight row");
  int64_t sizes[2] = {m, p};
  if ((rc = px_resize(ctx, out, 2, sizes))) return rc;
  q_wsrc ws = {w->data, p, 1, s->data, s->dtype, 0, 1};
  return q_mixed_gemm(ctx, in, &ws, m, n, p, out);
}

const px_kernel_def px_kernels_mixed[] = {
    {"quantized_decomposed::mixed_linear.out", "TTTtiT|T", k_mixed_linear},
    {"quantized_decomposed::mixed_mm.out", "TTTtT|T", k_mixed_mm},
    {NULL, NULL, NULL},
};
