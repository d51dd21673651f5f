/* SPDX-License-Identifier: MIT */
/* `kis sandbox base import DIR | list | remove ID`: bases, the immutable
 * trees workspaces are cloned from; the one place a host path enters. */
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kis/store.h"

static const char base_help[] =
	"Usage: kis sandbox base import DIR [--os-image] [--max-size SIZE] [--json]\n"
	"                                [--store-root DIR]\n"
	"       kis sandbox base list [--json] [--store-root DIR]\n"
	"       kis sandbox base remove ID [--json] [--store-root DIR]\n\n"
	"import  copy the tree DIR into the store as a new, immutable base and print\n"
	"        its id. Modes, times, extended attributes, symlinks (kept as links,\n"
	"        never followed) and hard links are kept; owners too when run as\n"
	"        root. Device nodes, FIFOs and sockets are refused, unless the tree\n"
	"        is an OS image (a root filesystem for 'run --root workspace'):\n"
	"        then import it as root with --os-image. A large import shows its\n"
	"        progress (files and MiB, of the totals) on stderr when that is a\n"
	"        terminal, unless --quiet; with --json as JSON lines there.\n"
	"        Sparse files stay sparse. --max-size SIZE (default 16G; K, M, G, T)\n"
	"        bounds the data the import writes (holes do not count): a larger\n"
	"        tree is refused, naming max_size, and nothing of it is kept.\n"
	"list    print every base, how many workspaces hold it (CLONES; \"clones\"\n"
	"        in JSON) and its STATE (\"state\"): ready, or removed.\n"
	"remove  remove a base: at once if no workspace holds it, else it is marked\n"
	"        removed (no new clones) and freed with its last workspace.\n\n"
	"The store is --store-root DIR, else $KIS_SANDBOX_ROOT, else\n"
	"/var/lib/kis/sandbox as root and $XDG_STATE_HOME/kis/sandbox otherwise.\n";

struct progress {
	struct timespec start, last;
	uint64_t files, bytes; /* the latest totals, shown or not */
	uint64_t total_files, total_bytes; /* what the tree holds (a walk first) */
	bool shown;
};

static void print_progress(const struct progress *p)
{
	if (cli_json) {
		/* under --json, one event a line (on stderr: stdout is the result) */
		cli_write_json(stderr, json_pack("{s:{s:I, s:I, s:I, s:I}}", "progress", "files",
						 (json_int_t)p->files, "files_total",
						 (json_int_t)p->total_files, "bytes",
						 (json_int_t)p->bytes, "bytes_total",
						 (json_int_t)p->total_bytes));
		return;
	}
	const double mib = 1024.0 * 1024.0;
	unsigned pct = p->total_bytes ? (unsigned)(p->bytes * 100 / p->total_bytes) :
		       p->total_files ? (unsigned)(p->files * 100 / p->total_files) : 100;
	fprintf(stderr, "\rimporting: %llu/%llu files, %.1f/%.1f MiB (%u%%)\033[K",
		(unsigned long long)p->files, (unsigned long long)p->total_files,
		(double)p->bytes / mib, (double)p->total_bytes / mib, pct > 100 ? 100 : pct);
	fflush(stderr);
}

/* The totals, by a walk that never follows a link (FTW_PHYS), as the
 * import does not: every entry below the top (the import's "files" count
 * directories, links and each hard link too) and the bytes of regular
 * files (a hard-linked file's counted at each name: an estimate). */
static uint64_t walk_files, walk_bytes;
static int count_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)path;
	if (f->level == 0)
		return 0;
	walk_files++;
	/* what the import copies: the data, not a sparse file's holes */
	if (type == FTW_F && S_ISREG(st->st_mode)) {
		uint64_t real = (uint64_t)st->st_blocks * 512u;
		walk_bytes += real < (uint64_t)st->st_size ? real : (uint64_t)st->st_size;
	}
	return 0;
}

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* Shown only on a terminal, only once an import has run for half a
 * second, and at most ten times a second. */
static void show_progress(void *ctx, uint64_t files, uint64_t bytes)
{
	struct progress *p = ctx;
	p->files = files;
	p->bytes = bytes;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	/* test hook (README, Testing hooks): shown from the first file, so a
	 * test of the display does not depend on the machine's speed */
	double after = 0.5;
#ifdef KIS_TEST_BUILD
	/* the test build's seam (core/test_hook.h; the CLI sees only the
	 * public headers): the progress from the first file */
	if (getenv("KIS_TEST_PROGRESS_AT_ONCE"))
		after = 0;
#endif
	if (since(&p->start, &now) < after || (p->shown && since(&p->last, &now) < 0.1))
		return;
	p->last = now;
	p->shown = true;
	print_progress(p);
}

static int do_import(const char *root, const char *dir, bool os_image, uint64_t max_bytes,
		     bool json)
{
	struct kis_store *s = NULL;
	int st = cli_store_open(root, &s);
	if (st)
		return st;
	struct progress p = {0};
	clock_gettime(CLOCK_MONOTONIC, &p.start);
	struct kis_import_options o = {.os_image = os_image, .max_bytes = max_bytes};
	if (cli_progress_wanted()) {
		walk_files = walk_bytes = 0;
		if (nftw(dir, count_one, 64, FTW_PHYS) == 0) {
			p.total_files = walk_files;
			p.total_bytes = walk_bytes;
		}
		o.progress = show_progress;
		o.progress_ctx = &p;
	}
	struct kis_error *err = NULL;
	char id[KIS_ID_BUFSZ];
	int r = kis_base_import(s, dir, &o, id, &err);
	kis_store_free(s);
	/* The final totals, which the throttle may have skipped: on a
	 * terminal where progress was shown, and under --json always (a
	 * reader of the events gets its last one however fast the import) */
	if (o.progress && (p.shown || (cli_json && r == 0))) {
		print_progress(&p);
		if (!cli_json)
			fputc('\n', stderr);
	}
	if (r < 0)
		return cli_fail(err);
	if (json)
		return cli_print_json(json_pack("{s:s}", "id", id));
	printf("%s\n", id);
	return 0;
}

static int do_list(const char *root, bool json)
{
	struct kis_store *s = NULL;
	int st = cli_store_open(root, &s);
	if (st)
		return st;
	struct kis_error *err = NULL;
	struct kis_base_info *v = NULL;
	size_t n = 0;
	int r = kis_base_list(s, &v, &n, &err);
	kis_store_free(s);
	if (r < 0)
		return cli_fail(err);
	json_t *arr = json ? json_array() : NULL;
	if (!json)
		printf("%-30s %-10s %s\n", "BASE", "CLONES", "STATE");
	for (size_t i = 0; i < n; i++) {
		if (json)
			/* the table's words: CLONES and STATE (README, JSON output) */
			json_array_append_new(arr, json_pack("{s:s, s:I, s:s}", "id", v[i].id, "clones",
							     (json_int_t)v[i].refs, "state",
							     v[i].removed ? "removed" : "ready"));
		else
			printf("%-30s %-10zu %s\n", v[i].id, v[i].refs,
			       v[i].removed ? "removed" : "ready");
	}
	free(v);
	return json ? cli_print_json(arr) : 0;
}

int cmd_base(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		fputs(base_help, stdout);
		return 0;
	}
	if (argc < 2)
		return cli_usage_error("base", "expected 'import DIR', 'list' or 'remove ID'");
	if (strcmp(argv[1], "import") && strcmp(argv[1], "list") && strcmp(argv[1], "remove"))
		return cli_unknown_sub("base", argv[1],
				       (const char *const[]){"import", "list", "remove", NULL});
	const char *sub = argv[1], *root = NULL, *arg = NULL;
	bool json = false, os_image = false;
	uint64_t max_bytes = 0;
	for (int i = 2; i < argc; i++) {
		int r = cli_store_flag("base", argc, argv, &i, &root);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--os-image") && !strcmp(sub, "import"))
			os_image = true;
		else if (!strcmp(argv[i], "--max-size") && !strcmp(sub, "import")) {
			if (i + 1 >= argc)
				return cli_usage_error("base", "--max-size needs a size");
			struct kis_error *e = NULL;
			if (kis_parse_size(argv[++i], &max_bytes, &e) < 0)
				return cli_fail(e);
			if (!max_bytes)
				return cli_usage_error("base", "--max-size 0: give a size above 0");
		}
		else if (!strcmp(argv[i], "--") && i + 1 < argc && !arg)
			arg = argv[++i];
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_unknown_option("base", argv[i],
						  (const char *const[]){"--store-root", "--os-image",
									"--max-size", NULL});
		else if (!arg && strcmp(sub, "list"))
			arg = argv[i];
		else
			return cli_usage_error("base", "unexpected argument '%s'", argv[i]);
	}
	if (!strcmp(sub, "import")) {
		if (!arg)
			return cli_usage_error("base", "'base import' needs a directory");
		return do_import(root, arg, os_image, max_bytes, json);
	}
	if (!strcmp(sub, "list"))
		return do_list(root, json);
	if (!strcmp(sub, "remove")) {
		if (!arg)
			return cli_usage_error("base", "'base remove' needs a base id");
		struct kis_error *err = NULL;
		if (kis_id_validate(arg, "base id", &err) < 0)
			return cli_fail(err);
		struct kis_store *s = NULL;
		int st = cli_store_open(root, &s);
		if (st)
			return st;
		int r = kis_base_remove(s, arg, &err);
		/* still held: say so, or the base seems to linger unexplained */
		struct kis_base_info *v = NULL;
		size_t n = 0, held = 0;
		if (r == 0 && kis_base_list(s, &v, &n, NULL) == 0)
			for (size_t i = 0; i < n; i++)
				if (!strcmp(v[i].id, arg) && v[i].refs && (held = v[i].refs))
					fprintf(stderr,
						"base %s is marked removed: no new clones; %zu "
						"workspace%s still hold%s it, and it is freed with the "
						"last ('kis sandbox destroy WORKSPACE')\n",
						arg, v[i].refs, v[i].refs == 1 ? "" : "s",
						v[i].refs == 1 ? "s" : "");
		free(v);
		kis_store_free(s);
		if (r < 0)
			return cli_fail(err);
		/* "removed": marked, freed with its last clone; "freed": gone now
		 * (or was never there: removal is idempotent) */
		return json ? cli_print_json(json_pack("{s:s, s:s, s:I}", "id", arg, "state",
						       held ? "removed" : "freed", "clones",
						       (json_int_t)held)) :
			      0;
	}
	return cli_unknown_sub("base", sub, (const char *const[]){"import", "list", "remove", NULL});
}
