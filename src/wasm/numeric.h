/* SPDX-License-Identifier: MIT */
/* Numeric semantics of spec 4.3 that need more than a C operator: float
 * rounding, min/max, sqrt and float-to-int conversion, bit-exact, no libm. */
#ifndef KIS_WASM_NUMERIC_H
#define KIS_WASM_NUMERIC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

#endif
