/* SPDX-License-Identifier: MIT */
/* Probe: signal a process outside the sandbox: argv[1] (default 1, init).
 * Signal 0 only tests permission, so an escape harms nothing. Same uid,
 * so DAC allows it: only Landlock's signal scope (ABI 6) says EPERM. */
#include <signal.h>

#include "probe.h"

int main(int argc, char **argv)
{
	pid_t pid = argc > 1 ? (pid_t)atol(argv[1]) : 1;
	int r = kill(pid, 0);
	probe_verdict("kill_outside", r, errno, EPERM, "could signal a process outside");
}
