/* SPDX-License-Identifier: MIT */
/* network.allow's destinations: "A.B.C.D[/N][:PORT[-PORT]]", parsed
 * strictly (src/core/net_dest.c). */
#ifndef KIS_CORE_NET_DEST_H
#define KIS_CORE_NET_DEST_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kis/profile.h"

/* At most this many network.allow entries. */
#define KIS_NET_ALLOW_MAX 64

/* Parse one entry strictly: four decimal octets without leading zeros, a
 * prefix 0..32 with no host bits set, ports 1..65535 with P <= Q, nothing
 * else (no space, no sign, no IPv6). On failure, why says what is wrong. */
int kis_net_dest_parse(const char *s, struct kis_net_dest *out, char *why, size_t n);
/* The entry written back in the form it was parsed from (n >= 40). */
void kis_net_dest_format(const struct kis_net_dest *d, char *buf, size_t n);

/* A copy of a list of destinations (plans keep their own). */
static inline struct kis_net_dest *kis_net_dests_dup(const struct kis_net_dest *d, size_t n)
{
	struct kis_net_dest *c = malloc(n * sizeof(*c));
	if (c)
		memcpy(c, d, n * sizeof(*c));
	return c;
}

#endif
