/*
 * error.c - thread-local error messages and status names.
 */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

#define PX_MSG_CAP 4096

static _Thread_local char message[PX_MSG_CAP];

pyexec_status px_error(pyexec_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return status;
}

char *px_error_buffer(size_t *cap) {
  *cap = sizeof message;
  return message;
}

const char *px_last_error(void) { return message; }

const char *px_status_name(pyexec_status status) {
  switch (status) {
    case PYEXEC_OK: return "ok";
    case PYEXEC_ERR_INVALID_ARGUMENT: return "invalid argument";
    case PYEXEC_ERR_INVALID_PROGRAM: return "invalid program";
    case PYEXEC_ERR_UNSUPPORTED: return "unsupported";
    case PYEXEC_ERR_EXECUTION: return "execution failed";
    case PYEXEC_ERR_OUT_OF_MEMORY: return "out of memory";
    case PYEXEC_ERR_IO: return "i/o error";
  }
  return "unknown status";
}
