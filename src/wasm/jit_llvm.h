/* SPDX-License-Identifier: MIT */
/* The compiler plugin's own header (libkis-jit.so: jit_llvm*.c, the only
 * files that include LLVM's): the generator's state and its shared steps. */
#ifndef KIS_WASM_JIT_LLVM_H
#define KIS_WASM_JIT_LLVM_H

#include <stddef.h>


#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>

#include "wasm/jit.h"

/* The host's functions, from kis_wasm_jit_plugin_init (the plugin links
 * nothing of the library); defined in jit_llvm_host.c. */
extern const struct wasm_jit_host *jit_llvm_host;
#define wasm_read_u32(p, e, v) jit_llvm_host->read_u32(p, e, v)
#define wasm_read_s32(p, e, v) jit_llvm_host->read_s32(p, e, v)
#define wasm_read_s33(p, e, v) jit_llvm_host->read_s33(p, e, v)
#define wasm_read_s64(p, e, v) jit_llvm_host->read_s64(p, e, v)
#define wasm_simd_sig(sub, sig) jit_llvm_host->simd_sig(sub, sig)

/* ---- the generator's state ---- */

enum ctl_kind { CTL_BLOCK, CTL_LOOP, CTL_IF, CTL_FUNC };

struct ctl {
	enum ctl_kind kind;
	uint32_t np, nr;
	const uint8_t *pt, *rt;
	LLVMBasicBlockRef loop_bb, end_bb, else_bb;
	LLVMValueRef *res; /* allocas: the results at the end */
	LLVMValueRef *par; /* a loop's: its params at the header */
	LLVMValueRef *ifpar; /* an if's params, pushed again at its else */
	uint32_t height;
	bool end_reached;
};

struct gen {
	const struct kis_wasm_module *m;
	LLVMContextRef C;
	LLVMModuleRef M;
	LLVMBuilderRef B, AB; /* code, and allocas in the entry block */
	LLVMTypeRef i1, i8, i16, i32, i64, i128, f32, f64, vd, i8p, i64p;
	LLVMTypeRef *ftys; /* per type index */
	LLVMValueRef *fns; /* per defined function, NULL until named (fn_decl) */
#define H(n) LLVMValueRef n; LLVMTypeRef n##_t;
	WASM_JIT_HELPERS(H)
#undef H
	/* per function */
	/* ctx: the context (struct wasm_jit_ctx *), for its fields and the
	 * helpers; P: the function's first parameter, the context plus one
	 * page (jit.h, WASM_JIT_CTX_ARG), what compiled functions pass */
	LLVMValueRef F, ctx, P;
	LLVMBasicBlockRef alloca_bb;
	LLVMValueRef *locals;
	LLVMTypeRef *ltypes;
	uint32_t nlocals;
	LLVMValueRef membase, memsize; /* allocas caching memory 0 */
	LLVMValueRef *stk;
	uint32_t sp, stk_cap;
	struct ctl *ctl;
	uint32_t nctl, ctl_cap;
	bool dead;
	LLVMBasicBlockRef trap_bb[KIS_WASM_TRAP__COUNT];
	LLVMValueRef io;   /* alloca of slots for calls that go through a helper */
	uint32_t io_len;
	bool guard; /* guard-region memory: no bounds compares (jit.h) */
	unsigned md_invariant;
	const uint8_t *p, *end;
	char *err;
	size_t errlen;
	bool failed;
};

/* ---- wasi-libc's memory routines, recognised ----
 *
 * A C program built for wasm32-wasi without the bulk-memory feature (clang
 * 14's default) copies, fills and compares memory through wasi-libc's
 * memcpy, memmove, memset and memcmp (musl's C, compiled to wasm loops):
 * SQLite's speedtest1 spent ~13% of its compiled time in them (perf), where
 * native code calls glibc's vector routines. A defined function whose
 * whole body (locals and code, byte for byte, as Debian's wasi-libc
 * 0.0~git20220510 built by clang 14 links it) and type match one of these
 * gets a fast path before its own code: when every byte it would touch
 * lies inside memory 0, and (memcpy) the two ranges do not overlap, and
 * the count is at most FAST_MAX, the job is done by one LLVM
 * memcpy/memmove/memset or the runtime's memcmp (jit_rt.c) and the
 * function returns what the C function returns (the destination; the
 * first differing bytes' difference).
 * Those are the only cases in which the loops' effect is that of the C
 * function, so the result is the same; any other call (overlapping
 * memcpy, a range crossing the end of memory, which traps after a partial
 * write in the loops) runs the function's own compiled code, so results,
 * traps and memory agree with the interpreter's. What differs: the fast
 * path takes the entry's interrupt check and fuel step only, not one per
 * loop iteration (FAST_MAX bounds how long it runs between two checks).
 * The bodies are known by two 64-bit hashes and the length: a module
 * that forged a collision would only give its own function these
 * semantics, under the same bounds checks (no access outside memory).
 *
 * The string routines the same way: strlen and __strchrnul (musl's word
 * loops: aligned 4-byte reads, so with memory a whole number of pages they
 * trap exactly when no terminator lies in [s, size)) are a vector scan in
 * line, 16-byte reads at 16-byte-aligned offsets below the size, which
 * returns only when it found the byte below the size and FAST_MAX past s;
 * strcspn and strspn (a 32-byte set on the shadow stack, global 0) go to
 * the runtime (jit_rt.c), which does the work, set included, only when
 * nothing of it could trap or overlap the set. Whatever is left runs the
 * function's own code, from the start: it has written nothing yet. */
enum known_fn {
	KNOWN_NONE,
	KNOWN_MEMCPY,
	KNOWN_MEMMOVE,
	KNOWN_MEMSET,
	KNOWN_MEMCMP,
	KNOWN_STRLEN,
	KNOWN_STRCHRNUL,
	KNOWN_STRCSPN,
	KNOWN_STRSPN,
};
#define FAST_MAX WASM_JIT_FAST_MAX

#define CTX(field) offsetof(struct wasm_jit_ctx, field)

/* A call of one of the runtime's helpers (WASM_JIT_HELPERS) with the
 * context first. */
#define HCALL(g, name, ...)                                                              \
	({                                                                               \
		LLVMValueRef args_[] = {__VA_ARGS__};                                    \
		call_helper(g, g->name, g->name##_t, args_, sizeof(args_) / sizeof(*args_)); \
	})

/* jit_llvm_ir.c */
int gfail(struct gen *g, const char *msg);
int rd_u32(struct gen *g, uint32_t *v);
int rd_byte(struct gen *g, uint8_t *b);
LLVMTypeRef vt(struct gen *g, uint8_t t);
LLVMTypeRef func_type(struct gen *g, const struct wasm_functype *ft);
LLVMValueRef k32(struct gen *g, uint64_t v);
LLVMValueRef k64(struct gen *g, uint64_t v);
LLVMValueRef from_slot(struct gen *g, LLVMValueRef s, uint8_t t);
LLVMValueRef to_slot(struct gen *g, LLVMValueRef v);
void put_slots(struct gen *g, LLVMValueRef io, uint32_t *k, LLVMValueRef v, uint8_t t);
LLVMValueRef get_slots(struct gen *g, LLVMValueRef io, uint32_t *k, uint8_t t);
LLVMValueRef ptr_at(struct gen *g, LLVMValueRef base, LLVMValueRef off, LLVMTypeRef t);
LLVMValueRef ld(struct gen *g, LLVMValueRef base, uint64_t off, LLVMTypeRef t);
LLVMValueRef ldi(struct gen *g, LLVMValueRef base, uint64_t off, LLVMTypeRef t);
int push(struct gen *g, LLVMValueRef v);
LLVMValueRef pop(struct gen *g);
void trap_if(struct gen *g, LLVMValueRef cond, uint32_t kind);
void trap_now(struct gen *g, uint32_t kind);
void tick(struct gen *g);
void load_mem(struct gen *g);
void reload_mem(struct gen *g);
LLVMValueRef entry_alloca(struct gen *g, LLVMTypeRef t);
LLVMValueRef mem_addr(struct gen *g, LLVMValueRef addr, uint32_t offset, uint32_t size,
			     LLVMTypeRef t);
LLVMValueRef intrinsic(struct gen *g, const char *name, LLVMTypeRef *tys, size_t ntys,
			      LLVMValueRef *args, unsigned nargs);
LLVMValueRef intr1(struct gen *g, const char *name, LLVMValueRef a);
LLVMValueRef intr2(struct gen *g, const char *name, LLVMValueRef a, LLVMValueRef b);
struct ctl *push_ctl(struct gen *g);
void free_ctl(struct ctl *c);
int blocktype(struct gen *g, struct ctl *c);
int alloc_slots(struct gen *g, LLVMValueRef **out, uint32_t n, const uint8_t *t);
void store_top(struct gen *g, LLVMValueRef *slots, uint32_t n);
int branch_to(struct gen *g, uint32_t l);
LLVMBasicBlockRef branch_block(struct gen *g, uint32_t l);
int skip_imm(struct gen *g, uint8_t op);
LLVMValueRef io_slots(struct gen *g, uint32_t n);
LLVMValueRef func_ptr(struct gen *g, uint32_t idx);
LLVMValueRef fn_decl(struct gen *g, uint32_t di);
int op_call(struct gen *g, uint32_t idx);
int op_call_indirect(struct gen *g, uint32_t tidx, uint32_t tab);

/* jit_llvm_ops.c */
LLVMValueRef call_helper(struct gen *g, LLVMValueRef fn, LLVMTypeRef fty, LLVMValueRef *args,
			 unsigned n);
LLVMValueRef bool32(struct gen *g, LLVMValueRef c);
int numeric(struct gen *g, uint8_t op);
int load_store(struct gen *g, uint8_t op);
int op_fc(struct gen *g);
int op_simd(struct gen *g);
int table_access(struct gen *g, uint8_t op);
LLVMValueRef global_ptr(struct gen *g, uint32_t x);

/* jit_llvm_known.c */
enum known_fn known_routine(const struct kis_wasm_module *m, uint32_t di);
void gen_known(struct gen *g, enum known_fn k);

/* jit_llvm_func.c */
void reset_func(struct gen *g);
int gen_func(struct gen *g, uint32_t di);
void gen_wrap(struct gen *g, uint32_t di);
void declare_helpers(struct gen *g);

#endif
