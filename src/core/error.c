/* SPDX-License-Identifier: MIT */
/* Error values: creation, wrapping with context, formatting. The library
 * never prints; the CLI formats each error once. */
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kis/error.h"

static const char *const errc_names[KIS_E__COUNT] = {
	[KIS_E_OK] = "ok",
	[KIS_E_ESCAPE_HATCH_FORBIDDEN] = "escape_hatch_forbidden",
	[KIS_E_TIER_UNAVAILABLE] = "tier_unavailable",
	[KIS_E_PROFILE_UNSATISFIABLE] = "profile_unsatisfiable",
	[KIS_E_TTY_UNSUPPORTED] = "tty_unsupported",
	[KIS_E_INVALID_PROFILE] = "invalid_profile",
	[KIS_E_INVALID_ID] = "invalid_id",
	[KIS_E_NOT_FOUND] = "not_found",
	[KIS_E_DESTINATION_EXISTS] = "destination_exists",
	[KIS_E_INVALID_ARGUMENT] = "invalid_argument",
	[KIS_E_BUSY] = "busy",
	[KIS_E_INTERNAL] = "internal",
	[KIS_E_PROTOCOL] = "protocol",
};

const char *kis_errc_name(enum kis_errc code)
{
	if ((unsigned)code >= KIS_E__COUNT)
		return "internal";
	return errc_names[code];
}

void kis_error_free(struct kis_error *e)
{
	if (!e)
		return;
	free(e->message);
	free(e);
}

int kis_error_setv(struct kis_error **err, enum kis_errc code, int sys_errno, const char *fmt,
		   va_list ap)
{
	if (!err)
		return -1;
	kis_error_free(*err);
	*err = NULL;
	struct kis_error *e = calloc(1, sizeof(*e));
	if (!e)
		return -1; /* out of memory: the caller still sees failure */
	e->code = code;
	e->sys_errno = sys_errno;
	if (vasprintf(&e->message, fmt, ap) < 0)
		e->message = NULL;
	*err = e;
	return -1;
}

int kis_error_set(struct kis_error **err, enum kis_errc code, int sys_errno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kis_error_setv(err, code, sys_errno, fmt, ap);
	va_end(ap);
	return -1;
}

int kis_error_wrap(struct kis_error **err, const char *fmt, ...)
{
	if (!err || !*err)
		return -1;
	_cleanup_free_ char *prefix = NULL;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&prefix, fmt, ap);
	va_end(ap);
	if (r < 0) {
		prefix = NULL;
		return -1;
	}
	char *joined = NULL;
	if (asprintf(&joined, "%s: %s", prefix, (*err)->message ? (*err)->message : "") < 0)
		return -1;
	free((*err)->message);
	(*err)->message = joined;
	return -1;
}

char *kis_error_format(const struct kis_error *e)
{
	char *out = NULL;
	if (!e)
		return NULL;
	const char *msg = e->message ? e->message : "out of memory";
	int r;
	if (e->sys_errno)
		r = asprintf(&out, "%s: %s: %s", kis_errc_name(e->code), msg, strerror(e->sys_errno));
	else
		r = asprintf(&out, "%s: %s", kis_errc_name(e->code), msg);
	return r < 0 ? NULL : out;
}
