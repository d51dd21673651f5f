/* SPDX-License-Identifier: MIT */
/* What each building block of a run costs, measured in-process (no strace,
 * no exec): the engine's own functions from libkis-sandbox.a, each called N
 * times, interleaved, median and p90 in microseconds. Where the time of a
 * run goes, phase by phase (docs/performance.md).
 * Usage: confine-costs [N]   (as root: cgroups, user namespaces) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"

#include "backends/host/common.h"
#include "backends/oci/bundle.h"
#include "confine/confine.h"
#include "kis/store.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void check(int r, struct kis_error *e, const char *what)
{
	if (r < 0) {
		fprintf(stderr, "confine-costs: %s: %s\n", what, e && e->message ? e->message : "failed");
		exit(1);
	}
}

static int round_no;

static void b_landlock(void)
{
	struct kis_landlock_opts o = {.net = KIS_NET_OFF};
	int fd = -1;
	struct kis_error *e = NULL;
	check(kis_landlock_prepare(&o, &fd, NULL, &e), e, "landlock ruleset");
	close(fd);
}

static void b_seccomp_compile(void)
{
	struct kis_seccomp_opts o = {.net = KIS_NET_OFF, .allow_sysv_ipc = true};
	int fd = -1;
	struct kis_error *e = NULL;
	check(kis_seccomp_export_bpf_fd(&o, &fd, &e), e, "seccomp compile");
	close(fd);
}

static void b_seccomp_cached(void)
{
	struct kis_seccomp_opts o = {.net = KIS_NET_OFF, .allow_sysv_ipc = true};
	int fd = -1;
	struct kis_error *e = NULL;
	check(kis_host_seccomp_fd(&o, &fd, &e), e, "seccomp cached");
	close(fd);
}

static void b_seccomp_oci(void)
{
	struct kis_seccomp_opts o = {.net = KIS_NET_OFF, .allow_sysv_ipc = true};
	json_t *j = NULL;
	struct kis_error *e = NULL;
	check(kis_seccomp_to_oci_json(&o, &j, &e), e, "seccomp OCI json");
	char *s = json_dumps(j, JSON_COMPACT);
	free(s);
	json_decref(j);
}

static void b_oci_config(void)
{
	char *args[] = {"/.kis/agent", "--listen-fd", "3", NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct kis_limits l = {.memory_bytes = 1ull << 30, .pids = 256, .file_bytes = 1ull << 30,
			       .open_files = 1024};
	struct kis_oci_spec s = {.args = args, .env = env, .cwd = "/", .root = KIS_ROOT_HOST,
				 .rootfs = "/nonexistent", .agent = "/bin/true", .net = KIS_NET_OFF,
				 .limits = &l, .cgroups_path = "/kis-x"};
	json_t *j = NULL;
	struct kis_error *e = NULL;
	check(kis_oci_config_build(&s, &j, &e), e, "config.json");
	char *t = json_dumps(j, JSON_COMPACT);
	free(t);
	json_decref(j);
}

static void b_userns(void)
{
	int fd = -1;
	struct kis_error *e = NULL;
	check(kis_userns_open(KIS_IDS_FIRST + 7 * KIS_IDS_COUNT, KIS_IDS_COUNT, &fd, &e), e,
	      "user namespace");
	close(fd);
}

static void b_cgroup(void)
{
	char name[64];
	snprintf(name, sizeof(name), "cc-%d-%d", (int)getpid(), round_no);
	struct kis_limits l = {.memory_bytes = 1ull << 30, .pids = 256};
	struct kis_cgroup *cg = NULL;
	struct kis_error *e = NULL;
	check(kis_cgroup_create(name, &l, 0, &cg, &e), e, "cgroup create");
	check(kis_cgroup_destroy(cg, &e), e, "cgroup destroy");
}

static void b_store(void)
{
	struct kis_store *s = NULL;
	struct kis_error *e = NULL;
	check(kis_store_open(NULL, &s, &e), e, "store open");
	kis_store_free(s);
}

static void b_fork(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
}

static void b_vfork(void)
{
	pid_t p = vfork();
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
}

static const struct {
	const char *name;
	void (*fn)(void);
	bool root;
} blocks[] = {
	{"store open (with sweep)", b_store, false},
	{"cgroup create+destroy (mem,pids)", b_cgroup, true},
	{"landlock ruleset (root:host)", b_landlock, false},
	{"seccomp compile (libseccomp)", b_seccomp_compile, false},
	{"seccomp from cache (memfd copy)", b_seccomp_cached, false},
	{"seccomp as OCI JSON", b_seccomp_oci, false},
	{"config.json build (oci)", b_oci_config, false},
	{"user namespace (its holder)", b_userns, true},
	{"fork+exit+wait of the engine", b_fork, false},
	{"vfork+exit+wait", b_vfork, false},
};

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	size_t k = ARRAY_SIZE(blocks);
	double *t = calloc(k * (size_t)n, sizeof(double));
	bool root = geteuid() == 0;
	for (size_t b = 0; b < k; b++)
		if (root || !blocks[b].root)
			blocks[b].fn(); /* warm: caches, the seccomp file */
	for (round_no = 0; round_no < n; round_no++)
		for (size_t b = 0; b < k; b++) {
			if (!root && blocks[b].root)
				continue;
			double t0 = now_us();
			blocks[b].fn();
			t[b * (size_t)n + (size_t)round_no] = now_us() - t0;
		}
	double la[3] = {0};
	if (getloadavg(la, 3) < 0)
		la[0] = -1;
	printf("building blocks, %d calls each, interleaved (load %.2f %.2f %.2f)\n", n, la[0], la[1],
	       la[2]);
	printf("%-36s %10s %10s\n", "block", "median_us", "p90_us");
	for (size_t b = 0; b < k; b++) {
		if (!root && blocks[b].root)
			continue;
		double *v = t + b * (size_t)n;
		qsort(v, (size_t)n, sizeof(double), cmp);
		printf("%-36s %10.1f %10.1f\n", blocks[b].name, v[n / 2], v[n * 9 / 10]);
	}
	free(t);
	return 0;
}
