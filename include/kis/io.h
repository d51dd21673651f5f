/* SPDX-License-Identifier: MIT */
/* kis/io.h: how the caller's side of a command's streams is wired; used
 * by the engine, the backends and the agent's client alike. */
#ifndef KIS_IO_H
#define KIS_IO_H

#include <stdbool.h>

/* How the caller's side of the streams is wired for one run. */
struct kis_io {
	int stdin_fd;   /* passed to the command as its stdin; -1: /dev/null */
	bool capture;   /* keep stdout/stderr in the result instead of writing them */
	int stdout_fd;  /* live destination when !capture */
	int stderr_fd;
	int cancel_fd;  /* readable means cancel the run; -1: none */
};

#endif
