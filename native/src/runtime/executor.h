/*
 * executor.h - runs a loaded method's instructions (private).
 */
#ifndef PX_EXECUTOR_H
#define PX_EXECUTOR_H

#include "runtime/method.h"

/* Runs every chain once: restores planned inputs a previous run overwrote,
 * gives unbound unplanned outputs their storage, then executes (at most
 * PX_MAX_STEPS instructions). The caller holds m->lock. */
pyexec_status px_executor_run(pyexec_method *m);

#endif /* PX_EXECUTOR_H */
