/* SPDX-License-Identifier: MIT */
/* The frames between the static `kis` and its compiler process, kis-helper
 * (jit_remote.c, src/helper/main.c). */
#ifndef KIS_WASM_JIT_REMOTE_H
#define KIS_WASM_JIT_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "core/util.h"

#define WASM_JIT_REMOTE_MAGIC 0x314a434bu /* "KCJ1" */
#define WASM_JIT_REMOTE_GUARD 1u	  /* request: code for guard-region memories */
#define WASM_JIT_REMOTE_FAST 2u	  /* request: the fast tier (WASM_JIT_TIER_FAST) */
/* request: the mixed tier (WASM_JIT_TIER_MIXED); the module is followed by
 * a second frame {magic, 0, len} and len bytes: the profile, a u32 count
 * per defined function (jit_tierup.h, struct wasm_prof_out) */
#define WASM_JIT_REMOTE_MIXED 4u
/* the largest object accepted back (SQLite's is ~6 MiB) */
#define WASM_JIT_REMOTE_MAX_OBJECT ((uint64_t)512 << 20)

struct wasm_jit_frame {
	uint32_t magic;
	uint32_t word; /* request: flags; hello and answer: 0 ok, else failed */
	uint64_t len;  /* bytes that follow */
};

/* The static kis's compiler process is started by the process that
 * compiles (the wasm tier's child), so without more it is wherever that
 * process is: outside the run's limits. A caller sets fn, which runs in
 * the helper-to-be between its fork and its exec (no allocation there:
 * the fork of a process that may have threads), to put it under them
 * (src/backends/wasm.c: the run's compile group, or rlimits where there
 * is none). Its result < 0: the helper is not started. Defined in
 * jit_find.c (linked both ways); only jit_remote.c calls it. */
typedef int (*wasm_jit_spawn_fn)(void *ctx);
KIS_HIDDEN void wasm_jit_set_spawn_hook(wasm_jit_spawn_fn fn, void *ctx);
KIS_HIDDEN wasm_jit_spawn_fn wasm_jit_spawn_hook(void **ctx);

#endif
