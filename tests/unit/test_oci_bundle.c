/* SPDX-License-Identifier: MIT */
/* Unit tests of the oci backend's config.json: namespaces per network mode,
 * no capabilities, no_new_privs, devices deny-all, limits, mounts per root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/host/common.h"
#include "backends/oci/bundle.h"
#include "confine/confine.h"

static char *args[] = {KIS_OCI_AGENT_PATH, "--listen-fd", "3", NULL};
static char *env[] = {"PATH=/usr/bin:/bin", NULL};

static json_t *build(enum kis_root_mode root, enum kis_net_mode net, bool user_ns)
{
	static struct kis_limits l = {.wall_ms = 1000, .cpu_ms = 1000, .memory_bytes = 64 << 20,
				      .pids = 32, .output_bytes = 1 << 20, .file_bytes = 1 << 20,
				      .open_files = 64};
	struct kis_oci_spec s = {
		.args = args, .env = env, .cwd = "/workspace", .root = root,
		.rootfs = "/run/kis/oci/kis-t/rootfs", .workspace = "/store/ws/merged",
		.agent = "/usr/lib/kis/kis-agent", .net = net, .limits = &l,
		.cgroups_path = "/kis-t", .user_ns = user_ns, .host_uid = 1000,
		.host_gid = 1000,
	};
	json_t *cfg = NULL;
	struct kis_error *e = NULL;
	assert_int_equal(kis_oci_config_build(&s, &cfg, &e), 0);
	assert_null(e);
	return cfg;
}

static bool has_ns(json_t *cfg, const char *type)
{
	json_t *ns = json_object_get(json_object_get(cfg, "linux"), "namespaces");
	size_t i;
	json_t *v;
	json_array_foreach(ns, i, v) if (!strcmp(json_string_value(json_object_get(v, "type")), type))
		return true;
	return false;
}

static json_t *mount_at(json_t *cfg, const char *dst)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(cfg, "mounts"), i, v)
		if (!strcmp(json_string_value(json_object_get(v, "destination")), dst))
			return v;
	return NULL;
}

static bool has_opt(json_t *m, const char *opt)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(m, "options"), i, v)
		if (!strcmp(json_string_value(v), opt))
			return true;
	return false;
}

static void test_namespaces_per_network_mode(void **state)
{
	(void)state;
	json_t *c = build(KIS_ROOT_HOST, KIS_NET_OFF, false);
	for (const char *const *t = (const char *const[]){"pid", "mount", "ipc", "uts", "cgroup",
							    "network", NULL};
	     *t; t++)
		assert_true(has_ns(c, *t));
	assert_false(has_ns(c, "user"));
	json_decref(c);
	c = build(KIS_ROOT_HOST, KIS_NET_HOST, false);
	assert_false(has_ns(c, "network"));
	json_decref(c);
	c = build(KIS_ROOT_HOST, KIS_NET_LOOPBACK, true);
	assert_true(has_ns(c, "network"));
	assert_true(has_ns(c, "user"));
	json_t *um = json_object_get(json_object_get(c, "linux"), "uidMappings");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(um, 0), "hostID")), 1000);
	json_decref(c);
}

static void test_process_has_nothing(void **state)
{
	(void)state;
	json_t *c = build(KIS_ROOT_HOST, KIS_NET_OFF, false);
	json_t *p = json_object_get(c, "process");
	assert_true(json_is_true(json_object_get(p, "noNewPrivileges")));
	assert_true(json_is_false(json_object_get(p, "terminal")));
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(p, "capabilities"), k, v)
		assert_int_equal(json_array_size(v), 0);
	assert_int_equal(json_object_size(json_object_get(p, "capabilities")), 5);
	bool core0 = false, nofile = false, fsize = false;
	size_t i;
	json_array_foreach(json_object_get(p, "rlimits"), i, v) {
		const char *t = json_string_value(json_object_get(v, "type"));
		json_int_t h = json_integer_value(json_object_get(v, "hard"));
		core0 |= !strcmp(t, "RLIMIT_CORE") && h == 0;
		nofile |= !strcmp(t, "RLIMIT_NOFILE") && h == 64;
		fsize |= !strcmp(t, "RLIMIT_FSIZE") && h == 1 << 20;
	}
	assert_true(core0 && nofile && fsize);
	json_decref(c);
}

static void test_resources_and_devices(void **state)
{
	(void)state;
	json_t *c = build(KIS_ROOT_WORKSPACE, KIS_NET_OFF, false);
	json_t *lx = json_object_get(c, "linux");
	json_t *r = json_object_get(lx, "resources");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "memory"), "limit")),
			 64 << 20);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "pids"), "limit")), 32);
	json_t *d0 = json_array_get(json_object_get(r, "devices"), 0);
	assert_true(json_is_false(json_object_get(d0, "allow")));
	assert_string_equal(json_string_value(json_object_get(d0, "access")), "rwm");
	assert_null(json_object_get(d0, "major")); /* deny-all first: every device */
	assert_string_equal(json_string_value(json_object_get(lx, "cgroupsPath")), "/kis-t");
	/* the policy is the compiled program of the annotation alone: crun
	 * ignores linux.seccomp beside it (the agent, started with
	 * --require-seccomp by oci.c, serves nothing without a filter) */
	assert_null(json_object_get(lx, "seccomp"));
	assert_true(json_array_size(json_object_get(lx, "maskedPaths")) > 5);
	assert_true(json_array_size(json_object_get(lx, "readonlyPaths")) >= 4);
	json_decref(c);
}

static int b64_value(char c)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(abc, c) : NULL;
	return p ? (int)(p - abc) : -1;
}

/* crun loads run.oci.seccomp_bpf_data as given, linux.seccomp ignored: it
 * must be the same policy's program, the one the host tier loads */
static void test_crun_gets_the_compiled_policy(void **state)
{
	(void)state;
	json_t *c = build(KIS_ROOT_HOST, KIS_NET_OFF, false);
	const char *b64 = json_string_value(
		json_object_get(json_object_get(c, "annotations"), "run.oci.seccomp_bpf_data"));
	assert_non_null(b64);
	size_t n = strlen(b64);
	assert_int_equal(n % 4, 0);
	uint8_t *got = malloc(n / 4 * 3);
	size_t len = 0;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		for (int k = 0; k < 4; k++)
			v[k] = b64[i + k] == '=' ? 0 : b64_value(b64[i + k]);
		for (int k = 0; k < 4; k++)
			assert_true(v[k] >= 0);
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		got[len++] = (uint8_t)(w >> 16);
		if (b64[i + 2] != '=')
			got[len++] = (uint8_t)(w >> 8);
		if (b64[i + 3] != '=')
			got[len++] = (uint8_t)w;
	}
	struct kis_seccomp_opts so = {.net = KIS_NET_OFF, .allow_sysv_ipc = true};
	int fd = -1;
	struct kis_error *e = NULL;
	assert_int_equal(kis_host_seccomp_fd(&so, &fd, &e), 0);
	uint8_t want[8 * 4096];
	ssize_t w = pread(fd, want, sizeof(want), 0);
	close(fd);
	assert_true(w > 0 && w % 8 == 0);
	assert_int_equal(len, (size_t)w);
	assert_memory_equal(got, want, len);
	free(got);
	json_decref(c);
}

static void test_mounts_per_root(void **state)
{
	(void)state;
	json_t *c = build(KIS_ROOT_HOST, KIS_NET_OFF, false);
	json_t *root = json_object_get(c, "root");
	assert_true(json_is_true(json_object_get(root, "readonly")));
	json_t *ws = mount_at(c, "/workspace");
	assert_non_null(ws);
	assert_string_equal(json_string_value(json_object_get(ws, "source")), "/store/ws/merged");
	assert_true(has_opt(ws, "nosuid") && has_opt(ws, "nodev"));
	json_t *usr = mount_at(c, "/usr");
	assert_non_null(usr);
	assert_true(has_opt(usr, "ro"));
	json_t *ag = mount_at(c, KIS_OCI_AGENT_PATH);
	assert_non_null(ag);
	assert_true(has_opt(ag, "ro"));
	assert_true(has_opt(mount_at(c, "/sys"), "ro"));
	json_decref(c);
	c = build(KIS_ROOT_WORKSPACE, KIS_NET_OFF, false);
	root = json_object_get(c, "root");
	assert_true(json_is_false(json_object_get(root, "readonly")));
	assert_null(mount_at(c, "/workspace"));
	assert_null(mount_at(c, "/usr"));
	assert_non_null(mount_at(c, "/proc"));
	assert_non_null(mount_at(c, "/tmp"));
	json_decref(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_namespaces_per_network_mode),
		cmocka_unit_test(test_process_has_nothing),
		cmocka_unit_test(test_resources_and_devices),
		cmocka_unit_test(test_mounts_per_root),
		cmocka_unit_test(test_crun_gets_the_compiled_policy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
