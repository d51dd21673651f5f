/* SPDX-License-Identifier: MIT */
/* The one rlimit setter (issue 20), used by the spawn path, the host
 * tier's hardening and the guest agent alike. */
#ifndef KIS_CORE_RLIMIT_H
#define KIS_CORE_RLIMIT_H

#include "kis/limits.h"

/* file_bytes, open_files, the cpu backstop a second past cpu_ms, and no
 * core dumps, each with soft = hard so the command cannot raise it; zero
 * fields are left alone; never above the caller's own hard limit.
 * Async-signal-safe: -1 with errno. */
int kis_rlimits_apply(const struct kis_limits *l);
/* Say at debug (core/log.h) what kis_rlimits_apply sets in process pid
 * (called by its parent: the child may not log). */
void kis_rlimits_log(const struct kis_limits *l, int pid);

#endif
