/* SPDX-License-Identifier: MIT */
/* Tests of src/agent/confine.c, the command's confinement inside the
 * microvm guest, applied here in a forked child of a root test (it only
 * changes that child): what it leaves the command, and what the command
 * then cannot undo. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/confine.h"

/* The child's verdict: 0, or the number of the first check that failed. */
static int confined_child(void)
{
	/* the controls, bare (as the guest's root, before the confinement):
	 * each attempt below can succeed, so its refusal later means something */
	struct __user_cap_header_struct h0 = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d0[2];
	if (syscall(SYS_capget, &h0, d0) < 0)
		return 22;
	struct rlimit lo = {.rlim_cur = 32, .rlim_max = 32}, hi = {.rlim_cur = 4096, .rlim_max = 4096};
	/* (a test runner may itself lack CAP_SYS_RESOURCE, as the guest's
	 * agent never does: then there is no raising to control) */
	if ((d0[0].effective & (1u << CAP_SYS_RESOURCE)) &&
	    (setrlimit(RLIMIT_NOFILE, &lo) < 0 || setrlimit(RLIMIT_NOFILE, &hi) < 0))
		return 20;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int w = open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC); /* not written */
	if (s < 0 || w < 0)
		return 21;
	close(s);
	close(w);
	struct kis_agent_confine c;
	struct kis_error *e = NULL;
	if (kis_agent_confine_prepare(&c, KIS_NET_OFF, &e) < 0)
		return 1;
	struct kis_limits lim = {.file_bytes = 1 << 20, .open_files = 64, .cpu_ms = 1500};
	c.limits = &lim;
	c.cwd = "/";
	if (kis_agent_confine_child(&c, &e) < 0)
		return 2;
	if (getuid() != KIS_GUEST_UID || geteuid() != KIS_GUEST_UID || getgid() != KIS_GUEST_UID)
		return 3;
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0 || d[0].effective || d[0].permitted ||
	    d[0].inheritable || d[1].effective || d[1].permitted || d[1].inheritable)
		return 4;
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) > 0 ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0)
			return 5;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 || prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2)
		return 6;
	/* soft = hard, and no way up */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur != 64 || rl.rlim_max != 64)
		return 7;
	if (getrlimit(RLIMIT_FSIZE, &rl) < 0 || rl.rlim_cur != 1 << 20 || rl.rlim_max != 1 << 20)
		return 8;
	struct rlimit up = {.rlim_cur = 128, .rlim_max = 128};
	if (setrlimit(RLIMIT_NOFILE, &up) == 0 || errno != EPERM)
		return 9;
	/* its cgroup namespace's root is where it was: every line ends ":/" */
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[512];
	int n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		n++;
		if (strcmp(line + strlen(line) - 3, ":/\n") != 0)
			return 10;
	}
	if (f)
		fclose(f);
	if (!n)
		return 11;
	/* the seccomp policy with the network off: AF_UNIX only */
	if (socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0)
		return 12;
	/* the global root's files are not its (sysctls ask only for euid 0):
	 * a write is refused by permission, whatever the value */
	if (open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC) >= 0 || errno != EACCES)
		return 13;
	return 0;
}

static void test_guest_command_is_confined(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* the guest's agent is root: switching user needs it */
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(confined_child());
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_guest_cwd_closed_to_the_user_is_refused(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char dir[] = "/tmp/kis-confine-XXXXXX";
	assert_non_null(mkdtemp(dir)); /* 0700 root: root enters, the user may not */
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kis_agent_confine c;
		struct kis_error *e = NULL;
		if (kis_agent_confine_prepare(&c, KIS_NET_OFF, &e) < 0)
			_exit(1);
		c.cwd = dir;
		if (chdir(dir) < 0) /* as spawn did, as root */
			_exit(2);
		if (kis_agent_confine_child(&c, &e) == 0)
			_exit(3);
		_exit(e && e->sys_errno == EACCES && strstr(e->message, dir) ? 0 : 4);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	rmdir(dir);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_guest_command_is_confined),
		cmocka_unit_test(test_guest_cwd_closed_to_the_user_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
