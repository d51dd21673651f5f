/* SPDX-License-Identifier: MIT */
/* kis-runtime at the microvm tier: a pod sandbox's image kept as a base
 * from one pod to the next (mvm_image.c). */
#ifndef KIS_RUNTIME_MVM_IMAGE_H
#define KIS_RUNTIME_MVM_IMAGE_H

#include <stdbool.h>

#include "kis/error.h"
#include "kis/id.h"
#include "kis/store.h"

/* How many sandbox images stay kept (the least recently used beyond go):
 * a node's pods share one sandbox ("pause") image, two across an upgrade. */
#define KRT_MVM_IMAGES_KEPT 4

/* Told each id krt_mvm_image_clone will make, before anything of it is
 * in the store, so that a caller that may be killed records it first:
 * what is "workspace", or "image_base" for a base it imports (which it
 * may then keep: krt_mvm_image_kept). A negative return stops the clone
 * (fn sets *err). */
struct krt_mvm_minted {
	int (*fn)(void *ctx, const char *what, const char *id, struct kis_error **err);
	void *ctx;
};

/* The workspace of a pod sandbox whose rootfs is the tree at rootfs: a
 * clone of a kept base whose tree is the same as rootfs (krt_mvm_same_tree),
 * or else of a new import of rootfs, kept for the next pods (listed in
 * mvm_fd's ".images"). base is the base the caller owns and removes with
 * the pod: "" when it is a kept one, which stays. minted: NULL, or told
 * the ids first. */
int krt_mvm_image_clone(struct kis_store *store, int mvm_fd, const char *rootfs,
			const struct krt_mvm_minted *minted, char base[KIS_ID_BUFSZ],
			char ws[KIS_ID_BUFSZ], struct kis_error **err);

/* Is base (a valid id) a kept one, listed in mvm_fd's ".images"? A base
 * krt_mvm_image_clone imported and did not keep is its caller's; one
 * listed is the runtime's, never removed with a container. */
bool krt_mvm_image_kept(int mvm_fd, const char *base);

/* A kept base whose tree is the same as rootfs, in base (a pod app
 * container's root: not its own, never removed with it): 1, 0 when none
 * is kept (base ""), -1 with *err. */
int krt_mvm_image_find(struct kis_store *store, int mvm_fd, const char *rootfs,
		       char base[KIS_ID_BUFSZ], struct kis_error **err);

/* Are the trees at a and b the same, as an import and the guest's disk
 * image would keep them: the same names, and for each its type, mode,
 * owner, device number, link count, modification time (not a
 * directory's), size, link target, extended attributes and bytes.
 * Nothing is followed; the trees are read, never written. */
int krt_mvm_same_tree(const char *a, const char *b, bool *same, struct kis_error **err);

#endif
