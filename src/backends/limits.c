/* SPDX-License-Identifier: MIT */
/* The cgroup of one native run: memory and pids limits, the evidence for
 * memory_limit and pids_limit, and killing everything the run made. */
#include "core/util.h"

#include <fcntl.h>
#include <string.h>

#include "backends/common.h"
#include "confine/confine.h"
#include "exec/exec.h"

int kis_run_cgroup_open(struct kis_run_cgroup *rc, const char *sandbox_id,
			const struct kis_limits *l, unsigned enforceable, struct kis_error **err)
{
	memset(rc, 0, sizeof(*rc));
	if (!(enforceable & (KIS_LIMIT_MEMORY | KIS_LIMIT_PIDS)))
		return 0;
	struct kis_cgroup_limits cl = {
		.memory_bytes = (enforceable & KIS_LIMIT_MEMORY) ? l->memory_bytes : 0,
		.pids = (enforceable & KIS_LIMIT_PIDS) ? l->pids : 0,
	};
	rc->memory_bytes = cl.memory_bytes;
	rc->pids = cl.pids;
	TRY(kis_cgroup_create(sandbox_id, &cl, &rc->cg, err));
	rc->cpu_fd = kis_cgroup_cpu_fd(rc->cg);
	rc->has_cpu = rc->cpu_fd >= 0;
	return 0;
}

int kis_run_cgroup_engine_joins(struct kis_run_cgroup *rc, struct kis_error **err)
{
	if (!rc->cg || !rc->pids)
		return 0;
	rc->engine_pids++;
	return kis_cgroup_set_pids(rc->cg, rc->pids + rc->engine_pids, err);
}

/* In the child, before exec: join the group, so nothing the command forks
 * can be outside it (no allocation: the paths were prepared). */
int kis_run_cgroup_join(struct kis_run_cgroup *rc, struct kis_error **err)
{
	return rc->cg ? kis_cgroup_attach(rc->cg, 0, err) : 0;
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
			 (unsigned long long)rc->memory_bytes);
	else if (*reason == KIS_REASON_PIDS_LIMIT)
		snprintf(buf, sizeof(buf), "%llu forks refused at limits.pids (%llu)",
			 (unsigned long long)ev.pids_max, (unsigned long long)rc->pids);
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
