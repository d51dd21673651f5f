/* SPDX-License-Identifier: MIT */
/* Refusing a command line: the usage error, an unknown option or
 * subcommand with its "did you mean" (suggest.c), and the test for --help.
 * Every verb and main.c's table use these; they name no verb. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_usage_hint(const char *msg, const char *hint)
{
	fprintf(stderr, "invalid_argument: %s\n%s\n", msg ? msg : "out of memory", hint);
	cli_json_error("invalid_argument", msg ? msg : "out of memory", hint);
	return KIS_EXIT_USAGE;
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL, *hint = NULL;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (asprintf(&hint, "Try 'kis sandbox %s --help'.", verb ? verb : "") < 0)
		hint = NULL;
	int r = cli_usage_hint(msg, hint ? hint : "Try 'kis sandbox --help'.");
	free(msg);
	free(hint);
	return r;
}

/* The options every verb takes (main's own), for the "did you mean" of an
 * unknown one. */
static const char *const global_opts[] = {"--json", "--quiet", "--help"};

int cli_unknown_option(const char *verb, const char *arg, const char *const *known)
{
	const char *cand[64];
	size_t n = 0;
	for (size_t i = 0; known && known[i] && n < 60; i++)
		cand[n++] = known[i];
	for (size_t i = 0; i < sizeof(global_opts) / sizeof(global_opts[0]); i++)
		cand[n++] = global_opts[i];
	char name[80];
	const char *eq = strchr(arg, '=');
	snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - arg : (ptrdiff_t)strlen(arg)), arg);
	const char *best = NULL;
	if (name[0] == '-' && name[1] && name[1] != '-' && !name[2]) {
		/* a short option: kis has none but -h; the long one that starts
		 * with its letter, if only one does (-q: --quiet) */
		for (size_t i = 0; i < n; i++)
			if (cand[i][2] == name[1] && (!best || strcmp(best, cand[i])))
				best = best ? "" : cand[i];
		if (best && !best[0])
			best = NULL;
	} else {
		best = cli_suggest(name, cand, n);
	}
	char *msg = NULL, *hint = NULL;
	if (asprintf(&msg, "unknown option '%s'", name) < 0)
		msg = NULL;
	/* verb "": main's own options, before any verb */
	const char *sp = verb[0] ? "sandbox " : "", *vb = verb[0] ? " " : "";
	int r = best ? asprintf(&hint, "Did you mean '%s'? Try 'kis %s%s%s--help'.", best, sp, verb,
				vb) :
		       asprintf(&hint, "Try 'kis %s%s%s--help'.", sp, verb, vb);
	if (r < 0)
		hint = NULL;
	r = cli_usage_hint(msg, hint ? hint : "Try 'kis sandbox --help'.");
	free(msg);
	free(hint);
	return r;
}

int cli_unknown_sub(const char *verb, const char *sub, const char *const *known)
{
	size_t n = 0;
	while (known[n])
		n++;
	const char *best = cli_suggest(sub, known, n);
	char *msg = NULL, *hint = NULL;
	if (asprintf(&msg, "unknown subcommand '%s' of %s", sub, verb) < 0)
		msg = NULL;
	int r = best ? asprintf(&hint, "Did you mean '%s'? Try 'kis sandbox %s --help'.", best, verb) :
		       asprintf(&hint, "Try 'kis sandbox %s --help'.", verb);
	if (r < 0)
		hint = NULL;
	r = cli_usage_hint(msg, hint ? hint : "Try 'kis sandbox --help'.");
	free(msg);
	free(hint);
	return r;
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
