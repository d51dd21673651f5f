/* SPDX-License-Identifier: MIT */
/* The profile: its deny-all zero value, the JSON reader and the flag setter.
 * Both go through one field table, so a flag and a JSON field cannot differ. */
#include "core/util.h"

#include <ctype.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "core/json.h"
#include "core/names.h"
#include "kis/id.h"
#include "kis/profile.h"
#include "core/net_dest.h"

enum field_kind {
	F_TIER,
	F_NAME,    /* backend name: [a-z0-9-] */
	F_ID,      /* base / workspace id */
	F_BOOL,
	F_ROOT,
	F_NET,
	F_LIMIT,   /* one of kis/limits.h: its kind says how it is written */
	F_TTYDIM,  /* 1..4096 */
	F_VCPUS,   /* 1..64; 0 (unset) takes 1 */
	F_PATH,    /* absolute path inside the sandbox */
	F_ENV,
	F_ACCEL,   /* auto | kvm | tcg */
	F_MOUNTS,  /* a list of {source, target, read_only} */
	F_WASM_ENGINE,  /* auto | interpreter | compiler */
	F_WASM_PREOPEN, /* workspace | none */
	F_NETALLOW, /* network.allow: a list of destinations (core/net_dest.c) */
};

struct field {
	const char *path;
	enum field_kind kind;
	size_t off;
	int limit; /* F_LIMIT: its index in kis_limit_table */
};

#define FIELD(p, k, member) {p, k, offsetof(struct kis_profile, member), -1}
#define LIMIT_FIELD(f, B, k, d, lo, m, pe, fl, h) \
	{"limits." #f, F_LIMIT, offsetof(struct kis_profile, limits.f), KIS_LIMIT_I_##B},
static const struct field fields[] = {
	FIELD("tier", F_TIER, tier),
	FIELD("backend", F_NAME, backend),
	FIELD("base", F_ID, base),
	FIELD("workspace", F_ID, workspace),
	FIELD("keep", F_BOOL, keep),
	FIELD("root", F_ROOT, root),
	FIELD("network.mode", F_NET, net),
	FIELD("network.allow", F_NETALLOW, net_allow),
	KIS_LIMITS(LIMIT_FIELD)
	FIELD("env", F_ENV, env),
	FIELD("cwd", F_PATH, cwd),
	FIELD("mounts", F_MOUNTS, mounts),
	FIELD("tty.enabled", F_BOOL, tty.enabled),
	FIELD("tty.rows", F_TTYDIM, tty.rows),
	FIELD("tty.cols", F_TTYDIM, tty.cols),
	FIELD("escape_hatch.allow_process_tier", F_BOOL, escape_hatch.allow_process_tier),
	FIELD("escape_hatch.allow_net_host", F_BOOL, escape_hatch.allow_net_host),
	FIELD("microvm.accel", F_ACCEL, microvm.accel),
	FIELD("microvm.vcpus", F_VCPUS, microvm.vcpus),
	FIELD("wasm.engine", F_WASM_ENGINE, wasm.engine),
	FIELD("wasm.preopen", F_WASM_PREOPEN, wasm.preopen),
};
#undef FIELD
#undef LIMIT_FIELD

/* Objects that group fields: a JSON key naming one of them recurses. */
static const char *const groups[] = {"network", "limits", "tty", "escape_hatch", "microvm",
				     "wasm"};

static const char *const root_names[] = {[KIS_ROOT_HOST] = "host", [KIS_ROOT_WORKSPACE] = "workspace"};
static const char *const accel_names[] = {[KIS_ACCEL_AUTO] = "auto", [KIS_ACCEL_KVM] = "kvm",
					  [KIS_ACCEL_TCG] = "tcg"};
static const char *const wasm_engine_names[] = {[KIS_WASM_ENGINE_AUTO] = "auto",
						[KIS_WASM_ENGINE_INTERPRETER] = "interpreter",
						[KIS_WASM_ENGINE_COMPILER] = "compiler"};
static const char *const wasm_preopen_names[] = {[KIS_WASM_PREOPEN_WORKSPACE] = "workspace",
						 [KIS_WASM_PREOPEN_NONE] = "none"};

const char *kis_wasm_engine_name(enum kis_wasm_engine e)
{
	return (unsigned)e < ARRAY_SIZE(wasm_engine_names) ? wasm_engine_names[e] : "unknown";
}

static void mounts_clear(struct kis_profile *p)
{
	for (size_t i = 0; i < p->n_mounts; i++) {
		free(p->mounts[i].source);
		free(p->mounts[i].target);
	}
	free(p->mounts);
	p->mounts = NULL;
	p->n_mounts = 0;
}

void kis_profile_init(struct kis_profile *p)
{
	memset(p, 0, sizeof(*p));
	p->tier = KIS_TIER_AUTO;
	p->net = KIS_NET_OFF;
	p->root = KIS_ROOT_HOST;
	p->tty.rows = 24;
	p->tty.cols = 80;
}

void kis_profile_release(struct kis_profile *p)
{
	if (!p)
		return;
	free(p->backend);
	free(p->base);
	free(p->workspace);
	free(p->cwd);
	mounts_clear(p);
	for (size_t i = 0; i < p->n_env; i++)
		free(p->env[i]);
	free(p->env);
	free(p->net_allow);
	kis_profile_init(p);
}

/* ---- units ---- */

static int parse_number(const char *s, uint64_t *num, const char **rest)
{
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	uint64_t v = 0;
	while (isdigit((unsigned char)*s)) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	*num = v;
	*rest = s;
	return 0;
}

static int mul_checked(uint64_t a, uint64_t b, uint64_t *out)
{
	if (b && a > UINT64_MAX / b)
		return -1;
	*out = a * b;
	return 0;
}

int kis_parse_duration_ms(const char *s, uint64_t *out, struct kis_error **err)
{
	uint64_t v;
	const char *unit;
	if (parse_number(s, &v, &unit) < 0)
		goto bad;
	uint64_t mul;
	if (!*unit || !strcmp(unit, "ms"))
		mul = 1;
	else if (!strcmp(unit, "s"))
		mul = 1000;
	else if (!strcmp(unit, "m"))
		mul = 60 * 1000;
	else if (!strcmp(unit, "h"))
		mul = 3600 * 1000;
	else
		goto bad;
	if (mul_checked(v, mul, out) < 0)
		goto bad;
	return 0;
bad:
	return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
			     "'%s' is not a duration: write a number with ms, s, m or h (e.g. 500ms, 2s)",
			     s ? s : "");
}

int kis_parse_size(const char *s, uint64_t *out, struct kis_error **err)
{
	uint64_t v;
	const char *unit;
	if (parse_number(s, &v, &unit) < 0)
		goto bad;
	uint64_t mul;
	if (!*unit)
		mul = 1;
	else if (!strcmp(unit, "k") || !strcmp(unit, "K"))
		mul = 1ull << 10;
	else if (!strcmp(unit, "M"))
		mul = 1ull << 20;
	else if (!strcmp(unit, "G"))
		mul = 1ull << 30;
	else
		goto bad;
	if (mul_checked(v, mul, out) < 0)
		goto bad;
	return 0;
bad:
	return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
			     "'%s' is not a size: write a number of bytes, optionally with k, M or G",
			     s ? s : "");
}

/* ---- setting one field ---- */

static int bad(struct kis_error **err, const char *path, const char *fmt, const char *what);

/* ---- mounts ---- */

/* A mount's target crosses into bwrap's command line and crun's
 * config.json and is made a directory by them inside the sandbox's root:
 * written strictly. Portable filename characters only (POSIX.1-2017
 * 3.282: letters, digits, '.', '_', '-'), components of at most 255 bytes
 * (NAME_MAX), no '.' or '..' component; repeated and trailing slashes are
 * dropped (the normal form). Refused by name: / itself, the kernel's
 * filesystems (/proc, /sys, /dev and below: their magic links lead where
 * the setup points, runc's CVE-2024-21626), the workspace's own mount
 * point (/workspace and below) and the agent's (/.kis). */
#define MOUNT_TARGET_MAX 1024

static int mount_target_norm(const char *path, const char *v, char **out, struct kis_error **err)
{
	static const char *const refused[] = {"/proc", "/sys", "/dev", "/workspace", "/.kis"};
	if (!v || v[0] != '/')
		return bad(err, path, "expected an absolute path inside the sandbox, not", v ? v : "");
	size_t len = strlen(v);
	if (len > MOUNT_TARGET_MAX)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: longer than %d bytes", path,
				     MOUNT_TARGET_MAX);
	_cleanup_free_ char *n = malloc(len + 2);
	if (!n)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "%s: out of memory", path);
	size_t o = 0;
	for (const char *c = v; *c;) {
		while (*c == '/')
			c++;
		size_t k = strcspn(c, "/");
		if (!k)
			break;
		if ((k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
			return bad(err, path, "expected a path with no '.' or '..' component, not", v);
		if (k > 255)
			return bad(err, path, "has a component longer than 255 bytes:", v);
		for (size_t i = 0; i < k; i++)
			if (!isalnum((unsigned char)c[i]) && c[i] != '.' && c[i] != '_' && c[i] != '-')
				return bad(err, path,
					   "may hold only letters, digits, '.', '_', '-' and '/', not", v);
		n[o++] = '/';
		memcpy(n + o, c, k);
		o += k;
		c += k;
	}
	n[o] = '\0';
	if (!o)
		return bad(err, path, "cannot be the sandbox's root:", v);
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		size_t k = strlen(refused[i]);
		if (!strncmp(n, refused[i], k) && (n[k] == '/' || !n[k]))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: '%s' is %s: choose another target", path, v,
					     i < 3 ? "the sandbox's own system directory (/proc, "
						     "/sys and /dev are refused with all below them)"
					     : i == 3 ? "the workspace's own mount point (or below it)"
						      : "the agent's own directory");
	}
	*out = steal_ptr(n);
	return 0;
}

/* Append one mount, checked: its index names it in every error. */
static int mount_add(struct kis_profile *p, const char *source, const char *target, bool ro,
		     struct kis_error **err)
{
	size_t i = p->n_mounts;
	char fs[48], ft[48];
	snprintf(fs, sizeof(fs), "mounts[%zu].source", i);
	snprintf(ft, sizeof(ft), "mounts[%zu].target", i);
	if (i >= KIS_MOUNTS_MAX)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "mounts: more than %d mounts",
				     KIS_MOUNTS_MAX);
	/* an engine id, never a host path: the charset of ids has no '/' */
	if (!source || kis_id_validate(source, fs, NULL) < 0)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "%s: expected a base or workspace id (never a host path), not "
				     "'%s'", fs, source ? source : "");
	_cleanup_free_ char *t = NULL;
	TRY(mount_target_norm(ft, target, &t, err));
	for (size_t j = 0; j < i; j++) {
		const char *u = p->mounts[j].target;
		size_t a = strlen(t), b = strlen(u);
		if (!strcmp(t, u))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: '%s' is also mounts[%zu].target", ft, t, j);
		if ((a < b && !strncmp(u, t, a) && u[a] == '/') ||
		    (b < a && !strncmp(t, u, b) && t[b] == '/'))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: '%s' and mounts[%zu].target '%s' are nested: give "
					     "targets apart", ft, t, j, u);
	}
	struct kis_mount *g = realloc(p->mounts, (i + 1) * sizeof(*g));
	if (!g)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts: out of memory");
	p->mounts = g;
	if (!(g[i].source = strdup(source)))
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts: out of memory");
	g[i].target = steal_ptr(t);
	g[i].read_only = ro;
	p->n_mounts = i + 1;
	return 0;
}

/* --mount ID:TARGET[:ro|:rw] */
static int mount_add_flag(struct kis_profile *p, const char *v, struct kis_error **err)
{
	const char *c1 = strchr(v, ':');
	if (!c1 || c1 == v)
		return bad(err, "mounts", "expected ID:TARGET or ID:TARGET:ro, not", v);
	const char *c2 = strchr(c1 + 1, ':');
	bool ro = false;
	if (c2) {
		if (!strcmp(c2 + 1, "ro"))
			ro = true;
		else if (strcmp(c2 + 1, "rw"))
			return bad(err, "mounts", "expected ID:TARGET, ID:TARGET:ro or :rw, not", v);
	}
	_cleanup_free_ char *id = strndup(v, (size_t)(c1 - v));
	_cleanup_free_ char *t = c2 ? strndup(c1 + 1, (size_t)(c2 - c1 - 1)) : strdup(c1 + 1);
	if (!id || !t)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts: out of memory");
	return mount_add(p, id, t, ro, err);
}

/* "mounts": [...] replaces the list (a field of a profile file is set
 * whole); flags then append. */
static int mounts_from_json(struct kis_profile *p, json_t *v, struct kis_error **err)
{
	if (!json_is_array(v) && !json_is_null(v))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "mounts: expected a list of {\"source\", \"target\", "
				     "\"read_only\"}");
	mounts_clear(p);
	size_t i;
	json_t *m;
	json_array_foreach(v, i, m) {
		if (!json_is_object(m))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "mounts[%zu]: expected an object", i);
		const char *k;
		json_t *f;
		json_object_foreach(m, k, f) {
			if (strcmp(k, "source") && strcmp(k, "target") && strcmp(k, "read_only"))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "mounts[%zu].%s: unknown field", i, k);
			bool str = strcmp(k, "read_only") != 0;
			if (str ? !json_is_string(f) ||
					  strlen(json_string_value(f)) != json_string_length(f)
				: !json_is_boolean(f))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "mounts[%zu].%s: expected %s", i, k,
						     str ? "a string" : "true or false");
		}
		json_t *src = json_object_get(m, "source"), *tgt = json_object_get(m, "target");
		if (!src || !tgt)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "mounts[%zu].%s: missing", i, src ? "target" : "source");
		TRY(mount_add(p, json_string_value(src), json_string_value(tgt),
			      json_is_true(json_object_get(m, "read_only")), err));
	}
	return 0;
}

static int bad(struct kis_error **err, const char *path, const char *fmt, const char *what)
{
	return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: %s '%s'", path, fmt, what);
}

/* A field holding one of names (an enum whose values index them): set it,
 * or name the choices ("expected host or workspace, not 'x'"). */
_Static_assert(sizeof(enum kis_root_mode) == sizeof(int) && sizeof(enum kis_accel) == sizeof(int) &&
		       sizeof(enum kis_wasm_engine) == sizeof(int) &&
		       sizeof(enum kis_wasm_preopen) == sizeof(int),
	       "set_named writes these enums as int");
static int set_named(void *slot, const char *const *names, unsigned n, const char *path,
		     const char *v, struct kis_error **err)
{
	int i = kis_name_index(names, n, v);
	if (i >= 0) {
		memcpy(slot, &i, sizeof(i));
		return 0;
	}
	char expect[160];
	kis_names_expect(names, n, expect, sizeof(expect));
	return bad(err, path, expect, v);
}

static int env_valid_key(const char *k, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (k[i] == '=' || k[i] == '\0')
			return 0;
	return 1;
}

/* Add or replace KEY=VALUE; keys stay unique, order of first appearance. */
static int env_put(struct kis_profile *p, const char *key, size_t klen, const char *val,
		   struct kis_error **err)
{
	char *kv = NULL;
	if (asprintf(&kv, "%.*s=%s", (int)klen, key, val) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot store env");
	for (size_t i = 0; i < p->n_env; i++)
		if (!strncmp(p->env[i], key, klen) && p->env[i][klen] == '=') {
			free(p->env[i]);
			p->env[i] = kv;
			return 0;
		}
	char **grown = realloc(p->env, (p->n_env + 2) * sizeof(*grown));
	if (!grown) {
		free(kv);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot store env");
	}
	p->env = grown;
	p->env[p->n_env++] = kv;
	p->env[p->n_env] = NULL;
	return 0;
}

/* A path inside the sandbox (cwd) is resolved there, by a process that may
 * see more than the command does: runc's CVE-2024-21626 put a container's
 * cwd on a host directory through /proc/self/fd/N. So the path is plain:
 * no "." or ".." component, no empty one, and nothing under the kernel's
 * own filesystems, whose magic links (/proc/<pid>/fd, /cwd, /root) lead
 * wherever a process of the sandbox's setup points. The spawner resolves
 * it again without magic links (src/exec/spawn.c). */
static int check_sandbox_path(const char *path, const char *v, struct kis_error **err)
{
	static const char *const kernel_fs[] = {"/proc", "/sys", "/dev"};
	if (strlen(v) >= 4096)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "%s: longer than 4095 bytes", path);
	for (const char *c = v; *c;) {
		while (*c == '/')
			c++;
		size_t n = strcspn(c, "/");
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return bad(err, path, "expected a path with no '.' or '..' component, not", v);
		c += n;
	}
	if (strstr(v, "//"))
		return bad(err, path, "expected a path with no empty component, not", v);
	for (size_t i = 0; i < ARRAY_SIZE(kernel_fs); i++) {
		size_t k = strlen(kernel_fs[i]);
		if (!strncmp(v, kernel_fs[i], k) && (v[k] == '/' || !v[k]))
			return bad(err, path,
				   "expected a directory outside /proc, /sys and /dev, not", v);
	}
	return 0;
}

static int set_string_field(char **slot, const char *path, enum field_kind kind, const char *v,
			    struct kis_error **err)
{
	if (kind == F_ID) {
		struct kis_error *e = NULL;
		if (kis_id_validate(v, path, &e) < 0) {
			kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s", e ? e->message : path);
			kis_error_free(e);
			return -1;
		}
	} else if (kind == F_NAME) {
		if (!*v || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v))
			return bad(err, path, "expected a backend name (see 'kis sandbox backends'), not", v);
	} else if (kind == F_PATH) {
		if (v[0] != '/')
			return bad(err, path, "expected an absolute path, not", v);
		TRY(check_sandbox_path(path, v, err));
	}
	char *dup = strdup(v);
	if (!dup)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "%s: out of memory", path);
	free(*slot);
	*slot = dup;
	return 0;
}

/* Store a number in the field, checking its range. */
static int set_number_field(struct kis_profile *p, const struct field *f, uint64_t v,
			    struct kis_error **err)
{
	void *slot = (char *)p + f->off;
	if (f->kind == F_TTYDIM || f->kind == F_VCPUS) {
		unsigned max = f->kind == F_TTYDIM ? 4096 : 64;
		if (v < 1 || v > max)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: expected 1 to %u, not %llu", f->path, max,
					     (unsigned long long)v);
		*(unsigned *)slot = (unsigned)v;
	} else {
		/* Each range says what the engine can apply (kis/limits.h), so a
		 * value is never clamped or wrapped on the way. */
		uint64_t min = kis_limit_table[f->limit].min, max = kis_limit_table[f->limit].max;
		if (v && v < min)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: %llu is below the least a sandbox starts in: give 0 "
					     "(the default) or at least %llu",
					     f->path, (unsigned long long)v, (unsigned long long)min);
		if (v > max)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: expected 0 (the default) to %llu, not %llu", f->path,
					     (unsigned long long)max, (unsigned long long)v);
		*(uint64_t *)slot = v;
	}
	return 0;
}

/* Append one network.allow entry, parsed strictly: nothing of the caller's
 * text travels on; the policy is written from the parsed values. */
static int net_allow_add(struct kis_profile *p, const char *path, const char *v,
			 struct kis_error **err)
{
	struct kis_net_dest d;
	char why[160];
	if (kis_net_dest_parse(v, &d, why, sizeof(why)) < 0) {
		/* the caller's text, shown printable only and short */
		char shown[65];
		size_t i = 0;
		for (; v[i] && i < sizeof(shown) - 1; i++)
			shown[i] = isprint((unsigned char)v[i]) ? v[i] : '?';
		shown[i] = '\0';
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: %s, not '%s'", path, why,
				     shown);
	}
	if (p->n_net_allow >= KIS_NET_ALLOW_MAX)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: more than %d destinations",
				     path, KIS_NET_ALLOW_MAX);
	struct kis_net_dest *g = realloc(p->net_allow, (p->n_net_allow + 1) * sizeof(*g));
	if (!g)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "%s: out of memory", path);
	g[p->n_net_allow++] = d;
	p->net_allow = g;
	p->net_allow_set = true;
	return 0;
}

static const struct field *find_field(const char *path)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (!strcmp(fields[i].path, path))
			return &fields[i];
	return NULL;
}

int kis_profile_set(struct kis_profile *p, const char *path, const char *v,
		    struct kis_error **err)
{
	const struct field *f = find_field(path);
	if (!f)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: unknown field", path);
	if (!v)
		v = "";
	void *slot = (char *)p + f->off;
	uint64_t num = 0;
	struct kis_error *e = NULL;
	int r = 0;
	switch (f->kind) {
	case F_TIER:
		if (kis_tier_parse(v, slot) < 0) {
			unsigned n;
			const char *const *names = kis_tier_names(&n);
			char expect[160];
			kis_names_expect(names, n, expect, sizeof(expect));
			return bad(err, path, expect, v);
		}
		return 0;
	case F_NET:
		if (kis_net_mode_parse(v, slot) < 0) {
			unsigned n;
			const char *const *names = kis_net_mode_names(&n);
			char expect[160];
			kis_names_expect(names, n, expect, sizeof(expect));
			return bad(err, path, expect, v);
		}
		p->net_explicit = true;
		return 0;
	case F_ROOT:
		return set_named(slot, root_names, ARRAY_SIZE(root_names), path, v, err);
	case F_ACCEL:
		return set_named(slot, accel_names, ARRAY_SIZE(accel_names), path, v, err);
	case F_WASM_ENGINE:
		return set_named(slot, wasm_engine_names, ARRAY_SIZE(wasm_engine_names), path, v, err);
	case F_WASM_PREOPEN:
		return set_named(slot, wasm_preopen_names, ARRAY_SIZE(wasm_preopen_names), path, v,
				 err);
	case F_BOOL:
		if (!strcmp(v, "true") || !strcmp(v, "1"))
			*(bool *)slot = true;
		else if (!strcmp(v, "false") || !strcmp(v, "0"))
			*(bool *)slot = false;
		else
			return bad(err, path, "expected true or false, not", v);
		return 0;
	case F_NAME:
	case F_ID:
	case F_PATH:
		return set_string_field(slot, path, f->kind, v, err);
	case F_LIMIT:
		if (kis_limit_table[f->limit].kind == KIS_LK_MS) {
			r = kis_parse_duration_ms(v, &num, &e);
			break;
		}
		if (kis_limit_table[f->limit].kind == KIS_LK_BYTES) {
			r = kis_parse_size(v, &num, &e);
			break;
		}
		__attribute__((fallthrough)); /* a count */
	case F_TTYDIM:
	case F_VCPUS: {
		const char *rest;
		if (parse_number(v, &num, &rest) < 0 || *rest)
			return bad(err, path, "expected a whole number, not", v);
		break;
	}
	case F_MOUNTS:
		return mount_add_flag(p, v, err);
	case F_NETALLOW:
		return net_allow_add(p, path, v, err);
	case F_ENV: {
		const char *eq = strchr(v, '=');
		if (!eq || !env_valid_key(v, (size_t)(eq - v)))
			return bad(err, path, "expected KEY=VALUE, not", v);
		return env_put(p, v, (size_t)(eq - v), eq + 1, err);
	}
	default:
		return kis_error_set(err, KIS_E_INTERNAL, 0, "%s: unhandled field kind", path);
	}
	if (r < 0) {
		kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: %s", path, e->message);
		kis_error_free(e);
		return -1;
	}
	return set_number_field(p, f, num, err);
}

/* ---- JSON ---- */

static int json_set_field(struct kis_profile *p, const struct field *f, json_t *v,
			  struct kis_error **err)
{
	switch (f->kind) {
	case F_BOOL:
		if (!json_is_boolean(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: expected true or false", f->path);
		*(bool *)((char *)p + f->off) = json_is_true(v);
		return 0;
	case F_LIMIT:
	case F_TTYDIM:
	case F_VCPUS: {
		enum kis_limit_kind lk = f->kind == F_LIMIT ? kis_limit_table[f->limit].kind :
							      KIS_LK_COUNT;
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: expected a non-negative integer%s", f->path,
					     lk == KIS_LK_MS ? " of milliseconds" :
					     lk == KIS_LK_BYTES ? " of bytes" : "");
		return set_number_field(p, f, (uint64_t)json_integer_value(v), err);
	}
	case F_MOUNTS:
		return mounts_from_json(p, v, err);
	case F_ENV: {
		if (!json_is_object(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "env: expected an object of strings");
		const char *k;
		json_t *val;
		json_object_foreach(v, k, val) {
			if (!json_is_string(val))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "env.%s: expected a string", k);
			if (!env_valid_key(k, strlen(k)))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "env.%s: a name may not be empty or hold '='", k);
			TRY(env_put(p, k, strlen(k), json_string_value(val), err));
		}
		return 0;
	}
	case F_NETALLOW: {
		if (!json_is_array(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: expected an array of destinations (\"A.B.C.D/N:PORT\")",
					     f->path);
		free(p->net_allow);
		p->net_allow = NULL;
		p->n_net_allow = 0;
		p->net_allow_set = true; /* [] : nothing is reachable */
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e) {
			char path[48];
			snprintf(path, sizeof(path), "%s[%zu]", f->path, i);
			if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "%s: expected a string", path);
			TRY(net_allow_add(p, path, json_string_value(e), err));
		}
		return 0;
	}
	case F_TIER:
	case F_NAME:
	case F_ID:
	case F_ROOT:
	case F_NET:
	case F_PATH:
	case F_ACCEL:
	case F_WASM_ENGINE:
	case F_WASM_PREOPEN:
		if (json_is_null(v) && (f->kind == F_NAME || f->kind == F_ID || f->kind == F_PATH)) {
			/* null: unset, as kis_profile_to_json writes an absent field */
			char **slot = (char **)((char *)p + f->off);
			free(*slot);
			*slot = NULL;
			return 0;
		}
		if (!json_is_string(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: expected a string",
					     f->path);
		if (strlen(json_string_value(v)) != json_string_length(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "%s: holds a NUL character", f->path);
		return kis_profile_set(p, f->path, json_string_value(v), err);
	default:
		return kis_error_set(err, KIS_E_INTERNAL, 0, "%s: unhandled field kind", f->path);
	}
}

static int json_merge_object(struct kis_profile *p, json_t *obj, const char *prefix,
			     struct kis_error **err)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		char path[128];
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", key) >=
		    (int)sizeof(path))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s...: unknown field",
					     prefix);
		const struct field *f = find_field(path);
		if (f) {
			TRY(json_set_field(p, f, v, err));
			continue;
		}
		bool group = false;
		if (!*prefix)
			for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
				group |= !strcmp(key, groups[i]);
		if (!group)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: unknown field", path);
		if (!json_is_object(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s: expected an object",
					     path);
		TRY(json_merge_object(p, v, path, err));
	}
	return 0;
}

int kis_profile_merge_json(struct kis_profile *p, const char *text, size_t len,
			   struct kis_error **err)
{
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "line %d column %d: %s",
				     jerr.line, jerr.column, jerr.text);
	int r;
	if (!json_is_object(root))
		r = kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "(top level): expected an object");
	else
		r = json_merge_object(p, root, "", err);
	json_decref(root);
	return r;
}

int kis_profile_merge_file(struct kis_profile *p, const char *path, struct kis_error **err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, errno, "cannot open profile '%s'",
				     path);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 > cap) {
			if (cap >= (16u << 20))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "profile '%s' is larger than 16 MiB", path);
			cap = cap ? cap * 2 : 8192;
			char *g = realloc(buf, cap);
			if (!g)
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "reading '%s'", path);
			buf = g;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0) {
			if (ferror(f))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, errno,
						     "cannot read profile '%s'", path);
			break;
		}
	}
	if (kis_profile_merge_json(p, buf, len, err) < 0)
		return kis_error_wrap(err, "profile '%s'", path);
	return 0;
}

int kis_profile_check_hatches(const struct kis_profile *p, struct kis_error **err)
{
	/* the hatches' table (names.c), in its order: the process tier's
	 * refusal comes first when both are missing */
	size_t nh;
	const struct kis_escape_hatch *h = kis_escape_hatches(&nh);
	/* a hatch added to the table and not here reads as not allowed */
	const bool allowed[KIS_ESCAPE_HATCHES] = {p->escape_hatch.allow_process_tier,
						  p->escape_hatch.allow_net_host};
	for (size_t i = 0; i < nh && i < KIS_ESCAPE_HATCHES; i++)
		if (((h[i].tier != KIS_TIER__COUNT && p->tier == h[i].tier) ||
		     (h[i].net != KIS_NET__COUNT && p->net == h[i].net)) && !allowed[i])
			return kis_error_set(err, KIS_E_ESCAPE_HATCH_FORBIDDEN, 0, "%s and requires %s",
					     h[i].weakens, h[i].field);
	if (p->net_allow_set && p->net != KIS_NET_EGRESS)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "network.allow: only with network.mode 'egress', not '%s'",
				     kis_net_mode_name(p->net));
	/* keep says what becomes of the workspace a run clones from base;
	 * with neither a base nor a workspace there is none, and a silent
	 * no-op misleads (a workspace's run keeps it anyway: a wasm
	 * session's exec says both) */
	if (p->keep && !p->base && !p->workspace)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "keep: keeps the workspace a run clones from 'base'; give "
				     "--base ID, or leave --keep out");
	return 0;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

char *kis_profile_to_json(const struct kis_profile *p)
{
	json_t *env = json_object();
	for (size_t i = 0; i < p->n_env; i++) {
		const char *eq = strchr(p->env[i], '=');
		_cleanup_free_ char *k = strndup(p->env[i], (size_t)(eq - p->env[i]));
		if (k)
			json_object_set_new(env, k, json_string(eq + 1));
	}
	json_t *o = json_pack(
		"{s:s, s:o, s:o, s:o, s:b, s:s, s:{s:s}, "
		"s:o, s:o, s:o, s:{s:b, s:i, s:i}, s:{s:b, s:b}, "
		"s:{s:s, s:i}, s:{s:s, s:s}}",
		"tier", kis_tier_name(p->tier), "backend", str_or_null(p->backend), "base",
		str_or_null(p->base), "workspace", str_or_null(p->workspace), "keep", p->keep,
		"root", root_names[p->root], "network", "mode",
		kis_net_mode_name(p->net), "limits", kis_limits_to_json(&p->limits, KIS_LIMITS_ALL),
		"env", env, "cwd", str_or_null(p->cwd), "tty", "enabled", p->tty.enabled, "rows",
		(int)p->tty.rows, "cols", (int)p->tty.cols, "escape_hatch", "allow_process_tier",
		p->escape_hatch.allow_process_tier, "allow_net_host", p->escape_hatch.allow_net_host,
		"microvm", "accel", accel_names[p->microvm.accel], "vcpus",
		(int)(p->microvm.vcpus ? p->microvm.vcpus : 1), "wasm", "engine",
		wasm_engine_names[p->wasm.engine], "preopen", wasm_preopen_names[p->wasm.preopen]);
	if (!o)
		return NULL;
	json_t *ms = json_array();
	for (size_t i = 0; ms && i < p->n_mounts; i++)
		json_array_append_new(ms, json_pack("{s:s, s:s, s:b}", "source", p->mounts[i].source,
						    "target", p->mounts[i].target, "read_only",
						    p->mounts[i].read_only));
	json_object_set_new(o, "mounts", ms ? ms : json_array());
	/* an unset mode stays unset when read back (the process tier refuses
	 * only a mode asked for) */
	if (!p->net_explicit)
		json_object_del(json_object_get(o, "network"), "mode");
	if (p->net_allow_set) {
		json_t *a = json_array();
		for (size_t i = 0; i < p->n_net_allow; i++) {
			char d[48];
			kis_net_dest_format(&p->net_allow[i], d, sizeof(d));
			json_array_append_new(a, json_string(d));
		}
		json_object_set_new(json_object_get(o, "network"), "allow", a);
	}
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}
