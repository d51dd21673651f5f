/* SPDX-License-Identifier: MIT */
/* Internal: what native backends share: the plan of a native command
 * (argv, env, cwd, limits) and the check of limits against capabilities. */
#ifndef KIS_BACKENDS_COMMON_H
#define KIS_BACKENDS_COMMON_H

#include "exec/exec.h"
#include "kis/backend.h"

struct kis_native_plan {
	char **argv;
	char **envp;
	char *cwd;      /* host-side path to chdir to, NULL: inherit */
	struct kis_limits limits;
	struct kis_io io;
	bool tty;
};

/* Refuse each non-zero limit the backend cannot enforce, naming the field. */
int kis_check_limits(const struct kis_caps *caps, const struct kis_profile *p,
		     const char *backend, struct kis_error **err);
/* Environment of a sandboxed command: a default PATH and HOME, then the
 * profile's env (which wins). Nothing is inherited from the caller. */
int kis_native_plan_init(struct kis_native_plan *n, const struct kis_run_request *req,
			 struct kis_error **err);
void kis_native_plan_release(struct kis_native_plan *n);
char *kis_native_plan_describe(const struct kis_native_plan *n, const char *backend);
int kis_native_plan_run(struct kis_native_plan *n, int (*child_setup)(void *, struct kis_error **),
			void *ctx, const struct kis_supervise_hooks *hooks, struct kis_result *res,
			struct kis_error **err);

extern const struct kis_backend kis_backend_process;

#endif
