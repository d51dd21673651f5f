/* SPDX-License-Identifier: MIT */
/* Tree copy for import and for reflink/copy clones: modes, owners, times,
 * xattrs, symlinks as links, hard links as links; FICLONE where asked. */
#include "store_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

/* Hard links: (dev, ino) of a source with st_nlink > 1 -> the path of the
 * first copy, relative to the destination root. Open addressing. */
struct link_entry {
	dev_t dev;
	ino_t ino;
	char *rel;
};
struct link_map {
	struct link_entry *v;
	size_t cap, len;
};

static void link_map_release(struct link_map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->v[i].rel);
	free(m->v);
}

static size_t link_slot(const struct link_map *m, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)ino * 0xc2b2ae3d27d4eb4fULL);
	size_t i = (size_t)(h & (m->cap - 1));
	while (m->v[i].rel && !(m->v[i].dev == dev && m->v[i].ino == ino))
		i = (i + 1) & (m->cap - 1);
	return i;
}

static const char *link_find(const struct link_map *m, dev_t dev, ino_t ino)
{
	if (!m->cap)
		return NULL;
	return m->v[link_slot(m, dev, ino)].rel;
}

static int link_add(struct link_map *m, dev_t dev, ino_t ino, const char *rel,
		    struct kis_error **err)
{
	if ((m->len + 1) * 2 > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 64;
		struct link_map n = {.v = calloc(ncap, sizeof(*n.v)), .cap = ncap, .len = m->len};
		if (!n.v)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
		for (size_t i = 0; i < m->cap; i++)
			if (m->v[i].rel)
				n.v[link_slot(&n, m->v[i].dev, m->v[i].ino)] = m->v[i];
		free(m->v);
		*m = n;
	}
	char *dup = strdup(rel);
	if (!dup)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	size_t i = link_slot(m, dev, ino);
	m->v[i] = (struct link_entry){.dev = dev, .ino = ino, .rel = dup};
	m->len++;
	return 0;
}

struct walk {
	struct store_copy *c;
	struct link_map links;
	int dst_root;
	char rel[PATH_MAX]; /* path below the roots of the entry being copied */
	uint64_t last_files, last_bytes;
};

static void progress(struct walk *w, bool force)
{
	struct store_copy *c = w->c;
	if (!c->progress)
		return;
	if (force || c->files - w->last_files >= 256 || c->bytes - w->last_bytes >= (64u << 20)) {
		w->last_files = c->files;
		w->last_bytes = c->bytes;
		c->progress(c->progress_ctx, c->files, c->bytes);
	}
}

/* Extended attributes of an open file or directory. user.* must copy;
 * namespaces a non-root importer or the destination filesystem cannot
 * hold (trusted.*, security.* without an LSM) are skipped, as cp -a does. */
static int copy_xattrs(struct walk *w, int src, int dst, struct kis_error **err)
{
	ssize_t n = flistxattr(src, NULL, 0);
	if (n <= 0)
		return 0; /* none, or the filesystem has none (ENOTSUP) */
	_cleanup_free_ char *names = malloc((size_t)n + 1);
	if (!names)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	n = flistxattr(src, names, (size_t)n);
	if (n < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot list xattrs of '%s'", w->rel);
	_cleanup_free_ char *val = NULL;
	size_t cap = 0;
	for (char *name = names; name < names + n; name += strlen(name) + 1) {
		ssize_t vl = fgetxattr(src, name, NULL, 0);
		if (vl < 0)
			continue;
		if ((size_t)vl + 1 > cap) {
			free(val);
			cap = (size_t)vl + 1;
			val = malloc(cap);
			if (!val)
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
		}
		vl = fgetxattr(src, name, val, cap);
		if (vl < 0)
			continue;
		if (fsetxattr(dst, name, val, (size_t)vl, 0) < 0) {
			if (strncmp(name, "user.", 5) && (errno == EPERM || errno == ENOTSUP))
				continue;
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot set xattr '%s' on '%s'", name, w->rel);
		}
	}
	return 0;
}

/* Owner, then mode (chown clears set-id bits), then times. */
static int copy_attrs_fd(struct walk *w, int dst, const struct stat *st, struct kis_error **err)
{
	if (w->c->keep_owner && fchown(dst, st->st_uid, st->st_gid) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot chown '%s'", w->rel);
	if (fchmod(dst, st->st_mode & 07777) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot chmod '%s'", w->rel);
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	if (futimens(dst, ts) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set times of '%s'", w->rel);
	return 0;
}

static int copy_attrs_at(struct walk *w, int dirfd, const char *name, const struct stat *st,
			 bool is_link, struct kis_error **err)
{
	if (w->c->keep_owner &&
	    fchownat(dirfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot chown '%s'", w->rel);
	/* Symlinks have no mode of their own on Linux. */
	if (!is_link && fchmodat(dirfd, name, st->st_mode & 07777, 0) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot chmod '%s'", w->rel);
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set times of '%s'", w->rel);
	return 0;
}

/* len bytes at off of src to the same offset of dst; what is copied counts
 * against max_bytes. */
static int copy_range(struct walk *w, int src, int dst, off_t off, off_t len,
		      struct kis_error **err)
{
	struct store_copy *c = w->c;
	bool use_cfr = true;
	char buf[65536];
	while (len > 0) {
		size_t want = len > (off_t)(16u << 20) ? (16u << 20) : (size_t)len;
		if (c->max_bytes && c->bytes + want > c->max_bytes)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, EFBIG,
					     "max_size: the tree holds more than %llu bytes of data "
					     "(at '%s'); pass a larger --max-size to import it",
					     (unsigned long long)c->max_bytes, w->rel);
		ssize_t n;
		if (use_cfr) {
			/* In-kernel copy; EXDEV/EINVAL/ENOSYS on filesystem
			 * pairs it does not serve: fall back to read/write. */
			loff_t so = off, dof = off;
			n = RETRY_EINTR(copy_file_range(src, &so, dst, &dof, want, 0));
			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
				      errno == EOPNOTSUPP || errno == EPERM)) {
				use_cfr = false;
				continue;
			}
		} else {
			n = RETRY_EINTR(pread(src, buf, want < sizeof(buf) ? want : sizeof(buf), off));
			for (ssize_t done = 0; n > 0 && done < n;) {
				ssize_t m = RETRY_EINTR(pwrite(dst, buf + done, (size_t)(n - done),
							       off + done));
				if (m < 0)
					return kis_error_set(err, KIS_E_INTERNAL, errno,
							     "cannot write '%s'", w->rel);
				done += m;
			}
		}
		if (n < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot copy '%s'", w->rel);
		if (n == 0)
			break; /* the file shrank while we copied it */
		off += n;
		len -= n;
		c->bytes += (uint64_t)n;
		progress(w, false);
	}
	return 0;
}

static int copy_bytes(struct walk *w, int src, int dst, const struct stat *st,
		      struct kis_error **err)
{
	if (w->c->reflink_only || w->c->try_reflink) {
		/* FICLONE: the destination shares the source's extents. */
		if (ioctl(dst, FICLONE, src) == 0) {
			/* shared extents, holes included: what it holds */
			w->c->bytes += (uint64_t)st->st_blocks * 512u;
			return 0;
		}
		if (w->c->reflink_only)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, errno,
					     "cannot reflink '%s'; the store's filesystem has no "
					     "reflinks, use another --strategy",
					     w->rel);
	}
	/* Only the data: holes stay holes (lseek(2) SEEK_DATA/SEEK_HOLE,
	 * Linux 3.1). copy_file_range alone fills them, since with no reflink
	 * the kernel splices every byte (an 8 GiB sparse file took 26 s and
	 * 8 GiB of disk). The logical size is set at the end (ftruncate). */
	off_t size = st->st_size, pos = 0;
	bool sparse_ok = true;
	while (pos < size) {
		off_t data = sparse_ok ? lseek(src, pos, SEEK_DATA) : pos;
		if (data < 0 && errno == ENXIO)
			break; /* only a hole from pos to the end */
		if (data < 0) {
			/* a filesystem without SEEK_DATA: all of it is data */
			sparse_ok = false;
			data = pos;
		}
		off_t hole = sparse_ok ? lseek(src, data, SEEK_HOLE) : size;
		if (hole < 0 || hole > size)
			hole = size;
		TRY(copy_range(w, src, dst, data, hole - data, err));
		pos = hole;
	}
	if (ftruncate(dst, size) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot size '%s'", w->rel);
	return 0;
}

static int copy_dir(struct walk *w, int src, int dst, struct kis_error **err);

static int open_failed(struct walk *w, struct kis_error **err)
{
	if (errno == EACCES)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, errno,
				     "cannot read '%s'; make it readable, or run as root", w->rel);
	return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", w->rel);
}

/* One entry `name` of the directory src into the directory dst. */
static int copy_entry(struct walk *w, int src, int dst, const char *name, struct kis_error **err)
{
	struct stat st;
	if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0; /* vanished while we read the directory */
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stat '%s'", w->rel);
	}
	struct store_copy *c = w->c;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		const char *first = link_find(&w->links, st.st_dev, st.st_ino);
		if (first) {
			if (linkat(w->dst_root, first, dst, name, 0) < 0)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot hard-link '%s' to '%s'", w->rel, first);
			c->files++;
			return 0;
		}
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR: {
		/* O_NOFOLLOW|O_DIRECTORY: if it became a symlink since the
		 * stat, the open fails rather than copying the link target. */
		_cleanup_close_ int s = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (s < 0)
			return open_failed(w, err);
		if (mkdirat(dst, name, 0700) < 0)
			return kis_error_set(err, errno == EEXIST ? KIS_E_DESTINATION_EXISTS : KIS_E_INTERNAL,
					     errno, "cannot create directory '%s'", w->rel);
		_cleanup_close_ int d = store_opendir(dst, name);
		if (d < 0)
			return open_failed(w, err);
		TRY(copy_dir(w, s, d, err));
		TRY(copy_xattrs(w, s, d, err));
		c->files++;
		/* Mode last: a read-only directory must still take its children. */
		return copy_attrs_fd(w, d, &st, err);
	}
	case S_IFREG: {
		_cleanup_close_ int s =
			openat(src, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (s < 0)
			return open_failed(w, err);
		struct stat st2;
		if (fstat(s, &st2) < 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino)
			return kis_error_set(err, KIS_E_INTERNAL, EAGAIN,
					     "'%s' changed while it was copied", w->rel);
		_cleanup_close_ int d = store_openat(dst, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (d < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", w->rel);
		TRY(copy_bytes(w, s, d, &st2, err));
		TRY(copy_xattrs(w, s, d, err));
		TRY(copy_attrs_fd(w, d, &st2, err));
		break;
	}
	case S_IFLNK: {
		char target[PATH_MAX];
		ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
		if (n < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read link '%s'", w->rel);
		target[n] = '\0';
		/* The link is recreated, never resolved. */
		if (symlinkat(target, dst, name) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create link '%s'", w->rel);
		TRY(copy_attrs_at(w, dst, name, &st, true, err));
		break;
	}
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK: {
		const char *kind = S_ISCHR(st.st_mode)	 ? "a character device"
				   : S_ISBLK(st.st_mode) ? "a block device"
				   : S_ISFIFO(st.st_mode) ? "a FIFO"
							  : "a socket";
		if (!c->allow_special)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "'%s' is %s; remove it from the tree, or import an OS "
					     "image as root with --os-image",
					     w->rel, kind);
		/* mknod of a socket makes an inert socket inode, as tar does. */
		if (mknodat(dst, name, st.st_mode, st.st_rdev) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create %s '%s'", kind,
					     w->rel);
		TRY(copy_attrs_at(w, dst, name, &st, false, err));
		break;
	}
	default:
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "'%s' has an unknown file type", w->rel);
	}
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1)
		TRY(link_add(&w->links, st.st_dev, st.st_ino, w->rel, err));
	c->files++;
	progress(w, false);
	return 0;
}

static int copy_dir(struct walk *w, int src, int dst, struct kis_error **err)
{
	_cleanup_dir_ DIR *d = store_dir_stream(src);
	if (!d)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read directory '%s'",
				     w->rel[0] ? w->rel : ".");
	size_t base_len = strlen(w->rel);
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e) {
			if (errno)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot read directory '%s'", w->rel);
			break;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int n = snprintf(w->rel + base_len, sizeof(w->rel) - base_len, "%s%s",
				 base_len ? "/" : "", e->d_name);
		if (n < 0 || (size_t)n >= sizeof(w->rel) - base_len)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, ENAMETOOLONG,
					     "a path below '%s' is too long", w->rel);
		int r = copy_entry(w, src, dst, e->d_name, err);
		if (r < 0)
			return r;
		w->rel[base_len] = '\0';
	}
	return 0;
}

int store_copy_tree(struct store_copy *c, int src_fd, int dst_fd, struct kis_error **err)
{
	struct walk w = {.c = c, .dst_root = dst_fd};
	struct stat st;
	if (fstat(src_fd, &st) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stat the source tree");
	int r = copy_dir(&w, src_fd, dst_fd, err);
	if (r >= 0) {
		snprintf(w.rel, sizeof(w.rel), ".");
		r = copy_xattrs(&w, src_fd, dst_fd, err);
	}
	if (r >= 0)
		r = copy_attrs_fd(&w, dst_fd, &st, err);
	if (r >= 0)
		progress(&w, true);
	link_map_release(&w.links);
	return r;
}
