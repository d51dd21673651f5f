/* SPDX-License-Identifier: MIT */
/* kis-runtime at the microvm tier: a bundle's rootfs and process run in a
 * guest of its own, through the engine's session API (kis/session.h), as
 * Kata runs a pod in a VM.
 *
 * Theory of operation. The OCI lifecycle maps onto one kis microvm session:
 *   create: config.json is checked against what the guest gives (mvm_plan:
 *     a field it cannot give is refused by name, never run weaker); the
 *     bundle's rootfs is imported into a store of this runtime's own
 *     (<root>/kis-microvm/.store) as a base, a workspace cloned from it,
 *     the engine's file binds (/etc/hosts, /etc/hostname, ...) copied into
 *     that workspace (a copy made at create: not live), and a session
 *     created on it with `root: workspace`: the VM is booted (a snapshot
 *     restored) with the workspace as the guest's root and its agent
 *     ready, but no process of the bundle runs. A host process, the
 *     "container process" whose pid state and --pid-file give, is forked
 *     and blocks on the fifo `start`: the container is `created`.
 *   start: the fifo is written; the container process becomes the exec of
 *     process.args in the session (kis_session_exec) with the engine's
 *     stdio (or the terminal from --console-socket) wired to it: `running`.
 *     It exits with the guest process's status (128+N for a signal), which
 *     the engine's subreaper (conmon, the containerd shim) collects, as it
 *     would collect runc's init: `stopped`. Its VM, workspace and base are
 *     removed as it ends (or by kill -KILL), not left for delete.
 *   kill: the signal goes to the container process, which forwards it to
 *     the guest process (the exec's signal channel); SIGKILL, which it
 *     cannot catch, ends it at once and its closed connection makes the
 *     agent kill the guest process.
 *   exec: another kis_session_exec in the same session (--detach: in a
 *     child whose pid is the --pid-file's).
 *   delete: the session destroyed (the VM stopped), the workspace and the
 *     base removed, the state gone.
 * A pod (containerd's CRI: annotated bundles, namespaces joined by path)
 * is one VM: the sandbox container creates as above, an app container
 * boots nothing and runs as an exec of its sandbox's session once
 * mvm_pod.c has proven the pod (its theory of operation is there): at
 * create its rootfs is imported as a base and its image swapped into a
 * mount slot of the pod's VM (krt_pod_slot_take, kis_session_attach_base;
 * one slot per distinct tree, 4 in all), and its process starts as the
 * init of a container of the guest's (agent/pod.c: its own root, mount
 * and pid namespaces, the pod's hostname); its execs join that
 * container, and its delete ends it in the guest and frees the slot
 * (pod_app_end). The pod's network namespace reaches the guest through
 * passt started inside it (src/net/passt.c, kis_pod_attach_vm).
 * Differences from crun that the guest makes, and the README names: a
 * container of its own VM is not pid 1 of a pid namespace (the guest's
 * agent is; a pod's app container is, as under crun), so a signal it has
 * no handler for takes its default action; it runs as the
 * guest's sandbox user (uid 65536, owning the rootfs's root files through
 * an idmapped mount) with no capability; memory is the VM's RAM, and a
 * pod app's memory limit is a guest cgroup of its own (agent/pod.c: its
 * OOM kill ends it 137 with memory_limit). The engine's shim learns of
 * an OOM from the host memory group of the container process: an app
 * with a limit has its proxy in a leaf of its own at linux.cgroupsPath,
 * where the proxy makes an OOM kill happen when the guest reports one
 * (relay_leaf: CRI's ContainerStatus then says "OOMKilled", as for runc);
 * another container process stays in the cgroups of the kis-runtime that
 * forked it (the shim's). */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>

#include <linux/openat2.h>

#include "confine/confine.h"
#include "core/log.h"
#include "kis/sandbox.h"
#include "runtime/mvm_image.h"
#include "runtime/mvm_pod.h"
#include "runtime/runtime.h"

#define MVM_DIR "kis-microvm"
#define MVM_STORE ".store" /* no container id starts with '.' */
/* the file binds an engine makes (hosts, hostname, resolv.conf,
 * .containerenv) are small; a larger one is not a configuration file */
#define MVM_BIND_FILE_MAX (1u << 20)
#define MVM_MIN_MEM (128ull << 20) /* microvm.c's MIN_MEM_MIB */
/* A create's record, before its state, of what it has made: an app's pod,
 * slot and base; a lone container's or a pod sandbox's base, workspace and
 * session, each id written the moment it is minted, before what it names
 * can exist. A create killed midway leaves it, and delete undoes what it
 * names (mvm_creating_undo). */
#define MVM_CREATING "creating.json"

/* ---------------------------------------------------------- the plan */

struct mvm_plan {
	struct kis_profile prof; /* tier, root, network, limits, env, cwd */
	json_t *args;            /* borrowed from the config */
	bool terminal;
	unsigned rows, cols;
	json_t *files;           /* [[source, destination]]: file binds to copy */
	struct mvm_app_res {
		uint64_t memory;        /* a pod app's linux.resources.memory.limit; 0 none */
		uint64_t cpu_quota_us;  /* its linux.resources.cpu.quota; 0 none */
		uint64_t cpu_period_us; /* its period with that quota; 0 the kernel's */
	} app;
};

static void mvm_plan_release(struct mvm_plan *p)
{
	kis_profile_release(&p->prof);
	json_decref(p->files);
}

/* process.rlimits: those the guest's agent applies to the process, as
 * kis limits (the soft value, the one that acts); RLIMIT_NPROC counts
 * the user's processes, and every process of the guest's sandbox user is
 * the container's: the guest's pids cgroup at that number is as strict. */
static int mvm_rlimits(json_t *rl, struct kis_limits *lim, struct kis_error **err)
{
	size_t i;
	json_t *r;
	json_array_foreach(rl, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));
		json_int_t soft = json_integer_value(json_object_get(r, "soft"));
		if (!t)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "process.rlimits[%zu].type is missing", i);
		if (soft <= 0 && strcmp(t, "RLIMIT_NOFILE") != 0 && strcmp(t, "RLIMIT_FSIZE") != 0 &&
		    strcmp(t, "RLIMIT_CPU") != 0 && strcmp(t, "RLIMIT_NPROC") != 0)
			soft = 0;
		uint64_t v = (uint64_t)soft;
		if (strcmp(t, "RLIMIT_NOFILE") == 0)
			lim->open_files = v ? v : 1;
		else if (strcmp(t, "RLIMIT_FSIZE") == 0)
			lim->file_bytes = v ? v : 1;
		else if (strcmp(t, "RLIMIT_CPU") == 0)
			lim->cpu_ms = (v ? v : 1) * 1000;
		else if (strcmp(t, "RLIMIT_NPROC") == 0) {
			if (!lim->pids || (v && v < lim->pids))
				lim->pids = v ? v : 1;
		} else
			return krt_mvm_refuse(err, "process.rlimits %s: the guest's agent applies "
					       "RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_CPU and "
					       "RLIMIT_NPROC only", t);
	}
	return 0;
}

static bool empty(json_t *v)
{
	return !v || json_is_null(v) || (json_is_object(v) && !json_object_size(v)) ||
	       (json_is_array(v) && !json_array_size(v));
}

/* linux.resources.cpu. An app container of a pod: its quota (with its
 * period) is cpu.max of its own group in the pod's guest (agent/pod.c),
 * the kernel's bounds checked here first (a value the guest's kernel
 * refuses would fail the start, not the create). A quota is a bound on
 * the container's processes, as runc binds the container's cgroup:
 *   - the sandbox (pause) container's: runc binds the pause process's own
 *     group with it; kis-vm's pause container is the pod's VM, and a quota
 *     there would read as a bound on the pod that nothing enforces (the
 *     VM's vCPUs bound it): refused, naming where a quota binds (the app
 *     containers');
 *   - a lone microvm container's: its process is its VM's session's
 *     command, in no group of its own; refused.
 * A period without a quota bounds nothing (the group's quota stays
 * "max"): checked, not carried. shares are a weight among the host's
 * groups: the VM's vCPUs are the guest's; taken unapplied. A CPU set, a
 * realtime budget, burst and idle are not had. */
static int mvm_cpu(json_t *cpu, enum krt_pod_role role, struct mvm_app_res *res,
		   struct kis_error **err)
{
	bool app = role == KRT_POD_APP;
	const char *ck;
	json_t *cv;
	uint64_t quota = 0, period = 0;
	json_object_foreach(cpu, ck, cv) {
		bool is_quota = strcmp(ck, "quota") == 0, is_period = strcmp(ck, "period") == 0;
		if (is_quota || is_period) {
			/* the model typed them (an integer; period at least 0) */
			json_int_t x = json_integer_value(cv);
			if (is_quota && x > 0 &&
			    ((uint64_t)x < KIS_CPU_QUOTA_MIN_US || (uint64_t)x > KIS_CPU_QUOTA_MAX_US))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "linux.resources.cpu.quota %lld is outside the "
						     "kernel's %llu..%llu us (sched-bwc.rst); -1 is "
						     "none",
						     (long long)x, KIS_CPU_QUOTA_MIN_US,
						     KIS_CPU_QUOTA_MAX_US);
			if (is_period && x != 0 &&
			    ((uint64_t)x < KIS_CPU_PERIOD_MIN_US || (uint64_t)x > KIS_CPU_PERIOD_MAX_US))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "linux.resources.cpu.period %lld is outside the "
						     "kernel's %llu..%llu us (sched-bwc.rst)",
						     (long long)x, KIS_CPU_PERIOD_MIN_US,
						     KIS_CPU_PERIOD_MAX_US);
			/* quota -1 (or 0): none, as runc reads it */
			*(is_quota ? &quota : &period) = x > 0 ? (uint64_t)x : 0;
			continue;
		}
		if (strcmp(ck, "shares") == 0 || empty(cv) ||
		    (json_is_integer(cv) && json_integer_value(cv) <= 0) ||
		    (json_is_string(cv) && !*json_string_value(cv)))
			continue;
		return krt_mvm_refuse(err, "linux.resources.cpu.%s: not enforced in the guest%s", ck,
				  app ? " (an app container of a kis-vm pod binds cpu.quota and "
					"cpu.period, its guest group's cpu.max)"
				      : "");
	}
	if (!quota)
		return 0;
	if (role == KRT_POD_SANDBOX)
		return krt_mvm_refuse(err, "linux.resources.cpu.quota %llu: a kis-vm pod's sandbox "
				       "(pause) container is the pod's VM, whose CPU no quota "
				       "bounds (its vCPUs do); set the quota on the pod's app "
				       "containers (each one's is cpu.max of its own group in the "
				       "guest)",
				  (unsigned long long)quota);
	if (!app)
		return krt_mvm_refuse(err, "linux.resources.cpu.quota %llu: not enforced in the "
				       "guest: a lone kis-vm container's process has no group of "
				       "its own there (its VM's vCPUs bound it)",
				  (unsigned long long)quota);
	res->cpu_quota_us = quota;
	res->cpu_period_us = period;
	return 0;
}

/* An app container of a pod (role): its memory and CPU limits are its
 * own group's in the pod's guest (res), not the VM's RAM. */
static int mvm_resources(json_t *jres, enum krt_pod_role role, struct mvm_app_res *res,
			 struct kis_limits *lim, struct kis_error **err)
{
	bool app = role == KRT_POD_APP;
	const char *key;
	json_t *v;
	json_object_foreach(jres, key, v) {
		if (strcmp(key, "devices") == 0) {
			/* the device cgroup's rules: the guest's /dev is its own and
			 * its sandbox user opens none of the host's devices */
			continue;
		} else if (strcmp(key, "memory") == 0) {
			json_int_t m = json_integer_value(json_object_get(v, "limit"));
			if (app) {
				/* memory.max of a cgroup of the container's own in
				 * the guest (agent/pod.c). A limit above the pod
				 * VM's RAM is taken as given: harmless, the VM's
				 * RAM binds first (its OOM is the guest's), and
				 * the group still counts the container's kills */
				res->memory = m > 0 ? (uint64_t)m : 0;
				continue;
			}
			if (m > 0 && (uint64_t)m < MVM_MIN_MEM)
				return krt_mvm_refuse(err, "linux.resources.memory.limit %lld: the "
						       "microvm's memory is its RAM, at least %llu MiB",
						  (long long)m, MVM_MIN_MEM >> 20);
			if (m > 0)
				lim->memory_bytes = (uint64_t)m;
			/* swap, reservation, swappiness: the guest has no swap
			 * and no other tenant, so these ask nothing it breaks */
		} else if (strcmp(key, "pids") == 0) {
			json_int_t n = json_integer_value(json_object_get(v, "limit"));
			if (n > 0 && (!lim->pids || (uint64_t)n < lim->pids))
				lim->pids = (uint64_t)n;
		} else if (strcmp(key, "cpu") == 0) {
			TRY(mvm_cpu(v, role, res, err));
		} else if (!empty(v)) {
			return krt_mvm_refuse(err, "linux.resources.%s: not enforced in the guest", key);
		}
	}
	return 0;
}

/* mounts: the guest's own proc, sysfs, devpts, mqueue, cgroup and /dev;
 * tmpfs where asked (a directory of the guest's root there); an engine's
 * file bind copied in at create; a host directory never reaches the guest
 * (the guest's /dev/shm and /dev/mqueue stand for the engine's). */
static int mvm_mounts(json_t *mounts, json_t *files, struct kis_error **err)
{
	size_t i;
	json_t *m;
	json_array_foreach(mounts, i, m) {
		const char *type = json_string_value(json_object_get(m, "type"));
		const char *dst = json_string_value(json_object_get(m, "destination"));
		const char *src = json_string_value(json_object_get(m, "source"));
		if (!dst || dst[0] != '/')
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "mounts[%zu].destination must be absolute", i);
		if (!krt_mount_is_bind(m)) {
			static const char *const own[] = {"proc", "sysfs", "devpts", "mqueue",
							  "cgroup", "cgroup2", "tmpfs"};
			bool ok = false;
			for (size_t n = 0; type && n < ARRAY_SIZE(own); n++)
				ok = ok || strcmp(type, own[n]) == 0;
			if (!ok)
				return krt_mvm_refuse(err, "mounts[%zu] of type '%s' at '%s': the guest "
						       "mounts only its own proc, sysfs, devpts, "
						       "mqueue, cgroup and tmpfs",
						  i, type ? type : "", dst);
			continue;
		}
		struct stat st;
		if (!src || stat(src, &st) < 0)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, errno,
					     "mounts[%zu]: bind source '%s' is not there", i,
					     src ? src : "");
		/* src is the model's checked path (model.c): copied, not bound,
		 * but under the same rule as a bind (/etc/shadow is a small
		 * regular file too) */
		if (S_ISDIR(st.st_mode) &&
		    (strcmp(dst, "/dev/shm") == 0 || strcmp(dst, "/dev/mqueue") == 0))
			continue;
		if (!S_ISREG(st.st_mode) || st.st_size > MVM_BIND_FILE_MAX)
			return krt_mvm_refuse(err, "mounts[%zu]: a bind of '%s' at '%s': a host "
					       "directory or device does not reach the guest (only "
					       "files up to 1 MiB, copied at create)",
					  i, src, dst);
		if (json_array_append_new(files, json_pack("[s,s]", src, dst)) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts");
	}
	return 0;
}

static int mvm_plan(json_t *config, const struct krt_pod *pod, struct mvm_plan *p,
		    struct kis_error **err)
{
	memset(p, 0, sizeof(*p));
	kis_profile_init(&p->prof);
	p->files = json_array();
	if (!p->files)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "plan");
	struct kis_profile *pr = &p->prof;
	pr->tier = KIS_TIER_MICROVM;
	pr->root = KIS_ROOT_WORKSPACE;
	/* the container's own network namespace: the guest's loopback (a
	 * pod's sandbox: the pod's network on top, krt_mvm_create) */
	pr->net = KIS_NET_LOOPBACK;
	pr->net_explicit = true;
	/* a container lives as long as its process: no wall or CPU clock
	 * unless the bundle asks (RLIMIT_CPU), and no cut of its output,
	 * which the engine logs; the rest keep kis's defaults when unset */
	pr->limits.wall_ms = KIS_LIMIT_MAX_MS;
	pr->limits.cpu_ms = KIS_LIMIT_MAX_MS;
	pr->limits.output_bytes = KIS_LIMIT_MAX_BYTES;
	json_t *root = json_object_get(config, "root");
	if (!json_string_value(json_object_get(root, "path")))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "root.path is missing");
	/* a pod's sandbox: the CRI plugin always makes its root read-only.
	 * Its rootfs becomes the pod guest's root, a workspace of the VM's
	 * own (the image on the host is only read, to import it), in which
	 * the pause process and the app containers run; what the flag asks,
	 * that the pause process write nothing to the image, holds: nothing
	 * written in the guest reaches the bundle's rootfs. */
	if (json_is_true(json_object_get(root, "readonly")) && pod->role != KRT_POD_SANDBOX)
		return krt_mvm_refuse(err, "root.readonly: the guest's root is its writable workspace");
	json_t *proc = json_object_get(config, "process");
	p->args = json_object_get(proc, "args");
	if (!json_array_size(p->args))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "process.args is empty");
	size_t i;
	json_t *v;
	json_array_foreach(p->args, i, v)
		if (!json_is_string(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "process.args[%zu] is not a string", i);
	json_array_foreach(json_object_get(proc, "env"), i, v)
		if (!json_string_value(v) || kis_profile_set(pr, "env", json_string_value(v), err) < 0)
			return *err ? -1 : kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
							 "process.env[%zu] is not a string", i);
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	if (cwd && *cwd && kis_profile_set(pr, "cwd", cwd, err) < 0)
		return -1;
	json_t *user = json_object_get(proc, "user");
	if (json_integer_value(json_object_get(user, "uid")) ||
	    json_integer_value(json_object_get(user, "gid")))
		return krt_mvm_refuse(err, "process.user: the guest runs the process as its sandbox "
				       "user, the bundle's root; another uid or gid is not had");
	json_array_foreach(json_object_get(user, "additionalGids"), i, v)
		if (json_integer_value(v))
			return krt_mvm_refuse(err, "process.user.additionalGids: not had in the guest");
	p->terminal = json_is_true(json_object_get(proc, "terminal"));
	json_t *cs = json_object_get(proc, "consoleSize");
	p->rows = (unsigned)json_integer_value(json_object_get(cs, "height"));
	p->cols = (unsigned)json_integer_value(json_object_get(cs, "width"));
	TRY(mvm_rlimits(json_object_get(proc, "rlimits"), &pr->limits, err));
	if (!empty(json_object_get(config, "hooks")))
		return krt_mvm_refuse(err, "hooks: they run on the host against the container's "
				       "namespaces, which are in the guest");
	json_t *linux_ = json_object_get(config, "linux");
	bool netns = false;
	json_array_foreach(json_object_get(linux_, "namespaces"), i, v) {
		const char *t = json_string_value(json_object_get(v, "type"));
		const char *path = json_string_value(json_object_get(v, "path"));
		if (path && *path && krt_pod_ns_path_ok(pod, t, path, err) < 0)
			return -1;
		if (t && strcmp(t, "network") == 0)
			netns = true;
	}
	if (!netns)
		return krt_mvm_refuse(err, "linux.namespaces: no network namespace means the host's "
				       "network, which the guest has not (it has a loopback only)");
	/* an app container's memory and CPU limits: a group of its own in
	 * the pod's guest (agent/pod.c), its init and execs in it */
	TRY(mvm_resources(json_object_get(linux_, "resources"), pod->role, &p->app, &pr->limits,
			  err));
	if (pod->role == KRT_POD_APP && pr->limits.pids)
		return krt_mvm_refuse(err, "linux.resources.pids (or RLIMIT_NPROC): an app container "
				       "of a kis-vm pod counts in the pod VM's pids group; a limit "
				       "of its own is not enforced");
	if (json_array_size(json_object_get(linux_, "devices"))) {
		const char *dp = json_string_value(
			json_object_get(json_array_get(json_object_get(linux_, "devices"), 0), "path"));
		return krt_mvm_refuse(err, "linux.devices '%s': a host device does not reach the guest",
				  dp ? dp : "");
	}
	if (json_object_size(json_object_get(linux_, "sysctl"))) {
		const char *k = json_object_iter_key(json_object_iter(json_object_get(linux_, "sysctl")));
		return krt_mvm_refuse(err, "linux.sysctl '%s': not set in the guest", k ? k : "");
	}
	if (!empty(json_object_get(linux_, "intelRdt")) ||
	    !empty(json_object_get(linux_, "personality")))
		return krt_mvm_refuse(err, "linux.intelRdt and linux.personality: not had in the guest");
	const char *prop = json_string_value(json_object_get(linux_, "rootfsPropagation"));
	(void)prop; /* the guest's root is its own mount tree either way */
	return mvm_mounts(json_object_get(config, "mounts"), p->files, err);
}

/* ---------------------------------------------------------- the state */

static int open_mvm_root(const struct krt_globals *g, bool create, struct kis_error **err)
{
	return krt_tier_root(g, MVM_DIR, create, err);
}

static int open_container(const struct krt_globals *g, const char *id)
{
	return krt_tier_container(g, MVM_DIR, id);
}

bool krt_mvm_owns(const struct krt_globals *g, const char *id)
{
	_cleanup_close_ int fd = open_container(g, id);
	return fd >= 0;
}

/* The runtime's own store: under its state root, whatever the caller's
 * KIS_SANDBOX_ROOT (an engine's environment is not the operator's). */
static char *store_path(const struct krt_globals *g)
{
	char abs[PATH_MAX];
	char *s = NULL;
	if (!realpath(g->root, abs) || asprintf(&s, "%s/%s/%s", abs, MVM_DIR, MVM_STORE) < 0)
		return NULL;
	return s;
}

/* What create made, released in reverse (also by delete, from state.json). */
static void undo(const char *store_root, const char *sid, const char *ws, const char *base)
{
	struct kis_error *e = NULL;
	if (sid && *sid)
		kis_session_destroy(store_root, sid, &e);
	kis_error_free(e);
	e = NULL;
	struct kis_store *s = NULL;
	if (kis_store_open(store_root, &s, &e) == 0) {
		if (ws && *ws)
			kis_workspace_destroy(s, ws, NULL);
		if (base && *base)
			kis_base_remove(s, base, NULL);
		kis_store_free(s);
	}
	kis_error_free(e);
}

/* the microvm's own files beside the state: a pod sandbox's slots
 * (mvm_pod.c), an app create's record of what it made so far, an app
 * proxy's host memory group and its record (relay_leaf) */
static void remove_own_files(int dfd)
{
	krt_cgroup_sweep_noted(dfd);
	static const char *const files[] = {"slots.json", "slots.json.tmp", "slots.lock",
					    MVM_CREATING, "." MVM_CREATING ".tmp"};
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		unlinkat(dfd, files[i], 0);
}

static void remove_state(int hfd, const char *id)
{
	krt_tier_remove(hfd, id, remove_own_files);
}

/* -------------------------------------------- the engine's file binds */

/* Open (making directories as needed) the parent of rel inside the tree
 * at wfd: every step resolved in that root (openat2 RESOLVE_IN_ROOT,
 * Linux 5.6), so an image's symlink never leads a write out of it. */
static int open_parent_in(int wfd, const char *rel, const char **leaf)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", rel);
	char *slash = strrchr(buf, '/');
	*leaf = rel + (slash ? (size_t)(slash - buf) + 1 : 0);
	if (!slash)
		return fcntl(wfd, F_DUPFD_CLOEXEC, 3);
	*slash = '\0';
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int d = (int)syscall(SYS_openat2, wfd, buf, &how, sizeof(how));
	if (d >= 0 || errno != ENOENT)
		return d;
	/* make the missing ones, component by component, each step in the root */
	int cur = fcntl(wfd, F_DUPFD_CLOEXEC, 3);
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); cur >= 0 && c; c = strtok_r(NULL, "/", &save)) {
		if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST) {
			close(cur);
			return -1;
		}
		int n = (int)syscall(SYS_openat2, cur, c, &how, sizeof(how));
		close(cur);
		cur = n;
	}
	return cur;
}

static int copy_bind_files(const char *ws, json_t *files, struct kis_error **err)
{
	_cleanup_close_ int wfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the workspace");
	size_t i;
	json_t *f;
	json_array_foreach(files, i, f) {
		const char *src = json_string_value(json_array_get(f, 0));
		const char *dst = json_string_value(json_array_get(f, 1));
		while (*dst == '/')
			dst++;
		const char *leaf = NULL;
		_cleanup_close_ int pfd = open_parent_in(wfd, dst, &leaf);
		_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (pfd < 0 || in < 0 || !*leaf)
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot copy the bind of '%s' into the guest's root", src);
		/* the leaf itself: never followed (a link there is replaced) */
		unlinkat(pfd, leaf, 0);
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd);
		_cleanup_close_ int dpfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		_cleanup_close_ int out = dpfd < 0 ? -1 :
			openat(dpfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (out < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '/%s'", dst);
		char buf[8192];
		ssize_t n;
		size_t total = 0;
		while ((n = RETRY_EINTR(read(in, buf, sizeof(buf)))) > 0) {
			total += (size_t)n;
			if (total > MVM_BIND_FILE_MAX || write(out, buf, (size_t)n) != n)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot copy '%s'", src);
		}
		if (n < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read '%s'", src);
	}
	return 0;
}

/* ---------------------------------------- one process in the session */

static int sig_pipe[2] = {-1, -1}, winch_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
	int e = errno;
	unsigned char b = (unsigned char)sig;
	if (sig == SIGWINCH)
		(void)!write(winch_pipe[1], &b, 1);
	else
		(void)!write(sig_pipe[1], &b, 1);
	errno = e;
}

/* Run argv in the session with this process's stdio (or the terminal tty,
 * -1: none), signals forwarded; returns the exit status as a shell gives
 * it (128+N for signal N), 125 when kis failed (named on stderr).
 * oom_kills (NULL: not asked): the processes the OOM killer ended at the
 * guest group's memory limit while it ran (its limit_events). */
static int session_process(const char *store_root, const char *sid, char **argv, char **env,
			   const char *cwd, int tty, unsigned rows, unsigned cols,
			   const struct kis_limits *lim, const struct kis_exec_container *ctr,
			   uint64_t *oom_kills)
{
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		dprintf(2, "kis-runtime: pipe: %s\n", strerror(errno));
		return 125;
	}
	static const int fwd[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
				  SIGCONT, SIGWINCH};
	struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(fwd); i++)
		sigaction(fwd[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	struct kis_exec_options o = {
		.io = {.stdin_fd = tty >= 0 ? tty : 0, .capture = false,
		       .stdout_fd = tty >= 0 ? tty : 1, .stderr_fd = tty >= 0 ? tty : 2,
		       .cancel_fd = sig_pipe[0]},
		.tty = tty >= 0, .rows = rows ? rows : 24, .cols = cols ? cols : 80,
		.resize_fd = tty >= 0 ? winch_pipe[0] : -1, .tty_fd = tty,
		.env = env, .cwd = cwd, .store_root = store_root, .container = ctr};
	if (lim)
		o.limits = *lim;
	struct kis_result res;
	kis_result_init(&res);
	struct kis_error *err = NULL;
	int st;
	if (kis_session_exec(sid, argv, &o, &res, &err) < 0) {
		dprintf(2, "kis-runtime: %s: %s\n", kis_errc_name(err->code), err->message);
		kis_error_free(err);
		st = 125;
	} else {
		st = kis_result_exit_status(&res);
		if (oom_kills && res.limit_events.counted)
			*oom_kills = res.limit_events.oom_kills;
	}
	kis_result_release(&res);
	return st;
}

/* The terminal's slave, raw: the guest's own pty does the line
 * discipline (echo, CR/LF), which must not be done twice. */
static int raw_tty(int fd)
{
	struct termios t;
	if (tcgetattr(fd, &t) < 0)
		return -1;
	cfmakeraw(&t);
	return tcsetattr(fd, TCSANOW, &t);
}

static char **strv_from(json_t *arr)
{
	char **v = calloc(json_array_size(arr) + 1, sizeof(*v));
	size_t i;
	json_t *s;
	json_array_foreach(arr, i, s) {
		if (v && !(v[i] = strdup(json_string_value(s) ? json_string_value(s) : ""))) {
			for (size_t k = 0; k < i; k++)
				free(v[k]);
			free(v);
			return NULL;
		}
	}
	return v;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* ---------------------------------------------- a pod app's end */

struct app_end {
	const char *store_root, *session, *id;
};

/* In the guest: the container's processes ended, its upper layer gone,
 * and when it was the slot's last user its disk unmounted everywhere (so
 * another tree may be swapped in); the slot is given back only then. */
static int app_end_guest(void *arg, int slot, bool last)
{
	const struct app_end *a = arg;
	struct kis_exec_container c = {.op = KIS_CTR_REMOVE, .id = a->id, .slot = slot,
				       .free_slot = last};
	char *argv[] = {"true", NULL};
	struct kis_exec_options o = {
		.io = {.stdin_fd = -1, .stdout_fd = 2, .stderr_fd = 2, .cancel_fd = -1},
		.resize_fd = -1, .tty_fd = -1, .store_root = a->store_root, .container = &c};
	struct kis_result res;
	kis_result_init(&res);
	struct kis_error *e = NULL;
	int r = kis_session_exec(a->session, argv, &o, &res, &e);
	/* the pod's VM gone (its sandbox deleted first): nothing is left in it */
	if (r < 0 && e && e->code == KIS_E_NOT_FOUND)
		r = 0;
	kis_error_free(e);
	kis_result_release(&res);
	return r < 0 ? -1 : 0;
}

static void pod_app_end(const struct krt_globals *g, const char *store_root, const char *session,
			const char *sandbox, const char *id)
{
	struct app_end a = {.store_root = store_root, .session = session, .id = id};
	krt_pod_slot_release(g, MVM_DIR, sandbox, id, app_end_guest, &a);
}

static const char *sget(json_t *st, const char *k)
{
	const char *v = json_string_value(json_object_get(st, k));
	return v ? v : "";
}

/* A create's record (MVM_CREATING in dfd), given each id the moment it
 * is minted (kis_import_options.minted, kis_run_options.minted,
 * krt_mvm_minted, or minted here), written before what it names can
 * exist. what: "base" (the container's own), "image_base" (imported for
 * the node's sandbox image: the container's only while not kept),
 * "workspace", "session". */
struct creating_rec {
	int dfd;
	json_t *rec;
};

static int creating_note(void *ctx, const char *what, const char *id, struct kis_error **err)
{
	struct creating_rec *c = ctx;
	if (json_object_set_new(c->rec, what, json_string(id)) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "create");
	return krt_write_json_at(c->dfd, MVM_CREATING, c->rec, err);
}

static int record_base(void *ctx, const char *id, struct kis_error **err)
{
	return creating_note(ctx, "base", id, err);
}

static int record_session(void *ctx, const char *id, struct kis_error **err)
{
	return creating_note(ctx, "session", id, err);
}

/* The session, workspace and bases a killed create's record names,
 * released in undo's order, each "" skipped; an id that names nothing is
 * gone already (a create killed before it made it). Tried once: with its
 * creator dead nothing holds the owner's lock (the helpers the engine
 * forks without exec drop the store's locks first, store/locks.h), so a
 * busy session is a create still running, not one to wait for. -1 with
 * *err naming what is left, for the record to be kept and the delete
 * retried. */
static int undo_recorded(const char *store_root, const char *sid, const char *ws,
			 const char *base, const char *image_base, int hfd, struct kis_error **err)
{
	if (*sid) {
		struct kis_error *e = NULL;
		if (kis_session_destroy(store_root, sid, &e) < 0) {
			kis_error_set(err, e->code, 0, "session '%s': %s", sid, e->message);
			kis_error_free(e);
			return -1;
		}
	}
	struct kis_store *s = NULL;
	TRY(kis_store_open(store_root, &s, err));
	const char *what = NULL;
	struct kis_error *e = NULL;
	if (*ws && kis_workspace_destroy(s, ws, &e) < 0 && e->code != KIS_E_NOT_FOUND)
		what = ws;
	/* an image base that was kept is the runtime's (krt_mvm_image_kept) */
	else if (*base && kis_base_remove(s, base, &e) < 0 && e->code != KIS_E_NOT_FOUND)
		what = base;
	else if (*image_base && !krt_mvm_image_kept(hfd, image_base) &&
		 kis_base_remove(s, image_base, &e) < 0 && e->code != KIS_E_NOT_FOUND)
		what = image_base;
	kis_store_free(s);
	if (what)
		kis_error_set(err, e->code, 0, "'%s': %s", what, e->message);
	kis_error_free(e);
	return what ? -1 : 0;
}

/* A create killed before its state was written (an engine deletes the id
 * after a failed create): what its record names is undone (an app's pod
 * slot; the session, its VMM and passt gone with it; the workspace; the
 * container's own base, or the image base it imported and did not keep)
 * and its directory removed. The store is the runtime's own, never one a
 * record names. A directory without state or record (a create killed
 * before its first record) is removed. 1 when there was such a create, 0
 * when there was none; -1 with *err when something it named could not be
 * undone: the record stays, for a later delete to try again. */
static int mvm_creating_undo(const struct krt_globals *g, const char *id, struct kis_error **err)
{
	_cleanup_close_ int dfd = open_container(g, id);
	if (dfd < 0 || faccessat(dfd, "state.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	_cleanup_close_ int hfd = open_mvm_root(g, false, NULL);
	_cleanup_free_ char *store = hfd < 0 ? NULL : store_path(g);
	if (!store)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the runtime's store of '%s'", id);
	json_t *rec = krt_read_json_at(dfd, MVM_CREATING);
	const char *sandbox = krt_state_id(rec, "pod_sandbox", KRT_KIND_CONTAINER);
	if (*sandbox)
		pod_app_end(g, store, krt_state_id(rec, "pod_session", 's'), sandbox, id);
	/* the record's ids as state.json's: of their kind, else "" (a
	 * forged one undoes nothing) */
	int r = undo_recorded(store, krt_state_id(rec, "session", 's'),
			      krt_state_id(rec, "workspace", 'w'), krt_state_id(rec, "base", 'b'),
			      krt_state_id(rec, "image_base", 'b'), hfd, err);
	json_decref(rec);
	if (r < 0)
		return kis_error_wrap(err, "container '%s' (a create killed midway; delete it again)",
				      id);
	remove_state(hfd, id);
	return 1;
}

/* ------------------------------------------ an app's OOM, relayed */

/* containerd's runc shims learn of a container's OOM only from the host
 * memory cgroup of its init pid (what /proc/<pid>/cgroup names when
 * create returns): on a v1 or hybrid host an eventfd on that group's
 * memory.oom_control (cgroup-v1/memory.rst 9), on a v2 host inotify on
 * its memory.events and a rise of oom_kill; containerd's CRI plugin then
 * says reason OOMKilled. An app's limit binds in the guest (agent/pod.c)
 * and its init pid here is this proxy, which would sit in the shim's own
 * group, where nothing is OOM-killed. So an app with a memory limit has
 * a leaf of its own where runc would put its init (linux.cgroupsPath,
 * cgroupfs; else krt-<random> under kis's parent), the memory
 * controller's only (its other groups stay the shim's): a new group
 * only (an existing one is refused, never joined or written), made with
 * the container's limit (what a reader of the group, as runc's, finds;
 * the proxy itself uses a few pages of it), noted in the state directory
 * before its mkdir, removed by delete or the sweep after a killed
 * create. When the guest reports OOM kills at the limit, the proxy makes
 * one happen in its leaf (kis_cgroup_oom_relay: a child of its own, the
 * victim) before it exits with the container's status, 137 for an init
 * the OOM killer ended, as under runc. Without the leaf (no memory
 * controller on this host) the app runs as before, its OOM not told. */
static int relay_leaf(int dfd, json_t *config, uint64_t limit, struct kis_cgroup **out,
		      struct kis_error **err)
{
	char cgname[32];
	TRY(krt_cgroup_name(cgname, sizeof(cgname), err));
	struct kis_limits lim = {.memory_bytes = limit};
	struct kis_cgroup_opts o = {.at = krt_cgroups_path(config), .memory_only = true};
	if (krt_cgroup_make_noted(dfd, cgname, &lim, &o, out, err) == 0)
		return 0;
	if ((*err)->code != KIS_E_PROFILE_UNSATISFIABLE)
		return -1;
	kis_debug("no OOM relay for the app: %s", (*err)->message);
	kis_error_free(*err);
	*err = NULL;
	return 0;
}

/* In the forked proxy, before its start: into its leaf ("tasks": the
 * caller alone, kis_cgroup_attach) */
static int relay_join(const struct kis_cgroup *cg)
{
	struct kis_error *e = NULL;
	int r = kis_cgroup_attach(cg, 0, &e);
	kis_error_free(e);
	return r;
}

static void relay_oom(const struct kis_cgroup *cg, const char *id)
{
	struct kis_error *e = NULL;
	if (kis_cgroup_oom_relay(cg, &e) < 0)
		dprintf(2, "kis-runtime: %s: the guest's OOM kill is not relayed: %s: %s\n", id,
			kis_errc_name(e->code), e->message);
	kis_error_free(e);
}

/* ---------------------------------------------------------- create */

/* A lone container's root, or a pod sandbox's: a workspace over a base of
 * the rootfs (a kept one for a sandbox: krt_mvm_image_clone), each id
 * noted in cr before what it names can exist. base: the container's own,
 * "" for a kept one. */
static int root_clone(struct kis_store *store, int hfd, const char *rootfs,
		      enum krt_pod_role role, struct creating_rec *cr, char base[KIS_ID_BUFSZ],
		      char ws[KIS_ID_BUFSZ], struct kis_error **err)
{
	if (role == KRT_POD_SANDBOX) {
		struct krt_mvm_minted note = {.fn = creating_note, .ctx = cr};
		return krt_mvm_image_clone(store, hfd, rootfs, &note, base, ws, err);
	}
	struct kis_import_options io = {.os_image = true, .minted = record_base,
					.minted_ctx = cr};
	char wid[KIS_ID_BUFSZ];
	TRY(kis_base_import(store, rootfs, &io, base, err));
	TRY(kis_id_mint('w', wid, err));
	TRY(creating_note(cr, "workspace", wid, err));
	return kis_workspace_clone(store, base, wid, ws, err);
}

int krt_mvm_create(const struct krt_globals *g, const struct krt_model *m, const char *bundle,
		   const char *id, const struct krt_host_opts *o, struct kis_error **err)
{
	json_t *config = m->doc;
	struct mvm_plan p;
	struct krt_pod pod;
	int r = krt_pod_parse(m, id, &pod, err);
	if (r == 0)
		r = mvm_plan(config, &pod, &p, err);
	else
		memset(&p, 0, sizeof(p)), kis_profile_init(&p.prof);
	_cleanup_close_ int hfd = -1, dfd = -1, fifo = -1, tty = -1, on_record = -1;
	_cleanup_free_ char *store_root = NULL, *ws_path = NULL;
	char base[KIS_ID_BUFSZ] = "", ws[KIS_ID_BUFSZ] = "", sid[KIS_ID_BUFSZ] = "";
	char **argv = NULL, **env = NULL;
	struct kis_store *store = NULL;
	struct kis_cgroup *relay = NULL;
	bool made = false, taken = false;
	if (r < 0 || (r = krt_valid_id(id, err)) < 0)
		goto out;
	r = -1;
	if (o->preserve_fds > 0) {
		krt_mvm_refuse(err, "--preserve-fds: a host fd does not reach the guest");
		goto out;
	}
	if (p.terminal && !o->console_socket) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "process.terminal needs --console-socket");
		goto out;
	}
	json_t *proc = json_object_get(config, "process");
	if (!(argv = strv_from(p.args)) ||
	    (pod.role == KRT_POD_APP && json_object_get(proc, "env") &&
	     !(env = strv_from(json_object_get(proc, "env"))))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "process.args");
		goto out;
	}
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	if ((hfd = open_mvm_root(g, true, err)) < 0)
		goto out;
	if (!(store_root = store_path(g))) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "the runtime's store path");
		goto out;
	}
	char rootfs[PATH_MAX], bundle_abs[PATH_MAX];
	const char *rp = json_string_value(json_object_get(json_object_get(config, "root"), "path"));
	_cleanup_free_ char *rjoined = NULL;
	if (rp[0] != '/' && asprintf(&rjoined, "%s/%s", bundle, rp) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "root.path");
		goto out;
	}
	if (!realpath(rjoined ? rjoined : rp, rootfs) || !realpath(bundle, bundle_abs)) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, errno, "cannot resolve root.path '%s'", rp);
		goto out;
	}
	/* an app container: its pod proven before anything is made */
	if (pod.role == KRT_POD_APP && krt_pod_verify_app(g, MVM_DIR, rootfs, &pod, err) < 0)
		goto out;
	if (krt_tier_make(hfd, id, !o->run, &made, &dfd, &fifo, err) < 0)
		goto out;
	struct kis_exec_container ctr = {.op = KIS_CTR_INIT, .id = id, .slot = -1,
					 .hostname = pod.hostname, .memory_max = p.app.memory,
					 .cpu_quota_us = p.app.cpu_quota_us,
					 .cpu_period_us = p.app.cpu_period_us};
	if (pod.role == KRT_POD_APP) {
		/* its own root in the pod's VM: a mount slot holding its tree
		 * (one per distinct tree, mvm_pod.c), the tree imported as a
		 * base and its image swapped into the slot while the slots'
		 * lock is held */
		bool fresh = false;
		_cleanup_close_ int slock = -1;
		json_t *rec = json_pack("{s:s,s:s}", "pod_session", pod.session, "pod_sandbox",
					pod.sandbox);
		if (!rec || krt_write_json_at(dfd, MVM_CREATING, rec, err) < 0) {
			json_decref(rec);
			if (!*err)
				kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "create");
			goto out;
		}
		if (krt_pod_slot_take(g, MVM_DIR, pod.sandbox, id, rootfs, &ctr.slot, &fresh, &slock,
				      err) < 0) {
			json_decref(rec);
			goto out;
		}
		taken = true;
		/* the base's id is recorded as soon as it is minted, before
		 * the import publishes it (a create killed in between would
		 * leave a base no record names): the import's own temporaries
		 * are the store's to sweep */
		struct creating_rec cr = {.dfd = dfd, .rec = rec};
		struct kis_import_options io = {.os_image = true, .minted = record_base,
						.minted_ctx = &cr};
		/* a tree the runtime keeps (the node's sandbox image, whose
		 * disk image is made: mvm_image.c) is used as it is, not the
		 * app's to remove; another is imported, the app's own */
		char kept[KIS_ID_BUFSZ] = "";
		int ir = fresh ? kis_store_open(store_root, &store, err) : 0;
		if (ir == 0 && fresh)
			ir = krt_mvm_image_find(store, hfd, rootfs, kept, err);
		if (ir == 0 && fresh)
			ir = kis_base_import(store, rootfs, &io, base, err);
		else if (ir == 1)
			ir = 0;
		json_decref(rec);
		if (ir < 0 ||
		    (fresh && kis_session_attach_base(store_root, pod.session, ctr.slot,
						      *base ? base : kept, err) < 0))
			goto out;
		if (store)
			kis_store_free(store);
		store = NULL;
	} else {
		/* the rootfs into the store: a base (an OS image: its device
		 * nodes too), a workspace of the container's own over it. A
		 * pod's sandbox: a kept base of the same tree, the node's
		 * sandbox image, with its guest disk image (mvm_image.c);
		 * base is then "", not the pod's to remove.
		 * Each id (base, workspace, session) goes into the record the
		 * moment it is minted, before what it names can exist: a
		 * create killed anywhere leaves nothing that delete cannot
		 * find (mvm_creating_undo); what an import or a session's
		 * create had half made is the store's to sweep. */
		struct creating_rec cr = {.dfd = dfd, .rec = json_object()};
		if (!cr.rec) {
			kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "create");
			goto out;
		}
		if (krt_write_json_at(dfd, MVM_CREATING, cr.rec, err) < 0 ||
		    kis_store_open(store_root, &store, err) < 0 ||
		    root_clone(store, hfd, rootfs, pod.role, &cr, base, ws, err) < 0 ||
		    kis_workspace_path(store, ws, &ws_path, err) < 0 ||
		    copy_bind_files(ws_path, p.files, err) < 0 ||
		    kis_profile_set(&p.prof, "workspace", ws, err) < 0) {
			json_decref(cr.rec);
			goto out;
		}
		kis_store_free(store);
		store = NULL;
		/* the workspace is destroyed with the session (undo): what the
		 * guest wrote is not copied back into it first */
		struct kis_run_options ro = {
			.io = {.stdin_fd = -1, .stdout_fd = 2, .stderr_fd = 2, .cancel_fd = -1},
			.store_root = store_root, .resize_fd = -1, .tty_fd = -1,
			.discard_workspace = true, .minted = record_session, .minted_ctx = &cr};
		/* a pod's sandbox: the pod's network (CNI's namespace, the
		 * one path of the bundle the allowlist accepted, held by the
		 * model since it was checked) is served to the guest by passt
		 * inside it: the guest has the pod's address and the pod's TCP
		 * ports reach it. kis's own egress policy is not in this path:
		 * the network is the operator's, as it is for runc's pods. */
		if (pod.role == KRT_POD_SANDBOX && pod.ns_fd[0] >= 0) {
			ro.pod_net = true;
			ro.pod_netns_fd = pod.ns_fd[0];
		}
		int sr = kis_session_create(&p.prof, &ro, sid, err);
		json_decref(cr.rec);
		if (sr < 0)
			goto out;
	}
	/* an app with a memory limit: its proxy's own host leaf, where the
	 * engine's shim watches for its OOM (relay_leaf) */
	if (pod.role == KRT_POD_APP && p.app.memory &&
	    relay_leaf(dfd, config, p.app.memory, &relay, err) < 0)
		goto out;
	if (p.terminal && ((tty = krt_console_pty(o->console_socket, err)) < 0))
		goto out;
	if (tty >= 0 && raw_tty(tty) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set the terminal raw");
		goto out;
	}
	char created[KRT_STAMP_LEN];
	krt_now(created);
	/* sync: the child's setup told; recorded: its state on record, one
	 * byte, or end-of-file when this process dies before (SIGKILLed
	 * mid-create): the child then ends, never left blocked on a start
	 * fifo that no state names (pipe(7): a read sees EOF once every
	 * write end is closed, the child having closed its own) */
	int sync[2], recorded[2];
	if (pipe2(sync, O_CLOEXEC) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "pipe");
		goto out;
	}
	if (pipe2(recorded, O_CLOEXEC) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "pipe");
		close(sync[0]);
		close(sync[1]);
		goto out;
	}
	on_record = recorded[1];
	/* an app's process is an exec of its pod's session, with the limits
	 * an exec may tighten (the agent applies them to it: kis/limits.h
	 * per_exec); its memory and CPU limits are its guest group's
	 * (ctr.memory_max, ctr.cpu_quota_us),
	 * its pids were refused in the plan */
	const char *run_sid = pod.role == KRT_POD_APP ? pod.session : sid;
	struct kis_limits app_lim = {
		.wall_ms = p.prof.limits.wall_ms, .cpu_ms = p.prof.limits.cpu_ms,
		.output_bytes = p.prof.limits.output_bytes, .file_bytes = p.prof.limits.file_bytes,
		.open_files = p.prof.limits.open_files};
	const char *hostname = json_string_value(json_object_get(config, "hostname"));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "fork");
		close(sync[0]);
		close(sync[1]);
		close(recorded[0]);
		goto out;
	}
	if (pid == 0) {
		/* the container process: its session, its terminal, the pod's
		 * namespaces on the host, its state on record, then start */
		close(sync[0]);
		close(recorded[1]);
		int fail = (tty >= 0 ? krt_take_terminal(tty) : (setsid() < 0 ? -1 : 0)) < 0 ? 1 :
			   krt_pod_enter(&pod, hostname) < 0 ? 2 :
			   relay && relay_join(relay) < 0 ? 3 : 0;
		krt_child_ready(sync[1], fail, -1);
		char b;
		if (RETRY_EINTR(read(recorded[0], &b, 1)) != 1)
			_exit(125);
		close(recorded[0]);
		if (fifo >= 0 && RETRY_EINTR(read(fifo, &b, 1)) != 1)
			_exit(125);
		if (fifo >= 0)
			close(fifo);
		int status;
		if (pod.role == KRT_POD_APP) {
			uint64_t oom_kills = 0;
			status = session_process(store_root, run_sid, argv, env,
						 cwd && *cwd ? cwd : NULL, tty >= 0 ? 0 : -1, p.rows,
						 p.cols, &app_lim, &ctr, &oom_kills);
			if (relay && oom_kills)
				relay_oom(relay, id);
			_exit(status);
		}
		status = session_process(store_root, run_sid, argv, NULL, NULL, tty >= 0 ? 0 : -1,
					 p.rows, p.cols, NULL, NULL, NULL);
		/* stopped: the VM, its workspace and base go now, not at delete
		 * (an engine's cleanup may call delete without the --root it
		 * created with: podman 4.3's does); state.json stays for
		 * state and delete */
		undo(store_root, sid, ws, base);
		_exit(status);
	}
	close(sync[1]);
	close(recorded[0]);
	static const char *const what[] = {"", "taking the terminal or a session of its own",
					   "entering the pod's namespaces",
					   "joining its host memory group"};
	if (krt_child_setup(sync[0], pid, what, ARRAY_SIZE(what), err) < 0)
		goto out;
	unsigned long long start = 0;
	char letter;
	krt_proc_stat(pid, &start, &letter);
	json_t *st = json_pack("{s:s,s:i,s:I,s:s,s:s,s:s,s:O,s:s,s:s,s:s}", "id", id, "pid",
			       (int)pid, "starttime", (json_int_t)start, "bundle", bundle_abs,
			       "rootfs", rootfs, "created", created, "process",
			       json_object_get(config, "process"), "session", sid, "workspace", ws,
			       "base", base);
	/* the pod's: a sandbox is found by its apps (krt_pod_verify_app); an
	 * app's session is its pod's, never destroyed with the app */
	if (st && pod.role != KRT_POD_NONE &&
	    (json_object_set_new(st, "pod", json_string(pod.role == KRT_POD_SANDBOX ? "sandbox"
										 : "container")) < 0 ||
	     json_object_set_new(st, "pod_session", json_string(run_sid)) < 0 ||
	     json_object_set_new(st, "pod_sandbox", json_string(pod.sandbox)) < 0 ||
	     (pod.role == KRT_POD_SANDBOX && hostname &&
	      json_object_set_new(st, "hostname", json_string(hostname)) < 0))) {
		json_decref(st);
		st = NULL;
	}
	if (krt_tier_record(dfd, st, config, o->pid_file, pid, err) < 0)
		goto out;
	if (RETRY_EINTR(write(on_record, "r", 1)) != 1) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot let the container process on");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto out;
	}
	made = false;
	r = 0;
	if (krt_tier_run_wait(dfd, o, pid, &r)) {
		undo(store_root, sid, ws, base);
		remove_state(hfd, id);
	}
out:
	if (store)
		kis_store_free(store);
	/* the handle only: the leaf is the container's until delete (or,
	 * the create failed, remove_state's sweep below) */
	kis_cgroup_free(relay);
	if (made && hfd >= 0) {
		if (taken)
			pod_app_end(g, store_root, pod.session, pod.sandbox, id);
		if (store_root)
			undo(store_root, sid, ws, base);
		remove_state(hfd, id);
	}
	strv_free(argv);
	strv_free(env);
	krt_pod_release(&pod);
	mvm_plan_release(&p);
	return r;
}

/* ------------------------------------------------ the other verbs */

/* A container's state, its ids checked (krt_state_check): each is one
 * create minted or "" (an app has no session of its own, a sandbox no
 * base of its own). The store is never taken from it: the runtime's own
 * (store_path); a "store" older kis-runtimes wrote is not read. */
static const struct krt_state_field mvm_fields[] = {
	{"session", 's'}, {"workspace", 'w'}, {"base", 'b'}, {"pod_session", 's'},
	{"pod_sandbox", KRT_KIND_CONTAINER}};

static int load(const struct krt_globals *g, const char *id, int *dfd, json_t **st,
		struct kis_error **err)
{
	TRY(krt_tier_load(g, MVM_DIR, id, dfd, st, err));
	const char *pod = sget(*st, "pod");
	if (krt_state_check(*st, id, mvm_fields, ARRAY_SIZE(mvm_fields), err) == 0 &&
	    (!*pod || !strcmp(pod, "sandbox") || !strcmp(pod, "container")))
		return 0;
	if (!*err)
		kis_error_set(err, KIS_E_INVALID_ID, 0,
			      "container '%s': state.json's 'pod' is not a pod role; nothing is "
			      "done by it", id);
	json_decref(*st);
	*st = NULL;
	close(*dfd);
	*dfd = -1;
	return -1;
}

/* the ids of a loaded state, each "" unless one of its kind */
static const char *st_session(json_t *st)
{
	return krt_state_id(st, "session", 's');
}

/* the session a container's processes run in: its pod's (an app
 * container's, "pod_session") or its own */
static const char *exec_session(json_t *st)
{
	const char *p = krt_state_id(st, "pod_session", 's');
	return *p ? p : st_session(st);
}

static pid_t st_pid(json_t *st)
{
	return krt_state_pid(st, "pid");
}

/* What create made of a loaded state, released (undo) in the runtime's
 * own store. */
static void undo_state(const char *store, json_t *st)
{
	undo(store, st_session(st), krt_state_id(st, "workspace", 'w'),
	     krt_state_id(st, "base", 'b'));
}

int krt_mvm_verb(const struct krt_globals *g, int argc, char **argv, struct kis_error **err)
{
	const char *verb = argv[0];
	struct krt_verb_args va;
	krt_verb_parse(argc, argv, &va); /* --all: every process of the container, the one */
	TRY(krt_verb_check(verb, &va, err));
	const char *id = va.id, *extra = va.extra;
	bool force = va.force, json_fmt = va.json;
	int dfd;
	json_t *st;
	if (strcmp(verb, "delete") == 0) {
		int c = mvm_creating_undo(g, id, err);
		if (c != 0)
			return c < 0 ? -1 : 0;
	}
	TRY(load(g, id, &dfd, &st, err));
	const char *status = krt_status_of(dfd, st);
	_cleanup_free_ char *store = store_path(g);
	int r = 0;
	if (!store && (strcmp(verb, "kill") == 0 || strcmp(verb, "delete") == 0)) {
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "the runtime's store of '%s'", id);
	} else if (strcmp(verb, "state") == 0) {
		r = krt_print_state(dfd, st) < 0 ? kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "state")
						 : 0;
	} else if (strcmp(verb, "start") == 0) {
		r = krt_tier_start(dfd, st, id, err);
	} else if (strcmp(verb, "kill") == 0) {
		int sig;
		if (krt_parse_signal(extra, &sig) < 0)
			r = kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "unknown signal '%s'", extra);
		else if (strcmp(status, "stopped") == 0 && va.all)
			r = 0; /* as host.c: the shim's kill --all after every exit */
		else if (strcmp(status, "stopped") == 0)
			/* "container not running": the containerd shim's wording
			 * for "process already finished" (runc's) */
			r = kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					  "cannot signal '%s': container not running", id);
		else if (krt_signal_pid(st_pid(st), sig) < 0 && errno != ESRCH)
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot signal '%s'", id);
		else if (sig == SIGKILL || strcmp(status, "created") == 0) {
			/* the container process cannot forward SIGKILL, and before
			 * start it takes a signal's default action: when it ended,
			 * its VM ends here (waited for a moment: the signal lands
			 * asynchronously) */
			for (int i = 0; i < 50 && strcmp(krt_status_of(dfd, st), "stopped") != 0; i++)
				usleep(10000);
			if (strcmp(krt_status_of(dfd, st), "stopped") == 0)
				undo_state(store, st);
		}
	} else if (strcmp(verb, "delete") == 0) {
		/* created: deleted without --force, as runc and crun do */
		if (strcmp(status, "running") == 0 && !force) {
			r = kis_error_set(err, KIS_E_BUSY, 0,
					  "container '%s' is %s: stop it or delete --force", id,
					  status);
		} else {
			if (strcmp(status, "stopped") != 0)
				krt_signal_pid(st_pid(st), SIGKILL);
			const char *sandbox = krt_state_id(st, "pod_sandbox", KRT_KIND_CONTAINER);
			if (strcmp(sget(st, "pod"), "container") == 0 && *sandbox)
				pod_app_end(g, store, krt_state_id(st, "pod_session", 's'), sandbox,
					    id);
			undo_state(store, st);
			_cleanup_close_ int hfd = open_mvm_root(g, false, NULL);
			if (hfd >= 0)
				remove_state(hfd, id);
		}
	} else if (strcmp(verb, "ps") == 0) {
		pid_t pid = strcmp(status, "stopped") == 0 ? 0 : st_pid(st);
		if (json_fmt)
			printf(pid ? "[%d]\n" : "[]\n", (int)pid);
		else if (pid)
			printf("PID\n%d\n", (int)pid);
		else
			printf("PID\n");
	} else {
		r = kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				  "%s: not supported at run.kis.tier 'microvm'", verb);
	}
	close(dfd);
	json_decref(st);
	return r;
}

/* ------------------------------------------------------------ exec */

static volatile pid_t exec_child;

static void pass_signal(int sig)
{
	int e = errno;
	if (exec_child > 0)
		kill(exec_child, sig);
	errno = e;
}

json_t *krt_mvm_base_process(const struct krt_globals *g, const char *id)
{
	_cleanup_close_ int dfd = open_container(g, id);
	json_t *st = dfd >= 0 ? krt_read_json_at(dfd, "state.json") : NULL;
	json_t *p = json_deep_copy(json_object_get(st, "process"));
	json_decref(st);
	return p;
}

int krt_mvm_exec(const struct krt_globals *g, const char *id, json_t *proc,
		 const struct krt_host_opts *o, struct kis_error **err)
{
	int dfd;
	json_t *st;
	TRY(load(g, id, &dfd, &st, err));
	_cleanup_close_ int d = dfd;
	_cleanup_close_ int tty = -1;
	_cleanup_free_ char *store = store_path(g);
	char **argv = NULL, **env = NULL;
	int r = -1;
	if (!store) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "the runtime's store of '%s'", id);
		goto out;
	}
	if (strcmp(krt_status_of(dfd, st), "running") != 0) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "container '%s' is not running", id);
		goto out;
	}
	json_t *user = json_object_get(proc, "user");
	if (json_integer_value(json_object_get(user, "uid")) ||
	    json_integer_value(json_object_get(user, "gid"))) {
		krt_mvm_refuse(err, "process.user: the guest runs the process as its sandbox user, "
				"the bundle's root");
		goto out;
	}
	if (o->preserve_fds > 0) {
		krt_mvm_refuse(err, "--preserve-fds: a host fd does not reach the guest");
		goto out;
	}
	json_t *args = json_object_get(proc, "args");
	if (!json_array_size(args)) {
		kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "process.args is empty");
		goto out;
	}
	argv = strv_from(args);
	json_t *envj = json_object_get(proc, "env");
	env = envj ? strv_from(envj) : NULL;
	if (!argv || (envj && !env)) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "exec");
		goto out;
	}
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	bool terminal = json_is_true(json_object_get(proc, "terminal"));
	if (terminal && !o->console_socket) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "a terminal needs --console-socket");
		goto out;
	}
	if (terminal && ((tty = krt_console_pty(o->console_socket, err)) < 0))
		goto out;
	if (tty >= 0 && raw_tty(tty) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set the terminal raw");
		goto out;
	}
	json_t *cs = json_object_get(proc, "consoleSize");
	unsigned rows = (unsigned)json_integer_value(json_object_get(cs, "height"));
	unsigned cols = (unsigned)json_integer_value(json_object_get(cs, "width"));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "fork");
		goto out;
	}
	if (pid == 0) {
		if (tty >= 0 ? krt_take_terminal(tty) < 0 : setsid() < 0)
			_exit(125);
		/* an app container's exec: in its namespaces (its files, its
		 * processes) */
		struct kis_exec_container join = {.op = KIS_CTR_JOIN, .id = id};
		bool app = strcmp(sget(st, "pod"), "container") == 0;
		_exit(session_process(store, exec_session(st), argv, env,
				      cwd && *cwd ? cwd : NULL, tty >= 0 ? 0 : -1, rows, cols, NULL,
				      app ? &join : NULL, NULL));
	}
	if (o->pid_file && krt_write_pid_file(o->pid_file, pid, err) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto out;
	}
	if (o->detach) {
		r = 0; /* the process is the engine's subreaper's to collect */
		goto out;
	}
	/* signals to this process are the exec's: passed to the child, which
	 * forwards them into the guest */
	exec_child = pid;
	struct sigaction sa = {.sa_handler = pass_signal, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	static const int fwd[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
	for (size_t i = 0; i < ARRAY_SIZE(fwd); i++)
		sigaction(fwd[i], &sa, NULL);
	int ws = 0;
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	r = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
out:
	strv_free(argv);
	strv_free(env);
	json_decref(st);
	return r;
}
