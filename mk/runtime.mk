# SPDX-License-Identifier: MIT
# kis-runtime: the OCI runtime command line (runc's and crun's) in front of
# kis's tiers, for podman, containerd and Kubernetes RuntimeClasses.
KIS_RUNTIME := $(BUILD)/kis-runtime
RUNTIME_SRCS := $(wildcard src/runtime/*.c)
RUNTIME_OBJS := $(RUNTIME_SRCS:%.c=$(BUILD)/obj/%.o)
BINS += $(KIS_RUNTIME)

$(KIS_RUNTIME): $(RUNTIME_OBJS) $(STATIC_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) -pie $(HARD_LDFLAGS) -o $@ $(RUNTIME_OBJS) $(STATIC_LIB) $(PKG_LIBS)

-include $(RUNTIME_OBJS:.o=.d)

# The policy's unit test links kis-runtime's objects but its main().
RUNTIME_LIB_OBJS := $(filter-out %/main.o,$(RUNTIME_OBJS))
ASAN_RUNTIME_OBJS := $(filter-out %/main.o,$(RUNTIME_SRCS:%.c=$(BUILD)/asan/%.o))
$(BUILD)/tests/test_runtime_policy: tests/unit/test_runtime_policy.c $(RUNTIME_LIB_OBJS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -pie $(HARD_LDFLAGS) -o $@ $< $(RUNTIME_LIB_OBJS) $(STATIC_LIB) $(PKG_LIBS) -lcmocka
$(BUILD)/asan-tests/test_runtime_policy: tests/unit/test_runtime_policy.c $(ASAN_RUNTIME_OBJS) $(BUILD)/asan/libkis-sandbox.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(BASE_CFLAGS) -O1 -g $(ASAN_FLAGS) -o $@ $< $(ASAN_RUNTIME_OBJS) $(BUILD)/asan/libkis-sandbox.a $(PKG_LIBS) -lcmocka
# The microvm tier's pod recognition (mvm_pod.c), linked the same way.
$(BUILD)/tests/test_runtime_pod: tests/unit/test_runtime_pod.c $(RUNTIME_LIB_OBJS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -pie $(HARD_LDFLAGS) -o $@ $< $(RUNTIME_LIB_OBJS) $(STATIC_LIB) $(PKG_LIBS) -lcmocka
$(BUILD)/asan-tests/test_runtime_pod: tests/unit/test_runtime_pod.c $(ASAN_RUNTIME_OBJS) $(BUILD)/asan/libkis-sandbox.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(BASE_CFLAGS) -O1 -g $(ASAN_FLAGS) -o $@ $< $(ASAN_RUNTIME_OBJS) $(BUILD)/asan/libkis-sandbox.a $(PKG_LIBS) -lcmocka
# The microvm tier's kept sandbox images (mvm_image.c), linked the same way.
$(BUILD)/tests/test_runtime_image: tests/unit/test_runtime_image.c $(RUNTIME_LIB_OBJS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -pie $(HARD_LDFLAGS) -o $@ $< $(RUNTIME_LIB_OBJS) $(STATIC_LIB) $(PKG_LIBS) -lcmocka
$(BUILD)/asan-tests/test_runtime_image: tests/unit/test_runtime_image.c $(ASAN_RUNTIME_OBJS) $(BUILD)/asan/libkis-sandbox.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(BASE_CFLAGS) -O1 -g $(ASAN_FLAGS) -o $@ $< $(ASAN_RUNTIME_OBJS) $(BUILD)/asan/libkis-sandbox.a $(PKG_LIBS) -lcmocka
-include $(ASAN_RUNTIME_OBJS:.o=.d)

# kis-runtime-<tier>: the same binary with its tier pinned by its name, for
# an operator's RuntimeClass per tier (a pod's annotation cannot move it).
# A prerequisite of install: links need no target yet.
.PHONY: install-runtime-links
install: install-runtime-links
install-runtime-links:
	install -d $(DESTDIR)$(PREFIX)/bin
	ln -sf kis-runtime $(DESTDIR)$(PREFIX)/bin/kis-runtime-container
	ln -sf kis-runtime $(DESTDIR)$(PREFIX)/bin/kis-runtime-host
	ln -sf kis-runtime $(DESTDIR)$(PREFIX)/bin/kis-runtime-microvm

# make uninstall takes the links away too (BINS covers kis-runtime itself)
.PHONY: uninstall-runtime-links
uninstall: uninstall-runtime-links
uninstall-runtime-links:
	rm -f $(DESTDIR)$(PREFIX)/bin/kis-runtime-container $(DESTDIR)$(PREFIX)/bin/kis-runtime-host \
		$(DESTDIR)$(PREFIX)/bin/kis-runtime-microvm

# libFuzzer over kis-runtime's reading of a bundle's config.json and an
# exec's process.json (tests/fuzz/fuzz_oci_config.c; clang). The policy's
# files are built instrumented (undefined behaviour ends the run as a crash
# does); what else they call comes from the library.
FUZZ_OCI := $(BUILD)/fuzz/fuzz_oci_config
FUZZ_OCI_SRCS := tests/fuzz/fuzz_oci_config.c src/runtime/model.c src/runtime/policy.c src/runtime/host_plan.c \
	src/runtime/cgroup_noted.c src/runtime/crun.c $(wildcard src/core/*.c)
$(FUZZ_OCI): $(FUZZ_OCI_SRCS) $(wildcard src/runtime/*.h) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	clang -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -Iinclude -Isrc \
	  $(PKG_CFLAGS) -o $@ $(FUZZ_OCI_SRCS) $(STATIC_LIB) $(PKG_LIBS)

.PHONY: fuzz-oci-config
fuzz-oci-config: $(FUZZ_OCI)
	/usr/bin/python3 tests/fuzz/oci_seeds.py $(BUILD)/fuzz/oci-corpus
	$(FUZZ_OCI) -max_total_time=$${FUZZ_SECONDS:-60} -max_len=8192 \
	  -artifact_prefix=$(BUILD)/fuzz/oci-config- \
	  -dict=tests/fuzz/oci.dict $(BUILD)/fuzz/oci-corpus
