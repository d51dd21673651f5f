/* SPDX-License-Identifier: MIT */
/* The command's confinement inside the microvm guest, where the agent is
 * PID 1 with every capability and the command must still be held as the
 * host tier holds it (issue 15 item 3). */
#ifndef KIS_AGENT_CONFINE_H
#define KIS_AGENT_CONFINE_H

#include <stdbool.h>
#include <sys/types.h>

#include "kis/error.h"
#include "kis/profile.h"

/* The guest's sandbox user: the workspace's ids 0..65535 are shown to it
 * as KIS_GUEST_UID..KIS_GUEST_UID+65535 (idmapped layers), so it owns
 * what root owns in the workspace and nothing of the guest's own. */
#define KIS_GUEST_UID 65536u
#define KIS_GUEST_IDS 65536u

struct kis_agent_confine {
	int seccomp_fd;       /* the shared policy as raw BPF (sealed memfd) */
	uid_t uid;            /* the unprivileged user commands run as */
	gid_t gid;
	/* per exec, set by the worker before it starts the command */
	bool keep_fd3;        /* the durable shell's state pipe */
	int cg_procs_fd;      /* the exec's leaf's cgroup.procs (or -1), joined first */
	/* a pod container's init with a group of its own (pod.c): the cgroup2
	 * hierarchy mounted read-only at /sys/fs/cgroup once the cgroup
	 * namespace is made, so that the container sees its group as its
	 * root, as runc shows it */
	bool mount_cgroup;
	const struct kis_limits *limits;
	const char *cwd;      /* entered again as the sandbox user (or NULL) */
};

/* c for commands under the seccomp program seccomp_fd (made earlier by
 * kis_agent_confine_prepare for the same network mode; c takes it). */
void kis_agent_confine_init(struct kis_agent_confine *c, int seccomp_fd);
/* Before any command: the seccomp program for network mode net. */
int kis_agent_confine_prepare(struct kis_agent_confine *c, enum kis_net_mode net,
			      struct kis_error **err);
/* In the command's child, between fork and exec (a struct kis_spawn
 * child_setup; ctx is the struct kis_agent_confine): the exec's leaf
 * joined, a cgroup namespace rooted there (with mount_cgroup, mounted at
 * /sys/fs/cgroup), then kis_harden_self (hard rlimits, fds,
 * no_new_privs, securebits, the bounding set emptied, the sandbox user,
 * every other capability set cleared), the working directory entered
 * again as that user, then the seccomp policy, last.
 * No allocation on the success path. */
int kis_agent_confine_child(void *ctx, struct kis_error **err);

#endif
