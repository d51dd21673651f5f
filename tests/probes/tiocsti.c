/* SPDX-License-Identifier: MIT */
/* Probe: TIOCSTI, pushing input into a terminal. On a pty of its own made
 * its controlling terminal (so the kernel's own ctty check passes) the only
 * refusal left is seccomp's EPERM. argv[1] == "high" sets the high 32 bits
 * of the request, which the kernel ignores (cmd is an unsigned int).
 * An ordinary ioctl (TIOCGWINSZ) must work first, or it is a setup error. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	bool high = argc > 1 && strcmp(argv[1], "high") == 0;
	const char *name = high ? "tiocsti_high" : "tiocsti";
	if (setsid() < 0)
		probe_setup(name, "setsid");
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		probe_setup(name, "posix_openpt");
	const char *sn = ptsname(m);
	int s = sn ? open(sn, O_RDWR | O_CLOEXEC) : -1; /* becomes our ctty */
	if (s < 0)
		probe_setup(name, "open pts");
	/* the policy must still allow ordinary terminal ioctls: a refused
	 * TIOCGWINSZ means the ioctl rule is too wide, not that we are safe */
	struct winsize wsz;
	if (ioctl(s, TIOCGWINSZ, &wsz) < 0)
		probe_setup(name, "TIOCGWINSZ");
	unsigned long req = TIOCSTI;
	if (high)
		req |= 0xffffffff00000000ul;
	char c = 'x';
	long r = syscall(SYS_ioctl, s, req, &c);
	probe_verdict(name, r, errno, EPERM, "pushed input into a terminal");
}
