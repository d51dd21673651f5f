/* SPDX-License-Identifier: MIT */
/* kis/ffi.h: the public API for foreign callers (the Python and Go
 * bindings), as thin wrappers over kis_run and the sessions: handles, fds
 * and JSON instead of structs a foreign language would have to mirror. */
#include "core/util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kis/ffi.h"
#include "kis/sandbox.h"
#include "kis/session.h"

enum kis_errc kis_error_code(const struct kis_error *e)
{
	return e ? e->code : KIS_E_OK;
}

const char *kis_error_message(const struct kis_error *e)
{
	return e && e->message ? e->message : "";
}

int kis_error_errno(const struct kis_error *e)
{
	return e ? e->sys_errno : 0;
}

struct kis_profile *kis_profile_new(void)
{
	struct kis_profile *p = malloc(sizeof(*p));
	if (p)
		kis_profile_init(p);
	return p;
}

void kis_profile_free(struct kis_profile *p)
{
	if (!p)
		return;
	kis_profile_release(p);
	free(p);
}

struct kis_result *kis_result_new(void)
{
	struct kis_result *r = malloc(sizeof(*r));
	if (r)
		kis_result_init(r);
	return r;
}

void kis_result_free(struct kis_result *r)
{
	if (!r)
		return;
	kis_result_release(r);
	free(r);
}

int kis_result_stream(const struct kis_result *r, int stream, const char **data, size_t *len)
{
	*data = NULL;
	*len = 0;
	if (!r || (stream != KIS_STREAM_STDOUT && stream != KIS_STREAM_STDERR))
		return -1;
	const struct kis_stream *s = &r->streams[stream - KIS_STREAM_STDOUT];
	*data = s->data;
	*len = s->data ? s->len : 0;
	return 0;
}

int kis_run_capture(const struct kis_profile *p, char *const *argv, const char *store_root,
		    int stdin_fd, int cancel_fd, struct kis_result *res, struct kis_error **err)
{
	if (!p || !res)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "no profile or no result");
	/* stdout_fd and stderr_fd stay -1: with capture they are never
	 * written, and a terminal (tty.enabled) is refused below, since the
	 * caller's side of one is not a capture */
	if (p->tty.enabled)
		return kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0,
				     "a captured run has no terminal: drop tty.enabled, or open "
				     "a session and exec on a pty");
	struct kis_run_options o = {
		.io = {.stdin_fd = stdin_fd, .capture = true, .stdout_fd = -1, .stderr_fd = -1,
		       .cancel_fd = cancel_fd},
		.store_root = store_root,
		.resize_fd = -1,
		.tty_fd = -1,
	};
	return kis_run(p, argv, &o, res, NULL, err);
}

int kis_session_open(const struct kis_profile *p, const char *store_root, char id[KIS_ID_BUFSZ],
		     struct kis_error **err)
{
	if (!p)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "no profile");
	struct kis_run_options o = {.io = {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
					   .cancel_fd = -1},
				    .store_root = store_root, .resize_fd = -1, .tty_fd = -1};
	return kis_session_create(p, &o, id, err);
}

int kis_session_exec_capture(const char *store_root, const char *id, char *const *argv,
			     bool shell, int stdin_fd, int signal_fd, struct kis_result *res,
			     struct kis_error **err)
{
	if (!id || !res)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "no session id or no result");
	struct kis_exec_options o = {
		.io = {.stdin_fd = stdin_fd, .capture = true, .stdout_fd = -1, .stderr_fd = -1,
		       .cancel_fd = signal_fd},
		.shell = shell, .resize_fd = -1, .tty_fd = -1, .store_root = store_root,
	};
	return kis_session_exec(id, argv, &o, res, err);
}

int kis_session_exec_pty(const char *store_root, const char *id, char *const *argv, bool shell,
			 int tty_fd, int resize_fd, int signal_fd, struct kis_result *res,
			 struct kis_error **err)
{
	if (!id || !res || tty_fd < 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "no session id, no result or no terminal");
	/* the terminal's one side carries both directions, as the CLI's own
	 * terminal does (stdin and stdout of `kis sandbox exec --tty`) */
	struct kis_exec_options o = {
		.io = {.stdin_fd = tty_fd, .capture = false, .stdout_fd = tty_fd,
		       .stderr_fd = tty_fd, .cancel_fd = signal_fd},
		.tty = true, .rows = 24, .cols = 80, .shell = shell, .resize_fd = resize_fd,
		.tty_fd = tty_fd, .store_root = store_root,
	};
	return kis_session_exec(id, argv, &o, res, err);
}

int kis_backends_json(const char *store_root, char **json, struct kis_error **err)
{
	*json = NULL;
	size_t n;
	const struct kis_backend *const *b = kis_backends(&n);
	_cleanup_(json_decrefp) json_t *arr = json_array();
	if (!arr)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot list the backends");
	for (size_t i = 0; i < n; i++) {
		struct kis_caps c;
		kis_backend_probe(b[i], store_root, true, &c);
		json_t *net = json_array(), *lim = json_array();
		for (unsigned m = 0; m < KIS_NET__COUNT; m++)
			if (c.present && (c.net_modes & (1u << m)))
				json_array_append_new(net, json_string(kis_net_mode_name(m)));
		for (unsigned k = 0; k < KIS_LIMIT__COUNT; k++)
			if (c.present && (c.limits & kis_limit_table[k].bit))
				json_array_append_new(lim, json_string(kis_limit_table[k].name));
		json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:b, s:o, s:o}", "backend", b[i]->name,
				      "tier", kis_tier_name(b[i]->tier), "available", c.present,
				      "tty", c.present && c.tty, "shell", c.present && c.shell,
				      "network", net, "limits", lim);
		if (!o)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot list the backends");
		if (!c.present)
			json_object_set_new(o, "why_absent", json_string(c.why_absent));
		json_array_append_new(arr, o);
	}
	*json = json_dumps(arr, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!*json)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot list the backends");
	return 0;
}
