/* SPDX-License-Identifier: MIT */
/* The JSON bodies of EXEC and EXIT frames, shared by engine and agent. */
#ifndef KIS_EXEC_JSON_H
#define KIS_EXEC_JSON_H

#include <stdbool.h>

#include "kis/error.h"
#include "kis/profile.h"
#include "kis/result.h"

struct kis_exec_req {
	char **argv;         /* NULL-terminated */
	char **env;          /* NULL: the session's environment */
	char **env_add;      /* "K=V" set on top of env for this command; may be NULL */
	char *cwd;           /* NULL: the session's working directory */
	bool shell;          /* argv[0] is a shell line; keep cwd and env after it */
	bool tty;
	unsigned rows, cols;
	struct kis_limits limits; /* resolved */
	/* "container" (docs/protocol.md): KIS_CTR_NONE, or the pod container
	 * this exec starts, joins or removes */
	enum kis_ctr_op ctr_op;
	char *ctr_id;
	int ctr_slot;
	bool ctr_free_slot;  /* remove: wait until the slot's disk is unmounted */
	char *ctr_hostname;  /* NULL: leave the guest's */
	uint64_t ctr_memory_max; /* init: its group's memory.max; 0 none */
	/* init: its group's cpu.max (kis_exec_container's bounds, checked
	 * when parsed); quota 0 none, period 0 the kernel's default */
	uint64_t ctr_cpu_quota_us, ctr_cpu_period_us;
};

void kis_exec_req_release(struct kis_exec_req *r);
/* malloc'ed JSON text of a request. */
char *kis_exec_req_to_json(const struct kis_exec_req *r);
/* Parse and check a request (every field typed, argv non-empty). */
int kis_exec_req_from_json(const char *text, size_t len, struct kis_exec_req *out,
			   struct kis_error **err);
/* The EXIT frame: the termination and usage part of a result. */
char *kis_exit_to_json(const struct kis_result *r);
int kis_exit_from_json(const char *text, size_t len, struct kis_result *r, struct kis_error **err);

#endif
