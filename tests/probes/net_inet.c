/* SPDX-License-Identifier: MIT */
/* Probe: an AF_INET stream socket with network off. seccomp: EAFNOSUPPORT. */
#include <sys/socket.h>

#include "probe.h"

int main(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	probe_verdict("net_inet", fd, errno, EAFNOSUPPORT, "opened an AF_INET socket");
}
