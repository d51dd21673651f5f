/* SPDX-License-Identifier: MIT */
/* The overlay mount of a workspace (fd layers, else /proc/self/fd paths;
 * userxattr in a user namespace) and the mount-point test: what the
 * workspace, its view (view.c) and its disk image (disk.c) all need. */
#include "store_internal.h"
#include "core/test_hook.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

/* Upper on another filesystem than lower (a disk image, src/store/disk.c):
 * without xino, overlayfs gives a merged directory's entries d_ino values
 * that are not their st_ino (Documentation/filesystems/overlayfs.rst,
 * "Inode properties"; WASI's fd_readdir test caught it). xino=on keeps one
 * inode number space across the layers, in the high bits ext4's 32-bit
 * inode numbers leave free. */
static bool xino_wanted(int lower_fd, int upper_fd)
{
	struct stat l, u;
	return fstat(lower_fd, &l) == 0 && fstat(upper_fd, &u) == 0 && l.st_dev != u.st_dev;
}

/* The new mount API with the layers given as fds (overlayfs takes
 * FSCONFIG_SET_FD for lowerdir+, upperdir and workdir since Linux 6.13):
 * nothing is looked up by name, and mountinfo shows the real paths.
 * Returns 0, or -1 with errno; ENOSYS/EINVAL mean "not on this kernel". */
static int overlay_mount_fds(int lower_fd, int upper_fd, int work_fd, int target_fd,
			     bool userxattr)
{
	_cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	if (fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lower_fd) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, upper_fd) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, work_fd) < 0)
		return -1;
	if (userxattr && fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
		return -1;
	if (xino_wanted(lower_fd, upper_fd) && fsconfig(fs, FSCONFIG_SET_STRING, "xino", "on", 0) < 0)
		return -1;
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -1;
	/* nosuid, nodev: a workspace is data, not a place to gain privilege
	 * from; the base may be an OS image, so exec stays. */
	_cleanup_close_ int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return -1;
	return move_mount(mnt, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

/* mount(2) with the layers named through /proc/self/fd: overlayfs resolves
 * each option path with a lookup that would follow a symlink, and the
 * magic link pins the exact directories we opened O_NOFOLLOW. It also
 * keeps ',' and ':' of the store path out of the options. */
static int overlay_mount_legacy(int lower_fd, int upper_fd, int work_fd, int target_fd,
				bool userxattr)
{
	char opts[256], target[64];
	snprintf(opts, sizeof(opts),
		 "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d%s%s",
		 lower_fd, upper_fd, work_fd, userxattr ? ",userxattr" : "",
		 xino_wanted(lower_fd, upper_fd) ? ",xino=on" : "");
	snprintf(target, sizeof(target), "/proc/self/fd/%d", target_fd);
	return mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts);
}

static int overlay_mount_once(int lower_fd, int upper_fd, int work_fd, int target_fd,
			      bool userxattr)
{
	static int fd_api = 1; /* cleared once the kernel refuses fd layers */
	/* Test hook: exercise the fallback on a kernel that has both. */
	const char *legacy = KIS_TEST_GETENV("KIS_TEST_OVERLAY_LEGACY");
	if (legacy && *legacy == '1')
		__atomic_store_n(&fd_api, 0, __ATOMIC_RELAXED);
	if (__atomic_load_n(&fd_api, __ATOMIC_RELAXED)) {
		if (overlay_mount_fds(lower_fd, upper_fd, work_fd, target_fd, userxattr) == 0)
			return 0;
		if (errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
			return -1;
		__atomic_store_n(&fd_api, 0, __ATOMIC_RELAXED);
	}
	return overlay_mount_legacy(lower_fd, upper_fd, work_fd, target_fd, userxattr);
}

int store_overlay_mount(int lower_fd, int upper_fd, int work_fd, int target_fd,
			struct kis_error **err)
{
	int r = overlay_mount_once(lower_fd, upper_fd, work_fd, target_fd, false);
	if (r < 0 && (errno == EPERM || errno == EINVAL)) {
		/* In a user namespace (kernel >= 5.11) overlayfs may be
		 * mounted but cannot write trusted.* xattrs: "userxattr"
		 * keeps its metadata in user.overlay.* instead. */
		int saved = errno;
		r = overlay_mount_once(lower_fd, upper_fd, work_fd, target_fd, true);
		if (r < 0)
			errno = saved;
	}
	if (r < 0) {
		/* Refused (no privilege, no overlayfs, a store filesystem it
		 * cannot stack on): the strategy cannot work here. */
		bool refused = errno == EPERM || errno == EACCES || errno == EINVAL ||
			       errno == ENODEV || errno == EOPNOTSUPP;
		return kis_error_set(err, refused ? KIS_E_PROFILE_UNSATISFIABLE : KIS_E_INTERNAL, errno,
				     "cannot mount the overlay of a workspace%s",
				     refused ? "; overlay clones need root or a user namespace and a "
					       "store overlayfs can stack on, use --strategy copy"
					     : "");
	}
	return 0;
}

bool store_is_mountpoint(int dirfd, const char *name)
{
	struct statx stx;
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &stx) < 0)
		return false;
	if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
		return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	struct stat parent;
	return fstat(dirfd, &parent) == 0 &&
	       makedev(stx.stx_dev_major, stx.stx_dev_minor) != parent.st_dev;
}
