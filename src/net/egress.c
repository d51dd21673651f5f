/* SPDX-License-Identifier: MIT */
/* Network egress: network.allow's grammar, the nftables policy of the
 * sandbox's network namespace, and the pasta helper's life (egress.h). */
#include "core/util.h"

#include <arpa/inet.h>
#include <cpuid.h>
#include <ctype.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <ifaddrs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <linux/if_tun.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/route.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "confine/confine.h"
#include "core/record.h"
#include "exec/exec.h"
#include "core/io.h"
#include "net/egress.h"

#define EG_ADDR 0x0a00020fu /* KIS_EGRESS_ADDR */
#define EG_GW 0x0a000202u   /* KIS_EGRESS_GATEWAY */
#define EG_DNS 0x0a000203u  /* KIS_EGRESS_DNS */
#define EG_MASK 0xffffff00u /* /24 */

/* ---- the policy, as nftables rules ---- */

static uint32_t prefix_mask(unsigned prefix)
{
	return prefix ? ~0u << (32 - prefix) : 0;
}

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
	       (d->addr & prefix_mask(range->prefix)) == range->addr;
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

/* ---- the policy: one list of rules, two writers ----
 *
 * policy_rules() says the rules, in order (first match wins); nft's text
 * (kis_egress_ruleset, shown by --dry-run) and the netlink batch the engine
 * loads into S (nl_rule) are both written from it. */

enum pk {
	PK_OIF_LO,   /* oifname "lo" */
	PK_IIF_LO,   /* iifname "lo" */
	PK_CT_REPLY, /* ct state established,related */
	PK_IPV6,     /* meta nfproto ipv6 */
	PK_DNS,      /* ip daddr <forwarder> udp dport 53 */
	PK_DEST,     /* ip daddr <d> [meta l4proto { tcp, udp } th dport lo-hi] */
	PK_ANY,      /* everything */
};
enum pv { PV_ACCEPT, PV_REFUSE, PV_DROP };
enum pchain { PC_OUTPUT, PC_INPUT };

struct prule {
	enum pchain chain;
	enum pk kind;
	const struct kis_net_dest *d; /* PK_DEST */
	enum pv v;
};

typedef void (*rule_fn)(void *ctx, const struct prule *r);

static void say(rule_fn fn, void *ctx, enum pchain c, enum pk k, const struct kis_net_dest *d,
		enum pv v)
{
	struct prule r = {.chain = c, .kind = k, .d = d, .v = v};
	fn(ctx, &r);
}

/* -1 when the host's addresses cannot be read (the policy would miss them) */
static int policy_rules(const struct kis_net_dest *allow, size_t n_allow, bool allow_set, bool vm,
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
	if (policy_rules(allow, n_allow, allow_set, vm, text_rule, &t) < 0)
		t.b.oom = true;
	sb_printf(&t.b, "\t}\n}\n");
	if (t.b.oom) {
		free(t.b.s);
		return NULL;
	}
	return t.b.s;
}

/* ---- the same rules as an nf_tables netlink batch ----
 *
 * What `nft -f` would send (net/netfilter/nf_tables_api.c; the layout of
 * <linux/netfilter/nf_tables.h>), written by the engine and sent from a
 * netlink socket opened in S: no nft process, no parser, no cache dump.
 * One batch (NFNL_MSG_BATCH_BEGIN ... END) is one transaction: all of it
 * or nothing (nfnetlink_rcv_batch). The table, two base chains with
 * policy drop, then each rule as expressions on register 1: meta/ct/payload
 * loads, a bitwise mask for a prefix, cmp, and a verdict (immediate) or
 * reject. "ip daddr" in the inet family carries nft's implicit
 * `meta nfproto ipv4` before the payload load, "udp dport" its
 * `meta l4proto udp`; a port range is a cmp >= and a cmp <= on the
 * big-endian port, one rule for TCP and one for UDP. */

struct nlb {
	char *buf;
	size_t len, cap;
	bool oom;
	uint32_t seq, last_seq;
};

static void *nlb_put(struct nlb *b, size_t n)
{
	size_t need = NLMSG_ALIGN(n);
	if (b->oom)
		return NULL;
	if (b->len + need > b->cap) {
		size_t cap = (b->cap ? b->cap * 2 : 8192) + need;
		char *g = realloc(b->buf, cap);
		if (!g) {
			b->oom = true;
			return NULL;
		}
		b->buf = g;
		b->cap = cap;
	}
	void *p = b->buf + b->len;
	memset(p, 0, need);
	b->len += need;
	return p;
}

static size_t nl_msg(struct nlb *b, uint16_t type, uint16_t flags, uint8_t family, uint16_t res)
{
	size_t off = b->len;
	struct nlmsghdr *h = nlb_put(b, sizeof(*h));
	struct nfgenmsg *g = nlb_put(b, sizeof(*g));
	if (!h || !g)
		return off;
	h->nlmsg_type = type;
	h->nlmsg_flags = NLM_F_REQUEST | flags;
	h->nlmsg_seq = ++b->seq;
	g->nfgen_family = family;
	g->version = NFNETLINK_V0;
	g->res_id = htons(res);
	return off;
}

static void nl_end(struct nlb *b, size_t off)
{
	if (!b->oom)
		((struct nlmsghdr *)(void *)(b->buf + off))->nlmsg_len = (uint32_t)(b->len - off);
}

static void nl_attr(struct nlb *b, uint16_t type, const void *data, size_t n)
{
	struct nlattr *a = nlb_put(b, NLA_HDRLEN + n);
	if (!a)
		return;
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + n);
	memcpy((char *)a + NLA_HDRLEN, data, n);
}

static void nl_u32(struct nlb *b, uint16_t type, uint32_t v)
{
	uint32_t be = htonl(v);
	nl_attr(b, type, &be, 4);
}

static void nl_str(struct nlb *b, uint16_t type, const char *s)
{
	nl_attr(b, type, s, strlen(s) + 1);
}

static size_t nl_nest(struct nlb *b, uint16_t type)
{
	size_t off = b->len;
	struct nlattr *a = nlb_put(b, NLA_HDRLEN);
	if (a)
		a->nla_type = type | NLA_F_NESTED;
	return off;
}

static void nl_nest_end(struct nlb *b, size_t off)
{
	if (!b->oom)
		((struct nlattr *)(void *)(b->buf + off))->nla_len = (uint16_t)(b->len - off);
}

/* one expression: NFTA_LIST_ELEM { NFTA_EXPR_NAME, NFTA_EXPR_DATA { ... } } */
struct expr {
	size_t elem, data;
};

static struct expr ex_begin(struct nlb *b, const char *name)
{
	struct expr e;
	e.elem = nl_nest(b, NFTA_LIST_ELEM);
	nl_str(b, NFTA_EXPR_NAME, name);
	e.data = nl_nest(b, NFTA_EXPR_DATA);
	return e;
}

static void ex_end(struct nlb *b, struct expr e)
{
	nl_nest_end(b, e.data);
	nl_nest_end(b, e.elem);
}

static void ex_meta(struct nlb *b, uint32_t key)
{
	struct expr e = ex_begin(b, "meta");
	nl_u32(b, NFTA_META_KEY, key);
	nl_u32(b, NFTA_META_DREG, NFT_REG_1);
	ex_end(b, e);
}

static void ex_payload(struct nlb *b, uint32_t base, uint32_t offset, uint32_t len)
{
	struct expr e = ex_begin(b, "payload");
	nl_u32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
	nl_u32(b, NFTA_PAYLOAD_BASE, base);
	nl_u32(b, NFTA_PAYLOAD_OFFSET, offset);
	nl_u32(b, NFTA_PAYLOAD_LEN, len);
	ex_end(b, e);
}

static void nl_data(struct nlb *b, uint16_t type, const void *v, size_t n)
{
	size_t d = nl_nest(b, type);
	nl_attr(b, NFTA_DATA_VALUE, v, n);
	nl_nest_end(b, d);
}

static void ex_cmp(struct nlb *b, uint32_t op, const void *v, size_t n)
{
	struct expr e = ex_begin(b, "cmp");
	nl_u32(b, NFTA_CMP_SREG, NFT_REG_1);
	nl_u32(b, NFTA_CMP_OP, op);
	nl_data(b, NFTA_CMP_DATA, v, n);
	ex_end(b, e);
}

static void ex_mask(struct nlb *b, const void *mask, const void *xor, size_t n)
{
	struct expr e = ex_begin(b, "bitwise");
	nl_u32(b, NFTA_BITWISE_SREG, NFT_REG_1);
	nl_u32(b, NFTA_BITWISE_DREG, NFT_REG_1);
	nl_u32(b, NFTA_BITWISE_LEN, (uint32_t)n);
	nl_data(b, NFTA_BITWISE_MASK, mask, n);
	nl_data(b, NFTA_BITWISE_XOR, xor, n);
	ex_end(b, e);
}

static void ex_verdict(struct nlb *b, enum pv v)
{
	if (v == PV_REFUSE) {
		struct expr e = ex_begin(b, "reject");
		nl_u32(b, NFTA_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
		uint8_t code = NFT_REJECT_ICMPX_ADMIN_PROHIBITED;
		nl_attr(b, NFTA_REJECT_ICMP_CODE, &code, 1);
		ex_end(b, e);
		return;
	}
	struct expr e = ex_begin(b, "immediate");
	nl_u32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
	size_t d = nl_nest(b, NFTA_IMMEDIATE_DATA);
	size_t vd = nl_nest(b, NFTA_DATA_VERDICT);
	nl_u32(b, NFTA_VERDICT_CODE, v == PV_ACCEPT ? NF_ACCEPT : NF_DROP);
	nl_nest_end(b, vd);
	nl_nest_end(b, d);
	ex_end(b, e);
}

static void ex_u8_is(struct nlb *b, uint32_t meta_key, uint8_t v)
{
	ex_meta(b, meta_key);
	ex_cmp(b, NFT_CMP_EQ, &v, 1);
}

/* ip daddr net/prefix (with nft's implicit meta nfproto ipv4) */
static void ex_daddr(struct nlb *b, uint32_t addr, unsigned prefix)
{
	ex_u8_is(b, NFT_META_NFPROTO, NFPROTO_IPV4);
	ex_payload(b, NFT_PAYLOAD_NETWORK_HEADER, 16, 4);
	uint32_t net = htonl(addr & prefix_mask(prefix));
	if (prefix < 32) {
		uint32_t mask = htonl(prefix_mask(prefix)), zero = 0;
		ex_mask(b, &mask, &zero, 4);
	}
	ex_cmp(b, NFT_CMP_EQ, &net, 4);
}

static size_t nl_rule_begin(struct nlb *b, enum pchain c, size_t *exprs)
{
	size_t m = nl_msg(b, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE,
			  NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, NFPROTO_INET, 0);
	nl_str(b, NFTA_RULE_TABLE, "kis_egress");
	nl_str(b, NFTA_RULE_CHAIN, c == PC_OUTPUT ? "output" : "input");
	*exprs = nl_nest(b, NFTA_RULE_EXPRESSIONS);
	return m;
}

static void nl_rule_end(struct nlb *b, size_t m, size_t exprs)
{
	nl_nest_end(b, exprs);
	nl_end(b, m);
	b->last_seq = b->seq;
}

static void nl_rule(void *ctx, const struct prule *r)
{
	struct nlb *b = ctx;
	size_t ex, m;
	char ifname[IFNAMSIZ] = "lo";
	uint32_t zero = 0;
	if (r->kind == PK_DEST && r->d->port_lo) {
		/* meta l4proto { tcp, udp } th dport lo-hi: one rule each */
		static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP};
		for (size_t i = 0; i < ARRAY_SIZE(protos); i++) {
			m = nl_rule_begin(b, r->chain, &ex);
			ex_daddr(b, r->d->addr, r->d->prefix);
			ex_u8_is(b, NFT_META_L4PROTO, protos[i]);
			ex_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
			uint16_t lo = htons(r->d->port_lo), hi = htons(r->d->port_hi);
			ex_cmp(b, NFT_CMP_GTE, &lo, 2);
			ex_cmp(b, NFT_CMP_LTE, &hi, 2);
			ex_verdict(b, r->v);
			nl_rule_end(b, m, ex);
		}
		return;
	}
	m = nl_rule_begin(b, r->chain, &ex);
	switch (r->kind) {
	case PK_OIF_LO:
	case PK_IIF_LO:
		/* the name in a register is zero-padded to IFNAMSIZ (nft_meta) */
		ex_meta(b, r->kind == PK_OIF_LO ? NFT_META_OIFNAME : NFT_META_IIFNAME);
		ex_cmp(b, NFT_CMP_EQ, ifname, sizeof(ifname));
		break;
	case PK_CT_REPLY: {
		/* NF_CT_STATE_BIT: established 1 << 1, related 1 << 2, host order */
		uint32_t bits = (1u << (IP_CT_ESTABLISHED + 1)) | (1u << (IP_CT_RELATED + 1));
		struct expr e = ex_begin(b, "ct");
		nl_u32(b, NFTA_CT_DREG, NFT_REG_1);
		nl_u32(b, NFTA_CT_KEY, NFT_CT_STATE);
		ex_end(b, e);
		ex_mask(b, &bits, &zero, 4);
		ex_cmp(b, NFT_CMP_NEQ, &zero, 4);
		break;
	}
	case PK_IPV6:
		ex_u8_is(b, NFT_META_NFPROTO, NFPROTO_IPV6);
		break;
	case PK_DNS: {
		ex_daddr(b, EG_DNS, 32);
		ex_u8_is(b, NFT_META_L4PROTO, IPPROTO_UDP);
		ex_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
		uint16_t port = htons(53);
		ex_cmp(b, NFT_CMP_EQ, &port, 2);
		break;
	}
	case PK_DEST:
		ex_daddr(b, r->d->addr, r->d->prefix);
		break;
	case PK_ANY:
	default:
		break;
	}
	ex_verdict(b, r->v);
	nl_rule_end(b, m, ex);
}

static void nl_chain(struct nlb *b, const char *name, uint32_t hook)
{
	size_t m = nl_msg(b, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN,
			  NLM_F_CREATE | NLM_F_ACK, NFPROTO_INET, 0);
	nl_str(b, NFTA_CHAIN_TABLE, "kis_egress");
	nl_str(b, NFTA_CHAIN_NAME, name);
	size_t h = nl_nest(b, NFTA_CHAIN_HOOK);
	nl_u32(b, NFTA_HOOK_HOOKNUM, hook);
	nl_u32(b, NFTA_HOOK_PRIORITY, 0); /* NF_IP_PRI_FILTER */
	nl_nest_end(b, h);
	nl_u32(b, NFTA_CHAIN_POLICY, NF_DROP);
	nl_str(b, NFTA_CHAIN_TYPE, "filter");
	nl_end(b, m);
}

/* The whole batch for a policy (b->buf, malloc'ed), or -1. */
static int policy_batch(struct nlb *b, const struct kis_net_dest *allow, size_t n_allow,
			bool allow_set, bool vm)
{
	size_t m = nl_msg(b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
	nl_end(b, m);
	m = nl_msg(b, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_ACK,
		   NFPROTO_INET, 0);
	nl_str(b, NFTA_TABLE_NAME, "kis_egress");
	nl_end(b, m);
	nl_chain(b, "output", NF_INET_LOCAL_OUT);
	nl_chain(b, "input", NF_INET_LOCAL_IN);
	if (policy_rules(allow, n_allow, allow_set, vm, nl_rule, b) < 0)
		b->oom = true;
	m = nl_msg(b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
	nl_end(b, m);
	return b->oom ? -1 : 0;
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

/* ---- the tools ---- */

static const char *find(const char *const *cands, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (access(cands[i], X_OK) == 0)
			return cands[i];
	return NULL;
}

static const char *pasta_path(void)
{
	static const char *const c[] = {"/usr/bin/pasta", "/bin/pasta", "/usr/local/bin/pasta"};
	return find(c, ARRAY_SIZE(c));
}

static const char *passt_path(void)
{
	static const char *const c[] = {"/usr/bin/passt", "/bin/passt", "/usr/local/bin/passt"};
	return find(c, ARRAY_SIZE(c));
}

/* AVX2 usable: CPUID.(7,0):EBX bit 5, and the OS saves the YMM state
 * (CPUID.1:ECX OSXSAVE and AVX, XCR0 bits 1 and 2; Intel SDM vol. 1,
 * 14.3 "Detection of Intel AVX instructions"), as libgcc's
 * __builtin_cpu_supports("avx2") decides. Asked here, only when egress
 * starts a helper: __builtin_cpu_supports links libgcc's constructor,
 * which runs its ~10 CPUID at every start of kis, and a CPUID traps to
 * the hypervisor on a virtual machine (~12 us each on this one). */
static bool cpu_has_avx2(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return false;
	unsigned xlo, xhi;
	__asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
	if ((xlo & 0x6) != 0x6)
		return false;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
}

/* The binary to exec for pasta or passt (argv[0] keeps the name, which
 * picks the mode). On a CPU with AVX2 passt re-execs itself as
 * passt.avx2 at start (its arch.c: a second execve and dynamic link, ~10
 * to 30 ms here); exec'ing that build directly skips it. */
static const char *exec_path(const char *tool)
{
	static const char *const c[] = {"/usr/bin/passt.avx2", "/bin/passt.avx2",
					"/usr/local/bin/passt.avx2"};
	const char *avx2 = cpu_has_avx2() ? find(c, ARRAY_SIZE(c)) : NULL;
	return avx2 ? avx2 : tool;
}

const char *kis_egress_unavailable(void)
{
	return kis_egress_unavailable_for(false);
}

const char *kis_egress_unavailable_for(bool vm)
{
	struct stat st;
	if (geteuid() != 0)
		return "egress needs the engine as root (a network namespace and a tun node for "
		       "pasta)";
	if (!pasta_path())
		return "pasta is not installed (Debian package passt)";
	if (vm && !passt_path())
		return "passt is not installed (Debian package passt)";
	if (stat("/dev/net/tun", &st) < 0 || !S_ISCHR(st.st_mode))
		return "this host has no /dev/net/tun";
	return NULL;
}

static const char *const tool_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/* ---- S: the holder ---- */

/* >= 10: the spawner's dup2 onto 0..3 never lands on it */
static int fd_high(int fd)
{
	if (fd < 0)
		return -1;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	return hi;
}

/* A holder as uid H unshares a user namespace (H its owner, 0 -> H) and
 * in it S (user_namespaces(7): the other namespaces of one unshare are
 * owned by the new user namespace); we keep both by descriptor. The
 * holder shares our memory instead of being a fork (confine/userns.c). */
static int make_netns(struct kis_egress *eg, struct kis_error **err)
{
	int u = -1, n = -1;
	if (kis_userns_open_net(eg->uid, 1, &u, &n, err) < 0)
		return kis_error_wrap(err, "egress");
	eg->userns_fd = fd_high(u);
	eg->netns_fd = fd_high(n);
	if (eg->userns_fd < 0 || eg->netns_fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "egress: cannot make the sandbox's network namespace");
	return 0;
}

/* ---- the policy into S: the batch, from a netlink socket of S ---- */

/* The policy as a batch, kept until kis_egress_launch sends it. */
static int policy_write(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
			bool allow_set, bool vm, struct kis_error **err)
{
	struct nlb b = {0};
	if (policy_batch(&b, allow, n_allow, allow_set, vm) < 0) {
		free(b.buf);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "egress: cannot write the policy");
	}
	eg->batch = b.buf;
	eg->batch_len = b.len;
	eg->batch_ack = b.last_seq;
	return 0;
}

/* Send the batch from S's netfilter socket and read the kernel's answer:
 * an error for the message that failed (the transaction is then undone,
 * nothing of it stays), else the acknowledgement of the last rule. */
static int policy_load(struct kis_egress *eg, struct kis_error **err)
{
	int r = -1, e = EIO;
	if (eg->nft_fd < 0 || !eg->batch)
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL, "egress: no policy to load");
	struct timeval tv = {.tv_sec = 5};
	setsockopt(eg->nft_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	if (RETRY_EINTR(sendto(eg->nft_fd, eg->batch, eg->batch_len, 0, (struct sockaddr *)&k,
			       sizeof(k))) != (ssize_t)eg->batch_len) {
		e = errno;
		goto out;
	}
	for (;;) {
		_Alignas(struct nlmsghdr) char buf[8192];
		ssize_t n = RETRY_EINTR(recv(eg->nft_fd, buf, sizeof(buf), 0));
		if (n <= 0) {
			e = n < 0 ? errno : EIO;
			goto out;
		}
		size_t len = (size_t)n;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type != NLMSG_ERROR ||
			    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
				continue;
			const struct nlmsgerr *ne = NLMSG_DATA(h);
			if (ne->error != 0) {
				e = -ne->error;
				goto out;
			}
			if (h->nlmsg_seq == eg->batch_ack) {
				r = 0;
				goto out;
			}
		}
	}
out:
	free(eg->batch);
	eg->batch = NULL;
	kis_closep(&eg->nft_fd);
	eg->nft_fd = -1;
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e,
				     "egress: the kernel refused the address policy (nf_tables)");
	return 0;
}

/* ---- S's link, made and configured by the engine ---- */

/* Why the engine and not pasta's --config-net: the sandbox's command may
 * then run as soon as S is configured, its policy loaded and pasta has
 * attached the tap, without waiting for the rest of pasta's start (most of
 * it: this pasta zeroes some 15 MiB of tables and opens pools of sockets
 * after it attached, 100 to 300 ms here, each page fault dear on this
 * project's PVM guest). What the sandbox sends meanwhile waits in the
 * tap's queue (tun(4): the queue exists once a file is attached), first
 * the ARP request for the gateway, which pasta answers once its loop runs;
 * the neighbour entry holds the packets behind it (neigh unres_qlen) for
 * the kernel's 1 s retransmission, far longer than pasta needs. */

static void sin_set(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)(void *)sa;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(addr);
}


static int if_up(int s, const char *name)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(s, SIOCSIFFLAGS, &ifr);
}

/* A sysctl of the calling thread's namespaces: 0, or -1 with errno. */
static int write_sysctl(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(v);
	ssize_t w = write(fd, v, n);
	int e = errno;
	close(fd);
	if (w == (ssize_t)n)
		return 0;
	errno = w < 0 ? e : EIO;
	return -1;
}

/* In S (the calling thread joined it): the tap, persistent and owned by H,
 * its address, MTU, link and default route, lo up, S's TCP tuning, and a
 * netlink socket that hears of the tap's carrier. netdevice(7) SIOCSIF*,
 * route(4) SIOCADDRT: S is new, nothing else configures it. */
static int configure_in_s(struct kis_egress *eg, struct kis_error **err)
{
	const char *step = "IPv6 off";
	_cleanup_close_ int s = -1;
	/* IPv6 off on the tap: a new device takes S's conf/default
	 * (ipv6_add_dev copies devconf_dflt at NETDEV_REGISTER), so eth0 gets
	 * no link-local address, no route, and sends pasta no DAD, router
	 * solicitation or MLD frames (ip6_output drops what a disabled
	 * device is given). lo, made with S, keeps ::1. A second layer under
	 * the policy, which refuses every IPv6 packet but lo's (egress is
	 * IPv4 only: docs/network.md). No conf/default at all: this kernel
	 * has no IPv6. The sandbox cannot turn it back on: S's sysctls are
	 * written with CAP_NET_ADMIN over S's owner or as H itself
	 * (net_ctl_permissions), and no process of the sandbox holds either
	 * (H is never bwrap's nor the sandbox root's id). */
	if (write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1") < 0 &&
	    errno != ENOENT)
		goto fail_errno;
	step = "its tap device";
	/* pasta's TUNSETIFF of the same name attaches to this device. A tun
	 * device that is not persistent is unregistered when its last queue
	 * closes, in the closer's exit (tun_detach: unregister_netdevice and
	 * its RCU waits, tens of ms here, and the run waited for pasta's end);
	 * a persistent one goes with S itself, whose cleanup the kernel runs
	 * later from its own workqueue (cleanup_net), and S is ours alone. A
	 * tun file belongs to the network namespace it was opened in: here,
	 * S (root: CAP_NET_ADMIN over S's owner from its parent namespace). */
	int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	memcpy(ifr.ifr_name, KIS_EGRESS_IFNAME, sizeof(KIS_EGRESS_IFNAME));
	bool ok = tun >= 0 && ioctl(tun, TUNSETIFF, &ifr) == 0 &&
		  ioctl(tun, TUNSETOWNER, (unsigned long)eg->uid) == 0 &&
		  ioctl(tun, TUNSETGROUP, (unsigned long)eg->uid) == 0 &&
		  ioctl(tun, TUNSETPERSIST, 1UL) == 0;
	int e = errno;
	if (tun >= 0)
		close(tun);
	if (!ok)
		goto fail;
	/* the policy's way in: a netfilter socket of S (kis_egress_launch) */
	step = "a netfilter socket";
	eg->nft_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (eg->nft_fd < 0)
		goto fail_errno;
	/* the link's events, before pasta exists: its attach cannot be missed */
	step = "a netlink socket";
	eg->link_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
	struct sockaddr_nl snl = {.nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK};
	if (eg->link_fd < 0 || bind(eg->link_fd, (struct sockaddr *)&snl, sizeof(snl)) < 0)
		goto fail_errno;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		goto fail_errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, KIS_EGRESS_IFNAME, sizeof(KIS_EGRESS_IFNAME));
	step = "its index";
	if (ioctl(s, SIOCGIFINDEX, &ifr) < 0)
		goto fail_errno;
	eg->ifindex = ifr.ifr_ifindex;
	step = "its address";
	sin_set(&ifr.ifr_addr, EG_ADDR);
	if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
		goto fail_errno;
	step = "its netmask";
	sin_set(&ifr.ifr_netmask, EG_MASK);
	if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
		goto fail_errno;
	/* passt's and pasta's default (65520: the largest 802.3 frame less its
	 * header, rounded to 32 bits); 1500 and 16384 were slower */
	step = "its MTU";
	ifr.ifr_mtu = KIS_EGRESS_VM_MTU;
	if (ioctl(s, SIOCSIFMTU, &ifr) < 0)
		goto fail_errno;
	step = "up";
	if (if_up(s, KIS_EGRESS_IFNAME) < 0 || if_up(s, "lo") < 0)
		goto fail_errno;
	step = "its default route";
	struct rtentry rt;
	memset(&rt, 0, sizeof(rt));
	sin_set(&rt.rt_dst, 0);
	sin_set(&rt.rt_genmask, 0);
	sin_set(&rt.rt_gateway, EG_GW);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = (char *)KIS_EGRESS_IFNAME;
	if (ioctl(s, SIOCADDRT, &rt) < 0)
		goto fail_errno;
	/* S's TCP, which only ever talks to pasta's tap (a round trip of a
	 * fraction of a millisecond), keeps at most 256 KiB unacknowledged
	 * per socket (tcp_wmem's maximum; 2.5 GB/s at 0.1 ms) and backs off
	 * on loss. This pasta takes a segment from the tap only when its own
	 * socket has room for it (its send buffer: net.core.wmem_max, 4 MiB
	 * here) and drops it otherwise, leaving the sandbox to retransmit;
	 * with S's inherited defaults (a 4 MiB send buffer, bbr, which does
	 * not slow down on loss) the sandbox overran it into retransmission
	 * timeouts with backoff (ss -ti in S: rto 848 ms, backoff 2, 101
	 * segments of 60 KiB retransmitted in 2 s): 4 to 100 MiB/s. With
	 * both set, 180 to 830. The long leg (pasta's socket to the world)
	 * keeps the host's buffers. Both sysctls are S's own (per network
	 * namespace since Linux 4.15; a sysctl file opened here is S's),
	 * never the host's. In a namespace other than the initial one only an
	 * algorithm of tcp_allowed_congestion_control may be the default:
	 * cubic where it is, else reno (always allowed). Failures leave S's
	 * defaults: this is speed, not a protection. */
	int cc = open("/proc/sys/net/ipv4/tcp_congestion_control", O_WRONLY | O_CLOEXEC);
	if (cc >= 0) {
		if (write(cc, "cubic", 5) != 5)
			(void)!pwrite(cc, "reno", 4, 0);
		close(cc);
	}
	(void)write_sysctl("/proc/sys/net/ipv4/tcp_wmem", "4096 16384 262144"); /* tuning only */
	return 0;
fail_errno:
	e = errno;
fail:
	return kis_error_set(err, KIS_E_INTERNAL, e, "egress: cannot set up %s's %s",
			     KIS_EGRESS_IFNAME, step);
}

/* configure_in_s, from the engine's own thread: it joins S for as long
 * as that takes (setns(2) moves the calling thread only) and returns. */
static int configure_netns(struct kis_egress *eg, struct kis_error **err)
{
	_cleanup_close_ int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "egress: cannot hold the engine's network namespace");
	if (setns(eg->netns_fd, CLONE_NEWNET) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "egress: cannot enter the sandbox's network namespace");
	int r = configure_in_s(eg, err);
	if (setns(home, CLONE_NEWNET) < 0) {
		/* every later socket of ours would be S's: nothing may go on */
		abort();
	}
	return r;
}

/* ---- pasta ---- */

struct pasta_start {
	const struct kis_egress *eg;
	int ready_fd, stderr_fd;
};

static int fail(struct kis_error **err, const char *what)
{
	return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot prepare pasta: %s", what);
}

static int clear_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	return fl < 0 ? -1 : fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
}

/* In pasta's child, as root, before exec; system calls only (the child
 * may share our memory: kis_spawn.vfork_ok). pasta opens /dev/net/tun
 * after it dropped to H (the host's node is root's 0600 on some hosts,
 * 0666 on others: the engine never changes it), so a private mount
 * namespace gets a node of its own, owned by H. The device cgroup, if
 * any, still decides whether it opens. */
static int pasta_child(void *ctx, struct kis_error **err)
{
	struct pasta_start *s = ctx;
	uid_t h = s->eg->uid;
	int keep[3] = {s->eg->netns_fd, s->eg->userns_fd, s->ready_fd};
	TRY(kis_cloexec_fds_from(3, keep, 3, err));
	if (clear_cloexec(s->eg->netns_fd) < 0 || clear_cloexec(s->eg->userns_fd) < 0 ||
	    clear_cloexec(s->ready_fd) < 0)
		return fail(err, "cannot pass descriptors");
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(err, "a private mount namespace");
	if (mount("kis-tun", "/dev/net", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=4k") < 0 ||
	    mknod("/dev/net/tun", S_IFCHR | 0600, makedev(10, 200)) < 0 ||
	    chown("/dev/net/tun", h, h) < 0)
		return fail(err, "a tun node of its own");
	/* pasta reopens the ready pipe by /proc/self/fd/N: the inode's owner
	 * decides (pipefs), and it was made by root */
	if (fchown(s->ready_fd, h, h) < 0)
		return fail(err, "the ready pipe");
	if (setgroups(0, NULL) < 0 || setresgid(h, h, h) < 0 || setresuid(h, h, h) < 0)
		return fail(err, "cannot switch to the helper's id");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(err, "no_new_privs");
	return 0;
}

/* Start a helper (pasta, passt): as our child, dying with us, its stdout
 * and stderr out_fd and err_fd; or detached (a session's), both /dev/null.
 * Its pid and a pidfd on it into *pid and *pidfd, and the run's owner
 * notes it, so a sweep ends it if we die (engine/owner.h). */
static int spawn_helper(struct kis_spawn *sp, bool die_with_us, int out_fd, int err_fd,
			pid_t *pid, int *pidfd, struct kis_error **err)
{
	pid_t p = -1;
	/* a session's: the creator's until the session is published */
	sp->tethered = !die_with_us;
	if (die_with_us)
		TRY(kis_spawn_start(sp, out_fd, err_fd, &p, err));
	else
		TRY(kis_spawn_detached(sp, &p, err));
	*pid = p;
	*pidfd = (int)syscall(SYS_pidfd_open, p, 0);
	if (kis_owner_active())
		(void)kis_owner_note("pid", "%d %llu", (int)p, kis_proc_starttime(p));
	return 0;
}

static int start_pasta(struct kis_egress *eg, bool die_with_us, struct kis_error **err)
{
	const char *pasta = pasta_path();
	if (!pasta)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "network.mode: egress needs pasta (Debian package passt)");
	int rp[2];
	if (pipe2(rp, O_CLOEXEC) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot start pasta");
	eg->ready_fd = rp[0];
	_cleanup_close_ int wr = fcntl(rp[1], F_DUPFD_CLOEXEC, 10);
	close(rp[1]);
	eg->err_fd = (int)syscall(SYS_memfd_create, "kis-pasta-err", MFD_CLOEXEC);
	int errfd = eg->err_fd;
	_cleanup_close_ int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (wr < 0 || errfd < 0 || nul < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot start pasta");
	char ready[32], userns[32], netns[32];
	snprintf(ready, sizeof(ready), "/proc/self/fd/%d", wr);
	snprintf(userns, sizeof(userns), "/proc/self/fd/%d", eg->userns_fd);
	snprintf(netns, sizeof(netns), "/proc/self/fd/%d", eg->netns_fd);
	/* Every value is ours. No --config-net: the engine configured S
	 * (configure_in_s); pasta's addresses are still its own stack's. -t/-u
	 * none: nothing is forwarded in; -T/-U none: no port of the host's
	 * loopback is mapped into the sandbox; --no-map-gw: the gateway is
	 * not the host; -4: IPv4 only. */
	char *argv[] = {
		(char *)pasta, "--quiet", "--foreground", "--ipv4-only",
		"--ns-ifname", KIS_EGRESS_IFNAME, "--address", KIS_EGRESS_ADDR, "--netmask", "24",
		"--gateway", KIS_EGRESS_GATEWAY, "--dns-forward", KIS_EGRESS_DNS, "--no-map-gw",
		"--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none",
		"--no-dhcp", "--no-ndp", "--no-dhcpv6", "--no-ra", "--no-netns-quit",
		"--pid", ready, "--userns", userns, "--netns", netns, NULL};
	struct pasta_start s = {.eg = eg, .ready_fd = wr, .stderr_fd = errfd};
	struct kis_spawn sp = {.argv = argv, .envp = (char *const *)tool_env, .cwd = "/",
			       .stdin_fd = nul, .child_setup = pasta_child, .child_ctx = &s,
			       .die_with_parent = die_with_us, .parent = getpid(),
			       .exec_path = exec_path(pasta), .vfork_ok = true};
	return spawn_helper(&sp, die_with_us, nul, errfd, &eg->pid, &eg->pidfd, err);
}

/* What pasta said on its stderr, its lines joined with "; ". Left out:
 * the complaint it adds after every line it could not also send to the
 * system logger (it runs where /dev/log is not), and the note that it
 * drops root, which it prints even with --quiet (passt 0.0~git20230309). */
static void pasta_said(int fd, char *out, size_t n)
{
	char buf[2048];
	ssize_t r = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
	buf[r > 0 ? r : 0] = '\0';
	size_t w = 0;
	out[0] = '\0';
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		unsigned bytes;
		int end = 0;
		if ((sscanf(l, "Failed to send %u bytes to syslog%n", &bytes, &end) == 1 && !l[end]) ||
		    !strncmp(l, "Don't run as root.", 18))
			continue;
		int k = snprintf(out + w, n - w, "%s%s", w ? "; " : "", l);
		if (k < 0 || (size_t)k >= n - w)
			break;
		w += (size_t)k;
	}
}

static int pasta_failed(struct kis_egress *eg, struct kis_error **err)
{
	char msg[400];
	pasta_said(eg->err_fd, msg, sizeof(msg));
	/* pasta copies the engine's own network: without a route out there
	 * is nothing to copy, and the user can fix that */
	const char *hint = strstr(msg, "No external routable interface") ?
				   " (egress goes out through this host's network: it needs an "
				   "interface with a default route here)" :
				   "";
	return kis_error_set(err, KIS_E_INTERNAL, 0, "egress: pasta did not start: %s%s",
			     *msg ? msg : "it exited or timed out", hint);
}

/* pasta writes its pid to -P once its initialisation is done (passt(1)),
 * in one write (a pipe keeps it whole: pipe(7), PIPE_BUF). */
int kis_egress_pasta(struct kis_egress *eg, int wait_ms, struct kis_error **err)
{
	if (eg->ready_fd < 0)
		return 1; /* no egress, or ready already */
	struct pollfd p = {.fd = eg->ready_fd, .events = POLLIN};
	uint64_t end = kis_monotonic_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
	int r;
	for (;;) {
		uint64_t now = kis_monotonic_ms();
		r = poll(&p, 1, now < end ? (int)(end - now) : 0);
		if (r < 0 && errno == EINTR)
			continue;
		break;
	}
	if (r == 0)
		return wait_ms > 0 ? pasta_failed(eg, err) : 0;
	char buf[32];
	ssize_t k = r > 0 ? RETRY_EINTR(read(eg->ready_fd, buf, sizeof(buf))) : -1;
	kis_closep(&eg->ready_fd);
	eg->ready_fd = -1;
	if (k <= 0)
		return pasta_failed(eg, err);
	kis_closep(&eg->err_fd);
	eg->err_fd = -1;
	return 1;
}

int kis_egress_pasta_fd(const struct kis_egress *eg)
{
	return eg->ready_fd;
}

/* Whether a netlink message says the tap's carrier is on (IFF_LOWER_UP in
 * an RTM_NEWLINK of its index). The kernel sends that one from its link
 * watch after it activated the device's queueing discipline
 * (net/core/link_watch.c, linkwatch_do_dev: dev_activate, then the
 * notification); before, the device drops what it is given. */
/* <linux/if.h>'s, which <net/if.h> (glibc's IFF_ enum stops at
 * IFF_DYNAMIC) cannot be included beside */
#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000
#endif

static bool carrier_on(const struct kis_egress *eg, const char *buf, size_t n)
{
	for (const struct nlmsghdr *h = (const void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg)))
			continue;
		const struct ifinfomsg *ifi = NLMSG_DATA(h);
		if (ifi->ifi_index == eg->ifindex && (ifi->ifi_flags & IFF_LOWER_UP))
			return true;
	}
	return false;
}

/* Until pasta has attached S's tap (see "S's link" above), bounded. */
static int wait_attached(struct kis_egress *eg, int ms, struct kis_error **err)
{
	if (eg->link_fd < 0)
		return 0;
	uint64_t end = kis_monotonic_ms() + (uint64_t)ms;
	bool watch_pasta = eg->ready_fd >= 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = eg->link_fd, .events = POLLIN},
				      {.fd = watch_pasta ? eg->ready_fd : -1, .events = POLLIN}};
		uint64_t now = kis_monotonic_ms();
		if (now >= end)
			return pasta_failed(eg, err);
		int r = poll(p, 2, (int)(end - now));
		if (r < 0 && errno != EINTR)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: poll");
		if (r <= 0)
			continue;
		if (p[1].revents) {
			/* pasta is ready (and so attached long since) or dead */
			TRY(kis_egress_pasta(eg, 0, err));
			watch_pasta = false;
		}
		if (!p[0].revents)
			continue;
		char buf[8192];
		for (;;) {
			ssize_t k = recv(eg->link_fd, buf, sizeof(buf), 0);
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0 && errno == ENOBUFS) {
				/* events were lost (netlink(7)): ask for the link's
				 * state, whose answer is an RTM_NEWLINK as well */
				struct {
					struct nlmsghdr h;
					struct ifinfomsg i;
				} q = {.h = {.nlmsg_len = sizeof(q), .nlmsg_type = RTM_GETLINK,
					     .nlmsg_flags = NLM_F_REQUEST},
				       .i = {.ifi_family = AF_UNSPEC, .ifi_index = eg->ifindex}};
				(void)!send(eg->link_fd, &q, sizeof(q), 0);
				continue;
			}
			if (k <= 0)
				break;
			if (carrier_on(eg, buf, (size_t)k))
				goto attached;
		}
	}
attached:
	kis_closep(&eg->link_fd);
	eg->link_fd = -1;
	return 0;
}

int kis_egress_ready_for_command(struct kis_egress *eg, struct kis_error **err)
{
	/* the policy is in (kis_egress_launch loaded it); pasta's attach */
	return wait_attached(eg, 5000, err);
}

int kis_egress_ready(struct kis_egress *eg, struct kis_error **err)
{
	TRY(kis_egress_ready_for_command(eg, err));
	return kis_egress_pasta(eg, 5000, err) < 0 ? -1 : 0;
}

static void kill_one(pid_t pid, int pidfd)
{
	if (pid > 0 && pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	else if (pid > 0)
		kill(pid, SIGKILL);
}

void kis_egress_kill(struct kis_egress *eg)
{
	kill_one(eg->vm_pid, eg->vm_pidfd);
	kill_one(eg->pid, eg->pidfd);
}

/* ---- passt: a microvm's virtio-net backend, inside S ----
 *
 *   guest eth0 ── virtio-net (QEMU, jailed) ══ socketpair ══ passt (H, in S)
 *        passt's TCP/UDP/ping sockets in S ── S's nftables ── tap ── pasta ── world
 *
 * passt is the VM mode of pasta's binary: it speaks QEMU's stream
 * protocol (a 32-bit length before each frame) on a connected socket it is
 * given (--fd) and turns the guest's frames into ordinary sockets of the
 * network namespace it runs in. Run in S, every flow of the guest is a
 * socket of S, so it passes S's output chain (the policy of the other
 * tiers) before it reaches pasta: the guest, root of its own kernel,
 * reaches nothing the policy refuses whatever frames it sends. */

struct passt_start {
	const struct kis_egress *eg;
	int sock;
};

static int passt_fail(struct kis_error **err, const char *what)
{
	return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot prepare passt: %s", what);
}

/* In passt's child, as root, before exec; no allocation. */
static int passt_child(void *ctx, struct kis_error **err)
{
	struct passt_start *s = ctx;
	uid_t h = s->eg->uid;
	int keep[1] = {s->sock};
	TRY(kis_cloexec_fds_from(3, keep, 1, err));
	if (clear_cloexec(s->sock) < 0)
		return passt_fail(err, "cannot pass its socket");
	/* This passt (Debian's, 2023-03-09) sends the DNS it forwards to the
	 * first nameserver of /etc/resolv.conf and ignores --dns there (with
	 * --dns the target is 0.0.0.0, which the kernel takes for loopback).
	 * That nameserver must be the forwarder of S, pasta's, never the
	 * host's resolver directly (it may be private or on loopback, both
	 * refused in S, and network.allow would have to open it): a private
	 * mount namespace where /etc/resolv.conf names it. The file is made in
	 * a small tmpfs, bound over the host's (through its link, if it is
	 * one), the tmpfs detached; the host's file is not touched. */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return passt_fail(err, "a private mount namespace");
	if (mount("kis-resolv", "/dev/net", "tmpfs", MS_NOSUID | MS_NOEXEC | MS_NODEV,
		  "mode=0755,size=4k") < 0)
		return passt_fail(err, "a tmpfs for its resolv.conf");
	int rf = open("/dev/net/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	bool written = rf >= 0 && kis_write_all(rf, KIS_EGRESS_RESOLV, strlen(KIS_EGRESS_RESOLV)) >= 0;
	if (rf >= 0)
		close(rf);
	if (!written || mount("/dev/net/resolv.conf", "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0 ||
	    umount2("/dev/net", MNT_DETACH) < 0)
		return passt_fail(err, "its resolv.conf");
	if (setgroups(0, NULL) < 0 || setresgid(h, h, h) < 0 || setresuid(h, h, h) < 0)
		return passt_fail(err, "cannot switch to the helper's id");
	/* user_namespaces(7): as the owner of S's user namespace, from its
	 * parent, H holds every capability in it: enough to join it and then
	 * S itself. Inside, H is uid 0 of that namespace. */
	if (setns(s->eg->userns_fd, CLONE_NEWUSER) < 0 ||
	    setns(s->eg->netns_fd, CLONE_NEWNET) < 0)
		return passt_fail(err, "cannot join the sandbox's network namespace");
	/* ... and gives every one up before passt runs: an empty bounding
	 * set, SECBIT_NOROOT (uid 0 gains nothing at execve), empty sets,
	 * no_new_privs. A passt the guest took over holds no capability over
	 * S (nor over its owner: it is not in the parent namespace any more),
	 * so it cannot change S's rules, routes or addresses. passt then
	 * sandboxes itself further (its own user, mount, ipc, uts and pid
	 * namespaces under this one, a seccomp filter). */
	TRY(kis_drop_caps(err));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return passt_fail(err, "no_new_privs");
	return 0;
}

int kis_egress_attach_vm(struct kis_egress *eg, int sock, bool die_with_us,
			 struct kis_error **err)
{
	const char *passt = passt_path();
	if (!passt)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "network.mode: egress on the microvm needs passt (Debian "
				     "package passt)");
	if (eg->netns_fd < 0 || eg->userns_fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL, "egress: no network namespace");
	/* above the spawner's dup2 targets; it is the only fd passt keeps */
	_cleanup_close_ int fd = fcntl(sock, F_DUPFD_CLOEXEC, 10);
	_cleanup_close_ int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0 || nul < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot start passt");
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	/* Every value is ours. The guest configures itself statically
	 * (src/agent/guest.c) with pasta's addresses, so passt answers no
	 * DHCP, NDP or RA; -t/-u none: nothing is forwarded in; --no-map-gw:
	 * the gateway is not the host; DNS sent to the forwarder goes on to
	 * the forwarder of S (pasta's, which takes DNS only: passt_child),
	 * never straight to the host's resolver; -4: IPv4 only. --fd implies --one-off: passt
	 * exits when QEMU's end of the socket closes. */
	char *argv[] = {(char *)passt, "--quiet", "--foreground", "--ipv4-only", "--fd", fdarg,
			"--address", KIS_EGRESS_ADDR, "--netmask", "24", "--gateway",
			KIS_EGRESS_GATEWAY, "--dns-forward", KIS_EGRESS_DNS,
			"--no-map-gw", "--no-dhcp", "--no-ndp", "--no-dhcpv6", "--no-ra", "--tcp-ports",
			"none", "--udp-ports", "none", NULL};
	struct passt_start s = {.eg = eg, .sock = fd};
	struct kis_spawn sp = {.argv = argv, .envp = (char *const *)tool_env, .cwd = "/",
			       .stdin_fd = nul, .child_setup = passt_child, .child_ctx = &s,
			       .die_with_parent = die_with_us, .parent = getpid(),
			       .exec_path = exec_path(passt)};
	return spawn_helper(&sp, die_with_us, nul, nul, &eg->vm_pid, &eg->vm_pidfd, err);
}

int kis_egress_start(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
		     bool allow_set, uid_t helper_uid, bool die_with_us, bool wait,
		     struct kis_error **err)
{
	return kis_egress_start_for(eg, allow, n_allow, allow_set, helper_uid, die_with_us, wait,
				    false, err);
}

int kis_egress_prepare(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
		       bool allow_set, uid_t helper_uid, bool vm, struct kis_error **err)
{
	*eg = (struct kis_egress)KIS_EGRESS_INIT;
	eg->uid = helper_uid;
	if (helper_uid == 0)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "egress: the helper may not run as root");
	if (make_netns(eg, err) < 0 || configure_netns(eg, err) < 0 ||
	    policy_write(eg, allow, n_allow, allow_set, vm, err) < 0) {
		kis_egress_stop(eg);
		return -1;
	}
	return 0;
}

int kis_egress_launch(struct kis_egress *eg, bool die_with_us, struct kis_error **err)
{
	/* pasta first, its start the longer; the policy while it runs (no
	 * command of the sandbox's runs before kis_egress_ready_for_command) */
	if (start_pasta(eg, die_with_us, err) < 0 || policy_load(eg, err) < 0) {
		kis_egress_stop(eg);
		return -1;
	}
	return 0;
}

int kis_egress_start_for(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
			 bool allow_set, uid_t helper_uid, bool die_with_us, bool wait, bool vm,
			 struct kis_error **err)
{
	TRY(kis_egress_prepare(eg, allow, n_allow, allow_set, helper_uid, vm, err));
	TRY(kis_egress_launch(eg, die_with_us, err));
	if (wait && kis_egress_ready(eg, err) < 0) {
		kis_egress_stop(eg);
		return -1;
	}
	return 0;
}

static void reap_one(pid_t *pid, int pidfd)
{
	if (*pid <= 0)
		return;
	/* our child (one-shot), or reparented (a detached start) */
	if (RETRY_EINTR(waitpid(*pid, NULL, 0)) < 0 && pidfd >= 0) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		RETRY_EINTR(poll(&p, 1, 1000));
	}
	*pid = 0;
}

void kis_egress_stop(struct kis_egress *eg)
{
	kis_egress_kill(eg);
	reap_one(&eg->vm_pid, eg->vm_pidfd);
	reap_one(&eg->pid, eg->pidfd);
	kis_closep(&eg->vm_pidfd);
	eg->vm_pidfd = -1;
	kis_closep(&eg->pidfd);
	kis_closep(&eg->netns_fd);
	kis_closep(&eg->userns_fd);
	kis_closep(&eg->ready_fd);
	kis_closep(&eg->err_fd);
	kis_closep(&eg->link_fd);
	kis_closep(&eg->nft_fd);
	free(eg->batch);
	eg->batch = NULL;
	eg->pidfd = eg->netns_fd = eg->userns_fd = eg->ready_fd = eg->err_fd = eg->link_fd = -1;
	eg->nft_fd = -1;
}

void kis_egress_release(struct kis_egress *eg)
{
	kis_closep(&eg->vm_pidfd);
	kis_closep(&eg->pidfd);
	kis_closep(&eg->netns_fd);
	kis_closep(&eg->userns_fd);
	kis_closep(&eg->ready_fd);
	kis_closep(&eg->err_fd);
	kis_closep(&eg->link_fd);
	kis_closep(&eg->nft_fd);
	free(eg->batch);
	*eg = (struct kis_egress)KIS_EGRESS_INIT;
}

/* ---- sessions ---- */

#define SAVED "egress"

int kis_egress_save(int dir_fd, const struct kis_egress *eg, struct kis_error **err)
{
	/* pasta's line, then passt's (a microvm's) */
	char line[128];
	int n = snprintf(line, sizeof(line), "%d %llu\n", (int)eg->pid, kis_proc_starttime(eg->pid));
	if (eg->vm_pid > 0)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%d %llu\n", (int)eg->vm_pid,
			      kis_proc_starttime(eg->vm_pid));
	_cleanup_close_ int fd = openat(dir_fd, SAVED, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
							   O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "egress: cannot record pasta in the session");
	return 0;
}

void kis_egress_end_saved(int dir_fd)
{
	_cleanup_close_ int fd = openat(dir_fd, SAVED, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[160];
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int pid = 0;
		unsigned long long start = 0;
		if (sscanf(line, "%d %llu", &pid, &start) != 2 || pid <= 0)
			continue;
		/* the pid is the helper's only while its start time matches
		 * (pid reuse) */
		int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (pfd >= 0 && kis_proc_starttime(pid) == start) {
			syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
			struct pollfd p = {.fd = pfd, .events = POLLIN};
			RETRY_EINTR(poll(&p, 1, 2000));
		}
		if (pfd >= 0)
			close(pfd);
	}
	unlinkat(dir_fd, SAVED, 0);
}
