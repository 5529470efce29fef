#!/usr/bin/env bash
# Installs everything the tests need into .venv and runs every check once:
# the library in each flavour (regular, ASan+UBSan, ThreadSanitizer,
# libFuzzer) built once, lint (ruff, mypy, the layering of the C library and
# the package), the C tests once per flavour, the Python suite against the
# installed package, ExecuTorch's own XNNPACK and runtime tests with pyexec
# as the runtime (a fixed part; tests/support/et_suite.py gives the command
# for all of them), the Python tests that reach the library's input checks
# against the ASan library, the thread tests against the TSan library, and
# the fuzzer (regressions, then a short run). Run from anywhere:
#     bash scripts/test.sh
#
# The run stops at the first stage that fails, saying which, with every
# stage's time so far. It needs root or sudo for apt-get (clang, the aarch64
# cross compiler and qemu) unless those are installed.
# FUZZ_TIME (seconds, default 25) sets the length of the fuzzing run, which
# uses every core (libFuzzer's -fork).
set -uo pipefail
cd "$(dirname "$0")/.."

failed=()
timings=()
# Builds and the C tests (one test binary per job) use every core.
JOBS=$(nproc)
t_start=$SECONDS

run_stage() {  # run_stage NAME COMMAND...: times it; stops the run if it fails
  local name=$1 t0=$SECONDS rc
  shift
  printf '\n==== %s\n' "$name"
  "$@"
  rc=$?
  timings+=("$(printf '%5ds  %s' $((SECONDS - t0)) "$name")$([ $rc -eq 0 ] || echo "  FAILED (exit $rc)")")
  if [ $rc -ne 0 ]; then
    printf '\n!!!! FAILED: %s (exit %d)\n' "$name" "$rc" >&2
    failed+=("$name")
    summary
  fi
  return 0
}

# run_together NAME1 COMMAND1 NAME2 COMMAND2: two stages that each keep one
# core busy (the other idle) run side by side; each one's output is printed
# when both are done, then the run stops if either failed. COMMANDs are
# single words (functions or programs).
run_together() {
  local names=("$1" "$3") cmds=("$2" "$4") logs=() pids=() t0=() rc i
  for i in 0 1; do
    logs[i]=$(mktemp)
    t0[i]=$SECONDS
    ( "${cmds[i]}" >"${logs[i]}" 2>&1; echo $? >"${logs[i]}.rc"; echo $SECONDS >"${logs[i]}.end" ) &
    pids[i]=$!
  done
  wait "${pids[@]}"
  for i in 0 1; do
    rc=$(cat "${logs[i]}.rc")
    printf '\n==== %s (beside: %s)\n' "${names[i]}" "${names[1 - i]}"
    cat "${logs[i]}"
    timings+=("$(printf '%5ds  %s' $(($(cat "${logs[i]}.end") - t0[i])) "${names[i]}")$([ "$rc" -eq 0 ] || echo "  FAILED (exit $rc)")")
    if [ "$rc" -ne 0 ]; then
      printf '\n!!!! FAILED: %s (exit %d)\n' "${names[i]}" "$rc" >&2
      failed+=("${names[i]}")
    fi
    rm -f "${logs[i]}" "${logs[i]}.rc" "${logs[i]}.end"
  done
  [ ${#failed[@]} -eq 0 ] || summary
  return 0
}

summary() {
  printf '\n==== stage times\n'
  printf '%s\n' "${timings[@]}"
  printf '%5ds  total\n' $((SECONDS - t_start))
  if [ ${#failed[@]} -gt 0 ]; then
    printf '\n!!!! %d stage(s) failed:\n' "${#failed[@]}" >&2
    printf '  %s\n' "${failed[@]}" >&2
    exit 1
  fi
  printf '\nall stages passed\n'
}


# --no-compile: pip would byte-compile every module of torch, ray and the
# rest (about 40 s here); Python compiles the ones the tests import when
# they are first imported instead.
setup_python() {
  python3 -m venv .venv && . .venv/bin/activate &&
    python -m pip install -q --upgrade pip &&
    python -m pip install -q --no-compile -r requirements-test.txt &&
    # optimum-executorch (its tests compare its model classes on pyexec and on
    # ExecuTorch) pins a transformers of its own: a second venv over this one.
    bash scripts/setup_optimum_venv.sh "$PWD/.venv" "$PWD/.venv-optimum" >/dev/null
}

setup_clang() {  # clang and compiler-rt (sanitizer and libFuzzer runtimes), from Debian
  command -v clang >/dev/null 2>&1 && [ -f "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a)" ] && return 0
  local sudo
  sudo=$([ "$(id -u)" -eq 0 ] || echo sudo)
  $sudo apt-get update -qq &&
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang || return 1
  # bookworm's clang 14 keeps compiler-rt in libclang-rt-14-dev; older releases in libclang-common.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev" || true
}

# aarch64: the cross toolchain, its libc and qemu-user, from Debian; then
# the library cross-built into native/build/aarch64/, the C tests plus the
# model fixtures (tests/data/models) run under qemu, and the aarch64 wheel
# built (the wheel tests check it).
setup_cross() {
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1 &&
    [ -f /usr/aarch64-linux-gnu/lib/libc.so.6 ] && return 0
  local sudo
  sudo=$([ "$(id -u)" -eq 0 ] || echo sudo)
  $sudo apt-get update -qq &&
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-aarch64-linux-gnu qemu-user libc6-dev-arm64-cross
}

aarch64_emulated() {
  setup_cross &&
    make -s -C native -j"$JOBS" CROSS=aarch64-linux-gnu- all &&
    make -s -C native -j"$JOBS" -O CROSS=aarch64-linux-gnu- test &&
    # the fixtures again with the portable GEMM kernel in place of the NEON one
    PYEXEC_GEMM_ISA=portable qemu-aarch64 -L /usr/aarch64-linux-gnu native/build/aarch64/tests/run_fixtures native/tests/data &&
    bash scripts/build_wheel.sh --cross aarch64-linux-gnu- "$WHEELS" >/dev/null
}

# The layering check reads the regular build's object files (which object
# defines the symbols another uses), so lint runs after that build (beside
# the package's install, which builds the wheel's library on its own).
lint() { ruff check . && mypy && python scripts/check_layers.py; }

# The wheels, each built once here (scripts/build_wheel.sh, from a clean
# copy of the checkout) and handed to the wheel tests (PYEXEC_TEST_WHEELS),
# which would otherwise build them again.
WHEELS=$PWD/build/test-wheels
rm -rf "$WHEELS"

# The package as a user gets it: the wheel (its library from `make dist`)
# built and installed; the tests import the installed package.
install_package() {
  local wheel
  wheel=$(bash scripts/build_wheel.sh "$WHEELS") && python -m pip install -q --no-deps --force-reinstall "$wheel"
}

# Both Python runs use every core (pytest-xdist), one test file per worker at
# a time so that a file's module fixtures are made once.
PYTEST=(pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-auto}" --dist loadfile --durations=10)

pytest_regular() {
  # pytest (not `python -m pytest`): the tests import the installed package.
  # The tests marked extended (Ray clusters, optimum-cli exports, whole LLM
  # families: about 12 minutes of one core) run apart: pytest -m extended tests
  PYEXEC_TEST_WHEELS="$WHEELS" "${PYTEST[@]}" -m "not extended" tests
}

# The Python suite against the ASan library (native/build/asan): the source
# tree's pyexec (no bundled library) finds it through PYEXEC_LIBRARY; the ASan
# runtime is preloaded into Python; leak detection is off there (CPython leaks
# by design; the C tests and the fuzzer check leaks); any ASan or UBSan report
# aborts the test process. test_wheel and test_examples are left out: they
# build wheels, venvs and example programs with other toolchains (rustc
# crashes with the ASan runtime preloaded) and never load the ASan library.
# test_ray is left out too: Ray's own daemons (raylet, gcs_server) would run
# with the ASan runtime preloaded, and the library calls it makes (load from
# bytes, execute) are the ones the rest of the suite checks under ASan.
# Under ASan: the tests that feed the library malformed or unusual input
# (hostile programs, bundles, payloads and data files, binding and lifetime rules,
# threads, the API's argument checks), the fused inverted-residual blocks
# (ring buffers of rows, indexed by hand) and the operator tests; the whole
# suite's numerics already ran against the regular library above. The CLI's
# tests are left out: the CLI is Python over the same calls, and each of
# its tests starts interpreters (half this stage's time under ASan).
ASAN_TESTS=(tests/unit/test_errors.py tests/unit/test_hostile.py tests/unit/test_hostile_bundled.py tests/unit/test_library.py
  tests/unit/test_threads_leaks.py tests/unit/test_threads_pool.py
  tests/delegates/test_xnnpack_hostile.py tests/delegates/test_xnnpack_args.py tests/delegates/test_xnnpack_blocks.py
  tests/integration/test_binding.py tests/integration/test_lifetime.py tests/integration/test_external_data.py
  tests/integration/test_layout.py tests/integration/test_state.py tests/integration/test_control_flow.py
  tests/integration/test_program.py tests/ops)

pytest_asan() {
  local asan_env=(env PYTHONPATH="$PWD" PYEXEC_LIBRARY="$PWD/native/build/asan/libpyexec.so"
    LD_PRELOAD="$(make -s -C native asan-runtime)" ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
  "${asan_env[@]}" python -c "import pyexec, sys
sys.exit(0 if 'native/build/asan/libpyexec.so' in open('/proc/self/maps').read() else 'the ASan library is not the one loaded')" &&
    "${asan_env[@]}" "${PYTEST[@]}" "${ASAN_TESTS[@]}"
}

# The thread tests against the ThreadSanitizer library (native/build/tsan,
# gcc): Methods from many Python threads while the count changes, one Method
# shared by threads, fork after a parallel run (the API and environment
# tests are left to the other runs). Any race report fails the test's
# subprocess.
pytest_tsan() {
  local tsan_env=(env PYTHONPATH="$PWD" PYEXEC_LIBRARY="$PWD/native/build/tsan/libpyexec.so"
    LD_PRELOAD="$(make -s -C native tsan-runtime)" TSAN_OPTIONS=halt_on_error=1:die_after_fork=0)
  "${tsan_env[@]}" python -c "import pyexec, sys
sys.exit(0 if 'native/build/tsan/libpyexec.so' in open('/proc/self/maps').read() else 'the TSan library is not the one loaded')" &&
    "${tsan_env[@]}" pytest -q -p no:cacheprovider tests/unit/test_threads_pool.py -k "share or shared or fork"
}

# libFuzzer over load + method load + execute: every committed crash input
# once, then a bounded run from the seed corpus (fixtures, native/fuzz/seeds,
# and programs exported by scripts/make_fuzz_seeds.py), one fuzzing job per
# core; the first crash, leak or sanitizer report stops it and fails.
fuzz_seeds() { python scripts/make_fuzz_seeds.py; }
fuzz_run() { make -C native fuzz-run FUZZ_TIME="${FUZZ_TIME:-25}" FUZZ_FLAGS="-seed=1 -fork=$JOBS"; }

# ExecuTorch's shipped XNNPACK operator tests and runtime tests, pyexec in
# place of its runtime (tests/support/et_suite.py): the fixed part named
# there; `pytest -p support.et_suite $(python tests/support/et_suite.py all)`
# runs every one.
executorch_suite() {
  local args
  args=$(python tests/support/et_suite.py ci) &&
    "${PYTEST[@]}" -p support.et_suite $args
}

# The C library in every flavour needs the compilers but not the venv, so it
# builds while pip installs the test requirements (mostly downloading and
# unpacking, which leaves the cores half idle).
build_native() {
  setup_clang && setup_cross &&
    make -s -C native -j"$JOBS" all && make -s -C native -j"$JOBS" asan &&
    make -s -C native -j"$JOBS" tsan && make -s -C native -j"$JOBS" fuzz
}

run_together "setup: venv and test requirements" setup_python \
  "build: clang, the aarch64 cross compiler and qemu; the library regular, with ASan+UBSan and TSan, and the fuzz harness" \
  build_native
. .venv/bin/activate
run_together "lint: ruff, mypy, layering" lint "build: install the package (wheel library)" install_package
run_stage "C tests" make -C native -j"$JOBS" -O test
run_stage "C tests under ASan+UBSan" make -C native -j"$JOBS" -O asan-test
run_stage "C tests under ThreadSanitizer" make -C native -j"$JOBS" -O tsan-test
run_stage "aarch64: cross build, C tests and model fixtures under qemu" aarch64_emulated
run_stage "fuzz: committed regression inputs" make -C native fuzz-regress
run_stage "pytest" pytest_regular
run_stage "ExecuTorch's XNNPACK and runtime tests with pyexec as the runtime" executorch_suite
run_stage "pytest against the ASan library (input checks)" pytest_asan
run_together "thread tests against the TSan library" pytest_tsan "fuzz: the seed programs" fuzz_seeds
run_stage "fuzz: ${FUZZ_TIME:-25} s on $JOBS cores from the seed corpus" fuzz_run
summary
