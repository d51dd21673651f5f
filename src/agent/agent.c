/* SPDX-License-Identifier: MIT */
/* The agent: PID 1 (or a subreaper) of a sandbox. It accepts connections,
 * forks one worker per connection, and keeps the durable shell's state;
 * a one-shot run's single channel is served in the agent itself.
 *
 * Theory of operation. The main loop polls the listening socket, a
 * signalfd (SIGCHLD, SIGTERM) and one state pipe per worker. A worker
 * speaks the protocol on its connection (docs/protocol.md): HELLO, then any
 * number of EXEC requests one after another; several execs at once use
 * several connections. Each EXEC runs through kis_exec_run, the supervisor
 * the engine uses too; stdin, resize and signal frames arrive through a
 * watch on the connection; output leaves as DATA frames. A shell line runs
 * under /bin/sh with an EXIT trap that writes the shell's cwd and exported
 * environment to fd 3; the worker hands that to the main loop, so the next
 * line (on any connection) starts where the last one ended. Orphans are
 * reparented to us (PR_SET_CHILD_SUBREAPER, or being PID 1) and reaped.
 *
 * One channel (--channel-fd, a one-shot run of bubblewrap or crun): no
 * worker. The agent speaks the protocol itself and reaps the orphans from
 * the supervisor's loop (hooks.tick); a fork of the worker is one more
 * process creation per run, a few milliseconds on a PVM guest. */
#include "core/util.h"

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>

#include "agent/agent.h"
#include "agent/confine.h"
#include "agent/exec_json.h"
#include "agent/pod.h"
#include "agent/proto.h"
#include "exec/exec.h"
#include "core/io.h"

#define MAX_WORKERS 64
#define STATE_MAX (1u << 20)

/* The durable shell's state, owned by the main loop; a worker inherits a
 * copy at fork. */
static char *state_cwd;
static char **state_env;

/* "cwd\0K=V\0K=V\0..." from the shell's EXIT trap. */
static void state_apply(const char *buf, size_t len)
{
	if (!len || buf[len - 1] != '\0')
		return; /* truncated: keep the old state */
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\0';
	char **env = calloc(n + 1, sizeof(*env));
	if (!env)
		return;
	char *cwd = strdup(buf);
	size_t k = 0;
	for (const char *p = buf + strlen(buf) + 1; p < buf + len; p += strlen(p) + 1) {
		/* shell bookkeeping is not part of the session's environment */
		if (!strncmp(p, "_=", 2) || !strncmp(p, "SHLVL=", 6) || !strncmp(p, "OLDPWD=", 7) ||
		    !strchr(p, '='))
			continue;
		env[k++] = strdup(p);
	}
	free(state_cwd);
	state_cwd = cwd;
	kis_strv_free(state_env);
	state_env = env;
}

/* ---- a worker: one connection ---- */

struct worker {
	int conn;
	uint32_t exec_id;
	pid_t pid;            /* the command, once started */
	int stdin_w;          /* our end of the command's stdin pipe, or -1 */
	int pty_master;       /* or -1 */
	struct kis_frame_reader rd;
	bool conn_broken;
	char *state;          /* bytes read from the shell's fd 3 */
	size_t state_len;
	int cpu_fd;           /* this exec's leaf's cpu.stat, or -1 */
	struct kis_pod_exec *pod; /* the exec's pod container (pod.c), or NULL */
	bool last_exec;       /* serve no other exec on this connection */
};

static void send_error(int fd, uint32_t exec, const char *code, const char *msg)
{
	json_t *o = json_pack("{s:s, s:s}", "code", code, "message", msg);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (s)
		kis_frame_write(fd, KIS_F_ERROR, 0, exec, s, (uint32_t)strlen(s));
	free(s);
	json_decref(o);
}

static void on_output(void *ctx, int stream, const char *buf, size_t n)
{
	struct worker *w = ctx;
	while (n > 0 && !w->conn_broken) {
		uint32_t chunk = n > 65536 ? 65536 : (uint32_t)n;
		if (kis_frame_write(w->conn, KIS_F_DATA, (uint8_t)stream, w->exec_id, buf, chunk) < 0)
			w->conn_broken = true;
		buf += chunk;
		n -= chunk;
	}
}

/* Frames that arrive while a command runs (some may already be buffered
 * behind the EXEC frame). */
static int process_frames(struct worker *w)
{
	struct kis_frame f;
	int st;
	while ((st = kis_frame_reader_next(&w->rd, &f)) == KIS_FRAME_OK) {
		switch (f.type) {
		case KIS_F_DATA:
			if (f.stream != 0)
				break;
			if (w->pty_master >= 0)
				(void)kis_write_all(w->pty_master, f.payload, f.len);
			else if (w->stdin_w >= 0)
				(void)kis_write_all(w->stdin_w, f.payload, f.len);
			break;
		case KIS_F_EOF:
			if (f.stream == 0 && w->stdin_w >= 0) {
				close(w->stdin_w);
				w->stdin_w = -1;
			}
			break;
		case KIS_F_RESIZE:
			if (w->pty_master >= 0) {
				struct winsize ws = {
					.ws_row = (unsigned short)(f.payload[0] | f.payload[1] << 8),
					.ws_col = (unsigned short)(f.payload[2] | f.payload[3] << 8)};
				/* TIOCSWINSZ sends SIGWINCH to the foreground group (tty_ioctl(4)) */
				ioctl(w->pty_master, TIOCSWINSZ, &ws);
			}
			break;
		case KIS_F_SIGNAL: {
			uint32_t sig = (uint32_t)f.payload[0] | (uint32_t)f.payload[1] << 8 |
				       (uint32_t)f.payload[2] << 16 | (uint32_t)f.payload[3] << 24;
			if (w->pid > 0 && sig > 0 && sig < 65)
				kill(-w->pid, (int)sig);
			break;
		}
		case KIS_F_HELLO:
		case KIS_F_EXEC:
		case KIS_F_EXIT:
		case KIS_F_ERROR:
		case KIS_F_STARTED:
		default:
			send_error(w->conn, f.exec, "protocol", "unexpected frame during an exec");
			break;
		}
	}
	if (st < 0) {
		send_error(w->conn, w->exec_id, "protocol", kis_frame_status_text(st));
		return -1; /* a peer that sends garbage loses its exec, not the session */
	}
	return w->rd.eof ? -1 : 0;
}

static int on_conn(void *ctx, int fd)
{
	struct worker *w = ctx;
	if (kis_frame_reader_fill(&w->rd, fd) < 0 && errno != EAGAIN)
		return -1;
	return process_frames(w);
}

/* The command of the exec in progress: killed with its group when the
 * worker is told to stop (session destroy), so nothing outlives it. */
static volatile pid_t current_pgid;

static void on_term(int sig)
{
	(void)sig;
	if (current_pgid > 0)
		kill(-current_pgid, SIGKILL);
	_exit(1);
}

static int on_state(void *ctx, int fd)
{
	struct worker *w = ctx;
	char buf[8192];
	ssize_t n = RETRY_EINTR(read(fd, buf, sizeof(buf)));
	if (n <= 0)
		return 1;
	if (w->state_len + (size_t)n > STATE_MAX)
		return 1;
	char *g = realloc(w->state, w->state_len + (size_t)n);
	if (!g)
		return 1;
	w->state = g;
	memcpy(w->state + w->state_len, buf, (size_t)n);
	w->state_len += (size_t)n;
	return 0;
}

/* The group the agent's commands get their leaves under (the microvm
 * guest's pids group), or -1: each command's own clock, and no leaf. */
static int agent_cg_dir = -1;

void kis_agent_set_cgroup_dir(int fd)
{
	agent_cg_dir = fd;
}

/* One exec's leaf under agent_cg_dir (cgroup-v2.rst): the command joins it
 * from its child, before its cgroup namespace is made, so the namespace's
 * root is the leaf; its cpu.stat counts this exec's processes only (two
 * execs of a session at once each count their own). The pids limit is the
 * parent's, hierarchical, and no controller is enabled below it, so the
 * agent may stay in the parent ("no internal processes" binds only a group
 * whose subtree_control enables one). */
struct exec_cg {
	char name[48];
	int procs_fd, cpu_fd;
};

static int exec_cg_make(struct exec_cg *c)
{
	static unsigned seq;
	c->procs_fd = c->cpu_fd = -1;
	c->name[0] = '\0';
	if (agent_cg_dir < 0)
		return 0;
	snprintf(c->name, sizeof(c->name), "exec-%d-%u", (int)getpid(), ++seq);
	if (mkdirat(agent_cg_dir, c->name, 0755) < 0) {
		c->name[0] = '\0';
		return -1;
	}
	int d = openat(agent_cg_dir, c->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d >= 0) {
		c->procs_fd = openat(d, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		c->cpu_fd = openat(d, "cpu.stat", O_RDONLY | O_CLOEXEC);
		close(d);
	}
	return c->procs_fd >= 0 && c->cpu_fd >= 0 ? 0 : -1;
}

/* After the exec: the leaf goes when it is empty. A process the command
 * left running (a session's background job) keeps it until it ends; the
 * VM's end takes the rest. */
static void exec_cg_drop(struct exec_cg *c)
{
	kis_closep(&c->procs_fd);
	kis_closep(&c->cpu_fd);
	if (c->name[0])
		(void)unlinkat(agent_cg_dir, c->name, AT_REMOVEDIR);
	c->name[0] = '\0';
}

static struct kis_agent_confine *confine;

void kis_agent_set_confine(struct kis_agent_confine *c)
{
	confine = c;
}

static bool test_hooks;

void kis_agent_set_test_hooks(bool on)
{
	test_hooks = on;
}

/* The test hook "kis-test:flood KIND": after STARTED, malformed frames
 * (docs/protocol.md) from the agent's own side of the channel, which the
 * engine must refuse by name. The agent then stays quiet, as a wedged
 * guest would, until the engine ends the connection. */
static void test_flood(int conn, uint32_t exec, const char *kind)
{
	kis_frame_write(conn, KIS_F_STARTED, 0, exec, "{\"pid\":0}", 9);
	uint8_t buf[4096] = {0};
	size_t n = KIS_FRAME_HDR;
	uint32_t len = 0x7fffffffu; /* huge: a DATA frame far over the 1 MiB cap */
	uint8_t type = KIS_F_DATA;
	if (!strcmp(kind, "type")) {
		len = 0;
		type = 0x63; /* no such frame type */
	}
	for (int i = 0; i < 4; i++) {
		buf[i] = (uint8_t)(len >> (8 * i));
		buf[8 + i] = (uint8_t)(exec >> (8 * i));
	}
	buf[4] = type;
	buf[5] = 1;
	if (!strcmp(kind, "random")) {
		n = sizeof(buf);
		int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (r < 0 || read(r, buf, n) != (ssize_t)n)
			memset(buf, 0xa5, n);
		if (r >= 0)
			close(r);
	}
	(void)kis_write_all(conn, buf, n);
	char b;
	while (RETRY_EINTR(read(conn, &b, 1)) > 0)
		;
}

static int on_cpu_used(void *ctx, uint64_t *ms)
{
	struct worker *w = ctx;
	return kis_cpuacct_read_ms(w->cpu_fd, ms);
}

static int on_attach(void *ctx, pid_t pid, struct kis_error **err)
{
	struct worker *w = ctx;
	w->pid = pid;
	current_pgid = pid;
	if (w->pod)
		kis_pod_exec_started(w->pod, pid);
	char body[48];
	int n = snprintf(body, sizeof(body), "{\"pid\":%d}", (int)pid);
	kis_frame_write(w->conn, KIS_F_STARTED, 0, w->exec_id, body, (uint32_t)n);
	return 0;
}

/* The EXIT trap runs after the line, also when the line calls exit; fd 3 is
 * closed for the line itself so its commands do not inherit it. */
static const char shell_wrapper[] =
	"trap '__kis_st=$?; { printf \"%s\\0\" \"$PWD\"; env -0; } >&3 2>/dev/null; "
	"exit $__kis_st' EXIT\n"
	"eval \"$1\" 3>&-\n";

static int open_pty(unsigned rows, unsigned cols, int *master, int *slave)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -1;
	if (grantpt(m) < 0 || unlockpt(m) < 0) {
		close(m);
		return -1;
	}
	char name[128];
	if (ptsname_r(m, name, sizeof(name)) != 0) {
		close(m);
		return -1;
	}
	int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		close(m);
		return -1;
	}
	struct winsize ws = {.ws_row = (unsigned short)(rows ? rows : 24),
			     .ws_col = (unsigned short)(cols ? cols : 80)};
	ioctl(m, TIOCSWINSZ, &ws);
	*master = m;
	*slave = s;
	return 0;
}

/* Served inline: the orphans we adopted (as subreaper or PID 1) are
 * reaped while the command runs, or they would hold their pids (a zombie
 * counts against pids.max until it is reaped). waitid(2) WNOWAIT looks
 * first: the command itself is left to the supervisor's wait4. */
static bool reap_inline;
/* Served inline, SIGCHLD is blocked and read here: an orphan's exit wakes
 * the supervisor at once (a 20 ms tick let a loop of short-lived orphans
 * outrun us under load, and their zombies met pids.max). */
static int reap_sfd = -1;

static void reap_orphans(pid_t command)
{
	for (;;) {
		siginfo_t si;
		si.si_pid = 0;
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0 ||
		    si.si_pid == command)
			return;
		(void)waitpid(si.si_pid, NULL, WNOHANG);
	}
}

static void on_tick(void *ctx, pid_t command)
{
	(void)ctx;
	if (reap_inline)
		reap_orphans(command);
}

static int on_sigchld(void *ctx, int fd)
{
	struct worker *w = ctx;
	struct signalfd_siginfo si[8];
	while (read(fd, si, sizeof(si)) > 0) /* drained: nonblocking */
		;
	reap_orphans(w->pid);
	return 0;
}

/* A pod container's command: its /proc first (pid 1 of its namespace),
 * then the confinement every command gets. */
struct pod_child {
	struct kis_agent_confine *confine;
	const struct kis_pod_exec *pe;
};

static int pod_child_setup(void *ctx, struct kis_error **err)
{
	const struct pod_child *pc = ctx;
	if (kis_pod_child(pc->pe) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot mount the container's /proc");
	return kis_agent_confine_child(pc->confine, err);
}

/* An exec that names a pod container (docs/protocol.md "container"): the
 * worker enters it (pod.c) and serves nothing after this exec. A remove
 * runs nothing: STARTED and EXIT 0 once done. 0 go on, 1 answered. */
static int pod_enter(struct worker *w, struct kis_exec_req *req, struct kis_pod_exec *pe)
{
	char msg[512];
	if (req->ctr_op == KIS_CTR_NONE)
		return 0;
	w->last_exec = true; /* this worker's namespaces are the container's now */
	if (!confine) {
		send_error(w->conn, w->exec_id, "profile_unsatisfiable",
			   "container: only the microvm guest's agent runs a pod's containers");
		return 1;
	}
	if (kis_pod_exec_prepare(req, pe, msg, sizeof(msg)) < 0) {
		send_error(w->conn, w->exec_id, "internal", msg);
		return 1;
	}
	if (!pe->done)
		return 0;
	struct kis_result res;
	kis_result_init(&res);
	res.reason = KIS_REASON_EXITED;
	char *body = kis_exit_to_json(&res);
	kis_frame_write(w->conn, KIS_F_STARTED, 0, w->exec_id, "{\"pid\":0}", 9);
	if (body)
		kis_frame_write(w->conn, KIS_F_EXIT, 0, w->exec_id, body, (uint32_t)strlen(body));
	free(body);
	kis_result_release(&res);
	return 1;
}

static void run_exec(struct worker *w, struct kis_exec_req *req, int state_fd)
{
	struct kis_result res;
	kis_result_init(&res);
	struct kis_error *err = NULL;
	int in[2] = {-1, -1}, st[2] = {-1, -1}, slave = -1;
	struct exec_cg cg = {.procs_fd = -1, .cpu_fd = -1};
	w->stdin_w = w->pty_master = w->cpu_fd = -1;
	w->pid = 0;
	free(w->state);
	w->state = NULL;
	w->state_len = 0;

	if (test_hooks && !req->shell && req->argv[0] && !strcmp(req->argv[0], "kis-test:flood")) {
		test_flood(w->conn, w->exec_id, req->argv[1] ? req->argv[1] : "huge");
		w->conn_broken = true;
		return;
	}
	/* The test hook "kis-test:guest-root CMD...": CMD as the guest's root,
	 * every capability, no confinement, as a compromised guest (its
	 * kernel, its agent) would act: for the tests of what must hold
	 * outside the guest (egress's policy, on the host side of passt). */
	bool as_root = test_hooks && !req->shell && req->argv[0] && req->argv[1] &&
		       !strcmp(req->argv[0], "kis-test:guest-root");
	struct kis_pod_exec pe = {.dir_fd = -1, .proc_fd = -1, .pod_root_fd = -1,
				  .cg_procs_fd = -1, .cg_fd = -1};
	struct pod_child pc = {.confine = confine, .pe = &pe};
	if (pod_enter(w, req, &pe)) {
		kis_pod_exec_release(&pe);
		return;
	}
	bool in_pod = req->ctr_op != KIS_CTR_NONE;
	if (in_pod) {
		as_root = false;
		w->pod = &pe;
	}
	char *sh_argv[] = {"/bin/sh", "-c", (char *)shell_wrapper, "sh", req->argv[0], NULL};
	char *const *argv = req->shell ? sh_argv : as_root ? req->argv + 1 : req->argv;
	char *const *base_env = req->env ? req->env : state_env;
	char **merged = NULL;
	if (req->env_add && req->env_add[0]) {
		/* the exec's own variables on top of the session's (replacing a
		 * variable of the same name) */
		size_t n = 0;
		merged = NULL;
		for (char *const *e = base_env; e && *e; e++) {
			size_t k = strcspn(*e, "=");
			bool replaced = false;
			for (char **a = req->env_add; *a && !replaced; a++)
				replaced = !strncmp(*a, *e, k) && (*a)[k] == '=';
			if (!replaced && kis_strv_push(&merged, &n, *e) < 0)
				break;
		}
		for (char **a = req->env_add; *a; a++)
			if (kis_strv_push(&merged, &n, *a) < 0)
				break;
	}
	char *const *envp = merged ? merged : base_env;
	const char *cwd = req->cwd ? req->cwd : state_cwd;

	if (req->tty) {
		if (open_pty(req->rows, req->cols, &w->pty_master, &slave) < 0) {
			send_error(w->conn, w->exec_id, "internal", "cannot allocate a terminal");
			goto out;
		}
		/* the terminal is the command's user's, as login(1) makes it:
		 * a program that opens ttyname(0) again must be let in */
		if (confine && fchown(slave, confine->uid, confine->gid) < 0) {
			send_error(w->conn, w->exec_id, "internal", "cannot give the terminal away");
			kis_closep(&slave);
			kis_closep(&w->pty_master);
			goto out;
		}
	} else if (pipe2(in, O_CLOEXEC) < 0) {
		send_error(w->conn, w->exec_id, "internal", "cannot create a pipe");
		goto out;
	}
	if (req->shell && pipe2(st, O_CLOEXEC) < 0) {
		send_error(w->conn, w->exec_id, "internal", "cannot create a pipe");
		goto out;
	}
	w->stdin_w = in[1];
	in[1] = -1;
	struct kis_spawn sp = {
		.argv = argv, .envp = envp, .cwd = cwd, .stdin_fd = in[0], .limits = &req->limits,
		.pty = req->tty, .pty_slave = slave, .pass_fd3 = req->shell, .fd3 = st[1],
		/* the agent's process is small but a fork of it is still a copy of
		 * its page tables; kis_agent_confine_child is system calls only */
		.vfork_ok = true,
	};
	if (confine && !as_root && exec_cg_make(&cg) < 0) {
		send_error(w->conn, w->exec_id, "internal", "cannot make the command's cgroup");
		goto out;
	}
	w->cpu_fd = cg.cpu_fd;
	if (confine && !as_root) {
		/* the worker is one thread with its own copy: per exec fields */
		confine->cg_procs_fd = cg.procs_fd;
		confine->mount_cgroup = false;
		confine->keep_fd3 = req->shell;
		confine->limits = &req->limits;
		confine->cwd = cwd;
		sp.child_setup = kis_agent_confine_child;
		sp.child_ctx = confine;
	}
	if (in_pod) {
		/* a clone sharing our memory into another pid namespace: not
		 * taken, a fork is one per container */
		sp.vfork_ok = false;
		sp.child_setup = pod_child_setup;
		sp.child_ctx = &pc;
		/* a container with a memory or CPU limit: its command joins
		 * the container's group (pod.c), which the pod's refusal of a
		 * pids group beside it keeps the only group to join; its init
		 * mounts that group at the container's /sys/fs/cgroup */
		if (confine && pe.cg_procs_fd >= 0) {
			confine->cg_procs_fd = pe.cg_procs_fd;
			confine->mount_cgroup = pe.mount_cgroup;
		}
	}
	struct kis_supervise_hooks hooks = {.attach = on_attach, .ctx = w,
					    .cpu_used_ms = w->cpu_fd >= 0 ? on_cpu_used : NULL,
					    .tick = on_tick};
	struct kis_supervise sv = {
		.wall_ms = req->limits.wall_ms, .cpu_ms = req->limits.cpu_ms,
		.output_bytes = req->limits.output_bytes, .sink = on_output, .sink_ctx = w,
		.cancel_fd = -1, .hooks = &hooks, .pty = req->tty, .pty_master = w->pty_master,
	};
	sv.watches[sv.n_watches++] = (struct kis_watch){.fd = w->conn, .on_ready = on_conn, .ctx = w};
	if (req->shell)
		sv.watches[sv.n_watches++] = (struct kis_watch){.fd = st[0], .on_ready = on_state, .ctx = w};
	if (reap_inline && reap_sfd >= 0)
		sv.watches[sv.n_watches++] =
			(struct kis_watch){.fd = reap_sfd, .on_ready = on_sigchld, .ctx = w};
	if (w->rd.len)
		process_frames(w); /* stdin that came with the request */
	int r = kis_exec_run(&sp, &sv, &res, &err);
	current_pgid = 0;
	slave = sp.pty_slave;
	if (r < 0) {
		send_error(w->conn, w->exec_id, kis_errc_name(err ? err->code : KIS_E_INTERNAL),
			   err && err->message ? err->message : "exec failed");
		kis_error_free(err);
		goto out;
	}
	if (req->shell) {
		/* the trap wrote before the shell exited: take what is left */
		kis_closep(&st[1]);
		while (on_state(w, st[0]) == 0)
			;
		if (w->state_len && w->state_len < STATE_MAX) {
			/* Hand the state to the main loop and wait for its ack before
			 * the EXIT frame: a client's next exec, which can only follow
			 * the EXIT, then always starts from this state. */
			uint32_t len = (uint32_t)w->state_len;
			char ack;
			if (kis_write_all(state_fd, &len, sizeof(len)) == 0 &&
			    kis_write_all(state_fd, w->state, w->state_len) == 0)
				(void)!RETRY_EINTR(read(state_fd, &ack, 1));
			state_apply(w->state, w->state_len);
		}
	}
	/* a container's init: the OOM kills at its memory limit, the
	 * evidence for memory_limit (kis_result_blame_limits, as every tier);
	 * the host's proxy of the container reports 128+SIGKILL from it */
	if (pe.cg_fd >= 0)
		kis_result_blame_limits(&res, kis_pod_oom_kills(&pe), 0,
					"the container's memory limit (its group's memory.max in "
					"the guest) was reached: the OOM killer ended a process",
					"");
	char *body = kis_exit_to_json(&res);
	if (body && !w->conn_broken)
		kis_frame_write(w->conn, KIS_F_EXIT, 0, w->exec_id, body, (uint32_t)strlen(body));
	free(body);
out:
	w->pod = NULL;
	kis_pod_exec_release(&pe);
	exec_cg_drop(&cg);
	w->cpu_fd = -1;
	kis_strv_free(merged);
	kis_result_release(&res);
	for (int i = 0; i < 2; i++) {
		kis_closep(&in[i]);
		kis_closep(&st[i]);
	}
	kis_closep(&slave);
	kis_closep(&w->stdin_w);
	kis_closep(&w->pty_master);
}

static int worker_main(int conn, int state_fd)
{
	struct worker w = {.conn = conn, .stdin_w = -1, .pty_master = -1};
	kis_frame_reader_init(&w.rd);
	struct kis_frame f;
	int st = kis_frame_read_blocking(&w.rd, conn, &f);
	uint32_t ver = 0;
	if (st == 1 && f.type == KIS_F_HELLO)
		ver = (uint32_t)f.payload[0] | (uint32_t)f.payload[1] << 8 |
		      (uint32_t)f.payload[2] << 16 | (uint32_t)f.payload[3] << 24;
	if (st != 1 || f.type != KIS_F_HELLO || ver != KIS_PROTO_VERSION) {
		send_error(conn, 0, "protocol",
			   st < 0 ? kis_frame_status_text(st) :
			   st == 1 && f.type == KIS_F_HELLO ? "unsupported protocol version" :
							      "expected a HELLO frame first");
		kis_frame_reader_release(&w.rd);
		return 1;
	}
	uint8_t v[4] = {KIS_PROTO_VERSION, 0, 0, 0};
	kis_frame_write(conn, KIS_F_HELLO, 0, 0, v, 4);
	for (;;) {
		st = kis_frame_read_blocking(&w.rd, conn, &f);
		if (st == 0)
			break;
		if (st < 0) {
			send_error(conn, 0, "protocol", kis_frame_status_text(st));
			break;
		}
		if (f.type != KIS_F_EXEC) {
			send_error(conn, f.exec, "protocol", "expected an EXEC frame");
			continue;
		}
		struct kis_exec_req req;
		struct kis_error *err = NULL;
		if (kis_exec_req_from_json((const char *)f.payload, f.len, &req, &err) < 0) {
			send_error(conn, f.exec, "invalid_argument", err->message);
			kis_error_free(err);
			continue;
		}
		w.exec_id = f.exec;
		/* the reader may hold frames that belong to this exec (stdin) */
		run_exec(&w, &req, state_fd);
		kis_exec_req_release(&req);
		if (w.conn_broken || w.rd.eof || w.last_exec)
			break;
	}
	kis_frame_reader_release(&w.rd);
	free(w.state);
	return 0;
}

/* ---- the main loop ---- */

struct wslot {
	pid_t pid;
	int state_fd;
	char *buf;
	size_t len;
};

/* The kernel's overflow uid: what an id that our user namespace does not
 * map reads as (user_namespaces(7)). */
static uid_t overflow_uid(void)
{
	static uid_t u = (uid_t)-1;
	if (u == (uid_t)-1) {
		FILE *f = fopen("/proc/sys/kernel/overflowuid", "re");
		unsigned v = 65534;
		if (f) {
			if (fscanf(f, "%u", &v) != 1)
				v = 65534;
			fclose(f);
		}
		u = (uid_t)v;
	}
	return u;
}

static int peer_allowed(int fd)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0)
		return 0;
	/* only the engine's own user (or root) may drive this sandbox. Where
	 * the sandbox has a user namespace of its own (bubblewrap maps its ids
	 * onto a range of their own), the engine's uid is not mapped and reads
	 * as the overflow uid; every process inside has a mapped uid, so such
	 * a peer is outside the sandbox. */
	return cr.uid == getuid() || cr.uid == 0 ||
	       (cr.uid == overflow_uid() && getuid() != overflow_uid());
}

void kis_agent_set_cwd(const char *cwd)
{
	if (cwd) {
		free(state_cwd);
		state_cwd = strdup(cwd);
	}
}

static pid_t spawn_worker(int conn, int listen_fd, int sfd, int *state_rd)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return -1;
	}
	if (pid == 0) {
		close(sp[0]);
		if (listen_fd >= 0)
			close(listen_fd);
		close(sfd);
		sigset_t none;
		sigemptyset(&none);
		signal(SIGTERM, on_term);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* the worker's command is killed with it when the agent ends */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(worker_main(conn, sp[1]));
	}
	close(sp[1]);
	*state_rd = sp[0];
	return pid;
}

/* One channel, no worker (see the top). Signals as a worker has them;
 * SIGINT as SIGTERM, which the main loop would have turned into a stop. */
static int serve_inline(int conn)
{
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_SETMASK, &chld, NULL); /* the command starts with none blocked */
	reap_sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (reap_sfd < 0) {
		sigemptyset(&chld);
		sigprocmask(SIG_SETMASK, &chld, NULL); /* the tick reaps, as before */
	}
	reap_inline = true;
	int r = worker_main(conn, -1);
	reap_orphans(0);
	close(conn);
	if (getpid() == 1)
		kill(-1, SIGKILL);
	return r;
}

static int serve(int listen_fd, int channel_fd)
{
	/* The descriptors we were handed arrive without close-on-exec (crun's
	 * --preserve-fds clears it, and so does passing them as fd 3): mark
	 * them, or every command would inherit the agent's channel. */
	if (listen_fd >= 0)
		fcntl(listen_fd, F_SETFD, FD_CLOEXEC);
	if (channel_fd >= 0)
		fcntl(channel_fd, F_SETFD, FD_CLOEXEC);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* Not dumpable: /proc/<our pid>/mem, /environ and ptrace need
	 * CAP_SYS_PTRACE over us (ptrace_may_access), which no command has, so
	 * a command cannot rewrite the agent that reports on it. Our workers
	 * inherit this; a command gets its own at execve(2). */
	prctl(PR_SET_DUMPABLE, 0);
	signal(SIGPIPE, SIG_IGN);
	if (!state_cwd) {
		char cwd[4096];
		state_cwd = strdup(getcwd(cwd, sizeof(cwd)) ? cwd : "/");
	}
	extern char **environ;
	state_env = kis_strv_dup(environ);
	if (channel_fd >= 0)
		return serve_inline(channel_fd);

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return 1;

	struct wslot slots[MAX_WORKERS];
	memset(slots, 0, sizeof(slots));
	for (int i = 0; i < MAX_WORKERS; i++)
		slots[i].state_fd = -1;
	if (channel_fd >= 0) {
		int rd;
		pid_t p = spawn_worker(channel_fd, -1, sfd, &rd);
		if (p < 0)
			return 1;
		slots[0] = (struct wslot){.pid = p, .state_fd = rd};
		close(channel_fd);
	}
	bool stopping = false;
	for (;;) {
		struct pollfd pfd[2 + MAX_WORKERS];
		int map[2 + MAX_WORKERS];
		int n = 0;
		pfd[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
		map[n++] = -1;
		if (listen_fd >= 0 && !stopping) {
			pfd[n] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
			map[n++] = -2;
		}
		bool any = false;
		for (int i = 0; i < MAX_WORKERS; i++) {
			any |= slots[i].pid > 0;
			if (slots[i].state_fd >= 0) {
				pfd[n] = (struct pollfd){.fd = slots[i].state_fd, .events = POLLIN};
				map[n++] = i;
			}
		}
		if (channel_fd >= 0 && !any)
			break; /* one channel, served: done */
		if (stopping && !any)
			break;
		if (poll(pfd, (nfds_t)n, -1) < 0 && errno != EINTR)
			break;
		for (int k = 0; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (map[k] == -1) {
				struct signalfd_siginfo si;
				while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
						stopping = true;
						for (int i = 0; i < MAX_WORKERS; i++)
							if (slots[i].pid > 0)
								kill(slots[i].pid, SIGTERM);
						if (getpid() == 1)
							kill(-1, SIGKILL);
					}
				}
				pid_t p;
				int status;
				while ((p = waitpid(-1, &status, WNOHANG)) > 0)
					for (int i = 0; i < MAX_WORKERS; i++)
						if (slots[i].pid == p)
							slots[i].pid = 0;
			} else if (map[k] == -2) {
				int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
				if (c < 0)
					continue;
				int free_slot = -1;
				for (int i = 0; i < MAX_WORKERS && free_slot < 0; i++)
					if (!slots[i].pid && slots[i].state_fd < 0)
						free_slot = i;
				if (!peer_allowed(c) || free_slot < 0) {
					if (free_slot < 0)
						send_error(c, 0, "busy", "too many connections to this session");
					close(c);
					continue;
				}
				int rd;
				pid_t p = spawn_worker(c, listen_fd, sfd, &rd);
				close(c);
				if (p > 0)
					slots[free_slot] = (struct wslot){.pid = p, .state_fd = rd};
			} else {
				struct wslot *s = &slots[map[k]];
				char buf[8192];
				ssize_t r = RETRY_EINTR(read(s->state_fd, buf, sizeof(buf)));
				if (r > 0 && s->len + (size_t)r <= STATE_MAX + 4) {
					char *g = realloc(s->buf, s->len + (size_t)r);
					if (g) {
						memcpy(g + s->len, buf, (size_t)r);
						s->buf = g;
						s->len += (size_t)r;
					}
					/* a message: u32 length, then the state; ack it */
					uint32_t need;
					if (s->len >= 4) {
						memcpy(&need, s->buf, 4);
						if (need <= STATE_MAX && s->len >= 4 + (size_t)need) {
							state_apply(s->buf + 4, need);
							memmove(s->buf, s->buf + 4 + need,
								s->len - 4 - need);
							s->len -= 4 + need;
							(void)!write(s->state_fd, "k", 1);
						}
					}
				} else {
					free(s->buf);
					s->buf = NULL;
					s->len = 0;
					close(s->state_fd);
					s->state_fd = -1;
				}
			}
		}
	}
	if (getpid() == 1)
		kill(-1, SIGKILL);
	return 0;
}

int kis_agent_serve_listener(int listen_fd)
{
	return serve(listen_fd, -1);
}

int kis_agent_serve_channel(int fd)
{
	return serve(-1, fd);
}
