/* SPDX-License-Identifier: MIT */
/* Unit tests of errors, ids and results: stable codes, formatting,
 * wrapping, id minting and validation, the exit status rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <jansson.h>
#include <string.h>
#include <errno.h>

#include <cmocka.h>

#include "kis/id.h"
#include "kis/result.h"

static void test_codes_are_stable(void **state)
{
	(void)state;
	assert_string_equal(kis_errc_name(KIS_E_ESCAPE_HATCH_FORBIDDEN), "escape_hatch_forbidden");
	assert_string_equal(kis_errc_name(KIS_E_TIER_UNAVAILABLE), "tier_unavailable");
	assert_string_equal(kis_errc_name(KIS_E_PROFILE_UNSATISFIABLE), "profile_unsatisfiable");
	assert_string_equal(kis_errc_name(KIS_E_TTY_UNSUPPORTED), "tty_unsupported");
	assert_string_equal(kis_errc_name(KIS_E_INVALID_PROFILE), "invalid_profile");
	assert_string_equal(kis_errc_name(KIS_E_INVALID_ID), "invalid_id");
	assert_string_equal(kis_errc_name(KIS_E_NOT_FOUND), "not_found");
	assert_string_equal(kis_errc_name(KIS_E_DESTINATION_EXISTS), "destination_exists");
	assert_string_equal(kis_errc_name(KIS_E_INTERNAL), "internal");
	assert_string_equal(kis_errc_name(KIS_E_PROTOCOL), "protocol");
	assert_string_equal(kis_errc_name((enum kis_errc)999), "internal");
}

static void test_format_and_wrap(void **state)
{
	(void)state;
	struct kis_error *e = NULL;
	assert_int_equal(kis_error_set(&e, KIS_E_NOT_FOUND, 0, "no base '%s'", "b-x"), -1);
	char *s = kis_error_format(e);
	assert_string_equal(s, "not_found: no base 'b-x'");
	free(s);
	kis_error_wrap(&e, "cloning '%s'", "w-1");
	s = kis_error_format(e);
	assert_string_equal(s, "not_found: cloning 'w-1': no base 'b-x'");
	free(s);
	/* errno is appended; a second set replaces the first without a leak */
	kis_error_set(&e, KIS_E_INTERNAL, ENOENT, "cannot open '%s'", "/x");
	s = kis_error_format(e);
	assert_string_equal(s, "internal: cannot open '/x': No such file or directory");
	free(s);
	kis_error_free(e);
	assert_int_equal(kis_error_set(NULL, KIS_E_INTERNAL, 0, "ignored"), -1);
	kis_error_free(NULL);
}

static void test_ids(void **state)
{
	(void)state;
	char a[KIS_ID_BUFSZ], b[KIS_ID_BUFSZ];
	struct kis_error *e = NULL;
	assert_int_equal(kis_id_mint('w', a, &e), 0);
	assert_int_equal(kis_id_mint('w', b, &e), 0);
	assert_int_equal(strlen(a), 28);
	assert_memory_equal(a, "w-", 2);
	assert_string_not_equal(a, b);
	assert_int_equal(kis_id_validate(a, "workspace id", &e), 0);
	assert_int_equal(kis_id_validate("my-work-1", "workspace id", &e), 0);
	char long64[65], long65[66];
	memset(long64, 'a', 64);
	long64[64] = 0;
	memset(long65, 'a', 65);
	long65[65] = 0;
	assert_int_equal(kis_id_validate(long64, "id", &e), 0);
	const char *bad[] = {"", ".", "..", "..0", "a/b", "-a", "UP", "../x", "a b", "a.b", long65};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kis_id_validate(bad[i], "workspace id", &e), -1);
		assert_int_equal(e->code, KIS_E_INVALID_ID);
	}
	assert_int_equal(kis_id_validate(NULL, "id", &e), -1);
	kis_error_free(e);
}

static void test_exit_status_rule(void **state)
{
	(void)state;
	struct kis_result r;
	kis_result_init(&r);
	r.reason = KIS_REASON_EXITED;
	r.exit_code = 3;
	assert_int_equal(kis_result_exit_status(&r), 3);
	r.reason = KIS_REASON_SIGNALED;
	r.exit_code = -1;
	r.signal = 9;
	assert_int_equal(kis_result_exit_status(&r), 137);
	r.reason = KIS_REASON_TIMEOUT;
	assert_int_equal(kis_result_exit_status(&r), 137);
	r.reason = KIS_REASON_SETUP_FAILED;
	r.signal = 0;
	r.exit_code = 127;
	assert_int_equal(kis_result_exit_status(&r), 127);
	r.exit_code = 126;
	assert_int_equal(kis_result_exit_status(&r), 126);
	assert_string_equal(kis_reason_name(KIS_REASON_OUTPUT_LIMIT), "output_limit");
	assert_string_equal(kis_reason_name(KIS_REASON_CPU_LIMIT), "cpu_limit");
	kis_result_release(&r);
}

/* issue 40 item 7: the command often exited 0 before the limit's SIGKILL
 * landed, and kis exited 0 with a cut stream */
static void test_limit_verdict_never_exits_0_when_the_command_won_the_race(void **state)
{
	(void)state;
	static const enum kis_reason verdicts[] = {KIS_REASON_OUTPUT_LIMIT, KIS_REASON_CPU_LIMIT,
						   KIS_REASON_TIMEOUT};
	for (size_t i = 0; i < sizeof(verdicts) / sizeof(verdicts[0]); i++) {
		struct kis_result r;
		kis_result_init(&r);
		r.reason = verdicts[i];
		r.exit_code = 0;
		assert_int_equal(kis_result_exit_status(&r), 137);
		r.exit_code = -1;
		r.signal = 9;
		assert_int_equal(kis_result_exit_status(&r), 137);
		r.signal = 24; /* RLIMIT_CPU's SIGXCPU: the same verdict, the same status */
		assert_int_equal(kis_result_exit_status(&r), 137);
		kis_result_release(&r);
	}
}

static void test_result_json_survives_binary_output(void **state)
{
	(void)state;
	struct kis_result r;
	kis_result_init(&r);
	strcpy(r.sandbox, "s-test");
	r.streams[0].data = malloc(8);
	memcpy(r.streams[0].data, "a\xff\xc3\xa9z\0", 6);
	r.streams[0].len = 5;
	char *j = kis_result_to_json(&r);
	assert_non_null(j);
	assert_non_null(strstr(j, "\"stdout\":\"a\xef\xbf\xbd\xc3\xa9z\""));
	free(j);
	kis_result_release(&r);
}

/* issue 40 item 10: --json replaced bytes that are not UTF-8 with U+FFFD
 * and kept no other copy: the bytes are lost in silence */
static void test_result_json_lost_bytes_that_are_not_utf8(void **state)
{
	(void)state;
	struct kis_result r;
	kis_result_init(&r);
	strcpy(r.sandbox, "s-test");
	r.streams[0].data = malloc(8);
	memcpy(r.streams[0].data, "a\xff\xc3\xa9z\0", 6);
	r.streams[0].len = 5;
	r.streams[1].data = malloc(8);
	memcpy(r.streams[1].data, "ok\xc3\xa9\0", 5);
	r.streams[1].len = 4;
	char *j = kis_result_to_json(&r);
	assert_non_null(j);
	/* base64 of 61 ff c3 a9 7a */
	assert_non_null(strstr(j, "\"stdout_base64\":\"Yf/DqXo=\""));
	assert_null(strstr(j, "stderr_base64")); /* valid UTF-8: the string is exact */
	free(j);
	for (size_t n = 0; n <= 4; n++) { /* every padding */
		r.streams[0].len = n;
		r.streams[0].data[0] = (char)0xff;
		j = kis_result_to_json(&r);
		assert_non_null(j);
		assert_true(n == 0 ? !strstr(j, "stdout_base64") : !!strstr(j, "stdout_base64"));
		free(j);
	}
	kis_result_release(&r);
}

/* The streamed writer escapes as jansson does: every byte value, alone and
 * in broken or overlong sequences, comes back from json_loads as the
 * replacement rule says. */
static void test_result_json_writer_round_trips_every_byte(void **state)
{
	(void)state;
	struct kis_result r;
	kis_result_init(&r);
	strcpy(r.sandbox, "s-test");
	static const char tail[] = "\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x82";
	size_t n = 256 + sizeof(tail) - 1;
	r.streams[1].data = malloc(n + 1);
	for (int i = 0; i < 256; i++)
		r.streams[1].data[i] = (char)i;
	memcpy(r.streams[1].data + 256, tail, sizeof(tail));
	r.streams[1].len = n;
	char *j = kis_result_to_json(&r);
	assert_non_null(j);
	json_error_t je;
	json_t *o = json_loads(j, JSON_ALLOW_NUL, &je);
	assert_non_null(o);
	json_t *e = json_object_get(o, "stderr");
	const char *v = json_string_value(e);
	size_t vn = json_string_length(e);
	/* 0..127 as they are, 128..255 each U+FFFD */
	assert_true(vn >= 128 + 128 * 3);
	for (int i = 0; i < 128; i++)
		assert_int_equal((unsigned char)v[i], i);
	for (int i = 0; i < 128; i++)
		assert_memory_equal(v + 128 + 3 * i, "\xef\xbf\xbd", 3);
	const char *t = v + 128 + 128 * 3;
	/* overlong '/', a surrogate, past U+10FFFF: each byte replaced; the
	 * euro sign and the emoji kept; a cut sequence at the end replaced */
	static const char want[] =
		"\xef\xbf\xbd\xef\xbf\xbd" "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
		"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "\xe2\x82\xac"
		"\xf0\x9f\x98\x80" "\xef\xbf\xbd\xef\xbf\xbd";
	assert_int_equal(vn - (size_t)(t - v), sizeof(want) - 1);
	assert_memory_equal(t, want, sizeof(want) - 1);
	assert_string_equal(json_string_value(json_object_get(o, "stdout")), "");
	json_decref(o);
	free(j);
	kis_result_release(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codes_are_stable),
		cmocka_unit_test(test_format_and_wrap),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_exit_status_rule),
		cmocka_unit_test(test_limit_verdict_never_exits_0_when_the_command_won_the_race),
		cmocka_unit_test(test_result_json_survives_binary_output),
		cmocka_unit_test(test_result_json_lost_bytes_that_are_not_utf8),
		cmocka_unit_test(test_result_json_writer_round_trips_every_byte),
	};
	return cmocka_run_group_tests_name("error", tests, NULL, NULL);
}
