/* SPDX-License-Identifier: MIT */
/* What kis-runtime reads back from a container's state directory
 * (state.json, info.json, a create's record), checked before use. */
#include "core/util.h"

#include <errno.h>
#include <string.h>

#include "kis/id.h"
#include "runtime/runtime.h"

/* A state directory's files are the runtime's, 0700 under --root; they
 * are still read as a forger's: a value that is not what create wrote
 * names nothing (defense in depth, as the creating record's ids). */

/* A container id, as runc takes one: the name of its state directory,
 * so never '/', never "." or ".." (no leading '.'). */
int krt_valid_id(const char *id, struct kis_error **err)
{
	size_t n = strlen(id);
	bool ok = n > 0 && n <= 256 && id[0] != '.' && id[0] != '-';
	for (size_t i = 0; ok && i < n; i++)
		ok = (id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
		     (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_' || id[i] == '.';
	return ok ? 0 : kis_error_set(err, KIS_E_INVALID_ID, 0, "container id '%s' is not valid", id);
}

static const char *str_of(json_t *doc, const char *k)
{
	const char *v = json_string_value(json_object_get(doc, k));
	return v ? v : "";
}

/* kis_id_mint's ids: "<kind>-" and kis_id_validate's charset (no '/',
 * no '.', never a path). KRT_KIND_CONTAINER: a container id of this
 * runtime (krt_valid_id, the state directory's name). */
static bool id_of_kind(const char *v, char kind)
{
	if (kind == KRT_KIND_CONTAINER)
		return krt_valid_id(v, NULL) == 0;
	return v[0] == kind && v[1] == '-' && kis_id_validate(v, "id", NULL) == 0;
}

const char *krt_state_id(json_t *doc, const char *k, char kind)
{
	const char *v = str_of(doc, k);
	return *v && id_of_kind(v, kind) ? v : "";
}

pid_t krt_state_pid(json_t *doc, const char *k)
{
	json_t *v = json_object_get(doc, k);
	json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
	return n > 1 && n <= KRT_PID_MAX ? (pid_t)n : 0;
}

static const char *kind_name(char kind)
{
	switch (kind) {
	case 'b':
		return "a base id";
	case 'w':
		return "a workspace id";
	case 's':
		return "a session id";
	default:
		return "a container id";
	}
}

int krt_state_check(json_t *st, const char *id, const struct krt_state_field *fields, size_t n,
		    struct kis_error **err)
{
	const char *bad = NULL, *want = NULL;
	json_t *pid = json_object_get(st, "pid"), *start = json_object_get(st, "starttime");
	if (!json_is_object(st) || strcmp(str_of(st, "id"), id) != 0)
		bad = "id", want = "this container's id";
	else if (!krt_state_pid(st, "pid") || !json_is_integer(pid))
		bad = "pid", want = "a host pid";
	else if (!json_is_integer(start) || json_integer_value(start) < 0)
		bad = "starttime", want = "a start time";
	for (size_t i = 0; !bad && i < n; i++) {
		json_t *v = json_object_get(st, fields[i].key);
		/* absent or "": create had none to write (a pod app's own
		 * session, a sandbox's kept base) */
		if (!v || (json_is_string(v) && !*json_string_value(v)))
			continue;
		if (!json_is_string(v) || !id_of_kind(json_string_value(v), fields[i].kind))
			bad = fields[i].key, want = kind_name(fields[i].kind);
	}
	if (!bad)
		return 0;
	return kis_error_set(err, KIS_E_INVALID_ID, 0,
			     "container '%s': state.json's '%s' is not %s; nothing is done by it",
			     id, bad, want);
}
