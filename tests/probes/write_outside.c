/* SPDX-License-Identifier: MIT */
/* Probe: create a file outside the workspace (argv[1]); Landlock: EACCES. */
#include <fcntl.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_SETUP;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	int e = errno;
	if (fd >= 0 && write(fd, "x", 1) != 1)
		e = errno;
	probe_verdict("write_outside", fd, e, EACCES, "created a file outside the workspace");
}
