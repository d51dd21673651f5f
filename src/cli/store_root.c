/* SPDX-License-Identifier: MIT */
/* --store-root DIR, which every verb that reaches a store takes, and
 * opening the store it names with the error report of a store's path. */
#include <string.h>

#include "cli.h"
#include "kis/store.h"

int cli_store_open(const char *root, struct kis_store **out)
{
	struct kis_error *err = NULL;
	if (kis_store_open(root, out, &err) < 0)
		return cli_fail_store(err);
	return 0;
}

int cli_store_flag(const char *verb, int argc, char **argv, int *i, const char **root)
{
	const char *a = argv[*i];
	if (!strncmp(a, "--store-root=", 13)) {
		*root = a + 13;
		return 1;
	}
	if (strcmp(a, "--store-root"))
		return 0;
	if (*i + 1 >= argc)
		return -cli_usage_error(verb, "'--store-root' needs a directory");
	*root = argv[++*i];
	return 1;
}
