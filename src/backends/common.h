/* SPDX-License-Identifier: MIT */
/* Internal: what native backends share: the plan of a native command
 * (argv, env, cwd, limits) and the check of limits against capabilities. */
#ifndef KIS_BACKENDS_COMMON_H
#define KIS_BACKENDS_COMMON_H

#include <linux/filter.h>
#include <jansson.h>
#include <seccomp.h>

#include "core/util.h"
#include "exec/exec.h"
#include "kis/backend.h"

struct kis_native_plan {
	char **argv;
	char **envp;
	char *cwd;      /* host-side path to chdir to, NULL: inherit */
	struct kis_limits limits;
	struct kis_io io;
	bool tty;
	/* rootless, RLIMIT_NPROC would not bind the command: the plan says
	 * pids is not limited, never that it is. No backend sets it now:
	 * bubblewrap's, once thought unbound, binds (bubblewrap.c,
	 * start_prepare, says why) */
	bool nproc_unbound;
};

/* An external program: $env_var (NULL: none) when set (and executable), else the first
 * executable candidate; NULL when there is none. */
/* The one network check of every backend's plan (issue 20): the mode must
 * be one this backend enforces on this host (caps->net_modes; for egress,
 * why it is not available here), else profile_unsatisfiable naming
 * network.mode with hint (what to use instead; NULL: none); and host
 * networking needs its escape hatch (escape_hatch_forbidden). */
int kis_check_network(const struct kis_caps *caps, const struct kis_profile *p,
		      const char *backend, const char *hint, struct kis_error **err);
/* The context's agent, copied into *out; the engine's reason when none
 * was found (KIS_E_TIER_UNAVAILABLE). */
int kis_ctx_agent(const struct kis_ctx *ctx, char **out, struct kis_error **err);
/* The first of cands that is executable, or override when it is set (a
 * test build's seam, KIS_TEST_GETENV in core/test_hook.h; NULL in what
 * ships): a missing override is no tool, never a fallback to cands. */
const char *kis_find_tool(const char *override, const char *const *cands, size_t n);
/* Whether the walk of rel (relative) beneath dirfd meets a symbolic link,
 * its last component included (openat2(2) RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, no O_NOFOLLOW): 1 yes (or it would leave dirfd); 0
 * no, or the walk ends at a missing component first (what bwrap would make
 * as a directory); -1 another error, in errno. For the mount points and
 * working directories bwrap walks before pivot_root(2). */
int kis_walk_meets_link(int dirfd, const char *rel);
/* Whether env[0..n) sets KEY. */
bool kis_env_has(char *const *env, size_t n, const char *key);
/* Refuse each non-zero limit the backend cannot enforce, naming the field. */
int kis_check_limits(const struct kis_caps *caps, const struct kis_profile *p,
		     const char *backend, struct kis_error **err);
/* The targets of the profile's mounts on a backend that binds them into a
 * root: host view (bubblewrap, oci): refused with root 'workspace' (the
 * mount point would be made inside a tree the sandbox wrote, where a
 * symlink could send it elsewhere in the runtime's mount namespace), and a
 * target in the host's read-only system view (/usr, /etc, ... of
 * confine/sysview.c) is refused naming it (the mount point would have to
 * be made in the host's directory). */
int kis_check_mount_targets(const struct kis_profile *p, const char *backend,
			    struct kis_error **err);
/* Environment of a sandboxed command: a default PATH and HOME, then the
 * profile's env (which wins). Nothing is inherited from the caller. */
int kis_native_plan_init(struct kis_native_plan *n, const struct kis_run_request *req,
			 struct kis_error **err);
/* The plan's cwd and, unless the profile gives one, HOME made again from
 * req, which has the workspace the run made after planning (the
 * backends' amend, kis/backend.h). */
int kis_native_plan_amend(struct kis_native_plan *n, const struct kis_run_request *req,
			  struct kis_error **err);
void kis_native_plan_release(struct kis_native_plan *n);
char *kis_native_plan_describe(const struct kis_native_plan *n, const char *backend);
int kis_native_plan_run(struct kis_native_plan *n, int (*child_setup)(void *, struct kis_error **),
			void *ctx, const struct kis_supervise_hooks *hooks, struct kis_result *res,
			struct kis_error **err);

/* The cgroup of one run (memory, pids), when the host lets us make one. */
struct kis_cgroup;
struct kis_run_cgroup {
	struct kis_cgroup *cg; /* NULL: no cgroup for this run */
	/* the limits its cgroup binds (KIS_CGROUP_LIMITS), 0 the others;
	 * pids: the command's (limits.pids) */
	struct kis_limits limits;
	/* the engine's own processes in the group (bwrap, an agent, a worker,
	 * pasta): pids.max is pids plus these (kis_host_cgroup_open) */
	unsigned engine_pids;
	bool has_cpu; /* cpu_fd is the group's CPU accounting (kis_cgroup_cpu_fd) */
	int cpu_fd;
	/* rootless with no cgroup: the documented fallbacks (README "As an
	 * ordinary user"), set in the child by kis_run_cgroup_join; 0: none */
	uint64_t fb_nproc, fb_data;
};
/* The rlimits an ordinary user's run falls back to for the defaults no
 * cgroup binds (issue 40 item 1): RLIMIT_NPROC = the user's threads now +
 * pids + engine_pids (the kernel counts every thread of the real uid, in
 * each user namespace up the chain), RLIMIT_DATA = memory_bytes (each
 * process's private writable memory, not the sandbox's total). 0 where
 * the engine is root, where a cgroup binds it, or where the limit is 0.
 * bound: the KIS_LIMIT_MEMORY/PIDS bits a cgroup already binds. */
void kis_rlimit_fallback(const struct kis_limits *l, unsigned bound, unsigned engine_pids,
			 uint64_t *nproc, uint64_t *data);
/* Fill caps->default_limits for a native backend's probe (the defaults
 * where c->limits has no cgroup for them, an ordinary user's). */
void kis_caps_default_limits(struct kis_caps *c, bool nproc_unbound);
/* How memory_bytes and pids bind for a run whose cgroup binds `bound`,
 * for a plan (--dry-run): {"memory_bytes": "...", "pids": "..."}. */
json_t *kis_limits_binding_json(const struct kis_limits *l, unsigned bound, bool nproc_unbound);
/* Make the run's group with the limits in `enforceable` (KIS_LIMIT_*). */
int kis_run_cgroup_open(struct kis_run_cgroup *rc, const char *sandbox_id,
			const struct kis_limits *l, unsigned enforceable, struct kis_error **err);
/* One more of the engine's processes joins the group (pasta, once its
 * start is done): pids.max grows by one before the move, which the
 * limit does not refuse. */
int kis_run_cgroup_engine_joins(struct kis_run_cgroup *rc, struct kis_error **err);
/* In the child before exec. */
int kis_run_cgroup_join(struct kis_run_cgroup *rc, struct kis_error **err);
/* explain (memory_limit, pids_limit) and kill_all hooks for the supervisor. */
void kis_run_cgroup_hooks(struct kis_run_cgroup *rc, struct kis_supervise_hooks *h);
void kis_run_cgroup_close(struct kis_run_cgroup *rc);
/* After a failed exec in a session: blame memory_limit or pids_limit when
 * the session's group counted new OOM kills or refused forks since the last
 * exec (counts kept in `file` under dir_fd). 1 when it set res->reason. */
int kis_cgroup_explain_since(const struct kis_cgroup *cg, int dir_fd, const char *file,
			     struct kis_result *res);
/* The limits of KIS_CGROUP_LIMITS (confine.h) a cgroup can enforce here. */
unsigned kis_cgroup_limits_available(void);
/* The KIS_CGROUP_LIMITS bits a profile's limits name (non-zero: asked for,
 * not a default), which a native tier refuses when no cgroup binds them. */
unsigned kis_cgroup_limits_asked(const struct kis_limits *l);

extern const struct kis_backend kis_backend_process;
extern const struct kis_backend kis_backend_landlock;
extern const struct kis_backend kis_backend_bubblewrap;
extern const struct kis_backend kis_backend_oci;
extern const struct kis_backend kis_backend_wasm;
extern const struct kis_backend kis_backend_microvm;

/* Compiled seccomp programs, cached where only this user may write
 * (/run/kis-sandbox for root, $XDG_RUNTIME_DIR/kis-sandbox otherwise):
 * libseccomp's compile costs milliseconds a run, the file a read. */
struct kis_bpf {
	struct sock_filter *prog; /* malloc'd */
	unsigned short len;       /* instructions */
};
/* The cache directory into buf: 0, or -1 (none usable). */
KIS_HIDDEN int kis_cache_dir(char *buf, size_t len);
/* What a compiled program depends on besides its own rules: this
 * program's file, libseccomp's version, the kernel release. */
KIS_HIDDEN int kis_cache_key(char *buf, size_t len);
/* The program named name (its key in it) from the cache, or compiled from
 * make(arg) (a libseccomp context, released here) and stored. */
KIS_HIDDEN int kis_bpf_cached(const char *name, scmp_filter_ctx (*make)(void *arg), void *arg,
			      struct kis_bpf *out, struct kis_error **err);

#endif
