/* SPDX-License-Identifier: MIT */
/* The thread's record of what a run makes (record.h). */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "core/record.h"
#include "core/test_hook.h"

static __thread struct kis_record_sink *current;

void kis_record_push(struct kis_record_sink *s)
{
	s->prev = current;
	current = s;
}

void kis_record_pop(struct kis_record_sink *s)
{
	for (struct kis_record_sink *c = current; c; c = c->prev)
		if (c == s) {
			current = s->prev;
			return;
		}
}

void kis_record_init(struct kis_record_sink *s, int fd, const char *id)
{
	*s = (struct kis_record_sink){.fd = fd, .id = id, .tether = {-1, -1}};
}

/* The tether belongs to the outermost record (record.h). */
static struct kis_record_sink *outermost(void)
{
	struct kis_record_sink *o = current;
	while (o && o->prev)
		o = o->prev;
	return o;
}

int kis_owner_tether(void)
{
	struct kis_record_sink *o = outermost();
	if (!o) {
		errno = ENOENT;
		return -1;
	}
	if (o->tether[0] < 0 && pipe2(o->tether, O_CLOEXEC) < 0) {
		o->tether[0] = o->tether[1] = -1;
		return -1;
	}
	return o->tether[0];
}

void kis_owner_tether_watcher(pid_t pid)
{
	struct kis_record_sink *o = outermost();
	/* past the table's end a watcher is not reaped by us: it is left to
	 * whoever reaps our children once we exit (a zombie until then) */
	if (o && pid > 0 && o->n_watchers < KIS_TETHER_WATCHERS)
		o->watchers[o->n_watchers++] = pid;
}

void kis_record_tether_end(struct kis_record_sink *s, bool handover)
{
	if (s->tether[1] >= 0) {
		/* the byte stays in the pipe: every watcher sees it (FIONREAD);
		 * a write that failed (it cannot, on an empty pipe) reads as
		 * the end, which kills: never a process left untied */
		if (handover)
			(void)!RETRY_EINTR(write(s->tether[1], "h", 1));
		close(s->tether[1]);
		s->tether[1] = -1;
	}
	if (s->tether[0] >= 0) {
		close(s->tether[0]);
		s->tether[0] = -1;
	}
	/* each watcher exits as soon as it saw the byte or the end (after
	 * killing what it watched): a short wait, and no zombie is left */
	for (size_t i = 0; i < s->n_watchers; i++)
		RETRY_EINTR(waitpid(s->watchers[i], NULL, 0));
	s->n_watchers = 0;
}

bool kis_owner_active(void)
{
	return current != NULL;
}

const char *kis_owner_id(void)
{
	return current ? current->id : NULL;
}

int kis_owner_note(const char *kind, const char *fmt, ...)
{
	struct kis_record_sink *o = current;
	if (!o)
		return 0;
	char line[PATH_MAX + 64];
	int n = snprintf(line, sizeof(line), "%s ", kind);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0 || (size_t)(n + m) >= sizeof(line) - 1 || strchr(line + n, '\n')) {
		errno = ENAMETOOLONG;
		return -1;
	}
	n += m;
	line[n++] = '\n';
	/* One write(2) with O_APPEND: a kill leaves whole lines, or a last
	 * partial one that the sweep ignores (no newline). */
	return RETRY_EINTR(write(o->fd, line, (size_t)n)) == n ? 0 : -1;
}

/* ---- the test hook ---- */

void kis_test_count(const char *what)
{
	const char *path = KIS_TEST_GETENV("KIS_TEST_COUNT");
	if (!path || !*path)
		return;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	char line[64];
	int n = snprintf(line, sizeof(line), "%s\n", what);
	/* one write with O_APPEND: whole lines, whoever else counts */
	if (n > 0 && (size_t)n < sizeof(line))
		(void)!write(fd, line, (size_t)n);
	close(fd);
}

void kis_test_pause(const char *point)
{
	/* once per process: a point passed twice (a probe's cgroup, then the
	 * run's) stops at the first only, and a signal ends that one */
	static int paused;
	const char *want = KIS_TEST_GETENV("KIS_TEST_PAUSE_AT");
	/* only inside a run or a create (a probe's cgroup is not the run's) */
	if (!want || !current || strcmp(want, point) ||
	    __atomic_exchange_n(&paused, 1, __ATOMIC_RELAXED))
		return;
	/* The signals are blocked from before the line is printed until
	 * sigsuspend(2) waits with the old mask: one sent as soon as the line
	 * is read is held pending, never lost between the print and the wait
	 * (as it would be with pause(2)). The engine's handlers then run as
	 * they would at this point of a real run. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &old);
	fprintf(stderr, "kis: test pause at %s (owner %s, pid %d)\n", point, current->id,
		(int)getpid());
	sigset_t wait = old;
	sigdelset(&wait, SIGINT);
	sigdelset(&wait, SIGTERM);
	sigdelset(&wait, SIGHUP);
	sigsuspend(&wait);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

