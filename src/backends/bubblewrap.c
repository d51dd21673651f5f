/* SPDX-License-Identifier: MIT */
/* The bubblewrap backend (host tier): the command runs inside `bwrap` with
 * new user, mount, pid, ipc, uts, cgroup and network namespaces, no
 * capabilities, a read-only system view and the shared seccomp policy.
 *
 * Theory of operation. plan() validates the profile and records what the
 * sandbox looks like; run() exports the seccomp program to a sealed memfd,
 * builds bwrap's argv as a list (never a shell string, `--` before the
 * command) naming that fd in `--seccomp FD`, and runs bwrap through
 * kis_exec_run. In the child, before exec of bwrap, the hook joins the
 * run's cgroup and clears close-on-exec on the seccomp fd only: bwrap passes
 * inherited descriptors through to the command (bubblewrap(1)), so every
 * other one must be close-on-exec already (they are: the engine opens all
 * of its fds O_CLOEXEC, and spawn dup2s only 0-2).
 *
 * Sessions: bwrap runs detached with `--as-pid-1` (the agent is the pid
 * namespace's init and reaps orphans itself), the listening socket as fd
 * 3, the agent binary bound read-only at /.kis/agent, and `--info-fd`
 * telling us the agent's pid on the host: that pid is the session's life,
 * and when destroy ends it the kernel ends every process of the pid
 * namespace (pid_namespaces(7)). No --die-with-parent there: the agent must
 * outlive the client that created it. */
#include "util.h"

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "backends/common.h"
#include "backends/host_common.h"
#include "confine/confine.h"

#define AGENT_IN_SANDBOX "/.kis/agent"

static const char *bwrap_path(void)
{
	static const char *const cands[] = {"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"};
	return kis_find_tool("KIS_BWRAP", cands, ARRAY_SIZE(cands));
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
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, why_len, "cannot test bwrap: %s", strerror(errno));
		return false;
	}
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(p[1], 2);
		char *argv[] = {(char *)bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc",
				"--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
				"--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr",
				"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
				"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
				"--", "/usr/bin/true", NULL};
		char *envp[] = {NULL};
		execve(bwrap, argv, envp);
		_exit(127);
	}
	close(p[1]);
	char buf[200] = "";
	size_t n = 0;
	if (pid > 0) {
		ssize_t r;
		while (n < sizeof(buf) - 1 && (r = RETRY_EINTR(read(p[0], buf + n, sizeof(buf) - 1 - n))) > 0)
			n += (size_t)r;
	}
	close(p[0]);
	buf[n] = '\0';
	int st = 0;
	if (pid < 0 || RETRY_EINTR(waitpid(pid, &st, 0)) < 0 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		char *nl = strchr(buf, '\n');
		if (nl)
			*nl = '\0';
		snprintf(why, why_len, "bwrap cannot create its namespaces here: %s",
			 *buf ? buf : "it failed");
		return false;
	}
	return true;
}

static void bubblewrap_probe(struct kis_caps *c)
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
	if (kis_probe_thorough()) {
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
	/* off: empty netns + seccomp AF_UNIX only; loopback: netns with lo up
	 * (bwrap brings it up); host: only with its hatch. egress: later. */
	c->net_modes = (1u << KIS_NET_OFF) | (1u << KIS_NET_LOOPBACK) | (1u << KIS_NET_HOST);
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_OUTPUT | KIS_LIMIT_FILE |
		    KIS_LIMIT_OPEN_FILES | (kis_probe_thorough() ? kis_cgroup_limits_available() : 0);
}

struct kis_plan {
	struct kis_native_plan n;
	const char *bwrap;
	const char *sandbox_id;
	char *workspace;          /* host path, or NULL */
	char *inside_cwd;         /* the working directory inside the sandbox */
	enum kis_root_mode root;
	enum kis_net_mode net;
	unsigned cgroup_limits;
	unsigned cgroup_explicit;
};

static int bubblewrap_plan(const struct kis_caps *caps, const struct kis_run_request *req,
			   struct kis_plan **out, struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	if (p->net == KIS_NET_EGRESS)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "network.mode 'egress' is not enforced by the bubblewrap backend "
				     "yet: use 'off' or 'loopback', or another tier");
	if (p->net == KIS_NET_HOST && !p->escape_hatch.allow_net_host)
		return kis_error_set(err, KIS_E_ESCAPE_HATCH_FORBIDDEN, 0,
				     "network.mode 'host' removes network confinement and requires "
				     "escape_hatch.allow_net_host (--allow-net-host)");
	if (p->root == KIS_ROOT_WORKSPACE && !req->workspace_path && (p->base || p->workspace))
		; /* planned once without the workspace (run.c): checked again with it */
	else if (p->root == KIS_ROOT_WORKSPACE && !req->workspace_path)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "root: 'workspace' needs a workspace (--base or --workspace) "
				     "holding an OS image");
	if (p->cwd && p->cwd[0] != '/')
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "cwd: '%s' is not absolute",
				     p->cwd);
	struct kis_caps c = *caps;
	unsigned explicit_cg = (p->limits.memory_bytes ? KIS_LIMIT_MEMORY : 0) |
			       (p->limits.pids ? KIS_LIMIT_PIDS : 0);
	if (explicit_cg && !kis_probe_thorough())
		c.limits |= kis_cgroup_limits_available();
	TRY(kis_check_limits(&c, p, "bubblewrap", err));
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
	pl->bwrap = bwrap;
	pl->sandbox_id = req->sandbox_id;
	pl->root = p->root;
	pl->net = p->net;
	pl->cgroup_limits = KIS_LIMIT_MEMORY | KIS_LIMIT_PIDS;
	pl->cgroup_explicit = explicit_cg;
	const char *home = req->workspace_path ? (p->root == KIS_ROOT_WORKSPACE ? "/" : "/workspace")
					       : "/";
	if (req->workspace_path && !(pl->workspace = strdup(req->workspace_path)))
		goto oom;
	if (!(pl->inside_cwd = strdup(p->cwd ? p->cwd : home)))
		goto oom;
	/* Paths in the environment are the sandbox's, not the host's. */
	if (!kis_host_profile_has_env(p, "HOME") &&
	    kis_host_env_set(&pl->n.envp, "HOME", pl->inside_cwd, true) < 0)
		goto oom;
	/* bwrap itself starts in /; --chdir places the command. */
	free(pl->n.cwd);
	if (!(pl->n.cwd = strdup("/")))
		goto oom;
	*out = pl;
	return 0;
oom:
	kis_native_plan_release(&pl->n);
	free(pl->workspace);
	free(pl->inside_cwd);
	free(pl);
	return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
}

/* ---- bwrap's argv, as a list ---- */

struct argv_b {
	char **v;
	size_t n;
	bool oom;
};

static void add(struct argv_b *a, const char *s)
{
	if (a->oom)
		return;
	char **g = realloc(a->v, (a->n + 2) * sizeof(*g));
	if (!g || !(g[a->n] = strdup(s))) {
		if (g)
			a->v = g;
		a->oom = true;
		return;
	}
	a->v = g;
	g[++a->n] = NULL;
}

static void add2(struct argv_b *a, const char *x, const char *y)
{
	add(a, x);
	add(a, y);
}

static void add3(struct argv_b *a, const char *x, const char *y, const char *z)
{
	add(a, x);
	add(a, y);
	add(a, z);
}

static void argv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* System directories read-only; a merged-/usr link (/bin -> usr/bin) is
 * recreated as the same link. Missing ones are skipped. */
static const char *const system_dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32",
					  "/lib64", "/libx32", "/etc", "/opt"};

/* Secrets in /etc a sandbox never needs: the engine often runs as root,
 * and root in bwrap's user namespace is root on the host for DAC (the
 * default mapping is the caller's uid), so root's 0600 files stay out of
 * view: a file is covered by /dev/null, a directory by an empty tmpfs. */
static const char *const etc_hidden[] = {
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
	"/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd", "/etc/kis",
};

static void add_system_view(struct argv_b *a)
{
	for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++) {
		struct stat st;
		if (lstat(system_dirs[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			char t[256];
			ssize_t n = readlink(system_dirs[i], t, sizeof(t) - 1);
			if (n <= 0)
				continue;
			t[n] = '\0';
			add3(a, "--symlink", t, system_dirs[i]);
		} else if (S_ISDIR(st.st_mode)) {
			add3(a, "--ro-bind", system_dirs[i], system_dirs[i]);
		}
	}
	/* as anyone else the mapping is that user, and DAC does the job */
	for (size_t i = 0; geteuid() == 0 && i < ARRAY_SIZE(etc_hidden); i++) {
		struct stat st;
		if (lstat(etc_hidden[i], &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			add2(a, "--tmpfs", etc_hidden[i]);
			add2(a, "--remount-ro", etc_hidden[i]);
		} else if (S_ISREG(st.st_mode)) {
			add3(a, "--ro-bind", "/dev/null", etc_hidden[i]);
		}
	}
}

/* seccomp_fd < 0: describe only ("FD"). agent: bind it and exec it. */
static char **build_argv(const struct kis_plan *pl, int seccomp_fd, int info_fd,
			 const char *agent, bool session)
{
	struct argv_b a = {0};
	char num[16];
	add(&a, pl->bwrap);
	add(&a, "--unshare-user");
	add(&a, "--unshare-pid");
	add(&a, "--unshare-ipc");
	add(&a, "--unshare-uts");
	add(&a, "--unshare-cgroup-try");
	if (pl->net != KIS_NET_HOST)
		add(&a, "--unshare-net"); /* bwrap brings lo up in the new netns */
	if (session) {
		add(&a, "--as-pid-1"); /* the agent reaps; its death ends the pid ns */
	} else {
		add(&a, "--die-with-parent");
	}
	add2(&a, "--cap-drop", "ALL");
	add(&a, "--new-session"); /* no TIOCSTI into a terminal we were given */
	add2(&a, "--hostname", "kis-sandbox");
	add(&a, "--clearenv");
	for (char **e = pl->n.envp; e && *e; e++) {
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
		add3(&a, "--bind", pl->workspace, "/");
	} else {
		add_system_view(&a);
		if (pl->workspace)
			add3(&a, "--bind", pl->workspace, "/workspace");
	}
	add2(&a, "--proc", "/proc");
	add2(&a, "--dev", "/dev");
	add2(&a, "--tmpfs", "/tmp");
	if (agent)
		add3(&a, "--ro-bind", agent, AGENT_IN_SANDBOX);
	if (seccomp_fd >= 0) {
		snprintf(num, sizeof(num), "%d", seccomp_fd);
		add2(&a, "--seccomp", num);
	} else {
		add2(&a, "--seccomp", "FD");
	}
	if (info_fd >= 0) {
		snprintf(num, sizeof(num), "%d", info_fd);
		add2(&a, "--info-fd", num);
	}
	add2(&a, "--chdir", pl->inside_cwd);
	add(&a, "--");
	for (char **v = pl->n.argv; v && *v; v++)
		add(&a, (agent && v == pl->n.argv) ? AGENT_IN_SANDBOX : *v);
	if (a.oom) {
		argv_free(a.v);
		return NULL;
	}
	return a.v;
}

static json_t *strv_json(char **v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static char *bubblewrap_describe(const struct kis_plan *pl)
{
	_cleanup_free_ char *base = kis_native_plan_describe(&pl->n, "bubblewrap");
	json_error_t je;
	json_t *o = base ? json_loads(base, 0, &je) : NULL;
	char **argv = build_argv(pl, -1, -1, NULL, false);
	if (!o || !argv) {
		json_decref(o);
		argv_free(argv);
		return NULL;
	}
	json_object_set_new(o, "bwrap_argv", strv_json(argv));
	json_object_set_new(o, "cwd", json_string(pl->inside_cwd));
	argv_free(argv);
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* ---- running ---- */

struct bw_start {
	struct kis_run_cgroup rc;
	int seccomp_fd;
	int info_fd; /* write end for bwrap --info-fd, or -1 */
	bool keep3;  /* the session's listening socket */
};

static int clear_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	return fl < 0 ? -1 : fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
}

/* In the child before exec of bwrap: no allocation. */
static int bw_child(void *ctx, struct kis_error **err)
{
	struct bw_start *s = ctx;
	TRY(kis_run_cgroup_join(&s->rc, err));
	/* bwrap hands every inherited fd to the command: only ours pass (an
	 * fd our own caller leaked to us included) */
	int keep[3] = {s->seccomp_fd, s->info_fd, s->keep3 ? 3 : -1};
	TRY(kis_cloexec_fds_from(3, keep, 3, err));
	if (clear_cloexec(s->seccomp_fd) < 0 || (s->info_fd >= 0 && clear_cloexec(s->info_fd) < 0))
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot pass the seccomp program");
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

static int bubblewrap_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	struct bw_start s = {.seccomp_fd = -1, .info_fd = -1};
	TRY(kis_host_cgroup_open(&s.rc, pl->sandbox_id, &pl->n.limits, pl->cgroup_limits,
				 pl->cgroup_explicit, err));
	int r = -1;
	char **argv = NULL, **user_argv = pl->n.argv;
	if ((s.seccomp_fd = export_seccomp(pl->net, err)) < 0)
		goto out;
	if (!(argv = build_argv(pl, s.seccomp_fd, -1, NULL, false))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build the bwrap command");
		goto out;
	}
	struct kis_supervise_hooks hooks;
	kis_run_cgroup_hooks(&s.rc, &hooks);
	pl->n.argv = argv;
	r = kis_native_plan_run(&pl->n, bw_child, &s, &hooks, res, err);
	pl->n.argv = user_argv;
out:
	argv_free(argv);
	if (s.seccomp_fd >= 0)
		close(s.seccomp_fd);
	kis_run_cgroup_close(&s.rc);
	return r;
}

static void bubblewrap_plan_free(struct kis_plan *pl)
{
	if (!pl)
		return;
	kis_native_plan_release(&pl->n);
	free(pl->workspace);
	free(pl->inside_cwd);
	free(pl);
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
	struct bw_start s = {.seccomp_fd = -1, .info_fd = -1, .keep3 = true};
	int info[2] = {-1, -1};
	char **argv = NULL;
	int r = -1;
	if (kis_host_cgroup_open(&s.rc, ctx->id, &pl->n.limits, pl->cgroup_limits,
				 pl->cgroup_explicit, err) < 0)
		return -1;
	if ((s.seccomp_fd = export_seccomp(pl->net, err)) < 0)
		goto out;
	if (pipe2(info, O_CLOEXEC) < 0 || (s.info_fd = fcntl(info[1], F_DUPFD_CLOEXEC, 10)) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the info pipe");
		goto out;
	}
	close(info[1]);
	info[1] = -1;
	if (!(argv = build_argv(pl, s.seccomp_fd, s.info_fd, pl->n.argv[0], true))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build the bwrap command");
		goto out;
	}
	struct kis_spawn sp = {
		.argv = argv, .envp = pl->n.envp, .cwd = "/", .stdin_fd = -1,
		.limits = &pl->n.limits, .child_setup = bw_child, .child_ctx = &s,
		.pass_fd3 = true, .fd3 = ctx->listen_fd,
	};
	pid_t bw = 0;
	if (kis_spawn_detached(&sp, &bw, err) < 0)
		goto out;
	close(s.info_fd);
	s.info_fd = -1;
	pid_t agent = read_child_pid(info[0]);
	if (agent <= 0) {
		kill(bw, SIGKILL);
		kis_error_set(err, KIS_E_INTERNAL, 0, "bwrap did not start the agent");
		goto out;
	}
	/* the cgroup outlives us: end_session finds it in the session's dir */
	if (kis_host_cgroup_save(ctx->dir_fd, &s.rc, err) < 0) {
		kill(agent, SIGKILL);
		goto out;
	}
	*pid = agent;
	r = 0;
out:
	kis_run_cgroup_close(&s.rc);
	argv_free(argv);
	if (s.seccomp_fd >= 0)
		close(s.seccomp_fd);
	if (s.info_fd >= 0)
		close(s.info_fd);
	if (info[0] >= 0)
		close(info[0]);
	if (info[1] >= 0)
		close(info[1]);
	return r;
}

/* The agent's death ended the pid namespace; the cgroup goes now. */
static int bubblewrap_end_session(const struct kis_session_ctx *ctx, struct kis_error **err)
{
	(void)err;
	kis_host_cgroup_end(ctx->dir_fd);
	return 0;
}

static int bubblewrap_session_explain(const struct kis_session_ctx *ctx, struct kis_result *res)
{
	return kis_host_cgroup_explain(ctx->dir_fd, res);
}

const struct kis_backend kis_backend_bubblewrap = {
	.session_explain = bubblewrap_session_explain,
	.end_session = bubblewrap_end_session,
	.name = "bubblewrap",
	.tier = KIS_TIER_HOST,
	.probe = bubblewrap_probe,
	.plan = bubblewrap_plan,
	.describe = bubblewrap_describe,
	.run = bubblewrap_run,
	.plan_free = bubblewrap_plan_free,
	.start_session = bubblewrap_start_session,
};
