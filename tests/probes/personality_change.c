/* SPDX-License-Identifier: MIT */
/* Probe: personality(READ_IMPLIES_EXEC) (every readable page executable).
 * The policy allows only the query and PER_LINUX: EPERM. The query must
 * still work, or the probe reports a setup failure. */
#include <sys/personality.h>

#include "probe.h"

int main(void)
{
	if (personality(0xffffffff) < 0)
		probe_setup("personality_change", "query");
	int r = personality(PER_LINUX | READ_IMPLIES_EXEC);
	probe_verdict("personality_change", r, errno, EPERM, "changed the personality");
}
