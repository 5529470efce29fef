#!/usr/bin/env bash
# Installs everything the tests need into .venv, builds the library, and runs
# the C tests, the linters and the Python test suite. Run from anywhere:
#     bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -r requirements-test.txt

make -C native -j2
make -C native test
python -m pip install -q --no-deps --force-reinstall .

ruff check .
mypy
# pytest (not `python -m pytest`): the tests import the installed package.
pytest -q -p no:cacheprovider tests

# ---- Reliability: sanitizers and fuzzing (clang: ASan + UBSan, libFuzzer) ----
# clang and compiler-rt (the sanitizer and libFuzzer runtimes), from Debian.
if ! command -v clang >/dev/null 2>&1 || [ ! -f "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a)" ]; then
  SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang
  # bookworm's clang 14 keeps compiler-rt in libclang-rt-14-dev; older releases in libclang-common.
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev" || true
fi

# The C tests under ASan + UBSan, leak detection on.
make -C native -j2 asan
make -C native asan-test

# The Python suite against the ASan library (native/build/asan): the source
# tree's pyexec (no bundled library) finds it through PYEXEC_LIBRARY; the ASan
# runtime is preloaded into Python; leak detection is off there (CPython leaks
# by design; the C tests and the fuzzer check leaks); any ASan or UBSan report
# aborts the test process. test_wheel and test_examples are left out: they
# build wheels, venvs and example programs with other toolchains (rustc
# crashes with the ASan runtime preloaded) and never load the ASan library.
asan_env=(env PYTHONPATH="$PWD" PYEXEC_LIBRARY="$PWD/native/build/asan/libpyexec.so"
  LD_PRELOAD="$(make -s -C native asan-runtime)" ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
"${asan_env[@]}" python -c "import pyexec, sys
sys.exit(0 if 'native/build/asan/libpyexec.so' in open('/proc/self/maps').read() else 'the ASan library is not the one loaded')"
"${asan_env[@]}" pytest -q -p no:cacheprovider tests --ignore=tests/test_wheel.py --ignore=tests/test_examples.py

# libFuzzer over load + method load + execute: every committed crash input
# once, then a bounded run from the seed corpus (fixtures, native/fuzz/seeds,
# and programs exported by scripts/make_fuzz_seeds.py).
make -C native -j2 fuzz
make -C native fuzz-regress
python scripts/make_fuzz_seeds.py
make -C native fuzz-run FUZZ_TIME=150 FUZZ_FLAGS=-seed=1
