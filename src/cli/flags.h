/* SPDX-License-Identifier: MIT */
/* The flags of run, create, exec and shell: one table (flags.c). */
#ifndef KIS_CLI_FLAGS_H
#define KIS_CLI_FLAGS_H

#include <stdio.h>

#include "kis/sandbox.h"

/* The verbs, as bits of the table's verbs column. */
enum { CLI_V_RUN = 1, CLI_V_CREATE = 2, CLI_V_EXEC = 4, CLI_V_SHELL = 8 };

struct cli_opts {
	struct kis_profile profile;
	bool json, dry_run;
	const char *store_root;
	const char *id; /* exec and shell: the session */
	int cmd_index; /* first word of the command after "--", or argc */
};

/* Parse the flags verb (one CLI_V_* bit) takes. Returns 0, or the exit
 * status to use after printing the error. */
int cli_parse_flags(const char *verb, unsigned vbit, int argc, char **argv, struct cli_opts *o);
/* run or create */
int cli_parse_profile_flags(const char *verb, int argc, char **argv, struct cli_opts *o);
void cli_flags_help(FILE *f, unsigned vbit);
void cli_profile_flags_help(FILE *f);

#endif
