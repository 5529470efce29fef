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
  bool f16n;                             /* float16 arithmetic (nodes_f16n.c): bias16 and w16 instead */
  uint16_t *bias16;                      /* float16 bias, per group padded to whole 32-column panels */
  uint16_t *w16;                         /* plain: float16 panels (f16n.h), wg halves per group;
                                            depthwise: the filter [KH*KW][Cout] as the file has it */
} conv_plan;

#endif /* PX_XNN_CONV_PLAN_H */
