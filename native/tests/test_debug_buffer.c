/*
 * test_debug_buffer.c - the debug buffer of the public header
 * (pyexec_method_profile_*debug*), as a C program with no Python: nothing is
 * recorded without profiling; with it, every value lies aligned inside the
 * bytes in use and belongs to an instruction's event or is a method output
 * equal to what the execute returned; a buffer too small fails the execute
 * with a message and never writes past its size; reset and removal; NULL
 * and out-of-range arguments. Usage: test_debug_buffer DATA_DIR (the
 * fixtures in DATA_DIR/models come from scripts/make_fixtures.py).
 */
#include <stdint.h>
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

/* A loaded method with inputs of ones installed (float32 inputs). */
typedef struct {
  pyexec_program *program;
  pyexec_method *method;
  void *buffers[8];
  size_t n;
} loaded;

static int load(const char *name, loaded *l) {
  char path[1024];
  memset(l, 0, sizeof *l);
  snprintf(path, sizeof path, "%s/models/%s", data_dir, name);
  if (pyexec_program_load_file(path, &l->program) != PYEXEC_OK ||
      pyexec_method_load(l->program, "forward", &l->method) != PYEXEC_OK) {
    fprintf(stderr, "cannot load %s: %s\n", path, pyexec_last_error());
    return 0;
  }
  l->n = pyexec_method_input_count(l->method);
  if (l->n > 8) return 0;
  pyexec_value values[8];
  static pyexec_value_info infos[8];
  memset(values, 0, sizeof values);
  for (size_t i = 0; i < l->n; i++) {
    if (pyexec_method_input_info(l->method, i, &infos[i]) != PYEXEC_OK || infos[i].kind != PYEXEC_VALUE_TENSOR)
      return 0;
    l->buffers[i] = calloc(1, infos[i].nbytes ? infos[i].nbytes : 1);
    if (infos[i].dtype == PYEXEC_DTYPE_FLOAT32)
      for (size_t k = 0; k < infos[i].nbytes / 4; k++) ((float *)l->buffers[i])[k] = 1.0f;
    values[i].kind = PYEXEC_VALUE_TENSOR;
    values[i].tensor.dtype = infos[i].dtype;
    values[i].tensor.dim = infos[i].dim;
    values[i].tensor.sizes = infos[i].sizes;
    values[i].tensor.data = l->buffers[i];
    values[i].tensor.nbytes = infos[i].nbytes;
  }
  return pyexec_method_set_inputs(l->method, values, l->n) == PYEXEC_OK;
}

static void unload(loaded *l) {
  pyexec_method_free(l->method);
  pyexec_program_free(l->program);
  for (size_t i = 0; i < l->n; i++) free(l->buffers[i]);
}

static void test_null_arguments(void) {
  pyexec_debug_value v;
  const void *data;
  size_t used;
  CHECK(pyexec_method_profile_set_debug_buffer(NULL, 64) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_debug_value(NULL, 0, &v) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_debug_buffer(NULL, &data, &used) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_debug_count(NULL) == 0);
}

/* Every value is where the header says: tensors aligned within the bytes
 * in use, instruction values on a depth-0 event, outputs last and equal to
 * the method's outputs. Returns the number of values. */
static size_t check_values(pyexec_method *m) {
  size_t n = pyexec_method_profile_debug_count(m), events = pyexec_method_profile_event_count(m);
  const void *data = NULL;
  size_t used = 0;
  CHECK_OK(pyexec_method_profile_debug_buffer(m, &data, &used));
  CHECK(data != NULL && used > 0);
  size_t outputs = 0;
  int32_t last_event = -1;
  for (size_t i = 0; i < n; i++) {
    pyexec_debug_value v;
    CHECK_OK(pyexec_method_profile_debug_value(m, i, &v));
    CHECK(v.run == 0);
    if (v.kind == PYEXEC_VALUE_TENSOR && v.offset >= 0) {
      CHECK(v.offset % 64 == 0 && (size_t)(v.offset + v.nbytes) <= used);
      size_t numel = 1;
      for (int d = 0; d < v.dim; d++) numel *= (size_t)v.sizes[d];
      CHECK((size_t)v.nbytes == numel * pyexec_dtype_size((pyexec_dtype)v.dtype));
    }
    if (v.output >= 0) {
      CHECK(v.event == -1);
      pyexec_value out;
      CHECK_OK(pyexec_method_get_output(m, (size_t)v.output, &out));
      if (v.kind == PYEXEC_VALUE_TENSOR && out.kind == PYEXEC_VALUE_TENSOR && v.offset >= 0)
        CHECK((size_t)v.nbytes == out.tensor.nbytes &&
              !memcmp((const uint8_t *)data + v.offset, out.tensor.data, out.tensor.nbytes));
      CHECK(v.output == (int32_t)outputs);
      outputs++;
    } else {
      CHECK(outputs == 0); /* the outputs come after every instruction's values */
      CHECK(v.event >= last_event && (size_t)v.event < events);
      pyexec_profile_event e;
      CHECK_OK(pyexec_method_profile_event(m, (size_t)v.event, &e));
      CHECK(e.depth == 0);
      last_event = v.event;
    }
  }
  CHECK(outputs == pyexec_method_output_count(m));
  pyexec_debug_value v;
  CHECK(pyexec_method_profile_debug_value(m, n, &v) == PYEXEC_ERR_INVALID_ARGUMENT);
  return n;
}

static void test_values_of(const char *model) {
  loaded l;
  if (!load(model, &l)) {
    CHECK(!"the model loads");
    unload(&l);
    return;
  }
  pyexec_method *m = l.method;
  /* A debug buffer without profiling records nothing. */
  CHECK_OK(pyexec_method_profile_set_debug_buffer(m, 1 << 20));
  CHECK_OK(pyexec_method_execute(m));
  CHECK(pyexec_method_profile_debug_count(m) == 0);

  CHECK_OK(pyexec_method_profile_enable(m, 1));
  CHECK_OK(pyexec_method_execute(m));
  size_t n = check_values(m);
  CHECK(n > pyexec_method_output_count(m));

  /* Reset empties it; the next execute records the same values again. */
  CHECK_OK(pyexec_method_profile_reset(m));
  CHECK(pyexec_method_profile_debug_count(m) == 0);
  CHECK_OK(pyexec_method_execute(m));
  CHECK(check_values(m) == n);

  /* A buffer too small: the execute fails, saying so, within the buffer. */
  CHECK_OK(pyexec_method_profile_reset(m));
  CHECK_OK(pyexec_method_profile_set_debug_buffer(m, 100));
  CHECK(pyexec_method_execute(m) == PYEXEC_ERR_OUT_OF_MEMORY);
  CHECK(strstr(pyexec_last_error(), "debug buffer (100 bytes) is full") != NULL);
  const void *data;
  size_t used;
  CHECK_OK(pyexec_method_profile_debug_buffer(m, &data, &used));
  CHECK(used <= 100);
  for (size_t i = 0; i < pyexec_method_profile_debug_count(m); i++) {
    pyexec_debug_value v;
    CHECK_OK(pyexec_method_profile_debug_value(m, i, &v));
    CHECK(v.kind != PYEXEC_VALUE_TENSOR || v.offset < 0 || (size_t)(v.offset + v.nbytes) <= used);
  }

  /* Removed: nothing recorded, nothing to read; executes work again. */
  CHECK_OK(pyexec_method_profile_set_debug_buffer(m, 0));
  CHECK_OK(pyexec_method_execute(m));
  CHECK(pyexec_method_profile_debug_count(m) == 0);
  CHECK_OK(pyexec_method_profile_debug_buffer(m, &data, &used));
  CHECK(data == NULL && used == 0);
  unload(&l);
}

int main(int argc, char **argv) {
  if (argc > 1) data_dir = argv[1];
  test_null_arguments();
  test_values_of("cnn.pte");
  test_values_of("mlp_xnnpack.pte");
  printf("test_debug_buffer: %d checks, %d failures\n", checks, failures);
  return failures != 0;
}
