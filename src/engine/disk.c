/* SPDX-License-Identifier: MIT */
/* limits.disk_bytes for the tiers whose workspace lives on the host's
 * disk: checked before a workspace is made, set after, judged after. */
#include "core/util.h"

#include <string.h>

#include "engine/internal.h"
#include "kis/store.h"

/* Can disk_bytes bind this run? 1 yes, 0 no (why says), on the store at
 * store_root, for backend b (root keeping CAP_SYS_RESOURCE passes an ext4
 * project limit: the process tier as root). */
static int disk_enforceable(struct kis_engine_ctx *ec, const struct kis_backend *b, bool has_ws,
			    char *why, size_t n)
{
	if (!has_ws) {
		snprintf(why, n, "it bounds what a run adds to its workspace, and this run has "
			 "none: give --base or --workspace");
		return 0;
	}
	struct kis_store *s = NULL;
	struct kis_error *e = NULL;
	if (kis_ctx_store(ec, &s, &e) < 0) {
		snprintf(why, n, "%s", e && e->message ? e->message : "cannot open the store");
		kis_error_free(e);
		return 0;
	}
	bool binds_root = false;
	int q = kis_store_disk_quota(s, &binds_root, why, n);
	if (q == 1 && b->tier == KIS_TIER_PROCESS && geteuid() == 0 && !binds_root) {
		snprintf(why, n, "the store's filesystem lets a writer with CAP_SYS_RESOURCE past "
			 "project quotas (ext4), and the process tier keeps root's capabilities");
		q = 0;
	}
	if (q == 0 && why[0] && !strstr(why, kis_store_root(s))) {
		size_t l = strlen(why);
		snprintf(why + l, n - l, " (store at '%s')", kis_store_root(s));
	}
	return q;
}

int kis_disk_check(const struct kis_profile *p, struct kis_engine_ctx *ec,
		   const struct kis_backend *b, const struct kis_caps *caps, bool *apply,
		   struct kis_error **err)
{
	*apply = false;
	/* the store outlives a run in a library's or a runtime's process:
	 * nothing of an earlier run's image (its size, scratch or not) is
	 * left to this run's clone */
	struct kis_store *st = NULL;
	if ((p->base || p->workspace) && kis_ctx_store(ec, &st, NULL) == 0)
		kis_store_set_clone_disk(st, 0, false);
	if (caps->limits & KIS_LIMIT_DISK)
		return 0; /* the backend bounds its own writable layer (microvm) */
	char why[320] = "";
	int q = disk_enforceable(ec, b, p->base || p->workspace, why, sizeof(why));
	if (q == 1) {
		*apply = true;
		/* a clone of this run gets its disk image as it is made */
		struct kis_store *s = NULL;
		struct kis_limits l;
		kis_limits_resolve(&p->limits, &l);
		if (kis_ctx_store(ec, &s, NULL) == 0)
			kis_store_set_clone_disk(s, l.disk_bytes, !p->keep);
		return 0;
	}
	if (p->limits.disk_bytes)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "limits.disk_bytes: the %s backend cannot enforce it here: %s; "
				     "use the microvm tier, or a store on a filesystem mounted "
				     "with project quotas (prjquota)",
				     b->name, why);
	return 0; /* the default binds where it can, as memory and pids do */
}

int kis_disk_apply(struct kis_engine_ctx *ec, const char *ws_id, uint64_t bytes, bool asked,
		   struct kis_error **err)
{
	struct kis_store *s = NULL;
	TRY(kis_ctx_store(ec, &s, err));
	int r = kis_workspace_disk_limit(s, ws_id, bytes, asked, err);
	return r;
}

void kis_disk_explain(struct kis_engine_ctx *ec, const char *ws_id, struct kis_result *res)
{
	/* as for pids: a command that failed while its workspace was full
	 * ended because of the limit (EDQUOT fails a write, not the process) */
	bool failed = (res->reason == KIS_REASON_EXITED && res->exit_code != 0) ||
		      res->reason == KIS_REASON_SIGNALED;
	if (!failed || !ws_id)
		return;
	struct kis_store *s = NULL;
	if (kis_ctx_store(ec, &s, NULL) < 0)
		return;
	uint64_t used = 0, limit = 0;
	int r = kis_workspace_disk_usage(s, ws_id, &used, &limit);
	/* within a block group's worth of the limit: the last write did not fit */
	if (r < 0 || !limit || used + (256u << 10) < limit)
		return;
	char d[160];
	snprintf(d, sizeof(d), "the workspace's writes reached limits.disk_bytes (%llu bytes)",
		 (unsigned long long)limit);
	res->reason = KIS_REASON_DISK_LIMIT;
	free(res->detail);
	res->detail = strdup(d);
}
