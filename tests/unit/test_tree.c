/* SPDX-License-Identifier: MIT */
/* Tests of src/core/tree.c, the one tree remover: a tree deeper than the
 * descriptor limit, links never followed, unreadable directories, and a
 * mount inside the tree never crossed (in a private mount namespace the
 * test makes, never over a host path). */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/tree.h"

static char *mktop(void)
{
	char t[] = "/tmp/kis-tree-XXXXXX";
	assert_non_null(mkdtemp(t));
	return strdup(t);
}

static bool exists(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

static void test_deeper_than_the_fd_limit(void **state)
{
	(void)state;
	char *top = mktop();
	int fd = open(top, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	/* 3000 levels: each mkdirat/openat goes one down, then the fd up is dropped */
	int cur = dup(fd);
	for (int i = 0; i < 3000; i++) {
		assert_int_equal(mkdirat(cur, "d", 0700), 0);
		int next = openat(cur, "d", O_RDONLY | O_DIRECTORY);
		assert_true(next >= 0);
		if (i % 500 == 0) {
			int f = openat(next, "file", O_WRONLY | O_CREAT, 0600);
			close(f);
		}
		close(cur);
		cur = next;
	}
	close(cur);
	struct rlimit old, low = {.rlim_cur = 32, .rlim_max = 0};
	getrlimit(RLIMIT_NOFILE, &old);
	low.rlim_max = old.rlim_max;
	setrlimit(RLIMIT_NOFILE, &low);
	struct kis_error *e = NULL;
	int r = kis_tree_remove(fd, "d", &e);
	setrlimit(RLIMIT_NOFILE, &old);
	assert_int_equal(r, 0);
	assert_null(e);
	close(fd);
	assert_int_equal(rmdir(top), 0); /* only d was under it */
	free(top);
}

static void test_links_are_removed_not_followed(void **state)
{
	(void)state;
	char *top = mktop();
	char outside[300], tree[300], p[400];
	snprintf(outside, sizeof(outside), "%s/outside", top);
	snprintf(tree, sizeof(tree), "%s/tree", top);
	assert_int_equal(mkdir(outside, 0700), 0);
	snprintf(p, sizeof(p), "%s/keep", outside);
	close(open(p, O_WRONLY | O_CREAT, 0600));
	assert_int_equal(mkdir(tree, 0700), 0);
	snprintf(p, sizeof(p), "%s/link", tree);
	assert_int_equal(symlink(outside, p), 0);
	snprintf(p, sizeof(p), "%s/locked", tree);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/locked/inner", tree);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/locked", tree);
	assert_int_equal(chmod(p, 0), 0); /* unreadable: made 0700 to empty it */
	struct kis_error *e = NULL;
	assert_int_equal(kis_tree_remove(AT_FDCWD, tree, &e), 0);
	assert_false(exists(tree));
	snprintf(p, sizeof(p), "%s/keep", outside);
	assert_true(exists(p)); /* the link's target is untouched */
	kis_tree_remove_path(top);
	assert_false(exists(top));
	free(top);
}

static void test_missing_is_success(void **state)
{
	(void)state;
	struct kis_error *e = NULL;
	assert_int_equal(kis_tree_remove(AT_FDCWD, "/tmp/kis-tree-does-not-exist", &e), 0);
}

/* In a child with a private mount namespace: a tmpfs inside the tree is
 * refused with busy, and what lies under it is untouched. */
static void test_a_mount_is_never_crossed(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip(); /* a mount namespace needs CAP_SYS_ADMIN */
		return;
	}
	char *top = mktop();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(2);
		char m[300], f[400];
		snprintf(m, sizeof(m), "%s/mnt", top);
		if (mkdir(m, 0700) < 0 || mount("tmpfs", m, "tmpfs", 0, NULL) < 0)
			_exit(3);
		snprintf(f, sizeof(f), "%s/precious", m);
		close(open(f, O_WRONLY | O_CREAT, 0600));
		struct kis_error *e = NULL;
		int r = kis_tree_remove(AT_FDCWD, top, &e);
		bool busy = r < 0 && e && e->code == KIS_E_BUSY;
		bool kept = access(f, F_OK) == 0;
		kis_error_free(e);
		umount2(m, MNT_DETACH);
		_exit(busy && kept ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	kis_tree_remove_path(top);
	assert_false(exists(top));
	free(top);
}

/* A bind of a directory of the same file system (the same st_dev as the
 * tree): its root is a mount root all the same, never deleted through. */
static void test_a_same_fs_bind_is_never_crossed(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip(); /* a mount namespace needs CAP_SYS_ADMIN */
		return;
	}
	char *top = mktop(), *other = mktop();
	char f[400];
	snprintf(f, sizeof(f), "%s/precious", other);
	close(open(f, O_WRONLY | O_CREAT, 0600));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(2);
		char m[300];
		snprintf(m, sizeof(m), "%s/bind", top);
		if (mkdir(m, 0700) < 0 || mount(other, m, NULL, MS_BIND, NULL) < 0)
			_exit(3);
		struct kis_error *e = NULL;
		int r = kis_tree_remove(AT_FDCWD, top, &e);
		bool busy = r < 0 && e && e->code == KIS_E_BUSY;
		kis_error_free(e);
		umount2(m, MNT_DETACH);
		_exit(busy ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_true(exists(f)); /* the bound directory's file is still there */
	kis_tree_remove_path(top);
	kis_tree_remove_path(other);
	assert_false(exists(top));
	free(top);
	free(other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deeper_than_the_fd_limit),
		cmocka_unit_test(test_links_are_removed_not_followed),
		cmocka_unit_test(test_missing_is_success),
		cmocka_unit_test(test_a_mount_is_never_crossed),
		cmocka_unit_test(test_a_same_fs_bind_is_never_crossed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
