/* SPDX-License-Identifier: MIT */
/* Tests of src/exec/tool.c, the one way to start a helper program: the
 * environment is fixed (the caller's never leaks in), only the mapped
 * descriptors reach it, the streams are captured, a failing last step
 * ends the child before the program runs, and a relative path is refused. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
