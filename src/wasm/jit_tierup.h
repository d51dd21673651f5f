/* SPDX-License-Identifier: MIT */
/* Internal: tier-up across runs (jit_tierup.c): the wasm tier's `auto`
 * compiles a module it runs interpreted into the store's cache, in the
 * background, for the module's next run (docs/wasm.md, "Tier-up"). */
#ifndef KIS_WASM_JIT_TIERUP_H
#define KIS_WASM_JIT_TIERUP_H

#include <stddef.h>
#include <stdint.h>

#include "core/util.h"

/* What a run did about its module's compile. */
enum wasm_tierup {
	WASM_TIERUP_NONE,    /* nothing: no store, no helper, or an error */
	WASM_TIERUP_STARTED, /* this run started the background compile */
	WASM_TIERUP_RUNNING, /* another run's compile of it holds the claim */
};

/* The compile's budget, by the module's size: memory (RLIMIT_DATA of the
 * compiling process: LLVM's heap), CPU seconds (RLIMIT_CPU) and wall
 * seconds (the writer stops it), all three generous for the real programs
 * measured (docs/wasm.md gives the figures) and bounded for a hostile one. */
struct wasm_tierup_budget {
	uint64_t mem_bytes;
	unsigned cpu_s, wall_s;
};
KIS_HIDDEN void wasm_tierup_budget(size_t len, struct wasm_tierup_budget *b);

/* The interpreter's profile of a run, for the mixed tier (jit.h,
 * WASM_JIT_TIER_MIXED): a shared mapping the engine makes before the run
 * (cap entries), its child's interpreter fills at the run's end (n, then
 * per defined function its count of calls and of ticks taken in it), and the
 * engine hands to the background compile (docs/wasm.md, "Tier-up"). What
 * the child wrote is untrusted: it only chooses a tier per function, and
 * the compiler takes it only when n is the module's count. */
struct wasm_prof_out {
	uint32_t cap;
	volatile uint32_t n; /* 0 until written */
	uint32_t c[];
};
/* Fewer counts than this in all (about 0.15 s of interpretation here; Lua,
 * bzip2 and SQLite's measured runs counted 50 to 90 million in ~3 s): the
 * run was too short to say where a real one spends its time (a
 * `--version`, a hello world), and mixed code is final (docs/wasm.md,
 * "Tier-up"), so the stage optimises everything instead. */
#define WASM_TIERUP_PROFILE_MIN (1u << 22)
/* The bound on its entries for a module of len bytes: a defined
 * function's body takes at least 2 bytes (its size and locals count,
 * spec 5.5.13) */
#define WASM_PROF_CAP(len) ((uint32_t)((len) / 2 + 1))
/* The store's instances write their profile to o at the end of a WASI run
 * (kis_wasi_run_module); NULL: none. */
struct kis_wasm_store;
struct kis_wasm_instance;
KIS_HIDDEN void wasm_store_profile_to(struct kis_wasm_store *s, struct wasm_prof_out *o);
KIS_HIDDEN void wasm_instance_profile_out(const struct kis_wasm_instance *inst);

/* The name the result gives it ("started", "running"), NULL for none. */
KIS_HIDDEN const char *wasm_tierup_name(enum wasm_tierup t);

#endif
