/*
 * copy.c - plain copies: clone, alias / detach / lift_fresh copies, _to_copy
 * and the dim_order copies (dtype and layout changes), copy and copy_,
 * through the strided views of strided.c.
 */
#include <string.h>

#include "kernels/shape/strided.h"

/* ---- plain copies ------------------------------------------------------------ */

static int clone_into(px_ctx *ctx, px_tensor *self, px_tensor *out) {
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  return px_copy_same_shape(ctx, out, self);
}

/* clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out) */
static int k_clone(px_ctx *ctx, px_value *const *args) {
  return clone_into(ctx, args[0]->u.t, args[2]->u.t);
}

/* alias_copy / detach_copy / lift_fresh_copy .out(Tensor self, *, Tensor(a!) out) */
static int k_copy1(px_ctx *ctx, px_value *const *args) {
  return clone_into(ctx, args[0]->u.t, args[1]->u.t);
}

/* _to_copy.out(Tensor self, *, bool non_blocking=False, MemoryFormat? memory_format=None,
 * Tensor(a!) out): the out tensor's dtype and dim_order decide. */
static int k_to_copy(px_ctx *ctx, px_value *const *args) {
  return clone_into(ctx, args[0]->u.t, args[3]->u.t);
}

/* _to_dim_order_copy.out / _clone_dim_order.out(Tensor self, *, bool non_blocking=False,
 * int[]? dim_order=None, Tensor(a!) out) */
static int k_to_dim_order_copy(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *out = args[3]->u.t;
  if (out->dim != self->dim)
    return px_fail(ctx, "out has %d dims but self has %d", out->dim, self->dim);
  int rc = px_check_dim_order_arg(ctx, args[2], out);
  if (rc) return rc;
  return clone_into(ctx, self, out);
}

/* copy.out(Tensor self, Tensor src, bool non_blocking=False, *, Tensor(a!) out) */
static int k_copy_out(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *out = args[3]->u.t;
  int rc = px_resize_like(ctx, out, self);
  if (rc) return rc;
  px_sv s, d;
  rc = px_expand_view(ctx, &s, src, self->dim, self->sizes, "src");
  if (rc) return rc;
  px_sv_from(&d, out);
  return px_sv_copy(ctx, &d, &s);
}

/* copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!) */
static int k_copy_(px_ctx *ctx, px_value *const *args) {
  px_tensor *self = args[0]->u.t, *src = args[1]->u.t, *ret = args[3]->u.t;
  px_sv s, d;
  int rc = px_expand_view(ctx, &s, src, self->dim, self->sizes, "src");
  if (rc) return rc;
  if (src->data == self->data && src->numel > 1 && src != self) {
    /* the same storage seen through another tensor: go through scratch */
    size_t bytes = (size_t)src->numel * px_elsize(src->dtype);
    void *tmp = px_scratch(ctx, bytes);
    if (!tmp) return PYEXEC_ERR_EXECUTION;
    memcpy(tmp, src->data, bytes);
    s.data = tmp;
  }
  px_sv_from(&d, self);
  rc = px_sv_copy(ctx, &d, &s);
  if (rc) return rc;
  if (ret != self && ret->data != self->data) {
    rc = px_resize_like(ctx, ret, self);
    if (rc) return rc;
    return px_copy_same_shape(ctx, ret, self);
  }
  return 0;
}

const px_kernel_def px_kernels_copy[] = {
    {"aten::clone.out", "TiT|T", k_clone},
    {"aten::alias_copy.out", "TT|T", k_copy1},
    {"aten::detach_copy.out", "TT|T", k_copy1},
    {"aten::lift_fresh_copy.out", "TT|T", k_copy1},
    {"aten::_to_copy.out", "TBiT|T", k_to_copy},
    {"dim_order_ops::_to_dim_order_copy.out", "TBlT|T", k_to_dim_order_copy},
    {"dim_order_ops::_clone_dim_order.out", "TBlT|T", k_to_dim_order_copy},
    {"aten::copy_", "TTB|T", k_copy_},
    {"aten::copy.out", "TTBT|T", k_copy_out},
    {NULL, NULL, NULL},
};
