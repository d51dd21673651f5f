/* SPDX-License-Identifier: MIT */
/* One command, start to end: hatches, selection, workspace, plan, run,
 * teardown. Stateless: everything comes from the profile. Below the
 * sessions: session.c runs an agentless session's exec through here, and
 * nothing here calls a session (a run with a terminal is entry.c's). */
#include "core/util.h"

#include <poll.h>
#include <string.h>

#include "core/argv.h"
#include "core/log.h"
#include "engine/internal.h"
#include "engine/owner.h"
#include "kis/sandbox.h"
#include "kis/store.h"

/* A signal the caller turned into a readable cancel fd (the CLI's SIGINT,
 * SIGTERM, SIGHUP) ends the run between its phases too, not only while
 * the command runs: a run interrupted during its clone does not go on to
 * start the command. Nothing is read: the supervisor sees it as well. */
static bool cancel_pending(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

static void set_cancelled(struct kis_result *res)
{
	res->reason = KIS_REASON_CANCELLED;
	res->exit_code = -1;
	free(res->detail);
	res->detail = strdup("the run was cancelled before its command started");
}

int kis_run_select(struct kis_engine_ctx *ec, const struct kis_profile *p, char *const *argv,
		   const struct kis_backend **out, struct kis_caps *caps, struct kis_error **err)
{
	TRY(kis_profile_check_hatches(p, err));
	if (!argv || !argv[0] || !argv[0][0])
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "no command to run: give it after '--'");
	TRY(kis_command_size_check(argv, p->env, NULL, err));
	if (p->base && p->workspace)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "base and workspace: give one of them, not both");

	const struct kis_backend *b = NULL;
	/* auto looks for a wasm module where the run will find it: in the
	 * workspace, or in the base it will be cloned from. */
	_cleanup_free_ char *files = NULL;
	if (p->tier == KIS_TIER_AUTO && !p->backend && (p->base || p->workspace)) {
		struct kis_store *st = NULL;
		if (kis_ctx_store(ec, &st, NULL) == 0) {
			if (p->base)
				kis_base_path(st, p->base, &files, NULL);
			else
				kis_workspace_path(st, p->workspace, &files, NULL);
		}
	}
	TRY(kis_select_backend_in(&ec->ctx, p, argv, files, &b, caps, err));
	/* The same check is in every backend's plan; here it fails before any
	 * workspace is made. */
	if (p->tty.enabled && !caps->tty)
		return kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0,
				     "the %s backend cannot give a terminal: drop tty.enabled (--tty)",
				     b->name);
	/* the network mode is each plan's to check (kis_check_network): the
	 * first plan runs before any workspace is made */
	*out = b;
	return 0;
}

int kis_run_one(struct kis_engine_ctx *ec, const struct kis_profile *p, char *const *argv,
		const struct kis_backend *b, const struct kis_caps *caps_in,
		const struct kis_run_options *opts, struct kis_result *res, char **plan_json,
		struct kis_error **err)
{
	const struct kis_ctx *ctx = &ec->ctx;
	struct kis_caps caps = *caps_in;
	if (plan_json)
		*plan_json = NULL;
	/* A terminal lives in the agent (DESIGN.md, Theory of operation): a
	 * run with one is a session from its start (entry.c), never this. */
	if (p->tty.enabled && !opts->dry_run)
		return kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0,
				     "the %s backend cannot give a terminal here: drop "
				     "tty.enabled (--tty)", b->name);

	struct kis_run_request req = {.ctx = ctx, .profile = p, .argv = argv, .io = opts->io};
	kis_limits_resolve(&p->limits, &req.limits);
	req.sandbox_id = res->sandbox;
	res->tier = b->tier;
	res->backend = b->name;

	_cleanup_free_ char *ws_path = NULL, *ws_id = NULL;
	bool cloned = false;
	struct kis_plan *plan = NULL;
	if (opts->dry_run) {
		/* one plan, with the mounts resolved (an id that names nothing
		 * fails here too), held by no one: nothing runs */
		struct kis_mounts dm;
		TRY(kis_mounts_acquire(p, ec, NULL, &dm, err));
		req.mounts = dm.v;
		req.n_mounts = dm.n;
		kis_test_count("plan");
		int r = b->plan(&caps, &req, &plan, err);
		if (r >= 0 && plan_json)
			*plan_json = kis_mounts_describe(b->describe(plan), &dm);
		if (r >= 0)
			b->plan_free(plan);
		kis_mounts_release(&dm);
		return r;
	}
	/* The plan, once, before anything is made: a refusal costs no clone.
	 * What the run makes after it (a clone of the base, the mounts'
	 * holds) only places paths in the request, which the backend's amend
	 * puts into this plan; a run that makes none of them (no base, no
	 * workspace, no mounts: most runs) runs it as it is. */
	struct kis_store *st = NULL;
	if (kis_ctx_store(ec, &st, NULL) == 0)
		req.store_dir = kis_store_root(st);
	kis_test_count("plan");
	if (b->plan(&caps, &req, &plan, err) < 0)
		return -1;
	bool amend = p->base || p->workspace || p->n_mounts;
	bool disk_quota = false;
	if (kis_disk_check(p, ec, b, &caps, &disk_quota, err) < 0) {
		b->plan_free(plan);
		return -1;
	}

	/* From here the run makes things on the host: each is recorded under
	 * the run's owner (engine/owner.h) before it is made, so that a kill
	 * at any point leaves a record the next command sweeps. */
	struct kis_owner *owner = NULL;
	if (kis_ctx_store(ec, &st, err) < 0 || kis_owner_begin(st, res->sandbox, &owner, err) < 0) {
		if (amend) {
			b->plan_free(plan);
			return -1; /* a workspace or a mount needs the store */
		}
		/* A run without a workspace needs no store: where none can be
		 * made (a read-only home), it goes on with only the kernel's
		 * ties (the command's parent-death signal). */
		if (err) {
			kis_error_free(*err);
			*err = NULL;
		}
	}
	kis_test_pause("clone");
	if (cancel_pending(opts->io.cancel_fd)) {
		set_cancelled(res);
		b->plan_free(plan);
		kis_owner_end(owner, true);
		return 0;
	}
	/* A clone the run does not keep is the owner's. */
	if (kis_workspace_acquire(p, ec, !p->keep, b, &ws_id, &ws_path, &cloned, err) <
	    0) {
		b->plan_free(plan);
		kis_owner_end(owner, true);
		return -1;
	}
	kis_test_pause("cloned");
	/* The run's own workspace, held while it lives (its owner's lock says
	 * so): a read-write mount of it by another sandbox is busy, as for a
	 * session's, and so is destroy (issue 21). */
	bool held = false;
	if (ws_id && st) {
		if (kis_workspace_hold_run(st, ws_id, res->sandbox, err) < 0) {
			b->plan_free(plan);
			if (cloned)
				kis_workspace_release(ec, ws_id);
			kis_owner_end(owner, true);
			return -1;
		}
		held = true;
	}
	if (disk_quota && ws_id &&
	    kis_disk_apply(ec, ws_id, req.limits.disk_bytes, p->limits.disk_bytes != 0, err) < 0) {
		b->plan_free(plan);
		kis_workspace_unhold_mount(st, ws_id, res->sandbox);
		if (cloned)
			kis_workspace_release(ec, ws_id);
		kis_owner_end(owner, true);
		return -1;
	}
	/* The mounts, held by this run (its owner is locked while it lives:
	 * a kill leaves holds the store drops when it next looks). */
	struct kis_mounts mounts;
	if (kis_mounts_acquire(p, ec, ec->mounts_held ? NULL : res->sandbox, &mounts, err) < 0) {
		b->plan_free(plan);
		if (held)
			kis_workspace_unhold_mount(st, ws_id, res->sandbox);
		if (cloned)
			kis_workspace_release(ec, ws_id);
		kis_owner_end(owner, true);
		return -1;
	}
	req.mounts = mounts.v;
	req.n_mounts = mounts.n;
	req.workspace_path = ws_path;
	kis_debug("workspace %s at %s (%s)", ws_id ? ws_id : "(none)", ws_path ? ws_path : "-",
		  !ws_id ? "no base or workspace" : !cloned ? "given" :
		  p->keep ? "cloned, kept" : "cloned for the run");
	req.store_dir = st ? kis_store_root(st) : NULL;
	struct kis_ws_layers lay;
	kis_workspace_layers_get(ec, ws_id, &lay);
	req.workspace_lower = lay.lower;
	req.workspace_upper = lay.upper;
	req.workspace_cache = lay.cache;
	int r = 0;
	if (amend) {
		kis_test_count("amend");
		r = b->amend ? b->amend(plan, &req, err) :
			       kis_error_set(err, KIS_E_INTERNAL, 0,
					     "the %s backend cannot place a workspace in its plan "
					     "(no amend)", b->name);
	}
	if (r >= 0 && cancel_pending(opts->io.cancel_fd)) {
		set_cancelled(res);
	} else if (r >= 0) {
		r = b->run(plan, res, err);
		if (r >= 0 && disk_quota)
			kis_disk_explain(ec, ws_id, res);
	}
	b->plan_free(plan);
	kis_test_pause("teardown");
	kis_info("teardown: %s ended (%s); releasing its mounts and workspace",
		 b->name, r < 0 ? "failed" : kis_reason_name(res->reason));
	kis_ws_layers_free(&lay);
	if (b->own_workspace_view)
		kis_mounts_refresh_views(&mounts);
	kis_mounts_release(&mounts);
	if (held)
		kis_workspace_unhold_mount(st, ws_id, res->sandbox);
	if (ws_id) {
		res->workspace = strdup(ws_id);
		res->workspace_kept = !cloned || p->keep;
		if (cloned && !p->keep)
			kis_workspace_release(ec, ws_id);
		else if (kis_backend_own_view(b))
			kis_workspace_refresh_view(ec, ws_id);
	}
	/* The run has undone what it made; undoing the records as well
	 * catches what a failed step left (each reaper looks first). */
	kis_owner_end(owner, true);
	kis_debug("teardown done");
	return r;
}
