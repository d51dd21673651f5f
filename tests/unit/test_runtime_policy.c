/* SPDX-License-Identifier: MIT */
/* Tests of kis-runtime's policy over config.json (src/runtime/policy.c) and
 * of its flag parser: each refusal named, each default filled in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kis/profile.h"
#include "confine/confine.h"
#include "runtime/runtime.h"

/* A bundle directory of the test's own, with its rootfs (the model
 * resolves root.path and bind sources on the host). */
static char bundle[64];
static char state_root[96];

static int make_bundle(void **state)
{
	(void)state;
	snprintf(bundle, sizeof(bundle), "/tmp/krt-unit-XXXXXX");
	if (!mkdtemp(bundle))
		return -1;
	char p[128];
	snprintf(p, sizeof(p), "%s/rootfs", bundle);
	snprintf(state_root, sizeof(state_root), "%s/state", bundle);
	return mkdir(p, 0755) < 0 || mkdir(state_root, 0700) < 0 ? -1 : 0;
}

static int remove_bundle(void **state)
{
	(void)state;
	char p[128];
	snprintf(p, sizeof(p), "%s/rootfs", bundle);
	rmdir(p);
	rmdir(state_root);
	snprintf(p, sizeof(p), "%s/link", bundle);
	unlink(p);
	return rmdir(bundle);
}

/* A minimal bundle the container tier runs (crun spec's namespaces). */
static json_t *base_config(void)
{
	json_error_t je;
	json_t *c = json_loads(
		"{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\",\"readonly\":true},"
		"\"process\":{\"args\":[\"true\"],\"cwd\":\"/\",\"user\":{\"uid\":0,\"gid\":0},"
		"\"capabilities\":{\"bounding\":[\"CAP_KILL\"],\"effective\":[\"CAP_KILL\"]}},"
		"\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"}],"
		"\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},"
		"{\"type\":\"ipc\"},{\"type\":\"uts\"},{\"type\":\"mount\"}]}}",
		0, &je);
	assert_non_null(c);
	return c;
}

/* The model, then the container policy on what it made: 0, or -1 with *e. */
static int model_policy(json_t *c, struct kis_error **e)
{
	struct krt_model m;
	int r = krt_model_read(c, bundle, state_root, "/var/lib/kis/sandbox", &m, e);
	if (r == 0)
		r = krt_policy_container(m.doc, e);
	krt_model_release(&m);
	return r;
}

/* Run the model and the container policy on c; the error's code, and its
 * message must hold `named` (NULL: expect success). */
static void expect(json_t *c, enum kis_errc code, const char *named)
{
	struct kis_error *e = NULL;
	int r = model_policy(c, &e);
	if (!named) {
		if (r < 0)
			fail_msg("refused: %s", e->message);
		assert_null(e);
	} else {
		assert_true(r < 0);
		assert_non_null(e);
		assert_int_equal(e->code, code);
		if (!strstr(e->message, named))
			fail_msg("'%s' does not name '%s'", e->message, named);
		kis_error_free(e);
	}
	json_decref(c);
}

static json_t *at(json_t *c, const char *a, const char *b)
{
	json_t *o = json_object_get(c, a);
	return b ? json_object_get(o, b) : o;
}

static void test_base_bundle_runs(void **state)
{
	expect(base_config(), KIS_E_OK, NULL);
}

static void test_defaults_fill_unset_limits_and_seccomp(void **state)
{
	json_t *c = base_config();
	json_object_set_new(at(c, "linux", NULL), "resources",
			    json_pack("{s:{s:i}}", "memory", "limit", -1));
	struct kis_error *e = NULL;
	struct krt_model m;
	assert_int_equal(krt_model_read(c, bundle, state_root, NULL, &m, &e), 0);
	json_decref(c);
	c = json_incref(m.doc);
	krt_model_release(&m);
	assert_int_equal(krt_policy_container(c, &e), 0);
	json_t *res = at(c, "linux", "resources");
	/* -1 is "unlimited" in the runtime spec: kis gives its default */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "memory"), "limit")),
			 (json_int_t)KIS_LIMIT_DEFAULT(MEMORY));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "pids"), "limit")),
			 (json_int_t)KIS_LIMIT_DEFAULT(PIDS));
	assert_non_null(at(c, "linux", "seccomp"));
	assert_true(json_is_true(at(c, "process", "noNewPrivileges")));
	assert_true(json_array_size(at(c, "linux", "maskedPaths")) > 0);
	/* root.path made absolute against the bundle */
	char want[128];
	snprintf(want, sizeof(want), "%s/rootfs", bundle);
	assert_string_equal(json_string_value(at(c, "root", "path")), want);
	json_t *rl = at(c, "process", "rlimits");
	assert_int_equal(json_array_size(rl), 2);
	json_decref(c);
}

static void test_given_limits_and_seccomp_are_kept(void **state)
{
	json_t *c = base_config();
	json_object_set_new(at(c, "linux", NULL), "resources",
			    json_pack("{s:{s:i},s:{s:i}}", "memory", "limit", 1 << 25, "pids",
				      "limit", 12));
	json_object_set_new(at(c, "linux", NULL), "seccomp",
			    json_pack("{s:s}", "defaultAction", "SCMP_ACT_ERRNO"));
	struct kis_error *e = NULL;
	assert_int_equal(krt_policy_container(c, &e), 0);
	json_t *res = at(c, "linux", "resources");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "memory"), "limit")),
			 1 << 25);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "pids"), "limit")),
			 12);
	assert_string_equal(json_string_value(json_object_get(at(c, "linux", "seccomp"),
							      "defaultAction")),
			    "SCMP_ACT_ERRNO");
	json_decref(c);
}

static void test_caps_outside_the_default_set_refused(void **state)
{
	json_t *c = base_config();
	json_array_append_new(json_object_get(at(c, "process", "capabilities"), "effective"),
			      json_string("CAP_SYS_ADMIN"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "capabilities.effective names 'CAP_SYS_ADMIN'");
	struct kis_error *e = NULL;
	/* case and the CAP_ prefix do not matter, for allowed and refused */
	assert_int_equal(krt_policy_cap("kill", "exec --cap", &e), 0);
	assert_int_equal(krt_policy_cap("cap_chown", "exec --cap", &e), 0);
	assert_true(krt_policy_cap("sys_ptrace", "exec --cap", &e) < 0);
	assert_non_null(strstr(e->message, "sys_ptrace"));
	kis_error_free(e);
}

static void drop_ns(json_t *c, const char *type)
{
	json_t *nss = at(c, "linux", "namespaces"), *n;
	size_t i;
	json_array_foreach(nss, i, n) {
		if (strcmp(json_string_value(json_object_get(n, "type")), type) == 0) {
			json_array_remove(nss, i);
			return;
		}
	}
}

static void test_host_namespaces_refused(void **state)
{
	json_t *c = base_config();
	drop_ns(c, "network");
	expect(c, KIS_E_ESCAPE_HATCH_FORBIDDEN, "run.kis.allow-net-host");
	c = base_config();
	drop_ns(c, "network");
	json_object_set_new(c, "annotations", json_pack("{s:s}", "run.kis.allow-net-host", "true"));
	expect(c, KIS_E_OK, NULL);
	c = base_config();
	drop_ns(c, "mount");
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "'mount'");
	/* a path to the runtime's own namespace is the host's */
	c = base_config();
	drop_ns(c, "uts");
	json_array_append_new(at(c, "linux", "namespaces"),
			      json_pack("{s:s,s:s}", "type", "uts", "path", "/proc/self/ns/uts"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "host's own 'uts'");
	/* one that cannot be opened is refused too, and a file that is no
	 * namespace of that type */
	c = base_config();
	drop_ns(c, "ipc");
	json_array_append_new(at(c, "linux", "namespaces"),
			      json_pack("{s:s,s:s}", "type", "ipc", "path", "/nonexistent/ns"));
	expect(c, KIS_E_INVALID_PROFILE, "cannot be opened");
	c = base_config();
	drop_ns(c, "ipc");
	json_array_append_new(at(c, "linux", "namespaces"),
			      json_pack("{s:s,s:s}", "type", "ipc", "path", "/proc/self/ns/uts"));
	expect(c, KIS_E_INVALID_PROFILE, "not a 'ipc' namespace");
}

/* A holder of fresh network, ipc, uts (and pid, for its children)
 * namespaces, a pod's sandbox for the test: its pid, -1 where this host
 * lets us make none. */
static pid_t ns_holder(void)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		/* gone with the test, whatever failed in it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char ok = unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID) == 0;
		/* pid_for_children opens once the namespace has its first
		 * process (pid_namespaces(7)) */
		pid_t init = ok ? fork() : -1;
		if (init == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			pause();
			_exit(0);
		}
		ok = ok && init > 0;
		(void)!write(p[1], &ok, 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	char ok = 0;
	if (pid < 0 || read(p[0], &ok, 1) != 1 || !ok) {
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		pid = -1;
	}
	close(p[0]);
	return pid;
}

static bool argv_has(const struct kis_argv *a, const char *x, const char *y)
{
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], x) == 0 && (!y || (i + 1 < a->n && strcmp(a->v[i + 1], y) == 0)))
			return true;
	return false;
}

/* The model, the container policy and the host tier's plan on c: the
 * plan's result; *p filled (release it), or e set. */
static int host_plan(json_t *c, struct krt_model *m, struct krt_host_plan *p,
		     struct kis_error **e)
{
	int r = krt_model_read(c, bundle, state_root, "/var/lib/kis/sandbox", m, e);
	if (r == 0)
		r = krt_policy_container(m->doc, e);
	if (r == 0)
		r = krt_host_plan(m, false, p, e);
	return r;
}

static void expect_host_refusal(json_t *c, const char *named)
{
	struct krt_model m;
	struct krt_host_plan p = {0};
	struct kis_error *e = NULL;
	int r = host_plan(c, &m, &p, &e);
	krt_host_plan_release(&p);
	krt_model_release(&m);
	json_decref(c);
	assert_true(r < 0);
	if (e->code != KIS_E_PROFILE_UNSATISFIABLE || !strstr(e->message, named) ||
	    !strstr(e->message, "run.kis.tier 'host'"))
		fail_msg("'%s' does not name '%s'", e->message, named);
	kis_error_free(e);
}

/* A pod's app container at the host tier (issue 39): the network, ipc
 * and uts namespaces joined by path go to setns(2) as the model's held
 * fds, none of them unshared by bwrap; the pod's network takes every
 * socket family; additionalGids [0], cpu.shares and the sysfs/cgroup
 * mounts the CRI plugin always writes are taken. */
static void test_host_tier_joins_a_pods_namespaces(void **state)
{
	(void)state;
	if (access("/usr/bin/bwrap", X_OK) != 0)
		skip();
	pid_t holder = ns_holder();
	if (holder < 0)
		skip();
	static const char *const kinds[][2] = {{"network", "net"}, {"ipc", "ipc"}, {"uts", "uts"}};
	json_t *c = base_config();
	for (size_t k = 0; k < 3; k++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)holder, kinds[k][1]);
		drop_ns(c, kinds[k][0]);
		json_array_append_new(at(c, "linux", "namespaces"),
				      json_pack("{s:s,s:s}", "type", kinds[k][0], "path", path));
	}
	json_object_set_new(at(c, "process", "user"), "additionalGids", json_pack("[i]", 0));
	json_object_set_new(at(c, "linux", NULL), "resources",
			    json_pack("{s:{s:i}}", "cpu", "shares", 2));
	json_array_append_new(at(c, "mounts", NULL),
			      json_pack("{s:s,s:s,s:s,s:[s]}", "destination", "/sys", "type",
					"sysfs", "source", "sysfs", "options", "ro"));
	json_array_append_new(at(c, "mounts", NULL),
			      json_pack("{s:s,s:s,s:s,s:[s]}", "destination", "/sys/fs/cgroup",
					"type", "cgroup", "source", "cgroup", "options", "ro"));
	struct krt_model m;
	struct krt_host_plan p = {0};
	struct kis_error *e = NULL;
	int r = host_plan(c, &m, &p, &e);
	if (r < 0)
		fail_msg("refused: %s", e->message);
	assert_int_equal(p.n_join, 3);
	int seen = 0;
	for (size_t k = 0; k < p.n_join; k++) {
		struct stat a;
		assert_int_equal(fstat(p.join_fd[k], &a), 0);
		for (size_t j = 0; j < 3; j++) {
			char path[64];
			struct stat b;
			snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)holder, kinds[j][1]);
			assert_int_equal(stat(path, &b), 0);
			if (a.st_ino == b.st_ino && a.st_dev == b.st_dev)
				seen |= p.join_clone[k];
		}
	}
	assert_int_equal(seen, CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS);
	assert_int_equal(p.unshare, 0);
	assert_false(p.lo_up);
	assert_true(p.groups_root);
	assert_int_equal(p.net, KIS_NET_HOST);
	assert_true(argv_has(&p.bwrap, "--unshare-pid", NULL));
	assert_false(argv_has(&p.bwrap, "--unshare-net", NULL));
	assert_false(argv_has(&p.bwrap, "--unshare-ipc", NULL));
	assert_false(argv_has(&p.bwrap, "--unshare-uts", NULL));
	assert_true(argv_has(&p.bwrap, "--tmpfs", "/sys"));
	assert_true(argv_has(&p.bwrap, "--remount-ro", "/sys"));
	/* the read-only root: bound writable, remounted read-only last */
	assert_false(argv_has(&p.bwrap, "--ro-bind-fd", NULL));
	assert_true(argv_has(&p.bwrap, "--remount-ro", "/"));
	krt_host_plan_release(&p);
	krt_model_release(&m);
	json_decref(c);

	/* a bundle of its own: the namespaces made by the process create
	 * forks (lo up, the hostname), a network off to all but AF_UNIX */
	c = base_config();
	json_object_set_new(c, "hostname", json_string("own"));
	r = host_plan(c, &m, &p, &e);
	if (r < 0)
		fail_msg("refused: %s", e->message);
	assert_int_equal(p.n_join, 0);
	assert_int_equal(p.unshare, CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS);
	assert_true(p.lo_up);
	assert_string_equal(p.hostname, "own");
	assert_false(p.groups_root);
	assert_int_equal(p.net, KIS_NET_OFF);
	krt_host_plan_release(&p);
	krt_model_release(&m);
	json_decref(c);

	/* a hostname would rename the pod's joined uts namespace */
	c = base_config();
	drop_ns(c, "uts");
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/uts", (int)holder);
	json_array_append_new(at(c, "linux", "namespaces"),
			      json_pack("{s:s,s:s}", "type", "uts", "path", path));
	json_object_set_new(c, "hostname", json_string("pod"));
	expect_host_refusal(c, "hostname 'pod'");
	/* a pid namespace by path: the pid the engine gets is bwrap's */
	c = base_config();
	drop_ns(c, "pid");
	snprintf(path, sizeof(path), "/proc/%d/ns/pid_for_children", (int)holder);
	json_array_append_new(at(c, "linux", "namespaces"),
			      json_pack("{s:s,s:s}", "type", "pid", "path", path));
	expect_host_refusal(c, "joins only a network, ipc or uts namespace by path");
	/* a CPU quota, period and shares go to the container's cpu group
	 * (where this host has a cpu controller), a CPU set is refused */
	char why[160];
	if (kis_cgroup_cpu_available(why, sizeof(why))) {
		c = base_config();
		json_object_set_new(at(c, "linux", NULL), "resources",
				    json_pack("{s:{s:i,s:i,s:i}}", "cpu", "quota", 50000, "period",
					      100000, "shares", 512));
		json_object_set_new(at(c, "linux", NULL), "cgroupsPath",
				    json_string("/kubepods/pod1/c1"));
		struct kis_error *e2 = NULL;
		struct krt_model m2;
		struct krt_host_plan p2 = {0};
		if (host_plan(c, &m2, &p2, &e2) < 0)
			fail_msg("refused: %s", e2->message);
		assert_int_equal(p2.cpu_quota_us, 50000);
		assert_int_equal(p2.cpu_period_us, 100000);
		assert_int_equal(p2.cpu_shares, 512);
		assert_string_equal(p2.cgroups_path, "/kubepods/pod1/c1");
		krt_host_plan_release(&p2);
		krt_model_release(&m2);
		json_decref(c);
	}
	c = base_config();
	json_object_set_new(at(c, "linux", NULL), "resources",
			    json_pack("{s:{s:s}}", "cpu", "cpus", "0"));
	expect_host_refusal(c, "linux.resources.cpu.cpus");
	c = base_config();
	json_object_set_new(at(c, "process", "user"), "additionalGids", json_pack("[i,i]", 0, 6));
	expect_host_refusal(c, "process.user.additionalGids[1]");
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
}

static void test_duplicate_namespaces_refused(void **state)
{
	/* the old check kept the last entry, crun joined the first */
	json_t *c = base_config();
	json_array_insert_new(at(c, "linux", "namespaces"), 0,
			      json_pack("{s:s,s:s}", "type", "network", "path",
					"/proc/self/ns/net"));
	expect(c, KIS_E_INVALID_PROFILE, "a second 'network' entry");
	c = base_config();
	json_array_append_new(at(c, "linux", "namespaces"), json_pack("{s:s}", "type", "pid"));
	expect(c, KIS_E_INVALID_PROFILE, "a second 'pid' entry");
}

static void test_fields_the_model_lacks_refused(void **state)
{
	json_t *c = base_config();
	json_object_set_new(c, "vm", json_pack("{s:{s:s}}", "hypervisor", "path", "/bin/sh"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "vm: kis-runtime does not model");
	c = base_config();
	json_object_set_new(at(c, "linux", NULL), "intelRdt", json_pack("{s:s}", "closID", "x"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "linux.intelRdt");
	c = base_config();
	json_object_set_new(at(c, "process", NULL), "scheduler",
			    json_pack("{s:s}", "policy", "SCHED_FIFO"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "process.scheduler");
	/* a known field of the wrong JSON type is named too */
	c = base_config();
	json_object_set_new(at(c, "process", NULL), "args", json_string("true"));
	expect(c, KIS_E_INVALID_PROFILE, "process.args is not an array of strings");
	c = base_config();
	json_object_set_new(at(c, "linux", NULL), "cgroupsPath", json_string("/a/../../b"));
	expect(c, KIS_E_INVALID_PROFILE, "linux.cgroupsPath");
}

static void test_only_modelled_mount_types(void **state)
{
	static const char *const bad[] = {"overlay", "ext4", "none", "fuse", "btrfs"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *c = base_config();
		json_array_append_new(at(c, "mounts", NULL),
				      json_pack("{s:s,s:s,s:s,s:[s]}", "destination", "/x", "type",
						bad[i], "source", "/dev/vda", "options", "ro"));
		expect(c, KIS_E_PROFILE_UNSATISFIABLE, "at '/x' is of type");
	}
	json_t *c = base_config();
	json_array_append_new(at(c, "mounts", NULL),
			      json_pack("{s:s,s:s,s:s,s:[s]}", "destination", "/x", "type", "tmpfs",
					"source", "tmpfs", "options", "lowerdir=/root"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "'lowerdir=/root'");
	c = base_config();
	json_array_append_new(at(c, "mounts", NULL),
			      json_pack("{s:s,s:s,s:s,s:[s,s]}", "destination", "/x", "type", "tmpfs",
					"source", "tmpfs", "options", "size=1m", "mode=755"));
	expect(c, KIS_E_OK, NULL);
}

static void test_hooks_need_the_hatch(void **state)
{
	json_t *c = base_config();
	json_object_set_new(c, "hooks", json_pack("{s:[{s:s}]}", "createRuntime", "path", "/bin/sh"));
	expect(c, KIS_E_ESCAPE_HATCH_FORBIDDEN, "run.kis.allow-hooks");
	c = base_config();
	json_object_set_new(c, "hooks", json_pack("{s:[{s:s}]}", "createRuntime", "path", "/bin/sh"));
	json_object_set_new(c, "annotations", json_pack("{s:s}", "run.kis.allow-hooks", "true"));
	expect(c, KIS_E_OK, NULL);
}

static void add_mount(json_t *c, const char *src, const char *opt)
{
	json_array_append_new(at(c, "mounts", NULL),
			      json_pack("{s:s,s:s,s:s,s:[s,s]}", "destination", "/x", "type",
					"bind", "source", src, "options", "rbind", opt));
}

static void test_host_paths_never_bound(void **state)
{
	/* is, lies under, or holds a system path (/var holds /var/lib/kis,
	 * the bundle's directory holds the state root here) */
	static const char *const bad[] = {"/",     "/etc",   "/etc/passwd", "/proc/1", "/sys/kernel",
					  "/dev",  "/usr/bin", "/root",     "/run",    "/var",
					  "/home", "/boot"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *c = base_config();
		add_mount(c, bad[i], "ro");
		expect(c, KIS_E_PROFILE_UNSATISFIABLE, "never reaches a container");
	}
	json_t *c = base_config();
	add_mount(c, state_root, "ro");
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "never reaches a container");
	c = base_config();
	add_mount(c, bundle, "ro");
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "which this path holds");
	/* '..' is never resolved for the caller */
	c = base_config();
	add_mount(c, "/tmp/../etc", "ro");
	expect(c, KIS_E_INVALID_PROFILE, "not a normal path");
	/* a link on the way is refused, not followed */
	char link[128];
	snprintf(link, sizeof(link), "%s/link", bundle);
	assert_int_equal(symlink("/etc", link), 0);
	c = base_config();
	add_mount(c, "link", "ro");
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "symbolic link");
	c = base_config();
	add_mount(c, "rootfs", "rshared");
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "'rshared'");
	c = base_config();
	add_mount(c, "rootfs", "ro");
	expect(c, KIS_E_OK, NULL);
}

static void test_host_devices_refused(void **state)
{
	json_t *c = base_config();
	json_object_set_new(at(c, "linux", NULL), "devices",
			    json_pack("[{s:s,s:s,s:i,s:i}]", "path", "/dev/sda", "type", "b",
				      "major", 8, "minor", 0));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "/dev/sda");
	c = base_config();
	json_object_set_new(at(c, "linux", NULL), "resources",
			    json_pack("{s:[{s:b,s:s}]}", "devices", "allow", 1, "access", "rwm"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "linux.resources.devices[0]");
	/* containerd's and podman's defaults pass: deny all, mknod for all,
	 * the harmless ones rw */
	c = base_config();
	json_object_set_new(
		at(c, "linux", NULL), "resources",
		json_pack("{s:[{s:b,s:s},{s:b,s:s,s:s},{s:b,s:s,s:i,s:i,s:s},{s:b,s:s,s:i,s:s}]}",
			  "devices", "allow", 0, "access", "rwm", "allow", 1, "type", "c",
			  "access", "m", "allow", 1, "type", "c", "major", 1, "minor", 3,
			  "access", "rwm", "allow", 1, "type", "c", "major", 136, "access",
			  "rwm"));
	expect(c, KIS_E_OK, NULL);
}

static void test_tier_annotation(void **state)
{
	static const struct {
		const char *k, *v;
		int want; /* tier, or -1 refused */
	} cases[] = {
		{"run.kis.tier", "container", KRT_TIER_CONTAINER},
		{"run.kis.tier", "host", KRT_TIER_HOST},
		{"run.kis.tier", "microvm", KRT_TIER_MICROVM},
		{"run.kis.tier", "gvisor", -1},
		{"run.kis.other", "1", -1},
		{"run.kis.allow-net-host", "yes", -1},
		{"io.kubernetes.cri.sandbox-id", "x", KRT_TIER_CONTAINER},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *c = base_config();
		json_object_set_new(c, "annotations", json_pack("{s:s}", cases[i].k, cases[i].v));
		enum krt_tier t;
		struct kis_error *e = NULL;
		int r = krt_policy_tier(c, -1, &t, &e);
		if (cases[i].want < 0) {
			assert_true(r < 0);
			assert_int_equal(e->code, KIS_E_INVALID_PROFILE);
			assert_non_null(strstr(e->message, cases[i].k));
			kis_error_free(e);
		} else {
			assert_int_equal(r, 0);
			assert_int_equal((int)t, cases[i].want);
		}
		json_decref(c);
	}
}

static void test_pinned_tier_is_not_moved_by_an_annotation(void **state)
{
	json_t *c = base_config();
	enum krt_tier t;
	struct kis_error *e = NULL;
	assert_int_equal(krt_policy_tier(c, KRT_TIER_HOST, &t, &e), 0);
	assert_int_equal(t, KRT_TIER_HOST);
	json_object_set_new(c, "annotations", json_pack("{s:s}", "run.kis.tier", "container"));
	assert_true(krt_policy_tier(c, KRT_TIER_HOST, &t, &e) < 0);
	assert_non_null(strstr(e->message, "pinned to the 'host' tier"));
	kis_error_free(e);
	e = NULL;
	json_object_set_new(c, "annotations", json_pack("{s:s}", "run.kis.tier", "host"));
	assert_int_equal(krt_policy_tier(c, KRT_TIER_HOST, &t, &e), 0);
	json_decref(c);
}

static void test_sysctls_outside_own_namespaces_refused(void **state)
{
	json_t *c = base_config();
	json_object_set_new(at(c, "linux", NULL), "sysctl",
			    json_pack("{s:s,s:s}", "net.ipv4.ip_forward", "1", "kernel.shmmax", "1"));
	expect(c, KIS_E_OK, NULL);
	c = base_config();
	json_object_set_new(at(c, "linux", NULL), "sysctl",
			    json_pack("{s:s}", "kernel.core_pattern", "|/tmp/x"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "kernel.core_pattern");
	c = base_config();
	json_object_set_new(at(c, "linux", NULL), "rootfsPropagation", json_string("rshared"));
	expect(c, KIS_E_PROFILE_UNSATISFIABLE, "rootfsPropagation");
}

static const struct krt_opt opts[] = {
	{"bundle", 'b', true, KRT_OPT_BUNDLE, NULL},
	{"pid-file", 0, true, KRT_OPT_PASS, NULL},
	{"preserve-fds", 0, true, KRT_OPT_PRESERVE, NULL},
	{"detach", 'd', false, KRT_OPT_PASS, NULL},
	{"no-pivot", 0, false, KRT_OPT_REFUSE, "weakens"},
	{NULL, 0, false, KRT_OPT_PASS, NULL},
};

static void test_flags_in_every_form(void **state)
{
	char *argv[] = {"create", "-b", "/b1", "--pid-file=/p", "-pid-file", "/p2", "--detach",
			"--preserve-fds", "2", "id1", "--not-a-flag", NULL};
	struct krt_parsed p;
	struct kis_error *e = NULL;
	assert_int_equal(krt_parse(opts, 11, argv, &p, &e), 0);
	assert_string_equal(p.bundle, "/b1");
	assert_int_equal(p.preserve_fds, 2);
	assert_string_equal(krt_parsed_value(&p, "pid-file"), "/p");
	assert_true(krt_parsed_has(&p, "detach"));
	/* after the id, nothing is a flag (exec's command line) */
	assert_int_equal(p.pos.n, 2);
	assert_string_equal(p.pos.v[1], "--not-a-flag");
	krt_parsed_release(&p);

	char *bad[] = {"create", "--no-pivot", "id", NULL};
	assert_true(krt_parse(opts, 3, bad, &p, &e) < 0);
	assert_int_equal(e->code, KIS_E_PROFILE_UNSATISFIABLE);
	assert_non_null(strstr(e->message, "--no-pivot"));
	kis_error_free(e);
	e = NULL;
	krt_parsed_release(&p);
	char *unknown[] = {"create", "--bogus", "id", NULL};
	assert_true(krt_parse(opts, 3, unknown, &p, &e) < 0);
	assert_int_equal(e->code, KIS_E_INVALID_ARGUMENT);
	kis_error_free(e);
	e = NULL;
	krt_parsed_release(&p);
	char *fds[] = {"create", "--preserve-fds", "-1", "id", NULL};
	assert_true(krt_parse(opts, 4, fds, &p, &e) < 0);
	kis_error_free(e);
	krt_parsed_release(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duplicate_namespaces_refused),
		cmocka_unit_test(test_fields_the_model_lacks_refused),
		cmocka_unit_test(test_only_modelled_mount_types),
		cmocka_unit_test(test_hooks_need_the_hatch),
		cmocka_unit_test(test_base_bundle_runs),
		cmocka_unit_test(test_defaults_fill_unset_limits_and_seccomp),
		cmocka_unit_test(test_given_limits_and_seccomp_are_kept),
		cmocka_unit_test(test_caps_outside_the_default_set_refused),
		cmocka_unit_test(test_host_namespaces_refused),
		cmocka_unit_test(test_host_tier_joins_a_pods_namespaces),
		cmocka_unit_test(test_host_paths_never_bound),
		cmocka_unit_test(test_host_devices_refused),
		cmocka_unit_test(test_tier_annotation),
		cmocka_unit_test(test_pinned_tier_is_not_moved_by_an_annotation),
		cmocka_unit_test(test_sysctls_outside_own_namespaces_refused),
		cmocka_unit_test(test_flags_in_every_form),
	};
	return cmocka_run_group_tests(tests, make_bundle, remove_bundle);
}
