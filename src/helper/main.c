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
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>

#include "confine/confine.h"
#include "core/io.h"
#include "kis/wasm.h"
#include "wasm/internal.h"
#include "wasm/jit.h"
#include "wasm/jit_remote.h"

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
	int r = seccomp_load(ctx);
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
		struct kis_wasm_module *m = NULL;
		struct kis_error *e = NULL;
		int r;
		if (kis_wasm_module_load(bytes, (size_t)f.len, &m, &e) < 0) {
			snprintf(err, sizeof(err), "wasm.engine: %s", e && e->message ? e->message : "invalid module");
			kis_error_free(e);
			r = fail(fd, err);
		} else {
			m->jit_guard = (f.word & WASM_JIT_REMOTE_GUARD) != 0;
			uint8_t *obj = NULL;
			size_t len = 0;
			if (wasm_jit_emit(m, &obj, &len, err, sizeof(err)) < 0)
				r = fail(fd, err);
			else
				r = answer(fd, 0, obj, len);
			free(obj);
			kis_wasm_module_free(m);
		}
		free(bytes);
		if (r < 0)
			return 1;
	}
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
	if (argc == 3 && !strcmp(argv[1], "subids"))
		return subids(argv[2]);
	fprintf(stderr,
		"usage: kis-helper wasm-compile | kis-helper subids UID\n"
		"(run by kis, not by hand: see src/helper/main.c)\n");
	return 2;
}
