/* SPDX-License-Identifier: MIT */
/* The oci backend (container tier): a generated OCI bundle run by crun, the
 * agent as the container process, limits in the container's cgroup.
 *
 * Theory of operation. Every container is named kis-<sandbox id>, its bundle
 * is a private directory KIS_OCI_BUNDLES/<name> (config.json, the root:host
 * rootfs skeleton, crun's log, an owner record). The container process is
 * always the agent, bind-mounted read-only at /.kis/agent:
 *   run      `crun run --preserve-fds 1` with one end of a
 *            socketpair as its fd 3 (`--channel-fd 3`); the engine speaks
 *            the protocol (docs/protocol.md) over the other end: one EXEC,
 *            streams, EXIT. The agent is PID 1 of the container, so the
 *            command is an ordinary process (signals work as usual) and its
 *            status arrives exactly, not as crun's 128+N. crun deletes the
 *            container when the agent ends (crun delete -f where it did not).
 *   session  the same container with `--listen-fd 3` on the session's
 *            listening socket; exec and shell connect to it (session.c).
 *            The session's pid is the container init's host pid (crun state).
 * A memory or pids limit is decided from the container's cgroup (cgroupsPath
 * /<name>), read before the container is deleted.
 * Containers left by an engine that was killed are collected by the sweep
 * of its owner record (engine/owner.c, at the next command on its store),
 * and those of any store at create, backends and gc (kis_oci_collect). */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "agent/client.h"
#include "backends/agent_run.h"
#include "agent/exec_json.h"
#include "agent/proto.h"
#include "backends/common.h"
#include "backends/oci/bundle.h"
#include "confine/confine.h"
#include "core/record.h"
#include "core/io.h"
#include "exec/spawn.h"
#include "exec/tether.h"
#include "net/egress.h"

/* The owner's record of a container this backend is about to make (read
 * back by oci_reap through the engine's sweep of a dead run) */
#define OCI_LEFTOVER "crun"

static long read_max_userns(void)
{
	FILE *f = fopen("/proc/sys/user/max_user_namespaces", "re");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void oci_probe(const struct kis_ctx *ctx, struct kis_caps *c)
{
	memset(c, 0, sizeof(*c));
	if (!kis_oci_crun_path()) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "crun is not installed (Debian package crun)");
		return;
	}
	bool rootless = kis_oci_rootless();
	if (rootless && !kis_oci_run_dir_usable()) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "no private runtime directory for crun: set XDG_RUNTIME_DIR to a 0700 "
			 "directory of yours (or free /tmp/kis-run-%u)", (unsigned)geteuid());
		return;
	}
	if (rootless && read_max_userns() == 0) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "rootless containers need unprivileged user namespaces "
			 "(user.max_user_namespaces is 0)");
		return;
	}
	if (!rootless && kis_oci_cgroup_layout() == 0) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "no cgroup hierarchy is mounted (crun needs one for the limits)");
		return;
	}
	if (!ctx->agent) {
		snprintf(c->why_absent, sizeof(c->why_absent), "%s", ctx->agent_why);
		return;
	}
	if (ctx->thorough) {
		/* `backends` is one of the commands that collect leftovers */
		kis_oci_collect();
		char *argv[] = {"crun", "--version", NULL};
		char eb[200];
		if (kis_oci_crun(argv, -1, NULL, eb, sizeof(eb), NULL) != 0) {
			snprintf(c->why_absent, sizeof(c->why_absent), "crun does not run here: %.150s", eb);
			return;
		}
	}
	c->present = true;
	c->cow = true;
	c->shell = true;
	c->native = true;
	c->seccomp = true;
	c->tty = true; /* the agent's PTY inside the container */
	c->mounts = true; /* binds of sources staged in crun's mount namespace */
	/* egress: the engine's network namespace with pasta, joined by path */
	c->net_modes = (1u << KIS_NET_OFF) | (1u << KIS_NET_LOOPBACK) | (1u << KIS_NET_HOST) |
		       (kis_egress_unavailable() || rootless ? 0 : 1u << KIS_NET_EGRESS);
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_OUTPUT | KIS_LIMIT_FILE |
		    KIS_LIMIT_OPEN_FILES;
	/* rootless: no cgroup the user may write (v1 controllers, or v2 with
	 * no delegated subtree): an explicit memory or pids limit is refused
	 * by name (kis_check_limits) rather than left unenforced */
	if (!rootless)
		c->limits |= KIS_CGROUP_LIMIT_BITS;
}

struct kis_plan {
	bool session;            /* the agent serving a session's listening socket */
	char **argv;             /* the user's command (run) */
	char **envp;             /* the container process's environment */
	char *cwd;               /* inside the container: the agent enters it */
	const char *start_cwd;   /* the container's own (which crun would create
				  * if missing): one that exists */
	char *agent;             /* host path */
	char *workspace;         /* host path or NULL */
	enum kis_root_mode root;
	enum kis_net_mode net;
	struct kis_net_dest *allow; /* network.allow */
	size_t n_allow;
	bool allow_set;
	struct kis_egress eg;       /* egress: pasta and the namespace */
	char netns_path[64];        /* egress: /proc/<us>/fd/<S> for crun */
	struct kis_limits limits;
	struct kis_io io;
	char ctr_id[KIS_ID_BUFSZ + 8];
	/* the profile's mounts: config.json's entries and crun's staging */
	struct kis_oci_mount mounts[KIS_MOUNTS_MAX];
	char *m_target[KIS_MOUNTS_MAX], *m_path[KIS_MOUNTS_MAX];
	size_t n_mounts;
	char *m_lower[KIS_MOUNTS_MAX], *m_ws[KIS_MOUNTS_MAX]; /* as root: overlay sources' layers */
	struct kis_oci_stage stage;
	char *ws_lower, *ws_dir; /* an overlay workspace: its layers */
	/* as root: the sandbox's user namespace (userns_up), joined by crun
	 * through /proc/<us>/fd/<n> while we hold it */
	int userns_fd;
	char userns_path[64];
	uint32_t id_count;          /* rootless: ids of crun's namespace (a subuid range) */
};

/* What the run makes after planning, in the plan: the workspace (its
 * path, an overlay's layers) and the mounts. At plan time, and again by
 * amend with what the run made; the working directory and HOME do not
 * change (oci_plan sets them from whether a workspace will be there). */
static int place(struct kis_plan *pl, const struct kis_run_request *req)
{
	if (req->workspace_path && !(pl->workspace = strdup(req->workspace_path)))
		return -1;
	/* an overlay workspace is joined from its layers in crun's namespace
	 * (crun.c stage_setup): rootless, its host path is a magic link; as
	 * root, the host's merged view cannot be idmapped (overlayfs does not
	 * allow it), its layers can */
	if (req->workspace_path && req->workspace_lower && req->workspace_upper) {
		const char *slash = strrchr(req->workspace_upper, '/');
		if (!slash || !(pl->ws_lower = strdup(req->workspace_lower)) ||
		    !(pl->ws_dir = strndup(req->workspace_upper,
					   (size_t)(slash - req->workspace_upper))))
			return -1;
	}
	for (size_t i = 0; i < req->n_mounts && i < KIS_MOUNTS_MAX; i++) {
		pl->n_mounts = i + 1;
		if (!(pl->m_target[i] = strdup(req->mounts[i].target)) ||
		    !(pl->m_path[i] = strdup(req->mounts[i].path)))
			return -1;
		pl->mounts[i] = (struct kis_oci_mount){.target = pl->m_target[i],
						       .ro = req->mounts[i].read_only};
		/* as root, a workspace's overlay is joined anew over idmapped
		 * layers, as the workspace's own (bubblewrap does the same) */
		if (!kis_oci_rootless() && req->mounts[i].lower && req->mounts[i].ws_dir &&
		    (!(pl->m_lower[i] = strdup(req->mounts[i].lower)) ||
		     !(pl->m_ws[i] = strdup(req->mounts[i].ws_dir))))
			return -1;
	}
	return 0;
}

/* What place() put in the plan, freed (oci_plan_free, amend). */
static void unplace(struct kis_plan *pl)
{
	free(pl->workspace);
	free(pl->ws_lower);
	free(pl->ws_dir);
	pl->workspace = pl->ws_lower = pl->ws_dir = NULL;
	for (size_t i = 0; i < pl->n_mounts; i++) {
		free(pl->m_target[i]);
		free(pl->m_path[i]);
		free(pl->m_lower[i]);
		free(pl->m_ws[i]);
		pl->m_target[i] = pl->m_path[i] = pl->m_lower[i] = pl->m_ws[i] = NULL;
		pl->mounts[i] = (struct kis_oci_mount){0};
	}
	pl->n_mounts = 0;
}

static int oci_amend(struct kis_plan *pl, const struct kis_run_request *req,
		     struct kis_error **err)
{
	unplace(pl);
	if (place(pl, req) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot amend the plan");
	return 0;
}

static void oci_plan_free(struct kis_plan *pl)
{
	if (!pl)
		return;
	kis_strv_free(pl->argv);
	kis_strv_free(pl->envp);
	free(pl->cwd);
	free(pl->agent);
	unplace(pl);
	kis_closep(&pl->userns_fd);
	free(pl->allow);
	kis_egress_stop(&pl->eg);
	free(pl);
}

static int oci_plan(const struct kis_caps *caps, const struct kis_run_request *req,
		    struct kis_plan **out, struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	TRY(kis_check_limits(caps, p, "oci", err));
	TRY(kis_check_mount_targets(p, "oci", err));
	TRY(kis_check_network(caps, p, "oci", NULL, err));
	if (p->root == KIS_ROOT_WORKSPACE && !req->workspace_path && !p->base && !p->workspace)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "root: 'workspace' makes the workspace the root filesystem: give "
				     "a base holding an OS image (--base) or a workspace");
	if (p->cwd && p->cwd[0] != '/')
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "cwd: must be an absolute path");
	struct kis_plan *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
	pl->eg = (struct kis_egress)KIS_EGRESS_INIT;
	pl->userns_fd = -1;
	pl->stage.userns_fd = -1;
	pl->stage.rootless_ns_fd = -1;
	if (kis_ctx_agent(req->ctx, &pl->agent, err) < 0) {
		free(pl);
		return -1;
	}
	/* a session's plan (req->session): the agent serving fd 3 is the
	 * container process itself here, not a command run through it */
	pl->session = req->session;
	pl->root = p->root;
	pl->net = p->net;
	pl->allow_set = p->net_allow_set;
	pl->n_allow = p->n_net_allow;
	if (p->n_net_allow && !(pl->allow = kis_net_dests_dup(p->net_allow, p->n_net_allow)))
		goto oom;
	pl->limits = req->limits;
	pl->io = req->io;
	snprintf(pl->ctr_id, sizeof(pl->ctr_id), "%s%s", KIS_OCI_PREFIX,
		 req->sandbox_id ? req->sandbox_id : "plan");
	bool ws_mounted = p->root == KIS_ROOT_HOST && (req->workspace_path || p->base || p->workspace);
	pl->start_cwd = ws_mounted ? "/workspace" : "/";
	const char *cwd = p->cwd ? p->cwd : pl->start_cwd;
	size_t ne = 0;
	pl->envp = calloc(p->n_env + 3, sizeof(char *));
	if (!pl->envp || !(pl->argv = kis_strv_dup(req->argv)) || !(pl->cwd = strdup(cwd)) ||
	    place(pl, req) < 0)
		goto oom;
	for (size_t i = 0; i < p->n_env; i++)
		if (!(pl->envp[ne++] = strdup(p->env[i])))
			goto oom;
	if (!kis_env_has(pl->envp, ne, "PATH") && !(pl->envp[ne++] = strdup("PATH=" KIS_DEFAULT_PATH)))
		goto oom;
	/* HOME: somewhere writable that exists: the workspace, the image's
	 * /root, or the private /tmp of a root:host run without a workspace */
	const char *home = ws_mounted ? "/workspace" : p->root == KIS_ROOT_WORKSPACE ? "/root" : "/tmp";
	if (!kis_env_has(pl->envp, ne, "HOME") && asprintf(&pl->envp[ne++], "HOME=%s", home) < 0) {
		pl->envp[--ne] = NULL;
		goto oom;
	}
	*out = pl;
	return 0;
oom:
	oci_plan_free(pl);
	return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
}

/* The engine's own processes in the container's group besides pasta: the
 * agent (PID 1) and a session's exec worker. limits.pids is the
 * command's, so they are added to the pids limit. */
static unsigned engine_pids(const struct kis_plan *pl)
{
	return 1u + pl->session;
}

/* The spec of this plan's container (paths point into the bundle). */
static void plan_spec(const struct kis_plan *pl, const char *rootfs, char *const *args,
		      struct kis_oci_spec *s, char *cgpath, size_t cglen)
{
	snprintf(cgpath, cglen, "/%s", pl->ctr_id);
	*s = (struct kis_oci_spec){
		.args = args, .env = pl->envp, .cwd = pl->start_cwd, .root = pl->root, .rootfs = rootfs,
		.workspace = pl->workspace, .agent = pl->agent, .net = pl->net,
		.netns_path = pl->netns_path[0] ? pl->netns_path : NULL,
		.limits = &pl->limits, .cgroups_path = cgpath, .user_ns = kis_oci_rootless(),
		.engine_pids = engine_pids(pl), /* pasta: as it joins */
		/* rootless: crun runs in our namespace, where the caller is 0 */
		.host_uid = 0, .host_gid = 0, .no_cgroup = kis_oci_rootless(), .id_count = pl->id_count,
		.mounts = pl->mounts, .n_mounts = pl->n_mounts,
		.userns_path = pl->userns_path[0]	? pl->userns_path
			       : kis_oci_rootless() ? NULL
						    : "<the sandbox's user namespace>",
	};
}

/* As root (issue 17, root inside is not root outside): the sandbox's user
 * namespace, ids 0..65535 onto the host block of its own that bubblewrap's
 * sandboxes get (kis_sandbox_ids, src/confine/userns.c), made before crun
 * starts so that the workspace and the mounts can be shown through its map
 * (mount_setattr(2) needs the namespace's descriptor, and crun's own is
 * made too late for our staging). crun joins it by a path into our
 * descriptor table, as it joins the egress network namespace; podman's
 * --userns=auto is the same idea with an allocator of its own. The
 * container's root is then nobody on the host: what root owns 0600 is
 * not its to read, setuid-root files of the host are not root's inside
 * (an unmapped owner: execve grants nothing), SO_PEERCRED shows a
 * stranger. Rootless: nothing (crun's namespace maps the caller's id). */
static int userns_up(struct kis_plan *pl, const char *sandbox_id, struct kis_error **err)
{
	if (kis_oci_rootless()) {
		/* issue 17: with a subordinate range (subuid(5)) crun's namespace
		 * maps it after the caller's own id, written by newuidmap; the
		 * container's root is still the caller, its other ids the range's
		 * (an image's files of several owners show as theirs, not as
		 * nobody). Without one: the caller's one id (crun.c). */
		struct kis_subids sub;
		if (!kis_subids_of(getuid(), &sub))
			return 0;
		int fd = -1;
		struct kis_error *e2 = NULL;
		if (kis_userns_open_by(kis_oci_write_subid_maps, &sub, &fd, &e2) < 0) {
			int en = e2 ? e2->sys_errno : 0;
			kis_error_free(e2);
			return kis_error_set(err, KIS_E_INTERNAL, en,
					     "cannot map the subordinate ids %lu..%lu through "
					     "newuidmap and newgidmap (subuid(5), subgid(5))",
					     sub.uid_start, sub.uid_start + sub.uid_count - 1);
		}
		pl->userns_fd = fd;
		pl->stage.rootless_ns_fd = fd;
		pl->id_count = 1 + (uint32_t)(sub.uid_count < sub.gid_count ? sub.uid_count
									       : sub.gid_count);
		return 0;
	}
	pl->stage.ids = kis_sandbox_ids(sandbox_id);
	int fd = -1;
	TRY(kis_userns_open(pl->stage.ids, KIS_IDS_COUNT, &fd, err));
	pl->userns_fd = fd;
	pl->stage.userns_fd = fd;
	snprintf(pl->userns_path, sizeof(pl->userns_path), "/proc/%d/fd/%d", (int)getpid(), fd);
	return 0;
}

/* crun has joined it (the container exists): our descriptor goes; the
 * namespace lives on in the container's processes. */
static void userns_down(struct kis_plan *pl)
{
	kis_closep(&pl->userns_fd);
	pl->stage.userns_fd = -1;
	pl->stage.rootless_ns_fd = -1;
}

/* Each mount's staging directory, <bundle>/mounts/<i>: config.json binds
 * it, crun's child binds the store's tree onto it first. */
static void plan_stage(struct kis_plan *pl, const char *bp)
{
	pl->stage.n = pl->n_mounts;
	for (size_t i = 0; i < pl->n_mounts; i++) {
		snprintf(pl->stage.dst[i], sizeof(pl->stage.dst[i]), "%s/mounts/%zu", bp, i);
		pl->stage.src[i] = pl->m_path[i];
		pl->stage.m_lower[i] = pl->m_lower[i];
		pl->stage.m_ws[i] = pl->m_ws[i];
		pl->stage.ro[i] = pl->mounts[i].ro;
		pl->mounts[i].source = pl->stage.dst[i];
	}
}

/* The container's process, the agent: it serves nothing unless crun loaded
 * the seccomp program (--require-seccomp), and enters cwd for each command
 * (a missing directory is the command's setup_failed as on every tier,
 * where crun, runtime-spec "cwd", would make it and run there). A session's
 * listens on fd 3, a one-shot run's serves the socketpair there. */
#define AGENT_ARGS(session, cwd)                                                           \
	{KIS_OCI_AGENT_PATH, "--require-seccomp", (session) ? "--listen-fd" : "--channel-fd", \
	 "3", "--cwd", (cwd), NULL}

static char *oci_describe(const struct kis_plan *pl)
{
	char *args[] = AGENT_ARGS(pl->session, pl->cwd);
	struct kis_oci_spec s;
	char cg[128], bp[256], rootfs[300];
	kis_oci_bundle_path(pl->ctr_id, bp, sizeof(bp));
	if (pl->root != KIS_ROOT_HOST || pl->n_mounts ||
	    kis_oci_shared_rootfs(rootfs, sizeof(rootfs), false, NULL) < 0)
		snprintf(rootfs, sizeof(rootfs), "%s/rootfs", bp);
	plan_stage((struct kis_plan *)pl, bp);
	plan_spec(pl, pl->root == KIS_ROOT_HOST ? rootfs : (pl->workspace ? pl->workspace : "<workspace>"),
		  args, &s, cg, sizeof(cg));
	json_t *cfg = NULL;
	if (kis_oci_config_build(&s, &cfg, NULL) < 0)
		return NULL;
	json_t *cmd = json_array();
	for (size_t i = 0; pl->argv && pl->argv[i] && !pl->session; i++)
		json_array_append_new(cmd, json_string(pl->argv[i]));
	json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o}", "backend", "oci", "container", pl->ctr_id,
			      "bundle", bp, "command", cmd, "config", cfg);
	/* memory and pids: crun's cgroup as root; rootless, the fallbacks in
	 * config.json's rlimits (bundle.c build_process) */
	if (o)
		json_object_set_new(o, "limits_binding",
				    kis_limits_binding_json(&pl->limits,
							    kis_oci_rootless() ? 0 :
							    KIS_CGROUP_LIMIT_BITS, false));
	/* the sandbox's id block (userns_up), as bubblewrap's plan shows it */
	if (o && !kis_oci_rootless())
		json_object_set_new(o, "ids", json_pack("{s:I, s:I}", "first",
							(json_int_t)kis_sandbox_ids(
								pl->ctr_id + strlen(KIS_OCI_PREFIX)),
							"count", (json_int_t)KIS_IDS_COUNT));
	if (o && pl->net == KIS_NET_EGRESS)
		json_object_set_new(o, "egress",
				    kis_egress_describe(pl->allow, pl->n_allow, pl->allow_set,
							kis_egress_helper_uid(kis_sandbox_ids(
								pl->ctr_id + strlen(KIS_OCI_PREFIX)))));
	char *txt = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return txt;
}

/* Make the bundle directory: owner record, root:host skeleton,
 * config.json. bp receives its path. */
/* The agent as the container sees it: a copy under /run/kis named by the
 * binary's identity, so the container's mountinfo shows that path and not
 * where the engine was installed or built (issue 23: paths that say nothing
 * of the host). Made once per binary (copy to a temporary name, rename). */
static int stage_agent(const char *agent, char *out, size_t len, struct kis_error **err)
{
	_cleanup_close_ int src = open(agent, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (src < 0 || fstat(src, &st) < 0)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, errno, "the agent '%s'", agent);
	const char *rd = kis_oci_run_dir();
	if (!rd)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0, "no runtime directory for crun");
	snprintf(out, len, "%s/agent-%llx-%llx-%llx-%llx", rd, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
		 (unsigned long long)st.st_mtim.tv_sec * 1000000000ull +
			 (unsigned long long)st.st_mtim.tv_nsec);
	struct stat have;
	if (lstat(out, &have) == 0 && S_ISREG(have.st_mode) && have.st_uid == geteuid() &&
	    have.st_size == st.st_size && !(have.st_mode & 022))
		return 0;
	char tmp[320];
	snprintf(tmp, sizeof(tmp), "%s.%d", out, (int)getpid());
	_cleanup_close_ int dst = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
				       0755);
	if (dst < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stage the agent");
	off_t left = st.st_size;
	while (left > 0) {
		ssize_t n = copy_file_range(src, NULL, dst, NULL, (size_t)left, 0);
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			unlink(tmp);
			return kis_error_set(err, KIS_E_INTERNAL, e, "cannot stage the agent");
		}
		left -= n;
	}
	if (fchmod(dst, 0755) < 0 || rename(tmp, out) < 0) {
		int e = errno;
		unlink(tmp);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot stage the agent");
	}
	/* copies of earlier binaries go once they are a day old: another
	 * engine (another install) may be about to bind its own; a container
	 * that binds one keeps its inode alive (unlink(2) drops the name) */
	DIR *d = opendir(rd);
	struct dirent *de;
	time_t now = time(NULL);
	while (d && (de = readdir(d))) {
		struct stat os;
		if (!strncmp(de->d_name, "agent-", 6) && strcmp(de->d_name, strrchr(out, '/') + 1) &&
		    !strchr(de->d_name, '.') &&
		    fstatat(dirfd(d), de->d_name, &os, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now - os.st_mtime > 24 * 3600)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	if (d)
		closedir(d);
	return 0;
}

/* The profile's mount target made in the root:host skeleton, each
 * directory on the way (the skeleton is ours: no link in it). crun would
 * make it itself, but in the sandbox's user namespace the skeleton is
 * nobody's and mkdir(2) there is refused; below a mount of the sandbox's
 * own (/workspace, /tmp, /dev) crun still makes the rest, where the
 * sandbox's root owns the directories. */
static int mount_point(int rfd, const char *target, struct kis_error **err)
{
	static const char *const own[] = {"workspace", "tmp", "dev", "proc", "sys", ".kis"};
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", target + (target[0] == '/'));
	char *save = NULL, *c = strtok_r(path, "/", &save);
	for (size_t i = 0; c && i < ARRAY_SIZE(own); i++)
		if (!strcmp(c, own[i]))
			return 0;
	_cleanup_close_ int dfd = fcntl(rfd, F_DUPFD_CLOEXEC, 3);
	for (; c && dfd >= 0; c = strtok_r(NULL, "/", &save)) {
		if (mkdirat(dfd, c, 0755) < 0 && errno != EEXIST)
			break;
		int next = openat(dfd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		dfd = next;
	}
	if (c || dfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot make the mount point '%s' in the rootfs", target);
	return 0;
}

/* A directory of the runtime path: ours (root's), a directory, no link,
 * and given mode when it has another (made by an older build as 0700).
 * -1 with errno otherwise. */
static int own_dir_mode(const char *path, mode_t mode)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		errno = EPERM;
		return -1;
	}
	return (st.st_mode & 07777) == mode ? 0 : fchmod(fd, mode);
}

static int make_bundle(struct kis_plan *pl, const char *session_dir, char *bp, size_t bplen,
		       struct kis_error **err)
{
	char cg[128];
	if (kis_oci_bundle_path(pl->ctr_id, bp, bplen) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENAMETOOLONG, "bundle path");
	/* /run/kis/oci: our own, 0700 all the way for an ordinary user. As
	 * root, crun's child has joined the sandbox's user namespace when it
	 * mounts the rootfs and the staged trees by their paths here, and is
	 * then the sandbox's first host id: the two directories above the
	 * bundles are 0711 (passed through, not listed: every name below is
	 * random or public) and the bundle itself is 0710 to the sandbox's
	 * group alone. Nothing of the bundle is in the container's view. */
	mode_t up = kis_oci_rootless() ? 0700 : 0711;
	if (!kis_oci_run_dir() || (mkdir(kis_oci_run_dir(), up) < 0 && errno != EEXIST) ||
	    (mkdir(KIS_OCI_BUNDLES, up) < 0 && errno != EEXIST) ||
	    own_dir_mode(kis_oci_run_dir(), up) < 0 || own_dir_mode(KIS_OCI_BUNDLES, up) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", KIS_OCI_BUNDLES);
	if (mkdir(bp, 0700) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the bundle '%s'", bp);
	_cleanup_close_ int bfd = open(bp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (bfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", bp);
	if (pl->stage.userns_fd >= 0 &&
	    (fchown(bfd, 0, (gid_t)pl->stage.ids) < 0 || fchmod(bfd, 0710) < 0))
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s' to the sandbox's ids",
				     bp);
	TRY(session_dir ? kis_oci_write_owner_session(bfd, session_dir, err)
			: kis_oci_write_owner_run(bfd, err));
	char rootfs[300];
	if (pl->ws_lower) {
		if (mkdirat(bfd, "ws", 0755) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the workspace's stage");
		snprintf(pl->stage.ov_dst, sizeof(pl->stage.ov_dst), "%s/ws", bp);
		pl->stage.ov_lower = pl->ws_lower;
		pl->stage.ov_ws = pl->ws_dir;
	} else if (pl->workspace && !kis_oci_rootless()) {
		/* a plain tree (a copy or a reflink clone): an idmapped bind */
		if (mkdirat(bfd, "ws", 0755) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the workspace's stage");
		snprintf(pl->stage.ov_dst, sizeof(pl->stage.ov_dst), "%s/ws", bp);
		pl->stage.ws_src = pl->workspace;
	}
	bool ws_staged = pl->stage.ov_lower || pl->stage.ws_src;
	if (pl->root == KIS_ROOT_HOST && !pl->n_mounts) {
		/* the skeleton every such container shares (bundle.h) */
		TRY(kis_oci_shared_rootfs(rootfs, sizeof(rootfs), true, err));
	} else if (pl->root == KIS_ROOT_HOST) {
		/* the profile's mount points are made in it: a skeleton of
		 * this container's own */
		snprintf(rootfs, sizeof(rootfs), "%s/rootfs", bp);
		if (mkdirat(bfd, "rootfs", 0755) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the rootfs");
		_cleanup_close_ int rfd = openat(bfd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (rfd < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the rootfs");
		TRY(kis_oci_rootfs_skeleton(rfd, err));
		for (size_t i = 0; i < pl->n_mounts; i++)
			TRY(mount_point(rfd, pl->mounts[i].target, err));
		if (pl->n_mounts && mkdirat(bfd, "mounts", 0755) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the mounts' stage");
		plan_stage(pl, bp);
		for (size_t i = 0; i < pl->n_mounts; i++) {
			char n[32];
			snprintf(n, sizeof(n), "mounts/%zu", i);
			if (mkdirat(bfd, n, 0755) < 0)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot create the mounts' stage");
		}
	} else {
		if (!pl->workspace)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "root: 'workspace' needs a workspace (--base or --workspace)");
		snprintf(rootfs, sizeof(rootfs), "%s", ws_staged ? pl->stage.ov_dst : pl->workspace);
	}
	char *args[] = AGENT_ARGS(session_dir != NULL, pl->cwd);
	struct kis_oci_spec s;
	plan_spec(pl, rootfs, args, &s, cg, sizeof(cg));
	if (ws_staged && pl->root == KIS_ROOT_HOST)
		s.workspace = pl->stage.ov_dst;
	char staged[256], resolv[300];
	TRY(stage_agent(pl->agent, staged, sizeof(staged), err));
	s.agent = staged;
	if (pl->net == KIS_NET_EGRESS) {
		static const char text[] = KIS_EGRESS_RESOLV;
		snprintf(resolv, sizeof(resolv), "%s/resolv.conf", bp);
		int rfd = openat(bfd, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		int bad = rfd < 0 || kis_write_all(rfd, text, sizeof(text) - 1) < 0;
		if (rfd >= 0)
			close(rfd);
		if (bad)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write resolv.conf");
		s.resolv_conf = resolv;
	}
	json_t *cfg = NULL;
	TRY(kis_oci_config_build(&s, &cfg, err));
	char *txt = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	int cfd = openat(bfd, "config.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r = (!txt || cfd < 0 || kis_write_all(cfd, txt, strlen(txt)) < 0) ? -1 : 0;
	int e = errno;
	free(txt);
	if (cfd >= 0)
		close(cfd);
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot write config.json");
	return 0;
}

/* egress: the sandbox's network namespace and pasta, before the bundle
 * names the namespace. crun opens it by a path into our own descriptor
 * table, which lives until the container has joined it. pasta runs as the
 * last id of the sandbox's id block (the container's root is the block's
 * first id, without capabilities: it can neither signal a process of
 * another uid nor administer a namespace it does not own). */
static int egress_up(struct kis_plan *pl, const char *sandbox_id, bool session,
		     struct kis_error **err)
{
	if (pl->net != KIS_NET_EGRESS)
		return 0;
	uid_t h = kis_egress_helper_uid(kis_sandbox_ids(sandbox_id));
	if (session) {
		/* a session's pasta lives until destroy, ready before create returns */
		TRY(kis_egress_start(&pl->eg, pl->allow, pl->n_allow, pl->allow_set, h, false, true,
				     err));
	} else {
		/* a one-shot run: S now, nft and pasta once crun is on its way
		 * (it needs only S; they need nothing of it) */
		TRY(kis_egress_prepare(&pl->eg, pl->allow, pl->n_allow, pl->allow_set, h, false,
				       err));
	}
	snprintf(pl->netns_path, sizeof(pl->netns_path), "/proc/%d/fd/%d", (int)getpid(),
		 pl->eg.netns_fd);
	return 0;
}

/* pasta is the sandbox's own work: counted in the container's cgroup (its
 * pids limit; its memory from the move on, as neither cgroup version moves
 * pages already charged; its CPU in cpuacct), frozen, limited and killed
 * with it. crun makes that cgroup only after pasta started (pasta must
 * have made S's link before the sandbox runs), so the move waits until
 * the container exists: the agent's HELLO for a run, crun's return for a
 * session.
 * Not into v1's cpu hierarchy (where it is one of its own): crun makes a
 * group there with no limit (this backend sets no CPU quota), and in it
 * the command and pasta share one scheduling entity of the parent's
 * weight (CFS group scheduling: a group's tasks split the group's share),
 * where on bubblewrap each is an entity of its own. On 2 busy cores that
 * halved the sandbox's TCP throughput (pasta and the sender take turns
 * on one share: 0.40 of the direct path against bubblewrap's 0.82). */
static void container_cgroup(const struct kis_plan *pl, struct kis_cgroup *cg, char *mem,
			     char *pids, size_t len);

static int egress_into_container(void *ctx, struct kis_error **err)
{
	struct kis_plan *pl = ctx;
	if (pl->eg.pid <= 0 || kis_oci_rootless())
		return 0;
	/* pasta is the engine's process, not the command's: the container's
	 * pids.max (config.json's pids.limit, the agent's and a session
	 * worker's added) grows by one as it joins */
	char mem[256], pids[256];
	struct kis_cgroup cg;
	container_cgroup(pl, &cg, mem, pids, sizeof(mem));
	if (pl->limits.pids &&
	    kis_cgroup_set_pids(&cg, pl->limits.pids + engine_pids(pl) + 1u, err) < 0)
		return -1;
	return kis_oci_cgroup_join(pl->ctr_id, pl->eg.pid, false, err);
}

/* A one-shot run's command starts once pasta has attached S's tap
 * (kis_egress_ready_for_command): pasta joins the container's groups at
 * the HELLO if its start is done by then, else once it is, watched while
 * the command runs. Its failure meanwhile kills the command and fails
 * the run (kept in eg_err). */
struct egress_watch {
	struct kis_plan *pl;
	struct kis_watch *watch; /* its fd: pasta's until it answered */
	struct kis_error *eg_err;
};

static int egress_hello(void *ctx, struct kis_error **err)
{
	struct egress_watch *w = ctx;
	int r = kis_egress_pasta(&w->pl->eg, 0, err);
	w->watch->fd = kis_egress_pasta_fd(&w->pl->eg);
	return r == 1 ? egress_into_container(w->pl, err) : r;
}

static int egress_watch_ready(void *ctx, int fd)
{
	(void)fd;
	struct egress_watch *w = ctx;
	int r = kis_egress_pasta(&w->pl->eg, 0, &w->eg_err);
	if (r == 1 && egress_into_container(w->pl, &w->eg_err) < 0)
		r = -1;
	return r;
}

/* crun's own words about a failure, from its --log file. */
static void crun_log(const char *bp, char *msg, size_t len)
{
	char p[320];
	snprintf(p, sizeof(p), "%s/crun.log", bp);
	msg[0] = '\0';
	_cleanup_close_ int lfd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (lfd < 0)
		return;
	ssize_t n = read(lfd, msg, len - 1);
	msg[n > 0 ? n : 0] = '\0';
	size_t k = strlen(msg);
	while (k && (msg[k - 1] == '\n' || msg[k - 1] == ' '))
		msg[--k] = '\0';
}

/* The session's container: `crun run --detach`, fd3 its listening socket. */
static int start_detached(struct kis_plan *pl, int fd3, const char *session_dir,
			  struct kis_error **err)
{
	char bp[256];
	TRY(make_bundle(pl, session_dir, bp, sizeof(bp), err));
	char logopt[320];
	snprintf(logopt, sizeof(logopt), "--log=file:%s/crun.log", bp);
	char *argv[] = {"crun", "--root", KIS_OCI_STATE_ROOT, logopt, "run", "--detach",
			"--preserve-fds", "1", "--bundle", bp, pl->ctr_id, NULL};
	int r = kis_oci_crun_staged(argv, fd3, &pl->stage, NULL, NULL, 0, err);
	if (r < 0)
		return -1;
	if (r != 0) {
		char msg[512];
		crun_log(bp, msg, sizeof(msg));
		return kis_error_set(err, KIS_E_INTERNAL, 0, "crun could not start the container: %s",
				     *msg ? msg : "no message");
	}
	return 0;
}

/* The container's cgroup as struct kis_cgroup, for the shared readers of
 * OOM and pids events and the killer. */
static void container_cgroup(const struct kis_plan *pl, struct kis_cgroup *cg, char *mem,
			     char *pids, size_t len)
{
	memset(cg, 0, sizeof(*cg));
	if (kis_oci_cgroup_layout() == 2) {
		cg->mode = KIS_CG_V2;
		snprintf(mem, len, "/sys/fs/cgroup/%s", pl->ctr_id);
		cg->dirs[0] = mem;
	} else {
		cg->mode = KIS_CG_V1;
		snprintf(mem, len, "/sys/fs/cgroup/memory/%s", pl->ctr_id);
		snprintf(pids, len, "/sys/fs/cgroup/pids/%s", pl->ctr_id);
		cg->dirs[0] = mem;
		cg->dirs[1] = pids;
	}
}

/* The container's CPU accounting, where crun makes its group
 * (cgroupsPath = the container id): every process of the container. */
static void container_cpu_path(const char *ctr_id, char *buf, size_t len)
{
	if (kis_oci_cgroup_layout() == 2)
		snprintf(buf, len, "/sys/fs/cgroup/%s/cpu.stat", ctr_id);
	else
		snprintf(buf, len, "/sys/fs/cgroup/cpuacct/%s/cpuacct.usage", ctr_id);
}

/* The host's verdict over the agent's evidence (as src/exec/supervise.c
 * does for native runs): an OOM kill in the container's cgroup is
 * memory_limit, forks refused by pids.max that ended the command are
 * pids_limit. */
static void explain(const struct kis_plan *pl, struct kis_result *res)
{
	char mem[256], pids[256];
	struct kis_cgroup cg;
	container_cgroup(pl, &cg, mem, pids, sizeof(mem));
	struct kis_cgroup_events ev;
	if (kis_cgroup_read_events(&cg, &ev, NULL) < 0)
		return;
	char mb[160], pb[160];
	snprintf(mb, sizeof(mb), "memory use passed limits.memory_bytes (%llu bytes)",
		 (unsigned long long)pl->limits.memory_bytes);
	snprintf(pb, sizeof(pb), "%llu forks refused at limits.pids (%llu)",
		 (unsigned long long)ev.pids_max, (unsigned long long)pl->limits.pids);
	kis_result_blame_limits(res, ev.oom_kills, ev.pids_max, mb, pb);
}

static bool crun_knows(const char *ctr_id)
{
	char p[256];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", KIS_OCI_STATE_ROOT, ctr_id);
	return stat(p, &st) == 0;
}

/* Wait for crun up to ms; false if it is still there. Through a pidfd
 * (pidfd_open(2), Linux 5.3) so the exit is seen at once; a short sleep
 * loop where the kernel lacks it. */
static bool wait_crun(pid_t pid, int ms, int *status)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd >= 0) {
		struct pollfd p = {.fd = pfd, .events = POLLIN};
		int r = RETRY_EINTR(poll(&p, 1, ms));
		close(pfd);
		if (r == 0)
			return false;
		return RETRY_EINTR(waitpid(pid, status, 0)) == pid || errno == ECHILD;
	}
	for (int waited = 0;; waited += 2) {
		pid_t w = waitpid(pid, status, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR))
			return true;
		if (waited >= ms)
			return false;
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* One-shot: `crun run` in the foreground, which deletes the container
 * itself when the agent (PID 1) ends, as a raw crun run does. The cgroup
 * is read for the verdict while the agent still holds the container up
 * (after EXIT, before the channel closes). */
static int oci_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	if (pl->session)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "a session plan cannot run");
	/* no kis_oci_collect here: it opens every live container's bundle,
	 * a cost that grew with the sessions (docs/performance.md, density);
	 * this run's own container is in its owner record */
	uint64_t t0 = kis_monotonic_ms();
	char bp[256];
	/* recorded before the bundle exists (core/record.h, engine/owner.h): killed from
	 * here on, the engine leaves a record the next command sweeps by */
	if (kis_owner_note(OCI_LEFTOVER, "%s", pl->ctr_id) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record container '%s'",
				     pl->ctr_id);
	if (userns_up(pl, pl->ctr_id + strlen(KIS_OCI_PREFIX), err) < 0 ||
	    egress_up(pl, pl->ctr_id + strlen(KIS_OCI_PREFIX), false, err) < 0 ||
	    make_bundle(pl, NULL, bp, sizeof(bp), err) < 0) {
		kis_egress_stop(&pl->eg);
		kis_oci_remove(pl->ctr_id, NULL);
		return -1;
	}
	/* The agent serves one end of a socketpair (--channel-fd 3) itself,
	 * without a worker (agent.c). crun's --preserve-fds clears the fd's
	 * close-on-exec; the agent sets it again first, so the command it
	 * starts does not inherit the channel (agent.c, serve). */
	int sv[2] = {-1, -1};
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		int e = errno;
		kis_oci_remove(pl->ctr_id, NULL);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot make the agent's channel");
	}
	char logopt[320];
	snprintf(logopt, sizeof(logopt), "--log=file:%s/crun.log", bp);
	char *argv[] = {"crun", "--root", KIS_OCI_STATE_ROOT, logopt, "run", "--preserve-fds", "1",
			"--bundle", bp, pl->ctr_id, NULL};
	pid_t crun = -1;
	int r = kis_oci_crun_spawn_staged(argv, sv[1], &pl->stage, &crun, err);
	close(sv[1]);
	/* a one-shot run's pasta dies with us */
	if (r >= 0 && pl->net == KIS_NET_EGRESS)
		r = kis_egress_launch(&pl->eg, true, err);
	if (r >= 0) {
		char cpu_path[320];
		container_cpu_path(pl->ctr_id, cpu_path, sizeof(cpu_path));
		struct kis_watch w = {.fd = -1, .on_ready = egress_watch_ready};
		struct egress_watch ew = {.pl = pl, .watch = &w};
		w.ctx = &ew;
		struct kis_agent_run ar = {.conn = sv[0], .argv = pl->argv, .limits = pl->limits,
					   .io = pl->io, .peer = "the container's agent",
					   .cpu_path = cpu_path, .on_hello = egress_hello,
					   .hello_ctx = &ew, .watch = &w};
		/* a one-shot run's pasta set itself up while crun started, as far
		 * as the command needs it */
		r = kis_egress_ready_for_command(&pl->eg, err);
		w.fd = kis_egress_pasta_fd(&pl->eg);
		if (r >= 0)
			r = kis_agent_run_once(&ar, res, err);
		/* pasta gave up while the command ran (then killed), or before
		 * the command ended without our noticing: the setup failed */
		if (r >= 0 && !ew.eg_err)
			(void)kis_egress_pasta(&pl->eg, 0, &ew.eg_err);
		if (ew.eg_err) {
			if (r >= 0 && err)
				*err = ew.eg_err;
			else
				kis_error_free(ew.eg_err);
			ew.eg_err = NULL;
			r = -1;
		}
		kis_egress_kill(&pl->eg); /* its teardown overlaps crun's */
		if (r < 0) {
			/* did crun fail to start it? its log says why */
			char msg[512];
			int st;
			if (wait_crun(crun, 500, &st)) {
				crun = -1;
				crun_log(bp, msg, sizeof(msg));
				kis_error_set(err, KIS_E_INTERNAL, 0,
					      "crun could not start the container: %s",
					      *msg ? msg : "crun exited without a message");
			}
		}
	}
	if (r >= 0) {
		explain(pl, res);
		if (res->usage.wall_ms == 0)
			res->usage.wall_ms = kis_monotonic_ms() - t0;
	}
	/* The command has ended: end the agent (PID 1, so every process of
	 * the container), and crun deletes the container. */
	close(sv[0]);
	{
		char mem[256], pids[256];
		struct kis_cgroup cg;
		container_cgroup(pl, &cg, mem, pids, sizeof(mem));
		kis_cgroup_kill(&cg, NULL);
	}
	if (kis_oci_rootless()) {
		/* no cgroup to empty: the agent, PID 1, serves its listening
		 * socket on; crun signals it (its death ends the pid namespace,
		 * pid_namespaces(7)), and `crun run` returns at once */
		char *kv[] = {"crun", "--root", KIS_OCI_STATE_ROOT, "kill", pl->ctr_id, "KILL", NULL};
		(void)kis_oci_crun(kv, -1, NULL, NULL, 0, NULL);
	}
	int st;
	if (crun > 0 && !wait_crun(crun, 3000, &st)) {
		kill(crun, SIGKILL);
		waitpid(crun, &st, 0);
	}
	kis_egress_stop(&pl->eg); /* the container is gone: its network goes */
	struct kis_error *e2 = NULL;
	int rr = 0;
	if (crun_knows(pl->ctr_id)) {
		rr = kis_oci_remove(pl->ctr_id, &e2);
	} else {
		/* crun deleted the container: only the bundle is left */
		_cleanup_close_ int bfd = open(KIS_OCI_BUNDLES, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		kis_oci_remove_bundle(bfd, pl->ctr_id);
	}
	if (rr < 0 && r >= 0) {
		/* a container we could not delete is an engine failure */
		if (err)
			*err = e2;
		else
			kis_error_free(e2);
		return -1;
	}
	kis_error_free(e2);
	return r;
}

/* A guard's last act for a container whose creator died: crun's own
 * forced delete (its processes killed, its cgroup and state gone). */
static void remove_abandoned(void *ctr_id)
{
	kis_oci_remove_abandoned(ctr_id);
}

static int oci_start_session(struct kis_plan *pl, const struct kis_session_ctx *ctx, pid_t *pid,
			     struct kis_error **err)
{
	if (!pl->session)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "not a session plan");
	kis_oci_collect();
	snprintf(pl->ctr_id, sizeof(pl->ctr_id), "%s%s", KIS_OCI_PREFIX, ctx->id);
	/* the owner is the session's final directory (sessions/<id>) */
	_cleanup_free_ char *final = NULL;
	const char *slash = ctx->dir_path ? strrchr(ctx->dir_path, '/') : NULL;
	if (!slash || asprintf(&final, "%.*s/%s", (int)(slash - ctx->dir_path), ctx->dir_path,
			       ctx->id) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "session path");
	/* the creator's until the session is published (core/record.h, engine/owner.h) */
	if (kis_owner_note(OCI_LEFTOVER, "%s", pl->ctr_id) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record container '%s'",
				     pl->ctr_id);
	/* and tied to it meanwhile: `crun run --detach` leaves the container
	 * to init, so a guard of ours removes it if the creator dies before
	 * the session is published (exec/tether.h), with no later command */
	TRY(kis_tether_guard(remove_abandoned, pl->ctr_id, err));
	int started = userns_up(pl, ctx->id, err) < 0 || egress_up(pl, ctx->id, true, err) < 0 ?
			      -1 : start_detached(pl, ctx->listen_fd, final, err);
	userns_down(pl); /* `crun run --detach` returned: the container holds it */
	if (started < 0) {
		kis_oci_remove(pl->ctr_id, NULL);
		kis_egress_stop(&pl->eg);
		return -1;
	}
	char status[32];
	pid_t p = 0;
	if (kis_oci_state(pl->ctr_id, status, sizeof(status), &p) < 0 || p <= 0) {
		kis_oci_remove(pl->ctr_id, NULL);
		kis_egress_stop(&pl->eg);
		return kis_error_set(err, KIS_E_INTERNAL, 0,
				     "the session's container is not running (crun state)");
	}
	/* pasta lives as long as the session: destroy ends it from here */
	if (pl->eg.pid > 0 && (egress_into_container(pl, err) < 0 ||
			       kis_egress_save(ctx->dir_fd, &pl->eg, err) < 0)) {
		kis_oci_remove(pl->ctr_id, NULL);
		kis_egress_stop(&pl->eg);
		return -1;
	}
	kis_egress_release(&pl->eg);
	*pid = p;
	return 0;
}

static int oci_end_session(const struct kis_session_ctx *ctx, struct kis_error **err)
{
	char id[KIS_ID_BUFSZ + 8];
	snprintf(id, sizeof(id), "%s%s", KIS_OCI_PREFIX, ctx->id);
	int r = kis_oci_remove(id, err);
	kis_egress_end_saved(ctx->dir_fd);
	return r;
}

static const char *oci_session_state(const struct kis_session_ctx *ctx)
{
	static const char *const known[] = {"running", "created", "paused", "stopped"};
	char id[KIS_ID_BUFSZ + 8], status[32];
	snprintf(id, sizeof(id), "%s%s", KIS_OCI_PREFIX, ctx->id);
	if (kis_oci_state(id, status, sizeof(status), NULL) < 0)
		return "stopped"; /* crun does not know it: the container is gone */
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (!strcmp(status, known[i]))
			return known[i];
	return "unknown";
}

/* An exec in a session ended badly: did the session's cgroup cause it? The
 * counters are the container's, cumulative, so the last ones seen are kept
 * in the session directory and only an increase counts for this exec. */
static int oci_session_cpu_fd(const struct kis_session_ctx *ctx)
{
	char ctr[128], path[320];
	snprintf(ctr, sizeof(ctr), "%s%s", KIS_OCI_PREFIX, ctx->id);
	container_cpu_path(ctr, path, sizeof(path));
	return open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
}

static int oci_session_explain(const struct kis_session_ctx *ctx, struct kis_result *res)
{
	struct kis_plan pl;
	memset(&pl, 0, sizeof(pl));
	snprintf(pl.ctr_id, sizeof(pl.ctr_id), "%s%s", KIS_OCI_PREFIX, ctx->id);
	char mem[256], pids[256];
	struct kis_cgroup cg;
	container_cgroup(&pl, &cg, mem, pids, sizeof(mem));
	return kis_cgroup_explain_since(&cg, ctx->dir_fd, "oci-events", res);
}

/* A killed run's container (its record "crun kis-<owner>", written before
 * crun was asked to make it): removed if its bundle or crun's state is
 * still there. Only the owner's own container: the record's id must be
 * the owner's, whatever else the line says. */
static int oci_reap(const char *owner, const char *ctr, bool dry_run, struct kis_error **err)
{
	size_t pl = strlen(KIS_OCI_PREFIX);
	if (strncmp(ctr, KIS_OCI_PREFIX, pl) || strcmp(ctr + pl, owner))
		return 0;
	char bp[512];
	struct stat st;
	bool there = kis_oci_bundle_path(ctr, bp, sizeof(bp)) == 0 && stat(bp, &st) == 0;
	char state[600];
	snprintf(state, sizeof(state), "%s/%s", KIS_OCI_STATE_ROOT, ctr);
	there = there || stat(state, &st) == 0;
	if (!there)
		return 0;
	if (dry_run)
		return 1;
	return kis_oci_remove(ctr, err) < 0 ? -1 : 1;
}

const struct kis_backend kis_backend_oci = {
	.session_cpu_fd = oci_session_cpu_fd,
	.session_explain = oci_session_explain,
	.name = "oci",
	.tier = KIS_TIER_CONTAINER,
	/* an overlay workspace is joined anew in crun's namespace, over
	 * idmapped layers as root, over its own as an ordinary user */
	.own_workspace_view = true,
	.rootless_layers = true,
	.probe = oci_probe,
	.plan = oci_plan,
	.amend = oci_amend,
	.describe = oci_describe,
	.run = oci_run,
	.plan_free = oci_plan_free,
	.start_session = oci_start_session,
	.session_exec = kis_agent_session_exec,
	.end_session = oci_end_session,
	.session_state = oci_session_state,
	.leftover_record = OCI_LEFTOVER,
	.leftover_kind = "container",
	.reap = oci_reap,
	.collect = kis_oci_collect,
};
