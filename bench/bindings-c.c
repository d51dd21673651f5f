/* SPDX-License-Identifier: MIT */
/* Runs per second of a command through the library's kis_run_capture
 * (kis/ffi.h, what the bindings call), T threads for S seconds, for
 * bench/bindings.sh. Usage: bindings-c THREADS SECONDS STORE BACKEND CMD... */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kis/sandbox.h"

static char **g_argv;
static const char *g_store;
static char g_json[256];
static double g_end;
static atomic_long g_runs, g_fail;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	(void)arg;
	struct kis_profile *p = kis_profile_new();
	struct kis_error *e = NULL;
	if (!p || kis_profile_merge_json(p, g_json, strlen(g_json), &e) < 0) {
		fprintf(stderr, "profile: %s\n", kis_error_message(e));
		exit(1);
	}
	while (now_s() < g_end) {
		struct kis_result *r = kis_result_new();
		if (kis_run_capture(p, g_argv, g_store, -1, -1, r, &e) < 0 || r->exit_code != 0) {
			atomic_fetch_add(&g_fail, 1);
			kis_error_free(e);
			e = NULL;
		} else {
			atomic_fetch_add(&g_runs, 1);
		}
		kis_result_free(r);
	}
	kis_profile_free(p);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: %s THREADS SECONDS STORE BACKEND CMD...\n", argv[0]);
		return 2;
	}
	int n = atoi(argv[1]);
	double secs = atof(argv[2]);
	g_store = argv[3];
	snprintf(g_json, sizeof(g_json), "{\"backend\":\"%s\"}", argv[4]);
	g_argv = argv + 5;
	pthread_t t[64];
	if (n < 1 || n > 64)
		return 2;
	double start = now_s();
	g_end = start + secs;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	double el = now_s() - start;
	printf("%.1f %ld %ld\n", atomic_load(&g_runs) / el, atomic_load(&g_runs),
	       atomic_load(&g_fail));
	return 0;
}
