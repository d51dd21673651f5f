/* SPDX-License-Identifier: MIT */
/* Spawning and supervising one command: shared by every backend that runs a
 * native process and by the in-sandbox agent, so limits behave the same. */
#ifndef KIS_EXEC_H
#define KIS_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kis/error.h"
#include "kis/profile.h"
#include "kis/result.h"

/* chdir(2) to path, resolved in this process's root with no magic link on
 * the way (openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS); spawn enters
 * its cwd so, and a child_setup that mounts over it enters it again. No
 * allocation. -1 with errno. */
int kis_child_enter_dir(const char *path);

/* What to start. Everything is resolved by the caller. */
struct kis_spawn {
	char *const *argv;
	char *const *envp;     /* the whole environment; PATH in it drives lookup */
	const char *cwd;       /* NULL: inherit */
	int stdin_fd;          /* -1: /dev/null */
	const struct kis_limits *limits; /* rlimits: file_bytes, open_files, cpu backstop */
	/* Runs in the child after the descriptors and rlimits are in place and
	 * before exec: confinement (landlock, seccomp, ...). A failure is sent
	 * back to the parent and fails the run with that error. */
	int (*child_setup)(void *ctx, struct kis_error **err);
	/* ...or returns KIS_CHILD_SETUP_CWD (with *err's errno) when its own
	 * entry into cwd failed (as another user than spawn's): setup_failed
	 * naming the directory, as spawn's own entry reports it. */
#define KIS_CHILD_SETUP_CWD (-2)
	void *child_ctx;
	/* rlimits go on last, after child_setup (whose cgroup join opens a
	 * file: open_files 1 must not fail it). A child_setup that never
	 * returns (the wasm interpreter runs in it) asks for them before. */
	bool rlimits_before_setup;
	bool foreground;       /* give the child the terminal of stdin_fd, if any */
	/* A terminal: the child becomes a session leader with pty_slave as its
	 * controlling terminal and standard streams (stdin_fd is ignored). */
	bool pty;
	int pty_slave;
	/* An extra descriptor the command receives as fd 3. */
	bool pass_fd3;
	int fd3;
	/* kis_spawn_detached inside a run (core/record.h): the command is
	 * tied to the engine until the run hands it over (a session's, once
	 * published): the start's middle process stays as its watcher and
	 * kills it, and whatever it started, if the engine dies first or
	 * ends the run without a handover (exec/tether.h). */
	bool tethered;
	/* Set by kis_exec_run (a one-shot command dies with its engine,
	 * PR_SET_PDEATHSIG); a detached start leaves it false. */
	bool die_with_parent;
	pid_t parent;
	/* child_setup (if any) only makes system calls on data prepared
	 * before the start and never writes memory it did not allocate on
	 * its own stack: the child may then share the engine's memory until
	 * exec instead of copying it (kis_spawn_clone; a fork costs ~2.8 ms
	 * against 0.1 ms on this project's PVM guest, docs/performance.md).
	 * An error report through kis_error_set allocates in the shared heap:
	 * allowed, the caller is suspended meanwhile and frees nothing of it. */
	bool vfork_ok;
	/* The file to exec, when argv[0] is only the name the program sees
	 * (a multi-call binary picks its mode by it); NULL: argv[0], looked
	 * up in envp's PATH. */
	const char *exec_path;
};

/* Host-side checks the supervisor consults (cgroups, for example). */
struct kis_supervise_hooks {
	/* Called once the child exists, before it execs: put it in a cgroup. */
	int (*attach)(void *ctx, pid_t pid, struct kis_error **err);
	/* After the command ended by a signal: did a limit cause it? Set *reason
	 * and return 1, or return 0. */
	int (*explain)(void *ctx, enum kis_reason *reason, char **detail);
	/* Kill every process the run made (a cgroup does it best); the process
	 * group is always killed as well. */
	void (*kill_all)(void *ctx);
	/* The CPU of every process of the run so far (its cgroup's accounting),
	 * in ms: limits.cpu_ms is the sandbox's total, not one process's. 0 on
	 * success; NULL or < 0: the command's own clock is all there is. */
	int (*cpu_used_ms)(void *ctx, uint64_t *ms);
	/* After the run: count the limit events it met (res->limit_events). */
	void (*limit_events)(void *ctx, struct kis_result *res);
	/* On every turn of the supervisor's loop (at least every 20 ms) until
	 * the output has drained: the agent reaps the orphans it adopted
	 * here, never `command` itself (the supervisor waits for that one). */
	void (*tick)(void *ctx, pid_t command);
	void *ctx;
};

/* Where output goes: called for each chunk that fits the output limit. */
typedef void (*kis_output_fn)(void *ctx, int stream_id, const char *buf, size_t n);

/* A descriptor the supervisor watches besides its own: on readable (or
 * hang-up) it calls on_ready, which returns 0 to go on, 1 to stop watching
 * the fd, or -1 to cancel the run. */
struct kis_watch {
	int fd;
	int (*on_ready)(void *ctx, int fd);
	void *ctx;
};

struct kis_supervise {
	uint64_t wall_ms, cpu_ms, output_bytes; /* resolved, never 0 */
	bool capture;          /* append output to the result's streams */
	int stdout_fd, stderr_fd; /* live destination when !capture and !sink */
	kis_output_fn sink;    /* optional: overrides both of the above */
	void *sink_ctx;
	int cancel_fd;         /* readable means cancel the run; -1: none */
	const struct kis_supervise_hooks *hooks; /* may be NULL */
	/* With a terminal, output is read from the pty master (a single
	 * stream, stdout); the master itself stays the caller's. */
	bool pty;
	int pty_master;
	struct kis_watch watches[3];
	size_t n_watches;
};

/* Start the command and supervise it to the end. With sp->pty, the
 * parent's copy of the slave is closed once the child has it (and set -1). Returns 0 when the run
 * happened (res says how it ended, including not found: setup_failed with
 * exit_code 127) and < 0 when the engine itself failed. */
int kis_exec_run(struct kis_spawn *sp, const struct kis_supervise *sv, struct kis_result *res,
		 struct kis_error **err);

/* The CPU time in a cgroup's accounting file open at fd (v1 cpuacct.usage,
 * v2 cpu.stat), in ms. 0 on success. */
int kis_cpuacct_read_ms(int fd, uint64_t *ms);

/* How long a supervisor may wait before it looks at a CPU budget again:
 * `tick_ms` while the budget is far off; nearer, the time in which every
 * online CPU together could spend what is left (at least 1 ms), so a
 * command cannot pass its limits.cpu_ms unseen by exiting between two
 * looks. How soon past it the command is stopped is how soon the scheduler
 * wakes the supervisor: about a millisecond on a quiet machine, more on a
 * loaded one. */
int kis_cpu_next_look_ms(uint64_t used_ms, uint64_t limit_ms, int tick_ms);

/* Start a long-lived command (an agent) detached from the caller: a new
 * session, stdout/stderr on /dev/null, stdin sp->stdin_fd or /dev/null
 * for -1, reparented away from us
 * (double fork; tethered, once the run hands it over). Returns once it
 * has exec'd; *pid is its pid. */
int kis_spawn_detached(struct kis_spawn *sp, pid_t *pid, struct kis_error **err);

/* Start a command as our child, in its own process group, with stdout and
 * stderr on out_fd and err_fd; returns once it has exec'd (or with the
 * child's error). The caller waits for it. */
int kis_spawn_start(struct kis_spawn *sp, int out_fd, int err_fd, pid_t *pid,
		    struct kis_error **err);

#endif
