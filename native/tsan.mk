# tsan.mk - a ThreadSanitizer build of libpyexec and its C tests (included by
# the Makefile), with gcc into build/tsan, apart from the other builds.
#
#   make tsan          build/tsan/libpyexec.so (+ pyexec.h beside it), the
#                      public-API C tests and the kernel tests (linked with
#                      the TSan objects), all -fsanitize=thread
#   make tsan-test     runs them; any data race report fails the run
#   make tsan-runtime  prints the TSan runtime a Python process must preload
#                      to load the TSan library:
#     LD_PRELOAD=$(make -s -C native tsan-runtime) \
#     PYEXEC_LIBRARY=native/build/tsan/libpyexec.so pytest tests/unit/test_threads_pool.py
#
# die_after_fork=0: the tests fork after the pool has run (the child makes a
# new pool); TSan refuses threads after a multi-threaded fork unless told.

TSAN_CC ?= gcc
TSAN_BUILD ?= build/tsan
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
TSAN_CFLAGS := -std=c11 -D_GNU_SOURCE -DPYEXEC_BUILD -fPIC -fvisibility=hidden -Wall -Wextra -Werror \
	-Iinclude -Isrc -O1 -g $(TSAN_FLAGS)
TSAN_OPTIONS_RUN := halt_on_error=1:die_after_fork=0:second_deadlock_stack=1

TSAN_SRCS := $(shell find src -name '*.c' | LC_ALL=C sort)
TSAN_OBJS := $(patsubst src/%.c,$(TSAN_BUILD)/obj/%.o,$(TSAN_SRCS))
TSAN_LIB := $(TSAN_BUILD)/libpyexec.so
TSAN_TESTS := $(patsubst tests/%.c,$(TSAN_BUILD)/tests/%,$(wildcard tests/*.c))
TSAN_INTERNAL_TESTS := $(patsubst tests/%.c,$(TSAN_BUILD)/tests/%,$(wildcard tests/internal/*.c))

.PHONY: tsan tsan-test tsan-runtime

# Objects are rebuilt when their flags change.
$(TSAN_BUILD)/flags: san-force
	@mkdir -p $(dir $@)
	@echo '$(TSAN_CC) $(TSAN_CFLAGS)' > $@.new
	@cmp -s $@.new $@ && rm $@.new || mv $@.new $@

tsan-runtime:
	@$(TSAN_CC) -print-file-name=libtsan.so

tsan: $(TSAN_LIB) $(TSAN_BUILD)/pyexec.h $(TSAN_TESTS) $(TSAN_INTERNAL_TESTS)

$(TSAN_BUILD)/pyexec.h: include/pyexec.h
	@mkdir -p $(dir $@)
	cp $< $@

$(TSAN_BUILD)/obj/%.o: src/%.c $(TSAN_BUILD)/flags
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(TSAN_CFLAGS) -MMD -MP -c $< -o $@

$(TSAN_LIB): $(TSAN_OBJS) pyexec.map
	$(TSAN_CC) -shared $(TSAN_FLAGS) -Wl,--version-script=pyexec.map -Wl,-z,defs $(TSAN_OBJS) -o $@ -lm -lpthread

$(TSAN_BUILD)/tests/%: tests/%.c $(TSAN_LIB) include/pyexec.h
	@mkdir -p $(dir $@)
	$(TSAN_CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pedantic -O1 -g $(TSAN_FLAGS) -Iinclude $< \
		-L$(TSAN_BUILD) -Wl,-rpath,'$$ORIGIN/..' -lpyexec -o $@

$(TSAN_BUILD)/tests/internal/%: tests/internal/%.c tests/internal/check.h $(TSAN_OBJS)
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(TSAN_CFLAGS) $< $(TSAN_OBJS) -o $@ -lm -lpthread

# Each test runs as a target of its own, side by side under `make -j`.
TSAN_RUNS := $(addsuffix .run,$(TSAN_TESTS) $(TSAN_INTERNAL_TESTS))
.PHONY: $(TSAN_RUNS)
tsan-test: $(TSAN_RUNS)
$(TSAN_RUNS): %.run: % $(TSAN_BUILD)/pyexec.h
	@echo "== $< (ThreadSanitizer)"; TSAN_OPTIONS=$(TSAN_OPTIONS_RUN) $< tests/data

-include $(TSAN_OBJS:.o=.d)
