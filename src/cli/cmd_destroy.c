/* SPDX-License-Identifier: MIT */
/* `kis sandbox destroy ID`: remove a workspace and release its base;
 * idempotent, as a retried teardown must be. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kis/store.h"

int cmd_destroy(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		fputs("Usage: kis sandbox destroy WORKSPACE [--json] [--store-root DIR]\n\n"
		      "Unmount (lazily, if a process is still inside) and remove the workspace,\n"
		      "and release its reference on its base: a base that was removed is freed\n"
		      "with its last workspace. Idempotent: destroying a workspace twice, or a\n"
		      "valid id that never existed, succeeds. --json prints\n"
		      "{\"id\", \"destroyed\": true}.\n",
		      stdout);
		return 0;
	}
	const char *root = NULL, *id = NULL;
	for (int i = 1; i < argc; i++) {
		int r = cli_store_flag("destroy", argc, argv, &i, &root);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--json"))
			continue; /* cli_json */
		if (!strcmp(argv[i], "--") && i + 1 < argc && !id) {
			id = argv[++i]; /* an id that starts with a dash, to be refused */
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1] && !id)
			return cli_unknown_option("destroy", argv[i],
						  (const char *const[]){"--store-root", NULL});
		if (id)
			return cli_usage_error("destroy", "unexpected argument '%s'", argv[i]);
		id = argv[i];
	}
	if (!id)
		return cli_usage_error("destroy", "expected a workspace id");
	struct kis_error *err = NULL;
	if (kis_id_validate(id, "workspace id", &err) < 0)
		return cli_fail(err);
	struct kis_store *s = NULL;
	int st = cli_store_open(root, &s);
	if (st)
		return st;
	int r = kis_workspace_destroy(s, id, &err);
	kis_store_free(s);
	if (r < 0)
		return cli_fail(err);
	/* idempotent: gone now, whether it was there or not */
	return cli_json ? cli_print_json(json_pack("{s:s, s:b}", "id", id, "destroyed", 1)) : 0;
}
