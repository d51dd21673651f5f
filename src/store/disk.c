/* SPDX-License-Identifier: MIT */
/* limits.disk_bytes where the store's filesystem keeps no project quotas: an
 * overlay workspace's writable layer on a filesystem of the limit's size.
 *
 * Theory (issue 41). A workspace gets ROOT/workspaces/<w>/disk.img, a sparse
 * ext4 image exactly disk_bytes long, copied (FICLONE, else its data extents
 * only) from a template made once per size by mke2fs
 * (ROOT/disk-templates/ext4-packed-<bytes>.img); it is attached to a loop device
 * (LOOP_CONFIGURE, Linux 5.8) with LO_FLAGS_AUTOCLEAR and mounted on
 * ROOT/workspaces/<w>/disk/, which then holds the overlay's upper/ and
 * work/ (overlayfs wants both on one mount). A write past the image's size
 * fails with ENOSPC for every writer: root's too, the image is made with
 * no reserved blocks (-m 0), and it is no quota CAP_SYS_RESOURCE passes.
 *
 * Nothing to sweep beyond the workspace: the loop device detaches itself
 * once its last user is gone (autoclear: the mount's unmount, or the close
 * of our descriptor when a kill comes between LOOP_CONFIGURE and mount), and
 * the image and its mount point live in the workspace's directory, which
 * store_release_workspace unmounts and removes. */
#include "core/util.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include "core/io.h"
#include "core/record.h"
#include "exec/tool.h"
#include "kis/id.h"
#include "store/store_internal.h"

#define DISK_IMG "disk.img"
#define DISK_DIR "disk"
#define MKE2FS "/usr/sbin/mke2fs"
/* the layout's name: a template of another layout is made again */
#define TEMPLATE_PREFIX "ext4-packed-"

int store_disk_probe(char *why, size_t n)
{
	if (geteuid() != 0) {
		snprintf(why, n, "the store's filesystem keeps no project quotas and only root may "
			 "mount a disk image of the limit's size");
		return 0;
	}
	if (access("/dev/loop-control", W_OK) < 0) {
		snprintf(why, n, "the store's filesystem keeps no project quotas and this host has "
			 "no loop devices (/dev/loop-control) for a disk image of the limit's size");
		return 0;
	}
	if (access(MKE2FS, X_OK) < 0) {
		snprintf(why, n, "the store's filesystem keeps no project quotas and " MKE2FS
			 " (e2fsprogs) is missing to make a disk image of the limit's size");
		return 0;
	}
	return 1;
}

bool store_disk_present(int d)
{
	struct stat st;
	return fstatat(d, DISK_IMG, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Only the data extents of src, holes kept (SEEK_DATA/SEEK_HOLE); FICLONE
 * first, which shares them. */
static int copy_sparse(int src, int dst, off_t size)
{
	if (ioctl(dst, FICLONE, src) == 0)
		return 0;
	for (off_t pos = 0; pos < size;) {
		off_t data = lseek(src, pos, SEEK_DATA);
		if (data < 0)
			break; /* ENXIO: a hole to the end */
		off_t hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0 || hole > size)
			hole = size;
		for (loff_t in = data, out = data; in < hole;) {
			ssize_t m = RETRY_EINTR(copy_file_range(src, &in, dst, &out,
							       (size_t)(hole - in), 0));
			if (m <= 0)
				return -1;
		}
		pos = hole;
	}
	return ftruncate(dst, size);
}

static int mkfs_fd(int t, struct kis_error **err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", t);
	/* ^resize_inode: its reserved descriptor blocks were 4 of the 4.2 MiB
	 * of data of an 8 GiB image (now 196 KiB), and the image never grows.
	 * Every data extent of an image costs its removal a discard on a store
	 * mounted with -o discard (ext4_free_blocks issues them one extent at
	 * a time; this host's rm of an 8 GiB image took 75 ms for 16 extents):
	 * packed_meta_blocks puts bitmaps, inode tables and the journal at the
	 * start, with flex groups of 1024 (-G) for all groups, and
	 * sparse_super2 with no backup superblocks drops the copies spread over
	 * the image (they serve e2fsck on a damaged disk; a workspace's layer
	 * is remade, not repaired). 3 adjacent extents; the rm takes 6 ms.
	 * -b 4096: mke2fs picks 1 KiB blocks below 512 MiB, where
	 * packed_meta_blocks trips over block 0 (a warning, e2fsck clean). */
	/* -F twice: no "is mounted" check. The file is ours, made a moment
	 * ago, but e2fsprogs' check (ext2fs_check_mount_point) compares the
	 * name "/proc/self/fd/N" with the sources in /proc/mounts, where
	 * another run's image mount (disk_mount, below: source
	 * /proc/self/fd/N of its loop device) can carry the same string:
	 * mke2fs then refused with "is mounted" under concurrent runs. */
	char *argv[] = {MKE2FS, "-q", "-F", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-G", "1024",
			"-O", "^resize_inode,sparse_super2", "-E",
			"lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0,num_backup_sb=0,"
			"packed_meta_blocks=1",
			path, NULL};
	struct kis_tool_out o;
	memset(&o, 0, sizeof(o));
	struct kis_tool tool = {.argv = argv, .in = -1, .out = -1, .err = -1,
				.map = {{.from = t, .to = t}}, .n_map = 1};
	TRY(kis_tool_run(&tool, false, true, &o, err));
	free(o.out);
	if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "mke2fs failed on a disk template: %s",
				     o.err);
	return 0;
}

static uint64_t le32(const unsigned char *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

/* What a command may write to a fresh ext4 image, from its superblock (at
 * 1024, Documentation/filesystems/ext4/super.rst): the free blocks, less
 * the clusters ext4 keeps back for metadata (s_resv_clusters: 2% or 4096,
 * the smaller) and 1 MiB that delayed allocation reserves ahead of a write
 * (a write fails with ENOSPC while statfs still shows about 0.5 MiB). */
static int writable_bytes(int t, uint64_t *out)
{
	unsigned char sb[1024];
	if (pread(t, sb, sizeof(sb), 1024) != (ssize_t)sizeof(sb) || sb[0x38] != 0x53 ||
	    sb[0x39] != 0xef) {
		errno = EINVAL;
		return -1;
	}
	uint64_t bs = 1024ull << le32(sb + 0x18);
	uint64_t blocks = le32(sb + 0x04) | le32(sb + 0x150) << 32;
	uint64_t free_ = le32(sb + 0x0c) | le32(sb + 0x158) << 32;
	uint64_t resv = blocks / 50 < 4096 ? blocks / 50 : 4096;
	uint64_t w = (free_ > resv ? free_ - resv : 0) * bs;
	*out = w > (1u << 20) ? w - (1u << 20) : 0;
	return 0;
}

/* The template for a limit of bytes, made once: mke2fs over a sparse file,
 * lazy init (it stays sparse), no reserved blocks, the root directory
 * root's; sized so that the command may write at least the limit: ext4's
 * own share (inode tables, a journal of 4 to 64 MiB) is measured on the
 * made image and the image made again larger when it fell short. Returns
 * its fd (read-only), or -1 with *err set. */
static int template_open(struct kis_store *s, uint64_t bytes, struct kis_error **err)
{
	if (store_mkdir_p1(s->root_fd, "disk-templates", 0700) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s/disk-templates'",
				     s->root);
	_cleanup_close_ int dir = store_opendir(s->root_fd, "disk-templates");
	if (dir < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s/disk-templates'",
				     s->root);
	char name[64], tmp[96];
	snprintf(name, sizeof(name), TEMPLATE_PREFIX "%llu.img", (unsigned long long)bytes);
	int fd = store_openat(dir, name, O_RDONLY, 0);
	if (fd >= 0)
		return fd;
	/* an older layout's template of this size (ext4-limit-*: spread
	 * metadata) is replaced, not kept beside */
	snprintf(tmp, sizeof(tmp), "ext4-limit-%llu.img", (unsigned long long)bytes);
	(void)unlinkat(dir, tmp, 0);
	char suffix[9];
	TRY(store_rand_suffix(suffix, err));
	snprintf(tmp, sizeof(tmp), ".tmp-%s-%s", name, suffix);
	/* flocked while it is made: a kill leaves a temporary the sweep
	 * (store_disk_sweep_templates) tells from one being made */
	_cleanup_lock_ int t = store_mkfile_locked(s, dir, tmp);
	if (t < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make a disk template");
	uint64_t size = (bytes + bytes / 64 + (4ull << 20) + 4095) & ~4095ull, w = 0;
	int r = -1;
	for (int tries = 0; tries < 4; tries++) {
		if (ftruncate(t, 0) < 0 || ftruncate(t, (off_t)size) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make a disk template");
			break;
		}
		if (mkfs_fd(t, err) < 0)
			break;
		if (writable_bytes(t, &w) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read a disk template");
			break;
		}
		if (w >= bytes) {
			r = 0;
			break;
		}
		size = (size + (bytes - w) + (1u << 20) + 4095) & ~4095ull;
	}
	if (r == 0 && w < bytes)
		r = kis_error_set(err, KIS_E_INTERNAL, 0, "cannot size a disk template");
	if (r == 0)
		kis_test_pause("disk-template");
	if (r == 0 && (fsync(t) < 0 || renameat(dir, tmp, dir, name) < 0))
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot keep a disk template");
	if (r < 0) {
		unlinkat(dir, tmp, 0);
		return -1;
	}
	return store_openat(dir, name, O_RDONLY, 0);
}

/* Attach the image to a free loop device, autoclear; its fd. */
static int loop_attach(int img, struct kis_error **err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open /dev/loop-control");
	/* another process may take the device between GET_FREE and CONFIGURE
	 * (EBUSY): ask again */
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "no free loop device");
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		_cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", dev);
		struct loop_config lc;
		memset(&lc, 0, sizeof(lc));
		lc.fd = (unsigned)img;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0)
			return steal_fd(&lfd);
		if (errno != EBUSY)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot attach '%s'", dev);
	}
	return kis_error_set(err, KIS_E_INTERNAL, EBUSY, "no free loop device");
}

/* Mount the workspace's image on disk/ (it is attached for the mount and
 * detaches with its unmount), with upper/ and work/ in it. */
static int disk_mount(struct kis_store *s, int d, const char *id, bool scratch,
		      struct kis_error **err)
{
	if (store_mkdir_p1(d, DISK_DIR, 0755) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s/%s'", id, DISK_DIR);
	if (store_is_mountpoint(d, DISK_DIR))
		return 0;
	_cleanup_close_ int img = store_openat(d, DISK_IMG, O_RDWR, 0);
	if (img < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the disk of '%s'", id);
	_cleanup_close_ int lfd = loop_attach(img, err);
	if (lfd < 0)
		return -1;
	/* killed from here to the mount, the close of lfd detaches the
	 * device (autoclear, no other opener) */
	kis_test_pause("disk-attached");
	_cleanup_close_ int mp = store_opendir(d, DISK_DIR);
	char dev[64], target[64];
	snprintf(dev, sizeof(dev), "/proc/self/fd/%d", lfd);
	snprintf(target, sizeof(target), "/proc/self/fd/%d", mp);
	/* the device by its fd: the name /dev/loopN might be another's by now.
	 * barrier=0 for a run's scratch clone: ext4 then sends the loop device
	 * no cache flushes, each of which the loop driver turns into an fsync
	 * of the image on the store (the overlay's unmount syncs its upper
	 * layer, ext4's unmount flushes again: 25 to 50 ms of a run here), and
	 * the image's pages need never reach the disk before it is removed.
	 * What a flush would keep matters only across a host crash, after
	 * which the sweep destroys such a clone anyway. A workspace that
	 * outlives its run keeps the flushes. */
	if (mp < 0 || mount(dev, target, "ext4", MS_NOSUID | MS_NODEV,
			    scratch ? "errors=remount-ro,barrier=0" : "errors=remount-ro") < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot mount the disk of '%s'", id);
	_cleanup_close_ int top = store_opendir(d, DISK_DIR);
	if (top < 0 || store_mkdir_p1(top, "upper", 0755) < 0 || store_mkdir_p1(top, "work", 0755) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lay out the disk of '%s'", id);
	(void)s;
	return 0;
}

int store_disk_unmount(struct kis_store *s, int d, const char *name, struct kis_error **err)
{
	if (!store_is_mountpoint(d, DISK_DIR))
		return 0;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/workspaces/%s/" DISK_DIR, s->root, name);
	if (umount2(path, UMOUNT_NOFOLLOW) < 0 && umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH) < 0 &&
	    errno != EINVAL && errno != ENOENT)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot unmount '%s'", path);
	return 0;
}

int store_disk_layers(struct kis_store *s, int d, const char *id, int *up, int *wk,
		      struct kis_error **err)
{
	*up = *wk = -1;
	if (!store_disk_present(d)) {
		*up = store_opendir(d, "upper");
		*wk = store_opendir(d, "work");
	} else {
		TRY(disk_mount(s, d, id, false, err));
		_cleanup_close_ int top = store_opendir(d, DISK_DIR);
		*up = top < 0 ? -1 : store_opendir(top, "upper");
		*wk = top < 0 ? -1 : store_opendir(top, "work");
	}
	if (*up < 0 || *wk < 0) {
		int e = errno;
		kis_closep(up);
		kis_closep(wk);
		*up = *wk = -1;
		return kis_error_set(err, KIS_E_INTERNAL, e, "workspace '%s' is damaged; destroy it",
				     id);
	}
	return 0;
}

const char *store_disk_upper_rel(int d)
{
	return store_disk_present(d) ? DISK_DIR "/upper" : "upper";
}

/* A new image for a limit of bytes for the workspace at d, from the
 * template, mounted on disk/ with upper/ and work/ in it. */
static int disk_make(struct kis_store *s, int d, const char *id, uint64_t bytes, bool scratch,
		     struct kis_error **err)
{
	_cleanup_close_ int tmpl = template_open(s, bytes, err);
	struct stat tst;
	if (tmpl < 0)
		return -1;
	if (fstat(tmpl, &tst) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stat a disk template");
	bytes = (uint64_t)tst.st_size;
	{
		_cleanup_close_ int img = store_openat(d, DISK_IMG ".tmp", O_RDWR | O_CREAT | O_TRUNC,
						       0600);
		if (img < 0 || copy_sparse(tmpl, img, (off_t)bytes) < 0 ||
		    renameat(d, DISK_IMG ".tmp", d, DISK_IMG) < 0) {
			int e = errno;
			unlinkat(d, DISK_IMG ".tmp", 0);
			return kis_error_set(err, KIS_E_INTERNAL, e, "cannot make the disk of '%s'",
					     id);
		}
	}
	if (disk_mount(s, d, id, scratch, err) < 0) {
		unlinkat(d, DISK_IMG, 0);
		return -1;
	}
	return 0;
}

/* Why this workspace cannot have an image: an error when the limit was
 * asked for, else 0 (the default binds where it can). */
static int cannot(bool asked, const char *id, const char *why, struct kis_error **err)
{
	if (!asked)
		return 0;
	return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
			     "limits.disk_bytes: the store's filesystem keeps no project quotas, "
			     "and workspace '%s' %s",
			     id, why);
}

int store_disk_limit(struct kis_store *s, int d, const char *id, uint64_t bytes, bool asked,
		     struct kis_error **err)
{
	char base[KIS_ID_BUFSZ];
	enum kis_clone_strategy strategy;
	TRY(store_ws_meta(d, base, &strategy, err));
	/* Why a plain tree gets no image (issue 41): its files are the
	 * store's. A reflink clone shares its base's extents there, and
	 * FICLONE does not cross into another filesystem: on an image it
	 * would be a full copy of the base. A copy clone would have to move
	 * its whole tree into the image, the base's bytes then counting
	 * against the limit. An overlay's writable layer holds only what the
	 * command writes, and a run's own clone is one wherever an image
	 * binds (resolve_strategy). */
	if (strategy == KIS_CLONE_REFLINK)
		return cannot(asked, id,
			      "is a reflink clone: it shares its base's extents on the store's "
			      "filesystem, which a disk image of the limit's size (another "
			      "filesystem) cannot, so the limit would cost a full copy of the base; "
			      "clone with --strategy overlay, whose writable layer alone goes on "
			      "the image",
			      err);
	if (strategy != KIS_CLONE_OVERLAY)
		return cannot(asked, id,
			      "is a copy clone: its files lie on the store's filesystem, and a disk "
			      "image of the limit's size would have to take the whole tree, the "
			      "base's bytes counting against the limit; clone with --strategy "
			      "overlay, whose writable layer alone goes on the image",
			      err);
	struct stat st, tst;
	if (store_disk_present(d)) {
		if (fstatat(d, DISK_IMG, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stat the disk of '%s'",
					     id);
		/* ext4 cannot shrink while mounted and the layer holds the
		 * workspace's changes: a default keeps the image it has */
		if (asked) {
			_cleanup_close_ int tmpl = template_open(s, bytes, err);
			if (tmpl < 0 || fstat(tmpl, &tst) < 0)
				return tmpl < 0 ? -1 : kis_error_set(err, KIS_E_INTERNAL, errno,
								     "cannot stat a disk template");
		}
		if (asked && st.st_size != tst.st_size) {
			char why[200];
			snprintf(why, sizeof(why),
				 "already has a writable layer of %llu bytes (a disk image made by "
				 "its first run): another size needs a new workspace (--base)",
				 (unsigned long long)st.st_size);
			return cannot(asked, id, why, err);
		}
		TRY(disk_mount(s, d, id, false, err));
		return 1;
	}
	/* What the overlay wrote so far would have to move into the image:
	 * a run's fresh clone has written nothing. */
	_cleanup_close_ int up = store_opendir(d, "upper");
	if (up < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s/upper'", id);
	{
		_cleanup_dir_ DIR *ls = store_dir_stream(up);
		struct dirent *e;
		while (ls && (e = readdir(ls)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				return cannot(asked, id,
					      "was written before without a limit: a limited "
					      "workspace needs a fresh clone (--base)",
					      err);
	}
	TRY(disk_make(s, d, id, bytes, false, err));
	return 2; /* new: the overlay is to be mounted again over it */
}

int store_disk_make(struct kis_store *s, int d, const char *id, uint64_t bytes,
		    struct kis_error **err)
{
	return disk_make(s, d, id, bytes, s->clone_disk_scratch, err);
}

int store_disk_usage(int d, uint64_t *used, uint64_t *limit)
{
	if (!store_disk_present(d) || !store_is_mountpoint(d, DISK_DIR))
		return -1;
	_cleanup_close_ int top = store_opendir(d, DISK_DIR);
	struct statvfs sv;
	if (top < 0 || fstatvfs(top, &sv) < 0)
		return -1;
	/* full: less than the 1 MiB delayed allocation keeps ahead (see
	 * writable_bytes) is left, the limit being what the command can have */
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	*limit = (uint64_t)sv.f_blocks * sv.f_frsize;
	*used = *limit - (avail > (1u << 20) ? avail - (1u << 20) : 0);
	return 0;
}

int store_disk_sweep_templates(struct kis_store *s, char ***dead, size_t *n)
{
	*dead = NULL;
	*n = 0;
	_cleanup_close_ int dir = store_opendir(s->root_fd, "disk-templates");
	if (dir < 0)
		return 0;
	_cleanup_dir_ DIR *ls = store_dir_stream(dir);
	struct dirent *e;
	while (ls && (e = readdir(ls))) {
		if (strncmp(e->d_name, STORE_TMP_PREFIX, strlen(STORE_TMP_PREFIX)))
			continue;
		_cleanup_close_ int f = store_openat(dir, e->d_name, O_RDONLY, 0);
		/* its maker holds the lock while it lives */
		if (f < 0 || store_flock(f, LOCK_EX | LOCK_NB) < 0)
			continue;
		if (kis_strv_push(dead, n, e->d_name) < 0)
			return -1;
	}
	return 0;
}

int store_disk_remove_template(struct kis_store *s, const char *name)
{
	_cleanup_close_ int dir = store_opendir(s->root_fd, "disk-templates");
	if (dir < 0 || strncmp(name, STORE_TMP_PREFIX, strlen(STORE_TMP_PREFIX)) || strchr(name, '/'))
		return -1;
	return unlinkat(dir, name, 0) == 0 || errno == ENOENT ? 0 : -1;
}
