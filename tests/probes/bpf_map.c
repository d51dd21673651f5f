/* SPDX-License-Identifier: MIT */
/* Probe: bpf(BPF_MAP_CREATE). seccomp: EPERM. */
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a));
	probe_verdict("bpf_map", fd, errno, EPERM, "created a BPF map");
}
