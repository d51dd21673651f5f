/* SPDX-License-Identifier: MIT */
/* The WebAssembly compiler: a validated module's function bodies to LLVM IR
 * (one LLVM function per wasm function, taking the instance's context
 * first), optimised and made x86-64 code by LLVM 14, linked by ORC's LLJIT.
 * The only file that includes LLVM's headers.
 *
 * Why LLVM (docs/wasm.md, "The compiler"): it is on this machine already
 * (libllvm14, clang-14 builds the test programs), its code is what native
 * code gets, ORC's memory manager maps code read-execute only after it is
 * written (never writable and executable at once), and it has vector types
 * for SIMD later.
 *
 * Safety equal to the interpreter's (exec.c), by construction here:
 *   - every load and store is checked: in check mode it compares address
 *     + offset + size, in 64-bit arithmetic, with the memory's current
 *     size, and traps above it; in guard mode (jit.h: the memory is a
 *     reservation of the whole 32-bit index and offset range, PROT_NONE
 *     beyond its size) the access itself faults there, the fault handler
 *     of jit_rt.c makes that the same trap, and the accesses are volatile
 *     so that LLVM keeps every one, in order (an unused load still traps,
 *     a trap leaves memory as the interpreter would);
 *   - every function's prologue compares the stack pointer with the
 *     context's limit, less an estimate of its own frame, and traps below;
 *   - the function entry and every loop header check the store's interrupt
 *     flag and take one step of fuel, as the interpreter's TICK does;
 *   - integer division, remainder and float-to-int conversion test their
 *     trapping operands before the instruction (LLVM's would be undefined
 *     behaviour, not a trap), shifts mask their count (spec 4.3.2);
 *   - a trap is a call of wasm_jit_rt_trap (noreturn) with the
 *     interpreter's own trap kind.
 * The body is walked as it is in the binary (kept by decode.c), after the
 * validator (compile.c) accepted it: this walker trusts its structure and
 * types, and only reads immediates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

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

/* The host's functions, from kis_wasm_jit_plugin_init (this file is the
 * plugin libkis-jit.so: it links nothing of the library). */
static const struct wasm_jit_host *H;
#define wasm_read_u32(p, e, v) H->read_u32(p, e, v)
#define wasm_read_s32(p, e, v) H->read_s32(p, e, v)
#define wasm_read_s33(p, e, v) H->read_s33(p, e, v)
#define wasm_read_s64(p, e, v) H->read_s64(p, e, v)
#define wasm_simd_sig(sub, sig) H->simd_sig(sub, sig)

struct wasm_jit_module {
	LLVMOrcLLJITRef jit;
	uint32_t n;
	void **fns;
	void **wraps;
	uint8_t *obj; /* the object code, for the cache (jit_cache.c) */
	size_t obj_len;
	bool from_cache;
};

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
	LLVMValueRef *fns; /* per defined function */
#define H(n) LLVMValueRef n; LLVMTypeRef n##_t;
	WASM_JIT_HELPERS(H)
#undef H
	/* per function */
	LLVMValueRef F, ctx;
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

static int gfail(struct gen *g, const char *msg)
{
	if (!g->failed)
		snprintf(g->err, g->errlen, "%s", msg);
	g->failed = true;
	return -1;
}

/* ---- reading the body (validated: only bounds are checked) ---- */

static int rd_u32(struct gen *g, uint32_t *v)
{
	if (wasm_read_u32(&g->p, g->end, v) < 0)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	return 0;
}

static int rd_byte(struct gen *g, uint8_t *b)
{
	if (g->p >= g->end)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	*b = *g->p++;
	return 0;
}

/* ---- types and values ---- */

static LLVMTypeRef vt(struct gen *g, uint8_t t)
{
	switch (t) {
	case KIS_WASM_I32:
		return g->i32;
	case KIS_WASM_I64:
		return g->i64;
	case KIS_WASM_F32:
		return g->f32;
	case KIS_WASM_F64:
		return g->f64;
	case KIS_WASM_V128: /* lanes 0.. in the low bits, as in memory */
		return g->i128;
	default: /* references: a kis_wasm_func pointer or the host's value */
		return g->i64;
	}
}

static LLVMTypeRef func_type(struct gen *g, const struct wasm_functype *ft)
{
	LLVMTypeRef ps[KIS_WASM_MAX_PARAMS + 1], ret;
	ps[0] = g->i8p;
	for (uint32_t i = 0; i < ft->np; i++)
		ps[1 + i] = vt(g, ft->t[i]);
	if (ft->nr == 0) {
		ret = g->vd;
	} else if (ft->nr == 1) {
		ret = vt(g, ft->t[ft->np]);
	} else {
		LLVMTypeRef rs[KIS_WASM_MAX_PARAMS];
		for (uint32_t i = 0; i < ft->nr; i++)
			rs[i] = vt(g, ft->t[ft->np + i]);
		ret = LLVMStructTypeInContext(g->C, rs, ft->nr, 0);
	}
	return LLVMFunctionType(ret, ps, ft->np + 1, 0);
}

static LLVMValueRef k32(struct gen *g, uint64_t v)
{
	return LLVMConstInt(g->i32, v, 0);
}

static LLVMValueRef k64(struct gen *g, uint64_t v)
{
	return LLVMConstInt(g->i64, v, 0);
}

/* A slot (i64) as a value of type t, and back (kis_wasm_slot's layout). */
static LLVMValueRef from_slot(struct gen *g, LLVMValueRef s, uint8_t t)
{
	switch (t) {
	case KIS_WASM_I32:
		return LLVMBuildTrunc(g->B, s, g->i32, "");
	case KIS_WASM_F32:
		return LLVMBuildBitCast(g->B, LLVMBuildTrunc(g->B, s, g->i32, ""), g->f32, "");
	case KIS_WASM_F64:
		return LLVMBuildBitCast(g->B, s, g->f64, "");
	default:
		return s;
	}
}

static LLVMValueRef to_slot(struct gen *g, LLVMValueRef v)
{
	LLVMTypeRef t = LLVMTypeOf(v);
	if (t == g->i32)
		return LLVMBuildZExt(g->B, v, g->i64, "");
	if (t == g->f32)
		return LLVMBuildZExt(g->B, LLVMBuildBitCast(g->B, v, g->i32, ""), g->i64, "");
	if (t == g->f64)
		return LLVMBuildBitCast(g->B, v, g->i64, "");
	return v;
}

/* Store value v of wasm type t at slot *k of io (i64*), two slots for a
 * v128 (low half first), and advance *k. */
static void put_slots(struct gen *g, LLVMValueRef io, uint32_t *k, LLVMValueRef v, uint8_t t)
{
	LLVMValueRef idx = k64(g, *k);
	if (t == KIS_WASM_V128) {
		LLVMValueRef lo = LLVMBuildTrunc(g->B, v, g->i64, "");
		LLVMValueRef hi = LLVMBuildTrunc(g->B, LLVMBuildLShr(g->B, v, LLVMConstInt(g->i128, 64, 0), ""), g->i64, "");
		LLVMBuildStore(g->B, lo, LLVMBuildGEP2(g->B, g->i64, io, &idx, 1, ""));
		idx = k64(g, *k + 1);
		LLVMBuildStore(g->B, hi, LLVMBuildGEP2(g->B, g->i64, io, &idx, 1, ""));
		*k += 2;
		return;
	}
	LLVMBuildStore(g->B, to_slot(g, v), LLVMBuildGEP2(g->B, g->i64, io, &idx, 1, ""));
	*k += 1;
}

static LLVMValueRef get_slots(struct gen *g, LLVMValueRef io, uint32_t *k, uint8_t t)
{
	LLVMValueRef idx = k64(g, *k);
	LLVMValueRef lo = LLVMBuildLoad2(g->B, g->i64, LLVMBuildGEP2(g->B, g->i64, io, &idx, 1, ""), "");
	if (t == KIS_WASM_V128) {
		idx = k64(g, *k + 1);
		LLVMValueRef hi = LLVMBuildLoad2(g->B, g->i64, LLVMBuildGEP2(g->B, g->i64, io, &idx, 1, ""), "");
		*k += 2;
		return LLVMBuildOr(g->B, LLVMBuildZExt(g->B, lo, g->i128, ""),
				   LLVMBuildShl(g->B, LLVMBuildZExt(g->B, hi, g->i128, ""),
						LLVMConstInt(g->i128, 64, 0), ""), "");
	}
	*k += 1;
	return from_slot(g, lo, t);
}

/* Load a field of type t at byte offset off of the object at base. */
static LLVMValueRef ptr_at(struct gen *g, LLVMValueRef base, LLVMValueRef off, LLVMTypeRef t)
{
	LLVMValueRef p = LLVMBuildGEP2(g->B, g->i8, base, &off, 1, "");
	return LLVMBuildBitCast(g->B, p, LLVMPointerType(t, 0), "");
}

static LLVMValueRef ld(struct gen *g, LLVMValueRef base, uint64_t off, LLVMTypeRef t)
{
	return LLVMBuildLoad2(g->B, t, ptr_at(g, base, k64(g, off), t), "");
}

/* A load of what never changes while the instance lives (the context's
 * fields, the pointers in its globals and funcs arrays): LLVM may then
 * keep it in a register across stores to memory and calls. */
static LLVMValueRef ldi(struct gen *g, LLVMValueRef base, uint64_t off, LLVMTypeRef t)
{
	LLVMValueRef v = ld(g, base, off, t);
	LLVMSetMetadata(v, g->md_invariant, LLVMMDNodeInContext(g->C, NULL, 0));
	return v;
}

#define CTX(field) offsetof(struct wasm_jit_ctx, field)

/* ---- the operand stack ---- */

static int push(struct gen *g, LLVMValueRef v)
{
	if (g->sp == g->stk_cap) {
		uint32_t n = g->stk_cap ? g->stk_cap * 2 : 64;
		LLVMValueRef *s = realloc(g->stk, n * sizeof(*s));
		if (!s)
			return gfail(g, "out of memory");
		g->stk = s;
		g->stk_cap = n;
	}
	g->stk[g->sp++] = v;
	return 0;
}

static LLVMValueRef pop(struct gen *g)
{
	if (g->sp == 0 || (g->nctl && g->sp <= g->ctl[g->nctl - 1].height)) {
		gfail(g, "wasm.engine: the compiler's operand stack ran under (a validator bug)");
		return LLVMGetUndef(g->i32);
	}
	return g->stk[--g->sp];
}

/* ---- traps and checks ---- */

static LLVMBasicBlockRef trap_block(struct gen *g, uint32_t kind)
{
	if (g->trap_bb[kind])
		return g->trap_bb[kind];
	LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(g->C, g->F, "trap");
	LLVMBuilderRef b = LLVMCreateBuilderInContext(g->C);
	LLVMPositionBuilderAtEnd(b, bb);
	LLVMValueRef args[2] = {g->ctx, k32(g, kind)};
	LLVMBuildCall2(b, g->wasm_jit_rt_trap_t, g->wasm_jit_rt_trap, args, 2, "");
	LLVMBuildUnreachable(b);
	LLVMDisposeBuilder(b);
	g->trap_bb[kind] = bb;
	return bb;
}

/* Trap with kind when cond (i1) holds; code goes on after. */
static void trap_if(struct gen *g, LLVMValueRef cond, uint32_t kind)
{
	LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBuildCondBr(g->B, cond, trap_block(g, kind), ok);
	LLVMPositionBuilderAtEnd(g->B, ok);
}

static void trap_now(struct gen *g, uint32_t kind)
{
	LLVMBuildBr(g->B, trap_block(g, kind));
	g->dead = true;
}

/* The interpreter's TICK (exec.c): the interrupt flag, then one fuel. */
static void tick(struct gen *g)
{
	LLVMValueRef ip = ldi(g, g->ctx, CTX(interrupt), g->i8p);
	LLVMValueRef ipp = LLVMBuildBitCast(g->B, ip, LLVMPointerType(g->i32, 0), "");
	LLVMValueRef flag = LLVMBuildLoad2(g->B, g->i32, ipp, "");
	LLVMSetOrdering(flag, LLVMAtomicOrderingMonotonic);
	LLVMSetAlignment(flag, 4);
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntNE, flag, k32(g, 0), ""), KIS_WASM_TRAP_INTERRUPTED);
	LLVMValueRef fp = ldi(g, g->ctx, CTX(fuel), g->i8p);
	LLVMValueRef fpp = LLVMBuildBitCast(g->B, fp, g->i64p, "");
	LLVMValueRef fuel = LLVMBuildSub(g->B, LLVMBuildLoad2(g->B, g->i64, fpp, ""), k64(g, 1), "");
	LLVMBuildStore(g->B, fuel, fpp);
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntSLT, fuel, k64(g, 0), ""), KIS_WASM_TRAP_OUT_OF_FUEL);
}

/* Memory 0's base and size into their allocas: at entry, and after
 * anything that may grow it (memory.grow, any call). A guard-region
 * memory never moves: its base is read at entry only. */
static void load_mem(struct gen *g)
{
	if (!g->m->nmems)
		return;
	LLVMValueRef mem = ldi(g, g->ctx, CTX(mem), g->i8p);
	LLVMBuildStore(g->B, ld(g, mem, offsetof(struct kis_wasm_memory, data), g->i8p), g->membase);
	LLVMBuildStore(g->B, ld(g, mem, offsetof(struct kis_wasm_memory, size), g->i64), g->memsize);
}

static void reload_mem(struct gen *g)
{
	if (!g->guard)
		load_mem(g);
}

static LLVMValueRef entry_alloca(struct gen *g, LLVMTypeRef t)
{
	return LLVMBuildAlloca(g->AB, t, "");
}

/* The address of a size-byte access at addr + offset, after the check
 * that it lies inside memory 0 (spec 4.4.7: ea + N > |mem| traps). */
static LLVMValueRef mem_addr(struct gen *g, LLVMValueRef addr, uint32_t offset, uint32_t size,
			     LLVMTypeRef t)
{
	LLVMValueRef ea = LLVMBuildAdd(g->B, LLVMBuildZExt(g->B, addr, g->i64, ""), k64(g, offset), "");
	if (g->guard) /* below WASM_JIT_RESERVE from the base: a fault, never a stray access */
		return ptr_at(g, LLVMBuildLoad2(g->B, g->i8p, g->membase, ""), ea, t);
	LLVMValueRef endp = LLVMBuildAdd(g->B, ea, k64(g, size), "");
	LLVMValueRef msize = LLVMBuildLoad2(g->B, g->i64, g->memsize, "");
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntUGT, endp, msize, ""), KIS_WASM_TRAP_MEMORY_OOB);
	LLVMValueRef base = LLVMBuildLoad2(g->B, g->i8p, g->membase, "");
	return ptr_at(g, base, ea, t);
}

/* ---- intrinsics ---- */

static LLVMValueRef intrinsic(struct gen *g, const char *name, LLVMTypeRef *tys, size_t ntys,
			      LLVMValueRef *args, unsigned nargs)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->M, id, tys, ntys);
	LLVMTypeRef fty = LLVMIntrinsicGetType(g->C, id, tys, ntys);
	return LLVMBuildCall2(g->B, fty, fn, args, nargs, "");
}

static LLVMValueRef intr1(struct gen *g, const char *name, LLVMValueRef a)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	return intrinsic(g, name, &t, 1, &a, 1);
}

static LLVMValueRef intr2(struct gen *g, const char *name, LLVMValueRef a, LLVMValueRef b)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	LLVMValueRef args[2] = {a, b};
	return intrinsic(g, name, &t, 1, args, 2);
}

/* ---- control ---- */

static struct ctl *push_ctl(struct gen *g)
{
	if (g->nctl == g->ctl_cap) {
		uint32_t n = g->ctl_cap ? g->ctl_cap * 2 : 16;
		struct ctl *c = realloc(g->ctl, n * sizeof(*c));
		if (!c) {
			gfail(g, "out of memory");
			return NULL;
		}
		g->ctl = c;
		g->ctl_cap = n;
	}
	struct ctl *c = &g->ctl[g->nctl++];
	memset(c, 0, sizeof(*c));
	return c;
}

static void free_ctl(struct ctl *c)
{
	free(c->res);
	free(c->par);
	free(c->ifpar);
}

/* blocktype (spec 5.4.1): empty, one value type, or a type index. */
static int blocktype(struct gen *g, struct ctl *c)
{
	if (g->p >= g->end)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	uint8_t b = *g->p;
	if (b == 0x40) {
		g->p++;
		return 0;
	}
	if (b == KIS_WASM_I32 || b == KIS_WASM_I64 || b == KIS_WASM_F32 || b == KIS_WASM_F64 ||
	    b == KIS_WASM_FUNCREF || b == KIS_WASM_EXTERNREF || b == KIS_WASM_V128) {
		c->nr = 1;
		c->rt = g->p++;
		return 0;
	}
	int64_t idx;
	if (wasm_read_s33(&g->p, g->end, &idx) < 0 || idx < 0 || (uint64_t)idx >= g->m->ntypes)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	const struct wasm_functype *ft = &g->m->types[idx];
	c->np = ft->np;
	c->nr = ft->nr;
	c->pt = ft->t;
	c->rt = ft->t + ft->np;
	return 0;
}

static int alloc_slots(struct gen *g, LLVMValueRef **out, uint32_t n, const uint8_t *t)
{
	*out = calloc(n + 1u, sizeof(LLVMValueRef));
	if (!*out)
		return gfail(g, "out of memory");
	for (uint32_t i = 0; i < n; i++)
		(*out)[i] = entry_alloca(g, vt(g, t[i]));
	return 0;
}

/* Store the top n values (not popped) into the allocas. */
static void store_top(struct gen *g, LLVMValueRef *slots, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		LLVMBuildStore(g->B, g->stk[g->sp - n + i], slots[i]);
}

/* A branch to label depth l (spec 4.4.8 br): the values it carries go to
 * the target's allocas. */
static int branch_to(struct gen *g, uint32_t l)
{
	if (l >= g->nctl)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	struct ctl *c = &g->ctl[g->nctl - 1 - l];
	if (c->kind == CTL_LOOP) {
		if (g->sp < c->np)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		store_top(g, c->par, c->np);
		LLVMBuildBr(g->B, c->loop_bb);
	} else {
		if (g->sp < c->nr)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		store_top(g, c->res, c->nr);
		LLVMBuildBr(g->B, c->end_bb);
		c->end_reached = true;
	}
	return 0;
}

/* A trampoline block that branches to label l, for br_table's cases. */
static LLVMBasicBlockRef branch_block(struct gen *g, uint32_t l)
{
	LLVMBasicBlockRef here = LLVMGetInsertBlock(g->B);
	LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMPositionBuilderAtEnd(g->B, bb);
	branch_to(g, l);
	LLVMPositionBuilderAtEnd(g->B, here);
	return bb;
}

/* ---- skipping unreachable code: immediates only ---- */

static int skip_memarg(struct gen *g)
{
	uint32_t a, o;
	return rd_u32(g, &a) < 0 || rd_u32(g, &o) < 0 ? -1 : 0;
}

static int skip_imm(struct gen *g, uint8_t op)
{
	uint32_t x;
	int64_t v;
	switch (op) {
	case 0x02: case 0x03: case 0x04: {
		struct ctl c = {0};
		return blocktype(g, &c);
	}
	case 0x0c: case 0x0d: case 0x10: case 0x20: case 0x21: case 0x22: case 0x23: case 0x24:
	case 0x25: case 0x26: case 0xd2:
		return rd_u32(g, &x);
	case 0x0e: {
		uint32_t n;
		if (rd_u32(g, &n) < 0)
			return -1;
		for (uint64_t i = 0; i <= n; i++)
			if (rd_u32(g, &x) < 0)
				return -1;
		return 0;
	}
	case 0x11:
		return rd_u32(g, &x) < 0 || rd_u32(g, &x) < 0 ? -1 : 0;
	case 0x1c: {
		uint32_t n;
		if (rd_u32(g, &n) < 0 || (size_t)(g->end - g->p) < n)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		g->p += n;
		return 0;
	}
	case 0x3f: case 0x40: case 0xd0: {
		uint8_t b;
		return rd_byte(g, &b);
	}
	case 0x41:
		return wasm_read_s32(&g->p, g->end, (int32_t *)&x) < 0 ? gfail(g, "malformed") : 0;
	case 0x42:
		return wasm_read_s64(&g->p, g->end, &v) < 0 ? gfail(g, "malformed") : 0;
	case 0x43:
		if (g->end - g->p < 4)
			return gfail(g, "malformed");
		g->p += 4;
		return 0;
	case 0x44:
		if (g->end - g->p < 8)
			return gfail(g, "malformed");
		g->p += 8;
		return 0;
	case 0xfc: {
		uint32_t sub;
		if (rd_u32(g, &sub) < 0)
			return -1;
		switch (sub) {
		case 8: case 12: case 14:
			return rd_u32(g, &x) < 0 || rd_u32(g, &x) < 0 ? -1 : 0;
		case 10:
			return rd_u32(g, &x) < 0 || rd_u32(g, &x) < 0 ? -1 : 0;
		case 9: case 11: case 13: case 15: case 16: case 17:
			return rd_u32(g, &x);
		default:
			return 0;
		}
	}
	case 0xfd: {
		uint32_t sub;
		struct wasm_simd_sig sg;
		if (rd_u32(g, &sub) < 0 || wasm_simd_sig(sub, &sg) < 0)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		if ((sg.imm == SIMD_IMM_MEM || sg.imm == SIMD_IMM_MEM_LANE) && skip_memarg(g) < 0)
			return -1;
		if (sg.imm == SIMD_IMM_MEM_LANE || sg.imm == SIMD_IMM_LANE) {
			uint8_t b;
			return rd_byte(g, &b);
		}
		if (sg.imm == SIMD_IMM_BYTES16) {
			if (g->end - g->p < 16)
				return gfail(g, "wasm.engine: the compiler met a malformed body");
			g->p += 16;
		}
		return 0;
	}
	default:
		if (op >= 0x28 && op <= 0x3e)
			return skip_memarg(g);
		return 0;
	}
}

/* ---- calls ---- */

/* The slots array for calls through wasm_jit_rt_call: one per function,
 * as large as its largest call needs (grown by re-making it). */
static LLVMValueRef io_slots(struct gen *g, uint32_t n)
{
	if (n == 0)
		n = 1;
	if (!g->io || g->io_len < n) {
		LLVMTypeRef at = LLVMArrayType(g->i64, n);
		g->io = LLVMBuildBitCast(g->AB, entry_alloca(g, at), g->i64p, "");
		g->io_len = n;
	}
	return g->io;
}

/* Push a call's results (ret is the LLVM call's value). */
static int push_results(struct gen *g, LLVMValueRef ret, const struct wasm_functype *ft)
{
	if (ft->nr == 1)
		return push(g, ret);
	for (uint32_t i = 0; i < ft->nr; i++)
		if (push(g, LLVMBuildExtractValue(g->B, ret, i, "")) < 0)
			return -1;
	return 0;
}

/* Call the kis_wasm_func at fptr (i8*) of type ft with args: directly when
 * it is compiled (its own context first), else through the runtime. */
static int call_func_ptr(struct gen *g, LLVMValueRef fptr, const struct wasm_functype *ft,
			 LLVMValueRef *args)
{
	LLVMTypeRef fty = func_type(g, ft);
	LLVMValueRef jfn = ld(g, fptr, offsetof(struct kis_wasm_func, jit_fn), g->i8p);
	LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBuildCondBr(g->B, LLVMBuildIsNotNull(g->B, jfn, ""), fast, slow);

	LLVMPositionBuilderAtEnd(g->B, fast);
	LLVMValueRef cargs[KIS_WASM_MAX_PARAMS + 1];
	cargs[0] = ld(g, fptr, offsetof(struct kis_wasm_func, jit_ctx), g->i8p);
	for (uint32_t i = 0; i < ft->np; i++)
		cargs[1 + i] = args[i];
	LLVMValueRef fnp = LLVMBuildBitCast(g->B, jfn, LLVMPointerType(fty, 0), "");
	LLVMValueRef rf = LLVMBuildCall2(g->B, fty, fnp, cargs, ft->np + 1, "");
	LLVMBuildBr(g->B, join);

	LLVMPositionBuilderAtEnd(g->B, slow);
	LLVMValueRef io = io_slots(g, ft->nps > ft->nrs ? ft->nps : ft->nrs);
	uint32_t k = 0;
	for (uint32_t i = 0; i < ft->np; i++)
		put_slots(g, io, &k, args[i], ft->t[i]);
	LLVMValueRef hargs[3] = {g->ctx, fptr, io};
	LLVMBuildCall2(g->B, g->wasm_jit_rt_call_t, g->wasm_jit_rt_call, hargs, 3, "");
	LLVMValueRef rs = NULL;
	if (ft->nr) {
		LLVMTypeRef rty = LLVMGetReturnType(fty);
		rs = LLVMGetUndef(rty);
		k = 0;
		for (uint32_t i = 0; i < ft->nr; i++) {
			LLVMValueRef v = get_slots(g, io, &k, ft->t[ft->np + i]);
			rs = ft->nr == 1 ? v : LLVMBuildInsertValue(g->B, rs, v, i, "");
		}
	}
	LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(g->B);
	LLVMBuildBr(g->B, join);

	LLVMPositionBuilderAtEnd(g->B, join);
	LLVMValueRef phi = NULL;
	if (ft->nr) {
		phi = LLVMBuildPhi(g->B, LLVMGetReturnType(fty), "");
		LLVMValueRef in[2] = {rf, rs};
		LLVMBasicBlockRef bbs[2] = {fast, slow_end};
		LLVMAddIncoming(phi, in, bbs, 2);
	}
	reload_mem(g);
	return ft->nr ? push_results(g, phi, ft) : 0;
}

static int pop_args(struct gen *g, const struct wasm_functype *ft, LLVMValueRef *args)
{
	for (uint32_t i = ft->np; i-- > 0;)
		args[i] = pop(g);
	return g->failed ? -1 : 0;
}

static LLVMValueRef func_ptr(struct gen *g, uint32_t idx)
{
	LLVMValueRef funcs = ldi(g, g->ctx, CTX(funcs), g->i8p);
	return ldi(g, funcs, (uint64_t)idx * sizeof(void *), g->i8p);
}

static int op_call(struct gen *g, uint32_t idx)
{
	const struct kis_wasm_module *m = g->m;
	if (idx >= m->nfuncs)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	const struct wasm_functype *ft = &m->types[m->func_types[idx]];
	LLVMValueRef args[KIS_WASM_MAX_PARAMS + 1];
	if (pop_args(g, ft, args) < 0)
		return -1;
	if (idx < m->nfunc_imports)
		return call_func_ptr(g, func_ptr(g, idx), ft, args);
	LLVMValueRef cargs[KIS_WASM_MAX_PARAMS + 1];
	cargs[0] = g->ctx;
	memcpy(cargs + 1, args, ft->np * sizeof(LLVMValueRef));
	LLVMValueRef fn = g->fns[idx - m->nfunc_imports];
	LLVMValueRef r = LLVMBuildCall2(g->B, g->ftys[m->func_types[idx]], fn, cargs, ft->np + 1, "");
	reload_mem(g);
	return ft->nr ? push_results(g, r, ft) : 0;
}

/* call_indirect (spec 4.4.8): the element must be in the table, not null,
 * and of the expected type (structurally: spec 3.2.1, as exec.c checks). */
static int op_call_indirect(struct gen *g, uint32_t tidx, uint32_t tab)
{
	const struct kis_wasm_module *m = g->m;
	if (tidx >= m->ntypes || tab >= m->ntables)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	const struct wasm_functype *ft = &m->types[tidx];
	LLVMValueRef i = pop(g);
	LLVMValueRef args[KIS_WASM_MAX_PARAMS + 1];
	if (pop_args(g, ft, args) < 0)
		return -1;
	LLVMValueRef tables = ldi(g, g->ctx, CTX(tables), g->i8p);
	LLVMValueRef t = ld(g, tables, (uint64_t)tab * sizeof(void *), g->i8p);
	LLVMValueRef size = ld(g, t, offsetof(struct kis_wasm_table, size), g->i32);
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntUGE, i, size, ""), KIS_WASM_TRAP_UNDEFINED_ELEMENT);
	LLVMValueRef elems = ld(g, t, offsetof(struct kis_wasm_table, elems), g->i8p);
	LLVMValueRef off = LLVMBuildMul(g->B, LLVMBuildZExt(g->B, i, g->i64, ""), k64(g, 8), "");
	LLVMValueRef fptr = LLVMBuildLoad2(g->B, g->i8p, ptr_at(g, elems, off, g->i8p), "");
	trap_if(g, LLVMBuildIsNull(g->B, fptr, ""), KIS_WASM_TRAP_UNINITIALIZED_ELEMENT);
	LLVMValueRef have = ld(g, fptr, offsetof(struct kis_wasm_func, type), g->i8p);
	LLVMValueRef types = ldi(g, g->ctx, CTX(types), g->i8p);
	LLVMValueRef tix = k64(g, (uint64_t)tidx * sizeof(struct wasm_functype));
	LLVMValueRef want = LLVMBuildGEP2(g->B, g->i8, types, &tix, 1, "");
	LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntEQ, have, want, ""), ok, slow);
	LLVMPositionBuilderAtEnd(g->B, slow);
	LLVMValueRef sargs[2] = {have, want};
	LLVMValueRef eq = LLVMBuildCall2(g->B, g->wasm_jit_rt_sig_eq_t, g->wasm_jit_rt_sig_eq, sargs, 2, "");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntEQ, eq, k32(g, 0), ""),
			trap_block(g, KIS_WASM_TRAP_INDIRECT_CALL_MISMATCH), ok);
	LLVMPositionBuilderAtEnd(g->B, ok);
	return call_func_ptr(g, fptr, ft, args);
}

/* ---- numeric instructions (spec 4.3) ---- */

static LLVMValueRef bool32(struct gen *g, LLVMValueRef c)
{
	return LLVMBuildZExt(g->B, c, g->i32, "");
}

/* i32/i64 division and remainder with the traps of spec 4.3.2. */
static LLVMValueRef int_div(struct gen *g, uint8_t kind, LLVMValueRef a, LLVMValueRef b)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	unsigned bits = LLVMGetIntTypeWidth(t);
	LLVMValueRef zero = LLVMConstInt(t, 0, 0), m1 = LLVMConstAllOnes(t);
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntEQ, b, zero, ""), KIS_WASM_TRAP_DIV_ZERO);
	LLVMValueRef min = LLVMConstInt(t, 1ull << (bits - 1), 0);
	switch (kind) {
	case 0: /* div_s: MIN / -1 overflows */
		trap_if(g, LLVMBuildAnd(g->B, LLVMBuildICmp(g->B, LLVMIntEQ, a, min, ""),
					LLVMBuildICmp(g->B, LLVMIntEQ, b, m1, ""), ""),
			KIS_WASM_TRAP_INT_OVERFLOW);
		return LLVMBuildSDiv(g->B, a, b, "");
	case 1:
		return LLVMBuildUDiv(g->B, a, b, "");
	case 2: { /* rem_s: x rem -1 is 0 (LLVM's srem MIN, -1 is undefined) */
		LLVMValueRef bm1 = LLVMBuildICmp(g->B, LLVMIntEQ, b, m1, "");
		LLVMValueRef bb = LLVMBuildSelect(g->B, bm1, LLVMConstInt(t, 1, 0), b, "");
		return LLVMBuildSRem(g->B, a, bb, "");
	}
	default:
		return LLVMBuildURem(g->B, a, b, "");
	}
}

static LLVMValueRef shift_mask(struct gen *g, LLVMValueRef b)
{
	LLVMTypeRef t = LLVMTypeOf(b);
	return LLVMBuildAnd(g->B, b, LLVMConstInt(t, LLVMGetIntTypeWidth(t) - 1, 0), "");
}

static LLVMValueRef int_binop(struct gen *g, unsigned k, LLVMValueRef a, LLVMValueRef b)
{
	/* k: add sub mul div_s div_u rem_s rem_u and or xor shl shr_s shr_u rotl rotr */
	switch (k) {
	case 0: return LLVMBuildAdd(g->B, a, b, "");
	case 1: return LLVMBuildSub(g->B, a, b, "");
	case 2: return LLVMBuildMul(g->B, a, b, "");
	case 3: return int_div(g, 0, a, b);
	case 4: return int_div(g, 1, a, b);
	case 5: return int_div(g, 2, a, b);
	case 6: return int_div(g, 3, a, b);
	case 7: return LLVMBuildAnd(g->B, a, b, "");
	case 8: return LLVMBuildOr(g->B, a, b, "");
	case 9: return LLVMBuildXor(g->B, a, b, "");
	case 10: return LLVMBuildShl(g->B, a, shift_mask(g, b), "");
	case 11: return LLVMBuildAShr(g->B, a, shift_mask(g, b), "");
	case 12: return LLVMBuildLShr(g->B, a, shift_mask(g, b), "");
	case 13: {
		LLVMTypeRef t = LLVMTypeOf(a);
		LLVMValueRef args[3] = {a, a, b};
		return intrinsic(g, "llvm.fshl", &t, 1, args, 3);
	}
	default: {
		LLVMTypeRef t = LLVMTypeOf(a);
		LLVMValueRef args[3] = {a, a, b};
		return intrinsic(g, "llvm.fshr", &t, 1, args, 3);
	}
	}
}

static LLVMValueRef int_cmp(struct gen *g, unsigned k, LLVMValueRef a, LLVMValueRef b)
{
	static const LLVMIntPredicate p[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntSLT, LLVMIntULT,
					     LLVMIntSGT, LLVMIntUGT, LLVMIntSLE, LLVMIntULE,
					     LLVMIntSGE, LLVMIntUGE};
	return bool32(g, LLVMBuildICmp(g->B, p[k], a, b, ""));
}

static LLVMValueRef float_cmp(struct gen *g, unsigned k, LLVMValueRef a, LLVMValueRef b)
{
	static const LLVMRealPredicate p[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
					      LLVMRealOGT, LLVMRealOLE, LLVMRealOGE};
	return bool32(g, LLVMBuildFCmp(g->B, p[k], a, b, ""));
}

/* fmin/fmax of spec 4.3.3: a NaN operand gives a NaN, -0 < +0. */
static LLVMValueRef float_minmax(struct gen *g, bool max, LLVMValueRef a, LLVMValueRef b)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	LLVMTypeRef it = t == g->f32 ? g->i32 : g->i64;
	LLVMValueRef uno = LLVMBuildFCmp(g->B, LLVMRealUNO, a, b, "");
	LLVMValueRef nan = LLVMBuildFAdd(g->B, a, b, ""); /* a NaN, quieted */
	LLVMValueRef eq = LLVMBuildFCmp(g->B, LLVMRealOEQ, a, b, "");
	LLVMValueRef ai = LLVMBuildBitCast(g->B, a, it, ""), bi = LLVMBuildBitCast(g->B, b, it, "");
	/* equal: only ±0 differ in bits; min takes -0 (or), max +0 (and) */
	LLVMValueRef z = LLVMBuildBitCast(g->B, max ? LLVMBuildAnd(g->B, ai, bi, "") : LLVMBuildOr(g->B, ai, bi, ""), t, "");
	LLVMValueRef lt = LLVMBuildFCmp(g->B, max ? LLVMRealOGT : LLVMRealOLT, a, b, "");
	LLVMValueRef r = LLVMBuildSelect(g->B, lt, a, b, "");
	r = LLVMBuildSelect(g->B, eq, z, r, "");
	return LLVMBuildSelect(g->B, uno, nan, r, "");
}

/* A value LLVM cannot see through (an empty asm in an SSE register). LLVM
 * folds x - 0, x * 1, x / 1, -0 - x and the like to x or -x, which keeps a
 * signalling NaN signalling; wasm wants an arithmetic NaN (spec 4.3.3,
 * "float_exprs.wast no_fold_*"), which the instruction itself gives. */
static LLVMValueRef opaque(struct gen *g, LLVMValueRef v)
{
	LLVMTypeRef t = LLVMTypeOf(v);
	LLVMTypeRef fty = LLVMFunctionType(t, &t, 1, 0);
	LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)"", 0, (char *)"=x,0", 4, 0, 0,
					     LLVMInlineAsmDialectATT, 0);
	return LLVMBuildCall2(g->B, fty, asmv, &v, 1, "");
}

/* Is v a constant that makes an add, sub, mul or div an identity (or a
 * negation) for LLVM: +-0 or +-1? */
static bool identity_const(LLVMValueRef v)
{
	if (!LLVMIsAConstantFP(v))
		return false;
	LLVMBool lossy;
	double d = LLVMConstRealGetDouble(v, &lossy);
	return d == 0.0 || d == 1.0 || d == -1.0;
}

static LLVMValueRef float_binop(struct gen *g, unsigned k, LLVMValueRef a, LLVMValueRef b)
{
	if (k <= 3) {
		if (identity_const(a))
			a = opaque(g, a);
		if (identity_const(b))
			b = opaque(g, b);
	}
	switch (k) { /* add sub mul div min max copysign */
	case 0: return LLVMBuildFAdd(g->B, a, b, "");
	case 1: return LLVMBuildFSub(g->B, a, b, "");
	case 2: return LLVMBuildFMul(g->B, a, b, "");
	case 3: return LLVMBuildFDiv(g->B, a, b, "");
	case 4: return float_minmax(g, false, a, b);
	case 5: return float_minmax(g, true, a, b);
	default: return intr2(g, "llvm.copysign", a, b);
	}
}

static LLVMValueRef float_unop(struct gen *g, unsigned k, LLVMValueRef a)
{
	switch (k) { /* abs neg ceil floor trunc nearest sqrt */
	case 0: return intr1(g, "llvm.fabs", a);
	case 1: return LLVMBuildFNeg(g->B, a, "");
	case 2: return intr1(g, "llvm.ceil", a);
	case 3: return intr1(g, "llvm.floor", a);
	case 4: return intr1(g, "llvm.trunc", a);
	case 5: return intr1(g, "llvm.nearbyint", a); /* ties to even in the default mode */
	default: return intr1(g, "llvm.sqrt", a);
	}
}

/* Float to integer with the traps of spec 4.3.3 trunc: NaN is an invalid
 * conversion, a value whose truncation lies outside the range overflows. */
static LLVMValueRef trunc_checked(struct gen *g, LLVMValueRef a, LLVMTypeRef to, bool sign)
{
	LLVMTypeRef ft = LLVMTypeOf(a);
	unsigned bits = LLVMGetIntTypeWidth(to);
	trap_if(g, LLVMBuildFCmp(g->B, LLVMRealUNO, a, a, ""), KIS_WASM_TRAP_INVALID_CONVERSION);
	LLVMValueRef t = intr1(g, "llvm.trunc", a);
	double lo = sign ? -ldexp(1.0, (int)bits - 1) : 0.0;
	double hi = ldexp(1.0, sign ? (int)bits - 1 : (int)bits);
	LLVMValueRef bad = LLVMBuildOr(g->B, LLVMBuildFCmp(g->B, LLVMRealOLT, t, LLVMConstReal(ft, lo), ""),
				       LLVMBuildFCmp(g->B, LLVMRealOGE, t, LLVMConstReal(ft, hi), ""), "");
	trap_if(g, bad, KIS_WASM_TRAP_INT_OVERFLOW);
	return sign ? LLVMBuildFPToSI(g->B, t, to, "") : LLVMBuildFPToUI(g->B, t, to, "");
}

static LLVMValueRef trunc_sat(struct gen *g, LLVMValueRef a, LLVMTypeRef to, bool sign)
{
	LLVMTypeRef tys[2] = {to, LLVMTypeOf(a)};
	return intrinsic(g, sign ? "llvm.fptosi.sat" : "llvm.fptoui.sat", tys, 2, &a, 1);
}

static int numeric(struct gen *g, uint8_t op)
{
	LLVMValueRef a, b, r;
	if (op == 0x45 || op == 0x50) {
		a = pop(g);
		return push(g, bool32(g, LLVMBuildICmp(g->B, LLVMIntEQ, a, LLVMConstInt(LLVMTypeOf(a), 0, 0), "")));
	}
	if ((op >= 0x46 && op <= 0x4f) || (op >= 0x51 && op <= 0x5a)) {
		b = pop(g), a = pop(g);
		return push(g, int_cmp(g, op - (op <= 0x4f ? 0x46 : 0x51), a, b));
	}
	if (op >= 0x5b && op <= 0x66) {
		b = pop(g), a = pop(g);
		return push(g, float_cmp(g, op - (op <= 0x60 ? 0x5b : 0x61), a, b));
	}
	if ((op >= 0x67 && op <= 0x69) || (op >= 0x79 && op <= 0x7b)) {
		a = pop(g);
		unsigned k = op - (op <= 0x69 ? 0x67 : 0x79);
		LLVMValueRef f = LLVMConstInt(g->i1, 0, 0);
		LLVMTypeRef t = LLVMTypeOf(a);
		LLVMValueRef args[2] = {a, f};
		if (k == 0)
			r = intrinsic(g, "llvm.ctlz", &t, 1, args, 2);
		else if (k == 1)
			r = intrinsic(g, "llvm.cttz", &t, 1, args, 2);
		else
			r = intr1(g, "llvm.ctpop", a);
		return push(g, r);
	}
	if ((op >= 0x6a && op <= 0x78) || (op >= 0x7c && op <= 0x8a)) {
		b = pop(g), a = pop(g);
		return push(g, int_binop(g, op - (op <= 0x78 ? 0x6a : 0x7c), a, b));
	}
	if ((op >= 0x8b && op <= 0x91) || (op >= 0x99 && op <= 0x9f)) {
		a = pop(g);
		return push(g, float_unop(g, op - (op <= 0x91 ? 0x8b : 0x99), a));
	}
	if ((op >= 0x92 && op <= 0x98) || (op >= 0xa0 && op <= 0xa6)) {
		b = pop(g), a = pop(g);
		return push(g, float_binop(g, op - (op <= 0x98 ? 0x92 : 0xa0), a, b));
	}
	a = pop(g);
	switch (op) {
	case 0xa7: r = LLVMBuildTrunc(g->B, a, g->i32, ""); break;
	case 0xa8: case 0xaa: r = trunc_checked(g, a, g->i32, true); break;
	case 0xa9: case 0xab: r = trunc_checked(g, a, g->i32, false); break;
	case 0xac: r = LLVMBuildSExt(g->B, a, g->i64, ""); break;
	case 0xad: r = LLVMBuildZExt(g->B, a, g->i64, ""); break;
	case 0xae: case 0xb0: r = trunc_checked(g, a, g->i64, true); break;
	case 0xaf: case 0xb1: r = trunc_checked(g, a, g->i64, false); break;
	case 0xb2: case 0xb4: r = LLVMBuildSIToFP(g->B, a, g->f32, ""); break;
	case 0xb3: case 0xb5: r = LLVMBuildUIToFP(g->B, a, g->f32, ""); break;
	case 0xb6: /* demote(promote x) is no identity for a signalling NaN */
		r = LLVMBuildFPTrunc(g->B, LLVMIsAFPExtInst(a) ? opaque(g, a) : a, g->f32, "");
		break;
	case 0xb7: case 0xb9: r = LLVMBuildSIToFP(g->B, a, g->f64, ""); break;
	case 0xb8: case 0xba: r = LLVMBuildUIToFP(g->B, a, g->f64, ""); break;
	case 0xbb: r = LLVMBuildFPExt(g->B, a, g->f64, ""); break;
	case 0xbc: r = LLVMBuildBitCast(g->B, a, g->i32, ""); break;
	case 0xbd: r = LLVMBuildBitCast(g->B, a, g->i64, ""); break;
	case 0xbe: r = LLVMBuildBitCast(g->B, a, g->f32, ""); break;
	case 0xbf: r = LLVMBuildBitCast(g->B, a, g->f64, ""); break;
	case 0xc0: r = LLVMBuildSExt(g->B, LLVMBuildTrunc(g->B, a, g->i8, ""), g->i32, ""); break;
	case 0xc1: r = LLVMBuildSExt(g->B, LLVMBuildTrunc(g->B, a, g->i16, ""), g->i32, ""); break;
	case 0xc2: r = LLVMBuildSExt(g->B, LLVMBuildTrunc(g->B, a, g->i8, ""), g->i64, ""); break;
	case 0xc3: r = LLVMBuildSExt(g->B, LLVMBuildTrunc(g->B, a, g->i16, ""), g->i64, ""); break;
	case 0xc4: r = LLVMBuildSExt(g->B, LLVMBuildTrunc(g->B, a, g->i32, ""), g->i64, ""); break;
	default:
		return gfail(g, "wasm.engine: the compiler met an unknown instruction");
	}
	return push(g, r);
}

/* ---- memory instructions ---- */

static int load_store(struct gen *g, uint8_t op)
{
	uint32_t align, offset;
	if (rd_u32(g, &align) < 0 || rd_u32(g, &offset) < 0)
		return -1;
	/* op: memory type, its size, the result type, signed */
	static const struct {
		uint8_t mt, size, rt, sign;
	} L[] = {
		[0x28 - 0x28] = {KIS_WASM_I32, 4, KIS_WASM_I32, 0},
		[0x29 - 0x28] = {KIS_WASM_I64, 8, KIS_WASM_I64, 0},
		[0x2a - 0x28] = {KIS_WASM_F32, 4, KIS_WASM_F32, 0},
		[0x2b - 0x28] = {KIS_WASM_F64, 8, KIS_WASM_F64, 0},
		[0x2c - 0x28] = {8, 1, KIS_WASM_I32, 1},
		[0x2d - 0x28] = {8, 1, KIS_WASM_I32, 0},
		[0x2e - 0x28] = {16, 2, KIS_WASM_I32, 1},
		[0x2f - 0x28] = {16, 2, KIS_WASM_I32, 0},
		[0x30 - 0x28] = {8, 1, KIS_WASM_I64, 1},
		[0x31 - 0x28] = {8, 1, KIS_WASM_I64, 0},
		[0x32 - 0x28] = {16, 2, KIS_WASM_I64, 1},
		[0x33 - 0x28] = {16, 2, KIS_WASM_I64, 0},
		[0x34 - 0x28] = {32, 4, KIS_WASM_I64, 1},
		[0x35 - 0x28] = {32, 4, KIS_WASM_I64, 0},
		[0x36 - 0x28] = {KIS_WASM_I32, 4, 0, 0},
		[0x37 - 0x28] = {KIS_WASM_I64, 8, 0, 0},
		[0x38 - 0x28] = {KIS_WASM_F32, 4, 0, 0},
		[0x39 - 0x28] = {KIS_WASM_F64, 8, 0, 0},
		[0x3a - 0x28] = {8, 1, 0, 0},
		[0x3b - 0x28] = {16, 2, 0, 0},
		[0x3c - 0x28] = {8, 1, 0, 0},
		[0x3d - 0x28] = {16, 2, 0, 0},
		[0x3e - 0x28] = {32, 4, 0, 0},
	};
	unsigned k = op - 0x28;
	LLVMTypeRef mt = L[k].mt == 8 ? g->i8 : L[k].mt == 16 ? g->i16 : L[k].mt == 32 ? g->i32 : vt(g, L[k].mt);
	if (op <= 0x35) {
		LLVMValueRef addr = pop(g);
		LLVMValueRef p = mem_addr(g, addr, offset, L[k].size, mt);
		LLVMValueRef v = LLVMBuildLoad2(g->B, mt, p, "");
		LLVMSetAlignment(v, 1);
		/* guard mode: the access is the check, so LLVM must neither drop
		 * an unused load nor move accesses past each other (a trap
		 * leaves memory as the interpreter does) */
		LLVMSetVolatile(v, g->guard);
		LLVMTypeRef rt = vt(g, L[k].rt);
		if (mt != rt)
			v = L[k].sign ? LLVMBuildSExt(g->B, v, rt, "") : LLVMBuildZExt(g->B, v, rt, "");
		return push(g, v);
	}
	LLVMValueRef v = pop(g), addr = pop(g);
	if (LLVMTypeOf(v) != mt)
		v = LLVMBuildTrunc(g->B, v, mt, "");
	LLVMValueRef p = mem_addr(g, addr, offset, L[k].size, mt);
	LLVMValueRef st = LLVMBuildStore(g->B, v, p);
	LLVMSetAlignment(st, 1);
	LLVMSetVolatile(st, g->guard);
	return 0;
}

static LLVMValueRef call_helper(struct gen *g, LLVMValueRef fn, LLVMTypeRef fty, LLVMValueRef *args,
				unsigned n)
{
	LLVMValueRef a[8];
	a[0] = g->ctx;
	memcpy(a + 1, args, n * sizeof(*args));
	return LLVMBuildCall2(g->B, fty, fn, a, n + 1, "");
}

#define HCALL(g, name, ...)                                                              \
	({                                                                               \
		LLVMValueRef args_[] = {__VA_ARGS__};                                    \
		call_helper(g, g->name, g->name##_t, args_, sizeof(args_) / sizeof(*args_)); \
	})

static int op_fc(struct gen *g)
{
	uint32_t sub, x, y;
	if (rd_u32(g, &sub) < 0)
		return -1;
	LLVMValueRef a, b, c;
	switch (sub) {
	case 0: return push(g, trunc_sat(g, pop(g), g->i32, true));
	case 1: return push(g, trunc_sat(g, pop(g), g->i32, false));
	case 2: return push(g, trunc_sat(g, pop(g), g->i32, true));
	case 3: return push(g, trunc_sat(g, pop(g), g->i32, false));
	case 4: return push(g, trunc_sat(g, pop(g), g->i64, true));
	case 5: return push(g, trunc_sat(g, pop(g), g->i64, false));
	case 6: return push(g, trunc_sat(g, pop(g), g->i64, true));
	case 7: return push(g, trunc_sat(g, pop(g), g->i64, false));
	case 8: /* memory.init x 0 */
		if (rd_u32(g, &x) < 0 || rd_u32(g, &y) < 0)
			return -1;
		c = pop(g), b = pop(g), a = pop(g);
		HCALL(g, wasm_jit_rt_memory_init, k32(g, x), a, b, c);
		return 0;
	case 9:
		if (rd_u32(g, &x) < 0)
			return -1;
		HCALL(g, wasm_jit_rt_data_drop, k32(g, x));
		return 0;
	case 10:
		if (rd_u32(g, &x) < 0 || rd_u32(g, &y) < 0)
			return -1;
		c = pop(g), b = pop(g), a = pop(g);
		HCALL(g, wasm_jit_rt_memory_copy, a, b, c);
		return 0;
	case 11:
		if (rd_u32(g, &x) < 0)
			return -1;
		c = pop(g), b = pop(g), a = pop(g);
		HCALL(g, wasm_jit_rt_memory_fill, a, b, c);
		return 0;
	case 12: /* table.init elem table */
		if (rd_u32(g, &x) < 0 || rd_u32(g, &y) < 0)
			return -1;
		c = pop(g), b = pop(g), a = pop(g);
		HCALL(g, wasm_jit_rt_table_init, k32(g, y), k32(g, x), a, b, c);
		return 0;
	case 13:
		if (rd_u32(g, &x) < 0)
			return -1;
		HCALL(g, wasm_jit_rt_elem_drop, k32(g, x));
		return 0;
	case 14: /* table.copy dst src */
		if (rd_u32(g, &x) < 0 || rd_u32(g, &y) < 0)
			return -1;
		c = pop(g), b = pop(g), a = pop(g);
		HCALL(g, wasm_jit_rt_table_copy, k32(g, x), k32(g, y), a, b, c);
		return 0;
	case 15:
		if (rd_u32(g, &x) < 0)
			return -1;
		b = pop(g), a = pop(g);
		return push(g, HCALL(g, wasm_jit_rt_table_grow, k32(g, x), a, b));
	case 16: {
		if (rd_u32(g, &x) < 0)
			return -1;
		LLVMValueRef tables = ldi(g, g->ctx, CTX(tables), g->i8p);
		LLVMValueRef t = ld(g, tables, (uint64_t)x * sizeof(void *), g->i8p);
		return push(g, ld(g, t, offsetof(struct kis_wasm_table, size), g->i32));
	}
	case 17:
		if (rd_u32(g, &x) < 0)
			return -1;
		c = pop(g), b = pop(g), a = pop(g);
		HCALL(g, wasm_jit_rt_table_fill, k32(g, x), a, b, c);
		return 0;
	default:
		return gfail(g, "wasm.engine: the compiler met an unknown 0xfc instruction");
	}
}

/* A vector instruction (0xfd): run by the interpreter's own simd.c on a
 * slots array (wasm_jit_rt_simd), in the form compile.c translates it to
 * (the subopcode word, its immediates), made a constant of the module.
 * Exact (the same helpers as the interpreter), not yet fast: lowering to
 * LLVM's vector operations is the next step. */
static int op_simd(struct gen *g)
{
	uint32_t sub, w[6], n = 0;
	struct wasm_simd_sig sg;
	if (rd_u32(g, &sub) < 0 || wasm_simd_sig(sub, &sg) < 0)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	if (sg.imm == SIMD_IMM_MEM || sg.imm == SIMD_IMM_MEM_LANE) {
		uint32_t align, off;
		if (rd_u32(g, &align) < 0 || rd_u32(g, &off) < 0)
			return -1;
		w[1 + n++] = off;
	}
	if (sg.imm == SIMD_IMM_MEM_LANE || sg.imm == SIMD_IMM_LANE) {
		uint8_t lane;
		if (rd_byte(g, &lane) < 0)
			return -1;
		w[1 + n++] = lane;
	}
	if (sg.imm == SIMD_IMM_BYTES16) {
		if (g->end - g->p < 16)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		memcpy(&w[1], g->p, 16);
		g->p += 16;
		n = 4;
	}
	w[0] = sub | n << 16;
	LLVMValueRef kw[6];
	for (uint32_t i = 0; i <= n; i++)
		kw[i] = k32(g, w[i]);
	LLVMTypeRef at = LLVMArrayType(g->i32, n + 1);
	LLVMValueRef gv = LLVMAddGlobal(g->M, at, "");
	LLVMSetInitializer(gv, LLVMConstArray(g->i32, kw, n + 1));
	LLVMSetGlobalConstant(gv, 1);
	LLVMSetLinkage(gv, LLVMPrivateLinkage);
	LLVMValueRef in[3];
	for (uint32_t i = sg.nin; i-- > 0;)
		in[i] = pop(g);
	if (g->failed)
		return -1;
	LLVMValueRef io = io_slots(g, 6);
	uint32_t k = 0;
	for (uint32_t i = 0; i < sg.nin; i++)
		put_slots(g, io, &k, in[i], sg.in[i]);
	LLVMValueRef words = LLVMBuildBitCast(g->B, gv, g->i8p, "");
	HCALL(g, wasm_jit_rt_simd, words, io, k32(g, k));
	if (!sg.out)
		return 0;
	uint32_t z = 0;
	return push(g, get_slots(g, io, &z, sg.out));
}

/* table.get / table.set: the index inside the table or a trap. */
static int table_access(struct gen *g, uint8_t op)
{
	uint32_t x;
	if (rd_u32(g, &x) < 0)
		return -1;
	LLVMValueRef v = op == 0x26 ? pop(g) : NULL;
	LLVMValueRef i = pop(g);
	LLVMValueRef tables = ldi(g, g->ctx, CTX(tables), g->i8p);
	LLVMValueRef t = ld(g, tables, (uint64_t)x * sizeof(void *), g->i8p);
	LLVMValueRef size = ld(g, t, offsetof(struct kis_wasm_table, size), g->i32);
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntUGE, i, size, ""), KIS_WASM_TRAP_TABLE_OOB);
	LLVMValueRef elems = ld(g, t, offsetof(struct kis_wasm_table, elems), g->i8p);
	LLVMValueRef off = LLVMBuildMul(g->B, LLVMBuildZExt(g->B, i, g->i64, ""), k64(g, 8), "");
	LLVMValueRef p = ptr_at(g, elems, off, g->i64);
	if (op == 0x26) {
		LLVMBuildStore(g->B, v, p);
		return 0;
	}
	return push(g, LLVMBuildLoad2(g->B, g->i64, p, ""));
}

static LLVMValueRef global_ptr(struct gen *g, uint32_t x)
{
	LLVMValueRef globals = ldi(g, g->ctx, CTX(globals), g->i8p);
	LLVMValueRef gp = ldi(g, globals, (uint64_t)x * sizeof(void *), g->i8p);
	return ptr_at(g, gp, k64(g, offsetof(struct kis_wasm_global, val)), g->i64);
}

/* ---- one function ---- */

static int end_frame(struct gen *g)
{
	struct ctl *c = &g->ctl[g->nctl - 1];
	if (!g->dead) {
		if (g->sp < c->height + c->nr)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		store_top(g, c->res, c->nr);
		LLVMBuildBr(g->B, c->end_bb);
		c->end_reached = true;
	}
	if (c->kind == CTL_IF && c->else_bb) {
		/* no else: the params are the results (validation: same types) */
		LLVMPositionBuilderAtEnd(g->B, c->else_bb);
		for (uint32_t i = 0; i < c->nr; i++)
			LLVMBuildStore(g->B, c->ifpar[i], c->res[i]);
		LLVMBuildBr(g->B, c->end_bb);
		c->end_reached = true;
	}
	g->sp = c->height;
	LLVMPositionBuilderAtEnd(g->B, c->end_bb);
	if (c->end_reached) {
		g->dead = false;
		for (uint32_t i = 0; i < c->nr; i++)
			if (push(g, LLVMBuildLoad2(g->B, vt(g, c->rt[i]), c->res[i], "")) < 0)
				return -1;
	} else {
		LLVMBuildUnreachable(g->B);
		g->dead = true;
	}
	free_ctl(c);
	g->nctl--;
	return 0;
}

static int begin_frame(struct gen *g, enum ctl_kind kind)
{
	struct ctl tmp = {0};
	if (blocktype(g, &tmp) < 0)
		return -1;
	LLVMValueRef cond = kind == CTL_IF ? pop(g) : NULL;
	if (g->sp < tmp.np || g->failed)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	struct ctl *c = push_ctl(g);
	if (!c)
		return -1;
	*c = tmp;
	c->kind = kind;
	c->height = g->sp - c->np;
	c->end_bb = LLVMAppendBasicBlockInContext(g->C, g->F, "end");
	if (alloc_slots(g, &c->res, c->nr, c->rt) < 0)
		return -1;
	if (kind == CTL_LOOP) {
		if (alloc_slots(g, &c->par, c->np, c->pt) < 0)
			return -1;
		c->loop_bb = LLVMAppendBasicBlockInContext(g->C, g->F, "loop");
		store_top(g, c->par, c->np);
		LLVMBuildBr(g->B, c->loop_bb);
		LLVMPositionBuilderAtEnd(g->B, c->loop_bb);
		g->sp -= c->np;
		for (uint32_t i = 0; i < c->np; i++)
			push(g, LLVMBuildLoad2(g->B, vt(g, c->pt[i]), c->par[i], ""));
		tick(g);
	} else if (kind == CTL_IF) {
		c->ifpar = calloc(c->np + 1u, sizeof(LLVMValueRef));
		if (!c->ifpar)
			return gfail(g, "out of memory");
		memcpy(c->ifpar, g->stk + g->sp - c->np, c->np * sizeof(LLVMValueRef));
		LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(g->C, g->F, "then");
		c->else_bb = LLVMAppendBasicBlockInContext(g->C, g->F, "else");
		LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntNE, cond, k32(g, 0), ""), then, c->else_bb);
		LLVMPositionBuilderAtEnd(g->B, then);
	}
	return 0;
}

static int op_else(struct gen *g)
{
	struct ctl *c = &g->ctl[g->nctl - 1];
	if (c->kind != CTL_IF || !c->else_bb)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	if (!g->dead) {
		store_top(g, c->res, c->nr);
		LLVMBuildBr(g->B, c->end_bb);
		c->end_reached = true;
	}
	g->sp = c->height;
	LLVMPositionBuilderAtEnd(g->B, c->else_bb);
	c->else_bb = NULL;
	g->dead = false;
	for (uint32_t i = 0; i < c->np; i++)
		push(g, c->ifpar[i]);
	return 0;
}

static int op_br_table(struct gen *g)
{
	uint32_t n, l;
	if (rd_u32(g, &n) < 0)
		return -1;
	if ((size_t)(g->end - g->p) < n)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	uint32_t *ls = malloc(((size_t)n + 1) * sizeof(uint32_t));
	if (!ls)
		return gfail(g, "out of memory");
	for (uint32_t i = 0; i <= n; i++)
		if (rd_u32(g, &ls[i]) < 0) {
			free(ls);
			return -1;
		}
	LLVMValueRef idx = pop(g);
	/* one trampoline per distinct label depth */
	LLVMBasicBlockRef *bb = calloc((size_t)g->nctl + 1, sizeof(*bb));
	if (!bb) {
		free(ls);
		return gfail(g, "out of memory");
	}
	int rc = 0;
	for (uint32_t i = 0; i <= n && rc == 0; i++) {
		l = ls[i];
		if (l >= g->nctl) {
			rc = gfail(g, "wasm.engine: the compiler met a malformed body");
			break;
		}
		if (!bb[l])
			bb[l] = branch_block(g, l);
	}
	if (rc == 0) {
		LLVMValueRef sw = LLVMBuildSwitch(g->B, idx, bb[ls[n]], n);
		for (uint32_t i = 0; i < n; i++)
			LLVMAddCase(sw, k32(g, i), bb[ls[i]]);
		g->dead = true;
	}
	free(bb);
	free(ls);
	return rc;
}

/* One instruction in reachable code. */
static int instr(struct gen *g, uint8_t op)
{
	uint32_t x, y;
	LLVMValueRef a, b, c;
	switch (op) {
	case 0x00:
		trap_now(g, KIS_WASM_TRAP_UNREACHABLE);
		return 0;
	case 0x01:
		return 0;
	case 0x02:
		return begin_frame(g, CTL_BLOCK);
	case 0x03:
		return begin_frame(g, CTL_LOOP);
	case 0x04:
		return begin_frame(g, CTL_IF);
	case 0x05:
		return op_else(g);
	case 0x0b:
		return end_frame(g);
	case 0x0c:
		if (rd_u32(g, &x) < 0 || branch_to(g, x) < 0)
			return -1;
		g->dead = true;
		return 0;
	case 0x0d: {
		if (rd_u32(g, &x) < 0)
			return -1;
		c = pop(g);
		LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(g->C, g->F, "");
		LLVMBasicBlockRef stay = LLVMAppendBasicBlockInContext(g->C, g->F, "");
		LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntNE, c, k32(g, 0), ""), go, stay);
		LLVMPositionBuilderAtEnd(g->B, go);
		if (branch_to(g, x) < 0)
			return -1;
		LLVMPositionBuilderAtEnd(g->B, stay);
		return 0;
	}
	case 0x0e:
		return op_br_table(g);
	case 0x0f:
		if (branch_to(g, g->nctl - 1) < 0)
			return -1;
		g->dead = true;
		return 0;
	case 0x10:
		return rd_u32(g, &x) < 0 ? -1 : op_call(g, x);
	case 0x11:
		if (rd_u32(g, &x) < 0 || rd_u32(g, &y) < 0)
			return -1;
		return op_call_indirect(g, x, y);
	case 0x1a:
		pop(g);
		return 0;
	case 0x1c:
		if (rd_u32(g, &x) < 0 || (size_t)(g->end - g->p) < x)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		g->p += x;
		/* fall through */
	case 0x1b:
		c = pop(g), b = pop(g), a = pop(g);
		return push(g, LLVMBuildSelect(g->B, LLVMBuildICmp(g->B, LLVMIntNE, c, k32(g, 0), ""), a, b, ""));
	case 0x20:
		if (rd_u32(g, &x) < 0 || x >= g->nlocals)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		return push(g, LLVMBuildLoad2(g->B, g->ltypes[x], g->locals[x], ""));
	case 0x21:
	case 0x22:
		if (rd_u32(g, &x) < 0 || x >= g->nlocals)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		a = pop(g);
		LLVMBuildStore(g->B, a, g->locals[x]);
		return op == 0x22 ? push(g, a) : 0;
	case 0x23:
		if (rd_u32(g, &x) < 0 || x >= g->m->nglobals)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		if (g->m->globals[x].type == KIS_WASM_V128)
			return push(g, get_slots(g, global_ptr(g, x), &(uint32_t){0}, KIS_WASM_V128));
		return push(g, from_slot(g, LLVMBuildLoad2(g->B, g->i64, global_ptr(g, x), ""),
					 g->m->globals[x].type));
	case 0x24:
		if (rd_u32(g, &x) < 0 || x >= g->m->nglobals)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		a = pop(g);
		if (g->m->globals[x].type == KIS_WASM_V128)
			put_slots(g, global_ptr(g, x), &(uint32_t){0}, a, KIS_WASM_V128);
		else
			LLVMBuildStore(g->B, to_slot(g, a), global_ptr(g, x));
		return 0;
	case 0x25:
	case 0x26:
		return table_access(g, op);
	case 0x3f: {
		uint8_t z;
		if (rd_byte(g, &z) < 0)
			return -1;
		if (g->guard) /* not kept: calls may grow it */
			a = ld(g, ldi(g, g->ctx, CTX(mem), g->i8p), offsetof(struct kis_wasm_memory, size), g->i64);
		else
			a = LLVMBuildLoad2(g->B, g->i64, g->memsize, "");
		return push(g, LLVMBuildTrunc(g->B, LLVMBuildLShr(g->B, a, k64(g, 16), ""), g->i32, ""));
	}
	case 0x40: {
		uint8_t z;
		if (rd_byte(g, &z) < 0)
			return -1;
		a = pop(g);
		LLVMValueRef r = HCALL(g, wasm_jit_rt_memory_grow, a);
		reload_mem(g);
		return push(g, r);
	}
	case 0x41: {
		int32_t v;
		if (wasm_read_s32(&g->p, g->end, &v) < 0)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		return push(g, k32(g, (uint32_t)v));
	}
	case 0x42: {
		int64_t v;
		if (wasm_read_s64(&g->p, g->end, &v) < 0)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		return push(g, k64(g, (uint64_t)v));
	}
	case 0x43: {
		uint32_t bits;
		if (g->end - g->p < 4)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		memcpy(&bits, g->p, 4);
		g->p += 4;
		return push(g, LLVMConstBitCast(k32(g, bits), g->f32));
	}
	case 0x44: {
		uint64_t bits;
		if (g->end - g->p < 8)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		memcpy(&bits, g->p, 8);
		g->p += 8;
		return push(g, LLVMConstBitCast(k64(g, bits), g->f64));
	}
	case 0xd0: {
		uint8_t t;
		if (rd_byte(g, &t) < 0)
			return -1;
		return push(g, k64(g, 0));
	}
	case 0xd1:
		a = pop(g);
		return push(g, bool32(g, LLVMBuildICmp(g->B, LLVMIntEQ, a, k64(g, 0), "")));
	case 0xd2:
		if (rd_u32(g, &x) < 0 || x >= g->m->nfuncs)
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		return push(g, LLVMBuildPtrToInt(g->B, func_ptr(g, x), g->i64, ""));
	case 0xfc:
		return op_fc(g);
	case 0xfd:
		return op_simd(g);
	default:
		if (op >= 0x28 && op <= 0x3e)
			return load_store(g, op);
		if (op >= 0x45 && op <= 0xc4)
			return numeric(g, op);
		return gfail(g, "wasm.engine: the compiler met an unknown instruction");
	}
}

/* Skip unreachable code up to the else or end that makes code reachable
 * again (or closes the current frame). */
static int skip_dead(struct gen *g)
{
	uint32_t depth = 0;
	while (g->p < g->end && !g->failed) {
		uint8_t op = *g->p;
		if (op == 0x0b || op == 0x05) {
			if (depth == 0)
				return 0;
			g->p++;
			if (op == 0x0b)
				depth--;
			continue;
		}
		g->p++;
		if (op == 0x02 || op == 0x03 || op == 0x04)
			depth++;
		if (skip_imm(g, op) < 0)
			return -1;
	}
	return gfail(g, "wasm.engine: the compiler met a malformed body");
}

static void reset_func(struct gen *g)
{
	for (uint32_t i = 0; i < g->nctl; i++)
		free_ctl(&g->ctl[i]);
	g->nctl = 0;
	g->sp = 0;
	g->dead = false;
	g->io = NULL;
	g->io_len = 0;
	memset(g->trap_bb, 0, sizeof(g->trap_bb));
	free(g->locals);
	free(g->ltypes);
	g->locals = NULL;
	g->ltypes = NULL;
}

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
 * semantics, under the same bounds checks (no access outside memory). */
enum known_fn { KNOWN_NONE, KNOWN_MEMCPY, KNOWN_MEMMOVE, KNOWN_MEMSET, KNOWN_MEMCMP };
#define FAST_MAX (16u << 20) /* bytes: a few ms at most between interrupt checks */

/* call_at: the offset of a `call` (0x10) whose immediate, a 5-byte padded
 * LEB128 as wasm-ld writes a relocated function index, differs from module
 * to module: left out of the hash, and its target must itself be the
 * recognised memcpy (memmove calls it for disjoint ranges). */
static const struct {
	enum known_fn fn;
	uint32_t len, call_at;
	uint64_t h1, h2;
} known_bodies[] = {
	{ KNOWN_MEMCPY, 1296, 0, 0xbff5f612ef2b2479ull, 0x0a3e6c49a138f0bbull },
	{ KNOWN_MEMMOVE, 1287, 41, 0x32b469df5412ea5eull, 0x55c44b47b7ef60a0ull },
	{ KNOWN_MEMSET, 379, 0, 0xec893cb3c59fb061ull, 0x2a42ca637395bf82ull },
	{ KNOWN_MEMCMP, 73, 0, 0x851910bed14663a3ull, 0xd8e27c9da25ed634ull },
};

static enum known_fn known_routine(const struct kis_wasm_module *m, uint32_t di, bool inner)
{
	const struct wasm_code *code = &m->codes[di];
	const struct wasm_functype *ft = &m->types[m->func_types[m->nfunc_imports + di]];
	/* (i32, i32, i32) -> i32, as all four are, over a memory 0 */
	static const uint8_t sig[4] = { 0x7f, 0x7f, 0x7f, 0x7f };
	if (!m->nmems || ft->np != 3 || ft->nr != 1 || memcmp(ft->t, sig, 4))
		return KNOWN_NONE;
	for (size_t k = 0; k < sizeof(known_bodies) / sizeof(known_bodies[0]); k++) {
		uint32_t at = known_bodies[k].call_at;
		if (known_bodies[k].len != code->body_len || (at && inner))
			continue;
		uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x243f6a8885a308d3ull; /* FNV-1a; a second mix */
		for (uint32_t i = 0; i < code->body_len; i++) {
			uint8_t c = at && i > at && i <= at + 5 ? 0 : code->body[i];
			h1 = (h1 ^ c) * 0x100000001b3ull;
			h2 = (h2 ^ c) * 0x9e3779b97f4a7c15ull;
			h2 ^= h2 >> 29;
		}
		if (known_bodies[k].h1 != h1 || known_bodies[k].h2 != h2)
			continue;
		if (at) {
			const uint8_t *b = code->body + at;
			uint32_t t = 0;
			if (b[0] != 0x10)
				continue;
			for (int j = 0; j < 5; j++)
				t |= (uint32_t)(b[1 + j] & 0x7f) << (7 * j);
			if (t < m->nfunc_imports || t >= m->nfuncs ||
			    known_routine(m, t - m->nfunc_imports, true) != KNOWN_MEMCPY)
				continue;
		}
		return known_bodies[k].fn;
	}
	return KNOWN_NONE;
}

/* The fast path at the top of a recognised routine (after the prologue's
 * checks): its own code follows, for the calls the fast path leaves. */
static void gen_known(struct gen *g, enum known_fn k)
{
	LLVMValueRef a = LLVMBuildLoad2(g->B, g->i32, g->locals[0], "");
	LLVMValueRef b = LLVMBuildLoad2(g->B, g->i32, g->locals[1], "");
	LLVMValueRef n = LLVMBuildLoad2(g->B, g->i32, g->locals[2], "");
	LLVMValueRef a64 = LLVMBuildZExt(g->B, a, g->i64, ""), b64 = LLVMBuildZExt(g->B, b, g->i64, "");
	LLVMValueRef n64 = LLVMBuildZExt(g->B, n, g->i64, "");
	LLVMValueRef size = LLVMBuildLoad2(g->B, g->i64, g->memsize, "");
	LLVMValueRef aend = LLVMBuildAdd(g->B, a64, n64, ""), bend = LLVMBuildAdd(g->B, b64, n64, "");
	LLVMValueRef ok = LLVMBuildICmp(g->B, LLVMIntULE, n, k32(g, FAST_MAX), "");
	ok = LLVMBuildAnd(g->B, ok, LLVMBuildICmp(g->B, LLVMIntULE, aend, size, ""), "");
	if (k != KNOWN_MEMSET) /* memset's second argument is the byte, not an address */
		ok = LLVMBuildAnd(g->B, ok, LLVMBuildICmp(g->B, LLVMIntULE, bend, size, ""), "");
	if (k == KNOWN_MEMCPY) { /* disjoint: a + n <= b or b + n <= a */
		LLVMValueRef dis = LLVMBuildOr(g->B, LLVMBuildICmp(g->B, LLVMIntULE, aend, b64, ""),
					       LLVMBuildICmp(g->B, LLVMIntULE, bend, a64, ""), "");
		ok = LLVMBuildAnd(g->B, ok, dis, "");
	}
	LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(g->C, g->F, "known");
	LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->C, g->F, "own");
	LLVMBuildCondBr(g->B, ok, fast, slow);
	LLVMPositionBuilderAtEnd(g->B, fast);
	LLVMValueRef base = LLVMBuildLoad2(g->B, g->i8p, g->membase, "");
	LLVMValueRef pa = LLVMBuildGEP2(g->B, g->i8, base, &a64, 1, "");
	LLVMValueRef f = LLVMConstInt(g->i1, 0, 0);
	switch (k) {
	case KNOWN_MEMCPY:
	case KNOWN_MEMMOVE: {
		LLVMValueRef pb = LLVMBuildGEP2(g->B, g->i8, base, &b64, 1, "");
		LLVMTypeRef tys[3] = { g->i8p, g->i8p, g->i64 };
		LLVMValueRef args[4] = { pa, pb, n64, f };
		intrinsic(g, k == KNOWN_MEMCPY ? "llvm.memcpy" : "llvm.memmove", tys, 3, args, 4);
		LLVMBuildRet(g->B, a);
		break;
	}
	case KNOWN_MEMSET: {
		LLVMTypeRef tys[2] = { g->i8p, g->i64 };
		LLVMValueRef args[4] = { pa, LLVMBuildTrunc(g->B, b, g->i8, ""), n64, f };
		intrinsic(g, "llvm.memset", tys, 2, args, 4);
		LLVMBuildRet(g->B, a);
		break;
	}
	case KNOWN_MEMCMP:
		LLVMBuildRet(g->B, HCALL(g, wasm_jit_rt_memcmp, a, b, n));
		break;
	case KNOWN_NONE:
	default:
		break;
	}
	LLVMPositionBuilderAtEnd(g->B, slow);
}

static int gen_func(struct gen *g, uint32_t di)
{
	const struct kis_wasm_module *m = g->m;
	const struct wasm_code *code = &m->codes[di];
	const struct wasm_functype *ft = &m->types[m->func_types[m->nfunc_imports + di]];
	reset_func(g);
	g->F = g->fns[di];
	g->ctx = LLVMGetParam(g->F, 0);
	g->p = code->body;
	g->end = code->body + code->body_len;
	g->alloca_bb = LLVMAppendBasicBlockInContext(g->C, g->F, "entry");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->C, g->F, "body");
	LLVMPositionBuilderAtEnd(g->AB, g->alloca_bb);
	LLVMPositionBuilderAtEnd(g->B, body);

	/* locals: the params, then the declared ones (spec 5.5.13), zero;
	 * counted here (code->nlocals counts stack slots: a v128 takes two) */
	const uint8_t *decl = g->p;
	uint32_t ngroups, total = ft->np;
	if (rd_u32(g, &ngroups) < 0)
		return -1;
	for (uint32_t i = 0; i < ngroups; i++) {
		uint32_t cnt;
		uint8_t t;
		if (rd_u32(g, &cnt) < 0 || rd_byte(g, &t) < 0)
			return -1;
		if (cnt > KIS_WASM_MAX_LOCALS - total) /* the validator's bound */
			return gfail(g, "wasm.engine: the compiler met a malformed body");
		total += cnt;
	}
	g->p = decl;
	g->nlocals = total;
	g->locals = calloc((size_t)g->nlocals + 1, sizeof(LLVMValueRef));
	g->ltypes = calloc((size_t)g->nlocals + 1, sizeof(LLVMTypeRef));
	if (!g->locals || !g->ltypes)
		return gfail(g, "out of memory");
	uint32_t k = 0;
	for (; k < ft->np; k++) {
		g->ltypes[k] = vt(g, ft->t[k]);
		g->locals[k] = entry_alloca(g, g->ltypes[k]);
		LLVMBuildStore(g->AB, LLVMGetParam(g->F, k + 1), g->locals[k]);
	}
	if (rd_u32(g, &ngroups) < 0)
		return -1;
	for (uint32_t i = 0; i < ngroups; i++) {
		uint32_t cnt;
		uint8_t t;
		if (rd_u32(g, &cnt) < 0 || rd_byte(g, &t) < 0)
			return -1;
		for (uint32_t j = 0; j < cnt; j++, k++) {
			g->ltypes[k] = vt(g, t);
			g->locals[k] = entry_alloca(g, g->ltypes[k]);
			LLVMBuildStore(g->AB, LLVMConstNull(g->ltypes[k]), g->locals[k]);
		}
	}
	if (m->nmems) {
		g->membase = entry_alloca(g, g->i8p);
		g->memsize = entry_alloca(g, g->i64);
	}

	/* Prologue: the stack limit, less this frame's estimate (its locals
	 * and operands spilled, and the calls it makes), then the tick a
	 * call takes in the interpreter. */
	uint64_t frame = 16ull * code->max_height + 512;
	LLVMValueRef sp = intrinsic(g, "llvm.stacksave", NULL, 0, NULL, 0);
	LLVMValueRef spi = LLVMBuildPtrToInt(g->B, sp, g->i64, "");
	LLVMValueRef lim = ldi(g, g->ctx, CTX(stack_limit), g->i64);
	LLVMValueRef need = LLVMBuildAdd(g->B, lim, k64(g, frame), "");
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntULT, spi, need, ""), KIS_WASM_TRAP_STACK_EXHAUSTED);
	tick(g);
	load_mem(g);
	enum known_fn known = known_routine(m, di, false);
	if (known != KNOWN_NONE)
		gen_known(g, known);

	struct ctl *fc = push_ctl(g);
	if (!fc)
		return -1;
	fc->kind = CTL_FUNC;
	fc->nr = ft->nr;
	fc->rt = ft->t + ft->np;
	fc->end_bb = LLVMAppendBasicBlockInContext(g->C, g->F, "return");
	if (alloc_slots(g, &fc->res, fc->nr, fc->rt) < 0)
		return -1;

	while (g->nctl && !g->failed) {
		if (g->dead && skip_dead(g) < 0)
			return -1;
		uint8_t op;
		if (rd_byte(g, &op) < 0)
			return -1;
		if (instr(g, op) < 0)
			return -1;
	}
	if (g->failed)
		return -1;
	if (g->p != g->end)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	/* after the function's end: the results are on the stack */
	if (!g->dead) {
		if (ft->nr == 0) {
			LLVMBuildRetVoid(g->B);
		} else if (ft->nr == 1) {
			LLVMBuildRet(g->B, g->stk[g->sp - 1]);
		} else {
			LLVMValueRef r = LLVMGetUndef(LLVMGetReturnType(g->ftys[m->func_types[m->nfunc_imports + di]]));
			for (uint32_t i = 0; i < ft->nr; i++)
				r = LLVMBuildInsertValue(g->B, r, g->stk[g->sp - ft->nr + i], i, "");
			LLVMBuildRet(g->B, r);
		}
	}
	LLVMBuildBr(g->AB, body);
	return 0;
}

/* w<i>(ctx, io): the function over slots, for entry from C. */
static void gen_wrap(struct gen *g, uint32_t di)
{
	const struct kis_wasm_module *m = g->m;
	uint32_t ti = m->func_types[m->nfunc_imports + di];
	const struct wasm_functype *ft = &m->types[ti];
	char name[32];
	snprintf(name, sizeof(name), "w%u", di);
	LLVMTypeRef ps[2] = {g->i8p, g->i64p};
	LLVMValueRef W = LLVMAddFunction(g->M, name, LLVMFunctionType(g->vd, ps, 2, 0));
	LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(g->C, W, "");
	LLVMPositionBuilderAtEnd(g->B, bb);
	LLVMValueRef io = LLVMGetParam(W, 1);
	LLVMValueRef args[KIS_WASM_MAX_PARAMS + 1];
	args[0] = LLVMGetParam(W, 0);
	uint32_t k = 0;
	for (uint32_t i = 0; i < ft->np; i++)
		args[1 + i] = get_slots(g, io, &k, ft->t[i]);
	LLVMValueRef r = LLVMBuildCall2(g->B, g->ftys[ti], g->fns[di], args, ft->np + 1, "");
	k = 0;
	for (uint32_t i = 0; i < ft->nr; i++) {
		LLVMValueRef v = ft->nr == 1 ? r : LLVMBuildExtractValue(g->B, r, i, "");
		put_slots(g, io, &k, v, ft->t[ft->np + i]);
	}
	LLVMBuildRetVoid(g->B);
}

static void declare_helpers(struct gen *g)
{
	LLVMTypeRef p = g->i8p, i32 = g->i32, i64 = g->i64, v = g->vd;
#define DECL(name, ret, ...)                                                             \
	do {                                                                             \
		LLVMTypeRef a_[] = {__VA_ARGS__};                                        \
		g->name##_t = LLVMFunctionType(ret, a_, sizeof(a_) / sizeof(*a_), 0);    \
		g->name = LLVMAddFunction(g->M, #name, g->name##_t);                     \
	} while (0)
	DECL(wasm_jit_rt_trap, v, p, i32);
	DECL(wasm_jit_rt_call, v, p, p, g->i64p);
	DECL(wasm_jit_rt_sig_eq, i32, p, p);
	DECL(wasm_jit_rt_memory_grow, i32, p, i32);
	DECL(wasm_jit_rt_memory_init, v, p, i32, i32, i32, i32);
	DECL(wasm_jit_rt_data_drop, v, p, i32);
	DECL(wasm_jit_rt_memory_copy, v, p, i32, i32, i32);
	DECL(wasm_jit_rt_memory_fill, v, p, i32, i32, i32);
	DECL(wasm_jit_rt_memcmp, i32, p, i32, i32, i32);
	DECL(wasm_jit_rt_table_init, v, p, i32, i32, i32, i32, i32);
	DECL(wasm_jit_rt_elem_drop, v, p, i32);
	DECL(wasm_jit_rt_table_copy, v, p, i32, i32, i32, i32, i32);
	DECL(wasm_jit_rt_table_grow, i32, p, i32, i64, i32);
	DECL(wasm_jit_rt_table_fill, v, p, i32, i32, i64, i32);
	DECL(wasm_jit_rt_simd, v, p, p, g->i64p, i32);
#undef DECL
	unsigned noret = LLVMGetEnumAttributeKindForName("noreturn", 8);
	unsigned cold = LLVMGetEnumAttributeKindForName("cold", 4);
	LLVMAddAttributeAtIndex(g->wasm_jit_rt_trap, LLVMAttributeFunctionIndex,
				LLVMCreateEnumAttribute(g->C, noret, 0));
	LLVMAddAttributeAtIndex(g->wasm_jit_rt_trap, LLVMAttributeFunctionIndex,
				LLVMCreateEnumAttribute(g->C, cold, 0));
}

/* ---- LLVM: target, optimisation, linking ---- */


static int llvm_fail(char *err, size_t errlen, const char *what, LLVMErrorRef e)
{
	char *msg = e ? LLVMGetErrorMessage(e) : NULL;
	snprintf(err, errlen, "wasm.engine: %s%s%s", what, msg ? ": " : "", msg ? msg : "");
	if (msg)
		LLVMDisposeErrorMessage(msg);
	return -1;
}

static LLVMTargetMachineRef host_machine(bool fast, char *err, size_t errlen)
{
	char *triple = LLVMGetDefaultTargetTriple();
	char *cpu = LLVMGetHostCPUName();
	char *features = LLVMGetHostCPUFeatures();
	LLVMTargetRef target;
	char *msg = NULL;
	LLVMTargetMachineRef tm = NULL;
	if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
		snprintf(err, errlen, "wasm.engine: no LLVM target for this host: %s", msg ? msg : "");
	} else {
		/* the fast tier: at CodeGenLevelNone x86 selects instructions
		 * with FastISel and allocates registers with the fast
		 * allocator, where -O1's greedy allocator and SelectionDAG took
		 * 55% of Lua's compile */
		tm = LLVMCreateTargetMachine(target, triple, cpu, features,
					     fast ? LLVMCodeGenLevelNone : LLVMCodeGenLevelDefault,
					     LLVMRelocPIC, LLVMCodeModelSmall);
		if (!tm)
			snprintf(err, errlen, "wasm.engine: cannot make an LLVM target machine");
	}
	LLVMDisposeMessage(msg);
	LLVMDisposeMessage(triple);
	LLVMDisposeMessage(cpu);
	LLVMDisposeMessage(features);
	return tm;
}

/* Define the runtime helpers and the few C library functions LLVM may
 * call (memset for a zeroing loop, rounding without SSE4.1) as absolute
 * symbols: the code links to nothing else. */
static int define_symbols(LLVMOrcLLJITRef J, char *err, size_t errlen)
{
	static const struct wasm_jit_sym libc[] = {
		{"memset", (void (*)(void))memset},
		{"memcpy", (void (*)(void))memcpy},
		{"memmove", (void (*)(void))memmove},
		{"nearbyint", (void (*)(void))nearbyint},
		{"nearbyintf", (void (*)(void))nearbyintf},
		{"ceil", (void (*)(void))ceil},
		{"ceilf", (void (*)(void))ceilf},
		{"floor", (void (*)(void))floor},
		{"floorf", (void (*)(void))floorf},
		{"trunc", (void (*)(void))trunc},
		{"truncf", (void (*)(void))truncf},
	};
	size_t nlibc = sizeof(libc) / sizeof(*libc), n = H->nsyms + nlibc;
	LLVMJITCSymbolMapPair *pairs = calloc(n, sizeof(*pairs));
	if (!pairs) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const struct wasm_jit_sym *sy = i < H->nsyms ? &H->syms[i] : &libc[i - H->nsyms];
		pairs[i].Name = LLVMOrcLLJITMangleAndIntern(J, sy->name);
		pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)sy->addr;
		pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported |
						  LLVMJITSymbolGenericFlagsCallable;
		pairs[i].Sym.Flags.TargetFlags = 0;
	}
	LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, n);
	free(pairs);
	LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(J), mu);
	if (e)
		return llvm_fail(err, errlen, "cannot define the runtime's symbols", e);
	return 0;
}

static void plugin_module_free(struct wasm_jit_module *jm)
{
	if (!jm)
		return;
	if (jm->jit)
		LLVMOrcDisposeLLJIT(jm->jit);
	free(jm->fns);
	free(jm->wraps);
	free(jm->obj);
	free(jm);
}

static const uint8_t *plugin_object(const struct wasm_jit_module *jm, size_t *len, bool *from_cache)
{
	*len = jm ? jm->obj_len : 0;
	*from_cache = jm && jm->from_cache;
	return jm ? jm->obj : NULL;
}

/* What compiled code depends on besides the module: this compiler, LLVM,
 * and the CPU it was made for (its name and features). */
static int plugin_id(char *buf, size_t len)
{
	char *cpu = LLVMGetHostCPUName();
	char *features = LLVMGetHostCPUFeatures();
	int n = snprintf(buf, len, "kis-jit %u llvm %s cpu %s %s", WASM_JIT_VERSION,
			 LLVM_VERSION_STRING, cpu, features);
	LLVMDisposeMessage(cpu);
	LLVMDisposeMessage(features);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int plugin_lookup(struct wasm_jit_module *jm, uint32_t i, void **fn,
			 void (**wrap)(void *, uint64_t *))
{
	if (!jm || i >= jm->n)
		return -1;
	*fn = jm->fns[i];
	*wrap = (void (*)(void *, uint64_t *))jm->wraps[i];
	return 0;
}

/* Link the object code into a new LLJIT and find every function. */
static int link_object(struct kis_wasm_module *m, LLVMMemoryBufferRef obj, bool from_cache,
		       char *err, size_t errlen)
{
	uint32_t n = m->nfuncs - m->nfunc_imports;
	struct wasm_jit_module *jm = calloc(1, sizeof(*jm));
	if (jm) {
		jm->obj_len = LLVMGetBufferSize(obj);
		jm->obj = malloc(jm->obj_len + 1);
		if (jm->obj)
			memcpy(jm->obj, LLVMGetBufferStart(obj), jm->obj_len);
		jm->from_cache = from_cache;
	}
	if (!jm || !jm->obj) {
		free(jm);
		LLVMDisposeMemoryBuffer(obj);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	jm->n = n;
	jm->fns = calloc((size_t)n + 1, sizeof(void *));
	jm->wraps = calloc((size_t)n + 1, sizeof(void *));
	LLVMErrorRef e = NULL;
	if (!jm->fns || !jm->wraps) {
		LLVMDisposeMemoryBuffer(obj);
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
	e = LLVMOrcCreateLLJIT(&jm->jit, b);
	if (e) {
		jm->jit = NULL;
		LLVMDisposeMemoryBuffer(obj);
		llvm_fail(err, errlen, "cannot start LLVM's JIT", e);
		goto fail;
	}
	if (define_symbols(jm->jit, err, errlen) < 0) {
		LLVMDisposeMemoryBuffer(obj);
		goto fail;
	}
	e = LLVMOrcLLJITAddObjectFile(jm->jit, LLVMOrcLLJITGetMainJITDylib(jm->jit), obj);
	if (e) {
		llvm_fail(err, errlen, "cannot add the object code", e);
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		LLVMOrcExecutorAddress a = 0, w = 0;
		snprintf(name, sizeof(name), "f%u", i);
		e = LLVMOrcLLJITLookup(jm->jit, &a, name);
		if (!e) {
			snprintf(name, sizeof(name), "w%u", i);
			e = LLVMOrcLLJITLookup(jm->jit, &w, name);
		}
		if (e) {
			llvm_fail(err, errlen, "cannot link the compiled code", e);
			goto fail;
		}
		jm->fns[i] = (void *)(uintptr_t)a;
		jm->wraps[i] = (void *)(uintptr_t)w;
	}
	m->jit = jm;
	return 0;
fail:
	plugin_module_free(jm);
	return -1;
}

/* m's functions to an object file in *objp (0), or -1 with err. */
static int generate(struct kis_wasm_module *m, LLVMMemoryBufferRef *objp, char *err,
		    size_t errlen)
{
	struct gen g = {.m = m, .err = err, .errlen = errlen, .guard = m->jit_guard};
	g.C = LLVMContextCreate();
	g.md_invariant = LLVMGetMDKindIDInContext(g.C, "invariant.load", 14);
	g.M = LLVMModuleCreateWithNameInContext("wasm", g.C);
	g.B = LLVMCreateBuilderInContext(g.C);
	g.AB = LLVMCreateBuilderInContext(g.C);
	g.i1 = LLVMInt1TypeInContext(g.C);
	g.i8 = LLVMInt8TypeInContext(g.C);
	g.i16 = LLVMInt16TypeInContext(g.C);
	g.i32 = LLVMInt32TypeInContext(g.C);
	g.i64 = LLVMInt64TypeInContext(g.C);
	g.i128 = LLVMIntTypeInContext(g.C, 128);
	g.f32 = LLVMFloatTypeInContext(g.C);
	g.f64 = LLVMDoubleTypeInContext(g.C);
	g.vd = LLVMVoidTypeInContext(g.C);
	g.i8p = LLVMPointerType(g.i8, 0);
	g.i64p = LLVMPointerType(g.i64, 0);
	bool fast = m->jit_tier == WASM_JIT_TIER_FAST;
	LLVMTargetMachineRef tm = host_machine(fast, err, errlen);
	int rc = -1;
	uint32_t n = m->nfuncs - m->nfunc_imports;
	g.ftys = calloc((size_t)m->ntypes + 1, sizeof(LLVMTypeRef));
	g.fns = calloc((size_t)n + 1, sizeof(LLVMValueRef));
	LLVMMemoryBufferRef obj = NULL;
	if (!tm)
		goto out;
	if (!g.ftys || !g.fns) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	LLVMSetTarget(g.M, LLVMGetDefaultTargetTriple());
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(g.M, td);
	LLVMDisposeTargetData(td);
	declare_helpers(&g);
	for (uint32_t i = 0; i < m->ntypes; i++)
		g.ftys[i] = func_type(&g, &m->types[i]);
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%u", i);
		g.fns[i] = LLVMAddFunction(g.M, name, g.ftys[m->func_types[m->nfunc_imports + i]]);
		/* no tail-recursion elimination: a recursion that runs out of
		 * stack in the interpreter must trap here too, not loop */
		LLVMAddAttributeAtIndex(g.fns[i], LLVMAttributeFunctionIndex,
					LLVMCreateStringAttribute(g.C, "disable-tail-calls", 18, "true", 4));
		/* a frame larger than a page is touched page by page as it is
		 * made (LLVM's inline stack probes, as -fstack-clash-protection
		 * gives C): allocating it can only fault on the guard page,
		 * never step over it, whatever runs before the limit check */
		LLVMAddAttributeAtIndex(g.fns[i], LLVMAttributeFunctionIndex,
					LLVMCreateStringAttribute(g.C, "probe-stack", 11, "inline-asm", 10));
	}
	for (uint32_t i = 0; i < n; i++)
		if (gen_func(&g, i) < 0)
			goto out;
	for (uint32_t i = 0; i < n; i++)
		gen_wrap(&g, i);
	char *vmsg = NULL;
	if (LLVMVerifyModule(g.M, LLVMReturnStatusAction, &vmsg)) {
		snprintf(err, errlen, "wasm.engine: the compiler made invalid LLVM IR: %.300s",
			 vmsg ? vmsg : "");
		if (getenv("KIS_JIT_DUMP"))
			LLVMDumpModule(g.M);
		LLVMDisposeMessage(vmsg);
		goto out;
	}
	LLVMDisposeMessage(vmsg);
	LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
	/* -O1: the first run of a module pays its compile inside the run's
	 * time limit, and -O2 took 2.5x as long (a 91 KB Rust test of the
	 * WASI suite: 14.5 s against 5.6 s, on this loaded machine); the
	 * cache makes later runs free either way. Tier-up compiles at the
	 * fast tier first, then at this one (docs/wasm.md, "Tier-up"). */
	/* The fast tier: the stack slots our walker makes become SSA values
	 * (sroa), repeated loads of the context and memory base fold
	 * (early-cse), empty blocks go (simplifycfg); measured on Lua's
	 * module: 0.3 s of passes against 5.5 s for default<O1>, and its
	 * code 1.5x slower than -O1's where default<O0>'s was 1.6x. */
	LLVMErrorRef e = LLVMRunPasses(
		g.M, fast ? "function(sroa,early-cse,simplifycfg)" : "default<O1>", tm, po);
	LLVMDisposePassBuilderOptions(po);
	if (e) {
		llvm_fail(err, errlen, "LLVM's optimiser failed", e);
		goto out;
	}
	char *emsg = NULL;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, g.M, LLVMObjectFile, &emsg, &obj)) {
		snprintf(err, errlen, "wasm.engine: LLVM cannot emit code: %s", emsg ? emsg : "");
		LLVMDisposeMessage(emsg);
		goto out;
	}
	*objp = obj;
	rc = 0;
out:
	reset_func(&g);
	free(g.stk);
	free(g.ctl);
	free(g.ftys);
	free(g.fns);
	LLVMDisposeBuilder(g.B);
	LLVMDisposeBuilder(g.AB);
	LLVMDisposeModule(g.M);
	LLVMContextDispose(g.C);
	if (tm)
		LLVMDisposeTargetMachine(tm);
	return rc;
}

static int plugin_compile(struct kis_wasm_module *m, const uint8_t *cached, size_t cached_len,
			  char *err, size_t errlen)
{
	if (m->jit)
		return 0;
	if (cached && cached_len) {
		/* The caller's cache made it for this module, compiler and CPU
		 * (jit_cache.c compares all three); one that does not link is
		 * compiled anew. */
		LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(
			(const char *)cached, cached_len, "cached");
		if (buf && link_object(m, buf, true, err, errlen) == 0)
			return 0;
	}
	LLVMMemoryBufferRef obj = NULL;
	if (generate(m, &obj, err, errlen) < 0)
		return -1;
	return link_object(m, obj, false, err, errlen);
}

/* The object code only: the library links it itself (jit_elf.c). */
static int plugin_emit(struct kis_wasm_module *m, uint8_t **out, size_t *len, char *err,
		       size_t errlen)
{
	LLVMMemoryBufferRef obj = NULL;
	if (generate(m, &obj, err, errlen) < 0)
		return -1;
	*len = LLVMGetBufferSize(obj);
	*out = malloc(*len ? *len : 1);
	if (*out)
		memcpy(*out, LLVMGetBufferStart(obj), *len);
	LLVMDisposeMemoryBuffer(obj);
	if (!*out) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

__attribute__((visibility("default"))) int kis_wasm_jit_plugin_init(const struct wasm_jit_host *host,
								 struct wasm_jit_plugin *out);

int kis_wasm_jit_plugin_init(const struct wasm_jit_host *host, struct wasm_jit_plugin *out)
{
	if (!host || host->version != WASM_JIT_VERSION)
		return -1;
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
		return -1;
	H = host;
	out->compile = plugin_compile;
	out->emit = plugin_emit;
	out->module_free = plugin_module_free;
	out->lookup = plugin_lookup;
	out->object = plugin_object;
	out->id = plugin_id;
	return 0;
}
