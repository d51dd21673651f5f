/* SPDX-License-Identifier: MIT */
/* Internal API of the confinement building blocks: the shared seccomp policy,
 * Landlock, process hardening (caps, rlimits, fds) and cgroups (v1 and v2).
 *
 * Order a native backend follows (see each function for where it runs):
 *
 *   probe (any time, never fails): kis_landlock_probe(), kis_cgroup_probe()
 *   before fork (may allocate, may fail with a named error):
 *     kis_seccomp_export_bpf_fd()    the policy compiled to raw BPF in a sealed
 *                                    memfd: loaded by the landlock child with
 *                                    kis_seccomp_load_bpf_fd, or handed to
 *                                    `bwrap --seccomp FD` (clear CLOEXEC)
 *     kis_seccomp_to_oci_json()      (oci) the linux.seccomp object for crun
 *     kis_landlock_prepare()         ruleset fd, refuses what it cannot enforce
 *     kis_cgroup_create()            leaf group with memory/pids/cpu limits
 *   in the child, between fork and exec (no allocation on the success path):
 *     kis_cgroup_attach(cg, 0)       or from the parent with the child's pid
 *     kis_harden_self()              rlimits, fds, no_new_privs, caps dropped,
 *                                    optionally an unprivileged uid/gid
 *     kis_landlock_enforce()         restrict_self with the prepared ruleset
 *     kis_seccomp_load_bpf_fd()      last: the filter then only has to allow
 *                                    execve of the command
 *   The landlock backend gets all of the host tier from kis_confine_plan
 *   (below): prepare before fork, kis_confine_child as spawn's child_setup.
 *   (kis_seccomp_build + kis_seccomp_load: the same policy through libseccomp
 *   in-process, e.g. for the wasm interpreter's child; libseccomp allocates
 *   while loading, so not between fork and exec of a multithreaded parent)
 *   after the child exits (parent):
 *     kis_cgroup_read_events()       memory_limit / pids_limit evidence
 *     kis_cgroup_kill(), kis_cgroup_destroy()
 */
#ifndef KIS_CONFINE_H
#define KIS_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>
#include <seccomp.h>

#include "kis/error.h"
#include "kis/profile.h"
#include "core/util.h"

/* ------------------------------------------------------------------ seccomp */

struct kis_seccomp_opts {
	enum kis_net_mode net;  /* KIS_NET_OFF: only AF_UNIX sockets open */
	bool allow_sysv_ipc;    /* SysV shm/sem/msg: only where an IPC namespace
				 * separates the sandbox from the host */
	bool unix_unnamed_only; /* with net off and the host's filesystem in
				 * view (landlock): no unix socket may name a
				 * peer (no connect, no sendto to an address,
				 * no datagram sockets); socketpair stays */
};

/* Build the default policy shared by every native tier. Unknown syscalls
 * fail with ENOSYS, the dangerous families with EPERM, foreign ABIs (x32,
 * i386) kill the process. *out is released with seccomp_release(). */
KIS_HIDDEN int kis_seccomp_build(const struct kis_seccomp_opts *o, scmp_filter_ctx *out,
				 struct kis_error **err);
/* Load ctx into the calling process (sets no_new_privs first). Child side:
 * libseccomp generates the BPF here, so build (and ideally export) before
 * fork; the kernel call itself does not allocate. */
KIS_HIDDEN int kis_seccomp_load(scmp_filter_ctx ctx, struct kis_error **err);
/* Load a filter already compiled to raw sock_filter[] (from
 * kis_seccomp_export_bpf_fd): no allocation at all, for the child. */
KIS_HIDDEN int kis_seccomp_load_bpf_fd(int memfd, struct kis_error **err);
/* A sealed memfd (O_CLOEXEC: clear it for the bwrap child) holding the raw
 * struct sock_filter[] as bwrap --seccomp FD reads it. */
KIS_HIDDEN int kis_seccomp_export_bpf_fd(const struct kis_seccomp_opts *o, int *memfd_out,
					 struct kis_error **err);
/* Allowlist building blocks for a context of one's own: each named call
 * with any arguments (0, or libseccomp's negative errno); mmap and
 * mprotect unless PROT_EXEC is asked. */
KIS_HIDDEN int kis_seccomp_allow_names(scmp_filter_ctx ctx, const char *const *names, size_t n);
KIS_HIDDEN int kis_seccomp_allow_noexec_memory(scmp_filter_ctx ctx);
/* Both, in a new context that answers anything else with deny, kills a
 * foreign architecture and sets no_new_privs when loaded; NULL on failure. */
KIS_HIDDEN scmp_filter_ctx kis_seccomp_allowlist_new(uint32_t deny, const char *const *names,
						     size_t n);
/* The same policy as the OCI runtime-spec linux.seccomp object. */
KIS_HIDDEN int kis_seccomp_to_oci_json(const struct kis_seccomp_opts *o, json_t **out,
				       struct kis_error **err);

/* ----------------------------------------------------------------- landlock */

/* Features of the policy that need a given Landlock ABI. The backend lists in
 * kis_landlock_opts.required those it cannot do without; a missing required
 * one makes prepare fail with KIS_E_PROFILE_UNSATISFIABLE naming it. */
enum {
	KIS_LL_REFER = 1u << 0,        /* ABI 2: rename/link across directories */
	KIS_LL_TRUNCATE = 1u << 1,     /* ABI 3 */
	KIS_LL_NET_TCP = 1u << 2,      /* ABI 4: TCP bind/connect */
	KIS_LL_IOCTL_DEV = 1u << 3,    /* ABI 5 */
	KIS_LL_SCOPE_ABSTRACT_UNIX = 1u << 4, /* ABI 6 */
	KIS_LL_SCOPE_SIGNAL = 1u << 5, /* ABI 6 */
	KIS_LL__ALL = (1u << 6) - 1,
};

struct kis_landlock_opts {
	const char *workspace;          /* read-write, absolute host path (or NULL) */
	bool workspace_by_fd;           /* the workspace's rule is on workspace_fd (a
					 * view of it mounted later, issue 41) */
	int workspace_fd;
	const char *const *extra_ro;    /* read+execute, NULL-terminated (or NULL) */
	const char *const *extra_rw;    /* read-write, NULL-terminated (or NULL) */
	enum kis_net_mode net;          /* off: every TCP bind/connect denied */
	bool allow_proc;                /* read-only /proc (ptrace checks still apply) */
	bool bare;                      /* no system view (/usr, /etc, ...): only the
					 * paths above (a process that execs nothing) */
	unsigned required;              /* KIS_LL_* the caller cannot do without */
};

struct kis_landlock_report {
	int abi;              /* 0: Landlock absent */
	unsigned enforced;    /* KIS_LL_* in effect */
	unsigned missing;     /* KIS_LL_* the ABI does not offer */
};

/* The Landlock ABI version of this kernel, 0 when absent or disabled. */
KIS_HIDDEN int kis_landlock_abi(void);
/* What this kernel's Landlock offers, without building anything (for the
 * backends matrix): abi, and missing = features the ABI lacks. Never fails. */
KIS_HIDDEN void kis_landlock_probe(struct kis_landlock_report *rep);
/* Name of one KIS_LL_* bit ("refer", "scope_signal", ...). */
KIS_HIDDEN const char *kis_landlock_feature_name(unsigned bit);
/* Before fork: create the ruleset and add every rule, returning its fd
 * (O_CLOEXEC) in *fd_out. Absent Landlock is KIS_E_TIER_UNAVAILABLE; a
 * network mode Landlock cannot express (loopback, egress) or a missing
 * required feature is KIS_E_PROFILE_UNSATISFIABLE naming the field. */
KIS_HIDDEN int kis_landlock_prepare(const struct kis_landlock_opts *o, int *fd_out,
				    struct kis_landlock_report *rep, struct kis_error **err);
/* In the child: no_new_privs, then landlock_restrict_self(fd). Closes fd. */
KIS_HIDDEN int kis_landlock_enforce(int ruleset_fd, struct kis_error **err);

/* -------------------------------------------------- capabilities and limits */

struct kis_harden_opts {
	/* rlimits to set (0 fields take the engine's defaults); NULL leaves
	 * them as they are (src/exec/spawn.c sets them already) */
	const struct kis_limits *limits;
	const int *keep_fds;             /* fds >= 3 left as they are */
	size_t n_keep;
	/* Run the command as this unprivileged user (uid and gid != 0) with no
	 * supplementary groups. An engine running as root should: with uid 0
	 * and no capabilities the command still owns root's files by DAC
	 * (0600 secrets, root-only pathname sockets such as docker.sock, which
	 * Landlock up to ABI 7 does not mediate on connect). */
	bool set_user;
	uid_t uid;
	gid_t gid;
	/* nonzero: the user's one supplementary group (KIS_REACH_GID) */
	gid_t reach_gid;
};

/* The group through which an unprivileged landlock command reaches its
 * workspace in the store: the store's own directories on the way are
 * root:KIS_REACH_GID 0710, never searchable by others. Others could
 * otherwise walk to a file a bubblewrap or container sandbox made, owned
 * by uid 0 on disk through its id map and setuid by its own chmod, and
 * run it outside the sandbox's nosuid mount: root for any local user.
 * Just above the sandboxes' id blocks (1610612736..1879048191) and
 * systemd's container range, so no host user and no sandbox id has it. */
#define KIS_REACH_GID 1879048192u

/* In the child, last step before Landlock and seccomp: rlimits (RLIMIT_CORE
 * 0; RLIMIT_CPU a backstop a second past cpu_ms), every fd >= 3 not kept
 * marked close-on-exec, no_new_privs, SECBIT_NOROOT locked where permitted,
 * the bounding set emptied, then the user switched (if asked), and ambient,
 * inheritable, permitted and effective capabilities cleared. No allocation
 * on the success path. */
KIS_HIDDEN int kis_harden_self(const struct kis_harden_opts *o, struct kis_error **err);
/* The parts on their own, for backends that need only some. The rlimits
 * are core's one setter (kis_rlimits_apply) over the resolved limits. */
KIS_HIDDEN int kis_set_rlimits(const struct kis_limits *lim, struct kis_error **err);
KIS_HIDDEN int kis_cloexec_fds_from(int lowfd, const int *keep, size_t n_keep,
				    struct kis_error **err);
KIS_HIDDEN int kis_drop_caps(struct kis_error **err);
/* One capability out of every set, the bounding set included, so no execve
 * (a setuid-root file, root's legacy rule) gives it back. */
KIS_HIDDEN int kis_drop_cap(int cap, struct kis_error **err);
KIS_HIDDEN int kis_switch_user(uid_t uid, gid_t gid, gid_t reach_gid, struct kis_error **err);

/* ------------------------------------------------- the host tier in one go */

/* What the landlock backend does, as one plan: prepare before fork, then
 * kis_confine_child in the child (it fits struct kis_spawn's child_setup
 * hook: child_setup = kis_confine_child, child_ctx = &plan), release in the
 * parent after fork. Fill `harden` before fork. */
struct kis_confine_plan {
	int landlock_fd;  /* -1: no Landlock */
	int seccomp_fd;   /* -1: no seccomp */
	struct kis_landlock_report landlock;
	struct kis_harden_opts harden;
};

KIS_HIDDEN void kis_confine_plan_init(struct kis_confine_plan *p);
/* Either opts may be NULL to leave that layer out. On failure nothing is
 * left open. */
KIS_HIDDEN int kis_confine_plan_prepare(struct kis_confine_plan *p,
					const struct kis_seccomp_opts *sc,
					const struct kis_landlock_opts *ll, struct kis_error **err);
/* In the child: harden, Landlock, seccomp, in that order. No allocation on
 * the success path. */
KIS_HIDDEN int kis_confine_child(void *plan, struct kis_error **err);
KIS_HIDDEN void kis_confine_plan_release(struct kis_confine_plan *p);

/* ------------------------------------------------------------------ cgroups */

enum kis_cgroup_mode { KIS_CG_NONE = 0, KIS_CG_V1, KIS_CG_V2 };

/* The limits (kis/limits.h) a cgroup binds, and where: the one place
 * that says so. X(BIT, field, controller, v2 file, v1 file, OCI key):
 * the controller a leaf needs, the file its value (a decimal number) is
 * written to in v2 and in v1 (the controller's own hierarchy), and the
 * OCI linux.resources.<key>.limit that carries it to crun and from a
 * bundle (kis-runtime). kis_cgroup_create writes each, kis_cgroup_probe
 * measures each, the host tiers' and crun's cgroups carry each, from one
 * struct kis_limits. A new cgroup limit is a line of KIS_LIMITS and a row
 * here (docs/layers.md, "A new limit"). What a limit adds beyond its
 * file (memory's swap, the engine's own pids) stays with its code. */
#define KIS_CGROUP_LIMITS(X)                                                                    \
	X(MEMORY, memory_bytes, "memory", "memory.max", "memory.limit_in_bytes", "memory")      \
	X(PIDS, pids, "pids", "pids.max", "pids.max", "pids")

/* A v1 leaf per controller: the rows above, then cpu and cpuacct. */
enum {
#define KIS_CG_SLOT_(B, f, c, v2, v1, oci) KIS_CG_V1_##B,
	KIS_CGROUP_LIMITS(KIS_CG_SLOT_)
#undef KIS_CG_SLOT_
	KIS_CG_V1_CPU,
	KIS_CG_V1_CPUACCT,
	KIS_CG_SLOTS
};

/* Each row's OCI linux.resources.<key>.limit with its limit's index: the
 * one table the container tier writes (oci/bundle.c) and kis-runtime
 * reads (runtime/host_plan.c). */
static const struct kis_cgroup_oci_key {
	const char *key;
	unsigned index;
} kis_cgroup_oci_keys[] = {
#define KIS_CG_OCI_(B, f, c, v2, v1, oci) {oci, KIS_LIMIT_I_##B},
	KIS_CGROUP_LIMITS(KIS_CG_OCI_)
#undef KIS_CG_OCI_
};

/* The KIS_LIMIT_* bits of the rows of KIS_CGROUP_LIMITS. */
#define KIS_CGROUP_LIMIT_BITS (0u KIS_CGROUP_LIMITS(KIS_CG_BIT_))
#define KIS_CG_BIT_(B, f, c, v2, v1, oci) | KIS_LIMIT_##B

struct kis_cgroup {
	enum kis_cgroup_mode mode;
	/* v2: dirs[0] is the leaf. v1: a leaf per controller (KIS_CG_V1_*,
	 * NULL when that hierarchy is not mounted). Paths prepared before
	 * fork so attach in the child needs no allocation. */
	char *dirs[KIS_CG_SLOTS];
	char *parents[KIS_CG_SLOTS]; /* the kis parent of each leaf, removed when empty */
};

struct kis_cgroup_events {
	uint64_t oom_kills;   /* memory: processes killed by the OOM killer */
	uint64_t mem_failcnt; /* v1 memory.failcnt (hits of the limit) */
	uint64_t pids_max;    /* forks refused by pids.max */
};

/* Which of KIS_LIMIT_MEMORY and KIS_LIMIT_PIDS this host lets this user
 * enforce, measured by creating (and removing) a probe group. why gets the
 * reason when a limit is missing. Never fails. */
KIS_HIDDEN unsigned kis_cgroup_probe(char *why, size_t why_len);
KIS_HIDDEN enum kis_cgroup_mode kis_cgroup_detect(void);
/* Create a leaf group `name` ([a-z0-9-]) under a `kis` parent next to this
 * process's own cgroup and write the limits of KIS_CGROUP_LIMITS that lim
 * sets (0: not limited; lim NULL: none), and cpu_millis (CPU bandwidth
 * per second of wall time, 1000 = one core; 0: none). On failure nothing
 * is left. */
KIS_HIDDEN int kis_cgroup_create(const char *name, const struct kis_limits *lim,
				 uint64_t cpu_millis, struct kis_cgroup **out,
				 struct kis_error **err);
/* Where a group goes and its CPU bandwidth, beyond kis_cgroup_create's:
 * what an OCI bundle asks for (kis-runtime's host tier). */
struct kis_cgroup_opts {
	/* NULL: the leaf `name` under a `kis` parent, as kis_cgroup_create.
	 * Else the leaf's path from each hierarchy's root (an OCI
	 * linux.cgroupsPath that begins with '/', as runc's cgroupfs driver
	 * reads it; no '.', '..' or empty component): its missing parents are
	 * made and left, as runc leaves them (the pod's group is the
	 * kubelet's), and `name` is ignored. */
	const char *at;
	/* CFS bandwidth (OCI linux.resources.cpu quota and period, in us):
	 * quota 0 is none, period 0 the kernel's 100000 */
	uint64_t cpu_quota_us, cpu_period_us;
	/* v1 cpu.shares (2..262144), v2 cpu.weight mapped as runc and crun
	 * map it; 0: none */
	uint64_t cpu_shares;
	/* the memory controller's group alone (v1: the memory hierarchy's
	 * leaf, no pids or cpuacct one; v2: the one leaf, +memory): a process
	 * placed there for its memory accounting keeps its other groups */
	bool memory_only;
};
KIS_HIDDEN int kis_cgroup_create_with(const char *name, const struct kis_limits *lim,
				      const struct kis_cgroup_opts *o, struct kis_cgroup **out,
				      struct kis_error **err);
/* Does this host have the cpu controller where kis_cgroup_create_with
 * makes its groups (v1: a cpu hierarchy; v2: cpu in the hierarchy of the
 * limits)? why gets the reason when not. */
KIS_HIDDEN bool kis_cgroup_cpu_available(char *why, size_t why_len);
/* Rewrite the group's pids.max (v1's pids leaf, v2's leaf): a helper of
 * the engine's that joins later adds itself to it (limits.pids is the
 * command's). */
KIS_HIDDEN int kis_cgroup_set_pids(const struct kis_cgroup *cg, uint64_t pids,
				   struct kis_error **err);
/* Make the group's memory controller OOM-kill a process of its own in
 * it, so that whoever watches the group's OOM events (a containerd
 * shim: v1 memory.oom_control's eventfd, v2 memory.events' oom_kill)
 * sees one: a child forked into the group (it is the caller's) lowers
 * the group's limit just above its usage and touches memory until the
 * OOM killer ends it; the limit is put back after. The caller, which
 * must be in the group, lives on. 0 when the kernel's OOM killer ended
 * the child (the group's oom_kill count rose), else an error. */
KIS_HIDDEN int kis_cgroup_oom_relay(const struct kis_cgroup *cg, struct kis_error **err);
/* Move pid (0: the caller itself) into the group. No allocation. */
KIS_HIDDEN int kis_cgroup_attach(const struct kis_cgroup *cg, pid_t pid, struct kis_error **err);
KIS_HIDDEN int kis_cgroup_read_events(const struct kis_cgroup *cg, struct kis_cgroup_events *ev,
				      struct kis_error **err);
/* The group's CPU accounting (all its processes), read-only and O_CLOEXEC,
 * for kis_cpuacct_read_ms; -1 where there is none. */
KIS_HIDDEN int kis_cgroup_cpu_fd(const struct kis_cgroup *cg);
/* Number of processes in the group, < 0 on error. */
KIS_HIDDEN int kis_cgroup_count(const struct kis_cgroup *cg, struct kis_error **err);
/* SIGKILL every member until the group is empty (cgroup.kill where v2 has it). */
KIS_HIDDEN int kis_cgroup_kill(const struct kis_cgroup *cg, struct kis_error **err);
/* Kill what remains, rmdir the leaves (retrying while members exit) and the
 * kis parents when empty, free cg. Safe with NULL. */
KIS_HIDDEN int kis_cgroup_destroy(struct kis_cgroup *cg, struct kis_error **err);
/* Free the handle only: the groups stay (for a handle loaded from disk). */
KIS_HIDDEN void kis_cgroup_free(struct kis_cgroup *cg);
/* The record of a group that outlives the engine's process (a session's,
 * a VM's): the file name in the directory dir_fd, written 0600. One
 * format, here only: the mode on the first line, then each controller's
 * leaf and its parent, one path a line, "-" for none. */
KIS_HIDDEN int kis_cgroup_save(int dir_fd, const char *name, const struct kis_cgroup *cg,
			       struct kis_error **err);
/* The group recorded in dir_fd's name, or NULL (none, or not ours: only a
 * kis group that kis_cgroup_path_ok takes is read back). */
KIS_HIDDEN struct kis_cgroup *kis_cgroup_load(int dir_fd, const char *name);
/* A group's path read back from a record (a file anyone who can write its
 * directory can forge), checked before a destroy kills what it holds:
 * under /sys/fs/cgroup/, every part non-empty and neither "." nor "..",
 * and not a hierarchy's root. */
KIS_HIDDEN bool kis_cgroup_path_ok(const char *path);

/* ------------------------------------------------------- the sandbox's ids */

/* Each sandbox's ids 0..65535 are a block of host ids of its own (see
 * userns.c): never host uid 0, never a user account's. */
#define KIS_IDS_FIRST 0x60000000u /* 1610612736 */
#define KIS_IDS_COUNT 65536u
#define KIS_IDS_BLOCKS 4096u      /* up to 0x70000000 - 1 = 1879048191 */
/* The first host id of the block of this sandbox. */
KIS_HIDDEN uid_t kis_sandbox_ids(const char *sandbox_id);
/* A user namespace mapping ids 0..count-1 onto first..first+count-1, as
 * an O_CLOEXEC descriptor (for setns(2), bwrap --userns, MOUNT_ATTR_IDMAP).
 * Needs CAP_SETUID and CAP_SETGID (the engine as root). */
KIS_HIDDEN int kis_userns_open(uid_t first, uint32_t count, int *fd, struct kis_error **err);
/* The same, and a network namespace owned by it (egress's S): both as
 * O_CLOEXEC descriptors. */
KIS_HIDDEN int kis_userns_open_net(uid_t first, uint32_t count, int *userns_fd, int *netns_fd,
				   struct kis_error **err);
/* An ordinary user's subordinate ids (subuid(5), subgid(5); src/confine/
 * subid.c): the first range of each, at most 65536 ids. */
struct kis_subids {
	unsigned long uid_start, uid_count, gid_start, gid_count;
};
/* Whether the user uid has both ranges and newuidmap and newgidmap are
 * installed (Debian uidmap). */
KIS_HIDDEN bool kis_subids_of(uid_t uid, struct kis_subids *out);
/* The ranges alone (subid_lib.c with libsubid, or subid_remote.c through
 * kis-helper in the static kis): false when uid has none. */
KIS_HIDDEN bool kis_subids_lookup(uid_t uid, struct kis_subids *out);
KIS_HIDDEN const char *kis_newuidmap_path(void);
KIS_HIDDEN const char *kis_newgidmap_path(void);
/* A user namespace of the caller's own ids (an ordinary user's), its maps
 * written by write_maps(pid of a process in it, arg) from here (for a
 * subordinate range, newuidmap and newgidmap, started by the caller's
 * layer), as an O_CLOEXEC descriptor its owner may setns(2) into. */
KIS_HIDDEN int kis_userns_open_by(int (*write_maps)(pid_t pid, void *arg), void *arg, int *fd,
				  struct kis_error **err);
/* Rootless (the engine is an ordinary user): in a child before exec,
 * unshare a user namespace and map its id 0 onto the caller's own uid and
 * gid alone (setgroups denied). -1 with errno: user namespaces are off. */
KIS_HIDDEN int kis_userns_own(uid_t uid, gid_t gid);
/* In a child that has just made its user namespace: setgroups "deny", then
 * one id each, uid `in` inside onto `out` outside (and the gids alike).
 * No allocation (between fork and exec). -1 with errno. */
KIS_HIDDEN int kis_userns_map_self(uid_t in, uid_t out, gid_t gin, gid_t gout);
/* In a child about to become a sandbox (no allocation; -1 with errno):
 * kis_idmap_private_ns: a private mount namespace of its own (nothing
 * propagates to the host's); kis_stage_tmpfs: a small tmpfs (0755) on dir
 * in it, where what the sandbox is given is placed at paths that say
 * nothing of the host and that an unprivileged bwrap can reach;
 * kis_idmap_bind: a copy of the mount at src (a directory or a file) on
 * target, through userns_fd's map (-1: as it is), nosuid and nodev;
 * kis_idmap_overlay: an overlay made anew over idmapped layers (lower, and
 * ws_dir holding upper/ and work/) on target, mounted as the sandbox's
 * root (first). */
KIS_HIDDEN int kis_idmap_private_ns(void);
KIS_HIDDEN int kis_stage_tmpfs(const char *dir);
KIS_HIDDEN int kis_idmap_bind(const char *src, const char *target, int userns_fd);
KIS_HIDDEN int kis_idmap_overlay(const char *lower, const char *ws_dir, const char *target,
				 int userns_fd, uid_t first);
/* Mount an overlay over idmapped layers as the sandbox's root would own
 * it: fsuid and fsgid first, the effective capabilities raised again from
 * the permitted set (overlayfs keeps its mounter's credentials); then back
 * to fsuid 0 with kis_ids_root_end. -1 with errno. */
KIS_HIDDEN int kis_as_ids_root(uid_t first);
/* A mount's source (issue 21), as kis_idmap_bind and kis_idmap_overlay
 * but strict: each path is the store's own and canonical, opened with
 * openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) and cloned by its
 * fd, so no link on the way (planted by a sandbox that wrote the tree, or
 * by anyone in the store) moves the bind elsewhere; ro: the mount is
 * read-only (MOUNT_ATTR_RDONLY), and an overlay is joined with no upper
 * layer (upper over lower, both as lower layers: overlayfs is then
 * read-only by construction, Documentation/filesystems/overlayfs.rst
 * "Multiple lower layers"). */
KIS_HIDDEN int kis_idmap_bind_source(const char *src, const char *target, int userns_fd, bool ro);
KIS_HIDDEN int kis_idmap_overlay_source(const char *lower, const char *ws_dir, const char *target,
					int userns_fd, uid_t first, bool ro);
KIS_HIDDEN void kis_ids_root_end(void);
/* kis_as_ids_root with a uid and a gid of their own. */
KIS_HIDDEN int kis_as_ids(uid_t uid, gid_t gid);

/* The host tier's workspace without a chown of every file (issue 41): a
 * user namespace whose maps swap uid_a with uid_b and gid_a with gid_b,
 * every other id mapping to itself (for MOUNT_ATTR_IDMAP: the files'
 * owner is then seen as the sandbox's user and the other way round). */
KIS_HIDDEN int kis_userns_swap_open(uid_t uid_a, uid_t uid_b, gid_t gid_a, gid_t gid_b, int *fd,
				    struct kis_error **err);
/* A detached mount (*out, O_CLOEXEC) showing the workspace through
 * userns_fd's map: an idmapped bind of path, or for an overlay clone
 * (lower: its base tree, ws_dir holding upper/ and work/) a new overlay
 * over idmapped layers, mounted as uid:gid. Paths as the _source
 * variants: no link followed. -1 with errno. */
KIS_HIDDEN int kis_idmap_view(const char *path, const char *lower, const char *ws_dir,
			      int userns_fd, uid_t uid, gid_t gid, int *out);
/* In a child before exec (no allocation): a mount namespace of its own,
 * slave to the host's, with the view moved onto target. -1 with errno. */
KIS_HIDDEN int kis_idmap_view_enter(int view_fd, const char *target);

#endif
