/* SPDX-License-Identifier: MIT */
/* Unit tests of the engine's diagnostics (kis/log.h, core/log.h): the
 * levels and their refusal, the line's prefix and sandbox id, argv quoting,
 * one line per event whatever the message holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/log.h"
#include "core/util.h"

/* What fn wrote to stderr while it ran (a temporary file as fd 2). */
static char *capture(void (*fn)(void))
{
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	fn();
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	off_t n = lseek(fileno(tmp), 0, SEEK_END);
	assert_true(n >= 0);
	char *buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fileno(tmp), buf, (size_t)n, 0), n);
	fclose(tmp);
	return buf;
}

static void set(const char *level)
{
	struct kis_error *e = NULL;
	assert_int_equal(kis_log_configure(level, "--log-level", KIS_LOG_WARN, &e), 0);
}

static void test_levels_and_their_refusal(void **state)
{
	(void)state;
	assert_int_equal(kis_log_get_level(), KIS_LOG_OFF); /* the library is silent */
	unsetenv("KIS_LOG");
	set(NULL);
	assert_int_equal(kis_log_get_level(), KIS_LOG_WARN);
	setenv("KIS_LOG", "info", 1);
	set(NULL);
	assert_int_equal(kis_log_get_level(), KIS_LOG_INFO);
	set("debug"); /* the flag wins */
	assert_int_equal(kis_log_get_level(), KIS_LOG_DEBUG);
	struct kis_error *e = NULL;
	assert_int_equal(kis_log_configure("loud", "--log-level", KIS_LOG_WARN, &e), -1);
	assert_int_equal(e->code, KIS_E_INVALID_ARGUMENT);
	assert_string_equal(e->message,
			    "--log-level: expected error, warn, info or debug, not 'loud'");
	kis_error_free(e);
	e = NULL;
	setenv("KIS_LOG", "off", 1); /* the library's silence is no user's level */
	assert_int_equal(kis_log_configure(NULL, "--log-level", KIS_LOG_WARN, &e), -1);
	assert_non_null(strstr(e->message, "KIS_LOG: expected"));
	kis_error_free(e);
	assert_int_equal(kis_log_get_level(), KIS_LOG_DEBUG); /* left as it was */
	unsetenv("KIS_LOG");
	assert_string_equal(kis_log_level_name(KIS_LOG_WARN), "warn");
}

static void events(void)
{
	kis_debug("outside %d", 1);
	const char *prev = kis_log_scope("s-abc");
	kis_info("two\nlines");
	char *argv[] = {"/usr/bin/bwrap", "--bind", "a b", "it's", "", NULL};
	kis_log_argv(KIS_LOG_DEBUG, argv, "helper started, pid %d", 7);
	kis_log_scope(prev);
	kis_debug("out again");
}

static void test_lines_prefix_id_and_quoting(void **state)
{
	(void)state;
	set("debug");
	_cleanup_free_ char *out = capture(events);
	assert_string_equal(out, "kis: debug: outside 1\n"
				 "kis[s-abc] info: two lines\n"
				 "kis[s-abc] debug: helper started, pid 7: /usr/bin/bwrap --bind 'a b' "
				 "'it'\\''s' ''\n"
				 "kis: debug: out again\n");
}

static void test_a_level_below_prints_nothing(void **state)
{
	(void)state;
	set("warn");
	assert_false(kis_log_on(KIS_LOG_INFO));
	assert_true(kis_log_on(KIS_LOG_ERROR));
	_cleanup_free_ char *out = capture(events);
	assert_string_equal(out, "");
}

static void long_event(void)
{
	char big[6000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	kis_log(KIS_LOG_ERROR, "%s", big);
}

static void test_a_long_event_is_one_cut_line(void **state)
{
	(void)state;
	set("error");
	_cleanup_free_ char *out = capture(long_event);
	size_t n = strlen(out);
	assert_true(n > 4000 && n <= 4096);
	assert_int_equal(out[n - 1], '\n');
	assert_ptr_equal(strchr(out, '\n'), out + n - 1); /* one line */
}

static char sunk[512];

static void to_sink(enum kis_log_level l, const char *msg)
{
	size_t n = strlen(sunk);
	snprintf(sunk + n, sizeof(sunk) - n, "%s|%s;", kis_log_level_name(l), msg);
}

static void test_a_sink_takes_the_lines_from_stderr(void **state)
{
	(void)state;
	set("debug");
	sunk[0] = '\0';
	kis_log_set_sink(to_sink);
	_cleanup_free_ char *out = capture(events);
	kis_log_set_sink(NULL);
	assert_string_equal(out, "");
	/* the level apart, the message without the prefix or a newline */
	assert_string_equal(sunk, "debug|outside 1;info|two lines;debug|helper started, pid 7: "
				  "/usr/bin/bwrap --bind 'a b' 'it'\\''s' '';debug|out again;");
	_cleanup_free_ char *again = capture(events);
	assert_non_null(strstr(again, "kis: debug: outside 1\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_levels_and_their_refusal),
		cmocka_unit_test(test_lines_prefix_id_and_quoting),
		cmocka_unit_test(test_a_level_below_prints_nothing),
		cmocka_unit_test(test_a_sink_takes_the_lines_from_stderr),
		cmocka_unit_test(test_a_long_event_is_one_cut_line),
	};
	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
