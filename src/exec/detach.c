/* SPDX-License-Identifier: MIT */
/* Starting a command that the caller supervises by other means (a runtime
 * that serves an agent channel): detached for a session, whose agent must
 * survive the client, so it leaves our session and our parentage; or as a
 * plain child of ours for a one-shot run. */
#include "core/util.h"

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "core/log.h"
#include "core/record.h"
#include "exec/spawn.h"
#include "exec/tether.h"

int kis_spawn_detached(struct kis_spawn *sp, pid_t *pid, struct kis_error **err)
{
	/* tethered inside a run: the middle process stays as the command's
	 * watcher until the run hands it over (tether.h) */
	int tether = sp->tethered && kis_owner_active() ? kis_owner_tether() : -1;
	if (sp->tethered && kis_owner_active() && tether < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot tie '%s' to the engine",
				     sp->argv[0]);
	pid_t engine = getpid();
	int sock[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create a socket pair");
	pid_t mid = fork();
	if (mid < 0) {
		close(sock[0]);
		close(sock[1]);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot fork");
	}
	if (mid == 0) {
		close(sock[0]);
		setsid();
		int pfd = tether >= 0 ? kis_tether_prepare(engine) : -1;
		if (pfd == -2)
			_exit(1); /* the engine is gone already: start nothing */
		pid_t g = fork();
		if (g < 0)
			_exit(1);
		if (g > 0) {
			int32_t v = g;
			(void)!send(sock[1], &v, sizeof(v), MSG_NOSIGNAL);
			if (tether < 0)
				_exit(0);
			close(sock[1]); /* the engine reads the command's report to its end */
			kis_tether_watch(tether, pfd, g);
		}
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		struct kis_spawn s = *sp;
		/* stdin: the caller's descriptor where it gave one (tier-up's
		 * profile pipe, src/backends/wasm.c), else /dev/null */
		if (s.stdin_fd < 0)
			s.stdin_fd = devnull;
		kis_child_main(&s, sock[1], devnull, devnull);
	}
	close(sock[1]);
	if (tether < 0) {
		int status;
		RETRY_EINTR(waitpid(mid, &status, 0));
	} else {
		kis_owner_tether_watcher(mid); /* reaped when the tether ends */
	}
	int32_t g = 0;
	ssize_t n = RETRY_EINTR(recv(sock[0], &g, sizeof(g), 0));
	if (n != (ssize_t)sizeof(g) || g <= 0) {
		close(sock[0]);
		return kis_error_set(err, KIS_E_INTERNAL, 0, "cannot start the agent");
	}
	struct kis_child_msg m;
	n = RETRY_EINTR(recv(sock[0], &m, sizeof(m), 0));
	close(sock[0]);
	if (n > 0) {
		m.message[sizeof(m.message) - 1] = '\0';
		if (m.stage == KIS_CHILD_CWD) /* a session whose cwd is not there */
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, m.sys_errno,
					     "cwd: cannot enter the working directory '%s'", m.message);
		enum kis_errc code = m.stage == KIS_CHILD_EXEC || m.code <= 0 || m.code >= KIS_E__COUNT ?
					     KIS_E_INTERNAL : (enum kis_errc)m.code;
		return kis_error_set(err, code, m.sys_errno, "cannot start '%s'",
				     m.stage == KIS_CHILD_EXEC ? m.message : sp->argv[0]);
	}
	kis_log_argv(KIS_LOG_DEBUG, sp->argv, "detached process started, pid %d", (int)g);
	*pid = g;
	return 0;
}

struct start_child {
	const struct kis_spawn *sp;
	int report, peer, out, err;
};

static int start_child_main(void *p)
{
	struct start_child *c = p;
	close(c->peer);
	kis_child_main(c->sp, c->report, c->out, c->err);
}

int kis_spawn_start(struct kis_spawn *sp, int out_fd, int err_fd, pid_t *pid,
		    struct kis_error **err)
{
	int sock[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create a socket pair");
	struct start_child c = {.sp = sp, .report = sock[1], .peer = sock[0], .out = out_fd,
				.err = err_fd};
	pid_t p = kis_spawn_clone(start_child_main, &c, sp->vfork_ok);
	if (p < 0) {
		int e = errno;
		close(sock[0]);
		close(sock[1]);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot fork");
	}
	close(sock[1]);
	setpgid(p, p); /* as the child does: whichever runs first wins */
	struct kis_child_msg m;
	ssize_t n = RETRY_EINTR(recv(sock[0], &m, sizeof(m), 0));
	close(sock[0]);
	if (n > 0) {
		RETRY_EINTR(waitpid(p, NULL, 0));
		m.message[sizeof(m.message) - 1] = '\0';
		enum kis_errc code = m.stage == KIS_CHILD_EXEC || m.code <= 0 || m.code >= KIS_E__COUNT ?
					     KIS_E_INTERNAL : (enum kis_errc)m.code;
		if (m.stage == KIS_CHILD_EXEC)
			return kis_error_set(err, code, m.sys_errno, "cannot start '%s'", m.message);
		if (m.stage == KIS_CHILD_CWD)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, m.sys_errno,
					     "cwd: cannot enter the working directory '%s'", m.message);
		return kis_error_set(err, code, m.sys_errno, "%s", m.message);
	}
	kis_log_argv(KIS_LOG_DEBUG, sp->argv, "process started, pid %d", (int)p);
	*pid = p;
	return 0;
}
