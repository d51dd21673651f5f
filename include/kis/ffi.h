/* SPDX-License-Identifier: MIT */
/* kis/ffi.h: the library for a caller that cannot lay out its structs (a
 * foreign function interface: Python's ctypes, Go's cgo): opaque handles
 * made and freed here, file descriptors for streams and cancellation, and
 * JSON where a struct would have to be mirrored. */
#ifndef KIS_FFI_H
#define KIS_FFI_H

#include <stdbool.h>
#include <stddef.h>

#include "kis/error.h"
#include "kis/id.h"
#include "kis/profile.h"
#include "kis/result.h"

/* Every function below is safe to call from several threads at once, each
 * with its own profile and result: a run's owner records are the calling
 * thread's (src/engine/owner.h), and nothing here keeps state between
 * calls. A caller that dies mid-run (SIGKILL) leaves its owner record
 * unlocked, and the next store open (any run, any `kis` command) reaps
 * what the run made. */

/* The error's code, message (never NULL: "" when it has none) and errno
 * (0 when no system call is to blame). */
KIS_API enum kis_errc kis_error_code(const struct kis_error *e);
KIS_API const char *kis_error_message(const struct kis_error *e);
KIS_API int kis_error_errno(const struct kis_error *e);

/* A profile on the heap, at its zero value (deny-all, kis_profile_init);
 * fill it with kis_profile_merge_json. NULL on ENOMEM. kis_profile_free
 * accepts NULL. */
KIS_API struct kis_profile *kis_profile_new(void);
KIS_API void kis_profile_free(struct kis_profile *p);

/* A result on the heap (kis_result_init); kis_result_free accepts NULL. */
KIS_API struct kis_result *kis_result_new(void);
KIS_API void kis_result_free(struct kis_result *r);
/* The captured bytes of KIS_STREAM_STDOUT or KIS_STREAM_STDERR: *data
 * (borrowed from r, NULL when nothing was captured) and *len, which counts
 * NUL bytes the command wrote (the JSON of kis_result_to_json cannot
 * carry them). -1 for another stream id. */
KIS_API int kis_result_stream(const struct kis_result *r, int stream, const char **data,
			      size_t *len);

/* kis_run with stdout and stderr captured into res. stdin_fd: the
 * command's stdin (-1: /dev/null). cancel_fd: readable means cancel (a
 * pipe another thread writes a byte to): the run ends with reason
 * cancelled, however far it got, and what it made is removed; -1: none.
 * The caller owns both fds. */
KIS_API int kis_run_capture(const struct kis_profile *p, char *const *argv,
			    const char *store_root, int stdin_fd, int cancel_fd,
			    struct kis_result *res, struct kis_error **err);

/* kis_session_create with no terminal of the caller's (a session's exec
 * may still ask for one, kis_session_exec_pty). */
KIS_API int kis_session_open(const struct kis_profile *p, const char *store_root,
			     char id[KIS_ID_BUFSZ], struct kis_error **err);
/* One exec in a session with stdout and stderr captured into res. shell:
 * argv[0] is a shell line whose cwd and environment carry over to the next
 * one. signal_fd: each byte read from it is a signal number forwarded to
 * the command (SIGKILL ends it; the reason is then signaled); -1: none. */
KIS_API int kis_session_exec_capture(const char *store_root, const char *id, char *const *argv,
				     bool shell, int stdin_fd, int signal_fd,
				     struct kis_result *res, struct kis_error **err);
/* One exec in a session on a terminal inside the sandbox, wired to tty_fd:
 * the slave side of a pseudo-terminal the caller opened (openpty(3)) and
 * put in raw mode, whose master the caller reads and writes. Its size
 * (TIOCGWINSZ on tty_fd) is the terminal's first size, and each byte
 * readable on resize_fd (-1: none) sends its size anew. KIS_E_TTY_UNSUPPORTED
 * from a backend without terminals. */
KIS_API int kis_session_exec_pty(const char *store_root, const char *id, char *const *argv,
				 bool shell, int tty_fd, int resize_fd, int signal_fd,
				 struct kis_result *res, struct kis_error **err);

/* The backends compiled in and what each can enforce on this host, probed
 * now, as a JSON array (malloc'ed into *json) of objects: "backend",
 * "tier", "available", "why_absent" (when not), "tty", "shell", "network"
 * (the modes) and "limits" (the names of kis_limit_table). The fuller
 * matrix with the store's clone strategy is `kis sandbox backends --json`. */
KIS_API int kis_backends_json(const char *store_root, char **json, struct kis_error **err);

#endif
