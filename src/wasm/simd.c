/* SPDX-License-Identifier: MIT */
/* Fixed-width SIMD of Wasm 2.0: the signature of every 0xfd subopcode (spec
 * 3.3.3 validation, 5.4.8 binary encoding) and the lane-wise semantics
 * (spec 4.4.3 execution, with the numeric operators of 4.3 per lane).
 *
 * A v128 lives on the operand stack as two 64-bit slots, low half first, so
 * lane i of an i8x16 is byte i of the pair on this little-endian host. The
 * interpreter calls wasm_simd_exec() for every vector instruction; speed is
 * not the aim here, exactness is: floats go through the same helpers as the
 * scalar instructions (numeric.h), so NaN results are canonical or
 * arithmetic exactly as there, and integer lanes use unsigned arithmetic so
 * wrap-around is defined. */
#include <math.h>
#include <string.h>

#include "wasm/internal.h"
#include "wasm/numeric.h"

typedef union {
	uint8_t u8[16];
	int8_t i8[16];
	uint16_t u16[8];
	int16_t i16[8];
	uint32_t u32[4];
	int32_t i32[4];
	uint64_t u64[2];
	int64_t i64[2];
	float f32[4];
	double f64[2];
} v128;

enum { V = KIS_WASM_V128, I32 = KIS_WASM_I32, I64 = KIS_WASM_I64, F32 = KIS_WASM_F32, F64 = KIS_WASM_F64 };

static void sig_set(struct wasm_simd_sig *g, uint8_t nin, uint8_t a, uint8_t b, uint8_t c, uint8_t out)
{
	g->nin = nin;
	g->in[0] = a;
	g->in[1] = b;
	g->in[2] = c;
	g->out = out;
}

/* Shapes of the lane-wise instructions: unary, binary, shift (vector and
 * i32 count), test (vector to i32). */
static void sig_un(struct wasm_simd_sig *g) { sig_set(g, 1, V, 0, 0, V); }
static void sig_bin(struct wasm_simd_sig *g) { sig_set(g, 2, V, V, 0, V); }
static void sig_shift(struct wasm_simd_sig *g) { sig_set(g, 2, V, I32, 0, V); }
static void sig_test(struct wasm_simd_sig *g) { sig_set(g, 1, V, 0, 0, I32); }

int wasm_simd_sig(uint32_t op, struct wasm_simd_sig *g)
{
	/* bytes read by the loads 0x00..0x0a */
	static const uint8_t load_size[11] = { 16, 8, 8, 8, 8, 8, 8, 1, 2, 4, 8 };
	static const uint8_t splat_type[6] = { I32, I32, I32, I64, F32, F64 };
	/* extract/replace_lane 0x15..0x22: lane count, scalar type, replace? */
	static const uint8_t lane_n[14] = { 16, 16, 16, 8, 8, 8, 4, 4, 2, 2, 4, 4, 2, 2 };
	static const uint8_t lane_t[14] = { I32, I32, I32, I32, I32, I32, I32, I32, I64, I64, F32, F32, F64, F64 };
	static const uint8_t lane_set[14] = { 0, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1 };
	memset(g, 0, sizeof(*g));
	switch (op) {
	case 0x00 ... 0x0a: /* v128.load, load*x*_s/u, load*_splat */
		g->imm = SIMD_IMM_MEM;
		g->size = load_size[op];
		sig_set(g, 1, I32, 0, 0, V);
		return 0;
	case 0x0b: /* v128.store */
		g->imm = SIMD_IMM_MEM;
		g->size = 16;
		sig_set(g, 2, I32, V, 0, 0);
		return 0;
	case 0x0c: /* v128.const */
		g->imm = SIMD_IMM_BYTES16;
		sig_set(g, 0, 0, 0, 0, V);
		return 0;
	case 0x0d: /* i8x16.shuffle: lane indices into both operands */
		g->imm = SIMD_IMM_BYTES16;
		g->lanes = 32;
		sig_bin(g);
		return 0;
	case 0x0e: /* i8x16.swizzle */
		sig_bin(g);
		return 0;
	case 0x0f ... 0x14: /* splat */
		sig_set(g, 1, splat_type[op - 0x0f], 0, 0, V);
		return 0;
	case 0x15 ... 0x22: { /* extract_lane, replace_lane */
		unsigned k = op - 0x15;
		g->imm = SIMD_IMM_LANE;
		g->lanes = lane_n[k];
		if (lane_set[k])
			sig_set(g, 2, V, lane_t[k], 0, V);
		else
			sig_set(g, 1, V, 0, 0, lane_t[k]);
		return 0;
	}
	case 0x23 ... 0x4c: /* comparisons */
		sig_bin(g);
		return 0;
	case 0x4d: /* v128.not */
		sig_un(g);
		return 0;
	case 0x4e ... 0x51: /* and, andnot, or, xor */
		sig_bin(g);
		return 0;
	case 0x52: /* v128.bitselect */
		sig_set(g, 3, V, V, V, V);
		return 0;
	case 0x53: /* v128.any_true */
		sig_test(g);
		return 0;
	case 0x54 ... 0x5b: /* v128.load*_lane, v128.store*_lane */
		g->imm = SIMD_IMM_MEM_LANE;
		g->size = (uint8_t)(1u << ((op - 0x54) & 3));
		g->lanes = (uint8_t)(16u >> ((op - 0x54) & 3));
		sig_set(g, 2, I32, V, 0, op < 0x58 ? V : 0);
		return 0;
	case 0x5c: /* v128.load32_zero */
	case 0x5d: /* v128.load64_zero */
		g->imm = SIMD_IMM_MEM;
		g->size = op == 0x5c ? 4 : 8;
		sig_set(g, 1, I32, 0, 0, V);
		return 0;
	case 0x5e: case 0x5f: /* demote, promote */
	case 0x60: case 0x61: case 0x62: /* i8x16 abs neg popcnt */
	case 0x67 ... 0x6a: /* f32x4 ceil floor trunc nearest */
	case 0x74: case 0x75: case 0x7a: /* f64x2 ceil floor trunc */
	case 0x7c ... 0x7f: /* extadd_pairwise */
	case 0x80: case 0x81: /* i16x8 abs neg */
	case 0x87 ... 0x8a: /* i16x8 extend */
	case 0x94: /* f64x2.nearest */
	case 0xa0: case 0xa1: case 0xa7 ... 0xaa: /* i32x4 abs neg extend */
	case 0xc0: case 0xc1: case 0xc7 ... 0xca: /* i64x2 abs neg extend */
	case 0xe0: case 0xe1: case 0xe3: /* f32x4 abs neg sqrt */
	case 0xec: case 0xed: case 0xef: /* f64x2 abs neg sqrt */
	case 0xf8 ... 0xff: /* conversions */
		sig_un(g);
		return 0;
	case 0x63: case 0x64: /* i8x16 all_true bitmask */
	case 0x83: case 0x84:
	case 0xa3: case 0xa4:
	case 0xc3: case 0xc4:
		sig_test(g);
		return 0;
	case 0x6b ... 0x6d: /* shl shr_s shr_u */
	case 0x8b ... 0x8d:
	case 0xab ... 0xad:
	case 0xcb ... 0xcd:
		sig_shift(g);
		return 0;
	case 0x65: case 0x66: /* i8x16.narrow */
	case 0x6e ... 0x73: /* i8x16 add, sub, saturating */
	case 0x76 ... 0x79: case 0x7b: /* i8x16 min max avgr */
	case 0x82: /* i16x8.q15mulr_sat_s */
	case 0x85: case 0x86: /* i16x8.narrow */
	case 0x8e ... 0x93: case 0x95 ... 0x99: case 0x9b ... 0x9f:
	case 0xae: case 0xb1: case 0xb5 ... 0xba: case 0xbc ... 0xbf:
	case 0xce: case 0xd1: case 0xd5 ... 0xdf:
	case 0xe4 ... 0xeb: /* f32x4 arithmetic */
	case 0xf0 ... 0xf7: /* f64x2 arithmetic */
		sig_bin(g);
		return 0;
	default:
		return -1;
	}
}

/* ---- lane helpers ---- */

static inline int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* all ones when the lane predicate holds (spec 4.3.4 vrelop) */
#define MASK(bits, cond) ((cond) ? (uint##bits##_t)~(uint##bits##_t)0 : 0)

/* r = lanewise expr over lanes i of n */
#define LANES(n, stmt)                       \
	do {                                 \
		for (unsigned i = 0; i < (n); i++) \
			stmt;                \
	} while (0)

/* Comparisons 0x23..0x4c: the same ten for i8x16, i16x8, i32x4. */
static v128 int_compare(unsigned k, unsigned bits, v128 a, v128 b)
{
	v128 r;
	memset(&r, 0, sizeof(r));
	unsigned n = 128 / bits;
	for (unsigned i = 0; i < n; i++) {
		int64_t sa, sb;
		uint64_t ua, ub;
		if (bits == 8) {
			sa = a.i8[i], sb = b.i8[i], ua = a.u8[i], ub = b.u8[i];
		} else if (bits == 16) {
			sa = a.i16[i], sb = b.i16[i], ua = a.u16[i], ub = b.u16[i];
		} else {
			sa = a.i32[i], sb = b.i32[i], ua = a.u32[i], ub = b.u32[i];
		}
		bool t;
		switch (k) {
		case 0: t = ua == ub; break;
		case 1: t = ua != ub; break;
		case 2: t = sa < sb; break;
		case 3: t = ua < ub; break;
		case 4: t = sa > sb; break;
		case 5: t = ua > ub; break;
		case 6: t = sa <= sb; break;
		case 7: t = ua <= ub; break;
		case 8: t = sa >= sb; break;
		default: t = ua >= ub; break;
		}
		if (bits == 8)
			r.u8[i] = MASK(8, t);
		else if (bits == 16)
			r.u16[i] = MASK(16, t);
		else
			r.u32[i] = MASK(32, t);
	}
	return r;
}

/* Lane access by width for the generic integer operators below (the index
 * masked to the lane count, which it never exceeds). */
static inline int64_t lane_s(const v128 *v, unsigned bits, unsigned i)
{
	switch (bits) {
	case 8: return v->i8[i & 15];
	case 16: return v->i16[i & 7];
	case 32: return v->i32[i & 3];
	default: return v->i64[i & 1];
	}
}

static inline uint64_t lane_u(const v128 *v, unsigned bits, unsigned i)
{
	switch (bits) {
	case 8: return v->u8[i & 15];
	case 16: return v->u16[i & 7];
	case 32: return v->u32[i & 3];
	default: return v->u64[i & 1];
	}
}

static inline void lane_put(v128 *v, unsigned bits, unsigned i, uint64_t x)
{
	switch (bits) {
	case 8: v->u8[i & 15] = (uint8_t)x; break;
	case 16: v->u16[i & 7] = (uint16_t)x; break;
	case 32: v->u32[i & 3] = (uint32_t)x; break;
	default: v->u64[i & 1] = x; break;
	}
}

/* One lane of the integer operators that exist for several lane widths,
 * by their offset k from the family's first opcode (0x60 i8x16, 0x80
 * i16x8, 0xa0 i32x4, 0xc0 i64x2); sa/ua and sb/ub are the operands' lanes
 * read signed and unsigned, s the shift count. Validation admits only the
 * offsets that exist for the width. */
static uint64_t int_lane(unsigned k, unsigned bits, int64_t sa, int64_t sb, uint64_t ua, uint64_t ub,
			 uint32_t s)
{
	uint64_t umax = bits == 64 ? ~0ull : (1ull << bits) - 1;
	int64_t smax = (int64_t)(umax >> 1), smin = -smax - 1;
	switch (k) {
	case 0x00: return sa < 0 ? 0 - ua : ua;               /* abs: wraps for the minimum */
	case 0x01: return 0 - ua;                             /* neg */
	case 0x0b: return ua << (s & (bits - 1));             /* shl: count modulo width */
	case 0x0c: return (uint64_t)(sa >> (s & (bits - 1))); /* shr_s */
	case 0x0d: return ua >> (s & (bits - 1));             /* shr_u */
	case 0x0e: return ua + ub;                            /* add */
	case 0x0f: return (uint64_t)clamp(sa + sb, smin, smax); /* add_sat_s (8, 16 bits) */
	case 0x10: return ua + ub > umax ? umax : ua + ub;     /* add_sat_u */
	case 0x11: return ua - ub;                            /* sub */
	case 0x12: return (uint64_t)clamp(sa - sb, smin, smax); /* sub_sat_s */
	case 0x13: return ua < ub ? 0 : ua - ub;              /* sub_sat_u */
	case 0x16: return sa < sb ? ua : ub;                  /* min_s */
	case 0x17: return ua < ub ? ua : ub;                  /* min_u */
	case 0x18: return sa > sb ? ua : ub;                  /* max_s */
	case 0x19: return ua > ub ? ua : ub;                  /* max_u */
	case 0x1b: return (ua + ub + 1) >> 1;                 /* avgr_u: rounds up */
	default: return 0;
	}
}

static void int_family(unsigned k, unsigned bits, v128 a, v128 b, uint32_t s, v128 *r, uint64_t *rs)
{
	unsigned n = 128 / bits;
	if (k == 0x03) { /* all_true */
		uint64_t t = 1;
		LANES(n, t &= lane_u(&a, bits, i) != 0);
		*rs = t;
	} else if (k == 0x04) { /* bitmask: the top bit of each lane */
		uint64_t m = 0;
		LANES(n, m |= (uint64_t)(lane_s(&a, bits, i) < 0) << i);
		*rs = m;
	} else {
		LANES(n, lane_put(r, bits, i,
				  int_lane(k, bits, lane_s(&a, bits, i), lane_s(&b, bits, i),
					   lane_u(&a, bits, i), lane_u(&b, bits, i), s)));
	}
}

/* Widening operators of i16x8, i32x4 and i64x2 (result lanes of `bits`,
 * source lanes of half that): extend, extmul, extadd_pairwise. */
static void extend(v128 *r, v128 a, unsigned bits, bool high, bool sign)
{
	unsigned n = 128 / bits, h = bits / 2, base = high ? n : 0;
	LANES(n, lane_put(r, bits, i, sign ? (uint64_t)lane_s(&a, h, base + i) : lane_u(&a, h, base + i)));
}

static void extmul(v128 *r, v128 a, v128 b, unsigned bits, bool high, bool sign)
{
	unsigned n = 128 / bits, h = bits / 2, base = high ? n : 0;
	/* the products of half-width lanes fit in 64 bits, signed or not */
	LANES(n, lane_put(r, bits, i,
			  sign ? (uint64_t)(lane_s(&a, h, base + i) * lane_s(&b, h, base + i))
			       : lane_u(&a, h, base + i) * lane_u(&b, h, base + i)));
}

static void extadd(v128 *r, v128 a, unsigned bits, bool sign)
{
	unsigned n = 128 / bits, h = bits / 2;
	LANES(n, lane_put(r, bits, i,
			  sign ? (uint64_t)(lane_s(&a, h, 2 * i) + lane_s(&a, h, 2 * i + 1))
			       : lane_u(&a, h, 2 * i) + lane_u(&a, h, 2 * i + 1)));
}

/* narrow (spec 4.3.2 narrow): signed source lanes saturated to the half
 * width, signed or unsigned; a's lanes first, then b's. */
static void narrow(v128 *r, v128 a, v128 b, unsigned bits, bool sign)
{
	unsigned n = 128 / bits, h = bits / 2;
	int64_t lo = sign ? -(1ll << (h - 1)) : 0;
	int64_t hi = sign ? (1ll << (h - 1)) - 1 : (1ll << h) - 1;
	v128 out;
	for (unsigned i = 0; i < n; i++) {
		lane_put(&out, h, i, (uint64_t)clamp(lane_s(&a, bits, i), lo, hi));
		lane_put(&out, h, n + i, (uint64_t)clamp(lane_s(&b, bits, i), lo, hi));
	}
	*r = out;
}

/* pmin/pmax (spec 4.3.3 fpmin): b < a ? b : a, the operand itself */
static float pmin32(float a, float b) { return b < a ? b : a; }
static float pmax32(float a, float b) { return a < b ? b : a; }
static double pmin64(double a, double b) { return b < a ? b : a; }
static double pmax64(double a, double b) { return a < b ? b : a; }

static float abs32(float a) { return f32_of(of_f32(a) & 0x7fffffffu); }
static float neg32(float a) { return f32_of(of_f32(a) ^ 0x80000000u); }
static double abs64(double a) { return f64_of(of_f64(a) & ~(1ull << 63)); }
static double neg64(double a) { return f64_of(of_f64(a) ^ (1ull << 63)); }

/* Float operators: f32x4 from 0xe0, f64x2 from 0xec, and the rounding
 * ones elsewhere. Returns false when op is not one of them. */
static bool float_op(uint32_t op, v128 a, v128 b, v128 *r)
{
	switch (op) {
	case 0x41: LANES(4, r->u32[i] = MASK(32, a.f32[i] == b.f32[i])); return true;
	case 0x42: LANES(4, r->u32[i] = MASK(32, a.f32[i] != b.f32[i])); return true;
	case 0x43: LANES(4, r->u32[i] = MASK(32, a.f32[i] < b.f32[i])); return true;
	case 0x44: LANES(4, r->u32[i] = MASK(32, a.f32[i] > b.f32[i])); return true;
	case 0x45: LANES(4, r->u32[i] = MASK(32, a.f32[i] <= b.f32[i])); return true;
	case 0x46: LANES(4, r->u32[i] = MASK(32, a.f32[i] >= b.f32[i])); return true;
	case 0x47: LANES(2, r->u64[i] = MASK(64, a.f64[i] == b.f64[i])); return true;
	case 0x48: LANES(2, r->u64[i] = MASK(64, a.f64[i] != b.f64[i])); return true;
	case 0x49: LANES(2, r->u64[i] = MASK(64, a.f64[i] < b.f64[i])); return true;
	case 0x4a: LANES(2, r->u64[i] = MASK(64, a.f64[i] > b.f64[i])); return true;
	case 0x4b: LANES(2, r->u64[i] = MASK(64, a.f64[i] <= b.f64[i])); return true;
	case 0x4c: LANES(2, r->u64[i] = MASK(64, a.f64[i] >= b.f64[i])); return true;
	case 0x67: LANES(4, r->f32[i] = ceil32(a.f32[i])); return true;
	case 0x68: LANES(4, r->f32[i] = floor32(a.f32[i])); return true;
	case 0x69: LANES(4, r->f32[i] = trunc32(a.f32[i])); return true;
	case 0x6a: LANES(4, r->f32[i] = nearest32(a.f32[i])); return true;
	case 0x74: LANES(2, r->f64[i] = ceil64(a.f64[i])); return true;
	case 0x75: LANES(2, r->f64[i] = floor64(a.f64[i])); return true;
	case 0x7a: LANES(2, r->f64[i] = trunc64(a.f64[i])); return true;
	case 0x94: LANES(2, r->f64[i] = nearest64(a.f64[i])); return true;
	case 0xe0: LANES(4, r->f32[i] = abs32(a.f32[i])); return true;
	case 0xe1: LANES(4, r->f32[i] = neg32(a.f32[i])); return true;
	case 0xe3: LANES(4, r->f32[i] = sqrt32(a.f32[i])); return true;
	case 0xe4: LANES(4, r->f32[i] = a.f32[i] + b.f32[i]); return true;
	case 0xe5: LANES(4, r->f32[i] = a.f32[i] - b.f32[i]); return true;
	case 0xe6: LANES(4, r->f32[i] = a.f32[i] * b.f32[i]); return true;
	case 0xe7: LANES(4, r->f32[i] = a.f32[i] / b.f32[i]); return true;
	case 0xe8: LANES(4, r->f32[i] = min32(a.f32[i], b.f32[i])); return true;
	case 0xe9: LANES(4, r->f32[i] = max32(a.f32[i], b.f32[i])); return true;
	case 0xea: LANES(4, r->f32[i] = pmin32(a.f32[i], b.f32[i])); return true;
	case 0xeb: LANES(4, r->f32[i] = pmax32(a.f32[i], b.f32[i])); return true;
	case 0xec: LANES(2, r->f64[i] = abs64(a.f64[i])); return true;
	case 0xed: LANES(2, r->f64[i] = neg64(a.f64[i])); return true;
	case 0xef: LANES(2, r->f64[i] = sqrt64(a.f64[i])); return true;
	case 0xf0: LANES(2, r->f64[i] = a.f64[i] + b.f64[i]); return true;
	case 0xf1: LANES(2, r->f64[i] = a.f64[i] - b.f64[i]); return true;
	case 0xf2: LANES(2, r->f64[i] = a.f64[i] * b.f64[i]); return true;
	case 0xf3: LANES(2, r->f64[i] = a.f64[i] / b.f64[i]); return true;
	case 0xf4: LANES(2, r->f64[i] = min64(a.f64[i], b.f64[i])); return true;
	case 0xf5: LANES(2, r->f64[i] = max64(a.f64[i], b.f64[i])); return true;
	case 0xf6: LANES(2, r->f64[i] = pmin64(a.f64[i], b.f64[i])); return true;
	case 0xf7: LANES(2, r->f64[i] = pmax64(a.f64[i], b.f64[i])); return true;
	/* conversions (spec 4.3.4): saturating truncation, exact or
	 * round-to-nearest conversion, demote and promote */
	case 0x5e: /* f32x4.demote_f64x2_zero */
		r->f32[0] = (float)a.f64[0];
		r->f32[1] = (float)a.f64[1];
		r->u32[2] = r->u32[3] = 0;
		return true;
	case 0x5f: LANES(2, r->f64[i] = (double)a.f32[i]); return true;
	case 0xf8: LANES(4, r->u32[i] = (uint32_t)sat_s32(a.f32[i])); return true;
	case 0xf9: LANES(4, r->u32[i] = (uint32_t)sat_u32(a.f32[i])); return true;
	case 0xfa: LANES(4, r->f32[i] = (float)a.i32[i]); return true;
	case 0xfb: LANES(4, r->f32[i] = (float)a.u32[i]); return true;
	case 0xfc: /* i32x4.trunc_sat_f64x2_s_zero */
	case 0xfd:
		LANES(2, r->u32[i] = (uint32_t)(op == 0xfc ? sat_s32(a.f64[i]) : sat_u32(a.f64[i])));
		r->u32[2] = r->u32[3] = 0;
		return true;
	case 0xfe: LANES(2, r->f64[i] = (double)a.i32[i]); return true;
	case 0xff: LANES(2, r->f64[i] = (double)a.u32[i]); return true;
	default:
		return false;
	}
}

/* Every lane-wise instruction without memory or lane immediates. */
static void lanewise(uint32_t op, v128 a, v128 b, v128 c, uint32_t s, v128 *r, uint64_t *rs)
{
	memset(r, 0, sizeof(*r));
	if (float_op(op, a, b, r))
		return;
	if (op >= 0x23 && op <= 0x40) {
		unsigned k = op - 0x23;
		*r = int_compare(k % 10, 8u << (k / 10), a, b);
		return;
	}
	switch (op) {
	case 0x0e: /* swizzle: out-of-range indices give 0 */
		LANES(16, r->u8[i] = b.u8[i] < 16 ? a.u8[b.u8[i]] : 0);
		return;
	case 0x4d: r->u64[0] = ~a.u64[0], r->u64[1] = ~a.u64[1]; return;
	case 0x4e: LANES(2, r->u64[i] = a.u64[i] & b.u64[i]); return;
	case 0x4f: LANES(2, r->u64[i] = a.u64[i] & ~b.u64[i]); return;
	case 0x50: LANES(2, r->u64[i] = a.u64[i] | b.u64[i]); return;
	case 0x51: LANES(2, r->u64[i] = a.u64[i] ^ b.u64[i]); return;
	case 0x52: LANES(2, r->u64[i] = (a.u64[i] & c.u64[i]) | (b.u64[i] & ~c.u64[i])); return;
	case 0x53: *rs = (a.u64[0] | a.u64[1]) != 0; return;
	case 0x62: LANES(16, r->u8[i] = (uint8_t)__builtin_popcount(a.u8[i])); return;
	case 0x65: narrow(r, a, b, 16, true); return;
	case 0x66: narrow(r, a, b, 16, false); return;
	case 0x85: narrow(r, a, b, 32, true); return;
	case 0x86: narrow(r, a, b, 32, false); return;
	case 0x7c: extadd(r, a, 16, true); return;
	case 0x7d: extadd(r, a, 16, false); return;
	case 0x7e: extadd(r, a, 32, true); return;
	case 0x7f: extadd(r, a, 32, false); return;
	case 0x82: /* i16x8.q15mulr_sat_s: (a*b + 2^14) >> 15, saturated */
		LANES(8, r->i16[i] = (int16_t)clamp(((int32_t)a.i16[i] * b.i16[i] + 0x4000) >> 15, INT16_MIN, INT16_MAX));
		return;
	case 0x87: extend(r, a, 16, false, true); return;
	case 0x88: extend(r, a, 16, true, true); return;
	case 0x89: extend(r, a, 16, false, false); return;
	case 0x8a: extend(r, a, 16, true, false); return;
	case 0xa7: extend(r, a, 32, false, true); return;
	case 0xa8: extend(r, a, 32, true, true); return;
	case 0xa9: extend(r, a, 32, false, false); return;
	case 0xaa: extend(r, a, 32, true, false); return;
	case 0xc7: extend(r, a, 64, false, true); return;
	case 0xc8: extend(r, a, 64, true, true); return;
	case 0xc9: extend(r, a, 64, false, false); return;
	case 0xca: extend(r, a, 64, true, false); return;
	case 0x95: LANES(8, r->u16[i] = (uint16_t)((uint32_t)a.u16[i] * b.u16[i])); return;
	case 0xb5: LANES(4, r->u32[i] = a.u32[i] * b.u32[i]); return;
	case 0xd5: LANES(2, r->u64[i] = a.u64[i] * b.u64[i]); return;
	case 0xba: /* i32x4.dot_i16x8_s: the pair sum wraps at 32 bits */
		LANES(4, r->u32[i] = (uint32_t)((int64_t)a.i16[2 * i] * b.i16[2 * i] +
						(int64_t)a.i16[2 * i + 1] * b.i16[2 * i + 1]));
		return;
	case 0x9c: extmul(r, a, b, 16, false, true); return;
	case 0x9d: extmul(r, a, b, 16, true, true); return;
	case 0x9e: extmul(r, a, b, 16, false, false); return;
	case 0x9f: extmul(r, a, b, 16, true, false); return;
	case 0xbc: extmul(r, a, b, 32, false, true); return;
	case 0xbd: extmul(r, a, b, 32, true, true); return;
	case 0xbe: extmul(r, a, b, 32, false, false); return;
	case 0xbf: extmul(r, a, b, 32, true, false); return;
	case 0xdc: extmul(r, a, b, 64, false, true); return;
	case 0xdd: extmul(r, a, b, 64, true, true); return;
	case 0xde: extmul(r, a, b, 64, false, false); return;
	case 0xdf: extmul(r, a, b, 64, true, false); return;
	/* i64x2 comparisons (signed only) */
	case 0xd6: LANES(2, r->u64[i] = MASK(64, a.i64[i] == b.i64[i])); return;
	case 0xd7: LANES(2, r->u64[i] = MASK(64, a.i64[i] != b.i64[i])); return;
	case 0xd8: LANES(2, r->u64[i] = MASK(64, a.i64[i] < b.i64[i])); return;
	case 0xd9: LANES(2, r->u64[i] = MASK(64, a.i64[i] > b.i64[i])); return;
	case 0xda: LANES(2, r->u64[i] = MASK(64, a.i64[i] <= b.i64[i])); return;
	case 0xdb: LANES(2, r->u64[i] = MASK(64, a.i64[i] >= b.i64[i])); return;
	default:
		break;
	}
	if (op >= 0x60)
		int_family((op - 0x60) % 0x20, 8u << ((op - 0x60) / 0x20), a, b, s, r, rs);
}

/* ---- execution ---- */

static inline v128 get128(const uint64_t *p)
{
	v128 v;
	memcpy(&v, p, 16);
	return v;
}

static inline void put128(uint64_t *p, const v128 *v)
{
	memcpy(p, v, 16);
}

/* The splat and extract/replace_lane instructions. */
static void lane_op(uint32_t op, uint32_t lane, v128 a, uint64_t s, v128 *r, uint64_t *rs)
{
	*r = a;
	switch (op) {
	case 0x0f: LANES(16, r->u8[i] = (uint8_t)s); break;
	case 0x10: LANES(8, r->u16[i] = (uint16_t)s); break;
	case 0x11: case 0x13: LANES(4, r->u32[i] = (uint32_t)s); break;
	case 0x12: case 0x14: LANES(2, r->u64[i] = s); break;
	case 0x15: *rs = (uint32_t)(int32_t)a.i8[lane]; break;
	case 0x16: *rs = a.u8[lane]; break;
	case 0x17: r->u8[lane] = (uint8_t)s; break;
	case 0x18: *rs = (uint32_t)(int32_t)a.i16[lane]; break;
	case 0x19: *rs = a.u16[lane]; break;
	case 0x1a: r->u16[lane] = (uint16_t)s; break;
	case 0x1b: case 0x1f: *rs = a.u32[lane]; break;
	case 0x1c: case 0x20: r->u32[lane] = (uint32_t)s; break;
	case 0x1d: case 0x21: *rs = a.u64[lane]; break;
	default: r->u64[lane] = s; break; /* 0x1e, 0x22 */
	}
}

/* Loads and stores (spec 4.4.7 with the vector forms): the effective
 * address is a 33-bit sum checked before any byte moves. Returns false
 * when out of bounds. */
static bool memory_op(uint32_t op, const uint32_t *imm, const struct wasm_simd_sig *g, uint64_t addr,
		      v128 a, uint8_t *mem, uint64_t memsize, v128 *r)
{
	uint64_t ea = (uint64_t)(uint32_t)addr + imm[0];
	if (ea + g->size > memsize)
		return false;
	const uint8_t *p = mem + ea;
	memset(r, 0, sizeof(*r));
	switch (op) {
	case 0x00: memcpy(r, p, 16); break;
	case 0x01: LANES(8, r->i16[i] = (int8_t)p[i]); break;
	case 0x02: LANES(8, r->u16[i] = p[i]); break;
	case 0x03: LANES(4, { int16_t x; memcpy(&x, p + 2 * i, 2); r->i32[i] = x; }); break;
	case 0x04: LANES(4, { uint16_t x; memcpy(&x, p + 2 * i, 2); r->u32[i] = x; }); break;
	case 0x05: LANES(2, { int32_t x; memcpy(&x, p + 4 * i, 4); r->i64[i] = x; }); break;
	case 0x06: LANES(2, { uint32_t x; memcpy(&x, p + 4 * i, 4); r->u64[i] = x; }); break;
	case 0x07 ... 0x0a: /* splat: the value repeated in every lane */
		LANES(16u / g->size, memcpy(r->u8 + i * g->size, p, g->size));
		break;
	case 0x0b: memcpy(mem + ea, &a, 16); break;
	case 0x5c: case 0x5d: memcpy(r, p, g->size); break;
	default: /* load and store lane */
		if (op < 0x58) {
			*r = a;
			memcpy(r->u8 + imm[1] * g->size, p, g->size);
		} else {
			memcpy(mem + ea, a.u8 + imm[1] * g->size, g->size);
		}
		break;
	}
	return true;
}

uint64_t *wasm_simd_exec(const uint32_t *pc, uint64_t *sp, uint64_t *fp, uint8_t *mem,
			 uint64_t memsize, struct kis_wasm_instance *inst)
{
	uint32_t op = pc[0] & 0xffff;
	const uint32_t *imm = pc + 1;
	switch (op) {
	case SIMD_LOCAL_GET:
		sp[0] = fp[imm[0]];
		sp[1] = fp[imm[0] + 1];
		return sp + 2;
	case SIMD_LOCAL_SET:
		fp[imm[0]] = sp[-2];
		fp[imm[0] + 1] = sp[-1];
		return sp - 2;
	case SIMD_LOCAL_TEE:
		fp[imm[0]] = sp[-2];
		fp[imm[0] + 1] = sp[-1];
		return sp;
	case SIMD_GLOBAL_GET: {
		const struct kis_wasm_global *gl = inst->globals[imm[0]];
		sp[0] = gl->val;
		sp[1] = gl->hi;
		return sp + 2;
	}
	case SIMD_GLOBAL_SET: {
		struct kis_wasm_global *gl = inst->globals[imm[0]];
		gl->val = sp[-2];
		gl->hi = sp[-1];
		return sp - 2;
	}
	case SIMD_SELECT: { /* v1 v2 c -> c != 0 ? v1 : v2 */
		uint64_t *v1 = sp - 5;
		if ((uint32_t)sp[-1] == 0) {
			v1[0] = v1[2];
			v1[1] = v1[3];
		}
		return sp - 3;
	}
	case 0x0c: /* v128.const */
		memcpy(sp, imm, 16);
		return sp + 2;
	default:
		break;
	}

	/* operands by the signature: v128s into v[] in order, the one
	 * scalar (address, shift count or lane value) into s */
	struct wasm_simd_sig g;
	(void)wasm_simd_sig(op, &g);
	v128 v[3], r;
	uint64_t s = 0, rs = 0;
	memset(v, 0, sizeof(v));
	unsigned nv = 0;
	for (unsigned i = 0; i < g.nin; i++)
		nv += g.in[i] == V;
	for (unsigned i = g.nin; i-- > 0;) {
		if (g.in[i] == V) {
			sp -= 2;
			v[--nv] = get128(sp);
		} else {
			s = *--sp;
		}
	}
	if (g.imm == SIMD_IMM_MEM || g.imm == SIMD_IMM_MEM_LANE) {
		if (!memory_op(op, imm, &g, s, v[0], mem, memsize, &r))
			return NULL;
	} else if (op == 0x0d) { /* shuffle: lanes of a then b */
		const uint8_t *idx = (const uint8_t *)imm;
		LANES(16, r.u8[i] = idx[i] < 16 ? v[0].u8[idx[i]] : v[1].u8[idx[i] - 16]);
	} else if (op >= 0x0f && op <= 0x22) {
		lane_op(op, g.imm == SIMD_IMM_LANE ? imm[0] : 0, v[0], s, &r, &rs);
	} else {
		lanewise(op, v[0], v[1], v[2], (uint32_t)s, &r, &rs);
	}
	if (g.out == V) {
		put128(sp, &r);
		return sp + 2;
	}
	if (g.out)
		*sp++ = g.out == I32 ? (uint32_t)rs : rs;
	return sp;
}
