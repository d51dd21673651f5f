/* SPDX-License-Identifier: MIT */
/* `kis` entry point: dispatches `kis sandbox VERB ...` through the verb
 * table, and owns the shared printing of errors and usage. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
};

int cli_fail(struct kis_error *err)
{
	char *s = kis_error_format(err);
	fprintf(stderr, "%s\n", s ? s : "internal: out of memory");
	free(s);
	kis_error_free(err);
	return KIS_EXIT_ENGINE;
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;
	fputs("invalid_argument: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'kis sandbox %s --help'.\n", verb ? verb : "");
	return KIS_EXIT_USAGE;
}

bool cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	}
	return false;
}

static void usage(FILE *f)
{
	fputs("Usage: kis sandbox VERB [OPTIONS] [-- COMMAND...]\n\n"
	      "Clone a base into a copy-on-write workspace and run commands confined.\n\n"
	      "Verbs:\n",
	      f);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
	fputs("\nRun 'kis sandbox VERB --help' for the options of a verb.\n", f);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "sandbox")) {
		fprintf(stderr, "invalid_argument: expected 'kis sandbox VERB'\n");
		usage(stderr);
		return KIS_EXIT_USAGE;
	}
	if (argc < 3 || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help") ||
	    !strcmp(argv[2], "help")) {
		usage(argc < 3 ? stderr : stdout);
		return argc < 3 ? KIS_EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[2], verbs[i].name))
			return verbs[i].fn(argc - 2, argv + 2);
	fprintf(stderr, "invalid_argument: unknown verb '%s'\n", argv[2]);
	usage(stderr);
	return KIS_EXIT_USAGE;
}
