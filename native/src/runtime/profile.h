/*
 * profile.h - a method's profile (private): the bodies of the
 * pyexec_method_profile_* entry points over core/events.h's recorder, which
 * the executor and the delegates write into.
 */
#ifndef PX_PROFILE_H
#define PX_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/events.h"
#include "pyexec.h"

/* The bodies of pyexec_method_profile_* (pyexec.h; api.c forwards). They
 * take the method's lock. */
pyexec_status px_method_profile_enable(pyexec_method *m, int enabled);
size_t px_method_profile_event_count(pyexec_method *m);
pyexec_status px_method_profile_event(pyexec_method *m, size_t index, pyexec_profile_event *out);
pyexec_status px_method_profile_reset(pyexec_method *m);
size_t px_method_profile_dropped(pyexec_method *m);
pyexec_status px_method_profile_set_limit(pyexec_method *m, size_t max_events);
size_t px_method_profile_run_count(pyexec_method *m);
pyexec_status px_method_profile_run(pyexec_method *m, size_t run, int64_t *start_ns, int64_t *duration_ns);

#endif /* PX_PROFILE_H */
