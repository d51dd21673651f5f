/* SPDX-License-Identifier: MIT */
/* Probe: raw clone(CLONE_NEWNS | CLONE_NEWUSER). seccomp masks the
 * namespace flags in arg0: EPERM. The child, if any, exits at once. */
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	long r = syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	int e = errno;
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	probe_verdict("clone_newns", r, e, EPERM, "cloned into new namespaces");
}
