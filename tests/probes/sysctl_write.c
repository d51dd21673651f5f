/* SPDX-License-Identifier: MIT */
/* Probe: write a host sysctl. The kernel's sysctl permission check asks only
 * whether the euid is the global root (proc_sys_permission), so a sandbox
 * whose root is host uid 0 could write them without any capability.
 * Harmless even when it escapes: printk_ratelimit_burst is written with the
 * value it already has, and core_pattern is only opened (O_WRONLY without
 * O_TRUNC changes nothing), never written. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	const char *burst = "/proc/sys/kernel/printk_ratelimit_burst";
	int fd = open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		probe_escaped("sysctl_write", "opened kernel.core_pattern for writing");
	int e = errno;
	char v[32];
	fd = open(burst, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, v, sizeof(v) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		v[n] = '\0';
		fd = open(burst, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t w = write(fd, v, strlen(v)); /* the same value */
			close(fd);
			if (w > 0)
				probe_escaped("sysctl_write", "wrote kernel.printk_ratelimit_burst");
		}
		e = errno;
	}
	/* EACCES (not the owner's rights, or /proc closed by Landlock) or
	 * EROFS (a read-only /proc/sys) */
	printf("sysctl_write: stopped (%s)\n", strerror(e));
	return e == EROFS || e == EACCES || e == EPERM ? PROBE_STOPPED : PROBE_OTHER_ERROR;
}
