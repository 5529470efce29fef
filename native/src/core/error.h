/*
 * error.h - the thread-local error message behind pyexec_last_error()
 * (private).
 */
#ifndef PX_ERROR_H
#define PX_ERROR_H

#include "pyexec.h"

/* Formats the message for the calling thread and returns `status`. */
pyexec_status px_error(pyexec_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Shorthands for the common kinds. */
#define px_invalid_program(...) px_error(PYEXEC_ERR_INVALID_PROGRAM, __VA_ARGS__)
#define px_invalid_argument(...) px_error(PYEXEC_ERR_INVALID_ARGUMENT, __VA_ARGS__)
#define px_unsupported(...) px_error(PYEXEC_ERR_UNSUPPORTED, __VA_ARGS__)
#define px_no_memory(what) px_error(PYEXEC_ERR_OUT_OF_MEMORY, "out of memory: %s", what)

/* The calling thread's message buffer, for code that builds a long message. */
char *px_error_buffer(size_t *cap);

/* The bodies of the public entry points pyexec_<name> (pyexec.h documents
 * each; api.c forwards to them). */
const char *px_last_error(void);
const char *px_status_name(pyexec_status status);

#endif /* PX_ERROR_H */
