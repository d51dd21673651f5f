/* SPDX-License-Identifier: MIT */
/* Native driver of a benchmark kernel: calls run() once, prints its result. */
#include <stdio.h>

#include "kernel.h"

int main(void)
{
	printf("%u\n", run());
	return 0;
}
