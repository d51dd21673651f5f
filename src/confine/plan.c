/* SPDX-License-Identifier: MIT */
/* The host tier's confinement as one plan: built before fork (seccomp BPF,
 * Landlock ruleset), applied in the child by one call in the right order. */
#include "confine/confine.h"

#include <string.h>
#include <unistd.h>

void kis_confine_plan_init(struct kis_confine_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->landlock_fd = -1;
	p->seccomp_fd = -1;
}

int kis_confine_plan_prepare(struct kis_confine_plan *p, const struct kis_seccomp_opts *sc,
			     const struct kis_landlock_opts *ll, struct kis_error **err)
{
	if (sc && kis_seccomp_export_bpf_fd(sc, &p->seccomp_fd, err) < 0)
		return -1;
	if (ll && kis_landlock_prepare(ll, &p->landlock_fd, &p->landlock, err) < 0) {
		kis_confine_plan_release(p);
		return -1;
	}
	return 0;
}

/* Harden first (it sets no_new_privs, which both later steps need, and
 * still holds CAP_SETUID for the user switch), then Landlock (its syscalls
 * need not be in the seccomp allow-list), then seccomp last. */
int kis_confine_child(void *ctx, struct kis_error **err)
{
	struct kis_confine_plan *p = ctx;
	TRY(kis_harden_self(&p->harden, err));
	/* enforce closes the child's copy of the fd; the plan is not written
	 * (a child sharing the engine's memory, kis_spawn.vfork_ok, would
	 * take the parent's copy from kis_confine_plan_release) */
	if (p->landlock_fd >= 0)
		TRY(kis_landlock_enforce(p->landlock_fd, err));
	if (p->seccomp_fd >= 0)
		TRY(kis_seccomp_load_bpf_fd(p->seccomp_fd, err));
	return 0;
}

void kis_confine_plan_release(struct kis_confine_plan *p)
{
	if (p->landlock_fd >= 0)
		close(p->landlock_fd);
	if (p->seccomp_fd >= 0)
		close(p->seccomp_fd);
	p->landlock_fd = p->seccomp_fd = -1;
}
