/* SPDX-License-Identifier: MIT */
/* A session's directory as the store keeps it, and its end (session_end.c):
 * below both the sessions' operations (session.c) and the owners' sweep
 * (owner.c), which ends the session of a killed run with a terminal. */
#ifndef KIS_ENGINE_SESSION_END_H
#define KIS_ENGINE_SESSION_END_H

#include <jansson.h>
#include <stdbool.h>

#include "kis/backend.h"
#include "kis/error.h"
#include "kis/store.h"

/* sessions/<id>/: the session's metadata (written last at create), and the
 * mark destroy leaves before it ends the agent, so that an exec that loses
 * its agent tells a destroy from a fault. */
#define META_NAME "session.json"
#define ENDING_NAME "destroying"

/* The metadata in the session directory dfd; NULL: none (yet), or unreadable. */
json_t *kis_session_meta_read(int dfd);
/* The backend that made the session (its metadata's "backend"); NULL: none known. */
const struct kis_backend *kis_session_meta_backend(json_t *meta);
/* Is the session's agent the process its metadata names (same pid, same start)? */
bool kis_session_agent_alive(json_t *meta);
/* End what a create or destroy that was killed half-way left in the
 * sessions directory sdir (.tmp-<id>, .del-<id>), once a minute old. */
void kis_session_sweep_leftovers(int sdir);
/* End the published session id of store s: its agent, what its backend
 * made, its holds, the workspace it cloned, its directory. Idempotent (0
 * when it is gone). The caller has undone what its creator left
 * (kis_owner_reap_id: a creator still alive makes it busy). */
int kis_session_end(struct kis_store *s, const char *id, struct kis_error **err);

#endif
