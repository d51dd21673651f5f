/* SPDX-License-Identifier: MIT */
/* Tests of kis_guest_mount_target_check (src/agent/guest.c): the one rule
 * for where the microvm guest places a mount, which the engine's plan and
 * the guest's init both apply; the init gets its targets over the control
 * port, so every hostile spelling is refused there too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/guest.h"

static void test_guest_mount_targets_placeable(void **state)
{
	(void)state;
	static const char *const ok[] = {"/data", "/cache/a-b_c.d", "/mnt/data", "/root/x",
					 "/tmp/t", "/opt/tool", "/home/u/w", "/mnt/wsx",
					 "/mnt/.layersx"};
	char why[160];
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		assert_int_equal(kis_guest_mount_target_check(ok[i], why, sizeof(why)), 0);
}

static void test_guest_mount_targets_hostile_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "data", "/", "//data", "/data/", "/data/../etc", "/./data", "/data/..",
		"/sbin", "/sbin/modprobe", "/bin", "/lib/modules", "/lib64", "/usr/sbin", "/etc",
		"/init", "/dev/x", "/proc", "/sys/kernel", "/run/kis-agent.sock", "/boot",
		"/workspace", "/workspace/x", "/.kis", "/mnt", "/mnt/", "/mnt/.layers",
		"/mnt/.layers/rw", "/mnt/ws", "/mnt/ws/etc", "/data;rm", "/da ta", "/d\nx",
		"/data\\x",
	};
	char why[160];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		if (kis_guest_mount_target_check(bad[i], why, sizeof(why)) == 0)
			fail_msg("'%s' was accepted", bad[i]);
		assert_true(why[0] != '\0');
	}
	assert_int_equal(kis_guest_mount_target_check(NULL, why, sizeof(why)), -1);
	char long_t[1100];
	memset(long_t, 'a', sizeof(long_t) - 1);
	long_t[0] = '/';
	long_t[sizeof(long_t) - 1] = '\0';
	assert_int_equal(kis_guest_mount_target_check(long_t, why, sizeof(why)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_guest_mount_targets_placeable),
		cmocka_unit_test(test_guest_mount_targets_hostile_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
