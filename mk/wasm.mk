# SPDX-License-Identifier: MIT
# WebAssembly runtime: the spec-test runner, its check target (converts the
# spec .wast files with wabt's wast2json and runs every command), the fuzzer.

WASM_SPEC_DIR ?= ../shared/testdata/wasm-spec
WAST2JSON ?= wast2json
SPECTEST := $(BUILD)/kis-wasm-spectest
SPECTEST_SRCS := $(wildcard src/wasm/spectest/*.c)
SPECTEST_OBJS := $(SPECTEST_SRCS:%.c=$(BUILD)/obj/%.o)
WASM_KNOWN_FAILURES := tests/wasm/known-failures.txt

# Not in BINS: test and bench tools are built by their targets, never installed.
CHECK_TARGETS += check-wasm

$(SPECTEST): $(SPECTEST_OBJS) $(STATIC_LIB) | $(JIT_PLUGIN)
	@echo "  LD      $@"
	$(Q)$(CC) -pie $(HARD_LDFLAGS) -o $@ $(SPECTEST_OBJS) $(STATIC_LIB) $(PKG_LIBS)

# Every spec file (SIMD's simd_*.wast included), and our own regression
# scripts in tests/wasm/.
WASM_SPEC_FILES = $(wildcard $(WASM_SPEC_DIR)/*.wast) $(wildcard tests/wasm/*.wast)

.PHONY: check-wasm wasm-spec-json fuzz-wasm
# Convert the scripts that changed since their last conversion.
wasm-spec-json:
	@mkdir -p $(BUILD)/spectest
	@set -e; for f in $(WASM_SPEC_FILES); do \
	  b=$$(basename $$f .wast); \
	  if [ ! -f $(BUILD)/spectest/$$b.json ] || [ $$f -nt $(BUILD)/spectest/$$b.json ]; then \
	    $(WAST2JSON) $$f -o $(BUILD)/spectest/$$b.json; \
	  fi; \
	done

# Every script runs five times: interpreted, then compiled (src/wasm/jit_llvm.c,
# kis-wasm-spectest --engine compiler) on a cold code cache, then linked
# from that cache by our own loader (src/wasm/jit_elf.c; --expect-cached
# fails a module that was compiled again), then compiled at tier-up's fast
# tier (--tier fast, src/wasm/jit.h), then at its mixed tier (--tier mixed:
# every other function optimised, the rest fast), with the same known failures.
# Without wabt or the spec tests this is a skip that says why, as for any
# test that needs a package.
check-wasm: $(SPECTEST)
	@if [ ! -d $(WASM_SPEC_DIR) ]; then \
	  echo "check-wasm: skipped: no spec tests in $(WASM_SPEC_DIR)"; \
	elif ! command -v $(WAST2JSON) >/dev/null; then \
	  echo "check-wasm: skipped: $(WAST2JSON) not installed (Debian package wabt)"; \
	else \
	  $(MAKE) --no-print-directory wasm-spec-json && \
	  $(SPECTEST) --known-failures $(WASM_KNOWN_FAILURES) $(BUILD)/spectest/*.json && \
	  echo "check-wasm: the same scripts compiled (--engine compiler), cold code cache" && \
	  rm -rf $(BUILD)/spectest-code && mkdir -m 0700 $(BUILD)/spectest-code && \
	  $(SPECTEST) --engine compiler --code-cache $(BUILD)/spectest-code \
	    --known-failures $(WASM_KNOWN_FAILURES) $(BUILD)/spectest/*.json && \
	  echo "check-wasm: the same scripts linked from the code cache" && \
	  $(SPECTEST) --engine compiler --code-cache $(BUILD)/spectest-code --expect-cached \
	    --known-failures $(WASM_KNOWN_FAILURES) $(BUILD)/spectest/*.json && \
	  echo "check-wasm: the same scripts compiled at tier-up's fast tier (--tier fast)" && \
	  $(SPECTEST) --engine compiler --tier fast \
	    --known-failures $(WASM_KNOWN_FAILURES) $(BUILD)/spectest/*.json && \
	  echo "check-wasm: the same scripts compiled at tier-up's mixed tier (--tier mixed)" && \
	  $(SPECTEST) --engine compiler --tier mixed \
	    --known-failures $(WASM_KNOWN_FAILURES) $(BUILD)/spectest/*.json; \
	fi

# libFuzzer over decode + validate + instantiate + run (clang only). The
# corpus starts from the spec tests' binary modules; FUZZ_SECONDS bounds it.
FUZZ_SECONDS ?= 180
WASM_FUZZ := $(BUILD)/fuzz/fuzz-wasm
WASM_FUZZ_FLAGS := -std=gnu11 -D_GNU_SOURCE -g -Iinclude -Isrc \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
# What every fuzz target links of the runtime: src/wasm but exec.c (built
# at -O0 below, once per sanitizer set), the compiler's LLVM half and the
# CLI's remote compiler (a fuzz target loads the plugin, if at all, itself).
WASM_FUZZ_RT_SRCS := $(filter-out src/wasm/exec.c $(wildcard src/wasm/jit_llvm*.c) src/wasm/jit_remote.c,$(wildcard src/wasm/*.c)) src/core/error.c src/core/io.c
# (core/io.c: the program's own directory, for the plugin's candidates;
# it brings jansson, which the links below name)
# exec.c at -O0: clang's optimiser needs many minutes for its ~800 handlers
# under coverage instrumentation; -O0 builds in seconds and still checks.
$(BUILD)/fuzz/exec.o: src/wasm/exec.c $(wildcard src/wasm/*.h)
	@mkdir -p $(dir $@)
	clang $(WASM_FUZZ_FLAGS) -O0 -c $< -o $@
$(WASM_FUZZ): tests/wasm/fuzz_wasm.c $(WASM_FUZZ_RT_SRCS) $(BUILD)/fuzz/exec.o $(wildcard src/wasm/*.h) tests/wasm/fuzz_imports.h
	@mkdir -p $(dir $@)
	clang $(WASM_FUZZ_FLAGS) -fsanitize=fuzzer -O1 -o $@ tests/wasm/fuzz_wasm.c $(WASM_FUZZ_RT_SRCS) $(BUILD)/fuzz/exec.o -ljansson -ldl

# The differential test as a fuzz target: each input module runs in both
# engines, whose traps, results and memory must agree (tests/wasm/
# fuzz_wasm_diff.c). No ASan: compiled code runs on a stack of its own
# (jit_rt.c), which ASan does not follow; UBSan watches the runtime. The
# compiler is the build's plugin (build/libkis-jit.so, found beside the
# binary's directory).
WASM_DIFF_FUZZ := $(BUILD)/fuzz/fuzz-wasm-diff
WASM_DIFF_FLAGS := -std=gnu11 -D_GNU_SOURCE -g -Iinclude -Isrc \
	-fsanitize=fuzzer-no-link,undefined -fno-sanitize-recover=all
$(BUILD)/fuzz/diff-exec.o: src/wasm/exec.c $(wildcard src/wasm/*.h)
	@mkdir -p $(dir $@)
	clang $(WASM_DIFF_FLAGS) -O0 -c $< -o $@
$(WASM_DIFF_FUZZ): tests/wasm/fuzz_wasm_diff.c $(BUILD)/fuzz/diff-exec.o tests/wasm/fuzz_imports.h $(wildcard src/wasm/*.c src/wasm/*.h) | $(JIT_PLUGIN)
	@mkdir -p $(dir $@)
	clang $(WASM_DIFF_FLAGS) -fsanitize=fuzzer -O1 -o $@ tests/wasm/fuzz_wasm_diff.c \
	  $(WASM_FUZZ_RT_SRCS) $(BUILD)/fuzz/diff-exec.o -ljansson -ldl -lm

.PHONY: fuzz-wasm-diff
fuzz-wasm-diff: $(WASM_DIFF_FUZZ)
	@$(MAKE) --no-print-directory wasm-spec-json
	@mkdir -p $(BUILD)/fuzz/diff-corpus
	cp -n $(BUILD)/spectest/*.wasm $(BUILD)/fuzz/diff-corpus/ 2>/dev/null || true
	$(WASM_DIFF_FUZZ) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=4096 \
	  -timeout=30 $(BUILD)/fuzz/diff-corpus

# Our linker of compiled code (src/wasm/jit_elf.c) as a fuzz target: what a
# planted cache file or a compiler process a module took over could hand
# the engine (tests/fuzz/fuzz_elf.c), under ASan and UBSan. The corpus
# starts from the objects LLVM made for a few spec scripts (a cache of
# their own, made here with the compiled engine).
WASM_ELF_FUZZ := $(BUILD)/fuzz/fuzz-wasm-elf
$(WASM_ELF_FUZZ): tests/fuzz/fuzz_elf.c $(BUILD)/fuzz/exec.o $(wildcard src/wasm/*.c src/wasm/*.h)
	@mkdir -p $(dir $@)
	clang $(WASM_FUZZ_FLAGS) -fsanitize=fuzzer -O1 -o $@ tests/fuzz/fuzz_elf.c \
	  $(WASM_FUZZ_RT_SRCS) $(BUILD)/fuzz/exec.o -ljansson -ldl -lm

.PHONY: fuzz-wasm-elf
fuzz-wasm-elf: $(WASM_ELF_FUZZ) $(SPECTEST) | $(JIT_PLUGIN)
	@$(MAKE) --no-print-directory wasm-spec-json
	@rm -rf $(BUILD)/fuzz/elf-code && mkdir -m 0700 -p $(BUILD)/fuzz/elf-code
	@for s in i32 i64 f32 f64 call_indirect memory br_table conversions; do \
	  [ -f $(BUILD)/spectest/$$s.json ] && $(SPECTEST) --engine compiler \
	    --code-cache $(BUILD)/fuzz/elf-code --known-failures $(WASM_KNOWN_FAILURES) \
	    $(BUILD)/spectest/$$s.json >/dev/null 2>&1 || true; \
	done
	/usr/bin/python3 tests/fuzz/elf_seeds.py $(BUILD)/fuzz/elf-code/cache/wasm-code $(BUILD)/fuzz/elf-corpus
	$(WASM_ELF_FUZZ) -max_total_time=$(FUZZ_SECONDS) -max_len=262144 -rss_limit_mb=4096 \
	  -timeout=10 $(BUILD)/fuzz/elf-corpus

# The small fuzz targets build and run for a moment in make check, from
# their seeds, so that none rots unseen (fuzz-proto once stopped linking
# and nothing noticed): FUZZ_SMOKE_SECONDS each. The long runs, and
# fuzz-wasm and fuzz-wasm-diff (thousands of seeds), stay by hand.
FUZZ_SMOKE_SECONDS ?= 10
CHECK_TARGETS += check-fuzz
.PHONY: check-fuzz
check-fuzz:
	@if ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | \
	    clang -x c -fsanitize=fuzzer,address,undefined -o $(BUILD)/fuzz-probe - 2>/dev/null; then \
	  echo "check-fuzz: skipped: clang cannot link libFuzzer with ASan here (Debian packages clang, libclang-rt-14-dev)"; \
	else \
	  rm -f $(BUILD)/fuzz-probe; \
	  $(MAKE) --no-print-directory FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) fuzz-proto fuzz-wasm-elf fuzz-oci-config fuzz-profile >$(BUILD)/check-fuzz.log 2>&1 || \
	    { tail -40 $(BUILD)/check-fuzz.log; echo "check-fuzz: FAILED (whole log: $(BUILD)/check-fuzz.log)"; exit 1; }; \
	  grep -E "^Done [0-9]+ runs" $(BUILD)/check-fuzz.log | sed 's/^/check-fuzz: /'; \
	fi

fuzz-wasm: $(WASM_FUZZ)
	@$(MAKE) --no-print-directory wasm-spec-json
	@mkdir -p $(BUILD)/fuzz/corpus
	cp -n $(BUILD)/spectest/*.wasm $(BUILD)/fuzz/corpus/ 2>/dev/null || true
	$(WASM_FUZZ) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=4096 \
	  -timeout=10 $(BUILD)/fuzz/corpus

# exec.c is one function of ~1000 threaded handlers. gcc factors their
# computed gotos into one jump and copies the dispatch back into a handler
# only when that takes at most max-goto-duplication-insns instructions
# (default 8): the taken paths of the branch handlers then shared one
# indirect jump, which predicts badly (loop_sum ran 1.36x slower after an
# unrelated handler was added). A larger bound gives every handler its own
# dispatch. gcc only; clang builds a switch (see exec.c).
ifeq ($(shell $(CC) -dM -E -x c /dev/null 2>/dev/null | grep -c __clang__),0)
$(BUILD)/obj/src/wasm/exec.o: ALL_CFLAGS += --param max-goto-duplication-insns=24
endif

# The compiler's plugin: jit_llvm.c with LLVM's headers, linked to
# libLLVM-14 (and to nothing of ours: it reaches the library through the
# table jit_load.c hands it). Where an installed kis finds it:
JIT_LLVM_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/wasm/jit_llvm*.c))
$(JIT_LLVM_OBJS): ALL_CFLAGS += $(LLVM_CFLAGS)
# (and, for the code cache's key, the LLVM it is built with)
JIT_LOAD_DEFS := -DKIS_JIT_PLUGIN='"$(PREFIX)/lib/kis/libkis-jit.so"' \
	-DKIS_LLVM_VERSION='"$(shell $(LLVM_CONFIG) --version 2>/dev/null)"'
$(BUILD)/obj/src/wasm/jit_load.o: ALL_CFLAGS += $(JIT_LOAD_DEFS)
$(BUILD)/asan/src/wasm/jit_load.o: BASE_CFLAGS += $(JIT_LOAD_DEFS)
$(JIT_PLUGIN): $(JIT_LLVM_OBJS)
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(HARD_LDFLAGS) -Wl,-z,defs -o $@ $^ $(LLVM_LIBS)

# Benchmark: kernels in bench/wasm/*.c run in our interpreter, in wabt's
# wasm-interp and natively (bench/wasm/bench.sh prints the table).
WASM_RUN := $(BUILD)/kis-wasm-run
$(WASM_RUN): $(BUILD)/obj/bench/wasm/run.o $(STATIC_LIB) | $(JIT_PLUGIN)
	@echo "  LD      $@"
	$(Q)$(CC) -pie $(HARD_LDFLAGS) -o $@ $< $(STATIC_LIB) $(PKG_LIBS)

# test_wasm_jit.py drives both engines through it (the edge and the
# differential tests): make check builds it rather than skip them.
check-integration: $(WASM_RUN)
test-build: $(WASM_RUN)

.PHONY: bench-wasm
bench-wasm: $(WASM_RUN)
	sh bench/wasm/bench.sh $(BUILD)

# Real programs (Lua 5.4, bzip2, SQLite's speedtest1 from Debian's sources)
# natively, in the wasm tier and in Node.js: bench/wasm-real.sh.
.PHONY: bench-wasm-real
bench-wasm-real: all
	sh bench/wasm-real.sh $(BUILD)

# The WASI preview 1 conformance suite alone (make check runs it with the
# rest of tests/integration), for the engines named: a compiler that the
# CLI refuses skips with its reason. make wasi-suite WASM_ENGINE=compiler
WASM_ENGINE ?= interpreter,compiler
.PHONY: wasi-suite
wasi-suite: all
	KIS_WASM_ENGINES=$(WASM_ENGINE) $(PYTHON) -m pytest -q -rs tests/integration/test_wasi_suite.py \
	  tests/integration/test_wasi_semantics.py

-include $(JIT_LLVM_OBJS:.o=.d)
