/*
 * events.c - the events of a profiled method (events.h): a growing array
 * of fixed-size records and one growing text buffer their names and shapes
 * point into by offset, so that growing either never invalidates a record.
 */
#include "core/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

int64_t px_profile_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Appends n bytes and a NUL; false when memory runs out. The NUL is
 * overwritten by the next append to the same string (append_more). */
static bool append(px_profile *p, const char *s, size_t n) {
  if (p->tlen + n + 1 > p->tcap) {
    size_t cap = p->tcap ? p->tcap : 4096;
    while (cap < p->tlen + n + 1) cap *= 2;
    char *t = realloc(p->text, cap);
    if (!t) return false;
    p->text = t;
    p->tcap = cap;
  }
  memcpy(p->text + p->tlen, s, n);
  p->tlen += n;
  p->text[p->tlen++] = 0;
  return true;
}

/* Extends the string that ends at the end of the text (the last one appended). */
static void append_more(px_profile *p, const char *s, size_t n) {
  p->tlen--; /* its NUL */
  if (!append(p, s, n)) p->text[p->tlen++] = 0;
}

long px_profile_begin(px_profile *p, const char *prefix, const char *name, int depth, int index) {
  if (p->n >= (p->limit ? p->limit : PX_PROFILE_MAX_EVENTS)) {
    p->dropped++;
    return -1;
  }
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    px_profile_event *ev = realloc(p->ev, cap * sizeof *ev);
    if (!ev) {
      p->dropped++;
      return -1;
    }
    p->ev = ev;
    p->cap = cap;
  }
  px_profile_event *e = &p->ev[p->n];
  memset(e, 0, sizeof *e);
  e->name = p->tlen;
  if (!append(p, prefix, strlen(prefix))) {
    p->dropped++;
    return -1;
  }
  append_more(p, name, strlen(name));
  e->shapes = p->tlen;
  if (!append(p, "", 0)) {
    p->dropped++;
    return -1;
  }
  e->depth = depth;
  e->chain = p->chain;
  e->index = index;
  e->run = p->runs - 1;
  return (long)p->n++;
}

/* "[d0,d1,...]" into buf; returns its length. */
static size_t format_shape(char *buf, size_t cap, int dim, const int64_t *sizes) {
  size_t n = 0;
  buf[n++] = '[';
  for (int d = 0; d < dim && d < PYEXEC_MAX_DIM; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? "," : "", (long long)sizes[d]);
  buf[n++] = ']';
  return n;
}

/* A space before every item of ev's shapes but the first. */
static void separate(px_profile *p, long ev) {
  if (p->tlen - 1 != p->ev[ev].shapes) append_more(p, " ", 1);
}

void px_profile_shape(px_profile *p, long ev, int dim, const int64_t *sizes) {
  if (ev < 0) return;
  char buf[24 * PYEXEC_MAX_DIM + 4];
  separate(p, ev);
  append_more(p, buf, format_shape(buf, sizeof buf, dim, sizes));
}

void px_profile_value(px_profile *p, long ev, const px_value *v) {
  if (ev < 0 || !v) return;
  if (v->tag == PX_V_TENSOR) {
    px_profile_shape(p, ev, v->u.t->dim, v->u.t->sizes);
    return;
  }
  if (v->tag != PX_V_TENSOR_LIST && v->tag != PX_V_OPT_TENSOR_LIST) return;
  char buf[24 * PYEXEC_MAX_DIM + 4];
  separate(p, ev);
  append_more(p, "{", 1);
  for (uint32_t k = 0; k < v->u.tl.n; k++) {
    const px_value *it = v->u.tl.items[k];
    if (k) append_more(p, " ", 1);
    if (it && it->tag == PX_V_TENSOR)
      append_more(p, buf, format_shape(buf, sizeof buf, it->u.t->dim, it->u.t->sizes));
    else
      append_more(p, "None", 4);
  }
  append_more(p, "}", 1);
}

void px_profile_start(px_profile *p, long ev) {
  if (ev >= 0) p->ev[ev].start_ns = px_profile_now();
}

void px_profile_end(px_profile *p, long ev) {
  if (ev >= 0) p->ev[ev].duration_ns = px_profile_now() - p->ev[ev].start_ns;
}

void px_profile_run_begin(px_profile *p) {
  p->runs++;
  if (p->nrt == p->rtcap) {
    size_t cap = p->rtcap ? p->rtcap * 2 : 16;
    px_profile_run *rt = realloc(p->rt, cap * sizeof *rt);
    if (!rt) return; /* this run's times are not kept */
    p->rt = rt;
    p->rtcap = cap;
  }
  if (p->nrt != (size_t)p->runs - 1) return; /* an earlier run's were not: keep the numbering */
  p->rt[p->nrt].start_ns = px_profile_now();
  p->rt[p->nrt].end_ns = p->rt[p->nrt].start_ns;
  p->nrt++;
}

void px_profile_run_end(px_profile *p) {
  if (p->nrt == (size_t)p->runs) p->rt[p->nrt - 1].end_ns = px_profile_now();
}

void px_profile_reset(px_profile *p) {
  p->n = 0;
  p->tlen = 0;
  p->runs = 0;
  p->dropped = 0;
  p->nrt = 0;
}

void px_profile_free(px_profile *p) {
  if (!p) return;
  free(p->ev);
  free(p->text);
  free(p->rt);
  free(p);
}

void px_profile_describe(const px_profile *p, size_t index, pyexec_profile_event *out) {
  const px_profile_event *e = &p->ev[index];
  memset(out, 0, sizeof *out);
  out->name = p->text + e->name;
  out->shapes = p->text + e->shapes;
  out->start_ns = e->start_ns;
  out->duration_ns = e->duration_ns;
  out->depth = e->depth;
  out->chain = e->chain;
  out->index = e->index;
  out->run = e->run;
}
