/* SPDX-License-Identifier: MIT */
/* kis-runtime at the microvm tier: one VM per pod (mvm_pod.c). */
#ifndef KIS_RUNTIME_MVM_POD_H
#define KIS_RUNTIME_MVM_POD_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "kis/error.h"
#include "kis/id.h"
#include "runtime/runtime.h"

/* containerd's CRI plugin marks every bundle of a pod with these
 * (containerd pkg/cri/annotations): the container's role and its pod's
 * sandbox container's id */
#define KRT_ANN_CRI_TYPE "io.kubernetes.cri.container-type"
#define KRT_ANN_CRI_SANDBOX "io.kubernetes.cri.sandbox-id"

enum krt_pod_role {
	KRT_POD_NONE = 0, /* no pod: a container of its own VM, as before */
	KRT_POD_SANDBOX,  /* the pod's sandbox ("pause"): boots the pod's VM */
	KRT_POD_APP,      /* an app container: runs in its pod's VM */
};

/* The namespaces a pod's containers share on the host, by path: in the
 * order of krt_pod_ns[] (network, ipc, uts). */
#define KRT_POD_NS 3
extern const char *const krt_pod_ns_type[KRT_POD_NS];

/* A field the microvm tier cannot give, refused by name with the tier
 * named (profile_unsatisfiable): the plan's (mvm.c) and the pod's. */
int krt_mvm_refuse(struct kis_error **err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct krt_pod {
	enum krt_pod_role role;
	char sandbox[256];         /* the sandbox container's id (a runtime id) */
	/* the namespaces the bundle joins by path, the model's held fds
	 * (borrowed: -1 when not joined) */
	int ns_fd[KRT_POD_NS];
	/* KRT_POD_APP, from the sandbox's state once verified: */
	char session[KIS_ID_BUFSZ]; /* the pod VM's kis session */
	char *sandbox_rootfs;
	char *hostname;             /* the sandbox's config.json hostname, or NULL */
};

/* The pod VM's mount slots that app containers' roots take (the
 * microvm's KIS_MVM_MOUNTS, the VM's fixed device set): one per distinct
 * tree, shared by apps whose trees are the same. */
#define KRT_POD_SLOTS 4
/* Take a slot for app id (rootfs its tree) in the pod sandbox's record
 * (slots.json in the sandbox's state directory, under slots.lock):
 * *slot, and *fresh when the slot needs the tree's image put in it. The
 * lock stays held in *lock (the caller closes it once the image is in),
 * so no other app of the pod takes or frees a slot meanwhile. A fifth
 * distinct tree is refused by name. */
int krt_pod_slot_take(const struct krt_globals *g, const char *mvm_dir, const char *sandbox,
		      const char *id, const char *rootfs, int *slot, bool *fresh, int *lock,
		      struct kis_error **err);
/* Give app id's slot back (at its delete), under the lock: first
 * before(arg, slot, last) (last: no other app uses it now), which ends
 * the container in the guest; the slot is given back only when it
 * returns 0. Best effort: nothing when id holds no slot. */
void krt_pod_slot_release(const struct krt_globals *g, const char *mvm_dir, const char *sandbox,
			  const char *id, int (*before)(void *arg, int slot, bool last),
			  void *arg);

/* The role from the CRI annotations, an allowlist: both annotations or
 * neither; the type "sandbox" (whose sandbox-id is its own id) or
 * "container" (whose is another's); a sandbox-id a runtime id. */
int krt_pod_parse(const struct krt_model *m, const char *id, struct krt_pod *pod,
		  struct kis_error **err);
void krt_pod_release(struct krt_pod *pod);
/* May linux.namespaces[] of this type be joined by path in this role?
 * (0: yes, the fd held; else the refusal set, naming the field) */
int krt_pod_ns_path_ok(const struct krt_pod *pod, const char *type, const char *path,
		       struct kis_error **err);
/* KRT_POD_APP: the pod is a kis-vm sandbox of THIS runtime root (state
 * under g->root), not stopped, whose container process's network, ipc and
 * uts namespaces are the very ones the bundle joins (st_dev, st_ino of
 * the held fds); fills session, sandbox_rootfs and hostname. Any other pod, path or id is refused by name. */
int krt_pod_verify_app(const struct krt_globals *g, const char *mvm_dir, const char *rootfs,
		       struct krt_pod *pod, struct kis_error **err);
/* In the container process (between fork and the start fifo): the
 * sandbox's joins the pod's network namespace (CNI's) and makes its ipc
 * and uts namespaces, hostname set; an app's joins its sandbox's three.
 * -1 with errno. */
int krt_pod_enter(const struct krt_pod *pod, const char *hostname);

#endif
