/* SPDX-License-Identifier: MIT */
/* Break-out probe: push "echo PWNED" into the input queue of the terminal
 * on stdin with TIOCSTI (tty_ioctl(4)). Run only inside a sandbox; the test
 * checks that the caller's terminal never receives it. Also tries with high
 * bits set in the request, which a filter that compares all 64 bits of the
 * argument would miss. Prints what each attempt returned. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	const char *cmd = "echo PWNED\n";
	int ok = 0;
	for (const char *p = cmd; *p; p++)
		if (ioctl(0, TIOCSTI, p) == 0)
			ok++;
	printf("tiocsti: %d of %zu bytes pushed (%s)\n", ok, strlen(cmd), ok ? "ok" : strerror(errno));
	unsigned long high = 0xffffffff00000000ul | TIOCSTI;
	long r = syscall(SYS_ioctl, 0, high, "x");
	printf("tiocsti-high: %ld (%s)\n", r, r == 0 ? "ok" : strerror(errno));
	return 0;
}
