/* SPDX-License-Identifier: MIT */
/* The compiler in a process of its own, for the static `kis` command line
 * (linked in place of jit_plugin.c, which defines the same functions).
 *
 * Why: `kis` is a static-pie program (every run execs it; without the
 * loader an exec costs ~2 ms less here, docs/performance.md), and a static
 * program cannot dlopen libkis-jit.so, which needs the shared libc and
 * libLLVM. So wasm_jit_load starts kis-helper (a dynamic program linking
 * the library with jit_plugin.c), which loads the plugin, confines itself
 * (src/helper/main.c: no capabilities, no_new_privs, a seccomp allowlist
 * of memory and I/O calls on the descriptors it has) and then compiles
 * what it is sent. Only compiling starts it: cached code links without
 * LLVM in this process (jit_elf.c).
 *
 * The wasm tier calls wasm_jit_load before it confines its child and keeps
 * the socket open past its close_range (wasm_jit_channel_fd); emitting is
 * then a write and a read, which its seccomp allowlist has. The helper
 * decoded hostile bytes: what it answers is treated as untrusted, as a
 * cached object is (bounded here, then jit_elf.c's bounds-checked linker).
 *
 * The frames (host byte order, one machine):
 *   hello  helper -> us  struct frame {magic, status, len} + len bytes of
 *                        message when status != 0
 *   request  us -> helper  struct frame {magic, flags, len} + the module
 *   answer   helper -> us  struct frame {magic, status, len} + the object
 *                          (status 0) or a message
 * flags: WASM_JIT_REMOTE_GUARD, the code is for guard-region memories;
 * WASM_JIT_REMOTE_FAST, the fast tier; WASM_JIT_REMOTE_MIXED, the mixed
 * tier, the profile in a frame of its own after the module. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/io.h"
#include "kis/profile.h"
#include "wasm/jit.h"
#include "wasm/jit_remote.h"


/* the helper's socket; emits are serialised by this lock */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int chan = -1;

/* the helper's path on a frame of its own (jit.h says why) */
static __attribute__((noinline)) bool helper_found(void)
{
	char h[PATH_MAX];
	return kis_helper_path(h, sizeof(h)) == 0;
}

bool wasm_jit_present(void)
{
	/* found once, present for this process (jit_plugin.c says why) */
	static _Atomic bool seen;
	if (!seen && helper_found() && wasm_jit_plugin_readable())
		seen = true;
	return seen;
}

/* A frame's header, then its message into err (status != 0) or its body
 * (malloc'd, at most max bytes). */
static int read_frame(int fd, size_t max, uint8_t **body, size_t *blen, char *err, size_t errlen)
{
	struct wasm_jit_frame f;
	if (kis_read_all(fd, &f, sizeof(f)) < 0 || f.magic != WASM_JIT_REMOTE_MAGIC) {
		snprintf(err, errlen, "wasm.engine: the compiler process (kis-helper) ended");
		return -1;
	}
	if (f.word) {
		char msg[256];
		size_t n = f.len < sizeof(msg) - 1 ? (size_t)f.len : sizeof(msg) - 1;
		if (kis_read_all(fd, msg, n) < 0)
			n = 0;
		msg[n] = 0;
		for (size_t i = 0; i < n; i++) /* one line, printable */
			if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] > 0x7e)
				msg[i] = ' ';
		snprintf(err, errlen, "%s", n ? msg : "wasm.engine: the compiler failed");
		return -1;
	}
	if (f.len > max) {
		snprintf(err, errlen, "wasm.engine: the compiler's answer is too large (%llu bytes)",
			 (unsigned long long)f.len);
		return -1;
	}
	*blen = (size_t)f.len;
	if (!body)
		return 0;
	*body = malloc(*blen ? *blen : 1);
	if (!*body) {
		snprintf(err, errlen, "wasm.engine: out of memory for the compiled code");
		return -1;
	}
	if (kis_read_all(fd, *body, *blen) < 0) {
		free(*body);
		*body = NULL;
		snprintf(err, errlen, "wasm.engine: the compiler process (kis-helper) ended");
		return -1;
	}
	return 0;
}

/* The helper on one end of a socketpair (its fd 0), /dev/null on 1 and 2
 * (the caller's streams are the sandboxed command's), no environment, dead
 * with its parent. */
static int start_helper(char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (kis_helper_path(path, sizeof(path)) < 0) {
		snprintf(err, errlen,
			 "wasm.engine: the compiler process (kis-helper) is not installed (looked "
			 "beside kis, in ../lib/kis and at %s)", kis_helper_installed());
		return -1;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "wasm.engine: cannot make the compiler's socket: %s",
			 strerror(errno));
		return -1;
	}
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	pid_t parent = getpid();
	pid_t pid = null < 0 ? -1 : fork();
	if (pid == 0) {
		char *argv[] = {"kis-helper", "wasm-compile", NULL};
		char *envp[] = {NULL};
		/* under the run's limits before it runs a line of LLVM
		 * (jit_remote.h: the caller's hook) */
		void *hctx = NULL;
		wasm_jit_spawn_fn hook = wasm_jit_spawn_hook(&hctx);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent ||
		    (hook && hook(hctx) < 0) ||
		    dup2(sv[1], 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(127);
		execve(path, argv, envp);
		_exit(127);
	}
	int e = errno;
	close(sv[1]);
	if (null >= 0)
		close(null);
	if (pid < 0) {
		close(sv[0]);
		snprintf(err, errlen, "wasm.engine: cannot start the compiler process: %s",
			 strerror(e));
		return -1;
	}
	/* the hello: the plugin loaded and the helper confined */
	size_t n;
	if (read_frame(sv[0], 0, NULL, &n, err, errlen) < 0) {
		close(sv[0]);
		waitpid(pid, NULL, 0);
		return -1;
	}
	/* above the descriptors the wasm tier's child gives fixed numbers
	 * (0..3 and the mounts' 4..; close_range spares this one), where
	 * limits.open_files allows */
	int hi = fcntl(sv[0], F_DUPFD_CLOEXEC, 4 + KIS_MOUNTS_MAX + 1);
	if (hi >= 0) {
		close(sv[0]);
		sv[0] = hi;
	}
	/* it stays our child until the socket closes: reaped by whoever
	 * reaps this process's children (the wasm tier's child exits, and
	 * the helper with it through PR_SET_PDEATHSIG) */
	chan = sv[0];
	return 0;
}

int wasm_jit_start(char *why, size_t whylen)
{
	return start_helper(why, whylen);
}

/* The caller started the helper first (wasm_jit_load, jit_load.c) */
int wasm_jit_emit(struct kis_wasm_module *m, uint8_t **obj, size_t *len, char *err, size_t errlen)
{
	pthread_mutex_lock(&lock);
	struct wasm_jit_frame f = {.magic = WASM_JIT_REMOTE_MAGIC,
				   .word = (m->jit_guard ? WASM_JIT_REMOTE_GUARD : 0) |
					   (m->jit_tier == WASM_JIT_TIER_FAST ? WASM_JIT_REMOTE_FAST : 0) |
					   (m->jit_tier == WASM_JIT_TIER_MIXED ? WASM_JIT_REMOTE_MIXED : 0),
				   .len = m->src_len};
	bool mixed = m->jit_tier == WASM_JIT_TIER_MIXED;
	struct wasm_jit_frame pf = {.magic = WASM_JIT_REMOTE_MAGIC,
				    .len = mixed && m->jit_prof ? (uint64_t)m->jit_nprof * 4 : 0};
	int r = -1;
	if (chan < 0)
		snprintf(err, errlen, "wasm.engine: the compiler process (kis-helper) ended");
	else if (kis_write_all(chan, &f, sizeof(f)) < 0 ||
		 kis_write_all(chan, m->src, m->src_len) < 0 ||
		 (mixed && (kis_write_all(chan, &pf, sizeof(pf)) < 0 ||
			    (pf.len && kis_write_all(chan, m->jit_prof, (size_t)pf.len) < 0))))
		snprintf(err, errlen, "wasm.engine: the compiler process (kis-helper) ended");
	else
		r = read_frame(chan, WASM_JIT_REMOTE_MAX_OBJECT, obj, len, err, errlen);
	pthread_mutex_unlock(&lock);
	return r;
}

int wasm_jit_channel_fd(void)
{
	pthread_mutex_lock(&lock);
	int fd = chan;
	pthread_mutex_unlock(&lock);
	return fd;
}
