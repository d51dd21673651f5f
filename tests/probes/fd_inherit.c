/* SPDX-License-Identifier: MIT */
/* Probe: look for descriptors other than 0-2 inherited from the engine
 * (a leaked directory fd is a way out through /proc/self/fd or openat). */
#include <fcntl.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	for (int fd = 3; fd < 1024; fd++) {
		if (fcntl(fd, F_GETFD) >= 0) {
			char what[64];
			snprintf(what, sizeof(what), "inherited fd %d", fd);
			probe_escaped("fd_inherit", what);
		}
	}
	printf("fd_inherit: stopped (no descriptor above 2)\n");
	return PROBE_STOPPED;
}
