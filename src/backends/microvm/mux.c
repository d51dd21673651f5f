/* SPDX-License-Identifier: MIT */
/* The microvm session's port broker: the session's agent.sock is served by
 * a small host process that hands each engine connection to a free agent
 * port of the VM (agent-N.sock, one QEMU chardev each), so several execs run
 * at once.
 *
 * Why a process: QEMU's socket chardev serves one client at a time, and two
 * chardevs cannot share one listening socket (tested with QEMU 7.2: the
 * second never sees its clients). The broker accepts on agent.sock, picks
 * the port that has been free longest (the guest learns of a closed host
 * connection asynchronously, so an immediate reuse is avoided), and forks
 * one relay per connection; a relay is plain byte copying with poll. It
 * watches QEMU through a pidfd and ends with it. */
#include "core/util.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "agent/proto.h"
#include "backends/microvm/mux.h"
#include "backends/microvm/vm.h"
#include "store/locks.h"

static int pump(int from, int to)
{
	char buf[65536];
	ssize_t k = RETRY_EINTR(read(from, buf, sizeof(buf)));
	if (k <= 0)
		return -1;
	for (ssize_t off = 0; off < k;) {
		ssize_t w = RETRY_EINTR(send(to, buf + off, (size_t)(k - off), MSG_NOSIGNAL));
		if (w <= 0)
			return -1;
		off += w;
	}
	return 0;
}

/* Read exactly n bytes within ms. */
static int read_n(int fd, uint8_t *buf, size_t n, int ms)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, ms);
		if (r <= 0)
			return -1;
		ssize_t k = RETRY_EINTR(read(fd, buf + got, n - got));
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

static _Noreturn void relay(int a, int b, const uint8_t *first, size_t n)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (n && send(a, first, n, MSG_NOSIGNAL) != (ssize_t)n)
		_exit(0);
	for (;;) {
		struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if ((p[0].revents && pump(a, b) < 0) || (p[1].revents && pump(b, a) < 0))
			_exit(0); /* either side closed: both close, the guest cancels the exec */
	}
}

static _Noreturn void broker(int listen_fd, int dfd, int qemu_pidfd)
{
	struct {
		pid_t relay;
		int64_t freed;
		bool dead;
	} port[KIS_MVM_PORTS] = {{0}};
	int64_t tick = 0;
	signal(SIGPIPE, SIG_IGN);
	/* A relay's end comes as SIGCHLD, read from a signalfd in the same
	 * poll: a blocked SIGCHLD stays pending even at its default (ignore)
	 * disposition (kernel/signal.c sig_ignored), so none is lost between
	 * the waitpid loop and poll. A 200 ms timeout to reap them instead
	 * woke every idle session's broker 5 times a second. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	int sfd = sigprocmask(SIG_BLOCK, &chld, NULL) == 0 ?
		  signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK) : -1;
	for (;;) {
		int st;
		pid_t done;
		struct signalfd_siginfo si;
		while (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			;
		while ((done = waitpid(-1, &st, WNOHANG)) > 0)
			for (int i = 0; i < KIS_MVM_PORTS; i++)
				if (port[i].relay == done) {
					port[i].relay = 0;
					port[i].freed = ++tick;
				}
		int freep = -1;
		for (int i = 0; i < KIS_MVM_PORTS; i++)
			if (!port[i].relay && !port[i].dead &&
			    (freep < 0 || port[i].freed < port[freep].freed))
				freep = i;
		/* with every port busy, new clients wait in the listen backlog */
		struct pollfd p[3] = {{.fd = qemu_pidfd, .events = POLLIN},
				      {.fd = freep >= 0 ? listen_fd : -1, .events = POLLIN},
				      {.fd = sfd, .events = POLLIN}};
		/* without a signalfd (it cannot fail here but for ENOMEM or
		 * EMFILE), fall back to reaping on a timeout */
		int n = poll(p, 3, sfd >= 0 ? -1 : 200);
		if (n < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break; /* QEMU is gone: so is the session */
		if (freep < 0 || !p[1].revents)
			continue;
		int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		/* The HELLO exchange happens here, so a port whose guest side
		 * does not answer (see the README's known problems) is retired
		 * and the client is served by the next free one. */
		uint8_t hello[KIS_FRAME_HDR + 4], reply[KIS_FRAME_HDR + 4];
		if (read_n(c, hello, sizeof(hello), 10000) < 0 || hello[4] != KIS_F_HELLO) {
			close(c);
			continue;
		}
		int g = -1;
		while (freep >= 0) {
			char name[32];
			snprintf(name, sizeof(name), "agent-%d.sock", freep);
			g = kis_mvm_connect_at(dfd, name);
			if (g >= 0 && send(g, hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t)sizeof(hello) &&
			    read_n(g, reply, sizeof(reply), 3000) == 0 && reply[4] == KIS_F_HELLO)
				break;
			if (g >= 0)
				close(g);
			g = -1;
			port[freep].dead = true;
			freep = -1;
			for (int i = 0; i < KIS_MVM_PORTS; i++)
				if (!port[i].relay && !port[i].dead &&
				    (freep < 0 || port[i].freed < port[freep].freed))
					freep = i;
		}
		if (g < 0) {
			close(c);
			continue;
		}
		pid_t r = fork();
		if (r == 0) {
			close(listen_fd);
			if (sfd >= 0)
				close(sfd);
			relay(c, g, reply, sizeof(reply));
		}
		close(c);
		close(g);
		if (r > 0)
			port[freep].relay = r;
	}
	kill(0, SIGKILL); /* our process group: the relays */
	_exit(0);
}

int kis_mvm_broker_start(int listen_fd, int dfd, pid_t qemu, struct kis_error **err)
{
	int pfd = (int)syscall(SYS_pidfd_open, qemu, 0);
	if (pfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot watch qemu");
	pid_t p = fork();
	if (p < 0) {
		close(pfd);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot fork");
	}
	if (p == 0) {
		kis_store_locks_drop(); /* before close_range below: the engine may die meanwhile */
		/* detached like QEMU: it outlives the client that made the session */
		setsid();
		if (fork() != 0)
			_exit(0);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		/* keep only what the broker needs (it never execs: CLOEXEC
		 * would not close the engine's other descriptors) */
		int hi[3] = {fcntl(listen_fd, F_DUPFD_CLOEXEC, 64), fcntl(dfd, F_DUPFD_CLOEXEC, 64),
			     fcntl(pfd, F_DUPFD_CLOEXEC, 64)};
		for (int i = 0; i < 3; i++)
			if (hi[i] < 0 || dup3(hi[i], 3 + i, O_CLOEXEC) < 0)
				_exit(1);
		syscall(SYS_close_range, 6, ~0u, 0);
		broker(3, 4, 5);
	}
	close(pfd);
	int st;
	RETRY_EINTR(waitpid(p, &st, 0));
	return 0;
}
