/* SPDX-License-Identifier: MIT */
/* Unit tests of the store: id checks at its boundary, import, clone,
 * reference entries, destroy, destination_exists, leftover sweep. */
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kis/store.h"
#include "store/locks.h"
#include "store/store_internal.h"

struct fixture {
	char dir[64];   /* mkdtemp: holds src/ and store/ */
	char src[128];
	char root[128];
	struct kis_store *s;
};

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p) < 0 ? 0 : 0;
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/kis-test-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->src, sizeof(f->src), "%s/src", f->dir);
	snprintf(f->root, sizeof(f->root), "%s/store", f->dir);
	assert_int_equal(mkdir(f->src, 0755), 0);
	write_text(f->src, "hello.txt", "hello\n");
	char sub[160];
	snprintf(sub, sizeof(sub), "%s/sub", f->src);
	assert_int_equal(mkdir(sub, 0750), 0);
	write_text(sub, "deep.txt", "deep\n");
	struct kis_error *err = NULL;
	assert_int_equal(kis_store_open(f->root, &f->s, &err), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct kis_workspace_info *v = NULL;
	size_t n = 0;
	/* Destroy what a failed test left, so no overlay mount outlives it. */
	if (kis_workspace_list(f->s, &v, &n, NULL) == 0)
		for (size_t i = 0; i < n; i++)
			(void)kis_workspace_destroy(f->s, v[i].id, NULL);
	free(v);
	kis_store_free(f->s);
	nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	free(f);
	return 0;
}

static bool exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool exists(const char *fmt, ...)
{
	char p[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	struct stat st;
	return lstat(p, &st) == 0;
}

static void import(struct fixture *f, char id[KIS_ID_BUFSZ])
{
	struct kis_error *err = NULL;
	int r = kis_base_import(f->s, f->src, NULL, id, &err);
	if (r < 0)
		fail_msg("import: %s", err->message);
	assert_int_equal(strncmp(id, "b-", 2), 0);
}

static size_t refcount(struct fixture *f, const char *base)
{
	struct kis_base_info *v = NULL;
	size_t n = 0, refs = (size_t)-1;
	assert_int_equal(kis_base_list(f->s, &v, &n, NULL), 0);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, base))
			refs = v[i].refs;
	free(v);
	return refs;
}

static void test_id_catalogue_refused(void **state)
{
	struct fixture *f = *state;
	char base[KIS_ID_BUFSZ];
	import(f, base);
	char long65[66];
	memset(long65, 'a', 65);
	long65[65] = '\0';
	/* A NUL byte ends a C string: "a\0b" arrives as "a". The CLI and
	 * the API therefore never see one; the charset check covers the rest. */
	const char *bad[] = {".", "..", "..0", "a/b", "", long65, "-a", "Abc", "../x", "a b", "w_1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kis_error *err = NULL;
		char out[KIS_ID_BUFSZ];
		assert_int_equal(kis_workspace_clone_ex(f->s, base, bad[i], KIS_CLONE_COPY, out, &err), -1);
		assert_int_equal(err->code, KIS_E_INVALID_ID);
		kis_error_free(err);
		err = NULL;
		assert_int_equal(kis_workspace_destroy(f->s, bad[i], &err), -1);
		assert_int_equal(err->code, KIS_E_INVALID_ID);
		kis_error_free(err);
		err = NULL;
		char *p = NULL;
		assert_int_equal(kis_workspace_path(f->s, bad[i], &p, &err), -1);
		assert_int_equal(err->code, KIS_E_INVALID_ID);
		kis_error_free(err);
		err = NULL;
		assert_int_equal(kis_workspace_clone_ex(f->s, bad[i], NULL, KIS_CLONE_COPY, out, &err), -1);
		assert_int_equal(err->code, KIS_E_INVALID_ID);
		kis_error_free(err);
	}
	/* Nothing was created by any refused call. */
	assert_int_equal(refcount(f, base), 0);
	assert_false(exists("%s/workspaces/..0", f->root));
}

static void clone_destroy(struct fixture *f, enum kis_clone_strategy st)
{
	char base[KIS_ID_BUFSZ], ws[KIS_ID_BUFSZ];
	import(f, base);
	struct kis_error *err = NULL;
	if (kis_workspace_clone_ex(f->s, base, NULL, st, ws, &err) < 0)
		fail_msg("clone: %s", err->message);
	assert_int_equal(strncmp(ws, "w-", 2), 0);
	char *path = NULL;
	assert_int_equal(kis_workspace_path(f->s, ws, &path, &err), 0);
	/* The workspace holds the base's files; a write stays in it. */
	char p[512];
	snprintf(p, sizeof(p), "%s/sub/deep.txt", path);
	FILE *fp = fopen(p, "r");
	assert_non_null(fp);
	char buf[16] = "";
	assert_non_null(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	assert_string_equal(buf, "deep\n");
	write_text(path, "hello.txt", "changed\n");
	snprintf(p, sizeof(p), "%s/bases/%s/tree/hello.txt", f->root, base);
	fp = fopen(p, "r");
	assert_non_null(fp);
	assert_non_null(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	assert_string_equal(buf, "hello\n");
	free(path);
	assert_int_equal(refcount(f, base), 1);
	assert_true(exists("%s/bases/%s/refs/%s", f->root, base, ws));
	assert_int_equal(kis_workspace_destroy(f->s, ws, &err), 0);
	assert_false(exists("%s/workspaces/%s", f->root, ws));
	assert_int_equal(refcount(f, base), 0);
	/* Idempotent. */
	assert_int_equal(kis_workspace_destroy(f->s, ws, &err), 0);
	assert_int_equal(kis_workspace_destroy(f->s, "w-never-existed", &err), 0);
	assert_int_equal(kis_base_remove(f->s, base, &err), 0);
	assert_false(exists("%s/bases/%s", f->root, base));
}

static void test_import_clone_destroy_copy(void **state)
{
	clone_destroy(*state, KIS_CLONE_COPY);
}

static void test_import_clone_destroy_auto(void **state)
{
	clone_destroy(*state, KIS_CLONE_AUTO);
}

static void test_import_clone_destroy_overlay(void **state)
{
	struct fixture *f = *state;
	const char *name = NULL;
	(void)kis_store_cow_strategy(f->s, &name);
	if (geteuid() != 0) {
		print_message("skipped: overlay clones need root\n");
		return;
	}
	clone_destroy(f, KIS_CLONE_OVERLAY);
}

static void test_refcount_entries(void **state)
{
	struct fixture *f = *state;
	char base[KIS_ID_BUFSZ], ws[3][KIS_ID_BUFSZ];
	struct kis_error *err = NULL;
	import(f, base);
	for (int i = 0; i < 3; i++)
		assert_int_equal(kis_workspace_clone_ex(f->s, base, NULL, KIS_CLONE_COPY, ws[i], &err), 0);
	assert_int_equal(refcount(f, base), 3);
	for (int i = 0; i < 3; i++)
		assert_true(exists("%s/bases/%s/refs/%s", f->root, base, ws[i]));
	/* Removal with clones: marked, kept, no new clones. */
	assert_int_equal(kis_base_remove(f->s, base, &err), 0);
	assert_true(exists("%s/bases/%s/removed", f->root, base));
	char extra[KIS_ID_BUFSZ];
	assert_int_equal(kis_workspace_clone_ex(f->s, base, NULL, KIS_CLONE_COPY, extra, &err), -1);
	assert_int_equal(err->code, KIS_E_NOT_FOUND);
	kis_error_free(err);
	err = NULL;
	assert_int_equal(kis_workspace_destroy(f->s, ws[0], &err), 0);
	assert_int_equal(kis_workspace_destroy(f->s, ws[1], &err), 0);
	assert_int_equal(refcount(f, base), 1);
	assert_true(exists("%s/bases/%s", f->root, base));
	assert_int_equal(kis_workspace_destroy(f->s, ws[2], &err), 0);
	/* Freed with its last clone. */
	assert_false(exists("%s/bases/%s", f->root, base));
}

static void test_destination_exists(void **state)
{
	struct fixture *f = *state;
	char base[KIS_ID_BUFSZ], ws[KIS_ID_BUFSZ];
	struct kis_error *err = NULL;
	import(f, base);
	assert_int_equal(kis_workspace_clone_ex(f->s, base, "mine", KIS_CLONE_COPY, ws, &err), 0);
	assert_string_equal(ws, "mine");
	assert_int_equal(kis_workspace_clone_ex(f->s, base, "mine", KIS_CLONE_COPY, ws, &err), -1);
	assert_int_equal(err->code, KIS_E_DESTINATION_EXISTS);
	kis_error_free(err);
	err = NULL;
	assert_int_equal(refcount(f, base), 1);

	/* A symlink planted where a workspace directory would go: refused,
	 * and the directory it points to is not written. */
	char victim[160], link[256];
	snprintf(victim, sizeof(victim), "%s/victim", f->dir);
	assert_int_equal(mkdir(victim, 0755), 0);
	snprintf(link, sizeof(link), "%s/workspaces/planted", f->root);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(kis_workspace_clone_ex(f->s, base, "planted", KIS_CLONE_COPY, ws, &err), -1);
	assert_int_equal(err->code, KIS_E_DESTINATION_EXISTS);
	kis_error_free(err);
	err = NULL;
	assert_false(exists("%s/hello.txt", victim));
	char *p = NULL;
	assert_int_equal(kis_workspace_path(f->s, "planted", &p, &err), -1);
	kis_error_free(err);
	err = NULL;
	/* Destroy removes the link itself, never what it points to. */
	assert_int_equal(kis_workspace_destroy(f->s, "planted", &err), 0);
	assert_false(exists("%s", link));
	assert_true(exists("%s", victim));
	/* An empty directory is a destination that exists, too. */
	snprintf(link, sizeof(link), "%s/workspaces/empty", f->root);
	assert_int_equal(mkdir(link, 0700), 0);
	assert_int_equal(kis_workspace_clone_ex(f->s, base, "empty", KIS_CLONE_COPY, ws, &err), -1);
	assert_int_equal(err->code, KIS_E_DESTINATION_EXISTS);
	kis_error_free(err);
	assert_int_equal(refcount(f, base), 1);
}

static void test_pinned_strategy_refused(void **state)
{
	struct fixture *f = *state;
	char base[KIS_ID_BUFSZ], ws[KIS_ID_BUFSZ];
	struct kis_error *err = NULL;
	import(f, base);
	const char *name = NULL;
	int cow = kis_store_cow_strategy(f->s, &name);
	assert_true(cow == 0 || cow == 1);
	assert_non_null(name);
	if (!strcmp(name, "reflink")) {
		print_message("skipped: this store has reflinks\n");
		return;
	}
	assert_int_equal(kis_workspace_clone_ex(f->s, base, NULL, KIS_CLONE_REFLINK, ws, &err), -1);
	assert_int_equal(err->code, KIS_E_PROFILE_UNSATISFIABLE);
	kis_error_free(err);
	assert_int_equal(refcount(f, base), 0);
}

static void test_import_refuses_fifo(void **state)
{
	struct fixture *f = *state;
	char p[256], id[KIS_ID_BUFSZ];
	snprintf(p, sizeof(p), "%s/sub/pipe", f->src);
	assert_int_equal(mkfifo(p, 0600), 0);
	struct kis_error *err = NULL;
	assert_int_equal(kis_base_import(f->s, f->src, NULL, id, &err), -1);
	assert_int_equal(err->code, KIS_E_INVALID_ARGUMENT);
	assert_non_null(strstr(err->message, "'sub/pipe' is a FIFO"));
	kis_error_free(err);
	/* No half-made base is left visible. */
	struct kis_base_info *v = NULL;
	size_t n = 9;
	assert_int_equal(kis_base_list(f->s, &v, &n, NULL), 0);
	assert_int_equal(n, 0);
	free(v);
}

/* kis_import_options.minted: called once with the id the import then
 * returns, before the base exists (a caller records it first); a
 * negative return stops the import with the callback's error, nothing
 * left visible. */
struct minted_seen {
	char id[KIS_ID_BUFSZ];
	int calls, fail, bases_then;
	struct kis_store *s;
};

static int on_minted(void *ctx, const char *id, struct kis_error **err)
{
	struct minted_seen *m = ctx;
	m->calls++;
	snprintf(m->id, sizeof(m->id), "%s", id);
	struct kis_base_info *v = NULL;
	size_t n = 0;
	if (kis_base_list(m->s, &v, &n, NULL) == 0)
		m->bases_then = (int)n;
	free(v);
	if (m->fail)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "recording failed");
	return 0;
}

static void test_import_tells_the_id_before_the_base_exists(void **state)
{
	struct fixture *f = *state;
	struct minted_seen m = {.s = f->s, .bases_then = -1};
	struct kis_import_options io = {.minted = on_minted, .minted_ctx = &m};
	char id[KIS_ID_BUFSZ];
	struct kis_error *err = NULL;
	assert_int_equal(kis_base_import(f->s, f->src, &io, id, &err), 0);
	assert_int_equal(m.calls, 1);
	assert_string_equal(m.id, id);
	assert_int_equal(m.bases_then, 0);
	m = (struct minted_seen){.s = f->s, .fail = 1};
	assert_int_equal(kis_base_import(f->s, f->src, &io, id, &err), -1);
	assert_non_null(strstr(err->message, "recording failed"));
	kis_error_free(err);
	struct kis_base_info *v = NULL;
	size_t n = 0;
	assert_int_equal(kis_base_list(f->s, &v, &n, NULL), 0);
	assert_int_equal(n, 1); /* the first import's only */
	free(v);
}

static void test_sweep_reclaims_dead_clone(void **state)
{
	struct fixture *f = *state;
	char base[KIS_ID_BUFSZ], p[512];
	import(f, base);
	/* What a clone killed after taking its reference leaves behind. */
	snprintf(p, sizeof(p), "%s/workspaces/.tmp-w-dead", f->root);
	assert_int_equal(mkdir(p, 0700), 0);
	char meta[128];
	snprintf(meta, sizeof(meta), "base=%s\nstrategy=copy\n", base);
	write_text(p, "meta", meta);
	snprintf(p, sizeof(p), "%s/bases/%s/refs/w-dead", f->root, base);
	write_text("/", p + 1, "");
	assert_int_equal(refcount(f, base), 1);
	struct kis_store *s2 = NULL;
	assert_int_equal(kis_store_open(f->root, &s2, NULL), 0);
	kis_store_free(s2);
	assert_false(exists("%s/workspaces/.tmp-w-dead", f->root));
	assert_int_equal(refcount(f, base), 0);
}

static void test_workspace_info_and_cow(void **state)
{
	struct fixture *f = *state;
	char base[KIS_ID_BUFSZ], ws[KIS_ID_BUFSZ];
	struct kis_error *err = NULL;
	import(f, base);
	const char *name = NULL;
	int cow = kis_store_cow_strategy(f->s, &name);
	assert_int_equal(cow, strcmp(name, "copy") ? 1 : 0);
	/* Auto takes the strategy the store reports. */
	assert_int_equal(kis_workspace_clone(f->s, base, NULL, ws, &err), 0);
	struct kis_workspace_info wi;
	assert_int_equal(kis_workspace_info(f->s, ws, &wi, &err), 0);
	assert_string_equal(wi.id, ws);
	assert_string_equal(wi.base, base);
	assert_string_equal(kis_clone_strategy_name(wi.strategy), name);
	assert_int_equal(kis_workspace_destroy(f->s, ws, &err), 0);
	assert_int_equal(kis_workspace_info(f->s, ws, &wi, &err), -1);
	assert_int_equal(err->code, KIS_E_NOT_FOUND);
	kis_error_free(err);
	err = NULL;
	enum kis_clone_strategy st;
	assert_int_equal(kis_clone_strategy_parse("overlayfs", &st, &err), -1);
	assert_int_equal(err->code, KIS_E_INVALID_ARGUMENT);
	kis_error_free(err);
}

/* A child forked without exec that calls kis_store_locks_drop keeps no
 * flock of the store's: the lock goes with the parent's close although
 * the child lives on (flock(2): the lock is the open file description's,
 * which the child shares until it closes it). A lock closed is off the
 * list: a later child leaves a descriptor that reuses its number open. */
static int forked_drop(int check_fd, int *go_w)
{
	int ready[2], go[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		close(ready[0]);
		close(go[1]); /* EOF on go once the parent closes its end */
		kis_store_locks_drop();
		char b = fcntl(check_fd, F_GETFD) < 0 && errno == EBADF ? 'c' : 'o';
		if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	char b = 0;
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	*go_w = go[1];
	return b;
}

static void test_forked_child_drops_the_store_locks(void **state)
{
	struct fixture *f = *state;
	int fd = store_mkfile_locked(f->s, f->s->owners_fd, "s-lock-test");
	assert_true(fd >= 0);
	int go = -1;
	pid_t before = getpid();
	assert_int_equal(forked_drop(fd, &go), 'c');
	assert_int_equal(getpid(), before);
	store_lock_close(fd);
	/* the child still runs: the lock is free all the same */
	int other = openat(f->s->owners_fd, "s-lock-test", O_RDONLY | O_CLOEXEC);
	assert_true(other >= 0);
	assert_int_equal(flock(other, LOCK_EX | LOCK_NB), 0);
	close(go);
	int st;
	assert_true(wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* other may well have fd's number: off the list, it stays open */
	assert_int_equal(forked_drop(other, &go), 'o');
	close(go);
	assert_true(wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(other);
	assert_int_equal(unlinkat(f->s->owners_fd, "s-lock-test", 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_id_catalogue_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forked_child_drops_the_store_locks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_import_clone_destroy_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_import_clone_destroy_auto, setup, teardown),
		cmocka_unit_test_setup_teardown(test_import_clone_destroy_overlay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refcount_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_import_tells_the_id_before_the_base_exists, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_destination_exists, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pinned_strategy_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_import_refuses_fifo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_reclaims_dead_clone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_workspace_info_and_cow, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
