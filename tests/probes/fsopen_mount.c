/* SPDX-License-Identifier: MIT */
/* Probe: the new mount API, fsopen("tmpfs"). seccomp: EPERM. */
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	long fd = syscall(SYS_fsopen, "tmpfs", 0);
	probe_verdict("fsopen_mount", fd, errno, EPERM, "opened a filesystem context");
}
