/* SPDX-License-Identifier: MIT */
/* The one tree remover of the project (issue 20): every tree the engine
 * deletes (a workspace, a base, a private directory, a bundle, a VM's
 * files) goes through it, so one set of rules holds for all of them. */
#ifndef KIS_CORE_TREE_H
#define KIS_CORE_TREE_H

#include "kis/error.h"

/* Remove name under dfd and everything below it. A missing name is
 * success. Never follows a symlink (a link is removed as itself), never
 * crosses into another mount (KIS_E_BUSY naming it, nothing under it
 * touched), makes directories their owner cannot read or write 0700 to
 * empty them, and works without recursion, with two descriptors, however
 * deep the tree. A directory moved out of the tree while it is walked stops
 * the walk (KIS_E_BUSY): it never leads the removal out. */
int kis_tree_remove(int dfd, const char *name, struct kis_error **err);
/* The same, best effort (a later sweep retries what is left). */
void kis_tree_remove_quiet(int dfd, const char *name);
void kis_tree_remove_path(const char *path);

#endif
