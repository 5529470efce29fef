/*
 * kernel.h - what a kernel sees: its context, its arguments, the registry
 * entry that describes it, and the shared helpers (resizing, broadcasting,
 * type promotion, element access) every kernel family uses.
 *
 * A kernel is called with the instruction's arguments in the order the
 * ExecuTorch emitter wrote them: every schema argument (defaults filled in),
 * then the return value(s). For an `.out` overload the out tensor therefore
 * appears twice (`add.out` = self, other, alpha, out | out).
 *
 * Each kernel declares its argument kinds in a signature string checked once
 * at method load, so kernels may read args[k]->u.<field> without re-checking
 * tags. One character per argument:
 *   T tensor            t tensor or None
 *   S scalar (int, double or bool)      s scalar or None
 *   I int               i int or None
 *   D double (an int is accepted)       d double, int or None
 *   B bool              b bool or None
 *   L int list          l int list or None
 *   F double list       f double list or None
 *   Q bool list
 *   X tensor list       Y optional-tensor list (a plain tensor list is accepted)
 *   R string            r string or None
 *   * anything
 *   | separates the schema arguments from the return values; values after it
 *     are written by the kernel (the loader uses this to know which program
 *     values are mutated).
 * A leading '@' says the kernel handles tensors in any dim_order itself;
 * without it, the executor calls the kernel with row-major copies of
 * non-row-major tensor arguments (and copies written values back).
 *
 * Kernels report failure with px_fail(), which records a message and returns
 * a non-zero status; they never abort. Kernels do not allocate with malloc on
 * the execute path; use px_scratch() for temporary memory.
 */
#ifndef PX_KERNEL_H
#define PX_KERNEL_H

#include <stdarg.h>

#include "core/tensor.h"

typedef struct px_ctx px_ctx;

typedef int (*px_kernel_fn)(px_ctx *ctx, px_value *const *args);

typedef struct px_kernel_def {
  const char *name; /* "aten::add.out"; "namespace::name" when no overload */
  const char *sig;  /* argument kinds, see above */
  px_kernel_fn fn;
} px_kernel_def;

/* Each kernel family exports a table px_kernels_<family>[] terminated by an
 * entry with name NULL; the registry (registry.c) merges the tables of every
 * family listed here. A new family adds its line. */
#define PX_KERNEL_FAMILIES(X)                                                              \
  /* elementwise/ */ X(binary) X(unary) X(activation) X(select)                          \
  /* reduction/ */ X(reduction) X(argminmax) X(var) X(scan) X(sort)                      \
  /* products, convolution, sampling */ X(linalg) X(linear) X(conv) X(pool) X(upsample)   \
  X(upsample_aa) X(grid_sampler) X(cdist) X(pdist)                                      \
  /* normalisation, random */ X(norm) X(softmax) X(random)                               \
  /* shape/ */ X(view) X(copy) X(factory) X(concat) X(slice) X(pad) X(rearrange)         \
  X(pixel_shuffle)                                                                      \
  /* index/ */ X(index) X(scatter)                                                        \
  /* llm/ (llama::) */ X(llm_sdpa) X(llm_cache) X(llm_hadamard) X(llm_gated_delta) X(llm_fallback) X(llm_moe)                           \
  /* quantized/ */ X(quantize) X(dequantize) X(choose_qparams) X(quantized_embedding) X(mixed) X(quantized_add) \
  /* executorch_prim:: */ X(prim)
#define PX_KERNEL_TABLE_DECL_(family) extern const px_kernel_def px_kernels_##family[];
PX_KERNEL_FAMILIES(PX_KERNEL_TABLE_DECL_)
#undef PX_KERNEL_TABLE_DECL_

/* ---- context --------------------------------------------------------- */

struct px_scratch_block;

struct px_ctx {
  const char *op; /* operator being run, for messages */
  char *msg;      /* message buffer (capacity msg_cap) */
  size_t msg_cap;
  struct px_scratch_block *scratch; /* per-method temporary memory */
  struct px_scratch_block *scratch_cur;
  size_t scratch_used;
  struct px_profile *prof; /* non-NULL while the method is profiled (runtime/profile.h) */
};

/* Records "<op>: <message>" in the context and returns PYEXEC_ERR_EXECUTION. */
int px_fail(px_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Temporary memory, 64-byte aligned, valid until the current kernel returns.
 * Blocks are kept and reused by later calls, so the steady state allocates
 * nothing. Returns NULL (after px_fail) when memory runs out. */
void *px_scratch(px_ctx *ctx, size_t bytes);

/* Frees every scratch block (when the method is destroyed). */
void px_scratch_release(px_ctx *ctx);

/* ---- shapes ------------------------------------------------------------ */

/* Sets t's sizes (ExecuTorch's resize rules: the rank must not change, a
 * static tensor accepts only its own sizes, a dynamic one any sizes whose
 * element count fits its bound). Recomputes strides and byte counts. */
int px_resize(px_ctx *ctx, px_tensor *t, int dim, const int64_t *sizes);
static inline int px_resize_like(px_ctx *ctx, px_tensor *t,
                                 const px_tensor *like) {
  return px_resize(ctx, t, like->dim, like->sizes);
}

/* The broadcast of a's and b's sizes (torch rules). */
int px_broadcast_sizes(px_ctx *ctx, int adim, const int64_t *asizes, int bdim,
                       const int64_t *bsizes, int *odim, int64_t *osizes);

/* Fails unless t's dim_order is the default (row-major) one. */
int px_require_contiguous(px_ctx *ctx, const px_tensor *t, const char *what);

/* Python slice bounds [start:end:step] over a dimension of `size`: start and
 * end may be None (values of tag NONE) or negative, and are clamped to the
 * dimension; step must be positive (px_fail otherwise). Gives the first
 * index, the number of elements and the step to multiply strides by (1 when
 * at most one element is taken, so a huge step cannot overflow a stride). */
int px_slice_bounds(px_ctx *ctx, const px_value *start_v, const px_value *end_v, const px_value *step_v,
                    int64_t size, int64_t *start, int64_t *len, int64_t *step);

/* Fails unless a and b have the same dtype ("<an> has dtype X but <bn> has dtype Y"). */
int px_require_same_dtype(px_ctx *ctx, const px_tensor *a, const char *an, const px_tensor *b,
                          const char *bn);

/* Fails unless t has dtype `dtype`. */
int px_require_dtype(px_ctx *ctx, const px_tensor *t, int dtype,
                     const char *what);

/* Normalises a possibly negative dimension index against `dim` (a 0-d tensor
 * accepts -1 and 0). Returns -1 after px_fail when out of range. */
int px_wrap_dim(px_ctx *ctx, int64_t d, int dim);

/* Product of sizes[from..to). */
static inline int64_t px_prod(const int64_t *sizes, int from, int to) {
  int64_t p = 1;
  for (int k = from; k < to; k++) p *= sizes[k];
  return p;
}

/* ---- dtypes and scalars ------------------------------------------------ */

/* torch.promote_types for two dtypes. */
int px_promote(int a, int b);

/* torch.result_type of (tensor of dtype `t`, Python scalar of kind `s`), where
 * s is PX_BOOL, PX_I64 (an int) or PX_F64 (a float): a scalar only changes the
 * result when it belongs to a higher category (bool < integer < floating). */
int px_promote_scalar(int t, int s);

/* Kind of a scalar value: PX_BOOL, PX_I64 or PX_F64. */
int px_scalar_kind(const px_value *v);
double px_scalar_d(const px_value *v);
int64_t px_scalar_i(const px_value *v);

/* Element `k` of a buffer of `dtype`, read as double / int64, and written from
 * double / int64 (with torch's conversion rules: float -> int truncates,
 * anything -> bool is != 0). */
double px_load_d(const void *base, int dtype, int64_t k);
int64_t px_load_i(const void *base, int dtype, int64_t k);
void px_store_d(void *base, int dtype, int64_t k, double v);
void px_store_i(void *base, int dtype, int64_t k, int64_t v);

/* Converts n contiguous elements from one dtype to another (no overlap). */
void px_convert(void *dst, int dst_dtype, const void *src, int src_dtype,
                int64_t n);

/* Copies src into dst element by element following both tensors' strides
 * (sizes must be equal), converting dtype when they differ. */
int px_copy_strided(px_ctx *ctx, px_tensor *dst, const px_tensor *src);

/* ---- iteration over broadcast operands --------------------------------- */

/* Walks an output shape with up to 4 operands, each with its own (broadcast)
 * strides in elements. Usage:
 *
 *   px_iter it;
 *   px_iter_init(&it, out->dim, out->sizes);
 *   px_iter_add(&it, a);  px_iter_add(&it, b);  px_iter_add(&it, out);
 *   px_iter_coalesce(&it);
 *   do {
 *     for (int64_t k = 0; k < it.inner; k++)
 *       use offsets it.off[i] + k * it.inner_stride[i];
 *   } while (px_iter_next(&it));
 *
 * Operands must have the output's rank or less (leading dims are
 * broadcast); size-1 dims are broadcast with stride 0. */
#define PX_ITER_MAX 4
typedef struct px_iter {
  int dim;
  int n;
  int64_t numel;
  int64_t sizes[PX_MAX_DIM];
  int64_t strides[PX_ITER_MAX][PX_MAX_DIM];
  int64_t idx[PX_MAX_DIM];
  int64_t off[PX_ITER_MAX];
  int64_t inner;
  int64_t inner_stride[PX_ITER_MAX];
} px_iter;

void px_iter_init(px_iter *it, int dim, const int64_t *sizes);
void px_iter_add(px_iter *it, const px_tensor *t);
void px_iter_coalesce(px_iter *it);
bool px_iter_next(px_iter *it);
/* Positions the iterator at outer row `row` (idx and off as px_iter_next
 * would leave them after `row` steps): where a task of a split loop starts. */
void px_iter_seek(px_iter *it, int64_t row);

#endif /* PX_KERNEL_H */
