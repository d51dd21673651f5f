/* SPDX-License-Identifier: MIT */
/* network.allow's grammar: one destination, parsed strictly into binary
 * values (the only form that travels on, to src/net/policy.c's rules). */
#include "core/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

#include "core/net_dest.h"

/* A decimal number 0..max with no sign, no leading zero, at most 5 digits. */
static int parse_dec(const char **p, unsigned max, unsigned *out)
{
	const char *s = *p;
	if (!isdigit((unsigned char)*s) || (s[0] == '0' && isdigit((unsigned char)s[1])))
		return -1;
	unsigned v = 0;
	for (int n = 0; isdigit((unsigned char)*s); n++, s++) {
		if (n >= 5)
			return -1;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (v > max)
		return -1;
	*p = s;
	*out = v;
	return 0;
}

static uint32_t prefix_mask(unsigned prefix)
{
	return prefix ? ~0u << (32 - prefix) : 0;
}

int kis_net_dest_parse(const char *s, struct kis_net_dest *out, char *why, size_t n)
{
	static const char form[] = "expected A.B.C.D[/N][:PORT[-PORT]]";
	if (!s || !*s || strlen(s) > 40) {
		snprintf(why, n, "%s", form);
		return -1;
	}
	const char *colon = strchr(s, ':'), *dot = strchr(s, '.');
	if (colon != strrchr(s, ':') || strchr(s, '[') || (colon && (!dot || colon < dot))) {
		/* two colons, brackets, or a colon before any dot: an IPv6 form */
		snprintf(why, n, "%s (IPv4 only: egress carries no IPv6)", form);
		return -1;
	}
	const char *p = s;
	uint32_t addr = 0;
	for (int i = 0; i < 4; i++) {
		unsigned o;
		if ((i && *p++ != '.') || parse_dec(&p, 255, &o) < 0) {
			snprintf(why, n, "%s: the address has four decimal octets 0..255", form);
			return -1;
		}
		addr = (addr << 8) | o;
	}
	unsigned prefix = 32, lo = 0, hi = 0;
	if (*p == '/') {
		p++;
		if (parse_dec(&p, 32, &prefix) < 0) {
			snprintf(why, n, "%s: the prefix is 0 to 32", form);
			return -1;
		}
	}
	if (*p == ':') {
		p++;
		if (parse_dec(&p, 65535, &lo) < 0 || lo == 0) {
			snprintf(why, n, "%s: a port is 1 to 65535", form);
			return -1;
		}
		hi = lo;
		if (*p == '-') {
			p++;
			if (parse_dec(&p, 65535, &hi) < 0 || hi < lo) {
				snprintf(why, n, "%s: a port range is LOW-HIGH, 1 to 65535", form);
				return -1;
			}
		}
	}
	if (*p) {
		snprintf(why, n, "%s", form);
		return -1;
	}
	if (addr & ~prefix_mask(prefix)) {
		struct in_addr a = {.s_addr = htonl(addr & prefix_mask(prefix))};
		char b[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a, b, sizeof(b));
		snprintf(why, n, "host bits are set after /%u (the network is %s/%u)", prefix, b,
			 prefix);
		return -1;
	}
	*out = (struct kis_net_dest){.addr = addr, .prefix = (uint8_t)prefix,
				     .port_lo = (uint16_t)lo, .port_hi = (uint16_t)hi};
	return 0;
}

static void fmt_net(uint32_t addr, unsigned prefix, char *buf, size_t n)
{
	snprintf(buf, n, "%u.%u.%u.%u/%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255,
		 addr & 255, prefix);
}

void kis_net_dest_format(const struct kis_net_dest *d, char *buf, size_t n)
{
	char net[24];
	fmt_net(d->addr, d->prefix, net, sizeof(net));
	if (!d->port_lo)
		snprintf(buf, n, "%s", net);
	else if (d->port_lo == d->port_hi)
		snprintf(buf, n, "%s:%u", net, d->port_lo);
	else
		snprintf(buf, n, "%s:%u-%u", net, d->port_lo, d->port_hi);
}

