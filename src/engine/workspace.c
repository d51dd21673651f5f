/* SPDX-License-Identifier: MIT */
/* The workspace a run or a session uses, acquired from the store. */
#include "util.h"

#include <string.h>

#include "engine/internal.h"

int kis_workspace_acquire(const struct kis_profile *p, const char *store_root, char **id,
			  char **path, bool *cloned, struct kis_error **err)
{
	*id = *path = NULL;
	*cloned = false;
	if (!p->base && !p->workspace)
		return 0;
	return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
			     "workspaces are not available in this build yet");
}

void kis_workspace_release(const char *store_root, const char *id)
{
	(void)store_root;
	(void)id;
}
