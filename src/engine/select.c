/* SPDX-License-Identifier: MIT */
/* Tier selection (DESIGN.md, Selection): a pinned backend or tier must be
 * present; auto takes the most restrictive present tier that can run the
 * command, and never the process tier. The table it picks from is table.c's. */
#include "core/util.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>

#include "backends/common.h"
#include "core/log.h"
#include "core/record.h"
#include "engine/internal.h"
#include "kis/backend.h"

void kis_backend_probe(const struct kis_backend *b, const char *store_root, bool thorough,
		       struct kis_caps *caps)
{
	struct kis_engine_ctx e;
	kis_ctx_init(&e, store_root, thorough);
	b->probe(&e.ctx, caps);
	/* the native tiers: how the memory and pids defaults bind where no
	 * cgroup does (issue 40 item 1); the wasm tier bounds its own */
	caps->default_limits[0] = '\0';
	if (thorough && caps->native)
		kis_caps_default_limits(caps, b->rootless_nproc_unbound);
	kis_ctx_release(&e);
}

/* A module starts with "\0asm" (WebAssembly core spec, 5.5.16 Modules).
 * With a root (the workspace's files, or the base's a run will clone), the
 * command is looked up inside it as the wasm tier will: relative to it or
 * under /workspace, resolved beneath it (openat2(2) RESOLVE_BENEATH), so a
 * symlink in the tree never makes selection read a host file. */
static bool is_wasm_file(const char *root, const char *path)
{
	_cleanup_close_ int fd = -1;
	if (root) {
		if (!strncmp(path, "/workspace/", 11))
			path += 11;
		else if (path[0] == '/')
			return false;
		_cleanup_close_ int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct open_how how = {
			.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
		};
		if (dfd >= 0)
			fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	}
	unsigned char m[4];
	return fd >= 0 && read(fd, m, 4) == 4 && !memcmp(m, "\0asm", 4);
}

static bool can_run(const struct kis_caps *c, const struct kis_backend *b, bool wasm)
{
	return wasm ? b->tier == KIS_TIER_WASM : c->native;
}

/* Would this backend's plan take the profile? Planned as a run without
 * its workspace is (run.c plans once so before cloning): plan() touches
 * nothing on the host. */
static int plan_check(const struct kis_ctx *ctx, const struct kis_backend *b,
		      const struct kis_caps *caps, const struct kis_profile *p, char *const *argv,
		      struct kis_error **err)
{
	static char *const none[] = {"true", NULL};
	struct kis_run_request req = {.ctx = ctx, .profile = p, .argv = argv && argv[0] ? argv : none,
				      .sandbox_id = "s-selection",
				      .io = {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
					     .cancel_fd = -1}};
	kis_limits_resolve(&p->limits, &req.limits);
	if (p->tty.enabled && !caps->tty)
		return kis_error_set(err, KIS_E_TTY_UNSUPPORTED, 0, "no terminal");
	struct kis_plan *plan = NULL;
	TRY(b->plan(caps, &req, &plan, err));
	b->plan_free(plan);
	return 0;
}

int kis_select_backend(const struct kis_profile *p, char *const *argv, const char *store_root,
		       const struct kis_backend **out, struct kis_caps *caps,
		       struct kis_error **err)
{
	struct kis_engine_ctx e;
	kis_ctx_init(&e, store_root, false);
	int r = kis_select_backend_in(&e.ctx, p, argv, NULL, out, caps, err);
	kis_ctx_release(&e);
	return r;
}

int kis_select_backend_in(const struct kis_ctx *ctx, const struct kis_profile *p,
			  char *const *argv, const char *root,
			  const struct kis_backend **out, struct kis_caps *caps,
			  struct kis_error **err)
{
	kis_test_count("select");
	if (p->backend) {
		const struct kis_backend *b = kis_backend_find(p->backend);
		if (!b)
			return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
					     "backend '%s' is not in this build: see 'kis sandbox "
					     "backends'",
					     p->backend);
		if (p->tier != KIS_TIER_AUTO && p->tier != b->tier)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "backend: '%s' serves the %s tier, not the %s tier",
					     b->name, kis_tier_name(b->tier), kis_tier_name(p->tier));
		b->probe(ctx, caps);
		if (!caps->present)
			return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
					     "backend '%s' is not available on this host: %s", b->name,
					     caps->why_absent);
		kis_info("backend %s chosen: named by the profile (backend)", b->name);
		*out = b;
		return 0;
	}
	if (p->tier != KIS_TIER_AUTO) {
		char why[400] = "";
		size_t nt = 0;
		const struct kis_backend *const *table = kis_backends(&nt);
		for (size_t i = 0; i < nt; i++) {
			if (table[i]->tier != p->tier)
				continue;
			table[i]->probe(ctx, caps);
			if (caps->present) {
				kis_info("backend %s chosen: the first present of the pinned %s "
					 "tier%s%s", table[i]->name, kis_tier_name(p->tier),
					 *why ? "; passed over " : "", why);
				*out = table[i];
				return 0;
			}
			size_t o = strlen(why);
			snprintf(why + o, sizeof(why) - o, "%s%s: %s", o ? "; " : "", table[i]->name,
				 caps->why_absent);
		}
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "the %s tier is not available on this host%s%s",
				     kis_tier_name(p->tier), *why ? ": " : " (no backend in this build)",
				     why);
	}
	bool wasm = argv && argv[0] && is_wasm_file(root, argv[0]);
	/* Strongest tier first; within a tier, the table's order of preference.
	 * The process tier is never chosen implicitly: it is an escape hatch.
	 * A backend that is present but cannot enforce the whole profile (its
	 * plan refuses a field) is passed over for the next one down; only when
	 * none can is the profile refused, naming what blocked each. */
	char why[1024] = "";
	bool any_present = false;
	size_t nt = 0;
	const struct kis_backend *const *table = kis_backends(&nt);
	for (int t = KIS_TIER__COUNT - 1; t > KIS_TIER_PROCESS; t--) {
		for (size_t i = 0; i < nt; i++) {
			const struct kis_backend *b = table[i];
			if ((int)b->tier != t)
				continue;
			b->probe(ctx, caps);
			if (!caps->present || !can_run(caps, b, wasm))
				continue;
			any_present = true;
			struct kis_error *e = NULL;
			int r = plan_check(ctx, b, caps, p, argv, &e);
			if (r == 0) {
				kis_info("backend %s chosen: tier auto, the strongest tier present "
					 "that can run the command%s and enforce the profile%s%s",
					 b->name, wasm ? " (a WebAssembly module)" : "",
					 *why ? "; passed over " : "", why);
				*out = b;
				return 0;
			}
			if (e && e->code != KIS_E_PROFILE_UNSATISFIABLE &&
			    e->code != KIS_E_TTY_UNSUPPORTED) {
				*err = e; /* not a matter of this tier: the profile itself */
				return -1;
			}
			size_t o = strlen(why);
			snprintf(why + o, sizeof(why) - o, "%s%s: %s", o ? "; " : "", b->name,
				 e && e->message ? e->message : "refused");
			kis_error_free(e);
		}
	}
	if (any_present)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "no tier available here can enforce this profile: %s", why);
	return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
			     "no confining tier that can run this command is available on this "
			     "host (see 'kis sandbox backends'); the process tier is never chosen "
			     "automatically: pin it with --tier process --allow-process-tier");
}
