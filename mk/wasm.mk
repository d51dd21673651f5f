# SPDX-License-Identifier: MIT
# WebAssembly runtime: the spec-test runner, its check target (converts the
# spec .wast files with wabt's wast2json and runs every command), the fuzzer.

WASM_SPEC_DIR ?= ../shared/testdata/wasm-spec
WAST2JSON ?= wast2json
SPECTEST := $(BUILD)/kis-wasm-spectest
SPECTEST_SRCS := $(wildcard src/wasm/spectest/*.c)
SPECTEST_OBJS := $(SPECTEST_SRCS:%.c=$(BUILD)/obj/%.o)
WASM_KNOWN_FAILURES := tests/wasm/known-failures.txt

BINS += $(SPECTEST)
CHECK_TARGETS += check-wasm

$(SPECTEST): $(SPECTEST_OBJS) $(STATIC_LIB)
	$(CC) -pie $(HARD_LDFLAGS) -o $@ $(SPECTEST_OBJS) $(STATIC_LIB) $(PKG_LIBS)

# Every non-SIMD spec file; SIMD (simd_*.wast) is not implemented yet.
WASM_SPEC_FILES = $(filter-out $(WASM_SPEC_DIR)/simd_%,$(wildcard $(WASM_SPEC_DIR)/*.wast))

.PHONY: check-wasm wasm-spec-json fuzz-wasm
wasm-spec-json:
	@test -d $(WASM_SPEC_DIR) || { echo "check-wasm: no spec tests in $(WASM_SPEC_DIR)"; exit 1; }
	@command -v $(WAST2JSON) >/dev/null || { echo "check-wasm: $(WAST2JSON) not installed (apt install wabt)"; exit 1; }
	@mkdir -p $(BUILD)/spectest
	@set -e; for f in $(WASM_SPEC_FILES); do \
	  b=$$(basename $$f .wast); \
	  if [ ! -f $(BUILD)/spectest/$$b.json ] || [ $$f -nt $(BUILD)/spectest/$$b.json ]; then \
	    $(WAST2JSON) $$f -o $(BUILD)/spectest/$$b.json; \
	  fi; \
	done

check-wasm: $(SPECTEST) wasm-spec-json
	$(SPECTEST) --known-failures $(WASM_KNOWN_FAILURES) $(BUILD)/spectest/*.json
