/* SPDX-License-Identifier: MIT */
/* Probe: open the memory of the sandbox's PID 1 (the agent or the
 * runtime's init) and of our parent for writing: with it a command rewrites
 * what the supervisor reports. The mechanism is checked on a child of our
 * own: where even that is refused (Landlock closes /proc), nothing of
 * /proc/<pid>/mem is reachable, which is no escape either. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

static int try_mem(pid_t pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/mem", (int)pid);
	int fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return -1;
}

int main(void)
{
	pid_t targets[2] = {1, getppid()};
	int e = 0;
	for (int i = 0; i < 2; i++) {
		if (targets[i] <= 0 || targets[i] == getpid())
			continue;
		if (try_mem(targets[i]) == 0) {
			char what[80];
			snprintf(what, sizeof(what), "opened /proc/%d/mem for writing", (int)targets[i]);
			probe_escaped("proc1_mem", what);
		}
		e = errno;
	}
	pid_t kid = fork();
	if (kid == 0) {
		pause();
		_exit(0);
	}
	int own = kid > 0 ? try_mem(kid) : -1;
	int own_err = errno;
	if (kid > 0) {
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
	}
	if (own == 0)
		printf("proc1_mem: stopped (%s; a child of our own opens)\n", strerror(e));
	else
		printf("proc1_mem: stopped (%s; /proc/<pid>/mem is closed to us: %s)\n", strerror(e),
		       strerror(own_err));
	return e == EACCES || e == EPERM || e == ENOENT ? PROBE_STOPPED : PROBE_OTHER_ERROR;
}
