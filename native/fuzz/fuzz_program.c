/*
 * fuzz_program.c - libFuzzer harness for libpyexec: every input is treated as
 * a .pte file and goes through everything a caller can do with an untrusted
 * program: load, metadata of every method (inputs, outputs, operators), method
 * load, inputs made from the method's own metadata, output binding, execute
 * (twice, the second time with the unplanned outputs bound to caller
 * buffers), and reading every output back. Built by `make -C native fuzz`
 * with ASan + UBSan; any memory error, UB, leak, abort or broken invariant
 * (__builtin_trap below) is a crash.
 *
 * The program is loaded with pyexec_program_load_borrowed over a copy of
 * exactly `size` bytes, so a read one byte past the file is caught.
 *
 * Program + data file (.ptd): an input that starts with the 4 bytes "PXPD"
 * is a pair, laid out as
 *
 *     "PXPD", u32 little-endian N, N bytes of .pte, the rest: the .ptd
 *
 * (N larger than what follows: the whole rest is the program and the data
 * file is empty). The data file is attached from an exact-size copy with
 * pyexec_program_attach_data_buffer before the methods are loaded, and they
 * are loaded and run whether the attach succeeded or not (a refused data
 * file must leave the program as it was). Seeds of this form come from
 * scripts/make_fuzz_seeds.py (`--pack PTE PTD OUT` writes one); any other
 * input is a .pte alone, as before.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h" /* the harness links the library's objects: it lowers their bounds */
#include "pyexec.h"

/* Inputs and bound outputs larger than this are not made (the harness's own
 * allocations stay small; the library's are limited by -malloc_limit_mb). */
#define MAX_BUFFER ((size_t)16 << 20)
#define MAX_METHODS 4
#define MAX_IO 64

static void check(int cond) {
  if (!cond) __builtin_trap();
}

static void *buffer(size_t nbytes) {
  void *p = aligned_alloc(64, nbytes ? (nbytes + 63) & ~(size_t)63 : 64);
  check(p != NULL);
  return p;
}

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static void fill(void *data, size_t nbytes, int dtype, uint32_t *seed) {
  size_t es = pyexec_dtype_size(dtype);
  if (!es) return;
  size_t n = nbytes / es;
  uint8_t *b = data;
  for (size_t k = 0; k < n; k++) {
    uint32_t r = lcg(seed);
    switch (dtype) {
      case PYEXEC_DTYPE_FLOAT32: {
        float f = (float)((int)(r % 2001) - 1000) / 300.0f;
        memcpy(b + k * 4, &f, 4);
        break;
      }
      case PYEXEC_DTYPE_FLOAT64: {
        double d = (double)((int)(r % 2001) - 1000) / 300.0;
        memcpy(b + k * 8, &d, 8);
        break;
      }
      case PYEXEC_DTYPE_INT64: {
        int64_t v = (int64_t)(r % 4);
        memcpy(b + k * 8, &v, 8);
        break;
      }
      case PYEXEC_DTYPE_INT32: {
        int32_t v = (int32_t)(r % 4);
        memcpy(b + k * 4, &v, 4);
        break;
      }
      case PYEXEC_DTYPE_BOOL: b[k] = (uint8_t)(r & 1); break;
      case PYEXEC_DTYPE_FLOAT16:
      case PYEXEC_DTYPE_BFLOAT16: {
        uint16_t h = (uint16_t)(0x3c00 | (r & 0x03ff)); /* 1.0 .. 2.0 in fp16, ~1.0 in bf16 */
        if (dtype == PYEXEC_DTYPE_BFLOAT16) h = (uint16_t)(0x3f80 | (r & 0x7f));
        memcpy(b + k * 2, &h, 2);
        break;
      }
      default: b[k * es] = (uint8_t)(r % 4); break;
    }
  }
}

static void read_outputs(pyexec_method *m, size_t nout) {
  for (size_t i = 0; i < nout; i++) {
    pyexec_value v;
    if (pyexec_method_get_output(m, i, &v) != PYEXEC_OK) continue;
    size_t in;
    if (pyexec_method_query_alias(m, i, &in)) check(in < pyexec_method_input_count(m));
    if (v.kind != PYEXEC_VALUE_TENSOR) continue;
    check(v.tensor.dim >= 0 && v.tensor.dim <= PYEXEC_MAX_DIM);
    size_t es = pyexec_dtype_size(v.tensor.dtype);
    check(es > 0);
    uint64_t numel = 1;
    for (int k = 0; k < v.tensor.dim; k++) {
      check(v.tensor.sizes[k] >= 0);
      numel *= (uint64_t)v.tensor.sizes[k];
    }
    check(numel * es == v.tensor.nbytes);
    check(v.tensor.nbytes == 0 || v.tensor.data != NULL);
    /* Touch every byte the library says is there. */
    const volatile uint8_t *p = v.tensor.data;
    uint8_t acc = 0;
    for (size_t k = 0; k < v.tensor.nbytes; k++) acc ^= p[k];
    (void)acc;
  }
}

static void run_method(pyexec_program *prog, const char *name, uint32_t seed) {
  size_t nin, nout;
  if (pyexec_program_input_count(prog, name, &nin) != PYEXEC_OK ||
      pyexec_program_output_count(prog, name, &nout) != PYEXEC_OK)
    return;
  pyexec_value_info info;
  for (size_t i = 0; i < nin && i < MAX_IO; i++) pyexec_program_input_info(prog, name, i, &info);
  for (size_t i = 0; i < nout && i < MAX_IO; i++) pyexec_program_output_info(prog, name, i, &info);
  char small[8], big[4096];
  size_t needed = 0, missing = 0;
  pyexec_program_method_operators(prog, name, small, sizeof small, &needed, &missing);
  if (pyexec_program_method_operators(prog, name, big, sizeof big, &needed, &missing) == PYEXEC_OK)
    check(memchr(big, 0, sizeof big) != NULL);

  pyexec_method *m;
  if (pyexec_method_load(prog, name, &m) != PYEXEC_OK) return;
  check(pyexec_method_input_count(m) == nin && pyexec_method_output_count(m) == nout);
  if (nin > MAX_IO || nout > MAX_IO) {
    pyexec_method_free(m);
    return;
  }
  pyexec_value inputs[MAX_IO];
  int64_t sizes[MAX_IO][PYEXEC_MAX_DIM];
  void *bufs[MAX_IO] = {0};
  void *outbufs[MAX_IO] = {0};
  int ok = 1;
  memset(inputs, 0, sizeof inputs);
  for (size_t j = 0; j < nin && ok; j++) {
    if (pyexec_method_input_info(m, j, &info) != PYEXEC_OK) {
      ok = 0;
      break;
    }
    pyexec_value *v = &inputs[j];
    v->kind = info.kind;
    if (info.kind != PYEXEC_VALUE_TENSOR) continue; /* scalars: 0, which may be refused */
    if (info.nbytes > MAX_BUFFER || info.dim > PYEXEC_MAX_DIM) {
      ok = 0;
      break;
    }
    memcpy(sizes[j], info.sizes, sizeof(int64_t) * (size_t)info.dim);
    bufs[j] = buffer(info.nbytes);
    fill(bufs[j], info.nbytes, info.dtype, &seed);
    v->tensor.dtype = info.dtype;
    v->tensor.dim = info.dim;
    v->tensor.sizes = sizes[j];
    v->tensor.data = bufs[j];
    v->tensor.nbytes = info.nbytes;
  }
  if (ok && pyexec_method_set_inputs(m, inputs, nin) == PYEXEC_OK) {
    if (pyexec_method_execute(m) == PYEXEC_OK) read_outputs(m, nout);
    /* Bind what can be bound, and run again. */
    for (size_t i = 0; i < nout; i++) {
      if (pyexec_method_check_bindable(m, i) != PYEXEC_OK) continue;
      if (pyexec_method_output_info(m, i, &info) != PYEXEC_OK || info.nbytes > MAX_BUFFER) continue;
      outbufs[i] = buffer(info.nbytes);
      if (pyexec_method_set_output_ptr(m, i, outbufs[i], info.nbytes) != PYEXEC_OK) {
        free(outbufs[i]);
        outbufs[i] = NULL;
      }
    }
    if (pyexec_method_execute(m) == PYEXEC_OK) read_outputs(m, nout);
    /* Unbind (the method must not keep the caller's buffers), then once more. */
    for (size_t i = 0; i < nout; i++)
      if (outbufs[i]) check(pyexec_method_set_output_ptr(m, i, NULL, 0) == PYEXEC_OK);
    if (pyexec_method_execute(m) == PYEXEC_OK) read_outputs(m, nout);
    pyexec_value outs[MAX_IO];
    pyexec_method_get_outputs(m, outs, nout);
  }
  pyexec_method_free(m);
  for (size_t j = 0; j < MAX_IO; j++) {
    free(bufs[j]);
    free(outbufs[j]);
  }
}

/* Splits a "PXPD" pair (see the top of the file); otherwise the whole input
 * is the program and there is no data file (*ptd NULL). */
static void split_pair(const uint8_t *data, size_t size, const uint8_t **pte, size_t *pte_size,
                       const uint8_t **ptd, size_t *ptd_size) {
  *pte = data;
  *pte_size = size;
  *ptd = NULL;
  *ptd_size = 0;
  if (size < 8 || memcmp(data, "PXPD", 4) != 0) return;
  uint32_t n = (uint32_t)data[4] | (uint32_t)data[5] << 8 | (uint32_t)data[6] << 16 | (uint32_t)data[7] << 24;
  size_t rest = size - 8;
  *pte = data + 8;
  *pte_size = n < rest ? n : rest;
  *ptd = data + 8 + *pte_size;
  *ptd_size = rest - *pte_size;
}

/* Declared tensors and planned buffers over 4 MiB are refused (instead of
 * over 1 TiB) and a run stops after 100,000 instructions (instead of 10
 * million), so that a mutated size or a backward jump makes an input slow
 * (legal, but a libFuzzer timeout) rather than finding a bug. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  px_max_declared_bytes = (uint64_t)1 << 22;
  px_max_steps = 100000L;
  return 0;
}

/* The test sets of a bundled program (.bpte): every value the library
 * reports must be what it says (a known kind; a tensor's bytes all there). */
static void read_test_sets(const pyexec_program *prog) {
  size_t nsuites = pyexec_program_test_suite_count(prog);
  check(pyexec_program_is_bundled(prog) || nsuites == 0);
  check(pyexec_program_test_suite_method(prog, nsuites) == NULL);
  for (size_t s = 0; s < nsuites && s < MAX_METHODS; s++) {
    check(pyexec_program_test_suite_method(prog, s) != NULL);
    size_t ncases = 0;
    if (pyexec_program_test_case_count(prog, s, &ncases) != PYEXEC_OK) continue;
    for (size_t c = 0; c < ncases && c < MAX_IO; c++) {
      for (int e = 0; e < 2; e++) {
        size_t nvals = 0;
        if (pyexec_program_test_value_count(prog, s, c, e, &nvals) != PYEXEC_OK) continue;
        for (size_t k = 0; k <= nvals && k < MAX_IO; k++) {
          pyexec_test_value v;
          pyexec_status st = pyexec_program_test_value(prog, s, c, e, k, &v);
          check((st == PYEXEC_OK) == (k < nvals));
          if (st != PYEXEC_OK || v.kind != PYEXEC_VALUE_TENSOR) {
            check(st != PYEXEC_OK || v.kind == PYEXEC_VALUE_INT || v.kind == PYEXEC_VALUE_DOUBLE ||
                  v.kind == PYEXEC_VALUE_BOOL);
            continue;
          }
          check(v.dim >= 0 && v.dim <= PYEXEC_MAX_DIM);
          uint64_t numel = 1;
          for (int d = 0; d < v.dim; d++) {
            check(v.sizes[d] >= 0 && v.dim_order[d] < v.dim);
            numel *= (uint64_t)v.sizes[d];
          }
          check(numel * pyexec_dtype_size(v.dtype) == v.nbytes);
          const volatile uint8_t *p = v.data;
          uint8_t acc = 0;
          for (size_t b = 0; b < v.nbytes; b++) acc ^= p[b];
          (void)acc;
        }
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *pte, *ptd;
  size_t pte_size, ptd_size;
  split_pair(data, size, &pte, &pte_size, &ptd, &ptd_size);
  /* An exact-size copy: malloc's alignment (16) satisfies load_borrowed. */
  uint8_t *copy = malloc(pte_size ? pte_size : 1);
  if (!copy) return 0;
  if (pte_size) memcpy(copy, pte, pte_size);
  pyexec_program *prog;
  if (pyexec_program_load_borrowed(copy, pte_size, &prog) == PYEXEC_OK) {
    if (ptd) {
      /* Exact size too, so that the library's checks, not the slack of a
       * larger block, stop a read past the file. */
      uint8_t *data_copy = malloc(ptd_size ? ptd_size : 1);
      if (data_copy) {
        if (ptd_size) memcpy(data_copy, ptd, ptd_size);
        pyexec_status st = pyexec_program_attach_data_buffer(prog, data_copy, ptd_size);
        free(data_copy); /* the library keeps its own copy */
        /* one data file per program: a second attach is always refused */
        if (st == PYEXEC_OK)
          check(pyexec_program_attach_data_buffer(prog, ptd, ptd_size) == PYEXEC_ERR_INVALID_ARGUMENT);
      }
    }
    read_test_sets(prog);
    size_t n = pyexec_program_method_count(prog);
    check(pyexec_program_method_name(prog, n) == NULL);
    for (size_t i = 0; i < n && i < MAX_METHODS; i++) {
      const char *name = pyexec_program_method_name(prog, i);
      check(name != NULL);
      run_method(prog, name, (uint32_t)size);
    }
    pyexec_program_free(prog);
  }
  free(copy);
  return 0;
}
