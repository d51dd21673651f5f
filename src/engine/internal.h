/* SPDX-License-Identifier: MIT */
/* Internal to the engine: the agent's path, and
 * acquiring the workspace a profile names (clone from base, or open). */
#ifndef KIS_ENGINE_INTERNAL_H
#define KIS_ENGINE_INTERNAL_H

#include <stdbool.h>

#include "kis/backend.h"
#include "kis/profile.h"
#include "kis/sandbox.h"
#include "kis/session.h"

struct kis_engine_ctx; /* below */
struct kis_store;

/* $KIS_AGENT, else kis-agent beside the running binary (or the shared
 * library's ../bin), else in the build-time prefix's bin. */
int kis_agent_path(char **out, struct kis_error **err);
/* The directory of the shared library, or of the running executable. */
char *kis_self_dir(void);
/* The prefix fixed at build time (PREFIX of the Makefile). */
const char *kis_build_prefix(void);

/* limits.disk_bytes where the workspace is on the host's disk (disk.c).
 * check: before the workspace is made; an explicit value this run cannot
 * bind is refused naming the field; *apply says whether to set it.
 * apply: the workspace's project quota (1 set, 0 none, < 0 error).
 * explain: a failed command whose workspace is full ended with disk_limit. */
int kis_disk_check(const struct kis_profile *p, struct kis_engine_ctx *ec,
		   const struct kis_backend *b, const struct kis_caps *caps, bool *apply,
		   struct kis_error **err);
int kis_disk_apply(struct kis_engine_ctx *ec, const char *ws_id, uint64_t bytes, bool asked,
		   struct kis_error **err);
void kis_disk_explain(struct kis_engine_ctx *ec, const char *ws_id, struct kis_result *res);

/* The profile's workspace for backend b: cloned from p->base (cloned = true) or the
 * existing p->workspace; none when neither is set (*id = *path = NULL).
 * owned: a clone is recorded under the thread's owner (engine/owner.h). */
int kis_workspace_acquire(const struct kis_profile *p, struct kis_engine_ctx *ec, bool owned,
			  const struct kis_backend *b, char **id, char **path, bool *cloned,
			  struct kis_error **err);
/* Destroy a workspace the engine cloned; failures are ignored (destroy is
 * idempotent and a later command sweeps). */
void kis_workspace_release(struct kis_engine_ctx *ec, const char *id);
/* kis_workspace_refresh, best effort (the run's result stands). */
void kis_workspace_refresh_view(struct kis_engine_ctx *ec, const char *id);
/* Does b join an overlay workspace's layers in a mount of its own here (then
 * the host's view is mounted anew after a run or exec that used it)? */
bool kis_backend_own_view(const struct kis_backend *b);
/* A session's hold on its workspace (kis_workspace_hold): destroy of the
 * workspace is busy while the session lives. */
int kis_workspace_hold_for(struct kis_engine_ctx *ec, const char *id, const char *session,
			   struct kis_error **err);
void kis_workspace_unhold_for(struct kis_engine_ctx *ec, const char *id, const char *session);
/* The layers of workspace id (see kis_workspace_layers), best effort: all
 * NULL when it is not an overlay clone or they cannot be had. */
struct kis_ws_layers {
	char *lower, *upper, *cache;
};
void kis_workspace_layers_get(struct kis_engine_ctx *ec, const char *id, struct kis_ws_layers *l);
void kis_ws_layers_free(struct kis_ws_layers *l);

/* The profile's mounts resolved in the store (mounts.c). holder NULL:
 * resolved only (--dry-run), nothing held; else each source is held for
 * holder (the run's sandbox id or the session's id) until release. */
struct kis_mounts {
	struct kis_mount_src *v;
	size_t n;
	bool *held;
	char holder[KIS_ID_BUFSZ];
	struct kis_engine_ctx *ec; /* the command's store */
};
int kis_mounts_acquire(const struct kis_profile *p, struct kis_engine_ctx *ec, const char *holder,
		       struct kis_mounts *m, struct kis_error **err);
void kis_mounts_release(struct kis_mounts *m);
/* After a run or exec of a backend with its own workspace view: the
 * host's view of each overlay workspace mounted read-write, anew. */
void kis_mounts_refresh_views(const struct kis_mounts *m);
/* The resolved mounts as JSON (--dry-run, a session's metadata). */
struct json_t;
struct json_t *kis_mounts_json(const struct kis_mount_src *v, size_t n);
/* plan_json (malloc'ed) with "mounts" added; returns the new string and
 * frees the old (or returns plan_json as it was). */
char *kis_mounts_describe(char *plan_json, const struct kis_mounts *m);

/* The context of one command (ctx.c): what it hands the backends. The
 * ctx inside points at e, which must stay where it is until released. */
struct kis_engine_ctx {
	struct kis_ctx ctx;
	char *agent;
	char agent_why[400];
	char *guest;
	bool guest_done;
	struct kis_store *store; /* opened (and swept) once, on first use */
	struct kis_error *store_err;
	void (*progress)(void *arg, const char *what);
	void *progress_arg;
	/* Set by an exec in an agentless (wasm) session: the session holds
	 * the profile's mounts for as long as it lives, so the exec's run
	 * resolves them and holds nothing of its own. */
	bool mounts_held;
};
/* Pass the caller's progress (kis_run_options) on to the backends. */
void kis_ctx_set_progress(struct kis_engine_ctx *e, const struct kis_run_options *o);
void kis_ctx_init(struct kis_engine_ctx *e, const char *store_root, bool thorough);
void kis_ctx_release(struct kis_engine_ctx *e);
/* The command's store, opened once: the first call opens it (which sweeps
 * what dead owners left), later calls return the same one, or the same
 * error. The context owns it: never freed by the caller. */
int kis_ctx_store(struct kis_engine_ctx *e, struct kis_store **out, struct kis_error **err);

/* A run's checks and its backend (run.c), once per command: the
 * hatches, the command, then selection (auto looks for a wasm module in
 * the workspace or base the run will use) and the terminal's check.
 * *caps receives the chosen backend's probe. */
int kis_run_select(struct kis_engine_ctx *ec, const struct kis_profile *p, char *const *argv,
		   const struct kis_backend **b, struct kis_caps *caps, struct kis_error **err);
/* One run without a terminal (run.c) with the backend kis_run_select
 * chose. A run with a terminal is a session from its start (entry.c);
 * here it is refused unless it is a dry run. */
int kis_run_one(struct kis_engine_ctx *ec, const struct kis_profile *p, char *const *argv,
		const struct kis_backend *b, const struct kis_caps *caps,
		const struct kis_run_options *opts, struct kis_result *res, char **plan_json,
		struct kis_error **err);

/* The sessions' operations in a command's context (session.c): create
 * with the backend the command selected (b and caps), or NULL to select
 * it here; exec; destroy. kis_session_create and the others are these
 * with a context of their own. */
int kis_session_create_in(struct kis_engine_ctx *ec, const struct kis_profile *p,
			  const struct kis_run_options *o, const struct kis_backend *b,
			  const struct kis_caps *caps, char id[KIS_ID_BUFSZ],
			  struct kis_error **err);
int kis_session_exec_in(struct kis_engine_ctx *ec, const char *id, char *const *argv,
			const struct kis_exec_options *o, struct kis_result *res,
			struct kis_error **err);
int kis_session_destroy_in(struct kis_engine_ctx *ec, const char *id, struct kis_error **err);

/* kis_select_backend with the command looked up inside root (the files of
 * the workspace the run will use) when auto looks for a wasm module; root
 * NULL: relative to the caller's working directory. */
int kis_select_backend_in(const struct kis_ctx *ctx, const struct kis_profile *p,
			  char *const *argv, const char *root,
			  const struct kis_backend **out, struct kis_caps *caps,
			  struct kis_error **err);

#endif
