/* SPDX-License-Identifier: MIT */
/* The one tree remover (tree.h). A sandbox writes the trees the engine
 * later removes (a workspace, a private directory, a bundle), so the tree
 * is hostile input: it may be deeper than any stack or descriptor limit,
 * hold symlinks to the host, directories made unreadable, or a mount.
 *
 * The walk is iterative and holds one directory descriptor at a time: it
 * goes down with openat(O_NOFOLLOW | O_DIRECTORY) and up with ".." (which
 * the kernel resolves to the real parent, never a link), checked against
 * the (st_dev, st_ino) it recorded on the way down, so a directory moved
 * out of the tree meanwhile stops the walk instead of leading it out. A
 * directory on another device is another mount: never entered. Symlinks
 * and other files are unlinked as themselves (unlinkat(2) never follows). */
#include "core/util.h"

#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "core/tree.h"

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000 /* linux/stat.h, Linux 5.8 */
#endif

/* A directory that is the root of a mount: a bind of the same file system
 * has the same st_dev as its parent, so st_dev alone would let the remover
 * delete through it (statx(2), STATX_ATTR_MOUNT_ROOT). */
static bool mount_root(int fd)
{
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0, &sx) < 0)
		return false;
	return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	       (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

struct level {
	ino_t ino;
	char *name; /* its name in the parent level */
};

/* Open name under dfd as a directory we may empty: not a link, made
 * searchable and writable for its owner first when it was not. */
static int open_dir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES &&
	    fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		(void)fchmod(fd, 0700);
	return fd;
}

/* Remove what can be removed of directory fd's entries. Returns 1 with
 * *sub the first subdirectory left to empty (opened, its name in *subname),
 * 0 when fd is empty, < 0 on failure. */
static int sweep_dir(int fd, dev_t dev, const char *what, int *sub, char **subname,
		     struct kis_error **err)
{
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	if (!d) {
		if (dup >= 0)
			close(dup);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read '%s'", what);
	}
	rewinddir(d);
	int r = 0;
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e) {
			if (errno)
				r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read '%s'", what);
			break;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(fd, e->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot remove '%s' in '%s'",
					  e->d_name, what);
			break;
		}
		int s = open_dir(fd, e->d_name);
		if (s < 0) {
			if (errno == ENOENT)
				continue;
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s' in '%s'",
					  e->d_name, what);
			break;
		}
		struct stat st;
		bool mnt = false;
		if (fstat(s, &st) < 0 || (mnt = st.st_dev != dev || mount_root(s))) {
			int en = errno;
			close(s);
			/* another mount (a live overlay, a bind): never delete
			 * through it, what lies under it may be someone's base */
			r = mnt ?
				kis_error_set(err, KIS_E_BUSY, 0,
					      "'%s' in '%s' is a mount point; unmount it first",
					      e->d_name, what) :
				kis_error_set(err, KIS_E_INTERNAL, en, "cannot stat '%s'", e->d_name);
			break;
		}
		*subname = strdup(e->d_name);
		if (!*subname) {
			close(s);
			r = kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
			break;
		}
		*sub = s;
		r = 1;
		break;
	}
	closedir(d);
	return r;
}

int kis_tree_remove(int dfd, const char *name, struct kis_error **err)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot remove '%s'", name);
	int cur = open_dir(dfd, name);
	if (cur < 0)
		return errno == ENOENT ? 0 :
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", name);
	struct stat st;
	if (fstat(cur, &st) < 0) {
		int e = errno;
		close(cur);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot stat '%s'", name);
	}
	const dev_t dev = st.st_dev;
	struct level *stack = NULL;
	size_t depth = 0, cap = 0;
	int r = 0;
	for (;;) {
		int sub = -1;
		char *subname = NULL;
		r = sweep_dir(cur, dev, depth ? stack[depth - 1].name : name, &sub, &subname, err);
		if (r < 0)
			break;
		if (r == 1) {
			/* down: remember where we were, by identity, not by name */
			if (depth == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct level *ns = realloc(stack, ncap * sizeof(*ns));
				if (!ns) {
					free(subname);
					close(sub);
					r = kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
					break;
				}
				stack = ns;
				cap = ncap;
			}
			if (fstat(cur, &st) < 0) {
				int e = errno;
				free(subname);
				close(sub);
				r = kis_error_set(err, KIS_E_INTERNAL, e, "cannot stat '%s'", name);
				break;
			}
			stack[depth++] = (struct level){.ino = st.st_ino, .name = subname};
			close(cur);
			cur = sub;
			continue;
		}
		/* cur is empty */
		if (depth == 0)
			break;
		int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct level *lv = &stack[depth - 1];
		if (up < 0 || fstat(up, &st) < 0 || st.st_dev != dev || st.st_ino != lv->ino) {
			if (up >= 0)
				close(up);
			r = kis_error_set(err, KIS_E_BUSY, 0,
					  "'%s' was moved while it was being removed: try again",
					  lv->name);
			break;
		}
		close(cur);
		cur = up;
		if (unlinkat(cur, lv->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot remove directory '%s'",
					  lv->name);
			break;
		}
		free(lv->name);
		depth--;
	}
	close(cur);
	for (size_t i = 0; i < depth; i++)
		free(stack[i].name);
	free(stack);
	if (r < 0)
		return -1;
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot remove directory '%s'", name);
	return 0;
}

void kis_tree_remove_quiet(int dfd, const char *name)
{
	struct kis_error *err = NULL;
	(void)kis_tree_remove(dfd, name, &err);
	kis_error_free(err);
}

void kis_tree_remove_path(const char *path)
{
	if (path)
		kis_tree_remove_quiet(AT_FDCWD, path);
}
