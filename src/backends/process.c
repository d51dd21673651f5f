/* SPDX-License-Identifier: MIT */
/* The process backend: the escape hatch. fork/exec with no isolation; only
 * resource limits apply. Reached only with escape_hatch.allow_process_tier. */
#include "util.h"

#include <jansson.h>
#include <string.h>

#include "backends/common.h"
#include "exec/exec.h"
#include "kis/backend.h"

static void process_probe(struct kis_caps *c)
{
	memset(c, 0, sizeof(*c));
	c->present = true;
	c->shell = true;
	c->native = true;
	c->tty = true; /* through the agent, which allocates the PTY */
	/* No confinement at all: the command shares the host's network. */
	c->net_modes = 1u << KIS_NET_HOST;
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_OUTPUT | KIS_LIMIT_FILE |
		    KIS_LIMIT_OPEN_FILES;
}

struct kis_plan {
	struct kis_native_plan n;
};

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
	*out = pl;
	return 0;
}

static char *process_describe(const struct kis_plan *pl)
{
	return kis_native_plan_describe(&pl->n, "process");
}

static int process_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	return kis_native_plan_run(&pl->n, NULL, NULL, NULL, res, err);
}

static void process_plan_free(struct kis_plan *pl)
{
	if (!pl)
		return;
	kis_native_plan_release(&pl->n);
	free(pl);
}

static int process_start_session(struct kis_plan *pl, int listen_fd, pid_t *pid,
				 struct kis_error **err)
{
	struct kis_spawn sp = {
		.argv = pl->n.argv, .envp = pl->n.envp, .cwd = pl->n.cwd, .stdin_fd = -1,
		.pass_fd3 = true, .fd3 = listen_fd,
	};
	return kis_spawn_detached(&sp, pid, err);
}

const struct kis_backend kis_backend_process = {
	.start_session = process_start_session,
	.name = "process",
	.tier = KIS_TIER_PROCESS,
	.probe = process_probe,
	.plan = process_plan,
	.describe = process_describe,
	.run = process_run,
	.plan_free = process_plan_free,
};
