/* SPDX-License-Identifier: MIT */
/* Tests of src/exec/tool.c, the one way to start a helper program: the
 * environment is fixed (the caller's never leaks in), only the mapped
 * descriptors reach it, the streams are captured, a failing last step
 * ends the child before the program runs, and a relative path is refused.
 * A start that shares our memory until exec (vfork_ok, exec/spawn.c) is
 * the same to the tool, and leaves our signal handlers and mask alone. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/tool.h"

static void run_sh(const char *script, struct kis_tool *t, struct kis_tool_out *o)
{
	char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
	t->argv = argv;
	struct kis_error *e = NULL;
	assert_int_equal(kis_tool_run(t, true, true, o, &e), 0);
	assert_null(e);
}

static void test_environment_is_fixed(void **state)
{
	(void)state;
	setenv("LD_PRELOAD", "/nonexistent/evil.so", 1);
	struct kis_tool t = {.in = -1, .out = -1, .err = -1};
	struct kis_tool_out o;
	run_sh("env", &t, &o);
	unsetenv("LD_PRELOAD");
	assert_true(kis_tool_ok(o.status, 0));
	assert_null(strstr(o.out, "LD_PRELOAD"));
	assert_non_null(strstr(o.out, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"));
	free(o.out);
}

static void test_only_the_map_reaches_the_tool(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int leak = open("/dev/null", O_RDONLY); /* not O_CLOEXEC: must still not reach it */
	assert_true(leak >= 0);
	char script[128];
	snprintf(script, sizeof(script), "echo hi >&3; ls /proc/self/fd | sort -n | tr '\\n' ' '");
	struct kis_tool t = {.in = -1, .out = -1, .err = -1, .n_map = 1};
	t.map[0] = (struct kis_tool_fd){p[1], 3};
	struct kis_tool_out o;
	run_sh(script, &t, &o);
	close(p[1]);
	char buf[16] = "";
	assert_int_equal(read(p[0], buf, sizeof(buf) - 1), 3);
	assert_string_equal(buf, "hi\n");
	close(p[0]);
	/* 0 1 2 3 and the directory ls reads, nothing of ours beyond */
	char want[32];
	snprintf(want, sizeof(want), " %d ", leak);
	char have[300];
	snprintf(have, sizeof(have), " %s", o.out);
	if (leak > 4)
		assert_null(strstr(have, want));
	close(leak);
	free(o.out);
}

static int failing_setup(void *arg)
{
	(void)arg;
	return -1;
}

static void test_a_failed_last_step_stops_the_program(void **state)
{
	(void)state;
	struct kis_tool t = {.in = -1, .out = -1, .err = -1, .child_setup = failing_setup};
	struct kis_tool_out o;
	run_sh("echo ran", &t, &o);
	assert_true(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 126);
	assert_string_equal(o.out, "");
	free(o.out);
}

static void test_stderr_is_captured_and_trimmed(void **state)
{
	(void)state;
	struct kis_tool t = {.in = -1, .out = -1, .err = -1};
	struct kis_tool_out o;
	run_sh("echo 'it broke' >&2; exit 3", &t, &o);
	assert_false(kis_tool_ok(o.status, 2));
	assert_true(kis_tool_ok(o.status, 3));
	assert_string_equal(o.err, "it broke");
	free(o.out);
}

/* In the child of a shared-memory start: none of our handlers, our mask. */
static int check_child_signals(void *arg)
{
	(void)arg;
	struct sigaction sa;
	sigset_t mask;
	if (sigaction(SIGUSR1, NULL, &sa) < 0 || sa.sa_handler != SIG_DFL)
		return -1;
	if (sigprocmask(SIG_SETMASK, NULL, &mask) < 0 || !sigismember(&mask, SIGUSR2) ||
	    sigismember(&mask, SIGTERM))
		return -1;
	return 0;
}

static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_seen = 1;
}

static void test_a_shared_memory_start_is_the_same_to_the_tool(void **state)
{
	(void)state;
	struct sigaction sa = {.sa_handler = on_usr1}, old;
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	sigset_t two, before, after;
	sigemptyset(&two);
	sigaddset(&two, SIGUSR2);
	assert_int_equal(sigprocmask(SIG_BLOCK, &two, &before), 0);
	struct kis_tool t = {.in = -1, .out = -1, .err = -1, .vfork_ok = true,
			     .child_setup = check_child_signals};
	struct kis_tool_out o;
	run_sh("env; exit 7", &t, &o);
	assert_true(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 7);
	assert_non_null(strstr(o.out, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"));
	free(o.out);
	/* ours as they were: the handler runs, the mask is the one we set */
	struct sigaction now;
	assert_int_equal(sigaction(SIGUSR1, NULL, &now), 0);
	assert_ptr_equal(now.sa_handler, on_usr1);
	assert_int_equal(sigprocmask(SIG_SETMASK, NULL, &after), 0);
	assert_true(sigismember(&after, SIGUSR2));
	assert_false(sigismember(&after, SIGUSR1));
	raise(SIGUSR1);
	assert_int_equal(usr1_seen, 1);
	/* a failed last step still stops the program */
	t.child_setup = failing_setup;
	run_sh("echo ran", &t, &o);
	assert_true(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 126);
	assert_string_equal(o.out, "");
	free(o.out);
	sigprocmask(SIG_SETMASK, &before, NULL);
	sigaction(SIGUSR1, &old, NULL);
}

static void test_a_relative_program_is_refused(void **state)
{
	(void)state;
	char *argv[] = {"sh", "-c", "true", NULL};
	struct kis_tool t = {.argv = argv, .in = -1, .out = -1, .err = -1};
	pid_t pid;
	struct kis_error *e = NULL;
	assert_true(kis_tool_start(&t, &pid, &e) < 0);
	assert_non_null(e);
	kis_error_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_environment_is_fixed),
		cmocka_unit_test(test_only_the_map_reaches_the_tool),
		cmocka_unit_test(test_a_failed_last_step_stops_the_program),
		cmocka_unit_test(test_stderr_is_captured_and_trimmed),
		cmocka_unit_test(test_a_relative_program_is_refused),
		cmocka_unit_test(test_a_shared_memory_start_is_the_same_to_the_tool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
