/* SPDX-License-Identifier: MIT */
/* Probe: a working directory outside the workspace (argv[1], as a cwd
 * inherited from the engine would be), then a relative open of the canary
 * in it. Landlock checks the resolved path, not how it was reached: EACCES. */
#include <fcntl.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_SETUP;
	/* Landlock has no right for chdir: getting there is allowed */
	if (chdir(argv[1]) < 0)
		probe_setup("cwd_outside", "chdir");
	int fd = open("canary", O_RDONLY | O_CLOEXEC);
	probe_verdict("cwd_outside", fd, errno, EACCES, "read the canary through the cwd");
}
