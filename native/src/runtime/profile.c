/*
 * profile.c - the pyexec_method_profile_* entry points (profile.h): a
 * method's event store, made on first use, switched on and read under the
 * method's lock.
 */
#include "runtime/profile.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"
#include "runtime/debug.h"
#include "runtime/method.h"

/* ---- the public entry points (pyexec.h) ------------------------------------ */

/* The method's profile store, made on first use (call with the lock held). */
static pyexec_status ensure_store(pyexec_method *m) {
  if (!m->prof_store && !(m->prof_store = calloc(1, sizeof *m->prof_store))) return px_no_memory("profile");
  return PYEXEC_OK;
}

pyexec_status px_method_profile_enable(pyexec_method *m, int enabled) {
  if (!m) return px_invalid_argument("method is NULL");
  pthread_mutex_lock(&m->lock);
  pyexec_status st = enabled ? ensure_store(m) : PYEXEC_OK;
  if (!st) m->ctx.prof = enabled ? m->prof_store : NULL;
  pthread_mutex_unlock(&m->lock);
  return st;
}

size_t px_method_profile_event_count(pyexec_method *m) {
  if (!m) return 0;
  pthread_mutex_lock(&m->lock);
  size_t n = m->prof_store ? m->prof_store->n : 0;
  pthread_mutex_unlock(&m->lock);
  return n;
}

pyexec_status px_method_profile_event(pyexec_method *m, size_t index, pyexec_profile_event *out) {
  if (!m || !out) return px_invalid_argument("method or out is NULL");
  pthread_mutex_lock(&m->lock);
  size_t n = m->prof_store ? m->prof_store->n : 0;
  if (index < n) px_profile_describe(m->prof_store, index, out);
  pthread_mutex_unlock(&m->lock);
  if (index >= n) return px_invalid_argument("profile event %zu out of range (%zu events)", index, n);
  return PYEXEC_OK;
}

pyexec_status px_method_profile_reset(pyexec_method *m) {
  if (!m) return px_invalid_argument("method is NULL");
  pthread_mutex_lock(&m->lock);
  if (m->prof_store) px_profile_reset(m->prof_store);
  if (m->debug) m->debug->n = m->debug->used = 0;
  pthread_mutex_unlock(&m->lock);
  return PYEXEC_OK;
}

size_t px_method_profile_dropped(pyexec_method *m) {
  if (!m) return 0;
  pthread_mutex_lock(&m->lock);
  size_t n = m->prof_store ? m->prof_store->dropped : 0;
  pthread_mutex_unlock(&m->lock);
  return n;
}

pyexec_status px_method_profile_set_limit(pyexec_method *m, size_t max_events) {
  if (!m) return px_invalid_argument("method is NULL");
  pthread_mutex_lock(&m->lock);
  pyexec_status st = ensure_store(m);
  if (!st) m->prof_store->limit = max_events;
  pthread_mutex_unlock(&m->lock);
  return st;
}

size_t px_method_profile_run_count(pyexec_method *m) {
  if (!m) return 0;
  pthread_mutex_lock(&m->lock);
  size_t n = m->prof_store ? m->prof_store->nrt : 0;
  pthread_mutex_unlock(&m->lock);
  return n;
}

pyexec_status px_method_profile_run(pyexec_method *m, size_t run, int64_t *start_ns, int64_t *duration_ns) {
  if (!m || !start_ns || !duration_ns) return px_invalid_argument("method, start_ns or duration_ns is NULL");
  pthread_mutex_lock(&m->lock);
  size_t n = m->prof_store ? m->prof_store->nrt : 0;
  if (run < n) {
    *start_ns = m->prof_store->rt[run].start_ns;
    *duration_ns = m->prof_store->rt[run].end_ns - m->prof_store->rt[run].start_ns;
  }
  pthread_mutex_unlock(&m->lock);
  if (run >= n) return px_invalid_argument("profile run %zu out of range (%zu runs)", run, n);
  return PYEXEC_OK;
}
