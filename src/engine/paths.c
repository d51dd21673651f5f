/* SPDX-License-Identifier: MIT */
/* Where things are: the agent binary and the installed files, found from
 * where the library (or the binary linking it) lies, then the prefix fixed
 * at build time; environment variables override both. */
#include "core/util.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#include "core/io.h"
#include "engine/internal.h"
#include "kis/sandbox.h"
#include "core/test_hook.h"

#ifndef KIS_PREFIX
#define KIS_PREFIX "/usr/local"
#endif
#ifndef KIS_VERSION
#define KIS_VERSION "0.1.0"
#endif

const char *kis_version(void)
{
	return KIS_VERSION;
}

const char *kis_build_prefix(void)
{
	return KIS_PREFIX;
}

/* The directory of the object this code is linked into: the shared
 * library when it is one (dladdr names it), else the running executable
 * (/proc/self/exe; a static link or the CLI). */
char *kis_self_dir(void)
{
	Dl_info info;
	if (dladdr((void *)kis_version, &info) && info.dli_fname &&
	    strstr(info.dli_fname, "libkis-sandbox") && info.dli_fname[0] == '/') {
		char *d = strdup(info.dli_fname);
		char *slash = d ? strrchr(d, '/') : NULL;
		if (slash)
			*slash = '\0';
		return d;
	}
	const char *exe = kis_exe_dir();
	return exe ? strdup(exe) : NULL;
}

int kis_agent_path(char **out, struct kis_error **err)
{
	const char *env = KIS_TEST_GETENV("KIS_AGENT");
	if (env && *env) {
		*out = strdup(env);
		return *out ? 0 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "agent path");
	}
	/* beside the binary (the build tree, $prefix/bin), $prefix/bin seen
	 * from $prefix/lib (the shared library), the build-time prefix */
	_cleanup_free_ char *self = kis_self_dir();
	char cand[3][PATH_MAX];
	snprintf(cand[0], sizeof(cand[0]), "%s/kis-agent", self ? self : "/nonexistent");
	snprintf(cand[1], sizeof(cand[1]), "%s/../bin/kis-agent", self ? self : "/nonexistent");
	snprintf(cand[2], sizeof(cand[2]), "%s/bin/kis-agent", KIS_PREFIX);
	for (size_t i = 0; i < ARRAY_SIZE(cand); i++)
		if (access(cand[i], X_OK) == 0) {
			/* beside the binary: already absolute and clean (the
			 * common case, no resolution paid); else without its ".." */
			*out = i == 0 ? strdup(cand[i]) : realpath(cand[i], NULL);
			if (!*out)
				return kis_error_set(err, KIS_E_INTERNAL, errno, "agent path");
			return 0;
		}
	return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, ENOENT,
			     "the agent is missing (looked in '%s', '%s/../bin' and '%s/bin'): "
			     "install kis-agent beside kis",
			     self ? self : "?", self ? self : "?", KIS_PREFIX);
}
