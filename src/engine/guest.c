/* SPDX-License-Identifier: MIT */
/* Where the microvm's guest assets (kernel, modules, busybox) are read and
 * where the engine keeps what it makes from them (initramfs, snapshots,
 * disk images), in the documented order: $KIS_MICROVM_GUEST_DIR, the system
 * location (installed by `make install`), then the store's cache. */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/internal.h"
#include "kis/sandbox.h"
#include "kis/store.h"

/* The files the guest is made of; everything else in a guest directory is
 * the engine's cache. */
static const char *const assets[] = {"vmlinuz", "kernel.release", "busybox", "modules"};

const char *kis_guest_source_name(enum kis_guest_source s)
{
	switch (s) {
	case KIS_GUEST_ENV: return "environment";
	case KIS_GUEST_SYSTEM: return "system";
	case KIS_GUEST_STORE: return "store";
	case KIS_GUEST_NONE: return "none";
	default: return "?";
	}
}

bool kis_guest_dir_complete(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/vmlinuz", dir);
	if (access(p, R_OK) < 0)
		return false;
	snprintf(p, sizeof(p), "%s/modules/load", dir);
	if (access(p, R_OK) < 0)
		return false;
	snprintf(p, sizeof(p), "%s/busybox", dir);
	return access(p, X_OK) == 0;
}

char *kis_guest_system_dir(void)
{
	_cleanup_free_ char *self = kis_self_dir();
	char cand[3][PATH_MAX];
	size_t n = 0;
	if (self) {
		/* $prefix/bin/kis and $prefix/lib/libkis-sandbox.so. Not the build
		 * tree: build/kis would then pick the microvm for every auto run
		 * of the tests (their stores are fresh, their guest is named). */
		snprintf(cand[n++], PATH_MAX, "%s/../lib/kis/guest", self);
		snprintf(cand[n++], PATH_MAX, "%s/kis/guest", self);
	}
	snprintf(cand[n++], PATH_MAX, "%s/lib/kis/guest", kis_build_prefix());
	for (size_t i = 0; i < n; i++)
		if (kis_guest_dir_complete(cand[i]))
			return realpath(cand[i], NULL);
	return NULL;
}

/* The store's cache of a system guest: symbolic links to the assets (the
 * system location may be read-only, and is shared by every store), beside
 * which the engine writes its own files. A link that points elsewhere (the
 * system location moved) is replaced atomically (rename(2) over it). */
static int link_assets(const char *cache, const char *assets_dir, struct kis_error **err)
{
	/* <store>/cache may not be there yet in a fresh store */
	_cleanup_free_ char *parent = strdup(cache);
	char *slash = parent ? strrchr(parent, '/') : NULL;
	if (slash) {
		*slash = '\0';
		if (mkdir(parent, 0700) < 0 && errno != EEXIST)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", parent);
	}
	if (mkdir(cache, 0700) < 0 && errno != EEXIST)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", cache);
	_cleanup_close_ int dfd = open(cache, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", cache);
	for (size_t i = 0; i < ARRAY_SIZE(assets); i++) {
		char want[PATH_MAX], have[PATH_MAX];
		snprintf(want, sizeof(want), "%s/%s", assets_dir, assets[i]);
		ssize_t n = readlinkat(dfd, assets[i], have, sizeof(have) - 1);
		if (n >= 0) {
			have[n] = '\0';
			if (!strcmp(have, want))
				continue;
		}
		char tmp[64];
		snprintf(tmp, sizeof(tmp), ".%s.%d", assets[i], (int)getpid());
		unlinkat(dfd, tmp, 0);
		if (symlinkat(want, dfd, tmp) < 0 || renameat(dfd, tmp, dfd, assets[i]) < 0) {
			int e = errno;
			unlinkat(dfd, tmp, 0);
			return kis_error_set(err, KIS_E_INTERNAL, e, "cannot link '%s/%s'", cache,
					     assets[i]);
		}
	}
	return 0;
}

int kis_guest_locate(const char *store_root, bool prepare, struct kis_guest_info *out,
		     struct kis_error **err)
{
	memset(out, 0, sizeof(*out));
	const char *env = getenv("KIS_MICROVM_GUEST_DIR");
	if (env && *env) {
		/* one directory for both, as the tests and `make microvm-guest` use it */
		out->source = KIS_GUEST_ENV;
		out->assets = strdup(env);
		out->cache = strdup(env);
		if (!out->assets || !out->cache)
			goto nomem;
		return 0;
	}
	struct kis_store *st = NULL;
	if (kis_store_open(store_root, &st, err) < 0)
		return -1;
	char *store_cache = NULL, *sys_cache = NULL;
	int a = asprintf(&store_cache, "%s/cache/guest", kis_store_root(st));
	int b = asprintf(&sys_cache, "%s/cache/guest-system", kis_store_root(st));
	kis_store_free(st);
	if (a < 0 || b < 0) {
		if (a >= 0)
			free(store_cache);
		if (b >= 0)
			free(sys_cache);
		goto nomem;
	}
	char *sys = kis_guest_system_dir();
	if (sys) {
		out->source = KIS_GUEST_SYSTEM;
		out->assets = sys;
		out->cache = sys_cache;
		free(store_cache);
		if (prepare && link_assets(out->cache, out->assets, err) < 0) {
			kis_guest_info_release(out);
			return -1;
		}
		return 0;
	}
	free(sys_cache);
	out->assets = strdup(store_cache);
	out->cache = store_cache;
	out->source = kis_guest_dir_complete(store_cache) ? KIS_GUEST_STORE : KIS_GUEST_NONE;
	if (!out->assets)
		goto nomem;
	return 0;
nomem:
	kis_guest_info_release(out);
	return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "guest location");
}

void kis_guest_info_release(struct kis_guest_info *g)
{
	free(g->assets);
	free(g->cache);
	memset(g, 0, sizeof(*g));
}
