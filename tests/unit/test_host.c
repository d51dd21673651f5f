/* SPDX-License-Identifier: MIT */
/* Tests of src/backends/host/common.c: environment edits, private
 * directories (never an existing one, removal never through a link), the
 * workspace given to the sandbox user, and the cached seccomp program. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/host/common.h"
#include "core/tree.h"
#include "confine/confine.h"

static void free_env(char **e)
{
	for (size_t i = 0; e && e[i]; i++)
		free(e[i]);
	free(e);
}

static void test_env_set(void **state)
{
	(void)state;
	char **env = NULL;
	assert_int_equal(kis_host_env_set(&env, "A", "1", false), 0);
	assert_int_equal(kis_host_env_set(&env, "B", "2", false), 0);
	assert_int_equal(kis_host_env_set(&env, "A", "3", false), 0); /* kept */
	assert_string_equal(kis_host_env_get(env, "A"), "1");
	assert_int_equal(kis_host_env_set(&env, "A", "4", true), 0); /* replaced */
	assert_string_equal(kis_host_env_get(env, "A"), "4");
	assert_string_equal(kis_host_env_get(env, "B"), "2");
	assert_null(kis_host_env_get(env, "AB"));
	assert_null(env[2]);
	free_env(env);
}

static void test_private_dir_is_exclusive_and_removed_without_following(void **state)
{
	(void)state;
	char name[64], outside[] = "/tmp/kis-test-outside-XXXXXX";
	snprintf(name, sizeof(name), "unit-%d", (int)getpid());
	assert_non_null(mkdtemp(outside));
	char victim[128];
	snprintf(victim, sizeof(victim), "%s/victim", outside);
	int vfd = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(vfd >= 0);
	close(vfd);

	char *dir = NULL;
	struct kis_error *e = NULL;
	assert_int_equal(kis_host_private_dir(name, 65534, 65534, &dir, &e), 0);
	struct stat st;
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	/* a second one of the same name is refused, not reused */
	char *again = NULL;
	assert_true(kis_host_private_dir(name, 65534, 65534, &again, &e) < 0);
	assert_int_equal(e->sys_errno, EEXIST);
	kis_error_free(e);
	e = NULL;

	/* what a sandbox could leave: nested dirs and a link to a host dir */
	char p[256];
	snprintf(p, sizeof(p), "%s/a/b", dir);
	char a[256];
	snprintf(a, sizeof(a), "%s/a", dir);
	assert_int_equal(mkdir(a, 0700), 0);
	assert_int_equal(mkdir(p, 0000), 0);
	snprintf(p, sizeof(p), "%s/link", dir);
	assert_int_equal(symlink(outside, p), 0);
	kis_tree_remove_path(dir);
	assert_int_equal(lstat(dir, &st), -1);
	assert_int_equal(access(victim, F_OK), 0); /* the link's target is intact */
	free(dir);
	unlink(victim);
	rmdir(outside);
}

static void test_private_dir_refuses_a_planted_link(void **state)
{
	(void)state;
	char name[64], path[128];
	snprintf(name, sizeof(name), "unit-link-%d", (int)getpid());
	snprintf(path, sizeof(path), "/tmp/kis-%s", name);
	assert_int_equal(symlink("/", path), 0);
	char *dir = NULL;
	struct kis_error *e = NULL;
	assert_true(kis_host_private_dir(name, 65534, 65534, &dir, &e) < 0);
	kis_error_free(e);
	unlink(path);
}

/* top(mode)/store/workspaces/w-1/tree, all 0700 below top */
static void make_store(char *top, mode_t top_mode, char *ws, size_t len)
{
	assert_non_null(mkdtemp(top));
	assert_int_equal(chmod(top, top_mode), 0);
	const char *parts[] = {"/store", "/store/workspaces", "/store/workspaces/w-1",
			       "/store/workspaces/w-1/tree"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(ws, len, "%s%s", top, parts[i]);
		assert_int_equal(mkdir(ws, 0700), 0);
	}
}

static void rm_store(const char *top)
{
	char p[256];
	const char *parts[] = {"/store/workspaces/w-1/tree", "/store/workspaces/w-1",
			       "/store/workspaces", "/store", ""};
	for (size_t i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s%s", top, parts[i]);
		rmdir(p);
	}
}

static void test_workspace_made_reachable_inside_the_store_only(void **state)
{
	(void)state;
	char top[] = "/tmp/kis-test-reach-XXXXXX", ws[256];
	make_store(top, 0700, ws, sizeof(ws));
	struct kis_error *e = NULL;
	/* above the store: not ours to open, refused naming the field */
	assert_true(kis_host_make_reachable(ws, &e) < 0);
	assert_int_equal(e->code, KIS_E_PROFILE_UNSATISFIABLE);
	assert_non_null(strstr(e->message, "workspace"));
	kis_error_free(e);
	e = NULL;
	struct stat st;
	assert_int_equal(stat(top, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700); /* left alone */

	assert_int_equal(chmod(top, 0711), 0);
	if (geteuid() != 0) {
		rm_store(top);
		skip(); /* the gate's group needs chown */
	}
	char p[256];
	/* a store an earlier build opened to others is closed at the gate */
	snprintf(p, sizeof(p), "%s/store", top);
	assert_int_equal(chmod(p, 0711), 0);
	assert_int_equal(kis_host_make_reachable(ws, &e), 0);
	/* the gate, the store and its workspaces directory: the sandbox
	 * user's own group may search it, no other user */
	const char *gate[] = {"/store", "/store/workspaces"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s%s", top, gate[i]);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0710);
		assert_int_equal(st.st_gid, KIS_REACH_GID);
	}
	/* behind it the workspace's directory keeps search for others (the
	 * id-mapped view walks in by it); the workspace itself is left alone */
	snprintf(p, sizeof(p), "%s/store/workspaces/w-1", top);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0701);
	assert_int_equal(stat(ws, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	rm_store(top);
}

/* issue 41: the sandbox user is shown the workspace through an idmapped
 * view (its owner and the user trade ids) instead of a chown of every
 * entry, which on an overlay clone copied the whole base up. Through the
 * view the user writes the owner's file and makes a new one; on disk both
 * stay the owner's, and a link in the tree is never followed. */
static void test_workspace_view_changes_no_file(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char top[] = "/tmp/kis-test-view-XXXXXX";
	assert_non_null(mkdtemp(top));
	assert_int_equal(chmod(top, 0755), 0);
	char f[256], l[256], n[256];
	snprintf(f, sizeof(f), "%s/file", top);
	snprintf(l, sizeof(l), "%s/link", top);
	snprintf(n, sizeof(n), "%s/new", top);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink("/etc/hostname", l), 0);
	struct kis_error *e = NULL;
	int view = -1;
	if (kis_host_workspace_view(top, NULL, NULL, 65534, 65534, &view, &e) < 0) {
		kis_error_free(e); /* a kernel without idmapped mounts of this fs */
		unlink(l);
		unlink(f);
		rmdir(top);
		skip();
	}
	assert_true(view >= 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (kis_idmap_view_enter(view, top) < 0 || chdir(top) < 0 || setgroups(0, NULL) < 0 ||
		    setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		struct stat st;
		if (stat("file", &st) < 0 || st.st_uid != 65534)
			_exit(3); /* the owner's file is seen as the user's */
		int w = open("file", O_WRONLY | O_APPEND | O_CLOEXEC);
		int c = open("new", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		_exit(w >= 0 && c >= 0 && write(w, "x", 1) == 1 ? 0 : 4);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(view);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct stat st;
	assert_int_equal(stat(f, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_size, 1);
	assert_int_equal(stat(n, &st), 0);
	assert_int_equal(st.st_uid, 0); /* stored as the owner's */
	assert_int_equal(lstat(l, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(stat("/etc/hostname", &st), 0);
	assert_int_equal(st.st_uid, 0);
	unlink(n);
	unlink(l);
	unlink(f);
	rmdir(top);
}

static char *read_all(int fd, size_t *n)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	char *b = malloc((size_t)st.st_size);
	assert_non_null(b);
	assert_int_equal(pread(fd, b, (size_t)st.st_size, 0), st.st_size);
	*n = (size_t)st.st_size;
	return b;
}

static void test_cached_seccomp_program_is_the_compiled_one(void **state)
{
	(void)state;
	struct kis_seccomp_opts o = {.net = KIS_NET_OFF};
	struct kis_error *e = NULL;
	int ref = -1, a = -1, b = -1;
	assert_int_equal(kis_seccomp_export_bpf_fd(&o, &ref, &e), 0);
	assert_int_equal(kis_host_seccomp_fd(&o, &a, &e), 0); /* fills the cache */
	assert_int_equal(kis_host_seccomp_fd(&o, &b, &e), 0); /* from it */
	size_t nr, na, nb;
	char *r = read_all(ref, &nr), *x = read_all(a, &na), *y = read_all(b, &nb);
	assert_int_equal(nr, na);
	assert_int_equal(nr, nb);
	assert_memory_equal(r, x, nr);
	assert_memory_equal(r, y, nr);
	/* sealed like the original: nobody holding it can change the program */
	int seals = fcntl(b, F_GET_SEALS);
	assert_true(seals & F_SEAL_WRITE);
	assert_true(seals & F_SEAL_SEAL);
	assert_true(fcntl(b, F_GETFD) & FD_CLOEXEC);
	/* another variant is another program */
	struct kis_seccomp_opts o2 = {.net = KIS_NET_LOOPBACK, .allow_sysv_ipc = true};
	int c = -1;
	assert_int_equal(kis_host_seccomp_fd(&o2, &c, &e), 0);
	size_t nc;
	char *z = read_all(c, &nc);
	assert_true(nc != nr || memcmp(r, z, nr) != 0);
	free(r);
	free(x);
	free(y);
	free(z);
	close(ref);
	close(a);
	close(b);
	close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_set),
		cmocka_unit_test(test_private_dir_is_exclusive_and_removed_without_following),
		cmocka_unit_test(test_private_dir_refuses_a_planted_link),
		cmocka_unit_test(test_workspace_made_reachable_inside_the_store_only),
		cmocka_unit_test(test_workspace_view_changes_no_file),
		cmocka_unit_test(test_cached_seccomp_program_is_the_compiled_one),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
