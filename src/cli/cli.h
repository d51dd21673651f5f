/* SPDX-License-Identifier: MIT */
/* The `kis` command line: one file per verb, each a `cmd_*` entry in the
 * table of main.c. Output formatting only: the work is the library's. */
#ifndef KIS_CLI_H
#define KIS_CLI_H

#include <stdbool.h>

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

/* Print "code: message" once on stderr, free the error, return 125. */
int cli_fail(struct kis_error *err);
/* Print "invalid_argument: <message>\nTry 'kis sandbox VERB --help'." and return 125. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when argv holds -h or --help before any "--". */
bool cli_wants_help(int argc, char **argv);

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

/* --json was given (errors are then also JSON on stdout); --quiet: no
 * progress. Set by main before a verb runs. */
extern bool cli_json;
extern bool cli_quiet;
/* Progress is shown: stderr is a terminal and --quiet was not given. */
bool cli_progress_wanted(void);
/* kis_run_options.progress: one line on stderr per slow step, only where
 * progress is wanted (stderr a terminal, no --quiet). */
void cli_progress_line(void *arg, const char *what);

/* Store verbs (cmd_workspace.c). Open the store, printing the error:
 * returns 0 or the exit status. */
struct kis_store;
int cli_store_open(const char *root, struct kis_store **out);
/* Consume "--store-root DIR" / "--store-root=DIR" at argv[*i]: 1 when
 * taken, 0 when argv[*i] is something else, minus the exit status on a
 * missing value (the usage error is printed). */
int cli_store_flag(const char *verb, int argc, char **argv, int *i, const char **root);
/* Print a JSON value (consumed) on stdout; 0 or the exit status. */
struct json_t;
int cli_print_json(struct json_t *j);

#endif
