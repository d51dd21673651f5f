/* SPDX-License-Identifier: MIT */
/* Internal: the one exec of a one-shot run, over a channel to the agent
 * that is PID 1 of the sandbox (bubblewrap, oci), with the host's verdict. */
#ifndef KIS_BACKENDS_AGENT_RUN_H
#define KIS_BACKENDS_AGENT_RUN_H

#include "kis/backend.h"

struct kis_agent_run {
	int conn;                 /* connected to the agent */
	char *const *argv;
	char *const *env;         /* NULL: the agent's own environment */
	const char *cwd;          /* inside the sandbox; NULL: the agent's */
	struct kis_limits limits; /* resolved */
	struct kis_io io;
	const char *peer;         /* "the container's agent", for messages */
	bool has_cpu;             /* cpu_fd: the sandbox's CPU accounting (limits.cpu_ms) */
	int cpu_fd;
	const char *cpu_path;     /* or its path, opened once the agent answers */
	int (*on_hello)(void *ctx, struct kis_error **err); /* kis_call's */
	void *hello_ctx;
	const struct kis_watch *watch; /* kis_call's */
};

/* HELLO, EXEC, relay, EXIT. The agent enforces the per-exec limits; the
 * host keeps a deadline and an output line of its own (the agent's report
 * is evidence, not a verdict): a deadline passed here is timeout, the
 * cancel fd cancelled, the output cut output_limit, a channel that closed
 * before EXIT a SIGKILL (the sandbox died under the agent: the caller's
 * cgroup evidence may say why). < 0 only when the engine failed. */
int kis_agent_run_once(const struct kis_agent_run *a, struct kis_result *res,
		       struct kis_error **err);

/* struct kis_backend's session_exec for every backend whose session is an
 * agent serving the session's socket (process, landlock, bubblewrap, oci,
 * microvm): HELLO, EXEC, relay, EXIT over call->connect's connection; a
 * channel that fails before the EXEC went out is tried again on a fresh
 * one (nothing ran, so nothing runs twice). 1: the agent's channel closed
 * before the EXIT (its session ended under the exec, or failed). The
 * engine then explains a failure with the session's evidence. */
int kis_agent_session_exec(const struct kis_session_call *call, struct kis_result *res,
			   struct kis_error **err);

#endif
