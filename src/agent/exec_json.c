/* SPDX-License-Identifier: MIT */
/* EXEC request and EXIT result bodies as JSON (jansson). The agent parses
 * what a peer sent: every field is type-checked, nothing assumed. */
#include "core/util.h"

#include <jansson.h>
#include <string.h>

#include "agent/exec_json.h"
#include "core/io.h"
#include "core/json.h"

void kis_exec_req_release(struct kis_exec_req *r)
{
	kis_strv_free(r->argv);
	kis_strv_free(r->env);
	kis_strv_free(r->env_add);
	free(r->cwd);
	free(r->ctr_id);
	free(r->ctr_hostname);
	memset(r, 0, sizeof(*r));
}

static const char *const ctr_ops[] = {"", "init", "join", "remove"};

/* A container id the guest makes a directory of: the OCI runtime's id
 * alphabet, never "." or "..", so it names one directory and no path. */
static bool ctr_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (!n || n > 128 || !strcmp(id, ".") || !strcmp(id, ".."))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

char *kis_exec_req_to_json(const struct kis_exec_req *r)
{
	const struct kis_limits *l = &r->limits;
	json_t *o = json_pack("{s:o, s:o, s:o, s:b, s:{s:b, s:i, s:i}, s:o}",
			      "argv", kis_strv_json(r->argv), "env",
			      r->env ? kis_strv_json(r->env) : json_null(), "cwd",
			      r->cwd ? json_string(r->cwd) : json_null(), "shell", r->shell, "tty",
			      "enabled", r->tty, "rows", (int)r->rows, "cols", (int)r->cols,
			      "limits", kis_limits_to_json(l, kis_limits_per_exec()));
	if (!o)
		return NULL;
	if (r->env_add && r->env_add[0])
		json_object_set_new(o, "env_add", kis_strv_json(r->env_add));
	if (r->ctr_op != KIS_CTR_NONE && r->ctr_op < ARRAY_SIZE(ctr_ops)) {
		json_t *c = json_pack("{s:s, s:s, s:i}", "op", ctr_ops[r->ctr_op], "id",
				      r->ctr_id ? r->ctr_id : "", "slot", r->ctr_slot);
		if (c && r->ctr_free_slot)
			json_object_set_new(c, "free_slot", json_true());
		if (c && r->ctr_hostname)
			json_object_set_new(c, "hostname", json_string(r->ctr_hostname));
		if (c && r->ctr_memory_max)
			json_object_set_new(c, "memory_max", json_integer((json_int_t)r->ctr_memory_max));
		if (c && r->ctr_cpu_quota_us)
			json_object_set_new(c, "cpu_quota_us",
					    json_integer((json_int_t)r->ctr_cpu_quota_us));
		if (c && r->ctr_cpu_period_us)
			json_object_set_new(c, "cpu_period_us",
					    json_integer((json_int_t)r->ctr_cpu_period_us));
		if (!c || json_object_set_new(o, "container", c) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

static int strv_from_json(json_t *a, char ***out, const char *what, struct kis_error **err)
{
	if (!json_is_array(a) || json_array_size(a) > 65536)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "%s: expected an array", what);
	size_t n = json_array_size(a);
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "%s", what);
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(a, i);
		if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
			kis_strv_free(v);
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "%s[%zu]: expected a string without NUL", what, i);
		}
		if (!(v[i] = strdup(json_string_value(s)))) {
			kis_strv_free(v);
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "%s", what);
		}
	}
	*out = v;
	return 0;
}

/* An optional integer in lo..hi (absent: 0, none); false when it is
 * there and anything else: the value the guest would write to a cgroup
 * file is checked before it gets there. */
static bool opt_range(json_t *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	*out = 0;
	if (!v)
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) < lo || (uint64_t)json_integer_value(v) > hi)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static uint64_t get_u64(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

int kis_exec_req_from_json(const char *text, size_t len, struct kis_exec_req *out,
			   struct kis_error **err)
{
	memset(out, 0, sizeof(*out));
	json_error_t je;
	json_t *o = json_loadb(text, len, 0, &je);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "exec request: not a JSON object");
	}
	int r = -1;
	json_t *v;
	if (strv_from_json(json_object_get(o, "argv"), &out->argv, "argv", err) < 0)
		goto out;
	if (!out->argv[0]) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "argv: no command");
		goto out;
	}
	v = json_object_get(o, "env");
	if (v && !json_is_null(v) && strv_from_json(v, &out->env, "env", err) < 0)
		goto out;
	v = json_object_get(o, "env_add");
	if (v && !json_is_null(v) && strv_from_json(v, &out->env_add, "env_add", err) < 0)
		goto out;
	for (size_t i = 0; out->env_add && out->env_add[i]; i++)
		if (!strchr(out->env_add[i], '=') || out->env_add[i][0] == '=') {
			kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "env_add[%zu]: expected K=V", i);
			goto out;
		}
	v = json_object_get(o, "cwd");
	if (json_is_string(v) && !(out->cwd = strdup(json_string_value(v)))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cwd");
		goto out;
	}
	out->shell = json_is_true(json_object_get(o, "shell"));
	json_t *t = json_object_get(o, "tty");
	out->tty = json_is_true(json_object_get(t, "enabled"));
	out->rows = (unsigned)get_u64(t, "rows");
	out->cols = (unsigned)get_u64(t, "cols");
	if (out->rows > 4096 || out->cols > 4096)
		out->rows = out->cols = 0;
	json_t *l = json_object_get(o, "limits");
	kis_limits_from_json(l, &out->limits, kis_limits_per_exec());
	kis_limits_resolve(&out->limits, &out->limits);
	json_t *c = json_object_get(o, "container");
	if (c && !json_is_null(c)) {
		const char *op = json_string_value(json_object_get(c, "op"));
		const char *id = json_string_value(json_object_get(c, "id"));
		json_t *slot = json_object_get(c, "slot");
		json_t *hn = json_object_get(c, "hostname");
		json_t *mm = json_object_get(c, "memory_max");
		for (size_t i = 1; op && i < ARRAY_SIZE(ctr_ops); i++)
			if (!strcmp(op, ctr_ops[i]))
				out->ctr_op = (enum kis_ctr_op)i;
		if (out->ctr_op == KIS_CTR_NONE || !id || !ctr_id_ok(id) ||
		    (slot && (!json_is_integer(slot) || json_integer_value(slot) < 0 ||
			      json_integer_value(slot) > 255)) ||
		    (mm && (!json_is_integer(mm) || json_integer_value(mm) < 0)) ||
		    /* cpu.max's bounds (kis/profile.h); a period is the
		     * quota's, never alone */
		    !opt_range(json_object_get(c, "cpu_quota_us"), KIS_CPU_QUOTA_MIN_US,
			       KIS_CPU_QUOTA_MAX_US, &out->ctr_cpu_quota_us) ||
		    !opt_range(json_object_get(c, "cpu_period_us"), KIS_CPU_PERIOD_MIN_US,
			       KIS_CPU_PERIOD_MAX_US, &out->ctr_cpu_period_us) ||
		    (out->ctr_cpu_period_us && !out->ctr_cpu_quota_us) ||
		    (hn && !json_is_null(hn) &&
		     (!json_is_string(hn) || json_string_length(hn) > 64 ||
		      strlen(json_string_value(hn)) != json_string_length(hn)))) {
			kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				      "container: expected {op: init|join|remove, id, slot, hostname, "
				      "memory_max, cpu_quota_us: %llu..%llu, cpu_period_us: "
				      "%llu..%llu with a quota}",
				      KIS_CPU_QUOTA_MIN_US, KIS_CPU_QUOTA_MAX_US,
				      KIS_CPU_PERIOD_MIN_US, KIS_CPU_PERIOD_MAX_US);
			goto out;
		}
		out->ctr_slot = (int)json_integer_value(slot);
		out->ctr_free_slot = json_is_true(json_object_get(c, "free_slot"));
		out->ctr_memory_max = (uint64_t)json_integer_value(mm);
		if (!(out->ctr_id = strdup(id)) ||
		    (json_is_string(hn) && !(out->ctr_hostname = strdup(json_string_value(hn))))) {
			kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "container");
			goto out;
		}
	}
	r = 0;
out:
	if (r < 0)
		kis_exec_req_release(out);
	json_decref(o);
	return r;
}

char *kis_exit_to_json(const struct kis_result *r)
{
	const struct kis_usage *u = &r->usage;
	json_t *o = json_pack(
		"{s:s, s:i, s:i, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, "
		"s:[{s:I, s:b}, {s:I, s:b}]}",
		"reason", kis_reason_name(r->reason), "exit_code", r->exit_code, "signal", r->signal,
		"detail", r->detail ? json_string(r->detail) : json_null(), "usage", "wall_ms",
		(json_int_t)u->wall_ms, "user_ms", (json_int_t)u->user_ms, "sys_ms",
		(json_int_t)u->sys_ms, "max_rss_bytes", (json_int_t)u->max_rss_bytes, "minor_faults",
		(json_int_t)u->minor_faults, "major_faults", (json_int_t)u->major_faults,
		"voluntary_ctxsw", (json_int_t)u->voluntary_ctxsw, "involuntary_ctxsw",
		(json_int_t)u->involuntary_ctxsw, "streams", "bytes",
		(json_int_t)r->streams[0].bytes, "truncated", r->streams[0].truncated, "bytes",
		(json_int_t)r->streams[1].bytes, "truncated", r->streams[1].truncated);
	if (!o)
		return NULL;
	/* the guest's count for a pod container's own memory group
	 * (agent/pod.c): where counted, as the result's JSON says it */
	if (r->limit_events.counted &&
	    json_object_set_new(o, "limit_events",
				json_pack("{s:I, s:I}", "oom_kills",
					  (json_int_t)r->limit_events.oom_kills, "forks_refused",
					  (json_int_t)r->limit_events.forks_refused)) < 0) {
		json_decref(o);
		return NULL;
	}
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

int kis_exit_from_json(const char *text, size_t len, struct kis_result *r, struct kis_error **err)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return kis_error_set(err, KIS_E_INTERNAL, 0, "agent sent a malformed exit frame");
	}
	const char *reason = json_string_value(json_object_get(o, "reason"));
	r->reason = KIS_REASON_SIGNALED;
	for (int i = 0; i < KIS_REASON__COUNT; i++)
		if (reason && !strcmp(reason, kis_reason_name((enum kis_reason)i)))
			r->reason = (enum kis_reason)i;
	r->exit_code = (int)json_integer_value(json_object_get(o, "exit_code"));
	r->signal = (int)json_integer_value(json_object_get(o, "signal"));
	const char *d = json_string_value(json_object_get(o, "detail"));
	free(r->detail);
	r->detail = d ? strdup(d) : NULL;
	json_t *u = json_object_get(o, "usage");
	r->usage.wall_ms = get_u64(u, "wall_ms");
	r->usage.user_ms = get_u64(u, "user_ms");
	r->usage.sys_ms = get_u64(u, "sys_ms");
	r->usage.max_rss_bytes = get_u64(u, "max_rss_bytes");
	r->usage.minor_faults = get_u64(u, "minor_faults");
	r->usage.major_faults = get_u64(u, "major_faults");
	r->usage.voluntary_ctxsw = get_u64(u, "voluntary_ctxsw");
	r->usage.involuntary_ctxsw = get_u64(u, "involuntary_ctxsw");
	json_t *le = json_object_get(o, "limit_events");
	if (json_is_object(le)) {
		r->limit_events.counted = true;
		r->limit_events.oom_kills = get_u64(le, "oom_kills");
		r->limit_events.forks_refused = get_u64(le, "forks_refused");
	}
	json_t *s = json_object_get(o, "streams");
	for (int i = 0; i < 2; i++) {
		json_t *e = json_array_get(s, (size_t)i);
		r->streams[i].truncated = json_is_true(json_object_get(e, "truncated"));
	}
	json_decref(o);
	return 0;
}
