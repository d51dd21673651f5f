/* SPDX-License-Identifier: MIT */
/* The result of a run: reason names, the CLI exit status rule and the JSON
 * form of DESIGN.md ("The result"). */
#include "core/util.h"

#include <jansson.h>
#include <signal.h>
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
	[KIS_REASON_DISK_LIMIT] = "disk_limit",
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
	/* A verdict of the supervisor's clock or counter (timeout, cpu_limit,
	 * output_limit) is 128+SIGKILL every time. Its kill races the command's
	 * own end: `yes | head -c 5000` under a 1k limit has often exited 0
	 * before the SIGKILL lands, and a caller checking $? must never read
	 * success from a cut stream (issue 40 item 7). exit_code and signal
	 * keep what the command really did. */
	if (r->reason == KIS_REASON_TIMEOUT || r->reason == KIS_REASON_CPU_LIMIT ||
	    r->reason == KIS_REASON_OUTPUT_LIMIT)
		return 128 + SIGKILL;
	if (r->reason == KIS_REASON_EXITED)
		return r->exit_code & 0xff;
	if (r->signal > 0)
		return 128 + r->signal;
	if (r->exit_code >= 0)
		return r->exit_code & 0xff;
	return 125;
}

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0 when
 * the byte there starts none: RFC 3629 section 4 (no overlong forms, no
 * surrogates, nothing past U+10FFFF), the check jansson makes on strings. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Write s as a JSON string (RFC 8259 section 7), straight from the
 * captured buffer through a small window: a 64 MiB stream costs no second
 * copy. Valid UTF-8 is kept, every invalid byte becomes U+FFFD, so
 * arbitrary program output survives the trip; escapes as jansson's. */
static int write_json_string(FILE *f, const char *str, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *s = (const unsigned char *)str;
	char out[8192];
	size_t o = 0;
	if (fputc('"', f) == EOF)
		return -1;
	for (size_t i = 0; i < n;) {
		if (o + 8 > sizeof(out)) {
			if (fwrite(out, 1, o, f) != o)
				return -1;
			o = 0;
		}
		unsigned char c = s[i];
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			out[o++] = (char)c;
			i++;
			continue;
		}
		if (c >= 0x80) {
			size_t len = utf8_seq(s + i, n - i);
			if (len) {
				memcpy(out + o, s + i, len);
				o += len;
				i += len;
			} else {
				memcpy(out + o, "\xef\xbf\xbd", 3);
				o += 3;
				i++;
			}
			continue;
		}
		out[o++] = '\\';
		switch (c) {
		case '"': out[o++] = '"'; break;
		case '\\': out[o++] = '\\'; break;
		case '\b': out[o++] = 'b'; break;
		case '\f': out[o++] = 'f'; break;
		case '\n': out[o++] = 'n'; break;
		case '\r': out[o++] = 'r'; break;
		case '\t': out[o++] = 't'; break;
		default:
			memcpy(out + o, "u00", 3);
			o += 3;
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
			break;
		}
		i++;
	}
	if (o && fwrite(out, 1, o, f) != o)
		return -1;
	return fputc('"', f) == EOF ? -1 : 0;
}

static bool utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0; i < n;) {
		size_t len = s[i] < 0x80 ? 1 : utf8_seq(s + i, n - i);
		if (!len)
			return false;
		i += len;
	}
	return true;
}

/* The bytes as one base64 string (RFC 4648 section 4, padded), through a
 * small window as write_json_string. */
static int write_base64(FILE *f, const char *str, size_t n)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = (const unsigned char *)str;
	char out[8192];
	size_t o = 0;
	if (fputc('"', f) == EOF)
		return -1;
	for (size_t i = 0; i < n; i += 3) {
		if (o + 4 > sizeof(out)) {
			if (fwrite(out, 1, o, f) != o)
				return -1;
			o = 0;
		}
		unsigned v = (unsigned)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	if (o && fwrite(out, 1, o, f) != o)
		return -1;
	return fputc('"', f) == EOF ? -1 : 0;
}

/* Everything but the streams, as a jansson object. */
static json_t *result_head_json(const struct kis_result *r)
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
		"{s:s, s:s, s:s, s:s?, s:{s:s, s:o, s:o, s:o}, "
		"s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:o}",
		/* the document's own object is "id" (README, JSON output);
		 * "sandbox" is its deprecated alias, kept for one release */
		"id", r->sandbox, "sandbox", r->sandbox, "tier", kis_tier_name(r->tier), "backend",
		r->backend, "termination", "reason", kis_reason_name(r->reason),
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
	/* absent values are null, never left out or "" (README, JSON output) */
	json_object_set_new(o, "accel", r->accel[0] ? json_string(r->accel) : json_null());
	json_t *w = json_null();
	if (r->tier == KIS_TIER_WASM && r->wasm.engine[0])
		w = json_pack("{s:s, s:s?, s:s?}", "engine", r->wasm.engine, "code",
			      r->wasm.code[0] ? r->wasm.code : NULL, "tier_up",
			      r->wasm.tier_up[0] ? r->wasm.tier_up : NULL);
	json_object_set_new(o, "wasm", w);
	json_object_set_new(o, "limit_events",
			    r->limit_events.counted ?
				    json_pack("{s:I, s:I}", "oom_kills",
					      (json_int_t)r->limit_events.oom_kills, "forks_refused",
					      (json_int_t)r->limit_events.forks_refused) :
				    json_null());
	json_object_set_new(json_object_get(o, "usage"), "linear_memory_bytes",
			    r->tier == KIS_TIER_WASM ?
				    json_integer((json_int_t)u->linear_memory_bytes) : json_null());
	json_object_set_new(o, "workspace", r->workspace ? json_string(r->workspace) : json_null());
	json_object_set_new(o, "workspace_kept", json_boolean(r->workspace && r->workspace_kept));
	return o;
}

int kis_result_write_json(const struct kis_result *r, FILE *f)
{
	json_t *o = result_head_json(r);
	_cleanup_free_ char *head = o ? json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
	json_decref(o);
	size_t hn = head ? strlen(head) : 0;
	if (hn < 2 || head[hn - 1] != '}') {
		errno = ENOMEM;
		return -1;
	}
	/* the head's closing brace gives way to the two streams, written last */
	if (fwrite(head, 1, hn - 1, f) != hn - 1)
		return -1;
	for (int i = 0; i < 2; i++) {
		const struct kis_stream *s = &r->streams[i];
		const char *d = s->data ? s->data : "";
		size_t n = s->data ? s->len : 0;
		if (fprintf(f, ",\"%s\":", s->name) < 0 || write_json_string(f, d, n) < 0)
			return -1;
		/* JSON strings are Unicode (RFC 8259 section 8.1): a stream that
		 * is not valid UTF-8 shows U+FFFD above, and its bytes, all of
		 * them, here, so nothing is lost in silence (issue 40 item 10) */
		if (!utf8_valid(d, n) &&
		    (fprintf(f, ",\"%s_base64\":", s->name) < 0 || write_base64(f, d, n) < 0))
			return -1;
	}
	return fputc('}', f) == EOF ? -1 : 0;
}

char *kis_result_to_json(const struct kis_result *r)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	int w = kis_result_write_json(r, f);
	if (fclose(f) != 0 || w < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

enum kis_reason kis_limit_verdict(uint64_t oom_kills, uint64_t forks_refused)
{
	return oom_kills ? KIS_REASON_MEMORY_LIMIT :
	       forks_refused ? KIS_REASON_PIDS_LIMIT : KIS_REASON_EXITED;
}

int kis_result_blame_limits(struct kis_result *res, uint64_t oom_kills, uint64_t forks_refused,
			    const char *mem_detail, const char *pids_detail)
{
	res->limit_events.counted = true;
	res->limit_events.oom_kills = oom_kills;
	res->limit_events.forks_refused = forks_refused;
	bool failed = (res->reason == KIS_REASON_EXITED && res->exit_code != 0) ||
		      res->reason == KIS_REASON_SIGNALED || res->reason == KIS_REASON_TIMEOUT;
	enum kis_reason v = kis_limit_verdict(oom_kills, forks_refused);
	if (!failed || v == KIS_REASON_EXITED)
		return 0;
	res->reason = v;
	free(res->detail);
	res->detail = strdup(v == KIS_REASON_MEMORY_LIMIT ? mem_detail : pids_detail);
	return 1;
}
