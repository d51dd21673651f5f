/* SPDX-License-Identifier: MIT */
/* The engine's side of kis/log.h: the event lines and the sandbox id they
 * carry. Cheap when off: one relaxed atomic load before any formatting. */
#ifndef KIS_CORE_LOG_H
#define KIS_CORE_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

#include "kis/log.h"

/* The level in force (kis_log_configure sets it); read with no lock. */
extern _Atomic int kis_log_level_now;

static inline bool kis_log_on(enum kis_log_level l)
{
	return l != KIS_LOG_OFF &&
	       (int)l <= atomic_load_explicit(&kis_log_level_now, memory_order_relaxed);
}

/* One event: "kis[ID] LEVEL: message\n" in one write(2) to stderr (lines
 * of several threads never interleave; a line is cut at 4 KiB). ID is the
 * calling thread's sandbox (kis_log_scope, else the run being recorded,
 * core/record.h); without one the prefix is "kis: LEVEL: ". Safe from any
 * thread; never from a child between fork and exec. */
void kis_log_write(enum kis_log_level l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define kis_log(l, ...)                         \
	do {                                    \
		if (kis_log_on(l))              \
			kis_log_write(l, __VA_ARGS__); \
	} while (0)
#define kis_info(...) kis_log(KIS_LOG_INFO, __VA_ARGS__)
#define kis_debug(...) kis_log(KIS_LOG_DEBUG, __VA_ARGS__)

/* An argv as one event: "MESSAGE: 'a' 'b c' ..." (each word quoted as a
 * shell would need it, so the line can be pasted). */
void kis_log_argv_write(enum kis_log_level l, char *const *argv, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define kis_log_argv(l, argv, ...)                         \
	do {                                               \
		if (kis_log_on(l))                         \
			kis_log_argv_write(l, argv, __VA_ARGS__); \
	} while (0)

/* Where the lines go instead of stderr: fn gets each event's level and
 * its line without the prefix or the newline (kis-runtime writes them to
 * its --log file in the engine's format); NULL: stderr again. */
typedef void (*kis_log_sink_fn)(enum kis_log_level l, const char *msg);
void kis_log_set_sink(kis_log_sink_fn fn);

/* The sandbox id of the calling thread's events from now on (NULL: none);
 * returns the one it replaces, for the caller to put back. The string is
 * the caller's and must live until it is replaced. */
const char *kis_log_scope(const char *id);
/* For a cleanup attribute: put back the id a kis_log_scope replaced,
 * `_cleanup_(kis_log_scope_end) const char *prev = kis_log_scope(id);` */
static inline void kis_log_scope_end(const char **prev)
{
	kis_log_scope(*prev);
}

#endif
