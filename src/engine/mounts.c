/* SPDX-License-Identifier: MIT */
/* The profile's mounts, resolved in the store (issue 21): each source id
 * becomes the store's own path of a base's tree or a workspace's files,
 * held for the run or session that places it, released when it ends. */
#include "core/util.h"

#include <jansson.h>
#include <string.h>

#include "core/log.h"
#include "engine/internal.h"
#include "kis/store.h"

static void mount_free_one(struct kis_mount_src *m)
{
	free((char *)m->path);
	free((char *)m->lower);
	free((char *)m->ws_dir);
	free((char *)m->cache);
}

/* Resolve mount i: a base (tried first for a "b-" id) or a workspace. */
static int resolve_one(struct kis_store *s, const struct kis_profile *p, size_t i,
		       struct kis_mount_src *out, struct kis_error **err)
{
	const struct kis_mount *pm = &p->mounts[i];
	*out = (struct kis_mount_src){.source = pm->source, .target = pm->target};
	bool base_first = !strncmp(pm->source, "b-", 2);
	for (int pass = 0; pass < 2; pass++) {
		bool as_base = (pass == 0) == base_first;
		struct kis_error *e = NULL;
		char *path = NULL;
		int r = as_base ? kis_base_path(s, pm->source, &path, &e)
				: kis_workspace_path(s, pm->source, &path, &e);
		if (r < 0 && e && e->code == KIS_E_NOT_FOUND) {
			kis_error_free(e);
			continue;
		}
		if (r < 0) {
			if (err)
				*err = e;
			else
				kis_error_free(e);
			return kis_error_wrap(err, "mounts[%zu].source", i);
		}
		out->path = path;
		out->base = as_base;
		out->read_only = as_base || pm->read_only;
		kis_debug("mount %s %s at %s, %s: %s", as_base ? "base" : "workspace", pm->source,
			  pm->target, out->read_only ? "read-only" : "read-write", path);
		if (as_base) {
			char *cache = NULL;
			if (kis_base_cache_dir(s, pm->source, &cache, err) < 0)
				return kis_error_wrap(err, "mounts[%zu].source", i);
			out->cache = cache;
		} else {
			char *lower = NULL, *upper = NULL, *cache = NULL;
			if (kis_workspace_layers(s, pm->source, &lower, &upper, &cache, err) < 0)
				return kis_error_wrap(err, "mounts[%zu].source", i);
			const char *slash = upper ? strrchr(upper, '/') : NULL;
			if (upper && slash) {
				out->lower = lower;
				out->ws_dir = strndup(upper, (size_t)(slash - upper));
				out->cache = cache;
				lower = NULL;
				cache = NULL;
			}
			free(lower);
			free(cache);
			free(upper);
			if (out->lower && !out->ws_dir)
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts: out of memory");
		}
		return 0;
	}
	return kis_error_set(err, KIS_E_NOT_FOUND, 0,
			     "mounts[%zu].source: no base or workspace '%s' (see 'kis sandbox "
			     "base list' and 'kis sandbox workspace list')",
			     i, pm->source);
}

void kis_mounts_release(struct kis_mounts *m)
{
	if (!m->v)
		return;
	struct kis_store *s = NULL;
	if (m->held && kis_ctx_store(m->ec, &s, NULL) < 0)
		s = NULL;
	for (size_t i = 0; i < m->n; i++) {
		if (s && m->held[i]) {
			if (m->v[i].base)
				kis_base_unhold(s, m->v[i].source, m->holder);
			else
				kis_workspace_unhold_mount(s, m->v[i].source, m->holder);
		}
		mount_free_one(&m->v[i]);
	}
	free(m->v);
	free(m->held);
	memset(m, 0, sizeof(*m));
}

int kis_mounts_acquire(const struct kis_profile *p, struct kis_engine_ctx *ec, const char *holder,
		       struct kis_mounts *m, struct kis_error **err)
{
	memset(m, 0, sizeof(*m));
	if (!p->n_mounts)
		return 0;
	m->ec = ec;
	if (holder)
		snprintf(m->holder, sizeof(m->holder), "%s", holder);
	m->v = calloc(p->n_mounts, sizeof(*m->v));
	m->held = holder ? calloc(p->n_mounts, sizeof(*m->held)) : NULL;
	if (!m->v || (holder && !m->held)) {
		kis_mounts_release(m);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts: out of memory");
	}
	struct kis_store *s = NULL;
	if (kis_ctx_store(ec, &s, err) < 0) {
		kis_mounts_release(m);
		return -1;
	}
	int r = 0;
	for (size_t i = 0; r >= 0 && i < p->n_mounts; i++) {
		if (p->workspace && !strcmp(p->mounts[i].source, p->workspace)) {
			r = kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					  "mounts[%zu].source: '%s' is the run's own workspace "
					  "(at /workspace already)", i, p->workspace);
			break;
		}
		r = resolve_one(s, p, i, &m->v[i], err);
		m->n = i + 1;
		if (r < 0 || !holder)
			continue;
		/* held before the sandbox exists: removal of a base then waits
		 * for us, destroy of a workspace is busy, a second writer too */
		r = m->v[i].base ? kis_base_hold(s, m->v[i].source, holder, err)
				 : kis_workspace_hold_mount(s, m->v[i].source, holder,
							    !m->v[i].read_only, err);
		if (r < 0)
			kis_error_wrap(err, "mounts[%zu].source", i);
		else
			m->held[i] = true;
	}
	if (r < 0) {
		kis_mounts_release(m);
		return -1;
	}
	return 0;
}

void kis_mounts_refresh_views(const struct kis_mounts *m)
{
	for (size_t i = 0; i < m->n; i++)
		if (!m->v[i].base && !m->v[i].read_only && m->v[i].lower)
			kis_workspace_refresh_view(m->ec, m->v[i].source);
}

json_t *kis_mounts_json(const struct kis_mount_src *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:b, s:s}", "source", v[i].source,
						   "kind", v[i].base ? "base" : "workspace", "target",
						   v[i].target, "read_only", v[i].read_only, "path",
						   v[i].path ? v[i].path : ""));
	return a;
}

char *kis_mounts_describe(char *plan_json, const struct kis_mounts *m)
{
	if (!plan_json || !m->n)
		return plan_json;
	json_error_t je;
	json_t *o = json_loads(plan_json, 0, &je);
	if (!o)
		return plan_json;
	json_object_set_new(o, "mounts", kis_mounts_json(m->v, m->n));
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return plan_json;
	free(plan_json);
	return s;
}
