/* SPDX-License-Identifier: MIT */
/* The compiler's IR vocabulary (jit_llvm.c): types, constants, slots, the
 * operand stack, traps, bounds-checked addresses, control frames and calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "wasm/jit_llvm.h"

int gfail(struct gen *g, const char *msg)
{
	if (!g->failed)
		snprintf(g->err, g->errlen, "%s", msg);
	g->failed = true;
	return -1;
}

/* ---- reading the body (validated: only bounds are checked) ---- */

int rd_u32(struct gen *g, uint32_t *v)
{
	if (wasm_read_u32(&g->p, g->end, v) < 0)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	return 0;
}

int rd_byte(struct gen *g, uint8_t *b)
{
	if (g->p >= g->end)
		return gfail(g, "wasm.engine: the compiler met a malformed body");
	*b = *g->p++;
	return 0;
}

/* ---- types and values ---- */

LLVMTypeRef vt(struct gen *g, uint8_t t)
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

LLVMTypeRef func_type(struct gen *g, const struct wasm_functype *ft)
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

LLVMValueRef k32(struct gen *g, uint64_t v)
{
	return LLVMConstInt(g->i32, v, 0);
}

LLVMValueRef k64(struct gen *g, uint64_t v)
{
	return LLVMConstInt(g->i64, v, 0);
}

/* A slot (i64) as a value of type t, and back (kis_wasm_slot's layout). */
LLVMValueRef from_slot(struct gen *g, LLVMValueRef s, uint8_t t)
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

LLVMValueRef to_slot(struct gen *g, LLVMValueRef v)
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
void put_slots(struct gen *g, LLVMValueRef io, uint32_t *k, LLVMValueRef v, uint8_t t)
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

LLVMValueRef get_slots(struct gen *g, LLVMValueRef io, uint32_t *k, uint8_t t)
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
LLVMValueRef ptr_at(struct gen *g, LLVMValueRef base, LLVMValueRef off, LLVMTypeRef t)
{
	LLVMValueRef p = LLVMBuildGEP2(g->B, g->i8, base, &off, 1, "");
	return LLVMBuildBitCast(g->B, p, LLVMPointerType(t, 0), "");
}

LLVMValueRef ld(struct gen *g, LLVMValueRef base, uint64_t off, LLVMTypeRef t)
{
	return LLVMBuildLoad2(g->B, t, ptr_at(g, base, k64(g, off), t), "");
}

/* A load of what never changes while the instance lives (the context's
 * fields, the pointers in its globals and funcs arrays): LLVM may then
 * keep it in a register across stores to memory and calls. */
LLVMValueRef ldi(struct gen *g, LLVMValueRef base, uint64_t off, LLVMTypeRef t)
{
	LLVMValueRef v = ld(g, base, off, t);
	LLVMSetMetadata(v, g->md_invariant, LLVMMDNodeInContext(g->C, NULL, 0));
	return v;
}


/* ---- the operand stack ---- */

int push(struct gen *g, LLVMValueRef v)
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

LLVMValueRef pop(struct gen *g)
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
void trap_if(struct gen *g, LLVMValueRef cond, uint32_t kind)
{
	LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBuildCondBr(g->B, cond, trap_block(g, kind), ok);
	LLVMPositionBuilderAtEnd(g->B, ok);
}

void trap_now(struct gen *g, uint32_t kind)
{
	LLVMBuildBr(g->B, trap_block(g, kind));
	g->dead = true;
}

/* The interpreter's TICK (exec.c), the interrupt flag then one fuel: in
 * guard mode the poll page's one instruction (jit.h), else one test of
 * the store's jit_tick word (jit.h): zero, the usual case
 * (no budget, no interrupt), goes on; anything else calls the runtime,
 * which traps or counts the fuel and returns. Measured against the
 * flag's test then a fuel decrement in memory (docs/wasm.md, "The tick,
 * SQLite's profile, zlib").
 */
void tick(struct gen *g)
{
	if (g->guard) {
		/* the poll page (jit.h): one compare with the context's page
		 * before it, in the one form the fault handler steps over
		 * (jit_rt.c, poll_len), so inline assembly, not a load LLVM
		 * would encode as it likes; it reads no memory LLVM knows of,
		 * so nothing around it is kept from moving */
		static char text[] = "cmpb $$0, -8192($0)"; /* from P (jit.h) */
		static char cons[] = "r,~{dirflag},~{fpsr},~{flags}";
		_Static_assert(WASM_JIT_POLL_OFF + WASM_JIT_CTX_ARG == 8192, "the poll's displacement");
		LLVMTypeRef p = g->i8p;
		LLVMTypeRef ft = LLVMFunctionType(g->vd, &p, 1, 0);
		LLVMValueRef asm_ = LLVMGetInlineAsm(ft, text, sizeof(text) - 1, cons, sizeof(cons) - 1,
						     1, 0, LLVMInlineAsmDialectATT, 0);
		LLVMBuildCall2(g->B, ft, asm_, &g->P, 1, "");
		return;
	}
	LLVMValueRef tp = ldi(g, g->ctx, CTX(tick), g->i8p);
	LLVMValueRef tpp = LLVMBuildBitCast(g->B, tp, LLVMPointerType(g->i32, 0), "");
	LLVMValueRef w = LLVMBuildLoad2(g->B, g->i32, tpp, "");
	LLVMSetOrdering(w, LLVMAtomicOrderingMonotonic);
	LLVMSetAlignment(w, 4);
	LLVMValueRef set = LLVMBuildICmp(g->B, LLVMIntNE, w, k32(g, 0), "");
	LLVMValueRef f = LLVMConstInt(g->i1, 0, 0);
	LLVMValueRef eargs[2] = {set, f};
	LLVMTypeRef i1 = g->i1;
	set = intrinsic(g, "llvm.expect", &i1, 1, eargs, 2);
	LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->C, g->F, "tick");
	LLVMBasicBlockRef on = LLVMAppendBasicBlockInContext(g->C, g->F, "");
	LLVMBuildCondBr(g->B, set, slow, on);
	LLVMPositionBuilderAtEnd(g->B, slow);
	LLVMValueRef call = LLVMBuildCall2(g->B, g->wasm_jit_rt_tick_saved_t, g->wasm_jit_rt_tick_saved,
					   &g->ctx, 1, "");
	LLVMSetInstructionCallConv(call, LLVMPreserveMostCallConv);
	LLVMBuildBr(g->B, on);
	LLVMPositionBuilderAtEnd(g->B, on);
}

/* Memory 0's base and size into their allocas: at entry, and after
 * anything that may grow it (memory.grow, any call). A guard-region
 * memory never moves: its base is read at entry only. */
void load_mem(struct gen *g)
{
	if (!g->m->nmems)
		return;
	LLVMValueRef mem = ldi(g, g->ctx, CTX(mem), g->i8p);
	/* guard mode: the context's copy, which never changes (jit.h); or,
	 * a memory the module defines, the page after the context's (jit.h,
	 * WASM_JIT_PREFIX): an offset of the context's register */
	LLVMValueRef base = wasm_jit_mem_at_ctx(g->m)
				    ? g->P
			    : g->guard ? ldi(g, g->ctx, CTX(mem0), g->i8p)
				       : ld(g, mem, offsetof(struct kis_wasm_memory, data), g->i8p);
	LLVMBuildStore(g->B, base, g->membase);
	LLVMBuildStore(g->B, ld(g, mem, offsetof(struct kis_wasm_memory, size), g->i64), g->memsize);
}

void reload_mem(struct gen *g)
{
	if (!g->guard)
		load_mem(g);
}

LLVMValueRef entry_alloca(struct gen *g, LLVMTypeRef t)
{
	return LLVMBuildAlloca(g->AB, t, "");
}

/* The address of a size-byte access at addr + offset, after the check
 * that it lies inside memory 0 (spec 4.4.7: ea + N > |mem| traps). */
LLVMValueRef mem_addr(struct gen *g, LLVMValueRef addr, uint32_t offset, uint32_t size,
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

LLVMValueRef intrinsic(struct gen *g, const char *name, LLVMTypeRef *tys, size_t ntys,
			      LLVMValueRef *args, unsigned nargs)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->M, id, tys, ntys);
	LLVMTypeRef fty = LLVMIntrinsicGetType(g->C, id, tys, ntys);
	return LLVMBuildCall2(g->B, fty, fn, args, nargs, "");
}

LLVMValueRef intr1(struct gen *g, const char *name, LLVMValueRef a)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	return intrinsic(g, name, &t, 1, &a, 1);
}

LLVMValueRef intr2(struct gen *g, const char *name, LLVMValueRef a, LLVMValueRef b)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	LLVMValueRef args[2] = {a, b};
	return intrinsic(g, name, &t, 1, args, 2);
}

/* ---- control ---- */

struct ctl *push_ctl(struct gen *g)
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

void free_ctl(struct ctl *c)
{
	free(c->res);
	free(c->par);
	free(c->ifpar);
}

/* blocktype (spec 5.4.1): empty, one value type, or a type index. */
int blocktype(struct gen *g, struct ctl *c)
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

int alloc_slots(struct gen *g, LLVMValueRef **out, uint32_t n, const uint8_t *t)
{
	*out = calloc(n + 1u, sizeof(LLVMValueRef));
	if (!*out)
		return gfail(g, "out of memory");
	for (uint32_t i = 0; i < n; i++)
		(*out)[i] = entry_alloca(g, vt(g, t[i]));
	return 0;
}

/* Store the top n values (not popped) into the allocas. */
void store_top(struct gen *g, LLVMValueRef *slots, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		LLVMBuildStore(g->B, g->stk[g->sp - n + i], slots[i]);
}

/* A branch to label depth l (spec 4.4.8 br): the values it carries go to
 * the target's allocas. */
int branch_to(struct gen *g, uint32_t l)
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
LLVMBasicBlockRef branch_block(struct gen *g, uint32_t l)
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

int skip_imm(struct gen *g, uint8_t op)
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
LLVMValueRef io_slots(struct gen *g, uint32_t n)
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
	cargs[0] = ptr_at(g, ld(g, fptr, offsetof(struct kis_wasm_func, jit_ctx), g->i8p),
			  k64(g, WASM_JIT_CTX_ARG), g->i8); /* its P (jit.h) */
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

/* Defined function di of the module, declared in this range's module
 * the first time the range names it (its definition, a call, its
 * wrapper). Declaring all of them in every range cost each range the
 * module's whole function count: a module of 50,000 small functions cut
 * into 64 ranges made 3.2 million declarations and ran 130 s where one
 * object took 9 s. */
LLVMValueRef fn_decl(struct gen *g, uint32_t di)
{
	if (g->fns[di])
		return g->fns[di];
	const struct kis_wasm_module *m = g->m;
	char name[32];
	snprintf(name, sizeof(name), "f%u", di);
	LLVMValueRef f = LLVMAddFunction(g->M, name, g->ftys[m->func_types[m->nfunc_imports + di]]);
	/* no tail-recursion elimination: a recursion that runs out of stack
	 * in the interpreter must trap here too, not loop */
	LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
				LLVMCreateStringAttribute(g->C, "disable-tail-calls", 18, "true", 4));
	/* a frame larger than a page is touched page by page as it is made
	 * (LLVM's inline stack probes, as -fstack-clash-protection gives C):
	 * allocating it can only fault on the guard page, never step over
	 * it, whatever runs before the limit check */
	LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
				LLVMCreateStringAttribute(g->C, "probe-stack", 11, "inline-asm", 10));
	return g->fns[di] = f;
}

LLVMValueRef func_ptr(struct gen *g, uint32_t idx)
{
	LLVMValueRef funcs = ldi(g, g->ctx, CTX(funcs), g->i8p);
	return ldi(g, funcs, (uint64_t)idx * sizeof(void *), g->i8p);
}

int op_call(struct gen *g, uint32_t idx)
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
	cargs[0] = g->P;
	memcpy(cargs + 1, args, ft->np * sizeof(LLVMValueRef));
	LLVMValueRef fn = fn_decl(g, idx - m->nfunc_imports);
	LLVMValueRef r = LLVMBuildCall2(g->B, g->ftys[m->func_types[idx]], fn, cargs, ft->np + 1, "");
	reload_mem(g);
	return ft->nr ? push_results(g, r, ft) : 0;
}

/* call_indirect (spec 4.4.8): the element must be in the table, not null,
 * and of the expected type (structurally: spec 3.2.1, as exec.c checks). */
int op_call_indirect(struct gen *g, uint32_t tidx, uint32_t tab)
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
	/* the table itself never changes (its size and elements do) */
	LLVMValueRef t = ldi(g, tables, (uint64_t)tab * sizeof(void *), g->i8p);
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
