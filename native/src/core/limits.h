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
 * overflow. 1 TiB is beyond any CPU's memory, so no real program is refused. */
extern uint64_t px_max_declared_bytes;

/* The most instructions one execute runs (10 million), so that a malformed
 * program's backward jumps cannot loop forever. */
extern long px_max_steps;

/* Both are variables only so that the fuzzing harness (fuzz/fuzz_program.c),
 * which links the library's objects, can lower them before its first load
 * (4 MiB and 100,000: a mutated size or a backward jump then makes an input
 * slow, not a libFuzzer timeout). Nothing else writes them. */

#endif /* PX_LIMITS_H */
