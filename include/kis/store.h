/* SPDX-License-Identifier: MIT */
/* kis/store.h: bases, copy-on-write workspaces and their reference counts,
 * in one store root (bases/, workspaces/, sessions/). */
#ifndef KIS_STORE_H
#define KIS_STORE_H

#include "kis/error.h"
#include "kis/id.h"

struct kis_store;

/* Open (creating if needed) the store at root; NULL root means
 * $KIS_SANDBOX_ROOT, else /var/lib/kis/sandbox for root and
 * $XDG_STATE_HOME/kis/sandbox (~/.local/state/kis/sandbox) otherwise. */
KIS_API int kis_store_open(const char *root, struct kis_store **out, struct kis_error **err);
KIS_API void kis_store_free(struct kis_store *s);
KIS_API const char *kis_store_root(const struct kis_store *s);

/* Clone a workspace from a base. want_id NULL: mint one. out receives the id. */
KIS_API int kis_workspace_clone(struct kis_store *s, const char *base_id, const char *want_id,
				char out[KIS_ID_BUFSZ], struct kis_error **err);
/* The host path of the workspace's files (mounted if it needs to be);
 * malloc'ed into *out. KIS_E_NOT_FOUND when it does not exist. */
KIS_API int kis_workspace_path(struct kis_store *s, const char *id, char **out,
			       struct kis_error **err);
/* Idempotent: a valid id that names nothing succeeds. */
KIS_API int kis_workspace_destroy(struct kis_store *s, const char *id, struct kis_error **err);

#endif
