/* SPDX-License-Identifier: MIT */
/* Probe: an AF_INET6 socket with network off. seccomp: EAFNOSUPPORT. */
#include <sys/socket.h>

#include "probe.h"

int main(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	probe_verdict("net_inet6", fd, errno, EAFNOSUPPORT, "opened an AF_INET6 socket");
}
