/*
 * hadamard.c - llama::fast_hadamard_transform (SpinQuant's rotation): each
 * vector along the last dim multiplied by a Hadamard matrix.
 *
 * For n = 2^k that is the natural-order (Sylvester) matrix divided by
 * sqrt(n), as butterflies (x + y, x - y) at strides 1, 2, 4, ... then one
 * scaling. For n = 28 * 2^k the vector is read as 28 rows of 2^k, each row
 * gets the normalised 2^k transform, and then each column is multiplied by
 * the 28 x 28 +-1 matrix below (not normalised: ExecuTorch's output norm is
 * sqrt(28) times the input's). float16 and bfloat16 are computed in float32
 * and rounded once.
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

/* The normalised 2^k transform of x[0..n) in place. */
static void fht_pow2(float *x, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; j++) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  float inv = (float)(1.0 / sqrt((double)n));
  for (int64_t j = 0; j < n; j++) x[j] *= inv;
}

/* x[0..28 * m): rows of m transformed in place, then columns mixed by had28
 * into y. */
static void fht_28(float *x, float *y, int64_t m) {
  for (int r = 0; r < 28; r++) fht_pow2(x + r * m, m);
  for (int r = 0; r < 28; r++) {
    float *yr = y + r * m;
    for (int64_t c = 0; c < m; c++) yr[c] = 0.0f;
    for (int k = 0; k < 28; k++) {
      const float *xk = x + k * m;
      if (had28[r][k] == '+')
        for (int64_t c = 0; c < m; c++) yr[c] += xk[c];
      else
        for (int64_t c = 0; c < m; c++) yr[c] -= xk[c];
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
  for (int64_t v = 0; v < mat->numel / n; v++) {
    llm_load_f32(x, mat->data, mat->dtype, v * n, n);
    if (by28)
      fht_28(x, y, m);
    else
      fht_pow2(x, n);
    llm_store_f32(out->data, out->dtype, v * n, by28 ? y : x, n);
  }
  return 0;
}

const px_kernel_def px_kernels_llm_hadamard[] = {
    {"llama::fast_hadamard_transform.out", "@TT|T", k_fast_hadamard_transform},
    {NULL, NULL, NULL},
};
