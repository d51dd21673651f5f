/* SPDX-License-Identifier: MIT */
/* Network egress's life (egress.h has the theory of operation): start in
 * its steps (S: netns.c, its policy: policy.c and nft.c, pasta: pasta.c,
 * a microvm's passt: passt.c), stop, release, and a session's record. */
#include "core/util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/io.h"
#include "core/record.h"
#include "net/egress_internal.h"

static void kill_one(pid_t pid, int pidfd)
{
	if (pid > 0 && pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	else if (pid > 0)
		kill(pid, SIGKILL);
}

void kis_egress_kill(struct kis_egress *eg)
{
	kill_one(eg->vm_pid, eg->vm_pidfd);
	kill_one(eg->pid, eg->pidfd);
}


int kis_egress_start(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
		     bool allow_set, uid_t helper_uid, bool die_with_us, bool wait,
		     struct kis_error **err)
{
	return kis_egress_start_for(eg, allow, n_allow, allow_set, helper_uid, die_with_us, wait,
				    false, err);
}

int kis_egress_prepare(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
		       bool allow_set, uid_t helper_uid, bool vm, struct kis_error **err)
{
	*eg = (struct kis_egress)KIS_EGRESS_INIT;
	eg->uid = helper_uid;
	if (helper_uid == 0)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "egress: the helper may not run as root");
	if (egress_make_netns(eg, err) < 0 || egress_configure_netns(eg, err) < 0 ||
	    egress_policy_write(eg, allow, n_allow, allow_set, vm, err) < 0) {
		kis_egress_stop(eg);
		return -1;
	}
	return 0;
}

int kis_egress_launch(struct kis_egress *eg, bool die_with_us, struct kis_error **err)
{
	/* pasta first, its start the longer; the policy while it runs (no
	 * command of the sandbox's runs before kis_egress_ready_for_command) */
	if (egress_start_pasta(eg, die_with_us, err) < 0 || egress_policy_load(eg, err) < 0) {
		kis_egress_stop(eg);
		return -1;
	}
	return 0;
}

int kis_egress_start_for(struct kis_egress *eg, const struct kis_net_dest *allow, size_t n_allow,
			 bool allow_set, uid_t helper_uid, bool die_with_us, bool wait, bool vm,
			 struct kis_error **err)
{
	TRY(kis_egress_prepare(eg, allow, n_allow, allow_set, helper_uid, vm, err));
	TRY(kis_egress_launch(eg, die_with_us, err));
	if (wait && kis_egress_ready(eg, err) < 0) {
		kis_egress_stop(eg);
		return -1;
	}
	return 0;
}

static void reap_one(pid_t *pid, int pidfd)
{
	if (*pid <= 0)
		return;
	/* our child (one-shot), or reparented (a detached start) */
	if (RETRY_EINTR(waitpid(*pid, NULL, 0)) < 0 && pidfd >= 0) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		RETRY_EINTR(poll(&p, 1, 1000));
	}
	*pid = 0;
}

void kis_egress_stop(struct kis_egress *eg)
{
	kis_egress_kill(eg);
	reap_one(&eg->vm_pid, eg->vm_pidfd);
	reap_one(&eg->pid, eg->pidfd);
	kis_closep(&eg->vm_pidfd);
	eg->vm_pidfd = -1;
	kis_closep(&eg->pidfd);
	kis_closep(&eg->netns_fd);
	kis_closep(&eg->userns_fd);
	kis_closep(&eg->ready_fd);
	kis_closep(&eg->err_fd);
	kis_closep(&eg->link_fd);
	kis_closep(&eg->nft_fd);
	free(eg->batch);
	eg->batch = NULL;
	eg->pidfd = eg->netns_fd = eg->userns_fd = eg->ready_fd = eg->err_fd = eg->link_fd = -1;
	eg->nft_fd = -1;
}

void kis_egress_release(struct kis_egress *eg)
{
	kis_closep(&eg->vm_pidfd);
	kis_closep(&eg->pidfd);
	kis_closep(&eg->netns_fd);
	kis_closep(&eg->userns_fd);
	kis_closep(&eg->ready_fd);
	kis_closep(&eg->err_fd);
	kis_closep(&eg->link_fd);
	kis_closep(&eg->nft_fd);
	free(eg->batch);
	*eg = (struct kis_egress)KIS_EGRESS_INIT;
}

/* ---- sessions ---- */

#define SAVED "egress"

int kis_egress_save(int dir_fd, const struct kis_egress *eg, struct kis_error **err)
{
	/* pasta's line, then passt's (a microvm's) */
	char line[128];
	int n = snprintf(line, sizeof(line), "%d %llu\n", (int)eg->pid, kis_proc_starttime(eg->pid));
	if (eg->vm_pid > 0)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%d %llu\n", (int)eg->vm_pid,
			      kis_proc_starttime(eg->vm_pid));
	_cleanup_close_ int fd = openat(dir_fd, SAVED, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
							   O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "egress: cannot record pasta in the session");
	return 0;
}

void kis_egress_end_saved(int dir_fd)
{
	_cleanup_close_ int fd = openat(dir_fd, SAVED, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[160];
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int pid = 0;
		unsigned long long start = 0;
		if (sscanf(line, "%d %llu", &pid, &start) != 2 || pid <= 0)
			continue;
		/* the pid is the helper's only while its start time matches
		 * (pid reuse) */
		int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (pfd >= 0 && kis_proc_starttime(pid) == start) {
			syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
			struct pollfd p = {.fd = pfd, .events = POLLIN};
			RETRY_EINTR(poll(&p, 1, 2000));
		}
		if (pfd >= 0)
			close(pfd);
	}
	unlinkat(dir_fd, SAVED, 0);
}
