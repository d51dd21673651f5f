/* SPDX-License-Identifier: MIT */
/* Watchers of the engine's tether (tether.h, core/record.h): what a killed
 * create would leave running dies with the engine, with no later command. */
#include "core/util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "core/record.h"
#include "exec/tether.h"

int kis_tether_prepare(pid_t engine)
{
	/* best effort: without it, an orphan of the tree goes to init and
	 * only the processes we can still name are killed */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	int pfd = (int)syscall(SYS_pidfd_open, engine, 0);
	if (getppid() != engine) {
		if (pfd >= 0)
			close(pfd);
		return -2;
	}
	return pfd;
}

/* The tether and the pidfd on 3 and 4, /dev/null on 0..2, nothing else:
 * the watcher is a copy of the engine, and a descriptor it kept would
 * keep what it names (a flock of the store, the caller's pipes, which a
 * waiting reader would never see end). */
static void keep_only(int *tether, int *pfd)
{
	int t = fcntl(*tether, F_DUPFD_CLOEXEC, 64);
	int p = *pfd >= 0 ? fcntl(*pfd, F_DUPFD_CLOEXEC, 64) : -1;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (t < 0 || nul < 0 || dup3(t, 3, O_CLOEXEC) < 0 || (p >= 0 && dup3(p, 4, O_CLOEXEC) < 0))
		_exit(1); /* a watcher that cannot keep its tether: nothing to watch with */
	for (int i = 0; i < 3; i++)
		(void)dup2(nul, i);
	syscall(SYS_close_range, p >= 0 ? 5 : 4, ~0u, 0);
	*tether = 3;
	*pfd = p >= 0 ? 4 : -1;
}

/* Wait for the engine's word: true when it handed over. */
static bool handed_over(int tether, int pfd)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = tether, .events = POLLIN}, {.fd = pfd, .events = POLLIN}};
		int n = poll(p, pfd >= 0 ? 2 : 1, -1);
		if (n > 0)
			break;
		if (n < 0 && errno != EINTR)
			break; /* cannot wait: treated as the end, which kills */
	}
	/* the handover byte is never read, so every watcher sees it; a pipe
	 * woken with nothing in it has lost its last writer */
	int avail = 0;
	return ioctl(tether, FIONREAD, &avail) == 0 && avail > 0;
}

/* Our children (/proc/PID/task/TID/children, Linux 3.5; the watcher has
 * one thread), at most max; -1 when the file cannot be read. */
static int list_children(pid_t *out, int max)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = RETRY_EINTR(read(fd, buf, sizeof(buf) - 1));
	close(fd);
	if (k < 0)
		return -1;
	buf[k] = '\0';
	int n = 0;
	for (char *s = buf, *end; n < max && *s; s = end) {
		long v = strtol(s, &end, 10);
		if (end == s)
			break;
		if (v > 1)
			out[n++] = (pid_t)v;
	}
	return n;
}

/* child and everything it started: as their subreaper we receive each
 * orphan of the tree as its parent dies, and kill it in turn (a pid
 * namespace's init takes its namespace with it: pid_namespaces(7)).
 * Bounded: a process in uninterruptible sleep is left after ~2 s, the
 * time a caller allows before it looks. */
static void kill_tree(pid_t child)
{
	kill(child, SIGKILL);
	for (int round = 0; round < 200; round++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		pid_t kids[128];
		int n = list_children(kids, (int)ARRAY_SIZE(kids));
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++)
			kill(kids[i], SIGKILL);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

void kis_tether_watch(int tether, int engine_pidfd, pid_t child)
{
	signal(SIGPIPE, SIG_IGN);
	keep_only(&tether, &engine_pidfd);
	if (!handed_over(tether, engine_pidfd))
		kill_tree(child);
	_exit(0);
}

int kis_tether_guard(void (*on_abandon)(void *arg), void *arg, struct kis_error **err)
{
	if (!kis_owner_active())
		return 0;
	int tether = kis_owner_tether();
	if (tether < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot tie the session to the engine");
	pid_t engine = getpid();
	pid_t p = fork();
	if (p < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot fork");
	if (p == 0) {
		signal(SIGPIPE, SIG_IGN);
		int pfd = kis_tether_prepare(engine);
		if (pfd != -2) {
			keep_only(&tether, &pfd);
			if (handed_over(tether, pfd))
				_exit(0);
		}
		on_abandon(arg);
		_exit(0);
	}
	kis_owner_tether_watcher(p);
	return 0;
}
