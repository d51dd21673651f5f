/* SPDX-License-Identifier: MIT */
/* Probe: without --tty, is stdin the caller's terminal? A command that
 * holds it can turn echo off (tcsetattr), read what is typed after the
 * run, or inject input. Stopped when stdin is no terminal (ENOTTY). */
#include <termios.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	struct termios t;
	if (tcgetattr(0, &t) < 0)
		probe_refused("tty_stdin", errno, ENOTTY);
	struct termios quiet = t;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	int r = tcsetattr(0, TCSANOW, &quiet);
	int e = errno;
	if (r == 0)
		tcsetattr(0, TCSANOW, &t); /* put it back: the terminal is someone's */
	probe_verdict("tty_stdin", r, e, ENOTTY, "changed the modes of the caller's terminal");
}
