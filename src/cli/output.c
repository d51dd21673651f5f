/* SPDX-License-Identifier: MIT */
/* What `kis` prints for every verb: the one JSON writer (every document a
 * verb prints under --json, results, lists and errors, leaves through here,
 * in one format: README, JSON output), the one error report, a run's
 * ending and the progress lines. The verbs and main.c's table sit above. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

bool cli_json;
bool cli_json_pretty;
bool cli_quiet;

/* Compact, one document per line, final newline: a reader splits stdout
 * on '\n' and parses each line (JSON Lines). Pretty (--json=pretty) is
 * for a person reading it and is never what a program is given unless it
 * asks. Key order is the writer's (JSON_PRESERVE_ORDER), so that the
 * object's own "id" comes first. */
static size_t dump_flags(void)
{
	return JSON_PRESERVE_ORDER | (cli_json_pretty ? JSON_INDENT(2) : JSON_COMPACT);
}

int cli_write_json(FILE *f, json_t *j)
{
	char *s = j ? json_dumps(j, dump_flags()) : NULL;
	json_decref(j);
	if (!s) {
		fputs("internal: out of memory\n", stderr);
		return KIS_EXIT_ENGINE;
	}
	fprintf(f, "%s\n", s);
	fflush(f);
	free(s);
	return 0;
}

int cli_print_json(json_t *j)
{
	return cli_write_json(stdout, j);
}

int cli_print_json_text(const char *text)
{
	json_error_t je;
	json_t *j = text ? json_loads(text, JSON_DECODE_ANY, &je) : NULL;
	if (!j) {
		struct kis_error *e = NULL;
		kis_error_set(&e, KIS_E_INTERNAL, 0, "the engine's JSON does not parse: %s",
			      text ? je.text : "none");
		return cli_fail(e);
	}
	return cli_print_json(j);
}

int cli_print_result(const struct kis_result *res, const char *line)
{
	if (!cli_json_pretty && !line) {
		/* written as made: a large capture is never copied (issue 23) */
		if (kis_result_write_json(res, stdout) == 0)
			putchar('\n');
		fflush(stdout);
		return 0;
	}
	char *text = kis_result_to_json(res);
	json_error_t je;
	json_t *j = text ? json_loads(text, 0, &je) : NULL;
	free(text);
	if (!j) {
		fputs("internal: out of memory\n", stderr);
		return KIS_EXIT_ENGINE;
	}
	if (line) /* one result per shell line, with the line itself */
		json_object_set_new(j, "line", json_string(line));
	return cli_print_json(j);
}

void cli_json_error(const char *code, const char *message, const char *hint)
{
	if (!cli_json)
		return;
	json_t *e = json_pack("{s:s, s:s}", "code", code, "message", message);
	if (e)
		json_object_set_new(e, "hint", hint ? json_string(hint) : json_null());
	cli_print_json(e ? json_pack("{s:o}", "error", e) : NULL);
}

/* ---- errors: once on stderr, and as a document under --json ---- */

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

/* ---- a run's ending and progress, on stderr ---- */

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
