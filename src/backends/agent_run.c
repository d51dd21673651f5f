/* SPDX-License-Identifier: MIT */
/* One exec of a one-shot run through the sandbox's agent, and the host's
 * reading of how it ended (see agent_run.h). */
#include "core/util.h"

#include <signal.h>
#include <string.h>

#include "agent/client.h"
#include "backends/agent_run.h"

static void set_detail(struct kis_result *res, enum kis_reason why, const char *detail)
{
	res->reason = why;
	free(res->detail);
	res->detail = strdup(detail);
}

int kis_agent_run_once(const struct kis_agent_run *a, struct kis_result *res,
		       struct kis_error **err)
{
	struct kis_exec_req req = {.argv = (char **)a->argv, .env = (char **)a->env,
				   .cwd = (char *)a->cwd, .limits = a->limits};
	struct kis_call call = {
		.req = &req, .io = a->io, .signal_fd = -1, .cancel_fd = a->io.cancel_fd,
		.resize_fd = -1, .tty_fd = -1,
		/* the agent's own clock ends the command at wall_ms; ours is the
		 * backstop a little later, in case the agent cannot */
		.deadline_ms = kis_monotonic_ms() + a->limits.wall_ms + 2000,
		.output_limit = a->limits.output_bytes,
		/* the agent answers once the runtime has started the sandbox:
		 * bounded, so a runtime that hangs cannot hang the engine */
		.hello_timeout_s = 30, .peer = a->peer, .pipeline = true,
		.has_cpu = a->has_cpu, .cpu_fd = a->cpu_fd, .cpu_path = a->cpu_path, .cpu_limit_ms = a->limits.cpu_ms,
		.on_hello = a->on_hello, .hello_ctx = a->hello_ctx, .watch = a->watch,
	};
	struct kis_call_out out;
	TRY(kis_call_agent(a->conn, &call, res, &out, err));
	if (out.end == KIS_CALL_TIMEOUT) {
		set_detail(res, KIS_REASON_TIMEOUT, "wall clock passed limits.wall_ms");
		res->exit_code = -1;
		res->signal = SIGKILL;
	} else if (out.cpu_cut) {
		char d[120];
		snprintf(d, sizeof(d), "the sandbox's cpu time passed limits.cpu_ms (%llu ms)",
			 (unsigned long long)a->limits.cpu_ms);
		set_detail(res, KIS_REASON_CPU_LIMIT, d);
		res->exit_code = -1;
		res->signal = SIGKILL;
	} else if (out.cancelled) {
		set_detail(res, KIS_REASON_CANCELLED, "the run was cancelled");
	} else if (out.output_cut && res->reason != KIS_REASON_OUTPUT_LIMIT) {
		set_detail(res, KIS_REASON_OUTPUT_LIMIT, "output passed limits.output_bytes");
	} else if (out.end == KIS_CALL_EOF) {
		/* the sandbox died under the agent */
		res->reason = KIS_REASON_SIGNALED;
		res->signal = SIGKILL;
		res->exit_code = -1;
	}
	return 0;
}
