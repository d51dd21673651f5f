/* SPDX-License-Identifier: MIT */
/* bench/wasm-real.sh's zlib workload: deflate standard input (level 6,
 * zlib's default) into memory, inflate it back, check the round trip, and
 * print the sizes and the CRC-32 of both sides, so the native and wasm
 * builds can be compared by their output. Built against zlib's own
 * sources (Debian's source package, fetched by the script), natively and
 * to wasm32-wasi with the same defines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zlib.h"

static unsigned char *read_all(size_t *len)
{
	size_t cap = 1u << 20, n = 0;
	unsigned char *buf = malloc(cap);
	if (!buf)
		return NULL;
	for (;;) {
		if (n == cap) {
			unsigned char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		size_t r = fread(buf + n, 1, cap - n, stdin);
		if (r == 0)
			break;
		n += r;
	}
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	int level = argc > 1 ? atoi(argv[1]) : Z_DEFAULT_COMPRESSION;
	size_t len;
	unsigned char *in = read_all(&len);
	if (!in) {
		fputs("zlib_bench: out of memory\n", stderr);
		return 1;
	}
	uLong bound = compressBound((uLong)len);
	unsigned char *z = malloc(bound);
	unsigned char *back = malloc(len ? len : 1);
	if (!z || !back) {
		fputs("zlib_bench: out of memory\n", stderr);
		return 1;
	}
	uLongf zlen = bound;
	int rc = compress2(z, &zlen, in, (uLong)len, level);
	if (rc != Z_OK) {
		fprintf(stderr, "zlib_bench: compress2: %d\n", rc);
		return 1;
	}
	uLongf blen = (uLongf)len;
	rc = uncompress(back, &blen, z, zlen);
	if (rc != Z_OK || blen != len || memcmp(in, back, len) != 0) {
		fprintf(stderr, "zlib_bench: the round trip differs (%d)\n", rc);
		return 1;
	}
	printf("in %zu deflated %lu crc32 %08lx deflated-crc32 %08lx\n", len, (unsigned long)zlen,
	       crc32(0L, in, (uInt)len), crc32(0L, z, (uInt)zlen));
	free(in);
	free(z);
	free(back);
	return 0;
}
