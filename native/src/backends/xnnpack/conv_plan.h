/*
 * conv_plan.h - what the float32 convolutions' prepare hook (nodes_conv.c)
 * packs into node->packed, for the files that run those weights: the
 * convolution nodes themselves and the fused chains of nodes_block.c.
 * Private to backends/xnnpack/.
 */
#ifndef PX_XNN_CONV_PLAN_H
#define PX_XNN_CONV_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CONV_PLAIN, CONV_DEPTHWISE, CONV_TRANSPOSED };

typedef struct conv_plan {
  int kind;
  int64_t KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, ah, aw;
  int64_t G, Cin_g, Cout_g, Cin, Cout, K; /* K: GEMM depth (plain: KH*KW*Cin_g) */
  bool direct;                           /* plain 1x1, stride 1, no padding */
  float *bias;                           /* [Cout] */
  float *w;                              /* packed weights: plain and transposed, the GEMM engine's panels group
                                            after group; depthwise, the filter [KH*KW][Cout] as the file has it */
  size_t wg;                             /* floats between groups in w */
  float *wino;                           /* Winograd F(4x4, 3x3) filter, or NULL */
} conv_plan;

#endif /* PX_XNN_CONV_PLAN_H */
