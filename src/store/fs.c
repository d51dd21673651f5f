/* SPDX-License-Identifier: MIT */
/* The bottom of the store: descriptor-relative helpers (open, mkdir,
 * flock, small files, a workspace's meta), the temporary names under the
 * shared lock, and the reflink/overlay probes. Every other store file uses
 * these; this one uses none of them. */
#include "store_internal.h"
#include "store/locks.h"
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include "kis/id.h"
#include "core/tree.h"

int store_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
		/* openat2 refuses a mode without O_CREAT or O_TMPFILE (whose
		 * bits include O_DIRECTORY's, hence the full comparison). */
		.mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0,
		/* The kernel refuses, rather than resolves, any symlink on the
		 * way and any escape from dirfd: a planted link is not followed. */
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	static int have_openat2 = 1;
	if (__atomic_load_n(&have_openat2, __ATOMIC_RELAXED)) {
		long fd = RETRY_EINTR(syscall(SYS_openat2, dirfd, path, &how, sizeof(how)));
		if (fd >= 0 || errno != ENOSYS)
			return (int)fd;
		__atomic_store_n(&have_openat2, 0, __ATOMIC_RELAXED);
	}
	/* Pre-5.6 kernels: every caller passes a single component, for which
	 * O_NOFOLLOW is the same guarantee. */
	if (strchr(path, '/')) {
		errno = EXDEV;
		return -1;
	}
	return (int)RETRY_EINTR(openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW, mode));
}

int store_opendir(int dirfd, const char *name)
{
	return store_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
}

int store_mkdir_p1(int dirfd, const char *name, mode_t mode)
{
	if (mkdirat(dirfd, name, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -1;
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

int store_flock(int fd, int op)
{
	return (int)RETRY_EINTR(flock(fd, op));
}

/* The descriptors of store_mktemp_locked and store_mkfile_locked while
 * they are open, for kis_store_locks_drop (store/locks.h). A slot holds
 * fd + 1, 0 when free; a number is put in after its flock is taken and
 * taken out before its close(2), so a fork of any thread at any moment
 * finds on it only descriptors that are locks. The list full (a process
 * holding 64 such locks at once), a lock is not listed and a forked child
 * keeps it as it would without the list. */
#define STORE_LOCKS_MAX 64
static int store_locks[STORE_LOCKS_MAX];

static void lock_list(int fd)
{
	for (size_t i = 0; i < STORE_LOCKS_MAX; i++) {
		int free_slot = 0;
		if (__atomic_compare_exchange_n(&store_locks[i], &free_slot, fd + 1, false,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return;
	}
}

void store_lock_close(int fd)
{
	if (fd < 0)
		return;
	for (size_t i = 0; i < STORE_LOCKS_MAX; i++) {
		int mine = fd + 1;
		if (__atomic_compare_exchange_n(&store_locks[i], &mine, 0, false, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			break;
	}
	close(fd);
}

void kis_store_locks_drop(void)
{
	for (size_t i = 0; i < STORE_LOCKS_MAX; i++) {
		int v = __atomic_exchange_n(&store_locks[i], 0, __ATOMIC_SEQ_CST);
		if (v > 0)
			close(v - 1);
	}
}

int store_rand_suffix(char buf[9], struct kis_error **err)
{
	char id[KIS_ID_BUFSZ];
	TRY(kis_id_mint('r', id, err));
	memcpy(buf, id + 2, 8);
	buf[8] = '\0';
	return 0;
}

void store_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

DIR *store_dir_stream(int dirfd)
{
	/* The dup shares the file offset with dirfd: rewind so that a fd
	 * read before is read again from its start. */
	int dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0)
		return NULL;
	DIR *d = fdopendir(dfd);
	if (!d) {
		int saved = errno;
		close(dfd);
		errno = saved;
		return NULL;
	}
	rewinddir(d);
	return d;
}

int store_write_file(int dirfd, const char *name, const char *data, struct kis_error **err)
{
	_cleanup_close_ int fd = store_openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", name);
	size_t len = strlen(data), off = 0;
	while (off < len) {
		ssize_t n = RETRY_EINTR(write(fd, data + off, len - off));
		if (n < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", name);
		off += (size_t)n;
	}
	return 0;
}

int store_read_file(int dirfd, const char *name, char **out, struct kis_error **err)
{
	_cleanup_close_ int fd = store_openat(dirfd, name, O_RDONLY, 0);
	if (fd < 0)
		return kis_error_set(err, errno == ENOENT ? KIS_E_NOT_FOUND : KIS_E_INTERNAL, errno,
				     "cannot open '%s'", name);
	char buf[512];
	size_t len = 0;
	for (;;) {
		ssize_t n = RETRY_EINTR(read(fd, buf + len, sizeof(buf) - 1 - len));
		if (n < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read '%s'", name);
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf) - 1)
			return kis_error_set(err, KIS_E_INTERNAL, 0, "'%s' is too long", name);
	}
	buf[len] = '\0';
	*out = strdup(buf);
	if (!*out)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

int store_ws_meta(int ws_dir_fd, char base[KIS_ID_BUFSZ], enum kis_clone_strategy *st,
		  struct kis_error **err)
{
	_cleanup_free_ char *text = NULL;
	TRY(store_read_file(ws_dir_fd, "meta", &text, err));
	char b[KIS_ID_BUFSZ + 1] = "", s[16] = "";
	if (sscanf(text, "base=%65[a-z0-9-]\nstrategy=%15[a-z]\n", b, s) != 2)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "workspace meta is malformed");
	TRY(kis_id_validate(b, "base id", err));
	memcpy(base, b, strlen(b) + 1);
	if (st)
		TRY(kis_clone_strategy_parse(s, st, err));
	return 0;
}

const char *kis_clone_strategy_name(enum kis_clone_strategy st)
{
	switch (st) {
	case KIS_CLONE_AUTO:
		return "auto";
	case KIS_CLONE_REFLINK:
		return "reflink";
	case KIS_CLONE_OVERLAY:
		return "overlay";
	case KIS_CLONE_COPY:
		return "copy";
	default:
		return "unknown";
	}
}

int kis_clone_strategy_parse(const char *name, enum kis_clone_strategy *out,
			     struct kis_error **err)
{
	static const enum kis_clone_strategy all[] = {KIS_CLONE_AUTO, KIS_CLONE_REFLINK,
						     KIS_CLONE_OVERLAY, KIS_CLONE_COPY};
	for (size_t i = 0; name && i < ARRAY_SIZE(all); i++)
		if (!strcmp(name, kis_clone_strategy_name(all[i]))) {
			*out = all[i];
			return 0;
		}
	return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
			     "unknown clone strategy '%s'; use auto, reflink, overlay or copy",
			     name ? name : "");
}

/* ---- Probe ---------------------------------------------------------- */

static bool probe_reflink(struct kis_store *s)
{
	/* O_TMPFILE: nameless files on the store's filesystem, gone on close. */
	_cleanup_close_ int a = store_openat(s->bases_fd, ".", O_TMPFILE | O_RDWR, 0600);
	_cleanup_close_ int b = store_openat(s->bases_fd, ".", O_TMPFILE | O_RDWR, 0600);
	if (a < 0 || b < 0)
		return false;
	char block[4096];
	memset(block, 'k', sizeof(block));
	if (RETRY_EINTR(write(a, block, sizeof(block))) != (long)sizeof(block))
		return false;
	/* FICLONE shares the extents: EOPNOTSUPP on ext4, works on btrfs and
	 * on xfs made with reflink=1. */
	return ioctl(b, FICLONE, a) == 0;
}

int store_mktemp_locked(struct kis_store *s, int dirfd, const char *name)
{
	/* Shared store lock across mkdir + flock: the sweep takes it
	 * exclusively, so it never sees this temporary unlocked and mistakes
	 * it for the leftover of a dead command. */
	if (store_flock(s->lock_fd, LOCK_SH) < 0)
		return -1;
	int t = -1;
	if (mkdirat(dirfd, name, 0700) == 0) {
		t = store_opendir(dirfd, name);
		if (t >= 0 && store_flock(t, LOCK_EX) < 0) {
			close(t);
			t = -1;
		}
	}
	if (t >= 0)
		lock_list(t);
	int saved = errno;
	(void)store_flock(s->lock_fd, LOCK_UN);
	errno = saved;
	return t;
}

int store_mkfile_locked(struct kis_store *s, int dirfd, const char *name)
{
	/* as store_mktemp_locked: created and locked under the shared store
	 * lock, so the sweep never finds it unlocked */
	if (store_flock(s->lock_fd, LOCK_SH) < 0)
		return -1;
	int t = store_openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_APPEND, 0600);
	if (t >= 0 && store_flock(t, LOCK_EX) < 0) {
		int e = errno;
		(void)unlinkat(dirfd, name, 0);
		close(t);
		errno = e;
		t = -1;
	}
	if (t >= 0)
		lock_list(t);
	int saved = errno;
	(void)store_flock(s->lock_fd, LOCK_UN);
	errno = saved;
	return t;
}

int store_open_owner(int owners_fd, const char *name)
{
	/* a file (this layout) or, from a store an older build wrote, a
	 * directory holding `records`: either opens read-only and flocks */
	return store_openat(owners_fd, name, O_RDONLY, 0);
}

bool store_can_reflink(struct kis_store *s)
{
	if (s->can_reflink < 0)
		s->can_reflink = probe_reflink(s);
	return s->can_reflink > 0;
}

