/* SPDX-License-Identifier: MIT */
/* The compiler's recognised wasi-libc routines (jit_llvm.c): memcpy,
 * memmove, memset, memcmp, strlen, __strchrnul, strcspn and strspn bodies
 * known by hash, given a fast path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "wasm/jit_llvm.h"


/* call_at: the offset of a `call` (0x10) whose immediate, a 5-byte padded
 * LEB128 as wasm-ld writes a relocated function index, differs from module
 * to module: left out of the hash, and its target must itself be the
 * recognised `callee` (memmove calls memcpy for disjoint ranges, strcspn
 * __strchrnul for a set of one byte, __strchrnul strlen for c == 0). A
 * callee is always an entry with fewer calls below it, so the check ends.
 * strcspn and strspn read global 0 (`global.get` with a padded 0, inside
 * the hash) as wasm-ld's __stack_pointer. np: the i32 parameters (one i32
 * result). */
static const struct known_body {
	enum known_fn fn, callee;
	uint32_t np, len, call_at;
	uint64_t h1, h2;
} known_bodies[] = {
	{ KNOWN_MEMCPY, KNOWN_NONE, 3, 1296, 0, 0xbff5f612ef2b2479ull, 0x0a3e6c49a138f0bbull },
	{ KNOWN_MEMMOVE, KNOWN_MEMCPY, 3, 1287, 41, 0x32b469df5412ea5eull, 0x55c44b47b7ef60a0ull },
	{ KNOWN_MEMSET, KNOWN_NONE, 3, 379, 0, 0xec893cb3c59fb061ull, 0x2a42ca637395bf82ull },
	{ KNOWN_MEMCMP, KNOWN_NONE, 3, 73, 0, 0x851910bed14663a3ull, 0xd8e27c9da25ed634ull },
	{ KNOWN_STRLEN, KNOWN_NONE, 1, 177, 0, 0xd8eeee29802577a3ull, 0xa84c013706654ef3ull },
	{ KNOWN_STRCHRNUL, KNOWN_STRLEN, 2, 353, 64, 0xf6a2a6ef69fc2163ull, 0x3f97da8c8e472ce6ull },
	{ KNOWN_STRCSPN, KNOWN_STRCHRNUL, 2, 258, 56, 0x71f5259e230b89eeull, 0xa965b1d3d4a0889aull },
	{ KNOWN_STRSPN, KNOWN_NONE, 2, 261, 0, 0x6fda969c69f2fb42ull, 0xc165268c6ff75522ull },
};

static bool body_is(const struct kis_wasm_module *m, uint32_t di, const struct known_body *k);

/* Whether defined function di is the routine `want`. */
static bool is_known(const struct kis_wasm_module *m, uint32_t di, enum known_fn want)
{
	for (size_t k = 0; k < sizeof(known_bodies) / sizeof(known_bodies[0]); k++)
		if (known_bodies[k].fn == want && body_is(m, di, &known_bodies[k]))
			return true;
	return false;
}

static bool body_is(const struct kis_wasm_module *m, uint32_t di, const struct known_body *k)
{
	const struct wasm_code *code = &m->codes[di];
	const struct wasm_functype *ft = &m->types[m->func_types[m->nfunc_imports + di]];
	static const uint8_t i32s[4] = { 0x7f, 0x7f, 0x7f, 0x7f };
	uint32_t at = k->call_at;
	if (k->len != code->body_len || ft->np != k->np || ft->nr != 1 ||
	    memcmp(ft->t, i32s, k->np + 1u))
		return false;
	if ((k->fn == KNOWN_STRCSPN || k->fn == KNOWN_STRSPN) &&
	    (!m->nglobals || m->globals[0].type != 0x7f || !m->globals[0].mut))
		return false; /* global 0 is not a stack pointer */
	uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x243f6a8885a308d3ull; /* FNV-1a; a second mix */
	for (uint32_t i = 0; i < code->body_len; i++) {
		uint8_t c = at && i > at && i <= at + 5 ? 0 : code->body[i];
		h1 = (h1 ^ c) * 0x100000001b3ull;
		h2 = (h2 ^ c) * 0x9e3779b97f4a7c15ull;
		h2 ^= h2 >> 29;
	}
	if (k->h1 != h1 || k->h2 != h2)
		return false;
	if (!at)
		return true;
	const uint8_t *b = code->body + at;
	uint32_t t = 0;
	if (b[0] != 0x10)
		return false;
	for (int j = 0; j < 5; j++)
		t |= (uint32_t)(b[1 + j] & 0x7f) << (7 * j);
	return t >= m->nfunc_imports && t < m->nfuncs && is_known(m, t - m->nfunc_imports, k->callee);
}

enum known_fn known_routine(const struct kis_wasm_module *m, uint32_t di)
{
	if (!m->nmems)
		return KNOWN_NONE;
	for (size_t k = 0; k < sizeof(known_bodies) / sizeof(known_bodies[0]); k++)
		if (body_is(m, di, &known_bodies[k]))
			return known_bodies[k].fn;
	return KNOWN_NONE;
}

/* The NUL bytes (and, with cs, those equal to its bytes) of the 16 at
 * base + p, as the low bits of an i32. */
static LLVMValueRef hits16(struct gen *g, LLVMValueRef base, LLVMValueRef p, LLVMValueRef cs)
{
	LLVMTypeRef v16 = LLVMVectorType(g->i8, 16);
	LLVMValueRef v = LLVMBuildLoad2(g->B, v16, LLVMBuildGEP2(g->B, g->i8, base, &p, 1, ""), "");
	LLVMSetAlignment(v, 1);
	LLVMValueRef e = LLVMBuildICmp(g->B, LLVMIntEQ, v, LLVMConstNull(v16), "");
	if (cs)
		e = LLVMBuildOr(g->B, e, LLVMBuildICmp(g->B, LLVMIntEQ, v, cs, ""), "");
	return LLVMBuildZExt(g->B, LLVMBuildBitCast(g->B, e, g->i16, ""), g->i32, "");
}

static LLVMValueRef cttz32(struct gen *g, LLVMValueRef x)
{
	LLVMValueRef args[2] = { x, LLVMConstInt(g->i1, 1, 0) }; /* x is never 0 here */
	return intrinsic(g, "llvm.cttz", &g->i32, 1, args, 2);
}

/* strlen(s), __strchrnul(s, c): the first byte at or after s that is 0
 * (or c & 255), read 16 bytes at a time from 16-byte-aligned offsets, the
 * first block's bytes below s masked off. Memory's size is a multiple of
 * the page, so a block that starts below it ends within it: nothing past
 * the end is read, and a terminator found is one the byte or word loops
 * of the routine would reach without a trap. Not found below min(size,
 * s + FAST_MAX): the routine's own code, which traps at the end or goes
 * on (a 4 GiB memory, where its i32 address wraps). */
static void gen_scan(struct gen *g, enum known_fn k, LLVMBasicBlockRef slow)
{
	LLVMValueRef s = LLVMBuildLoad2(g->B, g->i32, g->locals[0], "");
	LLVMValueRef s64 = LLVMBuildZExt(g->B, s, g->i64, "");
	LLVMValueRef size = LLVMBuildLoad2(g->B, g->i64, g->memsize, "");
	LLVMValueRef far = LLVMBuildAdd(g->B, s64, k64(g, FAST_MAX), "");
	LLVMValueRef lim = LLVMBuildSelect(g->B, LLVMBuildICmp(g->B, LLVMIntULT, far, size, ""),
					   far, size, "");
	LLVMValueRef cs = NULL;
	if (k == KNOWN_STRCHRNUL) {
		LLVMTypeRef v16 = LLVMVectorType(g->i8, 16);
		LLVMValueRef c = LLVMBuildLoad2(g->B, g->i32, g->locals[1], "");
		LLVMValueRef one = LLVMBuildInsertElement(g->B, LLVMGetUndef(v16),
							  LLVMBuildTrunc(g->B, c, g->i8, ""), k32(g, 0), "");
		cs = LLVMBuildShuffleVector(g->B, one, LLVMGetUndef(v16),
					    LLVMConstNull(LLVMVectorType(g->i32, 16)), "");
	}
	LLVMBasicBlockRef first = LLVMAppendBasicBlockInContext(g->C, g->F, "scan");
	LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(g->C, g->F, "scan_loop");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->C, g->F, "scan_body");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->C, g->F, "scan_done");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntULT, s64, size, ""), first, slow);

	LLVMPositionBuilderAtEnd(g->B, first);
	LLVMValueRef base = LLVMBuildLoad2(g->B, g->i8p, g->membase, "");
	LLVMValueRef p0 = LLVMBuildAnd(g->B, s64, k64(g, ~15ull), "");
	LLVMValueRef sh = LLVMBuildTrunc(g->B, LLVMBuildAnd(g->B, s64, k64(g, 15), ""), g->i32, "");
	LLVMValueRef m0 = LLVMBuildLShr(g->B, hits16(g, base, p0, cs), sh, "");
	LLVMValueRef p1 = LLVMBuildAdd(g->B, p0, k64(g, 16), "");
	LLVMValueRef off0 = LLVMBuildZExt(g->B, cttz32(g, m0), g->i64, "");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntNE, m0, k32(g, 0), ""), done, loop);

	LLVMPositionBuilderAtEnd(g->B, loop);
	LLVMValueRef p = LLVMBuildPhi(g->B, g->i64, "");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntULT, p, lim, ""), body, slow);

	LLVMPositionBuilderAtEnd(g->B, body);
	LLVMValueRef m = hits16(g, base, p, cs);
	LLVMValueRef pn = LLVMBuildAdd(g->B, p, k64(g, 16), "");
	LLVMValueRef off = LLVMBuildAdd(g->B, LLVMBuildSub(g->B, p, s64, ""),
					LLVMBuildZExt(g->B, cttz32(g, m), g->i64, ""), "");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntNE, m, k32(g, 0), ""), done, loop);
	LLVMValueRef pin[2] = { p1, pn };
	LLVMBasicBlockRef pbb[2] = { first, body };
	LLVMAddIncoming(p, pin, pbb, 2);

	LLVMPositionBuilderAtEnd(g->B, done);
	LLVMValueRef r = LLVMBuildPhi(g->B, g->i64, "");
	LLVMValueRef rin[2] = { off0, off };
	LLVMAddIncoming(r, rin, pbb, 2);
	LLVMValueRef r32 = LLVMBuildTrunc(g->B, r, g->i32, "");
	/* strlen: the length; __strchrnul: the byte's address */
	LLVMBuildRet(g->B, k == KNOWN_STRLEN ? r32 : LLVMBuildAdd(g->B, s, r32, ""));
}

/* strcspn(s, set), strspn(s, set): the runtime's, given global 0. */
static void gen_span(struct gen *g, enum known_fn k, LLVMBasicBlockRef slow)
{
	LLVMValueRef s = LLVMBuildLoad2(g->B, g->i32, g->locals[0], "");
	LLVMValueRef set = LLVMBuildLoad2(g->B, g->i32, g->locals[1], "");
	LLVMValueRef sp = LLVMBuildTrunc(g->B, LLVMBuildLoad2(g->B, g->i64, global_ptr(g, 0), ""),
					 g->i32, "");
	LLVMValueRef r = k == KNOWN_STRCSPN ? HCALL(g, wasm_jit_rt_strcspn, s, set, sp)
					    : HCALL(g, wasm_jit_rt_strspn, s, set, sp);
	LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(g->C, g->F, "known");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntSGE, r, k64(g, 0), ""), fast, slow);
	LLVMPositionBuilderAtEnd(g->B, fast);
	LLVMBuildRet(g->B, LLVMBuildTrunc(g->B, r, g->i32, ""));
}

/* The fast path at the top of a recognised routine (after the prologue's
 * checks): its own code follows, for the calls the fast path leaves. */
void gen_known(struct gen *g, enum known_fn k)
{
	if (k >= KNOWN_STRLEN) {
		LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->C, g->F, "own");
		if (k == KNOWN_STRLEN || k == KNOWN_STRCHRNUL)
			gen_scan(g, k, slow);
		else
			gen_span(g, k, slow);
		LLVMPositionBuilderAtEnd(g->B, slow);
		return;
	}
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
	case KNOWN_STRLEN:
	case KNOWN_STRCHRNUL:
	case KNOWN_STRCSPN:
	case KNOWN_STRSPN:
	default:
		break;
	}
	LLVMPositionBuilderAtEnd(g->B, slow);
}
