/*
 * events.h - the profile's event recorder (private): per-instruction timing. Off by default:
 * a method without a profile (ctx.prof NULL) runs the executor's plain loop,
 * which has no profiling code in it at all. When on, every executed
 * instruction, and every node a delegate runs inside its call, appends an
 * event: its name, the shapes of its inputs as text and its CLOCK_MONOTONIC
 * start and duration. Events accumulate over runs until a reset.
 */
#ifndef PX_EVENTS_H
#define PX_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "pyexec.h"

/* More events than this (unless pyexec_method_profile_set_limit says
 * otherwise) are counted as dropped, not kept (a runaway loop must not take
 * the machine's memory). */
#define PX_PROFILE_MAX_EVENTS (1u << 21)

typedef struct px_profile_event {
  size_t name;   /* offsets into the profile's text: NUL-terminated */
  size_t shapes;
  int64_t start_ns, duration_ns;
  int32_t depth, chain, index, run;
} px_profile_event;

/* The span of one execute's instruction loop. */
typedef struct px_profile_run {
  int64_t start_ns, end_ns;
} px_profile_run;

typedef struct px_profile {
  px_profile_event *ev;
  size_t n, cap;
  char *text;
  size_t tlen, tcap;
  int32_t runs;     /* runs begun since the reset */
  size_t dropped;   /* events not kept: the limit, or memory ran out */
  size_t limit;     /* the most events kept; 0: PX_PROFILE_MAX_EVENTS */
  int32_t chain;    /* the instruction being run, for nested events */
  px_profile_run *rt; /* one per run begun, while memory lasts */
  size_t nrt, rtcap;
} px_profile;

/* A monotonic clock in nanoseconds. */
int64_t px_profile_now(void);

/* Reserves the next event (depth 0: an instruction; 1: a node of the
 * delegate call being run), naming it prefix+name; returns its index, or -1
 * when it is dropped. Shapes follow with px_profile_shape/_note, then
 * px_profile_start stamps the start. */
long px_profile_begin(px_profile *p, const char *prefix, const char *name, int depth, int index);
/* Appends "[d0,d1,...]" (a space before all but the first) to event ev's shapes. */
void px_profile_shape(px_profile *p, long ev, int dim, const int64_t *sizes);
/* Appends the shapes of a value's tensors: a tensor, or "{...}" for a list. */
void px_profile_value(px_profile *p, long ev, const px_value *v);
void px_profile_start(px_profile *p, long ev);
/* Stamps ev's duration (ev -1 is ignored). */
void px_profile_end(px_profile *p, long ev);

/* Brackets one execute's instruction loop: counts the run (events begun
 * after it carry its number) and records its start and end times. */
void px_profile_run_begin(px_profile *p);
void px_profile_run_end(px_profile *p);

/* Empties the events (keeps the memory). */
void px_profile_reset(px_profile *p);
void px_profile_free(px_profile *p);

/* Event `index` described with pointers into the profile's text. */
void px_profile_describe(const px_profile *p, size_t index, pyexec_profile_event *out);

#endif /* PX_EVENTS_H */
