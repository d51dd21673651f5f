/* SPDX-License-Identifier: MIT */
/* Internal: the store's cache of compiled WebAssembly (jit_cache.c), for the
 * wasm tier: looked up and written by the engine, outside the sandbox. */
#ifndef KIS_WASM_JIT_CACHE_H
#define KIS_WASM_JIT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/util.h"

/* The object code cached for module mod under this compiler and CPU:
 * 0 and *obj (to release with wasm_code_cache_free) on a hit, -1 on a miss, an untrusted file, or an
 * object our loader refuses (src/wasm/jit_elf.c: checked, not mapped). */
KIS_HIDDEN int wasm_code_cache_get(const char *store_root, const uint8_t *mod, size_t len,
				   uint8_t **obj, size_t *objlen);
/* The same, and the tier the code was made at (WASM_JIT_TIER_*, jit.h). */
KIS_HIDDEN int wasm_code_cache_get_tier(const char *store_root, const uint8_t *mod, size_t len,
					uint8_t **obj, size_t *objlen, unsigned *tier);
/* The same, the check being the link itself: *pre is the object linked,
 * read-write, never executable here (wasm_jit_elf_prelink), for a forked
 * child to seal and run instead of linking it again; the caller frees it
 * (wasm_jit_elf_free). */
struct wasm_jit_module;
KIS_HIDDEN int wasm_code_cache_get_linked(const char *store_root, const uint8_t *mod, size_t len,
					  uint8_t **obj, size_t *objlen, unsigned *tier,
					  struct wasm_jit_module **pre);
KIS_HIDDEN void wasm_code_cache_free(uint8_t *obj, size_t objlen);
/* Forget what is cached for mod (refused where it was to run). */
KIS_HIDDEN void wasm_code_cache_drop(const char *store_root, const uint8_t *mod, size_t len);
/* Keep obj for mod (atomically replacing any old one); 0 or -1. */
KIS_HIDDEN int wasm_code_cache_put(const char *store_root, const uint8_t *mod, size_t len,
				   const uint8_t *obj, size_t objlen);

/* The same, for code made at tier (WASM_JIT_TIER_*); put is the OPT tier. */
KIS_HIDDEN int wasm_code_cache_put_tier(const char *store_root, const uint8_t *mod, size_t len,
					const uint8_t *obj, size_t objlen, unsigned tier);
/* The bound on the cache's objects, in bytes (each write evicts the least
 * recently used past it; jit_cache.c says how "used" is read). */
#define WASM_CODE_CACHE_MAX ((uint64_t)512 << 20)
/* The cache file's name for mod under this compiler ("<16 hex>.o"). */
KIS_HIDDEN int wasm_code_cache_name(const uint8_t *mod, size_t len, char name[32]);
/* Claim mod's background compile: 0 and *fd (its "<h>.pending" file,
 * locked, holding the module's bytes) when this caller compiles it, 1 when
 * another holds the claim (a compile of it is running), -1 on error. */
KIS_HIDDEN int wasm_code_cache_claim(const char *store_root, const uint8_t *mod, size_t len,
				     int *fd);
/* Give a claim up (done, or failed): its file removed, fd closed. name is
 * the cache file's (wasm_code_cache_name). */
KIS_HIDDEN void wasm_code_cache_unclaim(const char *store_root, const char name[32], int fd);

#endif
