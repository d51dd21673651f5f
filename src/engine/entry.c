/* SPDX-License-Identifier: MIT */
/* kis_run, the public entry of a run: one context and one selection for
 * the command, then a run without a terminal (run.c) or, with one, a
 * session with one exec, destroyed afterwards (session.c): a terminal
 * lives in the agent. The top of the engine: it uses run.c and
 * session.c, which never call back up here. */
#include "core/util.h"

#include <string.h>

#include "core/record.h"
#include "core/log.h"
#include "engine/internal.h"
#include "engine/owner.h"
#include "kis/sandbox.h"
#include "kis/session.h"

/* A terminal lives in the agent (DESIGN.md, Theory of operation): a run
 * that asks for one is a session with one exec from its start, made with
 * the backend the run selected, in the run's context. */
static int run_in_session(struct kis_engine_ctx *ec, const struct kis_profile *p,
			  const struct kis_backend *b, const struct kis_caps *caps,
			  char *const *argv, const struct kis_run_options *opts,
			  struct kis_result *res, struct kis_error **err)
{
	if (!b->start_session)
		return kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0,
				     "the %s backend cannot give a terminal: drop tty.enabled "
				     "(--tty)", b->name);
	/* The session is this run's: killed, the run leaves a record the
	 * sweep destroys the session by (engine/owner.h). */
	char rid[KIS_ID_BUFSZ];
	TRY(kis_id_mint('s', rid, err));
	struct kis_owner *owner = NULL;
	struct kis_store *st = NULL;
	TRY(kis_ctx_store(ec, &st, err));
	TRY(kis_owner_begin(st, rid, &owner, err));
	char id[KIS_ID_BUFSZ];
	if (kis_session_create_in(ec, p, opts, b, caps, id, err) < 0) {
		kis_owner_end(owner, true);
		return -1;
	}
	if (kis_owner_note("tty-session", "%s", id) < 0) {
		kis_session_destroy_in(ec, id, NULL);
		kis_owner_end(owner, true);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record session '%s'", id);
	}
	struct kis_exec_options eo = {
		.io = opts->io, .tty = true, .rows = p->tty.rows, .cols = p->tty.cols,
		.resize_fd = opts->resize_fd, .tty_fd = opts->tty_fd, .limits = p->limits,
		.store_root = opts->store_root,
	};
	int r = kis_session_exec_in(ec, id, argv, &eo, res, err);
	snprintf(res->sandbox, sizeof(res->sandbox), "%s", id);
	res->tier = b->tier;
	res->backend = b->name;
	struct kis_error *e2 = NULL;
	kis_session_destroy_in(ec, id, &e2);
	kis_error_free(e2);
	kis_owner_end(owner, true);
	return r;
}

int kis_run(const struct kis_profile *p, char *const *argv, const struct kis_run_options *opts,
	    struct kis_result *res, char **plan_json, struct kis_error **err)
{
	if (plan_json)
		*plan_json = NULL;
	struct kis_engine_ctx ec;
	kis_ctx_init(&ec, opts->store_root, false);
	kis_ctx_set_progress(&ec, opts);
	const struct kis_backend *b = NULL;
	struct kis_caps caps;
	/* the id before the selection, so that every event of the run
	 * carries it (kis/log.h) */
	int r = kis_id_mint('s', res->sandbox, err);
	_cleanup_(kis_log_scope_end) const char *log_prev = kis_log_scope(res->sandbox);
	if (r >= 0)
		r = kis_run_select(&ec, p, argv, &b, &caps, err);
	if (r >= 0 && p->tty.enabled && !opts->dry_run)
		r = run_in_session(&ec, p, b, &caps, argv, opts, res, err);
	else if (r >= 0)
		r = kis_run_one(&ec, p, argv, b, &caps, opts, res, plan_json, err);
	kis_ctx_release(&ec);
	return r;
}
