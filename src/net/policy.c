/* SPDX-License-Identifier: MIT */
/* Egress's address policy: what network.allow may name, the one list of
 * rules (first match wins), and its nft text (--dry-run, egress.h). */
#include "core/util.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>

#include "net/egress_internal.h"

static void fmt_net(uint32_t addr, unsigned prefix, char *buf, size_t n)
{
	snprintf(buf, n, "%u.%u.%u.%u/%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255,
		 addr & 255, prefix);
}

struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->oom = true;
			return;
		}
		if (b->s && b->len + (size_t)k < b->cap) {
			b->len += (size_t)k;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
		char *g = realloc(b->s, cap);
		if (!g) {
			b->oom = true;
			return;
		}
		b->s = g;
		b->cap = cap;
	}
}

/* Never reachable, whatever network.allow says: "this network", loopback
 * (the host's, through pasta), link-local (cloud metadata at
 * 169.254.169.254), multicast, reserved and broadcast, and the sandbox's
 * own link (its gateway and forwarder are pasta's, not destinations). */
static const struct kis_net_dest always_denied[] = {
	{0x00000000u, 8, 0, 0},  {0x7f000000u, 8, 0, 0}, {0xa9fe0000u, 16, 0, 0},
	{0xe0000000u, 3, 0, 0},  {0x0a000200u, 24, 0, 0},
};
/* Private and shared ranges (RFC 1918, RFC 6598): reachable only through
 * an entry of network.allow that lies inside one. */
static const struct kis_net_dest private_ranges[] = {
	{0x0a000000u, 8, 0, 0}, {0xac100000u, 12, 0, 0}, {0xc0a80000u, 16, 0, 0},
	{0x64400000u, 10, 0, 0},
};

static bool inside(const struct kis_net_dest *d, const struct kis_net_dest *range)
{
	return d->prefix >= range->prefix &&
	       (d->addr & egress_prefix_mask(range->prefix)) == range->addr;
}

static bool is_private(const struct kis_net_dest *d)
{
	for (size_t i = 0; i < ARRAY_SIZE(private_ranges); i++)
		if (inside(d, &private_ranges[i]))
			return true;
	return false;
}

int kis_egress_check_allow(const struct kis_net_dest *allow, size_t n, struct kis_error **err)
{
	/* An entry that names only what the policy refuses whatever the list
	 * says is a promise never kept: accepted, it ran stricter than asked
	 * and the caller was not told (issue 40 item 5). Refused by name. */
	for (size_t i = 0; i < n; i++) {
		char d[40];
		kis_net_dest_format(&allow[i], d, sizeof(d));
		for (size_t k = 0; k < ARRAY_SIZE(always_denied); k++)
			if (inside(&allow[i], &always_denied[k]))
				return kis_error_set(
				    err, KIS_E_INVALID_PROFILE, 0,
				    "network.allow[%zu]: '%s' lies in a range a sandbox never reaches "
				    "(\"this network\", loopback, link-local, multicast, reserved or "
				    "the sandbox's own link): drop the entry",
				    i, d);
	}
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot read the host's addresses to check network.allow");
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		if (allow[i].prefix != 32)
			continue; /* a range reaches its other addresses */
		for (struct ifaddrs *a = ifa; a; a = a->ifa_next) {
			if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET)
				continue;
			uint32_t h = ntohl(((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr.s_addr);
			if (h != allow[i].addr)
				continue;
			char d[40];
			kis_net_dest_format(&allow[i], d, sizeof(d));
			r = kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					  "network.allow[%zu]: '%s' is an address of this host (%s), "
					  "which a sandbox never reaches: drop the entry",
					  i, d, a->ifa_name ? a->ifa_name : "?");
			break;
		}
	}
	freeifaddrs(ifa);
	return r;
}

/* ---- the rules, in order (egress_internal.h) ---- */

static void say(rule_fn fn, void *ctx, enum pchain c, enum pk k, const struct kis_net_dest *d,
		enum pv v)
{
	struct prule r = {.chain = c, .kind = k, .d = d, .v = v};
	fn(ctx, &r);
}

int egress_policy_rules(const struct kis_net_dest *allow, size_t n_allow, bool allow_set, bool vm,
			rule_fn fn, void *ctx)
{
	const enum pchain O = PC_OUTPUT;
	/* output: what the sandbox sends; policy drop, the first match wins.
	 * A microvm's guest has a loopback of its own: S's is then no one's,
	 * and passt's sockets (the guest's flows) may not reach it. */
	say(fn, ctx, O, PK_OIF_LO, NULL, vm ? PV_REFUSE : PV_ACCEPT);
	say(fn, ctx, O, PK_CT_REPLY, NULL, PV_ACCEPT);
	say(fn, ctx, O, PK_IPV6, NULL, PV_REFUSE);
	say(fn, ctx, O, PK_DNS, NULL, PV_ACCEPT);
	for (size_t i = 0; i < ARRAY_SIZE(always_denied); i++)
		say(fn, ctx, O, PK_DEST, &always_denied[i], PV_REFUSE);
	/* every address the host has, at this moment (a pasta socket to one
	 * of them would be the host talking to itself) */
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return -1;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
			struct kis_net_dest h = {
				.addr = ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr),
				.prefix = 32};
			say(fn, ctx, O, PK_DEST, &h, PV_REFUSE);
		}
	freeifaddrs(ifa);
	for (size_t i = 0; i < n_allow; i++)
		if (is_private(&allow[i]))
			say(fn, ctx, O, PK_DEST, &allow[i], PV_ACCEPT);
	for (size_t i = 0; i < ARRAY_SIZE(private_ranges); i++)
		say(fn, ctx, O, PK_DEST, &private_ranges[i], PV_REFUSE);
	if (!allow_set)
		say(fn, ctx, O, PK_ANY, NULL, PV_ACCEPT);
	for (size_t i = 0; i < n_allow; i++)
		if (!is_private(&allow[i]))
			say(fn, ctx, O, PK_DEST, &allow[i], PV_ACCEPT);
	say(fn, ctx, O, PK_ANY, NULL, PV_REFUSE);
	/* input: replies only; nothing connects in */
	say(fn, ctx, PC_INPUT, PK_IIF_LO, NULL, vm ? PV_DROP : PV_ACCEPT);
	say(fn, ctx, PC_INPUT, PK_CT_REPLY, NULL, PV_ACCEPT);
	return 0;
}

/* A refused destination fails at once (an ICMP error to the sender's own
 * socket: connect(2) sees EHOSTUNREACH or EACCES) rather than timing out;
 * the chain's policy drop stays behind it. */
#define REFUSE "reject with icmpx type admin-prohibited"

struct text_writer {
	struct sbuf b;
	int chain; /* the chain open, -1 none */
};

static void text_rule(void *ctx, const struct prule *r)
{
	struct text_writer *t = ctx;
	struct sbuf *b = &t->b;
	if (t->chain != (int)r->chain) {
		if (t->chain >= 0)
			sb_printf(b, "\t}\n");
		sb_printf(b, "\tchain %s {\n"
			     "\t\ttype filter hook %s priority filter; policy drop;\n",
			  r->chain == PC_OUTPUT ? "output" : "input",
			  r->chain == PC_OUTPUT ? "output" : "input");
		t->chain = (int)r->chain;
	}
	const char *v = r->v == PV_ACCEPT ? "accept" : r->v == PV_DROP ? "drop" : REFUSE;
	char net[24];
	switch (r->kind) {
	case PK_OIF_LO:
		sb_printf(b, "\t\toifname \"lo\" %s\n", v);
		break;
	case PK_IIF_LO:
		sb_printf(b, "\t\tiifname \"lo\" %s\n", v);
		break;
	case PK_CT_REPLY:
		sb_printf(b, "\t\tct state established,related %s\n", v);
		break;
	case PK_IPV6:
		sb_printf(b, "\t\tmeta nfproto ipv6 %s\n", v);
		break;
	case PK_DNS:
		sb_printf(b, "\t\tip daddr " KIS_EGRESS_DNS " udp dport 53 %s\n", v);
		break;
	case PK_DEST:
		fmt_net(r->d->addr, r->d->prefix, net, sizeof(net));
		if (r->d->port_lo)
			sb_printf(b, "\t\tip daddr %s meta l4proto { tcp, udp } th dport %u-%u %s\n",
				  net, r->d->port_lo, r->d->port_hi, v);
		else
			sb_printf(b, "\t\tip daddr %s %s\n", net, v);
		break;
	case PK_ANY:
		sb_printf(b, "\t\t%s\n", v);
		break;
	default:
		break;
	}
}

char *kis_egress_ruleset(const struct kis_net_dest *allow, size_t n_allow, bool allow_set)
{
	return kis_egress_ruleset_for(allow, n_allow, allow_set, false);
}

char *kis_egress_ruleset_for(const struct kis_net_dest *allow, size_t n_allow, bool allow_set,
			     bool vm)
{
	struct text_writer t = {.chain = -1};
	sb_printf(&t.b, "table inet kis_egress {\n");
	if (egress_policy_rules(allow, n_allow, allow_set, vm, text_rule, &t) < 0)
		t.b.oom = true;
	sb_printf(&t.b, "\t}\n}\n");
	if (t.b.oom) {
		free(t.b.s);
		return NULL;
	}
	return t.b.s;
}


void *kis_egress_describe(const struct kis_net_dest *allow, size_t n_allow, bool allow_set,
			  uid_t helper_uid)
{
	return kis_egress_describe_for(allow, n_allow, allow_set, helper_uid, false);
}

void *kis_egress_describe_for(const struct kis_net_dest *allow, size_t n_allow, bool allow_set,
			      uid_t helper_uid, bool vm)
{
	json_t *a = allow_set ? json_array() : json_null();
	for (size_t i = 0; allow_set && i < n_allow; i++) {
		char d[48];
		kis_net_dest_format(&allow[i], d, sizeof(d));
		json_array_append_new(a, json_string(d));
	}
	char *rules = kis_egress_ruleset_for(allow, n_allow, allow_set, vm);
	json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:I, s:s?}", "helper",
			      vm ? "passt (the guest's virtio-net backend) inside S, pasta" : "pasta",
			      "address",
			      KIS_EGRESS_ADDR "/24", "dns", KIS_EGRESS_DNS, "allow", a, "helper_uid",
			      (json_int_t)helper_uid, "nft_rules", rules);
	free(rules);
	return o;
}
