# SPDX-License-Identifier: MIT
# build/bench/kis-unjailed: `kis` whose microvm can restore with its VMM
# unjailed when KIS_MICROVM_BENCH_UNJAILED is set, for
# bench/microvm-density.sh's "jail's cost" (the same engine, jailed and
# not, in one run). Only the benchmark builds it: not in `all`, never
# installed; build/kis and the library refuse the variable.
BENCH_DEFS := -DKIS_MVM_BENCH_UNJAILED=1
BENCH_UNJAILED_OBJS := $(BUILD)/bench-obj/src/backends/microvm/vm.o \
	$(BUILD)/bench-obj/src/backends/microvm/bench_unjailed.o

$(BUILD)/bench-obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC bench $<"
	$(Q)$(CC) $(ALL_CFLAGS) $(BENCH_DEFS) -MMD -MP -c $< -o $@

# the bench objects first: the archive's vm.o is then never pulled in
$(BUILD)/bench/kis-unjailed: $(CLI_OBJS) $(BENCH_UNJAILED_OBJS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -pie $(HARD_LDFLAGS) -o $@ $(CLI_OBJS) $(BENCH_UNJAILED_OBJS) $(STATIC_LIB) $(PKG_LIBS)

-include $(BENCH_UNJAILED_OBJS:.o=.d)

# The timing tools of bench/host.sh, bench/oci.sh and bench/throughput.sh,
# built here once instead of by each script: the start-to-exit timer, and
# the price of one more process image (an empty program linked static-pie
# with glibc, as kis and the agent are, and the same without libc).
BENCH_TOOLS := $(BUILD)/bench/startup $(BUILD)/bench/empty-glibc $(BUILD)/bench/empty-nolibc
BENCH_CC := $(CC) -std=gnu11 -O2 -Wall -Wextra -Werror
.PHONY: bench-tools
bench-tools: $(BENCH_TOOLS)

$(BUILD)/bench/startup: bench/startup.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(BENCH_CC) -o $@ $<

$(BUILD)/bench/empty-glibc: bench/empty.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(BENCH_CC) -static-pie -o $@ $<

$(BUILD)/bench/empty-nolibc: bench/empty.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(BENCH_CC) -DNOLIBC -nostdlib -static -o $@ $<
