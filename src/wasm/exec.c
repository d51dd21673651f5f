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
 * which cannot wrap for 32-bit addresses and offsets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wasm/internal.h"

/* ---- float helpers: bit-exact, no libm (spec 4.3.3) ---- */

static inline float f32_of(uint64_t v)
{
	uint32_t u = (uint32_t)v;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint64_t of_f32(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline double f64_of(uint64_t v)
{
	double d;
	memcpy(&d, &v, 8);
	return d;
}

static inline uint64_t of_f64(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

/* trunc by clearing the fraction bits; NaN is quieted by x + x */
static float trunc32(float x)
{
	uint32_t u = (uint32_t)of_f32(x);
	int e = (int)((u >> 23) & 0xff) - 127;
	if (e >= 23)
		return isnan(x) ? x + x : x;
	if (e < 0)
		return f32_of(u & 0x80000000u);
	return f32_of(u & ~((1u << (23 - e)) - 1));
}

static double trunc64(double x)
{
	uint64_t u = of_f64(x);
	int e = (int)((u >> 52) & 0x7ff) - 1023;
	if (e >= 52)
		return isnan(x) ? x + x : x;
	if (e < 0)
		return f64_of(u & 0x8000000000000000ull);
	return f64_of(u & ~((1ull << (52 - e)) - 1));
}

static float floor32(float x)
{
	float t = trunc32(x);
	return (x < 0 && t != x) ? t - 1.0f : t;
}

static double floor64(double x)
{
	double t = trunc64(x);
	return (x < 0 && t != x) ? t - 1.0 : t;
}

static float ceil32(float x)
{
	float t = trunc32(x);
	return (x > 0 && t != x) ? t + 1.0f : t;
}

static double ceil64(double x)
{
	double t = trunc64(x);
	return (x > 0 && t != x) ? t + 1.0 : t;
}

static float copysign32(float x, float s)
{
	return f32_of((of_f32(x) & 0x7fffffffu) | (of_f32(s) & 0x80000000u));
}

static double copysign64(double x, double s)
{
	return f64_of((of_f64(x) & ~(1ull << 63)) | (of_f64(s) & (1ull << 63)));
}

/* round half to even: adding and removing 2^23 (2^52) rounds in the default
 * rounding mode, which is to nearest even */
static float nearest32(float x)
{
	if (isnan(x))
		return x + x;
	float a = f32_of(of_f32(x) & 0x7fffffffu);
	if (a >= 8388608.0f)
		return x;
	volatile float t = a + 8388608.0f;
	return copysign32(t - 8388608.0f, x);
}

static double nearest64(double x)
{
	if (isnan(x))
		return x + x;
	double a = f64_of(of_f64(x) & ~(1ull << 63));
	if (a >= 4503599627370496.0)
		return x;
	volatile double t = a + 4503599627370496.0;
	return copysign64(t - 4503599627370496.0, x);
}

static float sqrt32(float x)
{
#if defined(__x86_64__)
	float r;
	__asm__("sqrtss %1, %0" : "=x"(r) : "x"(x));
	return r;
#else
	return __builtin_sqrtf(x);
#endif
}

static double sqrt64(double x)
{
#if defined(__x86_64__)
	double r;
	__asm__("sqrtsd %1, %0" : "=x"(r) : "x"(x));
	return r;
#else
	return __builtin_sqrt(x);
#endif
}

/* min/max (spec 4.3.3 fmin): NaN in, NaN out; -0 is less than +0 */
static float min32(float a, float b)
{
	if (isnan(a) || isnan(b))
		return a + b;
	if (a == 0 && b == 0)
		return signbit(a) ? a : b;
	return a < b ? a : b;
}

static float max32(float a, float b)
{
	if (isnan(a) || isnan(b))
		return a + b;
	if (a == 0 && b == 0)
		return signbit(a) ? b : a;
	return a > b ? a : b;
}

static double min64(double a, double b)
{
	if (isnan(a) || isnan(b))
		return a + b;
	if (a == 0 && b == 0)
		return signbit(a) ? a : b;
	return a < b ? a : b;
}

static double max64(double a, double b)
{
	if (isnan(a) || isnan(b))
		return a + b;
	if (a == 0 && b == 0)
		return signbit(a) ? b : a;
	return a > b ? a : b;
}

/* ---- float to integer (spec 4.3.3 trunc, trunc_sat) ----
 * Each range is the open interval of values whose truncation fits. */
#define TRUNC_RANGE(x, lo, hi) ((x) > (lo) && (x) < (hi))

static inline uint64_t sat_s32(double x)
{
	if (isnan(x))
		return 0;
	if (x <= -2147483648.0)
		return (uint32_t)INT32_MIN;
	if (x >= 2147483647.0)
		return (uint32_t)INT32_MAX;
	return (uint32_t)(int32_t)x;
}

static inline uint64_t sat_u32(double x)
{
	if (isnan(x) || x <= 0)
		return 0;
	if (x >= 4294967295.0)
		return UINT32_MAX;
	return (uint32_t)x;
}

static inline uint64_t sat_s64(double x)
{
	if (isnan(x))
		return 0;
	if (x < -9223372036854775808.0)
		return (uint64_t)INT64_MIN;
	if (x >= 9223372036854775808.0)
		return (uint64_t)INT64_MAX;
	return (uint64_t)(int64_t)x;
}

static inline uint64_t sat_u64(double x)
{
	if (isnan(x) || x <= 0)
		return 0;
	if (x >= 18446744073709551616.0)
		return UINT64_MAX;
	return (uint64_t)x;
}

bool wasm_functype_eq(const struct wasm_functype *a, const struct wasm_functype *b)
{
	return a == b || (a->np == b->np && a->nr == b->nr &&
			  !memcmp(a->t, b->t, (size_t)a->np + a->nr));
}

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

/* Binary and unary operators on the top of the stack. These expand to a
 * complete `case` and never jump elsewhere. */
#define BIN32(op, expr)                                                   \
	op_##op: {                                                        \
		uint32_t b = (uint32_t)sp[-1], a = (uint32_t)sp[-2];      \
		sp--;                                                     \
		sp[-1] = (uint32_t)(expr);                                \
		NEXT();                                                   \
	}
#define BIN64(op, expr)                                                   \
	op_##op: {                                                        \
		uint64_t b = sp[-1], a = sp[-2];                          \
		sp--;                                                     \
		sp[-1] = (uint64_t)(expr);                                \
		NEXT();                                                   \
	}
#define CMP64(op, expr) BIN64(op, expr)
#define UN32(op, expr)                                                    \
	op_##op: {                                                        \
		uint32_t a = (uint32_t)sp[-1];                            \
		sp[-1] = (uint32_t)(expr);                                \
		NEXT();                                                   \
	}
#define UN64(op, expr)                                                    \
	op_##op: {                                                        \
		uint64_t a = sp[-1];                                      \
		sp[-1] = (uint64_t)(expr);                                \
		NEXT();                                                   \
	}
#define FBIN32(op, expr)                                                  \
	op_##op: {                                                        \
		float b = f32_of(sp[-1]), a = f32_of(sp[-2]);             \
		sp--;                                                     \
		sp[-1] = of_f32(expr);                                    \
		NEXT();                                                   \
	}
#define FBIN64(op, expr)                                                  \
	op_##op: {                                                        \
		double b = f64_of(sp[-1]), a = f64_of(sp[-2]);            \
		sp--;                                                     \
		sp[-1] = of_f64(expr);                                    \
		NEXT();                                                   \
	}
#define FCMP32(op, expr)                                                  \
	op_##op: {                                                        \
		float b = f32_of(sp[-1]), a = f32_of(sp[-2]);             \
		sp--;                                                     \
		sp[-1] = (expr) ? 1 : 0;                                  \
		NEXT();                                                   \
	}
#define FCMP64(op, expr)                                                  \
	op_##op: {                                                        \
		double b = f64_of(sp[-1]), a = f64_of(sp[-2]);            \
		sp--;                                                     \
		sp[-1] = (expr) ? 1 : 0;                                  \
		NEXT();                                                   \
	}
#define FUN32(op, expr)                                                   \
	op_##op: {                                                        \
		float a = f32_of(sp[-1]);                                 \
		sp[-1] = of_f32(expr);                                    \
		NEXT();                                                   \
	}
#define FUN64(op, expr)                                                   \
	op_##op: {                                                        \
		double a = f64_of(sp[-1]);                                \
		sp[-1] = of_f64(expr);                                    \
		NEXT();                                                   \
	}

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
	const uint32_t *pc = NULL, *code = NULL;
	struct kis_wasm_func *fn = NULL, *callee = entry;
	struct kis_wasm_instance *inst = NULL;
	struct kis_wasm_memory *memo = NULL;
	uint8_t *mem = NULL;
	uint64_t memsize = 0;
	enum kis_wasm_trap trap = KIS_WASM_OK;

	/* Threaded dispatch: every handler ends by jumping straight to the
	 * next one through this table (GNU labels as values), which predicts
	 * far better than one shared switch. NEXT() is the one macro here
	 * that hides a jump; it is the whole point of the technique. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
	static const void *const dispatch[OP__COUNT] = {
		[0 ... OP__COUNT - 1] = &&op_bad,
		[0x28] = &&op_0x28,
		[0x29] = &&op_0x29,
		[0x2a] = &&op_0x2a,
		[0x2b] = &&op_0x2b,
		[0x2c] = &&op_0x2c,
		[0x2d] = &&op_0x2d,
		[0x2e] = &&op_0x2e,
		[0x2f] = &&op_0x2f,
		[0x30] = &&op_0x30,
		[0x31] = &&op_0x31,
		[0x32] = &&op_0x32,
		[0x33] = &&op_0x33,
		[0x34] = &&op_0x34,
		[0x35] = &&op_0x35,
		[0x36] = &&op_0x36,
		[0x37] = &&op_0x37,
		[0x38] = &&op_0x38,
		[0x39] = &&op_0x39,
		[0x3a] = &&op_0x3a,
		[0x3b] = &&op_0x3b,
		[0x3c] = &&op_0x3c,
		[0x3d] = &&op_0x3d,
		[0x3e] = &&op_0x3e,
		[0x45] = &&op_0x45,
		[0x46] = &&op_0x46,
		[0x47] = &&op_0x47,
		[0x48] = &&op_0x48,
		[0x49] = &&op_0x49,
		[0x4a] = &&op_0x4a,
		[0x4b] = &&op_0x4b,
		[0x4c] = &&op_0x4c,
		[0x4d] = &&op_0x4d,
		[0x4e] = &&op_0x4e,
		[0x4f] = &&op_0x4f,
		[0x50] = &&op_0x50,
		[0x51] = &&op_0x51,
		[0x52] = &&op_0x52,
		[0x53] = &&op_0x53,
		[0x54] = &&op_0x54,
		[0x55] = &&op_0x55,
		[0x56] = &&op_0x56,
		[0x57] = &&op_0x57,
		[0x58] = &&op_0x58,
		[0x59] = &&op_0x59,
		[0x5a] = &&op_0x5a,
		[0x5b] = &&op_0x5b,
		[0x5c] = &&op_0x5c,
		[0x5d] = &&op_0x5d,
		[0x5e] = &&op_0x5e,
		[0x5f] = &&op_0x5f,
		[0x60] = &&op_0x60,
		[0x61] = &&op_0x61,
		[0x62] = &&op_0x62,
		[0x63] = &&op_0x63,
		[0x64] = &&op_0x64,
		[0x65] = &&op_0x65,
		[0x66] = &&op_0x66,
		[0x67] = &&op_0x67,
		[0x68] = &&op_0x68,
		[0x69] = &&op_0x69,
		[0x6a] = &&op_0x6a,
		[0x6b] = &&op_0x6b,
		[0x6c] = &&op_0x6c,
		[0x6d] = &&op_0x6d,
		[0x6e] = &&op_0x6e,
		[0x6f] = &&op_0x6f,
		[0x70] = &&op_0x70,
		[0x71] = &&op_0x71,
		[0x72] = &&op_0x72,
		[0x73] = &&op_0x73,
		[0x74] = &&op_0x74,
		[0x75] = &&op_0x75,
		[0x76] = &&op_0x76,
		[0x77] = &&op_0x77,
		[0x78] = &&op_0x78,
		[0x79] = &&op_0x79,
		[0x7a] = &&op_0x7a,
		[0x7b] = &&op_0x7b,
		[0x7c] = &&op_0x7c,
		[0x7d] = &&op_0x7d,
		[0x7e] = &&op_0x7e,
		[0x7f] = &&op_0x7f,
		[0x80] = &&op_0x80,
		[0x81] = &&op_0x81,
		[0x82] = &&op_0x82,
		[0x83] = &&op_0x83,
		[0x84] = &&op_0x84,
		[0x85] = &&op_0x85,
		[0x86] = &&op_0x86,
		[0x87] = &&op_0x87,
		[0x88] = &&op_0x88,
		[0x89] = &&op_0x89,
		[0x8a] = &&op_0x8a,
		[0x8b] = &&op_0x8b,
		[0x8c] = &&op_0x8c,
		[0x8d] = &&op_0x8d,
		[0x8e] = &&op_0x8e,
		[0x8f] = &&op_0x8f,
		[0x90] = &&op_0x90,
		[0x91] = &&op_0x91,
		[0x92] = &&op_0x92,
		[0x93] = &&op_0x93,
		[0x94] = &&op_0x94,
		[0x95] = &&op_0x95,
		[0x96] = &&op_0x96,
		[0x97] = &&op_0x97,
		[0x98] = &&op_0x98,
		[0x99] = &&op_0x99,
		[0x9a] = &&op_0x9a,
		[0x9b] = &&op_0x9b,
		[0x9c] = &&op_0x9c,
		[0x9d] = &&op_0x9d,
		[0x9e] = &&op_0x9e,
		[0x9f] = &&op_0x9f,
		[0xa0] = &&op_0xa0,
		[0xa1] = &&op_0xa1,
		[0xa2] = &&op_0xa2,
		[0xa3] = &&op_0xa3,
		[0xa4] = &&op_0xa4,
		[0xa5] = &&op_0xa5,
		[0xa6] = &&op_0xa6,
		[0xa7] = &&op_0xa7,
		[0xa8] = &&op_0xa8,
		[0xa9] = &&op_0xa9,
		[0xaa] = &&op_0xaa,
		[0xab] = &&op_0xab,
		[0xac] = &&op_0xac,
		[0xad] = &&op_0xad,
		[0xae] = &&op_0xae,
		[0xaf] = &&op_0xaf,
		[0xb0] = &&op_0xb0,
		[0xb1] = &&op_0xb1,
		[0xb2] = &&op_0xb2,
		[0xb3] = &&op_0xb3,
		[0xb4] = &&op_0xb4,
		[0xb5] = &&op_0xb5,
		[0xb6] = &&op_0xb6,
		[0xb7] = &&op_0xb7,
		[0xb8] = &&op_0xb8,
		[0xb9] = &&op_0xb9,
		[0xba] = &&op_0xba,
		[0xbb] = &&op_0xbb,
		[0xbc] = &&op_0xbc,
		[0xbd] = &&op_0xbd,
		[0xbe] = &&op_0xbe,
		[0xbf] = &&op_0xbf,
		[0xc0] = &&op_0xc0,
		[0xc1] = &&op_0xc1,
		[0xc2] = &&op_0xc2,
		[0xc3] = &&op_0xc3,
		[0xc4] = &&op_0xc4,
		[OP_BR] = &&op_OP_BR,
		[OP_BR_IF] = &&op_OP_BR_IF,
		[OP_BR_IF_SIMPLE] = &&op_OP_BR_IF_SIMPLE,
		[OP_BR_TABLE] = &&op_OP_BR_TABLE,
		[OP_CALL] = &&op_OP_CALL,
		[OP_CALL_INDIRECT] = &&op_OP_CALL_INDIRECT,
		[OP_DROP] = &&op_OP_DROP,
		[OP_F32_CONST] = &&op_OP_F32_CONST,
		[OP_F64_CONST] = &&op_OP_F64_CONST,
		[OP_GLOBAL_GET] = &&op_OP_GLOBAL_GET,
		[OP_GLOBAL_SET] = &&op_OP_GLOBAL_SET,
		[OP_I32_CONST] = &&op_OP_I32_CONST,
		[OP_I64_CONST] = &&op_OP_I64_CONST,
		[OP_JMP] = &&op_OP_JMP,
		[OP_JMP_IF_NOT] = &&op_OP_JMP_IF_NOT,
		[OP_LOCAL_GET] = &&op_OP_LOCAL_GET,
		[OP_LOCAL_SET] = &&op_OP_LOCAL_SET,
		[OP_LOCAL_TEE] = &&op_OP_LOCAL_TEE,
		[OP_LOOP_CHECK] = &&op_OP_LOOP_CHECK,
		[OP_MEMORY_GROW] = &&op_OP_MEMORY_GROW,
		[OP_MEMORY_SIZE] = &&op_OP_MEMORY_SIZE,
		[OP_NOP] = &&op_OP_NOP,
		[OP_REF_FUNC] = &&op_OP_REF_FUNC,
		[OP_REF_IS_NULL] = &&op_OP_REF_IS_NULL,
		[OP_REF_NULL] = &&op_OP_REF_NULL,
		[OP_RETURN] = &&op_OP_RETURN,
		[OP_SELECT] = &&op_OP_SELECT,
		[OP_TABLE_GET] = &&op_OP_TABLE_GET,
		[OP_TABLE_SET] = &&op_OP_TABLE_SET,
		[OP_UNREACHABLE] = &&op_OP_UNREACHABLE,
		[OP_FC_BASE + 0] = &&op_fc0,
		[OP_FC_BASE + 1] = &&op_fc1,
		[OP_FC_BASE + 10] = &&op_fc10,
		[OP_FC_BASE + 11] = &&op_fc11,
		[OP_FC_BASE + 12] = &&op_fc12,
		[OP_FC_BASE + 13] = &&op_fc13,
		[OP_FC_BASE + 14] = &&op_fc14,
		[OP_FC_BASE + 15] = &&op_fc15,
		[OP_FC_BASE + 16] = &&op_fc16,
		[OP_FC_BASE + 17] = &&op_fc17,
		[OP_FC_BASE + 2] = &&op_fc2,
		[OP_FC_BASE + 3] = &&op_fc3,
		[OP_FC_BASE + 4] = &&op_fc4,
		[OP_FC_BASE + 5] = &&op_fc5,
		[OP_FC_BASE + 6] = &&op_fc6,
		[OP_FC_BASE + 7] = &&op_fc7,
		[OP_FC_BASE + 8] = &&op_fc8,
		[OP_FC_BASE + 9] = &&op_fc9,
#define FUSED_ENTRIES(k, opcode, bits, expr)              \
		[OP_FUSED + 64 * FUSE_L + k] = &&op_l_##k,     \
		[OP_FUSED + 64 * FUSE_I + k] = &&op_i_##k,     \
		[OP_FUSED + 64 * FUSE_LL + k] = &&op_ll_##k,   \
		[OP_FUSED + 64 * FUSE_LI + k] = &&op_li_##k,   \
		DERIVED_ENTRIES(k, s) DERIVED_ENTRIES(k, l) DERIVED_ENTRIES(k, i) \
		DERIVED_ENTRIES(k, ll) DERIVED_ENTRIES(k, li)
#define SHAPE_s SHAPE_S
#define SHAPE_l SHAPE_L
#define SHAPE_i SHAPE_I
#define SHAPE_ll SHAPE_LL
#define SHAPE_li SHAPE_LI
#define DERIVED_ENTRIES(k, sh)                                       \
		[OP_FUSED + 64 * (FUSE_SET + SHAPE_##sh) + k] = &&op_##sh##_set_##k, \
		[OP_FUSED + 64 * (FUSE_BR + SHAPE_##sh) + k] = &&op_##sh##_br_##k,   \
		[OP_FUSED + 64 * (FUSE_BRZ + SHAPE_##sh) + k] = &&op_##sh##_brz_##k, \
		[OP_FUSED + 64 * (FUSE_TEE + SHAPE_##sh) + k] = &&op_##sh##_tee_##k,
		WASM_FUSABLE_BINOPS(FUSED_ENTRIES)
#undef DERIVED_ENTRIES
#undef FUSED_ENTRIES
	};
#pragma GCC diagnostic pop
#define NEXT() goto *dispatch[*pc++]

	goto call;

		op_OP_UNREACHABLE:
			trap = KIS_WASM_TRAP_UNREACHABLE;
			goto trapped;
		op_OP_NOP:
			NEXT();
		op_OP_JMP:
			pc = code + pc[0];
			NEXT();
		op_OP_LOOP_CHECK:
			if (atomic_load_explicit(&s->interrupt, memory_order_relaxed)) {
				trap = KIS_WASM_TRAP_INTERRUPTED;
				goto trapped;
			}
			if (s->fuel >= 0 && s->fuel-- == 0) {
				trap = KIS_WASM_TRAP_OUT_OF_FUEL;
				goto trapped;
			}
			NEXT();
		op_OP_JMP_IF_NOT:
			if ((uint32_t)*--sp == 0)
				pc = code + pc[0];
			else
				pc++;
			NEXT();
		op_OP_BR_IF_SIMPLE:
			if ((uint32_t)*--sp != 0)
				pc = code + pc[0];
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
			memmove(fp, sp - n, (size_t)n * 8);
			sp = fp + n;
			struct wasm_frame *fr = &s->frames[--s->depth];
			if (s->depth == entry_depth) {
				s->sp = sp;
				return KIS_WASM_OK;
			}
			pc = fr->ret_pc;
			fp = fr->fp;
			fn = fr->func;
			code = fn->code->ops;
			inst = fn->inst;
			memo = inst->m->nmems ? inst->mems[0] : NULL;
			mem = memo ? memo->data : NULL;
			memsize = memo ? memo->size : 0;
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
			uint32_t c = (uint32_t)sp[-1];
			sp -= 2;
			if (!c)
				sp[-1] = sp[0];
			NEXT();
		}
		op_OP_LOCAL_GET:
			*sp++ = fp[*pc++];
			NEXT();
		op_OP_LOCAL_SET:
			fp[*pc++] = *--sp;
			NEXT();
		op_OP_LOCAL_TEE:
			fp[*pc++] = sp[-1];
			NEXT();
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
#define EA() ((uint64_t)(uint32_t)sp[-1] + *pc++)
		op_0x28: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; sp[-1] = rd32(mem + ea); NEXT(); }
		op_0x29: { uint64_t ea = EA(); if (ea + 8 > memsize) goto mem_oob; sp[-1] = rd64(mem + ea); NEXT(); }
		op_0x2a: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; sp[-1] = rd32(mem + ea); NEXT(); }
		op_0x2b: { uint64_t ea = EA(); if (ea + 8 > memsize) goto mem_oob; sp[-1] = rd64(mem + ea); NEXT(); }
		op_0x2c: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; sp[-1] = (uint32_t)(int32_t)(int8_t)mem[ea]; NEXT(); }
		op_0x2d: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; sp[-1] = mem[ea]; NEXT(); }
		op_0x2e: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; sp[-1] = (uint32_t)(int32_t)(int16_t)rd16(mem + ea); NEXT(); }
		op_0x2f: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; sp[-1] = rd16(mem + ea); NEXT(); }
		op_0x30: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; sp[-1] = (uint64_t)(int64_t)(int8_t)mem[ea]; NEXT(); }
		op_0x31: { uint64_t ea = EA(); if (ea + 1 > memsize) goto mem_oob; sp[-1] = mem[ea]; NEXT(); }
		op_0x32: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; sp[-1] = (uint64_t)(int64_t)(int16_t)rd16(mem + ea); NEXT(); }
		op_0x33: { uint64_t ea = EA(); if (ea + 2 > memsize) goto mem_oob; sp[-1] = rd16(mem + ea); NEXT(); }
		op_0x34: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; sp[-1] = (uint64_t)(int64_t)(int32_t)rd32(mem + ea); NEXT(); }
		op_0x35: { uint64_t ea = EA(); if (ea + 4 > memsize) goto mem_oob; sp[-1] = rd32(mem + ea); NEXT(); }
#undef EA
#define STORE(n) \
		uint64_t ea = (uint64_t)(uint32_t)sp[-2] + *pc++; \
		uint64_t v = sp[-1]; \
		sp -= 2; \
		if (ea + (n) > memsize) \
			goto mem_oob_stored; \
		memcpy(mem + ea, &v, (n)) /* little-endian host: low bytes first */
		op_0x36: { STORE(4); NEXT(); }
		op_0x37: { STORE(8); NEXT(); }
		op_0x38: { STORE(4); NEXT(); }
		op_0x39: { STORE(8); NEXT(); }
		op_0x3a: { STORE(1); NEXT(); }
		op_0x3b: { STORE(2); NEXT(); }
		op_0x3c: { STORE(1); NEXT(); }
		op_0x3d: { STORE(2); NEXT(); }
		op_0x3e: { STORE(4); NEXT(); }
#undef STORE
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
			*sp++ = *pc++;
			NEXT();
		op_OP_F32_CONST:
			*sp++ = *pc++;
			NEXT();
		op_OP_I64_CONST:
		op_OP_F64_CONST:
			*sp++ = (uint64_t)pc[0] | ((uint64_t)pc[1] << 32);
			pc += 2;
			NEXT();

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
		uint##bits##_t a = (uint##bits##_t)sp[-1], b = (uint##bits##_t)fp[*pc++]; \
		sp[-1] = (uint##bits##_t)(expr);                                          \
		NEXT();                                                                   \
	}                                                                                 \
	op_i_##k: {                                                                       \
		uint##bits##_t a = (uint##bits##_t)sp[-1];                                \
		uint##bits##_t b = (uint##bits##_t)(int##bits##_t)(int32_t)*pc++;         \
		sp[-1] = (uint##bits##_t)(expr);                                          \
		NEXT();                                                                   \
	}                                                                                 \
	op_ll_##k: {                                                                      \
		uint##bits##_t a = (uint##bits##_t)fp[pc[0]], b = (uint##bits##_t)fp[pc[1]]; \
		pc += 2;                                                                  \
		*sp++ = (uint##bits##_t)(expr);                                           \
		NEXT();                                                                   \
	}                                                                                 \
	op_li_##k: {                                                                      \
		uint##bits##_t a = (uint##bits##_t)fp[pc[0]];                             \
		uint##bits##_t b = (uint##bits##_t)(int##bits##_t)(int32_t)pc[1];         \
		pc += 2;                                                                  \
		*sp++ = (uint##bits##_t)(expr);                                           \
		NEXT();                                                                   \
	}
		WASM_FUSABLE_BINOPS(FUSED_HANDLERS)
#undef FUSED_HANDLERS

		/* their forms that store the result or branch on it: operands
		 * first (n words of them), then the local or target word */
#define OPERANDS_s(bits) \
	uint##bits##_t b = (uint##bits##_t)sp[-1], a = (uint##bits##_t)sp[-2]; \
	sp -= 2;
#define OPERANDS_l(bits) \
	uint##bits##_t a = (uint##bits##_t)*--sp, b = (uint##bits##_t)fp[pc[0]];
#define OPERANDS_i(bits) \
	uint##bits##_t a = (uint##bits##_t)*--sp, b = (uint##bits##_t)(int##bits##_t)(int32_t)pc[0];
#define OPERANDS_ll(bits) \
	uint##bits##_t a = (uint##bits##_t)fp[pc[0]], b = (uint##bits##_t)fp[pc[1]];
#define OPERANDS_li(bits) \
	uint##bits##_t a = (uint##bits##_t)fp[pc[0]], b = (uint##bits##_t)(int##bits##_t)(int32_t)pc[1];
#define DERIVED_HANDLERS(k, bits, expr, sh, n)                    \
	op_##sh##_set_##k: {                                      \
		OPERANDS_##sh(bits)                               \
		fp[pc[n]] = (uint##bits##_t)(expr);               \
		pc += n + 1;                                      \
		NEXT();                                           \
	}                                                         \
	op_##sh##_tee_##k: {                                      \
		OPERANDS_##sh(bits)                               \
		uint64_t v = (uint##bits##_t)(expr);              \
		fp[pc[n]] = v;                                    \
		*sp++ = v;                                        \
		pc += n + 1;                                      \
		NEXT();                                           \
	}                                                         \
	op_##sh##_br_##k: {                                       \
		OPERANDS_##sh(bits)                               \
		pc = ((expr) != 0) ? code + pc[n] : pc + n + 1;        \
		NEXT();                                           \
	}                                                         \
	op_##sh##_brz_##k: {                                      \
		OPERANDS_##sh(bits)                               \
		pc = ((expr) != 0) ? pc + n + 1 : code + pc[n];        \
		NEXT();                                           \
	}
#define ALL_DERIVED(k, opcode, bits, expr)             \
	DERIVED_HANDLERS(k, bits, expr, s, 0)          \
	DERIVED_HANDLERS(k, bits, expr, l, 1)          \
	DERIVED_HANDLERS(k, bits, expr, i, 1)          \
	DERIVED_HANDLERS(k, bits, expr, ll, 2)         \
	DERIVED_HANDLERS(k, bits, expr, li, 2)
		WASM_FUSABLE_BINOPS(ALL_DERIVED)
#undef ALL_DERIVED
#undef DERIVED_HANDLERS

	op_bad:
		trap = KIS_WASM_TRAP_UNREACHABLE; /* not produced by compile.c */
		goto trapped;

	call:
		/* Calls (spec 4.4.8): the interrupt flag and fuel are checked
		 * here and at loop headers, so every unbounded run passes one. */
		if (atomic_load_explicit(&s->interrupt, memory_order_relaxed)) {
			trap = KIS_WASM_TRAP_INTERRUPTED;
			goto trapped;
		}
		if (s->fuel >= 0 && s->fuel-- == 0) {
			trap = KIS_WASM_TRAP_OUT_OF_FUEL;
			goto trapped;
		}
		if (s->depth >= KIS_WASM_MAX_CALL_DEPTH) {
			trap = KIS_WASM_TRAP_STACK_EXHAUSTED;
			goto trapped;
		}
		{
			const struct wasm_functype *ft = callee->type;
			if (callee->host) {
				if (sp + ft->np + ft->nr > s->stack_end) {
					trap = KIS_WASM_TRAP_STACK_EXHAUSTED;
					goto trapped;
				}
				/* arguments copied above the stack top so results
				 * never overwrite them; re-entry starts above both */
				memcpy(sp, sp - ft->np, (size_t)ft->np * 8);
				s->sp = sp + ft->np + ft->nr;
				s->depth++;
				trap = callee->host(callee->user, inst, sp, sp + ft->np);
				s->depth--;
				if (trap != KIS_WASM_OK)
					goto trapped;
				memmove(sp - ft->np, sp + ft->np, (size_t)ft->nr * 8);
				sp = sp - ft->np + ft->nr;
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
			uint64_t *nfp = sp - ft->np;
			if (nfp + cd->max_height > s->stack_end) {
				trap = KIS_WASM_TRAP_STACK_EXHAUSTED;
				goto trapped;
			}
			struct wasm_frame *fr = &s->frames[s->depth++];
			fr->ret_pc = pc;
			fr->fp = fp;
			fr->func = fn;
			memset(nfp + ft->np, 0, (size_t)(cd->nlocals - ft->np) * 8);
			fp = nfp;
			sp = fp + cd->nlocals;
			fn = callee;
			code = cd->ops;
			pc = code;
			if (fn->inst != inst) {
				inst = fn->inst;
				memo = inst->m->nmems ? inst->mems[0] : NULL;
			}
			mem = memo ? memo->data : NULL;
			memsize = memo ? memo->size : 0;
		}
		NEXT();

#undef NEXT
mem_oob_stored:
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
	s->depth = entry_depth;
	return trap;
}

enum kis_wasm_trap wasm_invoke(struct kis_wasm_store *s, struct kis_wasm_func *f,
			       const uint64_t *args, uint64_t *results)
{
	const struct wasm_functype *ft = f->type;
	uint64_t *base = s->sp;
	if (base + ft->np + ft->nr + 1 > s->stack_end)
		return KIS_WASM_TRAP_STACK_EXHAUSTED;
	if (ft->np)
		memcpy(base, args, (size_t)ft->np * 8);
	s->sp = base + ft->np;
	enum kis_wasm_trap t = run(s, f);
	if (t == KIS_WASM_OK && ft->nr)
		memcpy(results, base, (size_t)ft->nr * 8);
	s->sp = base;
	return t;
}
