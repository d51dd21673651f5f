/* SPDX-License-Identifier: MIT */
/* The benchmark harness: start-to-exit and throughput of commands, each run
 * as fork, exec, wait, interleaved so that the load of this shared machine
 * falls on every command alike; the first command is the reference.
 *
 *   startup N 'label=cmd args' ...            N runs each: median, p90, ratio
 *   startup -c 1,2,4,8 -t SECS [-r ROUNDS] [-o FILE] 'label=cmd' ...
 *                                             runs per second at each number
 *                                             of parallel clients
 *
 * A reference has to do the work of the thing it is compared with and no
 * more. Where kis prepares a mechanism in a way a shell cannot reproduce
 * without adding processes of its own (an unshare(1), a sh), the harness
 * does the same steps itself, written after the engine's code, chosen by
 * words before the command (each word starts with '@'):
 *   @crunns        in the child: what src/backends/oci_runtime.c does before
 *                  it execs crun: own process group, parent-death signal,
 *                  stdio on /dev/null, and on a v1/v2 hybrid a private mount
 *                  namespace (a slave of ours) without the v2 mount, which
 *                  crun 1.8 refuses
 *   @userns=FIRST  in the harness: a user namespace mapping 0..65535 onto
 *                  FIRST.., owned by FIRST, made by a holder child as
 *                  src/confine/userns.c does; its fd replaces the "FD" after
 *                  --userns; @userns=FIRST,fd=N also places it at fd N in
 *                  the child, for a config.json that names the namespace
 *                  by path (/proc/self/fd/N: the container tier's crun
 *                  joins kis's by /proc/<engine pid>/fd/M)
 *   @seccomp=FILE  in the harness: the compiled program (kis's own cache file)
 *                  copied into a sealed memfd, as src/backends/host_common.c
 *                  does; its fd replaces the "FD" after --seccomp
 *   @stage=AGENT   in the child: a private mount namespace, the small tmpfs
 *                  on /run and AGENT bound at /run/kis-agent (the
 *                  bubblewrap backend's bw_child)
 *   @drop=FIRST    in the child, last: no groups, uid and gid FIRST
 *   (@crunns and @stage also give the command the engine's fixed environment
 *   for crun and bwrap: PATH alone)
 *   @cgroup        a leaf cgroup per run as src/confine/cgroup.c makes one
 *                  (memory 1 GiB with memsw, pids 256, cpuacct where it is
 *                  mounted alone; v2: memory.max, swap 0, pids.max), joined
 *                  by the child (v1: "0" into tasks), removed after the run
 * and "{}" in an argument becomes a token unique to the run (pid-count), for
 * container names.
 *
 * CPU is read from a meter cgroup the harness makes for itself (v1:
 * cpuacct.usage of <own cpuacct group>/kis-bench-meter-PID; v2: usage_usec
 * in cpu.stat of kis-bench-meter-PID under the nearest group delegating
 * memory and pids), which every run's child joins before it execs: both
 * versions charge a task's time to every ancestor of its group
 * (cgroup-v1/cpuacct.rst, cgroup-v2.rst "cpu.stat"), so the figure holds
 * the whole tree a run started, whoever reaped it and whatever groups the
 * run made below, removed or not. Without a meter (not root, no cgroup
 * file system) it falls back to wait4's rusage, which loses the time of a
 * process killed while its own children were unreaped. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

struct cmd {
	const char *label;
	char **argv;
	int argc;
	bool crunns, stage, cgroup;
	unsigned userns_first, drop_first; /* 0: not asked */
	int userns_fixed; /* > 0: the namespace also at this fd in the child */
	const char *seccomp_file, *agent;
	int userns_at, seccomp_at; /* argv index of the "FD" to replace, or -1 */
	int token_at[8];
	int n_tokens;
};

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void die(const char *what)
{
	fprintf(stderr, "bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* "label=[@word ...] word word ..." into a command (no shell). */
static bool parse(char *spec, struct cmd *c)
{
	char *eq = strchr(spec, '=');
	if (!eq)
		return false;
	*eq = '\0';
	memset(c, 0, sizeof(*c));
	c->label = spec;
	c->userns_at = c->seccomp_at = -1;
	c->argv = calloc(512, sizeof(*c->argv));
	if (!c->argv)
		return false;
	for (char *t = strtok(eq + 1, " "); t && c->argc < 511; t = strtok(NULL, " ")) {
		if (c->argc == 0 && t[0] == '@') {
			if (!strcmp(t, "@crunns"))
				c->crunns = true;
			else if (!strcmp(t, "@cgroup"))
				c->cgroup = true;
			else if (!strncmp(t, "@userns=", 8)) {
				char *end;
				c->userns_first = (unsigned)strtoul(t + 8, &end, 10);
				if (!strncmp(end, ",fd=", 4))
					c->userns_fixed = atoi(end + 4);
			}
			else if (!strncmp(t, "@drop=", 6))
				c->drop_first = (unsigned)strtoul(t + 6, NULL, 10);
			else if (!strncmp(t, "@seccomp=", 9))
				c->seccomp_file = t + 9;
			else if (!strncmp(t, "@stage=", 7)) {
				c->stage = true;
				c->agent = t + 7;
			} else {
				fprintf(stderr, "bench: unknown recipe '%s'\n", t);
				return false;
			}
			continue;
		}
		if (!strcmp(t, "FD") && c->argc > 0 && !strcmp(c->argv[c->argc - 1], "--userns"))
			c->userns_at = c->argc;
		if (!strcmp(t, "FD") && c->argc > 0 && !strcmp(c->argv[c->argc - 1], "--seccomp"))
			c->seccomp_at = c->argc;
		if (strstr(t, "{}") && c->n_tokens < 8)
			c->token_at[c->n_tokens++] = c->argc;
		c->argv[c->argc++] = t;
	}
	return c->argc > 0;
}

/* ---- the recipes ---- */

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* userns.c's holder: owned by first, maps written from here. */
static int make_userns(unsigned first)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		die("socketpair");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char b;
		close(sp[0]);
		if (setgroups(0, NULL) < 0 || setresgid(first, first, first) < 0 ||
		    setresuid(first, first, first) < 0 || unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		(void)!write(sp[1], "u", 1);
		(void)!read(sp[1], &b, 1);
		_exit(0);
	}
	close(sp[1]);
	char b, map[64], path[64];
	snprintf(map, sizeof(map), "0 %u 65536\n", first);
	if (read(sp[0], &b, 1) != 1)
		die("user namespace holder");
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	if (write_str(path, map) < 0)
		die("uid_map");
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	if (write_str(path, map) < 0)
		die("gid_map");
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		die("open the user namespace");
	close(sp[0]);
	waitpid(pid, NULL, 0);
	int hi = fcntl(ns, F_DUPFD_CLOEXEC, 10);
	close(ns);
	return hi;
}

/* host_common.c: the cached program into a sealed memfd. */
static int seccomp_memfd(const char *file)
{
	int src = open(file, O_RDONLY | O_CLOEXEC);
	if (src < 0)
		die(file);
	int fd = memfd_create("kis-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	char buf[8192];
	ssize_t r;
	off_t off = 0;
	while ((r = pread(src, buf, sizeof(buf), off)) > 0) {
		if (write(fd, buf, (size_t)r) != r)
			die("memfd");
		off += r;
	}
	close(src);
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		die("seal");
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	return hi;
}

static bool is_fs(const char *p, long magic)
{
	struct statfs sf;
	return statfs(p, &sf) == 0 && sf.f_type == magic;
}

/* Our own path in the hierarchy holding ctrl (NULL: v2), /proc/self/cgroup. */
static bool own_cgroup(const char *ctrl, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		bool m = ctrl ? false : (!strcmp(line, "0") && c1[1] == '\0');
		for (char *s = strtok(c1 + 1, ","); ctrl && s; s = strtok(NULL, ","))
			m |= !strcmp(s, ctrl);
		if (m) {
			snprintf(out, len, "%s", strcmp(c2 + 1, "/") ? c2 + 1 : "");
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* Up from our own v2 group to the nearest one that delegates memory and
 * pids (its cgroup.subtree_control names both): groups made below it get
 * those controllers. Writes its path (under /sys/fs/cgroup) to anc. */
static bool delegating_ancestor(char *anc, size_t len)
{
	char own[900];
	if (!own_cgroup(NULL, own, sizeof(own)))
		return false;
	snprintf(anc, len, "/sys/fs/cgroup%s", own);
	for (;;) {
		char p[1200], buf[512] = "";
		snprintf(p, sizeof(p), "%s/cgroup.subtree_control", anc);
		FILE *f = fopen(p, "re");
		if (f) {
			if (!fgets(buf, sizeof(buf), f))
				buf[0] = '\0';
			fclose(f);
		}
		if (strstr(buf, "memory") && strstr(buf, "pids"))
			return true;
		char *sl = strrchr(anc, '/');
		if (!sl || sl - anc < (long)strlen("/sys/fs/cgroup"))
			return false;
		*sl = '\0';
	}
}

/* the meter's group (see the head of this file; empty: none) */
static char meter_dir[1100];
static bool meter_v2;

struct cg {
	char dirs[3][1400];
	int n;
	bool v1;
};

static void cg_create(struct cg *g, const char *name)
{
	memset(g, 0, sizeof(*g));
	char own[1024], parent[1200];
	if (is_fs("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC)) {
		char anc[1100];
		if (!delegating_ancestor(anc, sizeof(anc)))
			die("no delegating cgroup above our own");
		if (meter_dir[0] && meter_v2) /* delegates already: below it, metered */
			snprintf(parent, sizeof(parent), "%s", meter_dir);
		else
			snprintf(parent, sizeof(parent), "%s/kis-bench", anc);
		if (mkdir(parent, 0755) < 0 && errno != EEXIST)
			die(parent);
		char p[1500];
		snprintf(p, sizeof(p), "%s/cgroup.subtree_control", parent);
		write_str(p, "+memory +pids");
		snprintf(g->dirs[0], sizeof(g->dirs[0]), "%s/%s", parent, name);
		if (mkdir(g->dirs[0], 0755) < 0)
			die(g->dirs[0]);
		g->n = 1;
		snprintf(p, sizeof(p), "%s/memory.max", g->dirs[0]);
		write_str(p, "1073741824");
		snprintf(p, sizeof(p), "%s/memory.swap.max", g->dirs[0]);
		write_str(p, "0");
		snprintf(p, sizeof(p), "%s/pids.max", g->dirs[0]);
		write_str(p, "256");
		return;
	}
	g->v1 = true;
	static const char *const ctrl[3] = {"memory", "pids", "cpuacct"};
	for (int i = 0; i < 3; i++) {
		char mnt[64];
		snprintf(mnt, sizeof(mnt), "/sys/fs/cgroup/%s", ctrl[i]);
		if (!is_fs(mnt, CGROUP_SUPER_MAGIC) || !own_cgroup(ctrl[i], own, sizeof(own)))
			continue;
		if (meter_dir[0] && !strcmp(ctrl[i], "cpuacct")) /* metered */
			snprintf(parent, sizeof(parent), "%s/kis-bench", meter_dir);
		else
			snprintf(parent, sizeof(parent), "%s%s/kis-bench", mnt, own);
		for (int tries = 0; tries < 5; tries++) {
			if (mkdir(parent, 0755) < 0 && errno != EEXIST)
				die(parent);
			snprintf(g->dirs[g->n], sizeof(g->dirs[0]), "%s/%s", parent, name);
			if (mkdir(g->dirs[g->n], 0755) == 0)
				break;
			if (errno != ENOENT)
				die(g->dirs[g->n]);
		}
		char p[1500];
		if (i == 0) {
			snprintf(p, sizeof(p), "%s/memory.limit_in_bytes", g->dirs[g->n]);
			write_str(p, "1073741824");
			snprintf(p, sizeof(p), "%s/memory.memsw.limit_in_bytes", g->dirs[g->n]);
			write_str(p, "1073741824");
		} else if (i == 1) {
			snprintf(p, sizeof(p), "%s/pids.max", g->dirs[g->n]);
			write_str(p, "256");
		}
		g->n++;
	}
}

static void cg_join(const struct cg *g)
{
	char p[1500];
	for (int i = 0; i < g->n; i++) {
		snprintf(p, sizeof(p), "%s/%s", g->dirs[i], g->v1 ? "tasks" : "cgroup.procs");
		if (write_str(p, "0") < 0)
			_exit(125);
	}
}

/* rmdir of a group is EBUSY while a killed run's last task is still
 * exiting (a reaped child leaves cgroup.procs before the group lets go of
 * it): wait for it, up to a second */
static void rmdir_group(const char *dir)
{
	for (int t = 0; t < 10000 && rmdir(dir) < 0 && errno == EBUSY; t++) {
		struct timespec ts = {0, 100 * 1000};
		nanosleep(&ts, NULL);
	}
}

static void cg_remove(const struct cg *g)
{
	for (int i = 0; i < g->n; i++) {
		rmdir_group(g->dirs[i]);
		char parent[1400];
		snprintf(parent, sizeof(parent), "%s", g->dirs[i]);
		char *sl = strrchr(parent, '/');
		if (sl) {
			*sl = '\0';
			rmdir(parent); /* when empty; a parallel client's leaf keeps it */
		}
	}
}

/* bw_child's private mount namespace, /run tmpfs and the agent bound. */
static void stage(const char *agent)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("kis-stage", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755,size=64k,nr_inodes=64") < 0)
		_exit(125);
	int f = open("/run/kis-agent", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (f < 0)
		_exit(125);
	close(f);
	int t = (int)syscall(SYS_open_tree, AT_FDCWD, agent,
			     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	if (t < 0 || syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0 ||
	    syscall(SYS_move_mount, t, "", AT_FDCWD, "/run/kis-agent", MOVE_MOUNT_F_EMPTY_PATH) < 0)
		_exit(125);
	close(t);
}

static void crunns(void)
{
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	bool hybrid = !is_fs("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC) &&
		      is_fs("/sys/fs/cgroup/unified", CGROUP2_SUPER_MAGIC);
	if (hybrid && (unshare(CLONE_NEWNS) < 0 ||
		       mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
		       (umount2("/sys/fs/cgroup/unified", MNT_DETACH) < 0 && errno != EINVAL)))
		_exit(125);
	int nul = open("/dev/null", O_RDWR);
	dup2(nul, 0);
	dup2(nul, 2);
}

/* The meter: see the head of this file. */
static char meter_join[1300], meter_usage[1300];

static void meter_remove(void)
{
	char p[1400];
	if (!meter_dir[0])
		return;
	snprintf(p, sizeof(p), "%s/run", meter_dir);
	rmdir_group(p);
	snprintf(p, sizeof(p), "%s/kis-bench", meter_dir);
	rmdir_group(p);
	rmdir_group(meter_dir);
	meter_dir[0] = '\0';
}

static void meter_on_signal(int sig)
{
	(void)sig;
	exit(130); /* runs meter_remove */
}

static void meter_setup(void)
{
	char own[900], p[1400];
	if (geteuid() != 0)
		return;
	if (is_fs("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC)) {
		char anc[1000];
		if (!delegating_ancestor(anc, sizeof(anc)))
			return;
		snprintf(meter_dir, sizeof(meter_dir), "%s/kis-bench-meter-%d", anc, (int)getpid());
		meter_v2 = true;
		/* a v2 group with members cannot delegate: the runs join a leaf
		 * "run" and the @cgroup recipe's groups go beside it */
		snprintf(p, sizeof(p), "%s/cgroup.subtree_control", meter_dir);
		snprintf(meter_join, sizeof(meter_join), "%s/run/cgroup.procs", meter_dir);
		snprintf(meter_usage, sizeof(meter_usage), "%s/cpu.stat", meter_dir);
		char run[1300];
		snprintf(run, sizeof(run), "%s/run", meter_dir);
		if (mkdir(meter_dir, 0755) < 0 || write_str(p, "+memory +pids") < 0 ||
		    mkdir(run, 0755) < 0) {
			meter_remove();
			return;
		}
	} else {
		if (!is_fs("/sys/fs/cgroup/cpuacct", CGROUP_SUPER_MAGIC) ||
		    !own_cgroup("cpuacct", own, sizeof(own)))
			return;
		snprintf(meter_dir, sizeof(meter_dir), "/sys/fs/cgroup/cpuacct%s/kis-bench-meter-%d",
			 own, (int)getpid());
		snprintf(meter_join, sizeof(meter_join), "%s/tasks", meter_dir);
		snprintf(meter_usage, sizeof(meter_usage), "%s/cpuacct.usage", meter_dir);
		if (mkdir(meter_dir, 0755) < 0) {
			meter_dir[0] = '\0';
			return;
		}
	}
	atexit(meter_remove);
	signal(SIGINT, meter_on_signal);
	signal(SIGTERM, meter_on_signal);
	signal(SIGHUP, meter_on_signal);
}

/* The meter's total in microseconds, or -1. */
static double meter_read(void)
{
	if (!meter_dir[0])
		return -1;
	FILE *f = fopen(meter_usage, "re");
	char line[256];
	double v = -1;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long u;
		if (!meter_v2 && sscanf(line, "%llu", &u) == 1)
			v = (double)u / 1000;
		else if (meter_v2 && sscanf(line, "usage_usec %llu", &u) == 1)
			v = (double)u;
	}
	if (f)
		fclose(f);
	return v;
}

static unsigned long run_counter;
static double last_cpu_us;    /* CPU of the last run's whole tree (the meter) */
static double last_reaped_us; /* user + system of the last run and what it reaped */

static double run_once(const struct cmd *c)
{
	double t0 = now_us();
	char fdu[16] = "", fds[16] = "", name[64];
	char tok[8][256];
	char **argv = c->argv;
	char *local[512];
	unsigned long n = ++run_counter;
	if (c->userns_first || c->seccomp_file || c->n_tokens) {
		memcpy(local, c->argv, sizeof(local));
		argv = local;
	}
	int uns = -1, sfd = -1;
	if (c->userns_first) {
		uns = make_userns(c->userns_first);
		snprintf(fdu, sizeof(fdu), "%d", uns);
		if (c->userns_at >= 0)
			argv[c->userns_at] = fdu;
	}
	if (c->seccomp_file) {
		sfd = seccomp_memfd(c->seccomp_file);
		snprintf(fds, sizeof(fds), "%d", sfd);
		if (c->seccomp_at >= 0)
			argv[c->seccomp_at] = fds;
	}
	for (int i = 0; i < c->n_tokens; i++) {
		const char *s = c->argv[c->token_at[i]], *b = strstr(s, "{}");
		snprintf(tok[i], sizeof(tok[i]), "%.*s%d-%lu%s", (int)(b - s), s, (int)getpid(), n,
			 b + 2);
		argv[c->token_at[i]] = tok[i];
	}
	struct cg g;
	if (c->cgroup) {
		snprintf(name, sizeof(name), "b-%d-%lu", (int)getpid(), n);
		cg_create(&g, name);
	}
	double m0 = meter_read();
	pid_t p = fork();
	if (p == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		if (meter_dir[0] && write_str(meter_join, "0") < 0)
			_exit(125);
		if (c->cgroup)
			cg_join(&g);
		if (uns >= 0)
			fcntl(uns, F_SETFD, 0);
		if (uns >= 0 && c->userns_fixed > 0 && dup2(uns, c->userns_fixed) < 0)
			_exit(125);
		if (sfd >= 0)
			fcntl(sfd, F_SETFD, 0);
		if (c->crunns)
			crunns();
		if (c->stage)
			stage(c->agent);
		if (c->drop_first && (setgroups(0, NULL) < 0 ||
				      setresgid(c->drop_first, c->drop_first, c->drop_first) < 0 ||
				      setresuid(c->drop_first, c->drop_first, c->drop_first) < 0))
			_exit(125);
		/* the engine starts crun and bwrap with PATH alone (oci_runtime.c
		 * crun_env, bubblewrap.c bwrap_env): so does the reference */
		static char *const fixed_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		if (c->crunns || c->stage)
			execvpe(argv[0], argv, fixed_env);
		else
			execvp(argv[0], argv);
		_exit(127);
	}
	if (uns >= 0)
		close(uns);
	if (sfd >= 0)
		close(sfd);
	int st;
	struct rusage ru;
	wait4(p, &st, 0, &ru);
	if (c->cgroup)
		cg_remove(&g);
	double m1 = meter_read();
	last_reaped_us = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
			 ru.ru_stime.tv_usec;
	last_cpu_us = m0 >= 0 && m1 >= m0 ? m1 - m0 : last_reaped_us;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "bench: '%s' failed (status %d)\n", c->label, st);
		exit(1);
	}
	return now_us() - t0;
}

/* C clients, each running the command back to back for secs; the total
 * of runs finished and the time until the last client is done. */
static void slice(const struct cmd *c, int clients, double secs, long *runs, double *elapsed)
{
	int pfd[2];
	if (pipe(pfd) < 0)
		die("pipe");
	double t0 = now_us(), end = t0 + secs * 1e6;
	for (int i = 0; i < clients; i++) {
		pid_t p = fork();
		if (p < 0)
			die("fork");
		if (p == 0) {
			close(pfd[0]);
			long k = 0;
			while (now_us() < end) {
				run_once(c);
				k++;
			}
			(void)!write(pfd[1], &k, sizeof(k));
			_exit(0);
		}
	}
	close(pfd[1]);
	long k, total = 0;
	while (read(pfd[0], &k, sizeof(k)) == sizeof(k))
		total += k;
	close(pfd[0]);
	int st, bad = 0;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	if (bad) {
		fprintf(stderr, "bench: a client of '%s' failed\n", c->label);
		exit(1);
	}
	*runs += total;
	*elapsed += now_us() - t0;
}

static int throughput(struct cmd *cmds, int k, const char *clist, double secs, int rounds,
		      const char *out)
{
	int cl[16], ncl = 0;
	char *dup = strdup(clist);
	for (char *t = strtok(dup, ","); t && ncl < 16; t = strtok(NULL, ","))
		cl[ncl++] = atoi(t);
	long *runs = calloc((size_t)(k * ncl), sizeof(long));
	double *el = calloc((size_t)(k * ncl), sizeof(double));
	for (int c = 0; c < k; c++)
		run_once(&cmds[c]); /* warm the page cache and kis's caches */
	/* interleaved: every round gives every command a slice at every
	 * client count, alternating the order */
	for (int r = 0; r < rounds; r++)
		for (int j = 0; j < ncl; j++)
			for (int i = 0; i < k; i++) {
				int c = r % 2 ? k - 1 - i : i;
				slice(&cmds[c], cl[j], secs / rounds, &runs[c * ncl + j],
				      &el[c * ncl + j]);
			}
	FILE *o = out ? fopen(out, "w") : NULL;
	printf("%-34s %7s %8s %10s %8s\n", "command", "clients", "runs", "runs_per_s", "ratio");
	for (int j = 0; j < ncl; j++) {
		double ref = runs[j] / (el[j] / 1e6);
		for (int c = 0; c < k; c++) {
			double rps = runs[c * ncl + j] / (el[c * ncl + j] / 1e6);
			printf("%-34s %7d %8ld %10.1f %7.2fx\n", cmds[c].label, cl[j], runs[c * ncl + j],
			       rps, rps / ref);
			if (o)
				fprintf(o, "\"%s\" %d %.2f %.3f\n", cmds[c].label, cl[j], rps, rps / ref);
		}
	}
	if (o)
		fclose(o);
	free(dup);
	free(runs);
	free(el);
	return 0;
}

int main(int argc, char **argv)
{
	const char *clist = NULL, *out = NULL;
	double secs = 6;
	int rounds = 3, opt;
	while ((opt = getopt(argc, argv, "+c:t:r:o:")) != -1) {
		switch (opt) {
		case 'c': clist = optarg; break;
		case 't': secs = atof(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'o': out = optarg; break;
		default: return 2;
		}
	}
	int first = optind + (clist ? 0 : 1);
	if (argc - first < 1 || (!clist && optind >= argc)) {
		fprintf(stderr,
			"usage: %s N 'label=[@recipe ...] cmd args' ...  (the first is the reference)\n"
			"       %s -c 1,2,4,8 -t SECONDS [-r ROUNDS] [-o FILE] 'label=cmd' ...\n",
			argv[0], argv[0]);
		return 2;
	}
	int k = argc - first;
	struct cmd *cmds = calloc((size_t)k, sizeof(*cmds));
	if (!cmds)
		return 2;
	for (int c = 0; c < k; c++)
		if (!parse(argv[first + c], &cmds[c])) {
			fprintf(stderr, "bench: '%s' is not label=command\n", argv[first + c]);
			return 2;
		}
	signal(SIGPIPE, SIG_IGN);
	if (!clist)
		meter_setup();
	if (clist)
		return throughput(cmds, k, clist, secs, rounds > 0 ? rounds : 1, out);
	int n = atoi(argv[optind]);
	double **t = calloc((size_t)k, sizeof(*t)), **cpu = calloc((size_t)k, sizeof(*cpu));
	double **rp = calloc((size_t)k, sizeof(*rp));
	for (int c = 0; c < k; c++) {
		t[c] = calloc((size_t)n, sizeof(double));
		cpu[c] = calloc((size_t)n, sizeof(double));
		rp[c] = calloc((size_t)n, sizeof(double));
		run_once(&cmds[c]); /* warm the page cache */
	}
	/* interleaved: round i runs every command once, so a change of load on
	 * this shared machine falls on all of them alike */
	for (int i = 0; i < n; i++)
		for (int c = 0; c < k; c++) {
			t[c][i] = run_once(&cmds[c]);
			cpu[c][i] = last_cpu_us;
			rp[c][i] = last_reaped_us;
		}
	/* cpu_ms: CPU time of the whole tree a run started (the meter), the
	 * work a run costs whatever the load made it wait; reaped_ms: wait4's
	 * rusage, which misses a process killed before it reaped its own (see
	 * the head of this file). Processes a run has another program start
	 * outside its groups (crun's container, in groups of crun's making)
	 * are in reaped_ms only. */
	printf("cpu_ms: %s; reaped_ms: wait4's rusage\n",
	       meter_dir[0] ? (meter_v2 ? "the run's whole tree (a v2 meter group, cpu.stat)"
				    : "the run's whole tree (a v1 meter group, cpuacct.usage)")
			    : "no meter group (not root or no cgroup file system): wait4's rusage");
	double ref_med = 0, ref_cpu = 0;
	printf("%-34s %10s %10s %8s %8s %8s %9s %9s\n", "command", "median_ms", "p90_ms", "ratio",
	       "added_ms", "cpu_ms", "cpu_ratio", "reaped_ms");
	for (int c = 0; c < k; c++) {
		qsort(t[c], (size_t)n, sizeof(double), cmp);
		qsort(cpu[c], (size_t)n, sizeof(double), cmp);
		qsort(rp[c], (size_t)n, sizeof(double), cmp);
		double med = t[c][n / 2] / 1000, p90 = t[c][n * 9 / 10] / 1000;
		double cm = cpu[c][n / 2] / 1000, rm = rp[c][n / 2] / 1000;
		if (c == 0) {
			ref_med = med;
			ref_cpu = cm > 0 ? cm : 1e-9;
		}
		printf("%-34s %10.3f %10.3f %7.2fx %8.3f %8.3f %8.2fx %9.3f\n", cmds[c].label, med,
		       p90, med / ref_med, med - ref_med, cm, cm / ref_cpu, rm);
		free(t[c]);
		free(cpu[c]);
		free(rp[c]);
		free(cmds[c].argv);
	}
	free(rp);
	free(cmds);
	free(t);
	free(cpu);
	return 0;
}
