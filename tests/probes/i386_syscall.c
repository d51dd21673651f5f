/* SPDX-License-Identifier: MIT */
/* Probe: getpid through the i386 ABI (int 0x80, eax = 20). Returning with
 * a pid is an escape. The policy kills the process (SIGSYS) where the
 * kernel runs i386 calls; some kernels (Linux 6.18 as a PVM guest, or
 * ia32_emulation=0) fault the instruction with SIGSEGV before any system
 * call is looked up, bare or confined: no call ran, so that is "not
 * escaped" too, and the probe says which it was. */
#include "probe.h"

#include <signal.h>
#include <unistd.h>

#if defined(__x86_64__)
static void on_segv(int sig)
{
	(void)sig;
	static const char msg[] =
		"i386_syscall: stopped (int 0x80 faulted before any system call ran)\n";
	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(PROBE_STOPPED);
}
#endif

int main(void)
{
#if defined(__x86_64__)
	struct sigaction sa = {.sa_handler = on_segv};
	sigaction(SIGSEGV, &sa, NULL);
	fflush(stdout);
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
	if (r == -38)
		probe_refused("i386_syscall", ENOSYS, ENOSYS); /* no IA32 emulation */
	probe_escaped("i386_syscall", "made an i386 system call");
#else
	printf("i386_syscall: not x86_64\n");
	return PROBE_SETUP;
#endif
}
