/* SPDX-License-Identifier: MIT */
/* kis-runtime at the microvm tier: a pod sandbox's image kept as a base,
 * with the guest disk image made of it, from one pod to the next.
 *
 * Why. Every pod's sandbox container brings the same tree (the node's
 * sandbox image, "pause"), and its VM's root is a workspace over a base of
 * that tree. Imported afresh for each pod, each pod's VM also made the
 * base's ext4 image (backends/microvm/disk.c makes it once per base: mkfs
 * and debugfs, 100-150 ms of a pod's start on this 2-core machine). Kept,
 * the next pod clones the base and finds its image made.
 *
 * How a kept base is found. <the tier's state dir>/.images/<base id>: one
 * empty file a kept base (no container id starts with '.'), its mtime the
 * last use. A kept base serves a pod only when its tree is the same as the
 * bundle's rootfs, compared entry by entry and byte by byte
 * (krt_mvm_same_tree): never by a name, a path or a digest of metadata,
 * which another image may share (reproducible images share every mtime).
 * The kept tree is the store's (the tier's own, root-only; a base is never
 * written after its import).
 *
 * Races. Two creates of one image at once may both import it: two kept
 * bases, the older one evicted in time. A base evicted while another
 * create clones it refuses the clone (removed), and that create imports.
 * An evicted base that a pod's workspace still holds is freed with that
 * workspace (kis_base_remove); a kept one stays in the store while it is
 * listed, at most KRT_MVM_IMAGES_KEPT of them.
 *
 * A pod's app container of such a tree (krt_mvm_image_find) takes the
 * kept base into its mount slot as it is: no import, no disk image made,
 * and nothing of it removed with the app. An eviction meanwhile removes
 * the base's files; the VM reads the image through the fd it was given. */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "core/io.h"
#include "core/log.h"
#include "runtime/mvm_image.h"

#define IMAGES_DIR ".images"
#define SAME_DEPTH_MAX 256
#define SAME_ENTRIES_MAX (1u << 20)
#define XATTR_BUF (16u << 10)

/* ------------------------------------------------ comparing two trees */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The names of the directory dfd (not "." and ".."), sorted; NULL with
 * *n 0 for an empty one, NULL with *n SIZE_MAX on a failure. dfd stays
 * the caller's. */
static char **dir_names(int dfd, size_t *n)
{
	*n = SIZE_MAX;
	int d2 = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d) {
		if (d2 >= 0)
			close(d2);
		return NULL;
	}
	char **v = NULL;
	size_t k = 0, cap = 0;
	struct dirent *e;
	bool ok = true;
	while (ok && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (k == cap) {
			size_t c = cap ? 2 * cap : 32;
			char **g = c < SAME_ENTRIES_MAX ? realloc(v, c * sizeof(*v)) : NULL;
			if (!g) {
				ok = false;
				break;
			}
			v = g;
			cap = c;
		}
		ok = (v[k] = strdup(e->d_name)) != NULL;
		k += ok;
	}
	closedir(d);
	if (!ok) {
		names_free(v, k);
		return NULL;
	}
	if (k)
		qsort(v, k, sizeof(*v), cmp_str);
	*n = k;
	return v;
}

/* Extended attributes of name in dfd, the entry itself (never followed):
 * the l-variants on the path through dfd's /proc/self/fd link, whose
 * last component is name. Returns the list's length, -1 on a failure. */
static ssize_t xattr_list(int dfd, const char *name, char *buf, size_t n)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dfd, name) >= (int)sizeof(p))
		return -1;
	ssize_t k = llistxattr(p, buf, n);
	return k < 0 && (errno == ENOTSUP || errno == ENODATA) ? 0 : k;
}

static ssize_t xattr_get(int dfd, const char *name, const char *key, char *buf, size_t n)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dfd, name) >= (int)sizeof(p))
		return -1;
	return lgetxattr(p, key, buf, n);
}

/* The same extended attributes, names and values, on both ("." for a
 * directory itself). The lists' order is the filesystem's: each name of
 * a is looked up in b, and the lists have the same length. A list or a
 * value beyond the buffers counts as a difference (that image is then
 * imported, as before). Static buffers: used before any recursion. */
static bool same_xattrs(int da, int db, const char *name)
{
	static char la[XATTR_BUF], lb[XATTR_BUF], va[XATTR_BUF], vb[XATTR_BUF];
	ssize_t na = xattr_list(da, name, la, sizeof(la));
	ssize_t nb = xattr_list(db, name, lb, sizeof(lb));
	if (na < 0 || nb < 0 || na != nb)
		return false;
	for (ssize_t off = 0; off < na; off += (ssize_t)strnlen(la + off, (size_t)(na - off)) + 1) {
		ssize_t a = xattr_get(da, name, la + off, va, sizeof(va));
		ssize_t b = xattr_get(db, name, la + off, vb, sizeof(vb));
		if (a < 0 || a != b || memcmp(va, vb, (size_t)a) != 0)
			return false;
	}
	return true;
}

/* The same bytes in two regular files of size bytes. */
static bool same_bytes(int fa, int fb, off_t size)
{
	static char a[1u << 16], b[1u << 16];
	off_t off = 0;
	while (off < size) {
		size_t want = (size_t)(size - off) < sizeof(a) ? (size_t)(size - off) : sizeof(a);
		ssize_t ka = RETRY_EINTR(pread(fa, a, want, off));
		ssize_t kb = RETRY_EINTR(pread(fb, b, want, off));
		if (ka <= 0 || ka != kb || memcmp(a, b, (size_t)ka) != 0)
			return false;
		off += ka;
	}
	/* and no more in either (a file that grew since its stat) */
	return RETRY_EINTR(pread(fa, a, 1, off)) == 0 && RETRY_EINTR(pread(fb, b, 1, off)) == 0;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
	if (a->st_mode != b->st_mode || a->st_uid != b->st_uid || a->st_gid != b->st_gid)
		return false;
	if (S_ISDIR(a->st_mode))
		return true; /* a directory's size, links and times are its filesystem's */
	if (a->st_nlink != b->st_nlink || a->st_size != b->st_size ||
	    a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec)
		return false;
	return !(S_ISCHR(a->st_mode) || S_ISBLK(a->st_mode)) || a->st_rdev == b->st_rdev;
}

static bool same_dir(int da, int db, int depth, size_t *budget);

/* One entry, name, of the directories da and db. */
static bool same_entry(int da, int db, const char *name, int depth, size_t *budget)
{
	struct stat sa, sb;
	if (fstatat(da, name, &sa, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fstatat(db, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !same_stat(&sa, &sb) ||
	    !same_xattrs(da, db, name))
		return false;
	if (S_ISLNK(sa.st_mode)) {
		char la[PATH_MAX], lb[PATH_MAX];
		ssize_t ka = readlinkat(da, name, la, sizeof(la));
		ssize_t kb = readlinkat(db, name, lb, sizeof(lb));
		return ka >= 0 && ka == kb && memcmp(la, lb, (size_t)ka) == 0;
	}
	if (S_ISREG(sa.st_mode)) {
		_cleanup_close_ int fa = openat(da, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
		_cleanup_close_ int fb = openat(db, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
		struct stat oa, ob;
		/* the files opened are the ones compared above (no swap since) */
		return fa >= 0 && fb >= 0 && fstat(fa, &oa) == 0 && fstat(fb, &ob) == 0 &&
		       oa.st_ino == sa.st_ino && oa.st_dev == sa.st_dev && ob.st_ino == sb.st_ino &&
		       ob.st_dev == sb.st_dev && same_bytes(fa, fb, sa.st_size);
	}
	if (S_ISDIR(sa.st_mode)) {
		_cleanup_close_ int ca = openat(da, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_close_ int cb = openat(db, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		return ca >= 0 && cb >= 0 && same_dir(ca, cb, depth + 1, budget);
	}
	return true; /* a device, FIFO or socket: its stat is all it is */
}

static bool same_dir(int da, int db, int depth, size_t *budget)
{
	if (depth > SAME_DEPTH_MAX)
		return false;
	size_t na, nb;
	char **a = dir_names(da, &na), **b = dir_names(db, &nb);
	bool same = na != SIZE_MAX && na == nb && na <= *budget;
	if (same)
		*budget -= na;
	for (size_t i = 0; same && i < na; i++)
		same = strcmp(a[i], b[i]) == 0 && same_entry(da, db, a[i], depth, budget);
	names_free(a, na == SIZE_MAX ? 0 : na);
	names_free(b, nb == SIZE_MAX ? 0 : nb);
	return same;
}

int krt_mvm_same_tree(const char *a, const char *b, bool *same, struct kis_error **err)
{
	*same = false;
	_cleanup_close_ int da = open(a, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int db = open(b, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (da < 0 || db < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the tree '%s'",
				     da < 0 ? a : b);
	struct stat sa, sb;
	size_t budget = SAME_ENTRIES_MAX;
	*same = fstat(da, &sa) == 0 && fstat(db, &sb) == 0 && sa.st_mode == sb.st_mode &&
		sa.st_uid == sb.st_uid && sa.st_gid == sb.st_gid && same_xattrs(da, db, ".") &&
		same_dir(da, db, 0, &budget);
	return 0;
}

/* ------------------------------------------------ the kept bases */

struct kept {
	char id[KIS_ID_BUFSZ];
	struct timespec used;
};

static int cmp_recent(const void *a, const void *b)
{
	const struct kept *x = a, *y = b;
	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? 1 : -1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? 1 : -1;
	return strcmp(x->id, y->id);
}

/* The kept bases, the most recently used first; *n 0 when none or on a
 * failure (then nothing is reused: the pod imports, as before). */
static struct kept *kept_list(int idx, size_t *n)
{
	*n = 0;
	size_t k;
	char **names = dir_names(idx, &k);
	if (k == SIZE_MAX || !k)
		return NULL;
	struct kept *v = calloc(k, sizeof(*v));
	for (size_t i = 0; v && i < k; i++) {
		struct stat st;
		if (kis_id_validate(names[i], "base id", NULL) < 0 ||
		    fstatat(idx, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		snprintf(v[*n].id, sizeof(v[*n].id), "%s", names[i]);
		v[*n].used = st.st_mtim;
		(*n)++;
	}
	names_free(names, k);
	if (v && *n)
		qsort(v, *n, sizeof(*v), cmp_recent);
	return v;
}

/* Beyond the KRT_MVM_IMAGES_KEPT most recent: no longer kept, the base
 * removed (freed now, or with the last workspace that holds it). */
static void evict(struct kis_store *store, int idx)
{
	size_t n;
	_cleanup_free_ struct kept *v = kept_list(idx, &n);
	for (size_t i = KRT_MVM_IMAGES_KEPT; i < n; i++) {
		(void)unlinkat(idx, v[i].id, 0);
		(void)kis_base_remove(store, v[i].id, NULL);
	}
}

static int images_dir(int mvm_fd, struct kis_error **err)
{
	if (mkdirat(mvm_fd, IMAGES_DIR, 0700) < 0 && errno != EEXIST)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make the kept images' list");
	int idx = openat(mvm_fd, IMAGES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (idx < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the kept images' list");
	return idx;
}

/* The most recently used kept base whose tree is the same as rootfs, in
 * id (marked used now): 1, or 0 when none is. */
static int kept_find(struct kis_store *store, int idx, const char *rootfs, char id[KIS_ID_BUFSZ])
{
	size_t n;
	uint64_t t0 = kis_monotonic_ms();
	_cleanup_free_ struct kept *v = kept_list(idx, &n);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *tree = NULL;
		struct kis_error *e = NULL;
		bool same = false;
		if (kis_base_path(store, v[i].id, &tree, &e) < 0) {
			/* removed by hand: no longer kept */
			kis_error_free(e);
			(void)unlinkat(idx, v[i].id, 0);
			continue;
		}
		if (krt_mvm_same_tree(tree, rootfs, &same, &e) < 0 || !same) {
			kis_error_free(e);
			continue;
		}
		(void)utimensat(idx, v[i].id, NULL, AT_SYMLINK_NOFOLLOW); /* used now */
		kis_debug("pod image: the kept base %s, the same tree (compared in %llu ms)",
			  v[i].id, (unsigned long long)(kis_monotonic_ms() - t0));
		snprintf(id, KIS_ID_BUFSZ, "%s", v[i].id);
		return 1;
	}
	return 0;
}

int krt_mvm_image_find(struct kis_store *store, int mvm_fd, const char *rootfs,
		       char base[KIS_ID_BUFSZ], struct kis_error **err)
{
	base[0] = '\0';
	_cleanup_close_ int idx = images_dir(mvm_fd, err);
	if (idx < 0)
		return -1;
	return kept_find(store, idx, rootfs, base);
}

/* The import's kis_import_options.minted: on to the caller's, as an
 * "image_base" */
static int note_image_base(void *ctx, const char *id, struct kis_error **err)
{
	const struct krt_mvm_minted *m = ctx;
	return m->fn(m->ctx, "image_base", id, err);
}

int krt_mvm_image_clone(struct kis_store *store, int mvm_fd, const char *rootfs,
			const struct krt_mvm_minted *minted, char base[KIS_ID_BUFSZ],
			char ws[KIS_ID_BUFSZ], struct kis_error **err)
{
	base[0] = ws[0] = '\0';
	_cleanup_close_ int idx = images_dir(mvm_fd, err);
	if (idx < 0)
		return -1;
	/* the workspace's id minted here and told before any clone: every
	 * attempt below clones under it (a failed clone leaves nothing
	 * under it, kis_workspace_clone_ex) */
	char wid[KIS_ID_BUFSZ] = "";
	if (minted) {
		TRY(kis_id_mint('w', wid, err));
		TRY(minted->fn(minted->ctx, "workspace", wid, err));
	}
	const char *want = *wid ? wid : NULL;
	uint64_t t0 = kis_monotonic_ms();
	size_t n = 0;
	char id[KIS_ID_BUFSZ];
	while (kept_find(store, idx, rootfs, id) == 1) {
		struct kis_error *e = NULL;
		if (kis_workspace_clone(store, id, want, ws, &e) == 0)
			return 0;
		/* evicted (removed) since it was listed, or removed by hand: no
		 * longer kept (and removed, should the clone have failed for
		 * another reason: a base not listed is no one's), import instead */
		kis_error_free(e);
		ws[0] = '\0';
		(void)unlinkat(idx, id, 0);
		(void)kis_base_remove(store, id, NULL);
		n++;
	}
	/* none: the rootfs into the store as a base (an OS image: its device
	 * nodes too), a workspace over it, and the base kept; its id told
	 * before the import publishes it */
	struct kis_import_options io = {.os_image = true};
	if (minted) {
		io.minted = note_image_base;
		io.minted_ctx = (void *)minted;
	}
	char nb[KIS_ID_BUFSZ];
	TRY(kis_base_import(store, rootfs, &io, nb, err));
	if (kis_workspace_clone(store, nb, want, ws, err) < 0) {
		(void)kis_base_remove(store, nb, NULL);
		return -1;
	}
	int f = openat(idx, nb, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f < 0) {
		/* not kept: the pod's own, removed with it */
		snprintf(base, KIS_ID_BUFSZ, "%s", nb);
		return 0;
	}
	close(f);
	evict(store, idx);
	kis_debug("pod sandbox image: imported as the base %s, kept (%zu kept before; %llu ms)",
		  nb, n, (unsigned long long)(kis_monotonic_ms() - t0));
	return 0;
}

bool krt_mvm_image_kept(int mvm_fd, const char *base)
{
	_cleanup_close_ int idx = openat(mvm_fd, IMAGES_DIR,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	return idx >= 0 && kis_id_validate(base, "base id", NULL) == 0 &&
	       fstatat(idx, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}
