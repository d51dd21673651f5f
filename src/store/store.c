/* SPDX-License-Identifier: MIT */
/* The store root: where it is, its directory fds, fd-relative helpers,
 * tree removal, the reflink/overlay probe and the sweep of leftovers. */
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
	int saved = errno;
	(void)store_flock(s->lock_fd, LOCK_UN);
	errno = saved;
	return t;
}

static bool probe_overlay(struct kis_store *s)
{
	/* Probe under workspaces/ with a temporary's name and lock: if we are
	 * killed with the probe mounted, the sweep unmounts and removes it
	 * like any dead clone. */
	char sfx[9], name[32];
	if (store_rand_suffix(sfx, NULL) < 0)
		return false;
	snprintf(name, sizeof(name), STORE_TMP_PREFIX "probe-%s", sfx);
	_cleanup_close_ int d = store_mktemp_locked(s, s->ws_fd, name);
	if (d < 0)
		return false;
	static const char *const sub[] = {"lower", "upper", "work", "merged"};
	int fds[4] = {-1, -1, -1, -1};
	for (size_t i = 0; i < 4; i++)
		if (mkdirat(d, sub[i], 0700) == 0)
			fds[i] = store_opendir(d, sub[i]);
	bool ok = fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && fds[3] >= 0 &&
		  store_overlay_mount(fds[0], fds[1], fds[2], fds[3], NULL) == 0;
	for (size_t i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Unmounts merged (no meta: no reference to drop) and removes it. */
	(void)store_release_workspace(s, name, NULL);
	return ok;
}

bool store_can_reflink(struct kis_store *s)
{
	if (s->can_reflink < 0)
		s->can_reflink = probe_reflink(s);
	return s->can_reflink > 0;
}

bool store_can_overlay(struct kis_store *s)
{
	if (s->can_overlay < 0)
		s->can_overlay = probe_overlay(s);
	return s->can_overlay > 0;
}

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
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot create store directory '%s'", p);
		*c = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create store root '%s'",
				     p);
	return 0;
}

static int default_root(char **out, struct kis_error **err)
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

static int store_open_impl(const char *root, bool sweep, struct kis_store **out,
			   struct kis_error **err)
{
	_cleanup_free_ char *want = NULL;
	if (root && *root) {
		want = strdup(root);
		if (!want)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	} else {
		TRY(default_root(&want, err));
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
	TRY(mkdir_parents(want, err));
	struct kis_store *s = calloc(1, sizeof(*s));
	if (!s)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	s->root_fd = s->bases_fd = s->ws_fd = s->sessions_fd = s->owners_fd = s->lock_fd = -1;
	s->can_reflink = s->can_overlay = -1;
	s->root = realpath(want, NULL);
	if (!s->root) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot resolve store root '%s'", want);
		goto fail;
	}
	s->root_fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->root_fd < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open store root '%s'", s->root);
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

int kis_store_open(const char *root, struct kis_store **out, struct kis_error **err)
{
	return store_open_impl(root, true, out, err);
}

int store_open_nosweep(const char *root, struct kis_store **out, struct kis_error **err)
{
	return store_open_impl(root, false, out, err);
}

int store_gc(const char *root, bool dry_run, kis_gc_fn fn, void *ctx, struct kis_error **err)
{
	struct kis_store *s = NULL;
	TRY(store_open_nosweep(root, &s, err));
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

/* ---- Sweep ---------------------------------------------------------- */

struct dead {
	char name[KIS_ID_BUFSZ + 32];
	int fd; /* flocked */
};

/* Collect entries of dirfd that start with a temporary or trash prefix and
 * whose flock we can take: their owner is gone (the kernel released its
 * lock when it died). Called with ROOT/.lock held exclusively, so no
 * owner is between mkdir and flock. */
static size_t collect_dead(int dirfd, bool owners, struct dead *out, size_t max)
{
	_cleanup_dir_ DIR *d = store_dir_stream(dirfd);
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while (n < max && (e = readdir(d))) {
		if (owners ? kis_id_validate(e->d_name, "sandbox id", NULL) < 0 :
			     strncmp(e->d_name, STORE_TMP_PREFIX, strlen(STORE_TMP_PREFIX)) &&
				     strncmp(e->d_name, STORE_TRASH_PREFIX, strlen(STORE_TRASH_PREFIX)))
			continue;
		size_t len = strlen(e->d_name);
		if (len >= sizeof(out[n].name))
			continue;
		int fd = store_opendir(dirfd, e->d_name);
		if (fd < 0)
			continue;
		if (store_flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd);
			continue;
		}
		memcpy(out[n].name, e->d_name, len + 1);
		out[n].fd = fd;
		n++;
	}
	return n;
}

/* Bases marked removed that no clone holds any more (a command died
 * between dropping the last reference and freeing the base). */
static void sweep_removed_bases(struct kis_store *s)
{
	_cleanup_dir_ DIR *d = store_dir_stream(s->bases_fd);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || kis_id_validate(e->d_name, "base id", NULL) < 0)
			continue;
		_cleanup_close_ int b = store_opendir(s->bases_fd, e->d_name);
		if (b < 0)
			continue;
		struct stat st;
		if (fstatat(b, "removed", &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (store_flock(b, LOCK_EX | LOCK_NB) < 0)
			continue;
		if (store_base_refcount(b) == 0)
			(void)store_base_free_locked(s, e->d_name, NULL);
	}
}

static void gc_report(kis_gc_fn fn, void *ctx, const char *kind, const char *what, int done,
		      struct kis_error *e, int *failed)
{
	if (done < 0)
		(*failed)++;
	if (fn) {
		struct kis_gc_item it = {.kind = kind, .what = what, .done = done,
					 .error = e && e->message ? e->message : NULL};
		fn(ctx, &it);
	}
	kis_error_free(e);
}

static const char *tmp_kind(const char *name)
{
	return strncmp(name, STORE_TMP_PREFIX, strlen(STORE_TMP_PREFIX)) ? "trash" : "clone";
}

int store_sweep_ex(struct kis_store *s, bool wait, bool dry_run, kis_gc_fn fn, void *ctx)
{
	enum { MAX_DEAD = 64 };
	struct dead ws[MAX_DEAD], bases[MAX_DEAD], owners[MAX_DEAD];
	int failed = 0;
	if (store_flock(s->lock_fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) < 0)
		return 0; /* a command is creating a temporary: sweep next time */
	size_t nws = collect_dead(s->ws_fd, false, ws, MAX_DEAD);
	size_t nb = collect_dead(s->bases_fd, false, bases, MAX_DEAD);
	size_t no = collect_dead(s->owners_fd, true, owners, MAX_DEAD);
	(void)store_flock(s->lock_fd, LOCK_UN);
	/* The flocks taken above keep a second sweeper away while we work.
	 * Dead owners first: their workspace goes through destroy, which
	 * leaves trash for the loops below only if it fails. */
	for (size_t i = 0; i < no; i++) {
		if (store_owner_reap(s, owners[i].name, owners[i].fd, dry_run, fn, ctx) < 0)
			failed++;
		close(owners[i].fd);
	}
	for (size_t i = 0; i < nws; i++) {
		struct kis_error *e = NULL;
		int done = dry_run ? 0 : store_release_workspace(s, ws[i].name, &e) < 0 ? -1 : 1;
		/* the overlay probe is ours, not a user's leftover: not listed */
		if (strncmp(ws[i].name, STORE_TMP_PREFIX "probe-", strlen(STORE_TMP_PREFIX "probe-")))
			gc_report(fn, ctx, tmp_kind(ws[i].name), ws[i].name, done, e, &failed);
		else
			kis_error_free(e);
		close(ws[i].fd);
	}
	for (size_t i = 0; i < nb; i++) {
		struct kis_error *e = NULL;
		int done = dry_run ? 0 : kis_tree_remove(s->bases_fd, bases[i].name, &e) < 0 ? -1 : 1;
		gc_report(fn, ctx, tmp_kind(bases[i].name), bases[i].name, done, e, &failed);
		close(bases[i].fd);
	}
	if (!dry_run)
		sweep_removed_bases(s);
	return failed;
}

void store_sweep(struct kis_store *s)
{
	(void)store_sweep_ex(s, false, false, NULL, NULL);
}
