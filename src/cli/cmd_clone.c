/* SPDX-License-Identifier: MIT */
/* `kis sandbox clone BASE [--id ID] [--strategy S]`: make a writable
 * copy-on-write workspace of a base and print its id. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kis/store.h"

static const char clone_help[] =
	"Usage: kis sandbox clone BASE [--id ID] [--strategy auto|reflink|overlay|copy]\n"
	"                         [--json] [--store-root DIR]\n\n"
	"Make a writable workspace from BASE and print its id. Writes to the\n"
	"workspace never reach the base.\n\n"
	"  --id ID        use this workspace id (a-z, 0-9, '-', 1 to 64 characters,\n"
	"                 no leading dash) instead of a minted one; an id that is\n"
	"                 taken is refused (destination_exists)\n"
	"  --strategy S   auto (default): the cheapest the store offers, in order\n"
	"                 reflink (FICLONE, btrfs/xfs), overlay (overlayfs: root, or\n"
	"                 a user namespace), copy. A pinned strategy the store\n"
	"                 cannot do is refused (profile_unsatisfiable), never\n"
	"                 replaced\n"
	"  --json         print {\"id\", \"base\", \"strategy\", \"path\"} (one line;\n"
	"                 --json=pretty indents)\n"
	"  --store-root   the store (default $KIS_SANDBOX_ROOT, else\n"
	"                 /var/lib/kis/sandbox as root, $XDG_STATE_HOME/kis/sandbox)\n";

int cmd_clone(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		fputs(clone_help, stdout);
		return 0;
	}
	const char *root = NULL, *base = NULL, *id = NULL, *strategy = "auto";
	bool json = false;
	for (int i = 1; i < argc; i++) {
		int r = cli_store_flag("clone", argc, argv, &i, &root);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		const char *a = argv[i];
		if (!strcmp(a, "--json"))
			json = true;
		else if (!strcmp(a, "--id") || !strcmp(a, "--strategy")) {
			if (i + 1 >= argc)
				return cli_usage_error("clone", "'%s' needs a value", a);
			if (!strcmp(a, "--id"))
				id = argv[++i];
			else
				strategy = argv[++i];
		} else if (!strncmp(a, "--id=", 5))
			id = a + 5;
		else if (!strncmp(a, "--strategy=", 11))
			strategy = a + 11;
		else if (a[0] == '-' && a[1])
			return cli_unknown_option("clone", a,
						  (const char *const[]){"--id", "--strategy",
									"--store-root", NULL});
		else if (!base)
			base = a;
		else
			return cli_usage_error("clone", "unexpected argument '%s'", a);
	}
	if (!base)
		return cli_usage_error("clone", "expected a base id");
	struct kis_error *err = NULL;
	enum kis_clone_strategy st;
	/* Ids are checked once, here at the boundary, before the store opens. */
	if (kis_id_validate(base, "base id", &err) < 0 ||
	    (id && kis_id_validate(id, "workspace id", &err) < 0))
		return cli_fail(err);
	if (kis_clone_strategy_parse(strategy, &st, &err) < 0) {
		/* a mistyped strategy: the rule of flags.c (README, Errors) */
		char buf[64], hint[128];
		const char *best = cli_suggest_list(strategy, "auto|reflink|overlay|copy", buf,
						    sizeof(buf));
		snprintf(hint, sizeof(hint), "%s%s%sTry 'kis sandbox clone --help'.",
			 best ? "Did you mean '" : "", best ? best : "", best ? "'? " : "");
		return cli_fail_hint(err, hint);
	}
	struct kis_store *s = NULL;
	int rc = cli_store_open(root, &s);
	if (rc)
		return rc;
	char out[KIS_ID_BUFSZ];
	char *path = NULL;
	struct kis_workspace_info wi = {0};
	int r = kis_workspace_clone_ex(s, base, id, st, out, &err);
	if (r >= 0 && json)
		r = kis_workspace_path(s, out, &path, &err);
	if (r >= 0 && json)
		r = kis_workspace_info(s, out, &wi, &err);
	kis_store_free(s);
	if (r < 0)
		return cli_fail(err);
	if (json)
		rc = cli_print_json(json_pack("{s:s, s:s, s:s, s:s}", "id", out, "base", base,
					      "strategy", kis_clone_strategy_name(wi.strategy),
					      "path", path));
	else
		printf("%s\n", out);
	free(path);
	return rc;
}
