/* SPDX-License-Identifier: MIT */
/* Probe: keyctl on the session keyring (keys are not namespaced: a
 * sandbox could read or plant the host's). seccomp: EPERM. */
#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
	long r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
	probe_verdict("keyctl_keyring", r, errno, EPERM, "reached the session keyring");
}
