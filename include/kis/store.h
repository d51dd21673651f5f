/* SPDX-License-Identifier: MIT */
/* kis/store.h: bases, copy-on-write workspaces and their reference counts,
 * in one store root (bases/, workspaces/, sessions/). */
#ifndef KIS_STORE_H
#define KIS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kis/error.h"
#include "kis/id.h"

struct kis_store;

/* Open (creating if needed) the store at root; NULL root means
 * $KIS_SANDBOX_ROOT, else /var/lib/kis/sandbox for root and
 * $XDG_STATE_HOME/kis/sandbox (~/.local/state/kis/sandbox) otherwise.
 * Opening also reclaims what a killed command left behind (half-made
 * clones, half-destroyed workspaces and their references). */
KIS_API int kis_store_open(const char *root, struct kis_store **out, struct kis_error **err);
/* The same without the reclaiming, for a second open within a command
 * whose first open swept already (the wasm tier's code cache). */
KIS_API int kis_store_open_again(const char *root, struct kis_store **out,
				 struct kis_error **err);
KIS_API void kis_store_free(struct kis_store *s);
KIS_API const char *kis_store_root(const struct kis_store *s);
/* The store a command opens when it names none: $KIS_SANDBOX_ROOT, else
 * /var/lib/kis/sandbox as root, else $XDG_STATE_HOME/kis/sandbox or
 * ~/.local/state/kis/sandbox. *out is the caller's to free. */
KIS_API int kis_store_default_root(char **out, struct kis_error **err);

/* ---- Leftovers ---------------------------------------------------------- */

/* One thing the sweep found: what a killed command left (kind "process",
 * "container", "cgroup", "tmp", "session", "workspace", "clone" for a
 * half-made clone or import, "trash" for a half-removed one, "owner" for
 * the record itself). owner is the sandbox id whose run made it, NULL for
 * a store temporary. done: 1 removed, 0 found (dry run), -1 failed (error
 * says why). */
struct kis_gc_item {
	const char *owner;
	const char *kind;
	const char *what;
	int done;
	const char *error;
};
typedef void (*kis_gc_fn)(void *ctx, const struct kis_gc_item *it);

/* Sweep what dead owners left (as every store open does, but waiting for
 * the store lock instead of skipping when it is busy), calling fn for each
 * thing found; with dry_run nothing is removed. < 0 when something could
 * not be removed (fn saw it with done = -1) or the store cannot be opened. */
KIS_API int kis_store_gc(const char *root, bool dry_run, kis_gc_fn fn, void *ctx,
			 struct kis_error **err);

/* Clone a workspace from a base. want_id NULL: mint one. out receives the id. */
KIS_API int kis_workspace_clone(struct kis_store *s, const char *base_id, const char *want_id,
				char out[KIS_ID_BUFSZ], struct kis_error **err);
/* The host path of the workspace's files (mounted if it needs to be);
 * malloc'ed into *out. KIS_E_NOT_FOUND when it does not exist. */
KIS_API int kis_workspace_path(struct kis_store *s, const char *id, char **out,
			       struct kis_error **err);
/* Mount the host's view of an overlay workspace anew, after a sandbox that
 * joined its layers in an overlay of its own (bubblewrap) changed them:
 * the old view's caches would show what was. A no-op for other clones. */
KIS_API int kis_workspace_refresh(struct kis_store *s, const char *id, struct kis_error **err);
/* A live session's hold on the workspace it uses: destroy refuses a held
 * workspace (KIS_E_BUSY, naming the session) until the hold goes with the
 * session; a hold whose session is gone is swept by destroy. */
KIS_API int kis_workspace_hold(struct kis_store *s, const char *id, const char *holder,
			       struct kis_error **err);
KIS_API int kis_workspace_unhold(struct kis_store *s, const char *id, const char *holder);
/* A mount's hold (issue 21): holder is the run's sandbox id or the
 * session's id, live while the run's owner is locked or the session
 * exists; a dead holder's hold is dropped when next looked at. A hold
 * keeps destroy busy. write: a read-write mount, refused with KIS_E_BUSY
 * while another live holder writes the workspace (a read-write mount, or
 * a session whose own workspace it is); a session's own hold is refused
 * likewise while a read-write mount writes it. */
KIS_API int kis_workspace_hold_mount(struct kis_store *s, const char *id, const char *holder,
				     bool write, struct kis_error **err);
KIS_API int kis_workspace_unhold_mount(struct kis_store *s, const char *id, const char *holder);
/* A one-shot run's hold on its own workspace (issue 21), released with
 * kis_workspace_unhold_mount: a read-write mount of it is then busy while
 * the run lives, and so is destroy; refused with KIS_E_BUSY while a live
 * read-write mount writes it. Other runs and sessions on it are not
 * refused, as before. */
KIS_API int kis_workspace_hold_run(struct kis_store *s, const char *id, const char *holder,
				   struct kis_error **err);
/* KIS_E_BUSY when a live read-write mount other than self's writes the
 * workspace (a run that uses it as its own checks this first). */
KIS_API int kis_workspace_check_writers(struct kis_store *s, const char *id, const char *self,
					struct kis_error **err);
/* Idempotent: a valid id that names nothing succeeds. Refuses a held one. */
KIS_API int kis_workspace_destroy(struct kis_store *s, const char *id, struct kis_error **err);

/* limits.disk_bytes through project quotas (quotactl(2), PRJQUOTA) on the
 * store's filesystem, else (as root, issue 41) by an overlay workspace's
 * writable layer on a loop-mounted ext4 image of the limit's size
 * (src/store/disk.c). kis_store_disk_quota: 1 when one of them can bind
 * (with *binds_root: also against a writer holding CAP_SYS_RESOURCE, as
 * XFS and the image do and ext4 quotas do not), else 0 and why.
 * kis_workspace_disk_limit: the workspace's whole directory gets its own
 * project and a hard limit of bytes, or its image; 1 when set, 0 when
 * neither can be had for this workspace (asked: the limit was named, then
 * that is an error saying why, KIS_E_PROFILE_UNSATISFIABLE; a default
 * keeps an image the workspace has, whatever its size).
 * kis_workspace_disk_usage: bytes counted and the limit, 0 or -1. */
KIS_API int kis_store_disk_quota(struct kis_store *s, bool *binds_root, char *why, size_t n);
KIS_API int kis_workspace_disk_limit(struct kis_store *s, const char *id, uint64_t bytes,
				     bool asked, struct kis_error **err);
/* Overlay clones made through s from now on get their writable layer on a
 * disk image of bytes where that is how the store binds limits.disk_bytes
 * (then kis_workspace_disk_limit of the same bytes finds it made); 0: no.
 * scratch: those clones are destroyed with the run that makes them (none
 * is kept), so their images need not be flushed to the disk. */
KIS_API void kis_store_set_clone_disk(struct kis_store *s, uint64_t bytes, bool scratch);
/* How this store binds limits.disk_bytes: "quota" (project quotas),
 * "image" (a disk image per overlay workspace), or NULL (not at all). */
KIS_API const char *kis_store_disk_how(struct kis_store *s);
KIS_API int kis_workspace_disk_usage(struct kis_store *s, const char *id, uint64_t *used,
				     uint64_t *limit);

/* ---- Clone strategies ------------------------------------------------ */

enum kis_clone_strategy {
	KIS_CLONE_AUTO = 0, /* cheapest the store offers: reflink, overlay, copy */
	KIS_CLONE_REFLINK,  /* FICLONE per file (btrfs, xfs with reflink=1) */
	KIS_CLONE_OVERLAY,  /* overlayfs: lower = base tree, upper = the delta */
	KIS_CLONE_COPY,     /* a plain copy: not copy-on-write */
};

/* "auto", "reflink", "overlay", "copy". */
KIS_API const char *kis_clone_strategy_name(enum kis_clone_strategy st);
/* Parse a name as above; -1 with KIS_E_INVALID_ARGUMENT otherwise. */
KIS_API int kis_clone_strategy_parse(const char *name, enum kis_clone_strategy *out,
				     struct kis_error **err);

/* Whether the store offers a copy-on-write clone, probed once per store
 * (a FICLONE between two probe files, an overlay mount of probe dirs).
 * Returns 1 and *name = "reflink" or "overlay" when it does, 0 and
 * *name = "copy" when only a plain copy works, < 0 on a probe failure
 * (then *name = "copy"). name may be NULL. For `backends`' CoW column. */
KIS_API int kis_store_cow_strategy(struct kis_store *s, const char **name);

/* As kis_workspace_clone, with a strategy. A pinned strategy that this
 * store cannot do is refused with KIS_E_PROFILE_UNSATISFIABLE, never
 * replaced by another. */
KIS_API int kis_workspace_clone_ex(struct kis_store *s, const char *base_id, const char *want_id,
				   enum kis_clone_strategy strategy, char out[KIS_ID_BUFSZ],
				   struct kis_error **err);

/* ---- Bases ------------------------------------------------------------ */

struct kis_import_options {
	/* Admit device nodes, FIFOs and sockets (an OS image); root only. */
	bool os_image;
	/* Called now and then with the running totals; may be NULL. */
	void (*progress)(void *ctx, uint64_t files, uint64_t bytes);
	void *progress_ctx;
	/* The most data (bytes in files, holes not counted: a sparse file
	 * stays sparse) the import may write; past it the import stops and
	 * is undone, KIS_E_INVALID_ARGUMENT naming max_size. 0: the default,
	 * KIS_IMPORT_MAX_DEFAULT. */
	uint64_t max_bytes;
	/* Called with the new base's id once it is minted, before anything of
	 * it is in the store, so that a caller that may be killed can record
	 * the id first (a temporary of an import cut short is the store's to
	 * sweep; the base published under that id is the caller's to remove).
	 * A negative return stops the import (the callback sets *err). May
	 * be NULL. */
	int (*minted)(void *ctx, const char *id, struct kis_error **err);
	void *minted_ctx;
};
/* 16 GiB: a tree larger than most source trees, far below a disk. */
#define KIS_IMPORT_MAX_DEFAULT (16ull << 30)

/* Copy the tree at src (a host path) into the store as a new, immutable
 * base; out receives the minted id. Keeps modes, ownership (as root),
 * symlinks as links (never followed), hard links, extended attributes and
 * times. Device nodes, FIFOs and sockets are refused with
 * KIS_E_INVALID_ARGUMENT unless opts->os_image (which needs root).
 * opts may be NULL. */
KIS_API int kis_base_import(struct kis_store *s, const char *src,
			    const struct kis_import_options *opts, char out[KIS_ID_BUFSZ],
			    struct kis_error **err);
/* Mark a base removed; it is freed now if no clone holds it, else when the
 * last clone is destroyed. A removed base cannot be cloned. Idempotent for
 * a removed base; KIS_E_NOT_FOUND for an id that names nothing. */
KIS_API int kis_base_remove(struct kis_store *s, const char *id, struct kis_error **err);
/* A mount's reference on a base (bases/<b>/refs/<holder>.mount, beside the
 * clones'): base remove then marks it removed and it is freed with its last
 * reference; a dead holder's reference is dropped when next counted.
 * A removed base cannot be held (KIS_E_NOT_FOUND). */
KIS_API int kis_base_hold(struct kis_store *s, const char *id, const char *holder,
			  struct kis_error **err);
KIS_API int kis_base_unhold(struct kis_store *s, const char *id, const char *holder);
/* The host path of a base's (read-only by convention) tree; malloc'ed. */
KIS_API int kis_base_path(struct kis_store *s, const char *id, char **out,
			  struct kis_error **err);

/* The base's cache directory (bases/<b>/cache, made on first use, removed
 * with the base), where a backend keeps what it derives from the base (the
 * microvm's disk image of its tree); malloc'ed. */
KIS_API int kis_base_cache_dir(struct kis_store *s, const char *id, char **out,
			       struct kis_error **err);

struct kis_base_info {
	char id[KIS_ID_BUFSZ];
	size_t refs;  /* clones holding the base */
	bool removed; /* marked removed, freed with its last clone */
};
/* All bases, sorted by id; *out is malloc'ed (free()), *n its length. */
KIS_API int kis_base_list(struct kis_store *s, struct kis_base_info **out, size_t *n,
			  struct kis_error **err);

struct kis_workspace_info {
	char id[KIS_ID_BUFSZ];
	char base[KIS_ID_BUFSZ];
	enum kis_clone_strategy strategy;
};
/* One workspace: its base and strategy. KIS_E_NOT_FOUND when it does not
 * exist. */
KIS_API int kis_workspace_info(struct kis_store *s, const char *id, struct kis_workspace_info *out,
			       struct kis_error **err);
/* The layers of an overlay workspace, for a backend that joins them itself
 * (the microvm tier does, inside its guest): *lower the base's tree, *upper
 * the workspace's own changes (an overlayfs upper layer: whiteouts and
 * opaque directories as overlayfs writes them), *cache a directory the base
 * owns (made on first use, removed with the base) where a backend keeps
 * what it derives from the base. All three are malloc'ed paths, or all
 * NULL (and 0 returned) when the workspace is not an overlay clone.
 * KIS_E_NOT_FOUND when the workspace does not exist. */
KIS_API int kis_workspace_layers(struct kis_store *s, const char *id, char **lower, char **upper,
				 char **cache, struct kis_error **err);

/* All workspaces, sorted by id; *out is malloc'ed (free()), *n its length. */
KIS_API int kis_workspace_list(struct kis_store *s, struct kis_workspace_info **out, size_t *n,
			       struct kis_error **err);

#endif
