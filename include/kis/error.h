/* SPDX-License-Identifier: MIT */
/* kis/error.h: the one error type of the library, its stable codes and how
 * they are made, wrapped with context and released. */
#ifndef KIS_ERROR_H
#define KIS_ERROR_H

#include <stdarg.h>

#ifndef KIS_API
#define KIS_API __attribute__((visibility("default")))
#endif

/* Stable, machine-readable error codes. The snake_case name of each
 * (kis_errc_name) is part of the interface: the CLI prints it, callers match
 * on it. Never renumber or rename; only append. */
enum kis_errc {
	KIS_E_OK = 0,
	KIS_E_ESCAPE_HATCH_FORBIDDEN, /* unconfined tier or host net without its hatch */
	KIS_E_TIER_UNAVAILABLE,       /* pinned tier or backend absent on this host */
	KIS_E_PROFILE_UNSATISFIABLE,  /* backend present, cannot enforce a field */
	KIS_E_TTY_UNSUPPORTED,        /* terminal asked of a backend without one */
	KIS_E_INVALID_PROFILE,        /* malformed JSON, unknown field, bad value */
	KIS_E_INVALID_ID,             /* an id that fails validation */
	KIS_E_NOT_FOUND,              /* a valid id that names nothing */
	KIS_E_DESTINATION_EXISTS,     /* a clone target that already holds content */
	KIS_E_INVALID_ARGUMENT,       /* bad command-line usage or API argument */
	KIS_E_BUSY,                   /* the object is in use (e.g. a base with clones) */
	KIS_E_INTERNAL,               /* a bug or an unexpected host failure */
	KIS_E_PROTOCOL,               /* the sandbox's side broke the agent protocol */
	KIS_E__COUNT
};

struct kis_error {
	enum kis_errc code;
	int sys_errno;  /* 0 when no system call is to blame */
	char *message;  /* lower-case, no final period, names what to change */
};

/* Error contract (after crun's design-docs/error_handling.md): a fallible
 * function takes `struct kis_error **err` last, returns >= 0 on success and
 * a negative value on failure, and sets *err only on failure. */

/* Set *err (if err is not NULL) and return -1. An existing *err is freed. */
KIS_API int kis_error_set(struct kis_error **err, enum kis_errc code, int sys_errno,
			  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
KIS_API int kis_error_setv(struct kis_error **err, enum kis_errc code, int sys_errno,
			   const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));
/* Prefix the message of *err with context ("cloning 'b-x': ..."); returns -1. */
KIS_API int kis_error_wrap(struct kis_error **err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
KIS_API void kis_error_free(struct kis_error *e);
/* "code" of an enum value, e.g. "escape_hatch_forbidden". */
KIS_API const char *kis_errc_name(enum kis_errc code);
/* "code: message[: strerror]" in a malloc'ed string, or NULL on ENOMEM. */
KIS_API char *kis_error_format(const struct kis_error *e);

#endif
