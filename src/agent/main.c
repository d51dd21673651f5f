/* SPDX-License-Identifier: MIT */
/* kis-agent: the in-sandbox supervisor's entry point. Usage:
 *   kis-agent --listen-fd N   accept engine connections on a listening socket
 *   kis-agent --channel-fd N  serve one connected channel
 *   kis-agent --guest-init    PID 1 of the microvm guest (also with no argument as PID 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/guest.h"

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--guest-init"))
		return kis_agent_guest_init();
	if (argc == 1 && getpid() == 1)
		return kis_agent_guest_init(); /* /init of the microvm's initramfs */
	if (argc == 3 && !strcmp(argv[1], "--listen-fd"))
		return kis_agent_serve_listener(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "--channel-fd"))
		return kis_agent_serve_channel(atoi(argv[2]));
	fprintf(stderr, "usage: kis-agent --listen-fd N | --channel-fd N\n"
			"The agent is started by the kis engine inside a sandbox.\n");
	return 2;
}
