/* SPDX-License-Identifier: MIT */
/* Probe: userfaultfd (a classic kernel-exploit timing aid). seccomp: EPERM. */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
	probe_verdict("userfaultfd", fd, errno, EPERM, "made a userfaultfd");
}
