/*
 * dlopen_example.c - uses libpyexec without linking it: the library is opened
 * at run time with dlopen and each function looked up with dlsym, as a plugin
 * host or another language's FFI would do. pyexec.h is included for its types
 * only.
 *
 *   cc -std=c11 -I native/include examples/c/dlopen_example.c -ldl -o dlopen_example
 *   ./dlopen_example native/build/libpyexec.so native/tests/data/add_mul.pte
 *
 * The program computes forward(x, y) = (x + y, x * y) on float32 [2, 3]. Output
 * 0 is written straight into a caller array when it is bindable (an unplanned
 * output, as in add_mul_unplanned.pte), and copied out after execute
 * otherwise. Exit status 0 when every value matches.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <pyexec.h>

/* The functions this example uses, as pointer types. */
typedef const char *(*last_error_fn)(void);
typedef const char *(*version_fn)(void);
typedef int (*version_number_fn)(void);
typedef pyexec_status (*program_load_file_fn)(const char *, pyexec_program **);
typedef void (*program_free_fn)(pyexec_program *);
typedef pyexec_status (*method_load_fn)(pyexec_program *, const char *, pyexec_method **);
typedef void (*method_free_fn)(pyexec_method *);
typedef pyexec_status (*method_input_info_fn)(const pyexec_method *, size_t, pyexec_value_info *);
typedef pyexec_status (*method_set_inputs_fn)(pyexec_method *, const pyexec_value *, size_t);
typedef pyexec_status (*method_check_bindable_fn)(const pyexec_method *, size_t);
typedef pyexec_status (*method_set_output_ptr_fn)(pyexec_method *, size_t, void *, size_t);
typedef pyexec_status (*method_execute_fn)(pyexec_method *);
typedef pyexec_status (*method_get_output_fn)(pyexec_method *, size_t, pyexec_value *);

static struct {
  last_error_fn last_error;
  version_fn version;
  version_number_fn version_number;
  program_load_file_fn program_load_file;
  program_free_fn program_free;
  method_load_fn method_load;
  method_free_fn method_free;
  method_input_info_fn method_input_info;
  method_set_inputs_fn method_set_inputs;
  method_check_bindable_fn method_check_bindable;
  method_set_output_ptr_fn method_set_output_ptr;
  method_execute_fn method_execute;
  method_get_output_fn method_get_output;
} px;

/* ISO C has no conversion from void * to a function pointer; POSIX guarantees
 * the representation is the same, so copy the bytes. */
static int resolve(void *lib, const char *name, void *fn, size_t size) {
  void *sym = dlsym(lib, name);
  if (sym == NULL) {
    fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());
    return 0;
  }
  memcpy(fn, &sym, size);
  return 1;
}
#define RESOLVE(lib, field, name) resolve((lib), (name), &px.field, sizeof px.field)

#define N 6

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LIBPYEXEC.so MODEL.pte\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  int ok = RESOLVE(lib, last_error, "pyexec_last_error") && RESOLVE(lib, version, "pyexec_version") &&
           RESOLVE(lib, version_number, "pyexec_version_number") &&
           RESOLVE(lib, program_load_file, "pyexec_program_load_file") &&
           RESOLVE(lib, program_free, "pyexec_program_free") && RESOLVE(lib, method_load, "pyexec_method_load") &&
           RESOLVE(lib, method_free, "pyexec_method_free") &&
           RESOLVE(lib, method_input_info, "pyexec_method_input_info") &&
           RESOLVE(lib, method_set_inputs, "pyexec_method_set_inputs") &&
           RESOLVE(lib, method_check_bindable, "pyexec_method_check_bindable") &&
           RESOLVE(lib, method_set_output_ptr, "pyexec_method_set_output_ptr") &&
           RESOLVE(lib, method_execute, "pyexec_method_execute") &&
           RESOLVE(lib, method_get_output, "pyexec_method_get_output");
  if (!ok) {
    dlclose(lib);
    return 1;
  }
  /* The header's types are only this library's when both come from one
   * release: compare major.minor (the number keeps three digits for each of
   * minor and patch, so dividing by 1000 drops the patch). */
  if (px.version_number() / 1000 != PYEXEC_VERSION_NUMBER / 1000) {
    fprintf(stderr, "%s is libpyexec %s; this program was built with the header of %s\n", argv[1], px.version(),
            PYEXEC_VERSION_STRING);
    dlclose(lib);
    return 1;
  }

  int status = 1;
  pyexec_program *prog = NULL;
  pyexec_method *m = NULL;
  if (px.program_load_file(argv[2], &prog) != PYEXEC_OK || px.method_load(prog, "forward", &m) != PYEXEC_OK) {
    fprintf(stderr, "%s\n", px.last_error());
    goto done;
  }
  pyexec_value_info info;
  if (px.method_input_info(m, 0, &info) != PYEXEC_OK || info.dtype != PYEXEC_DTYPE_FLOAT32 || info.dim != 2 ||
      info.sizes[0] * info.sizes[1] != N) {
    fprintf(stderr, "expected float32 inputs of 6 elements\n");
    goto done;
  }
  printf("libpyexec %s (dlopen %s): %s\n", px.version(), argv[1], argv[2]);

  /* Planned inputs are copied by set_inputs; unplanned ones are read in place
   * and must stay alive while the method may execute (they do: main's frame). */
  float x[N], y[N], sum[N], product[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)i * 0.25f - 1.0f;
    y[i] = 3.0f - (float)i;
    sum[i] = -999.0f;
  }
  int64_t sizes[2] = {info.sizes[0], info.sizes[1]};
  pyexec_value in[2];
  memset(in, 0, sizeof in);
  for (int j = 0; j < 2; j++) {
    in[j].kind = PYEXEC_VALUE_TENSOR;
    in[j].tensor.dtype = PYEXEC_DTYPE_FLOAT32;
    in[j].tensor.dim = 2;
    in[j].tensor.sizes = sizes;
    in[j].tensor.data = j == 0 ? x : y;
    in[j].tensor.nbytes = sizeof x;
  }
  if (px.method_set_inputs(m, in, 2) != PYEXEC_OK) {
    fprintf(stderr, "set_inputs: %s\n", px.last_error());
    goto done;
  }
  int bound = px.method_check_bindable(m, 0) == PYEXEC_OK;
  if (bound && px.method_set_output_ptr(m, 0, sum, sizeof sum) != PYEXEC_OK) {
    fprintf(stderr, "set_output_ptr: %s\n", px.last_error());
    goto done;
  }
  if (px.method_execute(m) != PYEXEC_OK) {
    fprintf(stderr, "execute: %s\n", px.last_error());
    goto done;
  }
  pyexec_value out;
  if (px.method_get_output(m, 0, &out) != PYEXEC_OK || out.kind != PYEXEC_VALUE_TENSOR) goto done;
  if (bound && out.tensor.data != (void *)sum) {
    fprintf(stderr, "output 0 was bound but not written in place\n");
    goto done;
  }
  if (!bound) memcpy(sum, out.tensor.data, sizeof sum);
  if (px.method_get_output(m, 1, &out) != PYEXEC_OK || out.kind != PYEXEC_VALUE_TENSOR) goto done;
  memcpy(product, out.tensor.data, sizeof product);

  int bad = 0;
  for (int i = 0; i < N; i++) {
    if (sum[i] != x[i] + y[i] || product[i] != x[i] * y[i]) {
      fprintf(stderr, "element %d: got (%g, %g), expected (%g, %g)\n", i, sum[i], product[i], x[i] + y[i],
              x[i] * y[i]);
      bad = 1;
    }
  }
  printf("output 0 (x + y) %s:", bound ? "written in place into a caller array" : "copied into a caller array");
  for (int i = 0; i < N; i++) printf(" %g", sum[i]);
  printf("\noutput 1 (x * y):");
  for (int i = 0; i < N; i++) printf(" %g", product[i]);
  printf("\n");
  if (!bad) {
    printf("ok: %d elements match\n", N);
    status = 0;
  }

done:
  px.method_free(m); /* NULL is a no-op */
  px.program_free(prog);
  dlclose(lib);
  return status;
}
