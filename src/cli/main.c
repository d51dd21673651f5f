/* SPDX-License-Identifier: MIT */
/* `kis` entry point: dispatches `kis sandbox VERB ...` through the verb
 * table, and owns the shared printing of errors and usage. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

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
	{"guest", cmd_guest, "the microvm's guest kernel: fetch, status, path"},
};

bool cli_json;
bool cli_quiet;

/* Under --json an error is also a document on stdout, so that a caller
 * parsing stdout sees why (stderr keeps the one line for people). */
static void json_error(const char *code, const char *message)
{
	if (!cli_json)
		return;
	json_t *j = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);
	char *s = j ? json_dumps(j, JSON_PRESERVE_ORDER) : NULL;
	if (s)
		printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(j);
}

int cli_fail(struct kis_error *err)
{
	char *s = kis_error_format(err);
	fprintf(stderr, "%s\n", s ? s : "internal: out of memory");
	if (s) {
		/* the message without its "code: " (kis_error_format's prefix) */
		const char *code = kis_errc_name(err ? err->code : KIS_E_INTERNAL);
		size_t n = strlen(code);
		json_error(code, !strncmp(s, code, n) && !strncmp(s + n, ": ", 2) ? s + n + 2 : s);
	} else {
		json_error("internal", "out of memory");
	}
	free(s);
	kis_error_free(err);
	return KIS_EXIT_ENGINE;
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	fprintf(stderr, "invalid_argument: %s", msg ? msg : "out of memory");
	json_error("invalid_argument", msg ? msg : "out of memory");
	free(msg);
	fprintf(stderr, "\nTry 'kis sandbox %s --help'.\n", verb ? verb : "");
	return KIS_EXIT_USAGE;
}

bool cli_progress_wanted(void)
{
	return !cli_quiet && isatty(STDERR_FILENO);
}

void cli_progress_line(void *arg, const char *what)
{
	(void)arg;
	if (cli_progress_wanted())
		fprintf(stderr, "kis: %s...\n", what);
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
	fputs("\nRun 'kis sandbox VERB --help' for the options of a verb, 'man kis-sandbox'\n"
	      "for the manual.\n\n"
	      "Every verb that prints takes --json: its output, and an error as\n"
	      "{\"error\": {\"code\", \"message\"}}, is then JSON on stdout (the error's\n"
	      "line stays on stderr). --quiet silences progress, which is shown on stderr\n"
	      "only when stderr is a terminal.\n", f);
}

/* --json and --quiet before "--", wherever they stand; --quiet is taken
 * out of argv (no verb parses it). */
static int global_flags(int argc, char **argv)
{
	int o = 0;
	bool after = false;
	for (int i = 0; i < argc; i++) {
		if (!after && !strcmp(argv[i], "--"))
			after = true;
		if (!after && !strcmp(argv[i], "--json"))
			cli_json = true;
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
	if (argc >= 2 && (!strcmp(argv[1], "--version") ||
			  (argc == 3 && !strcmp(argv[1], "sandbox") && !strcmp(argv[2], "--version")))) {
		printf("kis %s\n", kis_version());
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "sandbox")) {
		fprintf(stderr, "invalid_argument: expected 'kis sandbox VERB'\n");
		json_error("invalid_argument", "expected 'kis sandbox VERB'");
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
	json_error("invalid_argument", "unknown verb");
	usage(stderr);
	return KIS_EXIT_USAGE;
}
