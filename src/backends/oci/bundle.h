/* SPDX-License-Identifier: MIT */
/* Internal to the oci backend: the OCI bundle (config.json per the OCI
 * runtime specification, the root:host rootfs skeleton) and crun itself. */
#ifndef KIS_OCI_BUNDLE_H
#define KIS_OCI_BUNDLE_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "kis/error.h"
#include "kis/profile.h"

/* Where the agent appears inside every container (bind-mounted read-only). */
#define KIS_OCI_AGENT_PATH "/.kis/agent"
/* Container ids are "kis-" + the sandbox or session id: the prefix is how
 * the collector recognises ours in crun's state directory. */
#define KIS_OCI_PREFIX "kis-"
/* Where the engine keeps its runtime files (the staged agent, the
 * bundles): /run/kis for root; for an ordinary user (issue 17)
 * $XDG_RUNTIME_DIR/kis, or /tmp/kis-run-UID, a 0700 directory of its own
 * (refused when it is anyone else's). NULL when there is none. */
char *kis_oci_run_dir(void);
/* Whether kis_oci_run_dir would give one, making nothing (for the probe). */
bool kis_oci_run_dir_usable(void);
/* crun's state root: root's is crun's default, /run/crun; an ordinary
 * user's is <run dir>/crun. Passed explicitly so the collector knows where
 * to look. */
char *kis_oci_state_root(void);
#define KIS_OCI_STATE_ROOT kis_oci_state_root()
/* Our bundles: one private directory per container, on tmpfs. */
char *kis_oci_bundles_dir(void);
#define KIS_OCI_BUNDLES kis_oci_bundles_dir()
/* The engine is an ordinary user: crun runs in a user namespace of the
 * caller's own (0 = the caller's uid, the only id mapped), with no cgroup
 * of its own, as `crun` rootless does on a host without delegation. */
bool kis_oci_rootless(void);
/* Each container's cgroup is /<container id> in every hierarchy: no shared
 * parent, so no race between one removal of an empty parent and another
 * container's creation under it; crun removes the group on delete. */

/* One of the profile's mounts in config.json: bound from its staging
 * directory in the bundle (source), where crun's own mount namespace holds
 * the store's tree, bound there by fd (struct kis_oci_stage). */
struct kis_oci_mount {
	const char *target;
	const char *source;
	bool ro;
};

/* What crun's child binds before exec (kis_oci_crun_staged): each store
 * path, resolved with no symlink (kis_idmap_bind_source), onto its
 * staging directory, in a mount namespace of crun's own that is a slave of
 * ours (nothing reaches the host's table; it goes with crun, the
 * container keeps its copy). */
struct kis_oci_stage {
	size_t n;
	const char *src[KIS_MOUNTS_MAX];
	char dst[KIS_MOUNTS_MAX][320];
	bool ro[KIS_MOUNTS_MAX];
	bool hybrid; /* the hybrid-layout workaround as well */
	bool rootless; /* the engine is an ordinary user (kis_oci_rootless) */
	/* an overlay workspace: its layers (the base's tree, the workspace's
	 * directory holding upper/ and work/) joined in an overlay on ov_dst in
	 * crun's namespace: rootless, where the caller may mount one; as root,
	 * over layers shown through the sandbox's id map (overlayfs itself
	 * cannot be idmapped, its layers can) */
	const char *ov_lower, *ov_ws;
	/* as root, a workspace that is a plain tree: bound on ov_dst through
	 * the sandbox's id map */
	const char *ws_src;
	char ov_dst[300];
	/* as root (issue 17, root inside is not root outside): the sandbox's
	 * user namespace (ids 0..65535 onto the host block from ids, made by
	 * kis_userns_open as bubblewrap's is), which crun joins by path; the
	 * workspace and each mount's source are shown through its map, so
	 * that they appear owned by the sandbox's root. -1: none (rootless,
	 * whose namespace maps the caller's one id) */
	int userns_fd;
	uid_t ids;
	/* rootless with a subordinate range (kis_subids_of): the namespace
	 * newuidmap mapped, which crun's child joins instead of making one
	 * of the caller's one id; -1: none */
	int rootless_ns_fd;
	/* the mounts' overlay-workspace layers (NULL: a plain tree at src) */
	const char *m_lower[KIS_MOUNTS_MAX], *m_ws[KIS_MOUNTS_MAX];
};

struct kis_oci_spec {
	char *const *args;        /* the container process (the agent) */
	char *const *env;
	const char *cwd;          /* inside the container */
	enum kis_root_mode root;
	const char *rootfs;       /* host path of root.path */
	const char *workspace;    /* root:host: bound read-write at /workspace; may be NULL */
	const char *agent;        /* host path of the static agent */
	enum kis_net_mode net;
	const char *netns_path;   /* egress: the network namespace to join */
	const char *resolv_conf;  /* egress: host path bound at /etc/resolv.conf */
	const struct kis_limits *limits; /* resolved */
	/* the engine's own processes in the container's group (the agent,
	 * pasta, a session's exec worker): added to pids.limit, which is the
	 * command's (limits.pids) */
	unsigned engine_pids;
	const char *cgroups_path;
	const struct kis_oci_mount *mounts; /* root:host only */
	size_t n_mounts;
	bool user_ns;             /* the engine is not root: map it to root inside */
	/* the engine is root: the sandbox's own user namespace (struct
	 * kis_oci_stage userns_fd), joined by this path; NULL: none */
	const char *userns_path;
	bool no_cgroup;           /* rootless: no cgroupsPath, no memory/pids resources */
	uint32_t id_count;        /* rootless: ids mapped from crun's namespace (0: 1) */
	uid_t host_uid;
	gid_t host_gid;
};

/* The config.json document for s. */
int kis_oci_config_build(const struct kis_oci_spec *s, json_t **out, struct kis_error **err);
/* root:host: fill the empty directory rootfs_fd with the mount points
 * config.json binds onto, and the host's symlinked system dirs (/bin ->
 * usr/bin on a merged-/usr system) as the same symlinks. */
int kis_oci_rootfs_skeleton(int rootfs_fd, struct kis_error **err);
/* root:host without mounts of the profile's own: one skeleton shared by
 * every container, <run dir>/rootfs-<hash of the host's layout>, made once
 * (make) and then only looked at. Each container binds it in a mount
 * namespace of its own and remounts it read-only there; crun never writes
 * into it (every mount point is in it, and as the sandbox's ids it could
 * not: root owns it, 0755). A run then makes and removes one directory
 * (its bundle) instead of fifteen: rmdir(2) on this host's ext4 (mounted
 * with discard, /run included) costs about 0.4 ms each. out receives the
 * path. */
int kis_oci_shared_rootfs(char *out, size_t len, bool make, struct kis_error **err);

/* ---- crun (crun.c) ---- */

/* kis_userns_open_by's writer for an ordinary user's subordinate range
 * (arg: struct kis_subids): newuidmap PID 0 UID 1 1 START COUNT, and
 * newgidmap the same. -1 with errno when either refuses. */
int kis_oci_write_subid_maps(pid_t pid, void *arg);

/* Where crun lives, NULL when not installed. */
const char *kis_oci_crun_path(void);
/* Which cgroup layout crun will see: 2 pure v2, 1 pure v1, 3 hybrid (v1
 * controllers plus a v2 mount at /sys/fs/cgroup/unified), 0 none. */
int kis_oci_cgroup_layout(void);
/* The hybrid-layout workaround itself, for a process about to exec crun
 * (also kis-runtime): a private mount namespace, a slave of ours, without
 * the v2 mount. Async-signal-safe; < 0 with errno when it fails. */
int kis_oci_hybrid_workaround(void);
/* Run crun with argv (argv[0] ignored; crun's path is used) in a private
 * mount namespace (on a hybrid host, without the v2 mount crun refuses).
 * stdout of crun into *out (malloc'ed, may be NULL); its stderr into
 * errbuf. fd_keep >= 0 is passed as the child's fd 3 (for --preserve-fds).
 * Returns crun's exit status (>= 0), < 0 when it could not be run. */
int kis_oci_crun(char *const *argv, int fd_keep, char **out, char *errbuf, size_t errlen,
		 struct kis_error **err);
/* The same with the mounts' sources staged first (st may be NULL). */
int kis_oci_crun_staged(char *const *argv, int fd_keep, struct kis_oci_stage *st,
			char **out, char *errbuf, size_t errlen, struct kis_error **err);
int kis_oci_crun_spawn_staged(char *const *argv, int fd_keep, struct kis_oci_stage *st,
			      pid_t *pid, struct kis_error **err);
/* The same, not waited for: stdin, stdout and stderr on /dev/null (pass
 * --log for crun's errors), in a process group of its own. */
int kis_oci_crun_spawn(char *const *argv, int fd_keep, pid_t *pid, struct kis_error **err);
/* `crun state ID`: status string ("running", "stopped", ...) into status,
 * the init's host pid into *pid. < 0 when crun does not know it. */
int kis_oci_state(const char *ctr_id, char *status, size_t len, pid_t *pid);
/* Move pid into each group crun made for container ctr_id (every v1
 * hierarchy it has one in, or its v2 group): a helper of the container
 * (its pasta) is then counted and limited with it, and killed with it.
 * !sched: not into v1's cpu hierarchy when it is one of its own (the
 * helper keeps a scheduling entity of its own; cpuacct still counts it). */
int kis_oci_cgroup_join(const char *ctr_id, pid_t pid, bool sched, struct kis_error **err);
/* crun delete -f, then the bundle directory and the cgroup parent when it
 * is empty. Idempotent. */
int kis_oci_remove(const char *ctr_id, struct kis_error **err);

/* For a guard whose engine died during a session's start (exec/tether.h):
 * remove the container whatever point crun had reached, its processes
 * killed through its groups even where crun wrote no state yet. */
void kis_oci_remove_abandoned(const char *ctr_id);
/* The bundle directory, for a container crun
 * has deleted itself. */
void kis_oci_remove_bundle(int bundles_fd, const char *ctr_id);
/* Delete our containers whose run or session no longer exists. Cheap when
 * there is nothing to collect (directory reads only). */
void kis_oci_collect(void);
/* The bundle directory of a container (KIS_OCI_BUNDLES/<id>). */
int kis_oci_bundle_path(const char *ctr_id, char *out, size_t len);
/* Owner records, read by the collector: a one-shot run lives while its
 * engine process does; a session while its directory in the store exists. */
int kis_oci_write_owner_run(int bundle_fd, struct kis_error **err);
int kis_oci_write_owner_session(int bundle_fd, const char *session_dir, struct kis_error **err);

#endif
