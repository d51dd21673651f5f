/* SPDX-License-Identifier: MIT */
/* kis_run() from a long-lived process: N one-shot runs of a command through
 * the library, interleaved with plain fork/exec of the same command, each
 * timed; prints the medians. What a caller embedding the engine pays, without
 * the exec of the `kis` command line (its loader, its libraries, its
 * parsing) that every CLI figure includes.
 * Usage: librun N BACKEND CMD...   (BACKEND "process" pins the process tier) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kis/sandbox.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s N BACKEND CMD...\n", argv[0]);
		return 2;
	}
	int n = atoi(argv[1]);
	struct kis_profile p;
	kis_profile_init(&p);
	struct kis_error *err = NULL;
	if (!strcmp(argv[2], "process")) {
		p.tier = KIS_TIER_PROCESS;
		p.escape_hatch.allow_process_tier = true;
	} else if (kis_profile_set(&p, "backend", argv[2], &err) < 0) {
		fprintf(stderr, "librun: %s\n", err && err->message ? err->message : "backend");
		return 2;
	}
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct kis_run_options o = {
		.io = {.stdin_fd = -1, .stdout_fd = devnull, .stderr_fd = 2, .cancel_fd = -1},
		.resize_fd = -1, .tty_fd = -1,
	};
	double *lib = calloc((size_t)n + 1, sizeof(double)), *raw = calloc((size_t)n + 1, sizeof(double));
	for (int i = 0; i <= n; i++) { /* round 0 warms up */
		double t0 = now_ms();
		pid_t c = fork();
		if (c == 0) {
			dup2(devnull, 1);
			execvp(argv[3], argv + 3);
			_exit(127);
		}
		waitpid(c, NULL, 0);
		double t1 = now_ms();
		struct kis_result res;
		kis_result_init(&res);
		if (kis_run(&p, argv + 3, &o, &res, NULL, &err) < 0) {
			fprintf(stderr, "librun: %s\n", err && err->message ? err->message : "failed");
			return 1;
		}
		kis_result_release(&res);
		double t2 = now_ms();
		if (i) {
			raw[i - 1] = t1 - t0;
			lib[i - 1] = t2 - t1;
		}
	}
	qsort(raw, (size_t)n, sizeof(double), cmp);
	qsort(lib, (size_t)n, sizeof(double), cmp);
	printf("%-34s %10.3f %10.3f %7.2fx\n", "fork/exec (same process)", raw[n / 2], raw[n * 9 / 10], 1.0);
	char label[64];
	snprintf(label, sizeof(label), "kis_run() %s (library)", argv[2]);
	printf("%-34s %10.3f %10.3f %7.2fx\n", label, lib[n / 2], lib[n * 9 / 10], lib[n / 2] / raw[n / 2]);
	kis_profile_release(&p);
	return 0;
}
