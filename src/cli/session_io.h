/* SPDX-License-Identifier: MIT */
/* Client-side terminal handling shared by `exec` and `shell`: raw mode,
 * SIGWINCH and signal forwarding through self-pipes. */
#ifndef KIS_CLI_SESSION_IO_H
#define KIS_CLI_SESSION_IO_H

#include <stdbool.h>

#include "kis/session.h"

struct cli_term {
	int sig_pipe[2];    /* signal numbers to forward */
	int winch_pipe[2];  /* a byte per SIGWINCH */
	bool raw;           /* the terminal was put in raw mode */
};

/* Install handlers; with tty, put stdin in raw mode when it is a terminal. */
int cli_term_setup(struct cli_term *t, bool tty);
void cli_term_restore(struct cli_term *t);
/* Fill the I/O part of exec options from t. */
void cli_term_exec_options(struct cli_term *t, bool tty, bool capture,
			   struct kis_exec_options *o);

#endif
