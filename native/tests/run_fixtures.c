/*
 * run_fixtures.c - runs every model fixture in DATA/models/ (NAME.pte with
 * NAME.io, written by scripts/make_fixtures.py) through the public API and
 * compares each output with the one computed on x86 when the fixtures were
 * made, within the tolerance stored in NAME.io. Usage: run_fixtures DATA
 *
 * The point is other machines: the same committed files run on an aarch64
 * build (under qemu in CI) check its kernels against PyTorch's numbers.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyexec.h"

#define MAX_TENSORS 16

typedef struct {
  int32_t dtype;
  int32_t dim;
  int64_t sizes[PYEXEC_MAX_DIM];
  uint64_t nbytes;
  const unsigned char *data;
} fx_tensor;

typedef struct {
  float rtol, atol;
  uint32_t n_in, n_out;
  fx_tensor t[MAX_TENSORS]; /* inputs, then expected outputs */
} fx_io;

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
      if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      } else {
        *size = (size_t)n;
      }
    }
  }
  fclose(f);
  return buf;
}

/* Reads `n` bytes at *at into dst; 0 when the file is too short. */
static int take(const unsigned char *buf, size_t size, size_t *at, void *dst, size_t n) {
  if (size - *at < n) return 0;
  memcpy(dst, buf + *at, n);
  *at += n;
  return 1;
}

static int parse_io(const unsigned char *buf, size_t size, fx_io *io) {
  size_t at = 0;
  uint32_t version;
  if (size < 4 || memcmp(buf, "PXIO", 4) != 0) return 0;
  at = 4;
  if (!take(buf, size, &at, &version, 4) || version != 1 || !take(buf, size, &at, &io->rtol, 4) ||
      !take(buf, size, &at, &io->atol, 4) || !take(buf, size, &at, &io->n_in, 4) ||
      !take(buf, size, &at, &io->n_out, 4) || io->n_in + io->n_out > MAX_TENSORS)
    return 0;
  for (uint32_t i = 0; i < io->n_in + io->n_out; i++) {
    fx_tensor *t = &io->t[i];
    if (!take(buf, size, &at, &t->dtype, 4) || !take(buf, size, &at, &t->dim, 4) || t->dim < 0 ||
        t->dim > PYEXEC_MAX_DIM || !take(buf, size, &at, t->sizes, 8 * (size_t)t->dim) ||
        !take(buf, size, &at, &t->nbytes, 8) || size - at < t->nbytes)
      return 0;
    t->data = buf + at;
    at += t->nbytes;
  }
  return at == size;
}

/* Compares one output; prints the first mismatch. Returns 1 when it matches. */
static int compare(const char *name, uint32_t index, const pyexec_value *got, const fx_tensor *want, const fx_io *io) {
  const pyexec_tensor *g = &got->tensor;
  if (got->kind != PYEXEC_VALUE_TENSOR || g->dtype != want->dtype || g->dim != want->dim) {
    printf("FAIL %s: output %u: kind/dtype/rank differ\n", name, index);
    return 0;
  }
  for (int32_t d = 0; d < g->dim; d++) {
    if (g->sizes[d] != want->sizes[d]) {
      printf("FAIL %s: output %u: size %d is %lld, want %lld\n", name, index, d, (long long)g->sizes[d],
             (long long)want->sizes[d]);
      return 0;
    }
  }
  if (want->dtype != PYEXEC_DTYPE_FLOAT32) {
    if (memcmp(g->data, want->data, want->nbytes) != 0) {
      printf("FAIL %s: output %u differs\n", name, index);
      return 0;
    }
    return 1;
  }
  size_t n = want->nbytes / sizeof(float);
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    float a, b;
    memcpy(&a, (const unsigned char *)g->data + i * sizeof a, sizeof a);
    memcpy(&b, want->data + i * sizeof b, sizeof b);
    double err = fabs((double)a - (double)b);
    if (!(err <= io->atol + io->rtol * fabs((double)b))) {
      printf("FAIL %s: output %u[%zu] = %.9g, want %.9g (atol %g, rtol %g)\n", name, index, i, (double)a, (double)b,
             (double)io->atol, (double)io->rtol);
      return 0;
    }
    if (err > worst) worst = err;
  }
  printf("ok   %s: output %u, %zu values, max |error| %.3g (atol %g, rtol %g)\n", name, index, n, worst,
         (double)io->atol, (double)io->rtol);
  return 1;
}

/* Runs one fixture; returns 1 when every output matches. */
static int run_one(const char *dir, const char *name) {
  char path[4096 + 256 + 8]; /* dir/name.pte: dir up to 4095 bytes, name up to 255 */
  size_t io_size = 0;
  fx_io io;
  pyexec_program *program = NULL;
  pyexec_method *method = NULL;
  pyexec_value values[MAX_TENSORS];
  int ok = 0;
  snprintf(path, sizeof path, "%s/%s.io", dir, name);
  unsigned char *buf = read_file(path, &io_size);
  if (!buf || !parse_io(buf, io_size, &io)) {
    printf("FAIL %s: cannot read %s\n", name, path);
    free(buf);
    return 0;
  }
  snprintf(path, sizeof path, "%s/%s.pte", dir, name);
  if (pyexec_program_load_file(path, &program) != PYEXEC_OK ||
      pyexec_method_load(program, "forward", &method) != PYEXEC_OK) {
    printf("FAIL %s: load: %s\n", name, pyexec_last_error());
    goto done;
  }
  if (pyexec_method_input_count(method) != io.n_in || pyexec_method_output_count(method) != io.n_out) {
    printf("FAIL %s: %zu inputs, %zu outputs; the fixture has %u, %u\n", name, pyexec_method_input_count(method),
           pyexec_method_output_count(method), io.n_in, io.n_out);
    goto done;
  }
  memset(values, 0, sizeof values);
  for (uint32_t i = 0; i < io.n_in; i++) {
    values[i].kind = PYEXEC_VALUE_TENSOR;
    values[i].tensor.dtype = io.t[i].dtype;
    values[i].tensor.dim = io.t[i].dim;
    values[i].tensor.sizes = io.t[i].sizes;
    values[i].tensor.data = (void *)io.t[i].data; /* planned inputs are copied; unplanned ones only read */
    values[i].tensor.nbytes = (size_t)io.t[i].nbytes;
  }
  if (pyexec_method_set_inputs(method, values, io.n_in) != PYEXEC_OK || pyexec_method_execute(method) != PYEXEC_OK ||
      pyexec_method_get_outputs(method, values, io.n_out) != PYEXEC_OK) {
    printf("FAIL %s: run: %s\n", name, pyexec_last_error());
    goto done;
  }
  ok = 1;
  for (uint32_t i = 0; i < io.n_out; i++) ok &= compare(name, i, &values[i], &io.t[io.n_in + i], &io);
done:
  pyexec_method_free(method);
  pyexec_program_free(program);
  free(buf);
  return ok;
}

int main(int argc, char **argv) {
  char dir[4096];
  int run = 0, failed = 0;
  snprintf(dir, sizeof dir, "%s/models", argc > 1 ? argv[1] : "tests/data");
  DIR *d = opendir(dir);
  if (!d) {
    printf("FAIL: cannot open %s\n", dir);
    return 1;
  }
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len <= 3 || len >= 256 || strcmp(e->d_name + len - 3, ".io") != 0) continue;
    char name[256];
    memcpy(name, e->d_name, len - 3);
    name[len - 3] = '\0';
    run++;
    failed += !run_one(dir, name);
  }
  closedir(d);
  printf("%d models, %d failed\n", run, failed);
  return failed || run == 0;
}
