/* SPDX-License-Identifier: MIT */
/* Workspaces: clone (reflink, overlay, copy) built under a temporary name
 * and renamed into place, path (remounting an overlay), destroy, list. */
#include "store_internal.h"
#include "core/tree.h"
#include "core/test_hook.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* Unmount NAME/merged below workspaces/ if it is mounted. */
static int unmount_merged(struct kis_store *s, const char *name, struct kis_error **err)
{
	_cleanup_close_ int d = store_opendir(s->ws_fd, name);
	if (d < 0)
		return 0;
	if (!store_is_mountpoint(d, "merged"))
		return 0;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/workspaces/%s/merged", s->root, name);
	/* UMOUNT_NOFOLLOW: the last component is never a symlink we follow.
	 * A busy mount (a process still inside) is detached lazily: it is
	 * gone from the namespace at once, freed when the last user leaves. */
	if (umount2(path, UMOUNT_NOFOLLOW) < 0 && umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH) < 0 &&
	    errno != EINVAL && errno != ENOENT)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot unmount '%s'", path);
	return 0;
}

int store_release_workspace(struct kis_store *s, const char *name, struct kis_error **err)
{
	TRY(unmount_merged(s, name, err));
	_cleanup_close_ int d = store_opendir(s->ws_fd, name);
	if (d >= 0) {
		/* its disk image's, below the overlay: the loop device goes too */
		TRY(store_disk_unmount(s, d, name, err));
		store_view_stop(d); /* a rootless view's holder, if any */
		char base[KIS_ID_BUFSZ];
		/* No meta: the clone died before it took a reference. */
		if (store_ws_meta(d, base, NULL, NULL) == 0) {
			/* The id is the name without prefix and trash suffix. */
			char ws_id[KIS_ID_BUFSZ] = "";
			const char *p = name;
			if (!strncmp(p, STORE_TMP_PREFIX, strlen(STORE_TMP_PREFIX)))
				snprintf(ws_id, sizeof(ws_id), "%s", p + strlen(STORE_TMP_PREFIX));
			else if (!strncmp(p, STORE_TRASH_PREFIX, strlen(STORE_TRASH_PREFIX))) {
				p += strlen(STORE_TRASH_PREFIX);
				const char *dash = strrchr(p, '-');
				size_t len = dash ? (size_t)(dash - p) : strlen(p);
				if (len < sizeof(ws_id)) {
					memcpy(ws_id, p, len);
					ws_id[len] = '\0';
				}
			} else
				snprintf(ws_id, sizeof(ws_id), "%s", p);
			if (kis_id_validate(ws_id, "workspace id", NULL) == 0)
				TRY(store_base_unref(s, base, ws_id, err));
		}
	}
	return kis_tree_remove(s->ws_fd, name, err);
}

/* Which strategy to build. *tentative: auto chose overlay without knowing
 * whether a mount will work (probing costs a mount and an unmount, which
 * syncs the store's filesystem); the clone then falls back to a copy if
 * the mount is refused. A pinned strategy is never replaced. */
static int resolve_strategy(struct kis_store *s, enum kis_clone_strategy want,
			    enum kis_clone_strategy *got, bool *tentative, struct kis_error **err)
{
	*tentative = false;
	switch (want) {
	case KIS_CLONE_AUTO:
		/* DESIGN.md order: reflink (a plain directory, no mount to
		 * manage), overlay (O(1), needs a mount), then a plain copy.
		 * Where a disk image is what binds limits.disk_bytes (a btrfs
		 * store: reflinks, no project quotas) the overlay comes first:
		 * its writable layer goes on the image, while a reflink clone
		 * cannot (FICLONE does not cross filesystems) and had --disk
		 * refused on every tier. */
		if (store_can_reflink(s) && !(s->clone_disk_bytes && !store_view_wanted()))
			*got = KIS_CLONE_REFLINK;
		else if (s->can_overlay != 0) {
			*got = KIS_CLONE_OVERLAY;
			*tentative = s->can_overlay < 0;
		} else
			*got = KIS_CLONE_COPY;
		return 0;
	case KIS_CLONE_REFLINK:
		if (!store_can_reflink(s))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "the store '%s' is on a filesystem without reflinks "
					     "(FICLONE); put the store on btrfs or xfs, or use "
					     "--strategy overlay or copy",
					     s->root);
		break;
	case KIS_CLONE_OVERLAY:
		/* Unknown is tried: a refused mount is profile_unsatisfiable. */
		if (s->can_overlay == 0)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "overlayfs cannot be mounted for the store '%s' (it needs "
					     "root, or a user namespace); use --strategy reflink or copy",
					     s->root);
		break;
	case KIS_CLONE_COPY:
		break;
	default:
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "unknown clone strategy %d",
				     (int)want);
	}
	*got = want;
	return 0;
}

static int write_meta(int t, const char *base_id, enum kis_clone_strategy use, bool replace,
		      struct kis_error **err)
{
	char meta[128];
	snprintf(meta, sizeof(meta), "base=%s\nstrategy=%s\n", base_id, kis_clone_strategy_name(use));
	if (!replace)
		return store_write_file(t, "meta", meta, err);
	/* rename(2) over the old meta: a crash leaves one or the other,
	 * both naming the base whose reference we hold. */
	(void)unlinkat(t, "meta.new", 0);
	TRY(store_write_file(t, "meta.new", meta, err));
	if (renameat(t, "meta.new", t, "meta") < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot update workspace meta");
	return 0;
}

/* Test hook: pause between taking the reference and publishing the clone,
 * so a test can SIGKILL a clone at its most delicate point. */
static void test_pause(void)
{
	const char *ms = KIS_TEST_GETENV("KIS_TEST_CLONE_PAUSE_MS");
	if (!ms || !*ms)
		return;
	long v = strtol(ms, NULL, 10);
	if (v <= 0 || v > 600000)
		return;
	struct timespec ts = {.tv_sec = v / 1000, .tv_nsec = (v % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Take the reference of ws_id on the base; refuses a removed base. */
static int base_ref(struct kis_store *s, int base_fd, const char *base_id, const char *ws_id,
		    struct kis_error **err)
{
	if (store_flock(base_fd, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock base '%s'", base_id);
	int r = 0;
	struct stat st;
	/* Under the lock, `removed` absent means the base has not been
	 * freed either: freeing needs the marker. */
	if (fstat(base_fd, &st) == 0 && st.st_nlink == 0) {
		/* Freed (renamed to trash and removed) while we waited: the
		 * freer held this same lock until the directory was gone. */
		r = kis_error_set(err, KIS_E_NOT_FOUND, 0, "base '%s' was removed; import it again",
				  base_id);
	} else if (fstatat(base_fd, "removed", &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
		r = kis_error_set(err, KIS_E_NOT_FOUND, 0,
				  "base '%s' was removed; import it again", base_id);
	} else {
		_cleanup_close_ int refs = store_opendir(base_fd, "refs");
		_cleanup_close_ int f = refs < 0 ? -1
						 : store_openat(refs, ws_id,
								O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (f < 0)
			r = kis_error_set(err, errno == EEXIST ? KIS_E_DESTINATION_EXISTS : KIS_E_INTERNAL,
					  errno, "cannot take reference '%s' on base '%s'", ws_id,
					  base_id);
	}
	(void)store_flock(base_fd, LOCK_UN);
	return r;
}

static int build_clone(struct kis_store *s, int t, const char *name, int base_fd,
		       enum kis_clone_strategy st, struct kis_error **err)
{
	_cleanup_close_ int lower = store_opendir(base_fd, "tree");
	if (lower < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the tree of the base");
	if (st == KIS_CLONE_OVERLAY) {
		static const char *const sub[] = {"upper", "work", "merged"};
		int fds[3] = {-1, -1, -1};
		int r = 0;
		for (size_t i = 0; i < 3 && r == 0; i++)
			if (mkdirat(t, sub[i], 0755) < 0 || (fds[i] = store_opendir(t, sub[i])) < 0)
				r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", sub[i]);
		/* a disk limit by image: upper and work are the image's */
		if (r == 0 && s->clone_disk_bytes && !store_view_wanted()) {
			close(fds[0]);
			close(fds[1]);
			fds[0] = fds[1] = -1;
			r = store_disk_make(s, t, name, s->clone_disk_bytes, err);
			if (r == 0)
				r = store_disk_layers(s, t, name, &fds[0], &fds[1], err);
		}
		/* an ordinary user: mounted in a namespace of its own (view.c) */
		if (r == 0)
			r = store_view_wanted() ? store_view_start(s, t, name, err)
						: store_overlay_mount(lower, fds[0], fds[1], fds[2], err);
		for (size_t i = 0; i < 3; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return r;
	}
	_cleanup_close_ int tree = -1;
	if (mkdirat(t, "tree", 0755) < 0 || (tree = store_opendir(t, "tree")) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the workspace tree");
	struct store_copy c = {
		.reflink_only = st == KIS_CLONE_REFLINK,
		.allow_special = true, /* already admitted at import */
		.keep_owner = geteuid() == 0,
	};
	return store_copy_tree(&c, lower, tree, err);
}

int kis_workspace_clone_ex(struct kis_store *s, const char *base_id, const char *want_id,
			   enum kis_clone_strategy strategy, char out[KIS_ID_BUFSZ],
			   struct kis_error **err)
{
	char id[KIS_ID_BUFSZ];
	TRY(kis_id_validate(base_id, "base id", err));
	if (want_id) {
		TRY(kis_id_validate(want_id, "workspace id", err));
		snprintf(id, sizeof(id), "%s", want_id);
	} else {
		TRY(kis_id_mint('w', id, err));
	}
	struct stat st;
	/* AT_SYMLINK_NOFOLLOW: whatever sits there (a symlink included) is
	 * an existing destination, never a place we write through. */
	if (fstatat(s->ws_fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return kis_error_set(err, KIS_E_DESTINATION_EXISTS, 0,
				     "workspace '%s' already exists; choose another --id or destroy it",
				     id);
	enum kis_clone_strategy use = KIS_CLONE_COPY;
	bool tentative = false;
	TRY(resolve_strategy(s, strategy, &use, &tentative, err));
	_cleanup_close_ int b = store_opendir(s->bases_fd, base_id);
	if (b < 0)
		return kis_error_set(err, errno == ENOENT ? KIS_E_NOT_FOUND : KIS_E_INTERNAL, errno,
				     "no base '%s'; see 'kis sandbox base list'", base_id);

	char tmp[KIS_ID_BUFSZ + 8];
	snprintf(tmp, sizeof(tmp), STORE_TMP_PREFIX "%s", id);
	_cleanup_lock_ int t = store_mktemp_locked(s, s->ws_fd, tmp);
	int saved = errno;
	if (t < 0) {
		if (saved == EEXIST)
			return kis_error_set(err, KIS_E_DESTINATION_EXISTS, 0,
					     "workspace '%s' is being created by another command", id);
		return kis_error_set(err, KIS_E_INTERNAL, saved, "cannot create '%s' in '%s/workspaces'",
				     tmp, s->root);
	}

	/* meta before the reference: a leftover with a reference always says
	 * which base to release. */
	int r = write_meta(t, base_id, use, false, err);
	if (r >= 0)
		r = base_ref(s, b, base_id, id, err);
	if (r < 0) {
		(void)kis_tree_remove(s->ws_fd, tmp, NULL);
		return r;
	}
	struct kis_error *build_err = NULL; /* err may be NULL: keep the code */
	r = build_clone(s, t, tmp, b, use, &build_err);
	if (use == KIS_CLONE_OVERLAY)
		s->can_overlay = r >= 0;
	if (r < 0 && tentative && build_err && build_err->code == KIS_E_PROFILE_UNSATISFIABLE) {
		/* Auto, and the overlay mount was refused: a copy it is. */
		kis_error_free(build_err);
		build_err = NULL;
		use = KIS_CLONE_COPY;
		static const char *const sub[] = {"upper", "work", "merged", "disk", "disk.img"};
		(void)store_disk_unmount(s, t, tmp, NULL);
		for (size_t i = 0; i < ARRAY_SIZE(sub); i++)
			(void)kis_tree_remove(t, sub[i], NULL);
		r = write_meta(t, base_id, use, true, &build_err);
		if (r >= 0)
			r = build_clone(s, t, tmp, b, use, &build_err);
	}
	if (r < 0) {
		if (err) {
			kis_error_free(*err);
			*err = build_err;
		} else {
			kis_error_free(build_err);
		}
	}
	if (r >= 0) {
		test_pause();
		/* RENAME_NOREPLACE: a destination that appeared meanwhile
		 * (even an empty directory, which plain rename(2) would
		 * replace) fails the clone instead of merging. */
		if (renameat2(s->ws_fd, tmp, s->ws_fd, id, RENAME_NOREPLACE) < 0)
			r = kis_error_set(err, errno == EEXIST ? KIS_E_DESTINATION_EXISTS : KIS_E_INTERNAL,
					  errno, "cannot publish workspace '%s'", id);
	}
	if (r < 0) {
		struct kis_error *e2 = NULL;
		if (store_release_workspace(s, tmp, &e2) < 0)
			kis_error_free(e2);
		return kis_error_wrap(err, "cloning base '%s'", base_id);
	}
	memcpy(out, id, strlen(id) + 1);
	return 0;
}

int kis_workspace_clone(struct kis_store *s, const char *base_id, const char *want_id,
			char out[KIS_ID_BUFSZ], struct kis_error **err)
{
	return kis_workspace_clone_ex(s, base_id, want_id, KIS_CLONE_AUTO, out, err);
}

/* Open workspace id's directory and read its meta: *d the open directory. */
static int open_ws(struct kis_store *s, const char *id, int *d, char base[KIS_ID_BUFSZ],
		   enum kis_clone_strategy *st, struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	*d = store_opendir(s->ws_fd, id);
	if (*d < 0)
		return kis_error_set(err, errno == ENOENT ? KIS_E_NOT_FOUND : KIS_E_INTERNAL, errno,
				     "no workspace '%s'; see 'kis sandbox workspace list'", id);
	if (store_ws_meta(*d, base, st, err) < 0) {
		close(*d);
		*d = -1;
		return -1;
	}
	return 0;
}

int kis_workspace_path(struct kis_store *s, const char *id, char **out, struct kis_error **err)
{
	_cleanup_close_ int d = -1;
	char base[KIS_ID_BUFSZ];
	enum kis_clone_strategy st;
	TRY(open_ws(s, id, &d, base, &st, err));
	const char *leaf = st == KIS_CLONE_OVERLAY ? "merged" : "tree";
	if (st == KIS_CLONE_OVERLAY && store_view_wanted())
		return store_view_path(s, d, id, out, err);
	if (st == KIS_CLONE_OVERLAY && !store_is_mountpoint(d, "merged")) {
		/* Mounts do not survive a reboot (or live in another mount
		 * namespace): mount again, under the workspace's lock so two
		 * callers do not stack two overlays. */
		if (store_flock(d, LOCK_EX) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock workspace '%s'", id);
		if (!store_is_mountpoint(d, "merged")) {
			_cleanup_close_ int b = store_opendir(s->bases_fd, base);
			_cleanup_close_ int lower = b < 0 ? -1 : store_opendir(b, "tree");
			_cleanup_close_ int up = -1, wk = -1;
			_cleanup_close_ int mg = store_opendir(d, "merged");
			if (lower < 0 || mg < 0)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "workspace '%s' is damaged; destroy it", id);
			/* upper/ and work/, or those of its disk image */
			TRY(store_disk_layers(s, d, id, &up, &wk, err));
			TRY(store_overlay_mount(lower, up, wk, mg, err));
		}
		(void)store_flock(d, LOCK_UN);
	}
	if (asprintf(out, "%s/workspaces/%s/%s", s->root, id, leaf) < 0) {
		*out = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

/* Holds: workspaces/<id>/holds/<session>, one empty file per live session
 * that uses the workspace (the same shape as a clone's reference on its
 * base: an entry on disk, changed atomically, never a counter). */
static bool hold_is_live(struct kis_store *s, const char *name)
{
	char h[KIS_ID_BUFSZ];
	if (store_mount_holder(name, h))
		return store_holder_live(s, h);
	char tmp[KIS_ID_BUFSZ + 8];
	struct stat st;
	if (strlen(name) >= KIS_ID_BUFSZ)
		return false;
	memcpy(tmp, ".tmp-", 5);
	memcpy(tmp + 5, name, strlen(name) + 1);
	return s->sessions_fd >= 0 &&
	       (fstatat(s->sessions_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
		fstatat(s->sessions_fd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0);
}

/* What a hold does: 's' a session's own workspace (a hold named by the
 * session), 'w' a read-write mount's and 'W' a one-shot run's own
 * workspace (<holder>.mount holding "w" or "W"), 'r' a read-only mount's;
 * 0 for none that reads. */
static char hold_kind(int h, const char *name, char who[KIS_ID_BUFSZ])
{
	if (!store_mount_holder(name, who)) {
		size_t n = strnlen(name, KIS_ID_BUFSZ - 1);
		memcpy(who, name, n);
		who[n] = '\0';
		return 's';
	}
	_cleanup_close_ int f = store_openat(h, name, O_RDONLY, 0);
	char c = 0;
	return f >= 0 && read(f, &c, 1) == 1 && (c == 'w' || c == 'W' || c == 'r') ? c : 0;
}

/* Under the workspace's lock: KIS_E_BUSY when a live holder other than
 * self writes it (mounts_only: only a read-write mount counts). */
static int check_writers(struct kis_store *s, int d, const char *id, const char *self,
			 bool mounts_only, struct kis_error **err)
{
	_cleanup_close_ int h = store_opendir(d, "holds");
	if (h < 0)
		return 0;
	_cleanup_dir_ DIR *dir = store_dir_stream(h);
	if (!dir)
		return 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		char who[KIS_ID_BUFSZ];
		char k = e->d_name[0] == '.' ? 0 : hold_kind(h, e->d_name, who);
		if (!k || k == 'r' || (self && !strcmp(who, self)) || !hold_is_live(s, e->d_name))
			continue;
		if (mounts_only && k != 'w')
			continue;
		return kis_error_set(err, KIS_E_BUSY, 0,
				     "workspace '%s' is being written by %s '%s' (%s): one writer "
				     "at a time; mount it read-only (:ro) or wait for it to end",
				     id, !strncmp(who, "s-", 2) ? "sandbox" : "holder", who,
				     k == 'w' ? "a read-write mount" : "its own workspace");
	}
	return 0;
}

/* Write the hold holds/<name> (content: a mount's "w" or "r"; NULL for a
 * session's, which always writes) under the workspace's lock, after the
 * writer check that goes with it (check < 0: none; else check_writers with
 * mounts_only = check), so two writers cannot both see the other absent. */
static int hold_write(struct kis_store *s, const char *id, const char *name, const char *self,
		      int check, const char *content, struct kis_error **err)
{
	_cleanup_close_ int d = store_opendir(s->ws_fd, id);
	if (d < 0)
		return kis_error_set(err, errno == ENOENT ? KIS_E_NOT_FOUND : KIS_E_INTERNAL, errno,
				     "no workspace '%s'; see 'kis sandbox workspace list'", id);
	if (store_flock(d, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock workspace '%s'", id);
	if (check >= 0)
		TRY(check_writers(s, d, id, self, check, err));
	if (store_mkdir_p1(d, "holds", 0700) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot hold workspace '%s'", id);
	_cleanup_close_ int h = store_opendir(d, "holds");
	_cleanup_close_ int f = h < 0 ? -1 : store_openat(h, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t n = content ? strlen(content) : 0;
	if (f < 0 || (n && write(f, content, n) != (ssize_t)n))
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot hold workspace '%s'", id);
	return 0;
}

int kis_workspace_hold_mount(struct kis_store *s, const char *id, const char *holder, bool rw,
			     struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	TRY(kis_id_validate(holder, "holder id", err));
	char name[KIS_ID_BUFSZ + 16];
	snprintf(name, sizeof(name), "%s" STORE_MOUNT_SUFFIX, holder);
	/* a read-write mount: no other writer of any kind */
	return hold_write(s, id, name, holder, rw ? 0 : -1, rw ? "w" : "r", err);
}

int kis_workspace_hold_run(struct kis_store *s, const char *id, const char *holder,
			   struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	TRY(kis_id_validate(holder, "holder id", err));
	char name[KIS_ID_BUFSZ + 16];
	snprintf(name, sizeof(name), "%s" STORE_MOUNT_SUFFIX, holder);
	/* as a session's own: refused only while a read-write mount writes */
	return hold_write(s, id, name, holder, 1, "W", err);
}

int kis_workspace_unhold_mount(struct kis_store *s, const char *id, const char *holder)
{
	char name[KIS_ID_BUFSZ + 16];
	if (kis_id_validate(holder, "holder", NULL) < 0)
		return -1;
	snprintf(name, sizeof(name), "%s" STORE_MOUNT_SUFFIX, holder);
	return kis_workspace_unhold(s, id, name);
}

int kis_workspace_check_writers(struct kis_store *s, const char *id, const char *self,
				struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	_cleanup_close_ int d = store_opendir(s->ws_fd, id);
	if (d < 0)
		return 0; /* opening it says what is wrong */
	if (store_flock(d, LOCK_SH) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock workspace '%s'", id);
	return check_writers(s, d, id, self, true, err);
}

int kis_workspace_hold(struct kis_store *s, const char *id, const char *holder,
		       struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	TRY(kis_id_validate(holder, "session id", err));
	/* a session writes its workspace: not while a mount writes it */
	return hold_write(s, id, holder, holder, 1, NULL, err);
}

int kis_workspace_unhold(struct kis_store *s, const char *id, const char *holder)
{
	char h_id[KIS_ID_BUFSZ];
	if (kis_id_validate(id, "workspace id", NULL) < 0 ||
	    (!store_mount_holder(holder, h_id) && kis_id_validate(holder, "session id", NULL) < 0))
		return -1;
	_cleanup_close_ int d = store_opendir(s->ws_fd, id);
	_cleanup_close_ int h = d < 0 ? -1 : store_opendir(d, "holds");
	return h < 0 || unlinkat(h, holder, 0) == 0 || errno == ENOENT ? 0 : -1;
}

/* Under the workspace's lock: KIS_E_BUSY naming a live holder; holds of
 * sessions that are gone are removed on the way. */
static int check_holds(struct kis_store *s, int d, const char *id, struct kis_error **err)
{
	_cleanup_close_ int h = store_opendir(d, "holds");
	if (h < 0)
		return 0;
	_cleanup_dir_ DIR *dir = store_dir_stream(h);
	if (!dir)
		return 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		char who[KIS_ID_BUFSZ];
		if (store_mount_holder(e->d_name, who) && hold_is_live(s, e->d_name))
			return kis_error_set(err, KIS_E_BUSY, 0,
					     hold_kind(h, e->d_name, who) == 'W' ?
					     "workspace '%s' is in use by run '%s': destroy it once "
					     "that run has ended" :
					     "workspace '%s' is mounted by sandbox '%s': destroy it "
					     "once that run or session has ended",
					     id, who);
		if (hold_is_live(s, e->d_name))
			return kis_error_set(err, KIS_E_BUSY, 0,
					     "workspace '%s' is in use by session '%s': destroy the "
					     "session first ('kis sandbox session destroy %s')",
					     id, e->d_name, e->d_name);
		unlinkat(h, e->d_name, 0);
	}
	return 0;
}

int kis_workspace_refresh(struct kis_store *s, const char *id, struct kis_error **err)
{
	_cleanup_close_ int d = -1;
	char base[KIS_ID_BUFSZ];
	enum kis_clone_strategy st;
	TRY(open_ws(s, id, &d, base, &st, err));
	if (st != KIS_CLONE_OVERLAY)
		return 0;
	if (store_view_wanted())
		return store_view_refresh(s, d, id, err);
	/* overlayfs: changes to its layers made while it is mounted (here by
	 * another overlay over the same upper layer) leave its caches stale
	 * (Documentation/filesystems/overlayfs.rst, "Changes to underlying
	 * filesystems"); a new mount reads them as they are */
	TRY(unmount_merged(s, id, err));
	_cleanup_free_ char *path = NULL;
	return kis_workspace_path(s, id, &path, err);
}

int kis_workspace_destroy(struct kis_store *s, const char *id, struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	_cleanup_close_ int d = store_opendir(s->ws_fd, id);
	if (d < 0) {
		if (errno == ENOENT)
			return 0; /* idempotent */
		if (errno == ELOOP || errno == ENOTDIR || errno == EXDEV) {
			/* Not a workspace (a planted symlink or file): remove the
			 * entry itself; unlink(2) never follows a link. */
			if (unlinkat(s->ws_fd, id, 0) < 0 && errno != ENOENT)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot remove '%s' in '%s/workspaces'", id, s->root);
			return 0;
		}
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open workspace '%s'", id);
	}
	/* Lock before the rename: the lock moves with the directory, so the
	 * trash is never seen unlocked by a sweep while we live. */
	if (store_flock(d, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock workspace '%s'", id);
	TRY(check_holds(s, d, id, err));
	char sfx[9], trash[KIS_ID_BUFSZ + 32];
	TRY(store_rand_suffix(sfx, err));
	snprintf(trash, sizeof(trash), STORE_TRASH_PREFIX "%s-%s", id, sfx);
	struct stat a, b;
	if (fstat(d, &a) < 0 || fstatat(s->ws_fd, id, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return 0; /* destroyed (and maybe re-created) meanwhile */
	if (renameat(s->ws_fd, id, s->ws_fd, trash) < 0) {
		if (errno == ENOENT)
			return 0;
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot destroy workspace '%s'", id);
	}
	if (store_release_workspace(s, trash, err) < 0)
		return kis_error_wrap(err, "destroying workspace '%s'", id);
	return 0;
}

int kis_workspace_info(struct kis_store *s, const char *id, struct kis_workspace_info *out,
		       struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	_cleanup_close_ int d = store_opendir(s->ws_fd, id);
	if (d < 0)
		return kis_error_set(err, errno == ENOENT ? KIS_E_NOT_FOUND : KIS_E_INTERNAL, errno,
				     "no workspace '%s'; see 'kis sandbox workspace list'", id);
	struct kis_workspace_info wi = {0};
	TRY(store_ws_meta(d, wi.base, &wi.strategy, err));
	memcpy(wi.id, id, strlen(id) + 1); /* validated: <= 64 */
	*out = wi;
	return 0;
}

static int cmp_ws(const void *a, const void *b)
{
	return strcmp(((const struct kis_workspace_info *)a)->id,
		      ((const struct kis_workspace_info *)b)->id);
}

int kis_workspace_list(struct kis_store *s, struct kis_workspace_info **out, size_t *n,
		       struct kis_error **err)
{
	_cleanup_dir_ DIR *dir = store_dir_stream(s->ws_fd);
	if (!dir)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read the workspaces of '%s'",
				     s->root);
	_cleanup_free_ struct kis_workspace_info *v = NULL;
	size_t len = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.' || kis_id_validate(e->d_name, "workspace id", NULL) < 0)
			continue;
		_cleanup_close_ int d = store_opendir(s->ws_fd, e->d_name);
		if (d < 0)
			continue;
		struct kis_workspace_info wi = {0};
		if (store_ws_meta(d, wi.base, &wi.strategy, NULL) < 0)
			continue;
		memcpy(wi.id, e->d_name, strlen(e->d_name) + 1); /* validated: <= 64 */
		if (len == cap) {
			cap = cap ? cap * 2 : 16;
			struct kis_workspace_info *nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
			v = nv;
		}
		v[len++] = wi;
	}
	if (len)
		qsort(v, len, sizeof(*v), cmp_ws);
	*n = len;
	*out = steal_ptr(v);
	return 0;
}

int kis_workspace_layers(struct kis_store *s, const char *id, char **lower, char **upper,
			 char **cache, struct kis_error **err)
{
	*lower = *upper = *cache = NULL;
	_cleanup_close_ int d = -1;
	char base[KIS_ID_BUFSZ];
	enum kis_clone_strategy st;
	TRY(open_ws(s, id, &d, base, &st, err));
	if (st != KIS_CLONE_OVERLAY)
		return 0;
	_cleanup_close_ int b = store_opendir(s->bases_fd, base);
	if (b < 0 || store_mkdir_p1(b, "cache", 0700) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the cache of base '%s'",
				     base);
	if (asprintf(lower, "%s/bases/%s/tree", s->root, base) < 0)
		*lower = NULL;
	if (asprintf(upper, "%s/workspaces/%s/%s", s->root, id, store_disk_upper_rel(d)) < 0)
		*upper = NULL;
	if (asprintf(cache, "%s/bases/%s/cache", s->root, base) < 0)
		*cache = NULL;
	if (!*lower || !*upper || !*cache) {
		free(*lower);
		free(*upper);
		free(*cache);
		*lower = *upper = *cache = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

/* ---- can this store clone by overlay? ---- */

static bool probe_overlay(struct kis_store *s)
{
	/* Probe under workspaces/ with a temporary's name and lock: if we are
	 * killed with the probe mounted, the sweep unmounts and removes it
	 * like any dead clone. */
	char sfx[9], name[32];
	if (store_rand_suffix(sfx, NULL) < 0)
		return false;
	snprintf(name, sizeof(name), STORE_TMP_PREFIX "probe-%s", sfx);
	_cleanup_lock_ int d = store_mktemp_locked(s, s->ws_fd, name);
	if (d < 0)
		return false;
	static const char *const sub[] = {"lower", "upper", "work", "merged"};
	int fds[4] = {-1, -1, -1, -1};
	for (size_t i = 0; i < 4; i++)
		if (mkdirat(d, sub[i], 0700) == 0)
			fds[i] = store_opendir(d, sub[i]);
	bool ok = fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && fds[3] >= 0 &&
		  (store_view_wanted() ? store_view_probe(s, name)
				       : store_overlay_mount(fds[0], fds[1], fds[2], fds[3], NULL) == 0);
	for (size_t i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Unmounts merged (no meta: no reference to drop) and removes it. */
	(void)store_release_workspace(s, name, NULL);
	return ok;
}

bool store_can_overlay(struct kis_store *s)
{
	if (s->can_overlay < 0)
		s->can_overlay = probe_overlay(s);
	return s->can_overlay > 0;
}
