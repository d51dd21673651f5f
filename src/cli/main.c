/* SPDX-License-Identifier: MIT */
/* `kis` entry point: dispatches `kis sandbox VERB ...` through the verb
 * table, and owns the shared printing of errors and usage. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

bool cli_quiet;

/* The errno's words add nothing after a code that already says them
 * ("not_found: base 'b-nope' not found: No such file or directory"): a
 * sentence that says what happened is not followed by strerror. Other
 * errnos stay, as the only word on what the host refused. */
static bool errno_redundant(const struct kis_error *err)
{
	if (err->code == KIS_E_NOT_FOUND)
		return err->sys_errno == ENOENT || err->sys_errno == ENOTDIR;
	if (err->code == KIS_E_DESTINATION_EXISTS)
		return err->sys_errno == EEXIST || err->sys_errno == ENOTEMPTY;
	if (err->code == KIS_E_BUSY)
		return err->sys_errno == EBUSY;
	return false;
}

int cli_fail_hint(struct kis_error *err, const char *hint)
{
	if (err && errno_redundant(err))
		err->sys_errno = 0;
	char *s = kis_error_format(err);
	fprintf(stderr, "%s\n", s ? s : "internal: out of memory");
	if (hint)
		fprintf(stderr, "%s\n", hint);
	if (s) {
		/* the message without its "code: " (kis_error_format's prefix) */
		const char *code = kis_errc_name(err ? err->code : KIS_E_INTERNAL);
		size_t n = strlen(code);
		cli_json_error(code, !strncmp(s, code, n) && !strncmp(s + n, ": ", 2) ? s + n + 2 : s,
			       hint);
	} else {
		cli_json_error("internal", "out of memory", hint);
	}
	free(s);
	kis_error_free(err);
	return KIS_EXIT_ENGINE;
}

int cli_fail(struct kis_error *err)
{
	return cli_fail_hint(err, NULL);
}

int cli_fail_store(struct kis_error *err)
{
	/* The store's root is the user's path (--store-root, or
	 * $KIS_SANDBOX_ROOT): the library names one that cannot be made or
	 * entered invalid_argument (src/store/store.c, root_code); the hint
	 * says where the path came from. */
	if (err && err->code == KIS_E_INVALID_ARGUMENT && err->sys_errno)
		return cli_fail_hint(err, "The store is --store-root DIR, else $KIS_SANDBOX_ROOT, else "
					  "the default (see 'kis sandbox --help').");
	return cli_fail(err);
}

static int usage_error_hint(const char *msg, const char *hint)
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
	int r = usage_error_hint(msg, hint ? hint : "Try 'kis sandbox --help'.");
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
	r = usage_error_hint(msg, hint ? hint : "Try 'kis sandbox --help'.");
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
	r = usage_error_hint(msg, hint ? hint : "Try 'kis sandbox --help'.");
	free(msg);
	free(hint);
	return r;
}

void cli_say_ending(const struct kis_result *res)
{
	if (res->reason == KIS_REASON_EXITED)
		return;
	/* the signal by name, as a shell reports it: "signaled (SIGKILL)";
	 * a limit's kill is the limit's news, not its signal's */
	bool by_signal = res->reason == KIS_REASON_SIGNALED || res->reason == KIS_REASON_CANCELLED;
	const char *sig = by_signal && res->signal > 0 ? sigabbrev_np(res->signal) : NULL;
	fprintf(stderr, "kis: %s%s%s%s%s%s\n", kis_reason_name(res->reason), sig ? " (SIG" : "",
		sig ? sig : "", sig ? ")" : "", res->detail ? ": " : "",
		res->detail ? res->detail : "");
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
		int r = usage_error_hint(msg, best ? "Did you mean 'sandbox'? Try 'kis --help'." :
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
		return usage_error_hint("expected a verb: 'kis sandbox VERB --json'",
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
	return usage_error_hint(msg, hint);
}
