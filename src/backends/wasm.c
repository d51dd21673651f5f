/* SPDX-License-Identifier: MIT */
/* The wasm backend: a WASI preview1 module from the workspace, run by our
 * interpreter in a child process under a tight seccomp allowlist. */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>

#include "backends/common.h"
#include "core/io.h"
#include "confine/confine.h"
#include "exec/exec.h"
#include "kis/backend.h"
#include "kis/store.h"
#include "wasm/jit.h"
#include "wasm/jit_cache.h"
#include "wasm/jit_remote.h"
#include "wasm/jit_tierup.h"
#include "wasm/wasi.h"

/* Theory of operation. run() reads the module from the workspace (openat2
 * beneath it) and hands everything to kis_exec_run, which forks, wires
 * stdin/stdout/stderr, applies rlimits, passes the workspace directory as
 * fd 3 and calls our child_setup hook instead of a confinement step. The
 * hook never returns: it closes every other descriptor (as exec would close
 * the close-on-exec ones, which tells the supervisor "started"), arms a
 * timer for the wall deadline, loads the seccomp allowlist, decodes and runs
 * the module, writes how it ended to a shared page and exits. The parent's
 * supervisor enforces wall (SIGKILL backstop), cpu, output and cancel, and
 * reads the output pipes; the shared page turns the end into a reason. */

#define MODULE_MAX (256u << 20)
#define BACKSTOP_MS 50
#define CANCEL_GRACE_MS 50
#define TRAP_EXIT_CODE 134 /* 128 + SIGABRT: what a trapped module reports */

static void wasm_probe(const struct kis_ctx *ctx, struct kis_caps *c)
{
	memset(c, 0, sizeof(*c));
	/* The interpreter is part of this library: always present. openat2
	 * (Linux 5.6) is what confines paths; without it the tier is absent. */
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
	long fd = syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS) {
		snprintf(c->why_absent, sizeof(c->why_absent),
			 "openat2(2) is missing (Linux 5.6 or later confines WASI paths)");
		return;
	}
	if (fd >= 0)
		close((int)fd);
	c->present = true;
	/* The engines this build has, in the order auto prefers them. The
	 * compiler (LLVM, src/wasm/jit_llvm.c, its code linked by jit_elf.c)
	 * first where its plugin is installed: auto takes it for a module
	 * whose code the store has cached (linked in ~0.3 ms here, no
	 * LLVM) or that is small enough to compile on its first run
	 * (KIS_WASM_AUTO_COMPILE_MAX), and the interpreter for a larger one
	 * while it is compiled in the background for its next run
	 * (docs/wasm.md, "Which engine", "Tier-up"). */
	snprintf(c->engines, sizeof(c->engines), "%s",
		 kis_wasm_compiler_available() ? "compiler interpreter" : "interpreter");
	c->cow = true;     /* workspaces from the store */
	c->seccomp = true; /* the interpreter's process */
	c->net_modes = 1u << KIS_NET_OFF;
	/* pids: a module cannot make a process (no WASI call does, and the
	 * seccomp allowlist has no fork/clone): any pids limit holds. */
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_MEMORY | KIS_LIMIT_PIDS |
		    KIS_LIMIT_OUTPUT | KIS_LIMIT_FILE | KIS_LIMIT_OPEN_FILES;
	c->mounts = true; /* one more WASI preopen each, named by its target */
}

struct kis_plan {
	char **argv;       /* as the guest sees it: argv[0] is the module path */
	char **envp;       /* the profile's env only */
	char *module;      /* path of the module relative to the workspace */
	char *workspace;   /* host path, or NULL (a run plans before its clone) */
	bool preopen;      /* the workspace is the module's fd 3 ("/") */
	const char *engine; /* "interpreter", "compiler" or "auto" (wasm_run decides) */
	char *store_root;   /* the command's store (NULL: the default): the code cache's */
	char *store_dir;    /* the engine's open store's root (kis_run_request), or NULL */
	char *sandbox_id;   /* names the compile group (wasm_run), or NULL */
	struct kis_limits limits;
	struct kis_io io;
	/* the profile's mounts: one more preopen each, named by its target */
	struct wasm_mount {
		char *target, *path;
		bool ro;
		int fd; /* open during run (>= MOUNT_FD_MIN), else -1 */
	} mounts[KIS_MOUNTS_MAX];
	size_t n_mounts;
};

/* Where run() keeps the mounts' directories until the child moves them
 * to 4.. (above 4 + KIS_MOUNTS_MAX, so no dup2 lands on one not moved). */
#define MOUNT_FD_MIN 100

/* What the run makes after planning, in the plan: the workspace and the
 * mounts. At plan time, and again by amend with what the run made. */
static int place(struct kis_plan *pl, const struct kis_run_request *req)
{
	if (req->workspace_path && !(pl->workspace = strdup(req->workspace_path)))
		return -1;
	for (size_t i = 0; i < req->n_mounts && i < KIS_MOUNTS_MAX; i++) {
		struct wasm_mount *m = &pl->mounts[i];
		pl->n_mounts = i + 1;
		m->fd = -1;
		m->ro = req->mounts[i].read_only;
		if (!(m->target = strdup(req->mounts[i].target)) ||
		    !(m->path = strdup(req->mounts[i].path)))
			return -1;
	}
	return 0;
}

/* What place() put in the plan, freed (wasm_plan_free, amend). */
static void unplace(struct kis_plan *pl)
{
	free(pl->workspace);
	pl->workspace = NULL;
	for (size_t i = 0; i < pl->n_mounts; i++) {
		free(pl->mounts[i].target);
		free(pl->mounts[i].path);
		if (pl->mounts[i].fd >= 0)
			close(pl->mounts[i].fd);
		pl->mounts[i] = (struct wasm_mount){.fd = -1};
	}
	pl->n_mounts = 0;
}

static int wasm_amend(struct kis_plan *pl, const struct kis_run_request *req,
		      struct kis_error **err)
{
	unplace(pl);
	if (place(pl, req) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot amend the plan");
	return 0;
}

static void wasm_plan_free(struct kis_plan *pl)
{
	if (!pl)
		return;
	kis_strv_free(pl->argv);
	kis_strv_free(pl->envp);
	free(pl->module);
	free(pl->store_root);
	free(pl->store_dir);
	free(pl->sandbox_id);
	unplace(pl);
	free(pl);
}

/* The module's path inside the workspace: relative to it, or under
 * /workspace (the path the other tiers show it at). */
static const char *module_rel(const char *a)
{
	if (!strncmp(a, "/workspace/", 11))
		return a + 11;
	return a[0] == '/' ? NULL : a;
}

/* Does the space-separated list hold the word? */
static bool has_word(const char *list, const char *w)
{
	size_t n = strlen(w);
	for (const char *c = list; (c = strstr(c, w)) != NULL; c += n)
		if ((c == list || c[-1] == ' ') && (c[n] == ' ' || !c[n]))
			return true;
	return false;
}

/* wasm.engine: auto is the interpreter where the compiler is absent, and
 * else decided per run (wasm_run: the module's size and the cache); a
 * named one must be present, or the run is refused by name rather than
 * run by another. */
static int pick_engine(const struct kis_caps *caps, enum kis_wasm_engine want,
		       const char **out, struct kis_error **err)
{
	if (want == KIS_WASM_ENGINE_AUTO) {
		*out = !strncmp(caps->engines, "compiler", 8) ? "auto" : "interpreter";
		return 0;
	}
	const char *name = kis_wasm_engine_name(want);
	if (!has_word(caps->engines, name))
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "wasm.engine: this build has no WebAssembly %s (engines here: "
				     "%s): ask for auto or one of those",
				     name, caps->engines[0] ? caps->engines : "none");
	*out = want == KIS_WASM_ENGINE_COMPILER ? "compiler" : "interpreter";
	return 0;
}

static int wasm_plan(const struct kis_caps *caps, const struct kis_run_request *req,
		     struct kis_plan **out, struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	const char *engine = NULL;
	TRY(pick_engine(caps, p->wasm.engine, &engine, err));
	if (p->tty.enabled)
		return kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0,
				     "the wasm backend cannot give a terminal: drop tty.enabled (--tty)");
	TRY(kis_check_network(caps, p, "wasm",
			      "it has no network (WASI preview1 modules get no sockets)", err));
	TRY(kis_check_limits(caps, p, "wasm", err));
	if (p->cwd && strcmp(p->cwd, "/workspace") && strcmp(p->cwd, "/workspace/"))
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "cwd: a WASI module starts at the workspace's root ('/'); "
				     "'%s' cannot be its working directory",
				     p->cwd);
	if (!req->workspace_path && !p->base && !p->workspace)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "workspace: the wasm tier runs a module that lies in a "
				     "workspace: give --base or --workspace");
	/* WASI libc finds preopens from fd 3 up to the first that is none
	 * (wasi-libc's __wasilibc_populate_preopens): without the workspace
	 * at 3 the mounts' 4.. would never be seen */
	if (p->n_mounts && p->wasm.preopen != KIS_WASM_PREOPEN_WORKSPACE)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "mounts: with wasm.preopen 'none' the module has no directory "
				     "for them: drop the mounts or --preopen");
	const char *rel = module_rel(req->argv[0]);
	if (!rel)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "'%s': the module must lie in the workspace (a relative path, "
				     "or one under /workspace)",
				     req->argv[0]);
	struct kis_plan *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
	pl->argv = kis_strv_dup(req->argv);
	pl->envp = kis_strv_dup(p->env);
	pl->module = strdup(rel);
	pl->limits = req->limits;
	pl->io = req->io;
	pl->preopen = p->wasm.preopen == KIS_WASM_PREOPEN_WORKSPACE;
	pl->engine = engine;
	bool oom = req->ctx && req->ctx->store_root &&
		   !(pl->store_root = strdup(req->ctx->store_root));
	oom |= req->store_dir && !(pl->store_dir = strdup(req->store_dir));
	oom |= req->sandbox_id && !(pl->sandbox_id = strdup(req->sandbox_id));
	oom |= place(pl, req) < 0;
	if (oom || !pl->argv || !pl->envp || !pl->module) {
		wasm_plan_free(pl);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot plan");
	}
	*out = pl;
	return 0;
}

static json_t *strv_json(char **v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static char *wasm_describe(const struct kis_plan *pl)
{
	const struct kis_limits *l = &pl->limits;
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I}}", "backend",
		"wasm", "engine", pl->engine, "module", pl->module, "argv", strv_json(pl->argv), "env",
		strv_json(pl->envp), "preopen",
		pl->preopen ? json_string("/ (the workspace)") : json_null(), "seccomp", "allowlist of the WASI layer's syscalls",
		"limits", "wall_ms", (json_int_t)l->wall_ms, "cpu_ms", (json_int_t)l->cpu_ms,
		"linear_memory_bytes", (json_int_t)l->memory_bytes, "output_bytes",
		(json_int_t)l->output_bytes, "file_bytes", (json_int_t)l->file_bytes, "open_files",
		(json_int_t)l->open_files);
	if (!o)
		return NULL;
	json_t *pre = json_array();
	for (size_t i = 0; i < pl->n_mounts; i++)
		json_array_append_new(pre, json_pack("{s:i, s:s, s:b}", "fd", (int)(4 + i), "name",
						     pl->mounts[i].target, "read_only",
						     pl->mounts[i].ro));
	json_object_set_new(o, "mount_preopens", pre);
	/* the compiler process's share (compile_spawn): said as it binds */
	if (strcmp(pl->engine, "interpreter"))
		json_object_set_new(
			o, "compiler_limits",
			json_string(geteuid() == 0 ?
				"a compile in this run (kis-helper) is in a cgroup of its own: "
				"memory.max = limits.memory_bytes but at least 256 MiB, pids.max "
				"= limits.pids; its CPU counts toward limits.cpu_ms and in "
				"usage.user_ms" :
				"a compile in this run (kis-helper): RLIMIT_DATA = "
				"limits.memory_bytes but at least 256 MiB (its heap and private "
				"mappings; no cgroup this user may write here); its CPU counts "
				"toward limits.cpu_ms and in usage.user_ms"));
	if (!strcmp(pl->engine, "auto"))
		json_object_set_new(o, "auto_engine",
				    json_pack("{s:s, s:i, s:s}", "compiler",
					      "if the store has this module's compiled code, or it "
					      "is at most compile_max bytes (compiled then)",
					      "compile_max", (int)KIS_WASM_AUTO_COMPILE_MAX, "interpreter",
					      "otherwise, while the module is compiled into the cache "
					      "in the background for its next run (tier-up)"));
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* ---- the child ---- */

/* What the child tells the parent, in a shared anonymous page. */
struct child_status {
	volatile int done;       /* the outcome below is written */
	volatile int timed_out;  /* the deadline's timer fired */
	volatile int cancelled;  /* the parent asked to stop (SIGUSR1) */
	volatile pid_t pid;      /* the child, once its handlers are in place */
	int load_failed;         /* the module could not be loaded or linked */
	int code_refused;        /* the cached code was refused; it ran interpreted */
	int ran_compiled;        /* its code was mapped: 1 compiled now, 2 cached */
	volatile int compiling;  /* a compile is under way in kis-helper */
	volatile int compiled;   /* kis-helper compiled in this run (it ran) */
	volatile pid_t helper;   /* kis-helper's pid (the static kis), or 0 */
	struct kis_wasi_outcome out;
};

/* Compiled code from the child to the parent's cache: a shared mapping
 * the child fills once, when the module's code is mapped and before any
 * of it runs, and then unmaps (so the module never reaches it). */
struct code_out {
	size_t cap, len;
	uint8_t data[];
};

struct child_ctx {
	const struct kis_plan *pl;
	int mode; /* KIS_WASM_INTERPRET, _COMPILE or _COMPILE_OR_INTERPRET (auto) */
	const uint8_t *bytes;
	size_t len;
	const uint8_t *cached; /* object code from the store's cache, or NULL */
	size_t cached_len;
	/* that code, linked by the engine (read-write) for the child to seal */
	struct wasm_jit_module *prelinked;
	struct code_out *code; /* where a fresh compile's code goes, or NULL */
	size_t code_map;       /* its mapping's length */
	struct child_status *st;
	struct timespec deadline; /* CLOCK_MONOTONIC */
	int landlock_fd;          /* a ruleset allowing the workspace only, or -1 */
	struct kis_bpf main_filter;   /* the allowlist (jit or not), compiled */
	struct kis_bpf forbid_filter; /* jit: no executable mapping after the code */
	/* cached code: the one filter once that code is linked (no
	 * executable mapping at all from then on), else the two above */
	struct kis_bpf linked_filter;
	bool linked; /* the child linked the cached code before its filter */
	/* the compiler process's limits (compile_spawn): the run's compile
	 * group, or NULL and RLIMIT_DATA (compile_mem) where there is none */
	const struct kis_cgroup *compile_cg;
	/* where the interpreter leaves its profile for tier-up's mixed
	 * stage (jit_tierup.h), a shared mapping; NULL: no tier-up waits */
	struct wasm_prof_out *prof;
};

/* The compile's memory bound: limits.memory_bytes, but never below this.
 * On this tier that limit is the module's linear memory, which may be a
 * few MiB, and LLVM alone takes 10 to 16 MiB before it compiles a function
 * (measured: a one-function module compiles under 16 MiB, a 300-function
 * one does not); the floor is tier-up's base budget (jit_tierup.c), so a
 * run's compile is never bounded tighter than a background one. */
#define COMPILE_MEM_MIN (256ull << 20)

static uint64_t compile_mem(const struct kis_limits *l)
{
	return l->memory_bytes && l->memory_bytes < COMPILE_MEM_MIN ? COMPILE_MEM_MIN
								    : l->memory_bytes;
}

/* In kis-helper between its fork and its exec (jit_remote.c; no
 * allocation): under the run's limits before it runs a line of LLVM. A
 * compile of hostile bytes can take GiBs and minutes (issue 40 item 4:
 * 50,000 functions in 392 KB drove it to 1.1 GB), and it is the run's
 * work: the run's group binds its memory (memory.max = limits.memory_bytes,
 * at least COMPILE_MEM_MIN) and tasks (pids.max = limits.pids), and its
 * CPU counts toward limits.cpu_ms (compile_cpu_used). Where there is no
 * group (an ordinary user's run), RLIMIT_DATA of the same bound binds its
 * heap and private mappings, and its own clock is read for the CPU.
 * RLIMIT_CPU it has from the run already (kis_rlimits_apply, one second
 * past limits.cpu_ms). */
static int compile_spawn(void *ctx)
{
	struct child_ctx *c = ctx;
	c->st->helper = getpid();
	if (c->compile_cg)
		return kis_cgroup_attach(c->compile_cg, 0, NULL);
	uint64_t m = compile_mem(&c->pl->limits);
	struct rlimit r = {m, m};
	return m && setrlimit(RLIMIT_DATA, &r) < 0 ? -1 : 0;
}

static struct kis_wasm_store *g_store;
static struct child_status *g_status;

static timer_t g_timer;

/* The deadline, or the grace after a cancel: interrupt the interpreter at
 * its next check; if it is still running when the grace (CANCEL_GRACE_MS)
 * after a cancel ends, leave (exit_group is all the filter needs). */
static void on_deadline(int sig)
{
	(void)sig;
	if (g_status->cancelled)
		_exit(128 + SIGKILL);
	g_status->timed_out = 1;
	kis_wasm_interrupt(g_store); /* async-signal-safe (kis/wasm.h) */
}

/* The parent's cancel (Ctrl-C): interrupt now, and re-arm the timer for the
 * grace (timer_settime is async-signal-safe, POSIX 2.4.3). */
static void on_cancel(int sig)
{
	(void)sig;
	g_status->cancelled = 1;
	kis_wasm_interrupt(g_store);
	struct itimerspec its = {.it_value = {.tv_nsec = CANCEL_GRACE_MS * 1000000l}};
	timer_settime(g_timer, 0, &its, NULL);
}

/* The syscalls the WASI layer, the interpreter and malloc make once the
 * module runs; anything else kills the process (SIGSYS). No exec, no
 * sockets, no fork, no ptrace, no mount, no open without openat2's
 * RESOLVE_BENEATH (plain open/openat are absent). */
static const char *const allowed[] = {
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "lseek",
	"close", "openat2", "fstat", "newfstatat", "statx", "mkdirat", "unlinkat", "renameat",
	"renameat2", "linkat", "symlinkat", "readlinkat", "utimensat", "fsync", "fdatasync",
	"fadvise64", "fallocate", "ftruncate", "fcntl", "getdents64", "clock_gettime",
	"clock_getres", "clock_nanosleep", "nanosleep", "getrandom", "sched_yield", "ppoll",
	"poll", "exit_group", "exit", "munmap", "mremap", "brk", "madvise", "rt_sigreturn",
	"rt_sigprocmask", "futex", "restart_syscall", "timer_settime",
};

/* The child's first filter, by what runs: the interpreter (no code made),
 * the compiler (FILTER_JIT), or cached code linked before the filter
 * (FILTER_LINKED: its one executable mapping is made already). */
enum filter_kind { FILTER_INTERP, FILTER_JIT, FILTER_LINKED };

/* jit: the compiler's code must become executable once: mprotect to
 * exactly read-execute is allowed too (never write and execute together),
 * until forbid_exec() stacks a filter that refuses any executable mapping
 * once the module's code is mapped (kis_wasm_store_on_compiled). Linked
 * cached code needs neither: that filter holds from the start, in one
 * seccomp(2) load instead of two (each ~0.25 ms here: the kernel's BPF
 * JIT makes its image executable, a TLB shootdown under this hypervisor),
 * and with no mprotect to executable, no sysinfo (LLVM's) and no seccomp
 * call allowed at all: what the two filters stacked allow, less those. */
static scmp_filter_ctx make_main_filter(void *arg)
{
	enum filter_kind kind = (enum filter_kind)(uintptr_t)arg;
	bool jit = kind == FILTER_JIT;
	bool fault_handler = kind != FILTER_INTERP;
	/* memory never executable (the interpreter makes no code), but the
	 * compiler's code may become read-execute once (below) */
	scmp_filter_ctx ctx =
		kis_seccomp_allowlist_new(SCMP_ACT_KILL_PROCESS, allowed, ARRAY_SIZE(allowed));
	if (!ctx)
		return NULL;
	int r = 0;
	if (jit)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				     SCMP_A2(SCMP_CMP_EQ, PROT_READ | PROT_EXEC));
	/* LLVM reads the machine's memory size (sysinfo) to size its tables:
	 * counts only, no file or process of the host */
	if (r == 0 && jit)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sysinfo), 0);
	/* compiled code's fault handler (src/wasm/jit_rt.c) hands a fault it
	 * does not own back to the default action, by resetting these two
	 * dispositions only: a crash stays a crash, not a seccomp kill */
	if (r == 0 && fault_handler)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), 1,
				     SCMP_A0(SCMP_CMP_EQ, SIGSEGV));
	if (r == 0 && fault_handler)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), 1,
				     SCMP_A0(SCMP_CMP_EQ, SIGBUS));
	if (r == 0 && jit)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(seccomp), 1,
				     SCMP_A0(SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER));
	if (r < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static _Noreturn void child_fail(struct child_status *st, const char *what)
{
	st->load_failed = 1;
	snprintf(st->out.message, sizeof(st->out.message), "%s: %s", what, strerror(errno));
	st->done = 1;
	_exit(126);
}

/* The second filter, stacked on the first once the compiled code is
 * mapped: from here no mapping may become executable (the kernel applies
 * every filter and takes the strictest answer, seccomp(2)). Built before
 * the first filter is loaded, so that loading it takes one seccomp(2) call
 * (the first filter allows that call in jit mode: a new filter can only
 * take rights away) and no prctl (no_new_privs is set already). */
static scmp_filter_ctx make_forbid_exec(void *arg)
{
	(void)arg;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return NULL;
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(mmap), 1,
				     SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(mprotect), 1,
				     SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
	/* and no third filter: nothing after this needs one */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(seccomp), 0);
	if (r < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

/* Both programs are compiled by libseccomp once and then read from the
 * cache (backends/common.c: the compile cost ~2 ms of every run in the
 * child, on its way to the module), prepared in the parent before the
 * fork, and loaded in the child by seccomp(2) itself: SET_MODE_FILTER with
 * no flags, after PR_SET_NO_NEW_PRIVS, which is what seccomp_load does for
 * these contexts (libseccomp 2.5: no TSYNC, LOG or SPEC_ALLOW asked). */
static int load_bpf(const struct kis_bpf *b)
{
	struct sock_fprog prog = {.len = b->len, .filter = b->prog};
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0u, &prog);
}

static int load_seccomp(const struct kis_bpf *main_filter)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return load_bpf(main_filter);
}

static void forbid_exec(void *user, const uint8_t *obj, size_t len, int from_cache)
{
	struct child_ctx *c = user;
	struct child_status *st = c->st;
	if (!obj && !from_cache && c->cached)
		st->code_refused = 1; /* auto: interpreted instead */
	/* the code is mapped: cached code comes with no object kept
	 * (jit_load.c), a fresh compile with its object */
	if (obj || from_cache)
		st->ran_compiled = from_cache ? 2 : 1;
	st->compiling = 0;
	if (c->code) {
		if (obj && !from_cache && len <= c->code->cap) {
			memcpy(c->code->data, obj, len);
			c->code->len = len;
		}
		munmap(c->code, c->code_map);
		c->code = NULL;
	}
	/* linked before the filter: that filter forbids exec mappings and
	 * any further filter already */
	if (!c->linked && load_bpf(&c->forbid_filter) < 0)
		child_fail(st, "cannot load the second seccomp filter");
}

static int child_main(void *vctx, struct kis_error **err)
{
	struct child_ctx *c = vctx;
	struct child_status *st = c->st;
	const struct kis_plan *pl = c->pl;
	/* Past limits.file_bytes a write fails with EFBIG (FBIG to the module)
	 * rather than killing the interpreter. */
	signal(SIGXFSZ, SIG_IGN);
	/* Defence in depth under the seccomp filter (which cannot look inside
	 * openat2's struct open_how): no capabilities, and Landlock lets the
	 * process reach the workspace's files only. */
	struct kis_error *e = NULL;
	/* the compiler's plugin and LLVM, read from /usr/lib before Landlock
	 * leaves the workspace only; not for cached code, which links
	 * without them (src/wasm/jit_elf.c; the parent checked it links) */
	bool jit = c->mode != KIS_WASM_INTERPRET;
	/* the compiler process under the run's limits (compile_spawn); its
	 * start (LLVM loaded) and the compile are the compile (explain) */
	if (jit && !c->cached) {
		wasm_jit_set_spawn_hook(compile_spawn, c);
		st->compiling = 1;
	}
	/* auto: a compiler that does not start leaves the run interpreted */
	if (jit && !c->cached && kis_wasm_compiler_load(&e) < 0 &&
	    c->mode == KIS_WASM_COMPILE) {
		snprintf(st->out.message, sizeof(st->out.message), "%s", e->message);
		kis_error_free(e);
		st->load_failed = 1;
		st->done = 1;
		_exit(126);
	}
	kis_error_free(e);
	e = NULL;
	if (kis_drop_caps(&e) < 0 ||
	    (c->landlock_fd >= 0 && kis_landlock_enforce(c->landlock_fd, &e) < 0)) {
		errno = e ? e->sys_errno : 0;
		kis_error_free(e);
		child_fail(st, "cannot confine the interpreter");
	}
	/* The mounts' directories to 4.. (the guest's fds 4.., after the
	 * workspace's 3: the plan refuses mounts without it), then everything
	 * else goes, the supervisor's report socket among them: its EOF is how
	 * the parent learns that the command started, as an exec would have
	 * closed it. */
	/* the compiler's socket when it runs in a process of its own
	 * (src/wasm/jit_remote.c, the static kis): kept, above them */
	int chan = wasm_jit_channel_fd();
	unsigned first = pl->preopen ? 4u + (unsigned)pl->n_mounts : 3u;
	if (chan >= 0 && (unsigned)chan < first) {
		errno = EMFILE;
		child_fail(st, "limits.open_files leaves no room for the compiler's socket");
	}
	for (size_t i = 0; i < pl->n_mounts; i++)
		if (dup2(pl->mounts[i].fd, 4 + (int)i) < 0)
			child_fail(st, "cannot pass a mount's directory");
	if (chan < 0 || (unsigned)chan < first) {
		if (syscall(SYS_close_range, first, ~0u, 0u) < 0)
			for (int fd = (int)first; fd < 1024; fd++)
				close(fd);
	} else {
		/* [first, chan) and (chan, ~0] */
		if ((unsigned)chan > first && syscall(SYS_close_range, first, (unsigned)chan - 1, 0u) < 0)
			for (int fd = (int)first; fd < chan; fd++)
				close(fd);
		if (syscall(SYS_close_range, (unsigned)chan + 1, ~0u, 0u) < 0)
			for (int fd = chan + 1; fd < 1024; fd++)
				close(fd);
	}
	struct kis_wasi_preopen pre[KIS_MOUNTS_MAX];
	for (size_t i = 0; i < pl->n_mounts; i++)
		pre[i] = (struct kis_wasi_preopen){.fd = 4 + (int)i, .name = pl->mounts[i].target,
						   .ro = pl->mounts[i].ro};
	g_status = st;
	g_store = kis_wasm_store_new();
	uint64_t nofile = pl->limits.open_files ? pl->limits.open_files : 1024;
	struct kis_wasi_config cfg = {
		.argv = pl->argv, .envp = pl->envp, .stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2,
		.preopen_fd = pl->preopen ? 3 : -1, .preopen_name = "/", .max_fds = nofile > 4096 ? 4096 : (uint32_t)nofile,
		.extra = pre, .n_extra = pl->n_mounts,
	};
	struct kis_wasi *w = g_store ? kis_wasi_new(&cfg) : NULL;
	if (!w)
		child_fail(st, "cannot set up WASI");
	/* The deadline interrupts the interpreter at its next check; the
	 * supervisor's SIGKILL at the same deadline is only the backstop. No
	 * SA_RESTART: a blocking read or poll returns EINTR to the module. */
	struct sigaction sa = {.sa_handler = on_deadline}, sc = {.sa_handler = on_cancel};
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	sigemptyset(&sc.sa_mask);
	sigaddset(&sc.sa_mask, SIGALRM);
	struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM};
	struct itimerspec its = {.it_value = c->deadline};
	if (sigaction(SIGALRM, &sa, NULL) < 0 || sigaction(SIGUSR1, &sc, NULL) < 0 ||
	    timer_create(CLOCK_MONOTONIC, &sev, &g_timer) < 0 ||
	    timer_settime(g_timer, TIMER_ABSTIME, &its, NULL) < 0)
		child_fail(st, "cannot arm the deadline");
	st->pid = getpid(); /* signals may come now: the handlers are in place */
	if (c->prof)
		wasm_store_profile_to(g_store, c->prof);
	if (jit) {
		struct kis_error *je = NULL;
		/* first: with cached code the store loads no compiler */
		if (c->cached)
			kis_wasm_store_use_cached_code(g_store, c->cached, c->cached_len);
		/* cached code linked now, confined by capabilities and
		 * Landlock but before seccomp: the parent linked the same
		 * bytes in a check already (wasm_code_cache_get), so this
		 * parses nothing the engine has not; the module's own bytes
		 * are still decoded under seccomp only. Where it fails, the
		 * code links at instantiation under the two filters. */
		c->linked = c->cached && c->linked_filter.prog &&
			    ((c->prelinked && wasm_store_use_prelinked(g_store, c->prelinked) == 0) ||
			     kis_wasm_store_link_cached_code(g_store) == 0);
		if (kis_wasm_store_use_compiler(g_store, c->mode, &je) < 0) {
			kis_error_free(je);
			errno = ENOSYS;
			child_fail(st, "cannot start the wasm compiler");
		}
		kis_wasm_store_on_compiled(g_store, forbid_exec, c);
	}
	if (load_seccomp(c->linked ? &c->linked_filter : &c->main_filter) < 0)
		child_fail(st, "cannot load the seccomp filter");
	/* From here on the module's bytes are only ever seen under seccomp.
	 * Its compile (a fresh one) happens at instantiation, in kis-helper:
	 * said so, for the result's detail (explain) */
	st->compiling = jit && !c->cached && wasm_jit_loaded();
	st->compiled = st->compiling && st->helper;
	int r = kis_wasi_run_module(w, g_store, c->bytes, c->len, pl->limits.memory_bytes, &st->out);
	st->compiling = 0;
	st->load_failed = r < 0;
	st->done = 1;
	if (r < 0)
		_exit(126);
	_exit(st->out.exited ? st->out.exit_code & 0xff : TRAP_EXIT_CODE);
	(void)err;
}

/* ---- the parent ---- */

/* Cancel (Ctrl-C) goes to the interpreter first: SIGUSR1 makes the child
 * interrupt the module, and it leaves by itself CANCEL_GRACE_MS later if the
 * module has not stopped. Before the child has its handlers, the
 * supervisor's own cancel (SIGKILL) is used. */
static int on_cancel_fd(void *ctx, int fd)
{
	struct child_status *st = ctx;
	(void)fd;
	pid_t pid = st->pid;
	if (pid <= 0 || kill(pid, SIGUSR1) < 0)
		return -1;
	return 1; /* stop watching: the child ends itself */
}

/* The module's bytes, a private copy (never a mapping of the file: a
 * writer of the workspace could change what the child decodes after the
 * cache compared it), in a mapping of its own made present in one call:
 * a page first written costs a fault each here (~12 us under this
 * hypervisor; 42 KB: 10), a populated one ~1 us. */
struct module_buf {
	uint8_t *p;
	size_t map;
};

static void module_buf_release(struct module_buf *b)
{
	if (b->p)
		munmap(b->p, b->map);
}


static int read_module(int wsfd, const char *rel, struct module_buf *buf, size_t *len, int *sys)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, wsfd, rel, &how, sizeof(how));
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		*sys = errno == EXDEV ? EACCES : errno;
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < 8 || (uint64_t)st.st_size > MODULE_MAX) {
		*sys = ENOEXEC;
		return -1;
	}
	/* huge pages for a large one (kis_map_populated): read, hashed and
	 * compared here, then read again by the child after the fork */
	size_t want = (size_t)st.st_size, map;
	uint8_t *b = kis_map_populated(want, &map);
	if (b == MAP_FAILED)
		b = NULL;
	size_t n = 0;
	while (b && n < want) {
		ssize_t r = RETRY_EINTR(read(fd, b + n, want - n));
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (!b || n < 8 || !kis_wasi_is_module(b, n)) {
		if (b)
			munmap(b, map);
		*sys = b ? ENOEXEC : ENOMEM;
		return -1;
	}
	buf->p = b;
	buf->map = map;
	*len = n;
	return 0;
}

static void set_detail(struct kis_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_detail(struct kis_result *res, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *d = NULL;
	if (vasprintf(&d, fmt, ap) < 0)
		d = NULL;
	va_end(ap);
	free(res->detail);
	res->detail = d;
}

/* Turn the child's account into the result. The supervisor's own verdicts
 * (its SIGKILL at the deadline, cpu, output, cancel) stand when the child
 * did not finish first. */
static void explain(const struct kis_plan *pl, const struct child_status *st,
		    struct kis_result *res)
{
	const struct kis_wasi_outcome *o = &st->out;
	if (st->done)
		res->usage.linear_memory_bytes = o->memory_bytes; /* it never shrinks: the peak */
	/* what was running: the compile (in kis-helper), the module's
	 * compiled code, or the interpreter (issue 40 item 4: a compile
	 * killed at the deadline was called "the interpreter") */
	const char *who = st->compiling ? "the compile was killed before the module's code "
					  "ran" :
			  st->ran_compiled ? "the module's compiled code was killed" :
					     "the interpreter was killed";
	if (res->reason == KIS_REASON_SIGNALED && res->signal == SIGSYS) {
		set_detail(res, "%s made a system call outside its seccomp allowlist",
			   st->ran_compiled ? "the module's compiled code" : "the interpreter");
		return;
	}
	if (res->reason == KIS_REASON_TIMEOUT)
		set_detail(res, "wall clock passed limits.wall_ms (%llu ms); %s",
			   (unsigned long long)pl->limits.wall_ms, who);
	if (res->reason == KIS_REASON_CPU_LIMIT)
		set_detail(res, "cpu time passed limits.cpu_ms (%llu ms)%s; %s",
			   (unsigned long long)pl->limits.cpu_ms,
			   st->compiled ? ", the compiler's (kis-helper) time counted" : "", who);
	if (res->reason == KIS_REASON_CANCELLED)
		set_detail(res, "the run was cancelled");
	if (res->reason == KIS_REASON_EXITED && !st->done && st->cancelled) {
		res->reason = KIS_REASON_CANCELLED; /* the grace ran out */
		res->exit_code = 128 + SIGKILL;
		set_detail(res, "the run was cancelled");
		return;
	}
	if (res->reason != KIS_REASON_EXITED || !st->done)
		return;
	if (st->load_failed) {
		res->reason = KIS_REASON_SETUP_FAILED;
		res->exit_code = 126;
		/* an ordinary user's compile has RLIMIT_DATA for its bound
		 * (compile_spawn), past which LLVM aborts like any crash: said
		 * as what it may be, not as a verdict */
		bool bound = st->compiled && geteuid() != 0 && pl->limits.memory_bytes &&
			     strstr(o->message, "compiler process (kis-helper) ended");
		set_detail(res, "cannot run module '%s': %s%s", pl->module, o->message,
			   bound ? " (with no cgroup, its memory is bounded by RLIMIT_DATA = "
				   "limits.memory_bytes, at least 256 MiB: a compile past it "
				   "ends so)" : "");
		return;
	}
	/* After a cancel or the deadline, however the module then ended (an
	 * interrupt, or its own exit after a blocking call returned EINTR),
	 * that is why it ended. */
	if (st->cancelled) {
		res->reason = KIS_REASON_CANCELLED;
		res->exit_code = 128 + SIGKILL;
		set_detail(res, "the run was cancelled; the module stopped at its interrupt check");
		return;
	}
	if (st->timed_out) {
		res->reason = KIS_REASON_TIMEOUT;
		res->exit_code = 128 + SIGKILL;
		set_detail(res, "wall clock passed limits.wall_ms (%llu ms); the module stopped at its interrupt check",
			   (unsigned long long)pl->limits.wall_ms);
		return;
	}
	/* The cap caused the end when the module stopped abnormally with its
	 * memory up against the cap (a refused memory.grow leaves it there:
	 * within 1 MiB, or any growth from the cap). */
	bool abnormal = !o->exited || o->exit_code != 0;
	bool at_cap = o->memory_cap && o->memory_bytes + (1u << 20) >= o->memory_cap;
	if (o->exited && !(abnormal && at_cap))
		return; /* exited with its own code */
	if (abnormal && at_cap) {
		res->reason = KIS_REASON_MEMORY_LIMIT;
		set_detail(res, "linear memory reached limits.memory_bytes (%llu bytes)%s%s",
			   (unsigned long long)o->memory_cap, o->exited ? "" : "; then: ",
			   o->exited ? "" : kis_wasm_trap_message(o->trap));
		if (!o->exited)
			res->exit_code = TRAP_EXIT_CODE;
		return;
	}
	res->reason = KIS_REASON_TRAPPED;
	res->exit_code = TRAP_EXIT_CODE;
	if (o->trap == KIS_WASM_TRAP_HOST && o->message[0])
		set_detail(res, "%s", o->message);
	else
		set_detail(res, "trap: %s", kis_wasm_trap_message(o->trap));
}

/* Cached object code, released however wasm_run returns. */
struct cached_code {
	uint8_t *obj;
	size_t len;
	struct wasm_jit_module *prelinked;
};

static void cached_release(struct cached_code *c)
{
	wasm_code_cache_free(c->obj, c->len);
	wasm_jit_elf_free(c->prelinked);
}

/* ---- the compiler process's share of the run (compile_spawn) ---- */

struct compile_group {
	struct kis_cgroup *cg;     /* kis-helper's group, or NULL */
	int cpu_fd;                /* its CPU accounting, or -1 */
	const struct child_status *st;
	uint64_t memory_bytes, pids;
	pid_t child;               /* the module's process (attach) */
	clockid_t child_clk;
	bool have_child_clk;
	uint64_t helper_ms;        /* the compiler's CPU, the last seen */
};

static void compile_group_close(struct compile_group *g)
{
	kis_closep(&g->cpu_fd);
	if (g->cg)
		kis_cgroup_destroy(g->cg, NULL);
	g->cg = NULL;
}

/* The compiler's CPU so far: its group's accounting, or (no group) its
 * own clock while it lives (clock_getcpuclockid(3) of any process). */
static uint64_t compile_cpu_ms(struct compile_group *g)
{
	uint64_t ms = 0;
	if (g->cpu_fd >= 0) {
		if (kis_cpuacct_read_ms(g->cpu_fd, &ms) == 0 && ms > g->helper_ms)
			g->helper_ms = ms;
		return g->helper_ms;
	}
	clockid_t clk;
	struct timespec ts;
	pid_t h = g->st->helper;
	if (h > 0 && clock_getcpuclockid(h, &clk) == 0 && clock_gettime(clk, &ts) == 0) {
		ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		if (ms > g->helper_ms)
			g->helper_ms = ms;
	}
	return g->helper_ms;
}

static int compile_attach(void *ctx, pid_t pid, struct kis_error **err)
{
	struct compile_group *g = ctx;
	(void)err;
	g->child = pid;
	g->have_child_clk = clock_getcpuclockid(pid, &g->child_clk) == 0;
	return 0;
}

/* limits.cpu_ms is the run's total: the module's process and its
 * compiler together (the supervisor takes the larger of this and the
 * child's own clock, so this is the sum). */
static int compile_cpu_used(void *ctx, uint64_t *ms)
{
	struct compile_group *g = ctx;
	struct timespec ts;
	uint64_t child = 0;
	if (g->have_child_clk && clock_gettime(g->child_clk, &ts) == 0)
		child = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	*ms = child + compile_cpu_ms(g);
	return 0;
}

static int compile_explain(void *ctx, enum kis_reason *reason, char **detail)
{
	struct compile_group *g = ctx;
	struct kis_cgroup_events ev;
	/* only when the compile's end ended the run: under auto a compile
	 * that failed leaves the run interpreted, and the module's own exit
	 * code is then its own */
	if (!g->cg || (g->st->done && !g->st->load_failed) ||
	    kis_cgroup_read_events(g->cg, &ev, NULL) < 0)
		return 0;
	char buf[200];
	*reason = kis_limit_verdict(ev.oom_kills, ev.pids_max);
	if (*reason == KIS_REASON_MEMORY_LIMIT)
		snprintf(buf, sizeof(buf),
			 "the compiler (kis-helper) passed its memory bound (%llu bytes: "
			 "limits.memory_bytes, at least 256 MiB) compiling the module",
			 (unsigned long long)g->memory_bytes);
	else if (*reason == KIS_REASON_PIDS_LIMIT)
		snprintf(buf, sizeof(buf), "the compiler (kis-helper) met limits.pids (%llu)",
			 (unsigned long long)g->pids);
	else
		return 0;
	*detail = strdup(buf);
	return 1;
}

static void compile_kill(void *ctx)
{
	struct compile_group *g = ctx;
	if (g->cg)
		kis_cgroup_kill(g->cg, NULL);
}

static void compile_events(void *ctx, struct kis_result *res)
{
	struct compile_group *g = ctx;
	struct kis_cgroup_events ev;
	if (!g->cg || kis_cgroup_read_events(g->cg, &ev, NULL) < 0)
		return;
	res->limit_events.counted = true;
	res->limit_events.oom_kills = ev.oom_kills;
	res->limit_events.forks_refused = ev.pids_max;
}

/* The tick: the compiler's clock read while it lives (no group: it is
 * gone once it exits) */
static void compile_tick(void *ctx, pid_t command)
{
	(void)command;
	compile_cpu_ms(ctx);
}

/* A group of its own for the compiler of this run (not the module's
 * process: its limits.memory_bytes is its linear memory's cap, checked by
 * the engine, and the cgroup's would also count the engine's own pages).
 * Named after the run, with the engine's pid (two execs of a session may
 * compile at once). None where this user may make no group: then
 * compile_spawn's rlimit. */
static void compile_group_open(struct compile_group *g, const struct kis_plan *pl)
{
	const char *id = pl->sandbox_id ? pl->sandbox_id : "s-wasm";
	char name[96];
	bool ok = strlen(id) < 64;
	for (const char *p = id; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-';
	snprintf(name, sizeof(name), "%s-compile-%ld", ok ? id : "s-wasm", (long)getpid());
	/* only the group's own rows (KIS_CGROUP_LIMITS) are read from it */
	struct kis_limits cl = {.memory_bytes = compile_mem(&pl->limits), .pids = pl->limits.pids};
	struct kis_error *e = NULL;
	if (geteuid() == 0 && kis_cgroup_create(name, &cl, 0, &g->cg, &e) == 0)
		g->cpu_fd = kis_cgroup_cpu_fd(g->cg);
	kis_error_free(e);
}

/* After the run: the compiler's CPU in the run's usage (the child's
 * rusage never has it: the child does not reap kis-helper, which dies with
 * it by PR_SET_PDEATHSIG), and the reason when the compile ended at a
 * limit: a compiler killed by the group's OOM killer (memory.max), or by
 * its RLIMIT_CPU / RLIMIT_DATA, leaves "the compiler process ended" in a
 * setup failure, which is not why the run ended. */
static void compile_account(struct compile_group *g, const struct kis_plan *pl,
			    const struct child_status *st, struct kis_result *res)
{
	uint64_t ms = compile_cpu_ms(g);
	res->usage.user_ms += ms; /* LLVM's time is nearly all user time */
	if (!st->compiled)
		return;
	bool ended = st->done && st->load_failed &&
		     strstr(st->out.message, "compiler process (kis-helper) ended");
	if (res->reason == KIS_REASON_MEMORY_LIMIT || res->reason == KIS_REASON_PIDS_LIMIT) {
		res->exit_code = 128 + SIGKILL; /* the group's kill: a limit's verdict */
		return;
	}
	if (ended && pl->limits.cpu_ms && res->usage.user_ms + res->usage.sys_ms >= pl->limits.cpu_ms) {
		res->reason = KIS_REASON_CPU_LIMIT;
		res->exit_code = 128 + SIGKILL;
		return; /* explain() writes the detail */
	}
	/* no group (an ordinary user's run): RLIMIT_DATA ends an allocation
	 * of LLVM's, which then aborts; nothing tells that from another
	 * crash, so it stays a setup failure (docs/wasm.md says the bound) */
}

/* Tier-up (src/wasm/jit_tierup.c says who does what): claim the module's
 * compile and start `kis-helper wasm-tierup` detached, the claim (a locked
 * file holding the module) as its fd 3, its budget in its arguments. It
 * outlives the run by design: a short run of a large module is the case
 * it is for (docs/wasm.md, "Tier-up"); its own budget bounds it. prof_fd
 * (or -1): its stdin, the pipe the run's profile comes down at its end
 * (prof_send). */
static enum wasm_tierup tierup_start(const char *root, const uint8_t *mod, size_t len,
				     bool fast_first, int prof_fd)
{
	char helper[PATH_MAX], name[32];
	if (!root || kis_helper_path(helper, sizeof(helper)) < 0 ||
	    wasm_code_cache_name(mod, len, name) < 0)
		return WASM_TIERUP_NONE;
	int claim = -1;
	int c = wasm_code_cache_claim(root, mod, len, &claim);
	if (c != 0)
		return c == 1 ? WASM_TIERUP_RUNNING : WASM_TIERUP_NONE;
	struct wasm_tierup_budget b;
	wasm_tierup_budget(len, &b);
	char mem[24], cpu[12], wall[12];
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)b.mem_bytes);
	snprintf(cpu, sizeof(cpu), "%u", b.cpu_s);
	snprintf(wall, sizeof(wall), "%u", b.wall_s);
	char *argv[] = {"kis-helper", "wasm-tierup", (char *)root, name, mem, cpu, wall,
			fast_first ? "fast" : "opt", NULL};
	char *envp[] = {NULL};
	struct kis_spawn sp = {
		.argv = argv, .envp = envp, .stdin_fd = prof_fd, .pass_fd3 = true, .fd3 = claim,
		.exec_path = helper,
	};
	pid_t pid;
	struct kis_error *e = NULL;
	int r = kis_spawn_detached(&sp, &pid, &e);
	kis_error_free(e);
	if (r < 0) {
		wasm_code_cache_unclaim(root, name, claim);
		return WASM_TIERUP_NONE;
	}
	/* the helper holds the claim now: the same open file, as its fd 3 */
	close(claim);
	return WASM_TIERUP_STARTED;
}

/* The profile's way from the run to tier-up (jit_tierup.h): a shared
 * mapping the child's interpreter fills at the run's end, and a pipe, its
 * read end the background compile's stdin; the parent writes what the
 * child left there once the child is gone, and closes. The helper takes
 * end of file without a profile (a run killed before it wrote one, an
 * engine that died) as "none": it then compiles at the optimising tier. */
struct prof_pipe {
	struct wasm_prof_out *out;
	size_t map;
	uint32_t cap; /* the parent's own copy: the child may write out->cap */
	int wr;
};

static void prof_close(struct prof_pipe *p)
{
	if (p->out)
		munmap(p->out, p->map);
	p->out = NULL;
	kis_closep(&p->wr);
	p->wr = -1;
}

/* The read end, or -1 (no profile then: the helper reads /dev/null). */
static int prof_open(struct prof_pipe *p, size_t len)
{
	uint32_t cap = WASM_PROF_CAP(len);
	p->map = sizeof(struct wasm_prof_out) + (size_t)cap * 4;
	p->out = mmap(NULL, p->map, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE,
		      -1, 0);
	int fds[2];
	if (p->out == MAP_FAILED) {
		p->out = NULL;
		return -1;
	}
	if (pipe2(fds, O_CLOEXEC) < 0) {
		prof_close(p);
		return -1;
	}
	p->out->cap = p->cap = cap;
	p->wr = fds[1];
	return fds[0];
}

/* What the child wrote, to the pipe: never blocking this run's end (the
 * helper may still be in its fast stage), so the pipe is made large
 * enough first; a profile that does not fit is not sent. */
static void prof_send(struct prof_pipe *p)
{
	uint32_t n = p->out ? p->out->n : 0;
	if (p->wr < 0 || n == 0 || n > p->cap)
		return;
	struct wasm_jit_frame f = {.magic = WASM_JIT_REMOTE_MAGIC, .word = 0, .len = (uint64_t)n * 4};
	size_t need = sizeof(f) + (size_t)n * 4;
	if (need > 65536 && (need > INT32_MAX || fcntl(p->wr, F_SETPIPE_SZ, (int)need) < 0))
		return;
	if (fcntl(p->wr, F_SETFL, O_NONBLOCK) < 0)
		return;
	struct iovec iov[2] = {{&f, sizeof(f)}, {p->out->c, (size_t)n * 4}};
	(void)!writev(p->wr, iov, 2); /* a short write: the helper sees no profile */
}

static int wasm_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	if (!pl->workspace)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "the wasm plan has no workspace");
	_cleanup_close_ int wsfd = open(pl->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wsfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the workspace '%s'",
				     pl->workspace);
	_cleanup_(module_buf_release) struct module_buf mbuf = {NULL, 0};
	size_t len = 0;
	int sys = 0;
	if (read_module(wsfd, pl->module, &mbuf, &len, &sys) < 0) {
		res->reason = KIS_REASON_SETUP_FAILED;
		res->exit_code = sys == ENOENT ? 127 : 126;
		if (sys == ENOENT)
			set_detail(res, "module not found in the workspace: '%s'", pl->module);
		else if (sys == ENOEXEC)
			set_detail(res, "'%s' is not a WebAssembly module", pl->module);
		else
			set_detail(res, "cannot read module '%s': %s", pl->module, strerror(sys));
		return 0;
	}
	const uint8_t *bytes = mbuf.p;
	struct child_status *st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (st == MAP_FAILED)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot map the status page");
	/* Each mount's directory: the store's own path opened with no symlink
	 * on the way (openat2(2) RESOLVE_NO_SYMLINKS), above MOUNT_FD_MIN */
	for (size_t i = 0; i < pl->n_mounts; i++) {
		struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
		int fd = (int)syscall(SYS_openat2, AT_FDCWD, pl->mounts[i].path, &how, sizeof(how));
		pl->mounts[i].fd = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, MOUNT_FD_MIN);
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (pl->mounts[i].fd < 0) {
			munmap(st, sizeof(*st));
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, e,
					     "mounts[%zu]: cannot open its source", i);
		}
	}
	struct child_ctx cc = {.pl = pl, .bytes = bytes, .len = len, .st = st, .landlock_fd = -1};
	/* The compiler's cache: code made for this module before, and room
	 * for what a compile makes now (pages cost only once written). */
	_cleanup_(cached_release) struct cached_code cached = {NULL, 0, NULL};
	struct kis_store *store = NULL;
	const char *root = NULL;
	bool is_auto = !strcmp(pl->engine, "auto");
	enum wasm_tierup tier_up = WASM_TIERUP_NONE;
	unsigned cached_tier = WASM_JIT_TIER_OPT;
	_cleanup_(prof_close) struct prof_pipe prof = {.wr = -1};
	cc.mode = !strcmp(pl->engine, "compiler") ? KIS_WASM_COMPILE : KIS_WASM_INTERPRET;
	if (cc.mode == KIS_WASM_COMPILE || is_auto) {
		/* the engine opened (and swept) this store already and hands
		 * its root on; opened here (without a sweep) only for a caller
		 * that gave none. A second open cost a cached run ~0.1 ms (its
		 * mkdirs, readlinks, stats and opens), a second sweep ~1 ms. */
		root = pl->store_dir;
		if (!root) {
			struct kis_error *se = NULL;
			if (kis_store_open_again(pl->store_root, &store, &se) == 0)
				root = kis_store_root(store);
			kis_error_free(se);
		}
		/* the engine's check of the cached code is its link, left
		 * read-write here and sealed in the child (a fork: the same
		 * addresses), which then links nothing: linking twice, each
		 * copying the object's sections, was a sixth of a cached
		 * SQLite start */
		if (root && wasm_code_cache_get_linked(root, bytes, len, &cached.obj, &cached.len,
						       &cached_tier, &cached.prelinked) == 0) {
			cc.cached = cached.obj;
			cc.cached_len = cached.len;
			cc.prelinked = cached.prelinked;
		}
		/* auto: compiled when that costs no compile (cached) or a
		 * short one; a module that fails to compile runs interpreted */
		if (is_auto)
			cc.mode = cc.cached || len <= KIS_WASM_AUTO_COMPILE_MAX
					  ? KIS_WASM_COMPILE_OR_INTERPRET
					  : KIS_WASM_INTERPRET;
		/* and a larger one, interpreted now, compiled meanwhile for
		 * its next run (tier-up) */
		if (is_auto && cc.mode == KIS_WASM_INTERPRET && kis_wasm_compiler_available()) {
			/* with the pipe and the mapping its profile goes by
			 * (prof_open): the mixed stage waits for it */
			int rd = prof_open(&prof, len);
			tier_up = tierup_start(root, bytes, len, true, rd);
			if (rd >= 0)
				close(rd);
			if (tier_up == WASM_TIERUP_STARTED)
				cc.prof = prof.out;
			else
				prof_close(&prof);
		}
		/* and cached code of the fast tier, linked now, is compiled at
		 * the optimising one for the next run (unless that compile is
		 * under way: then the claim is held) */
		else if (is_auto && cc.cached && cached_tier == WASM_JIT_TIER_FAST &&
			 kis_wasm_compiler_available())
			tier_up = tierup_start(root, bytes, len, false, -1);
	}
	if (cc.mode != KIS_WASM_INTERPRET) {
		cc.code_map = len > (16u << 20) ? (1u << 30) : 64 * len + (16u << 20);
		cc.code = root && !cc.cached
				  ? mmap(NULL, cc.code_map, PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
				  : NULL;
		if (cc.code == MAP_FAILED)
			cc.code = NULL;
		if (cc.code)
			cc.code->cap = cc.code_map - sizeof(*cc.code);
	}
	/* Landlock where the kernel has it (the mounts read-only or
	 * read-write as asked); without it the seccomp filter, openat2
	 * beneath each preopen and the WASI rights still hold. */
	const char *ll_ro[KIS_MOUNTS_MAX + 1] = {0}, *ll_rw[KIS_MOUNTS_MAX + 1] = {0};
	for (size_t i = 0, r = 0, w = 0; i < pl->n_mounts; i++) {
		if (pl->mounts[i].ro)
			ll_ro[r++] = pl->mounts[i].path;
		else
			ll_rw[w++] = pl->mounts[i].path;
	}
	if (kis_landlock_abi() > 0) {
		/* Without a preopen the process needs no file at all; with
		 * one, only its directories: it execs nothing and has read the
		 * compiler's plugin before (bare: no /usr, no /etc, which also
		 * spared ~560 system calls of a walk of /etc per run) */
		struct kis_landlock_opts lo = {.workspace = pl->preopen ? pl->workspace : NULL,
					       .net = KIS_NET_OFF, .extra_ro = ll_ro,
					       .extra_rw = ll_rw, .bare = true};
		struct kis_landlock_report rep;
		struct kis_error *e = NULL;
		if (kis_landlock_prepare(&lo, &cc.landlock_fd, &rep, &e) < 0)
			cc.landlock_fd = -1;
		kis_error_free(e);
	}
	/* The child's seccomp programs, compiled once per build of kis,
	 * libseccomp and kernel (see load_bpf) */
	char key[200], name[300];
	bool keyed = kis_cache_key(key, sizeof(key)) == 0;
	bool jit = cc.mode != KIS_WASM_INTERPRET;
	snprintf(name, sizeof(name), "wasm-%s-%s.bpf", jit ? "jit" : "interp", keyed ? key : "");
	int prepared = kis_bpf_cached(keyed ? name : "", make_main_filter,
				      (void *)(uintptr_t)(jit ? FILTER_JIT : FILTER_INTERP),
				      &cc.main_filter, err);
	snprintf(name, sizeof(name), "wasm-forbid-exec-%s.bpf", keyed ? key : "");
	if (prepared == 0 && jit)
		prepared = kis_bpf_cached(keyed ? name : "", make_forbid_exec, NULL,
					  &cc.forbid_filter, err);
	snprintf(name, sizeof(name), "wasm-jit-linked-%s.bpf", keyed ? key : "");
	if (prepared == 0 && jit && cc.cached)
		prepared = kis_bpf_cached(keyed ? name : "", make_main_filter,
					  (void *)(uintptr_t)FILTER_LINKED, &cc.linked_filter, err);
	/* The interpreter's interrupt ends the run at the deadline; the
	 * supervisor's SIGKILL comes BACKSTOP_MS later, only for an
	 * interpreter that failed to stop. */
	uint64_t wall = pl->limits.wall_ms;
	clock_gettime(CLOCK_MONOTONIC, &cc.deadline);
	uint64_t ns = (uint64_t)cc.deadline.tv_nsec + (wall % 1000) * 1000000ull;
	cc.deadline.tv_sec += (time_t)(wall / 1000 + ns / 1000000000ull);
	cc.deadline.tv_nsec = (long)(ns % 1000000000ull);

	/* A fresh compile is the run's too: its compiler process under the
	 * run's limits (compile_spawn, compile_group_open) */
	_cleanup_(compile_group_close) struct compile_group cg = {.cpu_fd = -1, .st = st,
		.memory_bytes = compile_mem(&pl->limits), .pids = pl->limits.pids};
	struct kis_supervise_hooks hooks = {
		.attach = compile_attach, .explain = compile_explain, .kill_all = compile_kill,
		.cpu_used_ms = compile_cpu_used, .limit_events = compile_events,
		.tick = compile_tick, .ctx = &cg};
	bool compiles = jit && !cc.cached && kis_wasm_compiler_available();
	if (compiles) {
		compile_group_open(&cg, pl);
		cc.compile_cg = cg.cg;
	}

	static char *const never[] = {"(wasm)", NULL}; /* never exec'd */
	struct kis_spawn sp = {
		.argv = never,
		.envp = never + 1,
		.stdin_fd = pl->io.stdin_fd,
		.limits = &pl->limits,
		.child_setup = child_main,
		.child_ctx = &cc,
		/* child_main is the run itself and never returns: the rlimits
		 * (file_bytes, open_files) bind the interpreter from the start */
		.rlimits_before_setup = true,
		.pass_fd3 = true,
		.fd3 = wsfd,
	};
	struct kis_supervise sv = {
		.wall_ms = pl->limits.wall_ms + BACKSTOP_MS,
		.cpu_ms = pl->limits.cpu_ms,
		.output_bytes = pl->limits.output_bytes,
		.capture = pl->io.capture,
		.stdout_fd = pl->io.stdout_fd,
		.stderr_fd = pl->io.stderr_fd,
		.cancel_fd = -1,
		.hooks = compiles ? &hooks : NULL,
	};
	if (pl->io.cancel_fd >= 0) {
		sv.watches[0] = (struct kis_watch){.fd = pl->io.cancel_fd, .on_ready = on_cancel_fd,
						   .ctx = st};
		sv.n_watches = 1;
	}
	int r = prepared == 0 ? kis_exec_run(&sp, &sv, res, err) : -1;
	free(cc.main_filter.prog);
	free(cc.forbid_filter.prog);
	free(cc.linked_filter.prog);
	kis_closep(&cc.landlock_fd);
	if (r == 0 && compiles)
		compile_account(&cg, pl, st, res);
	if (r == 0)
		explain(pl, st, res);
	if (r == 0) {
		/* which engine ran it, as the child saw its code mapped */
		snprintf(res->wasm.engine, sizeof(res->wasm.engine), "%s",
			 st->ran_compiled || cc.mode == KIS_WASM_COMPILE ? "compiler"
								       : "interpreter");
		if (st->ran_compiled)
			snprintf(res->wasm.code, sizeof(res->wasm.code), "%s",
				 st->ran_compiled == 2 ? "cached" : "compiled");
		const char *tu = wasm_tierup_name(tier_up);
		if (tu)
			snprintf(res->wasm.tier_up, sizeof(res->wasm.tier_up), "%s", tu);
	}
	/* cached code the child refused (it passed the check here, so it is
	 * not this module's): dropped, so the next run compiles */
	if (r == 0 && cc.cached && st->done && (st->load_failed || st->code_refused))
		wasm_code_cache_drop(root, bytes, len);
	/* the interpreter's profile, if the child wrote one, to the
	 * background compile waiting for it; then its end of file */
	if (cc.prof)
		prof_send(&prof);
	prof_close(&prof);
	munmap(st, sizeof(*st));
	if (cc.code) {
		/* the next run of this module links this instead of compiling;
		 * a failure to keep it only costs that run a compile */
		if (cc.code->len && cc.code->len <= cc.code->cap)
			wasm_code_cache_put(root, bytes, len, cc.code->data, cc.code->len);
		munmap(cc.code, cc.code_map);
	}
	kis_store_free(store);
	return r;
}

const struct kis_backend kis_backend_wasm = {
	.name = "wasm",
	.tier = KIS_TIER_WASM,
	.probe = wasm_probe,
	.plan = wasm_plan,
	.amend = wasm_amend,
	.describe = wasm_describe,
	.run = wasm_run,
	.plan_free = wasm_plan_free,
};
