# SPDX-License-Identifier: MIT
# kis sandbox: build of the library (static and shared), the `kis` CLI, the
# unit tests (plain and under ASan+UBSan) and the behaviour tests.
# Components may add a fragment under mk/*.mk: it appends to BINS,
# CHECK_TARGETS and CLEAN_EXTRA (see the variables below).

.DEFAULT_GOAL := all
PREFIX   ?= /usr/local
VERSION  := 0.1.0
CC       ?= cc
BUILD    ?= build
PYTHON   ?= /usr/bin/python3
V        ?= 0
Q        := $(if $(filter 1,$(V)),,@)
PKGS     := jansson libseccomp

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# LLVM 14 (llvm-14-dev) for the WebAssembly compiler, a plugin of its own
# (libkis-jit.so, src/wasm/jit_llvm.c, loaded by jit_load.c when a store
# compiles): LLVM's headers for that file only (as system headers, out of
# our warnings), its library for the plugin only.
LLVM_CONFIG ?= llvm-config-14
LLVM_CFLAGS := $(patsubst -I%,-isystem %,$(filter -I%,$(shell $(LLVM_CONFIG) --cflags 2>/dev/null)))
LLVM_LIBS   := $(shell $(LLVM_CONFIG) --ldflags --libs 2>/dev/null) -lm -lpthread
PKG_LIBS    += -ldl -lm
# The CLI is static-pie: every run execs kis, and on this PVM guest the
# loader's mapping and relocation of libc cost ~2 ms of each exec
# (docs/performance.md). What needs the dynamic loader (the JIT plugin,
# libsubid and NSS) runs in kis-helper, a dynamic program (src/helper):
# the CLI links jit_remote.c and subid_remote.c in place of the library's
# jit_plugin.c and subid_lib.c (same functions; the archive's members are
# then never pulled in).
CLI_LIBS    := $(shell pkg-config --libs --static $(PKGS) 2>/dev/null) -lm
CLI_REMOTE_SRCS := src/wasm/jit_remote.c src/confine/subid_remote.c
CLI_REMOTE_OBJS := $(CLI_REMOTE_SRCS:%.c=$(BUILD)/obj/%.o)

WARN := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
        -Wformat=2 -Wformat-nonliteral -Wswitch-default -Wswitch-enum \
        -Wno-unused-parameter -Wpointer-arith -Wvla -Wundef -Wcast-align
HARDEN := -D_FORTIFY_SOURCE=3 -fstack-protector-strong -fstack-clash-protection \
          -fcf-protection -fno-strict-overflow -fno-delete-null-pointer-checks
CFLAGS  ?= -O2 -g
BASE_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) -fPIC -fvisibility=hidden -Iinclude -Isrc $(PKG_CFLAGS)
HARD_LDFLAGS := -Wl,-z,relro,-z,now -Wl,-z,noexecstack
ALL_CFLAGS := $(BASE_CFLAGS) $(HARDEN) $(CFLAGS)

# Library sources: every module directory except the CLI and the programs.
LIB_DIRS := src/core src/exec src/confine src/net src/store src/wasm src/agent src/backends src/backends/host src/backends/oci src/backends/microvm src/engine
LIB_SRCS := $(filter-out src/agent/main.c $(wildcard src/wasm/jit_llvm*.c) $(CLI_REMOTE_SRCS),$(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)))
CLI_SRCS := $(wildcard src/cli/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ASAN_LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/asan/%.o)
ASAN_UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/asan-tests/%)

STATIC_LIB := $(BUILD)/libkis-sandbox.a
SHARED_LIB := $(BUILD)/libkis-sandbox.so.0
JIT_PLUGIN := $(BUILD)/libkis-jit.so
KIS := $(BUILD)/kis

AGENT := $(BUILD)/kis-agent
HELPER := $(BUILD)/kis-helper
BINS := $(KIS) $(AGENT)
CHECK_TARGETS :=
CLEAN_EXTRA :=

.PHONY: fuzz-proto
# libFuzzer over the agent's frame decoder, its request parser and the
# engine's result parser (clang).
fuzz-proto:
	@mkdir -p $(BUILD)/fuzz
	clang -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
	  $(PKG_CFLAGS) -o $(BUILD)/fuzz/fuzz_frame tests/fuzz/fuzz_frame.c src/agent/proto.c \
	  src/agent/exec_json.c $(wildcard src/core/*.c) $(PKG_LIBS)
	/usr/bin/python3 tests/fuzz/frame_seeds.py $(BUILD)/fuzz/frame-corpus
	$(BUILD)/fuzz/fuzz_frame -max_total_time=$${FUZZ_SECONDS:-60} -max_len=4096 $(BUILD)/fuzz/frame-corpus

.PHONY: fuzz-profile
# libFuzzer over the profile's JSON and a session's round trip of it
# (tests/fuzz/fuzz_profile.c; clang; undefined behaviour is a crash).
fuzz-profile: $(STATIC_LIB)
	@mkdir -p $(BUILD)/fuzz
	clang -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -Iinclude -Isrc $(PKG_CFLAGS) \
	  -o $(BUILD)/fuzz/fuzz_profile tests/fuzz/fuzz_profile.c $(wildcard src/core/*.c) \
	  $(STATIC_LIB) $(PKG_LIBS)
	/usr/bin/python3 tests/fuzz/profile_seeds.py $(BUILD)/fuzz/profile-corpus
	$(BUILD)/fuzz/fuzz_profile -max_total_time=$${FUZZ_SECONDS:-60} -max_len=4096 \
	  -artifact_prefix=$(BUILD)/fuzz/profile- \
	  -dict=tests/fuzz/profile.dict $(BUILD)/fuzz/profile-corpus

.PHONY: all check check-layers check-unit check-asan check-integration matrix run install uninstall clean deps bench
all: $(KIS) $(AGENT) $(HELPER) $(STATIC_LIB) $(SHARED_LIB) $(JIT_PLUGIN)

-include $(sort $(wildcard mk/*.mk))

all: $(BINS)

# Where the installed library looks when it cannot tell where it lies
# (src/engine/paths.c): the prefix, fixed at build time.
PATHS_DEFS := -DKIS_PREFIX='"$(PREFIX)"' -DKIS_VERSION='"$(VERSION)"'
$(BUILD)/obj/src/engine/paths.o: ALL_CFLAGS += $(PATHS_DEFS)
$(BUILD)/asan/src/engine/paths.o: BASE_CFLAGS += $(PATHS_DEFS)
HELPER_DEFS := -DKIS_HELPER='"$(PREFIX)/lib/kis/kis-helper"'
$(BUILD)/obj/src/core/io.o: ALL_CFLAGS += $(HELPER_DEFS)
$(BUILD)/asan/src/core/io.o: BASE_CFLAGS += $(HELPER_DEFS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC asan $<"
	$(Q)$(CC) $(BASE_CFLAGS) -O1 -g $(ASAN_FLAGS) -MMD -MP -c $< -o $@

$(STATIC_LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# The ABI: soname libkis-sandbox.so.0, and exactly the symbols the version
# script lists (the KIS_API declarations of include/kis; make check-abi).
LIB_MAP := src/libkis-sandbox.map
$(SHARED_LIB): $(LIB_OBJS) $(LIB_MAP)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libkis-sandbox.so.0 -Wl,--version-script,$(LIB_MAP) \
	  $(HARD_LDFLAGS) -o $@ $(LIB_OBJS) $(PKG_LIBS)

$(BUILD)/asan/libkis-sandbox.a: $(ASAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(KIS): $(CLI_OBJS) $(CLI_REMOTE_OBJS) $(STATIC_LIB) | $(HELPER)
	@echo "  LD      $@"
	$(Q)$(CC) -static-pie $(HARD_LDFLAGS) -o $@ $(CLI_OBJS) $(CLI_REMOTE_OBJS) $(STATIC_LIB) $(CLI_LIBS)

# The dynamic half of the static CLI (src/helper/main.c): the library as it
# is, with the plugin loader and libsubid.
$(HELPER): $(BUILD)/obj/src/helper/main.o $(STATIC_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) -pie $(HARD_LDFLAGS) -o $@ $< $(STATIC_LIB) $(PKG_LIBS)

# The agent is static: it runs inside sandboxes whose root may hold no libc.
$(AGENT): $(BUILD)/obj/src/agent/main.o $(STATIC_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) -static-pie $(HARD_LDFLAGS) -o $@ $< $(STATIC_LIB) $(PKG_LIBS)

$(BUILD)/tests/%: tests/unit/%.c $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -pie $(HARD_LDFLAGS) -o $@ $< $(STATIC_LIB) $(PKG_LIBS) -lcmocka

$(BUILD)/asan-tests/%: tests/unit/%.c $(BUILD)/asan/libkis-sandbox.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(BASE_CFLAGS) -O1 -g $(ASAN_FLAGS) -o $@ $< $(BUILD)/asan/libkis-sandbox.a $(PKG_LIBS) -lcmocka

# Every binary runs even when one fails; the target fails if any did.
check-unit: $(UNIT_BINS)
	@failed=""; for t in $(UNIT_BINS); do echo "== $$t"; $$t || failed="$$failed $$t"; done; \
	  if [ -n "$$failed" ]; then echo "unit tests failed:$$failed"; exit 1; fi

check-asan: $(ASAN_UNIT_BINS)
	@failed=""; for t in $(ASAN_UNIT_BINS); do echo "== $$t (asan+ubsan)"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $$t || \
	  failed="$$failed $$t"; done; \
	  if [ -n "$$failed" ]; then echo "unit tests failed under ASan+UBSan:$$failed"; exit 1; fi

# Small programs the behaviour tests run inside sandboxes (probes).
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPER_BINS := $(HELPER_SRCS:tests/helpers/%.c=$(BUILD)/test-helpers/%)
$(BUILD)/test-helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -static -o $@ $<

# The test build (house rule 17, src/core/test_hook.h): the files that
# read a test seam (KIS_TEST_GETENV, or #ifdef KIS_TEST_BUILD) compiled
# again with -DKIS_TEST_BUILD into build/test/obj and linked ahead of the
# release archive, whose members of the same name are then never pulled
# in. build/test/kis is what the behaviour tests drive (tests/integration/
# conftest.py); it finds the agent, the helper and the compiler plugin
# beside itself, the release ones by a hard link (they read no seam; the
# engine opens its agent with no symbolic link on the way). Never in
# `all`, never installed: build/kis and the library honour no test hook.
TEST_BUILD := $(BUILD)/test
TEST_HOOK_SRCS := $(shell grep -l 'KIS_TEST_GETENV\|KIS_TEST_BUILD' $(LIB_SRCS) $(CLI_SRCS) $(CLI_REMOTE_SRCS))
TEST_HOOK_OBJS := $(TEST_HOOK_SRCS:%.c=$(TEST_BUILD)/obj/%.o)
TEST_CLI_OBJS := $(filter-out $(TEST_HOOK_SRCS:%.c=$(BUILD)/obj/%.o),$(CLI_OBJS) $(CLI_REMOTE_OBJS))
TEST_KIS := $(TEST_BUILD)/kis
TEST_LINKS := $(TEST_BUILD)/kis-agent $(TEST_BUILD)/kis-helper $(TEST_BUILD)/libkis-jit.so

$(TEST_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC test $<"
	$(Q)$(CC) $(ALL_CFLAGS) -DKIS_TEST_BUILD=1 -MMD -MP -c $< -o $@

$(TEST_KIS): $(TEST_HOOK_OBJS) $(TEST_CLI_OBJS) $(STATIC_LIB) | $(HELPER)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -static-pie $(HARD_LDFLAGS) -o $@ $(TEST_HOOK_OBJS) $(TEST_CLI_OBJS) $(STATIC_LIB) $(CLI_LIBS)

$(TEST_BUILD)/kis-agent: $(AGENT)
$(TEST_BUILD)/kis-helper: $(HELPER)
$(TEST_BUILD)/libkis-jit.so: $(JIT_PLUGIN)
$(TEST_LINKS):
	@mkdir -p $(dir $@)
	@echo "  LN      $@"
	$(Q)ln -f $< $@

.PHONY: test-build
test-build: $(TEST_KIS) $(TEST_LINKS)

check-integration: all test-build $(HELPER_BINS)
	$(PYTHON) -m pytest -q -rs tests/integration

# The honest matrix (issue 15): every backend x field x {run, exec}, each
# cell with how it was checked, kept in docs/matrix.md.
matrix: all test-build $(HELPER_BINS)
	KIS_MATRIX_OUT=$(BUILD)/matrix.json $(PYTHON) -m pytest -q -rs tests/integration/test_matrix.py
	$(PYTHON) scripts/matrix.py $(BUILD)/matrix.json docs/matrix.md

# The layers of the source (docs/layers.md): no include goes up, and no
# object names a symbol defined only above it (nm over the built objects).
check-layers: all
	sh scripts/check-layers.sh . $(BUILD)/obj

# Every part runs even when an earlier one failed: one failure must not
# hide the others. The target fails if any part did.
check: all
	@failed=""; for t in check-layers check-unit check-asan $(CHECK_TARGETS) check-integration; do \
	  $(MAKE) --no-print-directory $$t || failed="$$failed $$t"; done; \
	  if [ -n "$$failed" ]; then echo "make check failed in:$$failed"; exit 1; fi

# The newcomer's command: install what is missing, build, run the main job.
run:
	sh scripts/install-deps.sh
	$(MAKE) all
	sh scripts/demo.sh

deps:
	sh scripts/install-deps.sh

bench: all
	sh bench/run.sh

# Where the installed files go; the library finds lib/kis beside itself
# (src/engine/paths.c), so DESTDIR staging and a moved prefix work.
LIBKIS   := $(PREFIX)/lib/kis
GUESTDIR := $(LIBKIS)/guest
MANDIR   := $(PREFIX)/share/man/man1
BASHCOMPDIR := $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  := $(PREFIX)/share/zsh/vendor-completions
# the JSON Schemas of every --json document (README, JSON output)
SCHEMADIR   := $(PREFIX)/share/kis/schema
# INSTALL_GUEST=0 leaves the guest out (it is fetched from Debian's archive).
INSTALL_GUEST ?= 1

install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/kis
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libkis-sandbox.so.0 $(DESTDIR)$(PREFIX)/lib/libkis-sandbox.so
	install -m 0644 include/kis/*.h $(DESTDIR)$(PREFIX)/include/kis/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' kis-sandbox.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kis-sandbox.pc
	install -d $(DESTDIR)$(MANDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(LIBKIS)
	install -m 0644 $(MAN_DIR)/*.1 docs/man/kis.1 $(DESTDIR)$(MANDIR)/
	install -d $(DESTDIR)$(MANDIR)/../man5 $(DESTDIR)$(MANDIR)/../man8
	install -m 0644 docs/man/kis-sandbox-profile.5 $(DESTDIR)$(MANDIR)/../man5/
	install -m 0644 docs/man/kis-runtime.8 $(DESTDIR)$(MANDIR)/../man8/
	install -m 0644 scripts/completion/kis.bash $(DESTDIR)$(BASHCOMPDIR)/kis
	install -d $(DESTDIR)$(SCHEMADIR)
	install -m 0644 docs/schema/*.schema.json $(DESTDIR)$(SCHEMADIR)/
	install -d $(DESTDIR)$(ZSHCOMPDIR)
	sed -e 's|@BASHCOMP@|$(BASHCOMPDIR)/kis|g' scripts/completion/_kis > $(DESTDIR)$(ZSHCOMPDIR)/_kis
	install -m 0755 scripts/guest/fetch-kernel.sh $(DESTDIR)$(LIBKIS)/fetch-guest.sh
	install -m 0755 $(JIT_PLUGIN) $(DESTDIR)$(LIBKIS)/libkis-jit.so
	install -m 0755 $(HELPER) $(DESTDIR)$(LIBKIS)/kis-helper
	@# the guest (never installed on this host as a kernel), copied where
	@# every store reads it: one already fetched is reused (issue 43):
	@# $(MICROVM_GUEST) (make microvm-guest, the tests), else the one the
	@# engine finds (`kis sandbox guest path`: KIS_MICROVM_GUEST_DIR, the
	@# store's cache that `make run` and `guest fetch` fill); else fetched
	@# into $(MICROVM_GUEST)
	@if [ "$(INSTALL_GUEST)" != 1 ]; then :; else \
	  dst=$(DESTDIR)$(GUESTDIR); how="reused, not fetched again"; \
	  if scripts/guest/fetch-kernel.sh --check $(MICROVM_GUEST); then g=$(MICROVM_GUEST); \
	  elif g=$$($(KIS) sandbox guest path 2>/dev/null) && [ -n "$$g" ] && \
	       scripts/guest/fetch-kernel.sh --check "$$g"; then :; \
	  elif scripts/guest/fetch-kernel.sh $(MICROVM_GUEST); then g=$(MICROVM_GUEST); how=fetched; \
	  else g=; fi; \
	  if [ -z "$$g" ]; then echo "install: no guest kernel (Debian's archive unreachable?): the" \
	    "microvm tier needs 'kis sandbox guest fetch'" >&2; \
	  elif [ -d "$$dst" ] && [ "$$(cd "$$g" && pwd -P)" = "$$(cd "$$dst" && pwd -P)" ]; then \
	    echo "install guest $$g: already installed there"; \
	  else echo "install guest $$g -> $$dst ($$how)"; \
	    install -d "$$dst/modules" && \
	    install -m 0644 "$$g/vmlinuz" "$$g/kernel.release" "$$dst/" && \
	    install -m 0755 "$$g/busybox" "$$dst/" && \
	    install -m 0644 "$$g"/modules/* "$$dst/modules/"; fi; fi

# What install wrote, and nothing else (the stores and their caches stay).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(BINS)))
	rm -f $(DESTDIR)$(PREFIX)/lib/libkis-sandbox.a $(DESTDIR)$(PREFIX)/lib/libkis-sandbox.so \
	  $(DESTDIR)$(PREFIX)/lib/libkis-sandbox.so.0 $(DESTDIR)$(PREFIX)/lib/pkgconfig/kis-sandbox.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/kis $(DESTDIR)$(LIBKIS) $(DESTDIR)$(SCHEMADIR)
	rm -f $(DESTDIR)$(MANDIR)/kis.1 $(DESTDIR)$(MANDIR)/../man5/kis-sandbox-profile.5 \
	  $(DESTDIR)$(MANDIR)/../man8/kis-runtime.8
	rm -f $(DESTDIR)$(MANDIR)/kis-sandbox.1 $(DESTDIR)$(MANDIR)/kis-sandbox-*.1 \
	  $(DESTDIR)$(BASHCOMPDIR)/kis $(DESTDIR)$(ZSHCOMPDIR)/_kis

clean:
	rm -rf $(BUILD) $(CLEAN_EXTRA)

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(CLI_REMOTE_OBJS:.o=.d) $(TEST_HOOK_OBJS:.o=.d) $(BUILD)/obj/src/agent/main.d $(ASAN_LIB_OBJS:.o=.d)
