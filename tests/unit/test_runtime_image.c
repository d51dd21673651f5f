/* SPDX-License-Identifier: MIT */
/* Tests of the microvm tier's kept sandbox images (src/runtime/mvm_image.c):
 * a kept base serves a pod only when its tree is the bundle's, byte for
 * byte, whatever else the two share. */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kept_image_is_not_taken_for_a_tree_of_the_same_sizes_and_times),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
