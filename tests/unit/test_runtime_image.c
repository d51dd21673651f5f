/* SPDX-License-Identifier: MIT */
/* Tests of the microvm tier's kept sandbox images (src/runtime/mvm_image.c):
 * a kept base serves a pod only when its tree is the bundle's, byte for
 * byte, whatever else the two share. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/mvm_image.h"

static char top[64];

static void path(char *out, size_t n, const char *tree, const char *rel)
{
	snprintf(out, n, "%s/%s%s%s", top, tree, *rel ? "/" : "", rel);
}

/* every entry's times fixed: a reproducible image's, the same in each tree */
static void stamp(const char *p)
{
	struct timespec ts[2] = {{1000000, 0}, {1000000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static void put(const char *tree, const char *rel, const char *data, mode_t mode)
{
	char p[256];
	path(p, sizeof(p), tree, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	stamp(p);
}

/* The tree a sandbox image holds, in tree: a directory, a file, a link, a
 * hard link, an extended attribute. */
static void image(const char *tree)
{
	char p[256], q[256];
	path(p, sizeof(p), tree, "");
	assert_int_equal(mkdir(p, 0755), 0);
	path(p, sizeof(p), tree, "bin");
	assert_int_equal(mkdir(p, 0755), 0);
	put(tree, "bin/busybox", "elf-1.36", 0755);
	path(p, sizeof(p), tree, "bin/sh");
	assert_int_equal(symlink("busybox", p), 0);
	stamp(p);
	path(p, sizeof(p), tree, "bin/busybox");
	path(q, sizeof(q), tree, "bin/ash");
	assert_int_equal(link(p, q), 0);
	put(tree, "bin/ping", "ping", 0755);
	path(p, sizeof(p), tree, "bin/ping");
	assert_int_equal(setxattr(p, "user.kis-test", "net_raw", 7, 0), 0);
	stamp(p);
}

static bool same(const char *a, const char *b)
{
	char pa[256], pb[256];
	path(pa, sizeof(pa), a, "");
	path(pb, sizeof(pb), b, "");
	bool s = true;
	struct kis_error *err = NULL;
	assert_int_equal(krt_mvm_same_tree(pa, pb, &s, &err), 0);
	return s;
}

/* The defect this guards against: a kept image taken for another tree
 * that shares its names, sizes and times (a reproducible build's
 * mtimes), so that a pod would run the wrong image's files. */
static void test_kept_image_is_not_taken_for_a_tree_of_the_same_sizes_and_times(void **state)
{
	(void)state;
	snprintf(top, sizeof(top), "/tmp/krt-image-unit-XXXXXX");
	assert_non_null(mkdtemp(top));
	image("a");
	image("b");
	assert_true(same("a", "b"));
	/* one byte, same size, same time */
	image("bytes");
	put("bytes", "bin/busybox", "elf-1.37", 0755);
	assert_false(same("a", "bytes"));
	/* a mode */
	image("mode");
	put("mode", "bin/ping", "ping", 04755);
	assert_false(same("a", "mode"));
	/* a link's target of the same length */
	image("link");
	char p[256];
	path(p, sizeof(p), "link", "bin/sh");
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink("busyboy", p), 0);
	stamp(p);
	assert_false(same("a", "link"));
	/* an extended attribute's value */
	image("xattr");
	path(p, sizeof(p), "xattr", "bin/ping");
	assert_int_equal(setxattr(p, "user.kis-test", "net_adm", 7, 0), 0);
	assert_false(same("a", "xattr"));
	/* a hard link made a copy: the same bytes, another link count */
	image("nlink");
	path(p, sizeof(p), "nlink", "bin/ash");
	assert_int_equal(unlink(p), 0);
	put("nlink", "bin/ash", "elf-1.36", 0755);
	assert_false(same("a", "nlink"));
	/* one more entry, in either tree */
	image("extra");
	put("extra", "bin/more", "", 0644);
	assert_false(same("a", "extra"));
	assert_false(same("extra", "a"));
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	assert_int_equal(system(cmd), 0);
}

static int count_kept(int mvm)
{
	char p[256];
	snprintf(p, sizeof(p), "/proc/self/fd/%d/.images", mvm);
	int n = 0;
	DIR *d = opendir(p);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* krt_mvm_minted: what was told, and whether what it named existed then */
struct told {
	struct kis_store *st;
	int n, existed;
	char what[4][16], id[4][KIS_ID_BUFSZ];
};

static int on_minted(void *ctx, const char *what, const char *id, struct kis_error **err)
{
	(void)err;
	struct told *t = ctx;
	assert_true(t->n < 4);
	snprintf(t->what[t->n], sizeof(t->what[0]), "%s", what);
	snprintf(t->id[t->n], sizeof(t->id[0]), "%s", id);
	t->n++;
	char *p = NULL;
	struct kis_error *e = NULL;
	int r = strcmp(what, "workspace") == 0 ? kis_workspace_path(t->st, id, &p, &e)
					       : kis_base_path(t->st, id, &p, &e);
	free(p);
	kis_error_free(e);
	t->existed += r == 0;
	return 0;
}

/* Pods of one image share one kept base (the pod's own base is then "",
 * not removed with it); an image beyond the kept ones evicts the least
 * recently used, whose base goes with its last workspace. */
static void test_pods_of_one_image_share_a_kept_base_and_the_oldest_is_evicted(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* an OS image's import (device nodes) needs root */
	snprintf(top, sizeof(top), "/tmp/krt-image-unit-XXXXXX");
	assert_non_null(mkdtemp(top));
	char sp[256], mp[256];
	path(sp, sizeof(sp), "store", "");
	path(mp, sizeof(mp), "mvm", "");
	assert_int_equal(mkdir(mp, 0700), 0);
	int mvm = open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(mvm >= 0);
	struct kis_store *st = NULL;
	struct kis_error *err = NULL;
	assert_int_equal(kis_store_open(sp, &st, &err), 0);
	char base[KIS_ID_BUFSZ], ws[KIS_ID_BUFSZ], ws2[KIS_ID_BUFSZ], kept[KIS_ID_BUFSZ];
	char rootfs[256];
	image("pause");
	path(rootfs, sizeof(rootfs), "pause", "");
	/* the first pod's ids told before what they name exists: the
	 * workspace's, then the imported base's */
	struct told tl = {.st = st};
	struct krt_mvm_minted note = {.fn = on_minted, .ctx = &tl};
	assert_int_equal(krt_mvm_image_clone(st, mvm, rootfs, &note, base, ws, &err), 0);
	assert_string_equal(base, ""); /* kept: not the pod's */
	assert_int_equal(tl.n, 2);
	assert_string_equal(tl.what[0], "workspace");
	assert_string_equal(tl.id[0], ws);
	assert_string_equal(tl.what[1], "image_base");
	assert_int_equal(tl.existed, 0);
	struct kis_workspace_info wi;
	assert_int_equal(kis_workspace_info(st, ws, &wi, &err), 0);
	snprintf(kept, sizeof(kept), "%s", wi.base);
	assert_string_equal(tl.id[1], kept);
	assert_true(krt_mvm_image_kept(mvm, kept));
	assert_false(krt_mvm_image_kept(mvm, ws));
	assert_false(krt_mvm_image_kept(mvm, "../mvm"));
	/* the second pod of the image: the same base, no import */
	assert_int_equal(krt_mvm_image_clone(st, mvm, rootfs, NULL, base, ws2, &err), 0);
	assert_string_equal(base, "");
	assert_int_equal(kis_workspace_info(st, ws2, &wi, &err), 0);
	assert_string_equal(wi.base, kept);
	assert_int_equal(count_kept(mvm), 1);
	assert_int_equal(kis_workspace_destroy(st, ws2, &err), 0);
	/* its last use an hour ago: older than the others (file times can be
	 * a clock tick coarse, and the imports below take milliseconds) */
	char q[512];
	snprintf(q, sizeof(q), "%s/.images/%s", mp, kept);
	struct timespec hour_ago[2] = {{0, UTIME_OMIT}, {time(NULL) - 3600, 0}};
	assert_int_equal(utimensat(AT_FDCWD, q, hour_ago, 0), 0);
	/* KRT_MVM_IMAGES_KEPT other images, one pod each, ended: the first
	 * image is the least recently used, evicted and freed (no clone
	 * holds it but ws) once ws goes */
	for (int i = 0; i < KRT_MVM_IMAGES_KEPT; i++) {
		char t[32], w[KIS_ID_BUFSZ];
		snprintf(t, sizeof(t), "other%d", i);
		image(t);
		put(t, "bin/busybox", t, 0755);
		path(rootfs, sizeof(rootfs), t, "");
		assert_int_equal(krt_mvm_image_clone(st, mvm, rootfs, NULL, base, w, &err), 0);
		assert_string_equal(base, "");
		assert_int_equal(kis_workspace_destroy(st, w, &err), 0);
	}
	assert_int_equal(count_kept(mvm), KRT_MVM_IMAGES_KEPT);
	assert_int_equal(access(q, F_OK), -1);
	assert_int_equal(kis_workspace_destroy(st, ws, &err), 0);
	snprintf(q, sizeof(q), "%s/bases/%s", sp, kept);
	assert_int_equal(access(q, F_OK), -1);
	kis_store_free(st);
	close(mvm);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kept_image_is_not_taken_for_a_tree_of_the_same_sizes_and_times),
		cmocka_unit_test(test_pods_of_one_image_share_a_kept_base_and_the_oldest_is_evicted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
