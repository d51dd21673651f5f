/* SPDX-License-Identifier: MIT */
/* Network egress (network.mode egress): the destinations of network.allow,
 * the sandbox's network namespace with its address policy, and pasta. */
#ifndef KIS_NET_EGRESS_H
#define KIS_NET_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/net_dest.h"
#include "kis/error.h"
#include "kis/profile.h"

/* Theory of operation (docs/network.md has the why).
 *
 *   sandbox ──(its sockets)── netns S: lo, eth0 10.0.2.15/24, nftables
 *                                        │ tap (pasta's)
 *                                      pasta ── sockets of the engine's netns
 *
 * kis_egress_start():
 *  1. a holder child, as the helper's own unprivileged host id H, unshares
 *     a user namespace (owned by H, 0 -> H mapped) and in it the network
 *     namespace S; the engine keeps both open by descriptor;
 *  2. the engine (root, an ancestor of S's owner) writes the address
 *     policy as an nf_tables netlink batch (one transaction: an output
 *     chain with policy drop and an input chain that takes only replies)
 *     and sends it from a netfilter socket of S (kis_egress_launch), no
 *     nft process. The sandbox never holds a capability over S's user
 *     namespace, so it cannot change them;
 *  3. the engine makes pasta's tap in S (persistent, owned by H), gives
 *     it its address, MTU and default route, brings lo up, and sets S's
 *     TCP to a small send buffer and a loss-based congestion control (so
 *     it does not overrun pasta); then pasta (Debian `passt`) is started
 *     as H, in a private mount namespace where /dev/net/tun is a node of
 *     its own (the host's is root's 0600 here and is not touched), with
 *     no_new_privs and, for a one-shot run, PR_SET_PDEATHSIG; it joins S
 *     through the user namespace H owns, attaches the tap, then sandboxes
 *     itself (its own namespaces, seccomp, no capabilities). Nothing from
 *     the profile reaches pasta's argv: every value there is a constant or
 *     a descriptor number. The command may run once the policy is loaded
 *     and pasta has attached the tap (kis_egress_ready_for_command);
 *  4. the backend puts the sandbox in S (setns before bwrap; a namespace
 *     path for crun) and binds a resolv.conf naming the DNS forwarder.
 * kis_egress_stop() kills pasta (pidfd) and closes S. */

/* The sandbox's side of the link: fixed, the same in every sandbox. */
#define KIS_EGRESS_ADDR "10.0.2.15"
#define KIS_EGRESS_GATEWAY "10.0.2.2"
#define KIS_EGRESS_DNS "10.0.2.3"
#define KIS_EGRESS_IFNAME "eth0"
#define KIS_EGRESS_RESOLV "nameserver " KIS_EGRESS_DNS "\n"
/* A microvm guest's eth0: passt's default MTU (65520: the largest 802.3
 * frame less its header, rounded to 32 bits), so its TCP sends large
 * segments over the socketpair. */
#define KIS_EGRESS_VM_MTU 65520

/* Whether this host can carry egress (pasta, a tun device, root):
 * NULL when it can, else why not. */
KIS_HIDDEN const char *kis_egress_unavailable(void);
/* The same for a microvm (vm true): passt as well. */
KIS_HIDDEN const char *kis_egress_unavailable_for(bool vm);

/* The nftables ruleset for a policy (malloc'ed text), built only from the
 * parsed binary values; host addresses are the engine's own (getifaddrs). */
KIS_HIDDEN char *kis_egress_ruleset(const struct kis_net_dest *allow, size_t n_allow, bool allow_set);
/* vm: for a microvm, whose guest has a loopback of its own: S's loopback
 * is refused too (the guest's flows are passt's sockets in S). */
KIS_HIDDEN char *kis_egress_ruleset_for(const struct kis_net_dest *allow, size_t n_allow,
					bool allow_set, bool vm);

/* For --dry-run: the plan's egress as a JSON object (a json_t *, owned by
 * the caller): the allow list as parsed, the helper's uid, the rules. */
KIS_HIDDEN void *kis_egress_describe(const struct kis_net_dest *allow, size_t n_allow,
				     bool allow_set, uid_t helper_uid);
KIS_HIDDEN void *kis_egress_describe_for(const struct kis_net_dest *allow, size_t n_allow,
					 bool allow_set, uid_t helper_uid, bool vm);

struct kis_egress {
	int netns_fd;  /* S */
	int userns_fd; /* S's owner, owned by uid */
	int pidfd;     /* pasta's, or -1 */
	pid_t pid;     /* pasta's */
	uid_t uid;     /* pasta's host id (H) */
	int ready_fd;  /* pasta's -P pipe until it said it is ready, or -1 */
	int err_fd;    /* pasta's stderr (a memfd) until then, or -1 */
	pid_t vm_pid;  /* a microvm's passt (kis_egress_attach_vm), or 0 */
	int vm_pidfd;  /* its pidfd, or -1 */
	int nft_fd;    /* NETLINK_NETFILTER in S until the policy is loaded, or -1 */
	void *batch;   /* the policy as an nf_tables batch, prepare to launch */
	size_t batch_len;
	uint32_t batch_ack; /* the sequence number whose ack says it is loaded */
	int link_fd;   /* netlink in S, hearing of the tap's carrier until pasta attached, or -1 */
	int ifindex;   /* the tap's, in S */
};

#define KIS_EGRESS_INIT                                                                      \
	{.netns_fd = -1, .userns_fd = -1, .pidfd = -1, .pid = 0, .uid = 0, .ready_fd = -1,  \
	 .err_fd = -1, .vm_pid = 0, .vm_pidfd = -1, .nft_fd = -1, .batch = NULL, .batch_len = 0, \
	 .batch_ack = 0, .link_fd = -1, .ifindex = 0}

/* Make S, start loading the policy, start pasta; with wait, also wait
 * until both are done (else kis_egress_ready before anything of the
 * sandbox's own runs, before the EXEC: nft's and pasta's setup then
 * overlap the runtime's start, which neither needs; the runtime and the
 * agent in S send nothing). helper_uid
 * is H: an unprivileged host id that nothing else runs as. die_with_us:
 * pasta gets PR_SET_PDEATHSIG (a one-shot run); a session's pasta outlives
 * the engine and is ended by kis_egress_kill_pid (session destroy). */
KIS_HIDDEN int kis_egress_start(struct kis_egress *eg, const struct kis_net_dest *allow,
				size_t n_allow, bool allow_set, uid_t helper_uid, bool die_with_us,
				bool wait, struct kis_error **err);
/* kis_egress_start in two steps, for a runtime that may start in S before
 * the helpers (it sends nothing; the command waits for
 * kis_egress_ready_for_command): prepare makes and configures S and writes
 * the policy (vm: kis_egress_ruleset_for); launch starts pasta and loads
 * the policy into S.
 * Either stops eg when it fails. */
KIS_HIDDEN int kis_egress_prepare(struct kis_egress *eg, const struct kis_net_dest *allow,
				  size_t n_allow, bool allow_set, uid_t helper_uid, bool vm,
				  struct kis_error **err);
KIS_HIDDEN int kis_egress_launch(struct kis_egress *eg, bool die_with_us, struct kis_error **err);
/* The same, with the policy for a microvm (vm: kis_egress_ruleset_for). */
KIS_HIDDEN int kis_egress_start_for(struct kis_egress *eg, const struct kis_net_dest *allow,
				    size_t n_allow, bool allow_set, uid_t helper_uid,
				    bool die_with_us, bool wait, bool vm, struct kis_error **err);
/* A microvm's network: passt inside S, as H with no capability left, on
 * sock (a connected stream socket whose peer is QEMU's -netdev stream);
 * after kis_egress_ready (passt reads S's routes as it starts). It ends
 * with pasta (kis_egress_kill, _stop, the session's saved pids) and by
 * itself when QEMU's end closes. */
KIS_HIDDEN int kis_egress_attach_vm(struct kis_egress *eg, int sock, bool die_with_us,
				    struct kis_error **err);

/* A pod's link (kis-runtime's microvm pods): what the pod's network
 * namespace (CNI's) gives its one interface, read from the kernel, in our
 * own formatting: the guest is configured with it (src/agent/guest.c). */
struct kis_pod_link {
	char addr[16];   /* dotted IPv4 (inet_ntop) */
	char gateway[16];
	unsigned prefix; /* 1..30 */
	unsigned mtu;    /* 576..65535 */
	char ifname[16]; /* the interface's name (IFNAMSIZ) */
};
/* Read it from netns_fd (a network namespace the caller vouches for):
 * the one interface other than lo with an IPv4 address, up; its default
 * route's gateway (none: the subnet's first address). 1 when there is no
 * such interface (the namespace has a loopback only: so has the guest);
 * two, or one of another shape, are refused by name. */
KIS_HIDDEN int kis_pod_link_read(int netns_fd, struct kis_pod_link *l, struct kis_error **err);
/* A pod microvm's network: passt inside the pod's network namespace, as
 * H (eg->uid) with no capability left, on sock (QEMU's -netdev stream
 * peer): the guest has the pod's address, its flows are sockets of the
 * pod's namespace, and the pod's TCP ports are forwarded in to the guest.
 * eg->vm_pid, vm_pidfd are set; nothing else of eg is used. */
KIS_HIDDEN int kis_pod_attach_vm(struct kis_egress *eg, int netns_fd, const struct kis_pod_link *l,
				 int sock, bool die_with_us, struct kis_error **err);
/* What must hold before anything of the sandbox's own runs: the policy
 * is loaded in S (kis_egress_launch: an error there) and pasta has attached S's tap
 * (bounded; an error if pasta died first). The rest of pasta's start
 * goes on meanwhile: what the sandbox sends waits in the tap's queue. */
KIS_HIDDEN int kis_egress_ready_for_command(struct kis_egress *eg, struct kis_error **err);
/* kis_egress_ready_for_command, then pasta's whole start (bounded). */
KIS_HIDDEN int kis_egress_ready(struct kis_egress *eg, struct kis_error **err);
/* Whether pasta has finished its start: 1 yes (or no pasta), 0 not yet
 * (wait_ms 0), -1 it died or wait_ms passed (err set). While it is 0,
 * kis_egress_pasta_fd is readable once there is an answer. */
KIS_HIDDEN int kis_egress_pasta(struct kis_egress *eg, int wait_ms, struct kis_error **err);
KIS_HIDDEN int kis_egress_pasta_fd(const struct kis_egress *eg);
/* SIGKILL pasta now (its teardown overlaps ours); kis_egress_stop reaps. */
KIS_HIDDEN void kis_egress_kill(struct kis_egress *eg);
/* Kill pasta and wait for it, close S. Idempotent. */
KIS_HIDDEN void kis_egress_stop(struct kis_egress *eg);

/* A session's pasta lives on: close our descriptors, forget it. */
KIS_HIDDEN void kis_egress_release(struct kis_egress *eg);

/* Sessions: pasta's pid and start time in the session's directory
 * ("egress": "PID START\n"), and the end of it from there. */
KIS_HIDDEN int kis_egress_save(int dir_fd, const struct kis_egress *eg, struct kis_error **err);
KIS_HIDDEN void kis_egress_end_saved(int dir_fd);

/* The host id pasta runs as for a sandbox whose id block starts at first:
 * the block's last id (never bwrap's, never the sandbox root's). */
static inline uid_t kis_egress_helper_uid(uid_t first)
{
	return first + 65535u;
}

/* Refuse (KIS_E_INVALID_PROFILE naming network.allow[i]) an entry the
 * policy never lets through: one inside a range always refused, or an
 * address the host has now (a plan's check; it reads, it changes nothing). */
int kis_egress_check_allow(const struct kis_net_dest *allow, size_t n, struct kis_error **err);

#endif
