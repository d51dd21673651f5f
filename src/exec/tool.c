/* SPDX-License-Identifier: MIT */
/* Helper programs of the engine (tool.h). */
#include "core/util.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "core/log.h"
#include "exec/spawn.h"
#include "exec/tool.h"

/* In the child: stream n from fd (-1: /dev/null), without the close-on-exec
 * flag. dup2 onto itself keeps O_CLOEXEC, so that case clears it. */
static int place(int fd, int n, int nul)
{
	int from = fd >= 0 ? fd : nul;
	if (from == n) {
		int fl = fcntl(n, F_GETFD);
		return fl < 0 ? -1 : fcntl(n, F_SETFD, fl & ~FD_CLOEXEC);
	}
	return dup2(from, n) < 0 ? -1 : 0;
}

static __attribute__((noreturn)) void child(const struct kis_tool *t, int nul, pid_t parent)
{
	static char *const tool_env[] = {KIS_TOOL_PATH, NULL};
	if (t->own_pgrp)
		setpgid(0, 0);
	/* The map's sources may sit on 0..2 or on each other's targets: move
	 * them all above the highest number first. */
	int hi = 10;
	for (size_t i = 0; i < t->n_map; i++)
		if (t->map[i].to >= hi)
			hi = t->map[i].to + 1;
	int moved[4];
	for (size_t i = 0; i < t->n_map; i++)
		if ((moved[i] = fcntl(t->map[i].from, F_DUPFD_CLOEXEC, hi)) < 0)
			_exit(125);
	int in = t->in >= 0 ? fcntl(t->in, F_DUPFD_CLOEXEC, hi) : -1;
	int out = t->out >= 0 ? fcntl(t->out, F_DUPFD_CLOEXEC, hi) : -1;
	int er = t->err >= 0 ? fcntl(t->err, F_DUPFD_CLOEXEC, hi) : -1;
	if (place(in, 0, nul) < 0 || place(out, 1, nul) < 0 || place(er, 2, nul) < 0)
		_exit(125);
	for (size_t i = 0; i < t->n_map; i++)
		if (t->map[i].to < 3 || place(moved[i], t->map[i].to, nul) < 0)
			_exit(125);
	/* Nothing else of the engine's reaches the program, whatever a caller
	 * left inheritable: close-on-exec on every other descriptor from 3 up
	 * (close_range(2) CLOSE_RANGE_CLOEXEC, Linux 5.11), so the last step
	 * may still use its own. */
	unsigned lo = 3;
	for (int want = 3; want < hi; want++) {
		bool mapped = false;
		for (size_t i = 0; i < t->n_map; i++)
			mapped |= t->map[i].to == want;
		if (!mapped)
			continue;
		if ((unsigned)want > lo && close_range(lo, (unsigned)want - 1, CLOSE_RANGE_CLOEXEC) < 0)
			_exit(125);
		lo = (unsigned)want + 1;
	}
	if (close_range(lo, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
		_exit(125);
	if (t->child_setup && t->child_setup(t->child_arg) < 0)
		_exit(126);
	/* Every tool dies with the engine (mkfs over a VM's disk, crun, the
	 * e2fsprogs): the parent-death signal, set last, after the setup's
	 * changes of credentials, which clear it (prctl(2) PR_SET_PDEATHSIG;
	 * kernel/cred.c commit_creds). It fires when the thread that started
	 * us ends, the one that waits for us. An engine that died before the
	 * call shows as another parent: then nothing runs. (An exec of a
	 * set-user-ID tool, newuidmap, clears it again; those end by
	 * themselves within a moment.) */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(125);
	const char *prog = t->path ? t->path : t->argv[0];
	execve(prog, t->argv, t->envp ? t->envp : tool_env);
	dprintf(2, "cannot execute '%s': %s", prog, strerror(errno));
	_exit(127);
}

struct tool_child {
	const struct kis_tool *t;
	int nul;
	pid_t parent;
};

static int tool_child_main(void *p)
{
	struct tool_child *c = p;
	child(c->t, c->nul, c->parent);
}

int kis_tool_start(const struct kis_tool *t, pid_t *pid, struct kis_error **err)
{
	*pid = -1;
	const char *prog = t->path ? t->path : t->argv && t->argv[0] ? t->argv[0] : "";
	if (!t->argv || !t->argv[0] || prog[0] != '/' || t->n_map > ARRAY_SIZE(t->map))
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL, "a tool needs an absolute path");
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "/dev/null");
	struct tool_child c = {.t = t, .nul = nul, .parent = getpid()};
	pid_t p = kis_spawn_clone(tool_child_main, &c, t->vfork_ok);
	int e = errno;
	close(nul);
	if (p < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot start '%s'", prog);
	kis_log_argv(KIS_LOG_DEBUG, t->argv, "helper %s started, pid %d", prog, (int)p);
	*pid = p;
	return 0;
}

bool kis_tool_ok(int status, int max_ok)
{
	return WIFEXITED(status) && WEXITSTATUS(status) <= max_ok;
}

int kis_tool_run(const struct kis_tool *t, bool capture_out, bool capture_err,
		 struct kis_tool_out *o, struct kis_error **err)
{
	memset(o, 0, sizeof(*o));
	int op[2] = {-1, -1}, ep[2] = {-1, -1};
	if ((capture_out && pipe2(op, O_CLOEXEC) < 0) || (capture_err && pipe2(ep, O_CLOEXEC) < 0)) {
		int e = errno;
		if (op[0] >= 0) {
			close(op[0]);
			close(op[1]);
		}
		return kis_error_set(err, KIS_E_INTERNAL, e, "pipe");
	}
	struct kis_tool tt = *t;
	if (capture_out)
		tt.out = op[1];
	if (capture_err)
		tt.err = ep[1];
	pid_t pid;
	int r = kis_tool_start(&tt, &pid, err);
	if (op[1] >= 0)
		close(op[1]);
	if (ep[1] >= 0)
		close(ep[1]);
	if (r < 0) {
		if (op[0] >= 0)
			close(op[0]);
		if (ep[0] >= 0)
			close(ep[0]);
		return -1;
	}
	size_t cap = 0, eused = 0;
	bool oom = false;
	struct pollfd p[2] = {{.fd = op[0], .events = POLLIN}, {.fd = ep[0], .events = POLLIN}};
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		char tmp[4096];
		if (p[0].fd >= 0 && p[0].revents) {
			ssize_t n = RETRY_EINTR(read(p[0].fd, tmp, sizeof(tmp)));
			if (n <= 0) {
				close(p[0].fd);
				p[0].fd = -1;
			} else if (!oom) {
				if (o->out_len + (size_t)n + 1 > cap) {
					size_t nc = cap ? cap * 2 : 8192;
					while (nc < o->out_len + (size_t)n + 1)
						nc *= 2;
					char *g = realloc(o->out, nc);
					if (!g) {
						oom = true;
						continue;
					}
					o->out = g;
					cap = nc;
				}
				memcpy(o->out + o->out_len, tmp, (size_t)n);
				o->out_len += (size_t)n;
				o->out[o->out_len] = '\0';
			}
		}
		if (p[1].fd >= 0 && p[1].revents) {
			ssize_t n = RETRY_EINTR(read(p[1].fd, tmp, sizeof(tmp)));
			if (n <= 0) {
				close(p[1].fd);
				p[1].fd = -1;
			} else {
				size_t k = (size_t)n;
				if (eused + k >= sizeof(o->err))
					k = sizeof(o->err) - 1 - eused;
				memcpy(o->err + eused, tmp, k);
				eused += k;
				o->err[eused] = '\0';
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	RETRY_EINTR(waitpid(pid, &o->status, 0));
	while (eused && (o->err[eused - 1] == '\n' || o->err[eused - 1] == ' '))
		o->err[--eused] = '\0';
	if (oom) {
		free(o->out);
		o->out = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "output of '%s'", t->argv[0]);
	}
	if (capture_out && !o->out && !(o->out = calloc(1, 1)))
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "output of '%s'", t->argv[0]);
	return 0;
}

char *kis_tool_output(char *const argv[], bool *ok)
{
	*ok = false;
	/* a fixed environment, never the caller's (issue 23): the tool's */
	struct kis_tool t = {.argv = argv, .in = -1, .out = -1, .err = -1};
	struct kis_tool_out o;
	struct kis_error *err = NULL;
	if (kis_tool_run(&t, true, false, &o, &err) < 0) {
		kis_error_free(err);
		return NULL;
	}
	*ok = kis_tool_ok(o.status, 0);
	return o.out;
}
