/* SPDX-License-Identifier: MIT */
/* The parent side of a run: fork, wait for exec, then one poll loop over
 * the child's pidfd, its output pipes, a deadline and a cancel fd.
 *
 * Theory of operation. The supervisor forks one child (kis_child_main), in a
 * process group of its own. A SOCK_CLOEXEC socketpair carries a failure
 * report from the child; EOF on it means exec succeeded. stdout and stderr
 * are two pipes read here: each chunk is counted against the output limit
 * and then written live or captured. The child is watched through a pidfd
 * (pidfd_open(2)); the wall clock by the poll timeout; CPU time through the
 * child's CPU clock (clock_getcpuclockid(3)) sampled every tick. A limit
 * that trips kills the whole process group (and the hooks' cgroup) and
 * records the reason first, so the later SIGKILL is never mistaken for a
 * plain signal. wait4(2) gives the exit status and the kernel's rusage.
 *
 * stdin: a regular file or a pipe of the caller's goes to the command as it
 * is; anything else (a terminal above all, also a socket or a device) never
 * does. The command gets a pipe instead, and this loop copies the caller's
 * bytes into it: a command that held the caller's terminal could change its
 * modes (tcsetattr), read what is typed after the run, or push input with
 * TIOCSTI where seccomp does not stop it (issue 23). */
#include "core/util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>

#include "core/io.h"
#include "core/log.h"
#include "core/rlimit.h"
#include "exec/spawn.h"

#define TICK_MS 20
#define DRAIN_MS 500

static uint64_t tv_ms(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

struct run_state {
	const struct kis_supervise *sv;
	struct kis_result *res;
	pid_t pid;
	uint64_t out_total;
	bool limit_hit; /* reason already decided by the supervisor */
	int out_fd[2];  /* read ends: stdout, stderr (-1 when closed) */
	char *buf;      /* PUMP_BUF bytes for pump(), or NULL */
};

/* pump()'s buffer lives on the heap: as a 64 KiB array in our frame (with
 * the relay's 16 KiB, an 80 KiB frame) -fstack-clash-protection probed
 * every page of it at each call of kis_exec_run, 20 fresh stack pages
 * faulted in per run although a command that prints nothing leaves them
 * unused; a heap buffer is touched only where read(2) writes. */
#define PUMP_BUF 65536

static void kill_run(struct run_state *st)
{
	kill(-st->pid, SIGKILL);
	kill(st->pid, SIGKILL);
	if (st->sv->hooks && st->sv->hooks->kill_all)
		st->sv->hooks->kill_all(st->sv->hooks->ctx);
}

static void stop_for(struct run_state *st, enum kis_reason reason, const char *detail)
{
	if (st->limit_hit)
		return;
	st->limit_hit = true;
	st->res->reason = reason;
	free(st->res->detail);
	st->res->detail = detail ? strdup(detail) : NULL;
	kill_run(st);
}

static int deliver(struct run_state *st, int idx, const char *buf, size_t n)
{
	struct kis_stream *s = &st->res->streams[idx];
	s->bytes += n;
	if (st->sv->sink)
		st->sv->sink(st->sv->sink_ctx, s->id, buf, n);
	else if (st->sv->capture)
		return kis_stream_append(s, buf, n);
	else
		/* a reader that went away loses the output; the run goes on */
		(void)kis_write_all(idx == 0 ? st->sv->stdout_fd : st->sv->stderr_fd, buf, n);
	return 0;
}

/* Read what one pipe has. Returns -1 on engine failure. */
static int pump(struct run_state *st, int idx, struct kis_error **err)
{
	if (!st->buf && !(st->buf = malloc(PUMP_BUF)))
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot read the output");
	char *buf = st->buf;
	ssize_t n = RETRY_EINTR(read(st->out_fd[idx], buf, PUMP_BUF));
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0) { /* EOF, or EIO from a pty master whose slave closed (pty(7)) */
		close(st->out_fd[idx]);
		st->out_fd[idx] = -1;
		return 0;
	}
	size_t room = st->out_total >= st->sv->output_bytes ? 0 : st->sv->output_bytes - st->out_total;
	size_t take = (size_t)n < room ? (size_t)n : room;
	if (take && deliver(st, idx, buf, take) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot keep the output");
	st->out_total += take;
	if (take < (size_t)n) {
		st->res->streams[idx].truncated = true;
		char d[120];
		snprintf(d, sizeof(d), "output passed limits.output_bytes (%llu bytes)",
			 (unsigned long long)st->sv->output_bytes);
		stop_for(st, KIS_REASON_OUTPUT_LIMIT, d);
	}
	return 0;
}

static uint64_t child_cpu_ms(clockid_t clk, bool have)
{
	struct timespec ts;
	if (!have || clock_gettime(clk, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t group_cpu_ms(const struct kis_supervise_hooks *h, bool have, uint64_t base)
{
	uint64_t ms;
	if (!have || h->cpu_used_ms(h->ctx, &ms) < 0 || ms < base)
		return 0;
	return ms - base;
}

/* What the command has spent since its exec: its own clock, or its
 * sandbox's group where one counts every process, whichever is more. */
static uint64_t cpu_now(clockid_t clk, bool have_clk, uint64_t clk0,
			const struct kis_supervise_hooks *h, bool have_cg, uint64_t cg0)
{
	uint64_t c = child_cpu_ms(clk, have_clk);
	c = c > clk0 ? c - clk0 : 0;
	uint64_t g = group_cpu_ms(h, have_cg, cg0);
	return c > g ? c : g;
}

static bool explain(struct run_state *st, enum kis_reason *why, char **detail)
{
	const struct kis_supervise_hooks *h = st->sv->hooks;
	return h && h->explain && h->explain(h->ctx, why, detail) > 0;
}

static void set_reason(struct kis_result *r, enum kis_reason why, char *detail)
{
	r->reason = why;
	free(r->detail);
	r->detail = detail;
}

static void set_result_from_status(struct run_state *st, int status, const struct rusage *ru)
{
	struct kis_result *r = st->res;
	struct kis_usage *u = &r->usage;
	u->user_ms = tv_ms(ru->ru_utime);
	u->sys_ms = tv_ms(ru->ru_stime);
	u->max_rss_bytes = (uint64_t)ru->ru_maxrss * 1024; /* getrusage(2): kilobytes */
	u->minor_faults = (uint64_t)ru->ru_minflt;
	u->major_faults = (uint64_t)ru->ru_majflt;
	u->voluntary_ctxsw = (uint64_t)ru->ru_nvcsw;
	u->involuntary_ctxsw = (uint64_t)ru->ru_nivcsw;

	enum kis_reason why;
	char *detail = NULL;
	if (WIFEXITED(status)) {
		r->exit_code = WEXITSTATUS(status);
		r->signal = 0;
		if (!st->limit_hit)
			r->reason = KIS_REASON_EXITED;
		/* A command that failed, or ran out its clock, after the cgroup
		 * refused it forks (a fork bomb) ended because of that limit. */
		if ((r->exit_code != 0 || r->reason == KIS_REASON_TIMEOUT) && explain(st, &why, &detail))
			set_reason(r, why, detail);
		return;
	}
	r->exit_code = -1;
	r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
	if (st->limit_hit) {
		if (r->reason == KIS_REASON_TIMEOUT && explain(st, &why, &detail) &&
		    why == KIS_REASON_PIDS_LIMIT)
			set_reason(r, why, detail);
		return;
	}
	uint64_t cpu = u->user_ms + u->sys_ms;
	if (r->signal == SIGXCPU || (r->signal == SIGKILL && cpu >= st->sv->cpu_ms)) {
		r->reason = KIS_REASON_CPU_LIMIT;
		free(r->detail);
		r->detail = strdup("cpu time passed limits.cpu_ms");
		return;
	}
	if (explain(st, &why, &detail)) {
		set_reason(r, why, detail);
		return;
	}
	r->reason = KIS_REASON_SIGNALED;
	if (r->signal == SIGXFSZ) {
		free(r->detail);
		r->detail = strdup("a file grew past limits.file_bytes");
	}
}

/* Hand the terminal to the child's group so it can read it (a background
 * group reading its terminal gets SIGTTIN, tcsetpgrp(3)); give it back after. */
static pid_t take_terminal(int fd, pid_t pgid)
{
	if (fd < 0 || !isatty(fd))
		return -1;
	pid_t old = tcgetpgrp(fd);
	if (old < 0 || old != getpgrp())
		return -1; /* not our controlling terminal's foreground: leave it */
	void (*prev)(int) = signal(SIGTTOU, SIG_IGN);
	int r = tcsetpgrp(fd, pgid);
	signal(SIGTTOU, prev);
	return r == 0 ? old : -1;
}

static void give_back_terminal(int fd, pid_t old)
{
	if (old < 0)
		return;
	void (*prev)(int) = signal(SIGTTOU, SIG_IGN);
	tcsetpgrp(fd, old);
	signal(SIGTTOU, prev);
}

static int wait_exec(int report_fd, pid_t pid, struct run_state *st, struct kis_error **err)
{
	struct kis_child_msg m;
	ssize_t n = RETRY_EINTR(recv(report_fd, &m, sizeof(m), 0));
	if (n <= 0)
		return 0; /* EOF: exec happened (the socket was close-on-exec) */
	m.message[sizeof(m.message) - 1] = '\0';
	int status;
	struct rusage ru;
	RETRY_EINTR(wait4(pid, &status, 0, &ru));
	if (m.stage == KIS_CHILD_CWD) {
		struct kis_result *r = st->res;
		r->reason = KIS_REASON_SETUP_FAILED;
		r->exit_code = 126;
		char *d = NULL;
		if (asprintf(&d, "cannot enter the working directory '%s': %s", m.message,
			     strerror(m.sys_errno)) < 0)
			d = NULL;
		free(r->detail);
		r->detail = d;
		return 1;
	}
	if (m.stage == KIS_CHILD_EXEC) {
		struct kis_result *r = st->res;
		r->reason = KIS_REASON_SETUP_FAILED;
		r->exit_code = m.sys_errno == ENOENT ? 127 : 126;
		char *d = NULL;
		if (asprintf(&d, m.sys_errno == ENOENT ? "command not found: '%s'" :
				 "cannot execute '%s': %s",
			     m.message, strerror(m.sys_errno)) < 0)
			d = NULL;
		free(r->detail);
		r->detail = d;
		return 1;
	}
	enum kis_errc code = (m.code > 0 && m.code < KIS_E__COUNT) ? (enum kis_errc)m.code :
								      KIS_E_INTERNAL;
	return kis_error_set(err, code, m.sys_errno, "%s", m.message);
}

/* The caller's stdin, copied into the command's pipe (see the top). */
struct stdin_relay {
	int from;   /* the caller's fd; -1 once it ended */
	int to;     /* our end of the command's pipe, O_NONBLOCK; -1 once closed */
	size_t off, len;
	char *buf;  /* RELAY_BUF bytes, allocated when there is a relay */
};
#define RELAY_BUF 16384

/* Whether fd may go to the command as it is: a regular file or a pipe
 * carries bytes and nothing else; a terminal carries its modes, its
 * foreground group and TIOCSTI; a socket its peer; a device its ioctls. */
static bool stdin_needs_relay(int fd)
{
	struct stat st;
	return fd >= 0 && (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)));
}

static void relay_close_to(struct stdin_relay *r)
{
	kis_closep(&r->to);
	r->from = -1;
	r->len = r->off = 0;
}

/* write(2) to a pipe whose reader may be gone, without the SIGPIPE that
 * would kill a caller that did not ignore it: the signal is blocked in
 * this thread and a SIGPIPE raised by this write is taken back
 * (sigtimedwait(2)), one that was pending before is left alone. */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t n)
{
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	bool was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	ssize_t w = RETRY_EINTR(write(fd, buf, n));
	int e = errno;
	if (w < 0 && e == EPIPE && !was_pending) {
		struct timespec zero = {0, 0};
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}

/* Should the loop wait for input on the caller's fd now? Not when the
 * buffer is full, nor from a terminal whose foreground group is not ours:
 * reading it would stop us with SIGTTIN (a background job; the command,
 * which held the terminal before, would have stopped the same way). */
static bool relay_wants_input(const struct stdin_relay *r)
{
	if (r->from < 0 || r->to < 0 || r->len > 0)
		return false;
	return !isatty(r->from) || tcgetpgrp(r->from) == getpgrp();
}

static void relay_read(struct stdin_relay *r)
{
	ssize_t n = RETRY_EINTR(read(r->from, r->buf, RELAY_BUF));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) { /* EOF (^D on a terminal), or an error: the command sees EOF */
		r->from = -1;
		relay_close_to(r);
		return;
	}
	r->off = 0;
	r->len = (size_t)n;
}

static void relay_write(struct stdin_relay *r)
{
	ssize_t w = write_nosigpipe(r->to, r->buf + r->off, r->len - r->off);
	if (w < 0 && errno == EAGAIN)
		return;
	if (w <= 0) { /* EPIPE: the command closed its stdin; the rest is dropped */
		relay_close_to(r);
		return;
	}
	r->off += (size_t)w;
	if (r->off == r->len)
		r->off = r->len = 0;
}

/* The child of kis_exec_run: our ends of its pipes closed, then
 * kis_child_main. */
struct run_child {
	const struct kis_spawn *sp;
	int report, out, err;
	int close[4];
};

static int run_child_main(void *p)
{
	struct run_child *c = p;
	for (size_t i = 0; i < ARRAY_SIZE(c->close); i++)
		if (c->close[i] >= 0)
			close(c->close[i]);
	kis_child_main(c->sp, c->report, c->out, c->err);
}

int kis_exec_run(struct kis_spawn *sp, const struct kis_supervise *sv, struct kis_result *res,
		 struct kis_error **err)
{
	int sock[2] = {-1, -1}, po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1};
	int pidfd = -1, rc = -1;
	pid_t pid = -1, old_fg = -1;
	struct run_state st = {.sv = sv, .res = res, .out_fd = {-1, -1}};
	struct stdin_relay relay = {.from = -1, .to = -1};
	/* the child's view: stdin replaced by the relay's pipe when it must be */
	struct kis_spawn csp = *sp;
	bool foreground = sp->foreground;
	if (!sp->pty && stdin_needs_relay(sp->stdin_fd)) {
		if (pipe2(pi, O_CLOEXEC) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the run's pipes");
			goto out;
		}
		if (!(relay.buf = malloc(RELAY_BUF))) {
			kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot relay stdin");
			goto out;
		}
		csp.stdin_fd = pi[0];
		csp.foreground = foreground = false; /* the terminal stays ours */
		relay.from = sp->stdin_fd;
	}

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0 ||
	    (sv->pty ? (po[0] = fcntl(sv->pty_master, F_DUPFD_CLOEXEC, 3)) < 0 :
		       (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0))) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the run's pipes");
		goto out;
	}
	uint64_t start = kis_monotonic_ms();
	/* set here, not in the child: a child sharing our memory writes
	 * nothing of ours */
	csp.die_with_parent = true;
	csp.parent = getpid();
	struct run_child child = {.sp = &csp, .report = sock[1], .out = po[1], .err = pe[1],
			       .close = {sock[0], po[0], pe[0], pi[1]}};
	pid = kis_spawn_clone(run_child_main, &child, sp->vfork_ok);
	if (pid < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot fork");
		goto out;
	}
	st.pid = pid;
	kis_log_argv(KIS_LOG_DEBUG, sp->argv, "command started, pid %d", (int)pid);
	kis_rlimits_log(sp->limits, (int)pid);
	if (!sp->pty)
		setpgid(pid, pid); /* also done by the child; whichever runs first wins */
	close(sock[1]);
	sock[1] = -1;
	close(po[1]);
	po[1] = -1;
	close(pe[1]);
	pe[1] = -1;
	kis_closep(&pi[0]);
	if (pi[1] >= 0) {
		relay.to = pi[1];
		pi[1] = -1;
		fcntl(relay.to, F_SETFL, O_NONBLOCK);
	}
	st.out_fd[0] = po[0];
	st.out_fd[1] = pe[0];
	po[0] = pe[0] = -1;
	for (int i = 0; i < 2; i++)
		if (st.out_fd[i] >= 0)
			fcntl(st.out_fd[i], F_SETFL, O_NONBLOCK);
	if (sp->pty) {
		/* Our copy of the slave must go, or the master never sees EOF. */
		close(sp->pty_slave);
		sp->pty_slave = -1;
	}

	if (sv->hooks && sv->hooks->attach && sv->hooks->attach(sv->hooks->ctx, pid, err) < 0) {
		kill_run(&st);
		RETRY_EINTR(waitpid(pid, NULL, 0));
		goto out;
	}
	if (foreground)
		old_fg = take_terminal(sp->stdin_fd, pid);

	int w = wait_exec(sock[0], pid, &st, err);
	if (w != 0) {
		res->usage.wall_ms = kis_monotonic_ms() - start;
		rc = w < 0 ? -1 : 0;
		goto out;
	}

	pidfd = pidfd_open_(pid);
	if (pidfd < 0) {
		/* pidfd_open(2) is Linux 5.3: the engine requires it. */
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot watch the command (pidfd_open)");
		kill_run(&st);
		RETRY_EINTR(waitpid(pid, NULL, 0));
		goto out;
	}
	clockid_t cpu_clk;
	bool have_clk = clock_getcpuclockid(pid, &cpu_clk) == 0;
	/* the command's clock from its exec on: the child's confinement
	 * before it (Landlock, seccomp) is the engine's setup, not the
	 * command's (a limit applies to the command) */
	uint64_t child_cpu0 = child_cpu_ms(cpu_clk, have_clk);
	uint64_t cpu_used = 0;
	/* the sandbox's total where its cgroup counts it: every process, not
	 * only the first (issue 15); counted from here, the setup excluded */
	const struct kis_supervise_hooks *hk = sv->hooks;
	uint64_t cg_cpu0 = 0;
	bool have_cg_cpu = hk && hk->cpu_used_ms && hk->cpu_used_ms(hk->ctx, &cg_cpu0) == 0;
	uint64_t deadline = start + sv->wall_ms;
	bool exited = false;
	int status = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	uint64_t drain_until = 0;
	bool watch_on[3] = {true, true, true};

	for (;;) {
		struct pollfd pfd[4 + 3 + 1];
		int n = 0, i_pid = -1, i_out[2] = {-1, -1}, i_cancel = -1, i_watch[3] = {-1, -1, -1};
		int i_relay = -1;
		if (exited && relay.to >= 0)
			relay_close_to(&relay); /* nobody reads it any more */
		if (!exited) {
			i_pid = n;
			pfd[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		}
		for (int i = 0; i < 2; i++)
			if (st.out_fd[i] >= 0) {
				i_out[i] = n;
				pfd[n++] = (struct pollfd){.fd = st.out_fd[i], .events = POLLIN};
			}
		if (!exited && sv->cancel_fd >= 0) {
			i_cancel = n;
			pfd[n++] = (struct pollfd){.fd = sv->cancel_fd, .events = POLLIN};
		}
		if (exited && n == 0)
			break;
		for (size_t k = 0; !exited && k < sv->n_watches && k < 3; k++)
			if (watch_on[k]) {
				i_watch[k] = n;
				pfd[n++] = (struct pollfd){.fd = sv->watches[k].fd, .events = POLLIN};
			}
		if (!exited && relay.to >= 0 && (relay.len > 0 || relay_wants_input(&relay))) {
			i_relay = n;
			pfd[n++] = relay.len > 0 ?
					   (struct pollfd){.fd = relay.to, .events = POLLOUT} :
					   (struct pollfd){.fd = relay.from, .events = POLLIN};
		}
		if (hk && hk->tick)
			hk->tick(hk->ctx, pid);
		uint64_t now = kis_monotonic_ms();
		if (exited && now >= drain_until)
			break; /* a process outside the group holds a pipe: stop waiting */
		int timeout = TICK_MS;
		if (!exited && sv->cpu_ms && (have_clk || have_cg_cpu))
			timeout = kis_cpu_next_look_ms(cpu_used, sv->cpu_ms, TICK_MS);
		if (!exited && deadline > now && deadline - now < (uint64_t)timeout)
			timeout = (int)(deadline - now);
		if (exited)
			timeout = (int)(drain_until - now);
		int pr = poll(pfd, (nfds_t)n, timeout);
		if (pr < 0 && errno != EINTR) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "poll failed while supervising");
			kill_run(&st);
			goto out;
		}
		for (int i = 0; i < 2; i++)
			if (i_out[i] >= 0 && pr > 0 && (pfd[i_out[i]].revents & (POLLIN | POLLHUP | POLLERR)))
				if (pump(&st, i, err) < 0) {
					kill_run(&st);
					goto out;
				}
		if (i_relay >= 0 && pr > 0 && pfd[i_relay].revents) {
			if (relay.len > 0)
				relay_write(&relay);
			else
				relay_read(&relay);
		}
		if (i_cancel >= 0 && pr > 0 && (pfd[i_cancel].revents & POLLIN))
			stop_for(&st, KIS_REASON_CANCELLED, "the run was cancelled");
		for (size_t k = 0; k < 3; k++) {
			if (i_watch[k] < 0 || pr <= 0 ||
			    !(pfd[i_watch[k]].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int wr = sv->watches[k].on_ready(sv->watches[k].ctx, sv->watches[k].fd);
			if (wr > 0)
				watch_on[k] = false;
			else if (wr < 0)
				stop_for(&st, KIS_REASON_CANCELLED, "the client went away");
		}
		bool child_done = i_pid >= 0 && pr > 0 && (pfd[i_pid].revents & POLLIN);
		if (!exited && child_done) {
			RETRY_EINTR(wait4(pid, &status, 0, &ru));
			exited = true;
			/* The run ends with its command: what it left behind goes too. */
			kill(-pid, SIGKILL);
			if (sv->hooks && sv->hooks->kill_all)
				sv->hooks->kill_all(sv->hooks->ctx);
			drain_until = kis_monotonic_ms() + DRAIN_MS;
			continue;
		}
		if (exited)
			continue;
		now = kis_monotonic_ms();
		if (now >= deadline) {
			char d[120];
			snprintf(d, sizeof(d), "wall clock passed limits.wall_ms (%llu ms)",
				 (unsigned long long)sv->wall_ms);
			stop_for(&st, KIS_REASON_TIMEOUT, d);
		} else if ((cpu_used = cpu_now(cpu_clk, have_clk, child_cpu0, hk, have_cg_cpu,
					       cg_cpu0)) >= sv->cpu_ms) {
			char d[120];
			snprintf(d, sizeof(d), "cpu time passed limits.cpu_ms (%llu ms)",
				 (unsigned long long)sv->cpu_ms);
			stop_for(&st, KIS_REASON_CPU_LIMIT, d);
		}
	}
	res->usage.wall_ms = kis_monotonic_ms() - start;
	set_result_from_status(&st, status, &ru);
	if (hk && hk->limit_events)
		hk->limit_events(hk->ctx, res);
	rc = 0;
out:
	if (foreground)
		give_back_terminal(sp->stdin_fd, old_fg);
	kis_closep(&pi[0]);
	kis_closep(&pi[1]);
	kis_closep(&relay.to);
	for (int i = 0; i < 2; i++) {
		kis_closep(&sock[i]);
		kis_closep(&po[i]);
		kis_closep(&pe[i]);
		kis_closep(&st.out_fd[i]);
	}
	kis_closep(&pidfd);
	free(relay.buf);
	free(st.buf);
	return rc;
}
