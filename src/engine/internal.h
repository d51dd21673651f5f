/* SPDX-License-Identifier: MIT */
/* Internal to the engine: the agent's path, and
 * acquiring the workspace a profile names (clone from base, or open). */
#ifndef KIS_ENGINE_INTERNAL_H
#define KIS_ENGINE_INTERNAL_H

#include <stdbool.h>

#include "kis/backend.h"
#include "kis/profile.h"

/* $KIS_AGENT, else kis-agent beside the running binary. */
int kis_agent_path(char **out, struct kis_error **err);

/* The profile's workspace: cloned from p->base (cloned = true) or the
 * existing p->workspace; none when neither is set (*id = *path = NULL).
 * owned: a clone is recorded under the thread's owner (engine/owner.h). */
int kis_workspace_acquire(const struct kis_profile *p, const char *store_root, bool owned,
			  char **id, char **path, bool *cloned, struct kis_error **err);
/* Destroy a workspace the engine cloned; failures are ignored (destroy is
 * idempotent and a later command sweeps). */
void kis_workspace_release(const char *store_root, const char *id);
/* The layers of workspace id (see kis_workspace_layers), best effort: all
 * NULL when it is not an overlay clone or they cannot be had. */
struct kis_ws_layers {
	char *lower, *upper, *cache;
};
void kis_workspace_layers_get(const char *store_root, const char *id, struct kis_ws_layers *l);
void kis_ws_layers_free(struct kis_ws_layers *l);


/* kis_select_backend with the command looked up inside root (the files of
 * the workspace the run will use) when auto looks for a wasm module; root
 * NULL: relative to the caller's working directory. */
int kis_select_backend_in(const struct kis_profile *p, char *const *argv, const char *root,
			  const struct kis_backend **out, struct kis_caps *caps,
			  struct kis_error **err);

#endif
