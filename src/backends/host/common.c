/* SPDX-License-Identifier: MIT */
/* Shared pieces of the host-tier backends: environment edits, the sandbox
 * user, giving it the workspace, private temporary directories. */
#include "core/util.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "backends/host/common.h"
#include "confine/confine.h"
#include "core/record.h"
#include "core/io.h"
#include "core/test_hook.h"

const char *kis_host_env_get(char *const *envp, const char *key)
{
	size_t k = strlen(key);
	for (; envp && *envp; envp++)
		if (!strncmp(*envp, key, k) && (*envp)[k] == '=')
			return *envp + k + 1;
	return NULL;
}

bool kis_host_profile_has_env(const struct kis_profile *p, const char *key)
{
	return kis_host_env_get(p->env, key) != NULL;
}

int kis_host_env_set(char ***envp, const char *key, const char *val, bool override)
{
	size_t k = strlen(key), n = 0;
	char *kv = NULL;
	if (asprintf(&kv, "%s=%s", key, val) < 0)
		return -1;
	for (; *envp && (*envp)[n]; n++) {
		if (!strncmp((*envp)[n], key, k) && (*envp)[n][k] == '=') {
			if (override) {
				free((*envp)[n]);
				(*envp)[n] = kv;
			} else {
				free(kv);
			}
			return 0;
		}
	}
	char **g = realloc(*envp, (n + 2) * sizeof(*g));
	if (!g) {
		free(kv);
		return -1;
	}
	g[n] = kv;
	g[n + 1] = NULL;
	*envp = g;
	return 0;
}

void kis_host_sandbox_user(uid_t *uid, gid_t *gid)
{
	*uid = 65534;
	*gid = 65534;
	const char *s = KIS_TEST_GETENV("KIS_SANDBOX_USER");
	unsigned u, g;
	if (s && sscanf(s, "%u:%u", &u, &g) == 2 && u != 0 && g != 0) {
		*uid = u;
		*gid = g;
	}
}

int kis_host_workspace_view(const char *path, const char *lower, const char *ws_dir, uid_t uid,
			    gid_t gid, int *view_fd, struct kis_error **err)
{
	*view_fd = -1;
	struct stat st;
	if (lstat(path, &st) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the workspace '%s'",
				     path);
	if (!S_ISDIR(st.st_mode))
		return kis_error_set(err, KIS_E_INTERNAL, ENOTDIR, "the workspace '%s'", path);
	/* The workspace's owner is the one the command is shown as: its root
	 * directory's (root's, for a tree the engine made; a user's, for a
	 * base imported from their files). Already the sandbox user's (a
	 * workspace an older kis gave away by chown): nothing to show. */
	if (st.st_uid == uid && st.st_gid == gid)
		return 0;
	/* Not a chown of every entry: on an overlay clone each one is a
	 * copy-up (a 2,000-file 16 MiB base: 0.72 s and 16 MiB in upper/ on
	 * every run). A view through an idmapped mount where the owner and
	 * the sandbox user trade ids shows the owner's files as the user's
	 * and stores what the user writes as the owner's. */
	_cleanup_close_ int ns = -1;
	TRY(kis_userns_swap_open(st.st_uid, uid, st.st_gid, gid, &ns, err));
	if (kis_idmap_view(path, lower, ws_dir, ns, uid, gid, view_fd) < 0)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, errno,
				     "workspace: cannot show '%s' to the sandbox user through an "
				     "idmapped mount (Linux 5.12; of overlay layers 5.19)",
				     path);
	return 0;
}

/* workspaces live at ROOT/workspaces/ID/LEAF (src/store/workspace.c): the
 * three directories below ROOT and ROOT itself belong to the store. The
 * gate, ROOT and ROOT/workspaces, the sandbox user passes through its one
 * supplementary group, KIS_REACH_GID (root:KIS_REACH_GID 0710, whatever a
 * store made before this had: others lose their search right there); a
 * directory above the store is the host's and must let others search it. */
int kis_host_make_reachable(const char *ws_path, struct kis_error **err)
{
	_cleanup_free_ char *p = strdup(ws_path);
	if (!p)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "workspace path");
	/* the last "/workspaces/": a store root may hold the word itself */
	char *marker = NULL;
	for (char *m = strstr(p, "/workspaces/"); m; m = strstr(m + 1, "/workspaces/"))
		marker = m;
	size_t store_end = marker ? (size_t)(marker - p) : 0;
	/* where LEAF, the workspace itself, starts: the store's directories
	 * (ROOT, ROOT/workspaces, ROOT/workspaces/ID) end before it */
	size_t leaf = strlen(p);
	while (leaf > 0 && p[leaf - 1] != '/')
		leaf--;
	/* walk every ancestor of the workspace, from / down */
	for (char *s = p + 1;; s++) {
		bool last = !*s;
		if (*s != '/' && !last)
			continue;
		char saved = *s;
		*s = '\0';
		struct stat st;
		if (stat(p, &st) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stat '%s'", p);
		size_t at = (size_t)(s - p);
		bool gate = marker && (at == store_end || at == store_end + strlen("/workspaces"));
		if (gate) {
			mode_t want = (st.st_mode & (S_IRWXU | S_ISVTX)) | S_IXGRP;
			if ((st.st_gid != KIS_REACH_GID &&
			     chown(p, (uid_t)-1, (gid_t)KIS_REACH_GID) < 0) ||
			    ((st.st_mode & 07777) != want && chmod(p, want) < 0))
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot open '%s' to the sandbox user's group", p);
		} else if (marker && at > store_end && at < leaf) {
			/* the workspace's own directory, behind the gate: its
			 * search right for others is the store's (an id-mapped
			 * view of it, where root is no owner, walks in by it) */
			if (!(st.st_mode & S_IXOTH) && chmod(p, (st.st_mode & 07777) | S_IXOTH) < 0)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot open '%s' to the sandbox user", p);
		} else if (!last && !(st.st_mode & S_IXOTH)) {
			return kis_error_set(
				err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				"workspace: '%s' on the way to it cannot be searched by the "
				"unprivileged sandbox user (mode %03o): put the store "
				"(KIS_SANDBOX_ROOT) under directories others may search",
				p, (unsigned)(st.st_mode & 0777));
		}
		*s = saved;
		if (last)
			break;
	}
	return 0;
}

int kis_host_private_dir(const char *name, uid_t uid, gid_t gid, char **out,
			 struct kis_error **err)
{
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/tmp/kis-%s", name) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "private directory");
	/* recorded before it exists, for the sweep should the run be killed */
	if (kis_owner_note("tmp", "%s", path) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record '%s'", path);
	/* mkdir fails on anything already there, a planted link included */
	if (mkdir(path, 0700) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", path);
	if (geteuid() == 0 && chown(path, uid, gid) < 0) {
		int e = errno;
		rmdir(path);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot chown '%s'", path);
	}
	*out = steal_ptr(path);
	return 0;
}

/* ---- the compiled seccomp program, cached ---- */

/* The program's name in the cache: the policy's options, then the key
 * every cached program of the engine carries (kis_cache_key: the kis that
 * compiled it, libseccomp's version and the kernel's release). */
static int cache_name(const struct kis_seccomp_opts *o, char *buf, size_t len)
{
	char key[200];
	if (kis_cache_key(key, sizeof(key)) < 0)
		return -1;
	int n = snprintf(buf, len, "seccomp-n%d-i%d-u%d-%s.bpf", (int)o->net,
			 o->allow_sysv_ipc ? 1 : 0, o->unix_unnamed_only ? 1 : 0, key);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

static int sealed_copy(int src, off_t size)
{
	_cleanup_close_ int fd = memfd_create("kis-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	char buf[8192];
	off_t done = 0;
	while (done < size) {
		ssize_t r = RETRY_EINTR(pread(src, buf, sizeof(buf), done));
		if (r <= 0 || write(fd, buf, (size_t)r) != r)
			return -1;
		done += r;
	}
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -1;
	return steal_fd(&fd);
}

int kis_host_seccomp_fd(const struct kis_seccomp_opts *o, int *fd_out, struct kis_error **err)
{
	char dir[256], name[256];
	bool cache = kis_cache_dir(dir, sizeof(dir)) == 0 && cache_name(o, name, sizeof(name)) == 0;
	_cleanup_close_ int dfd = cache ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
							O_CLOEXEC) : -1;
	if (dfd >= 0) {
		_cleanup_close_ int f = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() && !(st.st_mode & 022) && st.st_size > 0 &&
		    st.st_size % 8 == 0 && st.st_size <= 8 * 4096) {
			int m = sealed_copy(f, st.st_size);
			if (m >= 0) {
				*fd_out = m;
				return 0;
			}
		}
	}
	int fd = -1;
	TRY(kis_seccomp_export_bpf_fd(o, &fd, err));
	if (dfd >= 0) {
		/* best effort: a failure here only costs the next run 4 ms */
		struct stat st;
		char tmp[300];
		snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)getpid());
		int t = fstat(fd, &st) == 0 ?
				openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				       0600) : -1;
		if (t >= 0) {
			char buf[8192];
			off_t done = 0;
			bool ok = true;
			while (ok && done < st.st_size) {
				ssize_t r = RETRY_EINTR(pread(fd, buf, sizeof(buf), done));
				ok = r > 0 && write(t, buf, (size_t)r) == r;
				done += r > 0 ? r : 0;
			}
			close(t);
			if (!ok || renameat(dfd, tmp, dfd, name) < 0)
				unlinkat(dfd, tmp, 0);
		}
	}
	*fd_out = fd;
	return 0;
}

/* ---- cgroups of runs and sessions ---- */

int kis_host_cgroup_open(struct kis_run_cgroup *rc, const char *name, const struct kis_limits *l,
			 unsigned want, unsigned explicit_limits, unsigned engine_pids,
			 struct kis_error **err)
{
	struct kis_error *e = NULL;
	struct kis_limits lim = *l;
	if (lim.pids)
		lim.pids += engine_pids;
	if (kis_run_cgroup_open(rc, name, &lim, want, &e) == 0) {
		rc->limits.pids = rc->limits.pids ? l->pids : 0; /* 0: no pids limit here */
		rc->engine_pids = engine_pids;
	} else {
		memset(rc, 0, sizeof(*rc));
		if (explicit_limits) {
			*err = e;
			return -1;
		}
		kis_error_free(e); /* only defaults: this host gives us no cgroup */
	}
	unsigned bound = 0;
	for (unsigned i = 0; rc->cg && i < KIS_LIMIT__COUNT; i++)
		if (kis_limit_get(&rc->limits, i))
			bound |= 1u << i;
	kis_rlimit_fallback(l, bound, engine_pids, &rc->fb_nproc, &rc->fb_data);
	return 0;
}

#define CG_FILE "host-cgroup"

int kis_host_cgroup_save(int dir_fd, struct kis_run_cgroup *rc, struct kis_error **err)
{
	struct kis_cgroup *cg = rc->cg;
	if (!cg)
		return 0;
	TRY(kis_cgroup_save(dir_fd, CG_FILE, cg, err));
	/* recorded: the session owns it now, end_session removes it */
	kis_cgroup_free(cg);
	rc->cg = NULL;
	return 0;
}

/* The session's group as recorded by kis_host_cgroup_save, or NULL. */
static struct kis_cgroup *cgroup_load(int dir_fd)
{
	return kis_cgroup_load(dir_fd, CG_FILE);
}

void kis_host_cgroup_end(int dir_fd)
{
	struct kis_cgroup *cg = cgroup_load(dir_fd);
	if (cg)
		kis_cgroup_destroy(cg, NULL); /* kills what is left, frees cg */
	unlinkat(dir_fd, CG_FILE, 0);
	unlinkat(dir_fd, CG_FILE "-events", 0);
}

/* The group's counters are cumulative over the session: the last ones seen
 * are kept beside it and only an increase is this exec's doing. */
int kis_host_cgroup_explain(const struct kis_session_ctx *ctx, struct kis_result *res)
{
	struct kis_cgroup *cg = cgroup_load(ctx->dir_fd);
	if (!cg)
		return 0;
	int r = kis_cgroup_explain_since(cg, ctx->dir_fd, CG_FILE "-events", res);
	kis_cgroup_free(cg);
	return r;
}

int kis_host_cgroup_cpu_fd(const struct kis_session_ctx *ctx)
{
	struct kis_cgroup *cg = cgroup_load(ctx->dir_fd);
	if (!cg)
		return -1;
	int fd = kis_cgroup_cpu_fd(cg);
	kis_cgroup_free(cg);
	return fd;
}

int kis_host_place_workspace(const struct kis_run_request *req, char **workspace, char **ws_dir,
			     char **ws_lower)
{
	if (req->workspace_path && !(*workspace = strdup(req->workspace_path)))
		return -1;
	if (req->workspace_path && req->workspace_lower && req->workspace_upper) {
		/* an overlay clone: upper/ and work/ sit in its directory */
		const char *slash = strrchr(req->workspace_upper, '/');
		if (!slash || strcmp(slash, "/upper") ||
		    !(*ws_dir = strndup(req->workspace_upper,
					(size_t)(slash - req->workspace_upper))) ||
		    !(*ws_lower = strdup(req->workspace_lower)))
			return -1;
	}
	return 0;
}
