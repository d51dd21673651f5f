/* SPDX-License-Identifier: MIT */
/* crun as kis-runtime runs it, without kis's checks: the reference of
 * bench/runtime.sh. On a v1/v2 hybrid cgroup host crun 1.8 refuses to run
 * ("cgroups in hybrid mode not supported"); kis-runtime (src/runtime/crun.c)
 * then moves into a mount namespace of its own, a slave of the host's, with
 * the v2 mount detached, and execs crun. This does the same, in-process,
 * so the reference pays for no unshare(1) and no shell. Usage: as crun. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static int is_v2(const char *p)
{
	struct statfs sf;
	return statfs(p, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!is_v2("/sys/fs/cgroup") && is_v2("/sys/fs/cgroup/unified") &&
	    (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
	     (umount2("/sys/fs/cgroup/unified", MNT_DETACH) < 0 && errno != EINVAL))) {
		fprintf(stderr, "crun-hybrid: cannot hide the cgroup v2 mount: %s\n", strerror(errno));
		return 125;
	}
	argv[0] = (char *)"crun";
	execv(CRUN_PATH, argv);
	fprintf(stderr, "crun-hybrid: cannot execute %s: %s\n", CRUN_PATH, strerror(errno));
	return 127;
}
