/* SPDX-License-Identifier: MIT */
/* Sessions on the engine side: create (start the agent through the
 * backend), exec (one connection to the agent, relayed), list, destroy.
 * The handle is rebuilt from the session's directory every time, so a client
 * that was killed finds the same session when it comes back. */
#include "core/util.h"

#include <dirent.h>
#include <stddef.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>

#include "engine/internal.h"
#include "engine/owner.h"
#include "engine/session_end.h"
#include "core/argv.h"
#include "core/io.h"
#include "core/json.h"
#include "core/log.h"
#include "kis/session.h"
#include "kis/store.h"
#include "core/tree.h"

#define SOCK_NAME "agent.sock"

/* sessions/ under the store root, created 0700 (DESIGN.md: the channel is a
 * unix socket in a 0700 directory of the store). */
static int open_sessions_dir(struct kis_engine_ctx *ec, bool create, char **path_out,
			     struct kis_error **err)
{
	struct kis_store *st = NULL;
	TRY(kis_ctx_store(ec, &st, err));
	_cleanup_free_ char *path = NULL;
	int r = asprintf(&path, "%s/sessions", kis_store_root(st));
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "sessions");
	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", path);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? -2 : kis_error_set(err, KIS_E_INTERNAL, errno,
							   "cannot open '%s'", path);
	if (path_out)
		*path_out = steal_ptr(path);
	return fd;
}

/* The directory of session id: its fd; -2 when there is none (no session
 * yet at all, or none of that id); -1 with err set (when err is not NULL)
 * on a failure. */
static int session_dir(struct kis_engine_ctx *ec, const char *id, struct kis_error **err)
{
	_cleanup_close_ int sdir = open_sessions_dir(ec, false, NULL, err);
	if (sdir < 0)
		return sdir;
	int dfd = openat(sdir, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return dfd >= 0 ? dfd : -2;
}

/* The path of a file inside a directory fd, short enough for sun_path:
 * /proc/self/fd/N/NAME resolves through the descriptor. */
static int fd_sockaddr(int dfd, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/" SOCK_NAME, dfd);
	return 0;
}

static int write_meta(int dfd, json_t *meta, struct kis_error **err)
{
	char *s = json_dumps(meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!s)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "session metadata");
	int fd = openat(dfd, META_NAME ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int r = 0;
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s) || fsync(fd) < 0 ||
	    renameat(dfd, META_NAME ".tmp", dfd, META_NAME) < 0)
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write the session metadata");
	if (fd >= 0)
		close(fd);
	free(s);
	return r;
}

static void created_now(char buf[32])
{
	time_t now = time(NULL);
	strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

/* ---- a session's limits ----
 * The limits given to create are the session's: each exec runs under them,
 * and its own flags may only tighten them. An exec that asks for more than
 * the session allows is refused by name (invalid_profile) rather than
 * clamped: a caller who asked for 10 s and silently got 2 s would read the
 * timeout as the command's fault. Stored resolved in the session's
 * meta ("limits"), so a later engine applies the same values. */
static json_t *limits_to_json(const struct kis_limits *l)
{
	return kis_limits_to_json(l, KIS_LIMITS_ALL);
}

/* The exec's limits: the session's where the exec names none, the exec's
 * where it names a tighter one; a looser one is refused. A session made by
 * an engine that did not record its limits gets the defaults, as before. */
static int session_limits_merge(json_t *meta, const char *id, const struct kis_limits *want,
				struct kis_limits *out, struct kis_error **err)
{
	struct kis_limits have = {0};
	kis_limits_from_json(json_object_get(meta, "limits"), &have, KIS_LIMITS_ALL);
	kis_limits_resolve(&have, out);
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++) {
		uint64_t w = kis_limit_get(want, i), s = kis_limit_get(out, i);
		if (!w)
			continue;
		if (!kis_limit_table[i].per_exec && w != s)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "limits.%s: an exec cannot set it (the session's is "
					     "%llu, set at create)",
					     kis_limit_table[i].name, (unsigned long long)s);
		if (w > s)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "limits.%s: %llu is above the %llu of session '%s': an "
					     "exec may only tighten its session's limits (create "
					     "another session for more)",
					     kis_limit_table[i].name, (unsigned long long)w,
					     (unsigned long long)s, id);
		*kis_limit_slot(out, i) = w;
	}
	return 0;
}

/* The whole session of an agentless backend: its profile and workspace. */
static int write_agentless_meta(int dfd, const char *id, const struct kis_backend *b,
				const struct kis_profile *p, const char *ws_id, bool ws_cloned,
				const struct kis_mounts *mounts, struct kis_error **err)
{
	_cleanup_free_ char *pj = kis_profile_to_json(p);
	json_error_t je;
	json_t *prof = pj ? json_loads(pj, 0, &je) : NULL;
	if (!prof)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "session profile");
	/* every exec runs on the backend the session was made on */
	json_object_set_new(prof, "backend", json_string(b->name));
	char created[32];
	created_now(created);
	struct kis_limits lim;
	kis_limits_resolve(&p->limits, &lim);
	/* the mounts the session holds, released by destroy */
	json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:b, s:o, s:o*, s:o}", "id", id,
				 "tier", kis_tier_name(b->tier), "backend", b->name, "workspace",
				 ws_id, "workspace_cloned", ws_cloned, "created", created,
				 "agentless", 1, "profile", prof, "limits", limits_to_json(&lim),
				 "mounts", kis_mounts_json(mounts->v, mounts->n));
	int r = meta ? write_meta(dfd, meta, err) :
		       kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "session metadata");
	json_decref(meta);
	return r;
}

/* The backend a session of this profile lives on, checked as create and
 * create --dry-run both need: the hatches, selection, sessions and a
 * terminal where asked; *agent the agent's path (NULL for a backend without
 * one: wasm has sessions too, a kept workspace and a profile, each exec a
 * fresh run in them, no shell). */
static int session_backend(const struct kis_ctx *ctx, const struct kis_profile *p,
			   const struct kis_backend **b, struct kis_caps *caps, char **agent,
			   struct kis_error **err)
{
	*agent = NULL;
	/* *b set: the command selected it already (a run with a terminal,
	 * entry.c), with caps its probe; selection happens once per command */
	if (!*b) {
		TRY(kis_profile_check_hatches(p, err));
		TRY(kis_select_backend_in(ctx, p, NULL, NULL, b, caps, err));
	}
	if ((*b)->start_session && !caps->shell)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "tier: the %s backend has no sessions (see the SHELL column of "
				     "'kis sandbox backends')",
				     (*b)->name);
	if (p->tty.enabled && !caps->tty)
		return kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0,
				     "the %s backend cannot give a terminal: drop tty.enabled (--tty)",
				     (*b)->name);
	if (!(*b)->start_session)
		return 0;
	if (!ctx->agent)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, ENOENT, "%s", ctx->agent_why);
	*agent = strdup(ctx->agent);
	return *agent ? 0 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "agent path");
}

int kis_session_create_in(struct kis_engine_ctx *ec, const struct kis_profile *p,
			  const struct kis_run_options *o, const struct kis_backend *selected,
			  const struct kis_caps *selected_caps, char id[KIS_ID_BUFSZ],
			  struct kis_error **err)
{
	const struct kis_ctx *ctx = &ec->ctx;
	const struct kis_backend *b = selected;
	struct kis_caps caps;
	if (selected)
		caps = *selected_caps;
	_cleanup_free_ char *agent = NULL;
	TRY(session_backend(ctx, p, &b, &caps, &agent, err));
	bool agentless = !b->start_session;
	char *argv[] = {agent, "--listen-fd", "3", NULL};
	struct kis_run_request req = {.ctx = ctx, .profile = p, .argv = argv, .io = o->io,
				      .session = true, .pod_net = o->pod_net,
				      .pod_netns_fd = o->pod_netns_fd,
				      .discard_workspace = o->discard_workspace};
	/* only the microvm serves a pod's network, and only in place of the
	 * guest's own loopback (kis_run_options) */
	if (o->pod_net && (p->tier != KIS_TIER_MICROVM || p->net != KIS_NET_LOOPBACK ||
			   o->pod_netns_fd < 0))
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "a pod's network is the microvm tier's, with network.mode "
				     "loopback");
	kis_limits_resolve(&p->limits, &req.limits);
	if (agentless) {
		/* Each exec of an agentless session is a run of this profile:
		 * what its plan refuses of the profile (a wasm session with
		 * --net loopback, --net host or --cwd, issue 40 item 6) is
		 * refused now, before anything is made, not by every exec. The
		 * stand-in command is a relative name, as the module's is. */
		char *stand_in[] = {"create-check", NULL};
		struct kis_run_request cr = req;
		cr.argv = stand_in;
		struct kis_plan *cp = NULL;
		kis_test_count("plan");
		TRY(b->plan(&caps, &cr, &cp, err));
		b->plan_free(cp);
	}
	TRY(kis_id_mint('s', id, err));
	/* told before anything of the session exists (kis_run_options) */
	if (o->minted)
		TRY(o->minted(o->minted_ctx, id, err));
	req.sandbox_id = id;

	_cleanup_free_ char *sessions_path = NULL;
	_cleanup_close_ int sdir = open_sessions_dir(ec, true, &sessions_path, err);
	if (sdir < 0)
		return -1;
	kis_session_sweep_leftovers(sdir);
	/* Until it is published, the session is its creator's: what it makes
	 * is recorded under an owner (engine/owner.h) and swept if the
	 * creator dies; published, it is the session's to end (destroy). */
	struct kis_owner *owner = NULL;
	struct kis_store *st = NULL;
	TRY(kis_ctx_store(ec, &st, err));
	TRY(kis_owner_begin(st, id, &owner, err));
	char tmp[KIS_ID_BUFSZ + 8];
	snprintf(tmp, sizeof(tmp), ".tmp-%s", id);
	if (kis_owner_note("session", "%s", id) < 0 || mkdirat(sdir, tmp, 0700) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the session");
		kis_owner_end(owner, true);
		return -1;
	}
	int r = -1;
	_cleanup_close_ int dfd = openat(sdir, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_close_ int lfd = -1;
	/* every cleanup variable is declared before the first goto fail: a jump
	 * past its initialisation would free garbage */
	_cleanup_free_ char *ws_id = NULL, *ws_path = NULL, *dir_path = NULL;
	bool ws_cloned = false;
	struct kis_plan *plan = NULL;
	pid_t pid = 0;
	struct kis_ws_layers lay = {0};
	struct kis_mounts mounts = {0};
	if (dfd < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the session directory");
		goto fail;
	}
	bool disk_quota = false;
	if (kis_disk_check(p, ec, b, &caps, &disk_quota, err) < 0 ||
	    kis_workspace_acquire(p, ec, true, b, &ws_id, &ws_path, &ws_cloned, err) < 0 ||
	    (disk_quota && ws_id &&
	     kis_disk_apply(ec, ws_id, req.limits.disk_bytes, p->limits.disk_bytes != 0, err) < 0))
		goto fail;
	/* held while the session lives: destroy of the workspace is busy */
	if (ws_id && kis_workspace_hold_for(ec, ws_id, id, err) < 0)
		goto fail;
	/* and so are its mounts' sources, held by the session's id (its
	 * temporary directory exists: the hold is live from here) */
	if (kis_mounts_acquire(p, ec, id, &mounts, err) < 0)
		goto fail;
	req.mounts = mounts.v;
	req.n_mounts = mounts.n;
	kis_test_pause("create-clone");
	req.workspace_path = ws_path;
	kis_workspace_layers_get(ec, ws_id, &lay);
	req.workspace_lower = lay.lower;
	req.workspace_upper = lay.upper;
	req.workspace_cache = lay.cache;
	if (agentless) {
		/* each exec is a run with the session's profile: it places the
		 * mounts anew, the session holds them (exec_agentless) */
		if (!ws_id) {
			kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				      "workspace: a %s session keeps a workspace: give --base or "
				      "--workspace", b->name);
			goto fail;
		}
		if (write_agentless_meta(dfd, id, b, p, ws_id, ws_cloned, &mounts, err) < 0 ||
		    renameat(sdir, tmp, sdir, id) < 0) {
			if (err && !*err)
				kis_error_set(err, KIS_E_INTERNAL, errno, "cannot publish the session");
			goto fail;
		}
		kis_ws_layers_free(&lay);
		/* the holds are the session's now: destroy releases them */
		free(mounts.held);
		mounts.held = NULL;
		kis_mounts_release(&mounts);
		kis_owner_end(owner, false);
		return 0;
	}
	kis_test_count("plan");
	if (b->plan(&caps, &req, &plan, err) < 0)
		goto fail;
	struct sockaddr_un sa;
	fd_sockaddr(dfd, &sa);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the session socket");
		goto fail;
	}
	if (asprintf(&dir_path, "%s/%s", sessions_path, tmp) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "session path");
		goto fail;
	}
	struct kis_session_ctx sctx = {.id = id, .dir_fd = dfd, .dir_path = dir_path,
				       .listen_fd = lfd};
	kis_test_pause("create-start");
	if (b->start_session(plan, &sctx, &pid, err) < 0)
		goto fail;
	/* The backend recorded its processes as it made them (QEMU, crun's
	 * container); this is the session's own, for those that did not. */
	(void)kis_owner_note("pid", "%d %llu", (int)pid, kis_proc_starttime(pid));
	kis_test_pause("create-ready");
	char created[32];
	created_now(created);
	json_t *meta = json_pack("{s:s, s:s, s:s, s:o, s:b, s:s, s:i, s:I, s:o*, s:o}", "id", id,
				 "tier", kis_tier_name(b->tier), "backend", b->name, "workspace",
				 ws_id ? json_string(ws_id) : json_null(), "workspace_cloned",
				 ws_cloned, "created", created, "agent_pid", (int)pid, "agent_start",
				 (json_int_t)kis_proc_starttime(pid), "limits",
				 limits_to_json(&req.limits), "mounts",
				 kis_mounts_json(mounts.v, mounts.n));
	r = meta ? write_meta(dfd, meta, err) : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "meta");
	json_decref(meta);
	if (r < 0)
		goto fail;
	if (renameat(sdir, tmp, sdir, id) < 0) {
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot publish the session");
		goto fail;
	}
	b->plan_free(plan);
	kis_ws_layers_free(&lay);
	/* the holds are the session's now: destroy releases them */
	free(mounts.held);
	mounts.held = NULL;
	kis_mounts_release(&mounts);
	kis_owner_end(owner, false);
	return 0;
fail:
	if (pid > 0)
		kill(pid, SIGKILL);
	if (plan)
		b->plan_free(plan);
	kis_ws_layers_free(&lay);
	kis_mounts_release(&mounts);
	if (ws_id)
		kis_workspace_unhold_for(ec, ws_id, id);
	if (ws_id && ws_cloned)
		kis_workspace_release(ec, ws_id);
	kis_tree_remove_quiet(sdir, tmp);
	kis_owner_end(owner, true);
	return -1;
}

/* ---- exec: the client side of one connection ---- */

/* After an exec: name the session's tier and backend in the result, and let
 * the backend say whether a limit it enforces (its cgroup) ended the exec. */
static void explain_exec(struct kis_engine_ctx *ec, const char *id, struct kis_result *res)
{
	_cleanup_close_ int dfd = session_dir(ec, id, NULL);
	json_t *meta = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
	const struct kis_backend *b = meta ? kis_session_meta_backend(meta) : NULL;
	if (b) {
		res->tier = b->tier;
		res->backend = b->name;
	}
	if (b && b->tier == KIS_TIER_MICROVM && !res->accel[0]) {
		struct kis_caps caps; /* the accelerator verdict is cached: cheap */
		b->probe(&ec->ctx, &caps); /* the command's context, not another */
		snprintf(res->accel, sizeof(res->accel), "%s", caps.accel);
	}
	bool failed = (res->reason == KIS_REASON_EXITED && res->exit_code != 0) ||
		      res->reason == KIS_REASON_SIGNALED || res->reason == KIS_REASON_TIMEOUT;
	/* the host's cgroup counts the limit events of every exec, also one
	 * that ended well (a child OOM-killed under a top command that lived
	 * on); the verdict changes only for a failed one. The microvm asks its
	 * guest, which costs a round trip: only after a failure. */
	if (b && b->session_explain && (failed || b->tier != KIS_TIER_MICROVM)) {
		struct kis_session_ctx ctx = {.id = id, .dir_fd = dfd, .listen_fd = -1};
		b->session_explain(&ctx, res);
	}
	/* the session's workspace full (its quota or disk image, issue 41):
	 * a failed exec ended by limits.disk_bytes; the microvm's own layer
	 * is its guest's to judge */
	if (b && failed && b->tier != KIS_TIER_MICROVM && res->reason == KIS_REASON_EXITED)
		kis_disk_explain(ec, json_string_value(json_object_get(meta, "workspace")), res);
	if (kis_backend_own_view(b)) {
		kis_workspace_refresh_view(ec,
					   json_string_value(json_object_get(meta, "workspace")));
		size_t i;
		json_t *m;
		json_array_foreach(json_object_get(meta, "mounts"), i, m)
			if (!json_is_true(json_object_get(m, "read_only")))
				kis_workspace_refresh_view(
					ec, json_string_value(json_object_get(m, "source")));
	}
	json_decref(meta);
}

static int connect_session(struct kis_engine_ctx *ec, const char *id, bool tty,
			   struct kis_error **err)
{
	TRY(kis_id_validate(id, "session id", err));
	_cleanup_close_ int dfd = session_dir(ec, id, err);
	if (dfd == -1)
		return -1;
	if (dfd < 0)
		return kis_error_set(err, KIS_E_NOT_FOUND, 0,
				     "no session '%s' (see 'kis sandbox session list')", id);
	if (tty) {
		/* The backend decides, however the call arrives: no silent pipes. */
		json_t *meta = kis_session_meta_read(dfd);
		const char *name = json_string_value(json_object_get(meta, "backend"));
		const struct kis_backend *b = name ? kis_backend_find(name) : NULL;
		struct kis_caps caps = {0};
		if (b)
			b->probe(&ec->ctx, &caps); /* in the command's context */
		int ok = b && caps.tty;
		if (!ok)
			kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0,
				      "the %s backend of session '%s' cannot give a terminal: drop --tty",
				      name ? name : "unknown", id);
		json_decref(meta);
		if (!ok)
			return -1;
	}
	struct sockaddr_un sa;
	fd_sockaddr(dfd, &sa);
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "socket");
	if (connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(c);
		return kis_error_set(err, KIS_E_NOT_FOUND, e,
				     "session '%s' is not running: destroy it and create another", id);
	}
	return c;
}

/* An exec in an agentless session: a run with the session's profile in its
 * workspace. 1 when it was one (res filled), 0 when the session has an
 * agent, < 0 on failure. */
static int exec_agentless(struct kis_engine_ctx *ec, const char *id, char *const *argv,
			  const struct kis_exec_options *o,
			  struct kis_result *res, struct kis_error **err)
{
	TRY(kis_id_validate(id, "session id", err));
	_cleanup_close_ int dfd = session_dir(ec, id, err);
	if (dfd == -1)
		return -1;
	json_t *meta = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
	if (!meta || !json_is_true(json_object_get(meta, "agentless"))) {
		json_decref(meta);
		return 0; /* an agent's session, or none: connect_session says which */
	}
	int r = -1;
	struct kis_profile p;
	kis_profile_init(&p);
	const struct kis_backend *b = kis_session_meta_backend(meta);
	char *pj = json_dumps(json_object_get(meta, "profile"), JSON_COMPACT);
	if (o->shell) {
		kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
			      "shell: the %s backend of session '%s' runs modules, not shell lines",
			      b ? b->name : "unknown", id);
		goto out;
	}
	if (!pj || kis_profile_merge_json(&p, pj, strlen(pj), err) < 0 ||
	    kis_profile_set(&p, "workspace", json_string_value(json_object_get(meta, "workspace")),
			    err) < 0)
		goto out;
	free(p.base);
	p.base = NULL;
	p.keep = true;
	p.tty.enabled = o->tty;
	if (o->cwd && kis_profile_set(&p, "cwd", o->cwd, err) < 0)
		goto out;
	for (char *const *e = o->env_add; e && *e; e++)
		if (kis_profile_set(&p, "env", *e, err) < 0)
			goto out;
	/* checked against the session's limits; the profile keeps its zeroes
	 * (a default is not an explicit ask: limits.disk_bytes at 0 must not
	 * become a quota the backend is asked to enforce) */
	struct kis_limits merged;
	if (session_limits_merge(meta, id, &o->limits, &merged, err) < 0)
		goto out;
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++)
		if (kis_limit_get(&o->limits, i))
			*kis_limit_slot(&p.limits, i) = kis_limit_get(&merged, i);
	struct kis_run_options ro = {.io = o->io, .store_root = o->store_root,
				     .resize_fd = -1, .tty_fd = -1};
	/* below the session: run.c, never back up through kis_run; the
	 * mounts are the session's, held by it */
	ec->mounts_held = true;
	const struct kis_backend *rb = NULL;
	struct kis_caps rcaps;
	/* the exec's own id for its run; its events carry the session's */
	const char *log_prev = kis_log_scope(id);
	r = kis_id_mint('s', res->sandbox, err);
	if (r >= 0)
		r = kis_run_select(ec, &p, argv, &rb, &rcaps, err);
	if (r >= 0)
		r = kis_run_one(ec, &p, argv, rb, &rcaps, &ro, res, NULL, err);
	kis_log_scope(log_prev);
	ec->mounts_held = false;
	if (r >= 0) {
		snprintf(res->sandbox, sizeof(res->sandbox), "%s", id);
		free(res->workspace);
		res->workspace = NULL; /* the session's, not this exec's to report */
		r = 1;
	}
out:
	free(pj);
	kis_profile_release(&p);
	json_decref(meta);
	return r;
}

static int session_cpu_fd(struct kis_engine_ctx *ec, const char *id)
{
	_cleanup_close_ int dfd = session_dir(ec, id, NULL);
	json_t *meta = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
	const struct kis_backend *b = meta ? kis_session_meta_backend(meta) : NULL;
	int fd = -1;
	if (b && b->session_cpu_fd) {
		struct kis_session_ctx ctx = {.id = id, .dir_fd = dfd, .listen_fd = -1};
		fd = b->session_cpu_fd(&ctx);
	}
	json_decref(meta);
	return fd;
}

/* The limits of an exec in an agent's session (see session_limits_merge). */
static int session_exec_limits(struct kis_engine_ctx *ec, const char *id,
			       const struct kis_exec_options *o,
			       struct kis_limits *out, struct kis_error **err)
{
	_cleanup_close_ int dfd = session_dir(ec, id, err);
	if (dfd == -1)
		return -1;
	json_t *meta = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
	if (!meta)
		return kis_error_set(err, KIS_E_NOT_FOUND, 0,
				     "no session '%s' (see 'kis sandbox session list')", id);
	const struct kis_backend *b = kis_session_meta_backend(meta);
	int r = b && b->exec_limits ? b->exec_limits(&o->limits, err) : 0;
	if (r >= 0)
		r = session_limits_merge(meta, id, &o->limits, out, err);
	json_decref(meta);
	return r;
}

/* Is session id being destroyed, or gone? */
static bool session_ending(struct kis_engine_ctx *ec, const char *id)
{
	_cleanup_close_ int sdir = open_sessions_dir(ec, false, NULL, NULL);
	if (sdir < 0)
		return true;
	_cleanup_close_ int dfd = openat(sdir, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return errno == ENOENT;
	return faccessat(dfd, ENDING_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

struct session_conn {
	struct kis_engine_ctx *ec;
	const char *id;
	bool tty;
};

static int session_connect(void *arg, struct kis_error **err)
{
	const struct session_conn *sc = arg;
	return connect_session(sc->ec, sc->id, sc->tty, err);
}

/* The backend whose session id is, from its meta; NULL: none known. */
static const struct kis_backend *session_backend_of(struct kis_engine_ctx *ec, const char *id)
{
	_cleanup_close_ int dfd = session_dir(ec, id, NULL);
	json_t *meta = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
	const struct kis_backend *b = meta ? kis_session_meta_backend(meta) : NULL;
	json_decref(meta);
	return b;
}

int kis_session_exec_in(struct kis_engine_ctx *ec, const char *id, char *const *argv,
			const struct kis_exec_options *o, struct kis_result *res,
			struct kis_error **err)
{
	_cleanup_(kis_log_scope_end) const char *log_prev = kis_log_scope(id);
	if (!argv || !argv[0])
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "no command to run");
	TRY(kis_command_size_check(argv, o->env, o->env_add, err));
	int ag = exec_agentless(ec, id, argv, o, res, err);
	if (ag != 0)
		return ag < 0 ? -1 : 0;
	struct session_conn sc = {.ec = ec, .id = id, .tty = o->tty};
	struct kis_session_call call = {.id = id, .argv = argv, .env = o->env,
					.env_add = o->env_add, .cwd = o->cwd, .shell = o->shell,
					.tty = o->tty, .rows = o->rows, .cols = o->cols,
					.resize_fd = o->resize_fd, .tty_fd = o->tty_fd, .io = o->io,
					.cpu_fd = -1, .container = o->container,
					.connect = session_connect, .connect_arg = &sc};
	TRY(session_exec_limits(ec, id, o, &call.limits, err));
	if (o->tty && o->tty_fd >= 0) {
		struct winsize ws;
		if (ioctl(o->tty_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
			call.rows = ws.ws_row;
			call.cols = ws.ws_col;
		}
	}
	/* the backend speaks to its agent: the engine names none */
	const struct kis_backend *b = session_backend_of(ec, id);
	if (!b || !b->session_exec)
		return kis_error_set(err, KIS_E_NOT_FOUND, 0,
				     "session '%s' has no agent to run a command (its backend is "
				     "unknown here): destroy it and create another", id);
	snprintf(res->sandbox, sizeof(res->sandbox), "%s", id);
	/* the session's CPU accounting: an exec's cpu_ms is the CPU of all it
	 * makes, counted by the cgroup, not the agent's clock of one process */
	_cleanup_close_ int cpu_fd = session_cpu_fd(ec, id);
	call.cpu_fd = cpu_fd;
	int r = b->session_exec(&call, res, err);
	if (r < 0)
		return -1;
	if (r == 1 && session_ending(ec, id)) {
		/* `session destroy` ended the agent under this exec: the run was
		 * cancelled, and what it printed so far is its output, not an
		 * internal error that drops it (issue 40 item 9) */
		res->reason = KIS_REASON_CANCELLED;
		res->exit_code = -1;
		res->signal = SIGKILL;
		free(res->detail);
		res->detail = strdup("the session was destroyed while the exec ran");
		return 0;
	}
	if (r == 1)
		return kis_error_set(err, KIS_E_INTERNAL, 0,
				     "the agent of session '%s' closed the connection before the exit",
				     id);
	explain_exec(ec, id, res);
	return 0;
}

/* ---- list and destroy ---- */

static const char *session_state(json_t *meta, const char *id, int dfd)
{
	const struct kis_backend *b = kis_session_meta_backend(meta);
	if (b && b->session_state) {
		struct kis_session_ctx ctx = {.id = id, .dir_fd = dfd, .listen_fd = -1};
		const char *st = b->session_state(&ctx);
		if (st)
			return st;
	}
	if (json_is_true(json_object_get(meta, "agentless")))
		return "ready"; /* no process: each exec is a fresh run */
	return kis_session_agent_alive(meta) ? "running" : "stopped";
}

static int list_ec(struct kis_engine_ctx *ec, char **out, struct kis_error **err)
{
	json_t *arr = json_array();
	int sdir = open_sessions_dir(ec, false, NULL, err);
	if (sdir == -1) {
		json_decref(arr);
		return -1;
	}
	if (sdir >= 0) {
		DIR *d = fdopendir(sdir);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			_cleanup_close_ int dfd = openat(dirfd(d), e->d_name,
							 O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			json_t *m = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
			if (!m)
				continue;
			json_object_set_new(m, "state", json_string(session_state(m, e->d_name, dfd)));
			json_object_del(m, "agent_start");
			json_array_append_new(arr, m);
		}
		if (d)
			closedir(d);
		else
			close(sdir);
	}
	*out = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(arr);
	return *out ? 0 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "session list");
}

int kis_session_destroy_in(struct kis_engine_ctx *ec, const char *id, struct kis_error **err)
{
	TRY(kis_id_validate(id, "session id", err));
	_cleanup_(kis_log_scope_end) const char *log_prev = kis_log_scope(id);
	struct kis_store *st = NULL;
	TRY(kis_ctx_store(ec, &st, err));
	/* A session whose creator was killed before publishing it is still
	 * recorded under the creator's owner: undo that (its agent, QEMU or
	 * container, its half-made directory and workspace). */
	int own = kis_owner_reap_id(ec->ctx.store_root, id, err);
	if (own < 0)
		return -1;
	if (own == 1)
		return kis_error_set(err, KIS_E_BUSY, 0,
				     "session '%s' is being created; destroy it once 'create' has "
				     "ended",
				     id);
	return kis_session_end(st, id, err);
}

static int plan_ctx(const struct kis_ctx *ctx, const struct kis_profile *p, char **plan_json,
		    struct kis_error **err)
{
	*plan_json = NULL;
	const struct kis_backend *b = NULL;
	struct kis_caps caps;
	_cleanup_free_ char *agent = NULL;
	TRY(session_backend(ctx, p, &b, &caps, &agent, err));
	char *argv[] = {agent ? agent : "true", "--listen-fd", "3", NULL};
	struct kis_run_request req = {.ctx = ctx, .profile = p, .argv = argv,
				      .io = {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
					     .cancel_fd = -1},
				      .sandbox_id = "s-dry-run", .session = true};
	kis_limits_resolve(&p->limits, &req.limits);
	/* planned as a run is before its clone: nothing made, nothing
	 * started; the mounts resolved, held by no one */
	struct kis_mounts dm;
	TRY(kis_mounts_acquire(p, ctx->priv, NULL, &dm, err));
	req.mounts = dm.v;
	req.n_mounts = dm.n;
	struct kis_plan *plan = NULL;
	kis_test_count("plan");
	if (b->plan(&caps, &req, &plan, err) < 0) {
		kis_mounts_release(&dm);
		return -1;
	}
	*plan_json = kis_mounts_describe(b->describe(plan), &dm);
	b->plan_free(plan);
	kis_mounts_release(&dm);
	if (!*plan_json)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot describe the plan");
	return 0;
}

int kis_session_create(const struct kis_profile *p, const struct kis_run_options *o,
		       char id[KIS_ID_BUFSZ], struct kis_error **err)
{
	struct kis_engine_ctx ec;
	kis_ctx_init(&ec, o->store_root, false);
	kis_ctx_set_progress(&ec, o);
	int r = kis_session_create_in(&ec, p, o, NULL, NULL, id, err);
	kis_ctx_release(&ec);
	return r;
}

int kis_session_plan(const struct kis_profile *p, const struct kis_run_options *o,
		     char **plan_json, struct kis_error **err)
{
	struct kis_engine_ctx ec;
	kis_ctx_init(&ec, o->store_root, false);
	int r = plan_ctx(&ec.ctx, p, plan_json, err);
	kis_ctx_release(&ec);
	return r;
}

int kis_session_exec(const char *id, char *const *argv, const struct kis_exec_options *o,
		     struct kis_result *res, struct kis_error **err)
{
	struct kis_engine_ctx ec;
	kis_ctx_init(&ec, o->store_root, false);
	int r = kis_session_exec_in(&ec, id, argv, o, res, err);
	kis_ctx_release(&ec);
	return r;
}

static int attach_in(struct kis_engine_ctx *ec, const char *id, int slot, const char *base_id,
		     struct kis_error **err)
{
	TRY(kis_id_validate(id, "session id", err));
	struct kis_store *st = NULL;
	TRY(kis_ctx_store(ec, &st, err));
	_cleanup_close_ int dfd = session_dir(ec, id, err);
	if (dfd == -1)
		return -1;
	json_t *meta = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
	const struct kis_backend *b = meta ? kis_session_meta_backend(meta) : NULL;
	json_decref(meta);
	if (!b)
		return kis_error_set(err, KIS_E_NOT_FOUND, 0, "no session '%s'", id);
	if (!b->session_attach)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "session '%s' (backend '%s') cannot take a base in a mount slot",
				     id, b->name);
	_cleanup_free_ char *tree = NULL, *cache = NULL;
	TRY(kis_base_path(st, base_id, &tree, err));
	TRY(kis_base_cache_dir(st, base_id, &cache, err));
	struct kis_mount_src src = {.source = base_id, .target = "/", .base = true,
				    .read_only = true, .path = tree, .cache = cache};
	struct kis_session_ctx ctx = {.id = id, .dir_fd = dfd, .listen_fd = -1};
	return b->session_attach(&ctx, slot, &src, err);
}

int kis_session_attach_base(const char *store_root, const char *id, int slot,
			    const char *base_id, struct kis_error **err)
{
	struct kis_engine_ctx ec;
	kis_ctx_init(&ec, store_root, false);
	int r = attach_in(&ec, id, slot, base_id, err);
	kis_ctx_release(&ec);
	return r;
}

int kis_session_list(const char *store_root, char **out, struct kis_error **err)
{
	struct kis_engine_ctx ec;
	kis_ctx_init(&ec, store_root, false);
	int r = list_ec(&ec, out, err);
	kis_ctx_release(&ec);
	return r;
}

int kis_session_destroy(const char *store_root, const char *id, struct kis_error **err)
{
	struct kis_engine_ctx ec;
	kis_ctx_init(&ec, store_root, false);
	int r = kis_session_destroy_in(&ec, id, err);
	kis_ctx_release(&ec);
	return r;
}
