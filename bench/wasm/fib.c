/* SPDX-License-Identifier: MIT */
/* Benchmark kernel: naive recursive Fibonacci (calls and returns). */
#include "kernel.h"

static unsigned fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

KERNEL unsigned run(void)
{
	return fib(30 + SCALE_ADJ);
}
