/*
 * test_threads.c - the thread API through the public header only:
 * pyexec_set_num_threads / pyexec_get_num_threads (range checks and their
 * messages), and the model fixtures (tests/data/models: a conv net and a
 * transformer layer) run at 1, 2 and 3 threads with bit-identical outputs,
 * then from four threads at once, each with its own Method, while a fifth
 * keeps changing the count. PYEXEC_PARALLEL_MIN_COST=1 is set first so that
 * even these small models are split over the pool. Usage: test_threads DATA_DIR
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "pyexec.h"

static int failures = 0;
static int checks = 0;
static pthread_mutex_t check_mu = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond)                                                          \
  do {                                                                       \
    pthread_mutex_lock(&check_mu);                                           \
    checks++;                                                                \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
              __LINE__, #cond, pyexec_last_error());                         \
    }                                                                        \
    pthread_mutex_unlock(&check_mu);                                         \
  } while (0)

static const char *data_dir = "tests/data";

/* ---- the count API ---------------------------------------------------------- */

static void test_count_api(void) {
  int n0 = pyexec_get_num_threads();
  CHECK(n0 >= 1 && n0 <= 1024);
  CHECK(pyexec_set_num_threads(0) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(pyexec_last_error(), "num_threads must be from 1 to 1024, got 0") != NULL);
  CHECK(pyexec_set_num_threads(-1) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_set_num_threads(1025) == PYEXEC_ERR_INVALID_ARGUMENT);
  CHECK(pyexec_get_num_threads() == n0); /* a refused count changes nothing */
  CHECK(pyexec_set_num_threads(3) == PYEXEC_OK);
  CHECK(pyexec_get_num_threads() == 3);
  CHECK(pyexec_set_num_threads(1) == PYEXEC_OK);
  CHECK(pyexec_get_num_threads() == 1);
}

/* ---- a model with its inputs --------------------------------------------------- */

typedef struct model {
  pyexec_program *prog;
  size_t nin;
  pyexec_value in[4];
  int64_t sizes[4][PYEXEC_MAX_DIM];
  float *data[4];
  size_t out_bytes;
  unsigned char *want; /* output 0 at one thread */
} model;

static unsigned rng = 12345;
static float next_float(void) {
  rng = rng * 1103515245u + 12345u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int model_open(model *md, const char *name) {
  memset(md, 0, sizeof *md);
  char path[1024];
  snprintf(path, sizeof path, "%s/models/%s", data_dir, name);
  if (pyexec_program_load_file(path, &md->prog) != PYEXEC_OK) return -1;
  if (pyexec_program_input_count(md->prog, "forward", &md->nin) != PYEXEC_OK || md->nin > 4) return -1;
  for (size_t i = 0; i < md->nin; i++) {
    pyexec_value_info info;
    if (pyexec_program_input_info(md->prog, "forward", i, &info) != PYEXEC_OK) return -1;
    if (info.kind != PYEXEC_VALUE_TENSOR || info.dtype != PYEXEC_DTYPE_FLOAT32) return -1;
    size_t numel = info.nbytes / sizeof(float);
    md->data[i] = malloc(info.nbytes ? info.nbytes : 1);
    for (size_t k = 0; k < numel; k++) md->data[i][k] = next_float();
    memcpy(md->sizes[i], info.sizes, sizeof(int64_t) * (size_t)info.dim);
    pyexec_value *v = &md->in[i];
    v->kind = PYEXEC_VALUE_TENSOR;
    v->tensor.dtype = PYEXEC_DTYPE_FLOAT32;
    v->tensor.dim = info.dim;
    v->tensor.sizes = md->sizes[i];
    v->tensor.data = md->data[i];
    v->tensor.nbytes = info.nbytes;
  }
  return 0;
}

static void model_close(model *md) {
  for (size_t i = 0; i < md->nin; i++) free(md->data[i]);
  free(md->want);
  pyexec_program_free(md->prog);
}

/* Runs the model once on method m; copies output 0 into *out (malloc'd). */
static int run_once(model *md, pyexec_method *m, unsigned char **out, size_t *nbytes) {
  if (pyexec_method_set_inputs(m, md->in, md->nin) != PYEXEC_OK) return -1;
  if (pyexec_method_execute(m) != PYEXEC_OK) return -1;
  pyexec_value o;
  if (pyexec_method_get_output(m, 0, &o) != PYEXEC_OK || o.kind != PYEXEC_VALUE_TENSOR) return -1;
  *nbytes = o.tensor.nbytes;
  *out = malloc(*nbytes ? *nbytes : 1);
  memcpy(*out, o.tensor.data, *nbytes);
  return 0;
}

/* ---- the same bits at 1, 2 and 3 threads ------------------------------------------ */

static void test_bits(model *md) {
  pyexec_method *m = NULL;
  CHECK(pyexec_method_load(md->prog, "forward", &m) == PYEXEC_OK);
  if (!m) return;
  for (int t = 1; t <= 3; t++) {
    CHECK(pyexec_set_num_threads(t) == PYEXEC_OK);
    unsigned char *got = NULL;
    size_t nbytes = 0;
    CHECK(run_once(md, m, &got, &nbytes) == 0);
    if (t == 1) {
      md->want = got;
      md->out_bytes = nbytes;
      continue;
    }
    CHECK(got && nbytes == md->out_bytes && memcmp(got, md->want, nbytes) == 0);
    free(got);
  }
  pyexec_method_free(m);
}

/* Threads in this process (Linux: /proc/self/task), or -1. */
static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* ---- several application threads at once --------------------------------------------- */

typedef struct runner {
  model *md;
  int rounds;
  int mismatches;
} runner;

static void *run_many(void *p) {
  runner *r = p;
  pyexec_method *m = NULL;
  CHECK(pyexec_method_load(r->md->prog, "forward", &m) == PYEXEC_OK);
  if (!m) return NULL;
  for (int k = 0; k < r->rounds; k++) {
    unsigned char *got = NULL;
    size_t nbytes = 0;
    if (run_once(r->md, m, &got, &nbytes) || nbytes != r->md->out_bytes ||
        memcmp(got, r->md->want, nbytes))
      r->mismatches++;
    free(got);
  }
  pyexec_method_free(m);
  return NULL;
}

static atomic_int changing = 1;
static void *change_count(void *p) {
  (void)p;
  for (int k = 0; atomic_load(&changing); k++) pyexec_set_num_threads(1 + k % 3);
  return NULL;
}

static void test_concurrent(model *a, model *b) {
  enum { N = 4 };
  pthread_t th[N], changer;
  runner r[N];
  atomic_store(&changing, 1);
  pthread_create(&changer, NULL, change_count, NULL);
  for (int i = 0; i < N; i++) {
    r[i] = (runner){.md = i % 2 ? b : a, .rounds = 6};
    pthread_create(&th[i], NULL, run_many, &r[i]);
  }
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  atomic_store(&changing, 0);
  pthread_join(changer, NULL);
  for (int i = 0; i < N; i++) CHECK(r[i].mismatches == 0);
}

int main(int argc, char **argv) {
  if (argc > 1) data_dir = argv[1];
  /* split every kernel, however small (read once, at the first split) */
  setenv("PYEXEC_PARALLEL_MIN_COST", "1", 1);
  test_count_api();
  model cnn, tr;
  int ok = model_open(&cnn, "cnn.pte") == 0 && model_open(&tr, "transformer.pte") == 0;
  CHECK(ok);
  if (ok) {
    test_bits(&cnn);
    test_bits(&tr);
    /* the last runs used 3 threads: the pool's 2 workers exist (the kernels split) */
    int nt = thread_count();
    CHECK(nt == -1 || nt >= 3); /* a sanitizer may add one of its own */
    test_concurrent(&cnn, &tr);
    model_close(&cnn);
    model_close(&tr);
  }
  if (failures) {
    fprintf(stderr, "test_threads: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_threads: %d checks passed\n", checks);
  return 0;
}
