# sanitize.mk - sanitizer and fuzzing builds of libpyexec (included by the
# Makefile; every target here builds with clang into its own directory,
# build/asan or build/fuzz, and leaves the regular build alone).
#
#   make asan        build/asan/libpyexec.so and the C tests (the kernel
#                    tests linked with the ASan objects), with
#                    AddressSanitizer + UndefinedBehaviorSanitizer
#   make asan-test   the C tests under ASan+UBSan, leak detection on
#   make fuzz        build/fuzz/fuzz_program: a libFuzzer harness over program
#                    load + method load + execute, linked from the ASan
#                    objects (they carry libFuzzer's coverage instrumentation)
#   make fuzz-run    FUZZ_TIME seconds of fuzzing from the seed corpus
#                    (tests/data/ with regress/, fuzz/seeds/, and
#                    $(FUZZ_BUILD)/seeds from scripts/make_fuzz_seeds.py);
#                    new corpus entries go to build/fuzz/corpus, crashes to
#                    build/fuzz/crashes
#   make fuzz-regress  runs every input in tests/data/regress/ through the
#                    harness once (no fuzzing)
#
# A Python process using the ASan library needs the ASan runtime preloaded:
#   LD_PRELOAD=$(make -s -C native asan-runtime) ASAN_OPTIONS=detect_leaks=0 \
#   PYEXEC_LIBRARY=native/build/asan/libpyexec.so pytest tests

SAN_CC ?= clang
ASAN_BUILD ?= build/asan
FUZZ_BUILD ?= build/fuzz
FUZZ_TIME ?= 150
FUZZ_FLAGS ?=

SAN_SRCS := $(shell find src -name '*.c' | LC_ALL=C sort)
SAN_WARN := -Wall -Wextra -Werror
SAN_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# One set of objects for the ASan library, the ASan C tests and the fuzzer:
# libFuzzer's coverage instrumentation (fuzzer-no-link) is in every object
# (outside the fuzzer nothing reads it), and the harness lowers the size
# and instruction bounds at run time (core/limits.h). Line tables are all
# the sanitizers' reports need. Buffers under 256 MiB come from the
# allocator (not mmap, as from 1 MiB in the regular build), so ASan knows
# their bounds; larger ones only come from sizes a malformed file declares
# (no test program has one), and are mapped as in the regular build rather
# than allocated and cleared page by page.
SAN_CFLAGS := -std=c11 -D_GNU_SOURCE -DPYEXEC_BUILD -fPIC -fvisibility=hidden $(SAN_WARN) -Iinclude -Isrc \
	-O1 -gline-tables-only $(SAN_SANITIZE) -fsanitize=fuzzer-no-link '-DPX_MMAP_THRESHOLD=((size_t)1 << 28)'

# Where the shared ASan runtime lives (deferred: only asks clang when used).
SAN_RTDIR = $(dir $(shell $(SAN_CC) -print-file-name=libclang_rt.asan-x86_64.so))

ASAN_OBJS := $(patsubst src/%.c,$(ASAN_BUILD)/obj/%.o,$(SAN_SRCS))
ASAN_LIB := $(ASAN_BUILD)/libpyexec.so
ASAN_TESTS := $(patsubst tests/%.c,$(ASAN_BUILD)/tests/%,$(wildcard tests/*.c))
# The kernel tests (tests/internal/) link the ASan objects themselves.
ASAN_INTERNAL_TESTS := $(patsubst tests/%.c,$(ASAN_BUILD)/tests/%,$(wildcard tests/internal/*.c))

FUZZ_BIN := $(FUZZ_BUILD)/fuzz_program
# The seed corpus: the fixtures and committed regression inputs (libFuzzer
# reads directories recursively), a few small committed programs (fuzz/seeds:
# constants in segments, dynamic shapes, integer ops), and the files
# scripts/make_fuzz_seeds.py exports into $(FUZZ_BUILD)/seeds (under build/,
# so never committed).
FUZZ_SEED_DIRS := tests/data fuzz/seeds $(wildcard $(FUZZ_BUILD)/seeds)
# Each input may allocate at most this much (the harness skips larger
# inputs/outputs itself), and the process may not grow past the RSS limit.
FUZZ_RUN_FLAGS := -rss_limit_mb=3072 -malloc_limit_mb=2048 -timeout=30 -max_len=1048576 \
	-print_final_stats=1

.PHONY: asan asan-test asan-runtime fuzz fuzz-run fuzz-regress san-force

# Objects are rebuilt when their flags change (make itself tracks only files).
$(ASAN_BUILD)/flags: san-force
	@mkdir -p $(dir $@)
	@echo '$(SAN_CC) $(subst ',,$(SAN_CFLAGS))' > $@.new
	@cmp -s $@.new $@ && rm $@.new || mv $@.new $@

# The ASan runtime a Python process must preload to load the ASan library.
asan-runtime:
	@$(SAN_CC) -print-file-name=libclang_rt.asan-x86_64.so

# The header beside the library: pyexec's loader takes $$PYEXEC_LIBRARY with
# the pyexec.h next to it.
asan: $(ASAN_LIB) $(ASAN_BUILD)/pyexec.h $(ASAN_TESTS) $(ASAN_INTERNAL_TESTS)

$(ASAN_BUILD)/pyexec.h: include/pyexec.h
	@mkdir -p $(dir $@)
	cp $< $@

$(ASAN_BUILD)/obj/%.o: src/%.c $(ASAN_BUILD)/flags
	@mkdir -p $(dir $@)
	$(SAN_CC) $(SAN_CFLAGS) $(SAN_FILE_FLAGS) -MMD -MP -c $< -o $@

# The int8 GEMM micro-kernels (dozens of unrolled, always-inlined tile
# bodies) without UBSan's pointer-overflow check: it puts a check on every
# step of their pointer arithmetic, and took clang 43 of this build's 134 s
# (the file alone, 20 s without it), the longest single job of the build.
# ASan still checks every load and store they make, and every other UBSan
# check stays on; the check stays on everywhere else, the loader's offset
# arithmetic included.
$(ASAN_BUILD)/obj/kernels/gemm/qgemm_x86.o: SAN_FILE_FLAGS := -fno-sanitize=pointer-overflow

# -shared-libsan: the library links the shared ASan runtime, so -z defs holds
# and a process that preloads that runtime can dlopen the library.
$(ASAN_LIB): $(ASAN_OBJS) pyexec.map
	$(SAN_CC) -shared -shared-libsan $(SAN_SANITIZE) -Wl,--version-script=pyexec.map -Wl,-z,defs \
		$(ASAN_OBJS) -o $@ -lm -lpthread

$(ASAN_BUILD)/tests/%: tests/%.c $(ASAN_LIB) include/pyexec.h
	@mkdir -p $(dir $@)
	$(SAN_CC) -std=c11 -D_GNU_SOURCE $(SAN_WARN) -pedantic -O1 -g $(SAN_SANITIZE) -shared-libsan -Iinclude $< \
		-L$(ASAN_BUILD) -Wl,-rpath,'$$ORIGIN/..' -lpyexec -Wl,-rpath,$(SAN_RTDIR) -o $@

$(ASAN_BUILD)/tests/internal/%: tests/internal/%.c tests/internal/check.h $(ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(SAN_CC) $(SAN_CFLAGS) $< $(ASAN_OBJS) -o $@ -lm -lpthread

# allocator_may_return_null: an allocation a malformed file declares too big
# for the machine returns NULL, as malloc does (the library reports it as
# PYEXEC_ERR_OUT_OF_MEMORY), instead of ASan aborting.
# Each test runs as a target of its own, side by side under `make -j`.
ASAN_RUNS := $(addsuffix .run,$(ASAN_TESTS) $(ASAN_INTERNAL_TESTS))
.PHONY: $(ASAN_RUNS)
asan-test: $(ASAN_RUNS)
$(ASAN_RUNS): %.run: % $(ASAN_BUILD)/pyexec.h
	@echo "== $< (ASan+UBSan, leak detection on)"; \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $< tests/data

$(FUZZ_BIN): fuzz/fuzz_program.c $(ASAN_OBJS) include/pyexec.h
	@mkdir -p $(dir $@)
	$(SAN_CC) -std=c11 -D_GNU_SOURCE $(SAN_WARN) -O1 -gline-tables-only $(SAN_SANITIZE) -fsanitize=fuzzer \
		-Iinclude -Isrc fuzz/fuzz_program.c $(ASAN_OBJS) -o $@ -lm -lpthread

fuzz: $(FUZZ_BIN)

fuzz-run: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/crashes
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	$(FUZZ_BIN) $(FUZZ_RUN_FLAGS) -max_total_time=$(FUZZ_TIME) \
		-artifact_prefix=$(FUZZ_BUILD)/crashes/ $(FUZZ_FLAGS) $(FUZZ_BUILD)/corpus $(FUZZ_SEED_DIRS)

fuzz-regress: $(FUZZ_BIN)
	@set -e; if ls tests/data/regress/* >/dev/null 2>&1; then \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
		$(FUZZ_BIN) $(FUZZ_RUN_FLAGS) tests/data/regress/*; fi

-include $(ASAN_OBJS:.o=.d)
