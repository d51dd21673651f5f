/* SPDX-License-Identifier: MIT */
/* The compiler's recognised wasi-libc routines (jit_llvm.c): memcpy,
 * memmove, memset and memcmp bodies known by hash, given a fast path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "wasm/jit_llvm.h"


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

enum known_fn known_routine(const struct kis_wasm_module *m, uint32_t di, bool inner)
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
void gen_known(struct gen *g, enum known_fn k)
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
