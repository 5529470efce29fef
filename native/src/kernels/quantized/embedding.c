/*
 * embedding.c - quantized_decomposed::embedding_byte / embedding_2bit /
 * embedding_4bit, .out and .dtype_out: rows of a quantized [V, D] table
 * gathered by index and dequantized with per-row (scales [V]) or per-group
 * (scales [V, G], groups of D / G) parameters, as ExecuTorch's
 * op_embedding.cpp and embeddingxb.cpp compute them:
 *
 *   out[..., j] = (OUT)(((float)w[j] - (float)zp[g]) * (float)scale[g]),  g = j / (D / G)
 *
 * Packing (the weight is uint8 for 2 and 4 bits, [V, D * nbit / 8]):
 *   4-bit: element 2i is the high nibble of byte i, 2i+1 the low one, each
 *          minus 8 (the opposite order to XNNPACK's 4-bit weights);
 *   2-bit: element 4i+r is bits [2r, 2r+1] of byte i (r = 0 the lowest),
 *          minus 2.
 * The byte table is uint8 or int8, taken as stored. Scales and the optional
 * zero points are float32, float16 or bfloat16; zero points have out's
 * dtype and the scales' shape. ExecuTorch's .out reads the scales as if
 * they had out's dtype; here they are read as what they are (the same
 * whenever the two agree, as exported programs have them). Indices are
 * int64 or int32 and must lie in [0, V) (ExecuTorch checks this only for
 * the byte table).
 */
#include "kernels/quantized/qcommon.h"

/* Element j of a packed row (nbit 8: the byte as uint8 or int8). */
static inline int32_t q_packed(const uint8_t *row, int64_t j, int nbit, bool is_signed) {
  switch (nbit) {
    case 4: return (int32_t)((j & 1) ? (row[j >> 1] & 0x0F) : (row[j >> 1] >> 4)) - 8;
    case 2: return (int32_t)((row[j >> 2] >> (2 * (j & 3))) & 3) - 2;
    default: return is_signed ? (int32_t)(int8_t)row[j] : (int32_t)row[j];
  }
}

static bool q_embed_float(int dtype) { return dtype == PX_F32 || dtype == PX_F16 || dtype == PX_BF16; }

/* Shared by the six kernels: a = the schema arguments, out_dtype the
 * .dtype_out argument (NULL for .out), nbit 8, 4 or 2. */
static int embedding_q(px_ctx *ctx, px_value *const *a, const px_value *out_dtype, px_tensor *out, int nbit) {
  px_tensor *w = a[0]->u.t, *s = a[1]->u.t, *idx = a[5]->u.t;
  px_tensor *z = a[2]->tag == PX_V_TENSOR ? a[2]->u.t : NULL;
  int64_t qmin = a[3]->u.i, qmax = a[4]->u.i;
  int rc;
  /* weight and its unpacked row length D */
  if (w->dim != 2) return fail_shape(ctx, "weight", w, "expected 2 dimensions");
  if (nbit == 8 ? (w->dtype != PX_U8 && w->dtype != PX_I8) : w->dtype != PX_U8)
    return px_fail(ctx, "weight has dtype %s; expected %s", px_dtype_name(w->dtype),
                   nbit == 8 ? "uint8 or int8" : "uint8 (packed)");
  int64_t V = w->sizes[0], D = w->sizes[1] * (8 / nbit);
  /* scales and zero points */
  if (s->dim != 1 && s->dim != 2) return fail_shape(ctx, "weight_scales", s, "expected 1 or 2 dimensions");
  if (s->sizes[0] != V)
    return px_fail(ctx, "weight_scales has %lld rows but weight has %lld", (long long)s->sizes[0], (long long)V);
  int64_t G = s->dim == 2 ? s->sizes[1] : 1;
  if (G <= 0 || D % G != 0)
    return px_fail(ctx, "weight_scales has %lld groups per row, which does not divide the embedding dim %lld",
                   (long long)G, (long long)D);
  if (!q_embed_float(s->dtype))
    return px_fail(ctx, "weight_scales has dtype %s; expected float32, float16 or bfloat16", px_dtype_name(s->dtype));
  if (!q_embed_float(out->dtype))
    return px_fail(ctx, "out has dtype %s; expected float32, float16 or bfloat16", px_dtype_name(out->dtype));
  if (z) {
    if (z->dim != s->dim || z->sizes[0] != s->sizes[0] || (s->dim == 2 && z->sizes[1] != G))
      return fail_shape(ctx, "weight_zero_points", z, "expected weight_scales' shape");
    if ((rc = px_require_same_dtype(ctx, z, "weight_zero_points", out, "out"))) return rc;
  }
  if (qmin > qmax)
    return px_fail(ctx, "weight_quant_min %lld is greater than weight_quant_max %lld", (long long)qmin,
                   (long long)qmax);
  if (out_dtype && (rc = q_check_out_dtype(ctx, out_dtype, out, "dtype"))) return rc;
  if (idx->dtype != PX_I64 && idx->dtype != PX_I32)
    return px_fail(ctx, "indices has dtype %s; expected int64 or int32", px_dtype_name(idx->dtype));
  /* out: indices' shape + [D] */
  if (out->dim != idx->dim + 1)
    return px_fail(ctx, "out has %d dimensions; expected indices' %d plus one", out->dim, idx->dim);
  int64_t sizes[PX_MAX_DIM];
  for (int k = 0; k < idx->dim; k++) sizes[k] = idx->sizes[k];
  sizes[idx->dim] = D;
  if ((rc = px_resize(ctx, out, out->dim, sizes))) return rc;
  /* gather and dequantize */
  int64_t gsize = D / G, row_bytes = w->sizes[1];
  bool is_signed = w->dtype == PX_I8;
  for (int64_t i = 0; i < idx->numel; i++) {
    int64_t r = px_load_i(idx->data, idx->dtype, i);
    if (r < 0 || r >= V)
      return px_fail(ctx, "indices[%lld] is %lld, outside the table's %lld rows", (long long)i, (long long)r,
                     (long long)V);
    const uint8_t *row = (const uint8_t *)w->data + r * row_bytes;
    int64_t ob = i * D;
    for (int64_t g = 0; g < G; g++) {
      float sc = q_load_f(s->data, s->dtype, r * G + g);
      float zp = z ? q_load_f(z->data, z->dtype, r * G + g) : 0.0f;
      int64_t j0 = g * gsize;
      if (out->dtype == PX_F32) {
        float *o = (float *)out->data + ob;
        for (int64_t j = j0; j < j0 + gsize; j++) o[j] = ((float)q_packed(row, j, nbit, is_signed) - zp) * sc;
      } else {
        for (int64_t j = j0; j < j0 + gsize; j++)
          q_store_f(out->data, out->dtype, ob + j, ((float)q_packed(row, j, nbit, is_signed) - zp) * sc);
      }
    }
  }
  return 0;
}

/* embedding_{byte,2bit,4bit}.out(weight, weight_scales, weight_zero_points?, weight_quant_min,
 *                                weight_quant_max, indices, *, out) */
static int k_embedding_byte(px_ctx *ctx, px_value *const *a) { return embedding_q(ctx, a, NULL, a[6]->u.t, 8); }
static int k_embedding_4bit(px_ctx *ctx, px_value *const *a) { return embedding_q(ctx, a, NULL, a[6]->u.t, 4); }
static int k_embedding_2bit(px_ctx *ctx, px_value *const *a) { return embedding_q(ctx, a, NULL, a[6]->u.t, 2); }

/* .dtype_out: the same with dtype? before out (kw-only for byte, positional
 * for 2 and 4 bits: the same position in the call either way). */
static int k_embedding_byte_d(px_ctx *ctx, px_value *const *a) { return embedding_q(ctx, a, a[6], a[7]->u.t, 8); }
static int k_embedding_4bit_d(px_ctx *ctx, px_value *const *a) { return embedding_q(ctx, a, a[6], a[7]->u.t, 4); }
static int k_embedding_2bit_d(px_ctx *ctx, px_value *const *a) { return embedding_q(ctx, a, a[6], a[7]->u.t, 2); }

const px_kernel_def px_kernels_quantized_embedding[] = {
    {"quantized_decomposed::embedding_byte.out", "TTtIITT|T", k_embedding_byte},
    {"quantized_decomposed::embedding_byte.dtype_out", "TTtIITiT|T", k_embedding_byte_d},
    {"quantized_decomposed::embedding_4bit.out", "TTtIITT|T", k_embedding_4bit},
    {"quantized_decomposed::embedding_4bit.dtype_out", "TTtIITiT|T", k_embedding_4bit_d},
    {"quantized_decomposed::embedding_2bit.out", "TTtIITT|T", k_embedding_2bit},
    {"quantized_decomposed::embedding_2bit.dtype_out", "TTtIITiT|T", k_embedding_2bit_d},
    {NULL, NULL, NULL},
};
