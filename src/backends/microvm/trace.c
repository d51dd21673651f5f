/* SPDX-License-Identifier: MIT */
/* The microvm's phase trace (vm.h, kis_mvm_trace): its own file, so the
 * VMM's start (vm.c) and its jail (jail.c) both use it and neither the other. */
#include "core/util.h"

#include <stdatomic.h>
#include <stdint.h>

#include "backends/microvm/vm.h"
#include "core/io.h"
#include "core/log.h"

/* The VM's phases with their times, as debug events (kis/log.h); the
 * former KIS_MICROVM_TRACE=1 is KIS_LOG=debug now. */
void kis_mvm_trace(const char *what)
{
	static _Atomic int64_t t0;
	if (!kis_log_on(KIS_LOG_DEBUG))
		return;
	int64_t t = (int64_t)kis_monotonic_ms(), zero = 0;
	atomic_compare_exchange_strong(&t0, &zero, t);
	kis_debug("microvm: %6lld ms %s", (long long)(t - atomic_load(&t0)), what);
}
