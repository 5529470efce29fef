/*
 * hadamard.c - llama::fast_hadamard_transform (SpinQuant's rotation): each
 * vector along the last dim multiplied by a Hadamard matrix.
 *
 * For n = 2^k that is the natural-order (Sylvester) matrix divided by
 * sqrt(n), as butterflies (x + y, x - y) at strides 1, 2, 4, ... then one
 * scaling. For n = 28 * 2^k the vector is read as 28 rows of 2^k, each row
 * gets the normalised 2^k transform, and then each column is multiplied by
 * the 28 x 28 +-1 matrix below (not normalised: ExecuTorch's output norm is
 * sqrt(28) times the input's). float16 is computed as ExecuTorch does, in
 * float16 (every butterfly rounded); bfloat16 in float32, rounded once.
 */
#include <math.h>

#include "kernels/llm/llm.h"

/* had_28_will from ExecuTorch's spinquant/special_hadamard_code_gen.py:
 * row r, column c is +1 for '+' and -1 for '-'. */
static const char had28[28][29] = {
    "+------++----++-+--+-+--++--",
    "-+-----+++-----+-+--+-+--++-",
    "--+-----+++---+-+-+----+--++",
    "---+-----+++---+-+-+-+--+--+",
    "----+-----+++---+-+-+++--+--",
    "-----+-----++++--+-+--++--+-",
    "------++----++-+--+-+--++--+",
    "--++++-+-------++--+++-+--+-",
    "---++++-+-----+-++--+-+-+--+",
    "+---+++--+----++-++--+-+-+--",
    "++---++---+----++-++--+-+-+-",
    "+++---+----+----++-++--+-+-+",
    "++++--------+-+--++-++--+-+-",
    "-++++--------+++--++--+--+-+",
    "-+-++-++--++--+--------++++-",
    "+-+-++--+--++--+--------++++",
    "-+-+-++--+--++--+----+---+++",
    "+-+-+-++--+--+---+---++---++",
    "++-+-+-++--+------+--+++---+",
    "-++-+-+-++--+------+-++++---",
    "+-++-+---++--+------+-++++--",
    "-++--++-+-++-+++----++------",
    "+-++--++-+-++-+++-----+-----",
    "++-++---+-+-++-+++-----+----",
    "-++-++-+-+-+-+--+++-----+---",
    "--++-++++-+-+----+++-----+--",
    "+--++-+-++-+-+----+++-----+-",
    "++--++-+-++-+-+----++------+",
};

/* The normalised 2^k transform of x[0..n) in place. r16 = PX_F16: every
 * operation rounded to float16, the scale 1 / (2^(k/2) * sqrt(2) if k is
 * odd) computed in float16 too, as ExecuTorch does for a float16 input;
 * otherwise float32 throughout (px_r16 leaves values alone). */
static void fht_pow2(float *x, int64_t n, int r16) {
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; j++) {
        float a = x[j], b = x[j + h];
        x[j] = px_r16(r16, a + b);
        x[j + h] = px_r16(r16, a - b);
      }
  float inv;
  if (r16 == PX_F16) {
    int k = 0;
    while (((int64_t)1 << k) < n) k++;
    float root = px_r16(r16, (float)((int64_t)1 << (k / 2)) * ((k % 2) ? px_r16(r16, (float)sqrt(2.0)) : 1.0f));
    inv = px_r16(r16, 1.0f / root);
  } else {
    inv = (float)(1.0 / sqrt((double)n));
  }
  for (int64_t j = 0; j < n; j++) x[j] = px_r16(r16, x[j] * inv);
}

/* x[0..28 * m): rows of m transformed in place, then columns mixed by had28
 * into y, each column's 28 terms added in order. For float16, ExecuTorch's
 * generated code writes each output as "+ x[0] - x[1] ..." or "- x[0] +
 * x[1] ...": the unary plus turns a c10::Half into a float, so the rows
 * that start with '+' add in float and round once, while the unary minus
 * keeps a Half, so the others round every addition. The same here. */
static void fht_28(float *x, float *y, int64_t m, int r16) {
  for (int r = 0; r < 28; r++) fht_pow2(x + r * m, m, r16);
  for (int r = 0; r < 28; r++) {
    float *yr = y + r * m;
    int rr = had28[r][0] == '+' ? PX_F32 : r16; /* PX_F32: px_r16 rounds nothing */
    for (int64_t c = 0; c < m; c++) yr[c] = had28[r][0] == '+' ? x[c] : -x[c];
    for (int k = 1; k < 28; k++) {
      const float *xk = x + k * m;
      if (had28[r][k] == '+')
        for (int64_t c = 0; c < m; c++) yr[c] = px_r16(rr, yr[c] + xk[c]);
      else
        for (int64_t c = 0; c < m; c++) yr[c] = px_r16(rr, yr[c] - xk[c]);
    }
  }
}

/* llama::fast_hadamard_transform.out(Tensor mat, *, Tensor(a!) out) */
static int k_fast_hadamard_transform(px_ctx *ctx, px_value *const *args) {
  px_tensor *mat = args[0]->u.t, *out = args[1]->u.t;
  int rc;
  if ((rc = llm_require_attn_dtype(ctx, mat, "mat")) || (rc = px_require_same_dtype(ctx, out, "out", mat, "mat")) ||
      (rc = px_require_contiguous(ctx, mat, "mat")) || (rc = px_require_contiguous(ctx, out, "out")) ||
      (rc = px_resize_like(ctx, out, mat)))
    return rc;
  if (mat->dim == 0 || mat->numel == 0) return 0;
  int64_t n = mat->sizes[mat->dim - 1], m = n;
  if (m % 28 == 0) m /= 28;
  if (m & (m - 1))
    return fail_shape(ctx, "mat", mat, "the last dim must be a power of two or 28 times one");
  bool by28 = m != n;
  float *x = px_scratch(ctx, sizeof(float) * (size_t)n * (by28 ? 2 : 1));
  if (!x) return PYEXEC_ERR_EXECUTION;
  float *y = x + n;
  /* float16 as ExecuTorch computes it; bfloat16 (which ExecuTorch's kernel
   * does not take) in float32, rounded once */
  int r16 = mat->dtype == PX_F16 ? PX_F16 : PX_F32;
  for (int64_t v = 0; v < mat->numel / n; v++) {
    llm_load_f32(x, mat->data, mat->dtype, v * n, n);
    if (by28)
      fht_28(x, y, m, r16);
    else
      fht_pow2(x, n, r16);
    llm_store_f32(out->data, out->dtype, v * n, by28 ? y : x, n);
  }
  return 0;
}

const px_kernel_def px_kernels_llm_hadamard[] = {
    {"llama::fast_hadamard_transform.out", "@TT|T", k_fast_hadamard_transform},
    {NULL, NULL, NULL},
};
