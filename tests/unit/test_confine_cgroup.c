/* SPDX-License-Identifier: MIT */
/* Tests of src/confine/cgroup.c on the running host: a memory balloon ends
 * in an OOM kill the events show, a fork bomb hits pids.max, nothing stays. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "confine/confine.h"
#include "kis/backend.h"

/* Every test creates at most one group, kept here so teardown removes it
 * whatever assertion failed first. */
static struct kis_cgroup *cur;

static int teardown(void **state)
{
	(void)state;
	struct kis_error *e = NULL;
	if (cur && kis_cgroup_destroy(cur, &e) < 0) {
		fprintf(stderr, "cgroup cleanup: %s\n", e && e->message ? e->message : "?");
		kis_error_free(e);
	}
	cur = NULL;
	return 0;
}

static void make_group(const char *tag, const struct kis_limits *lim, uint64_t cpu_millis)
{
	if (kis_cgroup_detect() == KIS_CG_NONE)
		skip(); /* no cgroup hierarchy on this host */
	char name[64];
	snprintf(name, sizeof(name), "test-%s-%ld", tag, (long)getpid());
	struct kis_error *e = NULL;
	if (kis_cgroup_create(name, lim, cpu_millis, &cur, &e) < 0) {
		bool perm = e->code == KIS_E_PROFILE_UNSATISFIABLE || e->sys_errno == EACCES ||
			    e->sys_errno == EPERM || e->sys_errno == EROFS;
		print_message("cannot create a cgroup here: %s\n", e->message);
		kis_error_free(e);
		if (perm)
			skip(); /* not delegated to this user */
		fail();
	}
}

static bool dirs_exist(const struct kis_cgroup *cg, char saved[3][4096])
{
	bool any = false;
	for (size_t i = 0; i < 3; i++) {
		saved[i][0] = '\0';
		if (cg->dirs[i]) {
			snprintf(saved[i], 4096, "%s", cg->dirs[i]);
			any |= access(cg->dirs[i], F_OK) == 0;
		}
	}
	return any;
}

/* The one record of a group (issue 42: it was written and parsed twice,
 * by the host tier and the microvm's jail): what is saved loads back the
 * same, and a record naming a group that is not kis's loads as nothing. */
static void test_cgroup_record_round_trip_and_refuses_foreign_paths(void **state)
{
	(void)state;
	char dir[] = "/tmp/kis-cgrec-XXXXXX";
	assert_non_null(mkdtemp(dir));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	struct kis_cgroup cg = {.mode = KIS_CG_V1};
	cg.dirs[0] = "/sys/fs/cgroup/memory/kis/s-x";
	cg.parents[0] = "/sys/fs/cgroup/memory/kis";
	cg.dirs[1] = "/sys/fs/cgroup/pids/kis/s-x";
	cg.parents[1] = "/sys/fs/cgroup/pids/kis";
	struct kis_error *err = NULL;
	assert_int_equal(kis_cgroup_save(dfd, "rec", &cg, &err), 0);
	struct kis_cgroup *back = kis_cgroup_load(dfd, "rec");
	assert_non_null(back);
	assert_int_equal(back->mode, KIS_CG_V1);
	assert_string_equal(back->dirs[0], cg.dirs[0]);
	assert_string_equal(back->parents[1], cg.parents[1]);
	assert_null(back->dirs[2]);
	kis_cgroup_free(back);
	/* a record rewritten to point at another group is not read back */
	cg.dirs[1] = "/sys/fs/cgroup/pids/system.slice";
	assert_int_equal(kis_cgroup_save(dfd, "rec", &cg, &err), 0);
	assert_null(kis_cgroup_load(dfd, "rec"));
	cg.dirs[1] = "/sys/fs/cgroup/pids/kis/../../x";
	assert_int_equal(kis_cgroup_save(dfd, "rec", &cg, &err), 0);
	assert_null(kis_cgroup_load(dfd, "rec"));
	assert_null(kis_cgroup_load(dfd, "missing"));
	unlinkat(dfd, "rec", 0);
	close(dfd);
	rmdir(dir);
}

static void test_probe_reports_limits(void **state)
{
	(void)state;
	char why[200];
	unsigned bits = kis_cgroup_probe(why, sizeof(why));
	if (kis_cgroup_detect() == KIS_CG_NONE) {
		assert_int_equal(bits, 0);
		assert_true(why[0] != '\0');
		return;
	}
	print_message("cgroup mode %d, limits 0x%x %s\n", kis_cgroup_detect(), bits, why);
	if (geteuid() == 0)
		assert_int_equal(bits, KIS_LIMIT_MEMORY | KIS_LIMIT_PIDS);
}

static void test_bad_name_refused(void **state)
{
	(void)state;
	struct kis_error *e = NULL;
	struct kis_cgroup *cg = NULL;
	assert_int_equal(kis_cgroup_create("../escape", NULL, 0, &cg, &e), -1);
	assert_int_equal(e->code, KIS_E_INVALID_ID);
	kis_error_free(e);
	assert_null(cg);
}

static void test_create_attach_destroy(void **state)
{
	(void)state;
	struct kis_limits lim = {.memory_bytes = 64ull << 20, .pids = 32};
	make_group("life", &lim, 500);
	struct kis_error *e = NULL;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	if (kis_cgroup_attach(cur, pid, &e) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("attach: %s", e->message);
	}
	assert_int_equal(kis_cgroup_count(cur, &e), 1);
	/* a second group of the same name is refused, not shared */
	struct kis_cgroup *dup = NULL;
	char name[64];
	snprintf(name, sizeof(name), "test-life-%ld", (long)getpid());
	assert_int_equal(kis_cgroup_create(name, &lim, 500, &dup, &e), -1);
	assert_int_equal(e->code, KIS_E_DESTINATION_EXISTS);
	kis_error_free(e);
	e = NULL;

	char saved[3][4096];
	assert_true(dirs_exist(cur, saved));
	/* destroy kills the member and removes every leaf */
	assert_int_equal(kis_cgroup_destroy(cur, &e), 0);
	cur = NULL;
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	for (size_t i = 0; i < 3; i++)
		if (saved[i][0])
			assert_int_equal(access(saved[i], F_OK), -1);
}

/* The balloon: a child moves itself in and touches 512 MiB against a
 * 32 MiB limit; the OOM killer ends it and the events say so. */
static void test_memory_limit_kills_balloon(void **state)
{
	(void)state;
	struct kis_limits lim = {.memory_bytes = 32ull << 20, .pids = 16};
	make_group("mem", &lim, 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kis_error *e = NULL;
		if (kis_cgroup_attach(cur, 0, &e) < 0)
			_exit(3);
		size_t sz = 512ull << 20;
		char *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			_exit(4);
		for (size_t off = 0; off < sz; off += 4096)
			p[off] = 1;
		_exit(0); /* survived: the limit did nothing */
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	struct kis_cgroup_events ev;
	struct kis_error *e = NULL;
	assert_int_equal(kis_cgroup_read_events(cur, &ev, &e), 0);
	print_message("balloon status 0x%x, oom_kills %llu, failcnt %llu\n", st,
		      (unsigned long long)ev.oom_kills, (unsigned long long)ev.mem_failcnt);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_true(ev.oom_kills >= 1);
}

/* The fork bomb: children that pause until fork fails; pids.max holds at
 * 16 and pids.events counts the refusals. */
static void test_pids_limit_stops_fork_bomb(void **state)
{
	(void)state;
	struct kis_limits lim = {.memory_bytes = 256ull << 20, .pids = 16};
	make_group("pids", &lim, 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kis_error *e = NULL;
		if (kis_cgroup_attach(cur, 0, &e) < 0)
			_exit(3);
		for (int i = 0; i < 1000; i++) {
			pid_t c = fork();
			if (c < 0)
				_exit(errno == EAGAIN ? 0 : 4); /* refused: as wanted */
			if (c == 0) {
				pause();
				_exit(0);
			}
		}
		_exit(5); /* 1000 forks: the limit did nothing */
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	struct kis_cgroup_events ev;
	struct kis_error *e = NULL;
	assert_int_equal(kis_cgroup_read_events(cur, &ev, &e), 0);
	assert_true(ev.pids_max >= 1);
	/* the paused grandchildren are still inside: kill empties the group */
	assert_true(kis_cgroup_count(cur, &e) >= 1);
	assert_int_equal(kis_cgroup_kill(cur, &e), 0);
	assert_int_equal(kis_cgroup_count(cur, &e), 0);
}

/* The OOM relay (a kis-vm app's proxy, runtime/mvm.c): a memory-only
 * group (v1: no pids leaf), a "proxy" child in it that asks for an OOM
 * kill there. Its own forked victim is what the OOM killer takes: the
 * proxy lives on and says so, the group's oom_kill count rose, and the
 * group's limit is what it was. */
static void test_oom_relay_kills_its_own_child_not_the_caller(void **state)
{
	(void)state;
	if (kis_cgroup_detect() == KIS_CG_NONE)
		skip();
	struct kis_limits lim = {.memory_bytes = 64ull << 20};
	struct kis_cgroup_opts o = {.memory_only = true};
	char name[64];
	snprintf(name, sizeof(name), "test-relay-%ld", (long)getpid());
	struct kis_error *e = NULL;
	if (kis_cgroup_create_with(name, &lim, &o, &cur, &e) < 0) {
		print_message("cannot create a cgroup here: %s\n", e->message);
		kis_error_free(e);
		skip();
	}
	if (cur->mode == KIS_CG_V1)
		assert_null(cur->dirs[KIS_CG_V1_PIDS]);
	const char *dir = cur->mode == KIS_CG_V1 ? cur->dirs[KIS_CG_V1_MEMORY] : cur->dirs[0];
	const char *file = cur->mode == KIS_CG_V1 ? "memory.limit_in_bytes" : "memory.max";
	assert_non_null(dir);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kis_error *ce = NULL;
		/* resident pages of the caller's that a fork does not copy (a
		 * shared mapping's, as a proxy's text is), charged before it
		 * joined the group (as a proxy's text is, to the shim's): the
		 * group's usage, and so its lowered limit and the weight of the
		 * victim's oom_score_adj, stay small, and without the relay's
		 * headroom the caller outweighs its victim */
		size_t sz = 8u << 20;
		int mfd = memfd_create("relay-test", MFD_CLOEXEC);
		if (mfd < 0 || ftruncate(mfd, (off_t)sz) < 0)
			_exit(4);
		char *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
		if (p == MAP_FAILED)
			_exit(4);
		memset(p, 1, sz);
		if (kis_cgroup_attach(cur, 0, &ce) < 0)
			_exit(3);
		if (kis_cgroup_oom_relay(cur, &ce) < 0) {
			fprintf(stderr, "relay: %s\n", ce->message);
			_exit(5);
		}
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	print_message("relay caller status 0x%x\n", st);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	struct kis_cgroup_events ev;
	assert_int_equal(kis_cgroup_read_events(cur, &ev, &e), 0);
	assert_true(ev.oom_kills >= 1);
	char path[4096], buf[64] = "";
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "re");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_int_equal(strtoull(buf, NULL, 10), 64ull << 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_record_round_trip_and_refuses_foreign_paths),
		cmocka_unit_test(test_probe_reports_limits),
		cmocka_unit_test(test_bad_name_refused),
		cmocka_unit_test_teardown(test_create_attach_destroy, teardown),
		cmocka_unit_test_teardown(test_memory_limit_kills_balloon, teardown),
		cmocka_unit_test_teardown(test_pids_limit_stops_fork_bomb, teardown),
		cmocka_unit_test_teardown(test_oom_relay_kills_its_own_child_not_the_caller, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
