/* SPDX-License-Identifier: MIT */
/* Probe: renice a process outside (argv[1]) to its current value: same
 * uid, so DAC allows it; the policy allows only "self". seccomp: EPERM. */
#include <sys/resource.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_SETUP;
	id_t pid = (id_t)atol(argv[1]);
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, pid);
	if (cur == -1 && errno)
		cur = 0;
	int r = setpriority(PRIO_PROCESS, pid, cur);
	probe_verdict("setpriority_other", r, errno, EPERM, "reniced a process outside");
}
