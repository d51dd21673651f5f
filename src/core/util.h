/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by every module: cleanup attributes, ownership
 * transfer, EINTR retry and the one control-flow macro, TRY(). */
#ifndef KIS_UTIL_H
#define KIS_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define KIS_HIDDEN __attribute__((visibility("hidden")))

static inline void kis_freep(void *p)
{
	free(*(void **)p);
}
static inline void kis_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void kis_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(kis_freep)
#define _cleanup_close_ _cleanup_(kis_closep)
#define _cleanup_fclose_ _cleanup_(kis_fclosep)

/* Hand ownership on: returns the value and leaves NULL / -1 behind so the
 * cleanup attribute of the source variable does nothing. */
#define steal_ptr(p)                      \
	({                                \
		__typeof__(p) steal_tmp_ = (p); \
		(p) = NULL;               \
		steal_tmp_;               \
	})
static inline int steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

/* TRY(expr): evaluate a fallible call (contract: < 0 means failure, *err set)
 * and return its value from the enclosing function on failure. The one macro
 * in the project that hides a return; use it only where no cleanup order
 * matters beyond the cleanup attributes. */
#define TRY(expr)                          \
	do {                               \
		int try_r_ = (expr);       \
		if (try_r_ < 0)            \
			return try_r_;     \
	} while (0)

/* Retry a system call interrupted by a signal. */
#define RETRY_EINTR(expr)                                  \
	({                                                 \
		long retry_r_;                             \
		do                                         \
			retry_r_ = (long)(expr);           \
		while (retry_r_ < 0 && errno == EINTR);    \
		retry_r_;                                  \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
