/* SPDX-License-Identifier: MIT */
/* The one JSON writer of `kis`: every document a verb prints under --json
 * (results, lists, errors, progress events) leaves through here, in one
 * format (README, JSON output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

bool cli_json;
bool cli_json_pretty;

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
