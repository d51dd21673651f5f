/* SPDX-License-Identifier: MIT */
/* Shared verdicts of the break-out probes: each probe tries one forbidden
 * thing and reports how it ended, on stdout and in its exit status. */
#ifndef KIS_PROBE_H
#define KIS_PROBE_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit statuses, stable: the tests match on them. A probe killed by a
 * signal (SIGSYS from seccomp's bad-arch action) shows as that signal. */
enum {
	PROBE_STOPPED = 0,    /* refused with the errno the confinement gives */
	PROBE_ESCAPED = 1,    /* the forbidden thing worked */
	PROBE_OTHER_ERROR = 2, /* refused, but not by the expected layer */
	PROBE_SETUP = 3,      /* the probe could not set up its attempt */
};

static inline void __attribute__((noreturn)) probe_escaped(const char *name, const char *what)
{
	printf("%s: ESCAPED: %s\n", name, what);
	fflush(stdout);
	exit(PROBE_ESCAPED);
}

/* The attempt failed with err: a verdict by whether err is the expected one. */
static inline void __attribute__((noreturn)) probe_refused(const char *name, int err, int want)
{
	if (err == want) {
		printf("%s: stopped (%s)\n", name, strerror(err));
		fflush(stdout);
		exit(PROBE_STOPPED);
	}
	printf("%s: refused by something else: %s (expected %s)\n", name, strerror(err),
	       strerror(want));
	fflush(stdout);
	exit(PROBE_OTHER_ERROR);
}

static inline void __attribute__((noreturn)) probe_setup(const char *name, const char *what)
{
	printf("%s: setup failed: %s: %s\n", name, what, strerror(errno));
	fflush(stdout);
	exit(PROBE_SETUP);
}

/* Common shape: r < 0 is a refusal with err (errno saved by the caller
 * right after the call), anything else an escape. */
static inline void __attribute__((noreturn)) probe_verdict(const char *name, long r, int err,
							   int want, const char *what)
{
	if (r < 0)
		probe_refused(name, err, want);
	probe_escaped(name, what);
}

#endif
