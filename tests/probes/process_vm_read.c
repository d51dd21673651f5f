/* SPDX-License-Identifier: MIT */
/* Probe: process_vm_readv of the parent's memory. seccomp: EPERM. */
#include <sys/uio.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	char buf[8], *addr = (char *)&main; /* any address: the call is what counts */
	struct iovec l = {buf, sizeof(buf)}, r = {addr, sizeof(buf)};
	long n = process_vm_readv(getppid(), &l, 1, &r, 1, 0);
	probe_verdict("process_vm_read", n, errno, EPERM, "read another process's memory");
}
