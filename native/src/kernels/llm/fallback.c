/*
 * fallback.c - llama::fallback: the identity ExecuTorch's model sharding puts
 * between the shards of a split LLM (so that no delegate swallows the
 * boundary); it copies its input to its output.
 */
#include <string.h>

#include "kernels/llm/llm.h"

/* llama::fallback.out(Tensor input, *, Tensor(a!) output) */
static int k_fallback(px_ctx *ctx, px_value *const *args) {
  px_tensor *in = args[0]->u.t, *out = args[1]->u.t;
  int rc;
  if ((rc = px_require_same_dtype(ctx, out, "output", in, "input")) || (rc = px_resize_like(ctx, out, in)))
    return rc;
  if (in->nbytes && out->data != in->data) memmove(out->data, in->data, in->nbytes);
  return 0;
}

const px_kernel_def px_kernels_llm_fallback[] = {
    {"llama::fallback.out", "TT|T", k_fallback},
    {NULL, NULL, NULL},
};
