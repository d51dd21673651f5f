/* SPDX-License-Identifier: MIT */
/* kis-agent: the in-sandbox supervisor's entry point. Usage:
 *   kis-agent --listen-fd N [--cwd DIR]   accept engine connections on a listening socket
 *   kis-agent --channel-fd N [--cwd DIR]  serve one connected channel
 *   kis-agent --guest-init    PID 1 of the microvm guest (also with no argument as PID 1)
 * --cwd: the sandbox's working directory for requests that name none (the
 * runtime starts the agent in /: a directory it entered for us could be one
 * it resolved through its own descriptors).
 * --require-seccomp (first): the runtime was to load the engine's seccomp
 * program before it started us (bwrap's --seccomp, crun's
 * run.oci.seccomp_bpf_data); unless a
 * filter is in force, nothing is served (a runtime that ignored it would
 * otherwise run the command weaker than its profile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/guest.h"


/* Only our channel passes into the sandbox's life: a descriptor the runtime
 * left open (bwrap keeps its --userns descriptor, for one) is closed before
 * any command can inherit or find it. */
static void close_others(int keep)
{
	if (keep > 3)
		close_range(3, (unsigned)keep - 1, 0);
	close_range((unsigned)keep + 1, ~0U, 0);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--guest-init"))
		return kis_agent_guest_init();
	if (argc == 1 && getpid() == 1)
		return kis_agent_guest_init(); /* /init of the microvm's initramfs */
	if (argc > 1 && !strcmp(argv[1], "--require-seccomp")) {
		/* prctl(2) PR_GET_SECCOMP: 2 under a filter (SECCOMP_MODE_FILTER) */
		if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2) {
			fprintf(stderr, "kis-agent: no seccomp filter is in force: the runtime did "
					"not load the engine's program; nothing is run\n");
			return 3;
		}
		argv++;
		argc--;
	}
	const char *cwd = NULL;
	if (argc == 5 && !strcmp(argv[3], "--cwd")) {
		cwd = argv[4];
		argc = 3;
	}
	if (argc == 3 && (!strcmp(argv[1], "--listen-fd") || !strcmp(argv[1], "--channel-fd"))) {
		int fd = atoi(argv[2]);
		if (fd < 3) {
			fprintf(stderr, "kis-agent: the channel must be descriptor 3 or above\n");
			return 2;
		}
		close_others(fd);
		kis_agent_set_cwd(cwd);
		return !strcmp(argv[1], "--listen-fd") ? kis_agent_serve_listener(fd) :
							 kis_agent_serve_channel(fd);
	}
	fprintf(stderr, "usage: kis-agent --listen-fd N | --channel-fd N [--cwd DIR]\n"
			"The agent is started by the kis engine inside a sandbox.\n");
	return 2;
}
