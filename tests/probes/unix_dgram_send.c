/* SPDX-License-Identifier: MIT */
/* Probe: send a datagram to a pathname unix socket outside the workspace
 * (argv[1]), as a sandbox would reach a host daemon (/dev/log, a 0666
 * socket) without connect: sendmsg names the peer inside struct msghdr,
 * where seccomp cannot look. Tries a SOCK_DGRAM socket, else a datagram
 * socketpair (which may also send to any address). */
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2 || strlen(argv[1]) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return PROBE_SETUP;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int e_socket = errno;
	if (fd < 0) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
			probe_refused("unix_dgram_send", e_socket, EACCES);
		fd = sv[0];
	}
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, argv[1], strlen(argv[1]) + 1);
	char msg[] = "kis-probe";
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
	struct msghdr mh = {.msg_name = &a, .msg_namelen = sizeof(a), .msg_iov = &iov,
			    .msg_iovlen = 1};
	long r = sendmsg(fd, &mh, 0);
	probe_verdict("unix_dgram_send", r, errno, EACCES, "sent a datagram to a host socket");
}
