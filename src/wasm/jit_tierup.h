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

/* The name the result gives it ("started", "running"), NULL for none. */
KIS_HIDDEN const char *wasm_tierup_name(enum wasm_tierup t);

#endif
