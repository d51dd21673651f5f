/* SPDX-License-Identifier: MIT */
/* Internal: what the two host-tier backends (landlock, bubblewrap) share:
 * environment edits, the unprivileged sandbox user and its workspace. */
#ifndef KIS_BACKENDS_HOST_COMMON_H
#define KIS_BACKENDS_HOST_COMMON_H

#include <stdbool.h>
#include <sys/types.h>

#include "backends/common.h"

/* Set KEY=VAL in a NULL-terminated malloc'ed environment; an existing KEY is
 * replaced only when override is set. */
int kis_host_env_set(char ***envp, const char *key, const char *val, bool override);
/* The value of KEY in envp, or NULL. */
const char *kis_host_env_get(char *const *envp, const char *key);
/* Did the profile set KEY itself? */
bool kis_host_profile_has_env(const struct kis_profile *p, const char *key);

/* The unprivileged user a root engine runs sandboxed commands as:
 * KIS_SANDBOX_USER=UID:GID, else nobody (65534:65534). */
void kis_host_sandbox_user(uid_t *uid, gid_t *gid);

/* Let uid:gid, an unprivileged user, write the workspace at path without
 * touching its files: *view_fd is a detached mount (kis_idmap_view) that
 * shows the workspace's owner as uid:gid, to be moved over path in the
 * command's own mount namespace (kis_idmap_view_enter); -1 when uid:gid
 * owns it already. lower, ws_dir: an overlay clone's layers (else NULL). */
int kis_host_workspace_view(const char *path, const char *lower, const char *ws_dir, uid_t uid,
			    gid_t gid, int *view_fd, struct kis_error **err);
/* The request's workspace in a host plan: its path, and for an overlay
 * clone (lower and upper given) its directory, where upper/ and work/ sit,
 * and its lower layer; each malloc'ed, left NULL when absent. -1 on no
 * memory or an upper that does not end in /upper. At plan time and again
 * at amend, with the workspace the run made. */
int kis_host_place_workspace(const struct kis_run_request *req, char **workspace, char **ws_dir,
			     char **ws_lower);
/* Make the workspace reachable by a user other than the store's owner: the
 * store's own directories on the way (store root, workspaces/, the id) get
 * search permission for others (0711-like: no listing); a directory above
 * the store that others cannot search is refused, naming `workspace`. */
int kis_host_make_reachable(const char *ws_path, struct kis_error **err);

/* A private directory /tmp/kis-NAME (0700, owned by uid:gid), created
 * exclusively (never an existing one); *out its path. */
int kis_host_private_dir(const char *name, uid_t uid, gid_t gid, char **out,
			 struct kis_error **err);
/* Remove such a directory and all in it (never following links). */

#endif

struct kis_seccomp_opts;
/* The shared seccomp policy for these options as a sealed memfd (O_CLOEXEC),
 * like kis_seccomp_export_bpf_fd, from a cache of compiled programs where
 * one can be kept safely (a 0700 directory of ours: /run/kis-sandbox for
 * root, $XDG_RUNTIME_DIR/kis-sandbox otherwise). The key is the options,
 * the running binary's identity and libseccomp's version: compiling the
 * policy costs about 4 ms, a cached copy a few microseconds. */
int kis_host_seccomp_fd(const struct kis_seccomp_opts *o, int *fd_out, struct kis_error **err);

/* The run's or session's cgroup: memory and pids defaults on every start
 * where the host lets us make one; when it does not, a failure is an error
 * only for limits the profile named (explicit, KIS_LIMIT_* bits).
 * limits.pids is the command's: the engine_pids processes of the engine's
 * that start in the group are added to pids.max (rc->pids stays the
 * command's, for what a refusal names). */
int kis_host_cgroup_open(struct kis_run_cgroup *rc, const char *name, const struct kis_limits *l,
			 unsigned want, unsigned explicit_limits, unsigned engine_pids,
			 struct kis_error **err);
/* Sessions: the group outlives this process. Save where it is in the
 * session's directory (then let go of it here without removing it), and
 * at the end kill what is left in it and remove it. */
int kis_host_cgroup_save(int dir_fd, struct kis_run_cgroup *rc, struct kis_error **err);
void kis_host_cgroup_end(int dir_fd);
/* session_explain of every native backend: did the session's group end
 * this exec (memory_limit, pids_limit)? Sets res->reason and res->detail
 * and returns 1, or 0. */
int kis_host_cgroup_explain(const struct kis_session_ctx *ctx, struct kis_result *res);
/* The session group's CPU accounting (kis_cgroup_cpu_fd), or -1. */
int kis_host_cgroup_cpu_fd(const struct kis_session_ctx *ctx);
