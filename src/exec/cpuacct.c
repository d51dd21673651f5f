/* SPDX-License-Identifier: MIT */
/* Reading a cgroup's CPU accounting: the total CPU of every process of a
 * sandbox, which limits.cpu_ms bounds (one process's clock would not). */
#include "core/util.h"

#include <string.h>
#include <unistd.h>

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

int kis_cpu_next_look_ms(uint64_t used_ms, uint64_t limit_ms, int tick_ms)
{
	if (used_ms >= limit_ms)
		return 1;
	uint64_t left = limit_ms - used_ms;
	/* CPU time grows at most as fast as the wall clock times the CPUs
	 * that can run it; sysconf reads /sys only when the budget is near */
	if (left >= (uint64_t)tick_ms * 1024)
		return tick_ms;
	static _Atomic long cached;
	long ncpu = cached;
	if (ncpu <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		cached = ncpu = n > 0 ? n : 1024;
	}
	uint64_t t = left / (uint64_t)ncpu;
	if (t < 1)
		return 1;
	return t < (uint64_t)tick_ms ? (int)t : tick_ms;
}
