/* SPDX-License-Identifier: MIT */
/* passt, a microvm's virtio-net backend: started inside S as H with no
 * capability left, on QEMU's stream socket (kis_egress_attach_vm). */
#include "core/util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "confine/confine.h"
#include "core/io.h"
#include "net/egress_internal.h"

/* ---- a microvm's virtio-net backend, inside S ----
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
	int pod_netns_fd; /* a pod's network namespace (kis_pod_attach_vm), or -1 */
};

static int passt_fail(struct kis_error **err, const char *what)
{
	return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot prepare passt: %s", what);
}

/* A pod's passt: the pod's network namespace is joined as root (it is
 * owned by the initial user namespace: setns(2) needs CAP_SYS_ADMIN
 * there), then every privilege is given up as for S's passt. No DNS is
 * forwarded: the pod's resolv.conf (the engine's file, copied into the
 * guest's root) names the cluster's resolver, reached as any address. The
 * descriptor limit is raised to its hard value: passt holds one listening
 * socket per forwarded port. */
static int passt_pod_child(struct passt_start *s, uid_t h, struct kis_error **err)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl); /* passt tries the same */
	}
	if (setns(s->pod_netns_fd, CLONE_NEWNET) < 0)
		return passt_fail(err, "cannot join the pod's network namespace");
	if (setgroups(0, NULL) < 0 || setresgid(h, h, h) < 0 || setresuid(h, h, h) < 0)
		return passt_fail(err, "cannot switch to the helper's id");
	TRY(kis_drop_caps(err));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return passt_fail(err, "no_new_privs");
	return 0;
}

/* In passt's child, as root, before exec; no allocation. */
static int passt_child(void *ctx, struct kis_error **err)
{
	struct passt_start *s = ctx;
	uid_t h = s->eg->uid;
	int keep[1] = {s->sock};
	TRY(kis_cloexec_fds_from(3, keep, 1, err));
	if (egress_clear_cloexec(s->sock) < 0)
		return passt_fail(err, "cannot pass its socket");
	if (s->pod_netns_fd >= 0)
		return passt_pod_child(s, h, err);
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
	const char *passt = egress_passt_path();
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
	struct passt_start s = {.eg = eg, .sock = fd, .pod_netns_fd = -1};
	struct kis_spawn sp = {.argv = argv, .envp = (char *const *)egress_tool_env, .cwd = "/",
			       .stdin_fd = nul, .child_setup = passt_child, .child_ctx = &s,
			       .die_with_parent = die_with_us, .parent = getpid(),
			       .exec_path = egress_exec_path(passt)};
	return egress_spawn_helper(&sp, die_with_us, nul, nul, &eg->vm_pid, &eg->vm_pidfd, err);
}


/* ---- a pod's network (kis-runtime's microvm pods) ----
 *
 *   guest eth0 (the pod's address) ── virtio-net ══ passt (H, in the pod's netns)
 *        passt's sockets in the pod's netns ── its veth ── CNI's bridge ── other pods
 *
 * The namespace is the operator's: CNI made it and gave it its address
 * and routes; kis-runtime passes it only when its allowlist accepted the
 * sandbox bundle's network namespace path (src/runtime/mvm_pod.c). No
 * kis policy applies in it (it is not S): what the pod may reach is what
 * the cluster's network gives every pod. Nothing of the bundle reaches
 * passt's command line: the addresses are read from the kernel and
 * written by inet_ntop, the ports are ours. */

static int pod_refuse(struct kis_error **err, const char *what)
{
	return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
			     "the pod's network namespace: %s (run.kis.tier 'microvm')", what);
}

/* In the pod's namespace (this thread only): its interfaces and routes. */
static int pod_link_in_ns(struct kis_pod_link *l, struct kis_error **err)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the pod's network: a socket");
	/* netdevice(7) SIOCGIFCONF: the interfaces with an IPv4 address */
	struct ifreq ifs[16];
	struct ifconf ifc = {.ifc_len = sizeof(ifs), .ifc_req = ifs};
	if (ioctl(s, SIOCGIFCONF, &ifc) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the pod's network: its interfaces");
	int found = -1;
	for (size_t i = 0; i < (size_t)ifc.ifc_len / sizeof(ifs[0]); i++) {
		struct ifreq f = ifs[i];
		if (ioctl(s, SIOCGIFFLAGS, &f) < 0 || (f.ifr_flags & IFF_LOOPBACK) ||
		    !(f.ifr_flags & IFF_UP))
			continue;
		if (found >= 0)
			return pod_refuse(err, "it has more than one interface with an IPv4 address");
		found = (int)i;
	}
	if (found < 0)
		return 1;
	struct ifreq f = ifs[found];
	struct in_addr a = ((struct sockaddr_in *)(void *)&f.ifr_addr)->sin_addr;
	if (ioctl(s, SIOCGIFNETMASK, &f) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the pod's network: its netmask");
	uint32_t mask = ntohl(((struct sockaddr_in *)(void *)&f.ifr_netmask)->sin_addr.s_addr);
	unsigned prefix = (unsigned)__builtin_popcount(mask);
	if (prefix < 1 || prefix > 30 || mask != egress_prefix_mask(prefix))
		return pod_refuse(err, "its interface's netmask is not a prefix of 1 to 30 bits");
	f = ifs[found];
	if (ioctl(s, SIOCGIFMTU, &f) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the pod's network: its MTU");
	if (f.ifr_mtu < 576)
		return pod_refuse(err, "its interface's MTU is below 576");
	l->mtu = f.ifr_mtu > 65535 ? 65535 : (unsigned)f.ifr_mtu;
	l->prefix = prefix;
	/* route(4)'s table, /proc/net/route: "Iface Destination Gateway Flags
	 * ..." in hex, network order; the default route of that interface */
	_cleanup_close_ int rf = open("/proc/thread-self/net/route", O_RDONLY | O_CLOEXEC);
	char buf[8192];
	ssize_t n = rf < 0 ? -1 : read(rf, buf, sizeof(buf) - 1);
	if (n < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the pod's network: its routes");
	buf[n] = '\0';
	uint32_t gw = 0;
	for (char *line = strchr(buf, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
		char ifn[IFNAMSIZ + 1];
		unsigned dst, g, flags;
		if (sscanf(line + 1, "%16s %x %x %x", ifn, &dst, &g, &flags) == 4 && dst == 0 &&
		    (flags & 0x2 /* RTF_GATEWAY */) && strcmp(ifn, ifs[found].ifr_name) == 0) {
			gw = g;
			break;
		}
	}
	/* No default route (a CNI config without routes: the pod reaches its
	 * subnet only): passt and the guest still need a gateway; the
	 * subnet's first address (the bridge's, host-local's convention), or
	 * its last when that is the pod's own. A flow beyond the subnet then
	 * fails in the pod's namespace (no route), as a runc pod's does. */
	if (!gw) {
		uint32_t net = ntohl(a.s_addr) & mask;
		uint32_t first = net + 1, lastaddr = (net | ~mask) - 1;
		gw = htonl(first == ntohl(a.s_addr) ? lastaddr : first);
	}
	/* the interface's name, for passt's -i: the kernel's, checked
	 * anyway (an argv element, never a shell's) */
	const char *nm = ifs[found].ifr_name;
	size_t nl = strnlen(nm, IFNAMSIZ);
	if (nl == 0 || nl >= IFNAMSIZ || strspn(nm, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					   "0123456789-_.@") != nl)
		return pod_refuse(err, "its interface's name is not a plain one");
	memcpy(l->ifname, nm, nl + 1);
	struct in_addr g = {.s_addr = gw};
	if (!inet_ntop(AF_INET, &a, l->addr, sizeof(l->addr)) ||
	    !inet_ntop(AF_INET, &g, l->gateway, sizeof(l->gateway)))
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the pod's network: an address");
	return 0;
}

int kis_pod_link_read(int netns_fd, struct kis_pod_link *l, struct kis_error **err)
{
	memset(l, 0, sizeof(*l));
	_cleanup_close_ int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "the pod's network: cannot hold the engine's network namespace");
	if (setns(netns_fd, CLONE_NEWNET) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "the pod's network: cannot enter its namespace");
	int r = pod_link_in_ns(l, err);
	if (r > 0)
		memset(l, 0, sizeof(*l));
	if (setns(home, CLONE_NEWNET) < 0)
		abort(); /* every later socket of ours would be the pod's: nothing may go on */
	return r;
}

/* The TCP ports forwarded in: 1024 up to what passt's descriptors allow
 * (one listening socket a port; a quarter of the limit left for flows),
 * at most 32767 (the kernel's ephemeral range starts at 32768 by default:
 * ip_local_port_range). Below 1024 passt, unprivileged, cannot bind. */
static unsigned pod_last_port(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0;
	rlim_t room = rl.rlim_max == RLIM_INFINITY ? 1u << 20 : rl.rlim_max;
	rlim_t last = 1024 + room - room / 4 - 64;
	return room < 4096 ? 0 : last > 32767 ? 32767 : (unsigned)last;
}

int kis_pod_attach_vm(struct kis_egress *eg, int netns_fd, const struct kis_pod_link *l,
		      int sock, bool die_with_us, struct kis_error **err)
{
	const char *passt = egress_passt_path();
	if (!passt)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "a pod's network on the microvm needs passt (Debian package "
				     "passt)");
	unsigned last = pod_last_port();
	if (!last)
		return pod_refuse(err, "RLIMIT_NOFILE's hard limit leaves passt no room for the "
				       "pod's ports (4096 at least)");
	_cleanup_close_ int fd = fcntl(sock, F_DUPFD_CLOEXEC, 10);
	_cleanup_close_ int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0 || nul < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the pod's network: cannot start passt");
	char fdarg[16], prefix[8], mtu[8], ports[24];
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	snprintf(prefix, sizeof(prefix), "%u", l->prefix);
	snprintf(mtu, sizeof(mtu), "%u", l->mtu);
	snprintf(ports, sizeof(ports), "1024-%u", last);
	/* The guest is configured statically with the same values
	 * (src/agent/guest.c), so passt answers no DHCP, NDP or RA; -i: the
	 * pod's interface, which passt would otherwise look for by a default
	 * route;
	 * --no-map-gw: the gateway is CNI's, reached as itself; -t: the pod's
	 * TCP ports to the guest, as a pod's own process would bind them (UDP
	 * in: not forwarded); -4: the pod's IPv4 only. */
	char *argv[] = {(char *)passt, "--quiet", "--foreground", "--ipv4-only", "--fd", fdarg,
			"--interface", (char *)l->ifname, "--address", (char *)l->addr, "--netmask", prefix, "--gateway",
			(char *)l->gateway, "--mtu", mtu, "--no-map-gw", "--no-dhcp", "--no-ndp",
			"--no-dhcpv6", "--no-ra", "--tcp-ports", ports, "--udp-ports", "none", NULL};
	struct passt_start s = {.eg = eg, .sock = fd, .pod_netns_fd = netns_fd};
	struct kis_spawn sp = {.argv = argv, .envp = (char *const *)egress_tool_env, .cwd = "/",
			       .stdin_fd = nul, .child_setup = passt_child, .child_ctx = &s,
			       .die_with_parent = die_with_us, .parent = getpid(),
			       .exec_path = egress_exec_path(passt)};
	return egress_spawn_helper(&sp, die_with_us, nul, nul, &eg->vm_pid, &eg->vm_pidfd, err);
}
