/* SPDX-License-Identifier: MIT */
/* The size of a command, checked once before any backend: past the
 * kernel's exec limits each tier failed its own way (bubblewrap
 * "internal: ... Broken pipe", crun "exited without a message"). */
#include "core/util.h"

#include <string.h>

#include "core/argv.h"

/* Adds v's strings to *total; the index of the first over the per-string
 * limit, or -1. */
static long count(char *const *v, size_t *total, size_t *longest)
{
	for (size_t i = 0; v && v[i]; i++) {
		size_t n = strlen(v[i]) + 1;
		*total += n + sizeof(char *);
		if (n > KIS_ARG_MAX_STRLEN) {
			*longest = n;
			return (long)i;
		}
	}
	return -1;
}

int kis_command_size_check(char *const *argv, char *const *env, char *const *env_add,
			   struct kis_error **err)
{
	size_t total = 0, longest = 0;
	const char *what[] = {"argv", "env", "env"};
	char *const *lists[] = {argv, env, env_add};
	for (size_t k = 0; k < ARRAY_SIZE(lists); k++) {
		long i = count(lists[k], &total, &longest);
		if (i >= 0)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "%s[%ld]: %zu bytes, over the %u a single argument or "
					     "variable may be (the kernel's MAX_ARG_STRLEN)",
					     what[k], i, longest - 1, KIS_ARG_MAX_STRLEN - 1);
	}
	if (total > KIS_ARGV_MAX_BYTES)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "argv: the command and its environment are %zu bytes, over the "
				     "%u (1 MiB) kis passes to a command on every tier: pass the "
				     "data in a file or on stdin",
				     total, KIS_ARGV_MAX_BYTES);
	return 0;
}
