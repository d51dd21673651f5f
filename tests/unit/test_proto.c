/* SPDX-License-Identifier: MIT */
/* Unit tests of the agent protocol: frame round trip, each refusal of the
 * decoder, partial frames, and the EXEC request parser's checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/exec_json.h"
#include "agent/proto.h"

static void test_roundtrip_through_a_pipe(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(kis_frame_write(p[1], KIS_F_DATA, 1, 7, "hello", 5), 0);
	assert_int_equal(kis_frame_write(p[1], KIS_F_EOF, 0, 7, NULL, 0), 0);
	close(p[1]);
	struct kis_frame_reader r;
	kis_frame_reader_init(&r);
	struct kis_frame f;
	assert_int_equal(kis_frame_read_blocking(&r, p[0], &f), 1);
	assert_int_equal(f.type, KIS_F_DATA);
	assert_int_equal(f.stream, 1);
	assert_int_equal(f.exec, 7);
	assert_int_equal(f.len, 5);
	assert_memory_equal(f.payload, "hello", 5);
	assert_int_equal(kis_frame_read_blocking(&r, p[0], &f), 1);
	assert_int_equal(f.type, KIS_F_EOF);
	assert_int_equal(kis_frame_read_blocking(&r, p[0], &f), 0);
	kis_frame_reader_release(&r);
	close(p[0]);
}

static void hdr(uint8_t *b, uint32_t len, uint8_t type, uint8_t stream, uint16_t res)
{
	kis_frame_encode_hdr(b, type, stream, 1, len);
	b[6] = (uint8_t)res;
	b[7] = (uint8_t)(res >> 8);
}

static void test_decoder_refusals(void **state)
{
	(void)state;
	uint8_t b[64] = {0};
	struct kis_frame f;
	size_t used;
	hdr(b, KIS_FRAME_MAX + 1, KIS_F_DATA, 1, 0);
	assert_int_equal(kis_frame_decode(b, 12, &f, &used), KIS_FRAME_ERR_OVERSIZED);
	hdr(b, 0, 0, 0, 0);
	assert_int_equal(kis_frame_decode(b, 12, &f, &used), KIS_FRAME_ERR_TYPE);
	hdr(b, 0, KIS_F__MAX, 0, 0);
	assert_int_equal(kis_frame_decode(b, 12, &f, &used), KIS_FRAME_ERR_TYPE);
	hdr(b, 0, 200, 0, 0);
	assert_int_equal(kis_frame_decode(b, 12, &f, &used), KIS_FRAME_ERR_TYPE);
	hdr(b, 4, KIS_F_HELLO, 0, 1);
	assert_int_equal(kis_frame_decode(b, 16, &f, &used), KIS_FRAME_ERR_RESERVED);
	hdr(b, 4, KIS_F_HELLO, 1, 0);
	assert_int_equal(kis_frame_decode(b, 16, &f, &used), KIS_FRAME_ERR_RESERVED);
	hdr(b, 1, KIS_F_DATA, 3, 0);
	assert_int_equal(kis_frame_decode(b, 13, &f, &used), KIS_FRAME_ERR_RESERVED);
	hdr(b, 3, KIS_F_HELLO, 0, 0);
	assert_int_equal(kis_frame_decode(b, 15, &f, &used), KIS_FRAME_ERR_LENGTH);
	hdr(b, 8, KIS_F_RESIZE, 0, 0);
	assert_int_equal(kis_frame_decode(b, 20, &f, &used), KIS_FRAME_ERR_LENGTH);
	hdr(b, 1, KIS_F_EOF, 0, 0);
	assert_int_equal(kis_frame_decode(b, 13, &f, &used), KIS_FRAME_ERR_LENGTH);
	/* partial: header only, or header plus part of the payload */
	hdr(b, 10, KIS_F_DATA, 0, 0);
	assert_int_equal(kis_frame_decode(b, 11, &f, &used), KIS_FRAME_NEED_MORE);
	assert_int_equal(kis_frame_decode(b, 15, &f, &used), KIS_FRAME_NEED_MORE);
	assert_int_equal(kis_frame_decode(b, 22, &f, &used), KIS_FRAME_OK);
	assert_int_equal(used, 22);
	assert_string_not_equal(kis_frame_status_text(KIS_FRAME_ERR_TYPE), "");
}

static void expect_bad_req(const char *json)
{
	struct kis_exec_req r;
	struct kis_error *e = NULL;
	assert_int_equal(kis_exec_req_from_json(json, strlen(json), &r, &e), -1);
	assert_non_null(e);
	kis_error_free(e);
}

static void test_exec_request(void **state)
{
	(void)state;
	struct kis_exec_req in = {0};
	char *argv[] = {"sh", "-c", "echo hi", NULL};
	in.argv = argv;
	in.shell = true;
	in.tty = true;
	in.rows = 40;
	in.cols = 100;
	in.limits.wall_ms = 1234;
	char *s = kis_exec_req_to_json(&in);
	assert_non_null(s);
	struct kis_exec_req out;
	struct kis_error *e = NULL;
	assert_int_equal(kis_exec_req_from_json(s, strlen(s), &out, &e), 0);
	assert_string_equal(out.argv[2], "echo hi");
	assert_null(out.argv[3]);
	assert_null(out.env);
	assert_true(out.shell && out.tty);
	assert_int_equal(out.rows, 40);
	assert_int_equal(out.limits.wall_ms, 1234);
	assert_true(out.limits.cpu_ms > 0); /* defaults resolved */
	kis_exec_req_release(&out);
	free(s);
	expect_bad_req("");
	expect_bad_req("[]");
	expect_bad_req("{}");
	expect_bad_req("{\"argv\":[]}");
	expect_bad_req("{\"argv\":[1]}");
	expect_bad_req("{\"argv\":\"sh\"}");
	expect_bad_req("{\"argv\":[\"a\\u0000b\"]}");
	expect_bad_req("{\"argv\":[\"sh\"],\"env\":[3]}");
}

/* docs/protocol.md "container": a kis-vm pod's app container, round trip
 * and the ids a guest would make a directory of refused */
static void test_exec_request_container(void **state)
{
	(void)state;
	char *argv[] = {"true", NULL};
	struct kis_exec_req in = {.argv = argv, .ctr_op = KIS_CTR_INIT, .ctr_id = "app-1",
				  .ctr_slot = 2, .ctr_hostname = "pod-host",
				  .ctr_memory_max = 32u << 20, .ctr_cpu_quota_us = 50000,
				  .ctr_cpu_period_us = 100000};
	char *s = kis_exec_req_to_json(&in);
	assert_non_null(s);
	struct kis_exec_req out;
	struct kis_error *e = NULL;
	assert_int_equal(kis_exec_req_from_json(s, strlen(s), &out, &e), 0);
	assert_int_equal(out.ctr_op, KIS_CTR_INIT);
	assert_string_equal(out.ctr_id, "app-1");
	assert_int_equal(out.ctr_slot, 2);
	assert_string_equal(out.ctr_hostname, "pod-host");
	assert_false(out.ctr_free_slot);
	assert_int_equal(out.ctr_memory_max, 32u << 20);
	assert_int_equal(out.ctr_cpu_quota_us, 50000);
	assert_int_equal(out.ctr_cpu_period_us, 100000);
	kis_exec_req_release(&out);
	free(s);
	/* a quota alone: the group keeps the kernel's period */
	in.ctr_cpu_period_us = 0;
	s = kis_exec_req_to_json(&in);
	assert_non_null(s);
	assert_null(strstr(s, "cpu_period_us"));
	assert_int_equal(kis_exec_req_from_json(s, strlen(s), &out, &e), 0);
	assert_int_equal(out.ctr_cpu_quota_us, 50000);
	assert_int_equal(out.ctr_cpu_period_us, 0);
	kis_exec_req_release(&out);
	free(s);
	expect_bad_req("{\"argv\":[\"true\"],\"container\":{\"op\":\"init\",\"id\":\"../x\"}}");
	expect_bad_req("{\"argv\":[\"true\"],\"container\":{\"op\":\"init\",\"id\":\"..\"}}");
	expect_bad_req("{\"argv\":[\"true\"],\"container\":{\"op\":\"run\",\"id\":\"a\"}}");
	expect_bad_req("{\"argv\":[\"true\"],\"container\":{\"op\":\"join\",\"id\":\"a\","
		       "\"slot\":-1}}");
	/* a memory.max the guest would write must be a byte count */
	expect_bad_req("{\"argv\":[\"true\"],\"container\":{\"op\":\"init\",\"id\":\"a\","
		       "\"memory_max\":-1}}");
	expect_bad_req("{\"argv\":[\"true\"],\"container\":{\"op\":\"init\",\"id\":\"a\","
		       "\"memory_max\":\"32m\"}}");
	/* cpu.max the guest would write: within the kernel's bounds
	 * (sched-bwc.rst), a period only with a quota */
	static const char *const bad_cpu[] = {
		"\"cpu_quota_us\":999",
		"\"cpu_quota_us\":0",
		"\"cpu_quota_us\":-1",
		"\"cpu_quota_us\":17592186044416", /* 2^44 */
		"\"cpu_quota_us\":\"max\"",
		"\"cpu_quota_us\":\"50000 100000\"",
		"\"cpu_quota_us\":50000.5",
		"\"cpu_quota_us\":50000,\"cpu_period_us\":999",
		"\"cpu_quota_us\":50000,\"cpu_period_us\":1000001",
		"\"cpu_quota_us\":50000,\"cpu_period_us\":-100000",
		"\"cpu_period_us\":100000",
	};
	for (size_t i = 0; i < sizeof(bad_cpu) / sizeof(bad_cpu[0]); i++) {
		char req[256];
		snprintf(req, sizeof(req),
			 "{\"argv\":[\"true\"],\"container\":{\"op\":\"init\",\"id\":\"a\",%s}}",
			 bad_cpu[i]);
		expect_bad_req(req);
	}
	/* the bounds themselves are taken */
	const char *edge = "{\"argv\":[\"true\"],\"container\":{\"op\":\"init\",\"id\":\"a\","
			   "\"cpu_quota_us\":1000,\"cpu_period_us\":1000000}}";
	assert_int_equal(kis_exec_req_from_json(edge, strlen(edge), &out, &e), 0);
	assert_int_equal(out.ctr_cpu_quota_us, 1000);
	assert_int_equal(out.ctr_cpu_period_us, 1000000);
	kis_exec_req_release(&out);
}

/* The EXIT frame of a pod container's init killed at its memory.max:
 * reason, signal and the OOM count reach the host (the count was dropped
 * by the decoder before) */
static void test_exit_carries_limit_events(void **state)
{
	(void)state;
	struct kis_result in, out;
	kis_result_init(&in);
	kis_result_init(&out);
	in.reason = KIS_REASON_SIGNALED;
	in.signal = 9;
	in.exit_code = -1;
	assert_int_equal(kis_result_blame_limits(&in, 1, 0, "mem", "pids"), 1);
	char *s = kis_exit_to_json(&in);
	assert_non_null(s);
	struct kis_error *e = NULL;
	assert_int_equal(kis_exit_from_json(s, strlen(s), &out, &e), 0);
	assert_int_equal(out.reason, KIS_REASON_MEMORY_LIMIT);
	assert_int_equal(out.signal, 9);
	assert_true(out.limit_events.counted);
	assert_int_equal(out.limit_events.oom_kills, 1);
	assert_int_equal(kis_result_exit_status(&out), 137);
	free(s);
	kis_result_release(&in);
	kis_result_release(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_through_a_pipe),
		cmocka_unit_test(test_decoder_refusals),
		cmocka_unit_test(test_exec_request),
		cmocka_unit_test(test_exec_request_container),
		cmocka_unit_test(test_exit_carries_limit_events),
	};
	return cmocka_run_group_tests_name("proto", tests, NULL, NULL);
}
