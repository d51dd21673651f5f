/* SPDX-License-Identifier: MIT */
/* A WASI module for tests/integration/test_mounts.py: each argument is an
 * action on a path inside the sandbox, "cat:PATH" (print the file) or
 * "write:PATH" (create it holding "w\n"), "mkdir:PATH", "rm:PATH"; each
 * prints "ACTION PATH ok" or "ACTION PATH errno N". Built with
 * clang --target=wasm32-wasi. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char *colon = strchr(argv[i], ':');
		if (!colon)
			return 2;
		*colon = '\0';
		const char *act = argv[i], *path = colon + 1;
		int r = -1;
		if (!strcmp(act, "cat")) {
			int fd = open(path, O_RDONLY);
			char buf[256];
			ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
			if (n >= 0) {
				fwrite(buf, 1, (size_t)n, stdout);
				r = 0;
			}
			if (fd >= 0)
				close(fd);
		} else if (!strcmp(act, "write")) {
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			r = fd < 0 ? -1 : (write(fd, "w\n", 2) == 2 ? 0 : -1);
			if (fd >= 0)
				close(fd);
		} else if (!strcmp(act, "mkdir")) {
			r = mkdir(path, 0755);
		} else if (!strcmp(act, "rm")) {
			r = unlink(path);
		}
		if (r == 0)
			printf("%s %s ok\n", act, path);
		else
			printf("%s %s errno %d\n", act, path, errno);
	}
	return 0;
}
