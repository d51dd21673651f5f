/* SPDX-License-Identifier: MIT */
/* WASI path_* and fd_readdir, confined beneath directory descriptors by the
 * kernel: openat2(2) RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS for every walk,
 * then *at(2) calls on the last component, which never follow it. */
#include "wasm/wasi_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WASI_PATH_MAX 4096

/* openat2(2) beneath dirfd. An escape (`..` past dirfd, an absolute path or
 * symlink, a magic link) fails with EXDEV or ELOOP; EAGAIN means a rename
 * raced the walk (openat2(2), RESOLVE_BENEATH), so try again a few times. */
static int beneath(int dirfd, const char *path, uint64_t flags, uint64_t mode)
{
	struct open_how how = {
		/* With O_PATH, openat2 takes no flag but O_DIRECTORY, O_NOFOLLOW
		 * and O_CLOEXEC (EINVAL otherwise). */
		.flags = flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY),
		/* openat2 refuses a mode without O_CREAT (EINVAL). */
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	for (int tries = 0;; tries++) {
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN || tries >= 16)
			return (int)fd;
	}
}

/* A guest path as a host string. Paths are relative to their directory
 * descriptor (wasi_snapshot_preview1.witx, `path`): an absolute one is an
 * attempt to leave it. */
static int guest_path(const struct wasi_mem *m, uint32_t ptr, uint32_t len, char **out)
{
	const uint8_t *p = gmem(m, ptr, len);
	if (!p)
		return W_FAULT;
	if (len == 0)
		return W_NOENT;
	if (len >= WASI_PATH_MAX)
		return W_NAMETOOLONG;
	if (memchr(p, 0, len))
		return W_ILSEQ;
	if (p[0] == '/')
		return W_NOTCAPABLE;
	char *s = malloc((size_t)len + 1);
	if (!s)
		return W_NOMEM;
	memcpy(s, p, len);
	s[len] = '\0';
	*out = s;
	return W_SUCCESS;
}

static struct wasi_fd *dir_fd(struct kis_wasi *w, uint32_t fd, uint64_t need, int *e)
{
	struct wasi_fd *f = wasi_fd_get(w, fd, need, e);
	if (f && f->type != FT_DIRECTORY) {
		*e = W_NOTDIR;
		return NULL;
	}
	return f;
}

/* A path split into its parent, opened beneath the descriptor (O_PATH,
 * pinned: swapping a component afterwards changes nothing), and its last
 * component. A last component of "." or ".." is resolved with the parent
 * and becomes ".", so no *at call ever sees "..".
 *
 * Trailing slashes are cut from the last component, and `slash` remembers
 * them: given "name/", the kernel's own *at call would follow a symlink
 * `name` (path_resolution(7): a trailing slash forces the last component
 * to be resolved as a directory), outside RESOLVE_BENEATH, so no *at call
 * sees one. Each caller applies what Linux does with the slash instead
 * (fs/namei.c: do_unlinkat, do_renameat2, filename_create, do_linkat). */
struct at {
	int dfd;
	char *path; /* owns the string; last points into it */
	const char *last;
	bool slash;  /* the path ended in '/' */
	int base;    /* the directory descriptor's host fd (not owned) */
	char *given; /* the path as given, for a walk of the whole beneath base */
};

static void at_release(struct at *a)
{
	kis_closep(&a->dfd);
	free(a->path);
	free(a->given);
	a->path = a->given = NULL;
}

static int at_open(struct kis_wasi *w, const struct wasi_mem *m, uint32_t fd, uint64_t need,
		   uint32_t ptr, uint32_t len, struct at *a)
{
	int e = W_BADF;
	a->dfd = -1;
	a->path = a->given = NULL;
	a->slash = false;
	struct wasi_fd *f = dir_fd(w, fd, need, &e);
	if (!f)
		return e;
	a->base = f->host;
	TRY_W(guest_path(m, ptr, len, &a->path));
	a->given = strdup(a->path);
	if (!a->given) {
		at_release(a);
		return W_NOMEM;
	}
	char *s = a->path;
	size_t n = strlen(s);
	a->slash = n > 1 && s[n - 1] == '/';
	while (n > 1 && s[n - 1] == '/')
		s[--n] = '\0';
	char *slash = strrchr(s, '/');
	const char *parent = ".";
	char *last = s;
	if (slash) {
		*slash = '\0';
		parent = s;
		last = slash + 1;
	}
	if (!strcmp(last, ".") || !strcmp(last, "..")) {
		if (slash)
			*slash = '/';
		parent = s;
		last = (char *)".";
	}
	a->dfd = beneath(f->host, parent, O_PATH | O_DIRECTORY, 0);
	if (a->dfd < 0) {
		e = wasi_errno(errno);
		at_release(a);
		return e;
	}
	a->last = last;
	return W_SUCCESS;
}

/* The object a path names, opened O_PATH beneath the descriptor; the last
 * component followed only with lookupflags.symlink_follow. */
static int obj_open(struct kis_wasi *w, const struct wasi_mem *m, uint32_t fd, uint64_t need,
		    uint32_t lookup, uint32_t ptr, uint32_t len, int *out)
{
	int e = W_BADF;
	struct wasi_fd *f = dir_fd(w, fd, need, &e);
	if (!f)
		return e;
	_cleanup_free_ char *path = NULL;
	TRY_W(guest_path(m, ptr, len, &path));
	int o = beneath(f->host, path, O_PATH | ((lookup & LOOKUP_SYMLINK_FOLLOW) ? 0 : O_NOFOLLOW),
			0);
	if (o < 0)
		return wasi_errno(errno);
	*out = o;
	return W_SUCCESS;
}

/* The object "name/" names, walked beneath the directory (the slash makes
 * openat2 follow a symlink and demand a directory, as any walk does):
 * 0 when it is a directory, else the error Linux's walk gives. */
static int slash_walk(const struct at *t)
{
	int o = beneath(t->base, t->given, O_PATH | O_DIRECTORY, 0);
	if (o < 0)
		return wasi_errno(errno);
	close(o);
	return W_SUCCESS;
}

/* A new name given as "name/" to a call that makes no directory (link,
 * symlink): filename_create in fs/namei.c refuses it, EEXIST when the name
 * exists and ENOENT otherwise. */
static int slash_create_err(const struct at *t)
{
	struct stat st;
	return fstatat(t->dfd, t->last, &st, AT_SYMLINK_NOFOLLOW) == 0 ? W_EXIST : W_NOENT;
}

/* The last component itself, not followed (lstat). */
static int last_stat(const struct at *t, struct stat *st)
{
	return fstatat(t->dfd, t->last, st, AT_SYMLINK_NOFOLLOW) < 0 ? wasi_errno(errno) :
									 W_SUCCESS;
}

/* mkdirat and unlinkat(AT_REMOVEDIR) take "dir/" as dir (the name must
 * be, or become, a directory), so the cut slash changes nothing there. */
int wasi_path_create_directory(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	struct at t;
	TRY_W(at_open(w, m, (uint32_t)a[0], R_PATH_CREATE_DIRECTORY, (uint32_t)a[1], (uint32_t)a[2],
		      &t));
	int r = mkdirat(t.dfd, t.last, 0777) < 0 ? wasi_errno(errno) : W_SUCCESS;
	at_release(&t);
	return r;
}

int wasi_path_remove_directory(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	struct at t;
	TRY_W(at_open(w, m, (uint32_t)a[0], R_PATH_REMOVE_DIRECTORY, (uint32_t)a[1], (uint32_t)a[2],
		      &t));
	int r = unlinkat(t.dfd, t.last, AT_REMOVEDIR) < 0 ? wasi_errno(errno) : W_SUCCESS;
	at_release(&t);
	return r;
}

int wasi_path_unlink_file(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	struct at t;
	TRY_W(at_open(w, m, (uint32_t)a[0], R_PATH_UNLINK_FILE, (uint32_t)a[1], (uint32_t)a[2], &t));
	int r;
	struct stat st;
	if (t.slash) { /* do_unlinkat: ENOENT, EISDIR, else ENOTDIR; nothing removed */
		r = last_stat(&t, &st);
		if (r == W_SUCCESS)
			r = S_ISDIR(st.st_mode) ? W_ISDIR : W_NOTDIR;
	} else
		r = unlinkat(t.dfd, t.last, 0) < 0 ? wasi_errno(errno) : W_SUCCESS;
	at_release(&t);
	return r;
}

/* path_rename(fd, old_path, old_len, new_fd, new_path, new_len): both ends
 * beneath their descriptors, so nothing can be moved out. A trailing slash
 * on either end asks for a directory: do_renameat2 gives ENOTDIR when the
 * source (not followed) is something else. */
int wasi_path_rename(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	struct at s, d;
	TRY_W(at_open(w, m, (uint32_t)a[0], R_PATH_RENAME_SOURCE, (uint32_t)a[1], (uint32_t)a[2], &s));
	int r = at_open(w, m, (uint32_t)a[3], R_PATH_RENAME_TARGET, (uint32_t)a[4], (uint32_t)a[5], &d);
	if (r == W_SUCCESS) {
		struct stat st;
		if ((s.slash || d.slash) && (r = last_stat(&s, &st)) == W_SUCCESS &&
		    !S_ISDIR(st.st_mode))
			r = W_NOTDIR;
		if (r == W_SUCCESS)
			r = renameat(s.dfd, s.last, d.dfd, d.last) < 0 ? wasi_errno(errno) : W_SUCCESS;
		at_release(&d);
	}
	at_release(&s);
	return r;
}

/* path_link(old_fd, old_flags, old_path, old_len, new_fd, new_path,
 * new_len). Following the source's last component goes through openat2 and
 * links the opened object (linkat(2) AT_EMPTY_PATH), never a name resolved
 * by linkat itself. In do_linkat's order: the source is looked up first
 * ("name/" is walked as a directory, followed, whatever old_flags say),
 * then the new name is made (filename_create), then a directory is refused
 * (EPERM: no hard links to directories). */
int wasi_path_link(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	struct at s, d;
	TRY_W(at_open(w, m, (uint32_t)a[0], R_PATH_LINK_SOURCE, (uint32_t)a[2], (uint32_t)a[3], &s));
	int r = at_open(w, m, (uint32_t)a[4], R_PATH_LINK_TARGET, (uint32_t)a[5], (uint32_t)a[6], &d);
	if (r != W_SUCCESS) {
		at_release(&s);
		return r;
	}
	struct stat st;
	if (s.slash) {
		/* it names a directory (or fails as the walk does) */
		if ((r = slash_walk(&s)) == W_SUCCESS)
			r = d.slash ? slash_create_err(&d) : last_stat(&d, &st) == W_SUCCESS ? W_EXIST :
											  W_PERM;
	} else if (d.slash) {
		r = last_stat(&s, &st);
		if (r == W_SUCCESS)
			r = slash_create_err(&d);
	} else if ((uint32_t)a[1] & LOOKUP_SYMLINK_FOLLOW) {
		int o = beneath(s.base, s.given, O_PATH, 0);
		if (o < 0) {
			r = wasi_errno(errno);
		} else {
			r = linkat(o, "", d.dfd, d.last, AT_EMPTY_PATH) < 0 ? wasi_errno(errno) :
									       W_SUCCESS;
			close(o);
		}
	} else {
		r = linkat(s.dfd, s.last, d.dfd, d.last, 0) < 0 ? wasi_errno(errno) : W_SUCCESS;
	}
	at_release(&d);
	at_release(&s);
	return r;
}

/* path_symlink(old_path, old_len, fd, new_path, new_len). The target is
 * just text; an absolute one could only ever point out of the sandbox, so
 * it is refused here, and a relative one that climbs out is refused by
 * RESOLVE_BENEATH whenever it is followed. A new name "name/" is refused
 * as filename_create refuses it. */
int wasi_path_symlink(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	_cleanup_free_ char *target = NULL;
	TRY_W(guest_path(m, (uint32_t)a[0], (uint32_t)a[1], &target));
	struct at t;
	TRY_W(at_open(w, m, (uint32_t)a[2], R_PATH_SYMLINK, (uint32_t)a[3], (uint32_t)a[4], &t));
	int r;
	if (t.slash)
		r = slash_create_err(&t);
	else
		r = symlinkat(target, t.dfd, t.last) < 0 ? wasi_errno(errno) : W_SUCCESS;
	at_release(&t);
	return r;
}

/* path_readlink(fd, path, path_len, buf, buf_len, bufused). "name/" is
 * walked as a directory (followed), and a directory is no link: EINVAL. */
int wasi_path_readlink(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	uint8_t *buf = gmem(m, (uint32_t)a[3], (uint32_t)a[4]);
	if (!buf || !gmem(m, (uint32_t)a[5], 4))
		return W_FAULT;
	struct at t;
	TRY_W(at_open(w, m, (uint32_t)a[0], R_PATH_READLINK, (uint32_t)a[1], (uint32_t)a[2], &t));
	int r;
	if (t.slash) {
		r = slash_walk(&t);
		if (r == W_SUCCESS)
			r = W_INVAL;
	} else {
		ssize_t n = readlinkat(t.dfd, t.last, (char *)buf, (uint32_t)a[4]);
		r = n < 0 ? wasi_errno(errno) : put32(m, (uint32_t)a[5], (uint32_t)n);
	}
	at_release(&t);
	return r;
}

/* path_filestat_get(fd, flags, path, path_len, buf). */
int wasi_path_filestat_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	uint8_t *p = gmem(m, (uint32_t)a[4], 64);
	if (!p)
		return W_FAULT;
	int o;
	TRY_W(obj_open(w, m, (uint32_t)a[0], R_PATH_FILESTAT_GET, (uint32_t)a[1], (uint32_t)a[2],
		       (uint32_t)a[3], &o));
	struct stat st;
	int r = fstat(o, &st) < 0 ? wasi_errno(errno) : W_SUCCESS;
	if (r == W_SUCCESS)
		wasi_filestat_put(p, &st);
	close(o);
	return r;
}

/* path_filestat_set_times(fd, flags, path, path_len, atim, mtim, fstflags):
 * utimensat(2) on the opened object with AT_EMPTY_PATH (Linux 5.8+ takes
 * it; an O_PATH descriptor is not accepted with a NULL path). Without
 * symlink_follow the last component is changed itself, unless the path
 * ends in '/': then it is walked as a directory, as the kernel would. */
int wasi_path_filestat_set_times(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	struct timespec ts[2];
	TRY_W(wasi_times(a[4], a[5], (uint32_t)a[6], ts));
	uint32_t plen = (uint32_t)a[3];
	const uint8_t *pp = gmem(m, (uint32_t)a[2], plen);
	bool slash = pp && plen > 1 && pp[plen - 1] == '/';
	if (!((uint32_t)a[1] & LOOKUP_SYMLINK_FOLLOW) && !slash) {
		struct at t;
		TRY_W(at_open(w, m, (uint32_t)a[0], R_PATH_FILESTAT_SET_TIMES, (uint32_t)a[2],
			      (uint32_t)a[3], &t));
		int r = utimensat(t.dfd, t.last, ts, AT_SYMLINK_NOFOLLOW) < 0 ? wasi_errno(errno) :
										W_SUCCESS;
		at_release(&t);
		return r;
	}
	int o;
	TRY_W(obj_open(w, m, (uint32_t)a[0], R_PATH_FILESTAT_SET_TIMES, LOOKUP_SYMLINK_FOLLOW,
		       (uint32_t)a[2], (uint32_t)a[3], &o));
	int r = utimensat(o, "", ts, AT_EMPTY_PATH) < 0 ? wasi_errno(errno) : W_SUCCESS;
	close(o);
	return r;
}

/* path_open(fd, dirflags, path, path_len, oflags, rights_base,
 * rights_inheriting, fdflags, fd_out). The new descriptor's rights are the
 * ones asked for, which must lie within the directory's inheriting rights
 * (else NOTCAPABLE), narrowed to what its file type can use. */
int wasi_path_open(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	uint32_t dirflags = (uint32_t)a[1], oflags = (uint32_t)a[4], fdflags = (uint32_t)a[7];
	uint64_t base = a[5], inh = a[6];
	int e = W_BADF;
	uint64_t need = R_PATH_OPEN;
	if (oflags & OFL_CREAT)
		need |= R_PATH_CREATE_FILE;
	if (oflags & OFL_TRUNC)
		need |= R_PATH_FILESTAT_SET_SIZE;
	struct wasi_fd *d = dir_fd(w, (uint32_t)a[0], need, &e);
	if (!d)
		return e;
	if ((base & ~d->inheriting) || (inh & ~d->inheriting))
		return W_NOTCAPABLE;
	if (!gmem(m, (uint32_t)a[8], 4))
		return W_FAULT;
	if (oflags & ~0xfu)
		return W_INVAL;
	uint32_t slot;
	TRY_W(wasi_fd_alloc(w, &slot));
	_cleanup_free_ char *path = NULL;
	TRY_W(guest_path(m, (uint32_t)a[2], (uint32_t)a[3], &path));

	bool rd = base & (R_FD_READ | R_FD_READDIR);
	bool wr = base & (R_FD_DATASYNC | R_FD_WRITE | R_FD_ALLOCATE | R_FD_FILESTAT_SET_SIZE);
	uint64_t fl = wr ? (rd ? O_RDWR : O_WRONLY) : O_RDONLY;
	if (oflags & OFL_CREAT)
		fl |= O_CREAT;
	if (oflags & OFL_EXCL)
		fl |= O_EXCL;
	if (oflags & OFL_TRUNC)
		fl |= O_TRUNC;
	if (oflags & OFL_DIRECTORY)
		fl |= O_DIRECTORY;
	if (fdflags & FDFL_APPEND)
		fl |= O_APPEND;
	if (fdflags & FDFL_DSYNC)
		fl |= O_DSYNC;
	if (fdflags & FDFL_SYNC)
		fl |= O_SYNC;
	if (fdflags & FDFL_RSYNC)
		fl |= O_RSYNC;
	if (!(dirflags & LOOKUP_SYMLINK_FOLLOW))
		fl |= O_NOFOLLOW;
	/* Never block in open on a FIFO; the flag is put back below. */
	int h = beneath(d->host, path, fl | O_NONBLOCK, 0666);
	if (h < 0)
		return wasi_errno(errno);
	struct stat st;
	if (fstat(h, &st) < 0) {
		e = wasi_errno(errno);
		close(h);
		return e;
	}
	/* Device nodes in a workspace are not the module's to use. */
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		close(h);
		return W_ACCES;
	}
	if (!(fdflags & FDFL_NONBLOCK)) {
		int cur = fcntl(h, F_GETFL);
		if (cur >= 0)
			fcntl(h, F_SETFL, cur & ~O_NONBLOCK);
	}
	struct wasi_fd *f = &w->fds[slot];
	memset(f, 0, sizeof(*f));
	f->used = true;
	f->host = h;
	f->type = wasi_filetype(st.st_mode);
	f->flags = (uint16_t)fdflags;
	if (f->type == FT_DIRECTORY) {
		f->base = base & R_DIR_BASE;
		f->inheriting = inh & (R_DIR_BASE | R_FILE_BASE);
	} else {
		f->base = base & R_FILE_BASE;
		f->inheriting = 0;
	}
	return put32(m, (uint32_t)a[8], slot);
}

/* fd_readdir(fd, buf, buf_len, cookie, bufused): dirent (24 bytes): d_next@0,
 * d_ino@8, d_namlen@16 u32, d_type@20 u8, then the name. The cookie is the
 * kernel's directory offset (getdents64(2) d_off, lseek(2) on a directory);
 * the last entry is cut at buf_len, which tells libc to ask again with a
 * larger buffer. */
struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static uint8_t dt_type(unsigned char t)
{
	switch (t) {
	case DT_REG: return FT_REGULAR_FILE;
	case DT_DIR: return FT_DIRECTORY;
	case DT_LNK: return FT_SYMBOLIC_LINK;
	case DT_CHR: return FT_CHARACTER_DEVICE;
	case DT_BLK: return FT_BLOCK_DEVICE;
	case DT_SOCK: return FT_SOCKET_STREAM;
	default: return FT_UNKNOWN;
	}
}

int wasi_fd_readdir(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = dir_fd(w, (uint32_t)a[0], R_FD_READDIR, &e);
	if (!f)
		return e;
	uint32_t cap = (uint32_t)a[2];
	uint8_t *out = gmem(m, (uint32_t)a[1], cap);
	if (!out || !gmem(m, (uint32_t)a[4], 4))
		return W_FAULT;
	if (a[3] > INT64_MAX)
		return W_INVAL;
	if (lseek(f->host, (off_t)a[3], SEEK_SET) < 0)
		return wasi_errno(errno);
	uint32_t used = 0;
	_Alignas(8) char buf[8192];
	while (used < cap) {
		long n = syscall(SYS_getdents64, f->host, buf, sizeof(buf));
		if (n < 0)
			return wasi_errno(errno);
		if (n == 0)
			break;
		for (long off = 0; off < n && used < cap;) {
			struct linux_dirent64 *de = (struct linux_dirent64 *)(void *)(buf + off);
			off += de->d_reclen;
			uint8_t hdr[24] = {0};
			size_t nl = strlen(de->d_name);
			st64(hdr, (uint64_t)de->d_off);
			st64(hdr + 8, de->d_ino);
			st32(hdr + 16, (uint32_t)nl);
			hdr[20] = dt_type(de->d_type);
			uint32_t k = cap - used < 24 ? cap - used : 24;
			memcpy(out + used, hdr, k);
			used += k;
			k = cap - used < nl ? cap - used : (uint32_t)nl;
			memcpy(out + used, de->d_name, k);
			used += k;
		}
	}
	return put32(m, (uint32_t)a[4], used);
}
