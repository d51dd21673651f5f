/* SPDX-License-Identifier: MIT */
/* Loading the compiler plugin (libkis-jit.so: jit_llvm.c with LLVM) on first
 * use, and the library's entries into it. Only a process that compiles
 * pays for LLVM: linking it into every program made each kis command start
 * ~130 ms slower (libLLVM-14's relocations and static constructors).
 *
 * Where: beside the running program (the build tree: build/, and build/tests
 * one level down) or where `make install` puts it (KIS_JIT_PLUGIN, from the
 * Makefile). The path is the program's own (/proc/self/exe), never the
 * environment's. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wasm/jit.h"

#ifndef KIS_JIT_PLUGIN
#define KIS_JIT_PLUGIN "/usr/local/lib/kis/libkis-jit.so"
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct wasm_jit_plugin plugin;
static bool loaded;
static char why[300];

static const struct wasm_jit_sym syms[] = {
#define S(n) {#n, (void (*)(void))n},
	WASM_JIT_HELPERS(S)
#undef S
};

static const struct wasm_jit_host host = {
	.version = WASM_JIT_VERSION,
	.read_u32 = wasm_read_u32,
	.read_s32 = wasm_read_s32,
	.read_s33 = wasm_read_s33,
	.read_s64 = wasm_read_s64,
	.simd_sig = wasm_simd_sig,
	.syms = syms,
	.nsyms = sizeof(syms) / sizeof(*syms),
};

/* The candidates, best first; n of them written. */
static int candidates(char out[3][PATH_MAX])
{
	int n = 0;
	char exe[PATH_MAX];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (l > 0) {
		exe[l] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			snprintf(out[n++], PATH_MAX, "%.4000s/libkis-jit.so", exe);
			snprintf(out[n++], PATH_MAX, "%.4000s/../libkis-jit.so", exe);
		}
	}
	snprintf(out[n++], PATH_MAX, "%s", KIS_JIT_PLUGIN);
	return n;
}

bool wasm_jit_present(void)
{
	char c[3][PATH_MAX];
	int n = candidates(c);
	for (int i = 0; i < n; i++)
		if (access(c[i], R_OK) == 0)
			return true;
	return false;
}

int wasm_jit_load(char *err, size_t errlen)
{
	pthread_mutex_lock(&lock);
	if (!loaded && !why[0]) {
		char c[3][PATH_MAX];
		int n = candidates(c);
		void *h = NULL;
		const char *last = "not found";
		for (int i = 0; i < n && !h; i++) {
			if (access(c[i], R_OK) < 0)
				continue;
			/* RTLD_LOCAL: LLVM's symbols stay the plugin's */
			h = dlopen(c[i], RTLD_NOW | RTLD_LOCAL);
			if (!h)
				last = dlerror();
		}
		wasm_jit_plugin_init_fn init =
			h ? (wasm_jit_plugin_init_fn)dlsym(h, WASM_JIT_PLUGIN_INIT) : NULL;
		if (!h)
			snprintf(why, sizeof(why), "wasm.engine: cannot load the compiler (libkis-jit.so): %s",
				 last);
		else if (!init || init(&host, &plugin) < 0)
			snprintf(why, sizeof(why),
				 "wasm.engine: the compiler (libkis-jit.so) does not start here (no "
				 "native LLVM target, or another version)");
		else
			loaded = true;
		/* a plugin that failed stays mapped: harmless, and never run */
	}
	bool ok = loaded;
	if (!ok && err)
		snprintf(err, errlen, "%s", why);
	pthread_mutex_unlock(&lock);
	return ok ? 0 : -1;
}

bool wasm_jit_supported(void)
{
	return wasm_jit_load(NULL, 0) == 0;
}

int wasm_jit_compile(struct kis_wasm_module *m, const uint8_t *cached, size_t cached_len,
		     char *err, size_t errlen)
{
	if (wasm_jit_load(err, errlen) < 0)
		return -1;
	return plugin.compile(m, cached, cached_len, err, errlen);
}

void wasm_jit_module_free(struct wasm_jit_module *jm)
{
	if (jm && loaded) /* a module has code only once the plugin ran */
		plugin.module_free(jm);
}

int wasm_jit_lookup(struct wasm_jit_module *jm, uint32_t i, void **fn,
		    void (**wrap)(void *, uint64_t *))
{
	return jm && loaded ? plugin.lookup(jm, i, fn, wrap) : -1;
}

const uint8_t *wasm_jit_object(const struct wasm_jit_module *jm, size_t *len, bool *from_cache)
{
	if (!jm || !loaded) {
		*len = 0;
		*from_cache = false;
		return NULL;
	}
	return plugin.object(jm, len, from_cache);
}

int wasm_jit_id(char *buf, size_t len)
{
	if (wasm_jit_load(NULL, 0) < 0)
		return -1;
	return plugin.id(buf, len);
}
