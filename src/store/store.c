/* SPDX-License-Identifier: MIT */
/* The store root: where it is, opening it (which sweeps: sweep.c) and its
 * directory fds. */
#include "store_internal.h"
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

int kis_store_cow_strategy(struct kis_store *s, const char **name)
{
	const char *n = store_can_reflink(s)	 ? "reflink"
			: store_can_overlay(s) ? "overlay"
					       : "copy";
	if (name)
		*name = n;
	return strcmp(n, "copy") ? 1 : 0;
}

/* ---- Open ----------------------------------------------------------- */

/* The store's root is the caller's path (a profile's store root, the
 * CLI's --store-root or $KIS_SANDBOX_ROOT): a root that cannot be made,
 * entered or opened for one of these reasons is the caller's mistake to
 * fix (invalid_argument, README "Errors"), any other is the engine's. */
static enum kis_errc root_code(int e)
{
	return e == ENOENT || e == ENOTDIR || e == EACCES || e == EPERM || e == EROFS ||
			       e == EEXIST || e == ELOOP || e == ENAMETOOLONG
		       ? KIS_E_INVALID_ARGUMENT
		       : KIS_E_INTERNAL;
}
#define root_error(err, e, ...) kis_error_set(err, root_code(e), e, __VA_ARGS__)

static int mkdir_parents(const char *path, struct kis_error **err)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	for (char *c = p + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return root_error(err, errno, "cannot create store directory '%s'", p);
		*c = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return root_error(err, errno, "cannot create store root '%s'", p);
	return 0;
}

int kis_store_default_root(char **out, struct kis_error **err)
{
	const char *env = getenv("KIS_SANDBOX_ROOT");
	int r;
	if (env && *env)
		r = asprintf(out, "%s", env);
	else if (geteuid() == 0)
		r = asprintf(out, "/var/lib/kis/sandbox");
	else {
		const char *xdg = getenv("XDG_STATE_HOME");
		const char *home = getenv("HOME");
		if (xdg && *xdg == '/')
			r = asprintf(out, "%s/kis/sandbox", xdg);
		else if (home && *home == '/')
			r = asprintf(out, "%s/.local/state/kis/sandbox", home);
		else
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "no store root: set KIS_SANDBOX_ROOT or HOME, or pass --store-root");
	}
	if (r < 0) {
		*out = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

/* The engine as root works in the store by path as well as by fd (mount
 * targets, overlay layers, the paths handed to bwrap and crun). A store
 * that another user owns, or a directory on the way to it that another
 * user may change, would let that user swap a component for a symlink
 * between our check and our use, and move a root mount or a root write
 * onto a host path of their choosing. So, as sshd's StrictModes does:
 * every directory from / to the root is root's, and writable by no one
 * else, a sticky one (/tmp) excepted on the way, where only the owner of an
 * entry may rename or remove it (unlink(2), EPERM). */
static bool initial_userns(void)
{
	/* the initial namespace maps the whole range (user_namespaces(7));
	 * root of a namespace of an ordinary user's holds no more than that
	 * user, and sees the host's root-owned directories as the overflow id */
	char b[64] = "";
	FILE *f = fopen("/proc/self/uid_map", "re");
	if (!f)
		return true;
	size_t n = fread(b, 1, sizeof(b) - 1, f);
	fclose(f);
	b[n] = '\0';
	unsigned long a = 1, c = 1, l = 0;
	return sscanf(b, "%lu %lu %lu", &a, &c, &l) == 3 && a == 0 && c == 0 && l == 4294967295ul;
}

/* What is wrong with one directory on the way to a root engine's store,
 * or NULL: st is the component itself, never a link's target. */
static const char *root_dir_fault(const struct stat *st, bool top)
{
	if (S_ISLNK(st->st_mode))
		return "a symbolic link, and the engine as root follows none on the way to "
		       "its store";
	if (!S_ISDIR(st->st_mode))
		return "not a directory";
	if (st->st_uid != 0)
		return "owned by another user";
	if ((st->st_mode & 022) && (top || !(st->st_mode & S_ISVTX)))
		return "writable by others";
	return NULL;
}

/* The walk from / to a root engine's store root, one component at a time
 * with no link followed (O_PATH | O_NOFOLLOW, then fstat of what was
 * opened: a link is opened as itself, never as its target), each checked
 * before the next is made. KIS_SANDBOX_ROOT=/tmp/u/lnk/kisstore with a
 * user's lnk -> /etc made /etc/kisstore, and a refused root had already
 * been made in the user's directory (issue 40 item 11): now nothing is
 * made until every component up to it has passed. '.' and empty
 * components are skipped; '..' is refused (it would climb out of a
 * checked directory by name). *canon receives the path walked. */
static int root_store_walk(const char *root, char **canon, struct kis_error **err)
{
	_cleanup_free_ char *p = strdup(root);
	_cleanup_free_ char *walked = calloc(1, strlen(root) + 2);
	if (!p || !walked)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	_cleanup_close_ int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '/'");
	struct stat st;
	const char *fault = fstat(dir, &st) < 0 ? "unreadable" : root_dir_fault(&st, false);
	if (fault)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "store root '%s': '/' is %s",
				     root, fault);
	char *save = NULL;
	char *c = strtok_r(p, "/", &save);
	while (c) {
		char *next = strtok_r(NULL, "/", &save);
		if (!strcmp(c, ".")) {
			c = next;
			continue;
		}
		if (!strcmp(c, ".."))
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "store root '%s': '..' is not taken in a root engine's "
					     "store root: give the path without it",
					     root);
		strcat(walked, "/");
		strcat(walked, c);
		bool top = next == NULL;
		int fd = openat(dir, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			/* its parent passed: root's, and no one else may add
			 * to it but in a sticky directory, where an entry made
			 * first by another is seen below as theirs */
			if (mkdirat(dir, c, top ? 0700 : 0755) < 0 && errno != EEXIST)
				return root_error(err, errno, "cannot create store directory '%s'",
						  walked);
			fd = openat(dir, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0)
			return root_error(err, errno, "cannot check '%s'", walked);
		close(dir);
		dir = fd;
		fault = fstat(dir, &st) < 0 ? "unreadable" : root_dir_fault(&st, top);
		if (fault)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "store root '%s': '%s' is %s; the engine as root uses "
					     "only a store that root owns and no one else may change "
					     "(chown it to root, mode 0700, or pick another store "
					     "root)",
					     root, walked, fault);
		c = next;
	}
	if (!walked[0])
		strcpy(walked, "/");
	*canon = steal_ptr(walked);
	return 0;
}

int store_open_with(const char *root, bool sweep, store_reap_fn reap, struct kis_store **out,
		    struct kis_error **err)
{
	_cleanup_free_ char *want = NULL;
	if (root && *root) {
		want = strdup(root);
		if (!want)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	} else {
		TRY(kis_store_default_root(&want, err));
	}
	if (want[0] != '/') {
		/* Relative roots are resolved once, here, against the cwd. */
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot get the working directory");
		char *abs = NULL;
		if (asprintf(&abs, "%s/%s", cwd, want) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
		free(want);
		want = abs;
	}
	/* an ordinary user's store is its own: its links are its own to
	 * follow; as root, nothing is followed and nothing made unchecked */
	bool as_root = geteuid() == 0 && initial_userns();
	_cleanup_free_ char *walked = NULL;
	if (as_root)
		TRY(root_store_walk(want, &walked, err));
	else
		TRY(mkdir_parents(want, err));
	struct kis_store *s = calloc(1, sizeof(*s));
	if (!s)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	s->root_fd = s->bases_fd = s->ws_fd = s->sessions_fd = s->owners_fd = s->lock_fd = -1;
	s->can_reflink = s->can_overlay = -1;
	s->reap = reap;
	s->root = as_root ? steal_ptr(walked) : realpath(want, NULL);
	if (!s->root) {
		root_error(err, errno, "cannot resolve store root '%s'", want);
		goto fail;
	}
	/* An earlier build opened a root engine's store to every local user
	 * (search only) for landlock's unprivileged user, which let them walk
	 * to a setuid file a sandbox's root had made in a workspace. Closed
	 * here, by any verb; landlock opens it to a group of its own instead
	 * (src/backends/host/common.c, kis_host_make_reachable). */
	struct stat rst;
	if (geteuid() == 0 && initial_userns() && stat(s->root, &rst) == 0 &&
	    (rst.st_mode & S_IRWXO) && chmod(s->root, rst.st_mode & 07770) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot close store root '%s' to others",
			      s->root);
		goto fail;
	}
	s->root_fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->root_fd < 0) {
		root_error(err, errno, "cannot open store root '%s'", s->root);
		goto fail;
	}
	static const char *const dirs[] = {"bases", "workspaces", "sessions", "owners"};
	int *fds[] = {&s->bases_fd, &s->ws_fd, &s->sessions_fd, &s->owners_fd};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (store_mkdir_p1(s->root_fd, dirs[i], 0700) < 0 ||
		    (*fds[i] = store_opendir(s->root_fd, dirs[i])) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno,
				      "cannot open '%s' in store '%s' (a symlink there is refused)",
				      dirs[i], s->root);
			goto fail;
		}
	}
	s->lock_fd = store_openat(s->root_fd, ".lock", O_RDWR | O_CREAT, 0600);
	if (s->lock_fd < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open lock of store '%s'", s->root);
		goto fail;
	}
	if (sweep)
		store_sweep(s);
	*out = s;
	return 0;
fail:
	kis_store_free(s);
	return -1;
}

/* kis_store_open, which sweeps and so needs the engine's reaper of dead
 * owners, is the engine's (engine/owner.c). */
int kis_store_open_again(const char *root, struct kis_store **out, struct kis_error **err)
{
	return store_open_with(root, false, NULL, out, err);
}

int store_gc(const char *root, store_reap_fn reap, bool dry_run, kis_gc_fn fn, void *ctx,
	     struct kis_error **err)
{
	struct kis_store *s = NULL;
	TRY(store_open_with(root, false, reap, &s, err));
	int failed = store_sweep_ex(s, true, dry_run, fn, ctx);
	kis_store_free(s);
	return failed;
}

void kis_store_free(struct kis_store *s)
{
	if (!s)
		return;
	int fds[] = {s->root_fd, s->bases_fd, s->ws_fd, s->sessions_fd, s->owners_fd, s->lock_fd};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(s->root);
	free(s);
}

const char *kis_store_root(const struct kis_store *s)
{
	return s ? s->root : NULL;
}
