/* SPDX-License-Identifier: MIT */
/* Where things are: the store root and the agent binary. */
#include "util.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/internal.h"

int kis_store_root_resolve(const char *given, char **out, struct kis_error **err)
{
	const char *env = getenv("KIS_SANDBOX_ROOT");
	int r;
	if (given && *given)
		r = asprintf(out, "%s", given);
	else if (env && *env)
		r = asprintf(out, "%s", env);
	else if (geteuid() == 0)
		r = asprintf(out, "/var/lib/kis/sandbox");
	else if (getenv("XDG_STATE_HOME") && *getenv("XDG_STATE_HOME"))
		r = asprintf(out, "%s/kis/sandbox", getenv("XDG_STATE_HOME"));
	else if (getenv("HOME"))
		r = asprintf(out, "%s/.local/state/kis/sandbox", getenv("HOME"));
	else
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "no store root: set KIS_SANDBOX_ROOT or --store-root");
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "store root");
	if ((*out)[0] != '/') {
		free(*out);
		*out = NULL;
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "the store root must be an absolute path");
	}
	return 0;
}

int kis_mkdir_p(const char *path, mode_t mode, struct kis_error **err)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mkdir");
	for (char *s = p + 1;; s++) {
		if (*s == '/' || !*s) {
			char c = *s;
			*s = '\0';
			if (mkdir(p, mode) < 0 && errno != EEXIST)
				return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", p);
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

int kis_agent_path(char **out, struct kis_error **err)
{
	const char *env = getenv("KIS_AGENT");
	if (env && *env) {
		*out = strdup(env);
		return *out ? 0 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "agent path");
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot find the running binary");
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	if (asprintf(out, "%s/kis-agent", self) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "agent path");
	if (access(*out, X_OK) < 0) {
		int e = errno;
		kis_error_set(err, KIS_E_TIER_UNAVAILABLE, e,
			      "the agent '%s' is missing: install kis-agent beside kis or set KIS_AGENT",
			      *out);
		free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}
