/* SPDX-License-Identifier: MIT */
/* Reading a cgroup's CPU accounting: the total CPU of every process of a
 * sandbox, which limits.cpu_ms bounds (one process's clock would not). */
#include "core/util.h"

#include <string.h>

#include "exec/exec.h"

int kis_cpuacct_read_ms(int fd, uint64_t *ms)
{
	char buf[512];
	ssize_t n = fd >= 0 ? RETRY_EINTR(pread(fd, buf, sizeof(buf) - 1, 0)) : -1;
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* v2 cpu.stat: flat keyed, "usage_usec N" first (cgroup-v2.rst);
	 * v1 cpuacct.usage: one number of nanoseconds (cgroup-v1/cpuacct.rst) */
	const char *v2 = strstr(buf, "usage_usec ");
	if (v2) {
		*ms = strtoull(v2 + 11, NULL, 10) / 1000;
		return 0;
	}
	if (buf[0] < '0' || buf[0] > '9')
		return -1;
	*ms = strtoull(buf, NULL, 10) / 1000000;
	return 0;
}
