/* SPDX-License-Identifier: MIT */
/* kis/sandbox.h: the library's front door. Include this one header. */
#ifndef KIS_SANDBOX_H
#define KIS_SANDBOX_H

#include "kis/backend.h"
#include "kis/error.h"
#include "kis/id.h"
#include "kis/profile.h"
#include "kis/result.h"

struct kis_run_options {
	struct kis_io io;
	bool dry_run;          /* plan and describe, run nothing */
	const char *store_root; /* NULL: KIS_SANDBOX_ROOT or the default */
	int resize_fd;          /* with tty: readable means the caller's terminal resized */
	int tty_fd;             /* with tty: the caller's terminal (TIOCGWINSZ), or -1 */
};

/* Run one command under a profile: check the hatches, select a backend,
 * clone (profile.base) or open (profile.workspace) a workspace, plan, run,
 * clean up. On success res holds the termination; with dry_run, *plan_json
 * receives the plan (malloc'ed) and nothing runs. */
KIS_API int kis_run(const struct kis_profile *p, char *const *argv,
		    const struct kis_run_options *opts, struct kis_result *res, char **plan_json,
		    struct kis_error **err);

#endif
