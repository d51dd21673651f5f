/* SPDX-License-Identifier: MIT */
/* Where the compiler plugin (libkis-jit.so) lies, and the hook that starts
 * its process: what both ways of running the compiler (jit_plugin.c,
 * jit_remote.c) and the driver (jit_load.c) ask, kept below all three so
 * that the ways name nothing of the driver that calls them (issue 42: the
 * driver and the ways were one circle).
 *
 * Where: beside the running program (the build tree: build/, and build/tests
 * one level down) or where `make install` puts it (KIS_JIT_PLUGIN, from the
 * Makefile). The path is the program's own (/proc/self/exe), never the
 * environment's. */
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "core/io.h"
#include "wasm/jit.h"
#include "wasm/jit_remote.h"

#ifndef KIS_JIT_PLUGIN
#define KIS_JIT_PLUGIN "/usr/local/lib/kis/libkis-jit.so"
#endif

/* The candidates, best first; n of them written. */
int wasm_jit_plugin_candidates(char out[WASM_JIT_PLUGIN_CANDIDATES][PATH_MAX])
{
	int n = 0;
	const char *exe_dir = kis_exe_dir();
	if (exe_dir) {
		snprintf(out[n++], PATH_MAX, "%.4000s/libkis-jit.so", exe_dir);
		snprintf(out[n++], PATH_MAX, "%.4000s/../libkis-jit.so", exe_dir);
		/* an installed tree, wherever it was put: bin/kis beside
		 * lib/kis/ (kis-helper, which loads it, lies there too) */
		snprintf(out[n++], PATH_MAX, "%.4000s/../lib/kis/libkis-jit.so", exe_dir);
	}
	snprintf(out[n++], PATH_MAX, "%s", KIS_JIT_PLUGIN);
	return n;
}

__attribute__((noinline)) bool wasm_jit_plugin_readable(void)
{
	char c[WASM_JIT_PLUGIN_CANDIDATES][PATH_MAX];
	int n = wasm_jit_plugin_candidates(c);
	for (int i = 0; i < n; i++)
		if (access(c[i], R_OK) == 0)
			return true;
	return false;
}

/* The compiler process's spawn hook (jit_remote.h says why); set once by
 * the wasm tier's child before it loads the compiler, in that process. */
static wasm_jit_spawn_fn spawn_fn;
static void *spawn_ctx;

void wasm_jit_set_spawn_hook(wasm_jit_spawn_fn fn, void *ctx)
{
	spawn_fn = fn;
	spawn_ctx = ctx;
}

wasm_jit_spawn_fn wasm_jit_spawn_hook(void **ctx)
{
	*ctx = spawn_ctx;
	return spawn_fn;
}
