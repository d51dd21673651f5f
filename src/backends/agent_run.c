/* SPDX-License-Identifier: MIT */
/* One exec of a one-shot run through the sandbox's agent, one exec in an
 * agent's session, and the host's reading of how each ended (agent_run.h). */
#include "core/util.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "agent/client.h"
#include "backends/agent_run.h"
#include "core/log.h"

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

int kis_agent_session_exec(const struct kis_session_call *c, struct kis_result *res,
			   struct kis_error **err)
{
	struct kis_exec_req req = {.argv = (char **)c->argv, .env = (char **)c->env,
				   .env_add = (char **)c->env_add, .cwd = (char *)c->cwd,
				   .shell = c->shell, .tty = c->tty, .rows = c->rows, .cols = c->cols,
				   .limits = c->limits};
	if (c->container && c->container->op != KIS_CTR_NONE) {
		req.ctr_op = c->container->op;
		req.ctr_id = (char *)c->container->id;
		req.ctr_slot = c->container->slot;
		req.ctr_hostname = (char *)c->container->hostname;
		req.ctr_free_slot = c->container->free_slot;
		req.ctr_memory_max = c->container->memory_max;
		req.ctr_cpu_quota_us = c->container->cpu_quota_us;
		req.ctr_cpu_period_us = c->container->cpu_period_us;
	}
	/* the agent enforces the exec's limits; signals from the caller (the
	 * CLI's cancel pipe carries signal numbers) are forwarded */
	struct kis_call call = {.req = &req, .io = c->io, .signal_fd = c->io.cancel_fd,
				.cancel_fd = -1, .resize_fd = c->resize_fd, .tty_fd = c->tty_fd,
				.rows = c->rows, .cols = c->cols, .peer = "the session's agent",
				/* the agent ends the command at wall_ms; the engine's own
				 * clock is the backstop should the agent not answer */
				.deadline_ms = kis_monotonic_ms() + c->limits.wall_ms + 10000,
				/* the session's CPU accounting: an exec's cpu_ms is the CPU
				 * of all it makes, counted by the cgroup, not the agent's
				 * clock of one process */
				.has_cpu = c->cpu_fd >= 0, .cpu_fd = c->cpu_fd,
				.cpu_limit_ms = c->limits.cpu_ms};
	struct kis_call_out out;
	/* A channel that fails before the request went out (a VM's port being
	 * retired by its broker, an agent busy starting) is tried again on a
	 * fresh connection: nothing ran yet, so nothing runs twice. */
	for (int attempt = 0;; attempt++) {
		_cleanup_close_ int conn = c->connect(c->connect_arg, err);
		if (conn < 0)
			return -1;
		if (kis_call_agent(conn, &call, res, &out, err) == 0)
			break;
		if (out.sent || attempt == 3)
			return -1;
		kis_debug("session exec: the channel failed before the request went out (%s): "
			  "again in %u ms", err && *err ? (*err)->message : "", 200u << attempt);
		if (err) {
			kis_error_free(*err);
			*err = NULL;
		}
		usleep(200000u << attempt);
	}
	if (out.end == KIS_CALL_TIMEOUT) {
		/* closing the connection makes the agent kill the command */
		res->exit_code = -1;
		res->signal = SIGKILL;
		set_detail(res, KIS_REASON_TIMEOUT,
			   "the session's agent did not report the end in time: the engine's wall "
			   "clock ended the exec");
		return 0;
	}
	if (out.end != KIS_CALL_EXIT)
		return 1; /* the engine tells a destroy under the exec from a fault */
	if (out.cpu_cut) {
		char d[120];
		snprintf(d, sizeof(d), "the session's cpu time passed limits.cpu_ms (%llu ms)",
			 (unsigned long long)c->limits.cpu_ms);
		res->exit_code = -1;
		res->signal = SIGKILL;
		set_detail(res, KIS_REASON_CPU_LIMIT, d);
	}
	return 0;
}
