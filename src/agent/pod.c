/* SPDX-License-Identifier: MIT */
/* The containers of a kis-vm pod inside its guest: each app container's
 * root (a mount slot's image under an upper layer of its own) and its own
 * mount and pid namespaces, made, joined and removed by the agent's worker
 * for an exec that names one (docs/protocol.md "container").
 *
 * Theory of operation. The guest's agent runs chrooted in the pod's root
 * (the sandbox's image); the guest's own root holds the layers (LAYERS:
 * the writable disk at LAYERS/rw) and the disks' sysfs. The worker of a
 * container's exec is a process of its own, used for that one exec: it
 * leaves the chroot through the guest root's fd (kis_pod_set_guest, taken
 * before the chroot) and:
 *   init: takes a private copy of the guest's mount namespace
 *     (unshare CLONE_NEWNS, every mount made private), mounts the slot's
 *     lower disk (kis-m<slot>l, swapped in by the host over QMP: its page
 *     cache dropped first, BLKFLSBUF, unless another container of the pod
 *     has it mounted) read-only and idmapped as the workspace is, and an
 *     overlay over it with LAYERS/rw/c/<id>/{upper,work} (beside the
 *     workspace's upper/, so never copied back to the host); /dev (a tmpfs
 *     with null, zero, full, random, urandom, tty, the guest's pts, shm),
 *     /sys read-only and the pod's /etc/hosts, /etc/hostname and
 *     /etc/resolv.conf (the pod root's copies) placed in it; moved over
 *     "/" and entered (pivot_root cannot leave the initramfs's rootfs); then unshare(CLONE_NEWPID): the command it starts is pid 1
 *     of a pid namespace of its own, and mounts its /proc (kis_pod_child,
 *     before the usual confinement). Its pid and start time are written to
 *     /run/kis-ctr/<id>/init on the guest's root.
 *   join: setns into that init's mount and pid namespaces (checked by its
 *     start time: a reused pid is not it): the command sees the
 *     container's files and processes.
 *   remove: the init killed (its pid namespace ends with it), its upper
 *     layer removed from the writable disk, its record gone; with
 *     free_slot, waits until no mount of the slot's disk is left anywhere
 *     (an exclusive open succeeds), so that the host may swap another
 *     image in: a stale superblock of the old one would be reused.
 *   limits: with memory_max or cpu_quota_us, init makes the cgroup v2
 *     group kis-ctr-<id> (in the pod's pids group when it has one, whose
 *     processes live in its leaf "agent" so that +memory and +cpu may be
 *     enabled there; else in the root), writes memory.max and
 *     memory.swap.max 0, and cpu.max "$QUOTA $PERIOD"; the init and every
 *     join exec enter it from their child (confine.c), so its cgroup
 *     namespace is rooted there, and the init mounts that view read-only
 *     at the container's /sys/fs/cgroup (the join execs share its mount
 *     namespace). When the init ends, memory.events oom_kill is the
 *     evidence of memory_limit (agent.c); remove removes the group once
 *     its processes are gone.
 * The guest's network, IPC and UTS namespaces are the pod's, shared. */
#include "core/util.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include "agent/confine.h"
#include "agent/pod.h"
#include "confine/confine.h"
#include "core/io.h"
#include "core/tree.h"

#define CTR_RUN "/run/kis-ctr"
/* how long remove waits for the init's end and the slot's last unmount */
#define CTR_WAIT_MS 10000
/* how long an exec waits for the container's init to be there */
#define CTR_JOIN_WAIT_MS 30000
/* the guest's /proc, by path, while the worker is in the guest's root */
#define AT_FDCWD_PROC guest_proc_fd()

static int guest_proc_fd(void)
{
	static int fd = -1;
	if (fd < 0)
		fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd;
}

static int guest_root_fd = -1, guest_userns_fd = -1;
static const char *guest_layers;

void kis_pod_set_guest(int root_fd, int userns_fd, const char *layers)
{
	guest_root_fd = root_fd;
	guest_userns_fd = userns_fd;
	guest_layers = layers;
}

/* Back to the guest's own root (the worker is chrooted in the pod's). */
static int to_guest_root(char *msg, size_t n)
{
	if (guest_root_fd < 0 || !guest_layers) {
		snprintf(msg, n, "container: this guest has no pod layers (a pod sandbox's root)");
		return -1;
	}
	if (fchdir(guest_root_fd) < 0 || chroot(".") < 0 || chdir("/") < 0) {
		snprintf(msg, n, "container: cannot reach the guest's root: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The device of the disk with this serial (/sys/block/vd?/serial). */
static int disk_by_serial(const char *serial, char *dev, size_t n)
{
	int hit = 0;
	for (char c = 'a'; c <= 'z'; c++) {
		char p[64], s[32];
		snprintf(p, sizeof(p), "/sys/block/vd%c/serial", c);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, s, sizeof(s) - 1);
		close(fd);
		s[k > 0 ? k : 0] = '\0';
		s[strcspn(s, "\n")] = '\0';
		if (!strcmp(s, serial)) {
			snprintf(dev, n, "/dev/vd%c", c);
			hit++;
		}
	}
	return hit == 1 ? 0 : -1;
}

static void ctr_paths(const char *id, char *dir, size_t n)
{
	snprintf(dir, n, CTR_RUN "/%s", id);
}

/* The container's group (linux.resources.memory.limit and cpu.quota of
 * its bundle): "kis-ctr-<id>" in the guest's pids group (guest.c's PIDS_CG)
 * when the pod has one, so that the pod's pids.max counts the container
 * still, else in the cgroup v2 root. The pids group holds no process of
 * its own (the agent is in its leaf "agent"), so +memory may be enabled
 * and +cpu in its subtree_control (cgroup-v2.rst, "No Internal Process
 * Constraint"); the root is exempt from that rule. */
#define CTR_PIDS_CG "/sys/fs/cgroup/kis"
#define CTR_CG_NAME "kis-ctr-"

/* The group's path under parent (NULL: where it is, the pids group's
 * first; the root's when neither is there). */
static void ctr_cg_path(const char *id, const char *parent, char *p, size_t n)
{
	if (parent) {
		snprintf(p, n, "%s/" CTR_CG_NAME "%s", parent, id);
		return;
	}
	snprintf(p, n, CTR_PIDS_CG "/" CTR_CG_NAME "%s", id);
	if (access(p, F_OK) == 0)
		return;
	snprintf(p, n, "/sys/fs/cgroup/" CTR_CG_NAME "%s", id);
}

static int cg_write(int dfd, const char *file, const char *v)
{
	int fd = openat(dfd, file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, v, strlen(v));
	int e = errno;
	close(fd);
	errno = e;
	return w == (ssize_t)strlen(v) ? 0 : -1;
}

/* Is the worker (the agent's fork) in the root group? Not when the pod
 * has a pids limit: then the agent is in PIDS_CG's leaf and every command
 * under PIDS_CG, and a group outside it would take the container out of
 * the pod's count. */
static bool in_root_cgroup(void)
{
	char buf[256];
	int fd = openat(guest_proc_fd(), "self/cgroup", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	return !strcmp(buf, "0::/\n");
}

/* Enable a controller ("+cpu") for the container's group: in the root's
 * subtree_control, then the pids group's (pids < 0: the group is the
 * root's child); a no-op where it is. false with errno. */
static bool cg_enable(int root, int pids, const char *ctrl)
{
	return root >= 0 && cg_write(root, "cgroup.subtree_control", ctrl) == 0 &&
	       (pids < 0 || cg_write(pids, "cgroup.subtree_control", ctrl) == 0);
}

/* init with a memory or CPU limit: the group made afresh (a stale one of
 * an earlier container of this id would carry its memory.events),
 * memory.max written, no swap (memory.swap.max, where the kernel has swap
 * accounting), cpu.max "$QUOTA $PERIOD" (cgroup-v2.rst "cpu.max"; the
 * quota alone keeps the new group's period, the kernel's default); the
 * command joins it from its child (confine.c, before its cgroup namespace
 * is made: the group is that namespace's root, which it then mounts at
 * its /sys/fs/cgroup, read-only). Each controller is enabled only where
 * a limit asks for it, down the path: the root's subtree_control, then
 * the pids group's. */
static int ctr_cg_make(const struct kis_exec_req *req, struct kis_pod_exec *pe, char *msg,
		       size_t n)
{
	char p[300], v[64];
	bool mem = req->ctr_memory_max > 0, cpu = req->ctr_cpu_quota_us > 0;
	if (!mem && !cpu)
		return 0;
	bool top = in_root_cgroup();
	ctr_cg_path(req->ctr_id, top ? "/sys/fs/cgroup" : CTR_PIDS_CG, p, sizeof(p));
	(void)rmdir(p);
	int root = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int pids = top ? -1 : open(CTR_PIDS_CG, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *ctrl = NULL; /* the controller that could not be enabled */
	bool ok = root >= 0 && (top || pids >= 0);
	if (ok && mem && !cg_enable(root, pids, "+memory"))
		ctrl = "memory";
	else if (ok && cpu && !cg_enable(root, pids, "+cpu"))
		ctrl = "cpu";
	ok = ok && !ctrl && mkdir(p, 0755) == 0;
	int e = errno;
	if (root >= 0)
		close(root);
	if (pids >= 0)
		close(pids);
	if (!ok) {
		/* cgroup-v2.rst: ENOENT, the guest kernel has no such
		 * controller; EINVAL for cpu, a realtime process outside the
		 * root group */
		snprintf(msg, n, "container: cannot make its cgroup '%s'%s%s: %s", p,
			 ctrl ? " with the controller " : "", ctrl ? ctrl : "", strerror(e));
		return -1;
	}
	pe->cg_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pe->cg_fd < 0) {
		snprintf(msg, n, "container: cannot open its cgroup '%s': %s", p, strerror(errno));
		return -1;
	}
	if (mem) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)req->ctr_memory_max);
		if (cg_write(pe->cg_fd, "memory.max", v) < 0 ||
		    (faccessat(pe->cg_fd, "memory.swap.max", F_OK, 0) == 0 &&
		     cg_write(pe->cg_fd, "memory.swap.max", "0") < 0)) {
			snprintf(msg, n, "container: cannot set its memory.max %s: %s", v,
				 strerror(errno));
			return -1;
		}
	}
	if (cpu) {
		if (req->ctr_cpu_period_us)
			snprintf(v, sizeof(v), "%llu %llu", (unsigned long long)req->ctr_cpu_quota_us,
				 (unsigned long long)req->ctr_cpu_period_us);
		else
			snprintf(v, sizeof(v), "%llu", (unsigned long long)req->ctr_cpu_quota_us);
		/* no cpu.max in a group with the cpu controller: a kernel
		 * without CONFIG_CFS_BANDWIDTH, which cannot bound a quota */
		if (cg_write(pe->cg_fd, "cpu.max", v) < 0) {
			int ce = errno;
			snprintf(msg, n, "container: cannot set its cpu.max '%s': %s%s", v,
				 strerror(ce),
				 ce == ENOENT ? " (the guest kernel has no CFS bandwidth control, "
						"CONFIG_CFS_BANDWIDTH)"
					      : "");
			return -1;
		}
	}
	if ((pe->cg_procs_fd = openat(pe->cg_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC)) < 0) {
		snprintf(msg, n, "container: cannot open its cgroup.procs: %s", strerror(errno));
		return -1;
	}
	pe->mount_cgroup = true;
	return 0;
}

uint64_t kis_pod_oom_kills(const struct kis_pod_exec *pe)
{
	char buf[512];
	if (pe->cg_fd < 0)
		return 0;
	int fd = openat(pe->cg_fd, "memory.events", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	/* cgroup-v2.rst: "oom_kill": processes of the group the OOM killer
	 * ended; "oom_group_kill" is another line, hence the line start */
	for (char *s = buf; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
		if (!strncmp(s, "oom_kill ", 9))
			return strtoull(s + 9, NULL, 10);
	return 0;
}

/* The start time of pid (proc(5) /proc/<pid>/stat field 22) in the
 * guest's /proc at proc_fd; 0 when it is gone. */
static unsigned long long proc_start(int proc_fd, pid_t pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "%d/stat", (int)pid);
	int fd = openat(proc_fd, p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return 0;
	buf[k] = '\0';
	/* after the command's name, which may hold spaces: field 22 */
	char *s = strrchr(buf, ')');
	unsigned long long v = 0;
	for (int f = 2; s && *s; s++)
		if (*s == ' ' && ++f == 22) {
			v = strtoull(s + 1, NULL, 10);
			break;
		}
	return v;
}

/* The container's init, as recorded and still the same process; 0 none. */
static pid_t ctr_init(const char *id)
{
	char dir[256], p[300], buf[64];
	ctr_paths(id, dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/init", dir);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	int pid = 0;
	unsigned long long st = 0;
	if (sscanf(buf, "%d %llu", &pid, &st) != 2 || pid <= 1 || !st ||
	    proc_start(AT_FDCWD_PROC, pid) != st)
		return 0;
	return (pid_t)pid;
}

static int ids_mkdir(const char *p, mode_t m)
{
	/* on the idmapped writable disk, as the sandbox's root: uid 0 has no
	 * id there (EOVERFLOW) */
	if (kis_as_ids_root((uid_t)KIS_GUEST_UID) < 0) {
		kis_ids_root_end();
		return -1;
	}
	int r = mkdir(p, m) < 0 && errno != EEXIST ? -1 : 0;
	int e = errno;
	kis_ids_root_end();
	errno = e;
	return r;
}

/* a file or directory at path in the container's root, made as its root */
static int ids_make(const char *p, bool dir)
{
	struct stat st;
	if (lstat(p, &st) == 0)
		return (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) ? 0 : -1;
	if (dir)
		return ids_mkdir(p, 0755);
	if (kis_as_ids_root((uid_t)KIS_GUEST_UID) < 0) {
		kis_ids_root_end();
		return -1;
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	int e = errno;
	kis_ids_root_end();
	if (fd >= 0)
		close(fd);
	errno = e;
	return fd < 0 ? -1 : 0;
}

/* /dev of the container: a tmpfs of its own with the usual nodes (the
 * guest's devices, major:minor as the kernel numbers them), the guest's
 * pts and a shm of its own. */
static int make_dev(const char *root)
{
	char d[512], p[600];
	snprintf(d, sizeof(d), "%s/dev", root);
	if (ids_make(d, true) < 0 ||
	    mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536k") < 0)
		return -1;
	static const struct {
		const char *name;
		unsigned ma, mi;
	} nodes[] = {{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7},
		     {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		snprintf(p, sizeof(p), "%s/%s", d, nodes[i].name);
		if (mknod(p, S_IFCHR | 0666, makedev(nodes[i].ma, nodes[i].mi)) < 0 ||
		    chmod(p, 0666) < 0)
			return -1;
	}
	snprintf(p, sizeof(p), "%s/pts", d);
	if (mkdir(p, 0755) < 0 || mount("/dev/pts", p, NULL, MS_BIND, NULL) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/ptmx", d);
	if (symlink("pts/ptmx", p) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/shm", d);
	if (mkdir(p, 01777) < 0 || mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
		return -1;
	static const char *const links[][2] = {{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		snprintf(p, sizeof(p), "%s/%s", d, links[i][1]);
		if (symlink(links[i][0], p) < 0)
			return -1;
	}
	return 0;
}

static int ctr_init_setup(const struct kis_exec_req *req, struct kis_pod_exec *pe, char *msg,
			  size_t n)
{
	char dir[256], p[512], root[300], lower[300], stage[300], dev[32], serial[24];
	ctr_paths(req->ctr_id, dir, sizeof(dir));
	if (req->ctr_slot >= KIS_POD_SLOTS) {
		snprintf(msg, n, "container: no mount slot %d", req->ctr_slot);
		return -1;
	}
	if (ctr_init(req->ctr_id) > 0) {
		snprintf(msg, n, "container '%s' is running already", req->ctr_id);
		return -1;
	}
	if (req->ctr_hostname && sethostname(req->ctr_hostname, strlen(req->ctr_hostname)) < 0) {
		snprintf(msg, n, "container: cannot set the pod's hostname: %s", strerror(errno));
		return -1;
	}
	snprintf(serial, sizeof(serial), "kis-m%dl", req->ctr_slot);
	if (disk_by_serial(serial, dev, sizeof(dev)) < 0) {
		snprintf(msg, n, "container: the disk of slot %d is not there", req->ctr_slot);
		return -1;
	}
	if (ctr_cg_make(req, pe, msg, n) < 0)
		return -1;
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(lower, sizeof(lower), "%s/lower", dir);
	snprintf(stage, sizeof(stage), "%s/stage", dir);
	if ((mkdir(CTR_RUN, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(root, 0755) < 0 && errno != EEXIST) || (mkdir(lower, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(stage, 0700) < 0 && errno != EEXIST)) {
		snprintf(msg, n, "container: cannot make '%s': %s", dir, strerror(errno));
		return -1;
	}
	pe->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pe->proc_fd = fcntl(guest_proc_fd(), F_DUPFD_CLOEXEC, 3);
	/* the upper layer on the writable disk, beside the workspace's */
	char rw[300], up[560], wk[560];
	snprintf(rw, sizeof(rw), "%s/rw/c", guest_layers);
	snprintf(p, sizeof(p), "%s/%s", rw, req->ctr_id);
	snprintf(up, sizeof(up), "%s/upper", p);
	snprintf(wk, sizeof(wk), "%s/work", p);
	if (pe->dir_fd < 0 || ids_mkdir(rw, 0700) < 0 || ids_mkdir(p, 0700) < 0 ||
	    ids_mkdir(up, 0755) < 0 || ids_mkdir(wk, 0700) < 0) {
		snprintf(msg, n, "container: cannot make its upper layer: %s", strerror(errno));
		return -1;
	}
	/* mount_namespaces(7): a copy of the guest's, nothing propagating
	 * back: the container's mounts are its own */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		snprintf(msg, n, "container: cannot make its mount namespace: %s", strerror(errno));
		return -1;
	}
	/* the slot's image was swapped under the guest (QMP blockdev-reopen):
	 * blocks of the one before may be in the page cache (the boot's
	 * partition scan read the placeholder); drop them when no mount of
	 * the device is left (O_EXCL on a block device fails EBUSY while it is
	 * mounted, and a mounted one is this pod's same image) */
	int bfd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (bfd >= 0) {
		ioctl(bfd, BLKFLSBUF, 0);
		close(bfd);
	}
	unsigned long fl = MS_NOSUID | MS_NODEV;
	if (mount(dev, stage, "ext4", fl | MS_RDONLY, NULL) < 0 ||
	    kis_idmap_bind(stage, lower, guest_userns_fd) < 0) {
		snprintf(msg, n, "container: cannot mount its image (slot %d): %s", req->ctr_slot,
			 strerror(errno));
		return -1;
	}
	umount2(stage, MNT_DETACH);
	/* Documentation/filesystems/overlayfs.rst, as the workspace's (guest.c
	 * mount_overlay): mounted as the sandbox's root, whose ids the idmapped
	 * layers have */
	char opts[2048];
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=off,index=off,metacopy=off,"
		 "xino=off", lower, up, wk);
	if (kis_as_ids_root((uid_t)KIS_GUEST_UID) < 0) {
		kis_ids_root_end();
		snprintf(msg, n, "container: cannot take the sandbox's ids: %s", strerror(errno));
		return -1;
	}
	int r = mount("overlay", root, "overlay", fl, opts);
	int e = errno;
	kis_ids_root_end();
	if (r < 0) {
		snprintf(msg, n, "container: cannot mount its root: %s", strerror(e));
		return -1;
	}
	/* the kernel's filesystems and the pod's files */
	snprintf(p, sizeof(p), "%s/sys", root);
	if (ids_make(p, true) < 0 ||
	    mount("sysfs", p, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		snprintf(msg, n, "container: cannot mount /sys: %s", strerror(errno));
		return -1;
	}
	snprintf(p, sizeof(p), "%s/proc", root);
	if (ids_make(p, true) < 0 || make_dev(root) < 0) {
		snprintf(msg, n, "container: cannot make /proc or /dev: %s", strerror(errno));
		return -1;
	}
	snprintf(p, sizeof(p), "%s/tmp", root);
	ids_make(p, true);
	/* the pod's file binds, as the pod's root has them (copied there at
	 * the sandbox's create): read-only binds of those */
	static const char *const files[] = {"hosts", "hostname", "resolv.conf"};
	snprintf(p, sizeof(p), "%s/etc", root);
	ids_make(p, true);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char src[64], dst[400];
		int sfd = openat(pe->pod_root_fd, files[i], O_PATH | O_CLOEXEC | O_NOFOLLOW);
		if (sfd < 0)
			continue;
		snprintf(src, sizeof(src), "/proc/self/fd/%d", sfd);
		snprintf(dst, sizeof(dst), "%s/etc/%s", root, files[i]);
		struct stat st;
		int ok = fstat(sfd, &st) == 0 && S_ISREG(st.st_mode) && ids_make(dst, false) == 0 &&
			 mount(src, dst, NULL, MS_BIND, NULL) == 0;
		if (ok)
			mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
			      NULL);
		close(sfd);
	}
	/* the root moved over "/" and entered (as switch_root does): the
	 * guest's root is the initramfs's rootfs, which pivot_root(2) cannot
	 * put away (EINVAL); the guest's tree stays under the new root, in
	 * this namespace only, reachable by no path, and the commands have no
	 * CAP_SYS_CHROOT to climb out of a chroot */
	if (chdir(root) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
	    chdir("/") < 0) {
		snprintf(msg, n, "container: cannot enter its root: %s", strerror(errno));
		return -1;
	}
	/* pid_namespaces(7): the next child is pid 1 of a namespace of its
	 * own; it mounts its /proc (kis_pod_child) */
	if (unshare(CLONE_NEWPID) < 0) {
		snprintf(msg, n, "container: cannot make its pid namespace: %s", strerror(errno));
		return -1;
	}
	pe->mount_proc = true;
	return 0;
}

static int ctr_join(const struct kis_exec_req *req, struct kis_pod_exec *pe, char *msg, size_t n)
{
	/* the host's start returns once the container's process is told to
	 * go, before its init has been made here: an exec right after it
	 * (CRI's ExecSync after StartContainer) waits for that, a bounded time */
	pid_t pid = ctr_init(req->ctr_id);
	for (uint64_t end = kis_monotonic_ms() + CTR_JOIN_WAIT_MS;
	     pid <= 0 && kis_monotonic_ms() < end; pid = ctr_init(req->ctr_id))
		usleep(20000);
	if (pid <= 0) {
		snprintf(msg, n, "container '%s' is not running", req->ctr_id);
		return -1;
	}
	char p[300];
	ctr_cg_path(req->ctr_id, NULL, p, sizeof(p));
	strncat(p, "/cgroup.procs", sizeof(p) - strlen(p) - 1);
	int cg_procs = open(p, O_WRONLY | O_CLOEXEC);
	if (cg_procs < 0 && errno != ENOENT) {
		snprintf(msg, n, "container '%s': cannot open its cgroup: %s", req->ctr_id,
			 strerror(errno));
		return -1;
	}
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
	int mfd = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)pid);
	int pfd = open(p, O_RDONLY | O_CLOEXEC);
	/* opened, then checked again: still that process (not a reused pid) */
	int r = mfd >= 0 && pfd >= 0 && ctr_init(req->ctr_id) == pid &&
		setns(mfd, CLONE_NEWNS) == 0 && setns(pfd, CLONE_NEWPID) == 0 ? 0 : -1;
	int e = errno;
	if (mfd >= 0)
		close(mfd);
	if (pfd >= 0)
		close(pfd);
	if (r < 0 && cg_procs >= 0)
		close(cg_procs);
	if (r < 0) {
		snprintf(msg, n, "container '%s': cannot join its namespaces: %s", req->ctr_id,
			 strerror(e));
		return r;
	}
	/* its group, if it has one: an exec counts in the container's
	 * memory and CPU bounds as runc puts an exec'd process in the
	 * container's cgroup (opened before: the guest's /sys/fs/cgroup is
	 * in the mount namespace left) */
	pe->cg_procs_fd = cg_procs;
	return 0;
}

static int ctr_remove(const struct kis_exec_req *req, char *msg, size_t n)
{
	pid_t pid = ctr_init(req->ctr_id);
	if (pid > 0)
		kill(pid, SIGKILL);
	uint64_t end = kis_monotonic_ms() + CTR_WAIT_MS;
	while (pid > 0 && ctr_init(req->ctr_id) == pid && kis_monotonic_ms() < end)
		usleep(10000);
	char dir[256], p[512];
	/* its group, once its last process is gone (rmdir(2) of a
	 * populated group is EBUSY; the pid namespace's end kills the rest) */
	ctr_cg_path(req->ctr_id, NULL, p, sizeof(p));
	while (rmdir(p) < 0 && errno == EBUSY && kis_monotonic_ms() < end)
		usleep(10000);
	ctr_paths(req->ctr_id, dir, sizeof(dir));
	int rfd = open("/run", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd >= 0) {
		int cfd = openat(rfd, "kis-ctr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cfd >= 0) {
			kis_tree_remove_quiet(cfd, req->ctr_id);
			close(cfd);
		}
		close(rfd);
	}
	snprintf(p, sizeof(p), "%s/rw/c", guest_layers);
	int lfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct kis_error *err = NULL;
	int r = 0;
	if (lfd >= 0) {
		r = kis_tree_remove(lfd, req->ctr_id, &err);
		close(lfd);
	}
	if (r < 0) {
		snprintf(msg, n, "container '%s': cannot remove its upper layer: %s", req->ctr_id,
			 err && err->message ? err->message : "");
		kis_error_free(err);
		return -1;
	}
	if (!req->ctr_free_slot)
		return 0;
	char serial[24], dev[32];
	snprintf(serial, sizeof(serial), "kis-m%dl", req->ctr_slot);
	if (disk_by_serial(serial, dev, sizeof(dev)) < 0)
		return 0;
	for (;;) {
		int bfd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
		if (bfd >= 0) {
			ioctl(bfd, BLKFLSBUF, 0);
			close(bfd);
			return 0;
		}
		if (errno != EBUSY || kis_monotonic_ms() >= end) {
			snprintf(msg, n, "container '%s': slot %d's disk is still mounted in the guest",
				 req->ctr_id, req->ctr_slot);
			return -1;
		}
		usleep(20000);
	}
}

int kis_pod_exec_prepare(const struct kis_exec_req *req, struct kis_pod_exec *pe, char *msg,
			 size_t n)
{
	memset(pe, 0, sizeof(*pe));
	pe->dir_fd = pe->pod_root_fd = pe->proc_fd = pe->cg_procs_fd = pe->cg_fd = -1;
	if (req->ctr_op == KIS_CTR_NONE)
		return 0;
	/* the pod's root (the chroot) before we leave it: its /etc's files */
	pe->pod_root_fd = open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (to_guest_root(msg, n) < 0)
		return -1;
	switch (req->ctr_op) {
	case KIS_CTR_INIT:
		return ctr_init_setup(req, pe, msg, n);
	case KIS_CTR_JOIN:
		return ctr_join(req, pe, msg, n);
	case KIS_CTR_REMOVE:
		pe->done = true;
		return ctr_remove(req, msg, n);
	case KIS_CTR_NONE:
	default:
		return 0;
	}
}

void kis_pod_exec_started(struct kis_pod_exec *pe, pid_t pid)
{
	if (pe->dir_fd < 0 || pid <= 0)
		return;
	char buf[64];
	/* the worker's root is the container's now: the guest's /proc and
	 * the record through fds taken before */
	unsigned long long st = proc_start(pe->proc_fd, pid);
	snprintf(buf, sizeof(buf), "%d %llu\n", (int)pid, st);
	int fd = openat(pe->dir_fd, "init", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
			0600);
	if (fd >= 0) {
		(void)!write(fd, buf, strlen(buf));
		close(fd);
	}
}

void kis_pod_exec_release(struct kis_pod_exec *pe)
{
	kis_closep(&pe->dir_fd);
	kis_closep(&pe->pod_root_fd);
	kis_closep(&pe->proc_fd);
	kis_closep(&pe->cg_procs_fd);
	kis_closep(&pe->cg_fd);
}

int kis_pod_child(const struct kis_pod_exec *pe)
{
	/* pid 1 of the container's pid namespace: its /proc (proc(5): a
	 * mount shows the mounter's pid namespace) */
	if (pe->mount_proc &&
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -1;
	return 0;
}
