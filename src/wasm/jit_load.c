/* SPDX-License-Identifier: MIT */
/* Loading the compiler plugin (libkis-jit.so: jit_llvm.c with LLVM) on first
 * use, and the library's entries into it: the plugin only emits object
 * code, which jit_elf.c links, so cached code needs no LLVM at all. Only a process that compiles
 * pays for LLVM: linking it into every program made each kis command start
 * ~130 ms slower (libLLVM-14's relocations and static constructors).
 * Where the plugin lies is jit_find.c's; how it runs, jit_plugin.c's or
 * jit_remote.c's, which this file drives (they call nothing of it). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/platform/x86.h>
#endif

#include "core/io.h"
#include "wasm/jit.h"
#include "wasm/jit_remote.h"

#ifndef KIS_LLVM_VERSION
#define KIS_LLVM_VERSION "unknown"
#endif

/* Loading, once per process, whichever way the compiler runs
 * (wasm_jit_start: jit_plugin.c or jit_remote.c); a failure is kept and
 * said again to every later asker. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded;
static char why[300];

int wasm_jit_load(char *err, size_t errlen)
{
	pthread_mutex_lock(&load_lock);
	if (!loaded && !why[0] && wasm_jit_start(why, sizeof(why)) == 0)
		loaded = true;
	bool ok = loaded;
	if (!ok && err)
		snprintf(err, errlen, "%s", why);
	pthread_mutex_unlock(&load_lock);
	return ok ? 0 : -1;
}

bool wasm_jit_loaded(void)
{
	pthread_mutex_lock(&load_lock);
	bool l = loaded;
	pthread_mutex_unlock(&load_lock);
	return l;
}

int wasm_jit_link_cached(const uint8_t *cached, size_t cached_len, struct wasm_jit_module **out)
{
	struct wasm_jit_module *jm = NULL;
	*out = NULL;
	if (!cached || !cached_len ||
	    wasm_jit_elf_load(&wasm_jit_rt_externals, cached, cached_len, UINT32_MAX, true, &jm, NULL, 0) < 0)
		return -1;
	wasm_jit_elf_keep_object(jm, NULL, 0, true);
	*out = jm;
	return 0;
}

int wasm_jit_compile(struct kis_wasm_module *m, const uint8_t *cached, size_t cached_len,
		     struct wasm_jit_module **linked, char *err, size_t errlen)
{
	if (m->jit)
		return 0;
	uint32_t n = m->nfuncs - m->nfunc_imports;
	struct wasm_jit_module *jm = NULL;
	if (linked && *linked) {
		/* linked before the module was there: it is this module's
		 * code only with exactly its functions (an object with other
		 * entries is another module's, refused as at a link here) */
		jm = *linked;
		*linked = NULL;
		uint32_t has = wasm_jit_elf_nfuncs(jm);
		if (has == n) {
			m->jit = jm;
			m->jit_free = wasm_jit_module_free;
			return 0;
		}
		wasm_jit_elf_free(jm);
		jm = NULL;
		snprintf(err, errlen, "the cached code is refused (%s): it has %u functions, "
			 "the module %u", wasm_elf_strerror(WASM_ELF_E_FUNCS), has, n);
		if (!wasm_jit_loaded())
			return -1;
		cached = NULL; /* compiled anew below */
	}
	if (cached && cached_len) {
		/* Cached code links without LLVM. One refused (corrupt,
		 * hostile, or another module's) is compiled anew if the
		 * compiler is loaded already, never loaded here: a caller that
		 * hands cached code may be confined past opening a plugin (the
		 * wasm tier's child, under seccomp). */
		if (wasm_jit_elf_load(&wasm_jit_rt_externals, cached, cached_len, n, true, &jm, err, errlen) == 0) {
			wasm_jit_elf_keep_object(jm, NULL, 0, true);
			m->jit = jm;
			m->jit_free = wasm_jit_module_free;
			return 0;
		}
		if (!wasm_jit_loaded())
			return -1;
	}
	/* a fresh compile walks validated bodies only */
	if (wasm_module_finish_bodies(m, err, errlen) < 0)
		return -1;
	if (wasm_jit_load(err, errlen) < 0)
		return -1;
	uint8_t *obj = NULL;
	size_t len = 0;
	if (wasm_jit_emit(m, &obj, &len, err, errlen) < 0)
		return -1;
	if (wasm_jit_elf_load(&wasm_jit_rt_externals, obj, len, n, true, &jm, err, errlen) < 0) {
		free(obj);
		return -1;
	}
	wasm_jit_elf_keep_object(jm, obj, len, false);
	m->jit = jm;
	m->jit_free = wasm_jit_module_free;
	return 0;
}

void wasm_jit_module_free(struct wasm_jit_module *jm)
{
	wasm_jit_elf_free(jm);
}

const uint8_t *wasm_jit_object(const struct wasm_jit_module *jm, size_t *len, bool *from_cache)
{
	return wasm_jit_elf_object(jm, len, from_cache);
}

/* The CPU as LLVM's host detection sees it (its name and features come
 * from these cpuid leaves and XCR0, llvm/lib/Support/Host.cpp): the same
 * words, the same code. Read from what glibc's start-up gathered (the
 * raw cpuid words, <sys/platform/x86.h>), not by cpuid: that instruction
 * traps to the hypervisor in a VM (35 us each on this machine, a dozen
 * leaves were 0.4 ms of a 2 ms budget). Leaf 1's EBX (APIC id, per core)
 * is left out; XCR0 (xgetbv, not trapping) says what the OS enabled. */
static void cpu_sig(char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
#if defined(__x86_64__)
	/* the vendor from leaf 0 itself, one cpuid, here only: libgcc's
	 * __builtin_cpu_is would link its constructor, ~10 cpuid at every
	 * start of every program of ours that has this file (kis itself) */
	unsigned v0, vb = 0, vc, vd;
	__get_cpuid(0, &v0, &vb, &vc, &vd);
	at += (size_t)snprintf(buf, len, "%s",
			       vb == signature_INTEL_ebx ? "intel" :
			       vb == signature_AMD_ebx	 ? "amd" :
							   "x86");
	for (unsigned i = CPUID_INDEX_1; i <= CPUID_INDEX_14_ECX_0 && at < len; i++) {
		const struct cpuid_feature *f = __x86_get_cpuid_feature_leaf(i);
		unsigned ebx = i == CPUID_INDEX_1 ? 0 : f->cpuid_array[1];
		at += (size_t)snprintf(buf + at, len - at, ".%x.%x.%x.%x", f->cpuid_array[0], ebx,
				       f->cpuid_array[2], f->cpuid_array[3]);
	}
	const struct cpuid_feature *l1 = __x86_get_cpuid_feature_leaf(CPUID_INDEX_1);
	if ((l1->cpuid_array[2] & (1u << 27)) && at < len) { /* OSXSAVE */
		uint32_t lo, hi;
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		snprintf(buf + at, len - at, ".x%x", lo);
	}
#else
	snprintf(buf, len, "unknown");
	(void)at;
#endif
}

/* Without LLVM (a cached run never loads it): this library's compiled
 * code contract and loader, the LLVM the plugin was built with, the plugin
 * file itself (a rebuilt one makes new code), and the CPU. */
int wasm_jit_id(char *buf, size_t len)
{
	char c[WASM_JIT_PLUGIN_CANDIDATES][PATH_MAX];
	int n = wasm_jit_plugin_candidates(c);
	struct stat st;
	int i = 0;
	for (; i < n; i++)
		if (stat(c[i], &st) == 0 && S_ISREG(st.st_mode) && access(c[i], R_OK) == 0)
			break;
	if (i == n)
		return -1;
	char cpu[400];
	cpu_sig(cpu, sizeof(cpu));
	int w = snprintf(buf, len, "kis-jit %u elf %u llvm %s plugin %llu.%lld.%09ld cpu %s",
			 WASM_JIT_VERSION, WASM_JIT_ELF_FORMAT, KIS_LLVM_VERSION,
			 (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
			 st.st_mtim.tv_nsec, cpu);
	return w < 0 || (size_t)w >= len ? -1 : 0;
}
