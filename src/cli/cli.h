/* SPDX-License-Identifier: MIT */
/* The `kis` command line: one file per verb, each a `cmd_*` entry in the
 * table of main.c, over the helpers they share (output, usage, suggest,
 * store_root, flags.h). Output formatting only: the work is the library's. */
#ifndef KIS_CLI_H
#define KIS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kis/sandbox.h"
#include "kis/session.h"

/* Exit status when the engine refused or failed (as podman and docker do). */
#define KIS_EXIT_ENGINE 125
/* Exit status for bad usage: also an engine refusal. */
#define KIS_EXIT_USAGE 125

struct cli_verb {
	const char *name;
	int (*fn)(int argc, char **argv); /* argv[0] is the verb */
	const char *summary;
};

/* The verbs (one file each), named by main.c's table and by nothing else:
 * what they share is declared below, by the file that holds it, and none
 * of those files names a verb or main.c (scripts/check-layers.sh fails on
 * a circle of files). */
int cmd_backends(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_shell(int argc, char **argv);
int cmd_session(int argc, char **argv);
int cmd_base(int argc, char **argv);
int cmd_clone(int argc, char **argv);
int cmd_destroy(int argc, char **argv);
int cmd_workspace(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_guest(int argc, char **argv);

/* ---- output.c: what kis prints ---- */

/* --json was given (errors are then also JSON on stdout); --json=pretty
 * (cli_json_pretty too); --quiet: no progress. Set by main before a verb
 * runs. */
extern bool cli_json;
extern bool cli_json_pretty;
extern bool cli_quiet;
/* The one JSON writer: compact, one document a line, or indented under
 * --json=pretty. Print a JSON value (consumed) on stdout; 0 or the exit
 * status. */
struct json_t;
int cli_print_json(struct json_t *j);
int cli_write_json(FILE *f, struct json_t *j);
/* A document the engine made as text (a plan, a list), in that format. */
int cli_print_json_text(const char *text);
/* A run result, with the shell line it ran when line is not NULL. */
int cli_print_result(const struct kis_result *res, const char *line);
/* Under --json, the error document {"error": {"code", "message", "hint"}}. */
void cli_json_error(const char *code, const char *message, const char *hint);
/* Print "code: message" once on stderr (and the error document under
 * --json), free the error, return 125. */
int cli_fail(struct kis_error *err);
/* A failure to open or make the store: a path the user named that cannot
 * be used is invalid_argument (README, Errors). */
int cli_fail_store(struct kis_error *err);
/* The same with a hint line after it (a "did you mean", a "Try"). */
int cli_fail_hint(struct kis_error *err, const char *hint);
/* "kis: REASON[ (SIGNAME)][: detail]" on stderr for a run that did not
 * simply exit. */
void cli_say_ending(const struct kis_result *res);
/* Progress is shown: stderr is a terminal and --quiet was not given. */
bool cli_progress_wanted(void);
/* kis_run_options.progress: one line on stderr per slow step, only where
 * progress is wanted (stderr a terminal, no --quiet). */
void cli_progress_line(void *arg, const char *what);

/* ---- usage.c: refusing a command line ---- */

/* Print "invalid_argument: <msg>\n<hint>" (and the error document under
 * --json) and return 125. */
int cli_usage_hint(const char *msg, const char *hint);
/* Print "invalid_argument: <message>\nTry 'kis sandbox VERB --help'." and return 125. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An unknown option: invalid_argument naming it, with "did you mean" the
 * nearest of known[] (NULL-terminated) when one is near. Returns 125. */
int cli_unknown_option(const char *verb, const char *arg, const char *const *known);
/* An unknown subcommand of verb, likewise. */
int cli_unknown_sub(const char *verb, const char *sub, const char *const *known);
/* True when argv holds -h or --help before any "--". */
bool cli_wants_help(int argc, char **argv);

/* ---- suggest.c: "did you mean" ---- */

/* The nearest of known[0..n) to word by edit distance, if near enough to
 * be a typo and not tied with another; NULL otherwise. */
const char *cli_suggest(const char *word, const char *const *known, size_t n);
/* The same over a '|'-joined list, split into buf (the result points
 * into buf). */
const char *cli_suggest_list(const char *word, const char *bar_list, char *buf, size_t len);

/* ---- store_root.c: the store a verb names ---- */

/* Open the store, printing the error: returns 0 or the exit status. */
struct kis_store;
int cli_store_open(const char *root, struct kis_store **out);
/* Consume "--store-root DIR" / "--store-root=DIR" at argv[*i]: 1 when
 * taken, 0 when argv[*i] is something else, minus the exit status on a
 * missing value (the usage error is printed). */
int cli_store_flag(const char *verb, int argc, char **argv, int *i, const char **root);

#endif
