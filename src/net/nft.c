/* SPDX-License-Identifier: MIT */
/* Egress's policy into S: the rules (policy.c) as one nf_tables netlink
 * batch, sent from a netfilter socket of S; no nft process. */
#include "core/util.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <net/if.h>

#include "net/egress_internal.h"

/* ---- the rules as an nf_tables netlink batch ----
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
	uint32_t net = htonl(addr & egress_prefix_mask(prefix));
	if (prefix < 32) {
		uint32_t mask = htonl(egress_prefix_mask(prefix)), zero = 0;
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
	if (egress_policy_rules(allow, n_allow, allow_set, vm, nl_rule, b) < 0)
		b->oom = true;
	m = nl_msg(b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
	nl_end(b, m);
	return b->oom ? -1 : 0;
}


/* ---- the policy into S: the batch, from a netlink socket of S ---- */

/* The policy as a batch, kept until kis_egress_launch sends it. */
int egress_policy_write(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
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
int egress_policy_load(struct kis_egress *eg, struct kis_error **err)
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

