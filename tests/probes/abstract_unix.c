/* SPDX-License-Identifier: MIT */
/* Probe: connect to an abstract unix socket (argv[1], without the leading
 * NUL) listened on outside the sandbox. Landlock scope (ABI 6): EPERM. */
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_SETUP;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		probe_setup("abstract_unix", "socket");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = strlen(argv[1]);
	if (n + 1 > sizeof(a.sun_path))
		return PROBE_SETUP;
	memcpy(a.sun_path + 1, argv[1], n);
	int r = connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
	probe_verdict("abstract_unix", r, errno, EPERM, "connected to an abstract socket outside");
}
