/* SPDX-License-Identifier: MIT */
/* The engine's diagnostics (kis/log.h): the level, the line's prefix and
 * its one write to stderr. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/names.h"
#include "core/record.h"
#include "core/util.h"

_Atomic int kis_log_level_now = KIS_LOG_OFF;

static __thread const char *scope_id;
static _Atomic(kis_log_sink_fn) sink;

void kis_log_set_sink(kis_log_sink_fn fn)
{
	atomic_store(&sink, fn);
}

static const char *const level_names[KIS_LOG__COUNT] = {
	[KIS_LOG_OFF] = "off",   [KIS_LOG_ERROR] = "error", [KIS_LOG_WARN] = "warn",
	[KIS_LOG_INFO] = "info", [KIS_LOG_DEBUG] = "debug",
};

const char *kis_log_level_name(enum kis_log_level l)
{
	return (unsigned)l < KIS_LOG__COUNT ? level_names[l] : "unknown";
}

enum kis_log_level kis_log_get_level(void)
{
	return (enum kis_log_level)atomic_load_explicit(&kis_log_level_now, memory_order_relaxed);
}

int kis_log_configure(const char *value, const char *what, enum kis_log_level def,
		      struct kis_error **err)
{
	if (!value) {
		const char *env = getenv("KIS_LOG");
		if (env && env[0]) {
			value = env;
			what = "KIS_LOG";
		}
	}
	/* "off" is the library's silence, not a level a user gives: the
	 * names start at error */
	int l = !value ? (int)def :
		kis_name_index(level_names + KIS_LOG_ERROR, KIS_LOG__COUNT - KIS_LOG_ERROR, value);
	if (value && l >= 0)
		l += KIS_LOG_ERROR;
	if (l < 0) {
		char expect[128];
		kis_names_expect(level_names + KIS_LOG_ERROR, KIS_LOG__COUNT - KIS_LOG_ERROR, expect,
				 sizeof(expect));
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "%s: %s '%s'",
				     what ? what : "log level", expect, value);
	}
	atomic_store_explicit(&kis_log_level_now, l, memory_order_relaxed);
	return 0;
}

const char *kis_log_scope(const char *id)
{
	const char *old = scope_id;
	scope_id = id;
	return old;
}

/* Whole lines in one write(2): below PIPE_BUF a write to a pipe is atomic
 * (pipe(7)), and a terminal or file gets it in one piece in practice, so
 * the lines of the engine's threads and of its children (who inherit the
 * level only if they are kis) do not interleave. */
static void emit(const char *line, size_t n)
{
	int saved = errno;
	while (n) {
		ssize_t w = write(STDERR_FILENO, line, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		line += w;
		n -= (size_t)w;
	}
	errno = saved;
}

static size_t prefix(char *buf, size_t len, enum kis_log_level l)
{
	const char *id = scope_id ? scope_id : kis_owner_id();
	int n = id ? snprintf(buf, len, "kis[%s] %s: ", id, kis_log_level_name(l))
		   : snprintf(buf, len, "kis: %s: ", kis_log_level_name(l));
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* The line: buf holds the prefix (pre bytes) then the message, n bytes in
 * all (perhaps past len when cut). */
static void finish(char *buf, size_t len, size_t n, enum kis_log_level l, size_t pre)
{
	/* cut to the buffer, one newline at the end, none inside: an event
	 * is one line whatever a message carries (a tool's stderr) */
	if (n > len - 2)
		n = len - 2;
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\n' || buf[i] == '\r')
			buf[i] = ' ';
	kis_log_sink_fn fn = atomic_load(&sink);
	if (fn) {
		buf[n] = '\0';
		fn(l, buf + (pre < n ? pre : n));
		return;
	}
	buf[n++] = '\n';
	emit(buf, n);
}

/* The prefix and the message into buf; the length written (it may pass
 * len when the message was cut: finish clamps it). */
static size_t start(char *buf, size_t len, enum kis_log_level l, size_t *pre, const char *fmt,
		    va_list ap) __attribute__((format(printf, 5, 0)));
static size_t start(char *buf, size_t len, enum kis_log_level l, size_t *pre, const char *fmt,
		    va_list ap)
{
	size_t n = prefix(buf, len, l);
	*pre = n;
	int m = vsnprintf(buf + n, len - n, fmt, ap);
	return m > 0 ? n + (size_t)m : n;
}

void kis_log_write(enum kis_log_level l, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	size_t pre;
	size_t n = start(buf, sizeof(buf), l, &pre, fmt, ap);
	va_end(ap);
	finish(buf, sizeof(buf), n, l, pre);
}

/* A word as a shell reads it back: bare when it holds only safe
 * characters, else in single quotes with each ' as '\'' */
static size_t quote(char *out, size_t len, const char *w)
{
	size_t o = 0;
	bool bare = w[0] != '\0' && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					     "0123456789-_./=:,+@%") == strlen(w);
#define PUT(c)                       \
	do {                         \
		if (o + 1 < len)     \
			out[o] = (c); \
		o++;                 \
	} while (0)
	if (!bare)
		PUT('\'');
	for (const char *p = w; *p; p++) {
		if (!bare && *p == '\'') {
			PUT('\'');
			PUT('\\');
			PUT('\'');
		}
		PUT(*p);
	}
	if (!bare)
		PUT('\'');
#undef PUT
	return o;
}

void kis_log_argv_write(enum kis_log_level l, char *const *argv, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	size_t pre;
	size_t n = start(buf, sizeof(buf), l, &pre, fmt, ap);
	va_end(ap);
	if (n + 1 < sizeof(buf))
		buf[n++] = ':';
	for (size_t i = 0; argv && argv[i] && n + 2 < sizeof(buf); i++) {
		buf[n++] = ' ';
		n += quote(buf + n, sizeof(buf) - n, argv[i]);
	}
	finish(buf, sizeof(buf), n < sizeof(buf) ? n : sizeof(buf), l, pre);
}
