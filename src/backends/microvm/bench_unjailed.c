/* SPDX-License-Identifier: MIT */
/* The benchmark's unjailed VMM: bench/microvm-density.sh measures what the
 * jail adds to a restore by running the same engine with and without it.
 * This code exists only in build/bench/kis-unjailed (mk/bench.mk compiles
 * this file and vm.c again with KIS_MVM_BENCH_UNJAILED); the library, `kis`
 * and everything installed have none of it, and refuse the switch by name
 * (vm.c): in normal use a VM never runs unjailed, whatever a profile, a
 * flag or the environment says. */
#include "core/util.h"

#ifdef KIS_MVM_BENCH_UNJAILED
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "backends/microvm/vm.h"

bool kis_mvm_bench_unjailed(const struct kis_mvm_jail_cfg *c)
{
	/* one-shot restores only: no session outlives the benchmark unjailed,
	 * and a snapshot is always made in the jail (its RAM file is shared) */
	return getenv(KIS_MVM_BENCH_UNJAILED_ENV) && !c->detach && !c->mem_file;
}

/* QEMU as the engine's own child: root, the engine's namespaces, no
 * seccomp (neither ours nor -sandbox), no cgroup, no rlimits, no pivot_root;
 * the same argv otherwise, the same fds at the same numbers, the same THP
 * setting (a memory choice, not the jail's), the kernel and initramfs at
 * their host paths. */
int kis_mvm_bench_spawn(const struct kis_mvm_jail_cfg *c, pid_t *pid, struct kis_error **err)
{
	char *argv[256];
	int k = 0;
	for (int i = 0; c->argv[i] && k < 255; i++) {
		const char *a = c->argv[i];
		if (!strcmp(a, "-sandbox") && c->argv[i + 1]) {
			i++;
			continue;
		}
		if (!strcmp(a, "/vm/vmlinuz"))
			a = c->kernel;
		else if (!strcmp(a, "/vm/initrd"))
			a = c->initrd;
		argv[k++] = (char *)a;
	}
	argv[k] = NULL;
	if (c->nfds > KIS_MVM_MAX_FDS)
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL, "microvm bench: too many fds");
	int rep[2];
	if (pipe2(rep, O_CLOEXEC) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "pipe");
	pid_t p = fork();
	if (p < 0) {
		int e = errno;
		close(rep[0]);
		close(rep[1]);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot fork");
	}
	if (p == 0) {
		int hi[KIS_MVM_MAX_FDS];
		int rp = fcntl(rep[1], F_DUPFD_CLOEXEC, 64);
		for (int i = 0; i < c->nfds; i++)
			hi[i] = fcntl(c->fds[i], F_DUPFD_CLOEXEC, 64);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		int lg = c->log_fd >= 0 ? fcntl(c->log_fd, F_DUPFD_CLOEXEC, 64) : -1;
		if (rp < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(lg >= 0 ? lg : nul, 1) < 0 ||
		    dup2(lg >= 0 ? lg : nul, 2) < 0)
			_exit(125);
		for (int i = 0; i < c->nfds; i++)
			if (hi[i] < 0 || dup2(hi[i], 3 + i) < 0)
				_exit(125);
		/* nothing else of the engine's reaches QEMU */
		syscall(SYS_close_range, 3 + c->nfds, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
		static char *const envp[] = {"PATH=/usr/bin", NULL};
		execve(c->vmm, argv, envp);
		(void)!write(rp, "exec", 4);
		_exit(127);
	}
	close(rep[1]);
	char b[8];
	ssize_t n = RETRY_EINTR(read(rep[0], b, sizeof(b)));
	close(rep[0]);
	if (n > 0) {
		int st;
		RETRY_EINTR(waitpid(p, &st, 0));
		return kis_error_set(err, KIS_E_INTERNAL, 0, "microvm bench: cannot execute '%s'",
				     c->vmm);
	}
	*pid = p;
	return 0;
}
#else
/* ISO C wants a declaration in every translation unit */
typedef int kis_mvm_bench_unjailed_absent;
#endif
