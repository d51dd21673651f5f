/* SPDX-License-Identifier: MIT */
/* Unit tests of the profile: deny-all zero value, JSON parsing (valid and
 * each kind of invalid, with the path named), flags, units, hatches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kis/profile.h"

static void expect_invalid(const char *json, const char *needle)
{
	struct kis_profile p;
	kis_profile_init(&p);
	struct kis_error *e = NULL;
	int r = kis_profile_merge_json(&p, json, strlen(json), &e);
	assert_int_equal(r, -1);
	assert_non_null(e);
	assert_int_equal(e->code, KIS_E_INVALID_PROFILE);
	if (!strstr(e->message, needle))
		fail_msg("message '%s' does not name '%s'", e->message, needle);
	kis_error_free(e);
	kis_profile_release(&p);
}

/* mounts (issue 21): ids only, targets normalised and checked, the index
 * named, a JSON list read back as it was written */
static void test_mounts_parse_normalise_and_round_trip(void **state)
{
	(void)state;
	struct kis_profile p;
	kis_profile_init(&p);
	struct kis_error *e = NULL;
	assert_int_equal(kis_profile_set(&p, "mounts", "b-abc://data//set/", &e), 0);
	assert_int_equal(kis_profile_set(&p, "mounts", "w-x:/cache:ro", &e), 0);
	assert_int_equal(p.n_mounts, 2);
	assert_string_equal(p.mounts[0].target, "/data/set");
	assert_false(p.mounts[0].read_only);
	assert_true(p.mounts[1].read_only);
	/* nested with the first: named by its index */
	assert_int_equal(kis_profile_set(&p, "mounts", "w-y:/data", &e), -1);
	assert_non_null(strstr(e->message, "mounts[2].target"));
	kis_error_free(e);
	e = NULL;
	char *j = kis_profile_to_json(&p);
	struct kis_profile q;
	kis_profile_init(&q);
	assert_int_equal(kis_profile_merge_json(&q, j, strlen(j), &e), 0);
	assert_int_equal(q.n_mounts, 2);
	assert_string_equal(q.mounts[1].source, "w-x");
	assert_true(q.mounts[1].read_only);
	free(j);
	kis_profile_release(&q);
	kis_profile_release(&p);
	expect_invalid("{\"mounts\": [{\"source\": \"/etc\", \"target\": \"/e\"}]}",
		       "mounts[0].source");
	expect_invalid("{\"mounts\": [{\"source\": \"b-a\", \"target\": \"/a\"}, "
		       "{\"source\": \"b-a\", \"target\": \"/proc/self\"}]}",
		       "mounts[1].target");
	expect_invalid("{\"mounts\": [{\"source\": \"b-a\", \"target\": \"/a/../b\"}]}",
		       "'..'");
	expect_invalid("{\"mounts\": [{\"source\": \"b-a\"}]}", "mounts[0].target: missing");
	expect_invalid("{\"mounts\": [{\"source\": \"b-a\", \"target\": \"/a\", "
		       "\"read_only\": 1}]}", "mounts[0].read_only");
	expect_invalid("{\"mounts\": {}}", "mounts: expected a list");
}

static void test_zero_value_is_deny_all(void **state)
{
	(void)state;
	struct kis_profile p;
	kis_profile_init(&p);
	assert_int_equal(p.tier, KIS_TIER_AUTO);
	assert_int_equal(p.net, KIS_NET_OFF);
	assert_false(p.escape_hatch.allow_process_tier);
	assert_false(p.escape_hatch.allow_net_host);
	assert_int_equal(p.n_env, 0);
	assert_false(p.tty.enabled);
	struct kis_limits l;
	kis_limits_resolve(&p.limits, &l);
	/* 0 means the safe default, never unlimited */
	assert_int_equal(l.wall_ms, 600000ull /* 10 min, README */);
	assert_int_equal(l.cpu_ms, 600000ull);
	assert_int_equal(l.memory_bytes, (1ull << 30));
	assert_int_equal(l.pids, 256ull);
	assert_int_equal(l.output_bytes, (64ull << 20));
	assert_int_equal(l.file_bytes, (1ull << 30));
	assert_int_equal(l.open_files, 1024ull);
	kis_profile_release(&p);
}

static void test_valid_full_profile(void **state)
{
	(void)state;
	const char *json = "{\"tier\":\"host\",\"backend\":\"landlock\",\"workspace\":\"w-abc\","
			   "\"root\":\"workspace\",\"network\":{\"mode\":\"loopback\"},"
			   "\"limits\":{\"wall_ms\":1500,\"cpu_ms\":0,\"memory_bytes\":4194304,"
			   "\"pids\":10,\"output_bytes\":5,\"file_bytes\":6,\"open_files\":7},"
			   "\"env\":{\"A\":\"1\",\"B\":\"x=y\"},\"cwd\":\"/workspace/src\","
			   "\"tty\":{\"enabled\":true,\"rows\":50,\"cols\":132},"
			   "\"escape_hatch\":{\"allow_process_tier\":true,\"allow_net_host\":false}}";
	struct kis_profile p;
	kis_profile_init(&p);
	struct kis_error *e = NULL;
	assert_int_equal(kis_profile_merge_json(&p, json, strlen(json), &e), 0);
	assert_null(e);
	assert_int_equal(p.tier, KIS_TIER_HOST);
	assert_string_equal(p.backend, "landlock");
	assert_string_equal(p.workspace, "w-abc");
	assert_int_equal(p.root, KIS_ROOT_WORKSPACE);
	assert_int_equal(p.net, KIS_NET_LOOPBACK);
	assert_int_equal(p.limits.wall_ms, 1500);
	assert_int_equal(p.limits.memory_bytes, 4194304);
	assert_int_equal(p.limits.pids, 10);
	assert_int_equal(p.limits.open_files, 7);
	assert_int_equal(p.n_env, 2);
	assert_string_equal(p.env[0], "A=1");
	assert_string_equal(p.env[1], "B=x=y");
	assert_string_equal(p.cwd, "/workspace/src");
	assert_true(p.tty.enabled);
	assert_int_equal(p.tty.rows, 50);
	assert_int_equal(p.tty.cols, 132);
	assert_true(p.escape_hatch.allow_process_tier);
	char *s = kis_profile_to_json(&p);
	assert_non_null(s);
	assert_non_null(strstr(s, "\"loopback\""));
	/* what to_json writes, merge_json reads back to the same profile */
	struct kis_profile q;
	kis_profile_init(&q);
	assert_int_equal(kis_profile_merge_json(&q, s, strlen(s), &e), 0);
	char *s2 = kis_profile_to_json(&q);
	assert_string_equal(s, s2);
	free(s2);
	kis_profile_release(&q);
	free(s);
	kis_profile_release(&p);
}

static void test_invalid_profiles_name_the_path(void **state)
{
	(void)state;
	expect_invalid("{\"tier\":\"vm\"}", "tier");
	expect_invalid("{\"tier\":3}", "tier: expected a string");
	expect_invalid("{\"bogus\":1}", "bogus: unknown field");
	expect_invalid("{\"limits\":{\"wall\":1}}", "limits.wall: unknown field");
	expect_invalid("{\"limits\":{\"wall_ms\":-1}}", "limits.wall_ms");
	expect_invalid("{\"limits\":{\"wall_ms\":\"2s\"}}", "limits.wall_ms");
	expect_invalid("{\"limits\":{\"pids\":1.5}}", "limits.pids");
	expect_invalid("{\"limits\":7}", "limits: expected an object");
	expect_invalid("{\"network\":{\"mode\":\"wifi\"}}", "network.mode");
	expect_invalid("{\"network\":{\"mode\":\"off\",\"x\":1}}", "network.x: unknown field");
	expect_invalid("{\"env\":{\"A\":1}}", "env.A");
	expect_invalid("{\"env\":{\"A=B\":\"1\"}}", "env.A=B");
	expect_invalid("{\"env\":[]}", "env");
	expect_invalid("{\"cwd\":\"relative\"}", "cwd");
	expect_invalid("{\"tty\":{\"rows\":0}}", "tty.rows");
	expect_invalid("{\"tty\":{\"enabled\":\"yes\"}}", "tty.enabled");
	expect_invalid("{\"escape_hatch\":{\"allow_process_tier\":1}}",
		       "escape_hatch.allow_process_tier");
	expect_invalid("{\"workspace\":\"../x\"}", "workspace");
	expect_invalid("{\"base\":\"UPPER\"}", "base");
	expect_invalid("{\"backend\":\"a/b\"}", "backend");
	expect_invalid("{\"tier\":\"host\",\"tier\":\"wasm\"}", "duplicate");
	expect_invalid("[1,2]", "expected an object");
	expect_invalid("{\"tier\":", "line 1");
	expect_invalid("", "line");
	expect_invalid("{\"tier\":\"ho\\u0000st\"}", "NUL");
	expect_invalid("{\"microvm\":{\"accel\":\"hvf\"}}", "microvm.accel");
	expect_invalid("{\"microvm\":{\"vcpus\":0}}", "microvm.vcpus");
	expect_invalid("{\"microvm\":{\"vcpus\":65}}", "microvm.vcpus");
	expect_invalid("{\"wasm\":{\"engine\":\"jit\"}}", "wasm.engine: expected auto, interpreter or compiler");
	expect_invalid("{\"wasm\":{\"preopen\":\"/etc\"}}", "wasm.preopen: expected workspace or none");
	expect_invalid("{\"wasm\":{\"dirs\":[]}}", "wasm.dirs: unknown field");
	/* ranges: what the engine can apply, never clamped on the way */
	expect_invalid("{\"limits\":{\"pids\":4294967296}}", "limits.pids: expected 0 (the default) to 4194304");
	expect_invalid("{\"limits\":{\"open_files\":99999999}}", "limits.open_files: expected 0");
	expect_invalid("{\"limits\":{\"memory_bytes\":9223372036854775807}}", "limits.memory_bytes");
	/* a cwd resolved through the kernel's links or out with '..' */
	expect_invalid("{\"cwd\":\"/proc/self/fd/3\"}", "cwd: expected a directory outside /proc");
	expect_invalid("{\"cwd\":\"/dev\"}", "cwd: expected a directory outside /proc");
	expect_invalid("{\"cwd\":\"/workspace/../proc\"}", "cwd: expected a path with no '.' or '..'");
	expect_invalid("{\"cwd\":\"/a//b\"}", "cwd: expected a path with no empty component");
}

static void test_flags_override_field_by_field(void **state)
{
	(void)state;
	struct kis_profile p;
	kis_profile_init(&p);
	struct kis_error *e = NULL;
	const char *json = "{\"limits\":{\"wall_ms\":1000,\"cpu_ms\":2000},\"env\":{\"A\":\"1\"}}";
	assert_int_equal(kis_profile_merge_json(&p, json, strlen(json), &e), 0);
	assert_int_equal(kis_profile_set(&p, "limits.wall_ms", "2s", &e), 0);
	assert_int_equal(kis_profile_set(&p, "env", "A=2", &e), 0);
	assert_int_equal(kis_profile_set(&p, "env", "C=3", &e), 0);
	assert_int_equal(kis_profile_set(&p, "limits.memory_bytes", "64M", &e), 0);
	assert_int_equal(kis_profile_set(&p, "tty.enabled", "true", &e), 0);
	assert_int_equal(kis_profile_set(&p, "microvm.accel", "kvm", &e), 0);
	assert_int_equal(p.microvm.accel, KIS_ACCEL_KVM);
	assert_int_equal(kis_profile_set(&p, "microvm.vcpus", "2", &e), 0);
	assert_int_equal(p.microvm.vcpus, 2);
	assert_int_equal(p.wasm.engine, KIS_WASM_ENGINE_AUTO); /* the zero value */
	assert_int_equal(p.wasm.preopen, KIS_WASM_PREOPEN_WORKSPACE);
	assert_int_equal(kis_profile_set(&p, "wasm.engine", "interpreter", &e), 0);
	assert_int_equal(p.wasm.engine, KIS_WASM_ENGINE_INTERPRETER);
	assert_int_equal(kis_profile_set(&p, "wasm.preopen", "none", &e), 0);
	assert_int_equal(p.wasm.preopen, KIS_WASM_PREOPEN_NONE);
	assert_int_equal(p.limits.wall_ms, 2000);
	assert_int_equal(p.limits.cpu_ms, 2000); /* untouched */
	assert_int_equal(p.limits.memory_bytes, 64u << 20);
	assert_int_equal(p.n_env, 2);
	assert_string_equal(p.env[0], "A=2");
	assert_string_equal(p.env[1], "C=3");
	assert_true(p.tty.enabled);

	assert_int_equal(kis_profile_set(&p, "limits.wall_ms", "2x", &e), -1);
	assert_int_equal(e->code, KIS_E_INVALID_PROFILE);
	assert_non_null(strstr(e->message, "limits.wall_ms"));
	assert_int_equal(kis_profile_set(&p, "env", "=x", &e), -1);
	assert_int_equal(kis_profile_set(&p, "nope", "1", &e), -1);
	assert_non_null(strstr(e->message, "unknown field"));
	kis_error_free(e);
	kis_profile_release(&p);
}

static void test_durations(void **state)
{
	(void)state;
	uint64_t v;
	struct kis_error *e = NULL;
	assert_int_equal(kis_parse_duration_ms("500ms", &v, &e), 0);
	assert_int_equal(v, 500);
	assert_int_equal(kis_parse_duration_ms("2s", &v, &e), 0);
	assert_int_equal(v, 2000);
	assert_int_equal(kis_parse_duration_ms("1m", &v, &e), 0);
	assert_int_equal(v, 60000);
	assert_int_equal(kis_parse_duration_ms("1h", &v, &e), 0);
	assert_int_equal(v, 3600000);
	assert_int_equal(kis_parse_duration_ms("250", &v, &e), 0);
	assert_int_equal(v, 250);
	const char *bad[] = {"", "s", "-1s", "1.5s", "2 s", "2sec", "99999999999999999999", "18446744073709551615h"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(kis_parse_duration_ms(bad[i], &v, &e), -1);
		assert_int_equal(e->code, KIS_E_INVALID_ARGUMENT);
	}
	assert_int_equal(kis_parse_duration_ms(NULL, &v, &e), -1);
	kis_error_free(e);
}

static void test_sizes(void **state)
{
	(void)state;
	uint64_t v;
	struct kis_error *e = NULL;
	assert_int_equal(kis_parse_size("4096", &v, &e), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(kis_parse_size("64k", &v, &e), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(kis_parse_size("512M", &v, &e), 0);
	assert_int_equal(v, 512ull << 20);
	assert_int_equal(kis_parse_size("2G", &v, &e), 0);
	assert_int_equal(v, 2ull << 30);
	const char *bad[] = {"", "k", "1T", "1.5G", "-4", "17179869184G"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(kis_parse_size(bad[i], &v, &e), -1);
	kis_error_free(e);
}

static void test_hatches(void **state)
{
	(void)state;
	struct kis_profile p;
	kis_profile_init(&p);
	struct kis_error *e = NULL;
	assert_int_equal(kis_profile_check_hatches(&p, &e), 0);
	p.tier = KIS_TIER_PROCESS;
	assert_int_equal(kis_profile_check_hatches(&p, &e), -1);
	assert_int_equal(e->code, KIS_E_ESCAPE_HATCH_FORBIDDEN);
	assert_string_equal(e->message, "the process tier runs unconfined and requires "
					"escape_hatch.allow_process_tier");
	p.escape_hatch.allow_process_tier = true;
	assert_int_equal(kis_profile_check_hatches(&p, &e), 0);
	p.net = KIS_NET_HOST;
	assert_int_equal(kis_profile_check_hatches(&p, &e), -1);
	assert_non_null(strstr(e->message, "escape_hatch.allow_net_host"));
	p.escape_hatch.allow_net_host = true;
	assert_int_equal(kis_profile_check_hatches(&p, &e), 0);
	kis_error_free(e);
	kis_profile_release(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero_value_is_deny_all),
		cmocka_unit_test(test_valid_full_profile),
		cmocka_unit_test(test_invalid_profiles_name_the_path),
		cmocka_unit_test(test_mounts_parse_normalise_and_round_trip),
		cmocka_unit_test(test_flags_override_field_by_field),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_hatches),
	};
	return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
