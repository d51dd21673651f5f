/* SPDX-License-Identifier: MIT */
/* The result of a run: reason names, the CLI exit status rule and the JSON
 * form of DESIGN.md ("The result"). */
#include "util.h"

#include <jansson.h>
#include <string.h>

#include "kis/result.h"

static const char *const reason_names[KIS_REASON__COUNT] = {
	[KIS_REASON_EXITED] = "exited",
	[KIS_REASON_SIGNALED] = "signaled",
	[KIS_REASON_TRAPPED] = "trapped",
	[KIS_REASON_TIMEOUT] = "timeout",
	[KIS_REASON_CPU_LIMIT] = "cpu_limit",
	[KIS_REASON_MEMORY_LIMIT] = "memory_limit",
	[KIS_REASON_OUTPUT_LIMIT] = "output_limit",
	[KIS_REASON_PIDS_LIMIT] = "pids_limit",
	[KIS_REASON_CANCELLED] = "cancelled",
	[KIS_REASON_SETUP_FAILED] = "setup_failed",
};

const char *kis_reason_name(enum kis_reason r)
{
	return (unsigned)r < KIS_REASON__COUNT ? reason_names[r] : "unknown";
}

void kis_result_init(struct kis_result *r)
{
	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
	r->streams[0].id = KIS_STREAM_STDOUT;
	r->streams[0].name = "stdout";
	r->streams[1].id = KIS_STREAM_STDERR;
	r->streams[1].name = "stderr";
}

void kis_result_release(struct kis_result *r)
{
	if (!r)
		return;
	free(r->detail);
	free(r->workspace);
	for (int i = 0; i < 2; i++)
		free(r->streams[i].data);
	kis_result_init(r);
}

int kis_result_exit_status(const struct kis_result *r)
{
	/* Rule of DESIGN.md, as podman and docker do: the command's own status,
	 * 126/127 when it could not start, 128+N for a signal. A run stopped by a
	 * limit was killed by a signal, so it reports 128+N as well. */
	if (r->reason == KIS_REASON_SETUP_FAILED)
		return r->exit_code == 127 ? 127 : 126;
	if (r->reason == KIS_REASON_EXITED)
		return r->exit_code & 0xff;
	if (r->signal > 0)
		return 128 + r->signal;
	if (r->exit_code >= 0)
		return r->exit_code & 0xff;
	return 125;
}

/* JSON strings must be UTF-8: keep valid sequences, replace every invalid
 * byte by U+FFFD, so arbitrary program output survives the trip. */
static json_t *json_lossy_string(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);
	if (j)
		return j;
	size_t cap = n * 3 + 1, o = 0;
	_cleanup_free_ char *buf = malloc(cap);
	if (!buf)
		return NULL;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		bool ok = len > 0 && i + len <= n;
		for (size_t k = 1; ok && k < len; k++)
			ok = ((unsigned char)s[i + k] >> 6) == 2;
		if (ok && len > 1) {
			/* reject overlong forms, surrogates and code points past U+10FFFF */
			json_t *probe = json_stringn(s + i, len);
			ok = probe != NULL;
			json_decref(probe);
		}
		if (ok && !(len == 1 && c == 0)) {
			memcpy(buf + o, s + i, len);
			o += len;
			i += len;
		} else if (len == 1 && c == 0) {
			buf[o++] = 0; /* json_stringn keeps NUL bytes as \u0000 */
			i++;
		} else {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	return json_stringn(buf, o);
}

char *kis_result_to_json(const struct kis_result *r)
{
	json_t *streams = json_array();
	for (int i = 0; i < 2; i++)
		json_array_append_new(streams,
				      json_pack("{s:i, s:s, s:I, s:b}", "id", r->streams[i].id, "name",
						r->streams[i].name, "bytes",
						(json_int_t)r->streams[i].bytes, "truncated",
						r->streams[i].truncated));
	const struct kis_usage *u = &r->usage;
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:{s:s, s:o, s:o, s:o}, "
		"s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:o}",
		"sandbox", r->sandbox, "tier", kis_tier_name(r->tier), "backend",
		r->backend ? r->backend : "", "termination", "reason", kis_reason_name(r->reason),
		"exit_code", r->exit_code >= 0 ? json_integer(r->exit_code) : json_null(), "signal",
		r->signal > 0 ? json_integer(r->signal) : json_null(), "detail",
		r->detail ? json_string(r->detail) : json_null(), "usage", "wall_ms",
		(json_int_t)u->wall_ms, "user_ms", (json_int_t)u->user_ms, "sys_ms",
		(json_int_t)u->sys_ms, "max_rss_bytes", (json_int_t)u->max_rss_bytes,
		"minor_faults", (json_int_t)u->minor_faults, "major_faults",
		(json_int_t)u->major_faults, "voluntary_ctxsw", (json_int_t)u->voluntary_ctxsw,
		"involuntary_ctxsw", (json_int_t)u->involuntary_ctxsw, "streams", streams);
	if (!o)
		return NULL;
	json_object_set_new(o, "exit_status", json_integer(kis_result_exit_status(r)));
	if (r->accel[0])
		json_object_set_new(o, "accel", json_string(r->accel));
	if (r->tier == KIS_TIER_WASM)
		json_object_set_new(json_object_get(o, "usage"), "linear_memory_bytes",
				    json_integer((json_int_t)u->linear_memory_bytes));
	if (r->workspace) {
		json_object_set_new(o, "workspace", json_string(r->workspace));
		json_object_set_new(o, "workspace_kept", json_boolean(r->workspace_kept));
	}
	for (int i = 0; i < 2; i++) {
		const struct kis_stream *s = &r->streams[i];
		json_t *v = s->data ? json_lossy_string(s->data, s->len) : json_string("");
		json_object_set_new(o, s->name, v ? v : json_null());
	}
	char *out = json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);
	json_decref(o);
	return out;
}
