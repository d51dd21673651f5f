/* SPDX-License-Identifier: MIT */
/* The interpreter (spec 4.4): runs translated code on the store's value stack
 * with its own frame stack, so guest recursion never grows the host stack.
 *
 * Theory of operation: a frame's slots are [params][locals][operands], fp
 * points at the first param, sp one past the top operand. A call leaves the
 * arguments where the caller pushed them and they become the callee's first
 * slots; a return copies the results down to fp. Branch targets, stack
 * heights and arities were resolved by compile.c, so no immediate is decoded
 * here. Every memory and table access is bounds-checked against 64-bit sums,
 * which cannot wrap for 32-bit addresses and offsets.
 *
 * Why run() is one function of some 1,150 lines (issue 42 asked for a
 * measurement, not a taste): its handlers share pc, sp, the cached top of
 * stack and the memory base in registers, and jump to each other through
 * one table of label addresses (threaded dispatch). Built instead as one
 * switch (-DKIS_WASM_SWITCH, the form clang gets), the same handlers took
 * more CPU on the real programs of bench/wasm-real.sh: Lua's mixed.lua
 * 3.48 s against 3.18 s (+9%), bzip2 -9 on 4 MB 2.67 s against 2.20 s
 * (+21%); user + system seconds, median of 7 interleaved runs each, gcc 12
 * -O2, through `kis sandbox run --tier wasm --wasm-engine interpreter`,
 * 2026-12-06 on the 2-core build machine. A tail-call form (one function
 * per handler, wasm3's design) needs guaranteed tail calls, which gcc 12
 * does not give (no musttail: a call left as a call grows the host stack
 * per instruction), so it was not measured; it stays the thing to try if
 * the build moves to clang. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wasm/internal.h"
#include "wasm/jit.h"
#include "wasm/numeric.h"
#include "wasm/exec_dispatch.h"

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

#ifdef KIS_WASM_PROFILE
#include <stdio.h>
static uint64_t (*prof_pairs)[OP__COUNT];

static void wasm_prof_dump(void)
{
	for (int n = 0; n < 60 && prof_pairs; n++) {
		uint64_t best = 0;
		uint32_t ba = 0, bb = 0;
		for (uint32_t a = 0; a < OP__COUNT; a++)
			for (uint32_t b = 0; b < OP__COUNT; b++)
				if (prof_pairs[a][b] > best) {
					best = prof_pairs[a][b];
					ba = a;
					bb = b;
				}
		if (!best)
			break;
		fprintf(stderr, "%12llu  %4u(0x%x) -> %4u(0x%x)\n", (unsigned long long)best, ba, ba, bb, bb);
		prof_pairs[ba][bb] = 0;
	}
}

static void wasm_prof_pair(uint32_t a, uint32_t b)
{
	if (!prof_pairs) {
		prof_pairs = calloc(OP__COUNT, sizeof *prof_pairs);
		if (!prof_pairs)
			abort();
		atexit(wasm_prof_dump);
	}
	if (a < OP__COUNT && b < OP__COUNT)
		prof_pairs[a][b]++;
}
#endif

static inline uint32_t rotl32(uint32_t x, uint32_t k)
{
	k &= 31;
	return (x << k) | (x >> ((32 - k) & 31));
}

static inline uint32_t rotr32(uint32_t x, uint32_t k)
{
	k &= 31;
	return (x >> k) | (x << ((32 - k) & 31));
}

static inline uint64_t rotl64(uint64_t x, uint64_t k)
{
	k &= 63;
	return (x << k) | (x >> ((64 - k) & 63));
}

static inline uint64_t rotr64(uint64_t x, uint64_t k)
{
	k &= 63;
	return (x >> k) | (x << ((64 - k) & 63));
}

static enum kis_wasm_trap run(struct kis_wasm_store *s, struct kis_wasm_func *entry)
{
	const uint32_t entry_depth = s->depth;
	uint64_t *sp = s->sp, *fp = NULL;
	/* The top of the operand stack, cached in a register so that a chain
	 * of operators does not wait on a store and a reload of sp[-1] at each
	 * step. Write-through: sp[-1] in memory is always current too (the
	 * frame model and every other handler stay as they were). At each
	 * dispatch tos == sp[-1]; a handler that changed the stack without
	 * setting tos ends with NEXT(), which reloads it, one that kept tos
	 * current ends with NEXT_T(). Below the first slot is a zero guard
	 * slot (runtime.c), so the reload is valid on an empty stack. */
	uint64_t tos = 0;
	const uint32_t *pc = NULL, *code = NULL;
	struct kis_wasm_func *fn = NULL, *callee = entry;
	struct kis_wasm_instance *inst = NULL;
	struct kis_wasm_memory *memo = NULL;
	uint8_t *mem = NULL;
	uint64_t memsize = 0;
	enum kis_wasm_trap trap = KIS_WASM_OK;

	/* The check at every loop header and call: the interrupt flag (set by
	 * any thread), then one step of fuel. An unlimited budget is stored as
	 * INT64_MAX (see kis_wasm_call), so fuel is one decrement and one sign
	 * test, with no separate "unlimited" branch. */
#define TICK()                                                                    \
	do {                                                                      \
		if (__builtin_expect(atomic_load_explicit(&s->interrupt,          \
							  memory_order_relaxed), 0)) \
			goto interrupted;                                         \
		if (__builtin_expect(--s->fuel < 0, 0))                           \
			goto out_of_fuel;                                         \
	} while (0)

	/* The mixed tier's profile (struct kis_wasm_func.prof): each
	 * function's calls (counted at the call) and the ticks taken while it
	 * was the running frame (its loop back-edges and the calls it makes),
	 * charged when the frame changes, from the fuel count that TICK
	 * keeps anyway: nothing is added at a back-edge. A budget reset
	 * meanwhile (kis_wasm_set_fuel from a host call) charges nothing. */
	int64_t prof_mark = s->fuel;
#define CHARGE()                                                \
	do {                                                    \
		int64_t d_ = prof_mark - s->fuel;               \
		prof_mark = s->fuel;                            \
		if (fn && d_ > 0)                               \
			fn->prof += (uint64_t)d_;               \
	} while (0)

	/* A taken simple jump: a back-edge to a loop (WASM_LOOP_EDGE) runs the
	 * loop's check here instead of dispatching OP_LOOP_CHECK. */
#define JUMP(word)                                              \
	do {                                                    \
		uint32_t t_ = (word);                           \
		if (t_ & WASM_LOOP_EDGE) {                      \
			TICK();                                 \
			t_ &= ~WASM_LOOP_EDGE;                  \
		}                                               \
		pc = code + t_;                                 \
	} while (0)

	/* Threaded dispatch: every handler ends by jumping straight to the
	 * next one through this table (GNU labels as values), which predicts
	 * far better than one shared switch. NEXT() is the one macro here
	 * that hides a jump; it is the whole point of the technique. */
#if (defined(__clang__) && !defined(KIS_WASM_THREADED)) || defined(KIS_WASM_SWITCH)
	/* clang takes minutes over a thousand address-taken labels, so it gets
	 * one switch whose cases jump to the handlers (gcc: threaded). */
#define ENTRY(op, label) case op: goto label;
#define DISPATCH() goto next
	goto call;
next:
	switch (*pc++) {
		DISPATCH_ENTRIES
	default:
		goto op_bad;
	}
#else
#define ENTRY(op, label) [op] = &&label,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
	static const void *const dispatch[OP__COUNT] = {
		[0 ... OP__COUNT - 1] = &&op_bad,
		DISPATCH_ENTRIES
	};
#pragma GCC diagnostic pop
#ifdef KIS_WASM_PROFILE
	/* Debug aid (off by default): counts each pair of consecutive internal
	 * opcodes executed, printed to stderr at exit, the hottest first --
	 * what to fuse next. Build with CFLAGS="-O2 -g -DKIS_WASM_PROFILE". */
	uint32_t prof_prev = 0;
#define DISPATCH()                                      \
	do {                                            \
		wasm_prof_pair(prof_prev, *pc);         \
		prof_prev = *pc;                        \
		goto *dispatch[*pc++];                  \
	} while (0)
#else
#define DISPATCH() goto *dispatch[*pc++]
#endif
	goto call;
#endif
#undef ENTRY
#define NEXT()                  \
	do {                    \
		tos = sp[-1];   \
		DISPATCH();     \
	} while (0)
#define NEXT_T() DISPATCH()
	/* the new top, kept in tos and written through to memory */
#define SET_TOP(v)              \
	do {                    \
		tos = (v);      \
		sp[-1] = tos;   \
	} while (0)
#define PUSH_TOP(v)             \
	do {                    \
		tos = (v);      \
		sp[0] = tos;    \
		sp++;           \
	} while (0)

		op_OP_UNREACHABLE:
			trap = KIS_WASM_TRAP_UNREACHABLE;
			goto trapped;
		op_OP_NOP:
			NEXT_T();
		op_OP_JMP:
			JUMP(pc[0]);
			NEXT_T();
		op_OP_LOOP_CHECK:
			TICK();
			NEXT_T();
		op_OP_JMP_IF_NOT:
			sp--;
			if ((uint32_t)tos == 0)
				JUMP(pc[0]);
			else
				pc++;
			NEXT();
		op_OP_BR_IF_SIMPLE:
			sp--;
			if ((uint32_t)tos != 0)
				JUMP(pc[0]);
			else
				pc++;
			NEXT();
		op_OP_BR_IF:
			if ((uint32_t)*--sp == 0) {
				pc += 3;
				NEXT();
			}
			/* fall through */
		op_OP_BR: {
			uint64_t *dst = fp + pc[1];
			uint32_t n = pc[2];
			memmove(dst, sp - n, (size_t)n * 8);
			sp = dst + n;
			pc = code + pc[0];
			NEXT();
		}
		op_OP_BR_TABLE: {
			uint32_t n = pc[0], arity = pc[1];
			uint32_t i = (uint32_t)*--sp;
			if (i > n)
				i = n;
			const uint32_t *e = pc + 2 + 2 * (size_t)i;
			uint64_t *dst = fp + e[1];
			memmove(dst, sp - arity, (size_t)arity * 8);
			sp = dst + arity;
			pc = code + e[0];
			NEXT();
		}
		op_OP_RETURN: {
			uint32_t n = pc[0];
			const uint64_t *from = sp - n;
			for (uint32_t i = 0; i < n; i++) /* results: usually 0 or 1 */
				fp[i] = from[i];
			sp = fp + n;
			struct wasm_frame *fr = &s->frames[--s->depth];
			CHARGE();
			if (s->depth == entry_depth) {
				s->sp = sp;
				return KIS_WASM_OK;
			}
			pc = fr->ret_pc;
			fp = fr->fp;
			fn = fr->func;
			code = fr->code;
			/* mem and memsize are current for inst's memory: memory.grow
			 * and host calls reload them, so only a change of instance
			 * (whose callee may have grown a shared memory) does here */
			if (fn->inst != inst) {
				inst = fn->inst;
				memo = inst->m->nmems ? inst->mems[0] : NULL;
				mem = memo ? memo->data : NULL;
				memsize = memo ? memo->size : 0;
			}
			NEXT();
		}
		op_OP_CALL:
			callee = inst->funcs[*pc++];
			goto call;
		op_OP_CALL_INDIRECT: {
			const struct wasm_functype *want = &inst->m->types[pc[0]];
			struct kis_wasm_table *t = inst->tables[pc[1]];
			pc += 2;
			uint32_t i = (uint32_t)*--sp;
			if (i >= t->size) {
				trap = KIS_WASM_TRAP_UNDEFINED_ELEMENT;
				goto trapped;
			}
			callee = (struct kis_wasm_func *)(uintptr_t)t->elems[i];
			if (!callee) {
				trap = KIS_WASM_TRAP_UNINITIALIZED_ELEMENT;
				goto trapped;
			}
			if (!wasm_functype_eq(callee->type, want)) {
				trap = KIS_WASM_TRAP_INDIRECT_CALL_MISMATCH;
				goto trapped;
			}
			goto call;
		}
		op_OP_DROP:
			sp--;
			NEXT();
		op_OP_SELECT: {
			/* a mask, not a branch: the condition is often data (a
			 * sort's compare) and would mispredict */
			uint64_t keep = -(uint64_t)((uint32_t)tos != 0);
			sp -= 2;
			SET_TOP((sp[-1] & keep) | (sp[0] & ~keep));
			NEXT_T();
		}
		op_OP_LOCAL_GET:
			PUSH_TOP(fp[*pc++]);
			NEXT_T();
		op_OP_LOCAL_SET:
			fp[*pc++] = tos;
			sp--;
			NEXT();
		op_OP_LOCAL_TEE:
			fp[*pc++] = tos;
			NEXT_T();
		op_OP_GLOBAL_GET:
			*sp++ = inst->globals[*pc++]->val;
			NEXT();
		op_OP_GLOBAL_SET:
			inst->globals[*pc++]->val = *--sp;
			NEXT();
		op_OP_TABLE_GET: {
			struct kis_wasm_table *t = inst->tables[*pc++];
			uint32_t i = (uint32_t)sp[-1];
			if (i >= t->size)
				goto table_oob;
			sp[-1] = t->elems[i];
			NEXT();
		}
		op_OP_TABLE_SET: {
			struct kis_wasm_table *t = inst->tables[*pc++];
			uint32_t i = (uint32_t)sp[-2];
			if (i >= t->size)
				goto table_oob;
			t->elems[i] = sp[-1];
			sp -= 2;
			NEXT();
		}

		/* loads and stores (spec 4.4.7): effective address is a 33-bit sum */
#define EA() ((uint64_t)(uint32_t)tos + *pc++)
		op_0x28: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; SET_TOP(rd32(mem + ea)); NEXT_T(); }
		op_0x29: { uint64_t ea = EA(); if (ea + 8 > memsize) goto mem_oob; SET_TOP(rd64(mem + ea)); NEXT_T(); }
		op_0x2a: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; SET_TOP(rd32(mem + ea)); NEXT_T(); }
		op_0x2b: { uint64_t ea = EA(); if (ea + 8 > memsize) goto mem_oob; SET_TOP(rd64(mem + ea)); NEXT_T(); }
		op_0x2c: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; SET_TOP((uint32_t)(int32_t)(int8_t)mem[ea]); NEXT_T(); }
		op_0x2d: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; SET_TOP(mem[ea]); NEXT_T(); }
		op_0x2e: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; SET_TOP((uint32_t)(int32_t)(int16_t)rd16(mem + ea)); NEXT_T(); }
		op_0x2f: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; SET_TOP(rd16(mem + ea)); NEXT_T(); }
		op_0x30: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; SET_TOP((uint64_t)(int64_t)(int8_t)mem[ea]); NEXT_T(); }
		op_0x31: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; SET_TOP(mem[ea]); NEXT_T(); }
		op_0x32: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; SET_TOP((uint64_t)(int64_t)(int16_t)rd16(mem + ea)); NEXT_T(); }
		op_0x33: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; SET_TOP(rd16(mem + ea)); NEXT_T(); }
		op_0x34: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; SET_TOP((uint64_t)(int64_t)(int32_t)rd32(mem + ea)); NEXT_T(); }
		op_0x35: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; SET_TOP(rd32(mem + ea)); NEXT_T(); }
#undef EA
		/* stores: the value's low bytes, little-endian host */
#define STORE_EA() ((uint64_t)(uint32_t)sp[-2] + *pc++)
		op_0x36: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 4 > memsize) goto mem_oob; memcpy(mem + ea, &v, 4); NEXT(); }
		op_0x37: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 8 > memsize) goto mem_oob; memcpy(mem + ea, &v, 8); NEXT(); }
		op_0x38: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 4 > memsize) goto mem_oob; memcpy(mem + ea, &v, 4); NEXT(); }
		op_0x39: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 8 > memsize) goto mem_oob; memcpy(mem + ea, &v, 8); NEXT(); }
		op_0x3a: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 1 > memsize) goto mem_oob; memcpy(mem + ea, &v, 1); NEXT(); }
		op_0x3b: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 2 > memsize) goto mem_oob; memcpy(mem + ea, &v, 2); NEXT(); }
		op_0x3c: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 1 > memsize) goto mem_oob; memcpy(mem + ea, &v, 1); NEXT(); }
		op_0x3d: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 2 > memsize) goto mem_oob; memcpy(mem + ea, &v, 2); NEXT(); }
		op_0x3e: { uint64_t ea = STORE_EA(), v = tos; sp -= 2; if (ea + 4 > memsize) goto mem_oob; memcpy(mem + ea, &v, 4); NEXT(); }
#undef STORE_EA
		op_OP_MEMORY_SIZE:
			*sp++ = (uint32_t)(memsize / WASM_PAGE);
			NEXT();
		op_OP_MEMORY_GROW: {
			int64_t r = wasm_memory_grow(memo, (uint32_t)sp[-1]);
			sp[-1] = (uint32_t)r;
			mem = memo->data;
			memsize = memo->size;
			NEXT();
		}
		op_OP_I32_CONST:
			PUSH_TOP(*pc++);
			NEXT_T();
		op_OP_F32_CONST:
			PUSH_TOP(*pc++);
			NEXT_T();
		op_OP_I64_CONST:
		op_OP_F64_CONST:
			PUSH_TOP((uint64_t)pc[0] | ((uint64_t)pc[1] << 32));
			pc += 2;
			NEXT_T();

		/* numeric instructions (spec 4.3) */
		UN32(0x45, a == 0)
		BIN32(0x46, a == b)
		BIN32(0x47, a != b)
		BIN32(0x48, (int32_t)a < (int32_t)b)
		BIN32(0x49, a < b)
		BIN32(0x4a, (int32_t)a > (int32_t)b)
		BIN32(0x4b, a > b)
		BIN32(0x4c, (int32_t)a <= (int32_t)b)
		BIN32(0x4d, a <= b)
		BIN32(0x4e, (int32_t)a >= (int32_t)b)
		BIN32(0x4f, a >= b)
		UN64(0x50, a == 0)
		CMP64(0x51, a == b)
		CMP64(0x52, a != b)
		CMP64(0x53, (int64_t)a < (int64_t)b)
		CMP64(0x54, a < b)
		CMP64(0x55, (int64_t)a > (int64_t)b)
		CMP64(0x56, a > b)
		CMP64(0x57, (int64_t)a <= (int64_t)b)
		CMP64(0x58, a <= b)
		CMP64(0x59, (int64_t)a >= (int64_t)b)
		CMP64(0x5a, a >= b)
		FCMP32(0x5b, a == b)
		FCMP32(0x5c, a != b)
		FCMP32(0x5d, a < b)
		FCMP32(0x5e, a > b)
		FCMP32(0x5f, a <= b)
		FCMP32(0x60, a >= b)
		FCMP64(0x61, a == b)
		FCMP64(0x62, a != b)
		FCMP64(0x63, a < b)
		FCMP64(0x64, a > b)
		FCMP64(0x65, a <= b)
		FCMP64(0x66, a >= b)
		UN32(0x67, a ? (uint32_t)__builtin_clz(a) : 32u)
		UN32(0x68, a ? (uint32_t)__builtin_ctz(a) : 32u)
		UN32(0x69, (uint32_t)__builtin_popcount(a))
		BIN32(0x6a, a + b)
		BIN32(0x6b, a - b)
		BIN32(0x6c, a * b)
		op_0x6d: { /* i32.div_s */
			int32_t b = (int32_t)sp[-1], a = (int32_t)sp[-2];
			if (b == 0)
				goto div_zero;
			if (a == INT32_MIN && b == -1)
				goto overflow;
			sp--;
			sp[-1] = (uint32_t)(a / b);
			NEXT();
		}
		op_0x6e: {
			uint32_t b = (uint32_t)sp[-1], a = (uint32_t)sp[-2];
			if (b == 0)
				goto div_zero;
			sp--;
			sp[-1] = a / b;
			NEXT();
		}
		op_0x6f: {
			int32_t b = (int32_t)sp[-1], a = (int32_t)sp[-2];
			if (b == 0)
				goto div_zero;
			sp--;
			sp[-1] = (b == -1) ? 0 : (uint32_t)(a % b);
			NEXT();
		}
		op_0x70: {
			uint32_t b = (uint32_t)sp[-1], a = (uint32_t)sp[-2];
			if (b == 0)
				goto div_zero;
			sp--;
			sp[-1] = a % b;
			NEXT();
		}
		BIN32(0x71, a & b)
		BIN32(0x72, a | b)
		BIN32(0x73, a ^ b)
		BIN32(0x74, a << (b & 31))
		BIN32(0x75, (uint32_t)((int32_t)a >> (b & 31)))
		BIN32(0x76, a >> (b & 31))
		BIN32(0x77, rotl32(a, b))
		BIN32(0x78, rotr32(a, b))
		UN64(0x79, a ? (uint64_t)__builtin_clzll(a) : 64u)
		UN64(0x7a, a ? (uint64_t)__builtin_ctzll(a) : 64u)
		UN64(0x7b, (uint64_t)__builtin_popcountll(a))
		BIN64(0x7c, a + b)
		BIN64(0x7d, a - b)
		BIN64(0x7e, a * b)
		op_0x7f: {
			int64_t b = (int64_t)sp[-1], a = (int64_t)sp[-2];
			if (b == 0)
				goto div_zero;
			if (a == INT64_MIN && b == -1)
				goto overflow;
			sp--;
			sp[-1] = (uint64_t)(a / b);
			NEXT();
		}
		op_0x80: {
			uint64_t b = sp[-1], a = sp[-2];
			if (b == 0)
				goto div_zero;
			sp--;
			sp[-1] = a / b;
			NEXT();
		}
		op_0x81: {
			int64_t b = (int64_t)sp[-1], a = (int64_t)sp[-2];
			if (b == 0)
				goto div_zero;
			sp--;
			sp[-1] = (b == -1) ? 0 : (uint64_t)(a % b);
			NEXT();
		}
		op_0x82: {
			uint64_t b = sp[-1], a = sp[-2];
			if (b == 0)
				goto div_zero;
			sp--;
			sp[-1] = a % b;
			NEXT();
		}
		BIN64(0x83, a & b)
		BIN64(0x84, a | b)
		BIN64(0x85, a ^ b)
		BIN64(0x86, a << (b & 63))
		BIN64(0x87, (uint64_t)((int64_t)a >> (b & 63)))
		BIN64(0x88, a >> (b & 63))
		BIN64(0x89, rotl64(a, b))
		BIN64(0x8a, rotr64(a, b))
		op_0x8b: sp[-1] = (uint32_t)sp[-1] & 0x7fffffffu; NEXT(); /* f32.abs */
		op_0x8c: sp[-1] = (uint32_t)sp[-1] ^ 0x80000000u; NEXT(); /* f32.neg */
		FUN32(0x8d, ceil32(a))
		FUN32(0x8e, floor32(a))
		FUN32(0x8f, trunc32(a))
		FUN32(0x90, nearest32(a))
		FUN32(0x91, sqrt32(a))
		FBIN32(0x92, a + b)
		FBIN32(0x93, a - b)
		FBIN32(0x94, a * b)
		FBIN32(0x95, a / b)
		FBIN32(0x96, min32(a, b))
		FBIN32(0x97, max32(a, b))
		op_0x98: /* f32.copysign */
			sp[-2] = ((uint32_t)sp[-2] & 0x7fffffffu) | ((uint32_t)sp[-1] & 0x80000000u);
			sp--;
			NEXT();
		op_0x99: sp[-1] &= ~(1ull << 63); NEXT();
		op_0x9a: sp[-1] ^= 1ull << 63; NEXT();
		FUN64(0x9b, ceil64(a))
		FUN64(0x9c, floor64(a))
		FUN64(0x9d, trunc64(a))
		FUN64(0x9e, nearest64(a))
		FUN64(0x9f, sqrt64(a))
		FBIN64(0xa0, a + b)
		FBIN64(0xa1, a - b)
		FBIN64(0xa2, a * b)
		FBIN64(0xa3, a / b)
		FBIN64(0xa4, min64(a, b))
		FBIN64(0xa5, max64(a, b))
		op_0xa6:
			sp[-2] = (sp[-2] & ~(1ull << 63)) | (sp[-1] & (1ull << 63));
			sp--;
			NEXT();
		op_0xa7: sp[-1] = (uint32_t)sp[-1]; NEXT(); /* i32.wrap_i64 */

		/* trapping float-to-int (spec 4.3.3 trunc): NaN, then range */
		op_0xa8: op_0xa9: op_0xaa: op_0xab:
		op_0xae: op_0xaf: op_0xb0: op_0xb1: {
			uint32_t op = pc[-1];
			double x = (op == 0xa8 || op == 0xa9 || op == 0xae || op == 0xaf)
					   ? (double)f32_of(sp[-1]) : f64_of(sp[-1]);
			if (isnan(x))
				goto bad_conversion;
			if (op == 0xa8 || op == 0xaa) {
				if (!TRUNC_RANGE(x, -2147483649.0, 2147483648.0))
					goto overflow;
				sp[-1] = (uint32_t)(int32_t)x;
			} else if (op == 0xa9 || op == 0xab) {
				if (!TRUNC_RANGE(x, -1.0, 4294967296.0))
					goto overflow;
				sp[-1] = (uint32_t)x;
			} else if (op == 0xae || op == 0xb0) {
				if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
					goto overflow;
				sp[-1] = (uint64_t)(int64_t)x;
			} else {
				if (!TRUNC_RANGE(x, -1.0, 18446744073709551616.0))
					goto overflow;
				sp[-1] = (uint64_t)x;
			}
			NEXT();
		}
		op_0xac: sp[-1] = (uint64_t)(int64_t)(int32_t)sp[-1]; NEXT();
		op_0xad: sp[-1] = (uint32_t)sp[-1]; NEXT();
		op_0xb2: sp[-1] = of_f32((float)(int32_t)sp[-1]); NEXT();
		op_0xb3: sp[-1] = of_f32((float)(uint32_t)sp[-1]); NEXT();
		op_0xb4: sp[-1] = of_f32((float)(int64_t)sp[-1]); NEXT();
		op_0xb5: sp[-1] = of_f32((float)sp[-1]); NEXT();
		op_0xb6: sp[-1] = of_f32((float)f64_of(sp[-1])); NEXT();
		op_0xb7: sp[-1] = of_f64((double)(int32_t)sp[-1]); NEXT();
		op_0xb8: sp[-1] = of_f64((double)(uint32_t)sp[-1]); NEXT();
		op_0xb9: sp[-1] = of_f64((double)(int64_t)sp[-1]); NEXT();
		op_0xba: sp[-1] = of_f64((double)sp[-1]); NEXT();
		op_0xbb: sp[-1] = of_f64((double)f32_of(sp[-1])); NEXT();
		op_0xbc: op_0xbd: op_0xbe: op_0xbf: /* reinterpret: same bits */
			NEXT();
		op_0xc0: sp[-1] = (uint32_t)(int32_t)(int8_t)sp[-1]; NEXT();
		op_0xc1: sp[-1] = (uint32_t)(int32_t)(int16_t)sp[-1]; NEXT();
		op_0xc2: sp[-1] = (uint64_t)(int64_t)(int8_t)sp[-1]; NEXT();
		op_0xc3: sp[-1] = (uint64_t)(int64_t)(int16_t)sp[-1]; NEXT();
		op_0xc4: sp[-1] = (uint64_t)(int64_t)(int32_t)sp[-1]; NEXT();

		op_OP_REF_NULL:
			*sp++ = 0;
			NEXT();
		op_OP_REF_IS_NULL:
			sp[-1] = sp[-1] == 0;
			NEXT();
		op_OP_REF_FUNC:
			*sp++ = (uint64_t)(uintptr_t)inst->funcs[*pc++];
			NEXT();

		/* 0xfc prefix: saturating truncation (spec 4.3.3 trunc_sat) */
		op_fc0: sp[-1] = sat_s32(f32_of(sp[-1])); NEXT();
		op_fc1: sp[-1] = sat_u32(f32_of(sp[-1])); NEXT();
		op_fc2: sp[-1] = sat_s32(f64_of(sp[-1])); NEXT();
		op_fc3: sp[-1] = sat_u32(f64_of(sp[-1])); NEXT();
		op_fc4: sp[-1] = sat_s64(f32_of(sp[-1])); NEXT();
		op_fc5: sp[-1] = sat_u64(f32_of(sp[-1])); NEXT();
		op_fc6: sp[-1] = sat_s64(f64_of(sp[-1])); NEXT();
		op_fc7: sp[-1] = sat_u64(f64_of(sp[-1])); NEXT();

		/* bulk memory and table instructions (spec 4.4.7, 4.4.6): the
		 * bounds are checked before anything is written */
		op_fc8: { /* memory.init */
			uint64_t n = (uint32_t)sp[-1], src = (uint32_t)sp[-2], d = (uint32_t)sp[-3];
			uint32_t x = *pc++;
			sp -= 3;
			const struct wasm_data *seg = &inst->m->datas[x];
			uint64_t len = inst->data_dropped[x] ? 0 : seg->len;
			if (src + n > len || d + n > memsize)
				goto mem_oob;
			if (n)
				memcpy(mem + d, seg->bytes + src, n);
			NEXT();
		}
		op_fc9:
			inst->data_dropped[*pc++] = true;
			NEXT();
		op_fc10: { /* memory.copy */
			uint64_t n = (uint32_t)sp[-1], src = (uint32_t)sp[-2], d = (uint32_t)sp[-3];
			sp -= 3;
			if (src + n > memsize || d + n > memsize)
				goto mem_oob;
			if (n)
				memmove(mem + d, mem + src, n);
			NEXT();
		}
		op_fc11: { /* memory.fill */
			uint64_t n = (uint32_t)sp[-1], d = (uint32_t)sp[-3];
			int v = (int)(uint8_t)sp[-2];
			sp -= 3;
			if (d + n > memsize)
				goto mem_oob;
			if (n)
				memset(mem + d, v, n);
			NEXT();
		}
		op_fc12: { /* table.init */
			uint64_t n = (uint32_t)sp[-1], src = (uint32_t)sp[-2], d = (uint32_t)sp[-3];
			struct wasm_elem_inst *seg = &inst->elems[pc[0]];
			struct kis_wasm_table *t = inst->tables[pc[1]];
			pc += 2;
			sp -= 3;
			if (src + n > seg->n || d + n > t->size)
				goto table_oob;
			if (n)
				memcpy(t->elems + d, seg->refs + src, n * 8);
			NEXT();
		}
		op_fc13:
			inst->elems[*pc++].n = 0;
			NEXT();
		op_fc14: { /* table.copy */
			uint64_t n = (uint32_t)sp[-1], src = (uint32_t)sp[-2], d = (uint32_t)sp[-3];
			struct kis_wasm_table *td = inst->tables[pc[0]], *ts = inst->tables[pc[1]];
			pc += 2;
			sp -= 3;
			if (src + n > ts->size || d + n > td->size)
				goto table_oob;
			if (n)
				memmove(td->elems + d, ts->elems + src, n * 8);
			NEXT();
		}
		op_fc15: { /* table.grow */
			struct kis_wasm_table *t = inst->tables[*pc++];
			uint32_t n = (uint32_t)sp[-1];
			int64_t r = wasm_table_grow(t, n, sp[-2]);
			sp--;
			sp[-1] = (uint32_t)r;
			NEXT();
		}
		op_fc16:
			*sp++ = inst->tables[*pc++]->size;
			NEXT();
		op_fc17: { /* table.fill */
			uint64_t n = (uint32_t)sp[-1], d = (uint32_t)sp[-3];
			uint64_t v = sp[-2];
			struct kis_wasm_table *t = inst->tables[*pc++];
			sp -= 3;
			if (d + n > t->size)
				goto table_oob;
			for (uint64_t i = 0; i < n; i++)
				t->elems[d + i] = v;
			NEXT();
		}
		/* fused binary operators (see OP_FUSED in internal.h) */
#define FUSED_HANDLERS(k, opcode, bits, expr)                                             \
	op_l_##k: {                                                                       \
		uint##bits##_t a = (uint##bits##_t)tos, b = (uint##bits##_t)fp[*pc++];    \
		SET_TOP((uint##bits##_t)(expr));                                          \
		NEXT_T();                                                                 \
	}                                                                                 \
	op_i_##k: {                                                                       \
		uint##bits##_t a = (uint##bits##_t)tos;                                   \
		uint##bits##_t b = (uint##bits##_t)(int##bits##_t)(int32_t)*pc++;         \
		SET_TOP((uint##bits##_t)(expr));                                          \
		NEXT_T();                                                                 \
	}                                                                                 \
	op_ll_##k: {                                                                      \
		uint##bits##_t a = (uint##bits##_t)fp[pc[0]], b = (uint##bits##_t)fp[pc[1]]; \
		pc += 2;                                                                  \
		PUSH_TOP((uint##bits##_t)(expr));                                         \
		NEXT_T();                                                                 \
	}                                                                                 \
	op_li_##k: {                                                                      \
		uint##bits##_t a = (uint##bits##_t)fp[pc[0]];                             \
		uint##bits##_t b = (uint##bits##_t)(int##bits##_t)(int32_t)pc[1];         \
		pc += 2;                                                                  \
		PUSH_TOP((uint##bits##_t)(expr));                                         \
		NEXT_T();                                                                 \
	}
		WASM_FUSABLE_BINOPS(FUSED_HANDLERS)
#undef FUSED_HANDLERS

		/* their forms that store the result or branch on it: operands
		 * first (n words of them), then the local or target word */
#define OPERANDS_s(bits) \
	uint##bits##_t b = (uint##bits##_t)tos, a = (uint##bits##_t)sp[-2]; \
	sp -= 2;
#define OPERANDS_l(bits) \
	uint##bits##_t a = (uint##bits##_t)tos, b = (uint##bits##_t)fp[pc[0]]; \
	sp--;
#define OPERANDS_i(bits) \
	uint##bits##_t a = (uint##bits##_t)tos, b = (uint##bits##_t)(int##bits##_t)(int32_t)pc[0]; \
	sp--;
#define OPERANDS_ll(bits) \
	uint##bits##_t a = (uint##bits##_t)fp[pc[0]], b = (uint##bits##_t)fp[pc[1]];
#define OPERANDS_li(bits) \
	uint##bits##_t a = (uint##bits##_t)fp[pc[0]], b = (uint##bits##_t)(int##bits##_t)(int32_t)pc[1];
/* after the operands: whether the shape popped (the cached top is gone) */
#define NEXT_s() NEXT()
#define NEXT_l() NEXT()
#define NEXT_i() NEXT()
#define NEXT_ll() NEXT_T()
#define NEXT_li() NEXT_T()
#define ARITH_HANDLERS(k, bits, expr, sh, n)                      \
	op_##sh##_set_##k: {                                      \
		OPERANDS_##sh(bits)                               \
		fp[pc[n]] = (uint##bits##_t)(expr);               \
		pc += n + 1;                                      \
		NEXT_##sh();                                      \
	}                                                         \
	op_##sh##_tee_##k: {                                      \
		OPERANDS_##sh(bits)                               \
		uint64_t v = (uint##bits##_t)(expr);              \
		fp[pc[n]] = v;                                    \
		PUSH_TOP(v);                                      \
		pc += n + 1;                                      \
		NEXT_T();                                         \
	}
#define CMP_HANDLERS(k, bits, expr, sh, n)                        \
	op_##sh##_br_##k: {                                       \
		OPERANDS_##sh(bits)                               \
		if ((expr) != 0)                                  \
			JUMP(pc[n]);                              \
		else                                              \
			pc += n + 1;                              \
		NEXT_##sh();                                      \
	}                                                         \
	op_##sh##_brz_##k: {                                      \
		OPERANDS_##sh(bits)                               \
		if ((expr) != 0)                                  \
			pc += n + 1;                              \
		else                                              \
			JUMP(pc[n]);                              \
		NEXT_##sh();                                      \
	}
#define ALL_SHAPES(H, k, bits, expr) \
	H(k, bits, expr, s, 0)        \
	H(k, bits, expr, l, 1)        \
	H(k, bits, expr, i, 1)        \
	H(k, bits, expr, ll, 2)       \
	H(k, bits, expr, li, 2)
#define ALL_CMP(k, opcode, bits, expr) ALL_SHAPES(CMP_HANDLERS, k, bits, expr)
#define ALL_ARITH(k, opcode, bits, expr) ALL_SHAPES(ARITH_HANDLERS, k, bits, expr)
		WASM_FUSABLE_COMPARES(ALL_CMP)
		WASM_FUSABLE_ARITH(ALL_ARITH)
#undef ALL_CMP
#undef ALL_ARITH
#undef ALL_SHAPES
#undef CMP_HANDLERS
#undef ARITH_HANDLERS
#undef NEXT_s
#undef NEXT_l
#undef NEXT_i
#undef NEXT_ll
#undef NEXT_li

		/* loads and stores with operands in locals */
#define LOCAL_LOAD(op, n, conv)                                                   \
	op_lload_##op: {                                                          \
		uint64_t ea = (uint64_t)(uint32_t)fp[pc[0]] + pc[1];              \
		pc += 2;                                                          \
		if (ea + (n) > memsize)                                           \
			goto mem_oob;                                             \
		const uint8_t *p = mem + ea;                                      \
		PUSH_TOP(conv);                                                   \
		NEXT_T();                                                         \
	}
		WASM_LOADS(LOCAL_LOAD)
#undef LOCAL_LOAD
#define LOCAL_STORE(op, n)                                                        \
	op_llstore_##op: {                                                        \
		uint64_t ea = (uint64_t)(uint32_t)fp[pc[0]] + pc[2];              \
		uint64_t v = fp[pc[1]];                                           \
		pc += 3;                                                          \
		if (ea + (n) > memsize)                                           \
			goto mem_oob;                                             \
		memcpy(mem + ea, &v, (n));                                        \
		NEXT_T();                                                         \
	}
		WASM_STORES(LOCAL_STORE)
#undef LOCAL_STORE
#define LOCAL_IMM_LOAD(op, n, conv)                                               \
	op_liload_##op: {                                                         \
		uint64_t ea = (uint64_t)(uint32_t)((uint32_t)fp[pc[0]] + pc[1]) + pc[2]; \
		pc += 3;                                                          \
		if (ea + (n) > memsize)                                           \
			goto mem_oob;                                             \
		const uint8_t *p = mem + ea;                                      \
		PUSH_TOP(conv);                                                   \
		NEXT_T();                                                         \
	}
		WASM_LOADS(LOCAL_IMM_LOAD)
#undef LOCAL_IMM_LOAD
		/* loads from the stack top plus a constant, wrapping at 32 bits */
#define STACK_IMM_LOAD(op, n, conv)                                               \
	op_siload_##op: {                                                         \
		uint64_t ea = (uint64_t)(uint32_t)((uint32_t)tos + pc[0]) + pc[1]; \
		pc += 2;                                                          \
		if (ea + (n) > memsize)                                           \
			goto mem_oob;                                             \
		const uint8_t *p = mem + ea;                                      \
		SET_TOP(conv);                                                    \
		NEXT_T();                                                         \
	}
		WASM_LOADS(STACK_IMM_LOAD)
#undef STACK_IMM_LOAD
		/* loads from an indexed element (OP_LOAD_IDX in internal.h) */
#define INDEX_LOAD(op, n, conv)                                                   \
	op_idxload_##op: {                                                        \
		uint32_t i_ = (uint32_t)fp[pc[0]] << (pc[1] & 31);                \
		uint64_t ea = (uint64_t)(uint32_t)(i_ + pc[2]) + pc[3];           \
		pc += 4;                                                          \
		if (ea + (n) > memsize)                                           \
			goto mem_oob;                                             \
		const uint8_t *p = mem + ea;                                      \
		PUSH_TOP(conv);                                                   \
		NEXT_T();                                                         \
	}
		WASM_LOADS(INDEX_LOAD)
#undef INDEX_LOAD
#define INDEX_TEE_LOAD(op, n, conv)                                               \
	op_idxteeload_##op: {                                                     \
		uint32_t a_ = ((uint32_t)fp[pc[0]] << (pc[1] & 31)) + pc[2];      \
		fp[pc[3]] = a_;                                                   \
		uint64_t ea = (uint64_t)a_ + pc[4];                               \
		pc += 5;                                                          \
		if (ea + (n) > memsize)                                           \
			goto mem_oob;                                             \
		const uint8_t *p = mem + ea;                                      \
		PUSH_TOP(conv);                                                   \
		NEXT_T();                                                         \
	}
		WASM_LOADS(INDEX_TEE_LOAD)
#undef INDEX_TEE_LOAD

		/* float operators with operands in locals */
#define FLOAT_OF_float f32_of
#define FLOAT_OF_double f64_of
#define OF_FLOAT_float of_f32
#define OF_FLOAT_double of_f64
#define FLOAT_HANDLERS(k, opcode, type, expr)                                     \
	op_fl_##k: {                                                              \
		type a = FLOAT_OF_##type(tos), b = FLOAT_OF_##type(fp[*pc++]);    \
		SET_TOP(OF_FLOAT_##type(expr));                                   \
		NEXT_T();                                                         \
	}                                                                         \
	op_fll_##k: {                                                             \
		type a = FLOAT_OF_##type(fp[pc[0]]), b = FLOAT_OF_##type(fp[pc[1]]); \
		pc += 2;                                                          \
		PUSH_TOP(OF_FLOAT_##type(expr));                                  \
		NEXT_T();                                                         \
	}
		WASM_FUSABLE_FLOATS(FLOAT_HANDLERS)
#undef FLOAT_HANDLERS

		/* float operators whose right operand is loaded through a local */
#define RD_float(p) f32_of(rd32(p))
#define RD_double(p) f64_of(rd64(p))
#define FLOAD_HANDLERS(k, opcode, type, expr)                                     \
	op_floadl_##k: {                                                          \
		uint64_t ea = (uint64_t)(uint32_t)fp[pc[0]] + pc[1];              \
		pc += 2;                                                          \
		if (ea + sizeof(type) > memsize)                                  \
			goto mem_oob;                                             \
		type a = FLOAT_OF_##type(tos), b = RD_##type(mem + ea);           \
		SET_TOP(OF_FLOAT_##type(expr));                                   \
		NEXT_T();                                                         \
	}                                                                         \
	op_floadli_##k: {                                                         \
		uint64_t ea = (uint64_t)(uint32_t)((uint32_t)fp[pc[0]] + pc[1]) + pc[2]; \
		pc += 3;                                                          \
		if (ea + sizeof(type) > memsize)                                  \
			goto mem_oob;                                             \
		type a = FLOAT_OF_##type(tos), b = RD_##type(mem + ea);           \
		SET_TOP(OF_FLOAT_##type(expr));                                   \
		NEXT_T();                                                         \
	}                                                                         \
	op_fload2_##k: {                                                          \
		uint64_t ea = (uint64_t)(uint32_t)((uint32_t)fp[pc[0]] + pc[1]) + pc[2]; \
		uint64_t eb = (uint64_t)(uint32_t)((uint32_t)fp[pc[3]] + pc[4]) + pc[5]; \
		pc += 6;                                                          \
		if (ea + sizeof(type) > memsize || eb + sizeof(type) > memsize)   \
			goto mem_oob;                                             \
		type a = RD_##type(mem + ea), b = RD_##type(mem + eb);            \
		PUSH_TOP(OF_FLOAT_##type(expr));                                  \
		NEXT_T();                                                         \
	}
		WASM_FUSABLE_FLOATS(FLOAD_HANDLERS)
#undef FLOAD_HANDLERS

		/* float operators into a local */
#define FSET_HANDLERS(k, opcode, type, expr)                                      \
	op_fsets_##k: {                                                           \
		type b = FLOAT_OF_##type(tos), a = FLOAT_OF_##type(sp[-2]);       \
		sp -= 2;                                                          \
		fp[*pc++] = OF_FLOAT_##type(expr);                                \
		NEXT();                                                           \
	}                                                                         \
	op_fsetl_##k: {                                                           \
		type a = FLOAT_OF_##type(tos), b = FLOAT_OF_##type(fp[pc[0]]);    \
		sp--;                                                             \
		fp[pc[1]] = OF_FLOAT_##type(expr);                                \
		pc += 2;                                                          \
		NEXT();                                                           \
	}
		WASM_FUSABLE_FLOATS(FSET_HANDLERS)
#undef FSET_HANDLERS
#undef RD_float
#undef RD_double

	/* a run of f64.add starting with a local operand (OP_FSUM64 in
	 * internal.h), each add 'a + b' with b the running value */
	op_fsum64: {
		double v = f64_of(tos) + f64_of(fp[pc[0]]);
		uint32_t n = pc[1];
		for (uint32_t i = 1; i <= n; i++)
			v = f64_of(sp[-1 - (ptrdiff_t)i]) + v;
		pc += 2;
		sp -= n;
		SET_TOP(of_f64(v));
		NEXT_T();
	}
	op_fsum64_set: {
		double v = f64_of(tos) + f64_of(fp[pc[0]]);
		uint32_t n = pc[1];
		for (uint32_t i = 1; i <= n; i++)
			v = f64_of(sp[-1 - (ptrdiff_t)i]) + v;
		sp -= n + 1;
		fp[pc[2]] = of_f64(v);
		pc += 3;
		NEXT();
	}
	op_set_k32:
		fp[pc[0]] = pc[1];
		pc += 2;
		NEXT_T();
	op_set_k64:
		fp[pc[0]] = (uint64_t)pc[1] | ((uint64_t)pc[2] << 32);
		pc += 3;
		NEXT_T();
	op_copy:
		fp[pc[1]] = fp[pc[0]];
		pc += 2;
		NEXT_T();
#define CHAIN_HANDLER(i, k1, k2, e1, e2)                                   \
	op_chain_##i: {                                                    \
		uint32_t inner;                                            \
		{                                                          \
			uint32_t a = (uint32_t)fp[pc[0]], b = pc[1];       \
			inner = (uint32_t)(e1);                            \
		}                                                          \
		{                                                          \
			uint32_t a = (uint32_t)tos, b = inner;             \
			SET_TOP((uint32_t)(e2));                           \
		}                                                          \
		pc += 2;                                                   \
		NEXT_T();                                                  \
	}
	WASM_FUSABLE_CHAINS(CHAIN_HANDLER)
#undef CHAIN_HANDLER
	/* an I form and the operator after it (OP_ICHAIN_S in internal.h) */
#define ICHAIN_HANDLERS(i, first, k2, e1, e2)                              \
	op_ichain_s_##i: {                                                 \
		uint32_t inner;                                            \
		{                                                          \
			uint32_t a = (uint32_t)tos, b = pc[0];             \
			inner = (uint32_t)(e1);                            \
		}                                                          \
		{                                                          \
			uint32_t a = (uint32_t)sp[-2], b = inner;          \
			sp--;                                              \
			SET_TOP((uint32_t)(e2));                           \
		}                                                          \
		pc += 1;                                                   \
		NEXT_T();                                                  \
	}                                                                  \
	op_ichain_l_##i: {                                                 \
		uint32_t inner;                                            \
		{                                                          \
			uint32_t a = (uint32_t)tos, b = pc[0];             \
			inner = (uint32_t)(e1);                            \
		}                                                          \
		{                                                          \
			uint32_t a = inner, b = (uint32_t)fp[pc[1]];       \
			SET_TOP((uint32_t)(e2));                           \
		}                                                          \
		pc += 2;                                                   \
		NEXT_T();                                                  \
	}                                                                  \
	op_ichain_i_##i: {                                                 \
		uint32_t inner;                                            \
		{                                                          \
			uint32_t a = (uint32_t)tos, b = pc[0];             \
			inner = (uint32_t)(e1);                            \
		}                                                          \
		{                                                          \
			uint32_t a = inner, b = pc[1];                     \
			SET_TOP((uint32_t)(e2));                           \
		}                                                          \
		pc += 2;                                                   \
		NEXT_T();                                                  \
	}
	WASM_I_CHAINS(ICHAIN_HANDLERS)
#undef ICHAIN_HANDLERS
	/* the same with an LI form first (OP_LICHAIN_L in internal.h) */
#define LICHAIN_HANDLERS(i, first, k2, e1, e2)                             \
	op_lichain_l_##i: {                                                \
		uint32_t inner;                                            \
		{                                                          \
			uint32_t a = (uint32_t)fp[pc[0]], b = pc[1];       \
			inner = (uint32_t)(e1);                            \
		}                                                          \
		{                                                          \
			uint32_t a = inner, b = (uint32_t)fp[pc[2]];       \
			PUSH_TOP((uint32_t)(e2));                          \
		}                                                          \
		pc += 3;                                                   \
		NEXT_T();                                                  \
	}                                                                  \
	op_lichain_i_##i: {                                                \
		uint32_t inner;                                            \
		{                                                          \
			uint32_t a = (uint32_t)fp[pc[0]], b = pc[1];       \
			inner = (uint32_t)(e1);                            \
		}                                                          \
		{                                                          \
			uint32_t a = inner, b = pc[2];                     \
			PUSH_TOP((uint32_t)(e2));                          \
		}                                                          \
		pc += 3;                                                   \
		NEXT_T();                                                  \
	}
	WASM_I_CHAINS(LICHAIN_HANDLERS)
#undef LICHAIN_HANDLERS
	/* a loop's step and test (OP_STEP_BR_I in internal.h) */
#define STEP_HANDLERS(k, opcode, bits, expr)                                  \
	op_step_i_##k: {                                                      \
		uint32_t a = (uint32_t)fp[pc[0]] + pc[1], b = pc[3];          \
		fp[pc[2]] = a;                                                \
		if (expr)                                                     \
			JUMP(pc[4]);                                          \
		else                                                          \
			pc += 5;                                              \
		NEXT_T();                                                     \
	}                                                                     \
	op_step_l_##k: {                                                      \
		uint32_t a = (uint32_t)fp[pc[0]] + pc[1];                     \
		fp[pc[2]] = a;                                                \
		uint32_t b = (uint32_t)fp[pc[3]];                             \
		if (expr)                                                     \
			JUMP(pc[4]);                                          \
		else                                                          \
			pc += 5;                                              \
		NEXT_T();                                                     \
	}
	WASM_I32_COMPARES(STEP_HANDLERS)
#undef STEP_HANDLERS
	op_copy_n: {
		uint32_t n = *pc++;
		do {
			fp[pc[1]] = fp[pc[0]];
			pc += 2;
		} while (--n);
		NEXT_T();
	}
	op_rsub_l32:
		SET_TOP((uint32_t)((uint32_t)fp[*pc++] - (uint32_t)tos));
		NEXT_T();
	op_rsub_i32:
		SET_TOP((uint32_t)(*pc++ - (uint32_t)tos));
		NEXT_T();
	op_rsub_l64:
		SET_TOP(fp[*pc++] - tos);
		NEXT_T();
	op_rsub_i64:
		SET_TOP((uint64_t)(int64_t)(int32_t)*pc++ - tos);
		NEXT_T();

	op_simd: { /* vector instructions: simd.c */
		uint32_t w = pc[0];
		sp = wasm_simd_exec(pc, sp, fp, mem, memsize, inst);
		if (!sp)
			goto mem_oob;
		pc += 1 + (w >> 16);
		NEXT();
	}

	op_bad:
		trap = KIS_WASM_TRAP_UNREACHABLE; /* not produced by compile.c */
		goto trapped;

	call:
		/* Calls (spec 4.4.8): the interrupt flag and fuel are checked
		 * here and at loop headers, so every unbounded run passes one. */
		callee->prof++; /* the mixed tier's profile (internal.h) */
		TICK();
		if (s->depth >= KIS_WASM_MAX_CALL_DEPTH) {
			trap = KIS_WASM_TRAP_STACK_EXHAUSTED;
			goto trapped;
		}
		{
			const struct wasm_functype *ft = callee->type;
			if (callee->host) {
				if (sp + ft->nps + ft->nrs > s->stack_end) {
					trap = KIS_WASM_TRAP_STACK_EXHAUSTED;
					goto trapped;
				}
				/* arguments copied above the stack top so results
				 * never overwrite them; re-entry starts above both */
				memcpy(sp, sp - ft->nps, (size_t)ft->nps * 8);
				s->sp = sp + ft->nps + ft->nrs;
				s->depth++;
				trap = callee->host(callee->user, inst, sp, sp + ft->nps);
				s->depth--;
				if (trap != KIS_WASM_OK)
					goto trapped;
				memmove(sp - ft->nps, sp + ft->nps, (size_t)ft->nrs * 8);
				sp = sp - ft->nps + ft->nrs;
				if (!fn) { /* the entry itself was a host function */
					s->sp = sp;
					return KIS_WASM_OK;
				}
				if (memo) {
					mem = memo->data;
					memsize = memo->size;
				}
				NEXT();
			}
			const struct wasm_code *cd = callee->code;
			uint64_t *nfp = sp - ft->nps;
			if (nfp + cd->max_height > s->stack_end) {
				trap = KIS_WASM_TRAP_STACK_EXHAUSTED;
				goto trapped;
			}
			struct wasm_frame *fr = &s->frames[s->depth++];
			fr->ret_pc = pc;
			fr->fp = fp;
			fr->func = fn;
			fr->code = code;
			/* declared locals start at zero; functions have few, so
			 * a plain loop: the empty asm keeps gcc from turning it
			 * into a call to memset, which cost more than the
			 * whole call for one local */
			for (uint32_t i = ft->nps; i < cd->nlocals; i++) {
				nfp[i] = 0;
				__asm__("" : "+r"(i));
			}
			fp = nfp;
			sp = fp + cd->nlocals;
			CHARGE();
			fn = callee;
			code = cd->ops;
			pc = code;
			if (fn->inst != inst) { /* mem: see op_OP_RETURN */
				inst = fn->inst;
				memo = inst->m->nmems ? inst->mems[0] : NULL;
				mem = memo ? memo->data : NULL;
				memsize = memo ? memo->size : 0;
			}
		}
		NEXT();

#undef NEXT
#undef NEXT_T
#undef DISPATCH
#undef SET_TOP
#undef PUSH_TOP
#undef TICK
#undef JUMP
out_of_fuel:
	s->fuel = 0;
	trap = KIS_WASM_TRAP_OUT_OF_FUEL;
	goto trapped;
interrupted:
	trap = KIS_WASM_TRAP_INTERRUPTED;
	goto trapped;
mem_oob:
	trap = KIS_WASM_TRAP_MEMORY_OOB;
	goto trapped;
table_oob:
	trap = KIS_WASM_TRAP_TABLE_OOB;
	goto trapped;
div_zero:
	trap = KIS_WASM_TRAP_DIV_ZERO;
	goto trapped;
overflow:
	trap = KIS_WASM_TRAP_INT_OVERFLOW;
	goto trapped;
bad_conversion:
	trap = KIS_WASM_TRAP_INVALID_CONVERSION;
trapped:
	/* a run that ends here (proc_exit, a trap, the deadline's interrupt)
	 * still charges its running frame: a loop that never calls out, cut
	 * off by the deadline, took all its ticks there */
	CHARGE();
#undef CHARGE
	s->depth = entry_depth;
	return trap;
}

/* Compiled functions' entry (jit_rt.c's wasm_jit_invoke), given by
 * jit_rt.c before the first function has native code (f->jit_wrap). */
static _Atomic(wasm_compiled_entry_fn) compiled_entry;

void wasm_set_compiled_entry(wasm_compiled_entry_fn fn)
{
	atomic_store_explicit(&compiled_entry, fn, memory_order_release);
}

/* The entry to either engine: an interpreted f runs here, a compiled one in
 * jit_rt.c, whose calls of interpreted functions come back here (the two
 * engines call each other across instances: see jit_rt.c's head). */
enum kis_wasm_trap wasm_invoke(struct kis_wasm_store *s, struct kis_wasm_func *f,
			       const uint64_t *args, uint64_t *results)
{
	if (f->jit_wrap) /* compiled: jit_rt.c runs it */
		return atomic_load_explicit(&compiled_entry, memory_order_acquire)(s, f, args,
										   results);
	const struct wasm_functype *ft = f->type;
	uint64_t *base = s->sp;
	if (base + ft->nps + ft->nrs + 1 > s->stack_end)
		return KIS_WASM_TRAP_STACK_EXHAUSTED;
	if (ft->nps)
		memcpy(base, args, (size_t)ft->nps * 8);
	s->sp = base + ft->nps;
	enum kis_wasm_trap t = run(s, f);
	if (t == KIS_WASM_OK && ft->nrs)
		memcpy(results, base, (size_t)ft->nrs * 8);
	s->sp = base;
	return t;
}
