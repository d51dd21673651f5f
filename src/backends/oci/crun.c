/* SPDX-License-Identifier: MIT */
/* Driving crun from the oci backend: each call in a private mount namespace
 * (the hybrid-cgroup workaround), state, removal and the collector. */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>

#include "backends/common.h"
#include "backends/oci/bundle.h"
#include "confine/confine.h"
#include "core/io.h"
#include "core/tree.h"
#include "exec/tool.h"
#include "core/test_hook.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

const char *kis_oci_crun_path(void)
{
	static const char *const cands[] = {"/usr/bin/crun", "/usr/local/bin/crun", "/bin/crun"};
	return kis_find_tool(KIS_TEST_GETENV("KIS_CRUN"), cands, ARRAY_SIZE(cands));
}

static long fs_magic(const char *p)
{
	struct statfs sf;
	return statfs(p, &sf) == 0 ? (long)sf.f_type : 0;
}

int kis_oci_cgroup_layout(void)
{
	long root = fs_magic("/sys/fs/cgroup");
	if (root == CGROUP2_SUPER_MAGIC)
		return 2;
	/* v1 controllers mounted under a tmpfs, maybe with v2 beside them */
	bool v1 = fs_magic("/sys/fs/cgroup/memory") == CGROUP_SUPER_MAGIC ||
		  fs_magic("/sys/fs/cgroup/pids") == CGROUP_SUPER_MAGIC;
	bool unified = fs_magic("/sys/fs/cgroup/unified") == CGROUP2_SUPER_MAGIC;
	return v1 ? (unified ? 3 : 1) : 0;
}

/* In the child, before exec of crun: crun 1.8 refuses a hybrid layout
 * ("cgroups in hybrid mode not supported"). It sees v1 only when the v2
 * mount is gone from its mount namespace: a namespace of its own, made a
 * slave of ours first so nothing we do there reaches the host's table
 * (mount_namespaces(7): MS_SLAVE receives, never sends). Async-signal-safe
 * calls only. */
/* crun runs as root outside the sandbox: a fixed environment, never the
 * caller's (a loader variable there would load into it). The container's
 * own environment is config.json's process.env. */
static const char *const crun_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

bool kis_oci_rootless(void)
{
	return geteuid() != 0;
}

/* One path per process, fixed at first use (the environment does not
 * change under us); the strings live as long as the process. */
static char run_dir[PATH_MAX], state_dir[PATH_MAX + 8], bundles_dir[PATH_MAX + 8];

static bool own_private_dir(const char *p)
{
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return false;
	struct stat st;
	/* lstat: a symlink planted at the name (in /tmp, by anyone) is refused */
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & 077);
}

/* The rootless candidate, and whether it is usable: ours, or not there yet
 * (made on first use, never by a probe: `backends` leaves nothing). */
static bool rootless_candidate(char *p, size_t len, bool *exists)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	if (x && x[0] == '/' && lstat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
		snprintf(p, len, "%s/kis", x);
	else
		snprintf(p, len, "/tmp/kis-run-%u", (unsigned)geteuid());
	*exists = lstat(p, &st) == 0;
	return !*exists || (S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077));
}

bool kis_oci_run_dir_usable(void)
{
	char p[PATH_MAX];
	bool exists;
	return !kis_oci_rootless() || rootless_candidate(p, sizeof(p), &exists);
}

char *kis_oci_run_dir(void)
{
	if (run_dir[0])
		return run_dir;
	char p[PATH_MAX];
	if (!kis_oci_rootless()) {
		snprintf(p, sizeof(p), "/run/kis");
	} else {
		bool exists;
		if (!rootless_candidate(p, sizeof(p), &exists) || !own_private_dir(p))
			return NULL;
	}
	memcpy(run_dir, p, sizeof(p));
	return run_dir;
}

/* The run directory's path, made by nothing: the collector and the
 * owner sweep only read below it. */
static const char *run_path(void)
{
	static char p[PATH_MAX];
	if (!p[0]) {
		bool exists;
		if (!kis_oci_rootless())
			snprintf(p, sizeof(p), "/run/kis");
		else if (!rootless_candidate(p, sizeof(p), &exists))
			snprintf(p, sizeof(p), "/nonexistent/kis-run");
	}
	return p;
}

char *kis_oci_state_root(void)
{
	if (!kis_oci_rootless())
		return "/run/crun";
	if (!state_dir[0])
		snprintf(state_dir, sizeof(state_dir), "%s/crun", run_path());
	return state_dir;
}

char *kis_oci_bundles_dir(void)
{
	if (!bundles_dir[0])
		snprintf(bundles_dir, sizeof(bundles_dir), "%s/oci", run_path());
	return bundles_dir;
}

/* Rootless, in crun's child: a user namespace of our own mapping 0 to the
 * caller (kis_userns_own), then a mount namespace, a slave of ours. In a
 * namespace a less privileged user owns, the mounts copied from the host
 * are locked together (mount_namespaces(7), "restrictions"): the v2 mount
 * of a hybrid host cannot be unmounted, so an empty tmpfs covers it, and
 * crun, which tells the layout by statfs(2) of that path, sees v1 alone. */
static int rootless_ns(bool hybrid, int ns_fd)
{
	/* with a subordinate range, the namespace newuidmap mapped (its owner,
	 * in the parent namespace, has CAP_SYS_ADMIN there: setns(2)) */
	if ((ns_fd >= 0 ? setns(ns_fd, CLONE_NEWUSER) : kis_userns_own(getuid(), getgid())) < 0 ||
	    unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return -1;
	if (hybrid && mount("kis-hide-v2", "/sys/fs/cgroup/unified", "tmpfs",
			    MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0555") < 0)
		return -1;
	return 0;
}

static int rootless_setup(void *arg)
{
	(void)arg;
	if (rootless_ns(kis_oci_cgroup_layout() == 3, -1) == 0)
		return 0;
	dprintf(2, "cannot make crun's user namespace: %s (unprivileged user namespaces: "
		   "user.max_user_namespaces)", strerror(errno));
	return -1;
}

int kis_oci_hybrid_workaround(void)
{
	if (unshare(CLONE_NEWNS) < 0)
		return -1;
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return -1;
	if (umount2("/sys/fs/cgroup/unified", MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return -1;
	return 0;
}

/* In crun's child, last: the hybrid workaround, with a message on its
 * stderr (the caller's pipe when it reads one) when it fails. */
static int crun_setup(void *arg)
{
	(void)arg;
	if (kis_oci_hybrid_workaround() == 0)
		return 0;
	dprintf(2, "cannot hide the cgroup v2 mount from crun: %s", strerror(errno));
	return -1;
}

/* In crun's child, last: the mounts' sources staged in a namespace of
 * crun's own (bundle.h, struct kis_oci_stage). Async-signal-safe. */
static int stage_setup(void *arg)
{
	struct kis_oci_stage *st = arg;
	/* st->rootless, decided before fork: once in our user namespace,
	 * geteuid() is 0 */
	if (st->rootless) {
		if (rootless_ns(false, st->rootless_ns_fd) < 0) {
			dprintf(2, "cannot make crun's user namespace: %s", strerror(errno));
			return -1;
		}
	} else if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
		dprintf(2, "cannot make crun's mount namespace: %s", strerror(errno));
		return -1;
	}
	/* the workspace: as root, shown through the sandbox's id map, so that
	 * what the host's root owns there is the sandbox's root's
	 * (mount_setattr(2) MOUNT_ATTR_IDMAP); rootless, as it is (the
	 * caller's one id is already the sandbox's root) */
	if (st->ov_lower && kis_idmap_overlay(st->ov_lower, st->ov_ws, st->ov_dst, st->userns_fd,
					      st->userns_fd >= 0 ? st->ids : 0) < 0) {
		dprintf(2, "workspace: cannot join its layers%s: %s",
			st->userns_fd >= 0 ? " through the sandbox's id map" : "", strerror(errno));
		return -1;
	}
	if (st->ws_src && kis_idmap_bind(st->ws_src, st->ov_dst, st->userns_fd) < 0) {
		dprintf(2, "workspace: cannot show it through the sandbox's id map (idmapped "
			   "mounts: Linux 5.12): %s", strerror(errno));
		return -1;
	}
	if (st->rootless && st->hybrid &&
	    mount("kis-hide-v2", "/sys/fs/cgroup/unified", "tmpfs",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0555") < 0) {
		dprintf(2, "cannot cover the cgroup v2 mount for crun: %s", strerror(errno));
		return -1;
	}
	if (!st->rootless && st->hybrid && umount2("/sys/fs/cgroup/unified", MNT_DETACH) < 0 && errno != EINVAL &&
	    errno != ENOENT) {
		dprintf(2, "cannot hide the cgroup v2 mount from crun: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < st->n; i++)
		if ((st->m_lower[i] ? kis_idmap_overlay_source(st->m_lower[i], st->m_ws[i], st->dst[i],
							       st->userns_fd, st->ids, st->ro[i])
				    : kis_idmap_bind_source(st->src[i], st->dst[i], st->userns_fd,
							    st->ro[i])) < 0) {
			dprintf(2, "mounts[%zu]: cannot stage its source: %s", i, strerror(errno));
			return -1;
		}
	return 0;
}

/* One of the setuid helpers started (the caller's own id as 0, its
 * subordinate range after it; the helper checks the range against
 * subuid(5)): its pid, or -1. */
static pid_t start_idmap(const char *tool, pid_t pid, unsigned id, unsigned long start,
			 unsigned long count)
{
	char a[4][24];
	snprintf(a[0], sizeof(a[0]), "%d", (int)pid);
	snprintf(a[1], sizeof(a[1]), "%u", id);
	snprintf(a[2], sizeof(a[2]), "%lu", start);
	snprintf(a[3], sizeof(a[3]), "%lu", count);
	char *argv[] = {(char *)tool, a[0], "0", a[1], "1", "1", a[2], a[3], NULL};
	struct kis_tool t = {.path = tool, .argv = argv, .envp = (char *const *)crun_env,
			     .in = -1, .out = -1, .err = -1};
	struct kis_error *e = NULL;
	pid_t p = -1;
	if (!tool || kis_tool_start(&t, &p, &e) < 0)
		p = -1;
	kis_error_free(e);
	return p;
}

static bool reaped_ok(pid_t p)
{
	int st = 0;
	return p > 0 && RETRY_EINTR(waitpid(p, &st, 0)) == p && kis_tool_ok(st, 0);
}

int kis_oci_write_subid_maps(pid_t pid, void *arg)
{
	/* both at once: each is a setuid exec that loads libsubid and its
	 * PAM and SELinux libraries, tens of ms on a busy host */
	const struct kis_subids *s = arg;
	pid_t u = start_idmap(kis_newuidmap_path(), pid, (unsigned)getuid(), s->uid_start,
			      s->uid_count);
	pid_t g = start_idmap(kis_newgidmap_path(), pid, (unsigned)getgid(), s->gid_start,
			      s->gid_count);
	bool ok = reaped_ok(u);
	ok = reaped_ok(g) && ok;
	if (!ok)
		errno = EPERM;
	return ok ? 0 : -1;
}

static int crun_tool(struct kis_tool *t, char *const *argv, int fd_keep, struct kis_oci_stage *st,
		     struct kis_error **err)
{
	const char *crun = kis_oci_crun_path();
	if (!crun)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "crun is not installed: install Debian's crun");
	*t = (struct kis_tool){
		.path = crun, .argv = argv, .envp = (char *const *)crun_env,
		.in = -1, .out = -1, .err = -1,
		.child_setup = kis_oci_rootless()		? rootless_setup
			       : kis_oci_cgroup_layout() == 3 ? crun_setup
							      : NULL,
		/* crun_setup, rootless_setup and stage_setup: system calls only */
		.vfork_ok = true,
	};
	if (st && (st->n || st->ov_lower || st->ws_src || st->rootless_ns_fd >= 0)) {
		st->hybrid = kis_oci_cgroup_layout() == 3;
		st->rootless = kis_oci_rootless();
		t->child_setup = stage_setup;
		t->child_arg = st;
	}
	if (fd_keep >= 0)
		t->map[t->n_map++] = (struct kis_tool_fd){fd_keep, 3};
	return 0;
}


int kis_oci_crun_spawn(char *const *argv, int fd_keep, pid_t *pid_out, struct kis_error **err)
{
	return kis_oci_crun_spawn_staged(argv, fd_keep, NULL, pid_out, err);
}

int kis_oci_crun_spawn_staged(char *const *argv, int fd_keep, struct kis_oci_stage *st,
			      pid_t *pid_out, struct kis_error **err)
{
	struct kis_tool t;
	TRY(crun_tool(&t, argv, fd_keep, st, err));
	/* our own process group: a terminal's ^C reaches the engine, which
	 * ends the run through the agent; crun then cleans up. crun itself
	 * dies with the engine (a detached container is crun's child, and
	 * fork clears the parent-death signal for it: prctl(2)); what it made
	 * is swept by the run's owner record (core/record.h, engine/owner.h) */
	t.own_pgrp = true;
	return kis_tool_start(&t, pid_out, err);
}

int kis_oci_crun(char *const *argv, int fd_keep, char **out, char *errbuf, size_t errlen,
		 struct kis_error **err)
{
	return kis_oci_crun_staged(argv, fd_keep, NULL, out, errbuf, errlen, err);
}

int kis_oci_crun_staged(char *const *argv, int fd_keep, struct kis_oci_stage *st, char **out,
			char *errbuf, size_t errlen, struct kis_error **err)
{
	if (out)
		*out = NULL;
	if (errbuf && errlen)
		errbuf[0] = '\0';
	/* quiet (no errbuf): stdout and stderr on /dev/null, for `run
	 * --detach`, whose container inherits them (the caller passes --log):
	 * it must get /dev/null, not our pipes, or it would hold them open for
	 * its life. */
	struct kis_tool t;
	TRY(crun_tool(&t, argv, fd_keep, st, err));
	struct kis_tool_out o;
	TRY(kis_tool_run(&t, out != NULL, errbuf != NULL, &o, err));
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", o.err);
	if (out)
		*out = o.out;
	else
		free(o.out);
	if (WIFEXITED(o.status))
		return WEXITSTATUS(o.status);
	return 128 + (WIFSIGNALED(o.status) ? WTERMSIG(o.status) : 0);
}

int kis_oci_state(const char *ctr_id, char *status, size_t len, pid_t *pid)
{
	char *argv[] = {"crun", "--root", KIS_OCI_STATE_ROOT, "state", (char *)ctr_id, NULL};
	char *out = NULL;
	char eb[256];
	struct kis_error *e = NULL;
	int r = kis_oci_crun(argv, -1, &out, eb, sizeof(eb), &e);
	kis_error_free(e);
	if (r != 0 || !out) {
		free(out);
		return -1;
	}
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);
	free(out);
	const char *s = json_string_value(json_object_get(j, "status"));
	if (!s) {
		json_decref(j);
		return -1;
	}
	snprintf(status, len, "%s", s);
	if (pid)
		*pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
	json_decref(j);
	return 0;
}

int kis_oci_bundle_path(const char *ctr_id, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/%s", KIS_OCI_BUNDLES, ctr_id);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The hierarchies crun makes a container's group in (cgroupsPath = the
 * container id, under each v1 controller's mount, or the one v2 tree). */
static const char *const ctr_ctrls[] = {"memory", "pids", "cpu", "cpuacct", "cpuset",
					"blkio", "devices", "freezer", "systemd"};

static size_t ctr_cgroup_count(void)
{
	return kis_oci_cgroup_layout() == 2 ? 1 : ARRAY_SIZE(ctr_ctrls);
}

static void ctr_cgroup_dir(const char *ctr_id, size_t i, char *p, size_t len)
{
	if (kis_oci_cgroup_layout() == 2)
		snprintf(p, len, "/sys/fs/cgroup/%s", ctr_id);
	else
		snprintf(p, len, "/sys/fs/cgroup/%s/%s", ctr_ctrls[i], ctr_id);
}

/* v1's cpu controller on a hierarchy of its own (not co-mounted with
 * cpuacct, which then still counts a joined helper's CPU). */
static bool cpu_alone(void)
{
	char cpu_real[PATH_MAX], acct_real[PATH_MAX];
	return realpath("/sys/fs/cgroup/cpu", cpu_real) &&
	       realpath("/sys/fs/cgroup/cpuacct", acct_real) && strcmp(cpu_real, acct_real) != 0;
}

int kis_oci_cgroup_join(const char *ctr_id, pid_t pid, bool sched, struct kis_error **err)
{
	int joined = 0;
	char num[24];
	snprintf(num, sizeof(num), "%d", (int)pid);
	bool skip_cpu = !sched && kis_oci_cgroup_layout() != 2 && cpu_alone();
	for (size_t i = 0, n = ctr_cgroup_count(); i < n; i++) {
		char p[256], procs[280];
		if (skip_cpu && !strcmp(ctr_ctrls[i], "cpu"))
			continue;
		ctr_cgroup_dir(ctr_id, i, p, sizeof(p));
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", p);
		/* a hierarchy this host does not mount, or where crun made no
		 * group: nothing to join there */
		_cleanup_close_ int fd = open(procs, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0 || write(fd, num, strlen(num)) != (ssize_t)strlen(num))
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot move process %d into cgroup '%s'", (int)pid, p);
		joined++;
	}
	if (!joined)
		return kis_error_set(err, KIS_E_INTERNAL, ENOENT,
				     "container '%s' has no cgroup to join", ctr_id);
	return 0;
}

/* After crun delete: the container's own groups must be gone. crun leaves
 * one behind when a process in it outlived the kill (EBUSY on rmdir); try
 * again briefly, then report it rather than leave it silently. */
static int check_cgroups_gone(const char *ctr_id, struct kis_error **err)
{
	for (size_t i = 0, n = ctr_cgroup_count(); i < n; i++) {
		char p[256];
		ctr_cgroup_dir(ctr_id, i, p, sizeof(p));
		for (int tries = 0; rmdir(p) < 0 && errno == EBUSY; tries++) {
			if (tries == 100)
				return kis_error_set(err, KIS_E_INTERNAL, EBUSY,
						     "the container's cgroup '%s' is still in use", p);
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

/* The container's mounts live in its own mount namespace and go with it;
 * none may show in ours (a bind that propagated would be a leak). */
static int check_mounts_gone(const char *ctr_id, struct kis_error **err)
{
	char bp[256];
	if (kis_oci_bundle_path(ctr_id, bp, sizeof(bp)) < 0)
		return 0;
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	char line[4096];
	while (fgets(line, sizeof(line), f))
		if (strstr(line, bp))
			return kis_error_set(err, KIS_E_INTERNAL, 0,
					     "a mount of container '%s' is still in the mount table",
					     ctr_id);
	return 0;
}

int kis_oci_remove(const char *ctr_id, struct kis_error **err)
{
	char *argv[] = {"crun", "--root", KIS_OCI_STATE_ROOT, "delete", "-f", (char *)ctr_id, NULL};
	char eb[512];
	int r = kis_oci_crun(argv, -1, NULL, eb, sizeof(eb), err);
	if (r < 0)
		return -1;
	/* not known to crun (already deleted) is fine: delete is idempotent */
	if (r != 0 && !strstr(eb, "does not exist") && !strstr(eb, "No such file"))
		return kis_error_set(err, KIS_E_INTERNAL, 0, "crun delete '%s' failed: %s", ctr_id, eb);
	_cleanup_close_ int bfd = open(KIS_OCI_BUNDLES, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = check_cgroups_gone(ctr_id, err);
	if (r >= 0)
		r = check_mounts_gone(ctr_id, err);
	kis_oci_remove_bundle(bfd, ctr_id);
	return r;
}

/* Kill every process in the container's groups, then remove the groups
 * that are empty. True when none of them is left. */
static bool kill_cgroups(const char *ctr_id)
{
	bool gone = true;
	for (size_t i = 0, n = ctr_cgroup_count(); i < n; i++) {
		char p[256], procs[280];
		ctr_cgroup_dir(ctr_id, i, p, sizeof(p));
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", p);
		_cleanup_fclose_ FILE *f = fopen(procs, "re");
		if (!f)
			continue;
		gone = false;
		long pid;
		while (fscanf(f, "%ld", &pid) == 1)
			if (pid > 1)
				kill((pid_t)pid, SIGKILL);
		(void)rmdir(p); /* EBUSY until the killed have exited: next pass */
	}
	return gone;
}

void kis_oci_remove_abandoned(const char *ctr_id)
{
	/* crun was killed with its engine (PR_SET_PDEATHSIG), but at any point
	 * of `run --detach`: its container's init may have been started and
	 * joined to the groups before crun wrote the state that `delete`
	 * reads. So besides crun's delete, the groups' own processes are
	 * killed, and again until two passes 100 ms apart find neither state
	 * nor group, for at most 1.5 s (crun's last steps in flight when the
	 * engine died land within that). */
	int clean = 0;
	for (int pass = 0; pass < 15 && clean < 2; pass++) {
		char status[32];
		bool known = kis_oci_state(ctr_id, status, sizeof(status), NULL) == 0;
		if (known)
			(void)kis_oci_remove(ctr_id, NULL);
		bool gone = kill_cgroups(ctr_id);
		clean = !known && gone ? clean + 1 : 0;
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	_cleanup_close_ int bfd = open(KIS_OCI_BUNDLES, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	kis_oci_remove_bundle(bfd, ctr_id);
}

void kis_oci_remove_bundle(int bundles_fd, const char *ctr_id)
{
	if (bundles_fd >= 0)
		kis_tree_remove_quiet(bundles_fd, ctr_id);
}

static int write_owner(int bundle_fd, const char *text, struct kis_error **err)
{
	int fd = openat(bundle_fd, "owner", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
			0600);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write the bundle owner");
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 :
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write the bundle owner");
}

int kis_oci_write_owner_run(int bundle_fd, struct kis_error **err)
{
	char t[96];
	snprintf(t, sizeof(t), "run %d %llu\n", (int)getpid(), kis_proc_starttime(getpid()));
	return write_owner(bundle_fd, t, err);
}

int kis_oci_write_owner_session(int bundle_fd, const char *session_dir, struct kis_error **err)
{
	_cleanup_free_ char *t = NULL;
	if (asprintf(&t, "session %s\n", session_dir) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "owner");
	return write_owner(bundle_fd, t, err);
}

/* Is the owner of this bundle gone? A run: its engine process ended (pid
 * and start time no longer match). A session: its directory, final or
 * still under its temporary create name, is gone. */
static bool owner_gone(int bundle_fd)
{
	_cleanup_close_ int fd = openat(bundle_fd, "owner", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		/* no owner yet: a bundle being made; old ones are leftovers */
		struct stat st;
		return fstat(bundle_fd, &st) == 0 && time(NULL) - st.st_mtime > 60;
	}
	char buf[4200];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	if (!strncmp(buf, "run ", 4)) {
		int pid = 0;
		unsigned long long st = 0;
		if (sscanf(buf + 4, "%d %llu", &pid, &st) != 2 || pid <= 0)
			return true;
		return kis_proc_starttime(pid) != st;
	}
	if (!strncmp(buf, "session ", 8)) {
		const char *dir = buf + 8;
		const char *slash = strrchr(dir, '/');
		if (!slash)
			return true;
		/* during create the session lives under sessions/.tmp-<id>, then
		 * is renamed to sessions/<id>: look at the temporary name first,
		 * so a rename between the two looks is seen at the final one */
		char tmp[4300];
		snprintf(tmp, sizeof(tmp), "%.*s/.tmp-%s", (int)(slash - dir), dir, slash + 1);
		struct stat st;
		return stat(tmp, &st) != 0 && stat(dir, &st) != 0;
	}
	return true;
}

void kis_oci_collect(void)
{
	/* 1: our bundles whose owner is gone */
	DIR *d = opendir(KIS_OCI_BUNDLES);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, KIS_OCI_PREFIX, strlen(KIS_OCI_PREFIX)))
			continue;
		int bfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (bfd < 0)
			continue;
		bool gone = owner_gone(bfd);
		close(bfd);
		if (gone)
			kis_oci_remove(e->d_name, NULL);
	}
	if (d)
		closedir(d);
	/* 2: containers of ours in crun's state whose bundle is gone */
	d = opendir(KIS_OCI_STATE_ROOT);
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, KIS_OCI_PREFIX, strlen(KIS_OCI_PREFIX)))
			continue;
		char bp[512];
		struct stat st;
		if (kis_oci_bundle_path(e->d_name, bp, sizeof(bp)) == 0 && stat(bp, &st) < 0 &&
		    errno == ENOENT)
			kis_oci_remove(e->d_name, NULL);
	}
	if (d)
		closedir(d);
}
