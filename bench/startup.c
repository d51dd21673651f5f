/* SPDX-License-Identifier: MIT */
/* Start-to-exit benchmark: runs each command N times (fork, exec, wait),
 * interleaved, and prints the median and 90th percentile beside the first
 * (the reference). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Split "label=word word ..." into a label and an argv (no shell). */
static char **split(char *spec, char **label)
{
	char *eq = strchr(spec, '=');
	if (!eq)
		return NULL;
	*eq = '\0';
	*label = spec;
	char **argv = calloc(256, sizeof(*argv));
	int n = 0;
	for (char *t = strtok(eq + 1, " "); t && n < 255; t = strtok(NULL, " "))
		argv[n++] = t;
	return argv;
}

static double run_once(char **argv)
{
	double t0 = now_us();
	pid_t p = fork();
	if (p == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "bench: '%s' failed (status %d)\n", argv[0], st);
		exit(1);
	}
	return now_us() - t0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s N 'label=cmd args' ...  (the first is the reference)\n",
			argv[0]);
		return 2;
	}
	int n = atoi(argv[1]);
	int k = argc - 2;
	char ***cmds = calloc((size_t)k, sizeof(*cmds));
	const char **labels = calloc((size_t)k, sizeof(*labels));
	double **t = calloc((size_t)k, sizeof(*t));
	if (!cmds || !labels || !t)
		return 2;
	for (int c = 0; c < k; c++) {
		char *label;
		cmds[c] = split(argv[c + 2], &label);
		if (!cmds[c]) {
			fprintf(stderr, "bench: '%s' is not label=command\n", argv[c + 2]);
			return 2;
		}
		labels[c] = label;
		t[c] = calloc((size_t)n, sizeof(double));
		run_once(cmds[c]); /* warm the page cache */
	}
	/* interleaved: round i runs every command once, so a change of load on
	 * this shared machine falls on all of them alike */
	for (int i = 0; i < n; i++)
		for (int c = 0; c < k; c++)
			t[c][i] = run_once(cmds[c]);
	double ref_med = 0;
	printf("%-28s %10s %10s %8s %8s\n", "command", "median_ms", "p90_ms", "ratio", "added_ms");
	for (int c = 0; c < k; c++) {
		qsort(t[c], (size_t)n, sizeof(double), cmp);
		double med = t[c][n / 2] / 1000, p90 = t[c][n * 9 / 10] / 1000;
		if (c == 0)
			ref_med = med;
		printf("%-28s %10.3f %10.3f %7.2fx %8.3f\n", labels[c], med, p90, med / ref_med,
		       med - ref_med);
		free(t[c]);
		free(cmds[c]);
	}
	free(cmds);
	free(labels);
	free(t);
	return 0;
}
