/* SPDX-License-Identifier: MIT */
/* Probe: argv[1] is a symlink inside the workspace pointing at a canary
 * outside; open it. Landlock checks the resolved path: EACCES. */
#include <fcntl.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_SETUP;
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	int e = errno;
	probe_verdict("symlink_escape", fd, e, EACCES, "read the canary through a symlink");
}
