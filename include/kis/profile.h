/* SPDX-License-Identifier: MIT */
/* kis/profile.h: the resolved profile the engine enforces. The zero value
 * (kis_profile_init) is deny-all: no network, no hatches, default limits. */
#ifndef KIS_PROFILE_H
#define KIS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kis/error.h"
#include "kis/limits.h"

enum kis_tier {
	KIS_TIER_AUTO = 0,
	KIS_TIER_PROCESS,
	KIS_TIER_WASM,
	KIS_TIER_HOST,
	KIS_TIER_CONTAINER,
	KIS_TIER_MICROVM,
	KIS_TIER__COUNT
};

enum kis_net_mode { KIS_NET_OFF = 0, KIS_NET_LOOPBACK, KIS_NET_EGRESS, KIS_NET_HOST, KIS_NET__COUNT };

enum kis_root_mode { KIS_ROOT_HOST = 0, KIS_ROOT_WORKSPACE };

/* One destination of network.allow ("203.0.113.0/24:443", "198.51.100.7:1000-2000"):
 * an IPv4 network in host byte order, its prefix length, and a port range
 * for TCP and UDP (0-0: every port and protocol). */
struct kis_net_dest {
	uint32_t addr;
	uint8_t prefix;
	uint16_t port_lo, port_hi;
};

/* microvm: which accelerator the VM must use; auto takes KVM where it can
 * run the guest and TCG otherwise (and says which in the result). */
enum kis_accel { KIS_ACCEL_AUTO = 0, KIS_ACCEL_KVM, KIS_ACCEL_TCG };

/* One entry of the profile's `mounts`: an engine id placed at a path inside
 * the sandbox. The source is never a host path: the engine finds its files
 * in the store (issue 21). */
struct kis_mount {
	char *source;   /* a base id (always read-only) or a workspace id */
	char *target;   /* absolute and normalised, checked by kis_mount_target_check */
	bool read_only; /* a workspace shown read-only (a base always is) */
};

/* The most mounts one profile may hold. */
#define KIS_MOUNTS_MAX 16
/* wasm: which engine runs the module. auto takes the best one this host
 * has (`kis sandbox backends` lists them); a named one that is absent is
 * refused (profile_unsatisfiable), never replaced. */
enum kis_wasm_engine {
	KIS_WASM_ENGINE_AUTO = 0,
	KIS_WASM_ENGINE_INTERPRETER,
	KIS_WASM_ENGINE_COMPILER,
};

/* wasm: what the module gets as its one preopened directory (fd 3, named
 * "/"): the workspace, or nothing at all (fd 3 is then not open). */
enum kis_wasm_preopen { KIS_WASM_PREOPEN_WORKSPACE = 0, KIS_WASM_PREOPEN_NONE };

struct kis_profile {
	enum kis_tier tier;
	char *backend;   /* optional: pins a backend inside the tier */
	char *base;      /* a base id: run clones a fresh workspace from it */
	char *workspace; /* an existing workspace id */
	bool keep;       /* keep the workspace that a --base run cloned */
	enum kis_root_mode root;
	enum kis_net_mode net;
	bool net_explicit; /* network.mode was given (not the default off) */
	/* network.allow: with egress, only these destinations are reachable;
	 * unset (net_allow_set false), every public one is */
	struct kis_net_dest *net_allow;
	size_t n_net_allow;
	bool net_allow_set;
	struct kis_limits limits;
	char **env;      /* "KEY=VALUE" strings, n_env of them; keys unique */
	size_t n_env;
	char *cwd;       /* working directory inside the sandbox; NULL: default */
	struct kis_mount *mounts; /* n_mounts of them, targets distinct and not nested */
	size_t n_mounts;
	struct {
		bool enabled;
		unsigned rows, cols;
	} tty;
	struct {
		bool allow_process_tier;
		bool allow_net_host;
	} escape_hatch;
	struct {
		enum kis_accel accel;
		unsigned vcpus; /* 1..64; 0 (unset) is 1 */
	} microvm;
	struct {
		enum kis_wasm_engine engine;
		enum kis_wasm_preopen preopen;
	} wasm;
};

KIS_API void kis_profile_init(struct kis_profile *p);
KIS_API void kis_profile_release(struct kis_profile *p);

/* Merge a JSON profile into p, field by field (fields absent from the JSON
 * keep their value). Unknown fields, wrong types and bad values fail with
 * KIS_E_INVALID_PROFILE naming the JSON path ("limits.wall_ms"). */
KIS_API int kis_profile_merge_json(struct kis_profile *p, const char *text, size_t len,
				   struct kis_error **err);
KIS_API int kis_profile_merge_file(struct kis_profile *p, const char *path, struct kis_error **err);

/* Set one field by its JSON path from a string, as a command-line flag does:
 * durations take a unit ("500ms", "2s", "1m"), sizes take k, M or G, "env"
 * takes "KEY=VALUE" and replaces an earlier value of KEY, "mounts" takes
 * "ID:TARGET[:ro]" and appends one mount. */
KIS_API int kis_profile_set(struct kis_profile *p, const char *path, const char *value,
			    struct kis_error **err);

/* The named escape hatches (README, Security): what weakens the boundary
 * to nothing, off unless a command line or profile names it. One table:
 * kis_profile_check_hatches refuses by it and `kis sandbox backends`
 * lists it. */
struct kis_escape_hatch {
	const char *name;    /* "allow_process_tier" */
	const char *flag;    /* the CLI's flag, "--allow-process-tier" */
	const char *field;   /* the profile's field, "escape_hatch.allow_process_tier" */
	const char *weakens; /* "the process tier runs unconfined" */
	enum kis_tier tier;  /* the tier it opens, or KIS_TIER__COUNT */
	enum kis_net_mode net; /* the network mode it opens, or KIS_NET__COUNT */
};
#define KIS_ESCAPE_HATCHES 2
KIS_API const struct kis_escape_hatch *kis_escape_hatches(size_t *n);

/* Cross-field checks that need no backend: the escape hatches. */
KIS_API int kis_profile_check_hatches(const struct kis_profile *p, struct kis_error **err);

/* A container of a pod inside a microvm session (kis-runtime's kis-vm
 * pods, docs/protocol.md "container"): an exec may start one (its first
 * process in mount and pid namespaces of its own, its root the overlay of
 * the session's mount slot `slot`), join one (an exec that sees its files
 * and processes) or remove what one left (its upper layer). */
enum kis_ctr_op { KIS_CTR_NONE, KIS_CTR_INIT, KIS_CTR_JOIN, KIS_CTR_REMOVE };
struct kis_exec_container {
	enum kis_ctr_op op;
	const char *id;       /* the container's id: letters, digits, '-', '_', '.' */
	int slot;             /* init: its root's mount slot, 0 .. 3 */
	const char *hostname; /* init: the pod's, set in the guest's UTS; NULL none */
	bool free_slot;       /* remove: the slot is free after it (its disk unmounted) */
	/* init: the container's own memory.max in the guest (a cgroup v2 group
	 * of its own, its execs joining it); 0 none */
	uint64_t memory_max;
	/* init: that group's cpu.max, "$QUOTA $PERIOD" in microseconds
	 * (cgroup-v2.rst "cpu.max"): quota 0 none; period 0 the kernel's
	 * default (100000). Quota KIS_CPU_QUOTA_MIN_US .. KIS_CPU_QUOTA_MAX_US,
	 * period KIS_CPU_PERIOD_MIN_US .. KIS_CPU_PERIOD_MAX_US */
	uint64_t cpu_quota_us, cpu_period_us;
};
/* The kernel's bounds for a CFS bandwidth quota and period
 * (kernel/sched/core.c tg_set_cfs_bandwidth: 1 ms .. 1 s for the period,
 * at least 1 ms and at most max_cfs_runtime, 2^44-1 us, for the quota;
 * Documentation/scheduler/sched-bwc.rst) */
#define KIS_CPU_PERIOD_MIN_US 1000ull
#define KIS_CPU_PERIOD_MAX_US 1000000ull
#define KIS_CPU_QUOTA_MIN_US 1000ull
#define KIS_CPU_QUOTA_MAX_US ((1ull << 44) - 1)

/* The profile as JSON (malloc'ed), every field shown, for --dry-run. */
KIS_API char *kis_profile_to_json(const struct kis_profile *p);

KIS_API const char *kis_tier_name(enum kis_tier t);
KIS_API int kis_tier_parse(const char *s, enum kis_tier *out);
KIS_API const char *kis_net_mode_name(enum kis_net_mode m);
KIS_API int kis_net_mode_parse(const char *s, enum kis_net_mode *out);
KIS_API const char *kis_wasm_engine_name(enum kis_wasm_engine e);

/* "500ms", "2s", "1m", "1h", or a bare number of milliseconds. */
KIS_API int kis_parse_duration_ms(const char *s, uint64_t *out, struct kis_error **err);
/* "4096", "64k", "512M", "2G" (powers of 1024). */
KIS_API int kis_parse_size(const char *s, uint64_t *out, struct kis_error **err);

#endif
