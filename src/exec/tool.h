/* SPDX-License-Identifier: MIT */
/* The one way the engine starts a helper program on the host: crun, the
 * e2fsprogs over a guest's disk image, busybox --list, the bwrap probe.
 * Each gets the same care, written once: a fixed environment (never the
 * caller's: issue 23), /dev/null where no stream is given, the descriptors
 * of the map and nothing else (O_CLOEXEC everywhere else), its own process
 * group if asked, death with the engine (always: a tool is waited for),
 * and the caller's confinement applied last in the child before execve. */
#ifndef KIS_EXEC_TOOL_H
#define KIS_EXEC_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "kis/error.h"

/* The environment of a tool unless one is given. */
#define KIS_TOOL_PATH "PATH=/usr/sbin:/usr/bin:/sbin:/bin"

struct kis_tool_fd {
	int from; /* a descriptor of the engine */
	int to;   /* the number the tool sees it as (3 and up) */
};

struct kis_tool {
	const char *path;    /* the program, an absolute path; NULL: argv[0] */
	char *const *argv;
	char *const *envp;   /* NULL: KIS_TOOL_PATH only */
	int in, out, err;    /* the tool's 0, 1, 2; -1: /dev/null */
	struct kis_tool_fd map[4];
	size_t n_map;
	bool own_pgrp;       /* setpgid(0, 0): a terminal's ^C reaches the engine only */
	/* Confinement (or another last step) in the child before execve;
	 * < 0 ends the child with 126 before the program runs. */
	int (*child_setup)(void *arg);
	void *child_arg;
	/* child_setup is system calls only (async-signal-safe, writes only its
	 * own locals): start the tool through clone(CLONE_VM | CLONE_VFORK)
	 * instead of a fork (kis_spawn_clone, exec/spawn.h) */
	bool vfork_ok;
};

/* Start the tool: *pid its pid (the caller waits for it). */
int kis_tool_start(const struct kis_tool *t, pid_t *pid, struct kis_error **err);

/* What kis_tool_run collects. */
struct kis_tool_out {
	char *out;        /* stdout when capture_out (malloc'ed, NUL-terminated), else NULL */
	size_t out_len;
	char err[512];    /* the first bytes of stderr when capture_err, trailing blanks cut */
	int status;       /* wait(2) status */
};

/* Start the tool, read the streams asked for (out/err of t are replaced
 * by pipes for them) to their end, and wait. 0 once it ran (o->status
 * says how it ended), < 0 when it could not be started. */
int kis_tool_run(const struct kis_tool *t, bool capture_out, bool capture_err,
		 struct kis_tool_out *o, struct kis_error **err);
/* Whether a tool's status is a normal exit with a code up to max_ok. */
bool kis_tool_ok(int status, int max_ok);
/* Run argv[0] (an absolute path) as a tool (stdin and stderr on
 * /dev/null, a fixed environment) and return its whole stdout (malloc'ed;
 * NULL when it could not run); *ok: it exited 0. */
char *kis_tool_output(char *const argv[], bool *ok);

#endif
