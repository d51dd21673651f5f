/* SPDX-License-Identifier: MIT */
/* Probe: setns into another network namespace. seccomp refuses setns
 * before the kernel looks at the fd: EPERM (bare it would be EINVAL, fd 0
 * is no namespace, so this probe has no bare control). */
#include <sched.h>

#include "probe.h"

int main(void)
{
	int r = setns(0, CLONE_NEWNET);
	probe_verdict("setns_net", r, errno, EPERM, "joined a namespace");
}
