/* SPDX-License-Identifier: MIT */
/* cgroups for one sandbox: a leaf group with memory, pids and CPU limits on
 * pure v2 hosts and on v1/v2 hybrids, its events, kill and removal. */
#include "confine/confine.h"

#include "kis/limits.h"
#include "core/log.h"
#include "core/record.h"
#include "core/io.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Theory: we only ever create directories of our own (a `kis` parent and a
 * leaf per sandbox) and write files inside them; the existing hierarchy is
 * never rearranged and no file outside our groups is written.
 *
 * v1 (this machine kind: memory, pids, cpu each mounted on its own under
 * /sys/fs/cgroup/<ctrl>): the parent is `<own cgroup>/kis` in each
 * hierarchy, so the sandbox stays inside whatever limits the engine itself
 * runs under (v1 has no "no internal processes" rule).
 *
 * v2: controllers reach a child only through the parent's
 * cgroup.subtree_control, and a group with member processes cannot enable
 * them (EBUSY) unless it is the root. So the parent is `A/kis` where A is the
 * nearest ancestor of our own cgroup that already delegates the controllers
 * we need; we enable them in kis/cgroup.subtree_control, our own file. */

#define CG_ROOT "/sys/fs/cgroup"
#define V1_MEMORY KIS_CG_V1_MEMORY
#define V1_PIDS KIS_CG_V1_PIDS
#define V1_CPU KIS_CG_V1_CPU
#define V1_CPUACCT KIS_CG_V1_CPUACCT

/* KIS_CGROUP_LIMITS as a table: slot i is v1_ctrl[i] */
struct cg_limit {
	unsigned index;       /* KIS_LIMIT_I_* */
	const char *ctrl;     /* the controller */
	const char *v2, *v1;  /* the file of its value */
};
static const struct cg_limit cg_limits[] = {
#define CG_ROW_(B, f, c, f2, f1, oci) {KIS_LIMIT_I_##B, c, f2, f1},
	KIS_CGROUP_LIMITS(CG_ROW_)
#undef CG_ROW_
};
static const char *const v1_ctrl[KIS_CG_SLOTS] = {
#define CG_CTRL_(B, f, c, f2, f1, oci) c,
	KIS_CGROUP_LIMITS(CG_CTRL_)
#undef CG_CTRL_
	"cpu", "cpuacct"};

static bool is_fs(const char *path, long magic)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && sf.f_type == magic;
}

/* Where the v2 hierarchy is mounted, when it carries the controllers of
 * the limits (KIS_CGROUP_LIMITS): the root on pure v2; /unified on a
 * hybrid where none of them is a v1 hierarchy and some are there (a
 * controller is in one hierarchy only: this host's hybrid keeps memory
 * and pids in v1, hugetlb alone in v2, and is a v1 host to us). */
static const char *v2_mount(void)
{
	if (is_fs(CG_ROOT, CGROUP2_SUPER_MAGIC))
		return CG_ROOT;
	if (is_fs(CG_ROOT "/unified", CGROUP2_SUPER_MAGIC)) {
		char buf[512] = "";
		FILE *f = fopen(CG_ROOT "/unified/cgroup.controllers", "re");
		if (f) {
			if (!fgets(buf, sizeof(buf), f))
				buf[0] = '\0';
			fclose(f);
		}
		bool some = false;
		for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w;
		     w = strtok_r(NULL, " \n", &save))
			for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++)
				some |= !strcmp(w, cg_limits[i].ctrl);
		for (size_t i = 0; some && i < ARRAY_SIZE(cg_limits); i++) {
			char p[64];
			snprintf(p, sizeof(p), CG_ROOT "/%s", cg_limits[i].ctrl);
			if (is_fs(p, CGROUP_SUPER_MAGIC))
				return NULL;
		}
		if (some)
			return CG_ROOT "/unified";
	}
	return NULL;
}

enum kis_cgroup_mode kis_cgroup_detect(void)
{
	if (v2_mount())
		return KIS_CG_V2;
	for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++) {
		char p[64];
		snprintf(p, sizeof(p), CG_ROOT "/%s", v1_ctrl[i]);
		if (is_fs(p, CGROUP_SUPER_MAGIC))
			return KIS_CG_V1;
	}
	return KIS_CG_NONE;
}

/* Our own cgroup path (starting with '/') in the v1 hierarchy holding ctrl,
 * or in v2 when ctrl is NULL, from /proc/self/cgroup. */
static int own_path(const char *ctrl, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -1;
	char line[1024];
	int r = -1;
	while (r < 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		const char *list = c1 + 1, *path = c2 + 1;
		bool match = false;
		if (!ctrl) {
			match = strcmp(line, "0") == 0 && *list == '\0';
		} else {
			size_t n = strlen(ctrl);
			for (const char *s = list; *s;) {
				size_t w = strcspn(s, ",");
				if (w == n && strncmp(s, ctrl, n) == 0)
					match = true;
				s += w + (s[w] == ',');
			}
		}
		if (match && (size_t)snprintf(out, len, "%s", path) < len)
			r = 0;
	}
	fclose(f);
	return r;
}

/* Write a string to dir/file. No allocation. */
static int write_file(const char *dir, const char *file, const char *val)
{
	char p[PATH_MAX];
	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(val);
	ssize_t w = RETRY_EINTR(write(fd, val, n));
	int e = errno;
	close(fd);
	if (w < 0) {
		errno = e;
		return -1;
	}
	return (size_t)w == n ? 0 : (errno = EIO, -1);
}

static int read_file(const char *dir, const char *file, char *buf, size_t len)
{
	char p[PATH_MAX];
	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off + 1 < len) {
		ssize_t n = RETRY_EINTR(read(fd, buf + off, len - 1 - off));
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	buf[off] = '\0';
	close(fd);
	return (int)off;
}

/* "key N" lines (memory.events, pids.events, memory.oom_control). */
static uint64_t keyed_value(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *s = text; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
		if (strncmp(s, key, n) == 0 && s[n] == ' ')
			return strtoull(s + n + 1, NULL, 10);
	}
	return 0;
}

static bool valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 64 || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) ||
		      name[i] == '-'))
			return false;
	return true;
}

static void u64_str(char *buf, size_t len, uint64_t v)
{
	snprintf(buf, len, "%llu", (unsigned long long)v);
}

void kis_cgroup_free(struct kis_cgroup *cg)
{
	if (!cg)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cg->dirs); i++) {
		free(cg->dirs[i]);
		free(cg->parents[i]);
	}
	free(cg);
}

/* Remove a leaf, retrying while its last members finish exiting (an exiting
 * task can keep the group busy for a moment after SIGKILL). */
static int rmdir_retry(const char *dir)
{
	long wait_ns = 50 * 1000; /* doubling to the 10 ms it always was */
	for (int i = 0; i < 500; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -1;
		struct timespec ts = {0, wait_ns};
		nanosleep(&ts, NULL);
		wait_ns = wait_ns * 2 > 10 * 1000 * 1000 ? 10 * 1000 * 1000 : wait_ns * 2;
	}
	return -1;
}

/* mkdir parent (shared, may exist) then leaf (ours, must not exist). A
 * concurrent destroy may remove the empty parent between the two mkdirs:
 * then we make it again. */
static int make_leaf(const char *parent, const char *leaf, struct kis_error **err)
{
	for (int tries = 0; tries < 5; tries++) {
		if (mkdir(parent, 0755) < 0 && errno != EEXIST)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create cgroup '%s'",
					     parent);
		/* Recorded before it exists: a run killed from here on leaves
		 * the record the sweep removes the group by (core/record.h,
		 * engine/owner.h). "absent" first when nothing is there yet:
		 * a kill during the mkdir below (a v1 memory group's takes
		 * milliseconds) leaves no "made" line, and kis-runtime's sweep
		 * then removes a leaf at a path of the bundle's only if it was
		 * absent before and is empty now (rmdir, no kill:
		 * runtime/cgroup_noted.c) */
		struct stat sb;
		if (tries == 0 && lstat(leaf, &sb) < 0 && errno == ENOENT &&
		    kis_owner_note("absent", "%s", leaf) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record cgroup '%s'",
					     leaf);
		if (tries == 0 && kis_owner_note("cgroup", "%s", leaf) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record cgroup '%s'",
					     leaf);
		if (mkdir(leaf, 0755) == 0) {
			kis_debug("cgroup %s made", leaf);
			/* and made by us, noted at once: a leaf at a path the
			 * caller chose (an OCI cgroupsPath) may be another's
			 * when the note above was written (EEXIST below), so a
			 * sweep of a killed create takes only a leaf this line
			 * names (kis-runtime's host tier, sweep_noted); a kill
			 * before this write leaves "absent" for that sweep */
			(void)kis_owner_note("made", "%s", leaf);
			return 0;
		}
		if (errno == EEXIST)
			return kis_error_set(err, KIS_E_DESTINATION_EXISTS, EEXIST,
					     "cgroup '%s' already exists", leaf);
		if (errno != ENOENT)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create cgroup '%s'",
					     leaf);
	}
	return kis_error_set(err, KIS_E_INTERNAL, ENOENT, "cannot create cgroup '%s'", leaf);
}

static int set_limit(const char *dir, const char *file, const char *val, struct kis_error **err);

/* The missing directories of dir below the existing one whose path is
 * top (a hierarchy's mount), made one by one, each then given ctl in its
 * cgroup.subtree_control when ctl is set (v2: a child's controllers come
 * from its parent's file). Directories that exist are not touched. */
static int make_parents(const char *top, const char *dir, const char *ctl, struct kis_error **err)
{
	char p[PATH_MAX];
	if ((size_t)snprintf(p, sizeof(p), "%s", dir) >= sizeof(p))
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, ENAMETOOLONG,
				     "cgroup path '%s' is too long", dir);
	if (strlen(p) <= strlen(top))
		return 0; /* dir is top: nothing to make */
	for (char *s = p + strlen(top) + 1; s && *s; s = strchr(s, '/') ? strchr(s, '/') + 1 : NULL) {
		char *end = strchr(s, '/');
		if (end)
			*end = '\0';
		if (mkdir(p, 0755) == 0) {
			kis_debug("cgroup %s made (a parent)", p);
			if (ctl && *ctl && set_limit(p, "cgroup.subtree_control", ctl, err) < 0)
				return -1;
		} else if (errno != EEXIST) {
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create cgroup '%s'", p);
		}
		if (end)
			*end = '/';
	}
	return 0;
}

/* The leaf and its parent in the hierarchy mounted at mnt: at (o->at)
 * below mnt, or name under `kis` below own, our own group. The parent is
 * ours to remove when empty only in the second case. */
static int leaf_paths(const char *mnt, const char *own, const char *name,
		      const struct kis_cgroup_opts *o, char **parent, char **leaf, bool *ours,
		      struct kis_error **err)
{
	int r;
	if (o->at) {
		r = asprintf(leaf, "%s%s", mnt, o->at);
		*parent = r < 0 ? NULL : strndup(*leaf, (size_t)(strrchr(*leaf, '/') - *leaf));
		*ours = false;
	} else {
		const char *sep = strcmp(own, "/") == 0 ? "" : own;
		r = asprintf(parent, "%s%s/kis", mnt, sep);
		if (r < 0)
			*parent = NULL;
		r = r < 0 ? r : asprintf(leaf, "%s/%s", *parent, name);
		*ours = true;
	}
	if (r < 0)
		*leaf = NULL;
	if (r < 0 || !*parent) {
		/* nothing made: no path is left for a destroy to act on */
		free(steal_ptr(*leaf));
		free(steal_ptr(*parent));
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

static bool cpu_wanted(const struct kis_cgroup_opts *o)
{
	return o->cpu_quota_us || o->cpu_period_us || o->cpu_shares;
}

static const char *v_of(char *buf, size_t n, uint64_t v)
{
	u64_str(buf, n, v);
	return buf;
}

static int set_limit(const char *dir, const char *file, const char *val, struct kis_error **err)
{
	if (write_file(dir, file, val) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s' to %s/%s", val,
				     dir, file);
	kis_debug("limit written: %s/%s = %s", dir, file, val);
	return 0;
}

static int create_v1(struct kis_cgroup *cg, const char *name, const struct kis_limits *lim,
		     const struct kis_cgroup_opts *o, struct kis_error **err)
{
	/* cpuacct always where it is mounted on its own: the run's total CPU
	 * (limits.cpu_ms counts every process, kis_cgroup_cpu_fd); co-mounted
	 * with cpu it is the cpu leaf itself, made only with a cpu limit */
	char cpu_real[PATH_MAX], acct_real[PATH_MAX];
	bool acct_alone = realpath(CG_ROOT "/cpuacct", acct_real) &&
			  !(realpath(CG_ROOT "/cpu", cpu_real) && !strcmp(cpu_real, acct_real));
	bool want[KIS_CG_SLOTS];
	for (int i = 0; i < (int)ARRAY_SIZE(cg_limits); i++)
		want[i] = !o->memory_only || i == V1_MEMORY;
	want[V1_CPU] = !o->memory_only && cpu_wanted(o);
	want[V1_CPUACCT] = !o->memory_only && acct_alone;
	for (int i = 0; i < KIS_CG_SLOTS; i++) {
		char mnt[64], own[PATH_MAX / 2];
		snprintf(mnt, sizeof(mnt), CG_ROOT "/%s", v1_ctrl[i]);
		if (!want[i])
			continue;
		if (!is_fs(mnt, CGROUP_SUPER_MAGIC) || own_path(v1_ctrl[i], own, sizeof(own)) < 0) {
			bool needed = i == V1_CPU || (i < (int)ARRAY_SIZE(cg_limits) &&
						      kis_limit_get(lim, cg_limits[i].index));
			if (needed)
				return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
						     "the cgroup v1 '%s' controller is not mounted",
						     v1_ctrl[i]);
			continue;
		}
		_cleanup_free_ char *parent = NULL;
		bool ours = false;
		TRY(leaf_paths(mnt, own, name, o, &parent, &cg->dirs[i], &ours, err));
		/* v1 has no subtree_control: a new group has every controller
		 * of its hierarchy */
		if (!ours && make_parents(mnt, parent, NULL, err) < 0) {
			free(steal_ptr(cg->dirs[i])); /* not made: see below */
			return -1;
		}
		if (make_leaf(parent, cg->dirs[i], err) < 0) {
			/* not made: an existing group of that name is not ours
			 * to kill or remove on the way out */
			free(steal_ptr(cg->dirs[i]));
			return -1;
		}
		if (ours)
			cg->parents[i] = steal_ptr(parent);
	}
	char v[32];
	for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++) {
		uint64_t x = kis_limit_get(lim, cg_limits[i].index);
		if (!x || !cg->dirs[i])
			continue;
		u64_str(v, sizeof(v), x);
		TRY(set_limit(cg->dirs[i], cg_limits[i].v1, v, err));
	}
	if (lim->memory_bytes && cg->dirs[V1_MEMORY] &&
	    write_file(cg->dirs[V1_MEMORY], "memory.memsw.limit_in_bytes", v_of(v, sizeof(v),
										lim->memory_bytes)) < 0 &&
	    errno != ENOENT)
		/* memory+swap: without it the group swaps past its limit. The
		 * file exists only with swap accounting (swapaccount=1). */
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot write memory.memsw.limit_in_bytes");
	if (cg->dirs[V1_CPU]) {
		/* Documentation/scheduler/sched-bwc.rst: the period first, so a
		 * quota is checked against the period it is meant for */
		if (o->cpu_shares)
			TRY(set_limit(cg->dirs[V1_CPU], "cpu.shares",
				      v_of(v, sizeof(v), o->cpu_shares), err));
		if (o->cpu_period_us)
			TRY(set_limit(cg->dirs[V1_CPU], "cpu.cfs_period_us",
				      v_of(v, sizeof(v), o->cpu_period_us), err));
		if (o->cpu_quota_us)
			TRY(set_limit(cg->dirs[V1_CPU], "cpu.cfs_quota_us",
				      v_of(v, sizeof(v), o->cpu_quota_us), err));
	}
	return 0;
}

/* Does dir delegate the controllers of the limits lim sets (and cpu)? */
static bool has_controllers(const char *dir, const struct kis_limits *lim, bool cpu)
{
	char buf[512];
	if (read_file(dir, "cgroup.subtree_control", buf, sizeof(buf)) < 0)
		return false;
	/* words, not substrings: "pids" must not match inside another name */
	bool have[ARRAY_SIZE(cg_limits)] = {0}, c = false;
	for (char *s = strtok(buf, " \n"); s; s = strtok(NULL, " \n")) {
		for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++)
			have[i] |= strcmp(s, cg_limits[i].ctrl) == 0;
		c |= strcmp(s, "cpu") == 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++)
		if (!have[i] && kis_limit_get(lim, cg_limits[i].index))
			return false;
	return !cpu || c;
}

static int create_v2(struct kis_cgroup *cg, const char *name, const struct kis_limits *lim,
		     const struct kis_cgroup_opts *o, struct kis_error **err)
{
	const char *mnt = v2_mount();
	char own[PATH_MAX / 2];
	if (!mnt || own_path(NULL, own, sizeof(own)) < 0)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "no cgroup v2 hierarchy with the memory and pids controllers");
	bool cpu = cpu_wanted(o);
	char ctl[256] = "";
	for (size_t i = 0, n = 0; i < ARRAY_SIZE(cg_limits); i++)
		if (kis_limit_get(lim, cg_limits[i].index))
			n += (size_t)snprintf(ctl + n, sizeof(ctl) - n, "%s+%s", n ? " " : "",
					      cg_limits[i].ctrl);
	if (cpu)
		snprintf(ctl + strlen(ctl), sizeof(ctl) - strlen(ctl), "%s+cpu", *ctl ? " " : "");
	_cleanup_free_ char *parent = NULL;
	bool ours = false;
	TRY(leaf_paths(mnt, own, name, o, &parent, &cg->dirs[0], &ours, err));
	/* the nearest existing group above the leaf must delegate what the
	 * leaf needs: below our own group (kis's parent) or the path asked
	 * for (o->at, whose missing levels we make and delegate through) */
	char anc[PATH_MAX];
	if (ours)
		snprintf(anc, sizeof(anc), "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own);
	else
		snprintf(anc, sizeof(anc), "%s", parent);
	size_t root_len = strlen(mnt);
	struct stat sb;
	while (!ours && strlen(anc) > root_len && stat(anc, &sb) < 0)
		*strrchr(anc, '/') = '\0';
	while (!has_controllers(anc, lim, cpu)) {
		char *slash = strrchr(anc, '/');
		if (!ours || !slash || (size_t)(slash - anc) < root_len) {
			free(steal_ptr(cg->dirs[0]));
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "no cgroup above '%s' delegates the %s controllers",
					     ours ? own : o->at, ctl);
		}
		*slash = '\0';
	}
	if (ours) {
		/* walk up from our own group to the nearest one delegating to us */
		free(parent);
		if (asprintf(&parent, "%s/kis", anc) < 0) {
			parent = NULL;
			free(steal_ptr(cg->dirs[0]));
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
		}
		free(cg->dirs[0]);
		if (asprintf(&cg->dirs[0], "%s/%s", parent, name) < 0) {
			cg->dirs[0] = NULL;
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
		}
		if (mkdir(parent, 0755) < 0 && errno != EEXIST)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create cgroup '%s'",
					     parent);
		if (set_limit(parent, "cgroup.subtree_control", ctl, err) < 0)
			return -1;
	} else if (make_parents(anc, parent, ctl, err) < 0) {
		free(steal_ptr(cg->dirs[0]));
		return -1;
	}
	if (make_leaf(parent, cg->dirs[0], err) < 0) {
		free(steal_ptr(cg->dirs[0])); /* not ours: see create_v1 */
		return -1;
	}
	if (ours)
		cg->parents[0] = steal_ptr(parent);
	char v[48];
	for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++) {
		uint64_t x = kis_limit_get(lim, cg_limits[i].index);
		if (!x)
			continue;
		u64_str(v, sizeof(v), x);
		TRY(set_limit(cg->dirs[0], cg_limits[i].v2, v, err));
	}
	/* no swap past the memory limit; absent without swap accounting */
	if (lim->memory_bytes && write_file(cg->dirs[0], "memory.swap.max", "0") < 0 &&
	    errno != ENOENT)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write memory.swap.max");
	if (o->cpu_quota_us || o->cpu_period_us) {
		/* cgroup-v2.rst "cpu.max": "$MAX $PERIOD", $MAX "max" for none */
		if (o->cpu_quota_us)
			u64_str(v, sizeof(v), o->cpu_quota_us);
		else
			snprintf(v, sizeof(v), "max");
		snprintf(v + strlen(v), sizeof(v) - strlen(v), " %llu",
			 (unsigned long long)(o->cpu_period_us ? o->cpu_period_us : 100000));
		TRY(set_limit(cg->dirs[0], "cpu.max", v, err));
	}
	if (o->cpu_shares) {
		/* v1's shares 2..262144 onto v2's weight 1..10000, the mapping
		 * runc and crun use, so a bundle's shares weigh the same */
		uint64_t sh = o->cpu_shares < 2 ? 2 : o->cpu_shares > 262144 ? 262144 : o->cpu_shares;
		TRY(set_limit(cg->dirs[0], "cpu.weight",
			      v_of(v, sizeof(v), 1 + ((sh - 2) * 9999) / 262142), err));
	}
	return 0;
}

/* An OCI cgroupsPath as o->at takes: '/' then components of [A-Za-z0-9_.:@-],
 * none "." or ".." or empty (runtime/model.c refused those already). */
static bool valid_at(const char *at)
{
	size_t n = strlen(at);
	if (at[0] != '/' || n < 2 || n > 1024 || at[n - 1] == '/' || strstr(at, "//") ||
	    strstr(at, "/./") || strstr(at, "/../") || !strcmp(at + n - 2, "/.") ||
	    (n >= 3 && !strcmp(at + n - 3, "/..")))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)at[i]) || strchr("/_.:@-", at[i])))
			return false;
	return true;
}

int kis_cgroup_create(const char *name, const struct kis_limits *lim, uint64_t cpu_millis,
		      struct kis_cgroup **out, struct kis_error **err)
{
	/* CPU bandwidth per second of wall time: cpu_millis/10 ms per 100 ms */
	uint64_t quota = cpu_millis * 100;
	struct kis_cgroup_opts o = {.cpu_quota_us = !cpu_millis ? 0 : quota < 1000 ? 1000 : quota,
				    .cpu_period_us = cpu_millis ? 100000 : 0};
	return kis_cgroup_create_with(name, lim, &o, out, err);
}

int kis_cgroup_create_with(const char *name, const struct kis_limits *lim,
			   const struct kis_cgroup_opts *o, struct kis_cgroup **out,
			   struct kis_error **err)
{
	static const struct kis_cgroup_opts no_opts;
	if (!o)
		o = &no_opts;
	if (o->at ? !valid_at(o->at) : (!name || !valid_name(name)))
		return kis_error_set(err, KIS_E_INVALID_ID, 0, "invalid cgroup name '%s'",
				     o->at ? o->at : name ? name : "");
	static const struct kis_limits none;
	if (!lim)
		lim = &none;
	struct kis_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "out of memory");
	cg->mode = kis_cgroup_detect();
	int r;
	switch (cg->mode) {
	case KIS_CG_V1: r = create_v1(cg, name, lim, o, err); break;
	case KIS_CG_V2: r = create_v2(cg, name, lim, o, err); break;
	case KIS_CG_NONE:
	default:
		r = kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				  "no usable cgroup hierarchy on this host");
		break;
	}
	if (r < 0) {
		/* leave nothing behind: remove what was made, keep the error */
		struct kis_error *ignored = NULL;
		kis_cgroup_destroy(cg, &ignored);
		kis_error_free(ignored);
		return -1;
	}
	*out = cg;
	if (o->at || strncmp(name, "probe-", 6))
		kis_test_pause("setup"); /* the run's group, not a probe's */
	return 0;
}

int kis_cgroup_set_pids(const struct kis_cgroup *cg, uint64_t pids, struct kis_error **err)
{
	const char *dir = cg->mode == KIS_CG_V1 ? cg->dirs[V1_PIDS] : cg->dirs[0];
	if (!dir)
		return 0; /* no pids hierarchy: no limit to move */
	char v[24];
	u64_str(v, sizeof(v), pids);
	return set_limit(dir, "pids.max", v, err);
}

int kis_cgroup_attach(const struct kis_cgroup *cg, pid_t pid, struct kis_error **err)
{
	/* "0" moves the writing process itself, in v1 and v2 alike; decimal
	 * by hand so the child side stays free of stdio */
	char num[24];
	size_t i = sizeof(num) - 1;
	num[i] = '\0';
	unsigned long v = pid > 0 ? (unsigned long)pid : 0;
	do {
		num[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v && i > 0);
	/* Moving oneself on v1 through `tasks` rather than cgroup.procs: a
	 * write of a pid or to cgroup.procs takes cgroup_threadgroup_rwsem for
	 * writing, a percpu rwsem whose writer waits for an RCU grace period
	 * (rcu_sync_enter), 1 to 19 ms measured here; a thread moving only
	 * itself skips that lock (cgroup_procs_write_start: threadgroup_locked
	 * = pid || threadgroup). The caller before exec is single-threaded
	 * (a forked child), so the thread is the whole process, and all it
	 * forks after follows it. */
	const char *file = cg->mode == KIS_CG_V1 && pid <= 0 ? "tasks" : "cgroup.procs";
	for (size_t k = 0; k < ARRAY_SIZE(cg->dirs); k++) {
		if (!cg->dirs[k])
			continue;
		if (write_file(cg->dirs[k], file, num + i) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot move process into cgroup '%s'", cg->dirs[k]);
	}
	return 0;
}

int kis_cgroup_cpu_fd(const struct kis_cgroup *cg)
{
	/* v1: cpuacct.usage, total ns of every task of the group and its
	 * descendants (Documentation/admin-guide/cgroup-v1/cpuacct.rst); v2:
	 * cpu.stat usage_usec, present whether or not the cpu controller is
	 * enabled (cgroup-v2.rst, "cpu.stat"). */
	const char *dir = cg->mode == KIS_CG_V1 ?
		(cg->dirs[V1_CPUACCT] ? cg->dirs[V1_CPUACCT] : cg->dirs[V1_CPU]) : cg->dirs[0];
	if (!dir)
		return -1;
	char p[PATH_MAX];
	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir,
			     cg->mode == KIS_CG_V1 ? "cpuacct.usage" : "cpu.stat") >= sizeof(p))
		return -1;
	return open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
}

int kis_cgroup_read_events(const struct kis_cgroup *cg, struct kis_cgroup_events *ev,
			   struct kis_error **err)
{
	memset(ev, 0, sizeof(*ev));
	char buf[1024];
	const char *mem = cg->mode == KIS_CG_V1 ? cg->dirs[V1_MEMORY] : cg->dirs[0];
	const char *pids = cg->mode == KIS_CG_V1 ? cg->dirs[V1_PIDS] : cg->dirs[0];
	if (mem) {
		if (cg->mode == KIS_CG_V1) {
			/* oom_kill in memory.oom_control: Linux 4.13 */
			if (read_file(mem, "memory.oom_control", buf, sizeof(buf)) < 0)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot read memory.oom_control");
			ev->oom_kills = keyed_value(buf, "oom_kill");
			if (read_file(mem, "memory.failcnt", buf, sizeof(buf)) >= 0)
				ev->mem_failcnt = strtoull(buf, NULL, 10);
		} else {
			if (read_file(mem, "memory.events", buf, sizeof(buf)) < 0)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot read memory.events");
			ev->oom_kills = keyed_value(buf, "oom_kill");
			ev->mem_failcnt = keyed_value(buf, "max");
		}
	}
	if (pids) {
		if (read_file(pids, "pids.events", buf, sizeof(buf)) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read pids.events");
		ev->pids_max = keyed_value(buf, "max");
	}
	return 0;
}

/* ---- an OOM kill made to happen in a group, for its watchers ---- */

/* How far past the headroom the relay's child touches, and how long
 * the caller waits for the OOM killer */
#define RELAY_BEYOND (32u << 20)
#define RELAY_WAIT_MS 10000

/* The headroom above the group's usage that the relay's child is given
 * before the limit binds: more than the caller's resident set, plus a
 * MiB. The OOM killer takes the member of the group with the most
 * points (mm/oom_kill.c, oom_badness: resident pages plus oom_score_adj
 * thousandths of the limit's pages), and under a limit this low the
 * child's adj of 1000 weighs a few hundred pages only; the child's
 * resident set is the caller's anonymous pages (copied at fork) and what
 * it touched, the caller's also its file pages (its text), so the child
 * must touch more than those to be the one taken. */
static uint64_t relay_headroom(void)
{
	char buf[4096];
	uint64_t rss_kb = 0;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : RETRY_EINTR(read(fd, buf, sizeof(buf) - 1));
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		const char *v = strstr(buf, "\nVmRSS:");
		if (v)
			rss_kb = strtoull(v + 8, NULL, 10);
	}
	return (rss_kb << 10) + (1u << 20);
}

static uint64_t oom_kill_count(const char *dir, bool v1, bool *found)
{
	char buf[512];
	*found = read_file(dir, v1 ? "memory.oom_control" : "memory.events", buf, sizeof(buf)) >= 0 &&
		 strstr(buf, "oom_kill ") != NULL;
	return *found ? keyed_value(buf, "oom_kill") : 0;
}

/* The relay's child: the OOM killer's victim of choice in the group,
 * the group's limit brought down to its usage, pages touched until the
 * kernel ends it. It never returns. */
static void __attribute__((noreturn)) relay_child(const char *dir, bool v1, uint64_t limit,
						  uint64_t headroom)
{
	/* proc(5) oom_score_adj: 1000 makes this the victim among the group's
	 * processes (the caller keeps its own); raising it needs no privilege.
	 * A group whose every process is at -1000 has no victim, and a
	 * charge that cannot be met then waits forever. */
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1000", 4) != 4)
		_exit(2);
	close(fd);
	if (v1) {
		/* cgroup-v1/memory.rst 10: oom_kill_disable is inherited from
		 * the parent; 0 lets the OOM killer act in this group (with 1
		 * the charging task would sleep until memory is freed). memcg
		 * swappiness 0: reclaim in the group does not swap anon pages
		 * out, so touching them runs into the limit. */
		if (write_file(dir, "memory.oom_control", "0") < 0)
			_exit(3);
		(void)write_file(dir, "memory.swappiness", "0");
	} else {
		/* cgroup-v2.rst memory.swap.max: no swap to spill into */
		(void)write_file(dir, "memory.swap.max", "0");
	}
	long page = sysconf(_SC_PAGESIZE);
	char v[32];
	bool lowered = false;
	for (int tries = 0; !lowered && tries < 8; tries++) {
		char buf[64];
		if (read_file(dir, v1 ? "memory.usage_in_bytes" : "memory.current", buf,
			      sizeof(buf)) < 0)
			_exit(4);
		uint64_t want = strtoull(buf, NULL, 10) + headroom;
		want = (want + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
		if (want >= limit)
			break; /* the limit is already that close */
		u64_str(v, sizeof(v), want);
		/* v1 refuses a limit under the usage it cannot reclaim (EBUSY):
		 * the usage moved, read it again */
		if (write_file(dir, v1 ? "memory.limit_in_bytes" : "memory.max", v) == 0)
			lowered = true;
		else if (errno != EBUSY)
			_exit(5);
	}
	/* a limit left as it was (the container's, near the usage) binds
	 * within its own distance; else within the headroom */
	size_t touch = (size_t)(lowered || limit == UINT64_MAX ? headroom : limit) + RELAY_BEYOND;
	volatile char *p = mmap(NULL, touch, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		_exit(6);
	/* each write faults a page in, charged to the group: past the limit
	 * the charge fails and the memcg OOM killer picks this process */
	for (size_t off = 0; off < touch; off += (size_t)page)
		p[off] = 1;
	_exit(7); /* not killed: the limit did not bind */
}

int kis_cgroup_oom_relay(const struct kis_cgroup *cg, struct kis_error **err)
{
	bool v1 = cg->mode == KIS_CG_V1;
	const char *dir = v1 ? cg->dirs[V1_MEMORY] : cg->dirs[0];
	const char *max_file = v1 ? "memory.limit_in_bytes" : "memory.max";
	if (!dir || cg->mode == KIS_CG_NONE)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "the group has no memory controller");
	char was[32];
	if (read_file(dir, max_file, was, sizeof(was)) <= 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read %s/%s", dir,
				     max_file);
	was[strcspn(was, "\n")] = '\0';
	/* v2's "max" is no limit */
	uint64_t limit = strcmp(was, "max") == 0 ? UINT64_MAX : strtoull(was, NULL, 10);
	bool counted;
	uint64_t before = oom_kill_count(dir, v1, &counted);
	uint64_t headroom = relay_headroom();
	/* a forked child, not a helper program: it only touches its own
	 * memory until the kernel kills it (no exec, so not src/exec/'s) */
	pid_t pid = fork();
	if (pid < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "fork");
	if (pid == 0)
		relay_child(dir, v1, limit, headroom);
	int ws = 0;
	pid_t got = 0;
	for (int ms = 0; (got = waitpid(pid, &ws, WNOHANG)) == 0 && ms < RELAY_WAIT_MS; ms += 10) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (got == 0) {
		/* under an OOM that kills nobody: end it ourselves */
		kill(pid, SIGKILL);
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
	}
	/* the group's limit as it was (the child's pages are gone with it) */
	int restored = write_file(dir, max_file, was);
	int e = errno;
	bool now_counted;
	uint64_t after = oom_kill_count(dir, v1, &now_counted);
	if (got == 0)
		return kis_error_set(err, KIS_E_INTERNAL, 0,
				     "the OOM killer did not act in %s within %d ms", dir,
				     RELAY_WAIT_MS);
	if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGKILL)
		return kis_error_set(err, KIS_E_INTERNAL, 0,
				     "the OOM relay's process in %s was not OOM-killed (status %d)",
				     dir, WIFEXITED(ws) ? WEXITSTATUS(ws) : -WTERMSIG(ws));
	if (counted && now_counted && after <= before)
		return kis_error_set(err, KIS_E_INTERNAL, 0,
				     "the OOM relay's process in %s was killed, but not by the "
				     "OOM killer", dir);
	if (restored < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot put back %s/%s", dir,
				     max_file);
	return 0;
}

/* Members of one leaf, calling fn(pid) on each; returns the count. */
static int for_each_pid(const char *dir, void (*fn)(pid_t, void *), void *ctx)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	FILE *f = fopen(p, "re");
	if (!f)
		return -1;
	int n = 0;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1) {
		n++;
		if (fn && pid > 0)
			fn((pid_t)pid, ctx);
	}
	fclose(f);
	return n;
}

int kis_cgroup_count(const struct kis_cgroup *cg, struct kis_error **err)
{
	int best = 0;
	for (size_t k = 0; k < ARRAY_SIZE(cg->dirs); k++) {
		if (!cg->dirs[k])
			continue;
		int n = for_each_pid(cg->dirs[k], NULL, NULL);
		if (n < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot read members of cgroup '%s'", cg->dirs[k]);
		if (n > best)
			best = n;
	}
	return best;
}

/* The members killed in a round, as pidfds (pidfd_open(2), Linux 5.3):
 * a pidfd polls readable once its process has exited, and do_exit() takes
 * a task out of its cgroups (cgroup_exit) before it notifies (exit_notify),
 * so the next read of cgroup.procs no longer lists it. The round then waits
 * exactly as long as the exits take, not a guessed sleep (issue 19). */
#define KILL_FDS 64
struct kill_round {
	int fd[KILL_FDS];
	int n;
	bool unwatched; /* a member signalled without a pidfd */
};

static void sigkill(pid_t pid, void *ctx)
{
	struct kill_round *r = ctx;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0) {
		if (errno == ESRCH)
			return; /* gone since the read */
		kill(pid, SIGKILL);
		r->unwatched = true;
		return;
	}
	/* through the pidfd (it is close-on-exec): the pid cannot have been
	 * reused between the open and the signal */
	if (syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) < 0) {
		if (errno != ESRCH) {
			kill(pid, SIGKILL);
			r->unwatched = true;
		}
		close(fd);
		return;
	}
	if (r->n == KILL_FDS) {
		r->unwatched = true; /* killed, but waited for by the sleep */
		close(fd);
		return;
	}
	r->fd[r->n++] = fd;
}

/* Wait up to ms for every watched member to exit; close the pidfds. */
static void await_round(struct kill_round *r, int ms)
{
	struct pollfd pf[KILL_FDS];
	int n = 0;
	for (int i = 0; i < r->n; i++)
		pf[n++] = (struct pollfd){.fd = r->fd[i], .events = POLLIN};
	long deadline = (long)kis_monotonic_ms() + ms;
	while (n > 0) {
		long left = deadline - (long)kis_monotonic_ms();
		if (left <= 0 || poll(pf, (nfds_t)n, (int)left) <= 0)
			break;
		int m = 0;
		for (int i = 0; i < n; i++)
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
				pf[m++] = pf[i];
		n = m;
	}
	for (int i = 0; i < r->n; i++)
		close(r->fd[i]);
	r->n = 0;
}

int kis_cgroup_kill(const struct kis_cgroup *cg, struct kis_error **err)
{
	/* cgroup.kill (v2, Linux 5.14) kills every member atomically, forks in
	 * flight included */
	if (cg->mode == KIS_CG_V2 && cg->dirs[0] && write_file(cg->dirs[0], "cgroup.kill", "1") == 0)
		return 0;
	/* Otherwise: signal what is listed until nothing is. A member that
	 * forks between the read and the kill shows up in the next round, and
	 * pids.max bounds how many can appear. Each round waits for the exits
	 * of what it killed (at most 5 ms, the old fixed wait every run paid);
	 * members it could not watch, a short doubling sleep. */
	long wait_ns = 50 * 1000;
	for (int round = 0; round < 1000; round++) {
		int total = 0;
		struct kill_round kr = {.n = 0};
		for (size_t k = 0; k < ARRAY_SIZE(cg->dirs); k++) {
			if (!cg->dirs[k])
				continue;
			int n = for_each_pid(cg->dirs[k], sigkill, &kr);
			if (n < 0 && errno != ENOENT) {
				int e = errno;
				await_round(&kr, 0);
				return kis_error_set(err, KIS_E_INTERNAL, e,
						     "cannot read members of cgroup '%s'",
						     cg->dirs[k]);
			}
			total += n > 0 ? n : 0;
		}
		if (total == 0) {
			await_round(&kr, 0);
			return 0;
		}
		bool watched = kr.n > 0;
		await_round(&kr, 5);
		if (!watched || kr.unwatched) {
			struct timespec ts = {0, wait_ns};
			nanosleep(&ts, NULL);
			if (wait_ns < 5 * 1000 * 1000)
				wait_ns = wait_ns * 2 > 5 * 1000 * 1000 ? 5 * 1000 * 1000 : wait_ns * 2;
		}
	}
	return kis_error_set(err, KIS_E_INTERNAL, EBUSY, "cgroup members keep reappearing");
}

int kis_cgroup_destroy(struct kis_cgroup *cg, struct kis_error **err)
{
	if (!cg)
		return 0;
	int r = 0;
	kis_debug("cgroup %s: killed and removed", cg->dirs[0] ? cg->dirs[0] : "(none)");
	if (kis_cgroup_kill(cg, err) < 0)
		r = -1;
	for (size_t k = 0; k < ARRAY_SIZE(cg->dirs); k++) {
		if (cg->dirs[k] && rmdir_retry(cg->dirs[k]) < 0 && r == 0)
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot remove cgroup '%s'",
					  cg->dirs[k]);
		/* the shared parent goes when it is empty; another sandbox's
		 * leaf in it (EBUSY, ENOTEMPTY) keeps it */
		if (cg->parents[k])
			(void)rmdir(cg->parents[k]);
	}
	kis_cgroup_free(cg);
	return r;
}

/* A probe's leaf is named by its engine's pid and made outside any run's
 * record, so an engine killed while probing leaves it behind. The next
 * probe beside it removes the empty ones whose engine is gone: kill(pid, 0)
 * says ESRCH; a live pid (perhaps reused) keeps its leaf for a later probe,
 * and rmdir(2) refuses a cgroup that still has processes. */
static void sweep_stale_probes(const char *parent)
{
	DIR *d = parent ? opendir(parent) : NULL;
	if (!d)
		return;
	int dfd = dirfd(d);
	for (struct dirent *de; (de = readdir(d));) {
		if (strncmp(de->d_name, "probe-", 6) || !isdigit((unsigned char)de->d_name[6]))
			continue;
		char *end = NULL;
		long pid = strtol(de->d_name + 6, &end, 10);
		if (*end || pid <= 1 || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			(void)unlinkat(dfd, de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

/* Is row i's controller on this host: its v1 hierarchy mounted, or
 * listed in the v2 hierarchy's cgroup.controllers? */
static bool ctrl_present(size_t i)
{
	const char *mnt = v2_mount();
	if (!mnt) {
		char p[64];
		snprintf(p, sizeof(p), CG_ROOT "/%s", v1_ctrl[i]);
		return is_fs(p, CGROUP_SUPER_MAGIC);
	}
	char buf[512];
	if (read_file(mnt, "cgroup.controllers", buf, sizeof(buf)) < 0)
		return false;
	for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (!strcmp(w, cg_limits[i].ctrl))
			return true;
	return false;
}

bool kis_cgroup_cpu_available(char *why, size_t why_len)
{
	const char *mnt = NULL;
	char buf[512] = "";
	switch (kis_cgroup_detect()) {
	case KIS_CG_V1:
		/* the cpu hierarchy of its own or co-mounted (cpu,cpuacct: the
		 * /sys/fs/cgroup/cpu link): where create_v1 makes the leaf */
		if (is_fs(CG_ROOT "/cpu", CGROUP_SUPER_MAGIC))
			return true;
		snprintf(why, why_len, "the cgroup v1 'cpu' controller is not mounted at "
			 CG_ROOT "/cpu");
		return false;
	case KIS_CG_V2:
		mnt = v2_mount();
		if (mnt && read_file(mnt, "cgroup.controllers", buf, sizeof(buf)) >= 0)
			for (char *sv = NULL, *w = strtok_r(buf, " \n", &sv); w;
			     w = strtok_r(NULL, " \n", &sv))
				if (!strcmp(w, "cpu"))
					return true;
		snprintf(why, why_len, "the cgroup v2 hierarchy has no 'cpu' controller");
		return false;
	case KIS_CG_NONE:
	default:
		snprintf(why, why_len, "no usable cgroup hierarchy on this host");
		return false;
	}
}

unsigned kis_cgroup_probe(char *why, size_t why_len)
{
	if (why && why_len)
		why[0] = '\0';
	char name[40];
	snprintf(name, sizeof(name), "probe-%ld", (long)getpid());
	/* every limit a cgroup binds whose controller this host has, at a
	 * value a probe group holds: one controller missing takes only its
	 * own limit out of what the backends enforce */
	struct kis_limits lim = {.memory_bytes = 64ull << 20, .pids = 64};
	for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++) {
		uint64_t *slot = kis_limit_slot(&lim, cg_limits[i].index);
		if (!ctrl_present(i))
			*slot = 0;
		else if (!*slot)
			*slot = kis_limit_table[cg_limits[i].index].def;
	}
	struct kis_cgroup *cg = NULL;
	struct kis_error *e = NULL;
	if (kis_cgroup_create(name, &lim, 0, &cg, &e) < 0) {
		if (why && why_len)
			snprintf(why, why_len, "%s", e && e->message ? e->message : "out of memory");
		kis_error_free(e);
		return 0;
	}
	for (size_t k = 0; k < ARRAY_SIZE(cg->parents); k++)
		sweep_stale_probes(cg->parents[k]);
	unsigned bits = 0;
	for (size_t i = 0; i < ARRAY_SIZE(cg_limits); i++)
		if (kis_limit_get(&lim, cg_limits[i].index) && (cg->mode == KIS_CG_V2 || cg->dirs[i]))
			bits |= 1u << cg_limits[i].index;
	if (kis_cgroup_destroy(cg, &e) < 0) {
		if (why && why_len)
			snprintf(why, why_len, "%s", e && e->message ? e->message : "out of memory");
		kis_error_free(e);
		return 0;
	}
	return bits;
}

/* ---- the record of a group across the engine's lifetime ---- */

int kis_cgroup_save(int dir_fd, const char *name, const struct kis_cgroup *cg,
		    struct kis_error **err)
{
	_cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
							 O_NOFOLLOW, 0600);
	_cleanup_fclose_ FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record the cgroup in '%s'",
				     name);
	fd = -1; /* the FILE owns it */
	fprintf(f, "%d\n", (int)cg->mode);
	for (size_t i = 0; i < ARRAY_SIZE(cg->dirs); i++)
		fprintf(f, "%s\n%s\n", cg->dirs[i] ? cg->dirs[i] : "-",
			cg->parents[i] ? cg->parents[i] : "-");
	if (fflush(f) != 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record the cgroup in '%s'",
				     name);
	return 0;
}

bool kis_cgroup_path_ok(const char *path)
{
	if (strncmp(path, "/sys/fs/cgroup/", 15) || strlen(path) >= PATH_MAX)
		return false;
	/* each part as a cgroupsPath's was checked (runtime/model.c): not
	 * empty, not "." or ".." (a trailing "/.." names the parent) */
	for (const char *p = path + 15;;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!p[n])
			break;
		p += n + 1;
	}
	/* a hierarchy's root (v1: /sys/fs/cgroup/memory, a mount of its
	 * own) holds every process: never a group of ours (statx(2),
	 * STATX_ATTR_MOUNT_ROOT, Linux 5.8) */
	struct statx sx;
	if (statx(AT_FDCWD, path, 0, 0, &sx) == 0 && (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	    (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return false;
	return true;
}

/* A path read back must be a kis leaf or parent under /sys/fs/cgroup: the
 * file is ours (0600 in a directory of ours), this is belt and braces
 * before a destroy that kills what the group holds. (A leaf kis-runtime
 * made at a bundle's cgroupsPath is ended from its own note instead:
 * runtime/cgroup_noted.c, krt_cgroup_sweep_noted.) */
static bool record_path_ok(const char *line)
{
	return kis_cgroup_path_ok(line) && strstr(line, "/kis") != NULL;
}

struct kis_cgroup *kis_cgroup_load(int dir_fd, const char *name)
{
	int fd = dir_fd < 0 ? -1 : openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_fclose_ FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	struct kis_cgroup *cg = calloc(1, sizeof(*cg));
	char line[4096];
	int mode = 0;
	bool ok = cg && fgets(line, sizeof(line), f) && sscanf(line, "%d", &mode) == 1 &&
		  (mode == KIS_CG_V1 || mode == KIS_CG_V2);
	for (size_t k = 0; ok && k < ARRAY_SIZE(cg->dirs); k++) {
		for (int w = 0; ok && w < 2; w++) {
			ok = fgets(line, sizeof(line), f) != NULL;
			line[strcspn(line, "\n")] = '\0';
			if (ok && strcmp(line, "-")) {
				char **slot = w ? &cg->parents[k] : &cg->dirs[k];
				ok = record_path_ok(line) && (*slot = strdup(line)) != NULL;
			}
		}
	}
	if (!ok) {
		kis_cgroup_free(cg);
		return NULL;
	}
	cg->mode = (enum kis_cgroup_mode)mode;
	return cg;
}
