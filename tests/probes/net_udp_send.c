/* SPDX-License-Identifier: MIT */
/* Probe: a UDP datagram to 127.0.0.1:9 (discard) with network off. Landlock
 * has no UDP rule: only the seccomp family rule stops it (EAFNOSUPPORT). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		probe_refused("net_udp_send", errno, EAFNOSUPPORT);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	long r = sendto(fd, "x", 1, 0, (struct sockaddr *)&a, sizeof(a));
	probe_verdict("net_udp_send", r, errno, EAFNOSUPPORT, "sent a UDP datagram");
}
