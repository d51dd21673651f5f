/* SPDX-License-Identifier: MIT */
/* The workspace a run or a session uses, acquired from the store: cloned
 * from the profile's base, or the existing workspace it names. */
#include "core/util.h"

#include <string.h>

#include "engine/internal.h"
#include "engine/owner.h"
#include "kis/store.h"

/* Rootless (issue 17): an ordinary user's overlay clone is mounted only in
 * a namespace of its own (src/store/view.c) and seen from the host through
 * /proc/PID/root, a magic link that the process, landlock and wasm tiers
 * rightly refuse on the way to a workspace (runc's CVE-2024-21626). A
 * backend that joins the layers itself (rootless_layers: bubblewrap, oci)
 * takes the overlay; the others get a reflink or a copy for a run's own
 * clone, and a named refusal for an existing overlay workspace. */
static bool needs_host_path(const struct kis_backend *b)
{
	return geteuid() != 0 && b && !b->own_workspace_view && !b->rootless_layers;
}

int kis_workspace_acquire(const struct kis_profile *p, struct kis_engine_ctx *ec, bool owned,
			  const struct kis_backend *b, char **id, char **path, bool *cloned,
			  struct kis_error **err)
{
	*id = *path = NULL;
	*cloned = false;
	if (!p->base && !p->workspace)
		return 0;
	struct kis_store *s = NULL;
	TRY(kis_ctx_store(ec, &s, err));
	char ws[KIS_ID_BUFSZ];
	int r;
	if (p->base) {
		/* The id is minted first and recorded under the run's owner
		 * before the clone exists: killed at any point after, the run
		 * leaves a record the sweep destroys the clone by. */
		r = kis_id_mint('w', ws, err);
		if (r >= 0 && owned && kis_owner_note("ws", "%s", ws) < 0)
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record workspace '%s'",
					  ws);
		enum kis_clone_strategy how = KIS_CLONE_AUTO;
		const char *cow = NULL;
		if (needs_host_path(b))
			how = kis_store_cow_strategy(s, &cow) == 1 && !strcmp(cow, "reflink") ?
				      KIS_CLONE_REFLINK : KIS_CLONE_COPY;
		if (r >= 0)
			r = kis_workspace_clone_ex(s, p->base, ws, how, ws, err);
		if (r >= 0)
			*cloned = true;
	} else {
		snprintf(ws, sizeof(ws), "%s", p->workspace);
		/* a run writes its own workspace: not while a read-write mount
		 * of a live run or session writes it (issue 21) */
		r = kis_workspace_check_writers(s, ws, NULL, err);
		struct kis_workspace_info wi;
		if (r >= 0 && needs_host_path(b) && kis_workspace_info(s, ws, &wi, NULL) == 0 &&
		    wi.strategy == KIS_CLONE_OVERLAY)
			r = kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					  "workspace: '%s' is an overlay clone made as an ordinary "
					  "user, mounted only in a namespace of its own; the %s "
					  "backend sees a workspace by a host path: use the "
					  "bubblewrap backend, or clone with --strategy copy",
					  ws, b->name);
	}
	if (r >= 0)
		r = kis_workspace_path(s, ws, path, err);
	if (r >= 0 && !(*id = strdup(ws)))
		r = kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "workspace id");
	if (r < 0) {
		if (*cloned)
			kis_workspace_destroy(s, ws, NULL);
		*cloned = false;
		free(*path);
		*path = NULL;
	}
	return r;
}

void kis_workspace_release(struct kis_engine_ctx *ec, const char *id)
{
	struct kis_store *s = NULL;
	if (kis_ctx_store(ec, &s, NULL) < 0)
		return;
	kis_workspace_destroy(s, id, NULL);
}

void kis_workspace_layers_get(struct kis_engine_ctx *ec, const char *id, struct kis_ws_layers *l)
{
	memset(l, 0, sizeof(*l));
	struct kis_store *s = NULL;
	if (!id || kis_ctx_store(ec, &s, NULL) < 0)
		return;
	kis_workspace_layers(s, id, &l->lower, &l->upper, &l->cache, NULL);
}

void kis_ws_layers_free(struct kis_ws_layers *l)
{
	free(l->lower);
	free(l->upper);
	free(l->cache);
	memset(l, 0, sizeof(*l));
}

bool kis_backend_own_view(const struct kis_backend *b)
{
	return b && (b->own_workspace_view || (b->rootless_layers && geteuid() != 0) ||
		     (b->root_layers && geteuid() == 0));
}

void kis_workspace_refresh_view(struct kis_engine_ctx *ec, const char *id)
{
	struct kis_store *s = NULL;
	if (!id || kis_ctx_store(ec, &s, NULL) < 0)
		return;
	kis_workspace_refresh(s, id, NULL);
}

int kis_workspace_hold_for(struct kis_engine_ctx *ec, const char *id, const char *session,
			   struct kis_error **err)
{
	struct kis_store *s = NULL;
	TRY(kis_ctx_store(ec, &s, err));
	int r = kis_workspace_hold(s, id, session, err);
	return r;
}

void kis_workspace_unhold_for(struct kis_engine_ctx *ec, const char *id, const char *session)
{
	struct kis_store *s = NULL;
	if (!id || kis_ctx_store(ec, &s, NULL) < 0)
		return;
	kis_workspace_unhold(s, id, session);
}
