/* SPDX-License-Identifier: MIT */
/* Identifier minting (getrandom) and validation. An id becomes a directory
 * name and a container id, so the charset admits nothing a path can abuse. */
#include "core/util.h"

#include <string.h>
#include <sys/random.h>

#include "kis/id.h"

/* Crockford's base32 alphabet, lower-case: no i, l, o, u to avoid confusion. */
static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";

int kis_id_mint(char prefix, char buf[KIS_ID_BUFSZ], struct kis_error **err)
{
	unsigned char raw[17]; /* 128 random bits, one spare byte of padding */
	size_t got = 0;
	while (got < 16) {
		ssize_t n = getrandom(raw + got, 16 - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read random bytes");
		}
		got += (size_t)n;
	}
	raw[16] = 0;
	size_t o = 0;
	buf[o++] = prefix;
	buf[o++] = '-';
	/* 26 symbols of 5 bits cover 130 bits; the last two are zero padding. */
	for (unsigned bit = 0; bit < 130; bit += 5) {
		unsigned byte = bit / 8, off = bit % 8;
		unsigned v = ((unsigned)raw[byte] << 8 | raw[byte + 1]) >> (11 - off);
		buf[o++] = alphabet[v & 31];
	}
	buf[o] = '\0';
	return 0;
}

int kis_id_validate(const char *id, const char *what, struct kis_error **err)
{
	if (!id || !*id)
		return kis_error_set(err, KIS_E_INVALID_ID, 0, "%s is empty", what);
	size_t n = strnlen(id, KIS_ID_MAX + 1);
	if (n > KIS_ID_MAX)
		return kis_error_set(err, KIS_E_INVALID_ID, 0,
				     "%s is longer than %d characters", what, KIS_ID_MAX);
	if (id[0] == '-')
		return kis_error_set(err, KIS_E_INVALID_ID, 0,
				     "%s '%s' starts with a dash", what, id);
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return kis_error_set(err, KIS_E_INVALID_ID, 0,
					     "%s '%s' may hold only a-z, 0-9 and '-'", what, id);
	}
	return 0;
}
