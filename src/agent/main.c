/* SPDX-License-Identifier: MIT */
/* kis-agent: the in-sandbox supervisor's entry point. Usage:
 *   kis-agent --listen-fd N   accept engine connections on a listening socket
 *   kis-agent --channel-fd N  serve one connected channel */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--listen-fd"))
		return kis_agent_serve_listener(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "--channel-fd"))
		return kis_agent_serve_channel(atoi(argv[2]));
	fprintf(stderr, "usage: kis-agent --listen-fd N | --channel-fd N\n"
			"The agent is started by the kis engine inside a sandbox.\n");
	return 2;
}
