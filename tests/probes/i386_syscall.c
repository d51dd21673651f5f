/* SPDX-License-Identifier: MIT */
/* Probe: getpid through the i386 ABI (int 0x80, eax = 20). The policy
 * kills the process (SIGSYS); returning is an escape. */
#include "probe.h"

int main(void)
{
#if defined(__x86_64__)
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
	if (r == -38)
		probe_refused("i386_syscall", ENOSYS, 0); /* no IA32 emulation */
	probe_escaped("i386_syscall", "made an i386 system call");
#else
	printf("i386_syscall: not x86_64\n");
	return PROBE_SETUP;
#endif
}
