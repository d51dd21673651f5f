/* SPDX-License-Identifier: MIT */
/* Internal: the WebAssembly compiler (jit_llvm.c: wasm to LLVM IR to x86-64
 * through LLVM's ORC JIT) and its runtime (jit_rt.c: entry, stack, traps). */
#ifndef KIS_WASM_JIT_H
#define KIS_WASM_JIT_H

#include <limits.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wasm/internal.h"

/* Bumped whenever the generated code or the layout it reads changes: part
 * of the cache key of compiled code. */
#define WASM_JIT_VERSION 14u

/* Bytes a recognised wasi-libc routine's fast path may touch between two
 * interrupt checks (jit_llvm.h, jit_rt.c): a few ms at most. */
#define WASM_JIT_FAST_MAX (16u << 20)

/* What compiled code of one instance reads, through the pointer every
 * compiled function takes first. The generator (jit_llvm.c) addresses the
 * fields with offsetof, so this layout is the one contract between them. */
struct wasm_jit_ctx {
	struct kis_wasm_memory *mem; /* memory 0, or NULL */
	struct kis_wasm_global **globals;
	struct kis_wasm_table **tables;
	struct kis_wasm_func **funcs;
	atomic_int *tick;            /* the store's jit_tick: WASM_JIT_TICK_* */
	uintptr_t stack_limit;       /* lowest stack address a prologue may reach */
	const struct wasm_functype *types; /* the module's types */
	struct kis_wasm_instance *inst;
	struct kis_wasm_store *store;
	/* memory 0's data in guard mode, where it never moves (the
	 * reservation is made before this context, memory.grow only opens
	 * more of it): one load at a function's entry, not two through
	 * mem; NULL in check mode, whose code reads mem->data */
	uint8_t *mem0;
};

/* The poll page (guard mode, docs/wasm.md "The poll page"): each context
 * is the second page of a two-page mapping whose first page, readable and
 * never written, is where compiled code ticks, with one instruction of a
 * fixed form, `cmpb $0, -8192(%reg)` from P (WASM_JIT_CTX_ARG) (jit_llvm_ir.c,
 * tick). Nothing set, the page reads and the tick costs that load; an
 * interrupt, or a fuel budget, makes the page PROT_NONE (wasm_jit_poll_set)
 * and the tick faults into the handler (jit_rt.c), which traps, or counts
 * one step of fuel and resumes after the instruction. Check mode keeps the
 * tick word (WASM_JIT_TICK_*). */
#define WASM_JIT_POLL_OFF 4096u
/* What a compiled function takes first is not the context but the
 * context plus one page, P: where memory 0 is when the module defines it
 * (WASM_JIT_PREFIX), so that one register serves both, and an access at
 * a small offset is a small displacement from it; the context's fields
 * are at P - 4096 + offset, the poll at P - 8192. C passes the context
 * to a function's wrapper (w<i>), which adds the page. */
#define WASM_JIT_CTX_ARG 4096u
struct wasm_jit_poll {
	_Atomic(uint8_t *) page; /* the poll page, NULL once its instance is freed */
	bool in_prefix; /* in its memory's prefix (WASM_JIT_PREFIX): not unmapped with the instance */
	struct wasm_jit_poll *next;
};

/* The store's state for compiled code: the stack it runs on (a mapping with
 * a guard region below it) and the way back from a trap. */
struct wasm_jit_store {
	uint8_t *map;  /* guard region then stack */
	size_t map_len;
	uintptr_t stack_top;
	uintptr_t stack_limit;
	bool on_stack; /* compiled code is running: a nested entry stays here */
	uint32_t in_host; /* inside a host or interpreted callee of compiled code */
	jmp_buf *trap_jb;
	/* below the innermost entry's frame (run_entry): where a fault of a
	 * stack run into the guard resumes, to longjmp from (jit_rt.c) */
	uintptr_t trap_sp;
	/* the poll pages of the store's instances, newest first, published
	 * whole (kis_wasm_interrupt walks them, from a signal handler maybe);
	 * each freed with the store */
	_Atomic(struct wasm_jit_poll *) polls;
	atomic_int poll_prot; /* PROT_READ or PROT_NONE, what the pages were last set to */
};

/* The one word check mode's compiled code tests at every function entry
 * and loop header (guard mode polls a page instead: WASM_JIT_POLL_OFF)
 * (struct kis_wasm_store.jit_tick), where the interpreter tests the
 * interrupt flag and then takes one step of fuel (exec.c TICK): zero on a
 * run with no fuel budget that nobody interrupted, so the common tick is a
 * load and a branch. Anything else calls wasm_jit_rt_tick, which does what
 * TICK does (the interrupt flag, then one step of the store's fuel when the
 * run is METERed): a budgeted run takes that call at every tick (slower,
 * counted exactly as the interpreter counts). INTERRUPT is set by
 * kis_wasm_interrupt after the store's interrupt flag, which stays what
 * the interrupt means; METER by kis_wasm_call at a run's start when a
 * budget is set. */
#define WASM_JIT_TICK_INTERRUPT 1
#define WASM_JIT_TICK_METER 2

/* Guard-region memory (docs/wasm.md, "The compiler"). Compiled code makes
 * the address of an access as data + zext(i32 index) + offset (a u32):
 * below 8 GiB plus the access's size from data. In guard mode every memory
 * of a compiling store reserves that much (PROT_NONE beyond its size), so
 * the code checks nothing and an access outside the memory faults inside
 * the reservation; the fault handler (jit_rt.c) turns exactly that fault,
 * made by compiled code on its own stack, into the out-of-bounds trap.
 * Check mode (explicit 64-bit compares, the only mode before) is used where
 * the reservation cannot be had: an RLIMIT_AS (which would count the
 * reservation, not what is used), or a failed trial reservation. The mode
 * is the process's, decided once, and part of the code's cache key. */
/* 8 GiB and 2 MiB more: past the largest access, and 2 MiB aligned */
#define WASM_JIT_RESERVE ((8ull << 30) + (2u << 20))
/* and 2 MiB before the data (so the data stays 2 MiB aligned for huge
 * pages), whose last two pages are the poll page and the context of the
 * instance that defines the memory (jit_rt.c, ctx_new): its compiled code
 * then reaches memory 0 at the context plus one page, from the one
 * register that holds the context (jit_llvm_ir.c, load_mem), and no other
 * register holds the base (wasm_jit_mem_at_ctx) */
#define WASM_JIT_PREFIX (2u << 20)
/* Does m's compiled code find memory 0 one page above its context? In
 * guard mode, when the module defines its memory 0 (an imported one has
 * another instance's context below it). */
static inline bool wasm_jit_mem_at_ctx(const struct kis_wasm_module *m)
{
	return m->jit_guard && m->nmems && !m->nmem_imports;
}
KIS_HIDDEN bool wasm_jit_guard_mode(void);
/* Install the SIGSEGV/SIGBUS handler (once per process) and an alternate
 * signal stack for the calling thread: before any seccomp filter, which
 * allows neither later. 0, or -1 with why in err. */
KIS_HIDDEN int wasm_jit_fault_init(char *err, size_t errlen);
/* runtime.c: is addr inside a guard reservation of a memory of s? */
KIS_HIDDEN bool wasm_store_guard_fault(const struct kis_wasm_store *s, uintptr_t addr);
/* runtime.c: cached code linked by the engine before the fork
 * (wasm_code_cache_get_linked), sealed and taken as s's linked code, as
 * kis_wasm_store_link_cached_code would have linked it; 0, or -1 leaving
 * jm to the caller. */
KIS_HIDDEN int wasm_store_use_prelinked(struct kis_wasm_store *s, struct wasm_jit_module *jm);
/* runtime.c: move mem into a guard reservation (a memory made before its
 * store compiled); 0, or -1 (errno) leaving it as it was. */
KIS_HIDDEN int wasm_memory_reserve(struct kis_wasm_memory *mem);

/* How hard the compiler works (struct kis_wasm_module.jit_tier). OPT: SROA,
 * early CSE, instcombine and CFG simplification, then LLVM's default code
 * generator (SelectionDAG, the greedy allocator), what a run that compiles
 * gets: default<O1>'s code speed for half its compile (jit_llvm.c,
 * OPT_PASSES). FAST: the baseline tier of tier-up (docs/wasm.md, "Tier-up"):
 * SROA, early CSE and CFG simplification only, then FastISel and the fast
 * register allocator (CodeGenLevelNone); measured on Lua 5.4's 635 KB
 * module, 1.5 s of CPU against 13 to 15 s, its code ~1.5x slower. */
#define WASM_JIT_TIER_OPT 0u
#define WASM_JIT_TIER_FAST 1u
/* MIXED: tier-up's second stage (docs/wasm.md, "Tier-up"): the functions
 * that held 99.9% of the interpreter's counts in the run that started it
 * (struct kis_wasm_module.jit_prof) at OPT, the rest at FAST; on Lua 5.4 a
 * quarter of the code, 1.3 s of CPU against OPT's 3.7 s, its code within
 * the noise of OPT's (jit_llvm.c, choose_hot). Without a profile of the
 * module's length, OPT. */
#define WASM_JIT_TIER_MIXED 2u

/* Native stack for compiled code: 8 MiB, a guard region below it, and a
 * margin above the guard that runtime and host functions use, so a host
 * call made at the limit still has room (WASI calls take little). In
 * guard mode a function that calls nothing but compiled functions of its
 * module and the trap checks no limit (jit_llvm_func.c, gen_func): its
 * frames may run into the margin and on to the guard, whose fault the
 * handler turns into the stack-exhausted trap (jit_rt.c, on_fault); every
 * function that calls out (a host or imported function, an indirect call,
 * a runtime helper) checks, so what runs outside compiled code always has
 * the margin. */
#define WASM_JIT_STACK_BYTES (8u << 20)
#define WASM_JIT_STACK_MARGIN (256u << 10)
#define WASM_JIT_STACK_GUARD (64u << 10)

/* Runtime helpers the generated code calls (jit_rt.c), by these names:
 * with WASM_JIT_LIBC, all that compiled code may link to (jit_elf.c). */
#define WASM_JIT_HELPERS(X)                 \
	X(wasm_jit_rt_trap)                 \
	X(wasm_jit_rt_tick)                 \
	X(wasm_jit_rt_tick_saved)           \
	X(wasm_jit_rt_call)                 \
	X(wasm_jit_rt_sig_eq)               \
	X(wasm_jit_rt_memory_grow)          \
	X(wasm_jit_rt_memory_init)          \
	X(wasm_jit_rt_data_drop)            \
	X(wasm_jit_rt_memory_copy)          \
	X(wasm_jit_rt_memory_fill)          \
	X(wasm_jit_rt_table_init)           \
	X(wasm_jit_rt_elem_drop)            \
	X(wasm_jit_rt_table_copy)           \
	X(wasm_jit_rt_table_grow)           \
	X(wasm_jit_rt_table_fill)           \
	X(wasm_jit_rt_memcmp)               \
	X(wasm_jit_rt_strcspn)              \
	X(wasm_jit_rt_strspn)               \
	X(wasm_jit_rt_simd)

/* The C library functions LLVM's code generator calls for some IR (a
 * zeroing loop becomes memset, rounding without SSE4.1 a libm call). */
#define WASM_JIT_LIBC(X) \
	X(memset)        \
	X(memcpy)        \
	X(memmove)       \
	X(nearbyint)     \
	X(nearbyintf)    \
	X(ceil)          \
	X(ceilf)         \
	X(floor)         \
	X(floorf)        \
	X(trunc)         \
	X(truncf)

KIS_HIDDEN __attribute__((noreturn)) void wasm_jit_rt_trap(struct wasm_jit_ctx *c, uint32_t kind);
KIS_HIDDEN void wasm_jit_rt_tick(struct wasm_jit_ctx *c);
/* wasm_jit_rt_tick for generated code, in LLVM's preserve_most convention
 * (every general register kept but r11; the vector registers are the
 * caller's to keep): the tick's call, rarely taken, then clobbers nothing
 * the caller holds in those registers, so the common path of a function
 * or loop need not keep its values out of them (jit_rt.c). */
KIS_HIDDEN void wasm_jit_rt_tick_saved(struct wasm_jit_ctx *c);
KIS_HIDDEN void wasm_jit_rt_call(struct wasm_jit_ctx *c, struct kis_wasm_func *f, uint64_t *io);
KIS_HIDDEN uint32_t wasm_jit_rt_sig_eq(const struct wasm_functype *a, const struct wasm_functype *b);
KIS_HIDDEN uint32_t wasm_jit_rt_memory_grow(struct wasm_jit_ctx *c, uint32_t delta);
KIS_HIDDEN void wasm_jit_rt_memory_init(struct wasm_jit_ctx *c, uint32_t seg, uint32_t d,
					uint32_t s, uint32_t n);
KIS_HIDDEN void wasm_jit_rt_data_drop(struct wasm_jit_ctx *c, uint32_t seg);
KIS_HIDDEN void wasm_jit_rt_memory_copy(struct wasm_jit_ctx *c, uint32_t d, uint32_t s, uint32_t n);
KIS_HIDDEN void wasm_jit_rt_memory_fill(struct wasm_jit_ctx *c, uint32_t d, uint32_t v, uint32_t n);
/* C's memcmp over memory 0 as wasi-libc's byte loop computes it (the first
 * differing bytes' difference, 0 if none): for jit_llvm.c's fast path of a
 * recognised memcmp, which checked l + n and r + n against the size. */
KIS_HIDDEN int32_t wasm_jit_rt_memcmp(struct wasm_jit_ctx *c, uint32_t l, uint32_t r, uint32_t n);
/* wasi-libc's strcspn and strspn (Debian's build: musl's C, a 32-byte set
 * at sp - 32 on the shadow stack, sp being global 0) for jit_llvm.c's fast
 * path of the recognised bodies: the result, with memory left as the
 * routine leaves it, or -1 without a write when the call could trap or
 * its set overlaps a string it reads (the routine's own code then runs). */
KIS_HIDDEN int64_t wasm_jit_rt_strcspn(struct wasm_jit_ctx *c, uint32_t s, uint32_t set, uint32_t sp);
KIS_HIDDEN int64_t wasm_jit_rt_strspn(struct wasm_jit_ctx *c, uint32_t s, uint32_t set, uint32_t sp);
KIS_HIDDEN void wasm_jit_rt_table_init(struct wasm_jit_ctx *c, uint32_t tab, uint32_t seg,
				       uint32_t d, uint32_t s, uint32_t n);
KIS_HIDDEN void wasm_jit_rt_elem_drop(struct wasm_jit_ctx *c, uint32_t seg);
KIS_HIDDEN void wasm_jit_rt_table_copy(struct wasm_jit_ctx *c, uint32_t dt, uint32_t st,
				       uint32_t d, uint32_t s, uint32_t n);
KIS_HIDDEN uint32_t wasm_jit_rt_table_grow(struct wasm_jit_ctx *c, uint32_t tab, uint64_t init,
					   uint32_t n);
KIS_HIDDEN void wasm_jit_rt_table_fill(struct wasm_jit_ctx *c, uint32_t tab, uint32_t i,
				       uint64_t v, uint32_t n);
KIS_HIDDEN void wasm_jit_rt_simd(struct wasm_jit_ctx *c, const uint32_t *words, uint64_t *io,
				 uint32_t nslots);

/* The compiler is a plugin, libkis-jit.so (jit_llvm.c and LLVM), loaded
 * by jit_load.c only when a store compiles (cached code needs none): linking LLVM into every program
 * cost each kis command ~130 ms of start-up (libLLVM's relocations and
 * constructors). The plugin sees the host only through this table. */
struct wasm_jit_sym {
	const char *name;
	void (*addr)(void);
};

struct wasm_jit_host {
	unsigned version; /* WASM_JIT_VERSION */
	int (*read_u32)(const uint8_t **p, const uint8_t *end, uint32_t *v);
	int (*read_s32)(const uint8_t **p, const uint8_t *end, int32_t *v);
	int (*read_s33)(const uint8_t **p, const uint8_t *end, int64_t *v);
	int (*read_s64)(const uint8_t **p, const uint8_t *end, int64_t *v);
	int (*simd_sig)(uint32_t sub, struct wasm_simd_sig *sig);
};

/* What the plugin does for the library: m's object code, not linked
 * (malloc'd into *obj, the container below), which the library links
 * itself (jit_elf.c) and caches. 0, or -1 with err. */
struct wasm_jit_plugin {
	int (*emit)(struct kis_wasm_module *m, uint8_t **obj, size_t *len, char *err,
		    size_t errlen);
};
/* The compiler's output: a container of objects, one per range of defined
 * functions compiled on a thread of its own (jit_llvm.c, "the compile in
 * parallel"): "KISOBJS1", the count (u32, 1 to WASM_JIT_OBJS_MAX), a u32
 * 0, each object's length (u64, little-endian as the rest), then the
 * x86-64 ET_REL objects one after the other, nothing between or after.
 * Every object declares every defined function; a call into another
 * range names f<i> (or w<i>) undefined, which the loader resolves to the
 * object that defines it. */
#define WASM_JIT_OBJS_MAGIC "KISOBJS1"
#define WASM_JIT_OBJS_HEAD 16u
#define WASM_JIT_OBJS_MAX 64u
/* The plugin's one exported symbol: 0 and *out filled, or -1 (no native
 * target, or a host of another version). */
#define WASM_JIT_PLUGIN_INIT "kis_wasm_jit_plugin_init"
typedef int (*wasm_jit_plugin_init_fn)(const struct wasm_jit_host *host,
				       struct wasm_jit_plugin *out);

/* Where the compiler runs, one of two files with the same functions:
 * jit_plugin.c (the library: the plugin dlopen'ed into this process) or
 * jit_remote.c (the static `kis` command line: the plugin in a kis-helper
 * process started by wasm_jit_load, which then serves wasm_jit_emit over a
 * socket; docs/wasm.md, "Where the compiler runs").
 * Load (once; before the process is confined: it reads the plugin and
 * libLLVM from /usr/lib, or starts the helper). 0, or -1 with why in err. */
KIS_HIDDEN int wasm_jit_load(char *err, size_t errlen);
/* Is the compiler there to load (no loading: cheap, for the probe)? */
KIS_HIDDEN bool wasm_jit_present(void);
/* Loaded already (wasm_jit_load succeeded)? (jit_load.c, both ways) */
KIS_HIDDEN bool wasm_jit_loaded(void);
/* What wasm_jit_load runs once: 0, or -1 with why. */
KIS_HIDDEN int wasm_jit_start(char *why, size_t whylen);
/* m's object code (malloc'd into *obj), not linked: 0, or -1 with err.
 * The compiler is loaded first (wasm_jit_load). */
KIS_HIDDEN int wasm_jit_emit(struct kis_wasm_module *m, uint8_t **obj, size_t *len, char *err,
			     size_t errlen);
/* The descriptor a confined caller must keep open for wasm_jit_emit (the
 * helper's socket), or -1. */
KIS_HIDDEN int wasm_jit_channel_fd(void);
/* jit_find.c: where the plugin may lie, best first; n written. */
#define WASM_JIT_PLUGIN_CANDIDATES 4
KIS_HIDDEN int wasm_jit_plugin_candidates(char out[WASM_JIT_PLUGIN_CANDIDATES][PATH_MAX]);
/* Whether one of them is there to be read. Its 16 KB of paths are on a
 * frame of its own: the stack clash protection touches every page of a
 * frame on entry, and the callers' frames stay small. */
KIS_HIDDEN bool wasm_jit_plugin_readable(void);

/* The library's entries for compiled code (jit_load.c). */
/* Give m (validated) machine code: cached (an object made before for this
 * module, linked by jit_elf.c without LLVM), or else compiled by the
 * plugin (loaded if needed) and linked the same way. A cached object that
 * is refused is compiled anew only if the plugin is loaded already (a
 * caller with cached code may be confined past opening it). Returns 0, or
 * -1 with a message in err: a module with an instruction the compiler does
 * not handle yet is refused by name. */
KIS_HIDDEN int wasm_jit_compile(struct kis_wasm_module *m, const uint8_t *cached,
				size_t cached_len, struct wasm_jit_module **linked, char *err,
				size_t errlen);
/* Link cached object code (as wasm_jit_compile would) before any module
 * is there: as many functions as the object defines, checked against the
 * module's count when wasm_jit_compile takes it (*linked). 0, or -1. */
KIS_HIDDEN int wasm_jit_link_cached(const uint8_t *cached, size_t cached_len,
				    struct wasm_jit_module **out);
/* The object code a module's machine code was linked from, and whether it
 * came from the cache. */
KIS_HIDDEN const uint8_t *wasm_jit_object(const struct wasm_jit_module *jm, size_t *len,
					  bool *from_cache);
/* "kis-jit <version> elf <format> llvm <version> plugin <size.mtime> cpu
 * <cpuid words>": what compiled code depends on besides the module (the
 * cache's key), computed without loading the plugin. -1 without one. */
KIS_HIDDEN int wasm_jit_id(char *buf, size_t len);
KIS_HIDDEN void wasm_jit_module_free(struct wasm_jit_module *jm);
/* jit_elf.c: our linker of the compiler's object code (fresh or cached),
 * without LLVM. Its refusals, each a name (the message says where): */
#define WASM_ELF_ERRORS(X)                                              \
	X(WASM_ELF_E_TRUNCATED, "truncated")                            \
	X(WASM_ELF_E_HEADER, "bad-header")                              \
	X(WASM_ELF_E_SECTION, "bad-section")                            \
	X(WASM_ELF_E_TOO_BIG, "too-big")                                \
	X(WASM_ELF_E_SYMTAB, "bad-symbol-table")                        \
	X(WASM_ELF_E_STRING, "bad-string")                              \
	X(WASM_ELF_E_SYMBOL, "bad-symbol")                              \
	X(WASM_ELF_E_UNKNOWN_SYMBOL, "unknown-symbol")                  \
	X(WASM_ELF_E_RELOC, "bad-relocation-table")                     \
	X(WASM_ELF_E_RELOC_TYPE, "unsupported-relocation")              \
	X(WASM_ELF_E_RELOC_OFFSET, "relocation-outside-section")        \
	X(WASM_ELF_E_RELOC_RANGE, "relocation-out-of-range")            \
	X(WASM_ELF_E_FUNCS, "functions-mismatch")                       \
	X(WASM_ELF_E_MAP, "cannot-map")                                 \
	X(WASM_ELF_E_NOMEM, "out-of-memory")
enum wasm_elf_error {
	WASM_ELF_OK,
#define E(e, s) e,
	WASM_ELF_ERRORS(E)
#undef E
};
/* Format of what the loader takes: part of the cache's key. */
#define WASM_JIT_ELF_FORMAT 2u
KIS_HIDDEN const char *wasm_elf_strerror(int e);
/* What compiled code may call, by name: the runtime's table
 * (wasm_jit_rt_externals, jit_rt.c: WASM_JIT_HELPERS and WASM_JIT_LIBC). */
struct wasm_jit_externals {
	const struct wasm_jit_sym *syms;
	size_t n;
};
KIS_HIDDEN extern const struct wasm_jit_externals wasm_jit_rt_externals;
/* Link obj (the compiler's container of x86-64 ET_REL objects, or one
 * such object) for a module of nfuncs defined functions (UINT32_MAX: as
 * many as it defines), resolving externals against ext only. exec: map its
 * code read-execute into *out; else check only (the whole link is done in
 * read-write memory and dropped). 0, or -WASM_ELF_E_... with err. */
KIS_HIDDEN int wasm_jit_elf_load(const struct wasm_jit_externals *ext, const uint8_t *obj,
				 size_t len, uint32_t nfuncs, bool exec,
				 struct wasm_jit_module **out, char *err, size_t errlen);
/* The whole link of wasm_jit_elf_load, left read-write (never executable)
 * for another process to seal: the engine links cached code once, and the
 * wasm tier's child, a fork that shares the image's addresses and the
 * runtime's, makes it read-execute (docs/wasm.md, "The code cache"). */
KIS_HIDDEN int wasm_jit_elf_prelink(const struct wasm_jit_externals *ext, const uint8_t *obj,
				    size_t len, uint32_t nfuncs, struct wasm_jit_module **out,
				    char *err, size_t errlen);
/* A prelinked image made read-execute (code) and read-only (constants,
 * GOT); 0 for one already sealed or linked. 0, or -WASM_ELF_E_MAP. */
KIS_HIDDEN int wasm_jit_elf_seal(struct wasm_jit_module *jm, char *err, size_t errlen);
KIS_HIDDEN void wasm_jit_elf_free(struct wasm_jit_module *jm);
/* How many functions jm has entries for (linked with nfuncs UINT32_MAX:
 * as many as its object defines). */
KIS_HIDDEN uint32_t wasm_jit_elf_nfuncs(const struct wasm_jit_module *jm);
KIS_HIDDEN int wasm_jit_elf_lookup(const struct wasm_jit_module *jm, uint32_t i, void **fn,
				   void (**wrap)(void *, uint64_t *));
/* Keep a fresh compile's object (taking obj) for the cache. */
KIS_HIDDEN void wasm_jit_elf_keep_object(struct wasm_jit_module *jm, uint8_t *obj, size_t len,
					 bool from_cache);
KIS_HIDDEN const uint8_t *wasm_jit_elf_object(const struct wasm_jit_module *jm, size_t *len,
					      bool *from_cache);

/* jit_rt.c: give a new instance its context and its functions their native
 * entries (after imports are linked, before segments and start). */
KIS_HIDDEN int wasm_jit_instance_init(struct kis_wasm_instance *inst, char *err, size_t errlen);
KIS_HIDDEN void wasm_jit_store_free(struct wasm_jit_store *js);
/* An instance's compiled-code context, and its poll page, released. */
KIS_HIDDEN void wasm_jit_instance_free(struct kis_wasm_instance *inst);
/* Every poll page of s made prot (PROT_READ or PROT_NONE), when it is not
 * already: async-signal-safe (kis_wasm_interrupt). */
KIS_HIDDEN void wasm_jit_poll_set(struct kis_wasm_store *s, int prot);
/* Run compiled f from the host or the interpreter (wasm_invoke's path for
 * a compiled function). */
KIS_HIDDEN enum kis_wasm_trap wasm_jit_invoke(struct kis_wasm_store *s, struct kis_wasm_func *f,
					      const uint64_t *args, uint64_t *results);

#endif
