/* SPDX-License-Identifier: MIT */
/* Where things are: the store root and the agent binary. */
#include "util.h"

#include <limits.h>
#include <string.h>

#include "engine/internal.h"

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
