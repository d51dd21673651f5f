# SPDX-License-Identifier: MIT
# Confinement probes: small programs under tests/probes/ that each try one
# forbidden thing, and confine-run, the launcher that runs them confined.
# Built into build/probes/; the confine unit tests depend on them. Not in
# BINS: they are test programs and must not be installed.

PROBE_SRCS := $(filter-out tests/probes/confine-run.c,$(wildcard tests/probes/*.c))
PROBE_BINS := $(PROBE_SRCS:tests/probes/%.c=$(BUILD)/probes/%)
CONFINE_RUN := $(BUILD)/probes/confine-run

.PHONY: probes
probes: $(PROBE_BINS) $(CONFINE_RUN)

# Probes use only libc and the project's warning and hardening flags.
$(BUILD)/probes/%: tests/probes/%.c tests/probes/probe.h
	@mkdir -p $(dir $@)
	@echo "  PROBE   $@"
	$(Q)$(CC) $(ALL_CFLAGS) -pie $(HARD_LDFLAGS) -o $@ $<

$(CONFINE_RUN): tests/probes/confine-run.c $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -pie $(HARD_LDFLAGS) -o $@ $< $(STATIC_LIB) $(PKG_LIBS)

# The confine tests run the probes: build them first (order-only, so the
# test binaries are not relinked on every make).
$(BUILD)/tests/test_confine $(BUILD)/asan-tests/test_confine: | $(PROBE_BINS) $(CONFINE_RUN)
all: probes
