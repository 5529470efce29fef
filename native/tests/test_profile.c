/*
 * test_profile.c - the profiling calls of the public header
 * (pyexec_method_profile_*), as a C program with no Python: events of a
 * delegate call and its nodes and of a kernel, run numbers and run spans,
 * enable/disable/reset, the event limit and the dropped count, and NULL or
 * out-of-range arguments. Usage: test_profile DATA_DIR (the fixtures in
 * DATA_DIR/models come from scripts/make_fixtures.py).
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

/* A loaded method with zero-filled inputs installed. */
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

static pyexec_profile_event event(pyexec_method *m, size_t i) {
  pyexec_profile_event e;
  memset(&e, 0, sizeof e);
  CHECK_OK(pyexec_method_profile_event(m, i, &e));
  return e;
}

/* ---- NULL and out-of-range arguments --------------------------------------- */

static void test_null_arguments(void) {
  int64_t s, d;
  pyexec_profile_event e;
  CHECK(pyexec_method_profile_enable(NULL, 1) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_reset(NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_set_limit(NULL, 5) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_event(NULL, 0, &e) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_run(NULL, 0, &s, &d) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_event_count(NULL) == 0);
  CHECK(pyexec_method_profile_run_count(NULL) == 0);
  CHECK(pyexec_method_profile_dropped(NULL) == 0);
}

/* ---- a delegate call with its nodes, then a kernel --------------------------- */

static void test_events_of_a_delegated_program(void) {
  loaded l;
  if (!load("mlp_xnnpack.pte", &l)) {
    CHECK(!"mlp_xnnpack.pte loads");
    unload(&l);
    return;
  }
  pyexec_method *m = l.method;
  /* Off by default: nothing is recorded. */
  CHECK_OK(pyexec_method_execute(m));
  CHECK(pyexec_method_profile_event_count(m) == 0 && pyexec_method_profile_run_count(m) == 0);

  CHECK_OK(pyexec_method_profile_enable(m, 1));
  CHECK_OK(pyexec_method_execute(m));
  size_t per_run = pyexec_method_profile_event_count(m);
  CHECK_OK(pyexec_method_execute(m));
  size_t n = pyexec_method_profile_event_count(m);
  CHECK(per_run >= 3 && n == 2 * per_run);
  CHECK(pyexec_method_profile_run_count(m) == 2 && pyexec_method_profile_dropped(m) == 0);

  int64_t span_start[2] = {0, 0}, span_len[2] = {0, 0};
  for (size_t r = 0; r < 2; r++) CHECK_OK(pyexec_method_profile_run(m, r, &span_start[r], &span_len[r]));
  CHECK(span_len[0] > 0 && span_len[1] > 0 && span_start[0] + span_len[0] <= span_start[1]);

  /* Each run: the delegate call (instruction 0), its nodes at depth 1
   * numbered from 0 and inside the call's time, then the kernel (instruction 1). */
  for (size_t r = 0; r < 2; r++) {
    size_t base = r * per_run;
    pyexec_profile_event call = event(m, base);
    CHECK(strcmp(call.name, "delegate:XnnpackBackend") == 0);
    CHECK(call.depth == 0 && call.chain == 0 && call.index == 0 && call.run == (int32_t)r);
    CHECK(call.start_ns >= span_start[r] && call.start_ns + call.duration_ns <= span_start[r] + span_len[r]);
    CHECK(call.shapes[0] == '[');
    for (size_t k = 1; k + 1 < per_run; k++) {
      pyexec_profile_event node = event(m, base + k);
      CHECK(node.depth == 1 && node.index == (int32_t)(k - 1) && node.run == (int32_t)r && node.chain == 0);
      CHECK(strcmp(node.name, "FullyConnected") == 0);
      CHECK(node.duration_ns >= 0 && node.start_ns >= call.start_ns);
      CHECK(node.start_ns + node.duration_ns <= call.start_ns + call.duration_ns);
    }
    pyexec_profile_event kernel = event(m, base + per_run - 1);
    CHECK(kernel.depth == 0 && kernel.index == 1 && kernel.run == (int32_t)r);
    CHECK(strstr(kernel.name, "::") != NULL);
    CHECK(kernel.start_ns >= call.start_ns + call.duration_ns);
    CHECK(kernel.start_ns + kernel.duration_ns <= span_start[r] + span_len[r]);
  }

  pyexec_profile_event e;
  int64_t s, d;
  CHECK(pyexec_method_profile_event(m, n, &e) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(pyexec_last_error(), "out of range") != NULL);
  CHECK(pyexec_method_profile_event(m, 0, NULL) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_method_profile_run(m, 2, &s, &d) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(pyexec_last_error(), "out of range") != NULL);
  CHECK(pyexec_method_profile_run(m, 0, NULL, &d) == PYEXEC_ERR_INVALID_ARGUMENT);

  /* Off again: what was recorded stays, nothing is added. */
  CHECK_OK(pyexec_method_profile_enable(m, 0));
  CHECK_OK(pyexec_method_execute(m));
  CHECK(pyexec_method_profile_event_count(m) == n && pyexec_method_profile_run_count(m) == 2);

  CHECK_OK(pyexec_method_profile_reset(m));
  CHECK(pyexec_method_profile_event_count(m) == 0 && pyexec_method_profile_run_count(m) == 0);

  /* A limit below one run's events: the later events are dropped and
   * counted, the run spans are all kept. */
  CHECK_OK(pyexec_method_profile_set_limit(m, 2));
  CHECK_OK(pyexec_method_profile_enable(m, 1));
  for (int k = 0; k < 3; k++) CHECK_OK(pyexec_method_execute(m));
  CHECK(pyexec_method_profile_event_count(m) == 2);
  CHECK(pyexec_method_profile_dropped(m) == 3 * per_run - 2);
  CHECK(pyexec_method_profile_run_count(m) == 3);
  CHECK(strcmp(event(m, 0).name, "delegate:XnnpackBackend") == 0 && event(m, 1).depth == 1);

  /* Reset clears the dropped count; limit 0 restores the default. */
  CHECK_OK(pyexec_method_profile_reset(m));
  CHECK(pyexec_method_profile_dropped(m) == 0);
  CHECK_OK(pyexec_method_profile_set_limit(m, 0));
  CHECK_OK(pyexec_method_execute(m));
  CHECK(pyexec_method_profile_event_count(m) == per_run && pyexec_method_profile_dropped(m) == 0);
  unload(&l);
}

/* ---- a portable program: one event per instruction, in order ----------------- */

static void test_events_of_a_portable_program(void) {
  loaded l;
  if (!load("cnn.pte", &l)) {
    CHECK(!"cnn.pte loads");
    unload(&l);
    return;
  }
  pyexec_method *m = l.method;
  /* A limit set before profiling was ever enabled takes effect. */
  CHECK_OK(pyexec_method_profile_set_limit(m, 1000));
  CHECK_OK(pyexec_method_profile_enable(m, 1));
  CHECK_OK(pyexec_method_execute(m));
  size_t n = pyexec_method_profile_event_count(m);
  CHECK(n > 0);
  int64_t start, len;
  CHECK_OK(pyexec_method_profile_run(m, 0, &start, &len));
  int64_t prev_end = start;
  for (size_t i = 0; i < n; i++) {
    pyexec_profile_event e = event(m, i);
    CHECK(e.depth == 0 && e.run == 0 && e.chain == 0 && e.index >= (int32_t)i);
    CHECK(e.start_ns >= prev_end && e.duration_ns >= 0);
    CHECK(strstr(e.name, "::") != NULL);
    prev_end = e.start_ns + e.duration_ns;
  }
  CHECK(prev_end <= start + len);
  unload(&l);
}

int main(int argc, char **argv) {
  if (argc > 1) data_dir = argv[1];
  test_null_arguments();
  test_events_of_a_delegated_program();
  test_events_of_a_portable_program();
  printf("test_profile: %d checks, %d failures\n", checks, failures);
  return failures != 0;
}
