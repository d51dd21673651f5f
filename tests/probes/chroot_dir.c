/* SPDX-License-Identifier: MIT */
/* Probe: chroot(".") (harmless to anyone else: only this process's root
 * would move). seccomp: EPERM. */
#include <unistd.h>

#include "probe.h"

int main(void)
{
	int r = chroot(".");
	probe_verdict("chroot_dir", r, errno, EPERM, "changed its root directory");
}
