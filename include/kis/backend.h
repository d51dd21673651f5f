/* SPDX-License-Identifier: MIT */
/* kis/backend.h: the interface every backend implements (one table per
 * backend), its probed capabilities, and selection among them. */
#ifndef KIS_BACKEND_H
#define KIS_BACKEND_H

#include <stdbool.h>
#include <sys/types.h>

#include "kis/error.h"
#include "kis/profile.h"
#include "kis/io.h"
#include "kis/result.h"

/* The limits a backend can enforce are KIS_LIMIT_* bits (kis/limits.h). */

/* What a backend can enforce on this host, measured by probing. */
struct kis_caps {
	bool present;            /* usable on this host at all */
	char why_absent[200];    /* when !present: what is missing */
	bool cow, shell, native, seccomp, snapshot, tty;
	bool mounts;             /* places the profile's mounts (issue 21) */
	unsigned net_modes;      /* bits (1u << enum kis_net_mode) */
	unsigned limits;         /* KIS_LIMIT_* bits */
	char accel[16];          /* microvm: "kvm" or "tcg"; else "" */
	char engines[48];        /* wasm: the engines this host has, best first,
				  * space-separated ("interpreter"); else "" */
	char jail[200];          /* microvm: what confines the VMM here (the
				  * engine as root, or an ordinary user's
				  * rootless jail); else "" */
	/* the native tiers where no cgroup binds the memory and pids
	 * defaults (an ordinary user's run): what binds them instead, or
	 * that nothing does; "" where a cgroup binds them */
	char default_limits[200];
};

/* What one command of the engine hands every backend (as crun passes
 * libcrun_context_t): made once per command by the engine (engine/ctx.c),
 * so no backend falls back to globals, the environment or the default
 * store. It outlives every plan and hook call of the command. */
struct kis_ctx {
	const char *store_root; /* the store the command uses; NULL: the default */
	const char *agent;      /* the kis-agent to start in a sandbox; NULL: none found */
	const char *agent_why;  /* when agent is NULL: why (a backend that needs it refuses) */
	bool thorough;          /* probes that cost time may run (kis sandbox backends) */
	/* The microvm guest's directory for this store (the engine's lookup,
	 * src/engine/guest.c), found on first use; NULL: none. */
	const char *(*guest_dir)(const struct kis_ctx *ctx);
	/* Say what a slow step is doing ("building the guest's initramfs"),
	 * for a caller that shows progress; a no-op when nobody watches. */
	void (*progress)(const struct kis_ctx *ctx, const char *what);
	void *priv;             /* the engine's */
};

/* One of the profile's mounts, resolved by the engine in the store: the
 * backend never sees the caller's words for a source, only the store's
 * own paths (canonical: the store root has no symlink in it). */
struct kis_mount_src {
	const char *source;   /* the id, for --dry-run and errors */
	const char *target;   /* normalised (kis_profile: mounts[].target) */
	bool base;            /* a base's tree */
	bool read_only;       /* a base always; a workspace when asked */
	const char *path;     /* host path of its files: bases/<b>/tree, a workspace's tree or merged */
	/* An overlay workspace's layers (kis_workspace_layers), for a backend
	 * that joins them itself: the base's tree and the workspace's
	 * directory (upper/, work/); NULL otherwise. */
	const char *lower, *ws_dir;
	/* The cache directory of the base under it (a base's own, or an
	 * overlay workspace's base's), where a backend keeps what it derives
	 * from that base (the microvm's image of its tree); NULL otherwise. */
	const char *cache;
};

/* One run, fully resolved: limits already defaulted, ids minted. */
struct kis_run_request {
	const struct kis_ctx *ctx;
	const struct kis_profile *profile;
	struct kis_limits limits;      /* resolved (no zeroes) */
	char *const *argv;
	const char *workspace_path;    /* host path of the workspace, or NULL */
	/* An overlay workspace's layers (kis_workspace_layers), for a backend
	 * that joins them itself; NULL otherwise. */
	const char *workspace_lower, *workspace_upper, *workspace_cache;
	/* The profile's mounts, resolved and held; NULL (n_mounts 0) in the
	 * plan a run makes before its clone, where only profile->n_mounts
	 * tells that there will be some (amend places them). */
	const struct kis_mount_src *mounts;
	size_t n_mounts;
	const char *sandbox_id;
	struct kis_io io;
	/* The store the engine opened for this run, its canonical root
	 * (kis_store_root), or NULL where the run has none: a backend that
	 * keeps something there (the wasm tier's code cache) uses it as it
	 * is, rather than opening the store again. */
	const char *store_dir;
	/* The plan is a session's (start_session follows, argv is the agent
	 * serving the session's socket), not a one-shot run's: said here,
	 * never guessed from argv. */
	bool session;
	/* kis_run_options' pod_net and pod_netns_fd (a session's only) */
	bool pod_net;
	int pod_netns_fd;
	/* kis_run_options' discard_workspace (a session's only) */
	bool discard_workspace;
};

struct kis_plan; /* backend-private: what the backend will do, validated */

/* A session's place on the host, handed to the backend's session hooks. */
struct kis_session_ctx {
	const char *id;       /* the session id ("s-...") */
	int dir_fd;           /* sessions/<id>/ (0700), open O_DIRECTORY */
	const char *dir_path; /* its path (during create, a temporary name that is
			       * renamed to sessions/<id> once the session is up;
			       * NULL in session_state) */
	int listen_fd;        /* the listening socket the agent serves; -1 after create */
};

/* One command in a session whose agent serves the session's socket: what
 * the engine resolved of the caller's exec (kis_session_exec), for the
 * backend's session_exec. */
struct kis_session_call {
	const char *id;            /* the session's id, for messages */
	char *const *argv;
	char *const *env;          /* NULL: the session's environment */
	char *const *env_add;      /* "K=V" for this command only; may be NULL */
	const char *cwd;           /* NULL: the session's working directory */
	bool shell;                /* argv[0] is a shell line; cwd and env carry over */
	bool tty;
	unsigned rows, cols;       /* the terminal's first size */
	int resize_fd;             /* readable: re-read tty_fd's size and send it; -1 none */
	int tty_fd;                /* the caller's terminal; -1 none */
	struct kis_io io;          /* cancel_fd: each byte read is a signal to forward */
	struct kis_limits limits;  /* the exec's, merged with the session's (resolved) */
	int cpu_fd;                /* the session's CPU accounting (session_cpu_fd); -1 none */
	const struct kis_exec_container *container; /* kis_exec_options' */
	/* A fresh connection to the session's agent (the engine's: the
	 * session's socket), or -1 with *err; called again when a channel
	 * fails before the command was sent. */
	int (*connect)(void *arg, struct kis_error **err);
	void *connect_arg;
};

struct kis_backend {
	const char *name;
	enum kis_tier tier;
	/* The sandbox joins an overlay workspace's layers in an overlay of its
	 * own (its id map needs it): the engine mounts the host's view anew
	 * after each run and exec that used the workspace. */
	bool own_workspace_view;
	/* The engine is an ordinary user: the sandbox joins an overlay
	 * workspace's layers in a namespace of its own (issue 17), as above;
	 * the others see a workspace by a host path, which an ordinary user's
	 * overlay clone has not (src/store/view.c). */
	bool rootless_layers;
	/* The engine is an ordinary user: RLIMIT_NPROC, the pids fallback
	 * where no cgroup binds, does not bind this backend's commands. */
	bool rootless_nproc_unbound;
	/* The engine is root: the sandbox joins an overlay workspace's layers
	 * in an overlay of its own when the workspace's owner is not the
	 * sandbox's user (landlock's idmapped view, issue 41), as above. */
	bool root_layers;
	/* Fill caps from what this host offers. Never fails: an absent backend
	 * sets present = false and says why. */
	void (*probe)(const struct kis_ctx *ctx, struct kis_caps *caps);
	/* Turn a request into a plan, touching nothing on the host. Refuse what
	 * cannot be enforced (KIS_E_PROFILE_UNSATISFIABLE naming the field,
	 * KIS_E_TTY_UNSUPPORTED). The check lives here, with the backend, so it
	 * holds however the call arrives. */
	int (*plan)(const struct kis_caps *caps, const struct kis_run_request *req,
		    struct kis_plan **out, struct kis_error **err);
	/* Place in the plan what the run made after planning it. A run plans
	 * before it makes anything, so that a refusal costs no clone; then it
	 * clones the base (or opens the workspace) and holds the mounts, and
	 * hands amend the plan's request with workspace_path, its layers and
	 * the mounts filled in (the rest as planned). Touches nothing on the
	 * host and refuses nothing the plan took (the profile is the same):
	 * < 0 only when out of memory. The plan is made once (issue 42). */
	int (*amend)(struct kis_plan *plan, const struct kis_run_request *req,
		     struct kis_error **err);
	/* The plan as JSON (malloc'ed), for --dry-run. */
	char *(*describe)(const struct kis_plan *plan);
	/* Carry the plan out. A command that ran and failed is a successful run
	 * (the reason says how it ended); < 0 only when the engine failed. */
	int (*run)(struct kis_plan *plan, struct kis_result *res, struct kis_error **err);
	void (*plan_free)(struct kis_plan *plan);
	/* Sessions (NULL when the backend has none): start the plan's command,
	 * the agent, detached from the caller; it serves ctx->listen_fd (its
	 * fd 3 on the native tiers). *pid receives the pid on the host whose
	 * life is the session's (the agent, crun's container init, QEMU). The
	 * backend may keep its own files in ctx->dir_fd. */
	int (*start_session)(struct kis_plan *plan, const struct kis_session_ctx *ctx, pid_t *pid,
			     struct kis_error **err);
	/* Optional: after destroy has stopped the agent (SIGTERM, then SIGKILL),
	 * remove what the backend made for the session (container, VM files).
	 * Idempotent. */
	int (*end_session)(const struct kis_session_ctx *ctx, struct kis_error **err);
	/* Optional: the session's state as the runtime sees it ("running",
	 * "stopped", ...); NULL: judged from the pid's life. */
	const char *(*session_state)(const struct kis_session_ctx *ctx);
	/* Optional: after an exec in the session ended by a signal or a
	 * failure, say whether a limit the runtime enforces caused it (the
	 * session's cgroup: memory_limit, pids_limit); set res->reason and
	 * res->detail and return 1, or return 0. */
	int (*session_explain)(const struct kis_session_ctx *ctx, struct kis_result *res);
	/* Optional: the session's CPU accounting (its cgroup's cpuacct.usage
	 * or cpu.stat) opened read-only, so an exec's limits.cpu_ms counts
	 * every process it makes; -1 where there is none. */
	int (*session_cpu_fd)(const struct kis_session_ctx *ctx);
	/* Optional: refuse by name (KIS_E_PROFILE_UNSATISFIABLE) an exec's
	 * limits the session's tier cannot keep, as plan refuses them at
	 * create; want holds only the limits the exec names. */
	int (*exec_limits)(const struct kis_limits *want, struct kis_error **err);
	/* Run one command in a session through its agent (the backends with
	 * start_session; NULL for one whose sessions keep no process, where
	 * each exec is a run of its own). res as for run; the engine's own
	 * clock passing the exec's wall time sets the reason timeout. 0 the
	 * exec ended; 1 the agent's channel closed before the command's end
	 * (the engine tells a destroy under it from a fault); < 0 failure. */
	int (*session_exec)(const struct kis_session_call *call, struct kis_result *res,
			    struct kis_error **err);
	/* Optional: put a base's tree in mount slot `slot` of a running
	 * session (the microvm: the slot's lower disk swapped for the base's
	 * image over QMP, the VM's device set unchanged), for a pod
	 * container's root (kis_session_attach_base). */
	int (*session_attach)(const struct kis_session_ctx *ctx, int slot,
			      const struct kis_mount_src *src, struct kis_error **err);
	/* Optional: what a killed run of this backend left that only the
	 * backend can remove (oci: the container). The run recorded it
	 * (core/record.h) as the line "<leftover_record> <value>" before
	 * making it; the engine's sweep of the dead run's owner hands value
	 * to reap with the owner's id (a record names only what its run made
	 * under that id): 1 something was there (removed, or left under
	 * dry_run), 0 nothing of the owner's is there, < 0 failure with *err.
	 * leftover_kind names it in `kis sandbox gc`'s report. */
	const char *leftover_record, *leftover_kind;
	int (*reap)(const char *owner, const char *value, bool dry_run, struct kis_error **err);
	/* Optional: `kis sandbox gc` beyond one store: what the backend left
	 * from runs of any store whose engine is gone. */
	void (*collect)(void);
};

/* Probe b for the store at store_root (NULL: the default). Probes that
 * cost time (creating a probe cgroup, booting nothing) run only when
 * thorough is set, as `kis sandbox backends` does; selection runs the
 * cheap probes and a backend's plan measures what a profile needs. */
KIS_API void kis_backend_probe(const struct kis_backend *b, const char *store_root, bool thorough,
			       struct kis_caps *caps);

/* Every backend compiled in, strongest tier last. */
KIS_API const struct kis_backend *const *kis_backends(size_t *n);
KIS_API const struct kis_backend *kis_backend_find(const char *name);

/* Which backend runs this profile and command: a pinned backend or tier
 * must be present (else KIS_E_TIER_UNAVAILABLE); auto picks the most
 * restrictive present tier that can run the command and never the process
 * tier. caps receives the chosen backend's probe. */
KIS_API int kis_select_backend(const struct kis_profile *p, char *const *argv,
			       const char *store_root, const struct kis_backend **out,
			       struct kis_caps *caps, struct kis_error **err);

#endif
