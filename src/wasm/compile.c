/* SPDX-License-Identifier: MIT */
/* Function bodies: validation (spec 3.3, with the algorithm of the spec's
 * appendix "Validation Algorithm") and translation to the internal code in one pass;
 * the code words and their fusion are compile_emit.c's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasm/compile.h"

/* ---- immediates ---- */

static int rd_u32(struct cc *c, uint32_t *v)
{
	if (wasm_read_u32(&c->p, c->end, v) < 0)
		return cc_fail(c, c->p >= c->end ? "malformed: unexpected end" : "malformed: integer representation too long");
	return 0;
}

static int rd_byte(struct cc *c, uint8_t *b)
{
	*b = 0;
	if (c->p >= c->end)
		return cc_fail(c, "malformed: unexpected end");
	*b = *c->p++;
	return 0;
}

static int rd_zero(struct cc *c)
{
	uint8_t b = 0;
	if (rd_byte(c, &b) < 0)
		return -1;
	if (b != 0)
		return cc_fail(c, "malformed: zero byte expected");
	return 0;
}

/* ---- the operand and control stacks (spec appendix) ---- */

static uint32_t width(uint8_t t)
{
	return t == KIS_WASM_V128 ? 2 : 1;
}

static int push(struct cc *c, uint8_t t)
{
	if (c->nvals >= KIS_WASM_MAX_OPERANDS)
		return cc_fail(c, "invalid: operand stack too deep");
	c->vals[c->nvals++] = t;
	c->nslots += width(t);
	if (c->nslots > c->maxslots)
		c->maxslots = c->nslots;
	return 0;
}

/* Pop one operand, which must be `want` unless want is ANY; returns its
 * type or -1. */
static int pop(struct cc *c, uint8_t want)
{
	struct ctl *f = &c->ctl[c->nctl - 1];
	if (c->nvals == f->height) {
		if (f->unreachable)
			return want;
		return cc_fail(c, "invalid: type mismatch (operand stack underflow)");
	}
	uint8_t t = c->vals[--c->nvals];
	c->nslots -= width(t);
	if (want != ANY && t != ANY && t != want)
		return cc_fail(c, "invalid: type mismatch (expected 0x%02x, got 0x%02x)", want, t);
	return t == ANY ? want : t;
}

static int pop_n(struct cc *c, const uint8_t *t, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;)
		if (pop(c, t[i]) < 0)
			return -1;
	return 0;
}

static int push_n(struct cc *c, const uint8_t *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (push(c, t[i]) < 0)
			return -1;
	return 0;
}

static void set_unreachable(struct cc *c)
{
	struct ctl *f = &c->ctl[c->nctl - 1];
	c->nvals = f->height;
	c->nslots = f->hslots;
	f->unreachable = true;
}

static bool is_num(uint8_t t)
{
	return t == KIS_WASM_I32 || t == KIS_WASM_I64 || t == KIS_WASM_F32 || t == KIS_WASM_F64;
}

static bool is_ref(uint8_t t)
{
	return t == KIS_WASM_FUNCREF || t == KIS_WASM_EXTERNREF;
}

/* value types (spec 2.3.4): numbers, the vector type and references */
static bool is_val(uint8_t t)
{
	return is_num(t) || t == KIS_WASM_V128 || is_ref(t);
}

/* blocktype (spec 5.4.1): empty, one value type, or a type index (s33). */
static int blocktype(struct cc *c, struct ctl *f)
{
	f->np = f->nr = 0;
	f->params = f->results = NULL;
	if (c->p >= c->end)
		return cc_fail(c, "malformed: unexpected end");
	uint8_t b = *c->p;
	if (b == 0x40) {
		c->p++;
		return 0;
	}
	if (is_val(b)) {
		c->p++;
		f->single = b;
		f->results = &f->single;
		f->nr = 1;
		return 0;
	}
	int64_t idx;
	if (wasm_read_s33(&c->p, c->end, &idx) < 0)
		return cc_fail(c, "malformed: integer representation too long");
	if (idx < 0)
		return cc_fail(c, "malformed: malformed value type");
	if ((uint64_t)idx >= c->m->ntypes)
		return cc_fail(c, "invalid: unknown type %lld", (long long)idx);
	const struct wasm_functype *ft = &c->m->types[idx];
	f->params = ft->t;
	f->np = ft->np;
	f->results = ft->t + ft->np;
	f->nr = ft->nr;
	return 0;
}

static int push_ctl(struct cc *c, struct ctl *f)
{
	if (c->nctl >= KIS_WASM_MAX_NESTING)
		return cc_fail(c, "invalid: blocks nested too deeply");
	f->height = c->nvals;
	f->hslots = c->nslots;
	f->unreachable = false;
	f->dead_entry = false;
	f->fixups = NONE;
	f->else_fix = NONE;
	c->ctl[c->nctl] = *f;
	/* a one-value type points into the frame: re-point at its new home */
	struct ctl *n = &c->ctl[c->nctl++];
	if (f->results == &f->single)
		n->results = &n->single;
	return push_n(c, n->params, n->np);
}

static void patch_chain(struct cc *c, uint32_t head, uint32_t target)
{
	while (head != NONE) {
		uint32_t next = c->code[head];
		c->code[head] = target;
		head = next;
	}
}

/* Emit the target word of a branch to frame f: known for a loop, else
 * chained into f's fixups. */
static int emit_target(struct cc *c, struct ctl *f)
{
	if (f->kind == 0x03)
		return cc_emit(c, f->start_pc);
	uint32_t at = c->ncode;
	if (cc_emit(c, f->fixups) < 0)
		return -1;
	f->fixups = at;
	return 0;
}

/* The target word of a simple jump (no unwinding) to frame f: for a loop,
 * its first instruction after the check, flagged so that the jump runs the
 * check (WASM_LOOP_EDGE in internal.h). */
static int emit_jump_target(struct cc *c, struct ctl *f)
{
	if (f->kind == 0x03)
		return cc_emit(c, (f->start_pc + 1) | WASM_LOOP_EDGE);
	return emit_target(c, f);
}

static struct ctl *label(struct cc *c, uint32_t depth)
{
	if (depth >= c->nctl) {
		cc_fail(c, "invalid: unknown label %u", depth);
		return NULL;
	}
	return &c->ctl[c->nctl - 1 - depth];
}

static void label_types(const struct ctl *f, const uint8_t **t, uint32_t *n)
{
	if (f->kind == 0x03) {
		*t = f->params;
		*n = f->np;
	} else {
		*t = f->results;
		*n = f->nr;
	}
}

/* br / br_if: `cond` says which. The label's values are on top. */
static int branch(struct cc *c, uint32_t depth, bool cond)
{
	struct ctl *f = label(c, depth);
	if (!f)
		return -1;
	const uint8_t *t;
	uint32_t n;
	label_types(f, &t, &n);
	/* heights and arity in stack slots */
	uint32_t cur = c->nlslots + c->nslots;
	uint32_t dst = c->nlslots + f->hslots;
	uint32_t ns = wasm_slots(t, n);
	if (pop_n(c, t, n) < 0)
		return -1;
	if (!cc_dead(c)) {
		bool simple = cur - ns == dst;
		if (!cond && f == &c->ctl[0]) {
			TRY(cc_emit(c, OP_RETURN));
			TRY(cc_emit(c, ns));
		} else if (simple) {
			if (cond)
				TRY(cc_emit_cond_jump(c, false));
			else
				TRY(cc_emit(c, OP_JMP));
			TRY(emit_jump_target(c, f));
		} else {
			TRY(cc_emit(c, cond ? OP_BR_IF : OP_BR));
			TRY(emit_target(c, f));
			TRY(cc_emit(c, dst));
			TRY(cc_emit(c, ns));
		}
	}
	if (cond)
		return push_n(c, t, n);
	set_unreachable(c);
	return 0;
}

static int br_table(struct cc *c)
{
	uint32_t n;
	TRY(rd_u32(c, &n));
	if (n > KIS_WASM_MAX_BR_TABLE || n > (size_t)(c->end - c->p))
		return cc_fail(c, "malformed: unexpected end (br_table too long)");
	if (pop(c, KIS_WASM_I32) < 0)
		return -1;
	uint32_t *depths = malloc(((size_t)n + 1) * sizeof(*depths));
	if (!depths)
		return cc_fail(c, "out of memory");
	int rc = 0;
	for (uint32_t i = 0; i <= n && rc == 0; i++)
		rc = rd_u32(c, &depths[i]);
	struct ctl *def = rc == 0 ? label(c, depths[n]) : NULL;
	if (!def) {
		free(depths);
		return -1;
	}
	const uint8_t *dt;
	uint32_t arity;
	label_types(def, &dt, &arity);
	if (!cc_dead(c)) {
		rc = cc_emit(c, OP_BR_TABLE);
		if (rc == 0)
			rc = cc_emit(c, n);
		if (rc == 0)
			rc = cc_emit(c, wasm_slots(dt, arity));
	}
	for (uint32_t i = 0; i <= n && rc == 0; i++) {
		struct ctl *f = label(c, depths[i]);
		if (!f) {
			rc = -1;
			break;
		}
		const uint8_t *t;
		uint32_t k;
		label_types(f, &t, &k);
		if (k != arity) {
			rc = cc_fail(c, "invalid: type mismatch (br_table arity)");
			break;
		}
		/* each label's types must fit the operands (spec 3.3.8.9) */
		uint32_t save = c->nvals, save_slots = c->nslots;
		uint8_t tmp[KIS_WASM_MAX_PARAMS];
		if (save - c->ctl[c->nctl - 1].height >= k)
			memcpy(tmp, c->vals + save - k, k);
		rc = pop_n(c, t, k);
		if (rc < 0)
			break;
		if (save - c->ctl[c->nctl - 1].height >= k) {
			c->nvals = save;
			memcpy(c->vals + save - k, tmp, k);
		} else {
			c->nvals = save; /* unreachable: polymorphic stack stays as it was */
		}
		c->nslots = save_slots;
		if (!cc_dead(c)) {
			rc = emit_target(c, f);
			if (rc == 0)
				rc = cc_emit(c, c->nlslots + f->hslots);
		}
	}
	free(depths);
	if (rc < 0)
		return -1;
	if (pop_n(c, dt, arity) < 0)
		return -1;
	set_unreachable(c);
	return 0;
}

static int memarg(struct cc *c, uint32_t natural, uint32_t *offset)
{
	uint32_t align;
	TRY(rd_u32(c, &align));
	TRY(rd_u32(c, offset));
	if (c->m->nmems == 0)
		return cc_fail(c, "invalid: unknown memory 0");
	if (align >= 32 || (1u << align) > natural)
		return cc_fail(c, "invalid: alignment must not be larger than natural");
	return 0;
}

static int load_store(struct cc *c, uint8_t op)
{
	static const uint8_t size[] = { 4, 8, 4, 8, 1, 1, 2, 2, 1, 1, 2, 2, 4, 4,
					4, 8, 4, 8, 1, 2, 1, 2, 4 };
	static const uint8_t type[] = { 0x7f, 0x7e, 0x7d, 0x7c, 0x7f, 0x7f, 0x7f, 0x7f,
					0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7f, 0x7e,
					0x7d, 0x7c, 0x7f, 0x7f, 0x7e, 0x7e, 0x7e };
	uint32_t off;
	unsigned k = op - 0x28u;
	TRY(memarg(c, size[k], &off));
	if (op <= 0x35) {
		if (pop(c, KIS_WASM_I32) < 0)
			return -1;
		TRY(push(c, type[k]));
	} else {
		if (pop(c, type[k]) < 0 || pop(c, KIS_WASM_I32) < 0)
			return -1;
	}
	/* operands straight from locals: one instruction instead of three */
	const struct emitted *p0 = cc_dead(c) ? NULL : cc_prev(c, 0);
	const struct emitted *p1 = p0 ? cc_prev(c, 1) : NULL;
	if (op <= 0x35 && p0 && p0->op == OP_FUSED + 64 * FUSE_LI + 10 /* i32.add */) {
		uint32_t at = p0->pc, x = c->code[at + 1], imm = c->code[at + 2];
		c->ncode = at;
		cc_forget_from(c, at);
		TRY(cc_emit(c, OP_LOAD_LI + (op - 0x28u)));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, imm));
		TRY(cc_emit(c, off));
		cc_note(c, at, OP_LOAD_LI + (op - 0x28u), 0, 0);
		return 0;
	}
	/* the base just written to local z by a tee ('local.tee z; i32.const c;
	 * i32.add; load', matmul's 'a + (k + 3) * 8'): the tee becomes a set and
	 * the load reads through z (form LI), so it can fuse on as any load
	 * through a local does */
	if (op <= 0x35 && p0 && p1 && p0->op == OP_FUSED + 64 * FUSE_I + 10 /* i32.add */ &&
	    (p1->op == OP_LOCAL_TEE ||
	     (p1->op >= OP_FUSED + 64 * FUSE_TEE && p1->op < OP_FUSED + 64 * FUSE__COUNT))) {
		uint32_t at = p0->pc, imm = c->code[at + 1], tat = p1->pc;
		uint32_t z = c->code[tat + p1->len - 1];
		uint32_t sop = p1->op == OP_LOCAL_TEE ? OP_LOCAL_SET
						      : p1->op - 64 * (FUSE_TEE - FUSE_SET);
		c->code[tat] = sop;
		c->ncode = at;
		cc_forget_from(c, tat);
		cc_note(c, tat, sop, p1->op == OP_LOCAL_TEE ? z : 0, 0);
		TRY(cc_emit(c, OP_LOAD_LI + (op - 0x28u)));
		TRY(cc_emit(c, z));
		TRY(cc_emit(c, imm));
		TRY(cc_emit(c, off));
		cc_note(c, at, OP_LOAD_LI + (op - 0x28u), 0, 0);
		return 0;
	}
	/* an indexed element: 'local.get x; i32.const s; i32.shl; i32.const c;
	 * i32.add', which the operator fusion has made one OP_LICHAIN_I (shl,
	 * add), as the address; also with a local.tee z after it */
	const uint32_t idx_addr = OP_LICHAIN_I + WASM_I_CHAIN_SHL_ADD;
	const struct emitted *ia = p0 && p0->op == idx_addr ? p0
				   : p0 && p1 && p0->op == OP_LOCAL_TEE && p1->op == idx_addr ? p1
											  : NULL;
	if (op <= 0x35 && ia) {
		uint32_t at = ia->pc, x = c->code[at + 1], sh = c->code[at + 2], imm = c->code[at + 3];
		bool tee = ia != p0;
		uint32_t z = tee ? p0->a : 0, opc = (tee ? OP_LOAD_IDX_TEE : OP_LOAD_IDX) + (op - 0x28u);
		c->ncode = at;
		cc_forget_from(c, at);
		TRY(cc_emit(c, opc));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, sh));
		TRY(cc_emit(c, imm));
		if (tee)
			TRY(cc_emit(c, z));
		TRY(cc_emit(c, off));
		cc_note(c, at, opc, 0, 0);
		return 0;
	}
	if (op <= 0x35 && p0 && p0->op == OP_FUSED + 64 * FUSE_I + 10 /* i32.add */) {
		uint32_t at = p0->pc, imm = c->code[at + 1];
		c->ncode = at;
		cc_forget_from(c, at);
		TRY(cc_emit(c, OP_LOAD_SI + (op - 0x28u)));
		TRY(cc_emit(c, imm));
		TRY(cc_emit(c, off));
		cc_note(c, at, OP_LOAD_SI + (op - 0x28u), 0, 0);
		return 0;
	}
	if (op <= 0x35 && p0 && p0->op == OP_LOCAL_GET) {
		uint32_t at = p0->pc, x = p0->a;
		c->ncode = at;
		cc_forget_from(c, at);
		TRY(cc_emit(c, OP_LOAD_L + (op - 0x28u)));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, off));
		cc_note(c, at, OP_LOAD_L + (op - 0x28u), 0, 0);
		return 0;
	}
	if (op >= 0x36 && p0 && p1 && p0->op == OP_LOCAL_GET && p1->op == OP_LOCAL_GET) {
		uint32_t at = p1->pc, x = p1->a, y = p0->a;
		c->ncode = at;
		cc_forget_from(c, at);
		TRY(cc_emit(c, OP_STORE_LL + (op - 0x36u)));
		TRY(cc_emit(c, x));
		TRY(cc_emit(c, y));
		TRY(cc_emit(c, off));
		return 0;
	}
	return cc_emit_op1(c, op, off);
}

/* Numeric instructions 0x45..0xc4 (spec 3.3.1): operand and result types. */
static void numeric_sig(uint8_t op, uint8_t *a, uint8_t *b, uint8_t *r)
{
	const uint8_t I32 = 0x7f, I64 = 0x7e, F32 = 0x7d, F64 = 0x7c;
	*b = 0;
	if (op == 0x45) {
		*a = I32, *r = I32;
	} else if (op <= 0x4f) {
		*a = *b = I32, *r = I32;
	} else if (op == 0x50) {
		*a = I64, *r = I32;
	} else if (op <= 0x5a) {
		*a = *b = I64, *r = I32;
	} else if (op <= 0x60) {
		*a = *b = F32, *r = I32;
	} else if (op <= 0x66) {
		*a = *b = F64, *r = I32;
	} else if (op <= 0x69) {
		*a = I32, *r = I32;
	} else if (op <= 0x78) {
		*a = *b = I32, *r = I32;
	} else if (op <= 0x7b) {
		*a = I64, *r = I64;
	} else if (op <= 0x8a) {
		*a = *b = I64, *r = I64;
	} else if (op <= 0x91) {
		*a = F32, *r = F32;
	} else if (op <= 0x98) {
		*a = *b = F32, *r = F32;
	} else if (op <= 0x9f) {
		*a = F64, *r = F64;
	} else if (op <= 0xa6) {
		*a = *b = F64, *r = F64;
	} else {
		/* conversions 0xa7..0xc4: one operand */
		static const uint8_t in[] = {
			/* a7 */ 0x7e, 0x7d, 0x7d, 0x7c, 0x7c, 0x7f, 0x7f, 0x7d, 0x7d, 0x7c,
			/* b1 */ 0x7c, 0x7f, 0x7f, 0x7e, 0x7e, 0x7c, 0x7f, 0x7f, 0x7e, 0x7e,
			/* bb */ 0x7d, 0x7d, 0x7c, 0x7f, 0x7e, 0x7f, 0x7f, 0x7e, 0x7e, 0x7e
		};
		static const uint8_t out[] = {
			/* a7 */ 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e,
			/* b1 */ 0x7e, 0x7d, 0x7d, 0x7d, 0x7d, 0x7d, 0x7c, 0x7c, 0x7c, 0x7c,
			/* bb */ 0x7c, 0x7f, 0x7e, 0x7d, 0x7c, 0x7f, 0x7f, 0x7e, 0x7e, 0x7e
		};
		*a = in[op - 0xa7];
		*r = out[op - 0xa7];
	}
}

static int numeric(struct cc *c, uint8_t op)
{
	uint8_t a, b, r;
	numeric_sig(op, &a, &b, &r);
	if (b && pop(c, b) < 0)
		return -1;
	if (pop(c, a) < 0)
		return -1;
	TRY(push(c, r));
	return b ? cc_emit_binop(c, op) : cc_emit_op(c, op);
}

static const struct wasm_tabletype *table(struct cc *c, uint32_t idx)
{
	if (idx >= c->m->ntables) {
		cc_fail(c, "invalid: unknown table %u", idx);
		return NULL;
	}
	return &c->m->tables[idx];
}

static int need_datacount(struct cc *c, uint32_t idx)
{
	if (!c->m->has_datacount)
		return cc_fail(c, "malformed: data count section required");
	if (idx >= c->m->datacount)
		return cc_fail(c, "invalid: unknown data segment %u", idx);
	return 0;
}

static int prefixed(struct cc *c)
{
	uint32_t sub, x, y;
	const struct wasm_tabletype *t, *t2;
	TRY(rd_u32(c, &sub));
	switch (sub) {
	case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: {
		/* trunc_sat (spec 4.3.2 trunc_sat) */
		static const uint8_t in[8] = { 0x7d, 0x7d, 0x7c, 0x7c, 0x7d, 0x7d, 0x7c, 0x7c };
		if (pop(c, in[sub]) < 0)
			return -1;
		TRY(push(c, sub < 4 ? KIS_WASM_I32 : KIS_WASM_I64));
		return cc_emit_op(c, OP_FC_BASE + sub);
	}
	case 8: /* memory.init */
		TRY(rd_u32(c, &x));
		TRY(rd_zero(c));
		if (c->m->nmems == 0)
			return cc_fail(c, "invalid: unknown memory 0");
		TRY(need_datacount(c, x));
		for (int i = 0; i < 3; i++)
			if (pop(c, KIS_WASM_I32) < 0)
				return -1;
		return cc_emit_op1(c, OP_FC_BASE + 8, x);
	case 9: /* data.drop */
		TRY(rd_u32(c, &x));
		TRY(need_datacount(c, x));
		return cc_emit_op1(c, OP_FC_BASE + 9, x);
	case 10: /* memory.copy */
		TRY(rd_zero(c));
		TRY(rd_zero(c));
		if (c->m->nmems == 0)
			return cc_fail(c, "invalid: unknown memory 0");
		for (int i = 0; i < 3; i++)
			if (pop(c, KIS_WASM_I32) < 0)
				return -1;
		return cc_emit_op(c, OP_FC_BASE + 10);
	case 11: /* memory.fill */
		TRY(rd_zero(c));
		if (c->m->nmems == 0)
			return cc_fail(c, "invalid: unknown memory 0");
		for (int i = 0; i < 3; i++)
			if (pop(c, KIS_WASM_I32) < 0)
				return -1;
		return cc_emit_op(c, OP_FC_BASE + 11);
	case 12: /* table.init elem, table */
		TRY(rd_u32(c, &x));
		TRY(rd_u32(c, &y));
		if (!(t = table(c, y)))
			return -1;
		if (x >= c->m->nelems)
			return cc_fail(c, "invalid: unknown elem segment %u", x);
		if (c->m->elems[x].type != t->elem)
			return cc_fail(c, "invalid: type mismatch (table.init)");
		for (int i = 0; i < 3; i++)
			if (pop(c, KIS_WASM_I32) < 0)
				return -1;
		return cc_emit_op2(c, OP_FC_BASE + 12, x, y);
	case 13: /* elem.drop */
		TRY(rd_u32(c, &x));
		if (x >= c->m->nelems)
			return cc_fail(c, "invalid: unknown elem segment %u", x);
		return cc_emit_op1(c, OP_FC_BASE + 13, x);
	case 14: /* table.copy dst, src */
		TRY(rd_u32(c, &x));
		TRY(rd_u32(c, &y));
		if (!(t = table(c, x)) || !(t2 = table(c, y)))
			return -1;
		if (t->elem != t2->elem)
			return cc_fail(c, "invalid: type mismatch (table.copy)");
		for (int i = 0; i < 3; i++)
			if (pop(c, KIS_WASM_I32) < 0)
				return -1;
		return cc_emit_op2(c, OP_FC_BASE + 14, x, y);
	case 15: /* table.grow */
		TRY(rd_u32(c, &x));
		if (!(t = table(c, x)))
			return -1;
		if (pop(c, KIS_WASM_I32) < 0 || pop(c, t->elem) < 0)
			return -1;
		TRY(push(c, KIS_WASM_I32));
		return cc_emit_op1(c, OP_FC_BASE + 15, x);
	case 16: /* table.size */
		TRY(rd_u32(c, &x));
		if (!table(c, x))
			return -1;
		TRY(push(c, KIS_WASM_I32));
		return cc_emit_op1(c, OP_FC_BASE + 16, x);
	case 17: /* table.fill */
		TRY(rd_u32(c, &x));
		if (!(t = table(c, x)))
			return -1;
		if (pop(c, KIS_WASM_I32) < 0 || pop(c, t->elem) < 0 || pop(c, KIS_WASM_I32) < 0)
			return -1;
		return cc_emit_op1(c, OP_FC_BASE + 17, x);
	default:
		return cc_fail(c, "malformed: illegal opcode 0xfc %u", sub);
	}
}

/* A vector instruction: OP_SIMD, subopcode with immediate count, immediates. */
static int emit_simd(struct cc *c, uint32_t sub, const uint32_t *imm, uint32_t n)
{
	if (cc_dead(c))
		return 0;
	uint32_t at = c->ncode;
	TRY(cc_emit(c, OP_SIMD));
	TRY(cc_emit(c, sub | n << 16));
	for (uint32_t i = 0; i < n; i++)
		TRY(cc_emit(c, imm[i]));
	cc_note(c, at, OP_SIMD, 0, 0); /* fuses with nothing */
	return 0;
}

/* 0xfd prefix: vector instructions (spec 3.3.3 validation, 5.4.8 binary);
 * simd.c gives each subopcode's immediates and types. */
static int vector(struct cc *c)
{
	uint32_t sub, imm[4], nimm = 0;
	struct wasm_simd_sig g;
	TRY(rd_u32(c, &sub));
	if (wasm_simd_sig(sub, &g) < 0)
		return cc_fail(c, "malformed: illegal opcode 0xfd %u", sub);
	if (g.imm == SIMD_IMM_MEM || g.imm == SIMD_IMM_MEM_LANE) {
		TRY(memarg(c, g.size, &imm[0]));
		nimm = 1;
	}
	if (g.imm == SIMD_IMM_MEM_LANE || g.imm == SIMD_IMM_LANE) {
		uint8_t lane = 0;
		TRY(rd_byte(c, &lane));
		if (lane >= g.lanes)
			return cc_fail(c, "invalid: invalid lane index");
		imm[nimm++] = lane;
	}
	if (g.imm == SIMD_IMM_BYTES16) {
		if (c->end - c->p < 16)
			return cc_fail(c, "malformed: unexpected end");
		memcpy(imm, c->p, 16);
		c->p += 16;
		nimm = 4;
		for (unsigned i = 0; g.lanes && i < 16; i++) /* shuffle: lanes of both operands */
			if (((const uint8_t *)imm)[i] >= g.lanes)
				return cc_fail(c, "invalid: invalid lane index");
	}
	for (unsigned i = g.nin; i-- > 0;)
		if (pop(c, g.in[i]) < 0)
			return -1;
	if (g.out)
		TRY(push(c, g.out));
	return emit_simd(c, sub, imm, nimm);
}

/* One instruction. Returns 1 when the function's final `end` was read. */
static int instr(struct cc *c)
{
	uint8_t op = 0;
	uint32_t x, y;
	TRY(rd_byte(c, &op));
	const struct kis_wasm_module *m = c->m;
	switch (op) {
	case 0x00: /* unreachable */
		TRY(cc_emit_op(c, OP_UNREACHABLE));
		set_unreachable(c);
		return 0;
	case 0x01:
		return 0;
	case 0x02: /* block */
	case 0x03: /* loop */
	case 0x04: { /* if */
		struct ctl f = { .kind = op };
		TRY(blocktype(c, &f));
		if (op == 0x04 && pop(c, KIS_WASM_I32) < 0)
			return -1;
		if (pop_n(c, f.params, f.np) < 0)
			return -1;
		bool was_dead = cc_dead(c);
		if (op == 0x03 && !was_dead) {
			TRY(cc_emit(c, OP_LOOP_CHECK));
			cc_label_here(c);
		}
		f.start_pc = c->ncode - (op == 0x03 && !was_dead ? 1 : 0);
		uint32_t else_at = NONE;
		if (op == 0x04 && !was_dead) {
			TRY(cc_emit_cond_jump(c, true));
			else_at = c->ncode;
			TRY(cc_emit(c, NONE));
		}
		TRY(push_ctl(c, &f));
		c->ctl[c->nctl - 1].else_fix = else_at;
		/* code in a block entered from dead code is never run: it is
		 * validated as usual but not emitted */
		c->ctl[c->nctl - 1].dead_entry = was_dead;
		return 0;
	}
	case 0x05: { /* else */
		struct ctl *f = &c->ctl[c->nctl - 1];
		if (f->kind != 0x04)
			return cc_fail(c, "malformed: else without if");
		if (pop_n(c, f->results, f->nr) < 0)
			return -1;
		if (c->nvals != f->height)
			return cc_fail(c, "invalid: type mismatch (values remaining in then branch)");
		if (!cc_dead(c)) {
			TRY(cc_emit(c, OP_JMP));
			TRY(emit_target(c, f));
		}
		if (f->else_fix != NONE) {
			c->code[f->else_fix] = c->ncode;
			f->else_fix = NONE;
		}
		cc_label_here(c);
		f->unreachable = false;
		f->kind = 0x05;
		return push_n(c, f->params, f->np);
	}
	case 0x0b: { /* end */
		struct ctl *f = &c->ctl[c->nctl - 1];
		if (pop_n(c, f->results, f->nr) < 0)
			return -1;
		if (c->nvals != f->height)
			return cc_fail(c, "invalid: type mismatch (values remaining at end of block)");
		cc_label_here(c);
		if (f->kind == 0x04) {
			if (f->np != f->nr || (f->np && memcmp(f->params, f->results, f->np)))
				return cc_fail(c, "invalid: type mismatch (if without else)");
			if (f->else_fix != NONE)
				c->code[f->else_fix] = c->ncode;
		}
		if (c->nctl == 1) {
			patch_chain(c, f->fixups, c->ncode);
			TRY(cc_emit(c, OP_RETURN));
			TRY(cc_emit(c, wasm_slots(f->results, f->nr)));
			c->nctl = 0;
			return 1;
		}
		patch_chain(c, f->fixups, c->ncode);
		struct ctl done = *f;
		c->nctl--;
		return push_n(c, done.results == &f->single ? &done.single : done.results, done.nr);
	}
	case 0x0c:
		TRY(rd_u32(c, &x));
		return branch(c, x, false);
	case 0x0d:
		TRY(rd_u32(c, &x));
		if (pop(c, KIS_WASM_I32) < 0)
			return -1;
		return branch(c, x, true);
	case 0x0e:
		return br_table(c);
	case 0x0f: /* return */
		return branch(c, c->nctl - 1, false);
	case 0x10: { /* call */
		TRY(rd_u32(c, &x));
		if (x >= m->nfuncs)
			return cc_fail(c, "invalid: unknown function %u", x);
		const struct wasm_functype *ft = &m->types[m->func_types[x]];
		if (pop_n(c, ft->t, ft->np) < 0)
			return -1;
		TRY(push_n(c, ft->t + ft->np, ft->nr));
		return cc_emit_op1(c, OP_CALL, x);
	}
	case 0x11: { /* call_indirect typeidx tableidx */
		TRY(rd_u32(c, &x));
		TRY(rd_u32(c, &y));
		const struct wasm_tabletype *t = table(c, y);
		if (!t)
			return -1;
		if (x >= m->ntypes)
			return cc_fail(c, "invalid: unknown type %u", x);
		if (t->elem != KIS_WASM_FUNCREF)
			return cc_fail(c, "invalid: type mismatch (call_indirect on a non-funcref table)");
		const struct wasm_functype *ft = &m->types[x];
		if (pop(c, KIS_WASM_I32) < 0 || pop_n(c, ft->t, ft->np) < 0)
			return -1;
		TRY(push_n(c, ft->t + ft->np, ft->nr));
		return cc_emit_op2(c, OP_CALL_INDIRECT, x, y);
	}
	case 0x1a: { /* drop */
		int t = pop(c, ANY);
		if (t < 0)
			return -1;
		if (t == KIS_WASM_V128) /* two slots */
			TRY(cc_emit_op(c, OP_DROP));
		return cc_emit_op(c, OP_DROP);
	}
	case 0x1b:
	case 0x1c: { /* select, select t* */
		uint8_t want = ANY;
		if (op == 0x1c) {
			TRY(rd_u32(c, &x));
			if (x != 1)
				return cc_fail(c, "invalid: invalid result arity");
			TRY(rd_byte(c, &want));
			if (!is_val(want))
				return cc_fail(c, "malformed: malformed value type");
		}
		if (pop(c, KIS_WASM_I32) < 0)
			return -1;
		int t1 = pop(c, want);
		if (t1 < 0)
			return -1;
		int t2 = pop(c, (uint8_t)t1);
		if (t2 < 0)
			return -1;
		uint8_t rt = want;
		if (op == 0x1b) {
			/* numeric or vector operands (spec 3.3.4.2) */
			if ((t1 != ANY && is_ref((uint8_t)t1)) || (t2 != ANY && is_ref((uint8_t)t2)))
				return cc_fail(c, "invalid: type mismatch (select needs numeric operands)");
			rt = t1 == ANY ? (uint8_t)t2 : (uint8_t)t1;
		}
		TRY(push(c, rt));
		if (rt == KIS_WASM_V128)
			return emit_simd(c, SIMD_SELECT, NULL, 0);
		return cc_emit_op(c, OP_SELECT);
	}
	case 0x20:
	case 0x21:
	case 0x22:
		TRY(rd_u32(c, &x));
		if (x >= c->nlocals)
			return cc_fail(c, "invalid: unknown local %u", x);
		if (op == 0x20) {
			TRY(push(c, c->locals[x]));
		} else {
			if (pop(c, c->locals[x]) < 0)
				return -1;
			if (op == 0x22)
				TRY(push(c, c->locals[x]));
		}
		if (op == 0x21 && !cc_dead(c) && c->locals[x] != KIS_WASM_V128 && cc_drop_zero_set(c, x))
			return 0;
		if (op != 0x20 && x < 64)
			c->written |= (uint64_t)1 << x;
		/* in the code a local is named by its first slot */
		if (c->locals[x] == KIS_WASM_V128)
			return emit_simd(c, SIMD_LOCAL_GET + (op - 0x20u), &c->lslot[x], 1);
		if (op == 0x21 || op == 0x22)
			return cc_fuse_local_set(c, op, c->lslot[x]);
		return cc_emit_op1(c, op, c->lslot[x]);
	case 0x23:
	case 0x24:
		TRY(rd_u32(c, &x));
		if (x >= m->nglobals)
			return cc_fail(c, "invalid: unknown global %u", x);
		if (op == 0x23) {
			TRY(push(c, m->globals[x].type));
		} else {
			if (!m->globals[x].mut)
				return cc_fail(c, "invalid: global is immutable");
			if (pop(c, m->globals[x].type) < 0)
				return -1;
		}
		if (m->globals[x].type == KIS_WASM_V128)
			return emit_simd(c, op == 0x23 ? SIMD_GLOBAL_GET : SIMD_GLOBAL_SET, &x, 1);
		return cc_emit_op1(c, op, x);
	case 0x25:
	case 0x26: {
		TRY(rd_u32(c, &x));
		const struct wasm_tabletype *t = table(c, x);
		if (!t)
			return -1;
		if (op == 0x25) {
			if (pop(c, KIS_WASM_I32) < 0)
				return -1;
			TRY(push(c, t->elem));
		} else if (pop(c, t->elem) < 0 || pop(c, KIS_WASM_I32) < 0) {
			return -1;
		}
		return cc_emit_op1(c, op, x);
	}
	case 0x3f:
	case 0x40:
		TRY(rd_zero(c));
		if (m->nmems == 0)
			return cc_fail(c, "invalid: unknown memory 0");
		if (op == 0x40 && pop(c, KIS_WASM_I32) < 0)
			return -1;
		TRY(push(c, KIS_WASM_I32));
		return cc_emit_op(c, op);
	case 0x41: {
		int32_t v;
		if (wasm_read_s32(&c->p, c->end, &v) < 0)
			return cc_fail(c, "malformed: integer representation too long");
		TRY(push(c, KIS_WASM_I32));
		return cc_emit_op1(c, op, (uint32_t)v);
	}
	case 0x42: {
		int64_t v;
		if (wasm_read_s64(&c->p, c->end, &v) < 0)
			return cc_fail(c, "malformed: integer representation too long");
		TRY(push(c, KIS_WASM_I64));
		return cc_emit_op2(c, op, (uint32_t)(uint64_t)v, (uint32_t)((uint64_t)v >> 32));
	}
	case 0x43: {
		uint32_t v;
		if (c->end - c->p < 4)
			return cc_fail(c, "malformed: unexpected end");
		memcpy(&v, c->p, 4);
		c->p += 4;
		TRY(push(c, KIS_WASM_F32));
		return cc_emit_op1(c, op, v);
	}
	case 0x44: {
		uint64_t v;
		if (c->end - c->p < 8)
			return cc_fail(c, "malformed: unexpected end");
		memcpy(&v, c->p, 8);
		c->p += 8;
		TRY(push(c, KIS_WASM_F64));
		return cc_emit_op2(c, op, (uint32_t)v, (uint32_t)(v >> 32));
	}
	case 0xd0: { /* ref.null t */
		uint8_t t = 0;
		TRY(rd_byte(c, &t));
		if (!is_ref(t))
			return cc_fail(c, "malformed: malformed reference type");
		TRY(push(c, t));
		return cc_emit_op(c, OP_REF_NULL);
	}
	case 0xd1: { /* ref.is_null */
		int t = pop(c, ANY);
		if (t < 0)
			return -1;
		if (t != ANY && !is_ref((uint8_t)t))
			return cc_fail(c, "invalid: type mismatch (ref.is_null on a number)");
		TRY(push(c, KIS_WASM_I32));
		return cc_emit_op(c, OP_REF_IS_NULL);
	}
	case 0xd2: /* ref.func */
		TRY(rd_u32(c, &x));
		if (x >= m->nfuncs)
			return cc_fail(c, "invalid: unknown function %u", x);
		if (!m->declared || !m->declared[x])
			return cc_fail(c, "invalid: undeclared function reference");
		TRY(push(c, KIS_WASM_FUNCREF));
		return cc_emit_op1(c, OP_REF_FUNC, x);
	case 0xfc:
		return prefixed(c);
	case 0xfd:
		return vector(c);
	default:
		if (op >= 0x28 && op <= 0x3e)
			return load_store(c, op);
		if (op >= 0x45 && op <= 0xc4)
			return numeric(c, op);
		return cc_fail(c, "malformed: illegal opcode 0x%02x", op);
	}
}

int wasm_compile_func(const struct kis_wasm_module *m, uint32_t func_idx, const uint8_t *body,
		      size_t len, struct wasm_code *out, char *err, size_t errlen)
{
	struct cc c = { .m = m, .p = body, .end = body + len, .err = err, .errlen = errlen };
	const struct wasm_functype *ft = &m->types[m->func_types[func_idx]];
	int rc = -1;

	/* locals (spec 5.5.13): runs of (count, type), at most MAX_LOCALS in all */
	uint32_t nruns;
	uint64_t total = ft->np;
	const uint8_t *save = c.p;
	if (rd_u32(&c, &nruns) < 0)
		return -1;
	for (uint32_t i = 0; i < nruns; i++) {
		uint32_t n = 0;
		uint8_t t = 0;
		if (rd_u32(&c, &n) < 0 || rd_byte(&c, &t) < 0)
			return -1;
		total += n;
		if (total > KIS_WASM_MAX_LOCALS)
			return cc_fail(&c, "malformed: too many locals");
		if (!is_val(t))
			return cc_fail(&c, "malformed: malformed value type 0x%02x", t);
	}
	c.locals = malloc(total + 1);
	c.lslot = malloc((total + 1) * sizeof(*c.lslot));
	c.vals = malloc(KIS_WASM_MAX_OPERANDS);
	c.ctl = malloc(KIS_WASM_MAX_NESTING * sizeof(*c.ctl));
	if (!c.locals || !c.lslot || !c.vals || !c.ctl) {
		cc_fail(&c, "out of memory");
		goto out;
	}
	memcpy(c.locals, ft->t, ft->np);
	c.nlocals = ft->np;
	c.nparams = ft->np;
	c.prologue = true;
	c.p = save;
	(void)rd_u32(&c, &nruns);
	for (uint32_t i = 0; i < nruns; i++) {
		uint32_t n = 0;
		uint8_t t = 0;
		(void)rd_u32(&c, &n);
		(void)rd_byte(&c, &t);
		memset(c.locals + c.nlocals, t, n);
		c.nlocals += n;
	}
	for (uint32_t i = 0; i < c.nlocals; i++) {
		c.lslot[i] = c.nlslots;
		c.nlslots += width(c.locals[i]);
	}

	struct ctl f = { .kind = 0, .results = ft->t + ft->np, .nr = ft->nr };
	if (push_ctl(&c, &f) < 0)
		goto out;
	for (;;) {
		int r = instr(&c);
		if (r < 0)
			goto out;
		if (r == 1)
			break;
	}
	if (c.p != c.end) {
		cc_fail(&c, "malformed: section size mismatch (bytes after the end of a function)");
		goto out;
	}
	out->ops = c.code;
	out->nops = c.ncode;
	out->nlocals = c.nlslots;
	out->max_height = c.nlslots + c.maxslots;
	c.code = NULL;
	rc = 0;
out:
	free(c.code);
	free(c.locals);
	free(c.lslot);
	free(c.vals);
	free(c.ctl);
	return rc;
}
