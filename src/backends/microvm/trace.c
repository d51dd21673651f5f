/* SPDX-License-Identifier: MIT */
/* The microvm's phase trace (vm.h, kis_mvm_trace): its own file, so the
 * VMM's start (vm.c) and its jail (jail.c) both use it and neither the other. */
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>

#include "backends/microvm/vm.h"
#include "core/io.h"

void kis_mvm_trace(const char *what)
{
	static int64_t t0;
	if (!getenv("KIS_MICROVM_TRACE"))
		return;
	int64_t t = (int64_t)kis_monotonic_ms();
	if (!t0)
		t0 = t;
	dprintf(2, "microvm: %6lld ms %s\n", (long long)(t - t0), what);
}
