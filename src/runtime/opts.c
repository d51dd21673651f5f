/* SPDX-License-Identifier: MIT */
/* kis-runtime: parsing a verb's flags as runc's command line takes them
 * (--name VALUE, --name=VALUE, -x VALUE, Go's single-dash -name). */
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

void krt_parsed_release(struct krt_parsed *p)
{
	kis_argv_release(&p->pass);
	kis_argv_release(&p->pos);
}

static ssize_t pass_index(const struct krt_parsed *p, const char *name)
{
	for (size_t i = 0; i < p->pass.n; i++)
		if (strncmp(p->pass.v[i], "--", 2) == 0 && strcmp(p->pass.v[i] + 2, name) == 0)
			return (ssize_t)i;
	return -1;
}

const char *krt_parsed_value(const struct krt_parsed *p, const char *name)
{
	ssize_t i = pass_index(p, name);
	return i >= 0 && (size_t)i + 1 < p->pass.n ? p->pass.v[i + 1] : NULL;
}

bool krt_parsed_has(const struct krt_parsed *p, const char *name)
{
	return pass_index(p, name) >= 0;
}

static const struct krt_opt *find(const struct krt_opt *opts, const char *name, size_t len,
				  char shortc)
{
	for (const struct krt_opt *o = opts; o->name; o++) {
		if (shortc ? o->shortc == shortc
			   : (strlen(o->name) == len && strncmp(o->name, name, len) == 0))
			return o;
	}
	return NULL;
}

int krt_parse(const struct krt_opt *opts, int argc, char **argv, struct krt_parsed *out,
	      struct kis_error **err)
{
	memset(out, 0, sizeof(*out));
	out->preserve_fds = 0;
	bool flags_done = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (flags_done || a[0] != '-' || a[1] == '\0') {
			TRY(krt_argv_push(&out->pos, a, err));
			flags_done = true; /* the id: what follows is exec's command */
			continue;
		}
		if (strcmp(a, "--") == 0) {
			flags_done = true;
			continue;
		}
		const char *name = a + 1 + (a[1] == '-');
		const char *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct krt_opt *o = NULL;
		if (a[1] != '-' && len == 1)
			o = find(opts, NULL, 0, name[0]);
		else
			o = find(opts, name, len, 0);
		if (!o)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "%s: unknown flag '%s'", argv[0], a);
		const char *val = NULL;
		if (o->value) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
						     "%s: flag '--%s' needs a value", argv[0],
						     o->name);
		} else if (eq) {
			/* Go's boolean form --detach=true / =false */
			if (strcmp(eq + 1, "false") == 0)
				continue;
			if (strcmp(eq + 1, "true") != 0)
				return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
						     "%s: flag '--%s' takes no value", argv[0],
						     o->name);
		}
		switch (o->act) {
		case KRT_OPT_BUNDLE:
			out->bundle = val;
			continue;
		case KRT_OPT_CONFIG:
			out->config = val;
			continue;
		case KRT_OPT_PROCESS:
			out->process = val;
			continue;
		case KRT_OPT_REFUSE:
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "%s --%s: %s", argv[0], o->name, o->why);
		case KRT_OPT_CAP:
			TRY(krt_policy_cap(val, "exec --cap", err));
			break;
		case KRT_OPT_PRESERVE: {
			char *end = NULL;
			errno = 0;
			long n = strtol(val, &end, 10);
			if (errno || !end || *end || n < 0 || n > 4096)
				return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
						     "%s: --preserve-fds '%s' is not a count",
						     argv[0], val);
			out->preserve_fds = n;
			break;
		}
		case KRT_OPT_PASS:
		default:
			break;
		}
		/* handed on in one normal form, whatever form it came in */
		char buf[64];
		snprintf(buf, sizeof(buf), "--%s", o->name);
		TRY(krt_argv_push(&out->pass, buf, err));
		if (val)
			TRY(krt_argv_push(&out->pass, val, err));
	}
	return 0;
}

void krt_verb_parse(int argc, char **argv, struct krt_verb_args *out)
{
	memset(out, 0, sizeof(*out));
	bool ps = strcmp(argv[0], "ps") == 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || a[1] == '\0') {
			if (!out->id)
				out->id = a;
			else if (!out->extra)
				out->extra = a;
			continue;
		}
		const char *fmt = NULL;
		if (strncmp(a, "--format=", 9) == 0)
			fmt = a + 9;
		else if (ps && (strcmp(a, "--format") == 0 || strcmp(a, "-f") == 0))
			fmt = i + 1 < argc ? argv[++i] : "";
		if (fmt) {
			out->json = strcmp(fmt, "json") == 0;
			out->bad_format = !out->json && strcmp(fmt, "table") != 0;
		} else if (!ps && (strcmp(a, "--force") == 0 || strcmp(a, "-f") == 0)) {
			out->force = true;
		} else if (strcmp(a, "--all") == 0 || strcmp(a, "-a") == 0) {
			out->all = true;
		} else if (!out->unknown) {
			out->unknown = a;
		}
	}
}

int krt_verb_check(const char *verb, const struct krt_verb_args *va, struct kis_error **err)
{
	if (va->unknown)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "%s: unknown flag '%s'", verb,
				     va->unknown);
	if (va->bad_format)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "%s: --format takes json or table", verb);
	return 0;
}
