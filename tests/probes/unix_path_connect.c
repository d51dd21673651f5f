/* SPDX-License-Identifier: MIT */
/* Probe: connect to a pathname unix socket outside the workspace (argv[1]),
 * as a sandbox would reach a host daemon (docker.sock, a root-only 0600
 * socket). Landlock up to ABI 7 does not mediate the connect itself; what
 * stops it is the socket file's permission (EACCES) once the command runs
 * under an unprivileged uid. */
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2 || strlen(argv[1]) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return PROBE_SETUP;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		probe_setup("unix_path_connect", "socket");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, argv[1], strlen(argv[1]) + 1);
	int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	probe_verdict("unix_path_connect", r, errno, EACCES, "connected to a host socket");
}
