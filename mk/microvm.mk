# SPDX-License-Identifier: MIT
# The microvm guest: `make microvm-guest` fetches Debian's cloud kernel into
# build/microvm-guest (apt-get download + dpkg -x, never installed on the
# host); the engine builds the initramfs and snapshots there on first use
# when KIS_MICROVM_GUEST_DIR points at it (the tests do), else under the
# store's cache/guest.
MICROVM_GUEST ?= $(BUILD)/microvm-guest

.PHONY: microvm-guest
microvm-guest:
	scripts/guest/fetch-kernel.sh $(MICROVM_GUEST)

# The break-out probes linked statically, to run inside the guest (which
# has busybox and no C library): built with the behaviour tests' helpers.
PROBE_STATIC_BINS := $(PROBE_SRCS:tests/probes/%.c=$(BUILD)/probes-static/%)
$(BUILD)/probes-static/%: tests/probes/%.c tests/probes/probe.h
	@mkdir -p $(dir $@)
	@echo "  PROBE   $@ (static)"
	$(Q)$(CC) $(ALL_CFLAGS) -static -o $@ $<
check-integration: $(PROBE_STATIC_BINS)
