/* SPDX-License-Identifier: MIT */
/* kis/session.h: sandboxes that outlive a command. A session is an agent
 * running inside the sandbox; its state lives there, and a client that
 * reconnects rebuilds its handle from the session's directory. */
#ifndef KIS_SESSION_H
#define KIS_SESSION_H

#include "kis/backend.h"
#include "kis/sandbox.h"

/* One exec in a session. */
struct kis_exec_options {
	struct kis_io io;      /* cancel_fd: each byte read is a signal to forward */
	bool tty;              /* a terminal inside the sandbox */
	unsigned rows, cols;   /* its first size */
	int resize_fd;         /* readable: re-read the size of tty_fd and send it; -1 none */
	int tty_fd;            /* the caller's terminal, for TIOCGWINSZ; -1 none */
	bool shell;            /* argv[0] is a shell line; cwd and env carry over */
	char **env;            /* NULL: the session's environment */
	char **env_add;        /* "K=V" set for this command only (NULL-terminated) */
	const char *cwd;       /* NULL: the session's working directory */
	struct kis_limits limits; /* 0: defaults */
	const char *store_root;
	/* NULL, or the pod container this exec starts, joins or removes (the
	 * microvm's sessions only; kis/profile.h) */
	const struct kis_exec_container *container;
};

/* Create a session under the profile; id receives its engine-minted id. */
KIS_API int kis_session_create(const struct kis_profile *p, const struct kis_run_options *o,
			       char id[KIS_ID_BUFSZ], struct kis_error **err);
/* What create would do, as JSON (malloc'ed into *plan_json), making and
 * starting nothing: selection, the refusals, the backend's plan. */
KIS_API int kis_session_plan(const struct kis_profile *p, const struct kis_run_options *o,
			     char **plan_json, struct kis_error **err);
/* Run one command in a session. res as for kis_run. */
KIS_API int kis_session_exec(const char *id, char *const *argv, const struct kis_exec_options *o,
			     struct kis_result *res, struct kis_error **err);
/* Put the base base_id's tree in mount slot `slot` of session id while it
 * runs (a kis-vm pod container's root: kis-runtime); the backend's own
 * operation, refused by name where it has none. */
KIS_API int kis_session_attach_base(const char *store_root, const char *id, int slot,
				    const char *base_id, struct kis_error **err);
/* JSON array of sessions: id, tier, backend, workspace, created, state. */
KIS_API int kis_session_list(const char *store_root, char **json, struct kis_error **err);
/* End every process of the session and release what it made. Idempotent. */
KIS_API int kis_session_destroy(const char *store_root, const char *id, struct kis_error **err);

#endif
