/*
 * limits.h - the bounds every floor applies to what a file declares
 * (private).
 */
#ifndef PX_LIMITS_H
#define PX_LIMITS_H

#include <stdint.h>

/* The most bytes one tensor (at its upper-bound sizes) or one planned buffer
 * may declare; a file declaring more is refused as invalid, so sizes from a
 * hostile file never reach an allocator or a size computation anywhere near
 * overflow. 1 TiB is beyond any CPU's memory, so no real program is refused.
 * The fuzzing build lowers it (sanitize.mk). */
#ifndef PX_MAX_DECLARED_BYTES
#define PX_MAX_DECLARED_BYTES ((uint64_t)1 << 40)
#endif

#endif /* PX_LIMITS_H */
