/* SPDX-License-Identifier: MIT */
/* The profile flags of `run` and `create`. */
#ifndef KIS_CLI_FLAGS_H
#define KIS_CLI_FLAGS_H

#include <stdio.h>

#include "kis/sandbox.h"

struct cli_opts {
	struct kis_profile profile;
	bool json, dry_run;
	const char *store_root;
	int cmd_index; /* first word of the command after "--", or argc */
};

/* Returns 0, or the exit status to use after printing the error. */
int cli_parse_profile_flags(const char *verb, int argc, char **argv, struct cli_opts *o);
void cli_profile_flags_help(FILE *f);

#endif
