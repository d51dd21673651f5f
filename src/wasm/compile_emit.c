/* SPDX-License-Identifier: MIT */
/* Emission of the internal code for compile.c: instruction words, jump
 * labels, and the peephole that fuses common sequences into one handler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>

#include "wasm/compile.h"

/* The error of the pass, the first only (compile.c and this file). */
int cc_fail(struct cc *c, const char *fmt, ...)
{
	if (!c->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
		c->failed = true;
	}
	return -1;
}

/* ---- code emission; nothing is emitted in unreachable code ---- */

bool cc_dead(const struct cc *c)
{
	const struct ctl *f = &c->ctl[c->nctl - 1];
	return f->unreachable || f->dead_entry;
}

int cc_emit(struct cc *c, uint32_t w)
{
	if (c->ncode == c->capcode) {
		uint32_t ncap = c->capcode ? c->capcode * 2 : 64;
		uint32_t *n = realloc(c->code, (size_t)ncap * sizeof(*n));
		if (!n)
			return cc_fail(c, "out of memory");
		c->code = n;
		c->capcode = ncap;
	}
	c->code[c->ncode++] = w;
	return 0;
}

/* Remember an instruction for fusion; forget everything at a label, since
 * no fused instruction may swallow a branch target. */
void cc_note(struct cc *c, uint32_t pc, uint32_t op, uint32_t a, uint32_t b)
{
	memmove(&c->last[1], &c->last[0], sizeof(c->last) - sizeof(c->last[0]));
	c->last[0] = (struct emitted){ .pc = pc, .len = c->ncode - pc, .op = op, .a = a, .b = b };
	if (c->nlast < sizeof(c->last) / sizeof(c->last[0]))
		c->nlast++;
}

/* The code from word `at` on is being rewritten by a fusion: forget the
 * instructions it held, keep the older ones (so a fused instruction can
 * fuse again with what came before it). */
void cc_forget_from(struct cc *c, uint32_t at)
{
	uint32_t n = 0;
	while (n < c->nlast && c->last[n].pc >= at)
		n++;
	memmove(&c->last[0], &c->last[n], (c->nlast - n) * sizeof(c->last[0]));
	c->nlast -= n;
}

void cc_label_here(struct cc *c)
{
	c->nlast = 0;
	c->prologue = false;
}


int cc_emit_op(struct cc *c, uint32_t op)
{
	if (cc_dead(c))
		return 0;
	uint32_t at = c->ncode;
	TRY(cc_emit(c, op));
	cc_note(c, at, op, 0, 0);
	return 0;
}

int cc_emit_op1(struct cc *c, uint32_t op, uint32_t a)
{
	if (cc_dead(c))
		return 0;
	uint32_t at = c->ncode;
	if (cc_emit(c, op) < 0 || cc_emit(c, a) < 0)
		return -1;
	cc_note(c, at, op, a, 0);
	return 0;
}

int cc_emit_op2(struct cc *c, uint32_t op, uint32_t a, uint32_t b)
{
	if (cc_dead(c))
		return 0;
	uint32_t at = c->ncode;
	if (cc_emit(c, op) < 0 || cc_emit(c, a) < 0 || cc_emit(c, b) < 0)
		return -1;
	cc_note(c, at, op, a, b);
	return 0;
}

static int fusable_index(uint8_t op)
{
#define FUSABLE_CASE(k, opcode, bits, expr) \
	case opcode:                        \
		return k;
	switch (op) {
		WASM_FUSABLE_BINOPS(FUSABLE_CASE)
	default:
		return -1;
	}
#undef FUSABLE_CASE
}

/* The latest emitted instruction, if it ends where the code ends now (so
 * nothing was emitted since, unrecorded) and no label came in between. */
const struct emitted *cc_prev(const struct cc *c, unsigned i)
{
	if (i >= c->nlast)
		return NULL;
	const struct emitted *e = &c->last[i];
	uint32_t end = i == 0 ? c->ncode : c->last[i - 1].pc;
	return e->pc + e->len == end ? e : NULL;
}

/* 't.const 0; local.set x' for a declared local x not yet written on the
 * way from the function's entry: x already holds zero, so the pair is
 * dropped (clang emits it for the initial value of a loop's variables). */
bool cc_drop_zero_set(struct cc *c, uint32_t x)
{
	const struct emitted *q = cc_prev(c, 0);
	if (!c->prologue || x < c->nparams || x >= 64 || (c->written >> x & 1) || !q)
		return false;
	bool zero = false;
	switch (q->op) {
	case OP_I32_CONST:
	case OP_F32_CONST:
		zero = q->a == 0; /* +0.0 only: -0.0 has the sign bit */
		break;
	case OP_I64_CONST:
	case OP_F64_CONST:
		zero = q->a == 0 && q->b == 0;
		break;
	default:
		break;
	}
	if (!zero)
		return false;
	c->ncode = q->pc;
	cc_forget_from(c, q->pc);
	return true;
}

/* An operand that fits the one-word immediate of a fused form. */
static bool const_operand(const struct emitted *e, int bits, uint32_t *imm)
{
	if (bits == 32 && e->op == OP_I32_CONST) {
		*imm = e->a;
		return true;
	}
	if (bits == 64 && e->op == OP_I64_CONST) {
		int64_t v = (int64_t)((uint64_t)e->a | ((uint64_t)e->b << 32));
		if (v < INT32_MIN || v > INT32_MAX)
			return false;
		*imm = e->a;
		return true;
	}
	return false;
}

static int float_index(uint8_t op)
{
#define FLOAT_CASE(k, opcode, type, expr) \
	case opcode:                      \
		return k;
	switch (op) {
		WASM_FUSABLE_FLOATS(FLOAT_CASE)
	default:
		return -1;
	}
#undef FLOAT_CASE
}

/* Whether e is the load `load` (0x28..0x35) through a local, form L or LI;
 * if so and addr is not NULL, its address as (local, constant, offset). */
static bool load_through_local(const struct cc *c, const struct emitted *e, uint32_t load,
			       uint32_t addr[3])
{
	bool l = e->op == OP_LOAD_L + (load - 0x28), li = e->op == OP_LOAD_LI + (load - 0x28);
	if (addr && l) {
		addr[0] = c->code[e->pc + 1];
		addr[1] = 0;
		addr[2] = c->code[e->pc + 2];
	} else if (addr && li) {
		memcpy(addr, &c->code[e->pc + 1], 3 * sizeof(*addr));
	}
	return l || li;
}

/* Float add/sub/mul with operands from local.get: forms L and LL. */
static int emit_float_binop(struct cc *c, uint8_t op, int k)
{
	const struct emitted *p0 = cc_prev(c, 0), *p1 = p0 ? cc_prev(c, 1) : NULL;
	uint32_t at, opc;
	/* the right operand just loaded through a local (matmul's a[i][k] *
	 * b[k][j]): the load of the operator's own type, form L or LI */
	uint32_t load = k < 3 ? 0x2a : 0x2b; /* f32.load, f64.load */
	if (p0 && p1 && load_through_local(c, p0, load, NULL) && load_through_local(c, p1, load, NULL)) {
		/* both operands loaded: one instruction, each address as
		 * local + constant + offset (form L is constant 0) */
		uint32_t a1[3], a2[3];
		load_through_local(c, p1, load, a1);
		load_through_local(c, p0, load, a2);
		at = p1->pc;
		opc = OP_FLOAD2 + (uint32_t)k;
		c->ncode = at;
		TRY(cc_emit(c, opc));
		for (int i = 0; i < 3; i++)
			TRY(cc_emit(c, a1[i]));
		for (int i = 0; i < 3; i++)
			TRY(cc_emit(c, a2[i]));
		cc_forget_from(c, at);
		cc_note(c, at, opc, 0, 0);
		return 0;
	}
	if (p0 && (p0->op == OP_LOAD_L + (load - 0x28) || p0->op == OP_LOAD_LI + (load - 0x28))) {
		bool li = p0->op == OP_LOAD_LI + (load - 0x28);
		at = p0->pc;
		uint32_t x = c->code[at + 1], imm = c->code[at + 2], off = li ? c->code[at + 3] : 0;
		opc = (li ? OP_FLOAD_LI : OP_FLOAD_L) + (uint32_t)k;
		c->ncode = at;
		TRY(cc_emit(c, opc));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, imm)); /* the offset, for form L */
		if (li)
			TRY(cc_emit(c, off));
		cc_forget_from(c, at);
		cc_note(c, at, opc, 0, 0);
		return 0;
	}
	/* f64.add on the stack after 'local.get x; f64.add' or such a run:
	 * one instruction for the whole run (OP_FSUM64) */
	if (k == 3 && p0 && (p0->op == OP_FLOAT_L + 3 || p0->op == OP_FSUM64)) {
		at = p0->pc;
		if (p0->op == OP_FSUM64) {
			c->code[at + 2]++; /* n is bounded by the operand height */
			return 0;
		}
		uint32_t x = c->code[at + 1];
		c->ncode = at;
		TRY(cc_emit(c, OP_FSUM64));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, 1));
		cc_forget_from(c, at);
		cc_note(c, at, OP_FSUM64, 0, 0);
		return 0;
	}
	if (!p0 || p0->op != OP_LOCAL_GET)
		return cc_emit_op(c, op);
	if (p1 && p1->op == OP_LOCAL_GET) {
		at = p1->pc;
		opc = OP_FLOAT_LL + (uint32_t)k;
		uint32_t x = p1->a, y = p0->a;
		c->ncode = at;
		TRY(cc_emit(c, opc));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, y));
	} else {
		at = p0->pc;
		opc = OP_FLOAT_L + (uint32_t)k;
		uint32_t x = p0->a;
		c->ncode = at;
		TRY(cc_emit(c, opc));
		TRY(cc_emit(c, x));
	}
	cc_forget_from(c, at);
	cc_note(c, at, opc, 0, 0);
	return 0;
}

/* The operator that computes the same with its operands swapped: itself
 * when commutative, the mirrored compare (a < b is b > a); -1 otherwise. */
static int swapped_index(int k)
{
	static const int8_t cmp[10] = { 0, 1, 4, 5, 2, 3, 8, 9, 6, 7 };
	if (k < 10)
		return cmp[k];
	if (k >= 21 && k < 31)
		return 21 + cmp[k - 21];
	switch (k) {
	case 10: case 12: case 13: case 14: case 15: /* i32 add mul and or xor */
	case 31: case 33: case 34: case 35: case 36: /* i64 */
		return k;
	default:
		return -1;
	}
}

/* An instruction that pushes one value and does nothing else that matters
 * for reordering: it reads no operand, writes no local, branches nowhere
 * and holds no word that is patched later. (It may trap; a trap ends the
 * run, so what runs after it is not observable.) */
static bool pure_push(uint32_t op)
{
	if (op == OP_GLOBAL_GET)
		return true;
	if (op >= OP_FUSED + 64 * FUSE_LL && op < OP_FUSED + 64 * (FUSE_LI + 1))
		return true; /* the LL and LI forms of every fusable operator */
	return (op >= OP_LOAD_L && op < OP_LOAD_L + 14) ||
	       (op >= OP_LOAD_LI && op < OP_LOAD_LI + 14);
}

/* 'local.get x | t.const c ; P ; op', where P is a pure push (or a local.get
 * after a constant): the left operand is pushed early only because wasm
 * is a stack machine. Reading local x (or c) after P gives the same value,
 * since P writes no local, so P moves first and op becomes a fused form
 * with that operand as its right one: the operator swapped (commutative or
 * mirrored compare), or a reverse subtraction. Returns 1 when it fused. */
static int fuse_left_operand(struct cc *c, int k, int bits)
{
	const struct emitted *p0 = cc_prev(c, 0), *p1 = p0 ? cc_prev(c, 1) : NULL;
	if (!p1)
		return 0;
	uint32_t imm = 0;
	bool is_const = const_operand(p1, bits, &imm);
	if (!is_const && p1->op != OP_LOCAL_GET)
		return 0;
	bool sub = k == 11 || k == 32;
	int sk = swapped_index(k);
	if (sk < 0 && !sub)
		return 0;
	uint32_t at = p1->pc, opnd = is_const ? imm : p1->a;
	if (is_const && p0->op == OP_LOCAL_GET && !sub) {
		/* 'c; local.get y; op' -> push local[y] op' c */
		uint32_t y = p0->a, opc = OP_FUSED + 64 * FUSE_LI + (uint32_t)sk;
		c->ncode = at;
		cc_forget_from(c, at);
		TRY(cc_emit(c, opc));
		TRY(cc_emit(c, y));
		TRY(cc_emit(c, opnd));
		cc_note(c, at, opc, 0, 0);
		return 1;
	}
	if (!pure_push(p0->op))
		return 0;
	uint32_t len = p0->len, p0op = p0->op;
	memmove(c->code + at, c->code + p0->pc, (size_t)len * sizeof(*c->code));
	c->ncode = at + len;
	cc_forget_from(c, at);
	cc_note(c, at, p0op, 0, 0);
	uint32_t opc, from = c->ncode;
	if (sub)
		opc = (bits == 32 ? OP_RSUB_L32 : OP_RSUB_L64) + (is_const ? 1u : 0u);
	else
		opc = OP_FUSED + 64 * (is_const ? FUSE_I : FUSE_L) + (uint32_t)sk;
	TRY(cc_emit(c, opc));
	TRY(cc_emit(c, opnd));
	cc_note(c, from, opc, 0, 0);
	return 1;
}

/* 'LI k1; op' where op (k2) takes the stack top as its left operand and
 * the LI form's result as its right one: OP_CHAIN for the pairs listed in
 * WASM_FUSABLE_CHAINS. Returns 1 when it fused. */
static int fuse_chain(struct cc *c, int k2)
{
	const struct emitted *p0 = cc_prev(c, 0);
	if (!p0 || p0->op < OP_FUSED + 64 * FUSE_LI || p0->op >= OP_FUSED + 64 * (FUSE_LI + 1))
		return 0;
	int k1 = (int)(p0->op - (OP_FUSED + 64 * FUSE_LI));
	int idx = -1;
#define CHAIN_CASE(i, a1, a2, e1, e2) \
	if (k1 == (a1) && k2 == (a2)) \
		idx = (i);
	WASM_FUSABLE_CHAINS(CHAIN_CASE)
#undef CHAIN_CASE
	if (idx < 0)
		return 0;
	uint32_t at = p0->pc;
	c->code[at] = OP_CHAIN + (uint32_t)idx; /* same immediates: x, imm */
	cc_forget_from(c, at);
	cc_note(c, at, OP_CHAIN + (uint32_t)idx, 0, 0);
	return 1;
}

/* The i32 operator k2 just emitted (forms S, L or I) after an I form that
 * computed its stack operand: one OP_ICHAIN_* for the pairs listed in
 * WASM_I_CHAINS. */
static int fuse_ichain(struct cc *c, uint8_t op, int k2)
{
	const struct emitted *p0 = cc_prev(c, 0), *p1 = p0 ? cc_prev(c, 1) : NULL;
	if (!p1)
		return 0;
	/* an LI form first (it pushed its result): forms L and I only */
	if (p1->op >= OP_FUSED + 64 * FUSE_LI && p1->op < OP_FUSED + 64 * (FUSE_LI + 1) &&
	    p0->op != op) {
		uint32_t first = p1->op - 64 * (FUSE_LI - FUSE_I), lbase;
		if (p0->op == OP_FUSED + 64 * FUSE_L + (uint32_t)k2)
			lbase = OP_LICHAIN_L;
		else if (p0->op == OP_FUSED + 64 * FUSE_I + (uint32_t)k2)
			lbase = OP_LICHAIN_I;
		else
			return 0;
		int li = -1;
#define LICHAIN_CASE(i, f, b2, e1, e2) \
	if (first == (uint32_t)(f) && k2 == (b2)) \
		li = (i);
		WASM_I_CHAINS(LICHAIN_CASE)
#undef LICHAIN_CASE
		if (li < 0)
			return 0;
		uint32_t at = p1->pc, x = c->code[at + 1], imm1 = c->code[at + 2];
		uint32_t opnd = c->code[p0->pc + 1], opc = lbase + (uint32_t)li;
		c->ncode = at;
		cc_forget_from(c, at);
		TRY(cc_emit(c, opc));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, imm1));
		TRY(cc_emit(c, opnd));
		cc_note(c, at, opc, 0, 0);
		return 0;
	}
	if (p1->len != 2)
		return 0;
	uint32_t base;
	if (p0->op == op)
		base = OP_ICHAIN_S;
	else if (p0->op == OP_FUSED + 64 * FUSE_L + (uint32_t)k2)
		base = OP_ICHAIN_L;
	else if (p0->op == OP_FUSED + 64 * FUSE_I + (uint32_t)k2)
		base = OP_ICHAIN_I;
	else
		return 0;
	int idx = -1;
#define ICHAIN_CASE(i, first, b2, e1, e2) \
	if (p1->op == (uint32_t)(first) && k2 == (b2)) \
		idx = (i);
	WASM_I_CHAINS(ICHAIN_CASE)
#undef ICHAIN_CASE
	if (idx < 0)
		return 0;
	uint32_t at = p1->pc, imm1 = c->code[at + 1];
	uint32_t opnd = base == OP_ICHAIN_S ? 0 : c->code[p0->pc + 1];
	uint32_t opc = base + (uint32_t)idx;
	c->ncode = at;
	cc_forget_from(c, at);
	TRY(cc_emit(c, opc));
	TRY(cc_emit(c, imm1));
	if (base != OP_ICHAIN_S)
		TRY(cc_emit(c, opnd));
	cc_note(c, at, opc, 0, 0);
	return 0;
}

static int emit_binop_forms(struct cc *c, uint8_t op);

/* Emit a binary operator, fused with what came before it where possible
 * (emit_binop_forms), then with an I form that computed its left operand. */
int cc_emit_binop(struct cc *c, uint8_t op)
{
	TRY(emit_binop_forms(c, op));
	int k = fusable_index(op);
	if (k >= 0 && k < 21 && !cc_dead(c))
		return fuse_ichain(c, op, k);
	return 0;
}

/* Emit a binary operator, fused with the local.get / const instructions
 * just before it into one register-style instruction where possible: a
 * stack interpreter spends most of its time on those pushes. */
static int emit_binop_forms(struct cc *c, uint8_t op)
{
	int k = fusable_index(op);
	if (k < 0 && !cc_dead(c) && float_index(op) >= 0)
		return emit_float_binop(c, op, float_index(op));
	if (k < 0 || cc_dead(c))
		return cc_emit_op(c, op);
	int bits = k < 21 ? 32 : 64;
	const struct emitted *p0 = cc_prev(c, 0), *p1 = p0 ? cc_prev(c, 1) : NULL;
	uint32_t imm, x, form, at;
	if (!p0)
		return cc_emit_op(c, op);
	int r = fuse_left_operand(c, k, bits);
	if (r != 0)
		return r < 0 ? -1 : 0;
	if (fuse_chain(c, k))
		return 0;
	if (p0->op == OP_LOCAL_GET) {
		if (p1 && p1->op == OP_LOCAL_GET) {
			x = p1->a;
			at = p1->pc;
			c->ncode = at;
			TRY(cc_emit(c, OP_FUSED + 64 * FUSE_LL + (uint32_t)k));
			TRY(cc_emit(c, x));
			TRY(cc_emit(c, p0->a));
			form = FUSE_LL;
		} else {
			x = p0->a;
			at = p0->pc;
			c->ncode = at;
			TRY(cc_emit(c, OP_FUSED + 64 * FUSE_L + (uint32_t)k));
			TRY(cc_emit(c, x));
			form = FUSE_L;
		}
	} else if (const_operand(p0, bits, &imm)) {
		if (p1 && p1->op == OP_LOCAL_GET) {
			x = p1->a;
			at = p1->pc;
			c->ncode = at;
			TRY(cc_emit(c, OP_FUSED + 64 * FUSE_LI + (uint32_t)k));
			TRY(cc_emit(c, x));
			TRY(cc_emit(c, imm));
			form = FUSE_LI;
		} else {
			at = p0->pc;
			c->ncode = at;
			TRY(cc_emit(c, OP_FUSED + 64 * FUSE_I + (uint32_t)k));
			TRY(cc_emit(c, imm));
			form = FUSE_I;
		}
	} else {
		return cc_emit_op(c, op);
	}
	cc_forget_from(c, at);
	cc_note(c, at, OP_FUSED + 64 * form + (uint32_t)k, 0, 0);
	return 0;
}

/* If the latest instruction is a fusable operator (plain or fused), its
 * operator index and operand shape. */
static const struct emitted *binop_shape(const struct cc *c, int *k, int *shape)
{
	const struct emitted *p0 = cc_prev(c, 0);
	if (!p0)
		return NULL;
	if (p0->op < 0x100) {
		*k = fusable_index((uint8_t)p0->op);
		*shape = SHAPE_S;
		return *k >= 0 ? p0 : NULL;
	}
	if (p0->op >= OP_FUSED && p0->op < OP_FUSED + 64 * FUSE_SET) {
		*k = (int)((p0->op - OP_FUSED) % 64);
		*shape = SHAPE_L + (int)((p0->op - OP_FUSED) / 64);
		return p0;
	}
	return NULL;
}

static bool is_compare(int k)
{
#define COMPARE_CASE(idx, opcode, bits, expr) \
	case idx:                             \
		return true;
	switch (k) {
		WASM_FUSABLE_COMPARES(COMPARE_CASE)
	default:
		return false;
	}
#undef COMPARE_CASE
}

/* 'local.get x; local.set z' at word `at`: a copy, merged with the copies
 * just before it into one OP_COPY_N (a hash rotating its working variables
 * does several in a row). */
static int emit_copy(struct cc *c, uint32_t at, uint32_t x, uint32_t z)
{
	cc_forget_from(c, at);
	const struct emitted *r = cc_prev(c, 0);
	if (r && r->op == OP_COPY) {
		uint32_t rat = r->pc, x1 = c->code[rat + 1], z1 = c->code[rat + 2];
		c->ncode = rat;
		TRY(cc_emit(c, OP_COPY_N));
		TRY(cc_emit(c, 2));
		TRY(cc_emit(c, x1));
		TRY(cc_emit(c, z1));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, z));
		cc_forget_from(c, rat);
		cc_note(c, rat, OP_COPY_N, 0, 0);
		return 0;
	}
	if (r && r->op == OP_COPY_N) {
		uint32_t rat = r->pc;
		c->code[rat + 1]++;
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, z));
		cc_forget_from(c, rat);
		cc_note(c, rat, OP_COPY_N, 0, 0);
		return 0;
	}
	TRY(cc_emit(c, OP_COPY));
	TRY(cc_emit(c, x));
	TRY(cc_emit(c, z));
	cc_note(c, at, OP_COPY, x, z);
	return 0;
}

/* 'op; local.set z' (or local.tee) -> one instruction writing the local. */
int cc_fuse_local_set(struct cc *c, uint32_t op, uint32_t z)
{
	const struct emitted *q = cc_dead(c) || op != OP_LOCAL_SET ? NULL : cc_prev(c, 0);
	if (q && (q->op == OP_I32_CONST || q->op == OP_F32_CONST || q->op == OP_I64_CONST ||
		  q->op == OP_F64_CONST || q->op == OP_LOCAL_GET)) {
		uint32_t at = q->pc, a = q->a, b = q->b, qop = q->op;
		c->ncode = at;
		cc_forget_from(c, at);
		if (qop == OP_LOCAL_GET)
			return emit_copy(c, at, a, z);
		bool wide = qop == OP_I64_CONST || qop == OP_F64_CONST;
		TRY(cc_emit(c, wide ? OP_SET_K64 : OP_SET_K32));
		TRY(cc_emit(c, z));
		TRY(cc_emit(c, a));
		return wide ? cc_emit(c, b) : 0;
	}
	/* a float add/sub/mul, plain or with a local operand, into a local
	 * (an accumulator: 's = s + x') */
	const struct emitted *f = cc_dead(c) || op != OP_LOCAL_SET ? NULL : cc_prev(c, 0);
	if (f && ((f->op < 0x100 && float_index((uint8_t)f->op) >= 0) ||
		  (f->op >= OP_FLOAT_L && f->op < OP_FLOAT_L + 6))) {
		uint32_t at = f->pc;
		c->code[at] = f->op < 0x100 ? OP_FSET_S + (uint32_t)float_index((uint8_t)f->op)
					    : OP_FSET_L + (f->op - OP_FLOAT_L);
		TRY(cc_emit(c, z));
		cc_forget_from(c, at);
		cc_note(c, at, c->code[at], 0, 0);
		return 0;
	}
	if (f && f->op == OP_FSUM64) {
		uint32_t at = f->pc;
		c->code[at] = OP_FSUM64_SET;
		TRY(cc_emit(c, z));
		cc_forget_from(c, at);
		cc_note(c, at, OP_FSUM64_SET, 0, 0);
		return 0;
	}
	int k, shape;
	const struct emitted *p0 = cc_dead(c) ? NULL : binop_shape(c, &k, &shape);
	if (!p0 || is_compare(k))
		return cc_emit_op1(c, op, z);
	uint32_t at = p0->pc;
	uint32_t form = (op == OP_LOCAL_SET ? FUSE_SET : FUSE_TEE) + (uint32_t)shape;
	c->code[at] = OP_FUSED + 64 * form + (uint32_t)k;
	TRY(cc_emit(c, z));
	cc_forget_from(c, at);
	cc_note(c, at, c->code[at], 0, 0);
	return 0;
}

/* A conditional jump on the value just computed: when it comes from a
 * fusable operator (or i32.eqz), rewrite that operator into a compare-and-
 * branch. `on_zero` selects 'jump when zero' (if) over 'when non-zero'
 * (br_if). The caller emits the target word next. */
int cc_emit_cond_jump(struct cc *c, bool on_zero)
{
	int k, shape;
	const struct emitted *p0 = binop_shape(c, &k, &shape);
	const struct emitted *p1 = p0 ? cc_prev(c, 1) : NULL;
	if (p0 && p1 && !on_zero && k < 10 && (shape == SHAPE_I || shape == SHAPE_L) &&
	    p1->op == OP_FUSED + 64 * (FUSE_TEE + SHAPE_LI) + 10 /* i32.add */) {
		/* a loop's step and test: [tee-li-add x c z][cmp d] becomes
		 * [step-br x c z d], the target word follows (OP_STEP_BR_I) */
		uint32_t at = p1->pc, d = c->code[p0->pc + 1];
		c->code[at] = (shape == SHAPE_I ? OP_STEP_BR_I : OP_STEP_BR_L) + (uint32_t)k;
		c->code[at + 4] = d;
		c->ncode = at + 5;
		c->nlast = 0;
		return 0;
	}
	if (p0 && is_compare(k)) {
		c->code[p0->pc] = OP_FUSED + 64 * (uint32_t)((on_zero ? FUSE_BRZ : FUSE_BR) + shape) + (uint32_t)k;
		c->nlast = 0;
		return 0;
	}
	p0 = cc_prev(c, 0);
	if (p0 && p0->op == 0x45) { /* i32.eqz: invert the jump instead */
		c->ncode = p0->pc;
		c->nlast = 0;
		return cc_emit(c, on_zero ? OP_BR_IF_SIMPLE : OP_JMP_IF_NOT);
	}
	c->nlast = 0;
	return cc_emit(c, on_zero ? OP_JMP_IF_NOT : OP_BR_IF_SIMPLE);
}
