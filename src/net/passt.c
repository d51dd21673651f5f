/* SPDX-License-Identifier: MIT */
/* passt, a microvm's virtio-net backend: started inside S as H with no
 * capability left, on QEMU's stream socket (kis_egress_attach_vm). */
#include "core/util.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>

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
	if (egress_clear_cloexec(s->sock) < 0)
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
	struct passt_start s = {.eg = eg, .sock = fd};
	struct kis_spawn sp = {.argv = argv, .envp = (char *const *)egress_tool_env, .cwd = "/",
			       .stdin_fd = nul, .child_setup = passt_child, .child_ctx = &s,
			       .die_with_parent = die_with_us, .parent = getpid(),
			       .exec_path = egress_exec_path(passt)};
	return egress_spawn_helper(&sp, die_with_us, nul, nul, &eg->vm_pid, &eg->vm_pidfd, err);
}

