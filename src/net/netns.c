/* SPDX-License-Identifier: MIT */
/* Egress's network namespace S: made by a holder as the helper's id H,
 * then its link, routes and TCP configured by the engine from inside. */
#include "core/util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/route.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "confine/confine.h"
#include "net/egress_internal.h"

/* ---- the holder ---- */

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
int egress_make_netns(struct kis_egress *eg, struct kis_error **err)
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
int egress_configure_netns(struct kis_egress *eg, struct kis_error **err)
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

