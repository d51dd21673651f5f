/* SPDX-License-Identifier: MIT */
/* Probe: io_uring_setup (io_uring ops bypass seccomp). seccomp: EPERM. */
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	long fd = syscall(SYS_io_uring_setup, 4, &p);
	probe_verdict("io_uring_setup", fd, errno, EPERM, "made an io_uring");
}
