/* SPDX-License-Identifier: MIT */
/* The default seccomp policy shared by every native tier: one rule table,
 * rendered as a libseccomp filter, raw BPF for bwrap, or OCI JSON for crun. */
#include "confine/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Theory: the policy is a flat list of rules, each one syscall name, one
 * action (allow or a given errno) and up to two argument comparisons that are
 * ANDed. Rules on the same syscall are ORed. libseccomp collapses a syscall
 * to its unconditional rule when one exists (measured with libseccomp 2.5.4:
 * "ALLOW ioctl" plus "EPERM ioctl if cmd == TIOCSTI" exports as a bare
 * ALLOW), and the order it evaluates overlapping conditional rules in is not
 * part of its contract. So a syscall that is partly allowed and partly
 * refused is written as conditional rules whose sets are disjoint: the result
 * never depends on evaluation order, here or in crun's copy of libseccomp. */

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

/* clone(2) takes the exit signal in its low byte (CSIGNAL), where clone3 and
 * unshare put CLONE_NEWTIME (0x80): for clone the time namespace cannot be
 * asked for, and masking 0x80 would refuse ordinary exit signals. */
#define CLONE_NS_FLAGS                                                                 \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |      \
		    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET))

#define ACT_ALLOW 0
#define LOW32 0xffffffffull

struct sc_cmp {
	unsigned arg;
	enum scmp_compare op;
	uint64_t a, b; /* MASKED_EQ: a = mask, b = value; else a = value */
};

struct sc_rule {
	const char *name;
	int act; /* ACT_ALLOW or an errno */
	unsigned n;
	struct sc_cmp c[2];
};

struct sc_policy {
	size_t n, cap;
	struct sc_rule *r;
	bool oom;
};

/* What ordinary programs need: a shell and coreutils, gcc (cc1, as, ld, the
 * driver's fork/exec and pipes), python3 (threads, futexes, epoll, random).
 * Derived from the syscalls these make under strace on x86_64, grouped by
 * concern. Names this libseccomp does not know are skipped. */
static const char *const allow_names[] = {
	/* files and descriptors */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
	"preadv2", "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range",
	"lseek", "dup", "dup2", "dup3", "fcntl", "flock", "pipe", "pipe2", "stat", "fstat",
	"lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
	"faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "rename",
	"renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat", "unlink",
	"unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "truncate",
	"ftruncate", "fallocate", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
	"umask", "utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
	"sendfile", "copy_file_range", "splice", "tee", "vmsplice", "fadvise64",
	"readahead", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
	"flistxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
	"fremovexattr", "memfd_create", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch", "cachestat",
	/* waiting and events */
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1",
	"epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
	"signalfd", "signalfd4", "timerfd_create", "timerfd_settime", "timerfd_gettime",
	"io_setup", "io_destroy", "io_getevents", "io_pgetevents", "io_submit", "io_cancel",
	/* memory */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
	"mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier",
	"pkey_alloc", "pkey_free", "pkey_mprotect", "map_shadow_stack",
	/* processes and threads (clone is conditional, below) */
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",
	"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex",
	"futex_waitv", "futex_wake", "futex_wait", "futex_requeue", "arch_prctl", "prctl",
	"sched_yield", "sched_getparam", "sched_getscheduler", "sched_getaffinity",
	"sched_getattr", "sched_get_priority_max", "sched_get_priority_min",
	"sched_rr_get_interval", "getpriority", "getcpu", "getrusage", "times",
	"getrlimit", "setrlimit", "uname", "sysinfo", "getrandom",
	/* credentials: with no capabilities these can only keep or drop */
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
	"setfsuid", "setfsgid", "setgroups", "capget", "capset",
	/* time */
	"nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday",
	"time", "alarm", "getitimer", "setitimer", "pause", "timer_create",
	"timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
	/* signals: signalling outside the sandbox is Landlock's scope (ABI 6) or
	 * the pid namespace's job */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
	"rt_sigtimedwait", "rt_sigsuspend", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	"sigaltstack", "kill", "tkill", "tgkill", "restart_syscall", "pidfd_open",
	"pidfd_send_signal",
	/* sockets (socket and socketpair are conditional, below) */
	"bind", "listen", "accept", "accept4", "getsockname", "getpeername",
	"recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
	"setsockopt", "getsockopt",
	/* self-restriction can only narrow what is allowed */
	"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
};

static const char *const sysv_ipc_names[] = {
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
	"msgget", "msgsnd", "msgrcv", "msgctl",
};

/* Refused by name with EPERM, so a program sees "not permitted" rather than
 * "not implemented" for what a sandbox withholds on purpose. */
static const char *const eperm_names[] = {
	"ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "umount",
	"pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
	"move_mount", "mount_setattr", "unshare", "setns", "keyctl", "add_key",
	"request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
	"io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module", "open_by_handle_at",
	"name_to_handle_at", "pidfd_getfd", "kcmp", "process_madvise", "memfd_secret",
	"acct", "swapon", "swapoff", "reboot", "sethostname", "setdomainname", "syslog",
	"iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"quotactl", "quotactl_fd", "fanotify_init", "lookup_dcookie", "vhangup", "uselib",
	"ustat", "sysfs", "_sysctl", "nfsservctl", "migrate_pages", "move_pages",
	"mbind", "set_mempolicy", "get_mempolicy", "set_mempolicy_home_node",
	"ioprio_set",
};

static void add_rule(struct sc_policy *p, const char *name, int act, unsigned n,
		     const struct sc_cmp *c)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct sc_rule *r = realloc(p->r, cap * sizeof(*r));
		if (!r) {
			p->oom = true;
			return;
		}
		p->r = r;
		p->cap = cap;
	}
	struct sc_rule *r = &p->r[p->n++];
	memset(r, 0, sizeof(*r));
	r->name = name;
	r->act = act;
	r->n = n;
	for (unsigned i = 0; i < n && i < 2; i++)
		r->c[i] = c[i];
}

static void add0(struct sc_policy *p, const char *name, int act)
{
	add_rule(p, name, act, 0, NULL);
}

static void add1(struct sc_policy *p, const char *name, int act, unsigned arg,
		 enum scmp_compare op, uint64_t a, uint64_t b)
{
	struct sc_cmp c = {arg, op, a, b};
	add_rule(p, name, act, 1, &c);
}

/* Allow syscall `name` unless the low 32 bits of argument `arg` are one of
 * deny[] (refused with `err`). The kernel reads these arguments as 32-bit
 * ints (ioctl's cmd is `unsigned int`), so the comparison masks the high
 * half: 0xffffffff00005412 is TIOCSTI to the kernel and must be to us.
 * Disjoint sets: the values agree on mask M with common bits B; a value that
 * differs from B on any bit of M is allowed by a one-bit rule, and the few
 * values that match B on M are enumerated over the free bits. */
static void add_allow_except32(struct sc_policy *p, const char *name, unsigned arg,
			       const uint32_t *deny, size_t n_deny, int err)
{
	uint32_t m = 0xffffffffu;
	for (size_t i = 1; i < n_deny; i++)
		m &= ~(deny[0] ^ deny[i]);
	uint32_t base = deny[0] & m;
	for (unsigned bit = 0; bit < 32; bit++) {
		uint32_t b = 1u << bit;
		if (m & b)
			add1(p, name, ACT_ALLOW, arg, SCMP_CMP_MASKED_EQ, b, (~base) & b);
	}
	uint32_t free_bits = ~m;
	/* enumerate the subsets of free_bits (kept small by the callers) */
	uint32_t sub = 0;
	do {
		uint32_t v = base | sub;
		bool denied = false;
		for (size_t i = 0; i < n_deny; i++)
			denied |= (v == deny[i]);
		add1(p, name, denied ? err : ACT_ALLOW, arg, SCMP_CMP_MASKED_EQ, LOW32, v);
		sub = (sub - free_bits) & free_bits;
	} while (sub != 0);
}

static size_t count_free_bits(const uint32_t *v, size_t n)
{
	uint32_t m = 0xffffffffu;
	for (size_t i = 1; i < n; i++)
		m &= ~(v[0] ^ v[i]);
	return (size_t)__builtin_popcount(~m);
}

static int build_policy(const struct kis_seccomp_opts *o, struct sc_policy *p)
{
	for (size_t i = 0; i < ARRAY_SIZE(allow_names); i++)
		add0(p, allow_names[i], ACT_ALLOW);
	if (o->allow_sysv_ipc)
		for (size_t i = 0; i < ARRAY_SIZE(sysv_ipc_names); i++)
			add0(p, sysv_ipc_names[i], ACT_ALLOW);
	for (size_t i = 0; i < ARRAY_SIZE(eperm_names); i++)
		add0(p, eperm_names[i], EPERM);

	/* clone: namespace flags refused, everything else allowed. Disjoint:
	 * all NS bits clear, or a given NS bit set. */
	add1(p, "clone", ACT_ALLOW, 0, SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0);
	for (unsigned bit = 0; bit < 64; bit++) {
		uint64_t b = 1ull << bit;
		if (CLONE_NS_FLAGS & b)
			add1(p, "clone", EPERM, 0, SCMP_CMP_MASKED_EQ, b, b);
	}
	/* clone3 passes its flags behind a pointer seccomp cannot read. ENOSYS
	 * makes glibc (2.34+) fall back to clone, which the rule above checks. */
	add0(p, "clone3", ENOSYS);

	/* ioctl: TIOCSTI (push input into a terminal) and TIOCLINUX (same via
	 * the console selection) refused, compared on the low 32 bits. */
	static const uint32_t tty_inject[] = {TIOCSTI, TIOCLINUX};
	if (count_free_bits(tty_inject, ARRAY_SIZE(tty_inject)) > 4)
		return -1;
	add_allow_except32(p, "ioctl", 1, tty_inject, ARRAY_SIZE(tty_inject), EPERM);

	/* personality(2) reads an unsigned int: allow the query (0xffffffff)
	 * and PER_LINUX (0), refuse the rest. Read the low 32 bits as a cycle:
	 * a value that is neither all zeros nor all ones has some bit j set
	 * whose cyclic neighbour j+1 is clear. One rule per j (32 rules, each
	 * one masked comparison) covers exactly the refused set, disjoint
	 * from the two allowed values. */
	add1(p, "personality", ACT_ALLOW, 0, SCMP_CMP_MASKED_EQ, LOW32, 0xffffffffu);
	add1(p, "personality", ACT_ALLOW, 0, SCMP_CMP_MASKED_EQ, LOW32, PER_LINUX);
	for (unsigned j = 0; j < 32; j++) {
		uint64_t bj = 1ull << j, bn = 1ull << ((j + 1) % 32);
		add1(p, "personality", EPERM, 0, SCMP_CMP_MASKED_EQ, bj | bn, bj);
	}

	/* Calls that take a pid and act on another process when it is not 0:
	 * without a pid namespace (the landlock backend) another process of
	 * the same uid is reachable by plain DAC rules, so only "self" (0) is
	 * allowed. prlimit64 may also read another process's limits. */
	static const char *const self_only0[] = {"sched_setaffinity", "sched_setparam",
						 "sched_setscheduler", "sched_setattr"};
	for (size_t i = 0; i < ARRAY_SIZE(self_only0); i++) {
		add1(p, self_only0[i], ACT_ALLOW, 0, SCMP_CMP_EQ, 0, 0);
		add1(p, self_only0[i], EPERM, 0, SCMP_CMP_NE, 0, 0);
	}
	add1(p, "setpriority", ACT_ALLOW, 1, SCMP_CMP_EQ, 0, 0);
	add1(p, "setpriority", EPERM, 1, SCMP_CMP_NE, 0, 0);
	add1(p, "prlimit64", ACT_ALLOW, 0, SCMP_CMP_EQ, 0, 0);
	{
		struct sc_cmp c[2] = {{0, SCMP_CMP_NE, 0, 0}, {2, SCMP_CMP_EQ, 0, 0}};
		add_rule(p, "prlimit64", ACT_ALLOW, 2, c);
		c[1].op = SCMP_CMP_NE;
		add_rule(p, "prlimit64", EPERM, 2, c);
	}

	/* Network off: only AF_UNIX sockets. Landlock's TCP rules do not cover
	 * UDP, raw or other families, so this rule is what makes "off" whole. */
	if (o->net == KIS_NET_OFF && o->unix_unnamed_only) {
		/* With the host's filesystem in view, a unix socket reaches any
		 * pathname socket whose mode lets it (Landlock up to ABI 7 does
		 * not check the connect, unix(7)), so none may name a peer.
		 * connect(2) is refused outright; sendto(2) with an address
		 * (its 5th argument, a pointer seccomp can only test for NULL);
		 * and datagram sockets, whose sendmsg(2) names the peer inside
		 * struct msghdr, where seccomp cannot look. Stream and seqpacket
		 * sockets refuse an address on send (unix_stream_sendmsg:
		 * EOPNOTSUPP/EISCONN; unix_seqpacket_sendmsg ignores it), so
		 * socketpair(2) of those types keeps working. unix_create turns
		 * SOCK_RAW into SOCK_DGRAM: only types 1 (STREAM) and 5
		 * (SEQPACKET) pass, i.e. type & 0xb == 1 (SOCK_TYPE_MASK 0xf;
		 * SOCK_CLOEXEC and SOCK_NONBLOCK lie above it). */
		static const char *const pair[] = {"socket", "socketpair"};
		for (size_t i = 0; i < ARRAY_SIZE(pair); i++) {
			struct sc_cmp c[2] = {{0, SCMP_CMP_EQ, AF_UNIX, 0},
					      {1, SCMP_CMP_MASKED_EQ, 0xb, 0x1}};
			add_rule(p, pair[i], ACT_ALLOW, 2, c);
			/* the complement of type & 0xb == 1, bit by bit */
			static const uint64_t bits[][2] = {{0x1, 0x0}, {0x2, 0x2}, {0x8, 0x8}};
			for (size_t k = 0; k < ARRAY_SIZE(bits); k++) {
				c[1].a = bits[k][0];
				c[1].b = bits[k][1];
				add_rule(p, pair[i], EACCES, 2, c);
			}
			add1(p, pair[i], EAFNOSUPPORT, 0, SCMP_CMP_NE, AF_UNIX, 0);
		}
		add0(p, "connect", EACCES);
		add1(p, "sendto", ACT_ALLOW, 4, SCMP_CMP_EQ, 0, 0);
		add1(p, "sendto", EACCES, 4, SCMP_CMP_NE, 0, 0);
		return p->oom ? -1 : 0;
	}
	if (o->net == KIS_NET_OFF) {
		add1(p, "socket", ACT_ALLOW, 0, SCMP_CMP_EQ, AF_UNIX, 0);
		add1(p, "socket", EAFNOSUPPORT, 0, SCMP_CMP_NE, AF_UNIX, 0);
		add1(p, "socketpair", ACT_ALLOW, 0, SCMP_CMP_EQ, AF_UNIX, 0);
		add1(p, "socketpair", EAFNOSUPPORT, 0, SCMP_CMP_NE, AF_UNIX, 0);
	} else {
		add0(p, "socket", ACT_ALLOW);
		add0(p, "socketpair", ACT_ALLOW);
	}
	add0(p, "connect", ACT_ALLOW);
	add0(p, "sendto", ACT_ALLOW);
	return p->oom ? -1 : 0;
}

static void policy_release(struct sc_policy *p)
{
	free(p->r);
	p->r = NULL;
	p->n = p->cap = 0;
}

static int policy_make(const struct kis_seccomp_opts *o, struct sc_policy *p,
		       struct kis_error **err)
{
	static const struct kis_seccomp_opts defaults = {.net = KIS_NET_OFF};
	memset(p, 0, sizeof(*p));
	if (build_policy(o ? o : &defaults, p) < 0) {
		policy_release(p);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build seccomp policy");
	}
	return 0;
}

static uint32_t rule_action(int act)
{
	return act == ACT_ALLOW ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO((uint32_t)act);
}

int kis_seccomp_build(const struct kis_seccomp_opts *o, scmp_filter_ctx *out,
		      struct kis_error **err)
{
	struct sc_policy p;
	TRY(policy_make(o, &p, err));
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!ctx) {
		policy_release(&p);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot create seccomp filter");
	}
	int r;
	/* A syscall from another ABI (i386 through int 0x80, x32 numbers with
	 * __X32_SYSCALL_BIT, which libseccomp's x86_64 filter routes to the
	 * bad-arch action) kills the process: nothing in the sandbox has a
	 * reason to switch ABI, and no rule above was written for one. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	if (r < 0) {
		seccomp_release(ctx);
		policy_release(&p);
		return kis_error_set(err, KIS_E_INTERNAL, -r, "cannot set seccomp attributes");
	}
	/* A binary tree of syscall numbers: ~200 allowed syscalls would
	 * otherwise be a linear scan on every call (libseccomp >= 2.5). */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);

	for (size_t i = 0; i < p.n; i++) {
		const struct sc_rule *ru = &p.r[i];
		int nr = seccomp_syscall_resolve_name(ru->name);
		if (nr == __NR_SCMP_ERROR || ru->act == ENOSYS)
			continue; /* unknown to this libseccomp, or the default
				   * action already (libseccomp refuses a rule
				   * equal to the default with EACCES) */
		struct scmp_arg_cmp c[2];
		for (unsigned k = 0; k < ru->n; k++) {
			c[k].arg = ru->c[k].arg;
			c[k].op = ru->c[k].op;
			c[k].datum_a = ru->c[k].a;
			c[k].datum_b = ru->c[k].b;
		}
		r = seccomp_rule_add_array(ctx, rule_action(ru->act), nr, ru->n, c);
		if (r < 0) {
			int e = -r;
			const char *name = ru->name;
			seccomp_release(ctx);
			policy_release(&p);
			return kis_error_set(err, KIS_E_INTERNAL, e,
					     "cannot add seccomp rule for '%s'", name);
		}
	}
	policy_release(&p);
	*out = ctx;
	return 0;
}

int kis_seccomp_load(scmp_filter_ctx ctx, struct kis_error **err)
{
	/* seccomp(2) refuses a filter from a task without CAP_SYS_ADMIN unless
	 * no_new_privs is set; libseccomp sets it (SCMP_FLTATR_CTL_NNP), this
	 * makes it explicit and independent of the attribute. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set no_new_privs");
	int r = seccomp_load(ctx);
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, -r, "cannot load seccomp filter");
	return 0;
}

int kis_seccomp_load_bpf_fd(int memfd, struct kis_error **err)
{
	struct stat st;
	if (fstat(memfd, &st) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stat seccomp program");
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	    st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL,
				     "seccomp program has a bad size (%lld bytes)",
				     (long long)st.st_size);
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, memfd, 0);
	if (m == MAP_FAILED)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot map seccomp program");
	struct sock_fprog prog = {
		.len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter)),
		.filter = m,
	};
	int r = 0, e = 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
		e = errno;
		r = -1;
	}
	munmap(m, (size_t)st.st_size);
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot load seccomp program");
	return 0;
}

int kis_seccomp_export_bpf_fd(const struct kis_seccomp_opts *o, int *memfd_out,
			      struct kis_error **err)
{
	scmp_filter_ctx ctx = NULL;
	TRY(kis_seccomp_build(o, &ctx, err));
	_cleanup_close_ int fd = memfd_create("kis-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		int e = errno;
		seccomp_release(ctx);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot create memfd for seccomp");
	}
	int r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, -r, "cannot export seccomp program");
	/* bwrap reads the program from the fd's current offset to EOF; seal it
	 * so nothing holding the fd can change the program once handed on. */
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot seal seccomp memfd");
	*memfd_out = steal_fd(&fd);
	return 0;
}

/* ------------------------------------------------------------- OCI form */

static const char *oci_op(enum scmp_compare op)
{
	switch (op) {
	case SCMP_CMP_NE: return "SCMP_CMP_NE";
	case SCMP_CMP_LT: return "SCMP_CMP_LT";
	case SCMP_CMP_LE: return "SCMP_CMP_LE";
	case SCMP_CMP_EQ: return "SCMP_CMP_EQ";
	case SCMP_CMP_GE: return "SCMP_CMP_GE";
	case SCMP_CMP_GT: return "SCMP_CMP_GT";
	case SCMP_CMP_MASKED_EQ: return "SCMP_CMP_MASKED_EQ";
	case _SCMP_CMP_MIN:
	case _SCMP_CMP_MAX:
	default: return NULL;
	}
}

static const char *oci_arch(uint32_t arch)
{
	switch (arch) {
	case SCMP_ARCH_X86_64: return "SCMP_ARCH_X86_64";
	case SCMP_ARCH_AARCH64: return "SCMP_ARCH_AARCH64";
	case SCMP_ARCH_RISCV64: return "SCMP_ARCH_RISCV64";
	case SCMP_ARCH_PPC64LE: return "SCMP_ARCH_PPC64LE";
	case SCMP_ARCH_S390X: return "SCMP_ARCH_S390X";
	default: return NULL;
	}
}

/* Append to arr, returning -1 (and dropping v) on failure. */
static int arr_add(json_t *arr, json_t *v)
{
	return v && json_array_append_new(arr, v) == 0 ? 0 : -1;
}

static json_t *oci_rule(const struct sc_rule *ru, json_t *names)
{
	json_t *o = json_object();
	if (!o) {
		json_decref(names);
		return NULL;
	}
	int bad = json_object_set_new(o, "names", names);
	bad |= json_object_set_new(o, "action", json_string(ru->act == ACT_ALLOW ?
							     "SCMP_ACT_ALLOW" : "SCMP_ACT_ERRNO"));
	if (ru->act != ACT_ALLOW)
		bad |= json_object_set_new(o, "errnoRet", json_integer(ru->act));
	if (ru->n) {
		json_t *args = json_array();
		bad |= json_object_set_new(o, "args", args);
		for (unsigned k = 0; k < ru->n && args; k++) {
			/* OCI: value/valueTwo are libseccomp's datum_a/datum_b
			 * (for MASKED_EQ: the mask, then the value). */
			json_t *a = json_pack("{s:I, s:I, s:I, s:s}", "index",
					      (json_int_t)ru->c[k].arg, "value",
					      (json_int_t)ru->c[k].a, "valueTwo",
					      (json_int_t)ru->c[k].b, "op", oci_op(ru->c[k].op));
			bad |= arr_add(args, a);
		}
		bad |= !args;
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int kis_seccomp_to_oci_json(const struct kis_seccomp_opts *o, json_t **out,
			    struct kis_error **err)
{
	struct sc_policy p;
	TRY(policy_make(o, &p, err));
	const char *arch = oci_arch(seccomp_arch_native());
	json_t *root = json_pack("{s:s, s:i, s:[s], s:[]}", "defaultAction", "SCMP_ACT_ERRNO",
				 "defaultErrnoRet", ENOSYS, "architectures",
				 arch ? arch : "SCMP_ARCH_NATIVE", "syscalls");
	json_t *calls = root ? json_object_get(root, "syscalls") : NULL;
	int bad = !calls;
	/* Unconditional rules are grouped by action, as OCI profiles usually
	 * are; each conditional rule is an entry of its own, so conditions on
	 * the same argument are never ANDed across rules. Note OCI marks an
	 * argument value as uint64 while jansson stores int64: the bit pattern
	 * is kept, and runtimes read it back as unsigned. */
	int acts[8];
	size_t n_acts = 0;
	for (size_t i = 0; i < p.n && !bad; i++) {
		if (p.r[i].n || p.r[i].act == ENOSYS)
			continue;
		size_t k = 0;
		while (k < n_acts && acts[k] != p.r[i].act)
			k++;
		if (k == n_acts && n_acts < ARRAY_SIZE(acts))
			acts[n_acts++] = p.r[i].act;
	}
	for (size_t k = 0; k < n_acts && !bad; k++) {
		json_t *names = json_array();
		const struct sc_rule *first = NULL;
		for (size_t i = 0; i < p.n && names; i++) {
			if (p.r[i].n || p.r[i].act != acts[k])
				continue;
			if (seccomp_syscall_resolve_name(p.r[i].name) == __NR_SCMP_ERROR)
				continue;
			first = first ? first : &p.r[i];
			bad |= arr_add(names, json_string(p.r[i].name));
		}
		if (!names || !first) {
			json_decref(names);
			bad |= !names;
			continue;
		}
		bad |= arr_add(calls, oci_rule(first, names));
	}
	for (size_t i = 0; i < p.n && !bad; i++) {
		if (!p.r[i].n || p.r[i].act == ENOSYS ||
		    seccomp_syscall_resolve_name(p.r[i].name) == __NR_SCMP_ERROR)
			continue;
		json_t *names = json_pack("[s]", p.r[i].name);
		bad |= !names || arr_add(calls, oci_rule(&p.r[i], names));
	}
	policy_release(&p);
	if (bad) {
		json_decref(root);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build OCI seccomp profile");
	}
	*out = root;
	return 0;
}

int kis_seccomp_allow_names(scmp_filter_ctx ctx, const char *const *names, size_t n)
{
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		/* a name this libseccomp does not know here is not allowed */
		if (nr != __NR_SCMP_ERROR)
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	}
	return r;
}

int kis_seccomp_allow_noexec_memory(scmp_filter_ctx ctx)
{
	int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				 SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				     SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	return r;
}

scmp_filter_ctx kis_seccomp_allowlist_new(uint32_t deny, const char *const *names, size_t n)
{
	scmp_filter_ctx ctx = seccomp_init(deny);
	if (!ctx)
		return NULL;
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = kis_seccomp_allow_names(ctx, names, n);
	if (r == 0)
		r = kis_seccomp_allow_noexec_memory(ctx);
	if (r < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}
