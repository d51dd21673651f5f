/* SPDX-License-Identifier: MIT */
/* Bases: import of a host tree into the store, listing, removal, and the
 * reference entries (bases/<b>/refs/<w>) that clones hold on them. */
#include "store_internal.h"
#include "core/tree.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

static int open_base(struct kis_store *s, const char *id, struct kis_error **err);

long store_base_refcount(struct kis_store *s, int base_fd)
{
	_cleanup_close_ int refs = store_opendir(base_fd, "refs");
	if (refs < 0)
		return -1;
	_cleanup_dir_ DIR *d = store_dir_stream(refs);
	if (!d)
		return -1;
	long n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		/* a mount's reference whose run or session is gone (killed):
		 * dropped here, as a dead session's hold on a workspace is */
		char h[KIS_ID_BUFSZ];
		if (store_mount_holder(e->d_name, h) && !store_holder_live(s, h)) {
			(void)unlinkat(refs, e->d_name, 0);
			continue;
		}
		n++;
	}
	return n;
}

bool store_mount_holder(const char *name, char holder[KIS_ID_BUFSZ])
{
	size_t n = strlen(name), k = strlen(STORE_MOUNT_SUFFIX);
	if (n <= k || n - k >= KIS_ID_BUFSZ || strcmp(name + n - k, STORE_MOUNT_SUFFIX))
		return false;
	memcpy(holder, name, n - k);
	holder[n - k] = '\0';
	return kis_id_validate(holder, "holder", NULL) == 0;
}

bool store_holder_live(struct kis_store *s, const char *holder)
{
	char tmp[KIS_ID_BUFSZ + 8];
	struct stat st;
	if (strlen(holder) >= KIS_ID_BUFSZ)
		return false;
	snprintf(tmp, sizeof(tmp), STORE_TMP_PREFIX "%s", holder);
	if (s->sessions_fd >= 0 && (fstatat(s->sessions_fd, holder, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
				    fstatat(s->sessions_fd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0))
		return true;
	/* a one-shot run: its owner is flocked while it lives
	 * (engine/owner.c); a lock we can take belongs to no one */
	_cleanup_close_ int o = s->owners_fd < 0 ? -1 : store_open_owner(s->owners_fd, holder);
	if (o < 0)
		return false;
	if (flock(o, LOCK_SH | LOCK_NB) < 0)
		return errno == EWOULDBLOCK;
	(void)flock(o, LOCK_UN);
	return false;
}

int kis_base_hold(struct kis_store *s, const char *id, const char *holder, struct kis_error **err)
{
	TRY(kis_id_validate(holder, "holder id", err));
	_cleanup_close_ int b = open_base(s, id, err);
	if (b < 0)
		return -1;
	if (store_flock(b, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock base '%s'", id);
	struct stat st;
	if (fstatat(b, "removed", &st, AT_SYMLINK_NOFOLLOW) == 0)
		return kis_error_set(err, KIS_E_NOT_FOUND, 0,
				     "base '%s' was removed; see 'kis sandbox base list'", id);
	_cleanup_close_ int refs = store_opendir(b, "refs");
	char name[KIS_ID_BUFSZ + 16];
	snprintf(name, sizeof(name), "%s" STORE_MOUNT_SUFFIX, holder);
	_cleanup_close_ int f = refs < 0 ? -1 : store_openat(refs, name, O_WRONLY | O_CREAT, 0600);
	if (f < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot hold base '%s'", id);
	return 0;
}

int kis_base_unhold(struct kis_store *s, const char *id, const char *holder)
{
	char name[KIS_ID_BUFSZ + 16];
	if (kis_id_validate(id, "base id", NULL) < 0 || kis_id_validate(holder, "holder", NULL) < 0)
		return -1;
	snprintf(name, sizeof(name), "%s" STORE_MOUNT_SUFFIX, holder);
	return store_base_unref(s, id, name, NULL);
}

int store_base_free_locked(struct kis_store *s, const char *id, struct kis_error **err)
{
	char sfx[9], trash[KIS_ID_BUFSZ + 32];
	TRY(store_rand_suffix(sfx, err));
	snprintf(trash, sizeof(trash), STORE_TRASH_PREFIX "%s-%s", id, sfx);
	/* The rename is the moment the base stops existing; the caller's
	 * flock on the directory moves with it, so a sweep leaves the trash
	 * alone until we are done (or dead). */
	if (renameat(s->bases_fd, id, s->bases_fd, trash) < 0) {
		if (errno == ENOENT)
			return 0; /* another command freed it first */
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot free base '%s'", id);
	}
	return kis_tree_remove(s->bases_fd, trash, err);
}

int store_base_unref(struct kis_store *s, const char *base_id, const char *ws_id,
		     struct kis_error **err)
{
	_cleanup_close_ int b = store_opendir(s->bases_fd, base_id);
	if (b < 0) {
		if (errno == ENOENT)
			return 0; /* freed by hand: nothing holds */
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open base '%s'", base_id);
	}
	if (store_flock(b, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock base '%s'", base_id);
	_cleanup_close_ int refs = store_opendir(b, "refs");
	if (refs < 0)
		return errno == ENOENT ? 0
				       : kis_error_set(err, KIS_E_INTERNAL, errno,
						       "cannot open references of base '%s'", base_id);
	/* unlink(2) is atomic: the reference is there or it is not. */
	if (unlinkat(refs, ws_id, 0) < 0 && errno != ENOENT)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot drop reference '%s' on base '%s'", ws_id, base_id);
	struct stat st;
	if (fstatat(b, "removed", &st, AT_SYMLINK_NOFOLLOW) == 0 && store_base_refcount(s, b) == 0)
		return store_base_free_locked(s, base_id, err);
	return 0;
}

static int open_base(struct kis_store *s, const char *id, struct kis_error **err)
{
	if (kis_id_validate(id, "base id", err) < 0)
		return -1;
	int b = store_opendir(s->bases_fd, id);
	if (b < 0) {
		if (errno == ENOENT)
			return kis_error_set(err, KIS_E_NOT_FOUND, 0,
					     "no base '%s'; see 'kis sandbox base list'", id);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open base '%s'", id);
	}
	return b;
}

int kis_base_remove(struct kis_store *s, const char *id, struct kis_error **err)
{
	_cleanup_close_ int b = open_base(s, id, err);
	if (b < 0)
		return -1;
	if (store_flock(b, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock base '%s'", id);
	_cleanup_close_ int m = store_openat(b, "removed", O_WRONLY | O_CREAT, 0600);
	if (m < 0) {
		if (errno == ENOENT)
			return 0; /* freed while we waited for the lock */
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot mark base '%s' removed", id);
	}
	long refs = store_base_refcount(s, b);
	if (refs < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot count clones of base '%s'", id);
	if (refs == 0)
		return store_base_free_locked(s, id, err);
	return 0;
}

int kis_base_path(struct kis_store *s, const char *id, char **out, struct kis_error **err)
{
	_cleanup_close_ int b = open_base(s, id, err);
	if (b < 0)
		return -1;
	if (asprintf(out, "%s/bases/%s/tree", s->root, id) < 0) {
		*out = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

int kis_base_cache_dir(struct kis_store *s, const char *id, char **out, struct kis_error **err)
{
	*out = NULL;
	_cleanup_close_ int b = open_base(s, id, err);
	if (b < 0)
		return -1;
	if (store_mkdir_p1(b, "cache", 0700) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the cache of base '%s'",
				     id);
	if (asprintf(out, "%s/bases/%s/cache", s->root, id) < 0) {
		*out = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

static int cmp_base(const void *a, const void *b)
{
	return strcmp(((const struct kis_base_info *)a)->id, ((const struct kis_base_info *)b)->id);
}

int kis_base_list(struct kis_store *s, struct kis_base_info **out, size_t *n,
		  struct kis_error **err)
{
	_cleanup_dir_ DIR *d = store_dir_stream(s->bases_fd);
	if (!d)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read the bases of '%s'",
				     s->root);
	_cleanup_free_ struct kis_base_info *v = NULL;
	size_t len = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || kis_id_validate(e->d_name, "base id", NULL) < 0)
			continue;
		_cleanup_close_ int b = store_opendir(s->bases_fd, e->d_name);
		if (b < 0)
			continue;
		if (len == cap) {
			cap = cap ? cap * 2 : 16;
			struct kis_base_info *nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
			v = nv;
		}
		struct kis_base_info *bi = &v[len++];
		memset(bi, 0, sizeof(*bi));
		memcpy(bi->id, e->d_name, strlen(e->d_name) + 1); /* validated: <= 64 */
		long r = store_base_refcount(s, b);
		bi->refs = r > 0 ? (size_t)r : 0;
		struct stat st;
		bi->removed = fstatat(b, "removed", &st, AT_SYMLINK_NOFOLLOW) == 0;
	}
	if (len)
		qsort(v, len, sizeof(*v), cmp_base);
	*n = len;
	*out = steal_ptr(v);
	return 0;
}

/* Whether directory `inner` is `outer` or below it: walk up from inner by
 * ".." (never a name that could be a link) to the root, where ".." is the
 * directory itself, comparing (st_dev, st_ino) with outer's. */
static bool dir_is_within(int inner, const struct stat *outer)
{
	_cleanup_close_ int fd = fcntl(inner, F_DUPFD_CLOEXEC, 3);
	for (int depth = 0; fd >= 0 && depth < 4096; depth++) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			return false;
		if (st.st_dev == outer->st_dev && st.st_ino == outer->st_ino)
			return true;
		int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct stat ust;
		if (up < 0 || fstat(up, &ust) < 0) {
			if (up >= 0)
				close(up);
			return false;
		}
		close(fd);
		fd = up;
		if (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)
			return false; /* the root: its parent is itself */
	}
	return false;
}

int kis_base_import(struct kis_store *s, const char *src, const struct kis_import_options *opts,
		    char out[KIS_ID_BUFSZ], struct kis_error **err)
{
	static const struct kis_import_options none = {0};
	if (!opts)
		opts = &none;
	if (!src || !*src)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "no directory to import");
	if (opts->os_image && geteuid() != 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, EPERM,
				     "--os-image needs root (device nodes cannot be made otherwise); "
				     "run the import as root or drop --os-image");
	/* The caller names the tree; only its own final component may be a
	 * symlink the caller chose. Nothing below it is ever followed. */
	_cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return kis_error_set(err, errno == ENOENT ? KIS_E_NOT_FOUND : KIS_E_INVALID_ARGUMENT,
				     errno, "cannot open directory '%s'", src);
	/* The store inside the tree would be copied into itself while the
	 * copy grows it, down to PATH_MAX; a tree inside the store is the
	 * store's own (a base, a workspace, a session), not a user's tree. */
	struct stat sst, rst;
	if (fstat(sfd, &sst) == 0 && fstat(s->root_fd, &rst) == 0) {
		if (dir_is_within(s->root_fd, &sst))
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "cannot import '%s': it contains the store '%s'", src,
					     s->root);
		if (dir_is_within(sfd, &rst))
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "cannot import '%s': it is inside the store '%s'", src,
					     s->root);
	}
	char id[KIS_ID_BUFSZ], tmp[KIS_ID_BUFSZ + 8];
	TRY(kis_id_mint('b', id, err));
	if (opts->minted)
		TRY(opts->minted(opts->minted_ctx, id, err));
	snprintf(tmp, sizeof(tmp), STORE_TMP_PREFIX "%s", id);

	_cleanup_lock_ int t = store_mktemp_locked(s, s->bases_fd, tmp);
	if (t < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s' in '%s/bases'",
				     tmp, s->root);

	int r = -1;
	{
		_cleanup_close_ int tree = -1;
		if (mkdirat(t, "refs", 0700) < 0 || mkdirat(t, "tree", 0755) < 0 ||
		    (tree = store_opendir(t, "tree")) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lay out base '%s'", id);
			goto out;
		}
		struct store_copy c = {
			.try_reflink = true,
			.allow_special = opts->os_image,
			.keep_owner = geteuid() == 0,
			.progress = opts->progress,
			.progress_ctx = opts->progress_ctx,
			.max_bytes = opts->max_bytes ? opts->max_bytes : KIS_IMPORT_MAX_DEFAULT,
		};
		if (store_copy_tree(&c, sfd, tree, err) < 0) {
			kis_error_wrap(err, "importing '%s'", src);
			goto out;
		}
		/* syncfs before the rename: a base is published only once its
		 * data is on disk, so a power cut never leaves a visible base
		 * with empty files (rename(2) alone orders nothing on disk). */
		if (syncfs(tree) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot sync base '%s'", id);
			goto out;
		}
		/* Visible only now, complete: rename(2) is atomic. */
		if (renameat(s->bases_fd, tmp, s->bases_fd, id) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot publish base '%s'", id);
			goto out;
		}
		r = 0;
	}
out:
	if (r < 0) {
		(void)kis_tree_remove(s->bases_fd, tmp, NULL);
		return r;
	}
	memcpy(out, id, strlen(id) + 1);
	return 0;
}
