/* SPDX-License-Identifier: MIT */
/* Tests of the microvm tier's pod recognition (src/runtime/mvm_pod.c): the
 * CRI annotations parsed into an allowlist, the namespace paths a role may
 * join, and the comparison of an app's rootfs with its pod's. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/mvm_image.h"
#include "runtime/mvm_pod.h"

static int parse(const char *type, const char *sandbox, const char *id, struct krt_pod *pod,
		 struct kis_error **err)
{
	struct krt_model m;
	krt_model_init(&m);
	m.doc = json_pack("{s:{}}", "annotations");
	json_t *ann = json_object_get(m.doc, "annotations");
	if (type)
		json_object_set_new(ann, KRT_ANN_CRI_TYPE, json_string(type));
	if (sandbox)
		json_object_set_new(ann, KRT_ANN_CRI_SANDBOX, json_string(sandbox));
	int r = krt_pod_parse(&m, id, pod, err);
	json_decref(m.doc);
	return r;
}

static void refused_(int r, struct kis_error *err, const char *named)
{
	assert_int_equal(r, -1);
	assert_non_null(err);
	assert_int_equal(err->code, KIS_E_PROFILE_UNSATISFIABLE);
	if (!strstr(err->message, named))
		fail_msg("'%s' does not name '%s'", err->message, named);
	kis_error_free(err);
}

/* the call first, then its error (an argument's order is unspecified) */
#define refused(call, e, named)                   \
	do {                                       \
		int r_ = (call);                   \
		refused_(r_, e, named);            \
	} while (0)

static void test_annotations_are_an_allowlist(void **state)
{
	(void)state;
	struct krt_pod pod;
	struct kis_error *err = NULL;
	assert_int_equal(parse(NULL, NULL, "c1", &pod, &err), 0);
	assert_int_equal(pod.role, KRT_POD_NONE);
	assert_int_equal(parse("sandbox", "p1", "p1", &pod, &err), 0);
	assert_int_equal(pod.role, KRT_POD_SANDBOX);
	assert_string_equal(pod.sandbox, "p1");
	assert_int_equal(parse("container", "p1", "c1", &pod, &err), 0);
	assert_int_equal(pod.role, KRT_POD_APP);
	refused(parse("container", NULL, "c1", &pod, &err), err, "without " KRT_ANN_CRI_SANDBOX);
	err = NULL;
	refused(parse(NULL, "p1", "c1", &pod, &err), err, "without " KRT_ANN_CRI_TYPE);
	err = NULL;
	refused(parse("pause", "p1", "c1", &pod, &err), err, "'pause'");
	err = NULL;
	refused(parse("container", "../p1", "c1", &pod, &err), err, "is not a container id");
	err = NULL;
	refused(parse("sandbox", "p2", "p1", &pod, &err), err, "is not its own id");
	err = NULL;
	refused(parse("container", "c1", "c1", &pod, &err), err, "is its own id");
}

static void test_namespace_paths_by_role(void **state)
{
	(void)state;
	struct krt_pod pod = {.role = KRT_POD_NONE};
	struct kis_error *err = NULL;
	refused(krt_pod_ns_path_ok(&pod, "network", "/proc/1/ns/net", &err), err,
		"a host namespace does not reach the guest");
	pod.role = KRT_POD_SANDBOX;
	err = NULL;
	assert_int_equal(krt_pod_ns_path_ok(&pod, "network", "/var/run/netns/cni-x", &err), 0);
	refused(krt_pod_ns_path_ok(&pod, "ipc", "/proc/9/ns/ipc", &err), err, "ipc namespace");
	pod.role = KRT_POD_APP;
	err = NULL;
	for (int k = 0; k < KRT_POD_NS; k++)
		assert_int_equal(krt_pod_ns_path_ok(&pod, krt_pod_ns_type[k], "/proc/9/ns/x", &err), 0);
	refused(krt_pod_ns_path_ok(&pod, "pid", "/proc/9/ns/pid", &err), err, "pid namespace");
}

static char top[64];

static void put(const char *rel, const char *data)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", top, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(data, f);
	fclose(f);
	struct timespec ts[2] = {{1000000, 0}, {1000000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static void dir(const char *rel)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", top, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void link_(const char *target, const char *rel)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", top, rel);
	assert_int_equal(symlink(target, p), 0);
	struct timespec ts[2] = {{1000000, 0}, {1000000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static bool same(const char *a, const char *b)
{
	char pa[128], pb[128];
	snprintf(pa, sizeof(pa), "%s/%s", top, a);
	snprintf(pb, sizeof(pb), "%s/%s", top, b);
	bool s = false;
	struct kis_error *err = NULL;
	assert_int_equal(krt_mvm_same_tree(pa, pb, &s, &err), 0);
	return s;
}

static void test_an_apps_tree_is_compared_entry_by_entry(void **state)
{
	(void)state;
	snprintf(top, sizeof(top), "/tmp/krt-pod-unit-XXXXXX");
	assert_non_null(mkdtemp(top));
	const char *trees[] = {"a", "b", "size", "link", "extra"};
	for (size_t i = 0; i < sizeof(trees) / sizeof(*trees); i++) {
		char t[64];
		dir(trees[i]);
		snprintf(t, sizeof(t), "%s/bin", trees[i]);
		dir(t);
		snprintf(t, sizeof(t), "%s/bin/busybox", trees[i]);
		put(t, strcmp(trees[i], "size") == 0 ? "elf!" : "elf");
		snprintf(t, sizeof(t), "%s/bin/sh", trees[i]);
		link_(strcmp(trees[i], "link") == 0 ? "/host/sh" : "busybox", t);
	}
	put("extra/bin/more", "x");
	/* the roots' own times differ (an overlay's root is its upper dir) */
	char p[128];
	snprintf(p, sizeof(p), "%s/b", top);
	struct timespec ts[2] = {{5, 0}, {5, 0}};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
	assert_true(same("a", "b"));
	assert_false(same("a", "size"));
	assert_false(same("a", "link"));
	assert_false(same("a", "extra"));
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_annotations_are_an_allowlist),
		cmocka_unit_test(test_namespace_paths_by_role),
		cmocka_unit_test(test_an_apps_tree_is_compared_entry_by_entry),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
