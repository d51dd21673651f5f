/* SPDX-License-Identifier: MIT */
/* Probe: getpid through the x32 ABI (__X32_SYSCALL_BIT | 39). The policy
 * kills the process (SIGSYS) on any foreign ABI; returning is an escape. */
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

int main(void)
{
	long r = syscall(__X32_SYSCALL_BIT | SYS_getpid);
	if (r < 0 && errno == ENOSYS) {
		/* a kernel without CONFIG_X86_X32_ABI: not our doing */
		probe_refused("x32_syscall", errno, 0);
	}
	probe_verdict("x32_syscall", r, errno, 0, "made an x32 system call");
}
