/* SPDX-License-Identifier: MIT */
/* Owners of one-shot runs and of sessions being created: the record of what
 * they made, under a flock that dies with them, and its sweep (owner.h). */
#include "core/util.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "kis/backend.h"
#include "confine/confine.h"
#include "engine/owner.h"
#include "engine/session_end.h"
#include "core/io.h"
#include "core/record.h"
#include "core/log.h"
#include "store/store_internal.h"
#include "core/tree.h"

#define RECORDS "records"

struct kis_owner {
	char id[KIS_ID_BUFSZ];
	struct kis_store *store; /* kis_owner_begin's, borrowed: it outlives the owner */
	int owners_fd; /* ROOT/owners */
	int fd;        /* ROOT/owners/<id>: its records, O_APPEND, flocked LOCK_EX */
	struct kis_record_sink sink; /* the thread's current record (core/record.h) */
};

static int owner_reap(struct kis_store *s, const char *name, int owner_fd, bool dry_run,
		      kis_gc_fn fn, void *ctx);

/* kis/store.h's opening, here and not in the store: its sweep undoes what
 * dead owners recorded, which only the engine can (the store is handed
 * owner_reap and calls nothing above it; kis_store_open_again, which does
 * not sweep, stays the store's). */
int kis_store_open(const char *root, struct kis_store **out, struct kis_error **err)
{
	return store_open_with(root, true, owner_reap, out, err);
}

int kis_owner_begin(struct kis_store *s, const char *id, struct kis_owner **out,
		    struct kis_error **err)
{
	*out = NULL;
	TRY(kis_id_validate(id, "sandbox id", err));
	struct kis_owner *o = calloc(1, sizeof(*o));
	if (!o)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	snprintf(o->id, sizeof(o->id), "%s", id);
	kis_record_init(&o->sink, -1, o->id); /* no tether yet: kis_owner_end may run */
	o->store = s;
	o->fd = -1;
	o->owners_fd = fcntl(s->owners_fd, F_DUPFD_CLOEXEC, 3);
	/* create + flock under the shared store lock: a sweep never sees the
	 * owner unlocked (store_mkfile_locked). A file, not a directory: its
	 * removal at the end of every run is an unlink, not an rmdir. */
	if (o->owners_fd >= 0)
		o->fd = store_mkfile_locked(s, s->owners_fd, id);
	int e = errno;
	if (o->fd < 0) {
		kis_error_set(err, KIS_E_INTERNAL, e, "cannot record the owner of '%s' in the store",
			      id);
		kis_owner_end(o, false);
		return -1;
	}
	o->sink.fd = o->fd;
	kis_record_push(&o->sink);
	*out = o;
	return 0;
}

void kis_owner_end(struct kis_owner *o, bool undo)
{
	if (!o)
		return;
	kis_record_pop(&o->sink);
	/* What was tied to the engine (core/record.h, the tether) is handed
	 * over with a published session, or killed by its watchers now,
	 * before the records are undone: nothing runs while they go. */
	kis_record_tether_end(&o->sink, !undo);
	/* Nothing recorded (the file is empty: every record is a line
	 * appended through o->fd, which only this owner writes, under its
	 * lock) leaves nothing to undo. The reap reads through the store the
	 * owner began with (the caller's, still open), not a second opening
	 * of it: some 25 system calls less at the end of every run. */
	struct stat ost;
	if (undo && o->fd >= 0 && fstat(o->fd, &ost) == 0 && S_ISREG(ost.st_mode) &&
	    ost.st_size == 0)
		undo = false;
	if (undo && o->fd >= 0)
		(void)owner_reap(o->store, o->id, o->fd, false, NULL, NULL);
	if (o->fd >= 0) {
		/* Removed while still locked: a sweeper that opened it meanwhile
		 * holds a name no longer there, and its lock waits for ours. */
		(void)unlinkat(o->owners_fd, o->id, 0);
		store_lock_close(o->fd);
	}
	if (o->owners_fd >= 0)
		close(o->owners_fd);
	free(o);
}

/* ---- the sweep ---- */

struct reap {
	struct kis_store *s;
	const char *owner;
	bool dry_run;
	kis_gc_fn fn;
	void *ctx;
	int failed;
};

static void report(struct reap *r, const char *kind, const char *what, int done,
		   struct kis_error *e)
{
	if (done < 0)
		r->failed++;
	if (r->fn) {
		struct kis_gc_item it = {.owner = r->owner, .kind = kind, .what = what, .done = done,
					 .error = e && e->message ? e->message : NULL};
		r->fn(r->ctx, &it);
	}
	kis_error_free(e);
}

/* The id-shaped tail of a recorded name must be the owner's own id: a
 * record can only name what its run made under its sandbox id. */
static bool is_owner_id(const struct reap *r, const char *s)
{
	return !strcmp(s, r->owner);
}

/* The owner's id, or a VMM's cgroup of its run: "<owner id>-vmm<digits>"
 * (src/backends/microvm/jail.c, jail_cgroup_name), or a wasm compile's:
 * "<owner id>-compile-<digits>" (src/backends/wasm.c, compile_group_open). */
static bool is_owner_leaf(const struct reap *r, const char *s)
{
	size_t n = strlen(r->owner);
	if (is_owner_id(r, s))
		return true;
	if (strncmp(s, r->owner, n))
		return false;
	const char *d = !strncmp(s + n, "-vmm", 4)        ? s + n + 4 :
			!strncmp(s + n, "-compile-", 9)   ? s + n + 9 : NULL;
	if (!d || !*d)
		return false;
	for (; *d; d++)
		if (*d < '0' || *d > '9')
			return false;
	return true;
}

static void reap_pid(struct reap *r, const char *v)
{
	int pid = 0;
	unsigned long long start = 0;
	if (sscanf(v, "%d %llu", &pid, &start) != 2 || pid <= 1 || !start)
		return;
	/* Only the process the run started: same pid, same start time
	 * (/proc/PID/stat field 22), addressed by pidfd from there on. */
	if (kis_proc_starttime(pid) != start)
		return;
	if (r->dry_run) {
		report(r, "process", v, 0, NULL);
		return;
	}
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0 || kis_proc_starttime(pid) != start)
		return;
	syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
	struct pollfd p = {.fd = pfd, .events = POLLIN};
	int done = poll(&p, 1, 3000) > 0 ? 1 : -1;
	report(r, "process", v, done, NULL);
}

/* What a backend alone can remove (struct kis_backend's reap): the
 * backend judges the record, the engine reports what it says. */
static void reap_leftover(struct reap *r, const struct kis_backend *b, const char *v)
{
	struct kis_error *e = NULL;
	int done = b->reap(r->owner, v, r->dry_run, &e);
	if (done == 0) {
		kis_error_free(e);
		return; /* nothing of this owner's there */
	}
	report(r, b->leftover_kind ? b->leftover_kind : b->leftover_record, v,
	       done < 0 ? -1 : r->dry_run ? 0 : 1, e);
}

/* A recorded cgroup must be a kis leaf under /sys/fs/cgroup named by the
 * owner: <anything>/kis/<owner id> (or a VMM's, <owner id>-vmm<n>), no "..". */
static void reap_cgroup(struct reap *r, const char *v)
{
	if (strncmp(v, "/sys/fs/cgroup/", 15) || strstr(v, "/../") || strstr(v, "//"))
		return;
	const char *leaf = strrchr(v, '/');
	if (!leaf || !is_owner_leaf(r, leaf + 1) || leaf - v < 4 || strncmp(leaf - 4, "/kis", 4))
		return;
	struct stat st;
	if (stat(v, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	if (r->dry_run) {
		report(r, "cgroup", v, 0, NULL);
		return;
	}
	struct kis_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return;
	struct statfs sf;
	cg->mode = statfs(v, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC ? KIS_CG_V2 : KIS_CG_V1;
	cg->dirs[0] = strdup(v);
	cg->parents[0] = strndup(v, (size_t)(leaf - v));
	struct kis_error *e = NULL;
	/* kills what is left in it, removes it, and the kis parent when empty */
	int done = kis_cgroup_destroy(cg, &e) < 0 ? -1 : 1;
	report(r, "cgroup", v, done, e);
}

/* A recorded temporary directory: kis-* right below /tmp or a runtime
 * directory (/run/user/N), never a path with "..". */
static void reap_tmp(struct reap *r, const char *v)
{
	const char *base = strrchr(v, '/');
	if (v[0] != '/' || !base || strncmp(base + 1, "kis-", 4) || strstr(v, "/../") ||
	    strstr(v, "//"))
		return;
	/* kis-<owner id> (a host tier's private directory) or kis-mvm.XXXXXX
	 * (mkdtemp's, for a VM's disks and sockets) */
	if (!is_owner_id(r, base + 5) && strncmp(base + 1, "kis-mvm.", 8))
		return;
	_cleanup_free_ char *parent = strndup(v, (size_t)(base - v));
	if (!parent || (strcmp(parent, "/tmp") && strncmp(parent, "/run/user/", 10)))
		return;
	_cleanup_close_ int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (pfd < 0 || fstatat(pfd, base + 1, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (r->dry_run) {
		report(r, "tmp", v, 0, NULL);
		return;
	}
	struct kis_error *e = NULL;
	/* kis_tree_remove never follows a link nor descends into another mount */
	int done = kis_tree_remove(pfd, base + 1, &e) < 0 ? -1 : 1;
	report(r, "tmp", v, done, e);
}

static void reap_session(struct reap *r, const char *v)
{
	if (!is_owner_id(r, v))
		return;
	char tmp[KIS_ID_BUFSZ + 8];
	snprintf(tmp, sizeof(tmp), ".tmp-%s", v);
	struct stat st;
	if (fstatat(r->s->sessions_fd, tmp, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (r->dry_run) {
		report(r, "session", tmp, 0, NULL);
		return;
	}
	struct kis_error *e = NULL;
	int done = kis_tree_remove(r->s->sessions_fd, tmp, &e) < 0 ? -1 : 1;
	report(r, "session", tmp, done, e);
}

static int reap_id(struct kis_store *s, const char *id, struct kis_error **err);

/* A run with a terminal is a one-exec session (entry.c): killed, the
 * session it made goes with it. Ended as destroy ends one (what its
 * creator left undone first, then kis_session_end), with the store the
 * sweep holds: session_end.c lies below both, so the sweep needs nothing
 * of session.c, which opens stores and so sweeps (issue 42). */
static void reap_tty_session(struct reap *r, const char *v)
{
	if (kis_id_validate(v, "session id", NULL) < 0)
		return;
	struct stat st;
	char tmp[KIS_ID_BUFSZ + 8];
	snprintf(tmp, sizeof(tmp), ".tmp-%s", v);
	if (fstatat(r->s->sessions_fd, v, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
	    fstatat(r->s->sessions_fd, tmp, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (r->dry_run) {
		report(r, "session", v, 0, NULL);
		return;
	}
	_cleanup_(kis_log_scope_end) const char *log_prev = kis_log_scope(v);
	struct kis_error *e = NULL;
	int own = reap_id(r->s, v, &e);
	if (own == 1)
		kis_error_set(&e, KIS_E_BUSY, 0, "session '%s' is being created", v);
	int done = own != 0 || kis_session_end(r->s, v, &e) < 0 ? -1 : 1;
	report(r, "session", v, done, e);
}

static void reap_ws(struct reap *r, const char *v)
{
	if (kis_id_validate(v, "workspace id", NULL) < 0)
		return;
	struct stat st;
	if (fstatat(r->s->ws_fd, v, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return; /* never published, or already gone: the clone sweep has it */
	if (r->dry_run) {
		report(r, "workspace", v, 0, NULL);
		return;
	}
	/* the run's hold on its own workspace names this owner, which the
	 * sweep holds locked now (so the hold reads as live): dropped first */
	if (r->owner)
		kis_workspace_unhold_mount(r->s, v, r->owner);
	struct kis_error *e = NULL;
	int done = kis_workspace_destroy(r->s, v, &e) < 0 ? -1 : 1;
	report(r, "workspace", v, done, e);
}

/* In this order: what runs first (so nothing is busy or re-made), then
 * what the backends alone can remove (a container: the slot with no fn,
 * each backend's leftover_record), the groups, the files, the workspace
 * last (a process inside its mount would keep it busy). */
static const struct {
	const char *kind;
	void (*fn)(struct reap *r, const char *value);
} reapers[] = {
	{"pid", reap_pid},       {NULL, NULL}, {"cgroup", reap_cgroup},
	{"tmp", reap_tmp},       {"session", reap_session}, {"tty-session", reap_tty_session},
	{"ws", reap_ws},
};

/* Each record "<kind> <value>" of buf, newest first (a later record may
 * depend on an earlier one), to fn or to backend b's reap. */
static void reap_records(struct reap *r, char *buf, size_t len, const char *kind,
			 void (*fn)(struct reap *r, const char *value),
			 const struct kis_backend *b)
{
	size_t kl = strlen(kind);
	for (char *end = buf ? buf + len : NULL; end && end > buf;) {
		char *nl = end - 1; /* the '\n' ending this line */
		char *start = nl;
		while (start > buf && start[-1] != '\n')
			start--;
		end = start;
		if ((size_t)(nl - start) > kl && !strncmp(start, kind, kl) && start[kl] == ' ') {
			char val[PATH_MAX + 64];
			snprintf(val, sizeof(val), "%.*s", (int)(nl - start - (long)kl - 1),
				 start + kl + 1);
			if (fn)
				fn(r, val);
			else
				reap_leftover(r, b, val);
		}
	}
}

/* The store's reaper of a dead owner (store_reap_fn, store_internal.h),
 * handed to it at every opening the engine makes. */
static int owner_reap(struct kis_store *s, const char *name, int owner_fd, bool dry_run,
		      kis_gc_fn fn, void *ctx)
{
	struct reap r = {.s = s, .owner = name, .dry_run = dry_run, .fn = fn, .ctx = ctx};
	char *buf = NULL;
	size_t len = 0;
	/* the owner is its records (a file); an older build's owner is a
	 * directory holding them. Read through a description of our own:
	 * the owner's fd writes at the end (O_APPEND) and must not move. */
	struct stat ost;
	bool known = fstat(owner_fd, &ost) == 0;
	bool legacy = known && S_ISDIR(ost.st_mode);
	_cleanup_close_ int fd = !known ? -1 :
				 legacy ? store_openat(owner_fd, RECORDS, O_RDONLY, 0) :
					  store_openat(s->owners_fd, name, O_RDONLY, 0);
	/* the name may be another's by now only if ours was removed: the same
	 * inode, or nothing is read */
	struct stat rst;
	if (fd >= 0 && !legacy && (fstat(fd, &rst) < 0 || rst.st_ino != ost.st_ino ||
				   rst.st_dev != ost.st_dev))
		kis_closep(&fd);
	if (fd >= 0) {
		_cleanup_fclose_ FILE *f = fdopen(fd, "re");
		if (f) {
			fd = -1;
			char line[PATH_MAX + 64];
			FILE *mem = open_memstream(&buf, &len);
			while (mem && fgets(line, sizeof(line), f))
				if (strchr(line, '\n')) /* a partial last line is ignored */
					fputs(line, mem);
			if (mem)
				fclose(mem);
		}
	}
	size_t nb = 0;
	const struct kis_backend *const *bs = kis_backends(&nb);
	for (size_t k = 0; k < ARRAY_SIZE(reapers); k++) {
		if (reapers[k].fn) {
			reap_records(&r, buf, len, reapers[k].kind, reapers[k].fn, NULL);
			continue;
		}
		for (size_t i = 0; i < nb; i++)
			if (bs[i]->reap && bs[i]->leftover_record)
				reap_records(&r, buf, len, bs[i]->leftover_record, NULL, bs[i]);
	}
	free(buf);
	if (dry_run)
		return 0;
	if (r.failed)
		return -1; /* kept, with its lock free: the next sweep tries again */
	if (legacy) {
		(void)unlinkat(owner_fd, RECORDS, 0);
		(void)unlinkat(s->owners_fd, name, AT_REMOVEDIR);
	} else {
		(void)unlinkat(s->owners_fd, name, 0);
	}
	report(&r, "owner", name, 1, NULL);
	return 0;
}

/* The owner id of store s undone if its process is gone (kis_owner_reap_id). */
static int reap_id(struct kis_store *s, const char *id, struct kis_error **err)
{
	int r = 0;
	int d = store_open_owner(s->owners_fd, id);
	if (d >= 0) {
		if (store_flock(d, LOCK_EX | LOCK_NB) < 0)
			r = errno == EWOULDBLOCK ? 1 :
				kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock the owner of '%s'", id);
		else if (owner_reap(s, id, d, false, NULL, NULL) < 0)
			r = kis_error_set(err, KIS_E_BUSY, 0,
					  "what '%s' left could not all be removed; see 'kis sandbox gc'",
					  id);
		close(d);
	}
	return r;
}

int kis_owner_reap_id(const char *store_root, const char *id, struct kis_error **err)
{
	TRY(kis_id_validate(id, "sandbox id", err));
	struct kis_store *s = NULL;
	TRY(store_open_with(store_root, false, owner_reap, &s, err));
	int r = reap_id(s, id, err);
	kis_store_free(s);
	return r;
}

/* `kis sandbox gc`: the store's leftovers (the sweep of owners, sessions
 * and temporary directories), then what each backend left from runs of any
 * store whose engine is gone (its collect: oci's containers, by their
 * bundle's owner record).
 * Here, not in the store: the store knows nothing of backends. */
int kis_store_gc(const char *root, bool dry_run, kis_gc_fn fn, void *ctx, struct kis_error **err)
{
	int failed = store_gc(root, owner_reap, dry_run, fn, ctx, err);
	if (failed < 0)
		return -1;
	if (!dry_run) {
		size_t nb = 0;
		const struct kis_backend *const *bs = kis_backends(&nb);
		for (size_t i = 0; i < nb; i++)
			if (bs[i]->collect)
				bs[i]->collect();
	}
	if (failed)
		return kis_error_set(err, KIS_E_BUSY, 0,
				     "%d leftover%s could not be removed (listed above)", failed,
				     failed == 1 ? "" : "s");
	return 0;
}
