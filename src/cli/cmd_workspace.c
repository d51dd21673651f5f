/* SPDX-License-Identifier: MIT */
/* `kis sandbox workspace list | path ID`: the workspaces of a store and
 * the host path of one. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kis/store.h"

static const char workspace_help[] =
	"Usage: kis sandbox workspace list [--json] [--store-root DIR]\n"
	"       kis sandbox workspace path ID [--json] [--store-root DIR]\n\n"
	"list  print every workspace: its id, the base it was cloned from and the\n"
	"      clone strategy (reflink, overlay or copy).\n"
	"path  print the host path of the workspace's files; an overlay workspace\n"
	"      whose mount is gone (after a reboot, or in another mount namespace)\n"
	"      is mounted again first.\n\n"
	"The store is --store-root DIR, else $KIS_SANDBOX_ROOT, else\n"
	"/var/lib/kis/sandbox as root and $XDG_STATE_HOME/kis/sandbox otherwise.\n";

int cmd_workspace(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		fputs(workspace_help, stdout);
		return 0;
	}
	if (argc < 2)
		return cli_usage_error("workspace", "expected 'list' or 'path ID'");
	if (strcmp(argv[1], "list") && strcmp(argv[1], "path"))
		return cli_unknown_sub("workspace", argv[1], (const char *const[]){"list", "path", NULL});
	const char *sub = argv[1], *root = NULL, *id = NULL;
	bool json = false;
	for (int i = 2; i < argc; i++) {
		int r = cli_store_flag("workspace", argc, argv, &i, &root);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_unknown_option("workspace", argv[i],
						  (const char *const[]){"--store-root", NULL});
		else if (!id && !strcmp(sub, "path"))
			id = argv[i];
		else
			return cli_usage_error("workspace", "unexpected argument '%s'", argv[i]);
	}
	struct kis_error *err = NULL;
	if (!strcmp(sub, "list")) {
		struct kis_store *s = NULL;
		int st = cli_store_open(root, &s);
		if (st)
			return st;
		struct kis_workspace_info *v = NULL;
		size_t n = 0;
		int r = kis_workspace_list(s, &v, &n, &err);
		kis_store_free(s);
		if (r < 0)
			return cli_fail(err);
		json_t *arr = json ? json_array() : NULL;
		if (!json)
			printf("%-30s %-30s %s\n", "WORKSPACE", "BASE", "STRATEGY");
		for (size_t i = 0; i < n; i++) {
			const char *sn = kis_clone_strategy_name(v[i].strategy);
			if (json)
				json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "id", v[i].id,
								     "base", v[i].base, "strategy", sn));
			else
				printf("%-30s %-30s %s\n", v[i].id, v[i].base, sn);
		}
		free(v);
		return json ? cli_print_json(arr) : 0;
	}
	if (!strcmp(sub, "path")) {
		if (!id)
			return cli_usage_error("workspace", "'workspace path' needs a workspace id");
		if (kis_id_validate(id, "workspace id", &err) < 0)
			return cli_fail(err);
		struct kis_store *s = NULL;
		int st = cli_store_open(root, &s);
		if (st)
			return st;
		char *path = NULL;
		int r = kis_workspace_path(s, id, &path, &err);
		kis_store_free(s);
		if (r < 0)
			return cli_fail(err);
		if (json)
			st = cli_print_json(json_pack("{s:s, s:s}", "id", id, "path", path));
		else
			printf("%s\n", path);
		free(path);
		return st;
	}
	return cli_unknown_sub("workspace", sub, (const char *const[]){"list", "path", NULL});
}
