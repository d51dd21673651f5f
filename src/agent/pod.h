/* SPDX-License-Identifier: MIT */
/* The containers of a kis-vm pod inside its guest (pod.c): an exec's
 * worker starts, joins or removes one (docs/protocol.md "container"). */
#ifndef KIS_AGENT_POD_H
#define KIS_AGENT_POD_H

#include <stdbool.h>
#include <sys/types.h>

#include "agent/exec_json.h"

/* The mount slots a container's root may come from: the microvm's
 * (src/backends/microvm/vm.h KIS_MVM_MOUNTS, the device set). */
#define KIS_POD_SLOTS 4

/* The guest's own root (an fd taken before the agent's chroot), the
 * layers' id map and the layers' directory (LAYERS: rw/ is the writable
 * disk): set by the guest's init in the agent's process. */
void kis_pod_set_guest(int root_fd, int userns_fd, const char *layers);

/* One exec's container work, in its worker. */
struct kis_pod_exec {
	int dir_fd;        /* init: the container's record directory */
	int proc_fd;       /* init: the guest's /proc */
	int pod_root_fd;   /* the pod root's /etc, for the file binds */
	bool mount_proc;   /* init: the command mounts its /proc (kis_pod_child) */
	bool done;         /* remove: nothing to run */
	int cg_procs_fd;   /* init, join: the container's group's cgroup.procs; -1 none */
	int cg_fd;         /* init: that group, read for memory.events once the init ends */
	bool mount_cgroup; /* init: the command mounts its group at /sys/fs/cgroup */
};
/* Before the command starts: for req's container (none: nothing), the
 * worker enters what the command is to run in (init: the container's
 * root, mount and pid namespaces made; join: its namespaces entered) or
 * does the removal. msg receives why on failure. The worker serves no
 * other exec afterwards (its namespaces are the container's). */
int kis_pod_exec_prepare(const struct kis_exec_req *req, struct kis_pod_exec *pe, char *msg,
			 size_t n);
/* init: the command started as pid (in the worker's pid namespace). */
void kis_pod_exec_started(struct kis_pod_exec *pe, pid_t pid);
void kis_pod_exec_release(struct kis_pod_exec *pe);
/* init, once its command has ended: the OOM kills in the container's
 * memory group (memory.events "oom_kill"); 0 without one. */
uint64_t kis_pod_oom_kills(const struct kis_pod_exec *pe);
/* In the command's child, before its confinement; -1 with errno. */
int kis_pod_child(const struct kis_pod_exec *pe);

#endif
