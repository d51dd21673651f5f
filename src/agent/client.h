/* SPDX-License-Identifier: MIT */
/* The engine's side of one exec over an agent channel (docs/protocol.md),
 * shared by sessions, the oci backend and the microvm backend. */
#ifndef KIS_AGENT_CLIENT_H
#define KIS_AGENT_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/exec_json.h"
#include "exec/exec.h"
#include "core/io.h"
#include "kis/io.h"

struct kis_call {
	const struct kis_exec_req *req;
	struct kis_io io;        /* stdin_fd; capture, or stdout_fd/stderr_fd (cancel_fd unused) */
	int signal_fd;           /* each byte read is a signal to forward; -1: none */
	int cancel_fd;           /* readable: SIGKILL the command (once); -1: none */
	int resize_fd;           /* readable: send the size of tty_fd; -1: none */
	int tty_fd;
	unsigned rows, cols;     /* the size when tty_fd gives none */
	uint64_t deadline_ms;    /* CLOCK_MONOTONIC ms after which we stop waiting; 0: none */
	uint64_t output_limit;   /* host-side backstop to the agent's own; 0: none */
	int hello_timeout_s;     /* bound on the agent's first answer; 0: none */
	/* Send the EXEC (and the EOF of an absent stdin) right behind the
	 * HELLO instead of after the agent's answer: one round trip less per
	 * run. For a one-shot run, whose sandbox dies with it: a cancel
	 * during the handshake may then find the command started (the
	 * backend kills the sandbox as for any cancel). */
	bool pipeline;
	const char *peer;        /* "the container's agent", for messages */
	/* The sandbox's CPU accounting (its cgroup, kis_cpuacct_read_ms): when
	 * has_cpu, the CPU every process of it used since the EXEC is held to
	 * cpu_limit_ms here, the agent's clock counting one process only. */
	bool has_cpu;
	int cpu_fd;
	const char *cpu_path;    /* or the accounting file to open once the agent answers */
	uint64_t cpu_limit_ms;
	/* Called once the agent's HELLO came (its sandbox exists: a
	 * container's runtime made its cgroup by then); < 0 fails the call. */
	int (*on_hello)(void *ctx, struct kis_error **err);
	void *hello_ctx;
	/* One more descriptor to watch while the command runs (after the
	 * HELLO and on_hello), or NULL: on_ready returns 0 to go on, 1 to stop
	 * watching it, -1 to kill the command as a cancel does. */
	const struct kis_watch *watch;
};

enum kis_call_end {
	KIS_CALL_EXIT = 0, /* the EXIT frame came: res holds it */
	KIS_CALL_TIMEOUT,  /* deadline_ms passed first */
	KIS_CALL_EOF,      /* the channel closed first */
	KIS_CALL_CANCELLED, /* cancel_fd fired during the handshake: nothing ran (unless
			     * pipeline, see above) */
};

struct kis_call_out {
	enum kis_call_end end;
	bool cancelled;   /* cancel_fd fired and the command was killed */
	bool output_cut;  /* output_limit was reached here (stream marked truncated) */
	bool cpu_cut;     /* the sandbox's CPU passed cpu_limit_ms: the command was killed */
	bool sent;        /* the EXEC went out: a failure before it may be retried */
};

/* HELLO, EXEC, then relay until the end. Streams land in res (capture) or
 * the io fds. < 0 only when the engine failed or the peer broke the
 * protocol (a bad frame from it is an error, never a crash). */
int kis_call_agent(int conn, const struct kis_call *c, struct kis_result *res,
		   struct kis_call_out *out, struct kis_error **err);


#endif
