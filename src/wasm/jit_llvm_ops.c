/* SPDX-License-Identifier: MIT */
/* The compiler's instructions without control flow (jit_llvm.c): numeric,
 * loads and stores, the 0xfc prefix, SIMD, tables and globals (spec 4.4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "wasm/jit_llvm.h"

/* ---- numeric instructions (spec 4.3) ---- */

LLVMValueRef bool32(struct gen *g, LLVMValueRef c)
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

int numeric(struct gen *g, uint8_t op)
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

int load_store(struct gen *g, uint8_t op)
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

LLVMValueRef call_helper(struct gen *g, LLVMValueRef fn, LLVMTypeRef fty, LLVMValueRef *args,
				unsigned n)
{
	LLVMValueRef a[8];
	a[0] = g->ctx;
	memcpy(a + 1, args, n * sizeof(*args));
	return LLVMBuildCall2(g->B, fty, fn, a, n + 1, "");
}


int op_fc(struct gen *g)
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
int op_simd(struct gen *g)
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
int table_access(struct gen *g, uint8_t op)
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

LLVMValueRef global_ptr(struct gen *g, uint32_t x)
{
	LLVMValueRef globals = ldi(g, g->ctx, CTX(globals), g->i8p);
	LLVMValueRef gp = ldi(g, globals, (uint64_t)x * sizeof(void *), g->i8p);
	return ptr_at(g, gp, k64(g, offsetof(struct kis_wasm_global, val)), g->i64);
}
