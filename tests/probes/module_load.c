/* SPDX-License-Identifier: MIT */
/* Probe: finit_module and kexec_file_load with fd -1: seccomp refuses both
 * before the kernel looks at the fd (EPERM rather than EBADF). */
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	long r = syscall(SYS_finit_module, -1, "", 0);
	if (r == 0 || errno != EPERM)
		probe_verdict("module_load", r, errno, EPERM, "loaded a kernel module");
	r = syscall(SYS_kexec_file_load, -1, -1, 0, "", 0);
	probe_verdict("module_load", r, errno, EPERM, "loaded a kexec kernel");
}
