/* SPDX-License-Identifier: MIT */
/* The cgroup of one native run: memory and pids limits, the evidence for
 * memory_limit and pids_limit, and killing everything the run made. */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backends/common.h"
#include "confine/confine.h"
#include "exec/exec.h"

int kis_run_cgroup_open(struct kis_run_cgroup *rc, const char *sandbox_id,
			const struct kis_limits *l, unsigned enforceable, struct kis_error **err)
{
	memset(rc, 0, sizeof(*rc));
	if (!(enforceable & KIS_CGROUP_LIMIT_BITS))
		return 0;
	/* each limit a cgroup binds (KIS_CGROUP_LIMITS) that the backend
	 * enforces here */
#define COPY_(B, f, c, v2, v1, oci)                                                              \
	rc->limits.f = (enforceable & KIS_LIMIT_##B) ? l->f : 0;
	KIS_CGROUP_LIMITS(COPY_)
#undef COPY_
	TRY(kis_cgroup_create(sandbox_id, &rc->limits, 0, &rc->cg, err));
	rc->cpu_fd = kis_cgroup_cpu_fd(rc->cg);
	rc->has_cpu = rc->cpu_fd >= 0;
	return 0;
}

/* The threads whose real uid is uid: what RLIMIT_NPROC counts (fork(2):
 * "the number of extant processes (or, more precisely on Linux, threads)
 * for the real user ID"). From /proc's status files; one that ends
 * meanwhile is skipped. */
static uint64_t threads_of(uid_t uid)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	uint64_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300], line[128];
		snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		unsigned long ruid = (unsigned long)-1, th = 0;
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "Uid:", 4))
				sscanf(line + 4, "%lu", &ruid);
			else if (!strncmp(line, "Threads:", 8))
				sscanf(line + 8, "%lu", &th);
		}
		fclose(f);
		if (ruid == (unsigned long)uid)
			n += th;
	}
	closedir(d);
	return n;
}

void kis_rlimit_fallback(const struct kis_limits *l, unsigned bound, unsigned engine_pids,
			 uint64_t *nproc, uint64_t *data)
{
	*nproc = *data = 0;
	/* root: RLIMIT_NPROC does not bind CAP_SYS_RESOURCE, and a root
	 * engine without a cgroup says so in the plan instead */
	if (geteuid() == 0)
		return;
	if (l->pids && !(bound & KIS_LIMIT_PIDS))
		*nproc = threads_of(getuid()) + l->pids + engine_pids;
	if (l->memory_bytes && !(bound & KIS_LIMIT_MEMORY))
		*data = l->memory_bytes;
}

void kis_caps_default_limits(struct kis_caps *c, bool nproc_unbound)
{
	c->default_limits[0] = '\0';
	if (geteuid() == 0 || !c->present)
		return;
	bool mem = c->limits & KIS_LIMIT_MEMORY, pids = c->limits & KIS_LIMIT_PIDS;
	if (mem && pids)
		return;
	snprintf(c->default_limits, sizeof(c->default_limits), "%s%s%s",
		 mem ? "" : "memory_bytes: RLIMIT_DATA per process",
		 mem || pids ? "" : "; ",
		 pids ? "" : nproc_unbound ? "pids: none (RLIMIT_NPROC does not bind here)" :
					     "pids: RLIMIT_NPROC");
}

json_t *kis_limits_binding_json(const struct kis_limits *l, unsigned bound, bool nproc_unbound)
{
	bool user = geteuid() != 0;
	const char *mem = !l->memory_bytes ? "none: no limit asked" :
			  (bound & KIS_LIMIT_MEMORY) ? "cgroup: the sandbox's total" :
			  user ? "RLIMIT_DATA: each process's private writable memory, not the "
				 "sandbox's total (no cgroup this user may write here)" :
				 "none: no cgroup here";
	const char *pids = !l->pids ? "none: no limit asked" :
			   (bound & KIS_LIMIT_PIDS) ? "cgroup: the sandbox's processes" :
			   user && nproc_unbound ? "none: no cgroup this user may write here, and "
						   "RLIMIT_NPROC does not bind on this backend" :
			   user ? "RLIMIT_NPROC: limits.pids more threads of the user than when "
				  "the run starts (on bubblewrap and in a container: limits.pids "
				  "in the run's own user namespace); no cgroup this user may "
				  "write here" :
				  "none: no cgroup here";
	return json_pack("{s:s, s:s}", "memory_bytes", mem, "pids", pids);
}

int kis_run_cgroup_engine_joins(struct kis_run_cgroup *rc, struct kis_error **err)
{
	if (!rc->cg || !rc->limits.pids)
		return 0;
	rc->engine_pids++;
	return kis_cgroup_set_pids(rc->cg, rc->limits.pids + rc->engine_pids, err);
}

/* In the child, before exec: join the group, so nothing the command forks
 * can be outside it (no allocation: the paths were prepared). */
int kis_run_cgroup_join(struct kis_run_cgroup *rc, struct kis_error **err)
{
	if (rc->cg)
		TRY(kis_cgroup_attach(rc->cg, 0, err));
	/* or, rootless with no group, the fallbacks (soft = hard: the command
	 * cannot raise them back without CAP_SYS_RESOURCE) */
	struct rlimit r;
	if (rc->fb_nproc) {
		r.rlim_cur = r.rlim_max = rc->fb_nproc;
		if (setrlimit(RLIMIT_NPROC, &r) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set RLIMIT_NPROC");
	}
	if (rc->fb_data) {
		r.rlim_cur = r.rlim_max = rc->fb_data;
		if (setrlimit(RLIMIT_DATA, &r) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set RLIMIT_DATA");
	}
	return 0;
}

static int explain(void *ctx, enum kis_reason *reason, char **detail)
{
	struct kis_run_cgroup *rc = ctx;
	struct kis_cgroup_events ev;
	if (!rc->cg || kis_cgroup_read_events(rc->cg, &ev, NULL) < 0)
		return 0;
	char buf[160];
	*reason = kis_limit_verdict(ev.oom_kills, ev.pids_max);
	if (*reason == KIS_REASON_MEMORY_LIMIT)
		snprintf(buf, sizeof(buf), "memory use passed limits.memory_bytes (%llu bytes)",
			 (unsigned long long)rc->limits.memory_bytes);
	else if (*reason == KIS_REASON_PIDS_LIMIT)
		snprintf(buf, sizeof(buf), "%llu forks refused at limits.pids (%llu)",
			 (unsigned long long)ev.pids_max, (unsigned long long)rc->limits.pids);
	else
		return 0;
	*detail = strdup(buf);
	return 1;
}

static void kill_all(void *ctx)
{
	struct kis_run_cgroup *rc = ctx;
	if (rc->cg)
		kis_cgroup_kill(rc->cg, NULL);
}

static void limit_events(void *ctx, struct kis_result *res)
{
	struct kis_run_cgroup *rc = ctx;
	struct kis_cgroup_events ev;
	if (!rc->cg || kis_cgroup_read_events(rc->cg, &ev, NULL) < 0)
		return;
	res->limit_events.counted = true;
	res->limit_events.oom_kills = ev.oom_kills;
	res->limit_events.forks_refused = ev.pids_max;
}

static int cpu_used(void *ctx, uint64_t *ms)
{
	struct kis_run_cgroup *rc = ctx;
	return rc->has_cpu ? kis_cpuacct_read_ms(rc->cpu_fd, ms) : -1;
}

void kis_run_cgroup_hooks(struct kis_run_cgroup *rc, struct kis_supervise_hooks *h)
{
	memset(h, 0, sizeof(*h));
	if (!rc->cg)
		return;
	h->explain = explain;
	h->kill_all = kill_all;
	h->cpu_used_ms = cpu_used;
	h->limit_events = limit_events;
	h->ctx = rc;
}

void kis_run_cgroup_close(struct kis_run_cgroup *rc)
{
	if (rc->has_cpu)
		close(rc->cpu_fd);
	rc->has_cpu = false;
	if (rc->cg)
		kis_cgroup_destroy(rc->cg, NULL);
	rc->cg = NULL;
}

unsigned kis_cgroup_limits_available(void)
{
	char why[160];
	return kis_cgroup_probe(why, sizeof(why));
}

/* A session's group counts OOM kills and refused forks over its whole life:
 * the last counts seen are kept in `file` beside the session, and only an
 * increase is blamed on this exec. */
int kis_cgroup_explain_since(const struct kis_cgroup *cg, int dir_fd, const char *file,
			     struct kis_result *res)
{
	struct kis_cgroup_events ev;
	if (kis_cgroup_read_events(cg, &ev, NULL) < 0)
		return 0;
	unsigned long long seen_oom = 0, seen_pids = 0;
	char buf[64];
	int fd = openat(dir_fd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0 || (buf[n] = '\0', sscanf(buf, "%llu %llu", &seen_oom, &seen_pids) != 2))
			seen_oom = seen_pids = 0;
	}
	fd = openat(dir_fd, file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		int n = snprintf(buf, sizeof(buf), "%llu %llu\n", (unsigned long long)ev.oom_kills,
				 (unsigned long long)ev.pids_max);
		(void)!write(fd, buf, (size_t)n);
		close(fd);
	}
	/* counted on every exec, whatever its top command's fate */
	return kis_result_blame_limits(res, ev.oom_kills > seen_oom ? ev.oom_kills - seen_oom : 0,
				       ev.pids_max > seen_pids ? ev.pids_max - seen_pids : 0,
				       "memory use passed the session's limits.memory_bytes",
				       "forks refused at the session's limits.pids");
}

unsigned kis_cgroup_limits_asked(const struct kis_limits *l)
{
	unsigned bits = 0;
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++)
		if ((KIS_CGROUP_LIMIT_BITS & (1u << i)) && kis_limit_get(l, i))
			bits |= 1u << i;
	return bits;
}
