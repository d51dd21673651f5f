/* SPDX-License-Identifier: MIT */
/* The bubblewrap backend (host tier): the command runs inside `bwrap` with
 * new mount, pid, ipc, uts, cgroup and network namespaces, in a user
 * namespace whose ids are a host range of the sandbox's own, no
 * capabilities, a read-only system view and the shared seccomp policy.
 *
 * Theory of operation. plan() validates the profile and records what the
 * sandbox looks like; run() and start_session() then:
 *  - export the seccomp program to a sealed memfd (`--seccomp FD`);
 *  - make the sandbox's user namespace, ids 0..65535 onto a block of host
 *    ids of its own (src/confine/userns.c): the sandbox's root is nobody on
 *    the host, so sysctls, the host's device inodes in /dev, setuid bits
 *    and SO_PEERCRED give it nothing;
 *  - start bwrap through src/exec/ with a fixed environment (the profile's
 *    env is the command's, never bwrap's: LD_PRELOAD would load into a
 *    process running outside the sandbox) and, between fork and exec, as
 *    root: join the run's cgroup; a private mount namespace with a small
 *    tmpfs on /run where the workspace (shown through the sandbox's id map:
 *    an idmapped bind, or for an overlay clone a new overlay over idmapped
 *    layers) and the agent binary are placed; then drop to the sandbox's
 *    first host id, so bwrap itself runs unprivileged and joins the
 *    namespace with `--userns`;
 *  - bwrap runs the agent (src/agent/) as PID 1 of the pid namespace, non
 *    dumpable, which starts the command, resolves its working directory
 *    inside the final root with no magic links (bwrap's own --chdir runs
 *    while bwrap holds descriptors: runc's CVE-2024-21626), reports exit
 *    status, signals and rusage, and allocates terminals inside. A one-shot
 *    run talks to it over a socketpair (fd 3, `--channel-fd`); a session
 *    serves the listening socket (fd 3, `--listen-fd`), and `--info-fd`
 *    tells us the agent's pid on the host: that pid is the session's life,
 *    and when destroy ends it the kernel ends every process of the pid
 *    namespace (pid_namespaces(7)).
 * bwrap passes inherited descriptors through (bubblewrap(1)): everything
 * but the intended ones is close-on-exec first, and the agent closes what
 * bwrap itself leaves open. */
#include "core/util.h"

#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "agent/client.h"
#include "backends/agent_run.h"
#include "backends/common.h"
#include "backends/host/common.h"
#include "confine/confine.h"
#include "confine/sysview.h"
#include "core/io.h"
#include "exec/spawn.h"
#include "exec/tool.h"
#include "net/egress.h"
#include "core/test_hook.h"

#define AGENT_IN_SANDBOX "/.kis/agent"
/* Where, in bwrap's private mount namespace, the sandbox's pieces are
 * placed before bwrap binds them: paths that say nothing of the host (its
 * command line and the sandbox's mountinfo show these). */
#define STAGE "/run"
#define STAGE_WS STAGE "/kis-workspace"
#define STAGE_AGENT STAGE "/kis-agent"
#define STAGE_MOUNT STAGE "/kis-mount-" /* + the mount's index */

/* One of the profile's mounts, staged at stage before bwrap binds it. */
struct bw_mount {
	char *target, *path, *lower, *ws_dir;
	bool ro;
	char stage[48];
};
#define STAGE_RESOLV STAGE "/kis-resolv.conf"
/* bwrap (outside the pid namespace) and the agent (its PID 1) */
#define KIS_BW_ENGINE_PIDS 2

static const char *bwrap_path(void)
{
	static const char *const cands[] = {"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"};
	return kis_find_tool(KIS_TEST_GETENV("KIS_BWRAP"), cands, ARRAY_SIZE(cands));
}

static long read_long(const char *path, long dflt)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char b[32];
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
	if (n <= 0)
		return dflt;
	b[n] = '\0';
	return strtol(b, NULL, 10);
}

/* Actually create the namespaces once: a sysctl, an AppArmor policy or a
 * seccomp filter around us can refuse them whatever the files say. */
static bool try_bwrap(const char *bwrap, char *why, size_t why_len)
{
	char *argv[] = {(char *)bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc",
			"--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
			"--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
			"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
			"--", "/usr/bin/true", NULL};
	char *envp[] = {NULL};
	struct kis_tool t = {.argv = argv, .envp = envp, .in = -1, .out = -1, .err = -1};
	struct kis_tool_out o;
	struct kis_error *e = NULL;
	if (kis_tool_run(&t, false, true, &o, &e) < 0) {
		snprintf(why, why_len, "cannot test bwrap: %s", e && e->message ? e->message : "?");
		kis_error_free(e);
		return false;
	}
	if (!kis_tool_ok(o.status, 0)) {
		char *nl = strchr(o.err, '\n');
		if (nl)
			*nl = '\0';
		snprintf(why, why_len, "bwrap cannot create its namespaces here: %.150s",
			 *o.err ? o.err : "it failed");
		return false;
	}
	return true;
}

static void bubblewrap_probe(const struct kis_ctx *ctx, struct kis_caps *c)
{
	memset(c, 0, sizeof(*c));
	const char *bwrap = bwrap_path();
	if (!bwrap) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "bwrap is not installed (Debian package bubblewrap)");
		return;
	}
	if (read_long("/proc/sys/user/max_user_namespaces", 1) <= 0 ||
	    (geteuid() != 0 && read_long("/proc/sys/kernel/unprivileged_userns_clone", 1) == 0)) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "user namespaces are disabled on this host (user.max_user_namespaces, "
			 "kernel.unprivileged_userns_clone)");
		return;
	}
	if (ctx->thorough) {
		static int tried; /* 1 ok, -1 failed */
		static char why[sizeof(c->why_absent)];
		if (!tried)
			tried = try_bwrap(bwrap, why, sizeof(why)) ? 1 : -1;
		if (tried < 0) {
			snprintf(c->why_absent, sizeof(c->why_absent), "%s", why);
			return;
		}
	}
	c->present = true;
	c->shell = true;
	c->native = true;
	c->seccomp = true;
	c->tty = true; /* the agent allocates PTYs in the sandbox's own devpts */
	c->mounts = true; /* idmapped binds in its mount namespace */
	/* off: empty netns + seccomp AF_UNIX only; loopback: netns with lo up
	 * (bwrap brings it up); host: only with its hatch; egress: the
	 * engine's network namespace with pasta (src/net/egress.c) */
	c->net_modes = (1u << KIS_NET_OFF) | (1u << KIS_NET_LOOPBACK) | (1u << KIS_NET_HOST) |
		       (kis_egress_unavailable() ? 0 : 1u << KIS_NET_EGRESS);
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_OUTPUT | KIS_LIMIT_FILE |
		    KIS_LIMIT_OPEN_FILES | (ctx->thorough ? kis_cgroup_limits_available() : 0);
}

struct kis_plan {
	struct kis_native_plan n;
	const char *bwrap;
	const char *sandbox_id;
	char *agent;              /* host path of the agent binary */
	char *workspace;          /* host path, or NULL */
	char *ws_lower, *ws_dir;  /* an overlay clone: its base tree and its directory */
	char *inside_cwd;         /* the working directory inside the sandbox */
	uid_t ids;                /* first host id of the sandbox's range */
	bool rootless;            /* an ordinary user: one id, the caller's (issue 17) */
	uid_t own_uid;            /* rootless: the caller's ids, the sandbox's root */
	gid_t own_gid;
	enum kis_root_mode root;
	enum kis_net_mode net;
	struct kis_net_dest *allow; /* network.allow, n_allow of them */
	size_t n_allow;
	bool allow_set;
	unsigned cgroup_limits;
	unsigned cgroup_explicit;
	struct bw_mount *mounts;
	size_t n_mounts;
};

/* What place() put in the plan, freed (plan_release, amend). */
static void unplace(struct kis_plan *pl)
{
	free(pl->workspace);
	free(pl->ws_lower);
	free(pl->ws_dir);
	free(pl->inside_cwd);
	pl->workspace = pl->ws_lower = pl->ws_dir = pl->inside_cwd = NULL;
	for (size_t i = 0; i < pl->n_mounts; i++) {
		free(pl->mounts[i].target);
		free(pl->mounts[i].path);
		free(pl->mounts[i].lower);
		free(pl->mounts[i].ws_dir);
	}
	free(pl->mounts);
	pl->mounts = NULL;
	pl->n_mounts = 0;
}

static void plan_release(struct kis_plan *pl)
{
	kis_native_plan_release(&pl->n);
	free(pl->agent);
	unplace(pl);
	free(pl->allow);
	free(pl);
}

/* The request's mounts, copied into the plan with their staging places. */
static int plan_mounts(struct kis_plan *pl, const struct kis_run_request *req)
{
	if (!req->n_mounts)
		return 0;
	pl->mounts = calloc(req->n_mounts, sizeof(*pl->mounts));
	if (!pl->mounts)
		return -1;
	for (size_t i = 0; i < req->n_mounts; i++) {
		const struct kis_mount_src *m = &req->mounts[i];
		struct bw_mount *b = &pl->mounts[i];
		pl->n_mounts = i + 1;
		b->ro = m->read_only;
		snprintf(b->stage, sizeof(b->stage), STAGE_MOUNT "%zu", i);
		if (!(b->target = strdup(m->target)) || !(b->path = strdup(m->path)) ||
		    (m->lower && (!(b->lower = strdup(m->lower)) || !(b->ws_dir = strdup(m->ws_dir)))))
			return -1;
	}
	return 0;
}

/* What the run makes after planning, in the plan: the workspace (its
 * path, an overlay's layers), the working directory and HOME inside, the
 * mounts. At plan time, and again by amend with what the run made. */
static int place(struct kis_plan *pl, const struct kis_run_request *req)
{
	const struct kis_profile *p = req->profile;
	const char *home = req->workspace_path ? (p->root == KIS_ROOT_WORKSPACE ? "/" : "/workspace")
					       : "/";
	if (kis_host_place_workspace(req, &pl->workspace, &pl->ws_dir, &pl->ws_lower) < 0)
		return -1;
	if (!(pl->inside_cwd = strdup(p->cwd ? p->cwd : home)) || plan_mounts(pl, req) < 0)
		return -1;
	/* Paths in the environment are the sandbox's, not the host's. */
	if (!kis_host_profile_has_env(p, "HOME") &&
	    kis_host_env_set(&pl->n.envp, "HOME", pl->inside_cwd, true) < 0)
		return -1;
	return 0;
}

static int bubblewrap_plan(const struct kis_caps *caps, const struct kis_run_request *req,
			   struct kis_plan **out, struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	TRY(kis_check_network(caps, p, "bubblewrap", NULL, err));
	if (p->root == KIS_ROOT_WORKSPACE && !req->workspace_path && (p->base || p->workspace))
		; /* a run plans before its clone: amend places the workspace */
	else if (p->root == KIS_ROOT_WORKSPACE && !req->workspace_path)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "root: 'workspace' needs a workspace (--base or --workspace) "
				     "holding an OS image");
	if (p->cwd && p->cwd[0] != '/')
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "cwd: '%s' is not absolute",
				     p->cwd);
	/* An ordinary user cannot map a range of its own (CAP_SETUID over
	 * it): the sandbox's root is then the caller's uid alone, which is
	 * already all the sandbox could reach. Egress needs the engine's
	 * network namespace, made as root (src/net/egress.c). */
	if (geteuid() != 0 && p->net == KIS_NET_EGRESS)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "network: 'egress' on the bubblewrap backend needs the engine "
				     "to run as root; use 'off' or 'loopback' as an ordinary user");
	struct kis_caps c = *caps;
	unsigned explicit_cg = kis_cgroup_limits_asked(&p->limits);
	if (explicit_cg && !req->ctx->thorough)
		c.limits |= kis_cgroup_limits_available();
	TRY(kis_check_limits(&c, p, "bubblewrap", err));
	TRY(kis_check_mount_targets(p, "bubblewrap", err));
	const char *bwrap = bwrap_path();
	if (!bwrap)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0, "bwrap is not installed");

	struct kis_plan *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
	if (kis_native_plan_init(&pl->n, req, err) < 0) {
		free(pl);
		return -1;
	}
	if (kis_ctx_agent(req->ctx, &pl->agent, err) < 0) {
		plan_release(pl);
		return -1;
	}
	pl->bwrap = bwrap;
	pl->sandbox_id = req->sandbox_id;
	pl->rootless = geteuid() != 0;
	pl->own_uid = getuid();
	pl->own_gid = getgid();
	/* rootless: the sandbox's ids are the caller's one id, shown as 0 */
	pl->ids = pl->rootless ? 0 : kis_sandbox_ids(req->sandbox_id);
	pl->root = p->root;
	pl->net = p->net;
	pl->allow_set = p->net_allow_set;
	if (p->n_net_allow &&
	    !(pl->allow = kis_net_dests_dup(p->net_allow, p->n_net_allow)))
		goto oom;
	pl->n_allow = p->n_net_allow;
	pl->cgroup_limits = KIS_CGROUP_LIMIT_BITS;
	pl->cgroup_explicit = explicit_cg;
	if (place(pl, req) < 0)
		goto oom;
	*out = pl;
	return 0;
oom:
	plan_release(pl);
	return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
}

static int bubblewrap_amend(struct kis_plan *pl, const struct kis_run_request *req,
			    struct kis_error **err)
{
	TRY(kis_native_plan_amend(&pl->n, req, err));
	unplace(pl);
	if (place(pl, req) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot amend the plan");
	return 0;
}

/* ---- bwrap's argv, as a list ---- */

static void add(struct kis_argv *a, const char *s)
{
	kis_argv_add(a, s);
}

static void add2(struct kis_argv *a, const char *x, const char *y)
{
	add(a, x);
	add(a, y);
}

static void add3(struct kis_argv *a, const char *x, const char *y, const char *z)
{
	add(a, x);
	add(a, y);
	add(a, z);
}

static void add_fd(struct kis_argv *a, const char *opt, int fd)
{
	char num[16];
	if (fd >= 0)
		snprintf(num, sizeof(num), "%d", fd);
	add2(a, opt, fd >= 0 ? num : "FD");
}

static void argv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* A path is covered: a file by /dev/null, a directory by an empty
 * read-only tmpfs. Missing ones are skipped (bwrap would fail on them). */
static void add_cover(struct kis_argv *a, const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		add2(a, "--tmpfs", path);
		add2(a, "--remount-ro", path);
	} else if (S_ISREG(st.st_mode)) {
		add3(a, "--ro-bind", "/dev/null", path);
	}
}

/* The system view of root: host, from the table every tier reads
 * (src/confine/sysview.c): system directories read-only (a merged-/usr
 * link such as /bin -> usr/bin recreated as the same link), and /etc's
 * secrets covered. The sandbox's root is not the host's, so DAC keeps it
 * out of root's 0600 files anyway: the cover is the second wall. */
static void add_system_view(struct kis_argv *a)
{
	for (size_t i = 0; i < kis_sysview_n_dirs; i++) {
		const char *d = kis_sysview_dirs[i];
		struct stat st;
		if (lstat(d, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			char t[256];
			ssize_t n = readlink(d, t, sizeof(t) - 1);
			if (n <= 0)
				continue;
			t[n] = '\0';
			add3(a, "--symlink", t, d);
		} else if (S_ISDIR(st.st_mode)) {
			add3(a, "--ro-bind", d, d);
		}
	}
	for (size_t i = 0; i < kis_sysview_n_etc_hidden; i++) {
		char p[256];
		snprintf(p, sizeof(p), "/etc/%s", kis_sysview_etc_hidden[i]);
		add_cover(a, p);
	}
}

/* The kernel's interfaces in the sandbox's own /proc: runc's masked and
 * read-only paths (the same table as the container tier). The host's /proc
 * tells which exist: the same kernel makes both. */
static void add_proc_view(struct kis_argv *a)
{
	for (size_t i = 0; i < kis_sysview_n_masked; i++)
		if (!strncmp(kis_sysview_masked[i], "/proc/", 6))
			add_cover(a, kis_sysview_masked[i]);
	for (size_t i = 0; i < kis_sysview_n_readonly; i++) {
		struct stat st;
		if (lstat(kis_sysview_readonly[i], &st) == 0)
			add3(a, "--ro-bind", kis_sysview_readonly[i], kis_sysview_readonly[i]);
	}
}

/* bwrap's command line. Descriptors < 0: describe only ("FD"). A session
 * serves a listening socket (fd 3) and has no parent to die with. */
static char **build_argv(const struct kis_plan *pl, int userns_fd, int seccomp_fd, int info_fd,
			 bool session)
{
	struct kis_argv a = {0};
	add(&a, pl->bwrap);
	/* the sandbox's own id range; bwrap (running as its first id, the
	 * namespace's owner) joins it and runs the agent as its root */
	if (!pl->rootless) /* rootless: bwrap starts inside our own (bw_child) */
		add_fd(&a, "--userns", userns_fd);
	add2(&a, "--uid", "0");
	add2(&a, "--gid", "0");
	add(&a, "--unshare-pid");
	add(&a, "--unshare-ipc");
	add(&a, "--unshare-uts");
	add(&a, "--unshare-cgroup-try");
	/* bwrap brings lo up in a netns of its own; egress joins the engine's
	 * (bw_child), where pasta has brought lo and eth0 up */
	if (pl->net != KIS_NET_HOST && pl->net != KIS_NET_EGRESS)
		add(&a, "--unshare-net");
	add(&a, "--as-pid-1"); /* the agent reaps; its death ends the pid ns */
	if (!session)
		add(&a, "--die-with-parent");
	add2(&a, "--cap-drop", "ALL");
	add(&a, "--new-session"); /* no TIOCSTI into a terminal we were given */
	add2(&a, "--hostname", "kis-sandbox");
	add(&a, "--clearenv");
	/* a one-shot run's environment travels in its EXEC request; a
	 * session's is the agent's own, the base of every exec */
	for (char **e = pl->n.envp; session && e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		_cleanup_free_ char *k = strndup(*e, (size_t)(eq - *e));
		if (!k) {
			a.oom = true;
			break;
		}
		add3(&a, "--setenv", k, eq + 1);
	}
	if (pl->root == KIS_ROOT_WORKSPACE && pl->workspace) {
		add3(&a, "--bind", STAGE_WS, "/");
	} else {
		add_system_view(&a);
		if (pl->workspace)
			add3(&a, "--bind", STAGE_WS, "/workspace");
	}
	add2(&a, "--proc", "/proc");
	add_proc_view(&a);
	add2(&a, "--dev", "/dev");
	add2(&a, "--tmpfs", "/tmp");
	/* the mounts, after /tmp (a target below it lands on the new tmpfs);
	 * staged idmapped (read-only ones MOUNT_ATTR_RDONLY already), and
	 * bound read-only again by bwrap */
	for (size_t i = 0; i < pl->n_mounts; i++)
		add3(&a, pl->mounts[i].ro ? "--ro-bind" : "--bind", pl->mounts[i].stage,
		     pl->mounts[i].target);
	if (pl->net == KIS_NET_EGRESS && !(pl->root == KIS_ROOT_WORKSPACE && pl->workspace))
		add3(&a, "--ro-bind", STAGE_RESOLV, "/etc/resolv.conf"); /* the forwarder */
	add3(&a, "--ro-bind", STAGE_AGENT, AGENT_IN_SANDBOX);
	add_fd(&a, "--seccomp", seccomp_fd);
	if (info_fd >= 0)
		add_fd(&a, "--info-fd", info_fd);
	add2(&a, "--chdir", "/");
	add(&a, "--");
	add(&a, AGENT_IN_SANDBOX);
	/* bwrap loads the program just before it execs the agent: the agent
	 * checks that a filter is in force before it serves (agent/main.c) */
	add(&a, "--require-seccomp");
	add2(&a, session ? "--listen-fd" : "--channel-fd", "3");
	if (session)
		add2(&a, "--cwd", pl->inside_cwd);
	if (a.oom) {
		argv_free(a.v);
		return NULL;
	}
	return a.v;
}

static char *bubblewrap_describe(const struct kis_plan *pl)
{
	_cleanup_free_ char *base = kis_native_plan_describe(&pl->n, "bubblewrap");
	json_error_t je;
	json_t *o = base ? json_loads(base, 0, &je) : NULL;
	char **argv = build_argv(pl, -1, -1, -1, false);
	if (!o || !argv) {
		json_decref(o);
		argv_free(argv);
		return NULL;
	}
	json_object_set_new(o, "bwrap_argv", kis_strv_json(argv));
	json_object_set_new(o, "cwd", json_string(pl->inside_cwd));
	if (pl->net == KIS_NET_EGRESS)
		json_object_set_new(o, "egress", kis_egress_describe(pl->allow, pl->n_allow,
								     pl->allow_set,
								     kis_egress_helper_uid(pl->ids)));
	json_object_set_new(o, "ids", json_pack("{s:I, s:I}", "first",
						(json_int_t)(pl->rootless ? pl->own_uid : pl->ids),
						"count",
						(json_int_t)(pl->rootless ? 1 : KIS_IDS_COUNT)));
	argv_free(argv);
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* ---- running ---- */

struct bw_start {
	const struct kis_plan *pl;
	struct kis_run_cgroup rc;
	int seccomp_fd;
	int info_fd;  /* write end for bwrap --info-fd, or -1 */
	int userns_fd;
	int netns_fd; /* egress: the engine's network namespace, or -1 */
	struct kis_egress eg;
	uint64_t ns_nproc; /* rootless, no group: RLIMIT_NPROC in its namespace, or 0 */
};

static int clear_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	return fl < 0 ? -1 : fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
}

static int child_fail(struct kis_error **err, const char *what)
{
	return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot prepare the sandbox: %s", what);
}

/* In the child before exec of bwrap, as root; no allocation on the way
 * to exec. Fd 3 is the channel or the listening socket. */
static int bw_child(void *ctx, struct kis_error **err)
{
	struct bw_start *s = ctx;
	const struct kis_plan *pl = s->pl;
	TRY(kis_run_cgroup_join(&s->rc, err));
	if (s->netns_fd >= 0 && setns(s->netns_fd, CLONE_NEWNET) < 0)
		return child_fail(err, "cannot enter the sandbox's network namespace");
	/* bwrap hands every inherited fd to the command: only ours pass (an
	 * fd our own caller leaked to us included) */
	int keep[4] = {s->seccomp_fd, s->info_fd, 3, s->userns_fd};
	TRY(kis_cloexec_fds_from(3, keep, 4, err));
	/* rootless: a user namespace of our own, in which we are root with
	 * every capability; what follows (mount namespace, staging, bwrap's
	 * own namespaces) then runs there, and nothing of it on the host */
	if (pl->rootless && kis_userns_own(pl->own_uid, pl->own_gid) < 0)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, errno,
				     "cannot make a user namespace as an ordinary user: enable "
				     "unprivileged user namespaces (user.max_user_namespaces, "
				     "kernel.unprivileged_userns_clone)");
	/* and now the run's own count: fork checks the caller's
	 * RLIMIT_NPROC against the tasks of its uid in this namespace and
	 * those below it (kernel/ucount.c is_rlimit_overlimit, first level),
	 * which are this run's alone; lowering needs no privilege */
	if (s->ns_nproc) {
		struct rlimit r = {s->ns_nproc, s->ns_nproc};
		if (setrlimit(RLIMIT_NPROC, &r) < 0)
			return child_fail(err, "RLIMIT_NPROC");
	}
	if (clear_cloexec(s->seccomp_fd) < 0 || (s->userns_fd >= 0 && clear_cloexec(s->userns_fd) < 0) ||
	    (s->info_fd >= 0 && clear_cloexec(s->info_fd) < 0))
		return child_fail(err, "cannot pass descriptors to bwrap");
	if (kis_idmap_private_ns() < 0)
		return child_fail(err, "a private mount namespace");
	if (kis_stage_tmpfs(STAGE) < 0)
		return child_fail(err, "a tmpfs on " STAGE);
	int f = open(STAGE_AGENT, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (f < 0)
		return child_fail(err, STAGE_AGENT);
	close(f);
	if (pl->net == KIS_NET_EGRESS) {
		static const char resolv[] = KIS_EGRESS_RESOLV;
		f = open(STAGE_RESOLV, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (f < 0 || write(f, resolv, sizeof(resolv) - 1) != (ssize_t)sizeof(resolv) - 1)
			return child_fail(err, STAGE_RESOLV);
		close(f);
	}
	if (kis_idmap_bind(pl->agent, STAGE_AGENT, -1) < 0)
		return child_fail(err, "cannot place the agent");
	if (pl->workspace) {
		if (mkdir(STAGE_WS, 0755) < 0)
			return child_fail(err, STAGE_WS);
		int r = pl->ws_lower ? kis_idmap_overlay(pl->ws_lower, pl->ws_dir, STAGE_WS,
							 s->userns_fd, pl->ids) :
				       kis_idmap_bind(pl->workspace, STAGE_WS, s->userns_fd);
		if (r < 0)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, errno,
					     "workspace: cannot show it through the sandbox's id map "
					     "(idmapped mounts: Linux 5.12, of overlay layers 6.13)");
	}
	/* each mount's source shown through the sandbox's id map as the
	 * workspace is: a workspace owned by the sandbox's user, a base too
	 * (read-only); resolved with no symlink on the way (confine.h) */
	for (size_t i = 0; i < pl->n_mounts; i++) {
		const struct bw_mount *m = &pl->mounts[i];
		if (mkdir(m->stage, 0755) < 0)
			return child_fail(err, m->stage);
		int r = m->lower ? kis_idmap_overlay_source(m->lower, m->ws_dir, m->stage,
							    s->userns_fd, pl->ids, m->ro) :
				   kis_idmap_bind_source(m->path, m->stage, s->userns_fd, m->ro);
		if (r < 0)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, errno,
					     "mounts[%zu]: cannot show its source through the "
					     "sandbox's id map", i);
	}
	/* bwrap runs as the sandbox's first host id: no capability on the
	 * host, the owner of the sandbox's user namespace. Raw system calls:
	 * glibc's wrappers signal every thread of the process (setxid), and a
	 * child sharing our memory (vfork_ok) would reach the caller's */
	if (pl->rootless)
		return 0; /* bwrap runs as our namespace's root, capabilities there only */
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, (gid_t)pl->ids, (gid_t)pl->ids, (gid_t)pl->ids) < 0 ||
	    syscall(SYS_setresuid, pl->ids, pl->ids, pl->ids) < 0)
		return child_fail(err, "cannot switch to the sandbox's ids");
	return 0;
}

/* Export the policy for this network mode, at fd >= 10 so that spawn's
 * dup2 onto 0-3 can never land on it. */
static int export_seccomp(enum kis_net_mode net, struct kis_error **err)
{
	/* an IPC namespace separates SysV IPC from the host's */
	struct kis_seccomp_opts sc = {.net = net, .allow_sysv_ipc = true};
	int fd = -1;
	TRY(kis_host_seccomp_fd(&sc, &fd, err));
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	int e = errno;
	close(fd);
	if (hi < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot place the seccomp program");
	return hi;
}

/* With the workspace as the root, bwrap makes its mount points in it
 * (/proc, /dev, /tmp, /.kis/agent, the mounts' targets) under its new root
 * before pivot_root(2), following any link there: one an earlier run
 * planted (/.kis -> /oldroot/tmp/x) would lead it into the host's tree, as
 * the sandbox's host id, making files in the host's world-writable
 * directories. Each point's path is walked beneath the workspace with
 * openat2(2) RESOLVE_NO_SYMLINKS first (a session writing the workspace at
 * the same time could still race it). */
static int check_root_points(const struct kis_plan *pl, struct kis_error **err)
{
	if (pl->root != KIS_ROOT_WORKSPACE || !pl->workspace)
		return 0;
	_cleanup_close_ int ws = open(pl->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the workspace '%s'",
				     pl->workspace);
	const char *fixed[] = {"proc", "dev", "tmp", AGENT_IN_SANDBOX + 1};
	for (size_t i = 0; i < ARRAY_SIZE(fixed) + pl->n_mounts; i++) {
		const char *rel = i < ARRAY_SIZE(fixed) ? fixed[i] : pl->mounts[i - ARRAY_SIZE(fixed)].target;
		while (*rel == '/')
			rel++;
		if (!*rel)
			continue;
		if (kis_walk_meets_link(ws, rel) == 1)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "root 'workspace': /%s in the workspace passes a symbolic "
					     "link, which bubblewrap would follow out of the sandbox "
					     "while it mounts there: remove the link",
					     rel);
	}
	return 0;
}

/* The descriptors both kinds of start need: the cgroup, the seccomp
 * program, the user namespace (each at fd >= 10). */
static int start_prepare(struct kis_plan *pl, const char *cg_name, bool session,
			 struct bw_start *s, struct kis_error **err)
{
	*s = (struct bw_start){.pl = pl, .seccomp_fd = -1, .info_fd = -1, .userns_fd = -1,
			       .netns_fd = -1, .eg = KIS_EGRESS_INIT};
	TRY(check_root_points(pl, err));
	/* the engine's own processes in the group: bwrap, the agent, and in a
	 * session the worker of an exec (concurrent execs share one count);
	 * pasta as it joins (egress_into_cgroup) */
	TRY(kis_host_cgroup_open(&s->rc, cg_name, &pl->n.limits, pl->cgroup_limits,
				 pl->cgroup_explicit, KIS_BW_ENGINE_PIDS + session, err));
	/* rootless with no group: RLIMIT_NPROC (rc.fb_nproc) binds the
	 * command, since bw_child sets it before kis_userns_own makes the
	 * user namespace: a namespace's own cap is its creator's RLIMIT_NPROC
	 * then (create_user_ns: set_userns_rlimit_max), and fork checks every
	 * level of the ucounts chain up to the user's count on the host
	 * (kernel/ucount.c is_rlimit_overlimit). Measured on 6.18 (issue 40
	 * item 1): 600 forks asked, 255 made under pids 256. That cap counts
	 * the user's other processes too (a run's share moves as they come
	 * and go: 400 of 400 made while another run's 400 ended), so inside
	 * its namespace bw_child lowers it to the run's own: limits.pids and
	 * the engine's processes, counted in that namespace only. */
	if (s->rc.fb_nproc)
		s->ns_nproc = pl->n.limits.pids + KIS_BW_ENGINE_PIDS + session;
	if ((s->seccomp_fd = export_seccomp(pl->net, err)) < 0)
		return -1;
	if (pl->rootless)
		return 0; /* the child makes its own (bw_child) */
	int ns = -1;
	TRY(kis_userns_open(pl->ids, KIS_IDS_COUNT, &ns, err));
	s->userns_fd = fcntl(ns, F_DUPFD_CLOEXEC, 10);
	int e = errno;
	close(ns);
	if (s->userns_fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot place the user namespace");
	if (pl->net == KIS_NET_EGRESS && session) {
		/* a session's pasta lives until destroy, ready before create returns */
		TRY(kis_egress_start(&s->eg, pl->allow, pl->n_allow, pl->allow_set,
				     kis_egress_helper_uid(pl->ids), false, true, err));
		s->netns_fd = s->eg.netns_fd;
	} else if (pl->net == KIS_NET_EGRESS) {
		/* a one-shot run: S now, nft and pasta once bwrap is on its way
		 * (it needs only S; they need nothing of it) */
		TRY(kis_egress_prepare(&s->eg, pl->allow, pl->n_allow, pl->allow_set,
				       kis_egress_helper_uid(pl->ids), false, err));
		s->netns_fd = s->eg.netns_fd;
	}
	return 0;
}

/* pasta is the sandbox's own work: counted in its cgroup (its pids
 * limit; its memory from the move on, as neither cgroup version moves the
 * pages already charged) and killed with it. The engine's cgroup is made
 * before bwrap starts, so the move needs nothing of the sandbox. */
static int egress_into_cgroup(struct bw_start *s, struct kis_error **err)
{
	if (s->eg.pid <= 0 || !s->rc.cg)
		return 0;
	/* pasta is the engine's process, not the command's */
	TRY(kis_run_cgroup_engine_joins(&s->rc, err));
	return kis_cgroup_attach(s->rc.cg, s->eg.pid, err);
}

/* A one-shot run's command starts once pasta has attached S's tap
 * (kis_egress_ready_for_command); pasta joins the cgroup when it is ready
 * as a whole, watched while the command runs. Its failure meanwhile kills
 * the command and fails the run (kept in eg_err). */
struct egress_watch {
	struct bw_start *s;
	struct kis_error *eg_err;
};

static int egress_watch_ready(void *ctx, int fd)
{
	(void)fd;
	struct egress_watch *w = ctx;
	int r = kis_egress_pasta(&w->s->eg, 0, &w->eg_err);
	if (r == 1 && egress_into_cgroup(w->s, &w->eg_err) < 0)
		r = -1;
	return r;
}

static void start_release(struct bw_start *s)
{
	kis_run_cgroup_close(&s->rc);
	kis_closep(&s->seccomp_fd);
	kis_closep(&s->info_fd);
	kis_closep(&s->userns_fd);
	kis_egress_stop(&s->eg); /* a session's was released once it was saved */
}

/* bwrap's own words when it could not start the sandbox (its stderr). */
static void read_bwrap_error(int fd, char *msg, size_t len)
{
	size_t n = 0;
	ssize_t r;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (n < len - 1 && (r = RETRY_EINTR(read(fd, msg + n, len - 1 - n))) > 0)
		n += (size_t)r;
	msg[n] = '\0';
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
}

static const char *const bwrap_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/* One-shot: bwrap as our child (it dies with us), the agent as PID 1 over
 * a socketpair; the command's limits, env and cwd travel in the EXEC
 * request and apply to it alone, never to bwrap's own setup. */
static int bubblewrap_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	struct bw_start s;
	int ch[2] = {-1, -1}, ep[2] = {-1, -1};
	char **argv = NULL;
	pid_t bw = -1;
	int r = -1;
	if (start_prepare(pl, pl->sandbox_id, false, &s, err) < 0)
		goto out;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the agent's channel");
		goto out;
	}
	if (!(argv = build_argv(pl, s.userns_fd, s.seccomp_fd, -1, false))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build the bwrap command");
		goto out;
	}
	struct kis_spawn sp = {
		.argv = argv, .envp = (char *const *)bwrap_env, .cwd = "/", .stdin_fd = -1,
		.child_setup = bw_child, .child_ctx = &s, .pass_fd3 = true, .fd3 = ch[1],
		.vfork_ok = true, /* bw_child: system calls on what start_prepare made */
	};
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	r = devnull < 0 ? kis_error_set(err, KIS_E_INTERNAL, errno, "/dev/null") :
			  kis_spawn_start(&sp, devnull, ep[1], &bw, err);
	if (devnull >= 0)
		close(devnull);
	kis_closep(&ch[1]);
	kis_closep(&ep[1]);
	ch[1] = ep[1] = -1;
	/* a one-shot run's pasta dies with us */
	if (r >= 0 && pl->net == KIS_NET_EGRESS && !pl->rootless)
		r = kis_egress_launch(&s.eg, true, err);
	if (r < 0)
		goto out;
	struct egress_watch ew = {.s = &s};
	struct kis_watch w = {.fd = -1, .on_ready = egress_watch_ready, .ctx = &ew};
	struct kis_agent_run ar = {
		.conn = ch[0], .argv = pl->n.argv, .env = pl->n.envp, .cwd = pl->inside_cwd,
		.limits = pl->n.limits, .io = pl->n.io, .peer = "the sandbox's agent",
		.has_cpu = s.rc.has_cpu, .cpu_fd = s.rc.cpu_fd, .watch = &w,
	};
	/* a one-shot run's pasta set itself up while bwrap started, as far
	 * as the command needs it */
	r = kis_egress_ready_for_command(&s.eg, err);
	if (r >= 0) {
		int p = kis_egress_pasta(&s.eg, 0, err);
		if (p < 0 || (p == 1 && egress_into_cgroup(&s, err) < 0))
			r = -1;
		w.fd = p == 0 ? kis_egress_pasta_fd(&s.eg) : -1;
	}
	if (r >= 0)
		r = kis_agent_run_once(&ar, res, err);
	/* pasta gave up while the command ran (then killed), or before the
	 * command ended without our noticing: the run's setup failed */
	if (r >= 0 && !ew.eg_err)
		(void)kis_egress_pasta(&s.eg, 0, &ew.eg_err);
	if (ew.eg_err) {
		if (r >= 0 && err) {
			*err = ew.eg_err;
			r = -1;
		} else {
			r = -1;
			kis_error_free(ew.eg_err);
		}
		ew.eg_err = NULL;
	}
	kis_egress_kill(&s.eg); /* its teardown overlaps ours */
	struct kis_cgroup_events ev;
	if (r < 0 && s.rc.cg && kis_cgroup_read_events(s.rc.cg, &ev, NULL) == 0 &&
	    ev.oom_kills > 0) {
		/* bwrap and the agent count against limits.memory_bytes: the
		 * OOM killer ended one of them, which is the limit's doing (the
		 * floor in kis/limits.h makes it rare), not the engine's fault */
		kis_error_free(err ? *err : NULL);
		if (err)
			*err = NULL;
		res->reason = KIS_REASON_MEMORY_LIMIT;
		res->exit_code = -1;
		res->signal = SIGKILL;
		res->limit_events.counted = true;
		res->limit_events.oom_kills = ev.oom_kills;
		res->limit_events.forks_refused = ev.pids_max;
		free(res->detail);
		if (asprintf(&res->detail,
			     "memory use passed limits.memory_bytes (%llu bytes) before the "
			     "command's end was reported: bwrap and the sandbox's agent count "
			     "against it",
			     (unsigned long long)s.rc.limits.memory_bytes) < 0)
			res->detail = NULL;
		r = 0;
	} else if (r < 0) {
		char msg[400];
		read_bwrap_error(ep[0], msg, sizeof(msg));
		if (*msg && err) {
			kis_error_free(*err);
			*err = NULL;
			kis_error_set(err, KIS_E_INTERNAL, 0, "bwrap could not start the sandbox: %s",
				      msg);
		}
	} else if (s.rc.cg) {
		/* the host's evidence over the agent's report */
		struct kis_supervise_hooks h;
		kis_run_cgroup_hooks(&s.rc, &h);
		if (h.limit_events)
			h.limit_events(h.ctx, res);
		bool ended_badly = res->reason == KIS_REASON_SIGNALED ||
				   (res->reason == KIS_REASON_EXITED && res->exit_code != 0);
		enum kis_reason why;
		char *detail = NULL;
		if (ended_badly && h.explain && h.explain(h.ctx, &why, &detail) > 0) {
			res->reason = why;
			free(res->detail);
			res->detail = detail;
		}
	}
out:
	/* the command has ended: closing the channel ends the agent, PID 1,
	 * and with it every process of the pid namespace; bwrap follows */
	kis_closep(&ch[0]);
	kis_closep(&ch[1]);
	kis_closep(&ep[0]);
	kis_closep(&ep[1]);
	if (bw > 0) {
		if (s.rc.cg)
			kis_cgroup_kill(s.rc.cg, NULL);
		kill(-bw, SIGKILL);
		RETRY_EINTR(waitpid(bw, NULL, 0));
	}
	argv_free(argv);
	start_release(&s);
	return r;
}

static void bubblewrap_plan_free(struct kis_plan *pl)
{
	if (pl)
		plan_release(pl);
}

/* bwrap --info-fd writes {"child-pid": N} once the sandbox's first process
 * exists; read it, waiting a bounded time. */
static pid_t read_child_pid(int fd)
{
	char buf[512];
	size_t n = 0;
	for (int i = 0; i < 100 && n < sizeof(buf) - 1; i++) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (RETRY_EINTR(poll(&pfd, 1, 100)) <= 0)
			continue;
		ssize_t r = RETRY_EINTR(read(fd, buf + n, sizeof(buf) - 1 - n));
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = '\0';
		if (strchr(buf, '}'))
			break;
	}
	buf[n] = '\0';
	json_error_t je;
	json_t *o = json_loads(buf, JSON_DISABLE_EOF_CHECK, &je);
	pid_t pid = (pid_t)json_integer_value(json_object_get(o, "child-pid"));
	json_decref(o);
	return pid;
}

static int bubblewrap_start_session(struct kis_plan *pl, const struct kis_session_ctx *ctx,
				    pid_t *pid, struct kis_error **err)
{
	struct bw_start s;
	int info[2] = {-1, -1};
	char **argv = NULL;
	int r = -1;
	if (start_prepare(pl, ctx->id, true, &s, err) < 0)
		goto out;
	if (pipe2(info, O_CLOEXEC) < 0 || (s.info_fd = fcntl(info[1], F_DUPFD_CLOEXEC, 10)) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the info pipe");
		goto out;
	}
	kis_closep(&info[1]);
	info[1] = -1;
	if (!(argv = build_argv(pl, s.userns_fd, s.seccomp_fd, s.info_fd, true))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build the bwrap command");
		goto out;
	}
	struct kis_spawn sp = {
		.argv = argv, .envp = (char *const *)bwrap_env, .cwd = "/", .stdin_fd = -1,
		.child_setup = bw_child, .child_ctx = &s, .pass_fd3 = true, .fd3 = ctx->listen_fd,
		/* the creator's until the session is published: its watcher
		 * kills bwrap and the agent, bwrap's child (no --die-with-parent
		 * for a session, whose bwrap outlives its parent) */
		.tethered = true,
	};
	pid_t bw = 0;
	if (kis_spawn_detached(&sp, &bw, err) < 0)
		goto out;
	kis_closep(&s.info_fd);
	s.info_fd = -1;
	pid_t agent = read_child_pid(info[0]);
	if (agent <= 0) {
		kill(bw, SIGKILL);
		kis_error_set(err, KIS_E_INTERNAL, 0, "bwrap did not start the agent");
		goto out;
	}
	/* the cgroup and pasta outlive us: end_session finds them in the
	 * session's dir */
	if (egress_into_cgroup(&s, err) < 0 || kis_host_cgroup_save(ctx->dir_fd, &s.rc, err) < 0 ||
	    (s.eg.pid > 0 && kis_egress_save(ctx->dir_fd, &s.eg, err) < 0)) {
		kill(agent, SIGKILL);
		goto out;
	}
	kis_egress_release(&s.eg);
	*pid = agent;
	r = 0;
out:
	argv_free(argv);
	kis_closep(&info[0]);
	kis_closep(&info[1]);
	start_release(&s);
	return r;
}

/* The agent's death ended the pid namespace; the cgroup goes now. */
static int bubblewrap_end_session(const struct kis_session_ctx *ctx, struct kis_error **err)
{
	(void)err;
	kis_egress_end_saved(ctx->dir_fd);
	kis_host_cgroup_end(ctx->dir_fd);
	return 0;
}

const struct kis_backend kis_backend_bubblewrap = {
	.session_cpu_fd = kis_host_cgroup_cpu_fd,
	.session_explain = kis_host_cgroup_explain,
	.end_session = bubblewrap_end_session,
	.name = "bubblewrap",
	.tier = KIS_TIER_HOST,
	.own_workspace_view = true,
	.rootless_layers = true,
	.probe = bubblewrap_probe,
	.plan = bubblewrap_plan,
	.amend = bubblewrap_amend,
	.describe = bubblewrap_describe,
	.run = bubblewrap_run,
	.plan_free = bubblewrap_plan_free,
	.start_session = bubblewrap_start_session,
	.session_exec = kis_agent_session_exec,
};
