/* SPDX-License-Identifier: MIT */
/* kis-runtime: becoming crun. The container tier is crun itself, given a
 * checked config through a memfd, hidden from a hybrid cgroup v2 mount. */
#include "core/util.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/oci/bundle.h"
#include "runtime/runtime.h"

/* crun runs as root outside the container: a fixed environment, never the
 * caller's (a loader variable there would load into it); the container's
 * environment is config.json's process.env. NOTIFY_SOCKET and LISTEN_FDS
 * are the two that runc and crun read on purpose (sd_notify, socket
 * activation): podman sets them for --sdnotify=container, so they pass. */
static const char *const passed_env[] = {"NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID"};

int krt_argv_push(struct kis_argv *a, const char *s, struct kis_error **err)
{
	kis_argv_add(a, s);
	return a->oom ? kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "argv") : 0;
}

int krt_argv_push2(struct kis_argv *a, const char *x, const char *y, struct kis_error **err)
{
	TRY(krt_argv_push(a, x, err));
	return y ? krt_argv_push(a, y, err) : 0;
}

int krt_crun_begin(struct kis_argv *a, const struct krt_globals *g, struct kis_error **err)
{
	const char *crun = kis_oci_crun_path();
	if (!crun)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "run.kis.tier 'container' needs crun: install Debian's crun");
	TRY(krt_argv_push(a, crun, err));
	if (g->root) {
		TRY(krt_argv_push(a, "--root", err));
		TRY(krt_argv_push(a, g->root, err));
	}
	if (g->log) {
		TRY(krt_argv_push(a, "--log", err));
		TRY(krt_argv_push(a, g->log, err));
	}
	if (g->log_json)
		TRY(krt_argv_push(a, "--log-format=json", err));
	if (g->systemd_cgroup)
		TRY(krt_argv_push(a, "--systemd-cgroup", err));
	if (g->debug)
		TRY(krt_argv_push(a, "--debug", err));
	return 0;
}

int krt_memfd_json(json_t *doc, int min_fd, struct kis_error **err)
{
	_cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT);
	if (!text)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	_cleanup_close_ int fd = memfd_create("kis-runtime-config", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "memfd_create");
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t w = RETRY_EINTR(write(fd, text + off, len - off));
		if (w <= 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "memfd write");
		off += (size_t)w;
	}
	/* sealed: nothing that inherits it can change what crun reads */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "memfd seal");
	/* above every fd the caller preserves, and inherited by crun (no
	 * CLOEXEC); crun closes it in the container (fds past --preserve-fds) */
	int hi = fcntl(fd, F_DUPFD, min_fd);
	if (hi < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "dup config fd");
	return hi;
}

int krt_crun_exec(struct kis_argv *a, struct kis_error **err)
{
	int layout = kis_oci_cgroup_layout();
	if (layout == 3 && kis_oci_hybrid_workaround() < 0)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, errno,
				     "cgroups: this host mixes cgroup v1 and v2, which crun refuses, "
				     "and the v2 mount cannot be hidden from it here");
	/* envp is handed to execve: on its failure the strings are freed */
	char *envp[ARRAY_SIZE(passed_env) + 2] = {NULL};
	size_t ne = 0;
	envp[ne++] = strdup("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
	for (size_t i = 0; i < ARRAY_SIZE(passed_env); i++) {
		const char *v = getenv(passed_env[i]);
		if (v && asprintf(&envp[ne], "%s=%s", passed_env[i], v) >= 0)
			ne++;
	}
	envp[ne] = NULL;
	execve(a->v[0], a->v, envp);
	int e = errno;
	for (size_t i = 0; i < ne; i++)
		free(envp[i]);
	return kis_error_set(err, KIS_E_INTERNAL, e, "cannot execute '%s'", a->v[0]);
}
