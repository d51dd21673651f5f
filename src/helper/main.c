/* SPDX-License-Identifier: MIT */
/* kis-helper: the half of the command line that needs the dynamic loader.
 *
 * `kis` is linked static-pie (an exec of it costs ~2 ms less on this
 * machine without ld.so's mapping and relocation of libc, and every run
 * execs it: docs/performance.md). What a static program cannot do is
 * dlopen a shared object that needs the shared libc, or use glibc's NSS.
 * Two things in kis do: the WebAssembly compiler (libkis-jit.so, LLVM) and
 * the lookup of an ordinary user's subordinate ids (libsubid, and the
 * user's name from NSS). kis runs this program for them, rarely: a module
 * compiled for the first time, a rootless run that maps an id range.
 *
 *   kis-helper wasm-compile   fd 0 is a socket (src/wasm/jit_remote.c):
 *                             load the plugin, confine, answer requests
 *                             until the socket closes
 *   kis-helper wasm-tierup ROOT NAME MEM CPU WALL fast|opt
 *                             the background compile of tier-up (below):
 *                             fd 3 is the module's claim in ROOT's cache
 *   kis-helper subids UID     print "UID_START UID_COUNT GID_START GID_COUNT"
 *                             of UID's first ranges, or exit 1
 */
#include "core/util.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine/confine.h"
#include "core/io.h"
#include "kis/wasm.h"
#include "wasm/internal.h"
#include "wasm/jit.h"
#include "wasm/jit_cache.h"
#include "wasm/jit_remote.h"
#include "wasm/jit_tierup.h"

static int answer(int fd, uint32_t status, const void *body, size_t len)
{
	struct wasm_jit_frame f = {.magic = WASM_JIT_REMOTE_MAGIC, .word = status, .len = len};
	return kis_write_all(fd, &f, sizeof(f)) < 0 || (len && kis_write_all(fd, body, len) < 0)
		       ? -1
		       : 0;
}

static int fail(int fd, const char *msg)
{
	return answer(fd, 1, msg, strlen(msg));
}

/* What LLVM, malloc and the two descriptors need once the plugin is
 * loaded: no open, no exec, no fork, no socket, no executable mapping (the
 * object code is data here; kis links and maps it). Anything else fails
 * with EPERM, which LLVM's paths that probe the system take as "no". */
static int confine_compiler(void)
{
	static const char *const allowed[] = {
		"read", "write", "close", "fstat", "newfstatat", "lseek", "brk", "munmap",
		"mremap", "madvise", "futex", "exit", "exit_group", "rt_sigreturn",
		"rt_sigprocmask", "rt_sigaction", "sigaltstack", "getrandom", "clock_gettime",
		"clock_getres", "gettid", "getpid", "sched_yield", "sched_getaffinity", "sysinfo",
		"getrlimit", "prlimit64", "restart_syscall",
	};
	struct kis_error *e = NULL;
	if (kis_drop_caps(&e) < 0) {
		kis_error_free(e);
		return -1;
	}
	/* mappings never executable */
	scmp_filter_ctx ctx =
		kis_seccomp_allowlist_new(SCMP_ACT_ERRNO(EPERM), allowed, ARRAY_SIZE(allowed));
	if (!ctx)
		return -1;
	/* Threads for the compile in parallel (jit_llvm.c), and nothing else
	 * clone(2) can make: the flags exactly as glibc's pthread_create
	 * passes them (nptl's create_thread). CLONE_THREAD with CLONE_VM and
	 * CLONE_SIGHAND is a thread of this process: the same memory,
	 * descriptors, credentials, namespaces and this filter (a filter is
	 * inherited by every thread made after it, seccomp(2)); no new
	 * namespace flag, no new process to be the parent of anything, so a
	 * compromised helper gains only what it has: its CPU time still
	 * counts against its RLIMIT_CPU and its memory against its bound.
	 * clone3 passes its flags in memory, which a filter cannot read: it
	 * fails with ENOSYS, on which glibc falls back to clone. A thread
	 * registers its robust futex list and rseq area as it starts. */
	int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				 SCMP_A0(SCMP_CMP_EQ, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SYSVSEM |
							 CLONE_SIGHAND | CLONE_THREAD | CLONE_SETTLS |
							 CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(set_robust_list), 0);
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rseq), 0);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r == 0 ? 0 : -1;
}

/* No file system to name: the helper decodes hostile bytes, and a path
 * it could still stat (newfstatat is allowed: glibc's fstat is that call
 * with an empty path) would tell a compromised helper what the host
 * holds, which it could write into the code it answers. So once the
 * plugin is loaded it moves into mount, network and IPC namespaces of its
 * own (a user namespace first when not root) and chroots into an empty
 * read-only tmpfs mounted there. Best effort: where namespaces are
 * refused it keeps the seccomp allowlist, which has no open. */
static void empty_root(void)
{
	/* an ordinary user: a user namespace of its own first, its one id
	 * mapped onto itself (confine/userns.c, the rootless tier's own); the
	 * ids are read before: unmapped, they read as the overflow id after */
	uid_t u = geteuid();
	gid_t g = getegid();
	if (u != 0 && (unshare(CLONE_NEWUSER) < 0 || kis_userns_map_self(u, u, g, g) < 0))
		return;
	/* the mounts below are this namespace's only (MS_PRIVATE first) */
	if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("kis-helper", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
		  "size=4k,nr_inodes=2,mode=0555") < 0 ||
	    chroot("/tmp") < 0 || chdir("/") < 0)
		return;
}

static int wasm_compile(void)
{
	int fd = 0;
	char err[512];
	/* the plugin and libLLVM are read now, before the filter */
	if (wasm_jit_load(err, sizeof(err)) < 0) {
		fail(fd, err);
		return 1;
	}
	empty_root();
	if (confine_compiler() < 0) {
		fail(fd, "wasm.engine: the compiler process cannot confine itself");
		return 1;
	}
	if (answer(fd, 0, NULL, 0) < 0)
		return 1;
	/* the compile's threads: one per CPU this process may run on (the
	 * run's cpuset, a taskset), as many ranges as there are at most */
	uint8_t threads = 1;
	cpu_set_t cpus;
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
		int c = CPU_COUNT(&cpus);
		threads = (uint8_t)(c < 1 ? 1 : c > (int)WASM_JIT_OBJS_MAX ? (int)WASM_JIT_OBJS_MAX : c);
	}
	for (;;) {
		struct wasm_jit_frame f;
		if (kis_read_all(fd, &f, sizeof(f)) < 0)
			return 0; /* the caller is done */
		if (f.magic != WASM_JIT_REMOTE_MAGIC || f.len > KIS_WASM_MAX_MODULE_BYTES) {
			fail(fd, "wasm.engine: a bad request to the compiler process");
			return 1;
		}
		uint8_t *bytes = malloc(f.len ? (size_t)f.len : 1);
		if (!bytes || kis_read_all(fd, bytes, (size_t)f.len) < 0) {
			free(bytes);
			return 1;
		}
		/* the mixed tier's profile (jit_remote.h), bounded by the
		 * module's size (jit_tierup.h); what it says only picks each
		 * function's tier */
		uint32_t *prof = NULL;
		uint32_t nprof = 0;
		if (f.word & WASM_JIT_REMOTE_MIXED) {
			struct wasm_jit_frame pf;
			if (kis_read_all(fd, &pf, sizeof(pf)) < 0 || pf.magic != WASM_JIT_REMOTE_MAGIC ||
			    pf.len % 4 || pf.len / 4 > WASM_PROF_CAP(f.len) ||
			    !(prof = malloc(pf.len ? (size_t)pf.len : 4)) ||
			    kis_read_all(fd, prof, (size_t)pf.len) < 0) {
				free(prof);
				free(bytes);
				fail(fd, "wasm.engine: a bad request to the compiler process");
				return 1;
			}
			nprof = (uint32_t)(pf.len / 4);
		}
		struct kis_wasm_module *m = NULL;
		struct kis_error *e = NULL;
		int r;
		if (kis_wasm_module_load(bytes, (size_t)f.len, &m, &e) < 0) {
			snprintf(err, sizeof(err), "wasm.engine: %s", e && e->message ? e->message : "invalid module");
			kis_error_free(e);
			r = fail(fd, err);
		} else {
			m->jit_guard = (f.word & WASM_JIT_REMOTE_GUARD) != 0;
			m->jit_tier = f.word & WASM_JIT_REMOTE_FAST    ? WASM_JIT_TIER_FAST
				      : f.word & WASM_JIT_REMOTE_MIXED ? WASM_JIT_TIER_MIXED
								       : WASM_JIT_TIER_OPT;
			m->jit_prof = prof;
			m->jit_nprof = nprof;
			m->jit_threads = threads;
			uint8_t *obj = NULL;
			size_t len = 0;
			if (wasm_jit_emit(m, &obj, &len, err, sizeof(err)) < 0)
				r = fail(fd, err);
			else
				r = answer(fd, 0, obj, len);
			free(obj);
			kis_wasm_module_free(m);
		}
		free(prof);
		free(bytes);
		if (r < 0)
			return 1;
	}
}

/* ---- tier-up: the background compile (src/wasm/jit_tierup.c) ----
 *
 * Started detached by the wasm tier (its own session, stdio on /dev/null)
 * with fd 3 the module's claim: "<h>.pending" in the store's cache,
 * flock'ed, holding the module's bytes. This process is the writer: it
 * never decodes the module. It forks the compiler, which is exactly
 * `kis-helper wasm-compile` (wasm_compile above: the plugin loaded, then
 * namespaces, an empty root, no capabilities, the seccomp allowlist)
 * under RLIMIT_DATA and RLIMIT_CPU of the budget, sends it the module and
 * reads the object back; at the wall budget it kills it. "fast": the fast
 * tier first, then the optimising one over it; "opt": that one only (the
 * cache holds fast code already). Only a whole
 * object is written to the cache (jit_cache.c: temporary file and
 * rename), so a compile that failed or ran over its budget leaves the
 * cache as it was, and the claim is given up on every way out. */

static volatile sig_atomic_t tierup_child;

static void on_tierup_wall(int sig)
{
	(void)sig;
	if (tierup_child > 0)
		kill(tierup_child, SIGKILL); /* its socket ends: the read fails */
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*v = x;
	return 0;
}

/* One compile through the compiler's frames (jit_remote.c's protocol):
 * the hello, the request, the answer. 0 and *obj (malloc'd), or -1. */
static int tierup_compile(int fd, const uint8_t *mod, size_t len, unsigned tier,
			  const uint32_t *prof, uint32_t nprof, uint8_t **obj, size_t *olen)
{
	struct wasm_jit_frame f;
	if (kis_read_all(fd, &f, sizeof(f)) < 0 || f.magic != WASM_JIT_REMOTE_MAGIC || f.word)
		return -1;
	f = (struct wasm_jit_frame){.magic = WASM_JIT_REMOTE_MAGIC,
				    .word = (wasm_jit_guard_mode() ? WASM_JIT_REMOTE_GUARD : 0) |
					    (tier == WASM_JIT_TIER_FAST ? WASM_JIT_REMOTE_FAST : 0) |
					    (tier == WASM_JIT_TIER_MIXED ? WASM_JIT_REMOTE_MIXED : 0),
				    .len = len};
	struct wasm_jit_frame pf = {.magic = WASM_JIT_REMOTE_MAGIC, .len = (uint64_t)nprof * 4};
	if (kis_write_all(fd, &f, sizeof(f)) < 0 || kis_write_all(fd, mod, len) < 0 ||
	    (tier == WASM_JIT_TIER_MIXED &&
	     (kis_write_all(fd, &pf, sizeof(pf)) < 0 ||
	      (nprof && kis_write_all(fd, prof, (size_t)nprof * 4) < 0))))
		return -1;
	if (kis_read_all(fd, &f, sizeof(f)) < 0 || f.magic != WASM_JIT_REMOTE_MAGIC || f.word ||
	    !f.len || f.len > WASM_JIT_REMOTE_MAX_OBJECT)
		return -1;
	*obj = malloc((size_t)f.len);
	if (!*obj)
		return -1;
	if (kis_read_all(fd, *obj, (size_t)f.len) < 0) {
		free(*obj);
		*obj = NULL;
		return -1;
	}
	*olen = (size_t)f.len;
	return 0;
}

/* One compile at tier in a compiler process of its own under the budget;
 * the object written to the cache when whole. 0, or -1. */
static int tierup_stage(const char *root, int claim, const uint8_t *mod, size_t len,
			unsigned tier, const uint32_t *prof, uint32_t nprof, uint64_t mem,
			uint64_t cpu, uint64_t wall)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid_t writer = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* the compiler: dies with the writer, and its budget is its own
		 * (RLIMIT_DATA: LLVM's heap, brk and private mappings alike;
		 * RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL a second on);
		 * sv[0] closed too: the writer's close of it is the end */
		struct rlimit rd = {mem, mem}, rcpu = {cpu, cpu + 1};
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != writer ||
		    dup2(sv[1], 0) < 0 || close(sv[0]) < 0 || close(sv[1]) < 0 ||
		    close(claim) < 0 || setrlimit(RLIMIT_DATA, &rd) < 0 ||
		    setrlimit(RLIMIT_CPU, &rcpu) < 0)
			_exit(127);
		_exit(wasm_compile());
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return -1;
	}
	tierup_child = pid;
	uint8_t *obj = NULL;
	size_t olen = 0;
	int rc = -1;
	struct sigaction sa = {.sa_handler = on_tierup_wall};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) == 0) {
		alarm((unsigned)(wall > 86400 ? 86400 : wall));
		rc = tierup_compile(sv[0], mod, len, tier, prof, nprof, &obj, &olen);
		alarm(0);
	}
	close(sv[0]); /* the compiler reads its end: done */
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	tierup_child = 0;
	/* written only when whole; the put evicts past the cache's bound */
	if (rc == 0 && wasm_code_cache_put_tier(root, mod, len, obj, olen, tier) < 0)
		rc = -1;
	free(obj);
	return rc;
}

/* The run's profile on fd 0 (the engine's pipe, src/backends/wasm.c):
 * a frame {magic, 0, len} and len bytes, a u32 count per defined function
 * (jit_tierup.h), written when the run ended; EOF without it (the run was
 * killed, or it ran compiled), wait_s seconds without it, or fewer counts
 * than WASM_TIERUP_PROFILE_MIN: none. The
 * bytes are the interpreter's, in a child that ran the module: untrusted,
 * bounded here, and they only choose each function's tier. 0 and *prof
 * (malloc'd), or -1. */
static int tierup_profile(size_t modlen, uint64_t wait_s, uint32_t **prof, uint32_t *nprof)
{
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)(wait_s > 86400 ? 86400 : wait_s);
	struct wasm_jit_frame f;
	uint8_t *p = (uint8_t *)&f;
	size_t want = sizeof(f), got = 0;
	uint8_t *buf = NULL;
	for (;;) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (long)(end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec - now.tv_nsec) / 1000000;
		struct pollfd pfd = {.fd = 0, .events = POLLIN};
		int r = ms > 0 ? poll(&pfd, 1, ms > INT32_MAX ? INT32_MAX : (int)ms) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		ssize_t n = read(0, p + got, want - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got < want)
			continue;
		if (!buf) { /* the header: then the counts */
			if (f.magic != WASM_JIT_REMOTE_MAGIC || f.word || !f.len || f.len % 4 ||
			    f.len / 4 > WASM_PROF_CAP(modlen) || !(buf = malloc((size_t)f.len)))
				break;
			p = buf;
			want = (size_t)f.len;
			got = 0;
			continue;
		}
		/* a run too short to tell (jit_tierup.h): none */
		uint64_t total = 0;
		for (size_t i = 0; i < (size_t)f.len / 4; i++)
			total += ((const uint32_t *)(void *)buf)[i];
		if (total < WASM_TIERUP_PROFILE_MIN)
			break;
		*prof = (uint32_t *)(void *)buf;
		*nprof = (uint32_t)(f.len / 4);
		return 0;
	}
	free(buf);
	return -1;
}

static int tierup(char **argv)
{
	const char *root = argv[0], *name = argv[1];
	uint64_t mem, cpu, wall;
	int claim = 3;
	struct stat st;
	bool fast_first = !strcmp(argv[5], "fast");
	if (parse_u64(argv[2], &mem) < 0 || parse_u64(argv[3], &cpu) < 0 ||
	    parse_u64(argv[4], &wall) < 0 || !cpu || !wall || strlen(name) != 18 ||
	    (!fast_first && strcmp(argv[5], "opt")) || fstat(claim, &st) < 0 ||
	    !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > KIS_WASM_MAX_MODULE_BYTES)
		return 2; /* the claim stays; the cache's sweep removes it */
	/* nothing of the engine's but the claim: a descriptor it left
	 * inheritable (a pipe of its caller's) must not stay open as long
	 * as this compile */
	if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
		for (int fd = 4; fd < 1024; fd++)
			close(fd);
	/* niced: it runs beside the run it was started by, and after it */
	if (setpriority(PRIO_PROCESS, 0, 10) < 0)
		return 2;
	size_t len = (size_t)st.st_size;
	uint8_t *mod = malloc(len);
	size_t got = 0;
	while (mod && got < len) {
		ssize_t r = pread(claim, mod + got, len - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	char mine[32];
	int rc = 1;
	/* the engine's key must be ours (the same compiler, CPU and memory
	 * mode), or the next run would never find what this writes */
	if (got != len || wasm_code_cache_name(mod, len, mine) < 0 || strcmp(mine, name))
		goto out;
	/* what the cache holds now (a racing compile may have just written) */
	uint8_t *have = NULL;
	size_t hlen = 0;
	unsigned tier = WASM_JIT_TIER_FAST;
	bool cached = wasm_code_cache_get_tier(root, mod, len, &have, &hlen, &tier) == 0;
	wasm_code_cache_free(have, hlen);
	rc = 0;
	if (cached && tier != WASM_JIT_TIER_FAST)
		goto out; /* optimised, or mixed from a profile: final */
	/* two stages: the fast tier first, so that the next run links
	 * compiled code seconds from now, then, once the run that started
	 * this ended and sent its profile, the mixed tier (what ran hot at
	 * the optimising tier, the rest at the fast one), or without a
	 * profile the optimising tier; it replaces the fast code. A failed
	 * stage ends the compile (its budget is the same for both, and the
	 * fast one needs less of everything) */
	if (fast_first && !cached &&
	    tierup_stage(root, claim, mod, len, WASM_JIT_TIER_FAST, NULL, 0, mem, cpu, wall) < 0)
		rc = 1;
	uint32_t *prof = NULL, nprof = 0;
	if (rc == 0 && fast_first && tierup_profile(len, wall, &prof, &nprof) < 0)
		prof = NULL;
	if (rc == 0 && tierup_stage(root, claim, mod, len,
				    prof ? WASM_JIT_TIER_MIXED : WASM_JIT_TIER_OPT, prof, nprof, mem,
				    cpu, wall) < 0)
		rc = 1;
	free(prof);
out:
	free(mod);
	wasm_code_cache_unclaim(root, name, claim);
	return rc;
}

static int subids(const char *arg)
{
	char *end;
	errno = 0;
	unsigned long uid = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || uid > 0xfffffffful)
		return 2;
	struct kis_subids s;
	if (!kis_subids_lookup((uid_t)uid, &s))
		return 1;
	printf("%lu %lu %lu %lu\n", s.uid_start, s.uid_count, s.gid_start, s.gid_count);
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "wasm-compile"))
		return wasm_compile();
	if (argc == 8 && !strcmp(argv[1], "wasm-tierup"))
		return tierup(argv + 2);
	if (argc == 3 && !strcmp(argv[1], "subids"))
		return subids(argv[2]);
	fprintf(stderr,
		"usage: kis-helper wasm-compile | kis-helper wasm-tierup ROOT NAME MEM CPU WALL fast|opt |\n"
		"       kis-helper subids UID\n"
		"(run by kis, not by hand: see src/helper/main.c)\n");
	return 2;
}
