/* SPDX-License-Identifier: MIT */
/* The subordinate-id lookup in this process (subid.c says why libsubid,
 * loaded by dlopen(3), and the user's name from NSS): the library's way.
 * The static `kis` links subid_remote.c in its place. */
#include "core/util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <pwd.h>
#include <shadow/subid.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "confine/confine.h"

struct libsubid {
	bool ok;
	bool (*init)(const char *, FILE *);
	int (*uid_ranges)(const char *, struct subid_range **);
	int (*gid_ranges)(const char *, struct subid_range **);
};

static struct libsubid lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_load(void)
{
	void *h = dlopen("libsubid.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&lib.init = dlsym(h, "subid_init");
	*(void **)&lib.uid_ranges = dlsym(h, "subid_get_uid_ranges");
	*(void **)&lib.gid_ranges = dlsym(h, "subid_get_gid_ranges");
	/* a NULL log: libsubid writes its messages to /dev/null (the library
	 * never prints; a refusal is ours to name) */
	lib.ok = lib.init && lib.uid_ranges && lib.gid_ranges && lib.init("kis", NULL);
}

/* The first range of name's, of at least one id. */
static bool first_range(int (*get)(const char *, struct subid_range **), const char *name,
			unsigned long *start, unsigned long *count)
{
	struct subid_range *r = NULL;
	int n = get(name, &r);
	bool found = false;
	for (int i = 0; i < n && !found; i++)
		if (r[i].count >= 1 && r[i].start > 0 && r[i].start + r[i].count <= 0xffffffffUL) {
			*start = r[i].start;
			*count = r[i].count > 65536 ? 65536 : r[i].count;
			found = true;
		}
	free(r);
	return found;
}

bool kis_subids_lookup(uid_t uid, struct kis_subids *out)
{
	memset(out, 0, sizeof(*out));
	pthread_once(&lib_once, lib_load);
	if (!lib.ok)
		return false;
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return false;
	/* subuid(5): an entry names its owner by login name or by uid;
	 * libsubid matches the name, and newuidmap accepts either */
	return first_range(lib.uid_ranges, pw.pw_name, &out->uid_start, &out->uid_count) &&
	       first_range(lib.gid_ranges, pw.pw_name, &out->gid_start, &out->gid_count);
}
