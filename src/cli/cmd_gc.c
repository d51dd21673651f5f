/* SPDX-License-Identifier: MIT */
/* `kis sandbox gc`: sweep what killed commands left behind (their processes,
 * containers, cgroups, temporary directories, clones) and list it. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kis/store.h"

struct gc_out {
	bool json;
	bool dry_run;
	json_t *items;
	int n;
};

static void on_item(void *ctx, const struct kis_gc_item *it)
{
	struct gc_out *o = ctx;
	o->n++;
	const char *state = it->done > 0 ? "removed" : it->done == 0 ? "found" : "failed";
	if (o->json) {
		json_t *j = json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "kind", it->kind, "what",
				      it->what, "state", state, "owner", it->owner, "error", it->error);
		if (j)
			json_array_append_new(o->items, j);
		return;
	}
	printf("%-8s %-10s %s", state, it->kind, it->what);
	if (it->owner)
		printf(" (of %s)", it->owner);
	putchar('\n');
	if (it->error)
		printf("         %s\n", it->error);
}

int cmd_gc(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		fputs("Usage: kis sandbox gc [--dry-run] [--json] [--store-root DIR]\n\n"
		      "Remove what commands that were killed left behind: the processes, crun\n"
		      "containers, VMs, cgroups, temporary directories and workspace clones of\n"
		      "one-shot runs, sessions whose creation never finished, half-made imports\n"
		      "and clones. Every engine command does the same in passing when the store\n"
		      "is free; gc waits for it and lists each thing: 'removed', 'found' (with\n"
		      "--dry-run, which removes nothing) or 'failed' (with the reason; the exit\n"
		      "status is then 125, as for every engine failure). A live command's things\n"
		      "are never touched: each run\n"
		      "holds a lock that only its death releases.\n",
		      stdout);
		return 0;
	}
	const char *root = NULL;
	struct gc_out o = {0};
	for (int i = 1; i < argc; i++) {
		int r = cli_store_flag("gc", argc, argv, &i, &root);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--json"))
			o.json = true;
		else if (!strcmp(argv[i], "--dry-run"))
			o.dry_run = true;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_unknown_option("gc", argv[i],
						  (const char *const[]){"--dry-run", "--store-root", NULL});
		else
			return cli_usage_error("gc", "unexpected argument '%s'", argv[i]);
	}
	o.items = json_array();
	if (!o.items)
		return cli_fail(NULL);
	struct kis_error *err = NULL;
	int r = kis_store_gc(root, o.dry_run, on_item, &o, &err);
	if (o.json && (r == 0 || o.n)) {
		/* the items even when gc failed half-way: what it did is news
		 * (then the error document follows on the next line) */
		cli_print_json(json_pack("{s:b, s:O}", "dry_run", o.dry_run, "items", o.items));
	} else if (o.n == 0 && r == 0) {
		puts("nothing left behind");
	}
	json_decref(o.items);
	return r < 0 ? cli_fail_store(err) : 0;
}
