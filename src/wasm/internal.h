/* SPDX-License-Identifier: MIT */
/* Internal types of the WebAssembly runtime shared by its phases: the decoded
 * module, the translated code format, and the runtime objects of a store. */
#ifndef KIS_WASM_INTERNAL_H
#define KIS_WASM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kis/wasm.h"
#include "core/util.h"
#include "wasm/config.h"

/* ---- Module (spec 2.5), as decoded ---- */

struct wasm_functype {
	uint32_t np, nr;
	uint8_t *t; /* np params then nr results */
	uint32_t nps, nrs; /* the same counted in stack slots: a v128 takes two */
};

/* Stack slots that n values of the types t take: two for a v128, else one. */
static inline uint32_t wasm_slots(const uint8_t *t, uint32_t n)
{
	uint32_t s = n;
	for (uint32_t i = 0; i < n; i++)
		s += t[i] == KIS_WASM_V128;
	return s;
}

struct wasm_limits {
	uint32_t min, max;
	bool has_max;
};

struct wasm_tabletype {
	uint8_t elem;
	struct wasm_limits lim;
};

struct wasm_globaltype {
	uint8_t type;
	bool mut;
};

/* A constant expression of Wasm 2.0 (spec 3.3.10) is a single instruction:
 * op is 0x41..0x44 (val holds the bits), 0xfd (v128.const, val the low and
 * hi the high 64 bits), 0xd0 (ref.null), 0xd2 (ref.func, val = function
 * index) or 0x23 (global.get, val = global index). */
struct wasm_constexpr {
	uint8_t op;
	uint64_t val, hi;
};

struct wasm_import {
	char *module, *name;
	uint8_t kind;
	uint32_t idx; /* index in the space of that kind */
};

struct wasm_export {
	char *name;
	uint32_t name_len; /* names may hold NUL bytes (spec 5.2.4) */
	uint8_t kind;
	uint32_t idx;
};

enum { SEG_ACTIVE, SEG_PASSIVE, SEG_DECLARATIVE };

struct wasm_elem {
	uint8_t mode, type;
	uint32_t table;
	struct wasm_constexpr offset;
	uint32_t n;
	struct wasm_constexpr *init;
};

struct wasm_data {
	uint8_t mode;
	uint32_t mem;
	struct wasm_constexpr offset;
	uint32_t len;
	uint8_t *bytes;
};

/* A function body after translation (compile.c): a sequence of 32-bit words,
 * an internal opcode followed by its decoded immediates. */
struct wasm_code {
	uint32_t *ops;
	uint32_t nops;
	uint32_t nlocals;    /* params + declared locals */
	uint32_t max_height; /* nlocals + deepest operand stack */
	const uint8_t *body; /* the validated body, where it lies in the module's
			      * src (kis_wasm_module), for jit.c */
	uint32_t body_len;
};

struct kis_wasm_module {
	struct wasm_functype *types;
	uint32_t ntypes;
	struct wasm_import *imports;
	uint32_t nimports;
	uint32_t *func_types; /* type index of every function, imports first */
	uint32_t nfuncs, nfunc_imports;
	struct wasm_code *codes; /* nfuncs - nfunc_imports */
	struct wasm_tabletype *tables;
	uint32_t ntables, ntable_imports;
	struct wasm_limits *mems;
	uint32_t nmems, nmem_imports;
	struct wasm_globaltype *globals;
	struct wasm_constexpr *global_init; /* for defined globals only */
	uint32_t nglobals, nglobal_imports;
	struct wasm_export *exports;
	uint32_t nexports;
	int64_t start; /* -1 when absent */
	struct wasm_elem *elems;
	uint32_t nelems;
	struct wasm_data *datas;
	uint32_t ndatas;
	bool has_datacount;
	uint32_t datacount;
	uint8_t *declared; /* per function: may be named by ref.func (spec 3.4.10 C.refs) */
	struct wasm_jit_module *jit; /* its machine code, made at the first
				      * instantiation in a compiling store (jit.h) */
	/* how jit is released: set with it by jit_load.c, so that the
	 * decoder, which owns the module, does not call up into the
	 * compiler's files (issue 42: decode.c <-> jit_load.c was a circle) */
	void (*jit_free)(struct wasm_jit_module *jm);
	bool jit_guard; /* the code is for guard-region memories (jit.h) */
	uint8_t jit_tier; /* WASM_JIT_TIER_OPT, _FAST or _MIXED (jit.h): how hard LLVM works */
	/* at WASM_JIT_TIER_MIXED, the interpreter's profile: per defined
	 * function, its count (struct kis_wasm_func.prof, saturated), owned
	 * by whoever set it; jit_nprof entries (other than the defined
	 * functions' count: no profile, all at the optimising tier) */
	const uint32_t *jit_prof;
	uint32_t jit_nprof;
	/* threads the compile may use (0 or 1: this one only). Set only by
	 * a caller whose confinement allows thread creation (kis-helper's
	 * filter does; the wasm tier's child kills a clone) */
	uint8_t jit_threads;
	/* Loaded for cached machine code (wasm_module_load_for_cache): the
	 * bodies are kept but not yet validated and translated, from
	 * codes[bodies_done] on; wasm_module_finish_bodies does it, before
	 * anything but linking the cached code may use them. */
	bool bodies_deferred;
	uint32_t bodies_done;
	uint8_t *src; /* the binary it was decoded from (a copy): what a
		       * compiler in another process decodes again (jit_remote.c) */
	size_t src_len;
	size_t src_map; /* src is a mapping of this many bytes (module_load), or 0: malloc'd */
};

/* ---- Translated code: internal opcodes ----
 * Wasm's own numbering is kept for instructions that translate one to one;
 * the 0xfc-prefixed ones become OP_FC_BASE + subopcode; control flow that
 * validation resolves becomes the jump forms below (in unused opcode slots). */
enum {
	OP_UNREACHABLE = 0x00,
	OP_NOP = 0x01,
	OP_JMP = 0x02,         /* target (may carry WASM_LOOP_EDGE) */
	OP_LOOP_CHECK = 0x03,  /* interrupt flag and fuel, at every loop header */
	OP_JMP_IF_NOT = 0x04,  /* target; pops the condition */
	OP_BR_IF_SIMPLE = 0x05, /* target; pops, jumps when non-zero, no unwinding */
	OP_BR = 0x0c,          /* target, height, arity */
	OP_BR_IF = 0x0d,       /* target, height, arity */
	OP_BR_TABLE = 0x0e,    /* n, arity, then n+1 pairs (target, height) */
	OP_RETURN = 0x0f,      /* arity */
	OP_CALL = 0x10,        /* function index */
	OP_CALL_INDIRECT = 0x11, /* type index, table index */
	OP_DROP = 0x1a,
	OP_SELECT = 0x1b,
	OP_LOCAL_GET = 0x20,
	OP_LOCAL_SET = 0x21,
	OP_LOCAL_TEE = 0x22,
	OP_GLOBAL_GET = 0x23,
	OP_GLOBAL_SET = 0x24,
	OP_TABLE_GET = 0x25,
	OP_TABLE_SET = 0x26,
	OP_I32_LOAD = 0x28, /* loads and stores 0x28..0x3e: one word, the offset */
	OP_I64_STORE32 = 0x3e,
	OP_MEMORY_SIZE = 0x3f,
	OP_MEMORY_GROW = 0x40,
	OP_I32_CONST = 0x41, /* 1 word */
	OP_I64_CONST = 0x42, /* 2 words, low first */
	OP_F32_CONST = 0x43,
	OP_F64_CONST = 0x44,
	/* 0x45 .. 0xc4: numeric instructions, no immediates */
	OP_REF_NULL = 0xd0,
	OP_REF_IS_NULL = 0xd1,
	OP_REF_FUNC = 0xd2, /* function index */
	OP_FC_BASE = 0xe0,  /* 0xfc n -> 0xe0 + n, n <= 17 */
	/* Fused forms of the binary operators below (superinstructions made
	 * by compile.c), OP_FUSED + 64 * form + index:
	 *   form 0 "L":  top op local[x]            (local.get x; op)
	 *   form 1 "I":  top op imm                 (t.const imm; op)
	 *   form 2 "LL": push local[x] op local[y]  (local.get x; local.get y; op)
	 *   form 3 "LI": push local[x] op imm       (local.get x; t.const imm; op)
	 * imm is one word, sign-extended for i64. Each of the five operand
	 * shapes (S = both from the stack, L, I, LL, LI) also has forms that
	 * put the result in a local (op; local.set z), also keep it on the
	 * stack (op; local.tee z) -- arithmetic only -- or branch when it is
	 * non-zero (op; br_if without unwinding) or zero (op; if) -- compares
	 * only --, with z or the target as the last immediate. (All forms for
	 * all operators would be a thousand handlers, which takes compilers
	 * minutes to build.) */
	OP_FUSED = 0x100,
	/* loads with the address in a local (local.get x; load): x, offset;
	 * stores with address and value in locals: x, y, offset */
	OP_LOAD_L = OP_FUSED + 64 * 24,  /* + opcode - 0x28 */
	OP_STORE_LL = OP_LOAD_L + 16,     /* + opcode - 0x36 */
	/* loads from local[x] + imm (local.get x; i32.const imm; i32.add;
	 * load), the sum wrapping at 32 bits as i32.add does: x, imm, offset */
	OP_LOAD_LI = OP_STORE_LL + 16,    /* + opcode - 0x28 */
	/* float add/sub/mul with operands from locals: L (top op local[x]) and
	 * LL (push local[x] op local[y]) */
	OP_FLOAT_L = OP_LOAD_LI + 16,     /* + index in WASM_FUSABLE_FLOATS */
	OP_FLOAT_LL = OP_FLOAT_L + 8,
	/* constants and locals straight into locals: 't.const c; local.set z'
	 * (z, c; c as two words for 64-bit) and 'local.get x; local.set z' (x, z) */
	OP_SET_K32 = OP_FLOAT_LL + 8,
	OP_SET_K64,
	OP_COPY,
	/* subtraction with the left operand moved after the right one (see
	 * fuse_left_operand in compile.c): top = local[x] - top (x), top =
	 * imm - top (imm, sign-extended for i64) */
	OP_RSUB_L32,
	OP_RSUB_I32,
	OP_RSUB_L64,
	OP_RSUB_I64,
	/* float add/sub/mul whose right operand is loaded (t.load after the
	 * left operand): top = top op mem[local[x] + offset] (x, offset) and
	 * top op mem[(local[x] + imm) mod 2^32 + offset] (x, imm, offset);
	 * + index in WASM_FUSABLE_FLOATS, f32.load for the float ones */
	OP_FLOAD_L,
	OP_FLOAD_LI = OP_FLOAD_L + 8,
	/* a run of 'local.get x; local.set z': n, then n pairs (x, z), copied
	 * in order */
	OP_COPY_N = OP_FLOAD_LI + 8,
	/* float add/sub/mul of two values loaded through locals, pushed:
	 * x1, imm1, offset1, x2, imm2, offset2 (each address as in
	 * OP_FLOAD_LI); + index in WASM_FUSABLE_FLOATS */
	OP_FLOAD2,
	OP_FLOAD2_LAST = OP_FLOAD2 + 7, /* its eight slots */
	/* two operators in one: top = top k2 (local[x] k1 imm) for the pairs
	 * of WASM_FUSABLE_CHAINS (x, imm); + index there */
	OP_CHAIN,
	OP_CHAIN_LAST = OP_CHAIN + 15, /* its sixteen slots */
	/* a loop's counting step and exit test in one: 'local.tee z (i32.add
	 * (local.get x) (i32.const c)); <i32 compare> with a constant d (form
	 * I) or local[d] (form L); br_if': local[z] = local[x] + c, then jump
	 * when local[z] cmp d. x, c, z, d, target; + compare index (0..9 of
	 * WASM_FUSABLE_COMPARES) */
	OP_STEP_BR_I,
	OP_STEP_BR_L = OP_STEP_BR_I + 10,
	OP_STEP_BR_LAST = OP_STEP_BR_L + 9,
	/* loads whose address is the stack top plus a constant ('i32.const c;
	 * i32.add; load'), the sum wrapping at 32 bits: c, offset; + opcode -
	 * 0x28 */
	OP_LOAD_SI,
	OP_LOAD_SI_LAST = OP_LOAD_SI + 13,
	/* float add/sub/mul into a local ('op; local.set z'): form S (both
	 * operands on the stack; z) and form L (top op local[x]; x, z); + index
	 * in WASM_FUSABLE_FLOATS */
	OP_FSET_S,
	OP_FSET_L = OP_FSET_S + 8,
	OP_FSET_LAST = OP_FSET_L + 7,
	/* a run of f64.add on the stack that starts with a local operand
	 * ('local.get x; f64.add', then n times f64.add), as in matmul's
	 * 's + p3 + p2 + p1 + p0' after an unrolled inner product: v = top +
	 * local[x], then n times v = (the value below) + v, in the order the
	 * adds ran. FSUM64 pushes v (x, n); FSUM64_SET stores it in local[z]
	 * ('... ; local.set z': x, n, z) */
	OP_FSUM64,
	OP_FSUM64_SET,
	/* an I form (top k1 imm1, or OP_RSUB_I32) and the i32 operator after
	 * it in one, for the pairs of WASM_I_CHAINS: form S (top = below k2
	 * inner; imm1), form L (top = inner k2 local[x]; imm1, x) and form I
	 * (top = inner k2 imm2; imm1, imm2), inner being the I form's result;
	 * + index there */
	OP_ICHAIN_S,
	OP_ICHAIN_L = OP_ICHAIN_S + 8,
	OP_ICHAIN_I = OP_ICHAIN_L + 8,
	OP_ICHAIN_LAST = OP_ICHAIN_I + 7,
	/* the same pairs with an LI form first (local[x] k1 imm1, pushed):
	 * push inner k2 local[y] (x, imm1, y) or inner k2 imm2 (x, imm1, imm2);
	 * only for the pairs whose first opcode is an I form */
	OP_LICHAIN_L,
	OP_LICHAIN_I = OP_LICHAIN_L + 8,
	OP_LICHAIN_LAST = OP_LICHAIN_I + 7,
	/* loads from an indexed element, '(local[x] << s) + c' ('local.get x;
	 * i32.const s; i32.shl; i32.const c; i32.add; load', C's a[i] for a
	 * static array), the sums wrapping at 32 bits: x, s, c, offset; +
	 * opcode - 0x28 */
	OP_LOAD_IDX,
	OP_LOAD_IDX_LAST = OP_LOAD_IDX + 13,
	/* the same with the address also kept in a local ('... i32.add;
	 * local.tee z; load'): x, s, c, z, offset; + opcode - 0x28 */
	OP_LOAD_IDX_TEE,
	OP_LOAD_IDX_TEE_LAST = OP_LOAD_IDX_TEE + 13,
	/* vector instructions (0xfd prefix, simd.c): one word with the
	 * subopcode in its low 16 bits and the number of immediate words
	 * after it in its high 16 bits, then those words */
	OP_SIMD,
	OP__COUNT
};

/* A branch target word is a code offset. A back-edge to a loop in the
 * simple jump forms (OP_JMP, OP_JMP_IF_NOT, OP_BR_IF_SIMPLE and the fused
 * compare-and-branch forms) instead names the instruction after the loop's
 * OP_LOOP_CHECK with this bit set, and the branch runs the check itself:
 * one dispatch less per iteration. Other branches to a loop (with unwinding,
 * br_table) target the check. Code is far shorter than 2^31 words
 * (KIS_WASM_MAX_MODULE_BYTES). */
#define WASM_LOOP_EDGE 0x80000000u

/* X(index, opcode, C type, expr) on operands a and b of that type */
#define WASM_FUSABLE_FLOATS(X)          \
	X(0, 0x92, float, a + b)        \
	X(1, 0x93, float, a - b)        \
	X(2, 0x94, float, a * b)        \
	X(3, 0xa0, double, a + b)       \
	X(4, 0xa1, double, a - b)       \
	X(5, 0xa2, double, a * b)

enum {
	FUSE_L, FUSE_I, FUSE_LL, FUSE_LI,
	FUSE_SET = 4, /* + shape: S, L, I, LL, LI */
	FUSE_BR = 9,
	FUSE_BRZ = 14,
	FUSE_TEE = 19,
	FUSE__COUNT = 24
};
enum { SHAPE_S, SHAPE_L, SHAPE_I, SHAPE_LL, SHAPE_LI };

/* Pairs of i32 operators fused into OP_CHAIN: an LI form (local[x] k1 imm)
 * as the right operand of k2 on the stack top, as in SHA-256's
 * 'rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)'. X(index, k1, k2, inner expr,
 * outer expr), indices as in WASM_FUSABLE_BINOPS, both exprs on uint32_t a
 * and b (inner: a = local, b = imm; outer: a = top, b = inner result). */
#define WASM_FUSABLE_CHAINS(X)                                                       \
	X(0, 19, 15, (a << (b & 31)) | (a >> ((32 - b) & 31)), a ^ b) /* rotl, xor */  \
	X(1, 20, 15, (a >> (b & 31)) | (a << ((32 - b) & 31)), a ^ b) /* rotr, xor */  \
	X(2, 18, 15, a >> (b & 31), a ^ b)                            /* shr_u, xor */ \
	X(3, 16, 15, a << (b & 31), a ^ b)                            /* shl, xor */   \
	X(4, 19, 10, (a << (b & 31)) | (a >> ((32 - b) & 31)), a + b) /* rotl, add */  \
	X(5, 18, 10, a >> (b & 31), a + b)                            /* shr_u, add */ \
	X(6, 16, 10, a << (b & 31), a + b)                            /* shl, add */   \
	X(7, 13, 15, a & b, a ^ b)                                    /* and, xor */   \
	X(8, 18, 14, a >> (b & 31), a | b)                            /* shr_u, or */  \
	X(9, 16, 14, a << (b & 31), a | b)                            /* shl, or */

/* Pairs fused into OP_ICHAIN_*: an i32 I form (its internal opcode), then
 * the i32 operator k2 (index as in WASM_FUSABLE_BINOPS) taking its result.
 * X(index, first opcode, k2, inner expr, outer expr), both on uint32_t a and
 * b (inner: a = top, b = imm1; outer: a = left operand, b = right one).
 * CRC-32's 'crc >> 1 ^ (poly & (0 - (crc & 1)))' and bit-field extraction. */
#define WASM_I_CHAINS(X)                                                         \
	X(0, OP_FUSED + 64 * FUSE_I + 13, 15, a & b, a ^ b)  /* and, xor */        \
	X(1, OP_FUSED + 64 * FUSE_I + 13, 11, a & b, a - b)  /* and, sub */        \
	X(2, OP_RSUB_I32, 13, b - a, a & b)                  /* rsub, and */       \
	X(3, OP_FUSED + 64 * FUSE_I + 18, 13, a >> (b & 31), a & b) /* shr_u, and */ \
	X(4, OP_FUSED + 64 * FUSE_I + 18, 15, a >> (b & 31), a ^ b) /* shr_u, xor */ \
	X(5, OP_FUSED + 64 * FUSE_I + 16, 10, a << (b & 31), a + b) /* shl, add */ \
	X(6, OP_FUSED + 64 * FUSE_I + 12, 10, a * b, a + b)  /* mul, add */        \
	X(7, OP_FUSED + 64 * FUSE_I + 13, 10, a & b, a + b)  /* and, add */
/* the index of (shl, add) there: with an LI form first it is the address of
 * an indexed element, which a load after it takes over (OP_LOAD_IDX) */
#define WASM_I_CHAIN_SHL_ADD 5

/* The integer binary operators that cannot trap: X(index, opcode, bits, expr)
 * with operands a and b of type uint<bits>_t. Shared by compile.c (which
 * fuses them) and exec.c (which runs them). */
#define WASM_FUSABLE_BINOPS(X) WASM_FUSABLE_COMPARES(X) WASM_FUSABLE_ARITH(X)
/* Compares get the branching forms, arithmetic the local-writing ones. */
#define WASM_FUSABLE_COMPARES(X) WASM_I32_COMPARES(X) WASM_I64_COMPARES(X)
#define WASM_I32_COMPARES(X) \
	X(0, 0x46, 32, a == b) \
	X(1, 0x47, 32, a != b) \
	X(2, 0x48, 32, (int32_t)a < (int32_t)b) \
	X(3, 0x49, 32, a < b) \
	X(4, 0x4a, 32, (int32_t)a > (int32_t)b) \
	X(5, 0x4b, 32, a > b) \
	X(6, 0x4c, 32, (int32_t)a <= (int32_t)b) \
	X(7, 0x4d, 32, a <= b) \
	X(8, 0x4e, 32, (int32_t)a >= (int32_t)b) \
	X(9, 0x4f, 32, a >= b)
#define WASM_I64_COMPARES(X) \
	X(21, 0x51, 64, a == b) \
	X(22, 0x52, 64, a != b) \
	X(23, 0x53, 64, (int64_t)a < (int64_t)b) \
	X(24, 0x54, 64, a < b) \
	X(25, 0x55, 64, (int64_t)a > (int64_t)b) \
	X(26, 0x56, 64, a > b) \
	X(27, 0x57, 64, (int64_t)a <= (int64_t)b) \
	X(28, 0x58, 64, a <= b) \
	X(29, 0x59, 64, (int64_t)a >= (int64_t)b) \
	X(30, 0x5a, 64, a >= b)
#define WASM_FUSABLE_ARITH(X) \
	X(10, 0x6a, 32, a + b) \
	X(11, 0x6b, 32, a - b) \
	X(12, 0x6c, 32, a * b) \
	X(13, 0x71, 32, a & b) \
	X(14, 0x72, 32, a | b) \
	X(15, 0x73, 32, a ^ b) \
	X(16, 0x74, 32, a << (b & 31)) \
	X(17, 0x75, 32, (uint32_t)((int32_t)a >> (b & 31))) \
	X(18, 0x76, 32, a >> (b & 31)) \
	X(19, 0x77, 32, (a << (b & 31)) | (a >> ((32 - b) & 31))) \
	X(20, 0x78, 32, (a >> (b & 31)) | (a << ((32 - b) & 31))) \
	X(31, 0x7c, 64, a + b) \
	X(32, 0x7d, 64, a - b) \
	X(33, 0x7e, 64, a * b) \
	X(34, 0x83, 64, a & b) \
	X(35, 0x84, 64, a | b) \
	X(36, 0x85, 64, a ^ b) \
	X(37, 0x86, 64, a << (b & 63)) \
	X(38, 0x87, 64, (uint64_t)((int64_t)a >> (b & 63))) \
	X(39, 0x88, 64, a >> (b & 63)) \
	X(40, 0x89, 64, (a << (b & 63)) | (a >> ((64 - b) & 63))) \
	X(41, 0x8a, 64, (a >> (b & 63)) | (a << ((64 - b) & 63)))

/* ---- Runtime objects (spec 4.2) ---- */

struct kis_wasm_func {
	const struct wasm_functype *type;
	struct kis_wasm_instance *inst; /* NULL for a host function */
	const struct wasm_code *code;
	kis_wasm_host_fn host;
	void *user;
	struct wasm_functype own; /* a host function's type */
	/* compiled: the native function (jit_ctx, params...) and its form
	 * over slots (jit_ctx, io: args in, results out); NULL otherwise */
	void *jit_fn;
	void *jit_ctx;
	void (*jit_wrap)(void *ctx, uint64_t *io);
	/* the interpreter's profile (exec.c, CHARGE): calls of this function
	 * and the ticks taken while it ran (its back-edges and calls), the
	 * mixed tier's choice of what to optimise (jit_llvm.c, choose_hot);
	 * compiled code does not count */
	uint64_t prof;
};

struct kis_wasm_table {
	uint8_t elem;
	uint32_t size;
	struct wasm_limits lim;
	uint64_t *elems;
};

struct kis_wasm_memory {
	uint8_t *data;
	uint64_t size; /* bytes */
	struct wasm_limits lim;
	uint32_t cap_pages; /* the store's limit when the memory was made */
	/* A guard-region memory (compiled code in guard mode, jit.h): the
	 * bytes reserved at data, PROT_NONE beyond size, made accessible by
	 * mprotect as it grows, so data never moves. 0: a mapping of exactly
	 * size bytes, grown by mremap (it may move). */
	uint64_t reserved;
};

struct kis_wasm_global {
	uint8_t type;
	bool mut;
	uint64_t val;
	uint64_t hi; /* v128: the high 64 bits (val holds the low ones) */
};

struct wasm_elem_inst {
	uint64_t *refs;
	uint32_t n; /* 0 once dropped */
};

struct kis_wasm_instance {
	const struct kis_wasm_module *m;
	struct kis_wasm_store *store;
	struct kis_wasm_func **funcs;
	struct kis_wasm_func *own_funcs; /* the module's own functions, one block */
	struct kis_wasm_table **tables;
	struct kis_wasm_memory **mems;
	struct kis_wasm_global **globals;
	struct wasm_elem_inst *elems;
	bool *data_dropped;
	struct wasm_jit_ctx *jit; /* compiled code's view of it, or NULL */
};

struct wasm_frame {
	const uint32_t *ret_pc;
	uint64_t *fp;
	struct kis_wasm_func *func;
	const uint32_t *code; /* func's code, to resume without two loads */
};

/* What the store tracks, for its release (runtime.c) and for the guard
 * fault check (memory.c). */
enum { OBJ_FUNC, OBJ_TABLE, OBJ_MEMORY, OBJ_GLOBAL, OBJ_INSTANCE };

struct wasm_obj {
	int kind; /* OBJ_* */
	void *p;
};

struct kis_wasm_store {
	uint64_t *stack, *stack_end, *sp;
	struct wasm_frame *frames;
	uint32_t depth;
	atomic_int interrupt;
	atomic_int jit_tick; /* what compiled code tests: jit.h, WASM_JIT_TICK_* */
	int64_t fuel, fuel_budget; /* fuel: steps left in this run, INT64_MAX when unlimited */
	uint32_t mem_limit_pages; /* per memory, see kis_wasm_set_memory_limit */
	struct wasm_obj *objs;
	size_t nobjs, cap_objs;
	bool compile; /* instances made from now on run compiled (jit.h) */
	bool compile_or_interpret; /* ... or interpreted where compiling fails */
	uint8_t jit_tier; /* the tier its compiles are made at (WASM_JIT_TIER_*, jit.h) */
	struct wasm_prof_out *prof_out; /* where a run's profile goes (jit_tierup.h), or NULL */
	/* called once a module's code is mapped: its object code, and
	 * whether that came from the cache */
	void (*compiled)(void *user, const uint8_t *obj, size_t len, int from_cache);
	void *compiled_user;
	const uint8_t *cached; /* object code for the next compile (the caller's cache) */
	size_t cached_len;
	/* that code linked already (kis_wasm_store_link_cached_code), taken
	 * by the next compile, or NULL */
	struct wasm_jit_module *linked;
	struct wasm_jit_store *jit; /* the compiled code's stack, made on first use */
};

/* ---- Functions shared between the phases ---- */

/* compile.c: validate one function body (spec 3.3) and translate it.
 * Returns 0, or -1 with a message in err (size errlen). */
/* decode.c: kis_wasm_module_load, the function bodies' validation and
 * translation left for later. For a module about to run machine code from
 * the code cache (jit_cache.c): an entry exists only for these exact
 * bytes, compiled after they validated, and it is the engine's own file
 * (one who can write it can write the machine code). The interpreter's
 * translation of a 1 MB module is ~25 ms of a cached run here. */
KIS_HIDDEN int wasm_module_load_for_cache(const uint8_t *bytes, size_t len,
					  struct kis_wasm_module **out, struct kis_error **err);
/* Validate and translate the deferred bodies (no-op if none): 0, or -1
 * with the validator's message in err. */
KIS_HIDDEN int wasm_module_finish_bodies(struct kis_wasm_module *m, char *err, size_t errlen);
KIS_HIDDEN int wasm_compile_func(const struct kis_wasm_module *m, uint32_t func_idx,
				 const uint8_t *body, size_t len, struct wasm_code *out, char *err,
				 size_t errlen);
/* compile.c: the LEB128 readers the decoder shares (spec 5.2.2). Each
 * returns 0 and advances *p, or -1 on malformed input. */
KIS_HIDDEN int wasm_read_u32(const uint8_t **p, const uint8_t *end, uint32_t *v);
KIS_HIDDEN int wasm_read_s32(const uint8_t **p, const uint8_t *end, int32_t *v);
KIS_HIDDEN int wasm_read_s33(const uint8_t **p, const uint8_t *end, int64_t *v);
KIS_HIDDEN int wasm_read_s64(const uint8_t **p, const uint8_t *end, int64_t *v);

/* Function types match (spec 3.3.5.1): an inline here because the
 * interpreter, the compiled code's runtime and instantiation all compare
 * types, and none of them should call another for it. */
static inline bool wasm_functype_eq(const struct wasm_functype *a, const struct wasm_functype *b)
{
	return a == b || (a->np == b->np && a->nr == b->nr &&
			  !memcmp(a->t, b->t, (size_t)a->np + a->nr));
}

/* exec.c: run a function on the store's stack. */
KIS_HIDDEN enum kis_wasm_trap wasm_invoke(struct kis_wasm_store *s, struct kis_wasm_func *f,
					  const uint64_t *args, uint64_t *results);
/* exec.c: how wasm_invoke runs a function with native code (f->jit_wrap):
 * jit_rt.c gives its entry before any function has one (the interpreter
 * names nothing of the compiled code's runtime, which is above it). */
typedef enum kis_wasm_trap (*wasm_compiled_entry_fn)(struct kis_wasm_store *s,
						     struct kis_wasm_func *f,
						     const uint64_t *args, uint64_t *results);
KIS_HIDDEN void wasm_set_compiled_entry(wasm_compiled_entry_fn fn);

/* runtime.c: growth (spec 4.5.3); return the old size or -1. */
KIS_HIDDEN int64_t wasm_memory_grow(struct kis_wasm_memory *mem, uint32_t delta);
KIS_HIDDEN int64_t wasm_table_grow(struct kis_wasm_table *t, uint32_t delta, uint64_t init);

/* simd.c: fixed-width SIMD (spec 2.4.3, 4.4.3, 5.4.8). A v128 value takes
 * two stack slots, low 64 bits first. The signature of a 0xfd subopcode,
 * for compile.c to validate it: immediates, operand and result types (0
 * for none), the bytes a memory access touches (its natural alignment) and
 * the lane count a lane immediate must stay below. */
enum {
	SIMD_IMM_NONE,
	SIMD_IMM_MEM,      /* memarg: one word, the offset */
	SIMD_IMM_MEM_LANE, /* memarg and lane: offset, lane */
	SIMD_IMM_LANE,     /* lane: one word */
	SIMD_IMM_BYTES16,  /* v128.const, i8x16.shuffle: 16 bytes in 4 words */
};
/* Internal subopcodes (beyond Wasm's 0x00..0xff) for the instructions that
 * move a v128 as a whole: local and global index (in slots for locals). */
enum {
	SIMD_LOCAL_GET = 0x100,
	SIMD_LOCAL_SET,
	SIMD_LOCAL_TEE,
	SIMD_GLOBAL_GET,
	SIMD_GLOBAL_SET,
	SIMD_SELECT,
};
struct wasm_simd_sig {
	uint8_t imm, nin, in[3], out, size, lanes;
};
/* 0 and *sig filled, or -1 for an opcode Wasm 2.0 does not have. */
KIS_HIDDEN int wasm_simd_sig(uint32_t sub, struct wasm_simd_sig *sig);
/* Run the instruction whose subopcode word pc points at, on the operands
 * below sp; returns the new sp, or NULL when a memory access is out of
 * bounds (the only trap of a vector instruction). */
KIS_HIDDEN uint64_t *wasm_simd_exec(const uint32_t *pc, uint64_t *sp, uint64_t *fp, uint8_t *mem,
				    uint64_t memsize, struct kis_wasm_instance *inst);

#define WASM_PAGE 65536u

#endif
