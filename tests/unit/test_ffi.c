/* SPDX-License-Identifier: MIT */
/* Tests of src/engine/ffi.c (kis/ffi.h, the API of the Python and Go
 * bindings): error accessors, heap handles, captured bytes with NULs, the
 * refusals, the backends' JSON, and a run cancelled from another thread
 * through its cancel fd (landlock, as root). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/tree.h"
#include "kis/sandbox.h"

static void test_error_accessors(void **state)
{
	(void)state;
	assert_int_equal(kis_error_code(NULL), KIS_E_OK);
	assert_string_equal(kis_error_message(NULL), "");
	assert_int_equal(kis_error_errno(NULL), 0);
	struct kis_error *e = NULL;
	kis_error_set(&e, KIS_E_BUSY, EBUSY, "workspace '%s' is held", "w-x");
	assert_int_equal(kis_error_code(e), KIS_E_BUSY);
	assert_string_equal(kis_error_message(e), "workspace 'w-x' is held");
	assert_int_equal(kis_error_errno(e), EBUSY);
	kis_error_free(e);
}

static void test_profile_handle_merges_and_refuses(void **state)
{
	(void)state;
	struct kis_profile *p = kis_profile_new();
	assert_non_null(p);
	struct kis_error *e = NULL;
	const char *ok = "{\"tier\":\"host\",\"limits\":{\"wall_ms\":1500}}";
	assert_int_equal(kis_profile_merge_json(p, ok, strlen(ok), &e), 0);
	assert_int_equal(p->tier, KIS_TIER_HOST);
	assert_int_equal(p->limits.wall_ms, 1500);
	const char *bad = "{\"limits\":{\"wall_ms\":-1}}";
	assert_true(kis_profile_merge_json(p, bad, strlen(bad), &e) < 0);
	assert_int_equal(kis_error_code(e), KIS_E_INVALID_PROFILE);
	assert_non_null(strstr(kis_error_message(e), "limits.wall_ms"));
	kis_error_free(e);
	kis_profile_free(p);
	kis_profile_free(NULL);
}

/* Regression: the JSON of a result cannot carry a NUL byte; a binding
 * reads the captured bytes through kis_result_stream, which must count
 * them. */
static void test_result_stream_keeps_nul_bytes(void **state)
{
	(void)state;
	struct kis_result *r = kis_result_new();
	assert_non_null(r);
	const char *data;
	size_t len = 99;
	assert_int_equal(kis_result_stream(r, KIS_STREAM_STDOUT, &data, &len), 0);
	assert_null(data);
	assert_int_equal(len, 0);
	r->streams[0].data = malloc(4);
	memcpy(r->streams[0].data, "a\0b", 4);
	r->streams[0].len = 3;
	r->streams[0].cap = 4;
	assert_int_equal(kis_result_stream(r, KIS_STREAM_STDOUT, &data, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "a\0b", 3);
	assert_int_equal(kis_result_stream(r, KIS_STREAM_STDIN, &data, &len), -1);
	assert_int_equal(kis_result_stream(r, 7, &data, &len), -1);
	kis_result_free(r);
	kis_result_free(NULL);
}

static void test_run_capture_refuses_a_terminal_and_no_profile(void **state)
{
	(void)state;
	struct kis_result *r = kis_result_new();
	struct kis_profile *p = kis_profile_new();
	char *argv[] = {"true", NULL};
	struct kis_error *e = NULL;
	assert_true(kis_run_capture(NULL, argv, NULL, -1, -1, r, &e) < 0);
	assert_int_equal(kis_error_code(e), KIS_E_INVALID_ARGUMENT);
	kis_error_free(e);
	e = NULL;
	p->tty.enabled = true;
	assert_true(kis_run_capture(p, argv, NULL, -1, -1, r, &e) < 0);
	assert_int_equal(kis_error_code(e), KIS_E_TTY_UNSUPPORTED);
	kis_error_free(e);
	e = NULL;
	assert_true(kis_session_exec_pty(NULL, "s-x", argv, false, -1, -1, -1, r, &e) < 0);
	assert_int_equal(kis_error_code(e), KIS_E_INVALID_ARGUMENT);
	kis_error_free(e);
	kis_profile_free(p);
	kis_result_free(r);
}

static void test_backends_json_lists_every_backend(void **state)
{
	(void)state;
	char top[] = "/tmp/kis-ffi-XXXXXX";
	assert_non_null(mkdtemp(top));
	char *s = NULL;
	struct kis_error *e = NULL;
	assert_int_equal(kis_backends_json(top, &s, &e), 0);
	json_error_t je;
	json_t *a = json_loads(s, 0, &je);
	assert_true(json_is_array(a));
	size_t n;
	kis_backends(&n);
	assert_int_equal(json_array_size(a), n);
	size_t i;
	json_t *o;
	json_array_foreach(a, i, o) {
		assert_true(json_is_string(json_object_get(o, "backend")));
		assert_true(json_is_boolean(json_object_get(o, "available")));
		assert_true(json_is_array(json_object_get(o, "limits")));
		if (!json_is_true(json_object_get(o, "available")))
			assert_true(json_is_string(json_object_get(o, "why_absent")));
	}
	json_decref(a);
	free(s);
	kis_tree_remove_path(top);
}

struct canceller {
	int fd;
};

static void *cancel_later(void *arg)
{
	struct canceller *c = arg;
	usleep(300 * 1000);
	char b = 9;
	(void)!write(c->fd, &b, 1);
	return NULL;
}

/* A binding's cancel handle is a pipe another thread writes to: the run
 * ends with reason cancelled, with its output so far. */
static void test_run_capture_cancelled_from_another_thread(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* the host tier's cgroup */
	char top[] = "/tmp/kis-ffi-XXXXXX";
	assert_non_null(mkdtemp(top));
	assert_int_equal(chmod(top, 0711), 0);
	char root[64];
	snprintf(root, sizeof(root), "%s/store", top);
	struct kis_profile *p = kis_profile_new();
	struct kis_error *e = NULL;
	const char *js = "{\"tier\":\"host\",\"backend\":\"landlock\",\"limits\":{\"wall_ms\":30000}}";
	assert_int_equal(kis_profile_merge_json(p, js, strlen(js), &e), 0);
	const struct kis_backend *b = kis_backend_find("landlock");
	struct kis_caps caps;
	kis_backend_probe(b, root, false, &caps);
	if (!caps.present) {
		kis_profile_free(p);
		kis_tree_remove_path(top);
		skip();
	}
	int fds[2];
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	struct canceller c = {.fd = fds[1]};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, cancel_later, &c), 0);
	struct kis_result *r = kis_result_new();
	char *argv[] = {"sh", "-c", "printf 'x\\0y'; exec sleep 20", NULL};
	int rc = kis_run_capture(p, argv, root, -1, fds[0], r, &e);
	pthread_join(t, NULL);
	if (rc < 0)
		fail_msg("%s", kis_error_message(e));
	assert_int_equal(r->reason, KIS_REASON_CANCELLED);
	const char *data;
	size_t len;
	assert_int_equal(kis_result_stream(r, KIS_STREAM_STDOUT, &data, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "x\0y", 3);
	kis_result_free(r);
	kis_profile_free(p);
	close(fds[0]);
	close(fds[1]);
	kis_tree_remove_path(top);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_error_accessors),
		cmocka_unit_test(test_profile_handle_merges_and_refuses),
		cmocka_unit_test(test_result_stream_keeps_nul_bytes),
		cmocka_unit_test(test_run_capture_refuses_a_terminal_and_no_profile),
		cmocka_unit_test(test_backends_json_lists_every_backend),
		cmocka_unit_test(test_run_capture_cancelled_from_another_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
