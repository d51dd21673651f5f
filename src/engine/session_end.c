/* SPDX-License-Identifier: MIT */
/* A session's directory as the store keeps it (its metadata, its agent's
 * life) and the end of a session. Below session.c, which makes and uses
 * sessions, and below the owners' sweep (owner.c), which ends the session
 * of a run with a terminal that was killed: both end a session here, with
 * the store they hold, and neither calls the other for it (issue 42). */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "core/io.h"
#include "core/tree.h"
#include "engine/session_end.h"
#include "store/store_internal.h"

json_t *kis_session_meta_read(int dfd)
{
	_cleanup_close_ int fd = openat(dfd, META_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	json_error_t je;
	return json_loadfd(fd, 0, &je);
}

bool kis_session_agent_alive(json_t *meta)
{
	pid_t pid = (pid_t)json_integer_value(json_object_get(meta, "agent_pid"));
	uint64_t st = (uint64_t)json_integer_value(json_object_get(meta, "agent_start"));
	return pid > 0 && st && kis_proc_starttime(pid) == st;
}

const struct kis_backend *kis_session_meta_backend(json_t *meta)
{
	const char *name = json_string_value(json_object_get(meta, "backend"));
	return name ? kis_backend_find(name) : NULL;
}

static void end_agent(json_t *meta)
{
	if (!kis_session_agent_alive(meta))
		return;
	pid_t pid = (pid_t)json_integer_value(json_object_get(meta, "agent_pid"));
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0 || !kis_session_agent_alive(meta))
		return;
	/* SIGTERM: the agent ends every command of the session; SIGKILL if it
	 * has not gone in 3 s. Through the pidfd, so a recycled pid is safe. */
	syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0);
	struct pollfd p = {.fd = pfd, .events = POLLIN};
	if (poll(&p, 1, 3000) <= 0) {
		syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
		poll(&p, 1, 3000);
	}
}

/* A create or destroy that was killed half-way leaves .tmp-<id> or
 * .del-<id> behind, perhaps with its agent running. A later command ends
 * what it finds there once it is a minute old (a create in progress is
 * younger than that). */
void kis_session_sweep_leftovers(int sdir)
{
	int fd = dup(sdir);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	time_t now = time(NULL);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, ".tmp-", 5) && strncmp(e->d_name, ".del-", 5))
			continue;
		struct stat stb;
		if (fstatat(sdir, e->d_name, &stb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(stb.st_mode) ||
		    now - stb.st_mtime < 60)
			continue;
		_cleanup_close_ int dfd = openat(sdir, e->d_name,
						 O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		json_t *meta = dfd >= 0 ? kis_session_meta_read(dfd) : NULL;
		if (meta) {
			end_agent(meta);
			const struct kis_backend *b = kis_session_meta_backend(meta);
			if (b && b->end_session) {
				struct kis_session_ctx ctx = {.id = e->d_name + 5, .dir_fd = dfd,
							      .listen_fd = -1};
				b->end_session(&ctx, NULL);
			}
			json_decref(meta);
		}
		kis_tree_remove_quiet(sdir, e->d_name);
	}
	closedir(d);
}

/* The holds of a session's mounts (its metadata lists them), released. */
static void unhold_mounts(struct kis_store *s, const char *id, json_t *mounts)
{
	size_t i;
	json_t *m;
	json_array_foreach(mounts, i, m) {
		const char *src = json_string_value(json_object_get(m, "source"));
		const char *kind = json_string_value(json_object_get(m, "kind"));
		if (!src || !kind)
			continue;
		if (!strcmp(kind, "base"))
			kis_base_unhold(s, src, id);
		else
			kis_workspace_unhold_mount(s, src, id);
	}
}

int kis_session_end(struct kis_store *s, const char *id, struct kis_error **err)
{
	int sdir = s->sessions_fd; /* the store's, open while it is */
	_cleanup_free_ char *dpath = NULL;
	_cleanup_close_ int dfd = openat(sdir, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return 0; /* idempotent: already gone, or never was */
	json_t *meta = kis_session_meta_read(dfd);
	if (!meta) {
		/* No metadata (written last during create, or lost): it cannot
		 * say which backend made the session, so every backend ends
		 * what of it might be left (end_session is idempotent). */
		size_t n = 0;
		const struct kis_backend *const *all = kis_backends(&n);
		for (size_t i = 0; i < n; i++)
			if (all[i]->end_session) {
				struct kis_session_ctx ctx = {.id = id, .dir_fd = dfd, .listen_fd = -1};
				all[i]->end_session(&ctx, NULL);
			}
	}
	if (meta) {
		/* before the agent goes: its running execs report `cancelled` */
		int mark = openat(dfd, ENDING_NAME, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (mark >= 0)
			close(mark);
		end_agent(meta);
		const struct kis_backend *b = kis_session_meta_backend(meta);
		if (b && b->end_session) {
			if (asprintf(&dpath, "%s/sessions/%s", kis_store_root(s), id) < 0)
				dpath = NULL;
			struct kis_session_ctx ctx = {.id = id, .dir_fd = dfd, .dir_path = dpath,
						      .listen_fd = -1};
			if (b->end_session(&ctx, err) < 0) {
				json_decref(meta);
				return kis_error_wrap(err, "destroying session '%s'", id);
			}
		}
		const char *ws = json_string_value(json_object_get(meta, "workspace"));
		if (ws)
			kis_workspace_unhold(s, ws, id);
		unhold_mounts(s, id, json_object_get(meta, "mounts"));
		/* a workspace the session cloned goes with it; destroy's failures
		 * are left to a later sweep (destroy is idempotent) */
		if (ws && json_is_true(json_object_get(meta, "workspace_cloned")))
			kis_workspace_destroy(s, ws, NULL);
		json_decref(meta);
	}
	/* Hide it first (a rename is atomic), then remove. */
	char tmp[KIS_ID_BUFSZ + 8];
	snprintf(tmp, sizeof(tmp), ".del-%s", id);
	if (renameat(sdir, id, sdir, tmp) < 0)
		return errno == ENOENT ? 0 : kis_error_set(err, KIS_E_INTERNAL, errno,
							   "cannot remove session '%s'", id);
	kis_tree_remove_quiet(sdir, tmp);
	return 0;
}
