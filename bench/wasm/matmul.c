/* SPDX-License-Identifier: MIT */
/* Benchmark kernel: 200x200 double matrix multiply (f64 loads, mul-add). */
#include "kernel.h"

#define N 200
static double a[N][N], b[N][N], c[N][N];

KERNEL unsigned run(void)
{
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			a[i][j] = (double)(i + j) * 0.5;
			b[i][j] = (double)(i - j) * 0.25;
		}
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < N; i++)
			for (int j = 0; j < N; j++) {
				double s = 0;
				for (int k = 0; k < N; k++)
					s += a[i][k] * b[k][j];
				c[i][j] = s + c[i][j] * 0.5;
			}
	double t = 0;
	for (int i = 0; i < N; i++)
		t += c[i][i];
	return (unsigned)(long long)t;
}
