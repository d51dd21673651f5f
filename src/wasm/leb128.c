/* SPDX-License-Identifier: MIT */
/* LEB128 integers (spec 5.2.2), the one encoding every reader of the binary
 * shares: decode.c for sections, compile.c for immediates, the compiler
 * plugin through its host table. Their own file so that none of those
 * depends on another for it. */
#include "wasm/internal.h"

/* At most ceil(N/7) bytes, and the unused bits of
 * the last byte must be zero (unsigned) or copies of the sign bit (signed). */

int wasm_read_u32(const uint8_t **pp, const uint8_t *end, uint32_t *v)
{
	*v = 0;
	const uint8_t *p = *pp;
	uint32_t r = 0;
	for (unsigned i = 0; i < 5; i++) {
		if (p >= end)
			return -1;
		uint8_t b = *p++;
		if (i == 4 && (b & 0xf0))
			return -1;
		r |= (uint32_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*pp = p;
			*v = r;
			return 0;
		}
	}
	return -1;
}

static int read_signed(const uint8_t **pp, const uint8_t *end, unsigned bits, int64_t *v)
{
	*v = 0;
	const uint8_t *p = *pp;
	uint64_t r = 0;
	unsigned maxbytes = (bits + 6) / 7;
	for (unsigned i = 0; i < maxbytes; i++) {
		if (p >= end)
			return -1;
		uint8_t b = *p++;
		unsigned shift = 7 * i;
		if (i == maxbytes - 1) {
			/* bits left for the value in this byte, the rest must be sign */
			unsigned used = bits - shift;
			int sign = (b >> (used - 1)) & 1;
			uint8_t rest = (uint8_t)((b & 0x7f) >> used);
			uint8_t want = sign ? (uint8_t)(0x7f >> used) : 0;
			if ((b & 0x80) || rest != want)
				return -1;
		}
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			shift += 7;
			if (shift < 64 && (b & 0x40))
				r |= ~(uint64_t)0 << shift;
			*pp = p;
			*v = (int64_t)r;
			return 0;
		}
	}
	return -1;
}

int wasm_read_s32(const uint8_t **p, const uint8_t *end, int32_t *v)
{
	int64_t x;
	if (read_signed(p, end, 32, &x) < 0)
		return -1;
	*v = (int32_t)x;
	return 0;
}

int wasm_read_s33(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	return read_signed(p, end, 33, v);
}

int wasm_read_s64(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	return read_signed(p, end, 64, v);
}
