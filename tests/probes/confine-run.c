/* SPDX-License-Identifier: MIT */
/* confine-run: run one command under the host tier's confinement (harden,
 * Landlock, seccomp) the way a backend will, for probes and manual checks. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine/confine.h"

/* Theory: everything that can allocate or fail for a reason worth a message
 * is done before fork (seccomp program compiled into a memfd, Landlock
 * ruleset built); the child only runs system calls: harden, restrict, load,
 * exec. The exit status is the command's, or 128+N for signal N, or 125 when
 * confinement itself failed (as the CLI does).
 *
 * usage: confine-run [-w WORKSPACE] [-r RO_PATH]... [-n off|host] [-p]
 *                    [-k FD]... [-u UID:GID] [-x none|all] -- CMD [ARG...]
 *   -p  read-only /proc      -u  run as this unprivileged user
 *   -x none  no confinement (controls only)                               */

static void usage(void)
{
	fprintf(stderr, "usage: confine-run [-w DIR] [-r PATH]... [-n off|host] [-p] [-k FD]... "
			"[-u UID:GID] [-x none|all] -- CMD [ARG...]\n");
	exit(125);
}

static void die_err(const char *what, struct kis_error *e)
{
	char *s = kis_error_format(e);
	fprintf(stderr, "confine-run: %s: %s\n", what, s ? s : "out of memory");
	free(s);
	kis_error_free(e);
	exit(125);
}

int main(int argc, char **argv)
{
	const char *ro[32] = {0};
	size_t n_ro = 0;
	int keep[16];
	size_t n_keep = 0;
	struct kis_landlock_opts ll = {.net = KIS_NET_OFF};
	struct kis_seccomp_opts sc = {.net = KIS_NET_OFF};
	bool confine = true;
	struct kis_harden_opts ho = {0};
	int c;
	while ((c = getopt(argc, argv, "+w:r:n:pk:x:u:")) != -1) {
		switch (c) {
		case 'u': {
			unsigned u, g;
			if (sscanf(optarg, "%u:%u", &u, &g) != 2)
				usage();
			ho.set_user = true;
			ho.uid = u;
			ho.gid = g;
			break;
		}
		case 'w': ll.workspace = optarg; break;
		case 'r':
			if (n_ro + 1 >= ARRAY_SIZE(ro))
				usage();
			ro[n_ro++] = optarg;
			break;
		case 'n':
			if (strcmp(optarg, "off") == 0)
				ll.net = sc.net = KIS_NET_OFF;
			else if (strcmp(optarg, "host") == 0)
				ll.net = sc.net = KIS_NET_HOST;
			else
				usage();
			break;
		case 'p': ll.allow_proc = true; break;
		case 'k':
			if (n_keep >= ARRAY_SIZE(keep))
				usage();
			keep[n_keep++] = atoi(optarg);
			break;
		case 'x': confine = strcmp(optarg, "none") != 0; break;
		default: usage();
		}
	}
	if (optind >= argc)
		usage();
	ll.extra_ro = ro;

	struct kis_error *e = NULL;
	struct kis_confine_plan plan;
	kis_confine_plan_init(&plan);
	struct kis_limits lim = {0};
	ho.limits = &lim;
	ho.keep_fds = keep;
	ho.n_keep = n_keep;
	plan.harden = ho;
	if (confine && kis_confine_plan_prepare(&plan, &sc, &ll, &e) < 0)
		die_err("prepare", e);
	pid_t pid = fork();
	if (pid < 0) {
		perror("confine-run: fork");
		return 125;
	}
	if (pid == 0) {
		if (confine && kis_confine_child(&plan, &e) < 0)
			die_err("confine", e);
		execv(argv[optind], argv + optind);
		fprintf(stderr, "confine-run: cannot execute '%s': %s\n", argv[optind],
			strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	kis_confine_plan_release(&plan);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 125;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}
