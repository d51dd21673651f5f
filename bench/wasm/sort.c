/* SPDX-License-Identifier: MIT */
/* Benchmark kernel: heap sort of 200k pseudo-random integers (memory, compares). */
#include "kernel.h"

#define N 200000
static u32 v[N];

static void sift(u32 *a, int start, int end)
{
	int root = start;
	while (2 * root + 1 <= end) {
		int child = 2 * root + 1;
		if (child + 1 <= end && a[child] < a[child + 1])
			child++;
		if (a[root] >= a[child])
			return;
		u32 t = a[root];
		a[root] = a[child];
		a[child] = t;
		root = child;
	}
}

KERNEL unsigned run(void)
{
	u32 seed = 42;
	for (int i = 0; i < N; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 17;
		seed ^= seed << 5;
		v[i] = seed;
	}
	for (int s = N / 2 - 1; s >= 0; s--)
		sift(v, s, N - 1);
	for (int e = N - 1; e > 0; e--) {
		u32 t = v[0];
		v[0] = v[e];
		v[e] = t;
		sift(v, 0, e - 1);
	}
	u32 h = 0;
	for (int i = 0; i < N; i += 97)
		h = h * 31 + v[i];
	return h;
}
