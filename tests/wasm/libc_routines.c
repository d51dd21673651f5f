/* SPDX-License-Identifier: MIT */
/* wasi-libc's memcpy, memmove, memset and memcmp, exported for the
 * differential test of the compiler's fast path for them (jit_llvm.c,
 * "wasi-libc's memory routines, recognised"):
 * tests/integration/test_wasm_jit_libc.py. Memory is three pages, the
 * third (131072..196607) the test's; fill() and sum() write and hash it. */
#include <string.h>
#include <stdint.h>
/* through volatile pointers: clang keeps the calls to the library */
static void *(*volatile cp)(void *, const void *, size_t) = memcpy;
static void *(*volatile mv)(void *, const void *, size_t) = memmove;
static void *(*volatile st)(void *, int, size_t) = memset;
static int (*volatile cm)(const void *, const void *, size_t) = memcmp;
__attribute__((export_name("cpy"))) uint32_t cpy(uint32_t d, uint32_t s, uint32_t n) { return (uint32_t)(uintptr_t)cp((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); }
__attribute__((export_name("mov"))) uint32_t mov(uint32_t d, uint32_t s, uint32_t n) { return (uint32_t)(uintptr_t)mv((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); }
__attribute__((export_name("set"))) uint32_t set(uint32_t d, uint32_t c, uint32_t n) { return (uint32_t)(uintptr_t)st((void *)(uintptr_t)d, (int)c, n); }
__attribute__((export_name("cmp"))) int cmp(uint32_t a, uint32_t b, uint32_t n) { return cm((void *)(uintptr_t)a, (void *)(uintptr_t)b, n); }
__attribute__((export_name("fill"))) void fill(uint32_t seed) { uint8_t *p = (uint8_t *)131072; for (uint32_t i = 0; i < 65536; i++) { seed = seed * 1103515245u + 12345u; p[i] = (uint8_t)(seed >> 16); } }
__attribute__((export_name("sum"))) uint64_t sum(void) { uint64_t h = 1469598103934665603ull; uint8_t *p = (uint8_t *)131072; for (uint32_t i = 0; i < 65536; i++) h = (h ^ p[i]) * 1099511628211ull; return h; }
