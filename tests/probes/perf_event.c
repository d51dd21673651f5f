/* SPDX-License-Identifier: MIT */
/* Probe: perf_event_open of a software counter on itself. seccomp: EPERM. */
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.disabled = 1;
	a.exclude_kernel = 1;
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	probe_verdict("perf_event", fd, errno, EPERM, "opened a perf event");
}
