/* SPDX-License-Identifier: MIT */
/* kis/log.h: the engine's diagnostics, one line per event on stderr
 * ("kis[s-...] debug: backend host chosen: ..."), and their level. The
 * library says nothing until its caller sets a level (house rule 2: the
 * library never prints of its own accord); the kis CLI sets it from
 * --log-level, else $KIS_LOG, else warn. */
#ifndef KIS_LOG_H
#define KIS_LOG_H

#include "kis/error.h"

/* Ordered: a level shows its own events and those above it. */
enum kis_log_level {
	KIS_LOG_OFF = 0, /* nothing (the library's default) */
	KIS_LOG_ERROR,
	KIS_LOG_WARN,
	KIS_LOG_INFO,
	KIS_LOG_DEBUG,
	KIS_LOG__COUNT
};

/* "error", "warn", "info", "debug" ("off" for KIS_LOG_OFF). */
KIS_API const char *kis_log_level_name(enum kis_log_level l);
/* Set the level from text: value if not NULL (what names it, e.g.
 * "--log-level", in a refusal), else $KIS_LOG if set and not empty, else
 * def. A name that is no level is refused, naming where it came from, as
 * KIS_E_INVALID_ARGUMENT, and the level is left as it was. */
KIS_API int kis_log_configure(const char *value, const char *what, enum kis_log_level def,
			      struct kis_error **err);
/* The level now in force. */
KIS_API enum kis_log_level kis_log_get_level(void);

#endif
