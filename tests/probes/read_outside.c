/* SPDX-License-Identifier: MIT */
/* Probe: read a canary file outside the allowed paths (argv[1]).
 * Landlock refuses the open with EACCES. */
#include <fcntl.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_SETUP;
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	int e = errno;
	if (fd >= 0) {
		char buf[64];
		ssize_t n = read(fd, buf, sizeof(buf));
		probe_verdict("read_outside", n < 0 ? -1 : 0, errno, EACCES, "read the canary");
	}
	probe_verdict("read_outside", -1, e, EACCES, "");
}
