/* SPDX-License-Identifier: MIT */
/* kis-runtime at the host tier: the OCI lifecycle of a bundle run by
 * bubblewrap (host_plan.c says what of it bwrap enforces), kept by us.
 *
 * Theory of operation. create checks the bundle (host_plan: a field bwrap
 * cannot enforce is refused by name), makes the state directory
 * <root>/kis-host/<id>/ (state.json, the fifo `start`, the cgroup record)
 * and the container's cgroup (memory and pids, kis's defaults when unset),
 * and forks the container process. That child joins the cgroup, takes
 * its rlimits and terminal, and blocks reading the fifo: the container is
 * `created`, its pid the one in --pid-file. start writes the fifo; the
 * child becomes bwrap (same pid), which unshares the namespaces, builds
 * the root from the bundle, loads kis's seccomp filter and becomes the
 * process, as pid 1 of its pid namespace (--as-pid-1); bwrap writes the
 * process's host pid to info.json (--info-fd). kill signals that process;
 * bwrap, its parent, exits with its status, and the engine's subreaper
 * (conmon, the containerd shim) collects it as it would runc's init.
 * exec joins the process's namespaces through a pidfd (setns(2) with
 * several CLONE_NEW* flags, Linux 5.8), its cgroup, capabilities, seccomp
 * and no_new_privs, and runs there. delete kills what is left, removes the
 * cgroup and the state. */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>

#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/openat2.h>

#include "backends/common.h"
#include "backends/host/common.h"
#include "confine/confine.h"
#include "confine/sysview.h"
#include "core/log.h"
#include "core/record.h"
#include "kis/profile.h"
#include "runtime/runtime.h"

#define HOST_DIR "kis-host"

/* ---------------------------------------------------------- the state */

/* --root and the directories above it, as runc and crun make them
 * (the containerd shim names /run/containerd/runc/<namespace>, whose
 * parents need not exist yet). */
int krt_make_root(const char *root, struct kis_error **err)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", root) >= (int)sizeof(buf))
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "--root is too long");
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", buf);
		*p = c;
		if (!c)
			return 0;
	}
}

/* A tier's directory under --root (kis-host, kis-microvm), made with
 * --root's parents when create; -1 when it is not there (and not create). */
int krt_tier_root(const struct krt_globals *g, const char *dir, bool create,
		  struct kis_error **err)
{
	if (create && krt_make_root(g->root, err) < 0)
		return -1;
	_cleanup_close_ int rfd = open(g->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return create ? kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", g->root)
			      : -1;
	if (create && mkdirat(rfd, dir, 0700) < 0 && errno != EEXIST)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make %s", dir);
	int fd = openat(rfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && create)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open %s", dir);
	return fd;
}

/* A container's state directory in a tier's, or -1 (not that tier's). */
int krt_tier_container(const struct krt_globals *g, const char *dir, const char *id)
{
	if (!id || krt_valid_id(id, NULL) < 0)
		return -1;
	_cleanup_close_ int h = krt_tier_root(g, dir, false, NULL);
	return h < 0 ? -1 : openat(h, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

static int open_host_root(const struct krt_globals *g, bool create, struct kis_error **err)
{
	return krt_tier_root(g, HOST_DIR, create, err);
}

/* The container's state directory, or -1 when it is not a host-tier one. */
static int open_container(const struct krt_globals *g, const char *id)
{
	return krt_tier_container(g, HOST_DIR, id);
}

bool krt_host_owns(const struct krt_globals *g, const char *id)
{
	_cleanup_close_ int fd = open_container(g, id);
	return fd >= 0;
}

static json_t *read_json_at(int dfd, const char *name)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? NULL : json_loadfd(fd, 0, NULL);
}

static int write_json_at(int dfd, const char *name, json_t *doc, struct kis_error **err)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	_cleanup_close_ int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
						     O_NOFOLLOW, 0600);
	if (fd < 0 || json_dumpfd(doc, fd, JSON_COMPACT) < 0 || fsync(fd) < 0 ||
	    renameat(dfd, tmp, dfd, name) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write %s", name);
	return 0;
}

/* Field 22 of /proc/PID/stat (start time in ticks) and the state letter:
 * a pid is the same process only while its start time is. */
static int proc_stat(pid_t pid, unsigned long long *start, char *st)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* after ") ": state, then fields 4.. ; starttime is the 20th after state */
	*st = p[2];
	p += 2;
	for (int f = 3; f < 22 && p; f++)
		p = strchr(p + 1, ' ');
	return p && sscanf(p, " %llu", start) == 1 ? 0 : -1;
}

/* info.json's child-pid (bwrap writes it: --info-fd) when that process is
 * bwrap's child still, the pid state.json names (whose start time
 * status_of checked): a pid the file names that is another's is not
 * the container's. 0 when none. */
static pid_t bwrap_child(int dfd, json_t *st, char *letter)
{
	json_t *info = read_json_at(dfd, "info.json");
	pid_t child = krt_state_pid(info, "child-pid");
	json_decref(info);
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
	_cleanup_close_ int fd = child > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* proc(5): "pid (comm) state ppid ..." */
	const char *p = strrchr(buf, ')');
	int ppid = 0;
	if (!p || sscanf(p + 1, " %c %d", letter, &ppid) != 2 ||
	    ppid != krt_state_pid(st, "pid"))
		return 0;
	return child;
}

/* "created", "running" or "stopped" */
static const char *status_of(int dfd, json_t *st)
{
	pid_t pid = krt_state_pid(st, "pid");
	unsigned long long start = 0, want = (unsigned long long)json_integer_value(
						  json_object_get(st, "starttime"));
	char letter = 0;
	if (pid <= 0 || proc_stat(pid, &start, &letter) < 0 || start != want || letter == 'Z' ||
	    letter == 'X')
		return "stopped";
	struct stat sb;
	if (fstatat(dfd, "started", &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return "created";
	/* the process itself (bwrap's child) ends a moment before bwrap does:
	 * once it is gone or a zombie, the container has stopped */
	json_t *info = read_json_at(dfd, "info.json");
	bool named = krt_state_pid(info, "child-pid") > 0;
	json_decref(info);
	if (named && (!bwrap_child(dfd, st, &letter) || letter == 'Z' || letter == 'X'))
		return "stopped";
	return "running";
}

/* The host pid of the container process (bwrap's child) once it runs,
 * else the pid of the one waiting to become bwrap. */
static pid_t process_pid(int dfd, json_t *st)
{
	char letter;
	pid_t child = bwrap_child(dfd, st, &letter);
	return child > 0 ? child : krt_state_pid(st, "pid");
}

/* Until bwrap's child has exec'd the bundle's process (its exe is no
 * longer bwrap's, the parent's): start lets bwrap go and returns, and
 * bwrap builds the container's mounts after (info.json names the child
 * once it is cloned), so an exec right after start (the CRI's first
 * ExecSync) would join a half-made mount namespace and find no command.
 * Bounded (10 s); a child that is gone ends the wait at once. */
static void await_setup(int dfd, json_t *st)
{
	pid_t bwrap = krt_state_pid(st, "pid");
	char path[64], parent_exe[PATH_MAX], exe[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)bwrap);
	ssize_t pn = readlink(path, parent_exe, sizeof(parent_exe) - 1);
	if (pn <= 0)
		return;
	parent_exe[pn] = '\0';
	for (int i = 0; i < 5000; i++) {
		pid_t child = process_pid(dfd, st);
		if (child != bwrap) {
			snprintf(path, sizeof(path), "/proc/%d/exe", (int)child);
			ssize_t n = readlink(path, exe, sizeof(exe) - 1);
			if (n < 0 || (exe[n] = '\0', strcmp(exe, parent_exe) != 0))
				return;
		}
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

static int print_state(int dfd, json_t *st)
{
	json_t *out = json_pack("{s:s,s:O,s:O,s:s,s:O,s:O,s:O,s:s,s:s}", "ociVersion", "1.0.0",
				"id", json_object_get(st, "id"), "pid", json_object_get(st, "pid"),
				"status", status_of(dfd, st), "bundle", json_object_get(st, "bundle"),
				"rootfs", json_object_get(st, "rootfs"), "created",
				json_object_get(st, "created"), "systemd-scope", "", "owner", "root");
	if (!out)
		return -1;
	if (strcmp(json_string_value(json_object_get(out, "status")), "stopped") == 0)
		json_object_set_new(out, "pid", json_integer(0));
	json_t *ann = json_object_get(st, "annotations");
	if (ann)
		json_object_set(out, "annotations", ann);
	json_dumpf(out, stdout, JSON_INDENT(4));
	putchar('\n');
	json_decref(out);
	return 0;
}

/* ------------------------------------------------------- the terminal */

/* A new pty: the master goes to the engine over --console-socket
 * (SCM_RIGHTS, as runc and crun send it), the slave is returned. */
static int console_pty(const char *sock_path, struct kis_error **err)
{
	_cleanup_close_ int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make a terminal");
	char name[64];
	if (ptsname_r(m, name, sizeof(name)) != 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "ptsname");
	int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", name);
	_cleanup_close_ int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(sock_path) >= sizeof(sa.sun_path)) {
		close(s);
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "--console-socket path too long");
	}
	strcpy(sa.sun_path, sock_path);
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = name, .iov_len = strlen(name)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &m, sizeof(int));
	if (sk < 0 || connect(sk, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    RETRY_EINTR(sendmsg(sk, &mh, 0)) < 0) {
		int e = errno;
		close(s);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot send the terminal to '%s'",
				     sock_path);
	}
	return s;
}

/* In a child: the slave as stdio and controlling terminal of a session of
 * its own. */
static int take_terminal(int slave)
{
	if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
		return -1;
	for (int fd = 0; fd < 3; fd++)
		if (dup2(slave, fd) < 0)
			return -1;
	return 0;
}

/* ------------------------------------------------------------ limits */

static const struct {
	const char *name;
	int res;
} rlimit_names[] = {
	{"RLIMIT_AS", RLIMIT_AS},           {"RLIMIT_CORE", RLIMIT_CORE},
	{"RLIMIT_CPU", RLIMIT_CPU},         {"RLIMIT_DATA", RLIMIT_DATA},
	{"RLIMIT_FSIZE", RLIMIT_FSIZE},     {"RLIMIT_LOCKS", RLIMIT_LOCKS},
	{"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK}, {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
	{"RLIMIT_NICE", RLIMIT_NICE},       {"RLIMIT_NOFILE", RLIMIT_NOFILE},
	{"RLIMIT_NPROC", RLIMIT_NPROC},     {"RLIMIT_RSS", RLIMIT_RSS},
	{"RLIMIT_RTPRIO", RLIMIT_RTPRIO},   {"RLIMIT_RTTIME", RLIMIT_RTTIME},
	{"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING}, {"RLIMIT_STACK", RLIMIT_STACK},
};

/* Parsed before fork: the child only calls setrlimit. */
struct rl_set {
	int res[ARRAY_SIZE(rlimit_names)];
	struct rlimit val[ARRAY_SIZE(rlimit_names)];
	size_t n;
};

static int parse_rlimits(json_t *rl, struct rl_set *out, struct kis_error **err)
{
	out->n = 0;
	json_t *r;
	size_t i;
	json_array_foreach(rl, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));
		size_t k;
		for (k = 0; t && k < ARRAY_SIZE(rlimit_names); k++)
			if (strcmp(t, rlimit_names[k].name) == 0)
				break;
		if (!t || k == ARRAY_SIZE(rlimit_names) || out->n == ARRAY_SIZE(out->res))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "process.rlimits[%zu].type '%s' is not known", i,
					     t ? t : "");
		out->res[out->n] = rlimit_names[k].res;
		out->val[out->n].rlim_cur = (rlim_t)json_integer_value(json_object_get(r, "soft"));
		out->val[out->n].rlim_max = (rlim_t)json_integer_value(json_object_get(r, "hard"));
		out->n++;
	}
	return 0;
}

static int apply_rlimits(const struct rl_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (setrlimit(s->res[i], &s->val[i]) < 0)
			return -1;
	return 0;
}

/* ---------------------------------------------------------- create */

static int write_pid_file(const char *path, pid_t pid, struct kis_error **err)
{
	if (!path)
		return 0;
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.kis-tmp", path) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "pid file");
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
				      0644);
	if (fd < 0 || dprintf(fd, "%d", (int)pid) < 0 || rename(tmp, path) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write pid file '%s'", path);
	return 0;
}

/* Can process.args[0] be executed in the bundle's root? bwrap's execvp
 * failing exits 1, where runc and crun (and a shell) give 127 for a
 * command not found, which podman and the shim report: it is looked up
 * here, as execvp(3) would (PATH from process.env, else /bin:/usr/bin),
 * each candidate resolved inside the rootfs (openat2 RESOLVE_IN_ROOT,
 * Linux 5.6). A candidate under a bind mount's destination counts as
 * found: the bind's source, not the rootfs, holds it. */
static bool command_found(json_t *config)
{
	json_t *proc = json_object_get(config, "process");
	const char *cmd = json_string_value(json_array_get(json_object_get(proc, "args"), 0));
	const char *root = json_string_value(json_object_get(json_object_get(config, "root"), "path"));
	if (!cmd || !*cmd || !root)
		return true; /* the plan's own checks say what is wrong */
	const char *path = "/bin:/usr/bin";
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(proc, "env"), i, e) {
		const char *v = json_string_value(e);
		if (v && strncmp(v, "PATH=", 5) == 0)
			path = v + 5;
	}
	_cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return true;
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	char cand[PATH_MAX];
	for (const char *p = strchr(cmd, '/') ? "" : path;;) {
		const char *end = strchrnul(p, ':');
		if (strchr(cmd, '/'))
			snprintf(cand, sizeof(cand), "%s%s%s", cmd[0] == '/' ? "" : (cwd ? cwd : "/"),
				 cmd[0] == '/' ? "" : "/", cmd);
		else
			snprintf(cand, sizeof(cand), "%.*s/%s", (int)(end - p), end == p ? "." : p, cmd);
		json_t *m;
		size_t k;
		json_array_foreach(json_object_get(config, "mounts"), k, m) {
			const char *d = json_string_value(json_object_get(m, "destination"));
			size_t n = d ? strlen(d) : 0;
			if (n > 1 && strncmp(cand, d, n) == 0 && (cand[n] == '/' || !cand[n]))
				return true;
		}
		struct open_how how = {.flags = O_PATH | O_CLOEXEC,
				       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
		int fd = (int)syscall(SYS_openat2, rfd, cand, &how, sizeof(how));
		struct stat st;
		bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
		if (fd >= 0)
			close(fd);
		if (ok)
			return true;
		if (strchr(cmd, '/') || !*end)
			return false;
		p = end + 1;
	}
}

/* A new container's state directory id in its tier's hfd, and with
 * want_fifo (create, not run) the "start" fifo open: O_RDWR, so it always
 * has a writer (this end) and the container process's read blocks until
 * start writes instead of seeing end-of-file. *made once the directory
 * is ours to remove on failure. */
int krt_tier_make(int hfd, const char *id, bool want_fifo, bool *made, int *dfd, int *fifo,
		  struct kis_error **err)
{
	if (mkdirat(hfd, id, 0700) < 0)
		return kis_error_set(err, errno == EEXIST ? KIS_E_DESTINATION_EXISTS : KIS_E_INTERNAL,
				     errno, "container '%s' exists", id);
	*made = true;
	*dfd = openat(hfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (*dfd < 0 || (want_fifo && mkfifoat(*dfd, "start", 0600) < 0))
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make the state of '%s'", id);
	if (want_fifo && (*fifo = openat(*dfd, "start", O_RDWR | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the start fifo");
	return 0;
}

/* start: a created container's process is let go (one byte down its
 * fifo) and marked started. */
int krt_tier_start(int dfd, json_t *st, const char *id, struct kis_error **err)
{
	if (strcmp(status_of(dfd, st), "created") != 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "container '%s' is not in the created state", id);
	int fd = openat(dfd, "start", O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	int mk = openat(dfd, "started", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int r = fd >= 0 && mk >= 0 && write(fd, "s", 1) == 1
			? 0
			: kis_error_set(err, KIS_E_INTERNAL, errno, "cannot start '%s'", id);
	if (fd >= 0)
		close(fd);
	if (mk >= 0)
		close(mk);
	return r;
}

/* A container's state directory removed from its tier's hfd, after
 * before(its fd) when given (the host tier ends its cgroup there). */
/* The container's own device nodes, in its state directory: bwrap's --dev
 * binds the host's (null, zero, full, random, urandom, tty), whose mode a
 * container's root (real uid 0 here, with CAP_FOWNER) could change for the
 * whole host. Bound over them (--dev-bind), a chmod changes only these. */
static const struct {
	const char *name;
	unsigned major, minor;
} own_devs[] = {{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7},
		{"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};

void krt_tier_remove(int hfd, const char *id, void (*before)(int dfd))
{
	_cleanup_close_ int dfd = openat(hfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd >= 0) {
		if (before)
			before(dfd);
		static const char *const files[] = {"state.json", "info.json", "start", "started",
						    ".state.json.tmp"};
		for (size_t i = 0; i < ARRAY_SIZE(files); i++)
			unlinkat(dfd, files[i], 0);
		/* the host tier's own device nodes (own_dev_nodes) */
		for (size_t i = 0; i < ARRAY_SIZE(own_devs); i++) {
			char rel[32];
			snprintf(rel, sizeof(rel), "dev/%s", own_devs[i].name);
			unlinkat(dfd, rel, 0);
		}
		unlinkat(dfd, "dev", AT_REMOVEDIR);
	}
	unlinkat(hfd, id, AT_REMOVEDIR);
}

/* Create's handshake with the container process it forks, both tiers'.
 * The child's half: its setup's outcome (0, or the index of what failed
 * in the parent's list), then with a fifo (create, not run) start's one
 * byte; _exit(125) where either fails. No allocation (after fork). */
void krt_child_ready(int sync_fd, int fail, int fifo)
{
	if (RETRY_EINTR(write(sync_fd, &fail, sizeof(fail))) != sizeof(fail) || fail)
		_exit(125);
	close(sync_fd);
	if (fifo >= 0) {
		char b;
		if (RETRY_EINTR(read(fifo, &b, 1)) != 1)
			_exit(125);
		close(fifo);
	}
}

/* The parent's half: what the child's setup said, named by what[fail]
 * (n entries, what[0] unused); a child that failed is reaped. */
int krt_child_setup(int sync_fd, pid_t pid, const char *const *what, size_t n,
		    struct kis_error **err)
{
	int fail = -1;
	ssize_t k = RETRY_EINTR(read(sync_fd, &fail, sizeof(fail)));
	close(sync_fd);
	if (k == sizeof(fail) && fail == 0)
		return 0;
	kis_error_set(err, KIS_E_INTERNAL, 0, "container setup failed: %s",
		      k == sizeof(fail) && fail > 0 && (size_t)fail < n ? what[fail] : "child died");
	waitpid(pid, NULL, 0);
	return -1;
}

/* A created container on record: st (taken) gets the config's annotations
 * (runtime-spec runtime.md "State", as crun shows them) and is written as
 * state.json, then the engine's --pid-file. Where either fails the
 * process goes (killed, reaped): nothing runs that state does not name. */
int krt_tier_record(int dfd, json_t *st, json_t *config, const char *pid_file, pid_t pid,
		    struct kis_error **err)
{
	json_t *ann = json_object_get(config, "annotations");
	if (st && json_object_size(ann))
		json_object_set(st, "annotations", ann);
	int r = 0;
	if (!st)
		r = kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot make the state");
	else if (write_json_at(dfd, "state.json", st, err) < 0 ||
		 write_pid_file(pid_file, pid, err) < 0)
		r = -1;
	json_decref(st);
	if (r < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return r;
}

/* run (not create) marks the container started; without --detach it
 * waits for the process and gives its status as a shell would (runc run
 * then deletes: the caller, on 1). 0: not waited for. */
int krt_tier_run_wait(int dfd, const struct krt_host_opts *o, pid_t pid, int *status)
{
	if (!o->run)
		return 0;
	int fdm = openat(dfd, "started", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fdm >= 0)
		close(fdm);
	if (o->detach)
		return 0;
	int ws = 0;
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	return 1;
}

static void end_cgroups(int dfd);

static void remove_state(int hfd, const char *id)
{
	krt_tier_remove(hfd, id, end_cgroups);
}

/* The container's group: memory and pids (kis's defaults when unset),
 * the CPU bandwidth and shares of linux.resources.cpu, at the bundle's
 * linux.cgroupsPath (host_plan.c) or as krt-<random> under kis's own
 * parent. Not kis_run_cgroup_open: that makes a run's group, with no CPU
 * of a bundle's and no place asked for. */
static int open_cgroup(int dfd, const char *cgname, const struct krt_host_plan *p,
		       struct kis_run_cgroup *rc, struct kis_error **err)
{
	memset(rc, 0, sizeof(*rc));
	rc->cpu_fd = -1;
	rc->limits = p->limits;
	struct kis_cgroup_opts o = {.at = p->cgroups_path, .cpu_quota_us = p->cpu_quota_us,
				    .cpu_period_us = p->cpu_period_us, .cpu_shares = p->cpu_shares};
	int r = krt_cgroup_make_noted(dfd, cgname, &rc->limits, &o, &rc->cg, err);
	if (r < 0) {
		/* no cgroup hierarchy: nothing binds memory and pids */
		if (*err && (*err)->code == KIS_E_PROFILE_UNSATISFIABLE) {
			_cleanup_free_ char *why = strdup((*err)->message ? (*err)->message : "");
			kis_error_free(*err);
			*err = NULL;
			return krt_host_refuse(err, "linux.resources: %s", why ? why : "no cgroup");
		}
		return -1;
	}
	rc->cpu_fd = kis_cgroup_cpu_fd(rc->cg);
	rc->has_cpu = rc->cpu_fd >= 0;
	return 0;
}

static void end_cgroups(int dfd)
{
	kis_host_cgroup_end(dfd);
	krt_cgroup_sweep_noted(dfd);
}

static int own_dev_nodes(const struct krt_globals *g, int dfd, const char *id,
			 struct kis_argv *a, struct kis_error **err)
{
	if (mkdirat(dfd, "dev", 0755) < 0 && errno != EEXIST)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make the device directory");
	for (size_t i = 0; i < ARRAY_SIZE(own_devs); i++) {
		char rel[32];
		snprintf(rel, sizeof(rel), "dev/%s", own_devs[i].name);
		if (mknodat(dfd, rel, S_IFCHR | 0666, makedev(own_devs[i].major, own_devs[i].minor)) < 0 &&
		    errno != EEXIST)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make /dev/%s",
					     own_devs[i].name);
		/* mknod is subject to the umask */
		if (fchmodat(dfd, rel, 0666, 0) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "/dev/%s", own_devs[i].name);
		_cleanup_free_ char *src = NULL, *dst = NULL;
		if (asprintf(&src, "%s/%s/%s/%s", g->root, HOST_DIR, id, rel) < 0 ||
		    asprintf(&dst, "/%s", rel) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "device nodes");
		TRY(krt_argv_push(a, "--dev-bind", err));
		TRY(krt_argv_push2(a, src, dst, err));
	}
	return 0;
}

/* lo up in a network namespace of the container's own, as bwrap's
 * --unshare-net did (a new namespace's lo is down, netdevice(7)). In the
 * forked child: no allocation. */
static int loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr = {0};
	strcpy(ifr.ifr_name, "lo");
	int r = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP;
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	return r;
}

static bool has_dev(const struct kis_argv *a)
{
	for (size_t i = 0; i + 1 < a->n; i++)
		if (strcmp(a->v[i], "--dev") == 0 && strcmp(a->v[i + 1], "/dev") == 0)
			return true;
	return false;
}

int krt_host_create(const struct krt_globals *g, const struct krt_model *m, bool had_seccomp,
		    const char *bundle, const char *id, const struct krt_host_opts *o,
		    struct kis_error **err)
{
	struct krt_host_plan p;
	struct kis_run_cgroup rc = {0};
	json_t *config = m->doc;
	int r = krt_host_plan(m, had_seccomp, &p, err);
	_cleanup_close_ int hfd = -1, dfd = -1, fifo = -1, sc = -1, info = -1, tty = -1;
	struct rl_set rls;
	bool made = false;
	if (r < 0 || (r = krt_valid_id(id, err)) < 0 || (r = parse_rlimits(p.rlimits, &rls, err)) < 0)
		goto out;
	r = -1;
	if (p.terminal && !o->console_socket) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
			      "process.terminal needs --console-socket");
		goto out;
	}
	if ((hfd = open_host_root(g, true, err)) < 0)
		goto out;
	if (krt_tier_make(hfd, id, !o->run, &made, &dfd, &fifo, err) < 0)
		goto out;
	info = openat(dfd, "info.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (info < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make info.json");
		goto out;
	}
	char cgname[32];
	if (krt_cgroup_name(cgname, sizeof(cgname), err) < 0 ||
	    open_cgroup(dfd, cgname, &p, &rc, err) < 0)
		goto out;
	struct kis_seccomp_opts so = {.net = p.net, .allow_sysv_ipc = true};
	if (kis_host_seccomp_fd(&so, &sc, err) < 0)
		goto out;
	if (p.terminal && (tty = console_pty(o->console_socket, err)) < 0)
		goto out;
	if (has_dev(&p.bwrap) && own_dev_nodes(g, dfd, id, &p.bwrap, err) < 0)
		goto out;
	/* bwrap's argv, complete: the fds keep their numbers across exec */
	char num[16];
	snprintf(num, sizeof(num), "%d", sc);
	if (krt_argv_push2(&p.bwrap, "--seccomp", num, err) < 0)
		goto out;
	snprintf(num, sizeof(num), "%d", info);
	if (krt_argv_push2(&p.bwrap, "--info-fd", num, err) < 0 || krt_argv_push(&p.bwrap, "--", err) < 0)
		goto out;
	json_t *a;
	size_t i;
	json_array_foreach(p.args, i, a)
		if (krt_argv_push(&p.bwrap, json_string_value(a) ? json_string_value(a) : "", err) < 0)
			goto out;
	char created[KRT_STAMP_LEN];
	krt_now(created);
	char bundle_abs[PATH_MAX];
	if (!realpath(bundle, bundle_abs)) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, errno, "cannot resolve '%s'", bundle);
		goto out;
	}
	static const char *const bwrap_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	bool found = command_found(config);
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "pipe");
		goto out;
	}
	pid_t pid = fork();
	if (pid < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "fork");
		close(sync[0]);
		close(sync[1]);
		goto out;
	}
	if (pid == 0) {
		/* the container process-to-be: nothing here allocates */
		close(sync[0]);
		int fail = 0;
		if (kis_run_cgroup_join(&rc, NULL) < 0)
			fail = 1;
		if (!fail && tty >= 0 && take_terminal(tty) < 0)
			fail = 2;
		if (!fail && apply_rlimits(&rls) < 0)
			fail = 3;
		if (!fail && p.has_oom_adj) {
			int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
			if (fd < 0 || dprintf(fd, "%d", p.oom_score_adj) < 0)
				fail = 4;
			if (fd >= 0)
				close(fd);
		}
		/* the container's groups, not the runtime's: setgroups(2)
		 * before anything of the container's can run */
		gid_t g0 = 0;
		if (!fail && setgroups(p.groups_root ? 1 : 0, &g0) < 0)
			fail = 6;
		/* the namespaces bwrap does not make (host_plan.c,
		 * plan_namespaces): the pod's joined through the model's held
		 * fds, then this container's own, so that this pid (bwrap's,
		 * the engine's) is in them */
		for (size_t k = 0; !fail && k < p.n_join; k++)
			if (setns(p.join_fd[k], p.join_clone[k]) < 0)
				fail = 7;
		if (!fail && p.unshare && unshare(p.unshare) < 0)
			fail = 8;
		if (!fail && p.hostname && (p.unshare & CLONE_NEWUTS) &&
		    sethostname(p.hostname, strlen(p.hostname)) < 0)
			fail = 9;
		if (!fail && p.lo_up && loopback_up() < 0)
			fail = 10;
		/* bwrap passes every inherited fd on (bubblewrap(1)): only the
		 * engine's --preserve-fds ones, 3..N+2, reach the container */
		if (!fail && syscall(SYS_close_range, 3 + (unsigned)o->preserve_fds, ~0U,
				     CLOSE_RANGE_CLOEXEC) < 0)
			fail = 5;
		int fl = fail ? 0 : fcntl(sc, F_GETFD);
		if (!fail && (fcntl(sc, F_SETFD, fl & ~FD_CLOEXEC) < 0 ||
			      fcntl(info, F_SETFD, fl & ~FD_CLOEXEC) < 0 ||
			      fcntl(m->root.fd, F_SETFD, 0) < 0))
			fail = 5;
		/* the held root and binds, for bwrap's --bind-fd (it closes
		 * each once bound) */
		for (size_t b = 0; !fail && b < m->n_binds; b++)
			if (m->binds[b].fd >= 0 && fcntl(m->binds[b].fd, F_SETFD, 0) < 0)
				fail = 5;
		/* tell create the setup is done (or failed), then wait for start */
		krt_child_ready(sync[1], fail, fifo);
		if (!found) {
			/* at start, as crun reports it: the exit status a shell gives */
			dprintf(2, "kis-runtime: exec '%s': No such file or directory\n",
				json_string_value(json_array_get(p.args, 0)));
			_exit(127);
		}
		execve(p.bwrap.v[0], p.bwrap.v, (char *const *)bwrap_env);
		_exit(127);
	}
	close(sync[1]);
	static const char *const what[] = {"", "joining the cgroup", "taking the terminal",
					   "setting process.rlimits", "oomScoreAdj",
					   "passing fds to bwrap", "setting process.user's groups",
					   "joining the namespaces linux.namespaces names by path",
					   "making the ipc, uts and network namespaces",
					   "setting the hostname", "bringing lo up"};
	if (krt_child_setup(sync[0], pid, what, ARRAY_SIZE(what), err) < 0)
		goto out;
	unsigned long long start = 0;
	char letter;
	proc_stat(pid, &start, &letter);
	/* the container's process is the base of an exec with arguments, as
	 * runc's exec takes env, cwd and capabilities from the container's */
	json_t *st = json_pack("{s:s,s:i,s:I,s:s,s:s,s:s,s:i,s:O}", "id", id, "pid", (int)pid,
			       "starttime", (json_int_t)start, "bundle", bundle_abs, "rootfs",
			       json_string_value(json_object_get(json_object_get(config, "root"),
								 "path")),
			       "created", created, "net", (int)p.net, "process",
			       json_object_get(config, "process"));
	/* the cgroup on record first: delete ends it */
	if (kis_host_cgroup_save(dfd, &rc, err) < 0) {
		json_decref(st);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto out;
	}
	if (krt_tier_record(dfd, st, config, o->pid_file, pid, err) < 0)
		goto out;
	made = false; /* the container exists now */
	r = 0;
	/* run without --detach waits and passes the status on, then deletes
	 * as runc run does; with --detach it is create + start */
	if (krt_tier_run_wait(dfd, o, pid, &r))
		remove_state(hfd, id);
out:
	if (made && hfd >= 0) {
		if (rc.cg)
			kis_run_cgroup_close(&rc);
		remove_state(hfd, id);
	} else if (rc.cg) {
		kis_run_cgroup_close(&rc);
	}
	krt_host_plan_release(&p);
	return r;
}

/* ------------------------------------------------ the other verbs */

/* A tier's container: its directory and state.json, or not_found; a
 * state whose id, pid or start time is not one create wrote is refused
 * (krt_state_check), whatever the verb: nothing is signalled or removed
 * by it. */
int krt_tier_load(const struct krt_globals *g, const char *dir, const char *id, int *dfd,
		  json_t **st, struct kis_error **err)
{
	*dfd = krt_tier_container(g, dir, id);
	*st = *dfd >= 0 ? read_json_at(*dfd, "state.json") : NULL;
	int r = *st ? krt_state_check(*st, id, NULL, 0, err)
		    : kis_error_set(err, KIS_E_NOT_FOUND, 0, "container '%s' does not exist",
				    id ? id : "");
	if (r < 0) {
		json_decref(*st);
		*st = NULL;
		if (*dfd >= 0)
			close(*dfd);
		*dfd = -1;
	}
	return r;
}

/* ... and the host tier's own field: "net", the exec's seccomp filter's
 * network mode (enum kis_net_mode), absent in none but the strictest. */
static int load(const struct krt_globals *g, const char *id, int *dfd, json_t **st,
		struct kis_error **err)
{
	TRY(krt_tier_load(g, HOST_DIR, id, dfd, st, err));
	json_t *net = json_object_get(*st, "net");
	if (!net || (json_is_integer(net) && json_integer_value(net) >= 0 &&
		     json_integer_value(net) < KIS_NET__COUNT))
		return 0;
	json_decref(*st);
	*st = NULL;
	close(*dfd);
	*dfd = -1;
	return kis_error_set(err, KIS_E_INVALID_ID, 0,
			     "container '%s': state.json's 'net' is not a network mode; nothing "
			     "is done by it", id);
}

/* cgroup.procs of pid's pids group (v1) or its group (v2), from
 * /proc/PID/cgroup as this (the host's) cgroup namespace sees it. */
static int cgroup_procs_path(pid_t pid, char *out, size_t len)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	bool v2 = kis_cgroup_detect() == KIS_CG_V2;
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || strstr(c2, "/.."))
			continue;
		*c2 = '\0';
		if (!v2 && strcmp(c1 + 1, "pids") == 0) {
			snprintf(out, len, "/sys/fs/cgroup/pids%s/cgroup.procs", c2 + 1);
			return 0;
		}
		if (v2 && c1[1] == '\0') {
			snprintf(out, len, "/sys/fs/cgroup%s/cgroup.procs", c2 + 1);
			return 0;
		}
	}
	return -1;
}

static int parse_signal(const char *s, int *out)
{
	static const struct {
		const char *n;
		int s;
	} sigs[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
		    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"STOP", SIGSTOP},
		    {"CONT", SIGCONT}, {"WINCH", SIGWINCH}};
	if (!s) {
		*out = SIGTERM;
		return 0;
	}
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (end && *end == '\0' && v > 0 && v < 65) {
		*out = (int)v;
		return 0;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		if (strcasecmp(s, sigs[i].n) == 0) {
			*out = sigs[i].s;
			return 0;
		}
	return -1;
}

static int signal_pid(pid_t pid, int sig)
{
	/* by pidfd: the pid cannot be another process's by the time it lands */
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return -1;
	int r = (int)syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0);
	close(pfd);
	return r;
}

static int host_kill(int dfd, json_t *st, const char *id, const char *signame, bool all,
		     struct kis_error **err)
{
	int sig;
	if (parse_signal(signame, &sig) < 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "unknown signal '%s'", signame);
	const char *status = status_of(dfd, st);
	/* kill --all of a stopped container is no error, as runc's and
	 * crun's: the containerd shim sends it (SIGKILL) on every task
	 * delete, after the exit; whatever is left in the cgroup goes at
	 * delete (kis_host_cgroup_end). Without --all the message holds
	 * "container not running", which the shim maps to "process already
	 * finished" (runc's wording). */
	if (strcmp(status, "stopped") == 0 && all)
		return 0;
	if (strcmp(status, "stopped") == 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "cannot signal '%s': container not running", id);
	pid_t target = strcmp(status, "created") == 0
			       ? krt_state_pid(st, "pid")
			       : process_pid(dfd, st);
	if (all) {
		/* --all: every process of the container (its cgroup's members) */
		char procs[PATH_MAX], line[64];
		_cleanup_fclose_ FILE *pf =
			cgroup_procs_path(target, procs, sizeof(procs)) == 0 ? fopen(procs, "re") : NULL;
		while (pf && fgets(line, sizeof(line), pf))
			signal_pid((pid_t)strtol(line, NULL, 10), sig);
	}
	if (signal_pid(target, sig) < 0 && errno != ESRCH)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot signal '%s'", id);
	return 0;
}

static int host_delete(const struct krt_globals *g, int dfd, json_t *st, const char *id,
		       bool force, struct kis_error **err)
{
	const char *status = status_of(dfd, st);
	/* a created container is deleted without --force, as runc and crun
	 * do (its process never ran the bundle's); a running one is not */
	if (strcmp(status, "running") == 0 && !force)
		return kis_error_set(err, KIS_E_BUSY, 0,
				     "container '%s' is %s: stop it or delete --force", id, status);
	if (strcmp(status, "stopped") != 0) {
		signal_pid(process_pid(dfd, st), SIGKILL);
		signal_pid(krt_state_pid(st, "pid"), SIGKILL);
	}
	_cleanup_close_ int hfd = open_host_root(g, false, NULL);
	if (hfd >= 0)
		remove_state(hfd, id); /* kis_host_cgroup_end kills what is left */
	return 0;
}

static int host_ps(int dfd, json_t *st, bool json_fmt, struct kis_error **err)
{
	char procs[PATH_MAX], line[64];
	_cleanup_fclose_ FILE *pf = cgroup_procs_path(process_pid(dfd, st), procs, sizeof(procs)) == 0
					    ? fopen(procs, "re")
					    : NULL;
	json_t *arr = json_array();
	while (arr && pf && fgets(line, sizeof(line), pf))
		json_array_append_new(arr, json_integer(strtol(line, NULL, 10)));
	if (!arr)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "ps");
	if (json_fmt) {
		json_dumpf(arr, stdout, 0);
		putchar('\n');
	} else {
		printf("PID\n");
		size_t i;
		json_t *v;
		json_array_foreach(arr, i, v)
			printf("%lld\n", (long long)json_integer_value(v));
	}
	json_decref(arr);
	return 0;
}

int krt_host_verb(const struct krt_globals *g, int argc, char **argv, struct kis_error **err)
{
	const char *verb = argv[0];
	struct krt_verb_args va;
	krt_verb_parse(argc, argv, &va);
	TRY(krt_verb_check(verb, &va, err));
	const char *id = va.id, *extra = va.extra;
	bool force = va.force, all = va.all, json_fmt = va.json;
	int dfd;
	json_t *st;
	if (load(g, id ? id : "", &dfd, &st, err) < 0) {
		/* A create killed before its state.json (its directory, and
		 * perhaps groups NOTED, are there): delete removes them, and
		 * with --force says no more, as runc's delete does for an
		 * aborted create. */
		_cleanup_close_ int hfd = -1;
		if (strcmp(verb, "delete") || (*err)->code != KIS_E_NOT_FOUND ||
		    !krt_host_owns(g, id) ||
		    (hfd = open_host_root(g, false, NULL)) < 0)
			return -1;
		kis_debug("container '%s': a create that did not finish, removed", id);
		remove_state(hfd, id);
		if (!force)
			return -1;
		kis_error_free(*err);
		*err = NULL;
		return 0;
	}
	int r;
	if (strcmp(verb, "state") == 0) {
		r = print_state(dfd, st) < 0 ? kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "state") : 0;
	} else if (strcmp(verb, "start") == 0) {
		r = krt_tier_start(dfd, st, id, err);
	} else if (strcmp(verb, "kill") == 0) {
		r = host_kill(dfd, st, id, extra, all, err);
	} else if (strcmp(verb, "delete") == 0) {
		r = host_delete(g, dfd, st, id, force, err);
	} else if (strcmp(verb, "ps") == 0) {
		r = host_ps(dfd, st, json_fmt, err);
	} else {
		r = kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				  "%s: not supported at run.kis.tier 'host'", verb);
	}
	close(dfd);
	json_decref(st);
	return r;
}

/* ------------------------------------------------------------ exec */

json_t *krt_host_base_process(const struct krt_globals *g, const char *id)
{
	_cleanup_close_ int dfd = open_container(g, id);
	json_t *st = dfd >= 0 ? read_json_at(dfd, "state.json") : NULL;
	json_t *p = json_deep_copy(json_object_get(st, "process"));
	json_decref(st);
	return p;
}

static int cap_number(const char *name)
{
	static const char *const names[] = {
		"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID",
		"SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST",
		"NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO",
		"SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
		"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE",
		"AUDIT_CONTROL", "SETFCAP"};
	if (strncasecmp(name, "CAP_", 4) == 0)
		name += 4;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcasecmp(name, names[i]) == 0)
			return (int)i;
	return -1;
}

int krt_host_exec(const struct krt_globals *g, const char *id, json_t *proc,
		  const struct krt_host_opts *o, struct kis_error **err)
{
	int dfd;
	json_t *st;
	TRY(load(g, id, &dfd, &st, err));
	_cleanup_close_ int d = dfd;
	_cleanup_close_ int pfd = -1, sc = -1, tty = -1;
	int r = -1;
	char **argv = NULL, **envp = NULL;
	size_t na = 0, ne = 0;
	struct rl_set rls = {0};
	if (strcmp(status_of(dfd, st), "running") != 0) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "container '%s' is not running", id);
		goto out;
	}
	await_setup(dfd, st);
	pid_t target = process_pid(dfd, st);
	pfd = (int)syscall(SYS_pidfd_open, target, 0);
	if (pfd < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot reach the container's process");
		goto out;
	}
	/* the same capability rules as create's: the bounding set is the one */
	uint64_t keep = 0;
	json_t *c;
	size_t i;
	json_array_foreach(json_object_get(json_object_get(proc, "capabilities"), "bounding"), i, c) {
		int n = cap_number(json_string_value(c) ? json_string_value(c) : "");
		if (n < 0) {
			kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "unknown capability '%s'",
				      json_string_value(c));
			goto out;
		}
		keep |= 1ull << n;
	}
	json_t *args = json_object_get(proc, "args"), *env = json_object_get(proc, "env");
	argv = calloc(json_array_size(args) + 1, sizeof(*argv));
	envp = calloc(json_array_size(env) + 1, sizeof(*envp));
	if (!argv || !envp || parse_rlimits(json_object_get(proc, "rlimits"), &rls, err) < 0) {
		if (!*err)
			kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "exec");
		goto out;
	}
	json_array_foreach(args, i, c)
		argv[na++] = strdup(json_string_value(c) ? json_string_value(c) : "");
	json_array_foreach(env, i, c)
		envp[ne++] = strdup(json_string_value(c) ? json_string_value(c) : "");
	if (!na) {
		kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "process.args is empty");
		goto out;
	}
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	json_t *user = json_object_get(proc, "user");
	if (json_integer_value(json_object_get(user, "uid")) ||
	    json_integer_value(json_object_get(user, "gid"))) {
		krt_host_refuse(err, "process.user: the host tier runs the process as root only");
		goto out;
	}
	/* groups as create's (host_plan.c): 0 only, and exactly these */
	size_t ngroups = 0;
	json_array_foreach(json_object_get(user, "additionalGids"), i, c) {
		if (!json_is_integer(c) || json_integer_value(c) != 0) {
			krt_host_refuse(err, "process.user.additionalGids[%zu]: the host tier gives "
				   "the process group 0 only", i);
			goto out;
		}
		ngroups = 1;
	}
	json_t *stj = st;
	struct kis_seccomp_opts so = {
		.net = (enum kis_net_mode)json_integer_value(json_object_get(stj, "net")),
		.allow_sysv_ipc = true};
	if (kis_host_seccomp_fd(&so, &sc, err) < 0)
		goto out;
	bool terminal = json_is_true(json_object_get(proc, "terminal"));
	if (terminal && !o->console_socket) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "a terminal needs --console-socket");
		goto out;
	}
	if (terminal && (tty = console_pty(o->console_socket, err)) < 0)
		goto out;
	/* the container's cgroup: read now, joined in the child. v1: the
	 * hierarchies its group is in (memory, pids, and the cpu and cpuacct
	 * ones: an exec is bound by the container's CPU quota and counted in
	 * its usage, as runc's exec is) */
	static const char *const v1_joined[] = {"pids", "memory", "cpu", "cpuacct", "cpu,cpuacct"};
	char procs[4][PATH_MAX];
	size_t np = 0;
	{
		char path[64], line[1024];
		snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)target);
		_cleanup_fclose_ FILE *f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f) && np < ARRAY_SIZE(procs)) {
			line[strcspn(line, "\n")] = '\0';
			char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
			if (!c2)
				continue;
			*c2 = '\0';
			bool joined = false;
			for (size_t j = 0; j < ARRAY_SIZE(v1_joined); j++)
				joined |= strcmp(c1 + 1, v1_joined[j]) == 0;
			if (joined)
				snprintf(procs[np++], PATH_MAX, "/sys/fs/cgroup/%s%s/cgroup.procs",
					 c1 + 1, c2 + 1);
			else if (c1[1] == '\0' && kis_cgroup_detect() == KIS_CG_V2)
				snprintf(procs[np++], PATH_MAX, "/sys/fs/cgroup%s/cgroup.procs",
					 c2 + 1);
		}
	}
	/* opened here: /sys/fs/cgroup is not in the container's mount namespace */
	int cgfd[ARRAY_SIZE(procs)] = {-1, -1, -1, -1};
	for (size_t k = 0; k < np; k++)
		cgfd[k] = open(procs[k], O_WRONLY | O_CLOEXEC);
	/* The namespaces are joined in a child, never here: this process
	 * writes --pid-file, a path in the engine's mount namespace. A new pid
	 * namespace takes effect for children only (setns(2)), so that child
	 * forks the process and reports its pid; with --detach it then exits
	 * and the process is the engine's subreaper's to collect, as runc's. */
	/* the network namespace too, always: a pod's (joined by path) takes
	 * kis's filter for the host's network (so.net), and joining the
	 * namespace one is already in is no error */
	int nsflags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID | CLONE_NEWCGROUP |
		      CLONE_NEWNET;
	int rep[2];
	if (pipe2(rep, O_CLOEXEC) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "pipe");
		goto out;
	}
	pid_t mid = fork();
	if (mid < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "fork");
		close(rep[0]);
		close(rep[1]);
		goto out;
	}
	if (mid == 0) {
		close(rep[0]);
		pid_t got = -1;
		/* Not dumpable, and so its child in the container's pid
		 * namespace neither (fork keeps it, execve(2) of the command
		 * restores it): the container's root, uid 0 with no
		 * CAP_SYS_PTRACE, then cannot reach that child's fds (the state
		 * directory's, the cgroups') or its /proc/PID/exe (this binary)
		 * before it has exec'd (proc(5), ptrace access mode checks;
		 * CVE-2019-5736's kind of overwrite). */
		if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || setns(pfd, nsflags) < 0) {
			int e = errno;
			(void)!write(rep[1], &got, sizeof(got));
			dprintf(2, "kis-runtime: exec: joining the container's namespaces: %s\n",
				strerror(e));
			_exit(125);
		}
		pid_t pid = fork();
		if (pid != 0) {
			(void)!write(rep[1], &pid, sizeof(pid));
			if (pid < 0 || o->detach)
				_exit(pid < 0 ? 125 : 0);
			int ws = 0;
			while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
				;
			_exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
		}
		close(rep[1]);
		/* the exec'd process-to-be; a failed step is named on its
		 * stderr (the engine's) and is exit 125, never the command's */
		const char *step = NULL;
		for (size_t k = 0; !step && k < np; k++)
			if (cgfd[k] < 0 || write(cgfd[k], "0", 1) != 1)
				step = "joining the container's cgroup";
		if (!step && tty >= 0 && take_terminal(tty) < 0)
			step = "taking the terminal";
		gid_t g0 = 0;
		if (!step && setgroups(ngroups, &g0) < 0)
			step = "setting process.user's groups";
		/* Closed, not only close-on-exec, before anything resolves a
		 * path of the container's: every fd of ours but the seccomp
		 * program, moved just above the caller's preserved ones. */
		int keep_fd = 3 + o->preserve_fds;
		if (!step && sc != keep_fd) {
			if (dup3(sc, keep_fd, O_CLOEXEC) < 0)
				step = "keeping the seccomp program";
			else
				sc = keep_fd;
		}
		if (!step && syscall(SYS_close_range, (unsigned)keep_fd + 1, ~0U, 0) < 0)
			step = "closing inherited fds";
		if (!step && !terminal)
			setsid();
		if (!step && apply_rlimits(&rls) < 0)
			step = "process.rlimits";
		/* The working directory in the container's tree (its root is
		 * ours since setns(2)), never through a /proc magic link
		 * (openat2(2) RESOLVE_NO_MAGICLINKS): /proc/self/fd/N of a
		 * preserved fd could be a directory of the caller's. */
		if (!step) {
			struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
					       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
			int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			int cd = root < 0 ? -1 : (int)syscall(SYS_openat2, root,
							      cwd && *cwd ? cwd : "/", &how,
							      sizeof(how));
			if (cd < 0 || fchdir(cd) < 0)
				step = "process.cwd";
			if (cd >= 0)
				close(cd);
			if (root >= 0)
				close(root);
		}
		for (int n = 0; !step && n <= CAP_LAST_CAP; n++)
			if (!(keep & (1ull << n)) && prctl(PR_CAPBSET_DROP, n, 0, 0, 0) < 0 &&
			    errno != EINVAL)
				step = "dropping capabilities";
		struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct cd[2] = {
			{.effective = (uint32_t)keep, .permitted = (uint32_t)keep},
			{.effective = (uint32_t)(keep >> 32), .permitted = (uint32_t)(keep >> 32)}};
		if (!step && syscall(SYS_capset, &h, cd) < 0)
			step = "setting capabilities";
		if (!step && kis_seccomp_load_bpf_fd(sc, NULL) < 0) /* sets no_new_privs */
			step = "loading seccomp";
		if (step) {
			dprintf(2, "kis-runtime: exec: %s: %s\n", step, strerror(errno));
			_exit(125);
		}
		environ = envp;
		execvp(argv[0], argv);
		int e = errno;
		dprintf(2, "kis-runtime: exec '%s': %s\n", argv[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	close(rep[1]);
	for (size_t k = 0; k < np; k++)
		if (cgfd[k] >= 0)
			close(cgfd[k]);
	pid_t pid = -1;
	ssize_t n = RETRY_EINTR(read(rep[0], &pid, sizeof(pid)));
	close(rep[0]);
	int ws = 0;
	if (n != sizeof(pid) || pid <= 0) {
		while (waitpid(mid, &ws, 0) < 0 && errno == EINTR)
			;
		kis_error_set(err, KIS_E_INTERNAL, 0, "exec into '%s' failed", id);
		goto out;
	}
	if (o->pid_file && write_pid_file(o->pid_file, pid, err) < 0) {
		kill(pid, SIGKILL);
		while (waitpid(mid, &ws, 0) < 0 && errno == EINTR)
			;
		goto out;
	}
	while (waitpid(mid, &ws, 0) < 0 && errno == EINTR)
		;
	r = o->detach ? 0 : WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
out:
	for (size_t k = 0; argv && k < na; k++)
		free(argv[k]);
	for (size_t k = 0; envp && k < ne; k++)
		free(envp[k]);
	free(argv);
	free(envp);
	json_decref(st);
	return r;
}

/* --------------------------------- shared with the microvm tier */


json_t *krt_read_json_at(int dfd, const char *name)
{
	return read_json_at(dfd, name);
}

int krt_write_json_at(int dfd, const char *name, json_t *doc, struct kis_error **err)
{
	return write_json_at(dfd, name, doc, err);
}

int krt_proc_stat(pid_t pid, unsigned long long *start, char *st)
{
	return proc_stat(pid, start, st);
}

const char *krt_status_of(int dfd, json_t *st)
{
	return status_of(dfd, st);
}

int krt_print_state(int dfd, json_t *st)
{
	return print_state(dfd, st);
}

int krt_console_pty(const char *sock_path, struct kis_error **err)
{
	return console_pty(sock_path, err);
}

int krt_take_terminal(int slave)
{
	return take_terminal(slave);
}

int krt_write_pid_file(const char *path, pid_t pid, struct kis_error **err)
{
	return write_pid_file(path, pid, err);
}

int krt_parse_signal(const char *s, int *out)
{
	return parse_signal(s, out);
}

int krt_signal_pid(pid_t pid, int sig)
{
	return signal_pid(pid, sig);
}
