/* SPDX-License-Identifier: MIT */
/* The compiler's walk over one function body (jit_llvm.c): control
 * instructions, the opcode dispatch, prologue, entry wrappers, helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "wasm/jit_llvm.h"

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

/* Intrinsics LLVM lowers to instructions on x86-64 (never to a call of
 * a library function, as llvm.floor without SSE4.1 or llvm.memset are). */
static bool inline_intrinsic(const char *name)
{
	static const char *const ok[] = {"llvm.expect.",   "llvm.stacksave", "llvm.ctlz.",
					 "llvm.cttz.",     "llvm.ctpop.",    "llvm.fshl.",
					 "llvm.fshr.",     "llvm.fabs.",     "llvm.copysign.",
					 "llvm.sqrt.",     "llvm.fptosi.sat.", "llvm.fptoui.sat."};
	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++)
		if (!strncmp(name, ok[i], strlen(ok[i])))
			return true;
	return false;
}

/* Does F call anything but compiled functions of the module (f<n>: each
 * checks its own stack or calls nothing out either), the trap helper
 * (which longjmps, holding nothing) and intrinsics made of instructions?
 * An indirect call (its callee may be a host function), a call of an
 * import or of any other runtime helper or library function runs C on
 * the stack, which needs the margin above the guard: such a function
 * keeps its limit check (jit.h, WASM_JIT_STACK_GUARD). The poll is inline
 * assembly, no call. */
static bool calls_out(LLVMValueRef F, LLVMValueRef trap)
{
	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(F); bb; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
			if (!LLVMIsACallInst(i))
				continue;
			LLVMValueRef callee = LLVMGetCalledValue(i);
			if (LLVMIsAInlineAsm(callee) || callee == trap)
				continue;
			if (!LLVMIsAFunction(callee))
				return true;
			size_t n;
			const char *name = LLVMGetValueName2(callee, &n);
			bool own = n > 1 && name[0] == 'f';
			for (size_t k = 1; own && k < n; k++)
				own = name[k] >= '0' && name[k] <= '9';
			if (!own && !inline_intrinsic(name))
				return true;
		}
	return false;
}

void reset_func(struct gen *g)
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

int gen_func(struct gen *g, uint32_t di)
{
	const struct kis_wasm_module *m = g->m;
	const struct wasm_code *code = &m->codes[di];
	const struct wasm_functype *ft = &m->types[m->func_types[m->nfunc_imports + di]];
	reset_func(g);
	g->F = fn_decl(g, di);
	g->P = LLVMGetParam(g->F, 0);
	g->p = code->body;
	g->end = code->body + code->body_len;
	g->alloca_bb = LLVMAppendBasicBlockInContext(g->C, g->F, "entry");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->C, g->F, "body");
	LLVMPositionBuilderAtEnd(g->AB, g->alloca_bb);
	/* the context, one page below P (jit.h, WASM_JIT_CTX_ARG): LLVM folds
	 * the page into each field's displacement */
	LLVMValueRef back = k64(g, -(uint64_t)WASM_JIT_CTX_ARG);
	g->ctx = LLVMBuildGEP2(g->AB, g->i8, g->P, &back, 1, "ctx");
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
	LLVMBasicBlockRef check_bb = LLVMGetInsertBlock(g->B);
	trap_if(g, LLVMBuildICmp(g->B, LLVMIntULT, spi, need, ""), KIS_WASM_TRAP_STACK_EXHAUSTED);
	LLVMValueRef check = LLVMGetBasicBlockTerminator(check_bb);
	tick(g);
	load_mem(g);
	enum known_fn known = known_routine(m, di);
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
	/* guard mode: a function that calls nothing outside compiled code
	 * checks no limit, its stack's guard region traps instead (jit.h,
	 * WASM_JIT_STACK_GUARD); the check's branch never taken, LLVM's
	 * CFG simplification removes it */
	if (g->guard && check && !calls_out(g->F, g->wasm_jit_rt_trap))
		LLVMSetCondition(check, LLVMConstInt(g->i1, 0, 0));
	return 0;
}

/* w<i>(ctx, io): the function over slots, for entry from C. */
void gen_wrap(struct gen *g, uint32_t di)
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
	args[0] = ptr_at(g, LLVMGetParam(W, 0), k64(g, WASM_JIT_CTX_ARG), g->i8); /* P (jit.h) */
	uint32_t k = 0;
	for (uint32_t i = 0; i < ft->np; i++)
		args[1 + i] = get_slots(g, io, &k, ft->t[i]);
	LLVMValueRef r = LLVMBuildCall2(g->B, g->ftys[ti], fn_decl(g, di), args, ft->np + 1, "");
	/* never the body inlined here: -O1's inliner (the optimising tier
	 * ran default<O1> then; its own pass list has no inliner now, and
	 * the attribute keeps it so should one come back) copied every small
	 * function into its wrapper, and LLVM's work per function (its
	 * passes, instruction selection, the assembly printer: ~1 ms a
	 * function here) then came twice; 50,000 functions of 15 bytes
	 * (issue 44) compile 25% faster with the wrapper a thunk, and an
	 * entry from C pays one direct call more */
	LLVMAddCallSiteAttribute(
		r, LLVMAttributeFunctionIndex,
		LLVMCreateEnumAttribute(g->C, LLVMGetEnumAttributeKindForName("noinline", 8), 0));
	k = 0;
	for (uint32_t i = 0; i < ft->nr; i++) {
		LLVMValueRef v = ft->nr == 1 ? r : LLVMBuildExtractValue(g->B, r, i, "");
		put_slots(g, io, &k, v, ft->t[ft->np + i]);
	}
	LLVMBuildRetVoid(g->B);
}

void declare_helpers(struct gen *g)
{
	LLVMTypeRef p = g->i8p, i32 = g->i32, i64 = g->i64, v = g->vd;
#define DECL(name, ret, ...)                                                             \
	do {                                                                             \
		LLVMTypeRef a_[] = {__VA_ARGS__};                                        \
		g->name##_t = LLVMFunctionType(ret, a_, sizeof(a_) / sizeof(*a_), 0);    \
		g->name = LLVMAddFunction(g->M, #name, g->name##_t);                     \
	} while (0)
	DECL(wasm_jit_rt_trap, v, p, i32);
	DECL(wasm_jit_rt_tick, v, p);
	DECL(wasm_jit_rt_tick_saved, v, p);
	LLVMSetFunctionCallConv(g->wasm_jit_rt_tick_saved, LLVMPreserveMostCallConv);
	DECL(wasm_jit_rt_call, v, p, p, g->i64p);
	DECL(wasm_jit_rt_sig_eq, i32, p, p);
	DECL(wasm_jit_rt_memory_grow, i32, p, i32);
	DECL(wasm_jit_rt_memory_init, v, p, i32, i32, i32, i32);
	DECL(wasm_jit_rt_data_drop, v, p, i32);
	DECL(wasm_jit_rt_memory_copy, v, p, i32, i32, i32);
	DECL(wasm_jit_rt_memory_fill, v, p, i32, i32, i32);
	DECL(wasm_jit_rt_memcmp, i32, p, i32, i32, i32);
	DECL(wasm_jit_rt_strcspn, i64, p, i32, i32, i32);
	DECL(wasm_jit_rt_strspn, i64, p, i32, i32, i32);
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
