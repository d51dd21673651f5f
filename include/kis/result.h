/* SPDX-License-Identifier: MIT */
/* kis/result.h: what a run returns: termination reason, exit code, usage,
 * streams. The reason is first-class: a timeout is never just SIGKILL. */
#ifndef KIS_RESULT_H
#define KIS_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kis/error.h"
#include "kis/id.h"
#include "kis/profile.h"

enum kis_reason {
	KIS_REASON_EXITED = 0,
	KIS_REASON_SIGNALED,
	KIS_REASON_TRAPPED,      /* wasm trap */
	KIS_REASON_TIMEOUT,      /* wall clock limit */
	KIS_REASON_CPU_LIMIT,
	KIS_REASON_MEMORY_LIMIT,
	KIS_REASON_OUTPUT_LIMIT,
	KIS_REASON_PIDS_LIMIT,
	KIS_REASON_CANCELLED,
	KIS_REASON_SETUP_FAILED, /* the command never started (not found, not executable) */
	KIS_REASON_DISK_LIMIT,   /* the workspace's disk ran out at limits.disk_bytes */
	KIS_REASON__COUNT
};

/* Engine-assigned stream ids. */
enum { KIS_STREAM_STDIN = 0, KIS_STREAM_STDOUT = 1, KIS_STREAM_STDERR = 2 };

struct kis_stream {
	int id;
	const char *name;
	uint64_t bytes;  /* bytes the command wrote that were delivered */
	bool truncated;  /* the output limit cut this stream */
	char *data;      /* captured bytes (capture mode), NUL-terminated */
	size_t len, cap;
};

struct kis_usage {
	uint64_t wall_ms, user_ms, sys_ms;
	uint64_t max_rss_bytes;
	uint64_t minor_faults, major_faults;
	uint64_t voluntary_ctxsw, involuntary_ctxsw;
	/* wasm tier: the module's linear memory at its peak (0 elsewhere) */
	uint64_t linear_memory_bytes;
};

struct kis_result {
	char sandbox[KIS_ID_BUFSZ];
	enum kis_tier tier;
	const char *backend;
	enum kis_reason reason;
	int exit_code;   /* valid when reason is exited; -1 otherwise */
	int signal;      /* the signal that ended it, 0 if none */
	char *detail;    /* human explanation, may be NULL */
	struct kis_usage usage;
	struct kis_stream streams[2]; /* stdout, stderr */
	char accel[16];  /* microvm: the accelerator the VM ran with ("kvm", "tcg") */
	/* wasm tier: the engine that ran the module ("interpreter",
	 * "compiler"), whether compiled code came from the store's cache
	 * ("cached") or this run's compile ("compiled"), and the background
	 * compile this run started or found running ("started", "running");
	 * "" where not said. "wasm" in the JSON. */
	struct {
		char engine[16];
		char code[16];
		char tier_up[16];
	} wasm;
	char *workspace; /* the workspace id when one was used or kept */
	bool workspace_kept;
	/* The limits the run ran into, whatever became of its top command (a
	 * child OOM-killed while the top command lived on counts): from the
	 * sandbox's cgroup. "limit_events" in the JSON only where counted. */
	struct kis_limit_events {
		bool counted;
		uint64_t oom_kills;     /* processes the OOM killer ended at limits.memory_bytes */
		uint64_t forks_refused; /* forks and clones refused at limits.pids */
	} limit_events;
};

KIS_API void kis_result_init(struct kis_result *r);
KIS_API void kis_result_release(struct kis_result *r);
KIS_API const char *kis_reason_name(enum kis_reason r);

/* The one rule from a limit's evidence to a reason (issue 20), for every
 * tier alike (a host cgroup, a container's, a guest's). oom_kills and
 * forks_refused count this run's or this exec's events only.
 * kis_limit_verdict: OOM kills are memory_limit, else refused forks
 * pids_limit, else KIS_REASON_EXITED (no limit acted).
 * kis_result_blame_limits: records the counts in res->limit_events and, if
 * the command failed (exited non-zero, signaled or timed out) while a
 * limit acted, gives that limit as the reason with the detail naming it
 * (mem_detail / pids_detail); 1 when it did. A command that ended well
 * keeps its reason: the events are counted, not blamed. */
KIS_API enum kis_reason kis_limit_verdict(uint64_t oom_kills, uint64_t forks_refused);
KIS_API int kis_result_blame_limits(struct kis_result *res, uint64_t oom_kills,
				    uint64_t forks_refused, const char *mem_detail,
				    const char *pids_detail);
/* The CLI exit status: the command's own code when it exited, 126 when it
 * could not be executed, 127 when not found, 128+N when killed by signal N. */
KIS_API int kis_result_exit_status(const struct kis_result *r);
/* The result as JSON (malloc'ed); captured stream bytes are included as
 * "stdout" and "stderr" (invalid UTF-8 replaced by U+FFFD). */
KIS_API char *kis_result_to_json(const struct kis_result *r);
/* The same document written to f as it is made: the streams go out of
 * their buffers with no copy, so a large capture costs about its own size.
 * 0, or -1 with errno set (nothing says how much reached f). */
KIS_API int kis_result_write_json(const struct kis_result *r, FILE *f);

#endif
