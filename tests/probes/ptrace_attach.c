/* SPDX-License-Identifier: MIT */
/* Probe: PTRACE_ATTACH to the parent (the launcher, outside the sandbox).
 * seccomp: EPERM. Detaches at once if it ever gets through. */
#include <sys/ptrace.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	pid_t target = argc > 1 ? (pid_t)atol(argv[1]) : getppid();
	long r = ptrace(PTRACE_ATTACH, target, 0, 0);
	int e = errno;
	if (r == 0)
		ptrace(PTRACE_DETACH, target, 0, 0);
	probe_verdict("ptrace_attach", r, e, EPERM, "attached to a process outside");
}
