/* SPDX-License-Identifier: MIT */
/* Benchmark kernel: a tight arithmetic loop (locals, adds, branches). */
#include "kernel.h"

KERNEL unsigned run(void)
{
	volatile u32 n = 50000000u >> (SCALE_ADJ < 0 ? -SCALE_ADJ : 0);
	u32 sum = 0;
	for (u32 i = 0; i < n; i++)
		sum += i ^ (sum >> 3);
	return sum;
}
