/* SPDX-License-Identifier: MIT */
/* The top of the store: the sweep of what dead owners left (temporary
 * names, trashed bases and workspaces), on open and for `kis sandbox gc`.
 * It uses the base and workspace code; nothing below calls it. */
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
#include "core/io.h"
#include "core/tree.h"

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
		/* an owner is a file (an older build's, a directory) */
		int fd = owners ? store_open_owner(dirfd, e->d_name) : store_opendir(dirfd, e->d_name);
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
		if (store_base_refcount(s, b) == 0)
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
	/* a store without the engine's reaper cannot undo an owner's records
	 * (containers, cgroups: above the store): they wait for one that can */
	size_t no = s->reap ? collect_dead(s->owners_fd, true, owners, MAX_DEAD) : 0;
	char **tmpl = NULL;
	size_t ntmpl = 0;
	(void)store_disk_sweep_templates(s, &tmpl, &ntmpl);
	(void)store_flock(s->lock_fd, LOCK_UN);
	/* a disk template whose maker died in mke2fs: sparse, but its size */
	for (size_t i = 0; i < ntmpl; i++) {
		int done = dry_run ? 0 : store_disk_remove_template(s, tmpl[i]) < 0 ? -1 : 1;
		gc_report(fn, ctx, "template", tmpl[i], done, NULL, &failed);
	}
	kis_strv_free(tmpl);
	/* The flocks taken above keep a second sweeper away while we work.
	 * Dead owners first: their workspace goes through destroy, which
	 * leaves trash for the loops below only if it fails. */
	for (size_t i = 0; i < no; i++) {
		if (s->reap(s, owners[i].name, owners[i].fd, dry_run, fn, ctx) < 0)
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
