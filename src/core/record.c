/* SPDX-License-Identifier: MIT */
/* The thread's record of what a run makes (record.h). */
#include "core/util.h"

#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

