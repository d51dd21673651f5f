/* SPDX-License-Identifier: MIT */
/* kis-runtime at the microvm tier: one VM per pod, as Kata runs one.
 *
 * Theory of operation. containerd's CRI plugin runs a pod as a sandbox
 * ("pause") container and app containers that join the sandbox
 * container's network, IPC and UTS namespaces by path
 * (/proc/<its pid>/ns/...), every bundle annotated with its role and its
 * pod's sandbox id (KRT_ANN_CRI_*). At the microvm tier:
 *   - the sandbox container boots the pod's VM (mvm.c, as for any
 *     container) and its container process, the host process the shim
 *     waits on, holds the pod's host-side namespaces: it joins the
 *     network namespace the bundle names (the one CNI made: the
 *     operator's network is what that path grants: the same held fd
 *     is handed to the session's create, where passt started inside it
 *     serves the guest's network device, the guest having the pod's
 *     address) and makes the IPC and UTS namespaces the bundle asks for;
 *   - an app container boots nothing: once its namespace paths are proven
 *     to be its sandbox's (krt_pod_verify_app), its process runs in the
 *     pod's VM, an exec of the sandbox's session, and its host process
 *     joins the same three namespaces. In the guest it is a container of
 *     its own (src/agent/pod.c): its root is its rootfs's tree, in one of
 *     the VM's mount slots (krt_pod_slot_take: the pod's slots.json under
 *     the sandbox's state, under slots.lock; apps of the same tree share a
 *     slot, a fifth distinct tree is refused by name), in mount and pid
 *     namespaces of its own; the guest's network, IPC and UTS are the
 *     pod's, its hostname the sandbox's (recorded in its state).
 * Recognition is an allowlist: a path is accepted only when the held fd
 * the model opened (model.c: a namespace file of that type, not the
 * runtime's or init's own) is, by st_dev and st_ino, the namespace of the
 * container process of a running kis-vm sandbox recorded under THIS
 * runtime root whose id is the bundle's sandbox-id annotation. Every other
 * path (the host's, another root's pod, a mismatched id, a pid reused
 * since) stays refused by name. */
#include "core/util.h"

#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/mvm_image.h"
#include "runtime/mvm_pod.h"

const char *const krt_pod_ns_type[KRT_POD_NS] = {"network", "ipc", "uts"};
static const char *const pod_procns[KRT_POD_NS] = {"net", "ipc", "uts"};
static const int pod_clone[KRT_POD_NS] = {CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS};

int krt_mvm_refuse(struct kis_error **err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0, "%s (run.kis.tier 'microvm')",
			     msg);
}

static int pod_index(const char *type)
{
	for (int k = 0; k < KRT_POD_NS; k++)
		if (type && strcmp(type, krt_pod_ns_type[k]) == 0)
			return k;
	return -1;
}

int krt_pod_parse(const struct krt_model *m, const char *id, struct krt_pod *pod,
		  struct kis_error **err)
{
	memset(pod, 0, sizeof(*pod));
	for (int k = 0; k < KRT_POD_NS; k++) {
		int clone;
		pod->ns_fd[k] = krt_model_ns_fd(m, krt_pod_ns_type[k], &clone);
	}
	json_t *ann = json_object_get(m->doc, "annotations");
	const char *type = json_string_value(json_object_get(ann, KRT_ANN_CRI_TYPE));
	const char *sb = json_string_value(json_object_get(ann, KRT_ANN_CRI_SANDBOX));
	if (!type && !sb)
		return 0;
	if (!type || !sb)
		return krt_mvm_refuse(err, "annotations: %s without %s: a pod's bundle names both",
				  type ? KRT_ANN_CRI_TYPE : KRT_ANN_CRI_SANDBOX,
				  type ? KRT_ANN_CRI_SANDBOX : KRT_ANN_CRI_TYPE);
	if (strcmp(type, "sandbox") == 0)
		pod->role = KRT_POD_SANDBOX;
	else if (strcmp(type, "container") == 0)
		pod->role = KRT_POD_APP;
	else
		return krt_mvm_refuse(err, "annotations: " KRT_ANN_CRI_TYPE " '%s': 'sandbox' or "
				       "'container'", type);
	struct kis_error *e = NULL;
	if (strlen(sb) >= sizeof(pod->sandbox) || krt_valid_id(sb, &e) < 0) {
		kis_error_free(e);
		return krt_mvm_refuse(err, "annotations: " KRT_ANN_CRI_SANDBOX " '%.80s' is not a "
				       "container id", sb);
	}
	snprintf(pod->sandbox, sizeof(pod->sandbox), "%s", sb);
	/* containerd gives the sandbox its own id; an app another's */
	if (pod->role == KRT_POD_SANDBOX && strcmp(sb, id) != 0)
		return krt_mvm_refuse(err, "annotations: " KRT_ANN_CRI_SANDBOX " '%s' of a sandbox "
				       "is not its own id '%s'", sb, id);
	if (pod->role == KRT_POD_APP && strcmp(sb, id) == 0)
		return krt_mvm_refuse(err, "annotations: " KRT_ANN_CRI_SANDBOX " '%s' of an app "
				       "container is its own id", sb);
	return 0;
}

void krt_pod_release(struct krt_pod *pod)
{
	free(pod->sandbox_rootfs);
	pod->sandbox_rootfs = NULL;
	free(pod->hostname);
	pod->hostname = NULL;
}

int krt_pod_ns_path_ok(const struct krt_pod *pod, const char *type, const char *path,
		       struct kis_error **err)
{
	int k = pod_index(type);
	/* the sandbox: the network namespace CNI made for the pod (the model
	 * refused the host's own); an app: its sandbox's three, verified
	 * against the sandbox by krt_pod_verify_app before anything runs */
	if ((pod->role == KRT_POD_SANDBOX && k == 0) || (pod->role == KRT_POD_APP && k >= 0))
		return 0;
	if (pod->role == KRT_POD_NONE)
		return krt_mvm_refuse(err, "linux.namespaces: joining the %s namespace at '%s': a "
				       "host namespace does not reach the guest",
				  type ? type : "", path);
	return krt_mvm_refuse(err, "linux.namespaces: joining the %s namespace at '%s': a pod's "
			       "containers share its network, ipc and uts namespaces (the "
			       "sandbox: its network only); a %s namespace does not reach the "
			       "pod's guest",
			  type ? type : "", path, type ? type : "");
}

static const char *sget(json_t *st, const char *k)
{
	const char *v = json_string_value(json_object_get(st, k));
	return v ? v : "";
}

int krt_pod_verify_app(const struct krt_globals *g, const char *mvm_dir, const char *rootfs,
		       struct krt_pod *pod, struct kis_error **err)
{
	(void)rootfs; /* its own root in the guest: a slot (krt_pod_slot_take) */
	for (int k = 0; k < KRT_POD_NS; k++)
		if (pod->ns_fd[k] < 0)
			return krt_mvm_refuse(err, "linux.namespaces: an app container of pod '%s' "
					       "joins the pod's %s namespace by path; a %s "
					       "namespace of its own is not the pod's",
					  pod->sandbox, krt_pod_ns_type[k], krt_pod_ns_type[k]);
	int dfd = -1;
	json_t *st = NULL;
	struct kis_error *e = NULL;
	/* this root's state only: a pod of another root (another handler,
	 * another runtime) is not found here */
	if (krt_tier_load(g, mvm_dir, pod->sandbox, &dfd, &st, &e) < 0) {
		kis_error_free(e);
		return krt_mvm_refuse(err, "annotations: " KRT_ANN_CRI_SANDBOX " '%s' is not a kis-vm "
				       "pod sandbox of this runtime root", pod->sandbox);
	}
	_cleanup_close_ int d = dfd;
	int r = -1;
	if (strcmp(sget(st, "pod"), "sandbox") != 0) {
		krt_mvm_refuse(err, "annotations: " KRT_ANN_CRI_SANDBOX " '%s' names a container that "
				"is not a pod sandbox", pod->sandbox);
		goto out;
	}
	if (strcmp(krt_status_of(dfd, st), "stopped") == 0) {
		krt_mvm_refuse(err, "annotations: the pod sandbox '%s' has stopped", pod->sandbox);
		goto out;
	}
	pid_t pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	unsigned long long want = (unsigned long long)json_integer_value(
		json_object_get(st, "starttime"));
	int fds[KRT_POD_NS] = {-1, -1, -1};
	bool ok = pid > 0;
	for (int k = 0; ok && k < KRT_POD_NS; k++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, pod_procns[k]);
		fds[k] = open(p, O_RDONLY | O_CLOEXEC);
		ok = fds[k] >= 0;
	}
	/* the process whose namespaces were opened is the sandbox's: its
	 * start time, read after the opens, is the recorded one (a pid
	 * reused before an open would show another) */
	unsigned long long start = 0;
	char letter = 0;
	ok = ok && krt_proc_stat(pid, &start, &letter) == 0 && start == want;
	int bad = -1;
	for (int k = 0; ok && bad < 0 && k < KRT_POD_NS; k++) {
		struct stat a, b;
		if (fstat(fds[k], &a) < 0 || fstat(pod->ns_fd[k], &b) < 0 || a.st_dev != b.st_dev ||
		    a.st_ino != b.st_ino)
			bad = k;
	}
	for (int k = 0; k < KRT_POD_NS; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	if (!ok) {
		krt_mvm_refuse(err, "annotations: the pod sandbox '%s''s process is gone",
			   pod->sandbox);
		goto out;
	}
	if (bad >= 0) {
		krt_mvm_refuse(err, "linux.namespaces: the %s namespace joined by path is not the one "
				"of pod sandbox '%s' (" KRT_ANN_CRI_SANDBOX ")",
			   krt_pod_ns_type[bad], pod->sandbox);
		goto out;
	}
	/* an id of a session only: the app runs in what it names */
	const char *sid = krt_state_id(st, "session", 's');
	if (!*sid || strlen(sid) >= sizeof(pod->session)) {
		krt_mvm_refuse(err, "the pod sandbox '%s' has no VM", pod->sandbox);
		goto out;
	}
	snprintf(pod->session, sizeof(pod->session), "%s", sid);
	if (*sget(st, "hostname") && !(pod->hostname = strdup(sget(st, "hostname")))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "pod");
		goto out;
	}
	if (!(pod->sandbox_rootfs = strdup(sget(st, "rootfs")))) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "pod");
		goto out;
	}
	r = 0;
out:
	json_decref(st);
	return r;
}

int krt_pod_enter(const struct krt_pod *pod, const char *hostname)
{
	if (pod->role == KRT_POD_SANDBOX) {
		if (pod->ns_fd[0] >= 0 && setns(pod->ns_fd[0], CLONE_NEWNET) < 0)
			return -1;
		if (unshare(CLONE_NEWIPC | CLONE_NEWUTS) < 0)
			return -1;
		if (hostname && *hostname && sethostname(hostname, strlen(hostname)) < 0)
			return -1;
		return 0;
	}
	if (pod->role == KRT_POD_APP)
		for (int k = 0; k < KRT_POD_NS; k++)
			if (setns(pod->ns_fd[k], pod_clone[k]) < 0)
				return -1;
	return 0;
}

/* ------------------------------------------------ the pod VM's slots */

/* slots.json: {"<slot>": {"rootfs": the first user's tree, "users": [ids]}} */
static json_t *slots_read(int dfd)
{
	json_t *j = krt_read_json_at(dfd, "slots.json");
	return json_is_object(j) ? j : (json_decref(j), json_object());
}

static int slots_write(int dfd, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	if (!s)
		return -1;
	int fd = openat(dfd, "slots.json.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
			0600);
	size_t n = strlen(s);
	int r = fd >= 0 && write(fd, s, n) == (ssize_t)n && fsync(fd) == 0 ? 0 : -1;
	if (fd >= 0)
		close(fd);
	free(s);
	return r < 0 ? -1 : renameat(dfd, "slots.json.tmp", dfd, "slots.json");
}

static int slots_lock(const struct krt_globals *g, const char *mvm_dir, const char *sandbox,
		      int *dfd)
{
	*dfd = krt_tier_container(g, mvm_dir, sandbox);
	if (*dfd < 0)
		return -1;
	int l = openat(*dfd, "slots.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (l < 0 || flock(l, LOCK_EX) < 0) {
		if (l >= 0)
			close(l);
		close(*dfd);
		*dfd = -1;
		return -1;
	}
	return l;
}

int krt_pod_slot_take(const struct krt_globals *g, const char *mvm_dir, const char *sandbox,
		      const char *id, const char *rootfs, int *slot, bool *fresh, int *lock,
		      struct kis_error **err)
{
	int dfd;
	*lock = -1;
	*slot = -1;
	*fresh = false;
	int l = slots_lock(g, mvm_dir, sandbox, &dfd);
	if (l < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot lock the mount slots of pod sandbox '%s'", sandbox);
	_cleanup_close_ int d = dfd;
	json_t *j = slots_read(dfd);
	int r = -1, free_slot = -1;
	for (int i = 0; i < KRT_POD_SLOTS && *slot < 0; i++) {
		char k[16];
		snprintf(k, sizeof(k), "%d", i);
		json_t *e = json_object_get(j, k);
		json_t *users = json_object_get(e, "users");
		/* a user whose state is gone (deleted, or a create killed
		 * before it recorded one) holds nothing */
		size_t u;
		json_t *v;
		json_array_foreach(users, u, v) {
			int c = krt_tier_container(g, mvm_dir, json_string_value(v));
			if (c >= 0) {
				close(c);
				continue;
			}
			json_array_remove(users, u);
			u--;
		}
		if (!json_array_size(users)) {
			if (free_slot < 0)
				free_slot = i;
			continue;
		}
		bool same = false;
		struct kis_error *e2 = NULL;
		if (krt_mvm_same_tree(json_string_value(json_object_get(e, "rootfs")), rootfs, &same,
				      &e2) < 0)
			same = false;
		kis_error_free(e2);
		if (same && json_array_append_new(users, json_string(id)) == 0)
			*slot = i;
	}
	if (*slot < 0 && free_slot < 0) {
		krt_mvm_refuse(err, "root.path: pod '%s' has app containers of %d distinct root "
				"trees, the most a kis-vm pod's VM takes (its mount slots); "
				"this one is a %dth", sandbox, KRT_POD_SLOTS, KRT_POD_SLOTS + 1);
		goto out;
	}
	if (*slot < 0) {
		char k[16];
		snprintf(k, sizeof(k), "%d", free_slot);
		json_t *e = json_pack("{s:s,s:[s]}", "rootfs", rootfs, "users", id);
		if (!e || json_object_set_new(j, k, e) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "slots");
			goto out;
		}
		*slot = free_slot;
		*fresh = true;
	}
	if (slots_write(dfd, j) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record the pod's mount slots");
		goto out;
	}
	*lock = l;
	l = -1;
	r = 0;
out:
	if (l >= 0)
		close(l);
	json_decref(j);
	return r;
}

void krt_pod_slot_release(const struct krt_globals *g, const char *mvm_dir, const char *sandbox,
			  const char *id, int (*before)(void *arg, int slot, bool last),
			  void *arg)
{
	int dfd;
	int l = slots_lock(g, mvm_dir, sandbox, &dfd);
	if (l < 0)
		return;
	json_t *j = slots_read(dfd);
	int slot = -1;
	for (int i = 0; i < KRT_POD_SLOTS && slot < 0; i++) {
		char k[16];
		snprintf(k, sizeof(k), "%d", i);
		json_t *users = json_object_get(json_object_get(j, k), "users");
		size_t u;
		json_t *v;
		json_array_foreach(users, u, v)
			if (!strcmp(json_string_value(v) ? json_string_value(v) : "", id)) {
				bool last = json_array_size(users) == 1;
				if (before(arg, i, last) == 0) {
					json_array_remove(users, u);
					slots_write(dfd, j);
				}
				slot = i;
				break;
			}
	}
	json_decref(j);
	close(l);
	close(dfd);
}
