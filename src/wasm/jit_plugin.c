/* SPDX-License-Identifier: MIT */
/* The compiler in this process: libkis-jit.so (jit_llvm.c with LLVM)
 * loaded by dlopen(3) on first use. This is the library's way (a program
 * linking libkis-sandbox, the spec-test runner, kis-helper). The static
 * `kis` command line cannot dlopen a plugin that needs the shared libc, and
 * links jit_remote.c in place of this file: the same functions, with LLVM
 * in a kis-helper process of its own (the archive member that defines
 * them first wins, so this one is then never linked). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wasm/jit.h"

static struct wasm_jit_plugin plugin;

static const struct wasm_jit_host host = {
	.version = WASM_JIT_VERSION,
	.read_u32 = wasm_read_u32,
	.read_s32 = wasm_read_s32,
	.read_s33 = wasm_read_s33,
	.read_s64 = wasm_read_s64,
	.simd_sig = wasm_simd_sig,
};

bool wasm_jit_present(void)
{
	/* Found once, present for this process (a process forked after
	 * that, the wasm tier's child, asks no more: four pages of stack
	 * and a dozen of code first touched there); a later load that
	 * finds it gone fails naming why. Absent is asked again. */
	static _Atomic bool seen;
	if (!seen && wasm_jit_plugin_readable())
		seen = true;
	return seen;
}

int wasm_jit_start(char *why, size_t whylen)
{
	char c[WASM_JIT_PLUGIN_CANDIDATES][PATH_MAX];
	int n = wasm_jit_plugin_candidates(c);
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
	if (!h) {
		snprintf(why, whylen, "wasm.engine: cannot load the compiler (libkis-jit.so): %s", last);
		return -1;
	}
	if (!init || init(&host, &plugin) < 0) {
		snprintf(why, whylen,
			 "wasm.engine: the compiler (libkis-jit.so) does not start here (no "
			 "native LLVM target, or another version)");
		return -1;
	}
	/* a plugin that failed stays mapped: harmless, and never run */
	return 0;
}

/* The caller loaded the compiler first (wasm_jit_load, jit_load.c) */
int wasm_jit_emit(struct kis_wasm_module *m, uint8_t **obj, size_t *len, char *err, size_t errlen)
{
	if (!plugin.emit) {
		snprintf(err, errlen, "wasm.engine: the compiler is not loaded");
		return -1;
	}
	return plugin.emit(m, obj, len, err, errlen);
}

int wasm_jit_channel_fd(void)
{
	return -1; /* no compiler process: LLVM is in this one */
}
