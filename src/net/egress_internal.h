/* SPDX-License-Identifier: MIT */
/* Internal to net/: what egress's files share (egress.h is the layer's
 * face): the policy's one list of rules, and the steps kis_egress_start
 * strings together (S, its policy, the helpers). */
#ifndef KIS_NET_EGRESS_INTERNAL_H
#define KIS_NET_EGRESS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/util.h"
#include "exec/exec.h"
#include "net/egress.h"

/* egress.h's addresses as host-order numbers */
#define EG_ADDR 0x0a00020fu /* KIS_EGRESS_ADDR */
#define EG_GW 0x0a000202u   /* KIS_EGRESS_GATEWAY */
#define EG_DNS 0x0a000203u  /* KIS_EGRESS_DNS */
#define EG_MASK 0xffffff00u /* /24 */

static inline uint32_t egress_prefix_mask(unsigned prefix)
{
	return prefix ? ~0u << (32 - prefix) : 0;
}

/* ---- the policy: one list of rules, two writers (policy.c) ----
 *
 * egress_policy_rules() says the rules, in order (first match wins); nft's
 * text (kis_egress_ruleset, shown by --dry-run, policy.c) and the netlink
 * batch the engine loads into S (nft.c) are both written from it. */

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

/* Each rule to fn; -1 when the host's addresses cannot be read (the
 * policy would miss them). */
KIS_HIDDEN int egress_policy_rules(const struct kis_net_dest *allow, size_t n_allow,
				   bool allow_set, bool vm, rule_fn fn, void *ctx);

/* ---- the policy into S (nft.c) ---- */

/* The policy as an nf_tables batch, kept in eg until egress_policy_load
 * sends it from eg->nft_fd (a netfilter socket of S). */
KIS_HIDDEN int egress_policy_write(struct kis_egress *eg, const struct kis_net_dest *allow,
				   size_t n_allow, bool allow_set, bool vm, struct kis_error **err);
KIS_HIDDEN int egress_policy_load(struct kis_egress *eg, struct kis_error **err);

/* ---- S (netns.c) ---- */

/* S and its owner, made by a holder as H (eg->uid), kept by descriptor. */
KIS_HIDDEN int egress_make_netns(struct kis_egress *eg, struct kis_error **err);
/* S's link (the tap, its address and route), lo, S's TCP tuning, and the
 * netlink sockets the policy and the tap's carrier use. */
KIS_HIDDEN int egress_configure_netns(struct kis_egress *eg, struct kis_error **err);

/* ---- the helpers' binaries and their start (tools.c) ---- */

KIS_HIDDEN const char *egress_pasta_path(void);
KIS_HIDDEN const char *egress_passt_path(void);
/* The binary to exec for tool (pasta's or passt's path). */
KIS_HIDDEN const char *egress_exec_path(const char *tool);
/* The helpers' whole environment. */
extern KIS_HIDDEN const char *const egress_tool_env[];
KIS_HIDDEN int egress_clear_cloexec(int fd);
KIS_HIDDEN int egress_spawn_helper(struct kis_spawn *sp, bool die_with_us, int out_fd, int err_fd,
				   pid_t *pid, int *pidfd, struct kis_error **err);

/* ---- pasta (pasta.c) ---- */

KIS_HIDDEN int egress_start_pasta(struct kis_egress *eg, bool die_with_us, struct kis_error **err);

#endif
