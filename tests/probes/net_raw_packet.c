/* SPDX-License-Identifier: MIT */
/* Probe: AF_NETLINK and AF_PACKET sockets (route table, raw frames) with
 * network off: seccomp EAFNOSUPPORT for every family but AF_UNIX. */
#include <linux/netlink.h>
#include <sys/socket.h>

#include "probe.h"

int main(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd >= 0)
		probe_escaped("net_raw_packet", "opened an AF_NETLINK socket");
	if (errno != EAFNOSUPPORT)
		probe_refused("net_raw_packet", errno, EAFNOSUPPORT);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	probe_verdict("net_raw_packet", fd, errno, EAFNOSUPPORT, "opened an AF_PACKET socket");
}
