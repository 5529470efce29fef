/*
 * bundle.h - bundled programs (.bpte, ExecuTorch's BundledProgram): a program
 * wrapped with test sets (private).
 */
#ifndef PX_BUNDLE_H
#define PX_BUNDLE_H

#include "loader/program.h"

/* When p->data[0..size) is a bundled program: checks the whole bundle,
 * records it (p->bundle, p->test_suites, p->suite_methods) and points
 * p->data / p->size at the program inside. A plain program is left as it is.
 * InvalidProgram naming the field when malformed; Unsupported for another
 * bundle version. */
pyexec_status px_bundle_unwrap(pyexec_program *p);

/* Frees what px_bundle_unwrap allocated. */
void px_bundle_free(pyexec_program *p);

/* The bodies of the public entry points (pyexec.h documents each). */
int px_program_is_bundled(const pyexec_program *p);
size_t px_program_test_suite_count(const pyexec_program *p);
const char *px_program_test_suite_method(const pyexec_program *p, size_t suite);
pyexec_status px_program_test_case_count(const pyexec_program *p, size_t suite, size_t *count);
pyexec_status px_program_test_value_count(const pyexec_program *p, size_t suite, size_t test_case, int expected,
                                          size_t *count);
pyexec_status px_program_test_value(const pyexec_program *p, size_t suite, size_t test_case, int expected,
                                    size_t index, pyexec_test_value *out);

#endif /* PX_BUNDLE_H */
