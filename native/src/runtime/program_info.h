/*
 * program_info.h - queries on a program's methods that need no loaded
 * method but do need the kernel registry and the backends (private).
 */
#ifndef PX_PROGRAM_INFO_H
#define PX_PROGRAM_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/program.h"
#include "pyexec.h"

/* Fills a pyexec_value_info for input (is_output=false) or output `index`. */
pyexec_status px_plan_io_info(const pyexec_program *p, const px_plan *plan, bool is_output,
                              size_t index, pyexec_value_info *out);

/* True when an instruction of the plan writes value `vidx` (a kernel's return
 * value, or the target of a move). */
bool px_plan_value_written(const pyexec_program *p, const px_plan *plan, int32_t vidx);

/* The bodies of the public entry points pyexec_<name> (pyexec.h documents
 * each; api.c forwards to them). */
pyexec_status px_program_input_count(const pyexec_program *p, const char *name, size_t *count);
pyexec_status px_program_output_count(const pyexec_program *p, const char *name, size_t *count);
pyexec_status px_program_input_info(const pyexec_program *p, const char *name, size_t index,
                                    pyexec_value_info *out);
pyexec_status px_program_output_info(const pyexec_program *p, const char *name, size_t index,
                                     pyexec_value_info *out);
pyexec_status px_program_method_operators(const pyexec_program *p, const char *name, char *buf, size_t cap,
                                          size_t *needed, size_t *missing);
pyexec_status px_program_delegate_count(const pyexec_program *p, const char *name, size_t *count);
pyexec_status px_program_delegate_describe(const pyexec_program *p, const char *name, size_t index, char *buf,
                                           size_t cap, size_t *needed, size_t *unsupported);

/* Attribute `index` of a plan (its tensor values that carry a
 * fully_qualified_name, in value order, as ExecuTorch's MethodMeta counts
 * them): with vidx NULL only counts them into *count; else stores the value
 * index (and its description when desc is not NULL), or fails naming the
 * index when it is out of range. */
pyexec_status px_plan_attribute(const pyexec_program *p, const px_plan *plan, size_t index, size_t *count,
                                int32_t *vidx, px_tensor_desc *desc);
pyexec_status px_program_attribute_count(const pyexec_program *p, const char *name, size_t *count);
pyexec_status px_program_attribute_info(const pyexec_program *p, const char *name, size_t index,
                                        pyexec_value_info *out, char *fqn, size_t cap, size_t *needed);

#endif /* PX_PROGRAM_INFO_H */
