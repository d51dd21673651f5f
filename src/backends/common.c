/* SPDX-License-Identifier: MIT */
/* Shared pieces of the native backends: limit checks against probed
 * capabilities, and the plan of one native command. */
#include "core/util.h"

#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>

#include "backends/common.h"
#include "confine/sysview.h"
#include "core/io.h"
#include "core/json.h"
#include "exec/spawn.h"
#include "net/egress.h"

int kis_check_limits(const struct kis_caps *caps, const struct kis_profile *p,
		     const char *backend, struct kis_error **err)
{
	/* The microvm's own fields asked of another backend: no VM, nothing
	 * to apply them to; accepted they would read as enforced (issue 15). */
	if (strcmp(backend, "microvm") && p->microvm.accel != KIS_ACCEL_AUTO)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "microvm.accel: the %s backend runs no virtual machine: drop "
				     "--accel or choose the microvm tier", backend);
	if (strcmp(backend, "microvm") && p->microvm.vcpus > 1)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "microvm.vcpus: the %s backend runs no virtual machine: drop "
				     "--vcpus or choose the microvm tier", backend);
	/* Mounts need a mount namespace the sandbox's own (or a guest, or a
	 * WASI preopen): a backend without one cannot place a target. */
	if (p->n_mounts && !caps->mounts)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "mounts: the %s backend cannot place mounts (see the MOUNTS "
				     "column of 'kis sandbox backends'): drop them or choose another "
				     "tier", backend);
	/* Likewise the wasm tier's own fields, which only the wasm backend
	 * reads (in its plan). */
	if (strcmp(backend, "wasm") && p->wasm.engine != KIS_WASM_ENGINE_AUTO)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "wasm.engine: the %s backend runs no WebAssembly: drop "
				     "--wasm-engine or choose the wasm tier", backend);
	if (strcmp(backend, "wasm") && p->wasm.preopen != KIS_WASM_PREOPEN_WORKSPACE)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "wasm.preopen: the %s backend runs no WebAssembly: drop "
				     "--preopen or choose the wasm tier", backend);
	/* limits.disk_bytes is the engine's to bind (a project quota) or the
	 * microvm's own layer: kis_disk_apply and the microvm check it */
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++) {
		if (kis_limit_table[i].bit == KIS_LIMIT_DISK)
			continue;
		if (kis_limit_get(&p->limits, i) && !(caps->limits & kis_limit_table[i].bit))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "%s: the %s backend cannot enforce this limit on this "
					     "host (it needs a cgroup the engine may use): drop the "
					     "field or choose another tier",
					     kis_limit_table[i].path, backend);
	}
	/* An rlimit is lowered from the engine's own, never raised past its
	 * hard limit (src/exec/spawn.c): more than that would be clamped. */
	const struct {
		int res;
		uint64_t v;
		const char *field;
	} rl[] = {{RLIMIT_NOFILE, p->limits.open_files, "limits.open_files"},
		  {RLIMIT_FSIZE, p->limits.file_bytes, "limits.file_bytes"}};
	for (size_t i = 0; i < ARRAY_SIZE(rl); i++) {
		struct rlimit cur;
		if (rl[i].v && getrlimit(rl[i].res, &cur) == 0 && cur.rlim_max != RLIM_INFINITY &&
		    rl[i].v > cur.rlim_max)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "%s: %llu is above the engine's own hard limit (%llu); "
					     "ask for at most that, or raise the engine's",
					     rl[i].field, (unsigned long long)rl[i].v,
					     (unsigned long long)cur.rlim_max);
	}
	return 0;
}

bool kis_env_has(char *const *env, size_t n, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; i < n; i++)
		if (!strncmp(env[i], key, k) && env[i][k] == '=')
			return true;
	return false;
}

/* cwd: the profile's (inside-sandbox paths under /workspace map onto the
 * workspace here), else the workspace, else the caller's (NULL). */
static int native_cwd(const struct kis_run_request *req, char **out)
{
	const struct kis_profile *p = req->profile;
	const char *ws = req->workspace_path;
	*out = NULL;
	if (p->cwd && ws && !strncmp(p->cwd, "/workspace", 10) &&
	    (p->cwd[10] == '/' || !p->cwd[10]))
		return asprintf(out, "%s%s", ws, p->cwd + 10) < 0 ? (*out = NULL, -1) : 0;
	if (p->cwd || ws)
		return (*out = strdup(p->cwd ? p->cwd : ws)) ? 0 : -1;
	return 0;
}

int kis_native_plan_init(struct kis_native_plan *n, const struct kis_run_request *req,
			 struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	memset(n, 0, sizeof(*n));
	n->limits = req->limits;
	n->io = req->io;
	n->tty = p->tty.enabled;
	size_t na = 0, ne = 0;
	for (char *const *a = req->argv; *a; a++)
		if (kis_strv_push(&n->argv, &na, *a) < 0)
			goto oom;
	if (native_cwd(req, &n->cwd) < 0)
		goto oom;
	for (size_t i = 0; i < p->n_env; i++)
		if (kis_strv_push(&n->envp, &ne, p->env[i]) < 0)
			goto oom;
	if (!kis_env_has(n->envp, ne, "PATH") && kis_strv_push(&n->envp, &ne, "PATH=" KIS_DEFAULT_PATH) < 0)
		goto oom;
	if (!kis_env_has(n->envp, ne, "HOME")) {
		_cleanup_free_ char *home = NULL;
		if (asprintf(&home, "HOME=%s", n->cwd ? n->cwd : "/") < 0 ||
		    kis_strv_push(&n->envp, &ne, home) < 0)
			goto oom;
	}
	if (!n->envp && kis_strv_push(&n->envp, &ne, "PATH=" KIS_DEFAULT_PATH) < 0)
		goto oom;
	return 0;
oom:
	kis_native_plan_release(n);
	return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan the command");
}

int kis_native_plan_amend(struct kis_native_plan *n, const struct kis_run_request *req,
			  struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	char *cwd = NULL;
	if (native_cwd(req, &cwd) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot amend the plan");
	free(n->cwd);
	n->cwd = cwd;
	/* HOME follows cwd as init set it, unless the profile gives one */
	if (kis_env_has(p->env, p->n_env, "HOME"))
		return 0;
	for (size_t i = 0; n->envp && n->envp[i]; i++) {
		if (strncmp(n->envp[i], "HOME=", 5))
			continue;
		char *home = NULL;
		if (asprintf(&home, "HOME=%s", n->cwd ? n->cwd : "/") < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot amend the plan");
		free(n->envp[i]);
		n->envp[i] = home;
		break;
	}
	return 0;
}

void kis_native_plan_release(struct kis_native_plan *n)
{
	kis_strv_free(n->argv);
	kis_strv_free(n->envp);
	free(n->cwd);
	memset(n, 0, sizeof(*n));
}

char *kis_native_plan_describe(const struct kis_native_plan *n, const char *backend)
{
	const struct kis_limits *l = &n->limits;
	json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o}", "backend", backend, "argv",
			      kis_strv_json(n->argv), "env", kis_strv_json(n->envp), "cwd",
			      n->cwd ? json_string(n->cwd) : json_null(), "limits",
			      kis_limits_to_json(l, KIS_LIMITS_ALL));
	if (!o)
		return NULL;
	/* how memory and pids bind here: a limit shown must be one that
	 * applies (issue 40 item 1); the cgroup probe runs for the plan only */
	json_object_set_new(o, "limits_binding",
			    kis_limits_binding_json(l, kis_cgroup_limits_available(), n->nproc_unbound));
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

int kis_native_plan_run(struct kis_native_plan *n, int (*child_setup)(void *, struct kis_error **),
			void *ctx, const struct kis_supervise_hooks *hooks, struct kis_result *res,
			struct kis_error **err)
{
	struct kis_spawn sp = {
		.argv = n->argv,
		.envp = n->envp,
		.cwd = n->cwd,
		.stdin_fd = n->io.stdin_fd,
		.limits = &n->limits,
		.child_setup = child_setup,
		.child_ctx = ctx,
		.foreground = !n->io.capture,
		/* the hooks of this path (landlock's cgroup join and
		 * kis_confine_child, the process tier's join and capability
		 * drop) are system calls on what was prepared before the start */
		.vfork_ok = true,
	};
	struct kis_supervise sv = {
		.wall_ms = n->limits.wall_ms,
		.cpu_ms = n->limits.cpu_ms,
		.output_bytes = n->limits.output_bytes,
		.capture = n->io.capture,
		.stdout_fd = n->io.stdout_fd,
		.stderr_fd = n->io.stderr_fd,
		.cancel_fd = n->io.cancel_fd,
		.hooks = hooks,
	};
	return kis_exec_run(&sp, &sv, res, err);
}

int kis_walk_meets_link(int dirfd, const char *rel)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
	int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == ENOENT || errno == ENOTDIR)
		return 0;
	return errno == ELOOP || errno == EXDEV ? 1 : -1;
}

const char *kis_find_tool(const char *override, const char *const *cands, size_t n)
{
	if (override && *override)
		return access(override, X_OK) == 0 ? override : NULL;
	for (size_t i = 0; i < n; i++)
		if (access(cands[i], X_OK) == 0)
			return cands[i];
	return NULL;
}

int kis_ctx_agent(const struct kis_ctx *ctx, char **out, struct kis_error **err)
{
	*out = NULL;
	if (!ctx || !ctx->agent)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, ENOENT, "%s",
				     ctx && ctx->agent_why ? ctx->agent_why : "the agent is missing");
	*out = strdup(ctx->agent);
	return *out ? 0 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "agent path");
}

int kis_check_mount_targets(const struct kis_profile *p, const char *backend,
			    struct kis_error **err)
{
	if (p->n_mounts && p->root == KIS_ROOT_WORKSPACE)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "mounts: the %s backend places mounts with root 'host' only "
				     "(with root 'workspace' their mount points would lie in the "
				     "tree the sandbox writes)", backend);
	for (size_t i = 0; i < p->n_mounts; i++) {
		const char *t = p->mounts[i].target;
		for (size_t k = 0; k < kis_sysview_n_dirs; k++) {
			size_t n = strlen(kis_sysview_dirs[k]);
			if (!strncmp(t, kis_sysview_dirs[k], n) && (t[n] == '/' || !t[n]))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "mounts[%zu].target: '%s' lies in the host's "
						     "read-only system view (%s): choose a path "
						     "outside it (such as /data or /mnt/x)",
						     i, t, kis_sysview_dirs[k]);
		}
	}
	return 0;
}

int kis_check_network(const struct kis_caps *caps, const struct kis_profile *p,
		      const char *backend, const char *hint, struct kis_error **err)
{
	if (!(caps->net_modes & (1u << p->net))) {
		const char *why = p->net == KIS_NET_EGRESS ? kis_egress_unavailable() : NULL;
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "network.mode: the %s backend cannot enforce '%s'%s%s%s%s",
				     backend, kis_net_mode_name(p->net), why ? " here: " : "",
				     why ? why : "", hint ? (why ? "; " : ": ") : "", hint ? hint : "");
	}
	if (p->net == KIS_NET_HOST && !p->escape_hatch.allow_net_host)
		return kis_error_set(err, KIS_E_ESCAPE_HATCH_FORBIDDEN, 0,
				     "network.mode 'host' removes network confinement and requires "
				     "escape_hatch.allow_net_host (--allow-net-host)");
	if (p->net == KIS_NET_EGRESS && p->n_net_allow)
		TRY(kis_egress_check_allow(p->net_allow, p->n_net_allow, err));
	return 0;
}

/* ---- compiled seccomp programs, cached ---- */

int kis_cache_dir(char *buf, size_t len)
{
	const char *base = geteuid() == 0 ? "/run" : getenv("XDG_RUNTIME_DIR");
	if (!base || base[0] != '/')
		return -1;
	if ((size_t)snprintf(buf, len, "%s/kis-sandbox", base) >= len)
		return -1;
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -1;
	struct stat st;
	/* ours, a real directory, nobody else may write (or read) it */
	if (lstat(buf, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077))
		return -1;
	return 0;
}

int kis_cache_key(char *buf, size_t len)
{
	/* the program that compiled it (its file: a rebuilt kis compiles
	 * anew), libseccomp's version, and the kernel (libseccomp fits the
	 * program to the kernel's API level) */
	struct stat st;
	struct utsname u;
	if (stat("/proc/self/exe", &st) < 0 || uname(&u) < 0)
		return -1;
	const struct scmp_version *v = seccomp_version();
	int n = snprintf(buf, len, "%llx-%llx-%llx-%llx.%09ld-%u.%u.%u-%.64s",
			 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
			 (unsigned long long)st.st_size, (unsigned long long)st.st_mtim.tv_sec,
			 st.st_mtim.tv_nsec, v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0,
			 u.release);
	for (int i = 0; n > 0 && i < n && (size_t)i < len; i++)
		if (buf[i] == '/')
			buf[i] = '_';
	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Raw BPF from fd (at most 4096 instructions, whole instructions). */
static int read_prog(int fd, struct kis_bpf *out)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size % (off_t)sizeof(struct sock_filter) || st.st_size > 4096 * 8)
		return -1;
	struct sock_filter *p = malloc((size_t)st.st_size);
	if (!p)
		return -1;
	size_t done = 0;
	while (done < (size_t)st.st_size) {
		ssize_t r = RETRY_EINTR(pread(fd, (char *)p + done, (size_t)st.st_size - done, (off_t)done));
		if (r <= 0) {
			free(p);
			return -1;
		}
		done += (size_t)r;
	}
	out->prog = p;
	out->len = (unsigned short)(done / sizeof(struct sock_filter));
	return 0;
}

int kis_bpf_cached(const char *name, scmp_filter_ctx (*make)(void *arg), void *arg,
		   struct kis_bpf *out, struct kis_error **err)
{
	memset(out, 0, sizeof(*out));
	char dir[256];
	_cleanup_close_ int dfd = name[0] && kis_cache_dir(dir, sizeof(dir)) == 0 ?
		open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (dfd >= 0) {
		_cleanup_close_ int f = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		/* ours and not writable by others, as the directory is */
		if (f >= 0 && fstat(f, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 022) &&
		    read_prog(f, out) == 0)
			return 0;
	}
	scmp_filter_ctx ctx = make(arg);
	if (!ctx)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build a seccomp filter");
	_cleanup_close_ int m = memfd_create("kis-bpf", MFD_CLOEXEC);
	int r = m < 0 ? -errno : seccomp_export_bpf(ctx, m);
	seccomp_release(ctx);
	if (r < 0 || read_prog(m, out) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, r < 0 ? -r : EIO,
				     "cannot compile a seccomp filter");
	if (dfd >= 0) {
		/* best effort: a failure here only costs the next run the compile */
		char tmp[300];
		snprintf(tmp, sizeof(tmp), ".%.200s.%d", name, (int)getpid());
		int t = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (t >= 0) {
			bool ok = kis_write_all(t, out->prog, (size_t)out->len * sizeof(struct sock_filter)) == 0;
			close(t);
			if (!ok || renameat(dfd, tmp, dfd, name) < 0)
				unlinkat(dfd, tmp, 0);
		}
	}
	return 0;
}
