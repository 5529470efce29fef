/*
 * api.c - the public entry points. Each forwards to the part of the library
 * that owns the work (core/, loader/, runtime/, kernels/registry); nothing
 * here checks, computes or formats. pyexec.h documents every function.
 */
#include "backends/backend.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "kernels/registry.h"
#include "loader/bundle.h"
#include "loader/program.h"
#include "runtime/debug.h"
#include "runtime/method.h"
#include "runtime/profile.h"
#include "runtime/program_info.h"

/* ---- errors and version --------------------------------------------------- */

PYEXEC_API const char *pyexec_version(void) { return PYEXEC_VERSION_STRING; }
PYEXEC_API int pyexec_version_number(void) { return PYEXEC_VERSION_NUMBER; }
PYEXEC_API const char *pyexec_last_error(void) { return px_last_error(); }
PYEXEC_API const char *pyexec_status_name(pyexec_status status) { return px_status_name(status); }

/* ---- threads ------------------------------------------------------------------ */

PYEXEC_API pyexec_status pyexec_set_num_threads(int n) { return px_parallel_set_num_threads(n); }
PYEXEC_API int pyexec_get_num_threads(void) { return px_parallel_get_num_threads(); }

/* ---- dtypes ------------------------------------------------------------------ */

PYEXEC_API size_t pyexec_dtype_size(pyexec_dtype dtype) { return px_elsize((int)dtype); }
PYEXEC_API const char *pyexec_dtype_name(pyexec_dtype dtype) { return px_dtype_name((int)dtype); }

/* ---- programs ---------------------------------------------------------------- */

PYEXEC_API pyexec_status pyexec_program_load_file(const char *path, pyexec_program **out) {
  return px_program_load_file(path, out);
}
PYEXEC_API pyexec_status pyexec_program_load_buffer(const void *data, size_t size, pyexec_program **out) {
  return px_program_load_buffer(data, size, out);
}
PYEXEC_API pyexec_status pyexec_program_load_borrowed(const void *data, size_t size, pyexec_program **out) {
  return px_program_load_borrowed(data, size, out);
}
PYEXEC_API pyexec_status pyexec_program_attach_data_file(pyexec_program *p, const char *path) {
  return px_program_attach_data_file(p, path);
}
PYEXEC_API pyexec_status pyexec_program_attach_data_buffer(pyexec_program *p, const void *data, size_t size) {
  return px_program_attach_data_buffer(p, data, size);
}
PYEXEC_API void pyexec_program_free(pyexec_program *p) { px_program_free(p); }
PYEXEC_API size_t pyexec_program_method_count(const pyexec_program *p) { return px_program_method_count(p); }
PYEXEC_API const char *pyexec_program_method_name(const pyexec_program *p, size_t index) {
  return px_program_method_name(p, index);
}
PYEXEC_API pyexec_status pyexec_program_input_count(const pyexec_program *p, const char *name, size_t *count) {
  return px_program_input_count(p, name, count);
}
PYEXEC_API pyexec_status pyexec_program_output_count(const pyexec_program *p, const char *name, size_t *count) {
  return px_program_output_count(p, name, count);
}
PYEXEC_API pyexec_status pyexec_program_input_info(const pyexec_program *p, const char *name, size_t index,
                                                   pyexec_value_info *out) {
  return px_program_input_info(p, name, index, out);
}
PYEXEC_API pyexec_status pyexec_program_output_info(const pyexec_program *p, const char *name, size_t index,
                                                    pyexec_value_info *out) {
  return px_program_output_info(p, name, index, out);
}
PYEXEC_API pyexec_status pyexec_program_attribute_count(const pyexec_program *p, const char *name,
                                                        size_t *count) {
  return px_program_attribute_count(p, name, count);
}
PYEXEC_API pyexec_status pyexec_program_attribute_info(const pyexec_program *p, const char *name, size_t index,
                                                       pyexec_value_info *out, char *fqn, size_t cap,
                                                       size_t *needed) {
  return px_program_attribute_info(p, name, index, out, fqn, cap, needed);
}
PYEXEC_API pyexec_status pyexec_method_get_attribute(pyexec_method *m, size_t index, pyexec_value *out) {
  return px_method_get_attribute(m, index, out);
}
PYEXEC_API pyexec_status pyexec_program_method_operators(const pyexec_program *p, const char *name, char *buf,
                                                         size_t cap, size_t *needed, size_t *missing) {
  return px_program_method_operators(p, name, buf, cap, needed, missing);
}
PYEXEC_API pyexec_status pyexec_program_delegate_count(const pyexec_program *p, const char *name, size_t *count) {
  return px_program_delegate_count(p, name, count);
}
PYEXEC_API pyexec_status pyexec_program_delegate_describe(const pyexec_program *p, const char *name, size_t index,
                                                          char *buf, size_t cap, size_t *needed,
                                                          size_t *unsupported) {
  return px_program_delegate_describe(p, name, index, buf, cap, needed, unsupported);
}

/* ---- bundled programs -------------------------------------------------------- */

PYEXEC_API int pyexec_program_is_bundled(const pyexec_program *p) { return px_program_is_bundled(p); }
PYEXEC_API size_t pyexec_program_test_suite_count(const pyexec_program *p) { return px_program_test_suite_count(p); }
PYEXEC_API const char *pyexec_program_test_suite_method(const pyexec_program *p, size_t suite) {
  return px_program_test_suite_method(p, suite);
}
PYEXEC_API pyexec_status pyexec_program_test_case_count(const pyexec_program *p, size_t suite, size_t *count) {
  return px_program_test_case_count(p, suite, count);
}
PYEXEC_API pyexec_status pyexec_program_test_value_count(const pyexec_program *p, size_t suite, size_t test_case,
                                                         int expected, size_t *count) {
  return px_program_test_value_count(p, suite, test_case, expected, count);
}
PYEXEC_API pyexec_status pyexec_program_test_value(const pyexec_program *p, size_t suite, size_t test_case,
                                                   int expected, size_t index, pyexec_test_value *out) {
  return px_program_test_value(p, suite, test_case, expected, index, out);
}

/* ---- methods ----------------------------------------------------------------- */

PYEXEC_API pyexec_status pyexec_method_load(pyexec_program *program, const char *name, pyexec_method **out) {
  return px_method_load(program, name, out);
}
PYEXEC_API void pyexec_method_free(pyexec_method *m) { px_method_free(m); }
PYEXEC_API const char *pyexec_method_name(const pyexec_method *m) { return px_method_name(m); }
PYEXEC_API size_t pyexec_method_input_count(const pyexec_method *m) { return px_method_input_count(m); }
PYEXEC_API size_t pyexec_method_output_count(const pyexec_method *m) { return px_method_output_count(m); }
PYEXEC_API size_t pyexec_method_planned_nbytes(const pyexec_method *m) { return px_method_planned_nbytes(m); }
PYEXEC_API pyexec_status pyexec_method_input_info(const pyexec_method *m, size_t index,
                                                  pyexec_value_info *out) {
  return px_method_input_info(m, index, out);
}
PYEXEC_API pyexec_status pyexec_method_output_info(const pyexec_method *m, size_t index,
                                                   pyexec_value_info *out) {
  return px_method_output_info(m, index, out);
}
PYEXEC_API int pyexec_method_query_alias(const pyexec_method *m, size_t index, size_t *input_index) {
  return px_method_query_alias(m, index, input_index);
}
PYEXEC_API pyexec_status pyexec_method_set_inputs(pyexec_method *m, const pyexec_value *inputs,
                                                  size_t count) {
  return px_method_set_inputs(m, inputs, count);
}
PYEXEC_API pyexec_status pyexec_method_clear_inputs(pyexec_method *m) { return px_method_clear_inputs(m); }
PYEXEC_API pyexec_status pyexec_method_check_bindable(const pyexec_method *m, size_t index) {
  return px_method_check_bindable(m, index);
}
PYEXEC_API pyexec_status pyexec_method_set_output_ptr(pyexec_method *m, size_t index, void *data,
                                                      size_t nbytes) {
  return px_method_set_output_ptr(m, index, data, nbytes);
}
PYEXEC_API pyexec_status pyexec_method_get_output(pyexec_method *m, size_t index, pyexec_value *out) {
  return px_method_get_output(m, index, out);
}
PYEXEC_API pyexec_status pyexec_method_get_outputs(pyexec_method *m, pyexec_value *out, size_t count) {
  return px_method_get_outputs(m, out, count);
}
PYEXEC_API pyexec_status pyexec_method_run(pyexec_run *run) { return px_method_run(run); }
PYEXEC_API pyexec_status pyexec_method_execute(pyexec_method *m) { return px_method_execute(m); }

/* ---- profiling --------------------------------------------------------------- */

PYEXEC_API pyexec_status pyexec_method_profile_enable(pyexec_method *m, int enabled) {
  return px_method_profile_enable(m, enabled);
}
PYEXEC_API size_t pyexec_method_profile_event_count(pyexec_method *m) { return px_method_profile_event_count(m); }
PYEXEC_API pyexec_status pyexec_method_profile_event(pyexec_method *m, size_t index, pyexec_profile_event *out) {
  return px_method_profile_event(m, index, out);
}
PYEXEC_API pyexec_status pyexec_method_profile_reset(pyexec_method *m) { return px_method_profile_reset(m); }
PYEXEC_API size_t pyexec_method_profile_dropped(pyexec_method *m) { return px_method_profile_dropped(m); }
PYEXEC_API pyexec_status pyexec_method_profile_set_debug_buffer(pyexec_method *m, size_t nbytes) {
  return px_method_profile_set_debug_buffer(m, nbytes);
}
PYEXEC_API size_t pyexec_method_profile_debug_count(pyexec_method *m) { return px_method_profile_debug_count(m); }
PYEXEC_API pyexec_status pyexec_method_profile_debug_value(pyexec_method *m, size_t index, pyexec_debug_value *out) {
  return px_method_profile_debug_value(m, index, out);
}
PYEXEC_API pyexec_status pyexec_method_profile_debug_buffer(pyexec_method *m, const void **data, size_t *used) {
  return px_method_profile_debug_buffer(m, data, used);
}
PYEXEC_API pyexec_status pyexec_method_profile_set_limit(pyexec_method *m, size_t max_events) {
  return px_method_profile_set_limit(m, max_events);
}
PYEXEC_API size_t pyexec_method_profile_run_count(pyexec_method *m) { return px_method_profile_run_count(m); }
PYEXEC_API pyexec_status pyexec_method_profile_run(pyexec_method *m, size_t run, int64_t *start_ns,
                                                   int64_t *duration_ns) {
  return px_method_profile_run(m, run, start_ns, duration_ns);
}

/* ---- kernels ----------------------------------------------------------------- */

PYEXEC_API size_t pyexec_kernel_count(void) { return px_kernel_count(); }
PYEXEC_API const char *pyexec_kernel_name(size_t index) { return px_kernel_name(index); }

/* ---- backends ---------------------------------------------------------------- */

PYEXEC_API size_t pyexec_backend_count(void) { return px_backend_count(); }
PYEXEC_API const char *pyexec_backend_name(size_t index) { return px_backend_name(index); }
