/*
 * test_runtime.c - exercises libpyexec through its public header only, as a
 * C program with no Python: load, metadata, inputs, binding, aliasing,
 * execution, malformed files, and data files (.ptd). Usage: test_runtime DATA_DIR
 * (the .pte fixtures come from scripts/make_fixtures.py).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyexec.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    checks++;                                                                \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
              __LINE__, #cond, pyexec_last_error());                         \
    }                                                                        \
  } while (0)

#define CHECK_OK(expr) CHECK((expr) == PYEXEC_OK)

static const char *data_dir = "tests/data";

static char *path_of(const char *name) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s/%s", data_dir, name);
  return buf;
}

static unsigned char *read_file(const char *name, size_t *size) {
  FILE *f = fopen(path_of(name), "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static pyexec_value tensor_value(float *data, const int64_t *sizes, int dim, size_t nbytes) {
  pyexec_value v;
  memset(&v, 0, sizeof v);
  v.kind = PYEXEC_VALUE_TENSOR;
  v.tensor.dtype = PYEXEC_DTYPE_FLOAT32;
  v.tensor.dim = dim;
  v.tensor.sizes = sizes;
  v.tensor.data = data;
  v.tensor.nbytes = nbytes;
  return v;
}

static int contains(const char *haystack, const char *needle) { return strstr(haystack, needle) != NULL; }

/* ---- version and metadata ---------------------------------------------- */

static void test_version(void) {
  CHECK(strcmp(pyexec_version(), PYEXEC_VERSION_STRING) == 0);
  CHECK(pyexec_version_number() == PYEXEC_VERSION_NUMBER);
  /* minor and patch each get three digits: 1.10.3 would be 1010003 */
  CHECK(PYEXEC_VERSION_NUMBER ==
        PYEXEC_VERSION_MAJOR * 1000000 + PYEXEC_VERSION_MINOR * 1000 + PYEXEC_VERSION_PATCH);
  char text[32];
  snprintf(text, sizeof text, "%d.%d.%d", PYEXEC_VERSION_MAJOR, PYEXEC_VERSION_MINOR, PYEXEC_VERSION_PATCH);
  CHECK(strcmp(text, PYEXEC_VERSION_STRING) == 0);
  CHECK(pyexec_dtype_size(PYEXEC_DTYPE_FLOAT32) == 4);
  CHECK(strcmp(pyexec_dtype_name(PYEXEC_DTYPE_INT64), "int64") == 0);
  CHECK(pyexec_dtype_size((pyexec_dtype)9) == 0); /* complex64: named, not supported */
  size_t kernels = pyexec_kernel_count();
  CHECK(kernels > 0 && pyexec_kernel_name(0) != NULL && pyexec_kernel_name(kernels) == NULL);
  CHECK(pyexec_backend_count() == 1 && strcmp(pyexec_backend_name(0), "XnnpackBackend") == 0 &&
        pyexec_backend_name(1) == NULL);
}

static void test_metadata(void) {
  pyexec_program *p = NULL;
  CHECK_OK(pyexec_program_load_file(path_of("add_mul.pte"), &p));
  if (!p) return;
  CHECK(pyexec_program_method_count(p) == 1);
  CHECK(strcmp(pyexec_program_method_name(p, 0), "forward") == 0);
  CHECK(pyexec_program_method_name(p, 1) == NULL);
  size_t nin = 0, nout = 0;
  CHECK_OK(pyexec_program_input_count(p, "forward", &nin));
  CHECK_OK(pyexec_program_output_count(p, "forward", &nout));
  CHECK(nin == 2 && nout == 2);
  CHECK(pyexec_program_input_count(p, "nope", &nin) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_program_output_count(p, "forward", NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  pyexec_value_info info;
  CHECK_OK(pyexec_program_input_info(p, "forward", 0, &info));
  CHECK(info.kind == PYEXEC_VALUE_TENSOR && info.dtype == PYEXEC_DTYPE_FLOAT32);
  CHECK(info.dim == 2 && info.sizes[0] == 2 && info.sizes[1] == 3);
  CHECK(info.is_memory_planned == 1 && info.is_dynamic == 0 && info.nbytes == 24);
  CHECK(pyexec_program_input_info(p, "forward", 2, &info) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_program_input_info(p, "nope", 0, &info) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "no method 'nope'"));
  char ops[256];
  size_t needed = 0, missing = 99;
  CHECK_OK(pyexec_program_method_operators(p, "forward", ops, sizeof ops, &needed, &missing));
  CHECK(missing == 0 && contains(ops, "aten::add.out\n") && contains(ops, "aten::mul.out\n"));
  pyexec_program_free(p);
  pyexec_program_free(NULL); /* harmless */
}

/* ---- planned inputs and outputs ---------------------------------------- */

static void test_planned(void) {
  pyexec_program *p = NULL;
  pyexec_method *m = NULL;
  CHECK_OK(pyexec_program_load_file(path_of("add_mul.pte"), &p));
  if (!p) return;
  CHECK_OK(pyexec_method_load(p, "forward", &m));
  if (!m) return;
  CHECK(pyexec_method_input_count(m) == 2 && pyexec_method_output_count(m) == 2);
  CHECK(pyexec_method_input_count(NULL) == 0 && pyexec_method_output_count(NULL) == 0);
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 0 has not been set"));

  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0.5f, -1, 2, 0, 3, -4};
  int64_t s[2] = {2, 3};
  pyexec_value in[2] = {tensor_value(x, s, 2, sizeof x), tensor_value(y, s, 2, sizeof y)};
  CHECK_OK(pyexec_method_set_inputs(m, in, 2));
  x[0] = 100; /* planned inputs are copied: this must not matter */
  CHECK_OK(pyexec_method_execute(m));
  pyexec_value out;
  CHECK_OK(pyexec_method_get_output(m, 0, &out));
  CHECK(out.kind == PYEXEC_VALUE_TENSOR && out.tensor.dim == 2 && out.tensor.sizes[1] == 3);
  const float *o = out.tensor.data;
  CHECK(o[0] == 1.0f + 0.5f && o[5] == 6.0f - 4.0f);
  CHECK_OK(pyexec_method_get_output(m, 1, &out));
  o = out.tensor.data;
  CHECK(o[0] == 0.5f && o[2] == 6.0f && o[5] == -24.0f);

  /* planned outputs cannot be bound */
  float buf[6];
  CHECK(pyexec_method_set_output_ptr(m, 0, buf, sizeof buf) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "memory-planned"));

  /* bad inputs: count, dtype, shape; a failure blocks execute */
  CHECK(pyexec_method_set_inputs(m, in, 1) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "takes 2 inputs, got 1"));
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_INVALID_ARGUMENT);
  pyexec_value bad[2] = {in[0], in[1]};
  bad[1].tensor.dtype = PYEXEC_DTYPE_FLOAT64;
  CHECK(pyexec_method_set_inputs(m, bad, 2) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 1 has dtype float32, tensor has float64"));
  int64_t s2[2] = {3, 2};
  bad[1] = tensor_value(y, s2, 2, sizeof y);
  CHECK(pyexec_method_set_inputs(m, bad, 2) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 1 has shape [2, 3], tensor has shape [3, 2] (dim 0 differs)"));
  bad[1] = tensor_value(y, s, 2, 8);
  CHECK(pyexec_method_set_inputs(m, bad, 2) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK_OK(pyexec_method_set_inputs(m, in, 2));
  CHECK_OK(pyexec_method_execute(m));

  /* clearing uninstalls: no run until a complete set is installed again */
  CHECK_OK(pyexec_method_clear_inputs(m));
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 0 has not been set"));
  CHECK_OK(pyexec_method_clear_inputs(m)); /* twice is harmless */
  CHECK(pyexec_method_clear_inputs(NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK_OK(pyexec_method_set_inputs(m, in, 2));
  CHECK_OK(pyexec_method_execute(m));

  /* two methods from one program are independent */
  pyexec_method *m2 = NULL;
  CHECK_OK(pyexec_method_load(p, "forward", &m2));
  CHECK(m2 && pyexec_method_execute(m2) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_load(p, "missing", &m2) == PYEXEC_ERR_INVALID_ARGUMENT);
  pyexec_method_free(m2);
  pyexec_method_free(m);
  pyexec_method_free(NULL);
  pyexec_program_free(p);
}

/* ---- unplanned inputs, output binding ----------------------------------- */

static void test_unplanned_binding(void) {
  pyexec_program *p = NULL;
  pyexec_method *m = NULL;
  CHECK_OK(pyexec_program_load_file(path_of("add_mul_unplanned.pte"), &p));
  if (!p) return;
  CHECK_OK(pyexec_method_load(p, "forward", &m));
  if (!m) return;
  pyexec_value_info info;
  CHECK_OK(pyexec_method_output_info(m, 0, &info));
  CHECK(info.is_memory_planned == 0);
  CHECK(pyexec_method_check_bindable(m, 0) == PYEXEC_OK);
  CHECK(pyexec_method_check_bindable(m, 7) == PYEXEC_ERR_INVALID_ARGUMENT);

  /* bind before the first execute */
  float bound[6] = {0};
  CHECK_OK(pyexec_method_set_output_ptr(m, 0, bound, sizeof bound));
  CHECK(pyexec_method_set_output_ptr(m, 1, bound + 2, 4 * sizeof(float)) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "needs 24 bytes"));
  float big[12];
  CHECK(pyexec_method_set_output_ptr(m, 1, bound, sizeof bound) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "overlaps the memory bound to output 0"));
  CHECK_OK(pyexec_method_set_output_ptr(m, 1, big, sizeof big));

  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {1, 1, 1, 1, 1, 1};
  int64_t s[2] = {2, 3};
  pyexec_value in[2] = {tensor_value(x, s, 2, sizeof x), tensor_value(y, s, 2, sizeof y)};
  CHECK_OK(pyexec_method_set_inputs(m, in, 2));
  CHECK_OK(pyexec_method_execute(m));
  CHECK(bound[0] == 2.0f && bound[5] == 7.0f);
  CHECK(big[3] == 4.0f);
  /* unplanned inputs are borrowed: a change is seen by the next execute */
  x[5] = 10;
  CHECK_OK(pyexec_method_execute(m));
  CHECK(bound[5] == 11.0f);
  pyexec_value out;
  CHECK_OK(pyexec_method_get_output(m, 0, &out));
  CHECK(out.tensor.data == bound);

  /* an input may not overlap a bound output, nor a binding an input */
  pyexec_value overlap[2] = {tensor_value(bound, s, 2, sizeof bound), in[1]};
  CHECK(pyexec_method_set_inputs(m, overlap, 2) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 0 overlaps the memory bound to output 0"));
  CHECK_OK(pyexec_method_set_inputs(m, in, 2));
  CHECK(pyexec_method_set_output_ptr(m, 1, y, sizeof y) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "overlaps the memory of input 1"));
  /* cleared inputs are no longer read: their memory can be bound, and the
   * method runs only once inputs are installed again */
  CHECK_OK(pyexec_method_clear_inputs(m));
  CHECK_OK(pyexec_method_set_output_ptr(m, 1, y, sizeof y));
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK_OK(pyexec_method_set_output_ptr(m, 1, big, sizeof big));
  CHECK_OK(pyexec_method_set_inputs(m, in, 2));

  /* unbinding returns the method's own storage; the old buffer is not written again */
  CHECK_OK(pyexec_method_set_output_ptr(m, 0, NULL, 0));
  bound[0] = -1;
  CHECK_OK(pyexec_method_execute(m));
  CHECK(bound[0] == -1.0f);
  CHECK_OK(pyexec_method_get_output(m, 0, &out));
  CHECK(out.tensor.data != bound && ((const float *)out.tensor.data)[0] == 2.0f);
  pyexec_method_free(m);
  pyexec_program_free(p);
}

/* ---- the one-call hot path ---------------------------------------------- */

static pyexec_status run_call(pyexec_method *m, const pyexec_value *in, size_t nin, pyexec_value *out,
                              size_t nout, int *changed) {
  pyexec_run r = {m, in, nin, out, nout, -1};
  pyexec_status st = pyexec_method_run(&r);
  if (changed) *changed = r.outputs_changed;
  return st;
}

static void test_run(void) {
  pyexec_program *p = NULL;
  pyexec_method *m = NULL;
  CHECK_OK(pyexec_program_load_file(path_of("add_mul_unplanned.pte"), &p));
  if (!p) return;
  CHECK_OK(pyexec_method_load(p, "forward", &m));
  if (!m) return;
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {1, 1, 1, 1, 1, 1};
  int64_t s[2] = {2, 3};
  pyexec_value in[2] = {tensor_value(x, s, 2, sizeof x), tensor_value(y, s, 2, sizeof y)};
  pyexec_value out[2];
  int changed = -1;

  /* installs, runs, describes; the first run always reports a change */
  CHECK_OK(run_call(m, in, 2, out, 2, &changed));
  CHECK(changed == 1);
  CHECK(out[0].kind == PYEXEC_VALUE_TENSOR && out[0].tensor.dim == 2 && out[0].tensor.sizes[1] == 3);
  CHECK(((const float *)out[0].tensor.data)[5] == 7.0f && ((const float *)out[1].tensor.data)[5] == 6.0f);
  const void *own0 = out[0].tensor.data;

  /* installed inputs, same storage: no change reported, new values */
  x[5] = 10;
  CHECK_OK(run_call(m, NULL, 0, out, 2, &changed));
  CHECK(changed == 0 && out[0].tensor.data == own0);
  CHECK(((const float *)out[0].tensor.data)[5] == 11.0f);
  CHECK_OK(run_call(m, in, 2, out, 2, NULL));

  /* binding moves output 0: reported once, then steady again */
  float bound[6] = {0};
  CHECK_OK(pyexec_method_set_output_ptr(m, 0, bound, sizeof bound));
  CHECK_OK(run_call(m, NULL, 0, out, 2, &changed));
  CHECK(changed == 1 && out[0].tensor.data == bound && bound[5] == 11.0f);
  CHECK_OK(run_call(m, NULL, 0, out, 2, &changed));
  CHECK(changed == 0);
  /* fewer outputs described than last time counts as a change */
  CHECK_OK(run_call(m, NULL, 0, out, 1, &changed));
  CHECK(changed == 1);

  /* bad arguments are named; a failed install leaves no inputs */
  CHECK(pyexec_method_run(NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  pyexec_run no_method = {0};
  CHECK(pyexec_method_run(&no_method) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(run_call(m, NULL, 2, out, 2, NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "inputs is NULL"));
  CHECK(run_call(m, NULL, 0, NULL, 2, NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(run_call(m, NULL, 0, out, 3, NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "asked for 3 outputs"));
  pyexec_value bad[2] = {in[0], in[1]};
  bad[1].tensor.dtype = PYEXEC_DTYPE_INT32;
  out[0].kind = -7;
  CHECK(run_call(m, bad, 2, out, 2, &changed) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 1 has dtype float32, tensor has int32"));
  CHECK(out[0].kind == -7); /* nothing described on failure */
  CHECK(run_call(m, NULL, 0, out, 2, &changed) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 0 has not been set"));
  CHECK_OK(run_call(m, in, 2, out, 2, &changed));
  CHECK(bound[0] == 2.0f);
  pyexec_method_free(m);
  pyexec_program_free(p);
}

/* ---- in-place update of a caller-owned cache ---------------------------- */

static void test_alias_in_place(void) {
  pyexec_program *p = NULL;
  pyexec_method *m = NULL;
  CHECK_OK(pyexec_program_load_file(path_of("cache_update_unplanned.pte"), &p));
  if (!p) return;
  CHECK_OK(pyexec_method_load(p, "forward", &m));
  if (!m) return;
  size_t j = 99;
  /* is_mutated_input: 1 for the input the program writes in place, 0 for every
   * output, the write-back of that input included */
  pyexec_value_info info;
  CHECK_OK(pyexec_method_input_info(m, 0, &info));
  CHECK(info.is_mutated_input == 1);
  CHECK_OK(pyexec_method_input_info(m, 2, &info));
  CHECK(info.is_mutated_input == 0);
  for (size_t o = 0; o < 2; o++) {
    CHECK_OK(pyexec_method_output_info(m, o, &info));
    CHECK(info.is_mutated_input == 0);
    CHECK_OK(pyexec_program_output_info(p, "forward", o, &info));
    CHECK(info.is_mutated_input == 0);
  }
  CHECK(pyexec_method_query_alias(m, 0, &j) == 1 && j == 0);
  CHECK(pyexec_method_query_alias(m, 1, &j) == 0);
  CHECK(pyexec_method_query_alias(m, 9, &j) == 0);
  /* the alias query has no side effects: no input is marked as set */
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 0 has not been set"));
  float dummy[32];
  CHECK(pyexec_method_set_output_ptr(m, 0, dummy, sizeof dummy) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "is input 0"));

  float cache[32] = {0};
  int64_t idx = 5;
  float val[4] = {1, 2, 3, 4};
  int64_t cs[2] = {8, 4}, is[1] = {1}, vs[2] = {1, 4};
  pyexec_value in[3] = {tensor_value(cache, cs, 2, sizeof cache), tensor_value(NULL, is, 1, 8),
                        tensor_value(val, vs, 2, sizeof val)};
  in[1].tensor.dtype = PYEXEC_DTYPE_INT64;
  in[1].tensor.data = &idx;
  CHECK_OK(pyexec_method_set_inputs(m, in, 3));
  CHECK_OK(pyexec_method_execute(m));
  CHECK(cache[5 * 4 + 0] == 1.0f && cache[5 * 4 + 3] == 4.0f && cache[0] == 0.0f);
  pyexec_value out;
  CHECK_OK(pyexec_method_get_output(m, 0, &out));
  CHECK(out.tensor.data == cache);
  CHECK_OK(pyexec_method_get_output(m, 1, &out));
  CHECK(((const float *)out.tensor.data)[2] == 3.0f);
  idx = 9; /* out of range: the kernel must refuse, not write */
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_EXECUTION);
  pyexec_method_free(m);
  pyexec_program_free(p);
}

/* ---- malformed files ---------------------------------------------------- */

static volatile unsigned char sink;

static void try_everything(const unsigned char *buf, size_t n) {
  pyexec_program *p = NULL;
  if (pyexec_program_load_buffer(buf, n, &p) != PYEXEC_OK) return;
  for (size_t s = 0; s < pyexec_program_test_suite_count(p); s++) {
    size_t ncases = 0, nvals = 0;
    pyexec_test_value tv;
    if (pyexec_program_test_case_count(p, s, &ncases) != PYEXEC_OK) continue;
    for (size_t c = 0; c < ncases; c++)
      for (int e = 0; e < 2; e++)
        if (pyexec_program_test_value_count(p, s, c, e, &nvals) == PYEXEC_OK)
          for (size_t k = 0; k <= nvals; k++)
            if (pyexec_program_test_value(p, s, c, e, k, &tv) == PYEXEC_OK && tv.kind == PYEXEC_VALUE_TENSOR &&
                tv.nbytes)
              sink ^= ((const unsigned char *)tv.data)[tv.nbytes - 1]; /* the last byte must be readable */
  }
  for (size_t k = 0; k < pyexec_program_method_count(p); k++) {
    const char *name = pyexec_program_method_name(p, k);
    pyexec_value_info info;
    size_t nin = 0;
    pyexec_program_input_count(p, name, &nin);
    for (size_t i = 0; i < nin; i++) pyexec_program_input_info(p, name, i, &info);
    pyexec_method *m = NULL;
    if (pyexec_method_load(p, name, &m) != PYEXEC_OK) continue;
    float data[64] = {0};
    int64_t sizes[PYEXEC_MAX_DIM];
    pyexec_value in[8];
    size_t count = nin < 8 ? nin : 8;
    int usable = 1;
    for (size_t i = 0; i < count; i++) {
      if (pyexec_method_input_info(m, i, &info) != PYEXEC_OK || info.nbytes > sizeof data) usable = 0;
      for (int d = 0; d < info.dim; d++) sizes[d] = info.sizes[d];
      in[i] = tensor_value(data, sizes, info.dim, sizeof data);
      in[i].tensor.dtype = info.dtype;
    }
    if (usable && pyexec_method_set_inputs(m, in, count) == PYEXEC_OK) pyexec_method_execute(m);
    pyexec_method_free(m);
  }
  pyexec_program_free(p);
}

static void test_malformed(void) {
  size_t n = 0;
  unsigned char *good = read_file("add_mul.pte", &n);
  CHECK(good != NULL);
  if (!good) return;
  unsigned char *buf = malloc(n);
  pyexec_program *p = NULL;

  memcpy(buf, good, n);
  memcpy(buf + 4, "XX99", 4);
  CHECK(pyexec_program_load_buffer(buf, n, &p) == PYEXEC_ERR_INVALID_PROGRAM);
  CHECK(contains(pyexec_last_error(), "ET12"));
  CHECK(pyexec_program_load_buffer(good, 4, &p) == PYEXEC_ERR_INVALID_PROGRAM);
  CHECK(pyexec_program_load_file(path_of("does-not-exist.pte"), &p) == PYEXEC_ERR_IO);
  CHECK(contains(pyexec_last_error(), "does-not-exist.pte"));

  /* every truncation, and every byte overwritten with a few patterns */
  for (size_t len = 0; len < n; len++) try_everything(good, len);
  static const unsigned char patterns[] = {0x00, 0xff, 0x7f, 0x80, 0x01};
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < sizeof patterns; k++) {
      memcpy(buf, good, n);
      buf[i] = patterns[k];
      try_everything(buf, n);
    }
  }
  memcpy(buf, good, n);
  CHECK_OK(pyexec_program_load_buffer(buf, n, &p));
  pyexec_program_free(p);
  free(buf);
  free(good);
}

/* ---- bundled programs (.bpte) ------------------------------------------- */

/* Runs every test case of a bundled program through its method and compares
 * the outputs with the expected ones (float32 within 1e-5 relative, 1e-6
 * absolute; other dtypes exactly). Returns the number of cases run. */
static size_t run_test_cases(pyexec_program *p) {
  size_t ran = 0;
  for (size_t s = 0; s < pyexec_program_test_suite_count(p); s++) {
    const char *name = pyexec_program_test_suite_method(p, s);
    pyexec_method *m = NULL;
    CHECK_OK(pyexec_method_load(p, name, &m));
    if (!m) continue;
    size_t ncases = 0;
    CHECK_OK(pyexec_program_test_case_count(p, s, &ncases));
    for (size_t c = 0; c < ncases; c++) {
      size_t nin = 0, nexp = 0;
      CHECK_OK(pyexec_program_test_value_count(p, s, c, 0, &nin));
      CHECK_OK(pyexec_program_test_value_count(p, s, c, 1, &nexp));
      CHECK(nin == pyexec_method_input_count(m) && nexp == pyexec_method_output_count(m));
      pyexec_test_value tv[4];
      pyexec_value in[4];
      memset(in, 0, sizeof in);
      for (size_t k = 0; k < nin && k < 4; k++) {
        CHECK_OK(pyexec_program_test_value(p, s, c, 0, k, &tv[k]));
        in[k].kind = tv[k].kind;
        if (tv[k].kind == PYEXEC_VALUE_INT) in[k].i = tv[k].i;
        if (tv[k].kind != PYEXEC_VALUE_TENSOR) continue;
        in[k].tensor.dtype = tv[k].dtype;
        in[k].tensor.dim = tv[k].dim;
        in[k].tensor.sizes = tv[k].sizes;
        in[k].tensor.data = (void *)tv[k].data; /* planned inputs: copied, never written */
        in[k].tensor.nbytes = tv[k].nbytes;
      }
      CHECK_OK(pyexec_method_set_inputs(m, in, nin));
      CHECK_OK(pyexec_method_execute(m));
      for (size_t k = 0; k < nexp; k++) {
        pyexec_test_value want;
        pyexec_value got;
        CHECK_OK(pyexec_program_test_value(p, s, c, 1, k, &want));
        CHECK_OK(pyexec_method_get_output(m, k, &got));
        CHECK(want.kind == PYEXEC_VALUE_TENSOR && got.tensor.dtype == want.dtype && got.tensor.dim == want.dim);
        for (int d = 0; d < want.dim && d < got.tensor.dim; d++) CHECK(got.tensor.sizes[d] == want.sizes[d]);
        if (want.dtype == PYEXEC_DTYPE_FLOAT32) {
          const float *a = got.tensor.data, *b = want.data;
          for (size_t e = 0; e < want.nbytes / 4; e++) CHECK(fabsf(a[e] - b[e]) <= 1e-6f + 1e-5f * fabsf(b[e]));
        } else {
          CHECK(memcmp(got.tensor.data, want.data, want.nbytes) == 0);
        }
      }
      ran++;
    }
    pyexec_method_free(m);
  }
  return ran;
}

static void test_bundled(void) {
  pyexec_program *p = NULL;
  /* two_methods.bpte: encode(int32[2, 2], int32[2, 2]) with 2 test cases;
   * forward(float32[<=4, 3, 4], int) with 3 (batches 2, 1 and 4) */
  CHECK_OK(pyexec_program_load_file(path_of("two_methods.bpte"), &p));
  if (!p) return;
  CHECK(pyexec_program_is_bundled(p) == 1);
  CHECK(pyexec_program_method_count(p) == 2);
  CHECK(pyexec_program_test_suite_count(p) == 2);
  CHECK(strcmp(pyexec_program_test_suite_method(p, 0), "encode") == 0);
  CHECK(strcmp(pyexec_program_test_suite_method(p, 1), "forward") == 0);
  CHECK(pyexec_program_test_suite_method(p, 2) == NULL);
  size_t count = 0;
  CHECK_OK(pyexec_program_test_case_count(p, 1, &count));
  CHECK(count == 3);
  CHECK(pyexec_program_test_case_count(p, 2, &count) == PYEXEC_ERR_INVALID_ARGUMENT);
  pyexec_test_value tv;
  CHECK_OK(pyexec_program_test_value(p, 1, 1, 0, 0, &tv));
  CHECK(tv.kind == PYEXEC_VALUE_TENSOR && tv.dtype == PYEXEC_DTYPE_FLOAT32 && tv.dim == 3);
  CHECK(tv.sizes[0] == 1 && tv.sizes[1] == 3 && tv.sizes[2] == 4 && tv.nbytes == 48);
  CHECK_OK(pyexec_program_test_value(p, 1, 1, 0, 1, &tv));
  CHECK(tv.kind == PYEXEC_VALUE_INT && tv.i == 3);
  CHECK(pyexec_program_test_value(p, 1, 1, 0, 2, &tv) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(contains(pyexec_last_error(), "input 2 is out of range"));
  CHECK(pyexec_program_test_value(p, 1, 3, 0, 0, &tv) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(run_test_cases(p) == 5);
  pyexec_program_free(p);

  size_t n = 0;
  unsigned char *good = read_file("two_methods.bpte", &n);
  CHECK(good != NULL);
  if (!good) return;
  CHECK_OK(pyexec_program_load_buffer(good, n, &p));
  if (p) CHECK(run_test_cases(p) == 5);
  pyexec_program_free(p);
  /* a plain program has no test suites */
  CHECK_OK(pyexec_program_load_file(path_of("add_mul.pte"), &p));
  CHECK(pyexec_program_is_bundled(p) == 0 && pyexec_program_test_suite_count(p) == 0);
  CHECK(pyexec_program_test_suite_method(p, 0) == NULL);
  CHECK(pyexec_program_test_case_count(p, 0, &count) == PYEXEC_ERR_INVALID_ARGUMENT);
  pyexec_program_free(p);
  CHECK(pyexec_program_is_bundled(NULL) == 0);

  unsigned char *buf = malloc(n);
  memcpy(buf, good, n);
  memcpy(buf + 4, "BP07", 4);
  CHECK(pyexec_program_load_buffer(buf, n, &p) == PYEXEC_ERR_UNSUPPORTED);
  CHECK(contains(pyexec_last_error(), "'BP07' is not supported"));
  /* every truncation, and every byte overwritten with a few patterns */
  for (size_t len = 0; len < n; len++) try_everything(good, len);
  static const unsigned char patterns[] = {0x00, 0xff, 0x80};
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < sizeof patterns; k++) {
      memcpy(buf, good, n);
      buf[i] = patterns[k];
      try_everything(buf, n);
    }
  }
  free(buf);
  free(good);
}

/* ---- data files (.ptd) ---------------------------------------------------- */

/* add_weight.pte computes x + w, with w = [[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]]
 * kept in add_weight.ptd. */
static void check_add_weight(pyexec_program *p) {
  pyexec_method *m = NULL;
  CHECK_OK(pyexec_method_load(p, "forward", &m));
  if (!m) return;
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t xs[2] = {2, 3};
  pyexec_value in = tensor_value(x, xs, 2, sizeof x);
  CHECK_OK(pyexec_method_set_inputs(m, &in, 1));
  CHECK_OK(pyexec_method_execute(m));
  pyexec_value out;
  CHECK_OK(pyexec_method_get_output(m, 0, &out));
  const float *y = out.tensor.data;
  for (int i = 0; i < 6; i++) CHECK(y && y[i] == x[i] + (float)i + 0.5f);
  pyexec_method_free(m);
}

static void test_data_file(void) {
  pyexec_program *p = NULL;
  pyexec_method *m = NULL;
  CHECK_OK(pyexec_program_load_file(path_of("add_weight.pte"), &p));
  if (!p) return;
  /* Without its data file the method is refused, naming the tensor. */
  CHECK(pyexec_method_load(p, "forward", &m) == PYEXEC_ERR_INVALID_PROGRAM);
  CHECK(contains(pyexec_last_error(), "'w'") && contains(pyexec_last_error(), "data file"));
  CHECK(pyexec_program_attach_data_file(p, path_of("does-not-exist.ptd")) == PYEXEC_ERR_IO);
  CHECK(pyexec_program_attach_data_file(p, path_of("add_mul.pte")) == PYEXEC_ERR_INVALID_PROGRAM);
  CHECK(contains(pyexec_last_error(), "FH01"));
  CHECK(pyexec_program_attach_data_file(NULL, path_of("add_weight.ptd")) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_program_attach_data_buffer(p, NULL, 1) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK_OK(pyexec_program_attach_data_file(p, path_of("add_weight.ptd")));
  CHECK(pyexec_program_attach_data_file(p, path_of("add_weight.ptd")) == PYEXEC_ERR_INVALID_ARGUMENT);
  check_add_weight(p);
  pyexec_program_free(p);

  /* The buffer form copies: the caller's bytes may go at once. */
  size_t n = 0;
  unsigned char *ptd = read_file("add_weight.ptd", &n);
  CHECK(ptd != NULL);
  if (!ptd) return;
  p = NULL;
  CHECK_OK(pyexec_program_load_file(path_of("add_weight.pte"), &p));
  if (!p) {
    free(ptd);
    return;
  }
  /* Every truncation is refused and leaves the program without data. */
  for (size_t len = 0; len < n; len++) CHECK(pyexec_program_attach_data_buffer(p, ptd, len) == PYEXEC_ERR_INVALID_PROGRAM);
  CHECK_OK(pyexec_program_attach_data_buffer(p, ptd, n));
  memset(ptd, 0, n);
  free(ptd);
  check_add_weight(p);
  pyexec_program_free(p);
}

int main(int argc, char **argv) {
  if (argc > 1) data_dir = argv[1];
  test_version();
  test_metadata();
  test_planned();
  test_unplanned_binding();
  test_run();
  test_alias_in_place();
  test_malformed();
  test_bundled();
  test_data_file();
  printf("%d checks, %d failed\n", checks, failures);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
