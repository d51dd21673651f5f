/* SPDX-License-Identifier: MIT */
/* kis-agent --guest-init: PID 1 of the microvm guest. It mounts the kernel's
 * filesystems, loads the modules, relays virtio ports to the agent, and obeys
 * the host's control port.
 *
 * Theory of operation. The initramfs holds this binary as /init, busybox,
 * and the modules listed in /lib/modules/load. QEMU gives the guest one
 * virtio-serial device with named ports (/sys/class/virtio-ports/X/name):
 * "kis.ctl", a line protocol with the engine (ping, prepare, cfg JSON, sync, events),
 * and "kis.0".."kis.N", each backed on the host by a chardev that accepts
 * engine connections. One relay process per port copies bytes between the
 * port and a fresh unix connection to the agent listener (the unchanged
 * kis_agent_serve_listener), so several execs run at once and share the
 * durable shell's state. A virtio port has no accept: the relay learns of a
 * new host connection from data after a read of 0 (the port driver returns
 * 0 while the host side is closed, virtio_console.c port_fops_read) or from
 * a HELLO frame, which the engine sends only first on a connection. The
 * workspace is an overlay of three virtio disks (see mount_workspace),
 * mounted when the cfg line arrives, so one snapshot taken before cfg
 * serves every workspace.
 *
 * We are the guest's root with every capability; the commands are not.
 * Each runs as the sandbox user (KIS_GUEST_UID) with no capability in any
 * set, no_new_privs, hard rlimits, in a cgroup namespace rooted at the
 * agent's pids group (mounted nsdelegate) and under the shared seccomp
 * policy (src/agent/confine.c); the workspace's layers are mounted
 * idmapped so that user owns what root owns in the workspace. The agent,
 * this process and the relays stay root and outside all of it. */
#include "core/util.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <linux/random.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "agent/agent.h"
#include "agent/confine.h"
#include "agent/guest.h"
#include "agent/pod.h"
#include "agent/proto.h"
#include "confine/confine.h"
#include "core/io.h"

#define AGENT_SOCK "/run/kis-agent.sock"
#define MAX_PORTS 16
#define FRAME_HDR KIS_FRAME_HDR

static void klog(const char *msg)
{
	int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		dprintf(fd, "kis-guest: %s\n", msg);
		close(fd);
	}
}

static void mount_basics(void)
{
	/* the rootfs the initramfs unpacks into is a tmpfs whose root is
	 * 1777 (shmem's default root mode): left so, the command could make
	 * /sbin and plant the modprobe the kernel runs as root on a module
	 * request (kernel/kmod.c). The guest's root is root's alone. */
	chmod("/", 0755);
	mkdir("/dev", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	mkdir("/proc", 0555);
	mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mkdir("/sys", 0555);
	mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mkdir("/dev/pts", 0755);
	/* a PTY opened through /dev/ptmx comes from the devpts instance mounted
	 * at the sibling "pts" directory (Documentation/filesystems/devpts.rst) */
	mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=0666,mode=0620");
	mkdir("/tmp", 01777);
	mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mkdir("/run", 0755);
	mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mkdir("/workspace", 0755);
	mkdir("/root", 0700);
}

/* finit_module(2) for the files named in /lib/modules/load, in order (the
 * list is written dependencies first by scripts/guest/fetch-kernel.sh).
 * Boot loads the channel's part, up to virtio_console; the rest (the
 * workspace disks' virtio_blk and overlay) is loaded when a run needs a
 * workspace, or by "prepare" before a snapshot is saved, so restored VMs
 * have it and a cold run without a workspace never pays for it. */
static bool disk_modules_loaded;

static void load_modules(bool disk_part)
{
	FILE *f = fopen("/lib/modules/load", "re");
	if (!f)
		return;
	char line[256];
	bool past_channel = false;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0])
			continue;
		bool channel = !past_channel;
		if (!strcmp(line, "virtio_console.ko"))
			past_channel = true;
		if (channel == disk_part)
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/lib/modules/%s", line);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST) {
			char m[400];
			snprintf(m, sizeof(m), "cannot load %s: %s", line, strerror(errno));
			klog(m);
		}
		close(fd);
	}
	fclose(f);
}

static int run_wait(char *const argv[])
{
	pid_t p = fork();
	if (p == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	int st = 0;
	if (p > 0)
		waitpid(p, &st, 0);
	return p > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The port device named NAME, found through sysfs (no udev in the guest). */
static int find_port(const char *name, char *dev, size_t n)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	if (!d)
		return -1;
	struct dirent *e;
	int r = -1;
	while (r < 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[300], buf[64] = "";
		snprintf(p, sizeof(p), "/sys/class/virtio-ports/%s/name", e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (!strcmp(buf, name)) {
			snprintf(dev, n, "/dev/%s", e->d_name);
			r = 0;
		}
	}
	closedir(d);
	return r;
}

static int open_port(const char *name)
{
	char dev[300];
	for (int i = 0; i < 500; i++) { /* up to 5 s for the driver's probe */
		if (find_port(name, dev, sizeof(dev)) == 0) {
			int fd = open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0) {
				/* SIGIO when the host side opens or sends (port_fops_fasync) */
				fcntl(fd, F_SETOWN, getpid());
				fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC);
				return fd;
			}
		}
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -1;
}

/* Wait until the host side may have opened or written: SIGIO (blocked,
 * so one raised before we wait is pending, not lost), or ms. */
static void wait_host_ms(int ms)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGIO);
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000 * 1000};
	sigtimedwait(&s, NULL, &ts);
}

static void wait_host(void)
{
	wait_host_ms(200);
}

/* An idle port (host side closed) wakes on SIGIO; the timeout is only a
 * backstop. Each wakeup of an idle guest costs the host CPU (TCG: the
 * vCPU thread and about four turns of QEMU's main loop), and a VM has
 * five such loops: 200 ms here was 25 wakeups a second, 2 s was 2.5.
 * The SIGIO cannot be lost: it is blocked, so one raised before
 * sigtimedwait stays pending, and virtio_console raises it both for the
 * host's open (handle_control_message, VIRTIO_CONSOLE_PORT_OPEN) and for
 * its data (in_intr). */
#define IDLE_WAIT_MS 60000

static int connect_agent(void)
{
	for (int i = 0; i < 500; i++) {
		int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", AGENT_SOCK);
		if (c >= 0 && connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return c;
		if (c >= 0)
			close(c);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -1;
}

/* ---- one relay per agent port ---- */

struct relay {
	int port, conn;
	bool hello_seen;
	/* host -> agent: frame boundaries, to see a HELLO that starts a new
	 * host connection the port gave no sign of */
	uint8_t hdr[FRAME_HDR];
	size_t hdr_len;
	uint32_t body_left;
	/* agent -> host: bytes read from the agent, not yet taken by the port */
	uint8_t out[65536];
	size_t out_off, out_len;
};

static void relay_drop(struct relay *r)
{
	if (r->conn >= 0)
		close(r->conn);
	r->conn = -1;
	r->hello_seen = false;
	r->hdr_len = 0;
	r->body_left = 0;
	r->out_off = r->out_len = 0;
}

/* Host bytes, forwarded frame by frame. */
static void relay_from_host(struct relay *r, const uint8_t *p, size_t n)
{
	while (n > 0) {
		if (r->body_left) {
			size_t k = n < r->body_left ? n : r->body_left;
			if (r->conn >= 0 && kis_write_all(r->conn, p, k) < 0)
				relay_drop(r);
			r->body_left -= (uint32_t)k;
			p += k;
			n -= k;
			continue;
		}
		size_t k = FRAME_HDR - r->hdr_len;
		if (k > n)
			k = n;
		memcpy(r->hdr + r->hdr_len, p, k);
		r->hdr_len += k;
		p += k;
		n -= k;
		if (r->hdr_len < FRAME_HDR)
			break;
		uint32_t len = (uint32_t)r->hdr[0] | (uint32_t)r->hdr[1] << 8 |
			       (uint32_t)r->hdr[2] << 16 | (uint32_t)r->hdr[3] << 24;
		uint8_t type = r->hdr[4];
		r->hdr_len = 0;
		if (type == KIS_F_HELLO && r->hello_seen)
			relay_drop(r); /* a new host connection: the old one is over */
		if (r->conn < 0) {
			r->conn = connect_agent();
			if (getenv("KIS_GUEST_DEBUG"))
				klog(r->conn < 0 ? "relay: no agent" : "relay: connected");
			if (r->conn < 0)
				return;
		}
		if (type == KIS_F_HELLO)
			r->hello_seen = true;
		/* the agent's decoder judges the frame; we only need its length,
		 * capped so garbage cannot make us swallow the next connection */
		r->body_left = len > KIS_FRAME_MAX ? 0 : len;
		if (kis_write_all(r->conn, r->hdr, FRAME_HDR) < 0)
			relay_drop(r);
	}
}

/* Is the port's host side open (no POLLHUP), waiting up to ms for the
 * open event (SIGIO) if it is not? */
static bool host_open_within(int port, int ms)
{
	for (int waited = 0; waited < ms; waited += 200) {
		struct pollfd p = {.fd = port, .events = POLLIN};
		if (poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP))
			return true;
		wait_host();
	}
	struct pollfd p = {.fd = port, .events = POLLIN};
	return poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP);
}

static _Noreturn void relay_main(const char *name)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGIO);
	sigprocmask(SIG_BLOCK, &s, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	struct relay r = {.port = open_port(name), .conn = -1};
	if (r.port < 0) {
		klog("relay: no port");
		_exit(1);
	}
	uint8_t buf[65536];
	for (;;) {
		struct pollfd pfd[2] = {{.fd = r.port, .events = POLLIN}, {.fd = -1}};
		if (r.out_len > r.out_off)
			pfd[0].events |= POLLOUT;
		else if (r.conn >= 0)
			pfd[1] = (struct pollfd){.fd = r.conn, .events = POLLIN};
		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[0].revents & (POLLIN | POLLHUP)) {
			ssize_t k = read(r.port, buf, sizeof(buf));
			if (k > 0) {
				relay_from_host(&r, buf, (size_t)k);
			} else if (k == 0) {
				/* read() gives 0 while the host side is closed. But the
				 * guest learns of a host open from the control queue,
				 * handled by a work item (virtio_console.c
				 * control_work_handler), while the new host's first
				 * bytes come with the port's own interrupt: a fresh
				 * connection's HELLO can be read before its open is
				 * known, and the read after it returns 0. Judge only
				 * after the open event had its chance (it raises
				 * SIGIO). A new connection while an old one is still
				 * held is told by its HELLO (relay_from_host). */
				if (r.conn >= 0 && host_open_within(r.port, 400))
					continue;
				/* the host side is closed: end the agent connection
				 * (which cancels its exec) and wait for the next one */
				relay_drop(&r);
				wait_host_ms(IDLE_WAIT_MS);
				continue;
			}
		}
		if (r.out_len > r.out_off && (pfd[0].revents & POLLOUT)) {
			ssize_t w = write(r.port, r.out + r.out_off, r.out_len - r.out_off);
			if (w > 0)
				r.out_off += (size_t)w;
			if (r.out_off == r.out_len)
				r.out_off = r.out_len = 0;
		}
		if (pfd[1].fd >= 0 && pfd[1].revents) {
			ssize_t k = read(r.conn, r.out, sizeof(r.out));
			if (k > 0) {
				r.out_off = 0;
				r.out_len = (size_t)k;
			} else {
				/* the agent closed (a protocol error): the host sees
				 * nothing more on this connection until it reconnects */
				close(r.conn);
				r.conn = -1;
			}
		}
	}
}

/* ---- the control port ---- */

static pid_t agent_pid;

static int set_lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int r = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP;
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	return r;
}

/* egress: the guest's virtio-net interface as the engine's cfg says
 * ({"address", "prefix", "gateway", "dns", "mtu"}: pasta's link, which
 * passt, the device's backend on the host, serves): address and netmask,
 * MTU, up, a default route (netdevice(7) SIOCSIF*, route(4) SIOCADDRT),
 * and /etc/resolv.conf naming the forwarder. Nothing here is a boundary:
 * the policy is enforced on the host, outside the guest and its VMM, where
 * passt's sockets leave the engine's network namespace. */
#define GUEST_IF "eth0"

static int sin_of(struct sockaddr *sa, const char *ip)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)(void *)sa;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	return ip && inet_pton(AF_INET, ip, &sin->sin_addr) == 1 ? 0 : -1;
}

static int set_egress(json_t *eth, char *msg, size_t n)
{
	const char *addr = json_string_value(json_object_get(eth, "address"));
	const char *gw = json_string_value(json_object_get(eth, "gateway"));
	const char *dns = json_string_value(json_object_get(eth, "dns"));
	json_int_t prefix = json_integer_value(json_object_get(eth, "prefix"));
	json_int_t mtu = json_integer_value(json_object_get(eth, "mtu"));
	if (!addr || !gw || !dns || prefix < 1 || prefix > 30 || mtu < 576 || mtu > 65535) {
		snprintf(msg, n, "egress: a bad interface configuration");
		return -1;
	}
	/* a cold boot without a workspace has not loaded virtio_net yet */
	if (!disk_modules_loaded) {
		load_modules(true);
		disk_modules_loaded = true;
	}
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(msg, n, "egress: no socket: %s", strerror(errno));
		return -1;
	}
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), GUEST_IF);
	const char *step = "its address";
	uint32_t mask = htonl(~0u << (32 - prefix));
	int r = sin_of(&ifr.ifr_addr, addr);
	if (r == 0)
		r = ioctl(s, SIOCSIFADDR, &ifr);
	if (r == 0) {
		step = "its netmask";
		sin_of(&ifr.ifr_netmask, "0.0.0.0");
		((struct sockaddr_in *)(void *)&ifr.ifr_netmask)->sin_addr.s_addr = mask;
		r = ioctl(s, SIOCSIFNETMASK, &ifr);
	}
	if (r == 0) {
		step = "its MTU";
		ifr.ifr_mtu = (int)mtu;
		r = ioctl(s, SIOCSIFMTU, &ifr);
	}
	if (r == 0) {
		step = "up";
		r = ioctl(s, SIOCGIFFLAGS, &ifr);
		ifr.ifr_flags |= IFF_UP;
		if (r == 0)
			r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	if (r == 0) {
		step = "its default route";
		struct rtentry rt;
		memset(&rt, 0, sizeof(rt));
		sin_of(&rt.rt_dst, "0.0.0.0");
		sin_of(&rt.rt_genmask, "0.0.0.0");
		r = sin_of(&rt.rt_gateway, gw);
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		rt.rt_dev = (char *)GUEST_IF;
		if (r == 0)
			r = ioctl(s, SIOCADDRT, &rt);
		if (r < 0 && errno == EEXIST)
			r = 0;
	}
	int e = errno;
	close(s);
	if (r < 0) {
		snprintf(msg, n, "egress: cannot set %s's %s: %s", GUEST_IF, step, strerror(e));
		return -1;
	}
	/* the guest's own /etc (the initramfs); a workspace as root keeps its
	 * own file, as on the other tiers */
	int fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || dprintf(fd, "nameserver %s\n", dns) < 0) {
		snprintf(msg, n, "egress: cannot write /etc/resolv.conf: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* The workspace's three disks (src/backends/microvm/disk.c): two read-only
 * ext4 layers, the base and the workspace's changes on the host (either
 * may be the empty image), and one writable ext4 with upper/ and work/
 * (and m<i>/upper, m<i>/work for the mounts), joined by overlayfs at
 * target; then the mounts' slots, two read-only disks each. The disks are
 * told apart by the serial the host gave each (virtio-blk's GET_ID,
 * /sys/block/vdX/serial: "kis-base", "kis-delta", "kis-rw", "kis-m<i>l",
 * "kis-m<i>d"), never by probe order or by what a disk holds. The page
 * cache may hold blocks read from the disks the snapshot was taken with:
 * drop them first (BLKFLSBUF, blockdev(8) --flushbufs). With "sync" every
 * write reaches the host's image before the syscall returns, so a VM that
 * is killed (session destroy) loses nothing the command was told was
 * written. */
#define MAX_GDISKS 16
struct gdisk {
	char dev[16];
	char serial[24];
	bool ro;
};
static struct gdisk gdisks[MAX_GDISKS];
static int n_gdisks = -1;

static void scan_disks(void)
{
	n_gdisks = 0;
	for (char c = 'a'; c <= 'z' && n_gdisks < MAX_GDISKS; c++) {
		char p[64];
		struct gdisk g = {.serial = ""};
		snprintf(g.dev, sizeof(g.dev), "/dev/vd%c", c);
		snprintf(p, sizeof(p), "/sys/block/vd%c/serial", c);
		int sf = open(p, O_RDONLY | O_CLOEXEC);
		if (sf < 0)
			continue;
		ssize_t k = read(sf, g.serial, sizeof(g.serial) - 1);
		close(sf);
		g.serial[k > 0 ? k : 0] = '\0';
		g.serial[strcspn(g.serial, "\n")] = '\0';
		int fd = open(g.dev, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ioctl(fd, BLKFLSBUF, 0);
		int rof = 0;
		if (ioctl(fd, BLKROGET, &rof) < 0)
			rof = 0;
		close(fd);
		g.ro = rof != 0;
		gdisks[n_gdisks++] = g;
	}
}

/* The device of the disk with this serial; NULL when none or two have it,
 * or when a disk the host gave read-only is not read-only here. */
static const char *disk_dev(const char *serial, bool want_ro)
{
	if (n_gdisks < 0)
		scan_disks();
	const struct gdisk *hit = NULL;
	for (int i = 0; i < n_gdisks; i++)
		if (!strcmp(gdisks[i].serial, serial)) {
			if (hit)
				return NULL;
			hit = &gdisks[i];
		}
	return hit && (!want_ro || hit->ro) ? hit->dev : NULL;
}

/* The layers live under a directory only root may enter: the command
 * (the sandbox user) sees the joined workspace, never a layer on its own. */
#define LAYERS "/mnt/.layers"

/* The ext4 disk dev on dir, seen through userns_fd's map: files the
 * host wrote as uid k are the sandbox user's k + KIS_GUEST_UID (the
 * workspace is its own, root's files in it included), and what it writes
 * reaches the disk as k again (mount_setattr(2), MOUNT_ATTR_IDMAP). The
 * plain mount is made at a staging point, cloned idmapped onto dir
 * (kis_idmap_bind) and detached: nothing in the guest shows the disk
 * with its own ids. */

static int mount_idmapped(const char *dev, const char *dir, unsigned long fl, int userns_fd)
{
	static const char stage[] = LAYERS "/stage";
	if (mount(dev, stage, "ext4", fl, NULL) < 0)
		return -1;
	int r = kis_idmap_bind(stage, dir, userns_fd);
	int e = errno;
	umount2(stage, MNT_DETACH);
	errno = e;
	return r;
}

/* Documentation/filesystems/overlayfs.rst: the delta above the base (its
 * whiteouts and opaque directories hide base entries), the guest's writes
 * in upper/ (rw: "<dir>/upper", "<dir>/work"; NULL: no upper layer, read
 * only by construction). No redirects, index or metacopy: the upper layer
 * then holds whole files, whiteouts and opaque directories only, which is
 * what the host applies back. Mounted as the sandbox user
 * (kis_as_ids_root): overlayfs works on its layers with its mounter's
 * credentials, and uid 0 has no id on the idmapped layers (its work/work
 * would fail with EOVERFLOW). */
static int mount_overlay(const char *target, const char *delta, const char *base, const char *rw,
			 unsigned long fl, char *msg, size_t n)
{
	char opts[1024];
	if (rw)
		snprintf(opts, sizeof(opts),
			 "lowerdir=%s:%s,upperdir=%s/upper,workdir=%s/work,redirect_dir=off,index=off,"
			 "metacopy=off,xino=off", delta, base, rw, rw);
	else
		snprintf(opts, sizeof(opts), "lowerdir=%s:%s,redirect_dir=off,index=off,metacopy=off,"
			 "xino=off", delta, base);
	if (kis_as_ids_root((uid_t)KIS_GUEST_UID) < 0) {
		snprintf(msg, n, "cannot take the sandbox user's file ids: %s", strerror(errno));
		kis_ids_root_end();
		return -1;
	}
	int r = mount("overlay", target, "overlay", fl | (rw ? 0 : MS_RDONLY), opts);
	int e = errno;
	kis_ids_root_end();
	if (r < 0) {
		snprintf(msg, n, "cannot mount the overlay: %s", strerror(e));
		return -1;
	}
	return 0;
}

/* What the workspace and the mounts share: the modules, the layers'
 * directory, the sandbox's id map and the writable disk at LAYERS/rw
 * (mounted once, when a workspace or a read-write mount needs it). */
static int layers_ns = -1;
static bool rw_mounted;

/* The layers' directory and the id map (a user namespace of the sandbox's
 * ids), once per guest: by "prepare" before a snapshot, so that restored
 * VMs have them. */
static int layers_ns_open(char *msg, size_t n)
{
	if (layers_ns >= 0)
		return 0;
	mkdir(LAYERS, 0700);
	mkdir(LAYERS "/stage", 0700);
	struct kis_error *err = NULL;
	if (kis_userns_open((uid_t)KIS_GUEST_UID, KIS_GUEST_IDS, &layers_ns, &err) < 0) {
		snprintf(msg, n, "%s", err && err->message ? err->message : "no user namespace");
		kis_error_free(err);
		layers_ns = -1;
		return -1;
	}
	return 0;
}

static int layers_prepare(bool need_rw, bool sync_writes, char *msg, size_t n)
{
	if (!disk_modules_loaded) {
		load_modules(true);
		disk_modules_loaded = true;
	}
	if (layers_ns_open(msg, n) < 0)
		return -1;
	if (need_rw && !rw_mounted) {
		const char *rw = disk_dev("kis-rw", false);
		mkdir(LAYERS "/rw", 0700);
		if (!rw || mount_idmapped(rw, LAYERS "/rw", MS_NOSUID | MS_NODEV |
					  (sync_writes ? MS_SYNCHRONOUS : 0), layers_ns) < 0) {
			snprintf(msg, n, "cannot mount the writable disk: %s",
				 rw ? strerror(errno) : "not there");
			return -1;
		}
		rw_mounted = true;
	}
	return 0;
}

static int mount_workspace(const char *target, bool sync_writes, char *msg, size_t n)
{
	if (layers_prepare(true, sync_writes, msg, n) < 0)
		return -1;
	const char *base = disk_dev("kis-base", true), *delta = disk_dev("kis-delta", true);
	if (!base || !delta) {
		snprintf(msg, n, "the workspace disks are not all there");
		return -1;
	}
	mkdir(LAYERS "/base", 0700);
	mkdir(LAYERS "/delta", 0700);
	mkdir(target, 0755);
	unsigned long fl = MS_NOSUID | MS_NODEV;
	if (mount_idmapped(base, LAYERS "/base", fl | MS_RDONLY, layers_ns) < 0 ||
	    mount_idmapped(delta, LAYERS "/delta", fl | MS_RDONLY, layers_ns) < 0) {
		snprintf(msg, n, "cannot mount the workspace disks: %s", strerror(errno));
		return -1;
	}
	if (mount_overlay(target, LAYERS "/delta", LAYERS "/base", LAYERS "/rw", fl, msg, n) < 0) {
		size_t k = strlen(msg);
		snprintf(msg + k, n - k, " (the workspace)");
		return -1;
	}
	return 0;
}

int kis_guest_mount_target_check(const char *t, char *why, size_t n)
{
	static const char *const sys[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32",
					  "usr", "etc", "init", "dev", "proc", "sys", "run",
					  "boot", "workspace", ".kis"};
	if (!t || t[0] != '/' || strlen(t) > 1024) {
		snprintf(why, n, "expected an absolute path of at most 1024 bytes");
		return -1;
	}
	size_t first = strcspn(t + 1, "/");
	for (const char *c = t; *c;) {
		c++; /* the '/' */
		size_t k = strcspn(c, "/");
		if (!k || k > 255 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.')) {
			snprintf(why, n, "expected a normal path (no empty, '.' or '..' component)");
			return -1;
		}
		for (size_t i = 0; i < k; i++)
			if (!isalnum((unsigned char)c[i]) && c[i] != '.' && c[i] != '_' && c[i] != '-') {
				snprintf(why, n, "may hold only letters, digits, '.', '_', '-' and '/'");
				return -1;
			}
		c += k;
	}
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (strlen(sys[i]) == first && !strncmp(t + 1, sys[i], first)) {
			snprintf(why, n, "is over the microvm guest's own system (/%s)", sys[i]);
			return -1;
		}
	if (first == 3 && !strncmp(t + 1, "mnt", 3)) {
		const char *rest = t + 4; /* "" or "/NAME..." */
		size_t k = *rest ? strcspn(rest + 1, "/") : 0;
		if (!*rest || (k == 7 && !strncmp(rest + 1, ".layers", 7)) ||
		    (k == 2 && !strncmp(rest + 1, "ws", 2))) {
			snprintf(why, n, "is the microvm guest's own /mnt, /mnt/.layers or /mnt/ws");
			return -1;
		}
	}
	return 0;
}

/* A directory for a mount at the absolute path t in the guest's root,
 * made component by component as root (0755), never through a link
 * (openat2 RESOLVE_NO_SYMLINKS at each step); its O_PATH fd. */
static int target_dir(const char *t)
{
	int cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (const char *c = t; cur >= 0 && *c;) {
		c++;
		size_t k = strcspn(c, "/");
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)k, c);
		c += k;
		if (mkdirat(cur, name, 0755) < 0 && errno != EEXIST) {
			close(cur);
			return -1;
		}
		struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
				       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
						  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
		int next = (int)syscall(SYS_openat2, cur, name, &how, sizeof(how));
		int e = errno;
		close(cur);
		errno = e;
		cur = next;
	}
	return cur;
}

/* The profile's mounts (cfg "mounts", entry i in slot i: disks kis-m<i>l
 * and kis-m<i>d): a base is its read-only ext4 image, a workspace an
 * overlay of its delta over its base's image, with m<i>/ on the writable
 * disk as upper layer when read-write, none (read-only) otherwise. Each
 * target is checked again here (kis_guest_mount_target_check, no
 * duplicate or nesting): the cfg came over the channel, and this init
 * trusts only what it checks. */
static int mount_mounts(json_t *ms, bool sync_writes, char *msg, size_t n)
{
	size_t nm = json_array_size(ms);
	if (!nm)
		return 0;
	if (nm > 8) {
		snprintf(msg, n, "mounts: too many");
		return -1;
	}
	bool any_rw = false;
	for (size_t i = 0; i < nm; i++) {
		json_t *m = json_array_get(ms, i);
		const char *t = json_string_value(json_object_get(m, "target"));
		const char *kind = json_string_value(json_object_get(m, "layers"));
		char why[160];
		if (!kind || (strcmp(kind, "base") && strcmp(kind, "overlay"))) {
			snprintf(msg, n, "mounts[%zu]: no layers", i);
			return -1;
		}
		if (kis_guest_mount_target_check(t, why, sizeof(why)) < 0) {
			snprintf(msg, n, "mounts[%zu].target: %s", i, why);
			return -1;
		}
		for (size_t j = 0; j < i; j++) {
			const char *u = json_string_value(json_object_get(json_array_get(ms, j), "target"));
			size_t a = strlen(t), b = strlen(u);
			size_t k = a < b ? a : b;
			if (!strncmp(t, u, k) && (t[k] == '/' || !t[k]) && (u[k] == '/' || !u[k])) {
				snprintf(msg, n, "mounts[%zu].target: the same as, or nested with, "
						 "mounts[%zu].target", i, j);
				return -1;
			}
		}
		any_rw |= !strcmp(kind, "overlay") && !json_is_true(json_object_get(m, "ro"));
	}
	if (layers_prepare(any_rw, sync_writes, msg, n) < 0)
		return -1;
	unsigned long fl = MS_NOSUID | MS_NODEV;
	for (size_t i = 0; i < nm; i++) {
		json_t *m = json_array_get(ms, i);
		const char *t = json_string_value(json_object_get(m, "target"));
		bool base = !strcmp(json_string_value(json_object_get(m, "layers")), "base");
		bool ro = base || json_is_true(json_object_get(m, "ro"));
		char sl[24], sd[24], dl[64], dd[64], rw[64], fdp[64];
		snprintf(sl, sizeof(sl), "kis-m%zul", i);
		snprintf(sd, sizeof(sd), "kis-m%zud", i);
		snprintf(dl, sizeof(dl), LAYERS "/m%zul", i);
		snprintf(dd, sizeof(dd), LAYERS "/m%zud", i);
		snprintf(rw, sizeof(rw), LAYERS "/rw/m%zu", i);
		const char *lo = disk_dev(sl, true), *de = disk_dev(sd, true);
		if (!lo || !de) {
			snprintf(msg, n, "mounts[%zu]: its disks are not there", i);
			return -1;
		}
		mkdir(dl, 0700);
		mkdir(dd, 0700);
		if (mount_idmapped(lo, dl, fl | MS_RDONLY, layers_ns) < 0 ||
		    (!base && mount_idmapped(de, dd, fl | MS_RDONLY, layers_ns) < 0)) {
			snprintf(msg, n, "mounts[%zu]: cannot mount its disks: %s", i, strerror(errno));
			return -1;
		}
		int tfd = target_dir(t);
		if (tfd < 0) {
			snprintf(msg, n, "mounts[%zu].target: cannot make '%s': %s", i, t,
				 strerror(errno));
			return -1;
		}
		/* mounted on the directory just made, through its fd (the
		 * magic link of an O_PATH fd names that very directory) */
		snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", tfd);
		int r;
		if (base) {
			/* the image's read-only mount bound on the target: a
			 * bind keeps MNT_READONLY (clone_mnt copies the flags),
			 * and the ext4 superblock is read-only as well. (The
			 * fd's magic link names the directory under the new
			 * mount, so a remount through it would miss it.) */
			struct statvfs sv;
			r = mount(dl, fdp, NULL, MS_BIND, NULL);
			if (r < 0)
				snprintf(msg, n, "mounts[%zu]: cannot bind the base: %s", i, strerror(errno));
			else if (statvfs(t, &sv) < 0 || !(sv.f_flag & ST_RDONLY))
				r = -1, snprintf(msg, n, "mounts[%zu]: the base is not read-only", i);
		} else {
			r = mount_overlay(fdp, dd, dl, ro ? NULL : rw, fl, msg, n);
		}
		close(tfd);
		if (r < 0)
			return -1;
	}
	return 0;
}

/* The guest's randomness (drivers/char/random.c).
 * jansson seeds its hash function from /dev/urandom on first use; before
 * the kernel's RNG is ready such a read runs its jitter entropy loop
 * (try_to_generate_entropy), about a second under TCG. A hash seed needs
 * no secrecy from the guest: take it from GRND_INSECURE, which never
 * waits. */
static void seed_json(void)
{
	uint32_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_INSECURE) != (ssize_t)sizeof(v))
		v = (uint32_t)time(NULL) ^ (uint32_t)getpid();
	json_object_seed(v ? v : 1);
}

/* Every VM restored from one snapshot starts with the same RNG state; the
 * engine sends fresh entropy with each cfg. It is credited (RNDADDENTROPY)
 * and pushed into the CRNG at once (RNDRESEEDCRNG), so no two VMs share
 * random numbers and the pool is ready before the first command. */
static int add_entropy(const char *hex)
{
	struct {
		int entropy_count, buf_size;
		uint32_t buf[16];
	} e = {0, 0, {0}};
	uint8_t *b = (uint8_t *)e.buf;
	size_t n = 0;
	while (hex && n < sizeof(e.buf) && isxdigit((unsigned char)hex[0]) &&
	       isxdigit((unsigned char)hex[1])) {
		char two[3] = {hex[0], hex[1], 0};
		b[n++] = (uint8_t)strtoul(two, NULL, 16);
		hex += 2;
	}
	if (n < 16)
		return -1;
	e.buf_size = (int)n;
	e.entropy_count = (int)n * 8;
	int fd = open("/dev/random", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = ioctl(fd, RNDADDENTROPY, &e) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0 ? -1 : 0;
	close(fd);
	return r;
}

/* limits.pids inside the guest: a cgroup v2 group for the agent and all it
 * runs (Documentation/admin-guide/cgroup-v2.rst, "PID"): pids.max caps
 * processes and threads, pids.events counts the forks it refused. */
#define PIDS_CG "/sys/fs/cgroup/kis"

static int write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, v, strlen(v));
	close(fd);
	return w == (ssize_t)strlen(v) ? 0 : -1;
}

/* The group itself, once per guest (by "prepare" before a snapshot);
 * until the cfg sets pids.max and the agent joins it, it limits nothing. */
static bool pids_group_made;
/* the engine's processes in the group: the agent, an exec's worker */
#define GUEST_ENGINE_PIDS 2u

static int pids_group_make(void)
{
	if (pids_group_made)
		return 0;
	/* nsdelegate: a cgroup namespace is a delegation boundary, so a
	 * command in one (src/agent/confine.c) cannot move out of its root
	 * whatever it may write (cgroup-v2.rst, "Delegation Containment") */
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "nsdelegate") < 0 &&
	    errno != EBUSY)
		return -1;
	if ((mkdir(PIDS_CG, 0755) < 0 && errno != EEXIST) ||
	    write_str("/sys/fs/cgroup/cgroup.subtree_control", "+pids") < 0)
		return -1;
	pids_group_made = true;
	return 0;
}

static int setup_pids(unsigned long long max)
{
	char v[32];
	snprintf(v, sizeof(v), "%llu", max);
	if (pids_group_make() < 0 || write_str(PIDS_CG "/pids.max", v) < 0)
		return -1;
	return 0;
}

/* The number after "key " in a file of such lines (pids.events, vmstat). */
static unsigned long read_counter(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	char line[128];
	size_t n = strlen(key);
	unsigned long v = 0;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ' ')
			v = strtoul(line + n + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* Every command's confinement, prepared once before the agent starts. */
static struct kis_agent_confine confine;
/* Its seccomp program for each network mode the guest serves, compiled
 * by "prepare" before a snapshot is saved (the agent's policy is fixed
 * with the agent binary, which names the snapshot): a restored VM then
 * skips libseccomp's compile, which under TCG is the largest part of its
 * setup, all of it code run for the first time since the restore. */
static int pre_seccomp[KIS_NET__COUNT] = {-1, -1, -1, -1};

static void precompile_seccomp(void)
{
	static const enum kis_net_mode modes[] = {KIS_NET_OFF, KIS_NET_LOOPBACK, KIS_NET_EGRESS};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct kis_agent_confine c;
		struct kis_error *err = NULL;
		if (pre_seccomp[modes[i]] < 0 && kis_agent_confine_prepare(&c, modes[i], &err) == 0)
			pre_seccomp[modes[i]] = c.seccomp_fd;
		kis_error_free(err); /* none: start_agent compiles it and says why */
	}
}

/* The agent's process: its listener, and what the cfg tells it (the
 * message a prepared agent waits for, agent_go). */
struct agent_run {
	bool root_ws;
	long long pids;
	bool hooks;
	enum kis_net_mode mode;
	const char *cwd;
	char **envp;
};

static int agent_listen(void)
{
	unlink(AGENT_SOCK);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", AGENT_SOCK);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 16) < 0) {
		if (l >= 0)
			close(l);
		return -1;
	}
	return l;
}

/* In the agent's process, once told: into the pids group, the workspace
 * as root, the working directory and environment, then serve. */
static _Noreturn void agent_main(int l, const struct agent_run *a)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* into the pids group before anything is served: its leaf "agent",
	 * not the group itself, so that the group holds no process of its
	 * own and a pod container's memory group may be made in it with
	 * +memory in its subtree_control (cgroup-v2.rst, "No Internal
	 * Process Constraint"; agent/pod.c) */
	char self[32];
	snprintf(self, sizeof(self), "%d", (int)getpid());
	if (a->pids > 0 && ((mkdir(PIDS_CG "/agent", 0755) < 0 && errno != EEXIST) ||
			    write_str(PIDS_CG "/agent/cgroup.procs", self) < 0))
		_exit(1);
	/* the group each exec's leaf is made under, opened before a
	 * chroot hides it (issue 15) */
	if (a->pids > 0)
		kis_agent_set_cgroup_dir(open(PIDS_CG, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (a->root_ws) {
		/* a pod's containers (pod.c) are made from the guest's own
		 * root, which the chroot hides: its fd, the layers' id map */
		kis_pod_set_guest(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), layers_ns, LAYERS);
		/* the workspace as root: the kernel filesystems inside it
		 * where it has the directories for them */
		mount("proc", "/mnt/ws/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
		mount("/dev", "/mnt/ws/dev", NULL, MS_BIND | MS_REC, NULL);
		mount("tmpfs", "/mnt/ws/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
		if (chroot("/mnt/ws") < 0)
			_exit(1);
	}
	if (chdir(a->cwd ? a->cwd : a->root_ws ? "/" : "/workspace") < 0) {
		if (chdir("/") < 0)
			_exit(1);
		/* A session's --cwd that is not there: every exec that names
		 * none tries it again and ends setup_failed 126 naming it, as
		 * on the other tiers; falling back to '/' ran each exec there
		 * and exited 0 (issue 40 item 3). */
		if (a->cwd)
			kis_agent_set_cwd(a->cwd);
	}
	extern char **environ;
	environ = a->envp ? a->envp : environ;
	kis_agent_set_confine(&confine);
	kis_agent_set_test_hooks(a->hooks);
	_exit(kis_agent_serve_listener(l));
}

/* The agent forked by "prepare", before the snapshot: every restored VM
 * has it waiting on go_fd, its listener made, so the cfg neither forks
 * PID 1 nor makes the socket (both code the guest runs for the first time
 * after a restore, slow under TCG). The cfg's side of it, agent_go:
 * struct agent_go, the cwd, then the environment as NUL-ended strings. */
struct agent_go {
	int32_t root_ws, hooks, mode, pad;
	int64_t pids;
	uint32_t cwd_len, env_len, env_n, pad2;
};
static pid_t prepared_agent = -1;
static int prepared_go = -1;

static int read_full(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t k = RETRY_EINTR(read(fd, (char *)buf + got, n - got));
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

static _Noreturn void prepared_agent_main(int l, int go)
{
	struct agent_go m;
	if (read_full(go, &m, sizeof(m)) < 0 || m.cwd_len > 4096 || m.env_len > (1u << 20) ||
	    m.env_n > m.env_len || m.mode < 0 || m.mode >= KIS_NET__COUNT)
		_exit(1);
	char *cwd = m.cwd_len ? calloc(1, m.cwd_len + 1) : NULL;
	char *env = calloc(1, m.env_len + 1);
	char **envp = calloc(m.env_n + 1, sizeof(*envp));
	if ((m.cwd_len && !cwd) || !env || !envp || (m.cwd_len && read_full(go, cwd, m.cwd_len) < 0) ||
	    read_full(go, env, m.env_len) < 0)
		_exit(1);
	close(go);
	for (size_t i = 0, off = 0; i < m.env_n && off < m.env_len; i++) {
		envp[i] = env + off;
		off += strlen(env + off) + 1;
	}
	if (pre_seccomp[m.mode] < 0)
		_exit(1);
	kis_agent_confine_init(&confine, pre_seccomp[m.mode]);
	struct agent_run a = {.root_ws = m.root_ws, .pids = m.pids, .hooks = m.hooks,
			      .mode = (enum kis_net_mode)m.mode, .cwd = cwd, .envp = envp};
	agent_main(l, &a);
}

static void prepare_agent(void)
{
	if (prepared_agent > 0)
		return;
	int go[2];
	int l = agent_listen();
	if (l < 0 || pipe2(go, O_CLOEXEC) < 0) {
		if (l >= 0)
			close(l);
		return; /* the cfg forks it then */
	}
	pid_t p = fork();
	if (p == 0) {
		close(go[1]);
		prepared_agent_main(l, go[0]);
	}
	close(l);
	close(go[0]);
	if (p < 0) {
		close(go[1]);
		return;
	}
	prepared_agent = p;
	prepared_go = go[1];
}

/* Tell the prepared agent what the cfg says; false when there is none
 * (or it is gone), and the cfg starts one. */
static bool go_prepared(const struct agent_run *a)
{
	if (prepared_agent <= 0 || prepared_go < 0 || pre_seccomp[a->mode] < 0)
		return false;
	size_t env_len = 0, env_n = 0;
	for (size_t i = 0; a->envp && a->envp[i]; i++, env_n++)
		env_len += strlen(a->envp[i]) + 1;
	struct agent_go m = {.root_ws = a->root_ws, .hooks = a->hooks, .mode = (int32_t)a->mode,
			     .pids = a->pids, .cwd_len = a->cwd ? (uint32_t)strlen(a->cwd) : 0,
			     .env_len = (uint32_t)env_len, .env_n = (uint32_t)env_n};
	bool ok = kis_write_all(prepared_go, &m, sizeof(m)) == 0 &&
		  (!m.cwd_len || kis_write_all(prepared_go, a->cwd, m.cwd_len) == 0);
	for (size_t i = 0; ok && a->envp && a->envp[i]; i++)
		ok = kis_write_all(prepared_go, a->envp[i], strlen(a->envp[i]) + 1) == 0;
	close(prepared_go);
	prepared_go = -1;
	pid_t p = prepared_agent;
	prepared_agent = -1;
	if (!ok) {
		kill(p, SIGKILL);
		return false;
	}
	agent_pid = p;
	return true;
}

static int start_agent(json_t *cfg, char *msg, size_t n)
{
	const char *root = json_string_value(json_object_get(cfg, "root"));
	const char *net = json_string_value(json_object_get(cfg, "net"));
	const char *cwd = json_string_value(json_object_get(cfg, "cwd"));
	bool disk = json_is_true(json_object_get(cfg, "disk"));
	bool sync_writes = json_is_true(json_object_get(cfg, "sync"));
	bool root_ws = root && !strcmp(root, "workspace");
	if (add_entropy(json_string_value(json_object_get(cfg, "seed"))) < 0) {
		snprintf(msg, n, "cannot seed the guest's RNG: %s", strerror(errno));
		return -1;
	}
	/* limits.pids is the command's: the agent and an exec's worker, in
	 * the group too, are added (concurrent execs share the count) */
	json_int_t pids = json_integer_value(json_object_get(cfg, "pids"));
	if (pids > 0 && setup_pids((unsigned long long)pids + GUEST_ENGINE_PIDS) < 0) {
		snprintf(msg, n, "cannot limit pids: %s", strerror(errno));
		return -1;
	}
	bool egress = net && !strcmp(net, "egress");
	if (net && (!strcmp(net, "loopback") || egress) && set_lo_up() < 0) {
		snprintf(msg, n, "cannot bring lo up: %s", strerror(errno));
		return -1;
	}
	if (egress && set_egress(json_object_get(cfg, "eth0"), msg, n) < 0)
		return -1;
	if (disk && mount_workspace(root_ws ? "/mnt/ws" : "/workspace", sync_writes, msg, n) < 0)
		return -1;
	if (root_ws && !disk) {
		snprintf(msg, n, "root: workspace needs a workspace");
		return -1;
	}
	json_t *mounts = json_object_get(cfg, "mounts");
	if (root_ws && json_array_size(mounts)) {
		snprintf(msg, n, "mounts: not with root: workspace");
		return -1;
	}
	if (mount_mounts(mounts, sync_writes, msg, n) < 0)
		return -1;
	/* a session's working directory, once its filesystems are in place:
	 * one that is not there refuses the create by name (check_cwd) */
	if (cwd && json_is_true(json_object_get(cfg, "check_cwd"))) {
		char at[4200];
		struct stat st;
		snprintf(at, sizeof(at), "%s%s", root_ws ? "/mnt/ws" : "", cwd);
		int e = stat(at, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
		if (e) {
			snprintf(msg, n, "cwd: cannot enter the working directory '%s': %s", cwd,
				 strerror(e));
			return -1;
		}
	}
	/* the commands' user and its home (HOME=/root without a workspace) */
	struct kis_error *err = NULL;
	enum kis_net_mode mode = egress ? KIS_NET_EGRESS :
				 net && !strcmp(net, "loopback") ? KIS_NET_LOOPBACK : KIS_NET_OFF;
	if (pre_seccomp[mode] >= 0) {
		kis_agent_confine_init(&confine, pre_seccomp[mode]);
	} else if (kis_agent_confine_prepare(&confine, mode, &err) < 0) {
		snprintf(msg, n, "%s", err && err->message ? err->message : "cannot confine");
		kis_error_free(err);
		return -1;
	}
	if (chown("/root", confine.uid, confine.gid) < 0) {
		snprintf(msg, n, "cannot give /root to the sandbox user: %s", strerror(errno));
		return -1;
	}
	/* environment of the durable shell: what the host sends */
	json_t *env = json_object_get(cfg, "env");
	size_t ne = json_array_size(env);
	_cleanup_free_ char **envp = calloc(ne + 1, sizeof(*envp));
	for (size_t i = 0; envp && i < ne; i++)
		envp[i] = (char *)json_string_value(json_array_get(env, i));
	struct agent_run a = {.root_ws = root_ws, .pids = (long long)pids,
			      .hooks = json_is_true(json_object_get(cfg, "test_hooks")), .mode = mode,
			      .cwd = cwd, .envp = envp};
	if (go_prepared(&a))
		return 0;
	int l = agent_listen();
	if (l < 0) {
		snprintf(msg, n, "cannot create the agent socket: %s", strerror(errno));
		return -1;
	}
	pid_t p = fork();
	if (p == 0)
		agent_main(l, &a);
	close(l);
	if (p < 0) {
		snprintf(msg, n, "cannot fork: %s", strerror(errno));
		return -1;
	}
	agent_pid = p;
	return 0;
}

/* How long a reply waits for the host's open to be known. */
#define CTL_OPEN_WAIT_MS 2000

static void ctl_reply(int fd, const char *s)
{
	/* the port is non-blocking: wait for room (the host reads replies) */
	size_t n = strlen(s), off = 0;
	int64_t open_end = -1;
	while (off < n) {
		ssize_t w = write(fd, s + off, n - off);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return;
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, 1000) <= 0)
			return;
		if (!(p.revents & POLLHUP))
			continue;
		/* POLLHUP: the port does not know the host side open. Right
		 * after a restore that is a race, not a close: the host's
		 * first line comes with the port's own interrupt, its open
		 * with the control queue's work item (virtio_console.c
		 * in_intr, control_work_handler; QEMU sends the open only
		 * after the device state is loaded, virtio-serial-bus.c
		 * virtio_serial_post_load_timer_cb), and a write before the
		 * open is known would block (will_write_block). Dropping the
		 * reply cost the engine its ping timeout at every restore;
		 * wait for the open (it raises SIGIO, blocked here so a
		 * pending one is not lost), a bounded time: a host that
		 * really closed gets no reply. */
		int64_t now = (int64_t)kis_monotonic_ms();
		if (open_end < 0)
			open_end = now + CTL_OPEN_WAIT_MS;
		if (now >= open_end)
			return;
		wait_host_ms((int)(open_end - now));
	}
}

static void ctl_line(int fd, char *line)
{
	char msg[512];
	if (!strcmp(line, "ping")) {
		ctl_reply(fd, "pong\n");
	} else if (!strncmp(line, "cfg ", 4)) {
		json_error_t je;
		json_t *cfg = json_loads(line + 4, 0, &je);
		if (agent_pid > 0) {
			ctl_reply(fd, "err already configured\n");
		} else if (!cfg) {
			ctl_reply(fd, "err bad cfg\n");
		} else if (start_agent(cfg, msg, sizeof(msg)) < 0) {
			char out[600];
			snprintf(out, sizeof(out), "err %s\n", msg);
			ctl_reply(fd, out);
		} else {
			ctl_reply(fd, "ok\n");
		}
		json_decref(cfg);
	} else if (!strcmp(line, "prepare")) {
		/* before a snapshot: what a workspace needs, loaded once, and
		 * what every cfg would otherwise make again after each restore
		 * (the pids group, the layers' id map, the seccomp programs) */
		if (!disk_modules_loaded) {
			load_modules(true);
			disk_modules_loaded = true;
		}
		if (pids_group_make() < 0 || layers_ns_open(msg, sizeof(msg)) < 0)
			klog("prepare: the pids group or the layers' id map failed; cfg tries again");
		precompile_seccomp();
		prepare_agent();
		ctl_reply(fd, "ok\n");
	} else if (!strcmp(line, "sync")) {
		sync();
		ctl_reply(fd, "ok\n");
	} else if (!strcmp(line, "events")) {
		/* the evidence for memory_limit and pids_limit: OOM kills in
		 * the guest, forks refused at pids.max */
		snprintf(msg, sizeof(msg), "%lu %lu\n", read_counter("/proc/vmstat", "oom_kill"),
			 read_counter(PIDS_CG "/pids.events", "max"));
		ctl_reply(fd, msg);
	} else {
		ctl_reply(fd, "err unknown\n");
	}
}

/* kis.ports=N on the kernel command line: how many agent ports QEMU has. */
static int cmdline_ports(void)
{
	char buf[4096];
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (k <= 0)
		return 1;
	buf[k] = '\0';
	const char *p = strstr(buf, "kis.ports=");
	int n = p ? atoi(p + 10) : 1;
	return n < 1 ? 1 : n > MAX_PORTS ? MAX_PORTS : n;
}

static void reap(void)
{
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		if (p == agent_pid)
			agent_pid = -1; /* the agent died: refuse new cfg, the host sees no reply */
		else if (p == prepared_agent)
			prepared_agent = -1; /* the cfg forks one instead */
}

int kis_agent_guest_init(void)
{
	if (getpid() != 1)
		return 2;
	mount_basics();
	seed_json();
	load_modules(false);
	/* the applet links come with the initramfs; an older one without
	 * them gets them here */
	if (access("/bin/ls", X_OK) < 0) {
		char *inst[] = {"/bin/busybox", "--install", "-s", "/bin", NULL};
		run_wait(inst);
	}
	setenv("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", 1);
	setenv("HOME", "/root", 1);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGIO);
	sigprocmask(SIG_BLOCK, &s, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < cmdline_ports(); i++) {
		if (fork() == 0) {
			char name[32];
			snprintf(name, sizeof(name), "kis.%d", i);
			relay_main(name);
		}
	}
	int ctl = open_port("kis.ctl");
	if (ctl < 0) {
		klog("no control port");
		for (;;)
			pause();
	}
	char line[65536];
	size_t len = 0;
	for (;;) {
		reap();
		struct pollfd p = {.fd = ctl, .events = POLLIN};
		/* the timeout only reaps (a dead agent is noticed at the next
		 * cfg, which comes as data and wakes us) */
		if (poll(&p, 1, IDLE_WAIT_MS) <= 0)
			continue;
		ssize_t k = read(ctl, line + len, sizeof(line) - 1 - len);
		if (k == 0) {
			len = 0; /* the host closed: a partial line is void */
			wait_host_ms(IDLE_WAIT_MS);
			continue;
		}
		if (k < 0)
			continue;
		len += (size_t)k;
		char *nl;
		while ((nl = memchr(line, '\n', len))) {
			*nl = '\0';
			ctl_line(ctl, line);
			size_t used = (size_t)(nl - line) + 1;
			memmove(line, nl + 1, len - used);
			len -= used;
		}
		if (len == sizeof(line) - 1)
			len = 0;
	}
}
