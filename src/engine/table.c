/* SPDX-License-Identifier: MIT */
/* The backend table: the one list of the backends this build has, in the
 * order selection prefers them. Its own file, below everything that reads
 * it (selection, the owners' sweep handing a backend its leftovers, a
 * session's end), so that none of those depends on another through it. */
#include "core/util.h"

#include <string.h>

#include "backends/common.h"
#include "kis/backend.h"

/* Weakest tier first; within a tier, preferred backend first. */
static const struct kis_backend *const table[] = {
	&kis_backend_process,
	&kis_backend_wasm,
	/* bubblewrap first: namespaces (pid, net, mount) on top of the same
	 * seccomp policy confine more than Landlock alone */
	&kis_backend_bubblewrap,
	&kis_backend_landlock,
	&kis_backend_oci,
	&kis_backend_microvm,
};

const struct kis_backend *const *kis_backends(size_t *n)
{
	*n = ARRAY_SIZE(table);
	return table;
}

const struct kis_backend *kis_backend_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(table); i++)
		if (!strcmp(table[i]->name, name))
			return table[i];
	return NULL;
}
