/* SPDX-License-Identifier: MIT */
/* The command's confinement inside the microvm guest: what the host tier
 * applies on the host (src/confine/plan.c), applied by the guest's agent
 * to each command it starts, so that root of the guest is not the
 * command's (issue 15 item 3).
 *
 * Why an unprivileged user and not uid 0 without capabilities: the guest
 * kernel, like any, trusts the global root uid for more than its
 * capabilities. proc_sys_permission compares the euid with GLOBAL_ROOT_UID
 * and nothing else, so a capless uid 0 writes kernel.core_pattern (a
 * pipe the kernel runs, with every capability, at the next core dump;
 * RLIMIT_CORE 0 does not stop a piped dump, core(5)); cgroup.procs files
 * are root's 0644, so it moves itself out of its pids group; the agent's
 * processes are root's too, so it can signal them. As uid KIS_GUEST_UID none of that is its own, and the
 * workspace still is (the guest mounts its layers idmapped, guest.c). */
#include "core/util.h"

#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "agent/confine.h"
#include "confine/confine.h"
#include "exec/exec.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

void kis_agent_confine_init(struct kis_agent_confine *c, int seccomp_fd)
{
	memset(c, 0, sizeof(*c));
	c->seccomp_fd = seccomp_fd;
	c->cg_procs_fd = -1;
	c->uid = (uid_t)KIS_GUEST_UID;
	c->gid = (gid_t)KIS_GUEST_UID;
}

int kis_agent_confine_prepare(struct kis_agent_confine *c, enum kis_net_mode net,
			      struct kis_error **err)
{
	kis_agent_confine_init(c, -1);
	/* The guest is a kernel of the sandbox's own: its SysV IPC is no one
	 * else's, and no host socket is in its filesystem (the agent's own
	 * listener is root's 0755 socket file and checks its peer's uid) */
	struct kis_seccomp_opts sc = {.net = net, .allow_sysv_ipc = true};
	return kis_seccomp_export_bpf_fd(&sc, &c->seccomp_fd, err);
}

int kis_agent_confine_child(void *ctx, struct kis_error **err)
{
	struct kis_agent_confine *c = ctx;
	/* into the exec's own leaf first ("0": ourselves), while we may write
	 * root's cgroup.procs */
	if (c->cg_procs_fd >= 0 && write(c->cg_procs_fd, "0", 1) != 1)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot join the command's cgroup");
	/* cgroup_namespaces(7): the namespace's root is the cgroup we are in,
	 * the exec's leaf under the agent's pids group; with the hierarchy mounted nsdelegate
	 * (guest.c) a move to a group outside it is refused (ENOENT) whatever
	 * the file permissions say. Needs CAP_SYS_ADMIN: first. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make a cgroup namespace");
	/* cgroup_namespaces(7): a cgroup2 mount made from inside shows the
	 * namespace's root as its own; read-only, and nsdelegate (guest.c)
	 * keeps the root's interface files (cpu.max, memory.max) unwritable
	 * from inside whatever the mount says */
	if (c->mount_cgroup && mount("cgroup2", "/sys/fs/cgroup", "cgroup2",
				     MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot mount the container's cgroup at /sys/fs/cgroup");
	int keep = 3;
	struct kis_harden_opts h = {
		.limits = c->limits, .keep_fds = c->keep_fd3 ? &keep : NULL,
		.n_keep = c->keep_fd3 ? 1 : 0, .set_user = true, .uid = c->uid, .gid = c->gid,
	};
	TRY(kis_harden_self(&h, err));
	/* spawn entered the directory as root, before us: a directory only
	 * root may reach (the disk layers, a cwd the command's own shell
	 * reported as its state) must not be the command's through it. From
	 * "/" as spawn resolved it (RESOLVE_IN_ROOT); as the sandbox user a
	 * magic link leads only where that user may go. */
	if (c->cwd && (chdir("/") < 0 || chdir(c->cwd) < 0)) {
		kis_error_set(err, KIS_E_INTERNAL, errno,
			      "the working directory '%s' is closed to the sandbox user", c->cwd);
		return KIS_CHILD_SETUP_CWD; /* setup_failed, naming it */
	}
	/* last: the filter then only has to allow execve of the command */
	return kis_seccomp_load_bpf_fd(c->seccomp_fd, err);
}
