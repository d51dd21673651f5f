/* SPDX-License-Identifier: MIT */
/* The landlock backend (host tier): the command runs on the host's own
 * filesystem view under a Landlock ruleset, the shared seccomp policy, no
 * capabilities and, when the engine is root, an unprivileged user.
 *
 * Theory of operation. plan() decides and touches nothing. run() and
 * start_session() prepare what may allocate or fail with a message before
 * fork (the memory/pids cgroup, the workspace's view for the sandbox user:
 * a detached idmapped mount, a private temporary directory, the seccomp
 * program in a sealed memfd, the Landlock ruleset fd, its workspace rule on
 * the view), then spawn's child_setup hook joins the cgroup, moves the view
 * over the workspace in a mount namespace of its own (slave of the host's:
 * the host's filesystem stays in view, nothing goes back) and calls
 * kis_confine_child: harden (rlimits, fds close-on-exec, no_new_privs,
 * capabilities, user), landlock_restrict_self, seccomp, in that order
 * (src/confine/confine.h). The command, or the session agent with its
 * listening socket as fd 3, is then exec'd confined.
 *
 * What Landlock cannot do is refused by name: `root: workspace` (Landlock
 * has no mount namespace to make the workspace the root), network modes
 * loopback and egress (Landlock's TCP rules are per port, and UDP/raw are
 * only stopped by the seccomp socket-family rule, all or nothing). */
#include "core/util.h"

#include <jansson.h>
#include <signal.h>
#include <string.h>

#include "backends/common.h"
#include "backends/host/common.h"
#include "confine/confine.h"
#include "core/tree.h"
#include "backends/agent_run.h"

/* What every profile needs from Landlock: signals and truncation confined
 * to the sandbox; with the network off, no host abstract unix sockets
 * either (X11, D-Bus listen there). TCP rules (ABI 4) are not needed: the
 * seccomp socket-family rule already stops every inet socket; refer
 * (ABI 2) only loosens, and device ioctls (ABI 5) are backed by the
 * seccomp TIOCSTI/TIOCLINUX rule. */
static unsigned required_features(enum kis_net_mode net)
{
	return KIS_LL_SCOPE_SIGNAL | KIS_LL_TRUNCATE |
	       (net == KIS_NET_OFF ? KIS_LL_SCOPE_ABSTRACT_UNIX : 0);
}

static void landlock_probe(const struct kis_ctx *ctx, struct kis_caps *c)
{
	memset(c, 0, sizeof(*c));
	struct kis_landlock_report rep;
	kis_landlock_probe(&rep);
	if (rep.abi <= 0) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "Landlock is not enabled in this kernel (CONFIG_SECURITY_LANDLOCK and "
			 "lsm=landlock)");
		return;
	}
	/* without these no profile can be confined: absent, routed around */
	unsigned lacking = required_features(KIS_NET_HOST) & rep.missing;
	if (lacking) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "Landlock ABI %d lacks '%s' (ABI 6 has everything the host tier needs)",
			 rep.abi, kis_landlock_feature_name(lacking & -lacking));
		return;
	}
	c->present = true;
	c->shell = true;
	c->native = true;
	c->seccomp = true;
	c->tty = true; /* the agent allocates PTYs: /dev/ptmx and /dev/pts are granted */
	/* off: Landlock TCP rules (ABI >= 4) and the seccomp AF_UNIX-only rule;
	 * host: no network restriction, only with its hatch */
	c->net_modes = (1u << KIS_NET_OFF) | (1u << KIS_NET_HOST);
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_OUTPUT | KIS_LIMIT_FILE |
		    KIS_LIMIT_OPEN_FILES | (ctx->thorough ? kis_cgroup_limits_available() : 0);
}

struct kis_plan {
	struct kis_native_plan n;
	const char *sandbox_id;
	char *workspace;         /* host path, or NULL */
	char *ws_lower, *ws_dir; /* an overlay clone: its base tree and its directory */
	enum kis_net_mode net;
	unsigned cgroup_limits;  /* KIS_LIMIT_MEMORY/PIDS to enforce */
	unsigned cgroup_explicit; /* of those, asked for by name: a failure fails */
	bool set_user;           /* the engine is root: run as the sandbox user */
	uid_t uid;
	gid_t gid;
	bool tmpdir_env;         /* set TMPDIR to the private directory */
};

/* The workspace in the plan: at plan time, and again when amended with
 * the one the run made after planning. */
static int place_workspace(struct kis_plan *pl, const struct kis_run_request *req)
{
	if (kis_host_place_workspace(req, &pl->workspace, &pl->ws_dir, &pl->ws_lower) < 0)
		return -1;
	/* No workspace and no cwd: start in /, never in the caller's directory */
	if (!pl->n.cwd && !(pl->n.cwd = strdup("/")))
		return -1;
	return 0;
}

static int landlock_plan(const struct kis_caps *caps, const struct kis_run_request *req,
			 struct kis_plan **out, struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	if (p->root == KIS_ROOT_WORKSPACE)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "root: the landlock backend cannot make the workspace the root "
				     "filesystem (Landlock has no mount namespace): use root 'host' "
				     "or the bubblewrap backend");
	TRY(kis_check_network(caps, p, "landlock",
			      "use 'off', or the bubblewrap backend for 'loopback' and 'egress' "
			      "(Landlock shares the host's network namespace)", err));
	struct kis_landlock_report rep;
	kis_landlock_probe(&rep);
	unsigned lacking = required_features(p->net) & rep.missing;
	if (lacking)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "tier: landlock ABI %d on this kernel lacks '%s', which the "
				     "host tier needs to confine this profile: use the bubblewrap "
				     "backend or a newer kernel",
				     rep.abi, kis_landlock_feature_name(lacking & -lacking));
	struct kis_caps c = *caps;
	unsigned explicit_cg = kis_cgroup_limits_asked(&p->limits);
	if (explicit_cg && !req->ctx->thorough)
		c.limits |= kis_cgroup_limits_available(); /* measured only when asked for */
	TRY(kis_check_limits(&c, p, "landlock", err));

	struct kis_plan *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
	if (kis_native_plan_init(&pl->n, req, err) < 0) {
		free(pl);
		return -1;
	}
	pl->sandbox_id = req->sandbox_id;
	pl->net = p->net;
	/* Defaults apply on this tier: memory and pids through a cgroup on every
	 * run where the host lets us make one; explicit values were checked. */
	pl->cgroup_limits = KIS_CGROUP_LIMIT_BITS;
	pl->cgroup_explicit = explicit_cg;
	pl->set_user = geteuid() == 0;
	kis_host_sandbox_user(&pl->uid, &pl->gid);
	pl->tmpdir_env = !kis_host_profile_has_env(p, "TMPDIR");
	if (place_workspace(pl, req) < 0)
		goto oom;
	*out = pl;
	return 0;
oom:
	kis_native_plan_release(&pl->n);
	free(pl->workspace);
	free(pl->ws_lower);
	free(pl->ws_dir);
	free(pl);
	return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
}

static int landlock_amend(struct kis_plan *pl, const struct kis_run_request *req,
			  struct kis_error **err)
{
	TRY(kis_native_plan_amend(&pl->n, req, err));
	free(pl->workspace);
	free(pl->ws_lower);
	free(pl->ws_dir);
	pl->workspace = pl->ws_lower = pl->ws_dir = NULL;
	if (place_workspace(pl, req) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot amend the plan");
	return 0;
}

static char *landlock_describe(const struct kis_plan *pl)
{
	_cleanup_free_ char *base = kis_native_plan_describe(&pl->n, "landlock");
	json_error_t je;
	json_t *o = base ? json_loads(base, 0, &je) : NULL;
	if (!o)
		return NULL;
	struct kis_landlock_report rep;
	kis_landlock_probe(&rep);
	json_t *feat = json_array();
	for (unsigned b = 1; b & KIS_LL__ALL; b <<= 1)
		if (rep.enforced & b)
			json_array_append_new(feat, json_string(kis_landlock_feature_name(b)));
	json_object_set_new(o, "landlock", json_pack("{s:i, s:o, s:s?, s:s}", "abi", rep.abi,
						     "features", feat, "read_write", pl->workspace,
						     "read_exec", "system directories"));
	json_object_set_new(o, "seccomp", json_string(pl->net == KIS_NET_OFF ?
							"default, AF_UNIX only, no named peers "
							"(connect, sendto an address, datagram)" :
							"default"));
	if (pl->set_user)
		json_object_set_new(o, "user", json_pack("{s:i, s:i}", "uid", (int)pl->uid, "gid",
							 (int)pl->gid));
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* Everything one confined start needs, prepared before fork. */
struct ll_start {
	struct kis_run_cgroup rc;
	struct kis_confine_plan cp;
	char *tmpdir;
	int keep_fd; /* 3 for the session agent */
	int view_fd; /* the workspace shown to the sandbox user, or -1 */
	const char *workspace, *cwd;
};

static int ll_child(void *ctx, struct kis_error **err)
{
	struct ll_start *s = ctx;
	TRY(kis_run_cgroup_join(&s->rc, err));
	if (s->view_fd >= 0) {
		/* spawn entered cwd before this: a cwd in the workspace is then
		 * the directory under the view, entered again through it */
		if (kis_idmap_view_enter(s->view_fd, s->workspace) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot mount the workspace's view on '%s'",
					     s->workspace);
		close(s->view_fd);
		if (s->cwd && kis_child_enter_dir(s->cwd) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cwd");
			return KIS_CHILD_SETUP_CWD;
		}
	}
	return kis_confine_child(&s->cp, err);
}

static void ll_start_release(struct ll_start *s, bool remove_tmp)
{
	kis_confine_plan_release(&s->cp);
	kis_run_cgroup_close(&s->rc);
	kis_closep(&s->view_fd);
	s->view_fd = -1;
	if (remove_tmp)
		kis_tree_remove_path(s->tmpdir);
	free(s->tmpdir);
	s->tmpdir = NULL;
}

/* name: the private directory's name (the sandbox or session id);
 * agent: the agent binary to grant read+execute, or NULL. */
static int ll_prepare(struct kis_plan *pl, const char *name, const char *agent,
		      struct ll_start *s, struct kis_error **err)
{
	memset(s, 0, sizeof(*s));
	s->view_fd = -1;
	s->workspace = pl->workspace;
	s->cwd = pl->n.cwd;
	kis_confine_plan_init(&s->cp);
	/* a session's agent and the worker of an exec are in the group too */
	if (kis_host_cgroup_open(&s->rc, name, &pl->n.limits, pl->cgroup_limits,
				 pl->cgroup_explicit, agent ? 2 : 0, err) < 0)
		return -1;
	if (pl->set_user && pl->workspace &&
	    (kis_host_make_reachable(pl->workspace, err) < 0 ||
	     kis_host_workspace_view(pl->workspace, pl->ws_lower, pl->ws_dir, pl->uid, pl->gid,
				     &s->view_fd, err) < 0))
		goto fail;
	/* No /tmp on this backend: a private directory instead (TMPDIR). */
	if (kis_host_private_dir(name, pl->uid, pl->gid, &s->tmpdir, err) < 0)
		goto fail;
	if (pl->tmpdir_env && kis_host_env_set(&pl->n.envp, "TMPDIR", s->tmpdir, true) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "environment");
		goto fail;
	}
	/* the host's filesystem is in view: with net off no unix socket may
	 * name a peer (a host daemon's pathname socket), issue 23 */
	struct kis_seccomp_opts sc = {.net = pl->net, .unix_unnamed_only = pl->net == KIS_NET_OFF};
	const char *rw[] = {s->tmpdir, NULL};
	const char *ro[] = {agent, NULL};
	struct kis_landlock_opts ll = {
		.workspace = pl->workspace, .extra_rw = rw, .extra_ro = agent ? ro : NULL,
		/* the view is what the command writes: a new overlay's inodes
		 * are not the store's, the rule goes on the view's own root */
		.workspace_by_fd = s->view_fd >= 0, .workspace_fd = s->view_fd,
		.net = pl->net, .allow_proc = false, .required = required_features(pl->net),
	};
	/* the compiled program from the cache (4 ms saved), then Landlock */
	if (kis_host_seccomp_fd(&sc, &s->cp.seccomp_fd, err) < 0 ||
	    kis_confine_plan_prepare(&s->cp, NULL, &ll, err) < 0)
		goto fail;
	s->keep_fd = 3;
	s->cp.harden.limits = NULL; /* spawn has set them already */
	s->cp.harden.keep_fds = agent ? &s->keep_fd : NULL;
	s->cp.harden.n_keep = agent ? 1 : 0;
	s->cp.harden.set_user = pl->set_user;
	s->cp.harden.uid = pl->uid;
	s->cp.harden.gid = pl->gid;
	s->cp.harden.reach_gid = pl->set_user ? KIS_REACH_GID : 0;
	return 0;
fail:
	ll_start_release(s, true);
	return -1;
}

static int landlock_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	struct ll_start s;
	TRY(ll_prepare(pl, pl->sandbox_id, NULL, &s, err));
	struct kis_supervise_hooks hooks;
	kis_run_cgroup_hooks(&s.rc, &hooks);
	int r = kis_native_plan_run(&pl->n, ll_child, &s, &hooks, res, err);
	ll_start_release(&s, true);
	return r;
}

static void landlock_plan_free(struct kis_plan *pl)
{
	if (!pl)
		return;
	kis_native_plan_release(&pl->n);
	free(pl->workspace);
	free(pl->ws_lower);
	free(pl->ws_dir);
	free(pl);
}

/* The agent runs confined exactly as a command would, its listening socket
 * kept as fd 3; the commands it starts inherit every layer. */
static int landlock_start_session(struct kis_plan *pl, const struct kis_session_ctx *ctx,
				  pid_t *pid, struct kis_error **err)
{
	struct ll_start s;
	TRY(ll_prepare(pl, ctx->id, pl->n.argv[0], &s, err));
	struct kis_spawn sp = {
		.argv = pl->n.argv, .envp = pl->n.envp, .cwd = pl->n.cwd, .stdin_fd = -1,
		/* no rlimits on the agent: they are each command's, applied by
		 * the agent from the session's limits (open_files 1 would leave
		 * the agent itself unable to start) */
		.child_setup = ll_child, .child_ctx = &s,
		.pass_fd3 = true, .fd3 = ctx->listen_fd,
		.tethered = true, /* the creator's until the session is published */
	};
	int r = kis_spawn_detached(&sp, pid, err);
	/* the cgroup outlives us: end_session finds it in the session's dir */
	if (r >= 0 && kis_host_cgroup_save(ctx->dir_fd, &s.rc, err) < 0) {
		kill(*pid, SIGKILL);
		r = -1;
	}
	ll_start_release(&s, r < 0);
	return r;
}

static int landlock_end_session(const struct kis_session_ctx *ctx, struct kis_error **err)
{
	(void)err;
	/* kills whatever the session left behind (a daemon that left the
	 * agent's process groups included), then removes the group */
	kis_host_cgroup_end(ctx->dir_fd);
	char path[128];
	snprintf(path, sizeof(path), "/tmp/kis-%s", ctx->id);
	kis_tree_remove_path(path);
	return 0;
}

const struct kis_backend kis_backend_landlock = {
	.session_cpu_fd = kis_host_cgroup_cpu_fd,
	.session_explain = kis_host_cgroup_explain,
	.name = "landlock",
	.tier = KIS_TIER_HOST,
	.root_layers = true,
	.probe = landlock_probe,
	.plan = landlock_plan,
	.amend = landlock_amend,
	.describe = landlock_describe,
	.run = landlock_run,
	.plan_free = landlock_plan_free,
	.start_session = landlock_start_session,
	.session_exec = kis_agent_session_exec,
	.end_session = landlock_end_session,
};
