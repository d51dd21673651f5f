/* SPDX-License-Identifier: MIT */
/* Probe: mount a tmpfs on a directory the probe makes in the workspace
 * (argv[1]). seccomp: EPERM (and no CAP_SYS_ADMIN). Unmounted at once if
 * it ever gets through, so a failing run leaves the host as it was. */
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_SETUP;
	if (mkdir(argv[1], 0755) < 0 && errno != EEXIST)
		probe_setup("mount_tmpfs", "mkdir");
	int r = mount("kis-probe", argv[1], "tmpfs", MS_NOSUID | MS_NODEV, "size=4k");
	int e = errno;
	if (r == 0)
		umount2(argv[1], MNT_DETACH);
	probe_verdict("mount_tmpfs", r, e, EPERM, "mounted a tmpfs");
}
