/* SPDX-License-Identifier: MIT */
/* Probe: any capability left in the effective, permitted, inheritable,
 * ambient or bounding set, or no_new_privs unset, is an escape. */
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		probe_setup("caps_left", "capget");
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			probe_escaped("caps_left", "capabilities left");
	for (int c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
			probe_escaped("caps_left", "bounding set not empty");
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
			probe_escaped("caps_left", "ambient capability set");
	}
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		probe_escaped("caps_left", "no_new_privs not set");
	printf("caps_left: stopped (no capabilities, no_new_privs)\n");
	return PROBE_STOPPED;
}
