/*
 * dwconv_x86.h - the depthwise engine's AVX-512 row kernels (private;
 * dwconv_x86.c): multiplier 1, a KxK filter (3, 5, 7), output columns
 * [ow0, ow1) of one output row whose taps all lie inside the input's
 * columns; rows[ki] is input row oh*sh - pt + ki*dh at channel 0 (a zero row
 * in the padding), w the filter [K*K][C], the output clamped to [lo, hi].
 * Called only where the CPU has AVX-512F.
 */
#ifndef PX_DWCONV_X86_H
#define PX_DWCONV_X86_H

#include <stdint.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define PX_DW_X86 1
#define PX_DW_ROW512(NAME)                                                                      \
  void NAME(const float *const *rows, int64_t C, int64_t sw, int64_t dw, int64_t pl, int64_t ow0, \
            int64_t ow1, const float *w, const float *bias, float lo, float hi, float *orow)
PX_DW_ROW512(px_dw_row_3x3_avx512);
PX_DW_ROW512(px_dw_row_5x5_avx512);
PX_DW_ROW512(px_dw_row_7x7_avx512);
#undef PX_DW_ROW512
#else
#define PX_DW_X86 0
#endif

#endif /* PX_DWCONV_X86_H */
