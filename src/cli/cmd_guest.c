/* SPDX-License-Identifier: MIT */
/* `kis sandbox guest fetch|status|path`: the microvm's guest kernel, where
 * the engine finds it (kis_guest_locate's order) and how to get one. */
#include <jansson.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

static const char guest_help[] =
	"Usage: kis sandbox guest fetch [--system | --dir DIR] [--json] [--quiet] [--store-root DIR]\n"
	"       kis sandbox guest status [--json] [--store-root DIR]\n"
	"       kis sandbox guest path [--json] [--store-root DIR]\n\n"
	"The microvm tier boots Debian's cloud kernel with a static busybox and the\n"
	"engine's agent. The engine looks for them in this order:\n"
	"  1. $KIS_MICROVM_GUEST_DIR (the engine also writes its cache there)\n"
	"  2. the system location: lib/kis/guest of the prefix kis is installed in\n"
	"     ('make install' puts them there), then of the prefix it was built for\n"
	"  3. the store's cache: STORE/cache/guest\n\n"
	"fetch   download linux-image-cloud-amd64 with apt-get and unpack it with\n"
	"        dpkg -x (it is never installed on this host), keep the modules the\n"
	"        guest loads and a static busybox. Into the store's cache, or the\n"
	"        system location with --system, or DIR. Idempotent. Shows its steps\n"
	"        on stderr when that is a terminal (not with --quiet).\n"
	"status  where the guest is found, from which source, its kernel release and\n"
	"        where the engine keeps its initramfs and snapshots.\n"
	"path    print the directory the guest is read from; fails (tier_unavailable)\n"
	"        when no complete guest is found.\n";

/* The directory of this kis (/proc/self/exe): 0, or -1. */
static int self_dir(char self[PATH_MAX])
{
	ssize_t n = readlink("/proc/self/exe", self, PATH_MAX - 1);
	if (n < 0)
		return -1;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	return 0;
}

/* The fetch script: installed as lib/kis/fetch-guest.sh beside our
 * prefix, else the source tree's scripts/guest/fetch-kernel.sh (build/kis). */
static char *fetch_script(void)
{
	char self[PATH_MAX];
	if (self_dir(self) < 0)
		return NULL;
	static const char *const rel[] = {"../lib/kis/fetch-guest.sh",
					  "../scripts/guest/fetch-kernel.sh",
#ifdef KIS_TEST_BUILD
					  /* the test build's kis lies one deeper, build/test/kis */
					  "../../scripts/guest/fetch-kernel.sh",
#endif
	};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char *p = NULL;
		if (asprintf(&p, "%s/%s", self, rel[i]) < 0)
			return NULL;
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

static int fetch(const char *root, const char *dir, bool system)
{
	struct kis_error *err = NULL;
	char *target = NULL;
	if (dir) {
		target = strdup(dir);
	} else if (system) {
		char self[PATH_MAX];
		if (self_dir(self) < 0)
			return cli_fail(NULL);
		/* the system location is that of an installed kis ($prefix/bin) */
		size_t len = strlen(self);
		if (len < 4 || strcmp(self + len - 4, "/bin")) {
			struct kis_error *e = NULL;
			kis_error_set(&e, KIS_E_INVALID_ARGUMENT, 0,
				      "--system: this kis ('%s') is not an installed one ($prefix/bin): "
				      "give --dir DIR",
				      self);
			return cli_fail(e);
		}
		if (asprintf(&target, "%s/../lib/kis/guest", self) < 0)
			target = NULL;
	} else {
		/* the store's own cache, whatever else is found first */
		struct kis_store *st = NULL;
		int r = cli_store_open(root, &st);
		if (r)
			return r;
		if (asprintf(&target, "%s/cache/guest", kis_store_root(st)) < 0)
			target = NULL;
		kis_store_free(st);
	}
	char *script = fetch_script();
	if (!target || !script) {
		free(target);
		free(script);
		kis_error_set(&err, KIS_E_INTERNAL, 0,
			      "the fetch script is missing (lib/kis/fetch-guest.sh)");
		return cli_fail(err);
	}
	char *argv[] = {script, target, NULL};
	/* the script shows its steps only when asked (it cannot see --quiet) */
	if (setenv("KIS_PROGRESS", cli_progress_wanted() ? "1" : "0", 1) < 0) {
		free(target);
		free(script);
		return cli_fail(NULL);
	}
	pid_t pid;
	int e = posix_spawn(&pid, script, NULL, NULL, argv, environ);
	int status = 0;
	if (!e)
		while (waitpid(pid, &status, 0) < 0)
			;
	free(script);
	if (e || !WIFEXITED(status) || WEXITSTATUS(status)) {
		kis_error_set(&err, KIS_E_INTERNAL, e,
			      "fetching the guest into '%s' failed (the script's words are above; "
			      "apt-get download of linux-image-cloud-amd64 needs Debian's archive)",
			      target);
		free(target);
		return cli_fail(err);
	}
	char *abs = realpath(target, NULL); /* the script made it */
	if (abs) {
		free(target);
		target = abs;
	}
	if (cli_json) {
		int r = cli_print_json(json_pack("{s:s}", "path", target));
		free(target);
		return r;
	}
	printf("%s\n", target);
	free(target);
	return 0;
}

static char *release_of(const char *dir)
{
	char p[PATH_MAX], buf[128] = "";
	snprintf(p, sizeof(p), "%s/kernel.release", dir);
	FILE *f = fopen(p, "re");
	if (!f)
		return NULL;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] ? strdup(buf) : NULL;
}

static int status_or_path(const char *root, bool path_only)
{
	struct kis_error *err = NULL;
	struct kis_guest_info g;
	if (kis_guest_locate(root, false, &g, &err) < 0)
		return cli_fail(err);
	if (path_only) {
		int r = 0;
		if (g.source == KIS_GUEST_NONE) {
			kis_error_set(&err, KIS_E_TIER_UNAVAILABLE, 0,
				      "no guest kernel found (looked in $KIS_MICROVM_GUEST_DIR, the "
				      "system location and '%s'): run 'kis sandbox guest fetch'",
				      g.assets);
			r = cli_fail(err);
		} else if (cli_json) {
			r = cli_print_json(json_pack("{s:s}", "path", g.assets));
		} else {
			printf("%s\n", g.assets);
		}
		kis_guest_info_release(&g);
		return r;
	}
	char *rel = g.source == KIS_GUEST_NONE ? NULL : release_of(g.assets);
	char *sys = kis_guest_system_dir();
	int r = 0;
	if (cli_json) {
		json_t *j = json_pack("{s:s, s:b, s:s, s:s}", "source", kis_guest_source_name(g.source),
				      "found",
				      g.source != KIS_GUEST_NONE && kis_guest_dir_complete(g.assets), "path", g.assets, "cache",
				      g.cache);
		if (j) {
			json_object_set_new(j, "kernel_release", rel ? json_string(rel) : json_null());
			json_object_set_new(j, "system", sys ? json_string(sys) : json_null());
		}
		r = cli_print_json(j);
	} else {
		printf("source:  %s\n", kis_guest_source_name(g.source));
		printf("path:    %s%s\n", g.assets,
		       g.source == KIS_GUEST_NONE ? " (empty: run 'kis sandbox guest fetch')" : "");
		printf("kernel:  %s\n", rel ? rel : "-");
		printf("cache:   %s\n", g.cache);
		printf("system:  %s\n", sys ? sys : "- (none installed)");
	}
	free(rel);
	free(sys);
	kis_guest_info_release(&g);
	return r;
}

int cmd_guest(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		fputs(guest_help, stdout);
		return 0;
	}
	if (argc < 2)
		return cli_usage_error("guest", "expected 'fetch', 'status' or 'path'");
	if (strcmp(argv[1], "fetch") && strcmp(argv[1], "status") && strcmp(argv[1], "path"))
		return cli_unknown_sub("guest", argv[1],
				       (const char *const[]){"fetch", "status", "path", NULL});
	const char *sub = argv[1], *root = NULL, *dir = NULL;
	bool system = false;
	for (int i = 2; i < argc; i++) {
		int r = cli_store_flag("guest", argc, argv, &i, &root);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--json"))
			continue; /* cli_json */
		if (!strcmp(sub, "fetch") && !strcmp(argv[i], "--system"))
			system = true;
		else if (!strcmp(sub, "fetch") && !strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(sub, "fetch") && !strncmp(argv[i], "--dir=", 6))
			dir = argv[i] + 6;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_unknown_option("guest", argv[i],
						  (const char *const[]){"--system", "--dir", "--store-root",
									NULL});
		else
			return cli_usage_error("guest", "unexpected argument '%s'", argv[i]);
	}
	if (system && dir)
		return cli_usage_error("guest", "--system and --dir exclude each other");
	if (!strcmp(sub, "fetch"))
		return fetch(root, dir, system);
	if (!strcmp(sub, "status") || !strcmp(sub, "path"))
		return status_or_path(root, !strcmp(sub, "path"));
	return cli_usage_error("guest", "unknown subcommand '%s'; use fetch, status or path", sub);
}
