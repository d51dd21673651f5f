/* SPDX-License-Identifier: MIT */
/* The child side of a run, between fork and exec: descriptors, process
 * group, rlimits, confinement hook, PATH lookup. Failures travel back to the
 * parent over a SOCK_CLOEXEC socketpair (CONVENTIONS.md, rule 3). */
#include "core/util.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <termios.h>

#include "core/rlimit.h"
#include "exec/spawn.h"

/* ---- starting the child ---- */

/* The child's own stack while it shares our memory: its frames are our
 * caller's otherwise. Deep enough for kis_exec_search's path buffer, the
 * hooks and an error report; a guard page below it turns an overflow into
 * a fault of the child instead of a write into our heap. */
#define CHILD_STACK (256u * 1024u)
#define GUARD_PAGE 4096u

struct vchild {
	int (*fn)(void *);
	void *arg;
	sigset_t mask; /* the caller's, restored in the child */
};

/* The signals this process catches (and, with ignored, also the ones it
 * ignores), from the SigCgt and SigIgn masks of /proc/self/status
 * (proc(5)): a handful of rt_sigaction calls instead of one per signal, and
 * each system call is dear on a PVM guest (about 1.6 us here; the 64-signal
 * walk of a spawn's child was ~130 calls, twice per run). The file must be
 * procfs's (fstatfs): a tree mounted over /proc inside a sandbox cannot
 * hide a handler from us. No allocation; false when it cannot be read, and
 * the caller walks every signal instead. */
static bool hex_mask(const char *text, const char *key, uint64_t *out)
{
	const char *p = strstr(text, key);
	if (!p)
		return false;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	uint64_t v = 0;
	int n = 0;
	for (; n < 16; n++, p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return n == 16;
}

static bool handled_signals(bool with_ignored, uint64_t *mask)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct statfs sf;
	ssize_t n = fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC ?
			    read(fd, buf, sizeof(buf) - 1) : -1;
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	uint64_t cgt, ign;
	if (!hex_mask(buf, "\nSigCgt:", &cgt) || !hex_mask(buf, "\nSigIgn:", &ign))
		return false;
	*mask = cgt | (with_ignored ? ign : 0);
	return true;
}

/* Every signal this process catches (with_ignored: or ignores) back to
 * its default disposition. */
static void signals_to_default(bool with_ignored)
{
	uint64_t mask;
	bool known = handled_signals(with_ignored, &mask);
	for (int s = 1; s < NSIG && s <= 64; s++) {
		struct sigaction sa;
		if (known && !(mask & (UINT64_C(1) << (s - 1))))
			continue;
		if (!known && !with_ignored &&
		    (sigaction(s, NULL, &sa) < 0 || sa.sa_handler == SIG_IGN ||
		     sa.sa_handler == SIG_DFL))
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigaction(s, &sa, NULL); /* SIGKILL, SIGSTOP: EINVAL, as ever */
	}
}

static int vchild_main(void *p)
{
	struct vchild *c = p;
	/* Our handlers are the parent's code on the parent's data, which this
	 * child shares: none may run here. Every caught signal goes back to
	 * its default before the mask opens (an ignored one stays ignored,
	 * as execve(2) would keep it); the child has a signal table of its
	 * own (no CLONE_SIGHAND), so the parent's stays as it was. */
	signals_to_default(false);
	sigprocmask(SIG_SETMASK, &c->mask, NULL);
	_exit(c->fn(c->arg));
}

pid_t kis_spawn_clone(int (*fn)(void *), void *arg, bool shared_vm)
{
	if (!shared_vm) {
		pid_t p = fork();
		if (p == 0)
			_exit(fn(arg));
		return p;
	}
	/* No signal may reach a handler of ours on the child's stack before
	 * the child has reset them: everything blocked around the clone, the
	 * caller's mask back in both afterwards (glibc's posix_spawn does the
	 * same). CLONE_VFORK suspends this thread until the child's execve
	 * or exit, so nothing here touches the memory while the child runs
	 * on it; the other threads of a library caller go on, the child
	 * takes no lock of theirs (system calls only, kis_spawn.vfork_ok). */
	struct vchild c = {.fn = fn, .arg = arg};
	sigset_t all;
	sigfillset(&all);
	char *stk = mmap(NULL, CHILD_STACK + GUARD_PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stk == MAP_FAILED)
		return -1;
	if (mprotect(stk, GUARD_PAGE, PROT_NONE) < 0) {
		int e = errno;
		munmap(stk, CHILD_STACK + GUARD_PAGE);
		errno = e;
		return -1;
	}
	pthread_sigmask(SIG_SETMASK, &all, &c.mask);
	pid_t p = clone(vchild_main, stk + GUARD_PAGE + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
			&c);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &c.mask, NULL);
	munmap(stk, CHILD_STACK + GUARD_PAGE);
	errno = e;
	return p;
}

void kis_child_report(int fd, enum kis_child_stage stage, int sys_errno, enum kis_errc code,
		      const char *msg)
{
	struct kis_child_msg m;
	memset(&m, 0, sizeof(m));
	m.stage = (int32_t)stage;
	m.sys_errno = sys_errno;
	m.code = (int32_t)code;
	snprintf(m.message, sizeof(m.message), "%s", msg ? msg : "");
	ssize_t r = RETRY_EINTR(send(fd, &m, sizeof(m), MSG_NOSIGNAL));
	(void)r;
}

static const char *env_get(char *const *envp, const char *key)
{
	size_t n = strlen(key);
	for (; envp && *envp; envp++)
		if (!strncmp(*envp, key, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* execvpe(3) searches the caller's PATH, not the one in envp: the command
 * must be looked up in the sandbox's own environment, so search here. */
int kis_exec_search(char *const *argv, char *const *envp)
{
	const char *cmd = argv[0];
	if (!cmd || !*cmd) {
		errno = ENOENT;
		return -1;
	}
	if (strchr(cmd, '/')) {
		execve(cmd, argv, envp);
		return -1;
	}
	const char *path = env_get(envp, "PATH");
	if (!path)
		path = KIS_DEFAULT_PATH;
	int saved = ENOENT;
	size_t clen = strlen(cmd);
	while (*path) {
		const char *end = strchrnul(path, ':');
		size_t dlen = (size_t)(end - path);
		char full[4096];
		if (dlen + 1 + clen + 1 <= sizeof(full)) {
			memcpy(full, dlen ? path : ".", dlen ? dlen : 1);
			size_t o = dlen ? dlen : 1;
			full[o++] = '/';
			memcpy(full + o, cmd, clen + 1);
			execve(full, argv, envp);
			if (errno == EACCES || errno == ENOEXEC || errno == EPERM)
				saved = errno; /* found but not runnable: remember */
			else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP &&
				 errno != ENAMETOOLONG)
				return -1;
		}
		path = *end ? end + 1 : end;
	}
	errno = saved;
	return -1;
}

/* chdir(2) to a path resolved in this process's root with no magic link
 * on the way (openat2(2) RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, Linux
 * 5.6): a /proc/<pid>/fd/N or /proc/<pid>/cwd link, or a symlink in a
 * workspace that points at one, would lead to whatever directory some
 * process of the sandbox's setup holds, the host's included (runc's
 * CVE-2024-21626). No allocation. */
int kis_child_enter_dir(const char *path)
{
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	int e = errno;
	close(root);
	if (fd < 0) {
		errno = e;
		return -1;
	}
	int r = fchdir(fd);
	e = errno;
	close(fd);
	errno = e;
	return r;
}

void kis_child_main(const struct kis_spawn *sp, int report_fd, int out_fd, int err_fd)
{
	/* Our own process group, so the supervisor can kill the whole group.
	 * The parent calls setpgid too, to close the race (setpgid(2)). With a
	 * terminal, a new session instead (its id is our pid, so is the group):
	 * the pty slave becomes the controlling terminal (TIOCSCTTY, tty_ioctl(4)). */
	if (sp->pty) {
		if (setsid() < 0 || ioctl(sp->pty_slave, TIOCSCTTY, 0) < 0) {
			kis_child_report(report_fd, KIS_CHILD_SETUP, errno, KIS_E_INTERNAL,
					 "cannot make the terminal controlling");
			_exit(126);
		}
		out_fd = err_fd = sp->pty_slave;
	} else {
		setpgid(0, 0);
	}

	/* the command starts with every disposition at its default, the
	 * ignored ones too (SIGPIPE), and nothing blocked */
	sigset_t all;
	sigemptyset(&all);
	signals_to_default(true);
	sigprocmask(SIG_SETMASK, &all, NULL);

	int in_fd = sp->pty ? sp->pty_slave : sp->stdin_fd;
	if (in_fd < 0) {
		in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (in_fd < 0) {
			kis_child_report(report_fd, KIS_CHILD_SETUP, errno, KIS_E_INTERNAL,
					 "cannot open /dev/null");
			_exit(126);
		}
	}
	/* dup2 clears FD_CLOEXEC on the target; a source already at its target
	 * number keeps the flag, so clear it by hand then. */
	int fds[3] = {in_fd, out_fd, err_fd};
	for (int i = 0; i < 3; i++) {
		if (fds[i] == i) {
			int fl = fcntl(i, F_GETFD);
			if (fl >= 0)
				fcntl(i, F_SETFD, fl & ~FD_CLOEXEC);
		} else if (dup2(fds[i], i) < 0) {
			kis_child_report(report_fd, KIS_CHILD_SETUP, errno, KIS_E_INTERNAL,
					 "cannot set up the standard streams");
			_exit(126);
		}
	}
	if (sp->pass_fd3) {
		if (sp->fd3 == 3) {
			int fl = fcntl(3, F_GETFD);
			if (fl >= 0)
				fcntl(3, F_SETFD, fl & ~FD_CLOEXEC);
		} else if (dup2(sp->fd3, 3) < 0) {
			kis_child_report(report_fd, KIS_CHILD_SETUP, errno, KIS_E_INTERNAL,
					 "cannot pass descriptor 3");
			_exit(126);
		}
	}
	/* A working directory that is not there is the command's setup failure
	 * (setup_failed, 126, naming it), the same on every tier. */
	if (sp->cwd && kis_child_enter_dir(sp->cwd) < 0) {
		kis_child_report(report_fd, KIS_CHILD_CWD, errno, KIS_E_OK, sp->cwd);
		_exit(126);
	}
	if (sp->rlimits_before_setup && kis_rlimits_apply(sp->limits) < 0) {
		kis_child_report(report_fd, KIS_CHILD_SETUP, errno, KIS_E_INTERNAL,
				 "cannot set resource limits");
		_exit(126);
	}
	if (sp->child_setup) {
		struct kis_error *e = NULL;
		int r = sp->child_setup(sp->child_ctx, &e);
		if (r == KIS_CHILD_SETUP_CWD && sp->cwd) {
			/* the setup's own entry into the directory (as the
			 * sandbox's user) failed: the same answer as ours */
			kis_child_report(report_fd, KIS_CHILD_CWD, e ? e->sys_errno : 0, KIS_E_OK,
					 sp->cwd);
			_exit(126);
		}
		if (r < 0) {
			kis_child_report(report_fd, KIS_CHILD_SETUP, e ? e->sys_errno : 0,
					 e ? e->code : KIS_E_INTERNAL,
					 e && e->message ? e->message : "confinement failed");
			_exit(126);
		}
	}
	/* Last before exec, after everything the setup itself needs (the chdir,
	 * the cgroup join, which opens a file): a limit is the command's, never
	 * the engine's (open_files 1 must not fail the join, issue 15).
	 * Lowering needs no capability and the seccomp policy allows
	 * setrlimit and prlimit64 on ourselves. */
	if (!sp->rlimits_before_setup && kis_rlimits_apply(sp->limits) < 0) {
		kis_child_report(report_fd, KIS_CHILD_SETUP, errno, KIS_E_INTERNAL,
				 "cannot set resource limits");
		_exit(126);
	}
	if (sp->die_with_parent) {
		/* Last, after every credential change: the kernel clears the
		 * parent-death signal when the credentials change (prctl(2),
		 * PR_SET_PDEATHSIG). An engine that died before this call is
		 * seen by the parent's pid having changed. pid 1 of a pid
		 * namespace of its own (a kis-vm pod's container, agent/pod.c)
		 * reads its parent, in the namespace above, as 0
		 * (pid_namespaces(7)): not comparable, the death signal stands. */
		pid_t pp = getppid();
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || (pp != sp->parent && pp != 0)) {
			kis_child_report(report_fd, KIS_CHILD_SETUP, errno, KIS_E_INTERNAL,
					 "the engine ended before the command started");
			_exit(126);
		}
	}
	if (sp->exec_path)
		execve(sp->exec_path, sp->argv, sp->envp);
	else
		kis_exec_search(sp->argv, sp->envp);
	kis_child_report(report_fd, KIS_CHILD_EXEC, errno, KIS_E_OK, sp->argv[0]);
	_exit(errno == ENOENT ? 127 : 126);
}
