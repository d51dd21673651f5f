/* SPDX-License-Identifier: MIT */
/* Tests of the tether (core/record.h, exec/tether.c, issue 46): a command
 * started detached inside a run dies with the engine, and with whatever it
 * started, until the run hands it over; a handed-over one outlives the
 * watcher; a helper started through exec/tool.c dies with its engine. The
 * engine is played by a forked process that SIGKILLs itself. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/record.h"
#include "exec/exec.h"
#include "exec/tool.h"

static char *const env[] = {"PATH=/usr/bin:/bin", NULL};

/* Whether pid is gone (or a zombie: dead, its parent not yet told) within ms. */
static bool gone_within(pid_t pid, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "re");
		if (!f)
			return true;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		const char *close_paren = strrchr(buf, ')');
		if (close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z')
			return true;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return false;
}

/* A command that starts a child of its own and then becomes sleep; it
 * writes both pids on out (read_pids). Tethered to the current record. */
static void start_tethered(int out)
{
	char *argv[] = {"/bin/sh", "-c", "sleep 31 & echo $$ $! >&3; exec sleep 32", NULL};
	struct kis_spawn sp = {.argv = argv, .envp = env, .stdin_fd = -1, .pass_fd3 = true,
			       .fd3 = out, .tethered = true};
	pid_t pid = 0;
	struct kis_error *e = NULL;
	assert_int_equal(kis_spawn_detached(&sp, &pid, &e), 0);
	assert_null(e);
}

/* Read "outer inner" written by the command on the pipe's read end. */
static void read_pids(int rd, pid_t *outer, pid_t *inner)
{
	char buf[64] = "";
	struct pollfd p = {.fd = rd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 5000), 1);
	ssize_t n = read(rd, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	int a = 0, b = 0;
	assert_int_equal(sscanf(buf, "%d %d", &a, &b), 2);
	*outer = a;
	*inner = b;
}

static void test_a_tethered_command_dies_with_its_tree_when_the_run_ends_without_handover(
	void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	struct kis_record_sink sink;
	kis_record_init(&sink, -1, "s-test");
	kis_record_push(&sink);
	pid_t outer = 0, inner = 0;
	start_tethered(p[1]);
	read_pids(p[0], &outer, &inner);
	kis_record_pop(&sink);
	kis_record_tether_end(&sink, false);
	assert_true(gone_within(outer, 2000));
	assert_true(gone_within(inner, 2000)); /* the orphan came to the watcher */
	close(p[0]);
	close(p[1]);
}

static void test_a_handed_over_command_outlives_its_watcher(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	struct kis_record_sink sink;
	kis_record_init(&sink, -1, "s-test");
	kis_record_push(&sink);
	pid_t outer = 0, inner = 0;
	start_tethered(p[1]);
	read_pids(p[0], &outer, &inner);
	kis_record_pop(&sink);
	kis_record_tether_end(&sink, true); /* the watcher is reaped here */
	assert_false(gone_within(outer, 300));
	assert_int_equal(kill(outer, SIGKILL), 0);
	assert_int_equal(kill(inner, SIGKILL), 0);
	close(p[0]);
	close(p[1]);
}

static void test_a_tethered_command_dies_when_its_engine_is_killed(void **state)
{
	(void)state;
	int p[2], q[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(pipe2(q, O_CLOEXEC), 0);
	pid_t engine = fork();
	assert_true(engine >= 0);
	if (engine == 0) {
		struct kis_record_sink sink;
		kis_record_init(&sink, -1, "s-test");
		kis_record_push(&sink);
		start_tethered(p[1]);
		/* once the command has started its own child: pass the pids on */
		pid_t o = 0, i = 0;
		read_pids(p[0], &o, &i);
		dprintf(q[1], "%d %d", (int)o, (int)i);
		raise(SIGKILL); /* no handover, no end: the kernel closes the tether */
		_exit(1);
	}
	pid_t outer = 0, inner = 0;
	read_pids(q[0], &outer, &inner);
	close(q[0]);
	close(q[1]);
	int st;
	assert_int_equal(waitpid(engine, &st, 0), engine);
	assert_true(WIFSIGNALED(st));
	assert_true(gone_within(outer, 2000));
	assert_true(gone_within(inner, 2000));
	close(p[0]);
	close(p[1]);
}

static void test_a_tool_dies_with_its_engine(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t engine = fork();
	assert_true(engine >= 0);
	if (engine == 0) {
		char *argv[] = {"/bin/sleep", "33", NULL};
		struct kis_tool t = {.argv = argv, .in = -1, .out = -1, .err = -1};
		pid_t tool = 0;
		if (kis_tool_start(&t, &tool, NULL) < 0)
			_exit(1);
		int32_t v = tool;
		(void)!write(p[1], &v, sizeof(v));
		raise(SIGKILL);
		_exit(1);
	}
	int32_t tool = 0;
	assert_int_equal(read(p[0], &tool, sizeof(tool)), (ssize_t)sizeof(tool));
	int st;
	assert_int_equal(waitpid(engine, &st, 0), engine);
	assert_true(gone_within(tool, 2000));
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_a_tethered_command_dies_with_its_tree_when_the_run_ends_without_handover),
		cmocka_unit_test(test_a_handed_over_command_outlives_its_watcher),
		cmocka_unit_test(test_a_tethered_command_dies_when_its_engine_is_killed),
		cmocka_unit_test(test_a_tool_dies_with_its_engine),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
