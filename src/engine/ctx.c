/* SPDX-License-Identifier: MIT */
/* One command's context for the backends (struct kis_ctx, kis/backend.h):
 * the store it uses, the agent, the microvm guest and the probe mode,
 * found once by the engine and handed down, never looked up by a backend
 * from globals or the environment (issue 20). */
#include "core/util.h"

#include <string.h>

#include "core/record.h"
#include "engine/internal.h"
#include "kis/sandbox.h"
#include "kis/store.h"

static const char *guest_dir(const struct kis_ctx *ctx)
{
	struct kis_engine_ctx *e = ctx->priv;
	if (!e->guest_done) {
		e->guest_done = true;
		/* the store's own lookup order (guest.c), for this store */
		struct kis_guest_info g;
		struct kis_error *err = NULL;
		if (kis_guest_locate(ctx->store_root, true, &g, &err) == 0) {
			e->guest = steal_ptr(g.cache);
			kis_guest_info_release(&g);
		}
		kis_error_free(err);
	}
	return e->guest;
}

static void progress(const struct kis_ctx *ctx, const char *what)
{
	struct kis_engine_ctx *e = ctx->priv;
	if (e->progress)
		e->progress(e->progress_arg, what);
}

void kis_ctx_set_progress(struct kis_engine_ctx *e, const struct kis_run_options *o)
{
	e->progress = o ? o->progress : NULL;
	e->progress_arg = o ? o->progress_arg : NULL;
}

void kis_ctx_init(struct kis_engine_ctx *e, const char *store_root, bool thorough)
{
	kis_test_count("ctx");
	memset(e, 0, sizeof(*e));
	struct kis_error *err = NULL;
	if (kis_agent_path(&e->agent, &err) < 0) {
		snprintf(e->agent_why, sizeof(e->agent_why), "%s",
			 err && err->message ? err->message : "the agent is missing");
		e->agent = NULL;
	}
	kis_error_free(err);
	e->ctx = (struct kis_ctx){
		.store_root = store_root,
		.agent = e->agent,
		.agent_why = e->agent_why,
		.thorough = thorough,
		.guest_dir = guest_dir,
		.progress = progress,
		.priv = e,
	};
}

int kis_ctx_store(struct kis_engine_ctx *e, struct kis_store **out, struct kis_error **err)
{
	*out = NULL;
	if (!e->store && !e->store_err &&
	    kis_store_open(e->ctx.store_root, &e->store, &e->store_err) < 0 && !e->store_err)
		kis_error_set(&e->store_err, KIS_E_INTERNAL, 0, "cannot open the store");
	if (e->store_err)
		return kis_error_set(err, e->store_err->code, e->store_err->sys_errno, "%s",
				     e->store_err->message ? e->store_err->message : "the store");
	*out = e->store;
	return 0;
}

void kis_ctx_release(struct kis_engine_ctx *e)
{
	free(e->agent);
	free(e->guest);
	kis_store_free(e->store);
	kis_error_free(e->store_err);
	memset(e, 0, sizeof(*e));
}
