/* SPDX-License-Identifier: MIT */
/* How long the compiler takes on whole modules: each module given is
 * decoded and validated, then compiled to object code by the plugin in
 * this process (as kis-helper would), ROUNDS times, at the tier asked
 * (--tier opt, the default, or fast: src/wasm/jit.h); prints the fastest
 * wall and CPU time of the compile alone and the object's size. Built and
 * run by bench/wasm-compile.sh.
 *
 * THREADS: the compile's threads (default 1; kis-helper uses one per CPU).
 * PROF: at --tier mixed (src/wasm/jit.h: WASM_JIT_TIER_MIXED), a profile
 * of a run of each module, as the interpreter counts it (struct
 * kis_wasm_func.prof): a file of one count per line, per defined function
 * in order, per module, the files separated by commas. No build writes
 * such files (tier-up hands the counts over a pipe, src/backends/wasm.c);
 * docs/wasm.md, "The mixed tier", says how the measured ones were made.
 * Without PROF, --tier mixed compiles all at the optimising tier.
 *
 *   kis-jit-time [--tier opt|fast|mixed] MODULE...   ROUNDS=1 THREADS=1 PUT=<store root> PROF= */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kis/wasm.h"
#include "wasm/internal.h"
#include "wasm/jit.h"
#include "wasm/jit_cache.h"

static double now(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void read_prof(const char *path, uint32_t **out, uint32_t *n)
{
	FILE *f = fopen(path, "r");
	uint32_t cap = 0;
	unsigned long v;
	*out = NULL;
	*n = 0;
	if (!f) {
		perror(path);
		exit(1);
	}
	while (fscanf(f, "%lu", &v) == 1) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 1024;
			*out = realloc(*out, cap * sizeof(uint32_t));
			if (!*out)
				exit(1);
		}
		(*out)[(*n)++] = (uint32_t)v;
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 1;
	unsigned tier = WASM_JIT_TIER_OPT;
	int first = 1;
	if (argc > 2 && !strcmp(argv[1], "--tier")) {
		tier = !strcmp(argv[2], "fast")	   ? WASM_JIT_TIER_FAST
		       : !strcmp(argv[2], "mixed") ? WASM_JIT_TIER_MIXED
						   : WASM_JIT_TIER_OPT;
		first = 3;
	}
	char err[512];
	if (wasm_jit_load(err, sizeof(err)) < 0) {
		fprintf(stderr, "jit_time: %s\n", err);
		return 1;
	}
	char *profs = getenv("PROF") ? strdup(getenv("PROF")) : NULL, *psave = NULL;
	char *pnext = profs ? strtok_r(profs, ",", &psave) : NULL;
	printf("%-28s %9s %10s %9s %10s\n", "module", "bytes", "wall_ms", "cpu_ms", "object");
	for (int a = first; a < argc; a++) {
		FILE *f = fopen(argv[a], "rb");
		if (!f) {
			perror(argv[a]);
			return 1;
		}
		fseek(f, 0, SEEK_END);
		long n = ftell(f);
		fseek(f, 0, SEEK_SET);
		uint8_t *b = malloc((size_t)n);
		if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
			return 1;
		fclose(f);
		uint32_t *prof = NULL, nprof = 0;
		if (pnext) {
			read_prof(pnext, &prof, &nprof);
			pnext = strtok_r(NULL, ",", &psave);
		}
		double bw = 1e18, bc = 1e18;
		size_t olen = 0;
		for (int r = 0; r < rounds; r++) {
			struct kis_wasm_module *m = NULL;
			struct kis_error *e = NULL;
			if (kis_wasm_module_load(b, (size_t)n, &m, &e) < 0) {
				fprintf(stderr, "%s: %s\n", argv[a], e->message);
				return 1;
			}
			m->jit_guard = wasm_jit_guard_mode();
			m->jit_tier = (uint8_t)tier;
			m->jit_prof = prof;
			m->jit_nprof = nprof;
			m->jit_threads = (uint8_t)(getenv("THREADS") ? atoi(getenv("THREADS")) : 1);
			uint8_t *obj = NULL;
			double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
			if (wasm_jit_emit(m, &obj, &olen, err, sizeof(err)) < 0) {
				fprintf(stderr, "%s: %s\n", argv[a], err);
				return 1;
			}
			double w = now(CLOCK_MONOTONIC) - w0, c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
			bw = w < bw ? w : bw;
			bc = c < bc ? c : bc;
			/* PUT=<store root>: keep the object in that store's cache,
			 * to time the code it makes through the tier */
			if (getenv("PUT") && r == 0 &&
			    wasm_code_cache_put_tier(getenv("PUT"), b, (size_t)n, obj, olen, tier) < 0)
				fprintf(stderr, "%s: cannot write the cache\n", argv[a]);
			free(obj);
			kis_wasm_module_free(m);
		}
		const char *base = strrchr(argv[a], '/');
		printf("%-28s %9ld %10.0f %9.0f %10zu\n", base ? base + 1 : argv[a], n, bw, bc, olen);
		free(b);
		free(prof);
	}
	free(profs);
	return 0;
}
