/*
 * bundle.c - bundled programs (.bpte): ExecuTorch's BundledProgram
 * flatbuffer (bundled_program_schema.fbs, file identifier "BP08") holds a
 * program as a byte vector and, per tested method, test cases of inputs and
 * expected outputs. The loader checks the whole bundle once, then loads the
 * program inside in place; the accessors below read the checked test sets.
 */
#include "loader/bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/limits.h"

#define BAD(...) px_invalid_program(__VA_ARGS__)

/* Slots of the schema's tables (declaration order in bundled_program_schema.fbs). */
enum { BP_VERSION, BP_SUITES, BP_PROGRAM };
enum { SUITE_METHOD, SUITE_CASES };
enum { CASE_INPUTS, CASE_EXPECTED };
enum { VALUE_TYPE, VALUE_VAL }; /* a union field is two slots: its type, then its table */
enum { BTENSOR_SCALAR_TYPE, BTENSOR_SIZES, BTENSOR_DATA, BTENSOR_DIM_ORDER };
/* ValueUnion's members. */
enum { VU_NONE, VU_TENSOR, VU_INT, VU_BOOL, VU_DOUBLE };

/* The Value table `v` as a test value; `where` names it in messages. */
static pyexec_status read_value(const px_fb_table *v, const char *where, pyexec_test_value *out) {
  memset(out, 0, sizeof *out);
  uint8_t type;
  px_fb_table val;
  bool present;
  if (!px_fb_u8(v, VALUE_TYPE, 0, &type) || !px_fb_subtable(v, VALUE_VAL, &val, &present))
    return BAD("%s is malformed", where);
  if (type == VU_NONE || type > VU_DOUBLE) return BAD("%s has unknown value type %u", where, type);
  if (!present) return BAD("%s has no value", where);
  switch (type) {
    case VU_INT:
      out->kind = PYEXEC_VALUE_INT;
      return px_fb_i64(&val, 0, 0, &out->i) ? PYEXEC_OK : BAD("%s: Int is malformed", where);
    case VU_BOOL: {
      uint8_t b;
      if (!px_fb_u8(&val, 0, 0, &b)) return BAD("%s: Bool is malformed", where);
      if (b > 1) return BAD("%s: Bool holds %u, not 0 or 1", where, b);
      out->kind = PYEXEC_VALUE_BOOL;
      out->b = b;
      return PYEXEC_OK;
    }
    case VU_DOUBLE:
      out->kind = PYEXEC_VALUE_DOUBLE;
      return px_fb_f64(&val, 0, 0, &out->d) ? PYEXEC_OK : BAD("%s: Double is malformed", where);
    default: break;
  }
  int8_t st;
  px_fb_vec sizes, data, order;
  if (!px_fb_i8(&val, BTENSOR_SCALAR_TYPE, 0, &st) || !px_fb_vector(&val, BTENSOR_SIZES, 4, &sizes) ||
      !px_fb_vector(&val, BTENSOR_DATA, 1, &data) || !px_fb_vector(&val, BTENSOR_DIM_ORDER, 1, &order))
    return BAD("%s: tensor is malformed", where);
  if (!px_dtype_supported(st))
    return px_unsupported("%s: dtype %s (ScalarType %d) is not supported", where, px_dtype_name(st), st);
  if (sizes.count > PX_MAX_DIM)
    return px_unsupported("%s: rank %u exceeds the maximum of %d", where, sizes.count, PX_MAX_DIM);
  if (order.count != sizes.count)
    return BAD("%s: dim_order has %u entries for a rank-%u tensor", where, order.count, sizes.count);
  out->kind = PYEXEC_VALUE_TENSOR;
  out->dtype = st;
  out->dim = (int32_t)sizes.count;
  uint64_t numel = 1;
  unsigned seen = 0;
  for (uint32_t k = 0; k < sizes.count; k++) {
    int32_t s = px_fb_vec_i32(&sizes, k);
    uint8_t o = px_fb_vec_u8(&order, k);
    if (s < 0) return BAD("%s: negative size %d at dim %u", where, s, k);
    if (o >= sizes.count || (seen & (1u << o))) return BAD("%s: dim_order is not a permutation", where);
    seen |= 1u << o;
    out->sizes[k] = s;
    out->dim_order[k] = o;
    /* the data length bounds numel: stop before the product can overflow */
    if (s && numel > data.count / (uint64_t)s) numel = UINT64_MAX;
    else numel *= (uint64_t)s;
  }
  size_t es = px_elsize(st);
  if (numel == UINT64_MAX || numel * es > data.count)
    return BAD("%s: tensor data holds %u bytes, its %s shape needs more", where, data.count, px_dtype_name(st));
  out->nbytes = (size_t)(numel * es);
  out->data = data.buf + data.pos;
  if (es > 1 && (uintptr_t)out->data % es) return BAD("%s: tensor data is not aligned to its element size", where);
  return PYEXEC_OK;
}

/* Test case `c` of suite table `suite`: its inputs (expected 0) or expected
 * outputs (expected 1) vector. */
static pyexec_status case_values(const px_fb_table *suite, size_t c, int expected, const char *where,
                                 px_fb_vec *out) {
  px_fb_vec cases;
  px_fb_table tc;
  if (!px_fb_vector(suite, SUITE_CASES, 4, &cases)) return BAD("%s: test_cases are malformed", where);
  if (c >= cases.count)
    return px_invalid_argument("test case %zu is out of range (%s has %u)", c, where, cases.count);
  if (!px_fb_vec_table(&cases, (uint32_t)c, &tc) ||
      !px_fb_vector(&tc, expected ? CASE_EXPECTED : CASE_INPUTS, 4, out))
    return BAD("%s: test case %zu is malformed", where, c);
  return PYEXEC_OK;
}

/* Checks every test case of suite `s`. */
static pyexec_status check_suite(const pyexec_program *p, uint32_t s) {
  px_fb_table suite;
  px_fb_vec cases;
  char where[160];
  snprintf(where, sizeof where, "test suite %u", s);
  if (!px_fb_vec_table(&p->test_suites, s, &suite) || !px_fb_vector(&suite, SUITE_CASES, 4, &cases))
    return BAD("%s is malformed", where);
  for (uint32_t c = 0; c < cases.count; c++) {
    for (int e = 0; e < 2; e++) {
      px_fb_vec vals;
      pyexec_status st = case_values(&suite, c, e, where, &vals);
      if (st) return st;
      for (uint32_t k = 0; k < vals.count; k++) {
        char what[224];
        snprintf(what, sizeof what, "%s, test case %u, %s %u", where, c, e ? "expected output" : "input", k);
        px_fb_table v;
        pyexec_test_value tv;
        if (!px_fb_vec_table(&vals, k, &v)) return BAD("%s is malformed", what);
        st = read_value(&v, what, &tv);
        if (st) return st;
      }
    }
  }
  return PYEXEC_OK;
}

pyexec_status px_bundle_unwrap(pyexec_program *p) {
  if (p->size < 8 || memcmp(p->data + 4, "BP", 2) != 0) return PYEXEC_OK;
  if (memcmp(p->data + 4, "BP08", 4) != 0)
    return px_unsupported("bundled program identifier '%.4s' is not supported (expected 'BP08')",
                          (const char *)p->data + 4);
  px_fb_table root;
  px_fb_vec prog;
  if (!px_fb_root(p->data, p->size, &root)) return BAD("bundled program: root table is out of bounds");
  if (!px_fb_vector(&root, BP_PROGRAM, 1, &prog)) return BAD("bundled program: program is malformed");
  if (!px_fb_vector(&root, BP_SUITES, 4, &p->test_suites))
    return BAD("bundled program: method_test_suites are malformed");
  if (prog.count == 0) return BAD("bundled program holds no program");
  /* The schema aligns the program to 32 bytes; its constants need 16. */
  if (prog.pos % 16) return BAD("bundled program: the program inside is not 16-byte aligned (offset %zu)", prog.pos);
  if (prog.count >= 8 && memcmp(prog.buf + prog.pos + 4, "BP", 2) == 0)
    return BAD("bundled program: the program inside is itself a bundled program");
  uint32_t n = p->test_suites.count;
  p->suite_methods = calloc(n ? n : 1, sizeof *p->suite_methods);
  if (!p->suite_methods) return px_no_memory("test suite table");
  for (uint32_t s = 0; s < n; s++) {
    px_fb_table suite;
    const char *name;
    uint32_t len;
    if (!px_fb_vec_table(&p->test_suites, s, &suite) || !px_fb_string(&suite, SUITE_METHOD, &name, &len))
      return BAD("test suite %u is malformed", s);
    if (len == 0 || !px_fb_valid_name(name, len)) return BAD("test suite %u: method_name is empty or not valid UTF-8", s);
    p->suite_methods[s] = malloc((size_t)len + 1);
    if (!p->suite_methods[s]) return px_no_memory("test suite name");
    memcpy(p->suite_methods[s], name, len);
    p->suite_methods[s][len] = 0;
    pyexec_status st = check_suite(p, s);
    if (st) return st;
  }
  p->bundle = p->data;
  p->bundle_size = p->size;
  p->data = prog.buf + prog.pos;
  p->size = prog.count;
  return PYEXEC_OK;
}

void px_bundle_free(pyexec_program *p) {
  if (!p->suite_methods) return;
  for (uint32_t s = 0; s < p->test_suites.count; s++) free(p->suite_methods[s]);
  free(p->suite_methods);
  p->suite_methods = NULL;
}

/* ---- accessors ------------------------------------------------------------ */

int px_program_is_bundled(const pyexec_program *p) { return p && p->bundle ? 1 : 0; }

size_t px_program_test_suite_count(const pyexec_program *p) { return p && p->bundle ? p->test_suites.count : 0; }

const char *px_program_test_suite_method(const pyexec_program *p, size_t suite) {
  return suite < px_program_test_suite_count(p) ? p->suite_methods[suite] : NULL;
}

static pyexec_status suite_table(const pyexec_program *p, size_t suite, px_fb_table *out) {
  if (!p) return px_invalid_argument("program must not be NULL");
  size_t n = px_program_test_suite_count(p);
  if (suite >= n) return px_invalid_argument("test suite %zu is out of range (the program has %zu)", suite, n);
  if (!px_fb_vec_table(&p->test_suites, (uint32_t)suite, out)) return BAD("test suite %zu is malformed", suite);
  return PYEXEC_OK;
}

pyexec_status px_program_test_case_count(const pyexec_program *p, size_t suite, size_t *count) {
  if (!count) return px_invalid_argument("count must not be NULL");
  px_fb_table t;
  px_fb_vec cases;
  pyexec_status st = suite_table(p, suite, &t);
  if (st) return st;
  if (!px_fb_vector(&t, SUITE_CASES, 4, &cases)) return BAD("test suite %zu: test_cases are malformed", suite);
  *count = cases.count;
  return PYEXEC_OK;
}

pyexec_status px_program_test_value_count(const pyexec_program *p, size_t suite, size_t test_case, int expected,
                                          size_t *count) {
  if (!count) return px_invalid_argument("count must not be NULL");
  px_fb_table t;
  px_fb_vec vals;
  char where[64];
  snprintf(where, sizeof where, "test suite %zu", suite);
  pyexec_status st = suite_table(p, suite, &t);
  if (!st) st = case_values(&t, test_case, expected, where, &vals);
  if (st) return st;
  *count = vals.count;
  return PYEXEC_OK;
}

pyexec_status px_program_test_value(const pyexec_program *p, size_t suite, size_t test_case, int expected,
                                    size_t index, pyexec_test_value *out) {
  if (!out) return px_invalid_argument("out must not be NULL");
  px_fb_table t, v;
  px_fb_vec vals;
  char where[160];
  snprintf(where, sizeof where, "test suite %zu", suite);
  pyexec_status st = suite_table(p, suite, &t);
  if (!st) st = case_values(&t, test_case, expected, where, &vals);
  if (st) return st;
  const char *what = expected ? "expected output" : "input";
  if (index >= vals.count)
    return px_invalid_argument("%s %zu is out of range (test case %zu of test suite %zu has %u)", what, index,
                               test_case, suite, vals.count);
  snprintf(where, sizeof where, "test suite %zu, test case %zu, %s %zu", suite, test_case, what, index);
  if (!px_fb_vec_table(&vals, (uint32_t)index, &v)) return BAD("%s is malformed", where);
  pyexec_test_value tv;
  st = read_value(&v, where, &tv);
  if (st) return st;
  *out = tv;
  return PYEXEC_OK;
}
