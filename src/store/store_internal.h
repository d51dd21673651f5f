/* SPDX-License-Identifier: MIT */
/* Internals shared by the store's files: the open store, fd-relative path
 * resolution, locks, tree copy and removal, the overlay mount. */
#ifndef KIS_STORE_INTERNAL_H
#define KIS_STORE_INTERNAL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kis/store.h"
#include "core/util.h"

/* Store layout (all names single path components, resolved relative to
 * the directory fds below, never through a symlink):
 *
 *   ROOT/.lock                       flock: held shared while a temporary
 *                                    entry is being created and locked,
 *                                    exclusively by the leftover sweep
 *   ROOT/bases/<b>/tree/             the base's files
 *   ROOT/bases/<b>/refs/<w>          one empty file per clone holding <b>
 *   ROOT/bases/<b>/removed           marker: freed with the last clone
 *   ROOT/bases/.tmp-<b>/             an import in progress (flocked)
 *   ROOT/bases/.trash-<b>-<r>/       a base being freed (flocked)
 *   ROOT/workspaces/<w>/meta         "base=<b>\nstrategy=<name>\n"
 *   ROOT/workspaces/<w>/tree/        files (reflink, copy)
 *   ROOT/workspaces/<w>/{upper,work,merged}/   overlay
 *   ROOT/workspaces/.tmp-<w>/        a clone in progress (flocked)
 *   ROOT/workspaces/.trash-<w>-<r>/  a workspace being destroyed (flocked)
 *   ROOT/owners/<s>                  what run <s> made, one record a line
 *                                    (a file, flocked while the run lives;
 *                                    engine/owner.h; an older build's
 *                                    ROOT/owners/<s>/records is still
 *                                    swept)
 *
 * Every directory lock is flock(2) on the directory's own fd: the kernel
 * drops it when the holder dies, which is how the sweep tells a live
 * temporary from a leftover of a killed command. */

/* Undo the records of the dead owner ROOT/owners/<name> (fd: the owner,
 * from store_open_owner or its own, flocked by the caller) and remove it;
 * < 0: something stayed. The engine's (engine/owner.c), handed to the
 * store when it opens one (store_open_with): what the records name
 * (processes, containers, cgroups, sessions) lies above the store, which
 * only finds the owners whose engine is gone (house rule 16). */
typedef int (*store_reap_fn)(struct kis_store *s, const char *name, int fd, bool dry_run,
			     kis_gc_fn fn, void *ctx);

struct kis_store {
	char *root;       /* canonical absolute path */
	/* the engine's reaper of dead owners; NULL (a store opened by
	 * kis_store_open_again, or by a program without the engine): the
	 * sweep leaves the owners for an opening that can undo them */
	store_reap_fn reap;
	int root_fd;
	int bases_fd;
	int ws_fd;
	int sessions_fd;
	int owners_fd;
	int lock_fd;      /* ROOT/.lock */
	/* What the store's filesystem and our privileges allow, learned
	 * lazily: -1 unknown, 0 no, 1 yes. */
	int can_reflink;
	int can_overlay;
	/* an overlay clone's writable layer on a disk image of this limit
	 * (kis_store_set_clone_disk), 0: none */
	uint64_t clone_disk_bytes;
	/* and that clone is its run's scratch (destroyed with the run, swept
	 * after a crash): its image is mounted without flushes (disk.c) */
	bool clone_disk_scratch;
};

#define STORE_TMP_PREFIX ".tmp-"
#define STORE_TRASH_PREFIX ".trash-"

/* openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
 * relative to dirfd, O_CLOEXEC | O_NOFOLLOW added; falls back to openat
 * with O_NOFOLLOW (equivalent for single components) where openat2 is
 * missing. Returns the fd or -1 with errno. */
int store_openat(int dirfd, const char *path, int flags, mode_t mode);
/* Open a directory below dirfd (O_RDONLY | O_DIRECTORY, never a symlink). */
int store_opendir(int dirfd, const char *name);
/* mkdirat that accepts an existing directory (not a symlink). */
int store_mkdir_p1(int dirfd, const char *name, mode_t mode);

/* A DIR stream over a dup of dirfd, rewound; closedir it. */
DIR *store_dir_stream(int dirfd);
void store_closedirp(DIR **d);
#define _cleanup_dir_ _cleanup_(store_closedirp)

/* flock with EINTR retry; returns 0 or -1 with errno. */
int store_flock(int fd, int op);

/* Trees are removed by core/tree.h (kis_tree_remove): never a link
 * followed, never another mount entered. */

/* mkdir name below dirfd and flock it, under the shared store lock;
 * returns the locked directory fd, or -1 with errno (EEXIST: taken). */
int store_mktemp_locked(struct kis_store *s, int dirfd, const char *name);
/* The same for a file (O_RDWR | O_APPEND, 0600, made with O_EXCL): an
 * owner's record (engine/owner.h). A file is made and removed without the
 * directory's own block: rmdir(2) on this project's ext4 (discard) waits
 * 0.4 ms idle and ~3 ms under load, unlink(2) of a small file 0.02 ms. */
int store_mkfile_locked(struct kis_store *s, int dirfd, const char *name);
/* Close a descriptor of those two (its lock goes with it) and take it out
 * of the list kis_store_locks_drop closes (store/locks.h): the only way
 * they are closed, so that no number on the list is ever another's. */
void store_lock_close(int fd);
static inline void store_lock_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		store_lock_close(*fd);
		errno = saved;
	}
}
#define _cleanup_lock_ _cleanup_(store_lock_closep)
/* An owner below owners_fd, read-only, file or (older stores) directory. */
int store_open_owner(int owners_fd, const char *name);

/* Random suffix for trash names. */
int store_rand_suffix(char buf[9], struct kis_error **err);

/* FICLONE between two O_TMPFILEs of the store: cheap, no mount. */
bool store_can_reflink(struct kis_store *s);
/* An overlay mount of probe directories. Costly (unmounting an overlay
 * syncs its upper filesystem), so clones learn it by trying instead. */
bool store_can_overlay(struct kis_store *s);

/* The leftover sweep: dead temporaries and trash in bases/ and workspaces/,
 * removed bases with no reference left. Opportunistic (skipped while
 * another command holds ROOT/.lock); never fails the caller. */
void store_sweep(struct kis_store *s);
/* The same, reporting each thing to fn; wait: block on ROOT/.lock rather
 * than skip; dry_run: find, remove nothing. Returns the failures. */
int store_sweep_ex(struct kis_store *s, bool wait, bool dry_run, kis_gc_fn fn, void *ctx);
/* Open the store at root (NULL: the default) with the reaper of dead
 * owners reap (may be NULL), and sweep it when sweep is set. The engine's
 * kis_store_open is this with its reaper (engine/owner.c). */
int store_open_with(const char *root, bool sweep, store_reap_fn reap, struct kis_store **out,
		    struct kis_error **err);
/* The sweep of `kis sandbox gc` (engine/owner.c adds the backends'
 * leftovers): the number of leftovers that could not be removed, or < 0
 * with *err set. */
int store_gc(const char *root, store_reap_fn reap, bool dry_run, kis_gc_fn fn, void *ctx,
	     struct kis_error **err);

/* Release a workspace directory that is no longer visible (a dead or
 * failed temporary, or trash): unmount its overlay, drop its reference on
 * the base (freeing a removed base with its last clone), remove the tree.
 * name is below s->ws_fd; the caller holds the directory's flock. */
int store_release_workspace(struct kis_store *s, const char *name, struct kis_error **err);

/* Drop the reference <ws_id> on base <base_id>; frees the base when it is
 * removed and this was the last reference. */
int store_base_unref(struct kis_store *s, const char *base_id, const char *ws_id,
		     struct kis_error **err);
/* Free a base whose dir fd is locked: rename to trash, remove. */
int store_base_free_locked(struct kis_store *s, const char *id, struct kis_error **err);
/* Count the entries of a base's refs/ (fd of the base dir); -1 on error.
 * A mount's reference whose holder is gone is dropped on the way. */
long store_base_refcount(struct kis_store *s, int base_fd);

/* A mount's hold is named <holder>.mount (bases/<b>/refs/, workspaces/<w>/
 * holds/): never a workspace id (ids have no '.'). */
#define STORE_MOUNT_SUFFIX ".mount"
/* Is name a mount's hold? Then holder receives its run or session id. */
bool store_mount_holder(const char *name, char holder[KIS_ID_BUFSZ]);
/* A run or session that may hold: a session's directory (or its
 * temporary) exists, or a run's owner directory is flocked. */
bool store_holder_live(struct kis_store *s, const char *holder);

/* Mount overlayfs with lower, upper, work on target (all dir fds;
 * overlay.c, below workspace.c, view.c and disk.c, which all use it). */
int store_overlay_mount(int lower_fd, int upper_fd, int work_fd, int target_fd,
			struct kis_error **err);
/* True when fd (a directory) is the root of a mount. */
bool store_is_mountpoint(int dirfd, const char *name);

/* Rootless overlay workspaces (view.c): the overlay held mounted by a
 * holder in a user and mount namespace of the caller's own, reached from
 * the host through /proc/PID/root. wanted: the engine is not root (root
 * mounts on merged/ in the host's namespace). start: a holder for the
 * workspace directory `name` (d open on it); path: merged/ through the live
 * holder, started again if it is gone; refresh: remount in the holder's
 * namespaces (the path stays); stop: kill the holder; probe: can an
 * overlay be mounted so for the probe directory `name`. */
bool store_view_wanted(void);
int store_view_start(struct kis_store *s, int d, const char *name, struct kis_error **err);
int store_view_path(struct kis_store *s, int d, const char *id, char **out,
		    struct kis_error **err);
int store_view_refresh(struct kis_store *s, int d, const char *id, struct kis_error **err);
void store_view_stop(int d);
bool store_view_probe(struct kis_store *s, const char *name);

/* Tree copy: src_fd/dst_fd are directories; dst is empty. */
struct store_copy {
	bool reflink_only;  /* every regular file by FICLONE, else fail */
	bool try_reflink;   /* FICLONE first, fall back to copying bytes */
	bool allow_special; /* device nodes, FIFOs, sockets */
	bool keep_owner;    /* chown to the source's owner (root) */
	void (*progress)(void *ctx, uint64_t files, uint64_t bytes);
	void *progress_ctx;
	/* bytes of data (holes not counted) past which the copy stops with a
	 * named error; 0: none */
	uint64_t max_bytes;
	/* running totals (bytes: data copied, or held by a reflinked file) */
	uint64_t files;
	uint64_t bytes;
};
int store_copy_tree(struct store_copy *c, int src_fd, int dst_fd, struct kis_error **err);

/* Write a small file below dirfd, O_EXCL; read one back (malloc'ed). */
int store_write_file(int dirfd, const char *name, const char *data, struct kis_error **err);
int store_read_file(int dirfd, const char *name, char **out, struct kis_error **err);

/* Project quotas (quota.c): whether fd's filesystem enforces them (1, else
 * 0 and why); one workspace's limit on its tree at fd (marked from there,
 * mounts below skipped); its usage and limit in bytes. */
struct store_quota_info {
	bool enforced;
	bool xfs;       /* XFS: limits bind every writer, root's too */
	char why[160];
};
int store_quota_probe(int fd, struct store_quota_info *qi);
int store_quota_set(int fd, const char *ws_id, uint64_t bytes, struct kis_error **err);
int store_quota_get(int fd, const char *ws_id, uint64_t *used, uint64_t *limit);

/* Disk images (disk.c, issue 41): an overlay workspace's writable layer on
 * a loop-mounted ext4 image of the limit's size, where the store's
 * filesystem keeps no project quotas. probe: 1 when images can be had (root,
 * loop devices, mke2fs), else 0 and why; present: the workspace (dir d) has
 * one; limit: give it one of bytes (1), or 0 when this workspace cannot have
 * it (asked: then an error saying why; a default keeps an image of another
 * size); layers: the overlay's upper and work (in the image, mounted on
 * demand, or upper/ and work/); upper_rel: upper's path below the
 * workspace; unmount: the image's mount, if any (its loop device detaches
 * itself); usage: what the image's filesystem holds and can hold. */
int store_disk_probe(char *why, size_t n);
bool store_disk_present(int d);
int store_disk_limit(struct kis_store *s, int d, const char *id, uint64_t bytes, bool asked,
		     struct kis_error **err);
/* A clone's image, made with it (kis_store_set_clone_disk): no overlay to
 * mount twice (each unmount syncs the store's filesystem). */
int store_disk_make(struct kis_store *s, int d, const char *id, uint64_t bytes,
		    struct kis_error **err);
int store_disk_layers(struct kis_store *s, int d, const char *id, int *up, int *wk,
		      struct kis_error **err);
const char *store_disk_upper_rel(int d);
int store_disk_unmount(struct kis_store *s, int d, const char *name, struct kis_error **err);
int store_disk_usage(int d, uint64_t *used, uint64_t *limit);
/* The sweep's: the names of dead temporaries of disk-templates/ (a maker
 * killed in mke2fs; their flock is free), to be called with ROOT/.lock held
 * exclusively (*dead: kis_strv_free it); remove one of them. */
int store_disk_sweep_templates(struct kis_store *s, char ***dead, size_t *n);
int store_disk_remove_template(struct kis_store *s, const char *name);

/* Workspace meta: parse "base=...\nstrategy=...\n". */
int store_ws_meta(int ws_dir_fd, char base[KIS_ID_BUFSZ], enum kis_clone_strategy *st,
		  struct kis_error **err);

#endif
