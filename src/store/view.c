/* SPDX-License-Identifier: MIT */
/* Rootless overlay workspaces (issue 17): the overlay of a workspace held
 * mounted by a small holder process in a user and mount namespace of the
 * caller's own, and reached from the host through /proc/PID/root.
 *
 * Why. An ordinary user may mount overlayfs only inside a user namespace it
 * owns (Linux 5.11, FS_USERNS_MOUNT with "userxattr"), and a mount there is
 * invisible in the host's mount namespace. FUSE (fuse-overlayfs) would put
 * the view on the host, but needs /dev/fuse open to the user, which this
 * kind of host does not give (mode 0600); reflinks need btrfs or xfs (the
 * store's ext4 has none: they are used where present, before this). So a
 * clone stays O(1): upper/ and work/ made, the overlay mounted in a fresh
 * namespace by a holder (`sleep infinity`, exec'd after the mount), and
 * `workspace path` names merged/ through the holder's root,
 * /proc/PID/root/STORE/workspaces/ID/merged: path resolution through that
 * magic link continues in the holder's mount namespace (proc(5)), which
 * the same user may enter (ptrace access mode read: same uid, dumpable).
 *
 * The holder's pid and start time are in workspaces/ID/view ("PID START"),
 * so a pid reused after the holder died is never taken for it. Refresh
 * (after a sandbox wrote the upper layer through its own overlay) remounts
 * in the holder's namespaces, joined by setns(2), so the path stays; destroy
 * kills the holder (pidfd) before the tree goes. Root never comes here: its
 * overlay is mounted on merged/ in the host namespace (workspace.c). */
#include "store_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/openat2.h>

#include "confine/confine.h"
#include "exec/exec.h"

/* The holder's setup, in the child between fork and exec. */
struct view_child {
	char lower[PATH_MAX], dir[PATH_MAX];
	uid_t uid;
	gid_t gid;
	bool join; /* refresh: join the holder's namespaces instead of making new ones */
	int userns_fd, mntns_fd;
};

static int open_strict(const char *path)
{
	/* the store root is canonical (realpath at open): no link anywhere on
	 * the way, so nothing planted in the store moves a layer elsewhere */
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
}

/* Mount the overlay of c on c->dir/merged, in the current namespaces. */
static int mount_view(const struct view_child *c, struct kis_error **err)
{
	_cleanup_close_ int lo = open_strict(c->lower);
	_cleanup_close_ int d = lo < 0 ? -1 : open_strict(c->dir);
	if (d < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the workspace's layers");
	_cleanup_close_ int up = store_opendir(d, "upper");
	_cleanup_close_ int wk = store_opendir(d, "work");
	_cleanup_close_ int mg = store_opendir(d, "merged");
	if (up < 0 || wk < 0 || mg < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the workspace is damaged; destroy it");
	return store_overlay_mount(lo, up, wk, mg, err);
}

static int view_setup(void *ctx, struct kis_error **err)
{
	struct view_child *c = ctx;
	if (c->join) {
		if (setns(c->userns_fd, CLONE_NEWUSER) < 0 || setns(c->mntns_fd, CLONE_NEWNS) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot join the workspace view's namespaces");
		char m[PATH_MAX + 8];
		snprintf(m, sizeof(m), "%s/merged", c->dir);
		/* MNT_DETACH: a reader inside keeps the old one until it leaves */
		if (umount2(m, UMOUNT_NOFOLLOW | MNT_DETACH) < 0 && errno != EINVAL)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot unmount the old view");
		return mount_view(c, err);
	}
	if (kis_userns_own(c->uid, c->gid) < 0)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, errno,
				     "overlay clones as an ordinary user need unprivileged user "
				     "namespaces (user.max_user_namespaces); use --strategy copy");
	if (kis_idmap_private_ns() < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make a mount namespace");
	return mount_view(c, err);
}

/* /proc/PID/stat field 22, the start time in clock ticks since boot. */
static int proc_start(pid_t pid, unsigned long long *out)
{
	char path[40], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* comm may hold spaces */
	if (!p)
		return -1;
	p++;
	for (int field = 3; field < 22 && p; field++) /* p: the space before field 3 */
		p = strchr(p + 1, ' ');
	return p && sscanf(p, " %llu", out) == 1 ? 0 : -1;
}

/* The live holder recorded in the workspace d, or 0. */
static pid_t view_holder(int d)
{
	_cleanup_free_ char *txt = NULL;
	if (store_read_file(d, "view", &txt, NULL) < 0)
		return 0;
	int pid = 0;
	unsigned long long start = 0, now = 0;
	if (sscanf(txt, "%d %llu", &pid, &start) != 2 || pid <= 1)
		return 0;
	if (proc_start(pid, &now) < 0 || now != start)
		return 0;
	/* ours: the same user (the store is the caller's) */
	char path[40];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (stat(path, &st) < 0 || st.st_uid != geteuid())
		return 0;
	return pid;
}

static int fill_child(struct kis_store *s, int d, const char *id, struct view_child *c,
		      struct kis_error **err)
{
	char base[KIS_ID_BUFSZ];
	TRY(store_ws_meta(d, base, NULL, err));
	*c = (struct view_child){.uid = getuid(), .gid = getgid(), .userns_fd = -1, .mntns_fd = -1};
	if ((size_t)snprintf(c->lower, sizeof(c->lower), "%s/bases/%s/tree", s->root, base) >=
		    sizeof(c->lower) ||
	    (size_t)snprintf(c->dir, sizeof(c->dir), "%s/workspaces/%s", s->root, id) >=
		    sizeof(c->dir))
		return kis_error_set(err, KIS_E_INTERNAL, ENAMETOOLONG, "store path too long");
	return 0;
}

int store_view_start(struct kis_store *s, int d, const char *id, struct kis_error **err)
{
	struct view_child c;
	TRY(fill_child(s, d, id, &c, err));
	/* a temporary directory being built: its name, not the final id */
	static char *const argv[] = {"/usr/bin/sleep", "infinity", NULL};
	static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct kis_spawn sp = {.argv = argv, .envp = envp, .cwd = "/", .stdin_fd = -1,
			       .child_setup = view_setup, .child_ctx = &c};
	pid_t pid = 0;
	TRY(kis_spawn_detached(&sp, &pid, err));
	unsigned long long start = 0;
	char txt[64];
	if (proc_start(pid, &start) < 0) {
		kill(pid, SIGKILL);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the workspace view ended at once");
	}
	snprintf(txt, sizeof(txt), "%d %llu\n", (int)pid, start);
	(void)unlinkat(d, "view", 0);
	if (store_write_file(d, "view", txt, err) < 0) {
		kill(pid, SIGKILL);
		return -1;
	}
	return 0;
}

int store_view_refresh(struct kis_store *s, int d, const char *id, struct kis_error **err)
{
	pid_t pid = view_holder(d);
	if (!pid)
		return store_view_start(s, d, id, err);
	struct view_child c;
	TRY(fill_child(s, d, id, &c, err));
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)pid);
	_cleanup_close_ int u = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
	_cleanup_close_ int m = open(p, O_RDONLY | O_CLOEXEC);
	if (u < 0 || m < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the view's namespaces");
	c.join = true;
	c.userns_fd = u;
	c.mntns_fd = m;
	/* a short-lived child does the remount there: `true` once it is done */
	static char *const argv[] = {"/usr/bin/true", NULL};
	static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct kis_spawn sp = {.argv = argv, .envp = envp, .cwd = "/", .stdin_fd = -1,
			       .child_setup = view_setup, .child_ctx = &c};
	pid_t child = 0;
	_cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	TRY(kis_spawn_start(&sp, null, null, &child, err));
	int status = 0;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

int store_view_path(struct kis_store *s, int d, const char *id, char **out,
		    struct kis_error **err)
{
	*out = NULL;
	pid_t pid = view_holder(d);
	if (!pid) {
		/* gone (a reboot, a kill): mount again, under the workspace's
		 * lock so that two callers do not start two holders */
		if (store_flock(d, LOCK_EX) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock workspace '%s'", id);
		int r = 0;
		if (!(pid = view_holder(d)) && (r = store_view_start(s, d, id, err)) == 0)
			pid = view_holder(d);
		(void)store_flock(d, LOCK_UN);
		TRY(r);
		if (!pid)
			return kis_error_set(err, KIS_E_INTERNAL, 0, "the view of workspace '%s' ended",
					     id);
	}
	if (asprintf(out, "/proc/%d/root%s/workspaces/%s/merged", (int)pid, s->root, id) < 0) {
		*out = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

void store_view_stop(int d)
{
	pid_t pid = view_holder(d);
	if (!pid)
		return;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return;
	/* checked again through the pidfd: the pid was live and ours */
	if (view_holder(d) == pid)
		(void)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
	close(pfd);
	(void)unlinkat(d, "view", 0);
}

bool store_view_wanted(void)
{
	return geteuid() != 0;
}

bool store_view_probe(struct kis_store *s, const char *name)
{
	/* the probe's own lower/, upper/, work/, merged/ under workspaces/name:
	 * mounted in a throwaway namespace by a child that then runs `true` */
	struct view_child c = {.uid = getuid(), .gid = getgid(), .userns_fd = -1, .mntns_fd = -1};
	if ((size_t)snprintf(c.dir, sizeof(c.dir), "%s/workspaces/%s", s->root, name) >=
		    sizeof(c.dir) ||
	    (size_t)snprintf(c.lower, sizeof(c.lower), "%s/lower", c.dir) >= sizeof(c.lower))
		return false;
	static char *const argv[] = {"/usr/bin/true", NULL};
	static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct kis_spawn sp = {.argv = argv, .envp = envp, .cwd = "/", .stdin_fd = -1,
			       .child_setup = view_setup, .child_ctx = &c};
	pid_t child = 0;
	struct kis_error *e = NULL;
	_cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (kis_spawn_start(&sp, null, null, &child, &e) < 0) {
		kis_error_free(e);
		return false;
	}
	int status = 0;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
