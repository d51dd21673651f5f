/* SPDX-License-Identifier: MIT */
/* Probe: clone3 with CLONE_NEWUSER. Its flags sit behind a pointer, so the
 * policy refuses clone3 outright with ENOSYS (glibc falls back to clone). */
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	struct clone_args a;
	memset(&a, 0, sizeof(a));
	a.flags = CLONE_NEWUSER;
	a.exit_signal = SIGCHLD;
	long r = syscall(SYS_clone3, &a, sizeof(a));
	int e = errno;
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	probe_verdict("clone3_ns", r, e, ENOSYS, "clone3 into a new user namespace");
}
