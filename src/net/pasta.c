/* SPDX-License-Identifier: MIT */
/* pasta, egress's link to the world: its start as H in S, what it said
 * when it failed, and the waits for its tap and its whole start. */
#include "core/util.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "confine/confine.h"
#include "core/io.h"
#include "net/egress_internal.h"

struct pasta_start {
	const struct kis_egress *eg;
	int ready_fd, stderr_fd;
};

static int fail(struct kis_error **err, const char *what)
{
	return kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot prepare pasta: %s", what);
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
	if (egress_clear_cloexec(s->eg->netns_fd) < 0 || egress_clear_cloexec(s->eg->userns_fd) < 0 ||
	    egress_clear_cloexec(s->ready_fd) < 0)
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


int egress_start_pasta(struct kis_egress *eg, bool die_with_us, struct kis_error **err)
{
	const char *pasta = egress_pasta_path();
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
	 * (netns.c, configure_in_s); pasta's addresses are still its own stack's. -t/-u
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
	struct kis_spawn sp = {.argv = argv, .envp = (char *const *)egress_tool_env, .cwd = "/",
			       .stdin_fd = nul, .child_setup = pasta_child, .child_ctx = &s,
			       .die_with_parent = die_with_us, .parent = getpid(),
			       .exec_path = egress_exec_path(pasta), .vfork_ok = true};
	return egress_spawn_helper(&sp, die_with_us, nul, errfd, &eg->pid, &eg->pidfd, err);
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

/* Until pasta has attached S's tap (see "S's link" in netns.c), bounded. */
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

