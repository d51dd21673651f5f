/* SPDX-License-Identifier: MIT */
/* The one rlimit setter (rlimit.h). */
#include "core/util.h"

#include <sys/resource.h>

#include "core/log.h"
#include "core/rlimit.h"

/* soft = hard = v: the command cannot raise it back (setrlimit(2) lets
 * anyone lower a hard limit, only CAP_SYS_RESOURCE raise it). Never above
 * the hard limit we were given: lowered only. */
static int set_rlimit(int resource, uint64_t v)
{
	struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
	struct rlimit cur;
	if (getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max > cur.rlim_max)
		rl.rlim_cur = rl.rlim_max = cur.rlim_max;
	return setrlimit(resource, &rl);
}

/* RLIMIT_CPU's seconds: a second past cpu_ms, rounded up */
static uint64_t cpu_backstop_s(const struct kis_limits *l)
{
	return (l->cpu_ms + 999) / 1000 + 1;
}

void kis_rlimits_log(const struct kis_limits *l, int pid)
{
	if (l)
		kis_debug("limits written: rlimits of pid %d: RLIMIT_FSIZE %llu, RLIMIT_NOFILE %llu, "
			  "RLIMIT_CPU %llu s, RLIMIT_CORE 0 (a 0 is not set)", pid,
			  (unsigned long long)l->file_bytes, (unsigned long long)l->open_files,
			  (unsigned long long)(l->cpu_ms ? cpu_backstop_s(l) : 0));
}

int kis_rlimits_apply(const struct kis_limits *l)
{
	if (!l)
		return 0;
	if (l->file_bytes && set_rlimit(RLIMIT_FSIZE, l->file_bytes) < 0)
		return -1;
	if (l->open_files && set_rlimit(RLIMIT_NOFILE, l->open_files) < 0)
		return -1;
	if (l->cpu_ms) {
		/* A backstop for every process of the run: the supervisor stops the
		 * command at cpu_ms of the whole sandbox exactly; RLIMIT_CPU, per
		 * process and in whole seconds, catches one the supervisor cannot
		 * see, a second past the budget. Soft and hard alike: the kernel
		 * sends SIGKILL, which the command cannot catch (setrlimit(2)). */
		if (set_rlimit(RLIMIT_CPU, cpu_backstop_s(l)) < 0)
			return -1;
	}
	return set_rlimit(RLIMIT_CORE, 0);
}
