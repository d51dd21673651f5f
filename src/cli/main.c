/* SPDX-License-Identifier: MIT */
/* `kis` entry point: the global flags, and `kis sandbox VERB ...` through
 * the verb table. The table names each verb, and no file names this one:
 * what the verbs share lies below (output.c, usage.c, store_root.c,
 * flags.c, suggest.c). */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "kis/log.h"

static const struct cli_verb verbs[] = {
	{"backends", cmd_backends, "what this build and host can enforce"},
	{"run", cmd_run, "run one command in a fresh sandbox"},
	{"create", cmd_create, "create a session, print its id"},
	{"exec", cmd_exec, "run a command in a session"},
	{"shell", cmd_shell, "a durable shell reading lines from stdin"},
	{"session", cmd_session, "manage sessions: list, destroy"},
	{"base", cmd_base, "import, list and remove bases"},
	{"clone", cmd_clone, "clone a base into a copy-on-write workspace"},
	{"destroy", cmd_destroy, "destroy a workspace (idempotent)"},
	{"workspace", cmd_workspace, "list workspaces, print a workspace's path"},
	{"gc", cmd_gc, "remove what killed commands left behind"},
	{"guest", cmd_guest, "the microvm's guest kernel: fetch, status, path"},
};

static void usage(FILE *f)
{
	fputs("Usage: kis sandbox VERB [OPTIONS] [-- COMMAND...]\n\n"
	      "Clone a base into a copy-on-write workspace and run commands confined.\n\n"
	      "Verbs:\n",
	      f);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
	fputs("\nRun 'kis sandbox VERB --help' for the options of a verb, 'man kis-sandbox'\n"
	      "for the manual.\n\n"
	      "Every verb takes --json: its output, and an error as\n"
	      "{\"error\": {\"code\", \"message\", \"hint\"}}, is then JSON on stdout, one\n"
	      "compact document a line (--json=pretty: indented); the error's line stays\n"
	      "on stderr. The schemas: share/kis/schema (docs/schema). --quiet silences\n"
	      "progress, which is shown on stderr only when stderr is a terminal.\n\n"
	      "--log-level ", f);
	/* the levels from the library's table (the completion reads them here) */
	for (int l = KIS_LOG_ERROR; l < KIS_LOG__COUNT; l++)
		fprintf(f, "%s%s", l > KIS_LOG_ERROR ? "|" : "", kis_log_level_name(l));
	fputs(" (else $KIS_LOG, else warn) shows what the engine\n"
	      "does on stderr, one line per event: 'kis[SANDBOX-ID] LEVEL: ...'. At debug:\n"
	      "the backend chosen and why, each helper's argv, each mount and limit, the\n"
	      "teardown.\n", f);
}

/* The diagnostics' level (kis/log.h): --log-level LEVEL, else $KIS_LOG,
 * else warn. */
static const char *log_level;

/* --json and --quiet before "--", wherever they stand; --quiet and
 * --log-level are taken out of argv (no verb parses them). */
static int global_flags(int argc, char **argv)
{
	int o = 0;
	bool after = false;
	for (int i = 0; i < argc; i++) {
		if (!after && !strcmp(argv[i], "--"))
			after = true;
		if (!after && !strcmp(argv[i], "--json"))
			cli_json = true;
		if (!after && !strcmp(argv[i], "--json=pretty")) {
			/* the verbs see plain --json: the format is the writer's */
			cli_json = cli_json_pretty = true;
			argv[i] = "--json";
		}
		if (!after && i >= 1 && !strncmp(argv[i], "--log-level", 11) &&
		    (argv[i][11] == '=' || argv[i][11] == '\0')) {
			/* a missing value is refused as an empty one, by name */
			log_level = argv[i][11] ? argv[i] + 12 : i + 1 < argc ? argv[++i] : "";
			continue;
		}
		if (!after && i >= 2 && !strcmp(argv[i], "--quiet")) {
			cli_quiet = true;
			continue;
		}
		argv[o++] = argv[i];
	}
	argv[o] = NULL;
	return o;
}

int main(int argc, char **argv)
{
	argc = global_flags(argc, argv);
	struct kis_error *lerr = NULL;
	if (kis_log_configure(log_level, "--log-level", KIS_LOG_WARN, &lerr) < 0)
		return cli_fail(lerr);
	if (argc >= 2 && (!strcmp(argv[1], "--version") ||
			  (argc >= 3 && !strcmp(argv[1], "sandbox") && !strcmp(argv[2], "--version")))) {
		if (cli_json)
			return cli_print_json(json_pack("{s:s}", "version", kis_version()));
		printf("kis %s\n", kis_version());
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "sandbox")) {
		static const char *const top[] = {"sandbox", "--version", "--help", NULL};
		if (argc >= 2 && argv[1][0] == '-')
			return cli_unknown_option("", argv[1], top);
		const char *best = argc >= 2 ? cli_suggest(argv[1], top, 1) : NULL;
		char msg[160] = "expected 'kis sandbox VERB'";
		if (argc >= 2)
			snprintf(msg, sizeof(msg), "unknown command '%.64s': expected 'kis sandbox VERB'",
				 argv[1]);
		int r = cli_usage_hint(msg, best ? "Did you mean 'sandbox'? Try 'kis --help'." :
							 "Try 'kis --help'.");
		if (argc < 2)
			usage(stderr);
		return r;
	}
	if (argc < 3 || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help") ||
	    !strcmp(argv[2], "help")) {
		usage(argc < 3 ? stderr : stdout);
		return argc < 3 ? KIS_EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[2], verbs[i].name))
			return verbs[i].fn(argc - 2, argv + 2);
	if (!strcmp(argv[2], "--json"))
		return cli_usage_hint("expected a verb: 'kis sandbox VERB --json'",
					"Try 'kis sandbox --help'.");
	if (argv[2][0] == '-')
		return cli_unknown_option("", argv[2], (const char *const[]){"--version", NULL});
	const char *names[sizeof(verbs) / sizeof(verbs[0])];
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		names[i] = verbs[i].name;
	const char *best = cli_suggest(argv[2], names, sizeof(names) / sizeof(names[0]));
	char msg[160], hint[160];
	snprintf(msg, sizeof(msg), "unknown verb '%.64s'", argv[2]);
	if (best)
		snprintf(hint, sizeof(hint), "Did you mean '%s'? Try 'kis sandbox --help'.", best);
	else
		snprintf(hint, sizeof(hint), "Try 'kis sandbox --help'.");
	return cli_usage_hint(msg, hint);
}
