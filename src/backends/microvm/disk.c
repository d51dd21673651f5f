/* SPDX-License-Identifier: MIT */
/* The microvm's workspace disks, copy-on-write. The guest sees three
 * virtio disks and joins them with overlayfs (src/agent/guest.c):
 *
 *   base  (read-only)  the base's tree as an ext4 image, made once per base
 *                      and kept in the base's cache directory;
 *   delta (read-only)  the workspace's own changes on the host (its overlay
 *                      upper layer, whiteouts and opaque directories
 *                      included: overlayfs honours them in a lower layer);
 *   rw    (writable)   an empty ext4 with upper/ and work/, a sparse copy of
 *                      a template made once.
 *
 * So a VM's start costs the workspace's changes, not the base's size. A
 * workspace that is not an overlay clone (reflink or copy strategy, or
 * none) becomes the base image of this one VM instead, as before.
 *
 * Back on the host, the guest's upper layer is what it changed: its tree is
 * read with debugfs (rdump; userspace, so a hostile image meets e2fsprogs,
 * never the host kernel's ext4), its whiteouts and opaque directories with
 * debugfs too (rdump skips device nodes and xattrs), and the three are
 * applied to the host workspace through its merged path, every path
 * resolved beneath it without following a link. All three disks have the
 * same virtual size whatever they hold, so one snapshot serves every
 * workspace (the guest read the disks' sizes when it booted). */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "backends/common.h"
#include "backends/microvm/vm.h"
#include "confine/confine.h"
#include "core/io.h"
#include "core/tree.h"
#include "exec/tool.h"

/* ---- external tools (e2fsprogs) ---- */

static int confine_tool(void *arg)
{
	return kis_confine_child(arg, NULL);
}

/* Run a tool (exec/tool.h: a fixed environment, never the caller's: these
 * run as root outside the guest, over images the guest wrote); with cp,
 * confined by it (kis_confine_child) before exec. */
static int run_tool_in(char *const argv[], int out_fd, int max_ok, struct kis_confine_plan *cp,
		       struct kis_error **err)
{
	struct kis_tool t = {.argv = argv, .in = -1, .out = out_fd, .err = -1,
			     .child_setup = cp ? confine_tool : NULL, .child_arg = cp};
	pid_t p;
	TRY(kis_tool_start(&t, &p, err));
	int st;
	if (RETRY_EINTR(waitpid(p, &st, 0)) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "'%s' failed", argv[0]);
	if (!kis_tool_ok(st, max_ok))
		/* the status tells a refused confinement (126) from the tool's
		 * own failure */
		return kis_error_set(err, KIS_E_INTERNAL, 0, "'%s' failed (%s %d)", argv[0],
				     WIFSIGNALED(st) ? "signal" : "exit status",
				     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return 0;
}

static int run_tool_ok(char *const argv[], int out_fd, int max_ok, struct kis_error **err)
{
	return run_tool_in(argv, out_fd, max_ok, NULL, err);
}

/* e2fsck and debugfs parse an image the guest wrote, which may be crafted
 * to take them over, and mke2fs reads a tree a session may be writing:
 * they run without capabilities, under the shared seccomp policy (no
 * network, no mounts, no ptrace) and, where the kernel has Landlock, with
 * access to the system directories, that image and our private directory
 * (tdir, or none) read-write, and ro (a NULL-terminated list, or NULL)
 * read-only. */
static int tool_confine(struct kis_confine_plan *cp, const char *img, const char *tdir,
			const char *const *ro, struct kis_error **err)
{
	kis_confine_plan_init(cp);
	struct kis_seccomp_opts sc = {.net = KIS_NET_OFF};
	const char *rw[] = {img, tdir, NULL};
	struct kis_landlock_opts ll = {.extra_rw = rw, .extra_ro = ro, .net = KIS_NET_OFF};
	TRY(kis_confine_plan_prepare(cp, &sc, kis_landlock_abi() > 0 ? &ll : NULL, err));
	cp->harden.limits = NULL;
	return 0;
}

/* e2fsprogs' tools, where Debian puts them */
enum e2tool { MKFS, DEBUGFS, E2FSCK };
#define E2PATHS(n) {"/usr/sbin/" n, "/sbin/" n, "/usr/bin/" n}
static const char *const e2paths[][3] = {
	[MKFS] = E2PATHS("mkfs.ext4"), [DEBUGFS] = E2PATHS("debugfs"), [E2FSCK] = E2PATHS("e2fsck"),
};
#undef E2PATHS

static const char *tool(enum e2tool t)
{
	return kis_find_tool(NULL, e2paths[t], 3);
}

static int need_tool(enum e2tool t, const char **out, struct kis_error **err)
{
	*out = tool(t);
	if (!*out)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "microvm: %s is missing (Debian: e2fsprogs)",
				     strrchr(e2paths[t][0], '/') + 1);
	return 0;
}

/* ---- making images ---- */

struct tree_size {
	uint64_t bytes, entries;
};

static void tree_size(int dfd, int depth, struct tree_size *t)
{
	if (depth > 256) {
		close(dfd);
		return;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		/* a block per entry on top of its data: directories, inodes */
		t->bytes += (uint64_t)st.st_size + 4096;
		t->entries++;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (sub >= 0)
				tree_size(sub, depth + 1, t);
		}
	}
	closedir(d);
}

static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return true;
	struct dirent *e;
	bool empty = true;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

/* An ext4 image at img holding src's tree (none: empty), fs_bytes large
 * (0: sized from the tree), journal or not; the file is then extended to
 * the disks' common virtual size. Written to a temporary name and renamed,
 * so a reader never sees half an image. */
static int make_image(const char *img, const char *src, uint64_t fs_bytes, bool journal,
		      const char *label, struct kis_error **err)
{
	const char *mkfs;
	TRY(need_tool(MKFS, &mkfs, err));
	struct tree_size t = {0, 0};
	if (src) {
		int fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", src);
		tree_size(fd, 0, &t);
	}
	if (!fs_bytes)
		fs_bytes = t.bytes + t.bytes / 4 + (32ull << 20);
	fs_bytes = (fs_bytes + 4095) & ~4095ull;
	if (fs_bytes > KIS_MVM_DEV_BYTES)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "microvm: the workspace needs %llu GiB, more than the %llu GiB a guest "
				     "disk holds",
				     (unsigned long long)(fs_bytes >> 30),
				     (unsigned long long)(KIS_MVM_DEV_BYTES >> 30));
	char inodes[32];
	snprintf(inodes, sizeof(inodes), "%llu", (unsigned long long)(t.entries + t.entries / 8 + 1024));
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.tmp.%d", img, (int)getpid()) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
	int r;
	{
		_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)fs_bytes) < 0) {
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", tmp);
			goto out;
		}
	}
	{
		/* lazy init: the image stays sparse and mkfs takes milliseconds;
		 * no reserved blocks; a read-only layer needs no journal */
		char *argv[24];
		int n = 0;
		argv[n++] = (char *)mkfs;
		argv[n++] = "-q";
		argv[n++] = "-F";
		argv[n++] = "-m";
		argv[n++] = "0";
		argv[n++] = "-E";
		argv[n++] = "lazy_itable_init=1,lazy_journal_init=1";
		argv[n++] = "-L";
		argv[n++] = (char *)label;
		if (!journal) {
			argv[n++] = "-O";
			argv[n++] = "^has_journal";
		}
		if (src) {
			argv[n++] = "-N";
			argv[n++] = inodes;
			argv[n++] = "-d";
			argv[n++] = (char *)src;
		}
		argv[n++] = tmp;
		argv[n] = NULL;
		/* mke2fs -d reads the tree by name (lstat, then open or chdir,
		 * each following a link), and a session may be writing that
		 * workspace meanwhile: a link swapped in between would copy a
		 * host file into the guest's image. Confined as the other tools
		 * (tool_confine) with the tree read-only besides: whatever is
		 * swapped in, it reads the tree and the system directories. */
		struct kis_confine_plan cp;
		const char *ro[] = {src, NULL};
		r = tool_confine(&cp, tmp, NULL, src ? ro : NULL, err);
		if (r == 0) {
			r = run_tool_in(argv, -1, 0, &cp, err);
			kis_confine_plan_release(&cp);
		}
	}
	if (r == 0 && !journal) {
		/* mke2fs makes /lost+found; in a layer the guest would see it in
		 * its workspace: remove it unless the tree has its own */
		const char *debugfs = tool(DEBUGFS);
		struct stat st;
		char lf[4096];
		snprintf(lf, sizeof(lf), "%s/lost+found", src ? src : "");
		if (debugfs && (!src || lstat(lf, &st) < 0)) {
			char *argv[] = {(char *)debugfs, "-w", "-R", "rmdir /lost+found", tmp, NULL};
			r = run_tool_ok(argv, -1, 0, err);
		}
	}
	if (r == 0) {
		/* every disk the same size: the device set a snapshot was made with */
		if (truncate(tmp, (off_t)KIS_MVM_DEV_BYTES) < 0 || rename(tmp, img) < 0)
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot publish '%s'", img);
	} else {
		kis_error_wrap(err, "making the microvm disk '%s' from '%s'", label, src ? src : "nothing");
	}
out:
	if (r < 0)
		unlink(tmp);
	return r;
}

/* The cached image at dir/name, made by make() when missing. */
static int cached_image(const char *dir, const char *name, const char *src, uint64_t fs_bytes,
			bool journal, const char *label, char **out, struct kis_error **err)
{
	if (asprintf(out, "%s/%s", dir, name) < 0) {
		*out = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
	}
	if (access(*out, R_OK) == 0)
		return 0;
	return make_image(*out, src, fs_bytes, journal, label, err);
}

/* The bytes [*a, end) of in to out at *b, read and written: where
 * copy_file_range(2) cannot go (EXDEV between filesystems of different
 * types, Linux 5.19+: a guest cache on ext4, a store on tmpfs). */
static ssize_t copy_by_hand(int in, off_t *a, int out, off_t *b, off_t end)
{
	char buf[1 << 16];
	ssize_t total = 0;
	while (*a < end) {
		size_t want = (size_t)(end - *a) < sizeof(buf) ? (size_t)(end - *a) : sizeof(buf);
		ssize_t n = RETRY_EINTR(pread(in, buf, want, *a));
		if (n <= 0)
			return n < 0 ? -1 : total;
		for (ssize_t w = 0; w < n;) {
			ssize_t k = RETRY_EINTR(pwrite(out, buf + w, (size_t)(n - w), *b + w));
			if (k <= 0)
				return -1;
			w += k;
		}
		*a += n;
		*b += n;
		total += n;
	}
	return total;
}

/* A sparse copy: reflink where the filesystem can, else the data extents
 * only (SEEK_DATA / SEEK_HOLE, lseek(2)). */
static int sparse_copy(const char *src, const char *dst, struct kis_error **err)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct stat st;
	if (in < 0 || out < 0 || fstat(in, &st) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot copy '%s'", src);
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	if (ftruncate(out, st.st_size) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot size '%s'", dst);
	off_t pos = 0;
	for (;;) {
		off_t data = lseek(in, pos, SEEK_DATA);
		if (data < 0)
			break; /* ENXIO: no data after pos */
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			hole = st.st_size;
		off_t a = data, b = data;
		while (a < hole) {
			ssize_t k = copy_file_range(in, &a, out, &b, (size_t)(hole - a), 0);
			if (k < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS ||
				      errno == EINVAL))
				k = copy_by_hand(in, &a, out, &b, hole);
			if (k <= 0)
				return kis_error_set(err, KIS_E_INTERNAL, k < 0 ? errno : EIO,
						     "cannot copy '%s'", src);
		}
		pos = hole;
	}
	return 0;
}

int kis_mvm_disks_make(const struct kis_mvm_guest *g, const char *vm_dir, const char *ws,
		       const char *lower, const char *upper, const char *cache, uint64_t rw_bytes,
		       struct kis_mvm_disks *d, struct kis_error **err)
{
	const char *guest_dir = g->dir;
	memset(d, 0, sizeof(*d));
	_cleanup_free_ char *empty = NULL, *tmpl = NULL, *stage = NULL;
	int r = -1;
	/* the empty read-only layer, and the writable disk's template: upper/
	 * and work/ on one filesystem, as overlayfs needs them */
	if (cached_image(guest_dir, "disk-empty-v1.img", NULL, 64ull << 20, false, "kis-empty",
			 &empty, err) < 0)
		goto out;
	/* limits.disk_bytes is the writable layer's size: one template per
	 * size (sparse, made in milliseconds); the device stays
	 * KIS_MVM_DEV_BYTES, so snapshots do not depend on it */
	if (rw_bytes < KIS_MVM_RW_FS_MIN_BYTES)
		rw_bytes = KIS_MVM_RW_FS_MIN_BYTES;
	if (rw_bytes > KIS_MVM_DEV_BYTES)
		rw_bytes = KIS_MVM_DEV_BYTES;
	rw_bytes = (rw_bytes + 4095) & ~4095ull;
	if (asprintf(&tmpl, "%s/disk-rw-v2-%llu.img", guest_dir, (unsigned long long)rw_bytes) < 0) {
		tmpl = NULL;
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
		goto out;
	}
	if (access(tmpl, R_OK) < 0) {
		if (kis_mvm_tmpdir(&stage, err) < 0)
			goto out;
		char p[4096];
		snprintf(p, sizeof(p), "%s/upper", stage);
		int a = mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/work", stage);
		if (a < 0 || mkdir(p, 0700) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stage the disk template");
			goto out;
		}
		/* and one upper/ and work/ per mount slot: a read-write mount's
		 * writes share the VM's writable layer (and limits.disk_bytes) */
		for (int i = 0; i < KIS_MVM_MOUNTS; i++) {
			snprintf(p, sizeof(p), "%s/m%d", stage, i);
			a = mkdir(p, 0755);
			snprintf(p, sizeof(p), "%s/m%d/upper", stage, i);
			a = a < 0 ? a : mkdir(p, 0755);
			snprintf(p, sizeof(p), "%s/m%d/work", stage, i);
			if (a < 0 || mkdir(p, 0700) < 0) {
				kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stage the disk template");
				goto out;
			}
		}
		if (make_image(tmpl, stage, rw_bytes, true, "kis-rw", err) < 0)
			goto out;
	}
	if (asprintf(&d->rw, "%s/rw.img", vm_dir) < 0) {
		d->rw = NULL;
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
		goto out;
	}
	if (sparse_copy(tmpl, d->rw, err) < 0)
		goto out;
	if (ws && lower && upper && cache) {
		/* copy-on-write: the base's image once, the delta per VM */
		_cleanup_free_ char *have = NULL;
		if (asprintf(&have, "%s/microvm-base-v1.img", cache) > 0 && access(have, R_OK) < 0)
			kis_mvm_progress(g, "making the base's disk image for the microvm (once per "
					    "base)");
		if (cached_image(cache, "microvm-base-v1.img", lower, 0, false, "kis-base", &d->base,
				 err) < 0)
			goto out;
		if (dir_is_empty(upper)) {
			d->delta = strdup(empty);
		} else {
			if (asprintf(&d->delta, "%s/delta.img", vm_dir) < 0)
				d->delta = NULL;
			else if (make_image(d->delta, upper, 0, false, "kis-delta", err) < 0)
				goto out;
		}
		d->cow = true;
	} else if (ws) {
		/* not an overlay clone: the whole workspace is this VM's base */
		kis_mvm_progress(g, "copying the workspace into the VM's disk");
		if (asprintf(&d->base, "%s/base.img", vm_dir) < 0)
			d->base = NULL;
		else if (make_image(d->base, ws, 0, false, "kis-base", err) < 0)
			goto out;
		d->delta = strdup(empty);
	} else {
		d->base = strdup(empty);
		d->delta = strdup(empty);
	}
	if (!d->base || !d->delta) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
		goto out;
	}
	r = 0;
out:
	if (stage)
		kis_tree_remove_path(stage);
	if (r < 0)
		kis_mvm_disks_free(d);
	return r;
}

int kis_mvm_base_image(const char *cache, const char *tree, char **out, struct kis_error **err)
{
	return cached_image(cache, "microvm-base-v1.img", tree, 0, false, "kis-base", out, err);
}

int kis_mvm_mount_disks_make(const struct kis_mvm_guest *g, const char *vm_dir,
			     const struct kis_mount_src *m, size_t n, struct kis_mvm_disks *d,
			     struct kis_error **err)
{
	if (n > KIS_MVM_MOUNTS)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "mounts: the microvm places at most %d", KIS_MVM_MOUNTS);
	_cleanup_free_ char *empty = NULL;
	TRY(cached_image(g->dir, "disk-empty-v1.img", NULL, 64ull << 20, false, "kis-empty", &empty,
			 err));
	for (size_t i = 0; i < n; i++) {
		char **lo = &d->m[2 * i], **de = &d->m[2 * i + 1];
		char label[16];
		snprintf(label, sizeof(label), "kis-m%zu", i);
		if (m[i].cache && (m[i].base || m[i].lower)) {
			/* a base, or an overlay workspace's base: its image made
			 * once and kept with the base, as the workspace's is */
			const char *tree = m[i].base ? m[i].path : m[i].lower;
			_cleanup_free_ char *have = NULL;
			if (asprintf(&have, "%s/microvm-base-v1.img", m[i].cache) > 0 &&
			    access(have, R_OK) < 0)
				kis_mvm_progress(g, "making a mounted base's disk image for the microvm "
						    "(once per base)");
			if (cached_image(m[i].cache, "microvm-base-v1.img", tree, 0, false, "kis-base", lo,
					 err) < 0)
				return kis_error_wrap(err, "mounts[%zu]", i);
		} else {
			/* a workspace that is no overlay clone: its whole tree,
			 * for this VM (costs time in its size) */
			if (asprintf(lo, "%s/m%zu-base.img", vm_dir, i) < 0) {
				*lo = NULL;
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
			}
			kis_mvm_progress(g, "copying a mounted workspace into the VM's disk");
			if (make_image(*lo, m[i].path, 0, false, label, err) < 0)
				return kis_error_wrap(err, "mounts[%zu]", i);
		}
		_cleanup_free_ char *upper = NULL;
		if (!m[i].base && m[i].lower && m[i].ws_dir &&
		    asprintf(&upper, "%s/upper", m[i].ws_dir) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
		if (!upper || dir_is_empty(upper)) {
			*de = strdup(empty);
		} else {
			if (asprintf(de, "%s/m%zu-delta.img", vm_dir, i) < 0)
				*de = NULL;
			else if (make_image(*de, upper, 0, false, label, err) < 0)
				return kis_error_wrap(err, "mounts[%zu]", i);
		}
		if (!*de)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
	}
	for (size_t i = 2 * n; i < KIS_MVM_MOUNT_DISKS; i++)
		if (!(d->m[i] = strdup(empty)))
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "image");
	return 0;
}

void kis_mvm_disks_free(struct kis_mvm_disks *d)
{
	free(d->base);
	free(d->delta);
	free(d->rw);
	for (int i = 0; i < KIS_MVM_MOUNT_DISKS; i++)
		free(d->m[i]);
	memset(d, 0, sizeof(*d));
}

/* ---- back to the host ---- */

/* A directory below root named by a relative path, resolved without
 * following any link or leaving root (openat2(2) RESOLVE_BENEATH,
 * RESOLVE_NO_SYMLINKS). "" is root itself. */
static int open_beneath(int root, const char *rel)
{
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof(how));
}

/* Split rel into its parent (in buf) and its last component. */
static const char *split_last(const char *rel, char *buf, size_t n)
{
	const char *slash = strrchr(rel, '/');
	if (!slash) {
		buf[0] = '\0';
		return rel;
	}
	snprintf(buf, n, "%.*s", (int)(slash - rel), rel);
	return slash + 1;
}

/* Make dst what src says, without removing what src lacks: the guest's
 * upper layer holds only what changed. */
static int overlay_copy(int sdir, int ddir, int depth);

/* len bytes at ioff of in to ooff of out (copy_file_range, else read and
 * write); 0 or -1. */
static int range_copy(int in, off_t ioff, int out, off_t ooff, off_t len)
{
	while (len > 0) {
		loff_t a = ioff, b = ooff;
		size_t want = len > (off_t)(16u << 20) ? (16u << 20) : (size_t)len;
		ssize_t n = RETRY_EINTR(copy_file_range(in, &a, out, &b, want, 0));
		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
			      errno == EOPNOTSUPP)) {
			char buf[65536];
			n = RETRY_EINTR(pread(in, buf, want < sizeof(buf) ? want : sizeof(buf), ioff));
			if (n > 0 && RETRY_EINTR(pwrite(out, buf, (size_t)n, ooff)) != n)
				return -1;
		}
		if (n < 0)
			return -1;
		if (n == 0)
			break; /* the source is shorter than said: the rest reads as zeros */
		ioff += n;
		ooff += n;
		len -= n;
	}
	return 0;
}

/* A file of size bytes from in to out with its holes kept: only the data
 * (lseek(2) SEEK_DATA/SEEK_HOLE), the logical size set at the end. A
 * plain read/write loop writes every zero of a hole: an 8 GiB sparse file
 * the guest made became 8 GiB of the host's disk. */
static int sparse_fd_copy(int in, int out, off_t size)
{
	for (off_t pos = 0; pos < size;) {
		off_t data = lseek(in, pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* a hole to the end */
		off_t hole = data < 0 ? size : lseek(in, data, SEEK_HOLE);
		if (data < 0)
			data = pos; /* no SEEK_DATA here: all of it is data */
		if (hole < 0 || hole > size)
			hole = size;
		if (range_copy(in, data, out, data, hole - data) < 0)
			return -1;
		pos = hole;
	}
	return ftruncate(out, size);
}

static int copy_file(int sdir, int ddir, const char *name, const struct stat *st)
{
	_cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return -1;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".kis-sync.%d", (int)getpid());
	unlinkat(ddir, tmp, 0);
	_cleanup_close_ int out = openat(ddir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
					 0600);
	if (out < 0)
		return -1;
	ssize_t k = sparse_fd_copy(in, out, st->st_size);
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	if (k < 0 || fchmod(out, st->st_mode & 07777) < 0 || futimens(out, ts) < 0 ||
	    renameat(ddir, tmp, ddir, name) < 0) {
		unlinkat(ddir, tmp, 0);
		return -1;
	}
	return 0;
}

static int overlay_copy(int sdir, int ddir, int depth)
{
	if (depth > 256)
		return -1;
	int r = 0;
	DIR *d = kis_opendir_dup(sdir);
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		struct stat s, t;
		if (fstatat(sdir, n, &s, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		bool have = fstatat(ddir, n, &t, AT_SYMLINK_NOFOLLOW) == 0;
		if (have && (s.st_mode & S_IFMT) != (t.st_mode & S_IFMT)) {
			kis_tree_remove_quiet(ddir, n);
			have = false;
		}
		if (S_ISDIR(s.st_mode)) {
			if (!have && mkdirat(ddir, n, 0700) < 0) {
				r = -1;
				continue;
			}
			_cleanup_close_ int a = openat(sdir, n, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			_cleanup_close_ int b = openat(ddir, n, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (a < 0 || b < 0 || overlay_copy(a, b, depth + 1) < 0)
				r = -1;
			if (b >= 0)
				(void)!fchmod(b, s.st_mode & 07777);
		} else if (S_ISREG(s.st_mode)) {
			if (copy_file(sdir, ddir, n, &s) < 0)
				r = -1;
		} else if (S_ISLNK(s.st_mode)) {
			char a[4096], b[4096];
			ssize_t la = readlinkat(sdir, n, a, sizeof(a) - 1);
			ssize_t lb = have ? readlinkat(ddir, n, b, sizeof(b) - 1) : -1;
			if (la < 0)
				continue;
			a[la] = '\0';
			if (lb == la && !memcmp(a, b, (size_t)la))
				continue;
			if (have)
				unlinkat(ddir, n, 0);
			if (symlinkat(a, ddir, n) < 0)
				r = -1;
		}
		/* devices, fifos and sockets made in the guest stay there */
	}
	closedir(d);
	return r;
}

/* What debugfs says of the guest's upper layer: the paths of its whiteouts
 * (and any other character device: none is carried back, so the host's
 * entry of that name goes) and of its opaque directories. */
struct entry {
	char *rel; /* below the layer's root */
	unsigned long ino;
	unsigned mode;
	unsigned long long size;
};

struct marks {
	char **white, **opaque;
	size_t nwhite, nopaque;
	/* every entry the scan read (the sparse dump's plan) */
	struct entry *ents;
	size_t nents;
};

static void marks_free(struct marks *m)
{
	kis_strv_free(m->white);
	kis_strv_free(m->opaque);
	for (size_t i = 0; i < m->nents; i++)
		free(m->ents[i].rel);
	free(m->ents);
	memset(m, 0, sizeof(*m));
}

static int entry_push(struct marks *m, const char *rel, unsigned long ino, unsigned mode,
		      unsigned long long size)
{
	struct entry *g = realloc(m->ents, (m->nents + 1) * sizeof(*g));
	if (!g)
		return -1;
	m->ents = g;
	char *r = strdup(rel);
	if (!r)
		return -1;
	g[m->nents++] = (struct entry){.rel = r, .ino = ino, .mode = mode, .size = size};
	return 0;
}

struct dir_ref {
	unsigned long ino;
	char *path; /* relative to the upper layer's root, "" for it */
};

/* One debugfs request file, its output parsed: for every directory of this
 * level "ls -p <ino>" (lines /ino/mode/uid/gid/name/size/) and, below the
 * root, "ea_get -V <ino> trusted.overlay.opaque" (the value "y" alone on a
 * line). The image was written by the guest: every line is checked, a
 * name with a '/' or "." or ".." is refused, and whatever a crafted name
 * could make us read still names paths below the workspace, which the
 * guest could have changed anyway. */
static int scan_level(const char *debugfs, const char *img, const char *layer, const char *tdir,
		      struct dir_ref *lv,
		      size_t nlv, struct dir_ref **next, size_t *nnext, struct marks *m, bool root,
		      struct kis_confine_plan *cp, struct kis_error **err)
{
	char cpath[4096], opath[4096];
	snprintf(cpath, sizeof(cpath), "%s/cmds", tdir);
	snprintf(opath, sizeof(opath), "%s/out", tdir);
	FILE *c = fopen(cpath, "we");
	if (!c)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", cpath);
	for (size_t i = 0; i < nlv; i++) {
		if (root)
			fprintf(c, "ls -p %s\n", layer);
		else
			fprintf(c, "ls -p <%lu>\nea_get -V <%lu> trusted.overlay.opaque\n", lv[i].ino,
				lv[i].ino);
	}
	if (fclose(c) != 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", cpath);
	{
		_cleanup_close_ int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		char *argv[] = {(char *)debugfs, "-f", cpath, (char *)img, NULL};
		if (o < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", opath);
		TRY(run_tool_in(argv, o, 0, cp, err));
	}
	_cleanup_fclose_ FILE *f = fopen(opath, "re");
	if (!f)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read '%s'", opath);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	struct dir_ref *cur = NULL;
	bool in_ea = false;
	int r = 0;
	while (r == 0 && (len = getline(&line, &cap, f)) >= 0) {
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		unsigned long ino;
		if (!strncmp(line, "debugfs: ", 9)) {
			/* the echo of our request: which directory follows */
			cur = NULL;
			in_ea = !strncmp(line + 9, "ea_get", 6);
			const char *lt = strchr(line + 9, '<');
			if (root && !strncmp(line + 9, "ls -p ", 6) && !strcmp(line + 15, layer)) {
				cur = &lv[0];
			} else if (lt && sscanf(lt, "<%lu>", &ino) == 1) {
				for (size_t i = 0; i < nlv && !cur; i++)
					if (lv[i].ino == ino)
						cur = &lv[i];
			}
			continue;
		}
		if (!cur)
			continue;
		if (in_ea) {
			if (!strcmp(line, "y") && kis_strv_push(&m->opaque, &m->nopaque, cur->path) < 0)
				r = -1;
			continue;
		}
		unsigned mode;
		int uid, gid, off = 0;
		if (sscanf(line, "/%lu/%o/%d/%d/%n", &ino, &mode, &uid, &gid, &off) != 4 || !off)
			continue;
		/* name, then "/size/" or "//": the last two slashes close it */
		char *name = line + off;
		char *end = line + len;
		if (end <= name || end[-1] != '/')
			continue;
		end--;
		while (end > name && end[-1] != '/')
			end--;
		if (end <= name)
			continue;
		end[-1] = '\0';
		if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		unsigned long long size = strtoull(end, NULL, 10);
		char *rel = NULL;
		if (asprintf(&rel, "%s%s%s", cur->path, *cur->path ? "/" : "", name) < 0) {
			r = -1;
			break;
		}
		if (entry_push(m, rel, ino, mode, size) < 0) {
			free(rel);
			r = -1;
			break;
		}
		if (S_ISCHR(mode)) {
			if (kis_strv_push(&m->white, &m->nwhite, rel) < 0)
				r = -1;
			free(rel);
		} else if (S_ISDIR(mode) && ino) {
			struct dir_ref *g = realloc(*next, (*nnext + 1) * sizeof(**next));
			if (!g) {
				free(rel);
				r = -1;
				break;
			}
			*next = g;
			g[(*nnext)++] = (struct dir_ref){.ino = ino, .path = rel};
		} else {
			free(rel);
		}
	}
	free(line);
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "reading the guest's changes");
	return 0;
}

static void refs_free(struct dir_ref *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

static int scan_marks(const char *debugfs, const char *img, const char *layer, const char *tdir,
		      struct marks *m,
		      struct kis_confine_plan *cp, struct kis_error **err)
{
	struct dir_ref *lv = calloc(1, sizeof(*lv));
	size_t nlv = 1;
	if (!lv || !(lv[0].path = strdup(""))) {
		free(lv);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "scan");
	}
	int r = 0;
	for (int depth = 0; r == 0 && nlv > 0; depth++) {
		if (depth > 256) {
			r = kis_error_set(err, KIS_E_INTERNAL, 0, "the guest's workspace is too deep");
			break;
		}
		struct dir_ref *next = NULL;
		size_t nnext = 0;
		r = scan_level(debugfs, img, layer, tdir, lv, nlv, &next, &nnext, m, depth == 0, cp,
			       err);
		refs_free(lv, nlv);
		lv = next;
		nlv = nnext;
	}
	refs_free(lv, nlv);
	return r;
}

/* An opaque directory hides everything below it in the lower layers: on
 * the host, what the guest's copy lacks goes. */
static int clear_opaque(int root, int tree, const char *rel)
{
	_cleanup_close_ int h = open_beneath(root, rel);
	_cleanup_close_ int g = open_beneath(tree, rel);
	/* not there as a directory (gone, a file, a link: overlay_copy
	 * replaces it): nothing to clear */
	if (h < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ? 0 : -1;
	if (g < 0)
		return 0; /* not in the rdump: nothing to compare with, keep */
	DIR *d = kis_opendir_dup(h);
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    fstatat(g, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			kis_tree_remove_quiet(h, e->d_name);
	}
	closedir(d);
	return 0;
}

static int remove_beneath(int root, const char *rel)
{
	char parent[4096];
	const char *leaf = split_last(rel, parent, sizeof(parent));
	_cleanup_close_ int p = open_beneath(root, parent);
	if (p < 0) /* the path's parent is not a directory below the workspace: no entry */
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ? 0 : -1;
	kis_tree_remove_quiet(p, leaf);
	return 0;
}

/* ---- files with holes ----
 *
 * debugfs's rdump (and dump) write a file by reading it through libext2fs
 * block by block, holes as zeros (e2fsprogs 1.47): an 8 GiB sparse file
 * the guest made took 2 min 40 s and 8 GiB of the host's disk. So files
 * of EXTENT_MIN bytes or more come back by their extents instead: debugfs
 * lists them (dump_extents -l) and their data is copied from the image at
 * the offsets it names, holes and unwritten extents left holes, the
 * logical size set after. rdump still dumps everything else: whole
 * directories where no such file lies below, and one by one the other
 * entries of the directories on the way to one (the "spine", made by us). */
#define EXTENT_MIN (1ull << 20)

struct extent {
	unsigned long long lblk, pblk, len;
};

struct big {
	const struct entry *e;
	struct extent *ext;
	size_t next;
	struct timespec mtime;
};

static bool is_big(const struct entry *e)
{
	return S_ISREG(e->mode) && e->size >= EXTENT_MIN;
}

/* rel's parent, "" at the top, in buf */
static const char *parent_of(const char *rel, char *buf, size_t n)
{
	const char *slash = strrchr(rel, '/');
	snprintf(buf, n, "%.*s", slash ? (int)(slash - rel) : 0, rel);
	return buf;
}

static bool strv_has(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/* one argument of a debugfs request: lib/ss's parser takes "..." with a
 * doubled quote for a quote (a name with a newline never got this far:
 * the scan's "ls -p" lines could not be read either) */
static void put_arg(FILE *f, const char *a, const char *b, const char *c)
{
	fputc('"', f);
	for (const char *const *p = (const char *const[]){a, b, c, NULL}; *p; p++)
		for (const char *s = *p; *s; s++) {
			if (*s == '"')
				fputc('"', f);
			fputc(*s, f);
		}
	fputs("\" ", f);
}

/* the image's block size, from its superblock (s_log_block_size at
 * 1024 + 0x18; Documentation/filesystems/ext4/super.rst) */
static int image_block_size(int fd, unsigned long long *bs)
{
	unsigned char sb[1024];
	if (pread(fd, sb, sizeof(sb), 1024) != (ssize_t)sizeof(sb) || sb[0x38] != 0x53 ||
	    sb[0x39] != 0xef)
		return -1;
	unsigned lg = sb[0x18] | sb[0x19] << 8 | (unsigned)sb[0x1a] << 16 | (unsigned)sb[0x1b] << 24;
	if (lg > 6) /* at most 64 KiB blocks */
		return -1;
	*bs = 1024ull << lg;
	return 0;
}

/* debugfs's answer to our requests: the extents and mtime of each big file */
static int read_extents(const char *opath, struct big *bigs, size_t nbig)
{
	_cleanup_fclose_ FILE *f = fopen(opath, "re");
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	struct big *cur = NULL;
	bool in_stat = false;
	int r = 0;
	while (r == 0 && (len = getline(&line, &cap, f)) >= 0) {
		unsigned long ino;
		if (!strncmp(line, "debugfs: ", 9)) {
			const char *lt = strchr(line + 9, '<');
			cur = NULL;
			in_stat = !strncmp(line + 9, "stat ", 5);
			for (size_t i = 0; lt && sscanf(lt, "<%lu>", &ino) == 1 && i < nbig && !cur; i++)
				if (bigs[i].e->ino == ino)
					cur = &bigs[i];
			continue;
		}
		if (!cur)
			continue;
		if (in_stat) {
			unsigned sec, extra;
			if (sscanf(line, " mtime: 0x%x:%x", &sec, &extra) == 2) {
				/* the extra field: 2 epoch bits, then nanoseconds */
				cur->mtime.tv_sec = (time_t)((long long)sec + ((long long)(extra & 3) << 32));
				cur->mtime.tv_nsec = (long)(extra >> 2) % 1000000000L;
			}
			continue;
		}
		unsigned a, b, c, d;
		unsigned long long l0, l1, p0, p1, n;
		int k = sscanf(line, "%u/%u %u/%u %llu - %llu %llu - %llu %llu", &a, &b, &c, &d, &l0,
			       &l1, &p0, &p1, &n);
		if (k != 9) {
			/* a one-block extent may name its physical block once */
			k = sscanf(line, "%u/%u %u/%u %llu - %llu %llu %llu", &a, &b, &c, &d, &l0, &l1,
				   &p0, &n);
			if (k != 8)
				continue;
		}
		/* an unwritten extent reads as zeros: a hole here too */
		if (strstr(line, "Uninit") || !n)
			continue;
		struct extent *g = realloc(cur->ext, (cur->next + 1) * sizeof(*g));
		if (!g) {
			r = -1;
			break;
		}
		cur->ext = g;
		g[cur->next++] = (struct extent){.lblk = l0, .pblk = p0, .len = n};
	}
	free(line);
	return r;
}

/* One big file into dir (of the dump) from the image: its extents, each
 * checked against the file's size and the image's, the rest a hole. */
static int extent_copy(int img, off_t img_size, unsigned long long bs, int dir, const char *name,
		       const struct big *b)
{
	_cleanup_close_ int out = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
					 0600);
	if (out < 0)
		return -1;
	unsigned long long size = b->e->size;
	for (size_t i = 0; i < b->next; i++) {
		const struct extent *x = &b->ext[i];
		if (x->lblk > size / bs || x->len > (1ull << 40) || x->pblk > (unsigned long long)img_size / bs)
			continue; /* beyond the file or the image: a crafted entry, nothing to read */
		unsigned long long off = x->lblk * bs, from = x->pblk * bs, n = x->len * bs;
		if (n > size - off)
			n = size - off;
		if (n > (unsigned long long)img_size - from)
			n = (unsigned long long)img_size - from;
		if (n && range_copy(img, (off_t)from, out, (off_t)off, (off_t)n) < 0)
			return -1;
	}
	struct timespec ts[2] = {b->mtime, b->mtime};
	if (ftruncate(out, (off_t)size) < 0 || fchmod(out, b->e->mode & 07777) < 0)
		return -1;
	if (b->mtime.tv_sec)
		(void)futimens(out, ts);
	return 0;
}

static int sparse_dump(const char *debugfs, const char *img, const char *layer, const char *tdir,
		       const struct marks *m, struct kis_confine_plan *cp, struct kis_error **err)
{
	char **spine = NULL, *tree = NULL, *cpath = NULL, *opath = NULL;
	size_t nspine = 0, nbig = 0;
	struct big *bigs = calloc(m->nents ? m->nents : 1, sizeof(*bigs));
	char par[4096];
	int r = -1;
	_cleanup_close_ int up = -1, imfd = -1;
	if (!bigs || asprintf(&tree, "%s/upper", tdir) < 0 || asprintf(&cpath, "%s/cmds2", tdir) < 0 ||
	    asprintf(&opath, "%s/out2", tdir) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "sync");
		goto out;
	}
	/* the spine: every directory with a big file below it, parents
	 * first (a parent's path is a prefix of its children's) */
	if (kis_strv_push(&spine, &nspine, "") < 0)
		goto nomem;
	for (size_t i = 0; i < m->nents; i++) {
		if (!is_big(&m->ents[i]))
			continue;
		bigs[nbig++].e = &m->ents[i];
		snprintf(par, sizeof(par), "%s", m->ents[i].rel);
		for (char *sl; (sl = strrchr(par, '/'));) {
			*sl = '\0';
			if (!strv_has(spine, nspine, par) && kis_strv_push(&spine, &nspine, par) < 0)
				goto nomem;
		}
	}
	for (size_t i = 1; i < nspine; i++)
		for (size_t j = i; j > 0 && strlen(spine[j]) < strlen(spine[j - 1]); j--) {
			char *t = spine[j];
			spine[j] = spine[j - 1];
			spine[j - 1] = t;
		}
	if (mkdir(tree, 0700) < 0 || (up = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", tree);
		goto out;
	}
	for (size_t i = 1; i < nspine; i++)
		if (mkdirat(up, spine[i], 0700) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s/%s'", tree, spine[i]);
			goto out;
		}
	{
		FILE *c = fopen(cpath, "we");
		if (!c) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", cpath);
			goto out;
		}
		for (size_t i = 0; i < m->nents; i++) {
			const struct entry *e = &m->ents[i];
			parent_of(e->rel, par, sizeof(par));
			if (is_big(e) || S_ISCHR(e->mode) || !strv_has(spine, nspine, par) ||
			    (S_ISDIR(e->mode) && strv_has(spine, nspine, e->rel)))
				continue;
			fputs("rdump ", c);
			put_arg(c, layer, "/", e->rel);
			put_arg(c, tree, *par ? "/" : "", par);
			fputc('\n', c);
		}
		for (size_t i = 0; i < nbig; i++)
			fprintf(c, "dump_extents -l <%lu>\nstat <%lu>\n", bigs[i].e->ino, bigs[i].e->ino);
		if (fclose(c) != 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", cpath);
			goto out;
		}
	}
	{
		_cleanup_close_ int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		char *argv[] = {(char *)debugfs, "-f", cpath, (char *)img, NULL};
		if (o < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", opath);
			goto out;
		}
		if (run_tool_in(argv, o, 0, cp, err) < 0)
			goto out;
	}
	if (read_extents(opath, bigs, nbig) < 0)
		goto nomem;
	/* hard links: debugfs answered for the inode once, under the first
	 * name read_extents found for it */
	for (size_t i = 0; i < nbig; i++)
		for (size_t j = 0; j < i && !bigs[i].next; j++)
			if (bigs[j].e->ino == bigs[i].e->ino && bigs[j].next) {
				bigs[i].ext = calloc(bigs[j].next, sizeof(*bigs[i].ext));
				if (!bigs[i].ext)
					goto nomem;
				memcpy(bigs[i].ext, bigs[j].ext, bigs[j].next * sizeof(*bigs[i].ext));
				bigs[i].next = bigs[j].next;
				bigs[i].mtime = bigs[j].mtime;
			}
	{
		struct stat ist;
		unsigned long long bs = 0;
		imfd = open(img, O_RDONLY | O_CLOEXEC);
		if (imfd < 0 || fstat(imfd, &ist) < 0 || image_block_size(imfd, &bs) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read the image '%s'", img);
			goto out;
		}
		for (size_t i = 0; i < nbig; i++) {
			const char *rel = bigs[i].e->rel;
			parent_of(rel, par, sizeof(par));
			_cleanup_close_ int d = open_beneath(up, par);
			if (d < 0 || extent_copy(imfd, ist.st_size, bs, d, rel + strlen(par) + (*par != 0),
						 &bigs[i]) < 0) {
				kis_error_set(err, KIS_E_INTERNAL, errno,
					      "cannot copy '%s' back from the guest", rel);
				goto out;
			}
		}
	}
	/* the spine's modes, which overlay_copy gives the workspace's */
	for (size_t i = 0; i < m->nents; i++)
		if (S_ISDIR(m->ents[i].mode) && strv_has(spine, nspine, m->ents[i].rel))
			(void)!fchmodat(up, m->ents[i].rel, m->ents[i].mode & 07777, 0);
	r = 0;
	goto out;
nomem:
	kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "reading the guest's changes");
out:
	for (size_t i = 0; bigs && i < nbig; i++)
		free(bigs[i].ext);
	free(bigs);
	kis_strv_free(spine);
	free(tree);
	free(cpath);
	free(opath);
	return r;
}

int kis_mvm_disk_sync_back(const char *img, const char *layer, const char *dst_dir,
			   struct kis_error **err)
{
	/* our own constant ("/upper", "/m<i>/upper"): rdump puts its last
	 * component, upper, in tdir */
	if (layer[0] != '/' || strlen(layer) > 64 || strspn(layer, "/m0123456789upper") != strlen(layer))
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL, "sync: no layer '%s'", layer);
	const char *debugfs, *fsck;
	TRY(need_tool(DEBUGFS, &debugfs, err));
	TRY(need_tool(E2FSCK, &fsck, err));
	_cleanup_free_ char *tdir = NULL;
	TRY(kis_mvm_tmpdir(&tdir, err));
	_cleanup_free_ char *cmd = NULL, *tree = NULL;
	struct marks m = {0};
	struct kis_confine_plan cp;
	kis_confine_plan_init(&cp);
	int r = -1;
	if (tool_confine(&cp, img, tdir, NULL, err) < 0)
		goto out;
	{
		/* debugfs reads the filesystem as it is on disk, without the
		 * journal: what the guest committed to the journal but had not
		 * yet written home (a VM stopped without unmounting) is replayed
		 * first. e2fsck exits 1 when it changed something, which here
		 * is the point. */
		char *fargv[] = {(char *)fsck, "-y", "-E", "journal_only", (char *)img, NULL};
		if (run_tool_in(fargv, -1, 1, &cp, err) < 0)
			goto out;
	}
	if (asprintf(&cmd, "rdump %s %s", layer, tdir) < 0 || asprintf(&tree, "%s/upper", tdir) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "sync");
		goto out;
	}
	if (scan_marks(debugfs, img, layer, tdir, &m, &cp, err) < 0)
		goto out;
	{
		bool any_big = false;
		for (size_t i = 0; i < m.nents && !any_big; i++)
			any_big = is_big(&m.ents[i]);
		/* -R takes one debugfs request (not a shell line); the path is ours */
		char *argv[] = {(char *)debugfs, "-R", cmd, (char *)img, NULL};
		if (any_big ? sparse_dump(debugfs, img, layer, tdir, &m, &cp, err) < 0
			    : run_tool_in(argv, -1, 0, &cp, err) < 0)
			goto out;
	}
	{
		_cleanup_close_ int s = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		_cleanup_close_ int d = open(dst_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s < 0 || d < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'",
				      s < 0 ? tree : dst_dir);
			goto out;
		}
		/* whiteouts and opaque directories first, then the new content */
		int bad = 0;
		for (size_t i = 0; i < m.nwhite; i++)
			bad |= remove_beneath(d, m.white[i]);
		for (size_t i = 0; i < m.nopaque; i++)
			bad |= clear_opaque(d, s, m.opaque[i]);
		bad |= overlay_copy(s, d, 0);
		if (bad) {
			kis_error_set(err, KIS_E_INTERNAL, errno,
				      "cannot copy the guest's workspace back to '%s'", dst_dir);
			goto out;
		}
	}
	r = 0;
out:
	kis_confine_plan_release(&cp);
	marks_free(&m);
	kis_tree_remove_path(tdir);
	return r;
}
