/* SPDX-License-Identifier: MIT */
/* Tier-up across runs, the engine's half: under wasm.engine auto, a module
 * too large to compile inside its first run (KIS_WASM_AUTO_COMPILE_MAX)
 * starts interpreted at once, and meanwhile this starts its compile into
 * the store's cache, so the next run links compiled code.
 *
 * Who does what. The engine claims the module (jit_cache.c: a locked
 * "<h>.pending" file holding the module's bytes; a second run that finds
 * it locked starts nothing) and starts `kis-helper wasm-tierup` detached
 * (kis_spawn_detached: its own session, reparented away, so neither the
 * run nor the engine waits for it), the claim as its fd 3. The helper
 * (src/helper/main.c) nices itself, forks its compiler process (confined
 * as any kis-helper compiler is, with RLIMIT_DATA and RLIMIT_CPU of the
 * budget), stops it at the wall budget, and writes the object into the
 * cache (temporary file, rename) only when the compile succeeded; then
 * gives the claim up. The module's bytes never leave the store's 0700
 * directory and the engine's own files: the helper reads them from the
 * claim, not from the workspace. The start itself is the wasm backend's
 * (src/backends/wasm.c, tierup_start: starting a process is exec's, which
 * this layer does not reach); the budget and the names are here. */
#include <stdio.h>

#include "wasm/jit_tierup.h"

/* Measured (docs/wasm.md, "Tier-up"): LLVM's peak heap grows with the
 * module's code; CPU at default<O1> was ~15 ms per KiB on this machine,
 * the optimising tier's own pass list (2026-12-07) about half that: the
 * budget below was set for the former and is left generous. */
#define TIERUP_MEM_BASE ((uint64_t)256 << 20)
#define TIERUP_MEM_PER_BYTE 512u
#define TIERUP_MEM_MAX ((uint64_t)2 << 30)
#define TIERUP_CPU_BASE_S 10u
#define TIERUP_CPU_PER_KIB_MS 60u
#define TIERUP_CPU_MAX_S 300u
#define TIERUP_WALL_MIN_S 600u

void wasm_tierup_budget(size_t len, struct wasm_tierup_budget *b)
{
	uint64_t mem = TIERUP_MEM_BASE + (uint64_t)len * TIERUP_MEM_PER_BYTE;
	b->mem_bytes = mem > TIERUP_MEM_MAX ? TIERUP_MEM_MAX : mem;
	uint64_t cpu = TIERUP_CPU_BASE_S + (uint64_t)(len >> 10) * TIERUP_CPU_PER_KIB_MS / 1000;
	b->cpu_s = cpu > TIERUP_CPU_MAX_S ? TIERUP_CPU_MAX_S : (unsigned)cpu;
	/* niced on shared cores it may wait long for a core (a 276 KB
	 * module's compile took a minute of wall time beside seven other
	 * jobs on this 2-core machine): the wall bound only catches a hang */
	b->wall_s = 10 * b->cpu_s < TIERUP_WALL_MIN_S ? TIERUP_WALL_MIN_S : 10 * b->cpu_s;
}

const char *wasm_tierup_name(enum wasm_tierup t)
{
	switch (t) {
	case WASM_TIERUP_STARTED:
		return "started";
	case WASM_TIERUP_RUNNING:
		return "running";
	case WASM_TIERUP_NONE:
	default:
		return NULL;
	}
}
