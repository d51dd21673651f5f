/* SPDX-License-Identifier: MIT */
/* kis/sandbox.h: the library's front door. Include this one header. */
#ifndef KIS_SANDBOX_H
#define KIS_SANDBOX_H

#include "kis/backend.h"
#include "kis/error.h"
#include "kis/id.h"
#include "kis/profile.h"
#include "kis/result.h"
#include "kis/store.h"

/* The library's version ("0.1.0"), as `kis --version` prints it. */
KIS_API const char *kis_version(void);

/* The microvm's guest assets (kernel, modules, busybox) and the cache the
 * engine writes beside them (initramfs, snapshots, disk images). Looked up
 * in this order: $KIS_MICROVM_GUEST_DIR (assets and cache in one), the
 * system location (lib/kis/guest of the prefix the library or binary is
 * installed in, then of the prefix fixed at build time; `make install`
 * puts them there; the cache is then <store>/cache/guest-system), then the
 * store's own <store>/cache/guest (`kis sandbox guest fetch`). */
enum kis_guest_source { KIS_GUEST_NONE, KIS_GUEST_ENV, KIS_GUEST_SYSTEM, KIS_GUEST_STORE };
struct kis_guest_info {
	enum kis_guest_source source; /* NONE: no complete guest anywhere */
	char *assets;                 /* where they are read (or would be fetched) */
	char *cache;                  /* where the engine writes */
};
/* store_root NULL: KIS_SANDBOX_ROOT or the default. prepare: make the
 * store's links to a system guest (else nothing is written). */
KIS_API int kis_guest_locate(const char *store_root, bool prepare, struct kis_guest_info *out,
			     struct kis_error **err);
KIS_API void kis_guest_info_release(struct kis_guest_info *g);
KIS_API const char *kis_guest_source_name(enum kis_guest_source s);
/* The system location that holds a complete guest, or NULL (malloc'ed). */
KIS_API char *kis_guest_system_dir(void);
/* Does dir hold vmlinuz, modules/load and an executable busybox? */
KIS_API bool kis_guest_dir_complete(const char *dir);

struct kis_run_options {
	struct kis_io io;
	bool dry_run;          /* plan and describe, run nothing */
	const char *store_root; /* NULL: KIS_SANDBOX_ROOT or the default */
	int resize_fd;          /* with tty: readable means the caller's terminal resized */
	int tty_fd;             /* with tty: the caller's terminal (TIOCGWINSZ), or -1 */
	/* Optional: told what a slow step is doing (the microvm's first run
	 * builds its guest's initramfs and snapshot; a workspace is copied
	 * into a VM's disk), for a caller that shows progress. */
	void (*progress)(void *arg, const char *what);
	void *progress_arg;
	/* A session's pod network (kis-runtime's microvm pods): pod_net true,
	 * pod_netns_fd a network namespace the caller holds and vouches for
	 * (CNI's, named by a sandbox bundle its allowlist accepted). The
	 * microvm's network device is then served inside that namespace, the
	 * guest having its address (docs/network.md, "A kis-vm pod"); the
	 * profile's network.mode must be loopback, the tier microvm. */
	bool pod_net;
	int pod_netns_fd;
	/* A session's: its workspace's changes are not wanted back when it
	 * ends, the caller destroying the workspace right after (kis-runtime's
	 * microvm containers). A microvm session then reads nothing back from
	 * the disk its guest wrote: neither the time nor the parse of an image
	 * the guest made is spent on changes about to be thrown away. */
	bool discard_workspace;
	/* Called with a new session's id once it is minted, before anything
	 * of the session exists (its directory, its owner record, a process
	 * of it), so that a caller that may be killed can record the id first:
	 * kis_session_destroy of that id then undoes whatever the create had
	 * made (a create whose caller died midway is its dead owner's, reaped
	 * by id; a published session is destroyed as any other). A negative
	 * return stops the create (the callback sets *err). May be NULL.
	 * Appended last: a caller built against the older struct leaves it 0. */
	int (*minted)(void *ctx, const char *id, struct kis_error **err);
	void *minted_ctx;
};

/* Run one command under a profile: check the hatches, select a backend,
 * clone (profile.base) or open (profile.workspace) a workspace, plan, run,
 * clean up. On success res holds the termination; with dry_run, *plan_json
 * receives the plan (malloc'ed) and nothing runs. */
KIS_API int kis_run(const struct kis_profile *p, char *const *argv,
		    const struct kis_run_options *opts, struct kis_result *res, char **plan_json,
		    struct kis_error **err);

/* Sessions (after kis_run_options, which they use). */
#include "kis/session.h"
/* Handles, fds and JSON for foreign callers (the Python and Go bindings). */
#include "kis/ffi.h"

#endif
