/* SPDX-License-Identifier: MIT */
/* The microvm backend: QEMU's microvm machine with Debian's cloud kernel and
 * the agent as /init, one VM per run or per session.
 *
 * Theory of operation. A run: the workspace becomes an ext4 image (the
 * guest's /workspace, or its root), QEMU starts by restoring a snapshot of a
 * guest booted to its ready point (made once per memory size, vCPUs and
 * disk size class; a cold boot when none can be had), the control port
 * sends the run's configuration (root, network, env), one exec goes over an
 * agent port (docs/protocol.md, relayed inside the guest to the agent), the
 * guest syncs, QEMU quits, and the image's tree is mirrored back into the
 * host workspace. A session: the same VM, detached, and a broker process
 * (microvm/mux.c) serving the session's agent.sock, which hands each engine
 * connection to a free agent port, so several execs run at once; the
 * workspace disk is mounted with synchronous writes and copied back by
 * end_session. Limits: wall, CPU, output, file size and open files
 * by the agent inside the guest (wall also by the engine's clock, which
 * kills the VM); memory is the VM's RAM; pids by a cgroup in the guest.
 * Mounts (issue 21): each source's disks in one of the device set's fixed
 * slots (vm.h KIS_MVM_MOUNTS, read-only to QEMU), the targets in the cfg
 * line, placed by the guest's init; a read-write one's changes on the
 * writable layer under m<i>/, copied back as the workspace's are. */
#include "core/util.h"

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "agent/client.h"
#include "agent/confine.h"
#include "core/io.h"
#include "agent/exec_json.h"
#include "agent/guest.h"
#include "agent/proto.h"
#include "backends/common.h"
#include "backends/microvm/mux.h"
#include "backends/microvm/vm.h"
#include "kis/backend.h"
#include "core/tree.h"
#include "confine/confine.h"
#include "net/egress.h"
#include "core/test_hook.h"
#include "backends/agent_run.h"

#define MIN_MEM_MIB 128u

static void microvm_probe(const struct kis_ctx *ctx, struct kis_caps *c)
{
	memset(c, 0, sizeof(*c));
	if (!kis_mvm_guest_present(ctx, c->why_absent, sizeof(c->why_absent)))
		return;
	/* a VM never runs unjailed (jail.c): no jail here, no tier */
	if (!kis_mvm_jail_possible(c->why_absent, sizeof(c->why_absent)))
		return;
	c->present = true;
	/* the profile's limits are the guest's (its RAM, the agent's limits
	 * inside): the same either way; the VMM's own bounds differ */
	snprintf(c->jail, sizeof(c->jail), "%s",
		 kis_mvm_jail_rootless()
			 ? "the user's uid in a user namespace of its own, new mount/pid/ipc/uts/net "
			   "namespaces, pivot_root, no capabilities, seccomp; no cgroup (none "
			   "delegated): memory by RLIMIT_AS, tasks by RLIMIT_NPROC"
			 : "a per-VM uid, new mount/pid/ipc/uts/net namespaces, pivot_root, no "
			   "capabilities, seccomp, a memory and pids cgroup");
	c->seccomp = true; /* the VMM's: QEMU's -sandbox over the project's policy */
	c->shell = true;
	c->native = true;
	c->tty = true; /* a PTY inside the guest, resizes over the channel */
	c->cow = true; /* overlayfs in the guest over a cached base image (microvm/disk.c) */
	c->snapshot = true;
	c->mounts = true; /* read-only disk slots in the guest, copy-on-write (microvm/disk.c) */
	/* egress: the guest's virtio-net backend is passt inside the
	 * engine's network namespace with pasta and the policy (net/egress.h) */
	c->net_modes = (1u << KIS_NET_OFF) | (1u << KIS_NET_LOOPBACK) |
		       (kis_egress_unavailable_for(true) || !kis_mvm_guest_has_net(ctx) ? 0 :
			1u << KIS_NET_EGRESS);
	c->limits = KIS_LIMIT_WALL | KIS_LIMIT_CPU | KIS_LIMIT_MEMORY | KIS_LIMIT_OUTPUT |
		    KIS_LIMIT_FILE | KIS_LIMIT_OPEN_FILES | KIS_LIMIT_PIDS |
		    KIS_LIMIT_DISK; /* the writable layer's size (microvm_disk.c) */
	const char *a = kis_mvm_accel_cached(ctx->guest_dir(ctx));
	if (!a && ctx->thorough) {
		struct kis_mvm_guest g;
		struct kis_error *err = NULL;
		char buf[8];
		if (kis_mvm_guest_open(ctx, &g, &err) == 0 && kis_mvm_accel(&g, buf, &err) == 0)
			snprintf(c->accel, sizeof(c->accel), "%s", buf);
		kis_error_free(err);
		kis_mvm_guest_release(&g);
	} else {
		snprintf(c->accel, sizeof(c->accel), "%s", a ? a : "tcg?");
	}
}

struct kis_plan {
	char **argv;
	char **envp;
	char *cwd;
	struct kis_limits limits;
	struct kis_io io;
	const char *ws_path;
	const char *ws_lower, *ws_upper, *ws_cache; /* an overlay workspace's layers */
	enum kis_root_mode root;
	enum kis_net_mode net;
	struct kis_net_dest *allow; /* network.allow */
	size_t n_allow;
	bool allow_set;
	unsigned mem_mib, vcpus;
	const char *sandbox_id;
	const struct kis_ctx *ctx; /* the command's (outlives the plan) */
	char accel_pin[8]; /* profile's microvm.accel: "" (auto), "kvm", "tcg" */
	/* the profile's mounts, resolved (copies of the request's) */
	struct kis_mount_src mounts[KIS_MVM_MOUNTS];
	size_t n_mounts;
	/* a session's pod network (kis_run_request): the namespace is the
	 * caller's, borrowed for the session's create */
	bool pod_net;
	int pod_netns_fd;
	/* a session whose workspace's changes are not wanted back */
	bool discard_ws;
};

static void mounts_free(struct kis_plan *pl)
{
	for (size_t i = 0; i < pl->n_mounts; i++) {
		struct kis_mount_src *m = &pl->mounts[i];
		free((char *)m->source);
		free((char *)m->target);
		free((char *)m->path);
		free((char *)m->lower);
		free((char *)m->ws_dir);
		free((char *)m->cache);
	}
	pl->n_mounts = 0;
}

/* The profile's mounts as the guest can place them (issue 21): at most
 * KIS_MVM_MOUNTS (the device set's slots), root: host (a mount point in a
 * workspace image would be made in the workspace itself), each target
 * one the guest's init accepts (checked there again). */
static int check_mounts(const struct kis_profile *p, struct kis_error **err)
{
	if (p->n_mounts > KIS_MVM_MOUNTS)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "mounts: the microvm places at most %d (its device set has that "
				     "many slots)", KIS_MVM_MOUNTS);
	if (p->n_mounts && p->root == KIS_ROOT_WORKSPACE)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "mounts: the microvm places mounts only with root: 'host' (a "
				     "mount point in the workspace's root would be made in the "
				     "workspace)");
	for (size_t i = 0; i < p->n_mounts; i++) {
		char why[160];
		if (kis_guest_mount_target_check(p->mounts[i].target, why, sizeof(why)) < 0)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "mounts[%zu].target: '%s' %s: choose another target", i,
					     p->mounts[i].target, why);
	}
	return 0;
}

static int mounts_copy(struct kis_plan *pl, const struct kis_run_request *req)
{
	for (size_t i = 0; i < req->n_mounts && i < KIS_MVM_MOUNTS; i++) {
		const struct kis_mount_src *r = &req->mounts[i];
		struct kis_mount_src *m = &pl->mounts[i];
		pl->n_mounts = i + 1;
		*m = (struct kis_mount_src){.base = r->base, .read_only = r->read_only};
		m->source = strdup(r->source);
		m->target = strdup(r->target);
		m->path = strdup(r->path);
		m->lower = r->lower ? strdup(r->lower) : NULL;
		m->ws_dir = r->ws_dir ? strdup(r->ws_dir) : NULL;
		m->cache = r->cache ? strdup(r->cache) : NULL;
		if (!m->source || !m->target || !m->path || (r->lower && !m->lower) ||
		    (r->ws_dir && !m->ws_dir) || (r->cache && !m->cache))
			return -1;
	}
	return 0;
}

/* What the run makes after planning, in the plan: the workspace (its
 * path and an overlay's layers, the request's: it outlives the plan), the
 * working directory that follows from it, the mounts. At plan time, and
 * again by amend with what the run made. */
static int place(struct kis_plan *pl, const struct kis_run_request *req)
{
	const struct kis_profile *p = req->profile;
	pl->ws_path = req->workspace_path;
	pl->ws_lower = req->workspace_lower;
	pl->ws_upper = req->workspace_upper;
	pl->ws_cache = req->workspace_cache;
	const char *cwd = p->cwd ? p->cwd : p->root == KIS_ROOT_WORKSPACE ? "/" :
				   req->workspace_path ? "/workspace" : "/root";
	if (!(pl->cwd = strdup(cwd)))
		return -1;
	return mounts_copy(pl, req);
}

static int microvm_amend(struct kis_plan *pl, const struct kis_run_request *req,
			 struct kis_error **err)
{
	free(pl->cwd);
	pl->cwd = NULL;
	mounts_free(pl);
	if (place(pl, req) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot amend the plan");
	return 0;
}

static int microvm_plan(const struct kis_caps *caps, const struct kis_run_request *req,
			struct kis_plan **out, struct kis_error **err)
{
	const struct kis_profile *p = req->profile;
	if (!caps->present)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0, "microvm: %s", caps->why_absent);
	TRY(kis_check_limits(caps, p, "microvm", err));
	/* A required accelerator is had or refused, never silently replaced. */
	if (p->microvm.accel == KIS_ACCEL_KVM) {
		const char *a = kis_mvm_accel_cached(req->ctx->guest_dir(req->ctx));
		char buf[8] = "";
		struct kis_mvm_guest g;
		struct kis_error *e2 = NULL;
		if (!a && kis_mvm_guest_open(req->ctx, &g, &e2) == 0 && kis_mvm_accel(&g, buf, &e2) == 0)
			a = buf;
		kis_error_free(e2);
		if (!a || strcmp(a, "kvm"))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "microvm.accel: KVM cannot run the guest on this host (the "
					     "probe found %s): use 'auto' or 'tcg'",
					     a ? a : "no usable accelerator");
	}
	TRY(kis_check_network(caps, p, "microvm",
			      "egress needs pasta, passt and nft (Debian packages passt and "
			      "nftables), the engine as root and a guest with its network "
			      "driver ('kis sandbox guest fetch')", err));
	TRY(check_mounts(p, err));
	if (p->root == KIS_ROOT_WORKSPACE && !req->workspace_path && !p->base && !p->workspace)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "root: 'workspace' needs a workspace (--base or --workspace)");
	/* the guest's RAM is the memory limit: it holds the guest kernel too,
	 * so a limit below what the guest needs to boot cannot be honoured */
	uint64_t mib = req->limits.memory_bytes >> 20;
	if (mib < MIN_MEM_MIB)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "limits.memory_bytes: the microvm's memory is its RAM, at least "
				     "%u MiB",
				     MIN_MEM_MIB);
	if (mib > (64u << 10))
		mib = 64u << 10;
	struct kis_plan *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "plan");
	size_t n = 0;
	while (req->argv && req->argv[n])
		n++;
	pl->argv = calloc(n + 1, sizeof(char *));
	pl->envp = calloc(p->n_env + 3, sizeof(char *));
	bool ok = pl->argv && pl->envp;
	for (size_t i = 0; ok && i < n; i++)
		ok = (pl->argv[i] = strdup(req->argv[i])) != NULL;
	/* deny-all environment: a PATH and HOME of the guest, then the profile's */
	size_t k = 0;
	bool has_path = false, has_home = false;
	for (size_t i = 0; i < p->n_env; i++) {
		has_path |= !strncmp(p->env[i], "PATH=", 5);
		has_home |= !strncmp(p->env[i], "HOME=", 5);
	}
	if (ok && !has_path)
		ok = (pl->envp[k++] = strdup("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")) != NULL;
	if (ok && !has_home)
		ok = (pl->envp[k++] = strdup(p->root == KIS_ROOT_WORKSPACE ? "HOME=/" : "HOME=/root")) != NULL;
	for (size_t i = 0; ok && i < p->n_env; i++)
		ok = (pl->envp[k++] = strdup(p->env[i])) != NULL;
	ok = ok && place(pl, req) == 0;
	if (!ok) {
		mounts_free(pl);
		kis_strv_free(pl->argv);
		kis_strv_free(pl->envp);
		free(pl->cwd);
		free(pl);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "plan");
	}
	pl->limits = req->limits;
	pl->io = req->io;
	pl->root = p->root;
	pl->net = p->net;
	pl->allow_set = p->net_allow_set;
	pl->n_allow = p->n_net_allow;
	if (p->n_net_allow && !(pl->allow = kis_net_dests_dup(p->net_allow, p->n_net_allow))) {
		kis_strv_free(pl->argv);
		kis_strv_free(pl->envp);
		free(pl->cwd);
		free(pl);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "plan");
	}
	pl->mem_mib = (unsigned)mib;
	pl->vcpus = p->microvm.vcpus ? p->microvm.vcpus : 1;
	pl->sandbox_id = req->sandbox_id;
	pl->ctx = req->ctx;
	pl->pod_net = req->session && req->pod_net && p->net == KIS_NET_LOOPBACK;
	pl->pod_netns_fd = pl->pod_net ? req->pod_netns_fd : -1;
	pl->discard_ws = req->session && req->discard_workspace;
	if (p->microvm.accel != KIS_ACCEL_AUTO)
		snprintf(pl->accel_pin, sizeof(pl->accel_pin), "%s",
			 p->microvm.accel == KIS_ACCEL_KVM ? "kvm" : "tcg");
	*out = pl;
	return 0;
}

/* pasta's and passt's host id: the last of the sandbox's id block (the
 * guest's users are not host ids; the VMM's uid is of another range) */
static uid_t helper_uid(const struct kis_plan *pl)
{
	return kis_egress_helper_uid(kis_sandbox_ids(pl->sandbox_id ? pl->sandbox_id : "plan"));
}

static char *microvm_describe(const struct kis_plan *pl)
{
	json_t *argv = json_array(), *env = json_array();
	for (size_t i = 0; pl->argv[i]; i++)
		json_array_append_new(argv, json_string(pl->argv[i]));
	for (size_t i = 0; pl->envp[i]; i++)
		json_array_append_new(env, json_string(pl->envp[i]));
	const char *a = kis_mvm_accel_cached(pl->ctx->guest_dir(pl->ctx));
	json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "backend",
			      "microvm", "argv", argv, "env", env, "cwd", pl->cwd, "root",
			      pl->root == KIS_ROOT_WORKSPACE ? "workspace" : "host", "network",
			      kis_net_mode_name(pl->net), "memory_mib",
			      (json_int_t)pl->mem_mib, "vcpus", (json_int_t)pl->vcpus, "accel",
			      a ? a : "measured at first run", "workspace_disk",
			      !pl->ws_path ? "none" :
			      pl->ws_lower ? "overlay in the guest: cached base image, the workspace's "
					     "changes, a writable layer copied back" :
					     "an image of the whole workspace (not an overlay clone), "
					     "a writable layer copied back");
	if (o && pl->n_mounts)
		json_object_set_new(o, "mount_disks",
				    json_string("per mount, two read-only disks (its base's image, "
						"cached with the base, and a workspace's own changes) "
						"joined in the guest; a read-write one's writes on the "
						"writable layer, copied back"));
	/* what the guest's agent applies to the command (src/agent/confine.c) */
	if (o)
		json_object_set_new(o, "command", json_pack("{s:{s:i, s:i}, s:s, s:s, s:s}", "user",
							      "uid", (int)KIS_GUEST_UID, "gid",
							      (int)KIS_GUEST_UID, "capabilities",
							      "none (no_new_privs)", "cgroup",
							      "a cgroup namespace at the guest's pids group",
							      "seccomp",
							      pl->net == KIS_NET_OFF ? "default, AF_UNIX only" :
										"default"));
	if (o && pl->net == KIS_NET_EGRESS)
		json_object_set_new(o, "egress",
				    kis_egress_describe_for(pl->allow, pl->n_allow, pl->allow_set,
							    helper_uid(pl), true));
	char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return s;
}

static void microvm_plan_free(struct kis_plan *pl)
{
	if (!pl)
		return;
	kis_strv_free(pl->argv);
	kis_strv_free(pl->envp);
	free(pl->cwd);
	free(pl->allow);
	mounts_free(pl);
	free(pl);
}

/* ---- one VM ---- */

struct vm {
	struct kis_mvm_guest g;
	char accel[8];
	char *tdir;      /* private directory: sockets, disks, log */
	int dfd;
	struct kis_mvm_disks disks;
	pid_t pid;
	int ctl;
	bool restored;
	struct kis_egress eg; /* egress: S, pasta and passt; a pod's: passt */
	struct kis_pod_link pod; /* a pod's network: the guest's link */
};

static void trace(const char *what)
{
	kis_mvm_trace(what);
}

static char *cfg_line(const struct kis_plan *pl, const struct kis_pod_link *pod, bool sync_writes,
		      bool session)
{
	/* fresh entropy for the guest's RNG: VMs restored from one snapshot
	 * would otherwise share its state (src/agent/guest.c add_entropy) */
	uint8_t raw[32];
	char seed[65];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return NULL;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(seed + 2 * i, 3, "%02x", raw[i]);
	json_t *env = json_array();
	for (size_t i = 0; pl->envp[i]; i++)
		json_array_append_new(env, json_string(pl->envp[i]));
	/* KIS_MICROVM_TEST_HOOKS=1, read by the test build only
	 * (core/test_hook.h), for tests/integration/test_microvm.py and
	 * test_egress.py: the guest's agent may be asked to send malformed
	 * frames (a hostile guest, src/agent/agent.c test_flood) or to run a
	 * command as the guest's root, unconfined (kis-test:guest-root). A
	 * released engine always sends false. */
	/* a pod's guest configures its link as egress's does (eth0 up with
	 * an address and a default route, the agent's sockets as egress's):
	 * the difference, whose namespace passt serves, is the host's */
	json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:o, s:s, s:I, s:s, s:b}", "root",
			      pl->root == KIS_ROOT_WORKSPACE ? "workspace" : "host", "net",
			      kis_net_mode_name(pod ? KIS_NET_EGRESS : pl->net), "disk",
			      pl->ws_path != NULL, "sync",
			      sync_writes, "env", env, "cwd", pl->cwd, "pids", (json_int_t)pl->limits.pids,
			      "seed", seed, "test_hooks", KIS_TEST_GETENV("KIS_MICROVM_TEST_HOOKS") != NULL);
	/* a session's cwd is checked by the guest before its agent starts:
	 * create refuses one that is not there, as on the host tiers (issue
	 * 40 item 3); a run's command reports it as setup_failed 126 */
	if (o && session)
		json_object_set_new(o, "check_cwd", json_true());
	/* egress: pasta's link, which passt serves the guest (net/egress.h) */
	if (o && pl->net == KIS_NET_EGRESS)
		json_object_set_new(o, "eth0", json_pack("{s:s, s:i, s:s, s:s, s:i}", "address",
							 KIS_EGRESS_ADDR, "prefix", 24, "gateway",
							 KIS_EGRESS_GATEWAY, "dns", KIS_EGRESS_DNS,
							 "mtu", KIS_EGRESS_VM_MTU));
	/* a pod's: its namespace's address, prefix, gateway and MTU; the
	 * dns the guest's own /etc names (a workspace root keeps the pod's
	 * resolv.conf, the engine's, copied at create) */
	if (o && pod)
		json_object_set_new(o, "eth0", json_pack("{s:s, s:i, s:s, s:s, s:i}", "address",
							 pod->addr, "prefix", (int)pod->prefix,
							 "gateway", pod->gateway, "dns", pod->gateway,
							 "mtu", (int)pod->mtu));
	/* the mounts, slot i for mount i (the guest's init checks each
	 * target again: kis_guest_mount_target_check) */
	json_t *ms = json_array();
	for (size_t i = 0; ms && i < pl->n_mounts; i++)
		json_array_append_new(ms, json_pack("{s:s, s:s, s:b}", "target", pl->mounts[i].target,
						    "layers", pl->mounts[i].base ? "base" : "overlay",
						    "ro", pl->mounts[i].read_only));
	if (o && ms && pl->n_mounts)
		json_object_set_new(o, "mounts", ms);
	else
		json_decref(ms);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	char *line = NULL;
	if (s && asprintf(&line, "cfg %s", s) < 0)
		line = NULL;
	free(s);
	return line;
}

static void vm_stop(struct vm *v)
{
	if (v->pid <= 0)
		return;
	int qmp = v->dfd >= 0 ? kis_mvm_qmp_open(v->dfd, "qmp.sock", 500) : -1;
	if (qmp >= 0) {
		kis_mvm_qmp_cmd(qmp, "{\"execute\":\"quit\"}", -1, NULL, 2000);
		close(qmp);
	}
	for (int i = 0; i < 300; i++) {
		int st;
		if (waitpid(v->pid, &st, WNOHANG) == v->pid) {
			v->pid = 0;
			return;
		}
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(v->pid, SIGKILL);
	int st;
	RETRY_EINTR(waitpid(v->pid, &st, 0));
	v->pid = 0;
}

static void vm_release(struct vm *v)
{
	vm_stop(v);
	kis_egress_stop(&v->eg); /* passt has seen QEMU's end close; pasta goes */
	if (v->ctl >= 0)
		close(v->ctl);
	if (v->dfd >= 0)
		close(v->dfd);
	kis_mvm_cgroup_drop(v->tdir);
	if (v->tdir && !KIS_TEST_GETENV("KIS_MICROVM_KEEP"))
		kis_tree_remove_path(v->tdir);
	free(v->tdir);
	kis_mvm_disks_free(&v->disks);
	kis_mvm_guest_release(&v->g);
}

/* Start the VM for plan pl: its files in the directory dfd (the run's
 * private directory or the session's), agent port 0 on agent0_fd. */
static int vm_start(struct vm *v, const struct kis_plan *pl, int dfd, const char *dpath,
		    int agent0_fd, bool detach, bool sync_writes, struct kis_error **err)
{
	trace("start");
	/* egress first: pasta's ~100 ms of setup overlaps the disks, the
	 * snapshot's lookup and QEMU's restore; passt joins once it is ready */
	if (pl->net == KIS_NET_EGRESS)
		TRY(kis_egress_start_for(&v->eg, pl->allow, pl->n_allow, pl->allow_set,
					 helper_uid(pl), !detach, false, true, err));
	/* a pod's namespace with a loopback only (no interface CNI made):
	 * the guest keeps its own loopback only, as a runc container there */
	bool pod = false;
	if (pl->pod_net) {
		int k = kis_pod_link_read(pl->pod_netns_fd, &v->pod, err);
		if (k < 0)
			return -1;
		pod = k == 0;
		v->eg.uid = helper_uid(pl);
	}
	TRY(kis_mvm_guest_open(pl->ctx, &v->g, err));
	if (pl->accel_pin[0])
		snprintf(v->accel, sizeof(v->accel), "%s", pl->accel_pin);
	else
		TRY(kis_mvm_accel(&v->g, v->accel, err));
	TRY(kis_mvm_disks_make(&v->g, dpath, pl->ws_path, pl->ws_lower, pl->ws_upper,
			       pl->ws_cache, pl->limits.disk_bytes, &v->disks, err));
	TRY(kis_mvm_mount_disks_make(&v->g, dpath, pl->mounts, pl->n_mounts, &v->disks, err));
	trace("disks made");
	struct kis_error *serr = NULL;
	_cleanup_close_ int snap = getenv("KIS_MICROVM_NO_SNAPSHOT") ? -1 :
		kis_mvm_snapshot(&v->g, v->accel, pl->mem_mib, pl->vcpus, &serr);
	if (serr)
		trace(serr->message);
	kis_error_free(serr); /* no snapshot: a cold boot, slower but the same guest */
	serr = NULL;
	/* the snapshot's RAM, shared copy-on-write with every VM restored from it */
	_cleanup_free_ char *ram_path = snap < 0 ? NULL :
		kis_mvm_snapshot_ram_path(&v->g, v->accel, pl->mem_mib, pl->vcpus);
	pid_t filler = -1;
	_cleanup_close_ int memfd = ram_path ? kis_mvm_snapshot_ram(ram_path, &filler, &serr) : -1;
	trace("snapshot and its memory found");
	if (snap >= 0 && memfd < 0) {
		/* a restore needs its RAM: a cold boot instead */
		if (serr)
			trace(serr->message);
		kis_error_free(serr);
		close(snap);
		snap = -1;
	}
	int fds[2 + KIS_MVM_PORTS];
	for (int i = 0; i < 2 + KIS_MVM_PORTS; i++)
		fds[i] = -1;
	int r = -1;
	_cleanup_close_ int log = -1;
	_cleanup_free_ char *line = NULL;
	/* egress: QEMU's end of the guest's link and passt's */
	int link[2] = {-1, -1};
	struct kis_mvm_cfg c = {.accel = v->accel, .mem_mib = pl->mem_mib, .vcpus = pl->vcpus,
				.disk = {v->disks.base, v->disks.delta, v->disks.rw},
				.snap_fd = snap, .detach = detach, .vm_dir = dpath,
				.stand_in = true, .mem_fd = memfd, .ignore_shared = snap >= 0,
				.net_fd = -1};
	if (pl->net == KIS_NET_EGRESS || pod) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "egress: cannot link the VM to passt");
			goto out;
		}
		c.net_fd = link[0];
	}
	for (int i = 0; i < KIS_MVM_MOUNT_DISKS; i++)
		c.mdisk[i] = v->disks.m[i];
	if ((fds[0] = kis_mvm_listen_at(dfd, "ctl.sock", err)) < 0 ||
	    (fds[1] = kis_mvm_listen_at(dfd, "qmp.sock", err)) < 0)
		goto out;
	for (int i = 0; i < KIS_MVM_PORTS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "agent-%d.sock", i);
		if (i == 0 && agent0_fd >= 0)
			continue;
		if ((fds[2 + i] = kis_mvm_listen_at(dfd, name, err)) < 0)
			goto out;
	}
	c.ctl_fd = fds[0];
	c.qmp_fd = fds[1];
	for (int i = 0; i < KIS_MVM_PORTS; i++)
		c.agent_fd[i] = i == 0 && agent0_fd >= 0 ? agent0_fd : fds[2 + i];
	log = openat(dfd, "qemu.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	c.log_fd = log;
	/* the jail's own steps lie between these two: its cgroup, seccomp
	 * program and file list, the clone into its namespaces, the mounts and
	 * pivot_root, the uid switch, up to QEMU's exec (bench/microvm-density.sh) */
	trace("jail: start");
	if (kis_mvm_spawn(&v->g, &c, &v->pid, err) < 0)
		goto out;
	trace("jail: vmm exec'd");
	v->restored = snap >= 0;
	/* the guest runs only from a whole and sealed RAM */
	if (v->restored && kis_mvm_snapshot_ram_ready(&filler, memfd, err) < 0)
		goto out;
	if (v->restored)
		trace("snapshot's memory sealed");
	if (v->restored && kis_mvm_incoming(dfd, snap, err) < 0)
		goto out;
	if (v->restored)
		trace("restore started");
	if (pl->net == KIS_NET_EGRESS &&
	    (kis_egress_ready(&v->eg, err) < 0 || kis_egress_attach_vm(&v->eg, link[1], !detach, err) < 0))
		goto out;
	/* pasta and passt work for this VM: counted in its cgroup (its pids
	 * limit, its memory from now on: neither cgroup version moves pages
	 * already charged), and killed with it when it is dropped */
	if (pl->net == KIS_NET_EGRESS &&
	    (kis_mvm_cgroup_join(dpath, v->eg.pid, err) < 0 ||
	     kis_mvm_cgroup_join(dpath, v->eg.vm_pid, err) < 0))
		goto out;
	if (pl->net == KIS_NET_EGRESS)
		trace("pasta ready, passt attached, both in the VM's cgroup");
	/* a pod's passt, in the pod's namespace; in the VM's cgroup, killed
	 * with it (and ending by itself as QEMU's end of the link closes) */
	if (pod &&
	    (kis_pod_attach_vm(&v->eg, pl->pod_netns_fd, &v->pod, link[1], !detach, err) < 0 ||
	     kis_mvm_cgroup_join(dpath, v->eg.vm_pid, err) < 0))
		goto out;
	trace(v->restored ? "qemu started (restore)" : "qemu started (cold boot)");
	/* a cold boot takes seconds under TCG, a restore a fraction of one */
	v->ctl = kis_mvm_ctl_wait(dfd, 90000, detach ? 0 : v->pid);
	if (v->ctl < 0) {
		/* what the VMM said last (its stderr): why it ended, if it did */
		char tail[400] = "";
		_cleanup_close_ int lf = openat(dfd, "qemu.log", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		off_t end = lf >= 0 ? lseek(lf, 0, SEEK_END) : -1;
		ssize_t k = end < 0 ? -1 :
			pread(lf, tail, sizeof(tail) - 1, end > (off_t)sizeof(tail) - 1 ?
			      end - (off_t)sizeof(tail) + 1 : 0);
		tail[k > 0 ? k : 0] = '\0';
		for (char *q = tail; *q; q++)
			if (*q == '\n' && q[1])
				*q = ' ';
		tail[strcspn(tail, "\n")] = '\0';
		kis_error_set(err, KIS_E_INTERNAL, 0, "the microvm guest did not answer (%s, %s)%s%s",
			      v->accel, v->restored ? "restored" : "cold boot", tail[0] ? ": " : "",
			      tail);
		goto out;
	}
	trace("guest answered");
	line = cfg_line(pl, pod ? &v->pod : NULL, sync_writes, detach);
	char rep[512];
	if (!line || kis_mvm_ctl(v->ctl, line, rep, sizeof(rep), 30000) < 0 || strcmp(rep, "ok")) {
		const char *why = line ? rep + (strncmp(rep, "err ", 4) ? 0 : 4) : "no memory";
		if (!strncmp(why, "cwd: ", 5)) /* the profile's, named as the host tiers name it */
			kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0, "%s", why);
		else
			kis_error_set(err, KIS_E_INTERNAL, 0, "the microvm guest refused its setup: %s",
				      why);
		goto out;
	}
	trace("guest configured");
	r = 0;
out:
	kis_mvm_snapshot_ram_abort(&filler);
	for (int i = 0; i < 2 + KIS_MVM_PORTS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (int i = 0; i < 2; i++)
		if (link[i] >= 0)
			close(link[i]);
	return r;
}

/* ---- the exec client: one request on an agent port ---- */

/* One exec over an agent port (src/agent/client.c). Returns 0 with res
 * filled, 1 when the engine's deadline passed, -1 on a failure. */
static int exec_one(int conn, const struct kis_plan *pl, struct kis_result *res,
		    struct kis_error **err)
{
	struct kis_exec_req req = {.argv = pl->argv, .env = pl->envp, .cwd = pl->cwd,
				   .limits = pl->limits};
	struct kis_call call = {
		.req = &req, .io = pl->io, .signal_fd = -1, .cancel_fd = pl->io.cancel_fd,
		.resize_fd = -1, .tty_fd = -1,
		/* the guest's clock runs fast under TCG: ours is the verdict */
		.deadline_ms = kis_monotonic_ms() + pl->limits.wall_ms + 10000,
		.peer = "the microvm's agent",
	};
	struct kis_call_out out;
	TRY(kis_call_agent(conn, &call, res, &out, err));
	if (out.end == KIS_CALL_TIMEOUT)
		return 1;
	if (out.end == KIS_CALL_EOF)
		return kis_error_set(err, KIS_E_INTERNAL, 0,
				     "the microvm's agent closed the channel before the exit");
	if (out.cancelled)
		res->reason = KIS_REASON_CANCELLED;
	return 0;
}

/* The guest's evidence: OOM kills and forks refused at pids.max so far. */
struct mvm_events {
	unsigned long oom, pids;
};

static struct mvm_events guest_events(int ctl)
{
	char rep[64];
	struct mvm_events e = {0, 0};
	if (ctl < 0 || kis_mvm_ctl(ctl, "events", rep, sizeof(rep), 5000) < 0 ||
	    sscanf(rep, "%lu %lu", &e.oom, &e.pids) != 2)
		e.oom = e.pids = 0;
	return e;
}

/* The verdict over the agent's evidence by the one rule every tier uses
 * (kis_result_blame_limits): the guest's RAM is the memory limit, its
 * pids.max the pids limit. */
static int explain_events(struct mvm_events before, struct mvm_events after,
			  const struct kis_limits *lim, struct kis_result *res)
{
	uint64_t oom = after.oom > before.oom ? after.oom - before.oom : 0;
	uint64_t forks = after.pids > before.pids ? after.pids - before.pids : 0;
	char mb[160], pb[160];
	if (lim) {
		snprintf(mb, sizeof(mb), "memory use passed the guest's RAM (%llu MiB)",
			 (unsigned long long)(lim->memory_bytes >> 20));
		snprintf(pb, sizeof(pb), "%llu forks refused at limits.pids (%llu)",
			 (unsigned long long)forks, (unsigned long long)lim->pids);
	} else {
		snprintf(mb, sizeof(mb), "memory use passed the session guest's RAM");
		snprintf(pb, sizeof(pb), "%llu forks refused at the session's limits.pids",
			 (unsigned long long)forks);
	}
	return kis_result_blame_limits(res, oom, forks, mb, pb);
}

/* Does a mount write a workspace (its writes copied back at the end)? */
static bool writes_mounts(const struct kis_plan *pl)
{
	for (size_t i = 0; i < pl->n_mounts; i++)
		if (!pl->mounts[i].read_only)
			return true;
	return false;
}

static int microvm_run(struct kis_plan *pl, struct kis_result *res, struct kis_error **err)
{
	struct vm v = {.dfd = -1, .ctl = -1, .eg = KIS_EGRESS_INIT};
	int r = -1;
	_cleanup_close_ int conn = -1;
	if (kis_mvm_tmpdir(&v.tdir, err) < 0)
		return -1;
	v.dfd = open(v.tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v.dfd < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", v.tdir);
		goto out;
	}
	if (vm_start(&v, pl, v.dfd, v.tdir, -1, false, false, err) < 0)
		goto out;
	conn = kis_mvm_connect_at(v.dfd, "agent-0.sock");
	if (conn < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot reach the microvm's agent port");
		goto out;
	}
	snprintf(res->accel, sizeof(res->accel), "%s", v.accel);
	struct mvm_events ev0 = guest_events(v.ctl);
	int x = exec_one(conn, pl, res, err);
	trace("exec done");
	if (x < 0)
		goto out;
	if (x == 1) {
		res->reason = KIS_REASON_TIMEOUT;
		res->exit_code = -1;
		res->signal = SIGKILL;
	} else {
		explain_events(ev0, guest_events(v.ctl), &pl->limits, res);
	}
	if (pl->ws_path || writes_mounts(pl)) {
		char rep[32];
		if (x == 0 && kis_mvm_ctl(v.ctl, "sync", rep, sizeof(rep), 30000) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, 0, "the microvm guest did not sync its disk");
			goto out;
		}
		vm_stop(&v);
		if (pl->ws_path && kis_mvm_disk_sync_back(v.disks.rw, "/upper", pl->ws_path, err) < 0)
			goto out;
		for (size_t i = 0; i < pl->n_mounts; i++) {
			char layer[32];
			snprintf(layer, sizeof(layer), "/m%zu/upper", i);
			if (!pl->mounts[i].read_only &&
			    kis_mvm_disk_sync_back(v.disks.rw, layer, pl->mounts[i].path, err) < 0) {
				kis_error_wrap(err, "mounts[%zu]", i);
				goto out;
			}
		}
	}
	r = 0;
out:
	vm_release(&v);
	trace("stopped");
	return r;
}

/* ---- sessions: the VM is the session ---- */

static int microvm_start_session(struct kis_plan *pl, const struct kis_session_ctx *ctx,
				 pid_t *pid, struct kis_error **err)
{
	struct vm v = {.dfd = -1, .ctl = -1, .eg = KIS_EGRESS_INIT};
	/* files in the session's directory: QEMU's sockets, the disk, the log;
	 * the workspace path, for end_session's copy back (none when the
	 * caller discards the workspace: kis_run_options) */
	if (pl->ws_path && !pl->discard_ws) {
		_cleanup_close_ int f = openat(ctx->dir_fd, "microvm-workspace",
					       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (f < 0 || write(f, pl->ws_path, strlen(pl->ws_path)) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "session files");
	}
	/* and each read-write mount's slot and path, one a line */
	if (writes_mounts(pl)) {
		_cleanup_close_ int f = openat(ctx->dir_fd, "microvm-mounts",
					       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		for (size_t i = 0; f >= 0 && i < pl->n_mounts; i++)
			if (!pl->mounts[i].read_only && dprintf(f, "%zu %s\n", i, pl->mounts[i].path) < 0)
				return kis_error_set(err, KIS_E_INTERNAL, errno, "session files");
		if (f < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "session files");
	}
	int r = vm_start(&v, pl, ctx->dir_fd, ctx->dir_path, -1, true, true, err);
	if (r == 0)
		r = kis_mvm_broker_start(ctx->listen_fd, ctx->dir_fd, v.pid, err);
	/* the session's pasta and passt live as long as it: their pids and
	 * start times beside it, for session destroy (end_session) */
	if (r == 0 && v.eg.pid > 0)
		r = kis_egress_save(ctx->dir_fd, &v.eg, err);
	if (r == 0)
		*pid = v.pid;
	else if (v.pid > 0)
		kill(v.pid, SIGKILL);
	if (r < 0) {
		kis_mvm_cgroup_drop(ctx->dir_path);
		kis_egress_stop(&v.eg);
	} else {
		kis_egress_release(&v.eg);
	}
	v.pid = 0; /* the session owns it now */
	if (v.ctl >= 0)
		close(v.ctl);
	kis_mvm_guest_release(&v.g);
	kis_mvm_disks_free(&v.disks);
	return r;
}

static int microvm_end_session(const struct kis_session_ctx *ctx, struct kis_error **err)
{
	/* the engine has stopped QEMU (SIGTERM, then SIGKILL): every write the
	 * guest made reached the image (synchronous mount) */
	char ws[4096] = "";
	/* whatever of the VMM's jail is left: its cgroup (members killed) */
	kis_mvm_cgroup_drop(ctx->dir_path);
	/* egress: pasta, and passt if QEMU's end did not end it already */
	kis_egress_end_saved(ctx->dir_fd);
	_cleanup_close_ int f = openat(ctx->dir_fd, "microvm-workspace", O_RDONLY | O_CLOEXEC);
	ssize_t k = f >= 0 ? read(f, ws, sizeof(ws) - 1) : -1;
	_cleanup_fclose_ FILE *mf = NULL;
	{
		int fd = openat(ctx->dir_fd, "microvm-mounts", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		mf = fd >= 0 ? fdopen(fd, "re") : NULL;
		if (fd >= 0 && !mf)
			close(fd);
	}
	if ((k > 0 || mf) && ctx->dir_path) {
		_cleanup_free_ char *disk = NULL;
		if (asprintf(&disk, "%s/rw.img", ctx->dir_path) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "disk");
		if (access(disk, R_OK) == 0) {
			if (k > 0) {
				ws[k] = '\0';
				TRY(kis_mvm_disk_sync_back(disk, "/upper", ws, err));
			}
			/* the read-write mounts' layers (microvm-mounts: "SLOT PATH") */
			char line[4200];
			while (mf && fgets(line, sizeof(line), mf)) {
				line[strcspn(line, "\n")] = '\0';
				char *sp = strchr(line, ' ');
				unsigned slot;
				if (!sp || sscanf(line, "%u ", &slot) != 1 || slot >= KIS_MVM_MOUNTS)
					continue;
				char layer[32];
				snprintf(layer, sizeof(layer), "/m%u/upper", slot);
				if (kis_mvm_disk_sync_back(disk, layer, sp + 1, err) < 0)
					return kis_error_wrap(err, "mounts[%u]", slot);
			}
			unlink(disk);
		}
	}
	return 0;
}

/* After a failed session exec: the guest's counts against those seen after
 * the session's last exec (kept beside the session), as the host tiers do
 * with their session cgroup. */
static int microvm_session_explain(const struct kis_session_ctx *ctx, struct kis_result *res)
{
	if (ctx->dir_fd < 0)
		return 0;
	int ctl = kis_mvm_ctl_wait(ctx->dir_fd, 3000, 0);
	if (ctl < 0)
		return 0;
	struct mvm_events now = guest_events(ctl), seen = {0, 0};
	close(ctl);
	char buf[64];
	int fd = openat(ctx->dir_fd, "microvm-events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0 || (buf[k] = '\0', sscanf(buf, "%lu %lu", &seen.oom, &seen.pids) != 2))
			seen.oom = seen.pids = 0;
	}
	fd = openat(ctx->dir_fd, "microvm-events", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		    0600);
	if (fd >= 0) {
		dprintf(fd, "%lu %lu\n", now.oom, now.pids);
		close(fd);
	}
	return explain_events(seen, now, NULL, res);
}

/* A pod container's root into a slot of the session's VM (slot.c). */
static int microvm_session_attach(const struct kis_session_ctx *ctx, int slot,
				  const struct kis_mount_src *src, struct kis_error **err)
{
	if (!src->base || !src->cache || !src->path)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "a mount slot takes a base's tree");
	_cleanup_free_ char *img = NULL;
	if (kis_mvm_base_image(src->cache, src->path, &img, err) < 0)
		return kis_error_wrap(err, "the image of base '%s'", src->source);
	return kis_mvm_slot_attach(ctx->dir_fd, slot, img, err);
}

static const char *microvm_session_state(const struct kis_session_ctx *ctx)
{
	/* QMP answers only while QEMU runs; its status tells a paused VM */
	int q = kis_mvm_qmp_open(ctx->dir_fd, "qmp.sock", 300);
	if (q < 0)
		return NULL; /* judged from the pid */
	char *rep = NULL;
	const char *st = NULL;
	if (kis_mvm_qmp_cmd(q, "{\"execute\":\"query-status\"}", -1, &rep, 1000) == 0)
		st = strstr(rep, "\"running\"") ? "running" : "paused";
	free(rep);
	close(q);
	return st;
}

const struct kis_backend kis_backend_microvm = {
	.name = "microvm",
	.tier = KIS_TIER_MICROVM,
	.probe = microvm_probe,
	.plan = microvm_plan,
	.amend = microvm_amend,
	.describe = microvm_describe,
	.run = microvm_run,
	.plan_free = microvm_plan_free,
	.start_session = microvm_start_session,
	.session_exec = kis_agent_session_exec,
	.end_session = microvm_end_session,
	.session_state = microvm_session_state,
	.session_attach = microvm_session_attach,
	.session_explain = microvm_session_explain,
};
