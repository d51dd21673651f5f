/* SPDX-License-Identifier: MIT */
/* Probe: unshare(CLONE_NEWUSER), the door to every other namespace.
 * seccomp: EPERM. */
#include <sched.h>

#include "probe.h"

int main(void)
{
	int r = unshare(CLONE_NEWUSER);
	probe_verdict("unshare_user", r, errno, EPERM, "made a user namespace");
}
