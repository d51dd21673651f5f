/* SPDX-License-Identifier: MIT */
/* The process backend: the escape hatch. fork/exec with no isolation; only
 * resource limits apply, the defaults included. Reached only with
 * escape_hatch.allow_process_tier. */
#include "core/util.h"

#include <jansson.h>
#include <linux/capability.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "backends/common.h"
#include "backends/host/common.h"
#include "confine/confine.h"
#include "exec/exec.h"
#include "kis/backend.h"
#include "backends/agent_run.h"

/* The limits a root command can undo on a tier with no isolation: it may
 * write any cgroup.procs (cgroup v1 checks only the file's mode and the
 * writer's uid; a cgroup namespace does not scope v1), which takes it out
 * of the memory and pids groups and out of the CPU accounting of the run.
 * The rlimits it could raise with CAP_SYS_RESOURCE, which the command
 * loses (root_child_setup), so those hold. */
#define ROOT_UNDOES (KIS_CGROUP_LIMIT_BITS | KIS_LIMIT_CPU)

static void process_probe(const struct kis_ctx *ctx, struct kis_caps *c)
{
	memset(c, 0, sizeof(*c));
	c->present = true;
	c->shell = true;
	c->native = true;
	c->tty = true; /* through the agent, which allocates the PTY */
	/* No confinement at all: the command shares the host's network. */
	c->net_modes = 1u << KIS_NET_HOST;
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_OUTPUT | KIS_LIMIT_FILE |
		    KIS_LIMIT_OPEN_FILES | (ctx->thorough ? kis_cgroup_limits_available() : 0);
	if (geteuid() == 0)
		c->limits &= ~ROOT_UNDOES;
}

struct kis_plan {
	struct kis_native_plan n;
	unsigned cgroup_explicit; /* memory/pids the profile named */
	const char *sandbox_id;
};

/* A root command undoes these (ROOT_UNDOES): asked for by name they are a
 * promise this tier cannot keep against it. The defaults are applied all
 * the same, for a command that does not fight them. */
static int refuse_root_undoes(const struct kis_limits *l, struct kis_error **err)
{
	if (geteuid() != 0)
		return 0;
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++)
		if ((kis_limit_table[i].bit & ROOT_UNDOES) && kis_limit_get(l, i))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "%s: the process tier runs the command as root and "
					     "unconfined, and a root command can leave any cgroup: "
					     "drop the field or choose a confining tier (host, "
					     "container, microvm)",
					     kis_limit_table[i].path);
	return 0;
}

/* An exec in a session asks for its own limits: the same promise as at
 * create. `exec --cpu-time 1s` was taken, and a command that left the
 * session's cgroup burned 7.3 s and ended `exited 0` (issue 40 item 2). */
static int process_exec_limits(const struct kis_limits *want, struct kis_error **err)
{
	return refuse_root_undoes(want, err);
}

static int process_plan(const struct kis_caps *caps, const struct kis_run_request *req,
			struct kis_plan **out, struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	/* The hatch waives isolation (filesystem, network): that is what the
	 * process tier is. Resource limits are not waived: each one is either
	 * enforced or refused. */
	if (!p->escape_hatch.allow_process_tier)
		return kis_error_set(err, KIS_E_ESCAPE_HATCH_FORBIDDEN, 0,
				     "the process tier runs unconfined and requires "
				     "escape_hatch.allow_process_tier");
	/* ...but a network mode asked for by name is a promise the tier cannot
	 * keep: the command shares the host's network (host is what it has). */
	if (p->net_explicit && p->net != KIS_NET_HOST)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "network.mode '%s': the process tier shares the host's network "
				     "and enforces no mode: drop network.mode (--net) or choose a "
				     "confining tier",
				     kis_net_mode_name(p->net));
	TRY(refuse_root_undoes(&p->limits, err));
	struct kis_caps c = *caps;
	unsigned explicit_cg = kis_cgroup_limits_asked(&p->limits);
	if (explicit_cg && !req->ctx->thorough)
		c.limits |= kis_cgroup_limits_available(); /* measured only when asked for */
	caps = &c;
	TRY(kis_check_limits(caps, p, "process", err));
	if (p->root == KIS_ROOT_WORKSPACE)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "root: the process backend cannot make the workspace the root "
				     "filesystem: use root 'host' or another tier");
	struct kis_plan *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
	if (kis_native_plan_init(&pl->n, req, err) < 0) {
		free(pl);
		return -1;
	}
	/* The hatch waives isolation, not the limits' defaults: a fork bomb
	 * through it made 32,428 processes (issue 23). Memory and pids go
	 * through a cgroup on every run where the host lets us make one; the
	 * explicit values were checked above, the defaults are applied where
	 * possible and silently absent where not, as on the host tier. The
	 * cost is one cgroup migration per hierarchy (README, measured). */
	pl->cgroup_explicit = explicit_cg;
	pl->sandbox_id = req->sandbox_id;
	*out = pl;
	return 0;
}

/* What a workspace changes here is the native plan's: cwd and HOME. */
static int process_amend(struct kis_plan *pl, const struct kis_run_request *req,
			 struct kis_error **err)
{
	return kis_native_plan_amend(&pl->n, req, err);
}

static char *process_describe(const struct kis_plan *pl)
{
	return kis_native_plan_describe(&pl->n, "process");
}

/* In the command's child (and a session's agent), before its rlimits go
 * on: the cgroup join, then, for a root command, CAP_SYS_RESOURCE out of
 * every set, so it cannot raise the hard limits it is given (setrlimit(2):
 * raising a hard limit needs CAP_SYS_RESOURCE in the initial user
 * namespace; one it makes of its own does not count). */
static int process_child_setup(void *ctx, struct kis_error **err)
{
	struct kis_run_cgroup *rc = ctx;
	TRY(kis_run_cgroup_join(rc, err));
	if (geteuid() == 0)
		TRY(kis_drop_cap(CAP_SYS_RESOURCE, err));
	return 0;
}

static int process_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	/* Memory and pids through a cgroup where this host lets us make one;
	 * where not, an explicit value was refused in plan. */
	struct kis_run_cgroup rc;
	TRY(kis_host_cgroup_open(&rc, pl->sandbox_id, &pl->n.limits,
				 KIS_CGROUP_LIMIT_BITS, pl->cgroup_explicit, 0, err));
	struct kis_supervise_hooks hooks;
	kis_run_cgroup_hooks(&rc, &hooks);
	int r = kis_native_plan_run(&pl->n, process_child_setup, &rc, &hooks, res, err);
	kis_run_cgroup_close(&rc);
	return r;
}

static void process_plan_free(struct kis_plan *pl)
{
	if (!pl)
		return;
	kis_native_plan_release(&pl->n);
	free(pl);
}

static int process_start_session(struct kis_plan *pl, const struct kis_session_ctx *ctx,
				 pid_t *pid, struct kis_error **err)
{
	/* the session's agent and all it runs share one group, as on the host
	 * tier; it outlives us and end_session removes it */
	struct kis_run_cgroup rc;
	TRY(kis_host_cgroup_open(&rc, ctx->id, &pl->n.limits, KIS_CGROUP_LIMIT_BITS,
				 pl->cgroup_explicit, 0, err));
	struct kis_spawn sp = {
		.argv = pl->n.argv, .envp = pl->n.envp, .cwd = pl->n.cwd, .stdin_fd = -1,
		.pass_fd3 = true, .fd3 = ctx->listen_fd,
		.child_setup = process_child_setup, .child_ctx = &rc,
		.tethered = true, /* the creator's until the session is published */
	};
	int r = kis_spawn_detached(&sp, pid, err);
	if (r >= 0 && kis_host_cgroup_save(ctx->dir_fd, &rc, err) < 0) {
		kill(*pid, SIGKILL);
		r = -1;
	}
	kis_run_cgroup_close(&rc); /* after save: nothing; after a failure: removed */
	return r;
}

static int process_end_session(const struct kis_session_ctx *ctx, struct kis_error **err)
{
	(void)err;
	kis_host_cgroup_end(ctx->dir_fd); /* kills what the session left, removes the group */
	return 0;
}

const struct kis_backend kis_backend_process = {
	.session_cpu_fd = kis_host_cgroup_cpu_fd,
	.start_session = process_start_session,
	.session_exec = kis_agent_session_exec,
	.end_session = process_end_session,
	.session_explain = kis_host_cgroup_explain,
	.exec_limits = process_exec_limits,
	.name = "process",
	.tier = KIS_TIER_PROCESS,
	.probe = process_probe,
	.plan = process_plan,
	.amend = process_amend,
	.describe = process_describe,
	.run = process_run,
	.plan_free = process_plan_free,
};
