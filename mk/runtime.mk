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
