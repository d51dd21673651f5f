/* SPDX-License-Identifier: MIT */
/* A break-out probe for the microvm guest: it tries to take the guest's
 * own ends of the engine's channel (the virtio console ports /dev/vport*,
 * held by the agent's relays) with pidfd_getfd(2) and write malformed
 * frames (docs/protocol.md) into them. Run as the command it is stopped:
 * the command is not the guest's root (src/agent/confine.c), the relays'
 * /proc/N/fd are closed to it and the seccomp policy refuses pidfd_getfd;
 * it then exits 3 ("nothing taken"). The engine's side against such
 * frames is tested with the agent's kis-test:flood hook instead
 * (tests/integration/test_microvm.py). Usage: portflood huge|type|random */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void header(uint8_t h[12], uint32_t len, uint8_t type, uint8_t stream, uint32_t exec)
{
	memset(h, 0, 12);
	for (int i = 0; i < 4; i++) {
		h[i] = (uint8_t)(len >> (8 * i));
		h[8 + i] = (uint8_t)(exec >> (8 * i));
	}
	h[4] = type;
	h[5] = stream;
}

static void garbage(int fd, const char *kind)
{
	uint8_t buf[4096];
	size_t n = 12;
	if (!strcmp(kind, "huge")) {
		header(buf, 0x7fffffffu, 3, 1, 1); /* DATA far over the 1 MiB cap */
	} else if (!strcmp(kind, "type")) {
		header(buf, 0, 0x63, 0, 1); /* no such frame type */
	} else {
		int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		n = sizeof(buf);
		if (r < 0 || read(r, buf, n) != (ssize_t)n)
			memset(buf, 0xa5, n);
		if (r >= 0)
			close(r);
	}
	(void)!write(fd, buf, n);
}

int main(int argc, char **argv)
{
	const char *kind = argc > 1 ? argv[1] : "huge";
	DIR *proc = opendir("/proc");
	if (!proc) {
		perror("portflood: /proc");
		return 3;
	}
	int hit = 0;
	struct dirent *p;
	while ((p = readdir(proc))) {
		int pid = atoi(p->d_name);
		if (pid <= 1 || pid == getpid())
			continue;
		char dpath[64];
		snprintf(dpath, sizeof(dpath), "/proc/%d/fd", pid);
		DIR *fds = opendir(dpath);
		if (!fds)
			continue;
		struct dirent *f;
		while ((f = readdir(fds))) {
			char lpath[400], target[128];
			snprintf(lpath, sizeof(lpath), "%s/%s", dpath, f->d_name);
			ssize_t k = readlink(lpath, target, sizeof(target) - 1);
			if (k <= 0)
				continue;
			target[k] = '\0';
			/* the agent ports (nr 2..): the control port is nr 1 */
			const char *nr = strrchr(target, 'p');
			if (strncmp(target, "/dev/vport", 10) || !nr || !strcmp(nr, "p1"))
				continue;
			int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
			int fd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, atoi(f->d_name), 0);
			if (fd >= 0) {
				garbage(fd, kind);
				printf("portflood: %s into %s of pid %d\n", kind, target, pid);
				hit++;
				close(fd);
			} else {
				printf("portflood: cannot take %s of pid %d: %s\n", target, pid,
				       strerror(errno));
			}
			if (pfd >= 0)
				close(pfd);
		}
		closedir(fds);
	}
	closedir(proc);
	fflush(stdout);
	/* the engine should have ended this exec by now; if not, linger */
	sleep(5);
	return hit ? 0 : 3;
}
