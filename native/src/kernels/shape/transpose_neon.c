/*
 * transpose_neon.c - transpose.c's NEON tiles (transpose_isa.h): 4x4 for
 * 4-byte elements, 8x8 for bytes. Elsewhere than on AArch64 this file compiles to nothing.
 */
#include "kernels/shape/transpose_isa.h"

/* ---- AArch64 NEON 4x4 tiles ------------------------------------------------------ */

#ifdef HAVE_NEON_TILES
#include <arm_neon.h>

/* One 4x4 tile of 32-bit words: four row loads, two rounds of TRN1 / TRN2
 * (32-bit, then 64-bit), four column stores; whole words move, so bits come
 * out as they went in. */
static inline void tile4x4_u32(uint32_t *d, int64_t dst_ld, const uint32_t *s, int64_t src_ld) {
  const uint32x4_t x0 = vld1q_u32(s), x1 = vld1q_u32(s + src_ld);
  const uint32x4_t x2 = vld1q_u32(s + 2 * src_ld), x3 = vld1q_u32(s + 3 * src_ld);
  const uint64x2_t t0 = vreinterpretq_u64_u32(vtrn1q_u32(x0, x1));
  const uint64x2_t t1 = vreinterpretq_u64_u32(vtrn2q_u32(x0, x1));
  const uint64x2_t t2 = vreinterpretq_u64_u32(vtrn1q_u32(x2, x3));
  const uint64x2_t t3 = vreinterpretq_u64_u32(vtrn2q_u32(x2, x3));
  vst1q_u32(d, vreinterpretq_u32_u64(vtrn1q_u64(t0, t2)));
  vst1q_u32(d + dst_ld, vreinterpretq_u32_u64(vtrn1q_u64(t1, t3)));
  vst1q_u32(d + 2 * dst_ld, vreinterpretq_u32_u64(vtrn2q_u64(t0, t2)));
  vst1q_u32(d + 3 * dst_ld, vreinterpretq_u32_u64(vtrn2q_u64(t1, t3)));
}

/* As px_transpose4_avx2 with 4x4 tiles. */
void px_transpose4_neon(uint32_t *dst, int64_t dst_ld, const uint32_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols) {
  PX_TILE_WALK(rows, cols, 4, tile4x4_u32(dst + c * dst_ld + r, dst_ld, src + r * src_ld + c, src_ld));
}

/* One 8x8 tile of bytes: TRN on 8-, 16- and 32-bit lanes. After the first
 * round a register holds two rows' bytes of the even (odd) columns paired;
 * after the second, four rows of columns j and j + 4; after the third, all
 * eight rows of one column. */
static inline void tile8x8_u8(uint8_t *d, int64_t dst_ld, const uint8_t *s, int64_t src_ld) {
  uint8x8_t x[8];
  for (int i = 0; i < 8; i++) x[i] = vld1_u8(s + i * src_ld);
  const uint8x8x2_t t01 = vtrn_u8(x[0], x[1]), t23 = vtrn_u8(x[2], x[3]);
  const uint8x8x2_t t45 = vtrn_u8(x[4], x[5]), t67 = vtrn_u8(x[6], x[7]);
#define PX_U16(v) vreinterpret_u16_u8(v)
  const uint16x4x2_t u02 = vtrn_u16(PX_U16(t01.val[0]), PX_U16(t23.val[0]));
  const uint16x4x2_t u13 = vtrn_u16(PX_U16(t01.val[1]), PX_U16(t23.val[1]));
  const uint16x4x2_t u46 = vtrn_u16(PX_U16(t45.val[0]), PX_U16(t67.val[0]));
  const uint16x4x2_t u57 = vtrn_u16(PX_U16(t45.val[1]), PX_U16(t67.val[1]));
#undef PX_U16
#define PX_U32(v) vreinterpret_u32_u16(v)
  const uint32x2x2_t c04 = vtrn_u32(PX_U32(u02.val[0]), PX_U32(u46.val[0]));
  const uint32x2x2_t c15 = vtrn_u32(PX_U32(u13.val[0]), PX_U32(u57.val[0]));
  const uint32x2x2_t c26 = vtrn_u32(PX_U32(u02.val[1]), PX_U32(u46.val[1]));
  const uint32x2x2_t c37 = vtrn_u32(PX_U32(u13.val[1]), PX_U32(u57.val[1]));
#undef PX_U32
  const uint32x2_t col[8] = {c04.val[0], c15.val[0], c26.val[0], c37.val[0],
                             c04.val[1], c15.val[1], c26.val[1], c37.val[1]};
  for (int c = 0; c < 8; c++) vst1_u8(d + c * dst_ld, vreinterpret_u8_u32(col[c]));
}

/* As px_transpose4_neon, for bytes in 8x8 tiles. */
void px_transpose1_neon(uint8_t *dst, int64_t dst_ld, const uint8_t *src, int64_t src_ld, int64_t rows,
                        int64_t cols) {
  PX_TILE_WALK(rows, cols, 8, tile8x8_u8(dst + c * dst_ld + r, dst_ld, src + r * src_ld + c, src_ld));
}
#endif

typedef int px_transpose_neon_unused; /* ISO C: no empty translation unit */
