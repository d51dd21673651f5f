/* SPDX-License-Identifier: MIT */
/* The sandbox's own id range: a user namespace that maps the sandbox's ids
 * 0..65535 onto an unprivileged host range, and idmapped mounts that show a
 * workspace owned by that range.
 *
 * Why: a sandbox whose root is host uid 0 (bwrap's default `0 0 1` map when
 * the engine is root) passes every kernel check that asks only for the
 * global root uid with no capability: sysctl files (proc_sys_permission
 * compares the euid with GLOBAL_ROOT_UID), the owner's rights on the host's
 * device inodes bound into /dev, a setuid-root bit set on a file it owns in
 * a workspace, peers that trust SO_PEERCRED uid 0. Mapped onto a range of
 * its own, the sandbox's root is nobody on the host.
 *
 * The range: one block of 65536 ids per sandbox, picked from the sandbox id
 * in [KIS_IDS_FIRST, KIS_IDS_FIRST + KIS_IDS_BLOCKS * 65536), which lies
 * inside the range systemd reserves for containers (524288..1879048191,
 * systemd's UIDS-GIDS.md), so it is no user account's. */
#include "core/util.h"

#include <fcntl.h>
#include <sched.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>

#include "confine/confine.h"

uid_t kis_sandbox_ids(const char *sandbox_id)
{
	/* FNV-1a over the id: the ids are random, any spread is good enough;
	 * two live sandboxes in one block still have their own namespaces */
	uint32_t h = 2166136261u;
	for (const char *c = sandbox_id ? sandbox_id : ""; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	return (uid_t)(KIS_IDS_FIRST + (h % KIS_IDS_BLOCKS) * (uint64_t)KIS_IDS_COUNT);
}

static int write_file(pid_t pid, const char *name, const char *text)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	return write(fd, text, n) == (ssize_t)n ? 0 : -1;
}

/* The holder: a child that makes the namespace and waits until the parent
 * has written its maps and opened it (user_namespaces(7): the maps are
 * written once, from the parent namespace, by a process with CAP_SETUID
 * and CAP_SETGID there).
 *
 * It shares our memory (clone(2) CLONE_VM, on a stack in our frame) rather
 * than being a fork: a fork copies the engine's page tables and
 * write-protects every page of it, then the exit tears the copy down, 2 ms
 * in a PVM guest against 0.09 ms for this (docs/performance.md). What the
 * child does is raw system calls on its own stack: no allocation, no
 * glibc state (setresuid(3) of glibc would signal our threads to follow).
 * unshare(CLONE_NEWUSER) asks only that the caller be alone in its thread
 * group and fs (kernel/fork.c check_unshare_flags: it adds CLONE_THREAD and
 * CLONE_FS, not CLONE_VM), which a child without CLONE_THREAD and CLONE_FS
 * is. Its fd table and signal dispositions are its own copies; signals are
 * blocked around the clone so that no handler of ours runs on its stack.
 * Its change of credentials marks the shared mm not dumpable
 * (commit_creds: set_dumpable(mm, suid_dumpable)): restored afterwards. */
struct holder_arg {
	int fd, other;
	uid_t first;
	unsigned long flags; /* CLONE_NEWUSER, with CLONE_NEWNET: a network namespace it owns */
};

__attribute__((no_sanitize("address"))) static int holder(void *arg)
{
	const struct holder_arg *h = arg;
	char b;
	syscall(SYS_close, h->other);
	/* owned by the sandbox's first id, not by root: a process running as
	 * that id (bwrap) may then join it (setns(2) asks CAP_SYS_ADMIN in the
	 * target namespace, which its owner has). first (uid_t)-1: the
	 * caller's own ids, an ordinary user's (kis_userns_open_by) */
	if (h->first != (uid_t)-1 &&
	    (syscall(SYS_setgroups, 0, NULL) < 0 ||
	     syscall(SYS_setresgid, (gid_t)h->first, (gid_t)h->first, (gid_t)h->first) < 0 ||
	     syscall(SYS_setresuid, h->first, h->first, h->first) < 0))
		syscall(SYS_exit, 1);
	if (syscall(SYS_unshare, h->flags) < 0)
		syscall(SYS_exit, 1);
	(void)syscall(SYS_write, h->fd, "u", 1); /* ready */
	(void)syscall(SYS_read, h->fd, &b, 1);
	syscall(SYS_exit, 0);
	return 0;
}

/* How the holder's maps are written, by the parent, while it waits. */
struct map_writer {
	int (*write)(const struct map_writer *w, pid_t pid);
	uid_t first;
	uint32_t count;
	int (*by)(pid_t pid, void *arg);
	void *arg;
};

static int write_range(const struct map_writer *w, pid_t pid)
{
	char map[64];
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)w->first, (unsigned)w->count);
	return write_file(pid, "uid_map", map) < 0 || write_file(pid, "gid_map", map) < 0 ? -1 : 0;
}

static int write_by(const struct map_writer *w, pid_t pid)
{
	return w->by(pid, w->arg);
}

static int userns_holder(const struct map_writer *w, int *out, int *netns, int *e);

int kis_userns_open(uid_t first, uint32_t count, int *out, struct kis_error **err)
{
	struct map_writer w = {.write = write_range, .first = first, .count = count};
	int e = 0;
	if (userns_holder(&w, out, NULL, &e) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e,
				     "cannot make the sandbox's user namespace (ids %u..%u)",
				     (unsigned)first, (unsigned)(first + count - 1));
	return 0;
}

int kis_userns_open_net(uid_t first, uint32_t count, int *userns_fd, int *netns_fd,
			struct kis_error **err)
{
	struct map_writer w = {.write = write_range, .first = first, .count = count};
	int e = 0;
	if (userns_holder(&w, userns_fd, netns_fd, &e) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e,
				     "cannot make a network namespace owned by ids %u..%u",
				     (unsigned)first, (unsigned)(first + count - 1));
	return 0;
}

int kis_userns_open_by(int (*write_maps)(pid_t pid, void *arg), void *arg, int *out,
		       struct kis_error **err)
{
	struct map_writer w = {.write = write_by, .first = (uid_t)-1, .by = write_maps, .arg = arg};
	int e = 0;
	if (userns_holder(&w, out, NULL, &e) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot make a user namespace");
	return 0;
}

/* The holder made, its maps written by w, the namespace opened: *out
 * (and, when netns is not NULL, a network namespace it owns: *netns); -1
 * with the errno in *eout otherwise (the callers say what failed). */
static int userns_holder(const struct map_writer *w, int *out, int *netns, int *eout)
{
	uid_t first = w->first;
	*out = -1;
	if (netns)
		*netns = -1;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		*eout = errno;
		return -1;
	}
	/* one unshare: the network namespace is owned by the new user
	 * namespace (user_namespaces(7)) */
	struct holder_arg h = {.fd = sp[1], .other = sp[0], .first = first,
			       .flags = CLONE_NEWUSER | (netns ? CLONE_NEWNET : 0)};
	/* the holder's stack: raw system calls need little */
	_Alignas(16) char stack[16384];
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int dumpable = prctl(PR_GET_DUMPABLE);
	pid_t pid = clone(holder, stack + sizeof(stack), CLONE_VM | SIGCHLD, &h);
	int ce = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		*eout = ce;
		return -1;
	}
	int r = -1, e = 0;
	char b;
	if (RETRY_EINTR(read(sp[0], &b, 1)) != 1) {
		e = EPERM; /* the child could not unshare: user namespaces are off */
	} else if (w->write(w, pid) < 0) {
		e = errno;
	} else {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		*out = open(path, O_RDONLY | O_CLOEXEC);
		if (*out >= 0 && netns) {
			snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
			*netns = open(path, O_RDONLY | O_CLOEXEC);
		}
		if (*out < 0 || (netns && *netns < 0)) {
			e = errno;
			kis_closep(out);
			*out = -1;
		} else {
			r = 0;
		}
	}
	close(sp[0]); /* the holder reads EOF and exits; the namespace lives on in *out */
	/* the stack above is ours again only once the holder is gone */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (dumpable >= 0)
		(void)prctl(PR_SET_DUMPABLE, dumpable);
	*eout = e;
	return r;
}

/* Rootless (issue 17): the engine is an ordinary user and cannot map a
 * range it does not own. The calling child unshares a user namespace and
 * writes its own maps, one id each: the sandbox's root is the caller's uid
 * on the host, nothing more (user_namespaces(7): a process may map its own
 * euid in a namespace it created; gid_map needs setgroups "deny" first,
 * since Linux 3.19). No allocation: called between fork and exec. */
static int write_self(const char *name, const char *text)
{
	char path[40];
	snprintf(path, sizeof(path), "/proc/self/%s", name);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	int e = errno;
	close(fd);
	errno = e;
	return w == (ssize_t)n ? 0 : -1;
}

int kis_userns_map_self(uid_t in, uid_t out, gid_t gin, gid_t gout)
{
	char map[48];
	if (write_self("setgroups", "deny") < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)in, (unsigned)out);
	if (write_self("uid_map", map) < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gin, (unsigned)gout);
	return write_self("gid_map", map);
}

int kis_userns_own(uid_t uid, gid_t gid)
{
	if (unshare(CLONE_NEWUSER) < 0)
		return -1;
	return kis_userns_map_self(0, uid, 0, gid);
}

/* ---- idmapped mounts (mount_setattr(2), Linux 5.12) ---- */

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *a)
{
	return (int)syscall(SYS_mount_setattr, dfd, path, flags, a, sizeof(*a));
}

static int sys_move_mount(int from, const char *fp, int to, const char *tp, unsigned flags)
{
	return (int)syscall(SYS_move_mount, from, fp, to, tp, flags);
}

static int sys_fsopen(const char *fs, unsigned flags)
{
	return (int)syscall(SYS_fsopen, fs, flags);
}

static int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *val, int aux)
{
	return (int)syscall(SYS_fsconfig, fd, cmd, key, val, aux);
}

static int sys_fsmount(int fd, unsigned flags, unsigned attrs)
{
	return (int)syscall(SYS_fsmount, fd, flags, attrs);
}

/* The detached tree t (from open_tree, or < 0 with errno) made nosuid and
 * nodev, plus extra (MOUNT_ATTR_*), shown through userns_fd's map (-1: as
 * it is): t, or -1 with errno and t closed. */
static int tree_attrs(int t, int userns_fd, uint64_t extra)
{
	if (t < 0)
		return -1;
	struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | extra};
	if (userns_fd >= 0) {
		a.attr_set |= MOUNT_ATTR_IDMAP;
		a.userns_fd = (uint64_t)userns_fd;
	}
	if (sys_mount_setattr(t, "", AT_EMPTY_PATH, &a) < 0) {
		int e = errno;
		close(t);
		errno = e;
		return -1;
	}
	return t;
}

/* A detached copy of the mount at path, shown through userns_fd's map (-1:
 * as it is). Not recursive: mounts below (a workspace's merged overlay
 * under its directory) stay out, and an overlay among them could not be
 * idmapped. */
static int idmapped_tree(const char *path, int userns_fd)
{
	return tree_attrs(sys_open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
							       AT_SYMLINK_NOFOLLOW),
			  userns_fd, 0);
}

/* The strict variant for a mount's source: resolved with no symlink
 * anywhere (openat2(2) RESOLVE_NO_SYMLINKS), then cloned by fd. */
static int idmapped_source(const char *path, int userns_fd, bool ro)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd < 0)
		return -1;
	return tree_attrs(sys_open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH),
			  userns_fd, ro ? MOUNT_ATTR_RDONLY : 0);
}

/* Whether we run in a user namespace other than the initial one: the
 * initial namespace's map is the whole range, "0 0 4294967295"
 * (user_namespaces(7)). Raw reads: called between fork and exec. */
static bool in_child_userns(void)
{
	char b[64];
	int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return false;
	b[n] = '\0';
	unsigned long a = 1, c = 1, l = 0;
	return sscanf(b, "%lu %lu %lu", &a, &c, &l) != 3 || a != 0 || c != 0 || l != 4294967295ul;
}

/* In a user namespace other than the initial one overlayfs cannot write
 * trusted.* xattrs: "userxattr" keeps its metadata in user.overlay.*
 * (Documentation/filesystems/overlayfs.rst, "User xattr", Linux 5.11).
 * The engine as root mounts in the initial namespace: no flag, unchanged. */
static int rootless_xattr(int fs)
{
	if (!in_child_userns())
		return 0;
	return sys_fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0);
}

/* Layers on two filesystems (an upper layer on a workspace's disk image):
 * xino=on, so that readdir's d_ino of a merged directory's entries is their
 * st_ino (Documentation/filesystems/overlayfs.rst, "Inode properties"). */
static int xino_if_needed(int fs, int lower, int upper)
{
	struct stat l, u;
	if (fstat(lower, &l) < 0 || fstat(upper, &u) < 0 || l.st_dev == u.st_dev)
		return 0;
	return sys_fsconfig(fs, FSCONFIG_SET_STRING, "xino", "on", 0);
}

int kis_idmap_bind_source(const char *src, const char *target, int userns_fd, bool ro)
{
	_cleanup_close_ int t = idmapped_source(src, userns_fd, ro);
	if (t < 0)
		return -1;
	return sys_move_mount(t, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}

int kis_idmap_overlay_source(const char *lower, const char *ws_dir, const char *target,
			     int userns_fd, uid_t first, bool ro)
{
	_cleanup_close_ int lo = idmapped_source(lower, userns_fd, false);
	_cleanup_close_ int wsm = lo < 0 ? -1 : idmapped_source(ws_dir, userns_fd, false);
	if (wsm < 0)
		return -1;
	_cleanup_close_ int up = openat(wsm, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int wk = -1, fs = -1, m = -1;
	if (!ro)
		wk = openat(wsm, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0 || (!ro && wk < 0))
		return -1;
	fs = sys_fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0 || kis_as_ids_root(first) < 0)
		return -1;
	int r = -1;
	bool ok;
	if (ro) /* the first lower layer given is the top one */
		ok = sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, up) == 0 &&
		     sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lo) == 0;
	else
		ok = sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lo) == 0 &&
		     sys_fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, up) == 0 &&
		     sys_fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, wk) == 0;
	ok = ok && xino_if_needed(fs, lo, up) == 0;
	if (ok && rootless_xattr(fs) == 0 && sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		m = sys_fsmount(fs, FSMOUNT_CLOEXEC,
				MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (ro ? MOUNT_ATTR_RDONLY : 0));
	if (m >= 0)
		r = sys_move_mount(m, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
	int e = errno;
	kis_ids_root_end();
	errno = e;
	return r;
}

int kis_idmap_private_ns(void)
{
	/* a mount namespace of our own, and nothing of it propagates back to
	 * the host's (mount_namespaces(7): MS_PRIVATE on our copy only) */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	return 0;
}

int kis_stage_tmpfs(const char *dir)
{
	return mount("kis-stage", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		     "mode=0755,size=64k,nr_inodes=64");
}

int kis_idmap_bind(const char *src, const char *target, int userns_fd)
{
	_cleanup_close_ int t = idmapped_tree(src, userns_fd);
	if (t < 0)
		return -1;
	return sys_move_mount(t, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}

/* overlayfs works on its layers with the credentials of whoever mounted it
 * (ovl's creator_cred): through an idmapped upper layer, host uid 0 has no
 * on-disk id and creating work/work fails with EOVERFLOW. So mount as the
 * sandbox's root: fsuid and fsgid moved to first (the setfsuid(2) drops the
 * effective file capabilities, cap_task_fix_setuid), the effective set
 * raised again from the permitted one (capset(2)), so that copy-up still
 * reads what only an owner or CAP_DAC_OVERRIDE may. kis_ids_root_end goes
 * back to fsuid and fsgid 0. */
int kis_as_ids_root(uid_t first)
{
	return kis_as_ids(first, (gid_t)first);
}

int kis_as_ids(uid_t uid, gid_t gid)
{
	setfsuid(uid);
	setfsgid(gid);
	if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid)
		return -1;
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &hdr, d) < 0)
		return -1;
	d[0].effective = d[0].permitted;
	d[1].effective = d[1].permitted;
	return (int)syscall(SYS_capset, &hdr, d);
}

int kis_idmap_overlay(const char *lower, const char *ws_dir, const char *target, int userns_fd,
		      uid_t first)
{
	_cleanup_close_ int lo = idmapped_tree(lower, userns_fd);
	_cleanup_close_ int wsm = lo < 0 ? -1 : idmapped_tree(ws_dir, userns_fd);
	if (wsm < 0)
		return -1;
	_cleanup_close_ int up = openat(wsm, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int wk = openat(wsm, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int fs = up < 0 || wk < 0 ? -1 : sys_fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0 || kis_as_ids_root(first) < 0)
		return -1;
	if (sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lo) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, up) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, wk) < 0 || rootless_xattr(fs) < 0 ||
	    xino_if_needed(fs, lo, up) < 0 || sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -1;
	_cleanup_close_ int m = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (m < 0)
		return -1;
	int r = sys_move_mount(m, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
	int e = errno;
	kis_ids_root_end();
	errno = e;
	return r;
}

void kis_ids_root_end(void)
{
	setfsuid(0); /* execve(2) sets them from the euid anyway */
	setfsgid(0);
}

/* ---- a workspace shown to the host tier's sandbox user (issue 41) ---- */

/* One map of a swap: a and b trade places, every other id maps to itself.
 * A map line is "inside outside count" (user_namespaces(7)); through an
 * idmapped mount an on-disk id k is seen as the id that inside k maps to
 * (Documentation/filesystems/idmappings.rst), and the kernel takes at most
 * 340 lines (Linux 4.15), this needs at most five. The whole range is
 * mapped, so every on-disk id keeps a name: no file turns into the
 * overflow id, whose permission checks fail. */
static int swap_map(unsigned a, unsigned b, char *buf, size_t len)
{
	if (a > b) {
		unsigned t = a;
		a = b;
		b = t;
	}
	/* ids run 0..4294967294: (uid_t)-1 is no id */
	const unsigned long long end = 4294967295ull;
	if (a == b) /* nothing to trade (the gid already the user's) */
		return snprintf(buf, len, "0 0 %llu\n", end) < (int)len ? 0 : -1;
	int n = 0;
	if (a > 0)
		n += snprintf(buf + n, len - (size_t)n, "0 0 %u\n", a);
	n += snprintf(buf + n, len - (size_t)n, "%u %u 1\n", a, b);
	if (b > a + 1)
		n += snprintf(buf + n, len - (size_t)n, "%u %u %u\n", a + 1, a + 1, b - a - 1);
	n += snprintf(buf + n, len - (size_t)n, "%u %u 1\n", b, a);
	if ((unsigned long long)b + 1 < end)
		n += snprintf(buf + n, len - (size_t)n, "%u %u %llu\n", b + 1, b + 1,
			      end - b - 1);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

struct swap_ids {
	uid_t uid_a, uid_b;
	gid_t gid_a, gid_b;
};

static int write_swap(pid_t pid, void *arg)
{
	const struct swap_ids *w = arg;
	char map[256];
	if (swap_map(w->uid_a, w->uid_b, map, sizeof(map)) < 0 || write_file(pid, "uid_map", map) < 0)
		return -1;
	if (swap_map(w->gid_a, w->gid_b, map, sizeof(map)) < 0 || write_file(pid, "gid_map", map) < 0)
		return -1;
	return 0;
}

int kis_userns_swap_open(uid_t uid_a, uid_t uid_b, gid_t gid_a, gid_t gid_b, int *fd,
			 struct kis_error **err)
{
	if (uid_a == (uid_t)-1 || uid_b == (uid_t)-1 || gid_a == (gid_t)-1 || gid_b == (gid_t)-1)
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL, "an id swap needs valid ids");
	struct swap_ids w = {uid_a, uid_b, gid_a, gid_b};
	return kis_userns_open_by(write_swap, &w, fd, err);
}

int kis_idmap_view(const char *path, const char *lower, const char *ws_dir, int userns_fd,
		   uid_t uid, gid_t gid, int *out)
{
	*out = -1;
	if (!lower) {
		/* a plain directory (reflink, copy): a bind of it, idmapped;
		 * the same inodes, so a Landlock rule on either binds both */
		int t = idmapped_source(path, userns_fd, false);
		if (t < 0)
			return -1;
		*out = t;
		return 0;
	}
	/* overlayfs cannot itself be idmapped (no FS_ALLOW_IDMAP: mount_setattr
	 * fails with EINVAL): a new overlay over the workspace's layers, each
	 * an idmapped bind (Linux 5.19) */
	_cleanup_close_ int lo = idmapped_source(lower, userns_fd, false);
	_cleanup_close_ int wsm = lo < 0 ? -1 : idmapped_source(ws_dir, userns_fd, false);
	if (wsm < 0)
		return -1;
	_cleanup_close_ int up = openat(wsm, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int wk = openat(wsm, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int fs = up < 0 || wk < 0 ? -1 : sys_fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	/* overlayfs keeps its mounter's credentials for work on its layers
	 * (creator_cred): as the sandbox's user, whose writes the layers'
	 * map stores as the files' owner, work/ stays owned as it was */
	if (kis_as_ids(uid, gid) < 0) {
		int e = errno;
		kis_ids_root_end();
		errno = e;
		return -1;
	}
	int r = -1;
	if (sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lo) == 0 &&
	    sys_fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, up) == 0 &&
	    sys_fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, wk) == 0 &&
	    xino_if_needed(fs, lo, up) == 0 && sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0) {
		*out = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		r = *out >= 0 ? 0 : -1;
	}
	int e = errno;
	kis_ids_root_end();
	errno = e;
	return r;
}

int kis_idmap_view_enter(int view_fd, const char *target)
{
	/* a mount namespace of the command's own, every mount a slave of the
	 * host's (mount_namespaces(7)): what the host mounts later still shows,
	 * nothing mounted here goes back; then the view over the workspace */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return -1;
	return sys_move_mount(view_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}
