/* SPDX-License-Identifier: MIT */
/* wasi-libc's memcpy, memmove, memset, memcmp, strlen, strchrnul, strchr,
 * strcspn and strspn, exported for the differential test of the
 * compiler's fast path for them (jit_llvm.h, "wasi-libc's memory routines,
 * recognised"): tests/integration/test_wasm_jit_libc.py. Memory is three
 * pages, the third (131072..196607) the test's; fill(), fills() and sum()
 * write and hash it, sumall() hashes all of memory (the shadow stack,
 * where strcspn and strspn keep their set, included). */
#include <string.h>
#include <stdint.h>
char *strchrnul(const char *, int);
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
static size_t (*volatile sl)(const char *) = strlen;
static char *(*volatile sn)(const char *, int) = strchrnul;
static char *(*volatile sc)(const char *, int) = strchr;
static size_t (*volatile cs)(const char *, const char *) = strcspn;
static size_t (*volatile ss)(const char *, const char *) = strspn;
#define P(x) ((const char *)(uintptr_t)(x))
__attribute__((export_name("len"))) uint32_t len(uint32_t s) { return (uint32_t)sl(P(s)); }
__attribute__((export_name("chrnul"))) uint32_t chrnul(uint32_t s, uint32_t c) { return (uint32_t)(uintptr_t)sn(P(s), (int)c); }
__attribute__((export_name("chr"))) uint32_t chr(uint32_t s, uint32_t c) { return (uint32_t)(uintptr_t)sc(P(s), (int)c); }
__attribute__((export_name("cspn"))) uint32_t cspn(uint32_t s, uint32_t set) { return (uint32_t)cs(P(s), P(set)); }
__attribute__((export_name("spn"))) uint32_t spn(uint32_t s, uint32_t set) { return (uint32_t)ss(P(s), P(set)); }
/* the shadow stack pointer (global 0), below which strcspn and strspn
 * keep their set: read and moved anywhere, wrapped and out of bounds too */
__asm__(".globaltype __stack_pointer, i32\n");
__attribute__((export_name("getsp"))) uint32_t getsp(void) { uint32_t v; __asm__ volatile("global.get __stack_pointer\n\tlocal.set %0" : "=r"(v)); return v; }
__attribute__((export_name("setsp"))) void setsp(uint32_t v) { __asm__ volatile("local.get %0\n\tglobal.set __stack_pointer" : : "r"(v)); }
/* letters a..h, a NUL where seed % k is 0 */
__attribute__((export_name("fills"))) void fills(uint32_t seed, uint32_t k) { uint8_t *p = (uint8_t *)131072; for (uint32_t i = 0; i < 65536; i++) { seed = seed * 1103515245u + 12345u; p[i] = (seed >> 8) % k ? (uint8_t)('a' + (seed >> 20) % 8) : 0; } }
__attribute__((export_name("sumall"))) uint64_t sumall(void) { uint64_t h = 1469598103934665603ull; for (uint32_t i = 0; i < 196608; i++) h = (h ^ ((volatile uint8_t *)0)[i]) * 1099511628211ull; return h; }
